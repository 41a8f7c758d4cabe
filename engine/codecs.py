"""Chunk compression of the cube: the HDF5 filter of each compression name, and an encoder that
produces the bytes that filter would store, so chunks can be compressed outside HDF5 (in
parallel threads or on Dask workers) and written with ``write_direct_chunk``."""

from __future__ import annotations

import numpy as np

from paigrid.errors import PaigridError

COMPRESSIONS = ("lz4", "zstd", "gzip", "none")
BLOSC_LEVEL = {"lz4": 5, "zstd": 3}   # blosc compression level per codec (with byte shuffle)
GZIP_LEVEL = 4


def _unknown(compression: str) -> PaigridError:
    return PaigridError(f"unknown compression {compression!r}; choose one of {', '.join(COMPRESSIONS)}.")


def filter_kwargs(compression: str) -> dict:
    """h5py dataset keywords for a compression name (blosc filters come from hdf5plugin)."""
    if compression in BLOSC_LEVEL:
        import hdf5plugin

        return dict(hdf5plugin.Blosc(cname=compression, clevel=BLOSC_LEVEL[compression],
                                     shuffle=hdf5plugin.Blosc.SHUFFLE))
    if compression == "gzip":
        return dict(compression="gzip", compression_opts=GZIP_LEVEL, shuffle=True)
    if compression == "none":
        return {}
    raise _unknown(compression)


def chunk_encoder(compression: str):
    """A function turning one chunk (a C-contiguous array) into the bytes that the dataset's
    filter pipeline (``filter_kwargs``) would store, for ``write_direct_chunk``.

    Compressing here, outside HDF5, lets the chunks of a block be compressed in parallel threads
    (or on Dask workers) without holding the GIL, while the writer only copies bytes to disk.
    """
    if compression in BLOSC_LEVEL:
        from numcodecs import Blosc

        return Blosc(cname=compression, clevel=BLOSC_LEVEL[compression], shuffle=Blosc.SHUFFLE).encode
    if compression == "gzip":
        import zlib

        def gzip_with_shuffle(array):  # HDF5's pipeline: the shuffle filter, then deflate
            raw = np.ascontiguousarray(array).view(np.uint8).reshape(-1, array.dtype.itemsize)
            return zlib.compress(np.ascontiguousarray(raw.T).tobytes(), GZIP_LEVEL)

        return gzip_with_shuffle
    if compression == "none":
        return lambda array: np.ascontiguousarray(array).tobytes()
    raise _unknown(compression)
