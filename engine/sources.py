"""The two sources of a cube's data for the queries: an HDF5 file read chunk by chunk
(``FileSource``, with the chunk scanner ``ChunkReader``) and an xarray Dataset
(``DatasetSource``).  Both give the same things: the file attributes, a variable read whole or
by an index, and ``scan``: each selected job's variables over the selected coordinates, handed
to a function of the caller (the array core of ``paigrid.ranking`` picks the candidates there),
so the queries answer from either source by the same code.

A scan of a file reads only the chunks that hold a selected configuration (the chunk shape is
the file's own), reads their stored bytes in the calling thread and decompresses them (with
their checksums checked by ``codecs.fletcher32_numpy``, loading no numba) and selects in a pool
of threads, so a scan costs little more than decompressing the chunks it needs.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol

import numpy as np

from paigrid.errors import PaigridError
from paigrid.schema import LABEL_DIMS, str_attr


@functools.cache
def _threads_safe() -> bool:
    """Whether the scan may run its threads: not on h5py before 3.12, where reads of one file from
    several threads crashed the declared minimum (3.10) with a segmentation fault, even with the
    reads taken in turn under a lock of our own."""
    import h5py

    return tuple(int(p) for p in h5py.__version__.split(".")[:2]) >= (3, 12)


def _workers() -> int:
    """How many threads a scan decodes and selects in beside the calling thread: none on h5py
    before 3.12 (``_threads_safe``) nor with fewer than three cores, every core otherwise.  The
    calling thread reads the stored bytes, and the selection (the precompiled kernel) holds the
    GIL, so only the decompression runs beside them: on the 2-core box a pool of two was slower
    than the calling thread alone (the bench's cube, 6 runs each alternated: --where 0.66 s
    against 0.60 s, --top 3 0.94 s against 0.86 s, in process)."""
    import os

    if not _threads_safe():
        return 0
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return cores if cores >= 3 else 0


#: what ``scan`` hands to its function for each job: (the variables over the selected
#: coordinates, the job's row, its position in ``job_rows``, each coordinate's place in them)
Select = Callable[[list[np.ndarray], int, int, dict[str, np.ndarray]], Any]


class CubeSource(Protocol):
    """What the readers use of a cube's data (``FileSource`` or ``DatasetSource``)."""

    @property
    def attrs(self) -> Mapping[str, Any]: ...

    def __contains__(self, name: str) -> bool: ...

    def read(self, name: str, key: Any = ()) -> np.ndarray: ...

    def size(self, name: str) -> int: ...

    def scan(
        self,
        names: tuple[str, ...],
        sel: dict[str, np.ndarray],
        job_rows: np.ndarray,
        select: Select,
        lazy: tuple[str, ...] = (),
    ) -> Iterator[Any]: ...

    def close(self) -> None: ...


def positions(
    sel: dict[str, np.ndarray], shape: tuple[int, ...], dims: tuple[str, ...] = LABEL_DIMS
) -> dict[str, np.ndarray]:
    """Each coordinate's place in the selection along each dimension ``dims`` (the first place
    of a coordinate selected twice; -1 where not selected); ``shape`` is the (job, *dims) shape."""
    out = {}
    for dim, n in zip(dims, shape[1:]):
        wanted = np.asarray(sel.get(dim, np.arange(n)), dtype=np.intp)
        out[dim] = np.full(n, -1, np.intp)
        out[dim][wanted[::-1]] = np.arange(len(wanted))[::-1]
    return out


class FileSource:
    """A cube file opened with h5py (read-only): its variables, and ``scan`` through the chunk
    scanner ``ChunkReader``."""

    def __init__(self, file):
        self.file = file

    @property
    def attrs(self) -> Mapping[str, Any]:
        """The file's attributes."""
        return self.file.attrs

    def __contains__(self, name: str) -> bool:
        return name in self.file

    def read(self, name: str, key: Any = ()) -> np.ndarray:
        """The variable ``name`` (the part ``key`` selects, h5py's indexing) as a numpy array."""
        return np.asarray(self.file[name][key])

    def size(self, name: str) -> int:
        """The length of the variable ``name`` along its first dimension."""
        return len(self.file[name])

    def close(self) -> None:
        """Close the file."""
        self.file.close()

    def scan(
        self,
        names: tuple[str, ...],
        sel: dict[str, np.ndarray],
        job_rows: np.ndarray,
        select: Select,
        lazy: tuple[str, ...] = (),
    ) -> Iterator[Any]:
        """``select(arrays, j, pos, position)`` of each job of ``job_rows``, in that order:
        ``arrays`` the variables ``names`` of job ``j`` over the selected coordinates ``sel``
        (``ChunkReader.decode``), ``position`` each coordinate's place in them; those of ``lazy``
        are ``Cells``, read only where ``select`` indexes them (a bottleneck code of the few rows
        chosen: a chunk or two, where the rest are read whole).  Runs of the jobs that share
        chunks are read together, their stored bytes by this thread and decoded and selected by
        a pool of threads, two runs a thread ahead (``_workers``: all in this thread on h5py
        before 3.12 and with fewer than three cores).  A run's arrays are filled again by a later
        run once its results have been consumed (the next result asked for): ``select`` copies
        what it keeps longer."""
        from collections import deque
        from concurrent.futures import ThreadPoolExecutor

        eager = tuple(name for name in names if name not in lazy)
        reader = ChunkReader(self, eager, sel)
        cells = ChunkReader(self, tuple(lazy), sel) if lazy else None

        spare: list = []  # the arrays of runs consumed already, filled again by later runs

        def work(start, members, stored, out):
            decoded = reader.decode(start, stored, out)
            arrays = dict(zip(eager, decoded))
            results = []
            for pos, j in members:
                job = [arrays[n][j - start] if n in arrays else Cells(cells, lazy.index(n), j) for n in names]
                results.append(select(job, j, pos, reader.position))
            return results, reader.spare(decoded)

        def consumed(done):  # a run's results, handed on; then its arrays are free again
            results, arrays = done
            yield from results
            if arrays is not None:
                spare.append(arrays)

        tasks: list[tuple[int, list]] = []  # runs of consecutive jobs in one chunk
        for pos, j in enumerate(int(j) for j in job_rows):
            start = j - j % reader.rows
            if tasks and tasks[-1][0] == start:
                tasks[-1][1].append((pos, j))
            else:
                tasks.append((start, [(pos, j)]))
        threads = min(_workers(), len(tasks))
        if not threads:  # every h5py call and every decode in this thread, one run at a time
            for start, members in tasks:
                yield from consumed(work(start, members, reader.raw(start), spare.pop() if spare else None))
            return
        with ThreadPoolExecutor(threads) as pool:
            pending: deque = deque()
            queued = iter(tasks)
            for start, members in queued:
                pending.append(pool.submit(work, start, members, reader.raw(start), None))
                if len(pending) >= 2 * threads:
                    break
            while pending:
                done = pending.popleft().result()
                for start, members in queued:
                    out = spare.pop() if spare else None
                    pending.append(pool.submit(work, start, members, reader.raw(start), out))
                    break
                yield from consumed(done)


class Cells:
    """One variable of one job over the selected coordinates of a ``ChunkReader``, read only
    where it is indexed: ``cells[a, g, n, ...]`` with equal-length index arrays (positions in
    the selection, as ``ChunkReader.decode``'s arrays take them) decodes just the chunks that
    hold those cells (the cube's chunks hold every network and a few GPUs: a bottleneck code of
    three rows reads one to three chunks of a job's nine)."""

    def __init__(self, reader: ChunkReader, variable: int, job: int):
        self.reader, self.variable, self.job = reader, variable, job

    def __getitem__(self, key) -> np.ndarray:
        # cell by cell in Python: a scan asks for a few cells of a job (its result rows), where the
        # numpy of a vectorised lookup (broadcasts, corner arrays, a mask per chunk) cost about
        # 0.25 ms a job, more than decoding the chunks (the bench's cube, --top 3: 0.13 s a scan)
        reader = self.reader
        local = np.broadcast_arrays(*(np.asarray(k, dtype=np.intp) for k in key))
        coords = [reader.coords[dim][idx.reshape(-1)].tolist() for dim, idx in zip(reader.coords, local)]
        sizes = reader.chunks[1:]
        out = np.empty(local[0].size, reader.datasets[self.variable].dtype)
        decoded: dict[tuple[int, ...], np.ndarray] = {}  # each chunk decoded once
        for r, cell in enumerate(zip(*coords)):
            corner = tuple(c // size * size for c, size in zip(cell, sizes))
            data = decoded.get(corner)
            if data is None:
                data = decoded[corner] = self.reader.chunk(self.variable, self.job, corner)
            out[r] = data[tuple(c - c0 for c, c0 in zip(cell, corner))]
        return out.reshape(local[0].shape)


class DatasetSource:
    """A cube as an xarray Dataset (lazy or in memory; ``paigrid.open_dataset``,
    ``xarray.open_dataset`` or ``paigrid.sweep``): its variables, read by xarray for the indexed
    part only, and ``scan`` one job at a time (a lazy Dataset reads the selected coordinates of
    that job; a dask-backed one computes them)."""

    def __init__(self, ds):
        self.ds = ds

    @property
    def attrs(self) -> Mapping[str, Any]:
        """The Dataset's attributes."""
        return self.ds.attrs

    def __contains__(self, name: str) -> bool:
        return name in self.ds.variables

    def read(self, name: str, key: Any = ()) -> np.ndarray:
        """The variable ``name`` (the part ``key`` selects: integers, slices and index arrays,
        each along its own dimension, as h5py's indexing) as a numpy array."""
        variable = self.ds.variables[name]
        return np.asarray((variable[key] if key != () else variable).values)

    def size(self, name: str) -> int:
        """The length of the variable ``name`` along its first dimension."""
        return len(self.ds.variables[name])

    def close(self) -> None:
        """Nothing to close: the Dataset belongs to the caller."""

    def scan(
        self,
        names: tuple[str, ...],
        sel: dict[str, np.ndarray],
        job_rows: np.ndarray,
        select: Select,
        lazy: tuple[str, ...] = (),
    ) -> Iterator[Any]:
        """``select(arrays, j, pos, position)`` of each job of ``job_rows``, in that order (as
        ``FileSource.scan``), reading each job's selected coordinates through xarray (``lazy``
        ones too: a Dataset's reads are already its own)."""
        shape = self.ds.variables[names[0]].shape
        wanted = tuple(np.asarray(sel.get(dim, np.arange(n)), dtype=np.intp) for dim, n in zip(LABEL_DIMS, shape[1:]))
        position = positions(sel, shape)
        for pos, j in enumerate(int(j) for j in job_rows):
            arrays = [np.asarray(self.ds.variables[name][(j, *wanted)].values) for name in names]
            yield select(arrays, j, pos, position)


class ChunkReader:
    """Chunks of cube variables over job ranges, restricted to the chunks that a selection of
    the other dimensions touches (the chunk shape is the dataset's own, whatever it is: any
    dimension may be split).  ``decode`` gives an array over a row of jobs (one chunk's jobs)
    and the selected coordinates, in the selection's order (``coords[dim]``; ``local[dim]``:
    their positions in the array, ``position[dim]``: each coordinate's, -1 where not selected).
    The stored bytes of a row's chunks are read by h5py in the calling thread (``raw``) and
    decompressed and checked by ``decode`` in any thread, without the GIL, each chunk into a
    buffer of the thread's and the selected cells copied out.  ``chunk`` decodes one chunk of one
    job (``Cells``: the few cells a scan reads of a variable it does not rank by).

    A variable chunked otherwise than the first, unknown filters, or a chunk that fails to decode
    are read through h5py instead, the same chunks (in one call when the selected coordinates
    run in steps of one: their box holds exactly those chunks; else chunk by chunk, ``pieces``),
    so a damaged chunk fails as HDF5 reports it; so is every chunk without ``parallel``.
    ``owner`` is anything with the h5py ``file`` (a ``FileSource``, or a ``paigrid.cube.Cube`` of
    a file)."""

    FILTERS = {
        "lz4": {"32001", "fletcher32"},
        "zstd": {"32001", "fletcher32"},
        "gzip": {"gzip", "shuffle", "fletcher32"},
        "none": {"fletcher32"},
    }

    def __init__(
        self,
        owner,
        names,
        sel: dict[str, np.ndarray] | None = None,
        parallel: bool = True,
        dims: tuple[str, ...] = LABEL_DIMS,
    ):
        import itertools

        from paigrid.codecs import chunk_decoder

        file = owner.file
        self.datasets = [file[name] for name in names]
        first = self.datasets[0]
        shape = tuple(first.shape)  # (job, *dims)
        stored = getattr(first, "chunks", None)
        self.chunks = tuple(stored) if stored else (1, *shape[1:])  # no stored chunks: read per job
        self.rows = self.chunks[0]
        self.jobs = shape[0]
        sel = sel or {}
        self.coords, self.local, runs = {}, {}, []
        self.position = positions(sel, shape, dims)
        for dim, n, c in zip(dims, shape[1:], self.chunks[1:]):
            wanted = np.asarray(sel.get(dim, np.arange(n)), dtype=np.intp)
            self.coords[dim], self.local[dim] = wanted, np.arange(len(wanted))
            runs.append(
                [
                    (s0, *_cut(np.flatnonzero((wanted >= s0) & (wanted < s0 + c)), wanted, s0))
                    for s0 in sorted({int(k) // c * c for k in wanted})
                ]
            )
        self.shape = tuple(len(self.coords[dim]) for dim in dims)
        # each chunk to read: its corner (after the job), where its cells go and which they are
        self.pieces = [
            (tuple(r[0] for r in combo), tuple(r[1] for r in combo), tuple(r[2] for r in combo))
            for combo in itertools.product(*runs)
        ]
        # the selection as one box, when each dimension's coordinates run in steps of one (the box
        # then holds exactly the chunks that hold them)
        stepwise = all(len(v) and np.all(np.diff(v) == 1) for v in self.coords.values())
        self.box = tuple(slice(int(v[0]), int(v[-1]) + 1) for v in self.coords.values()) if stepwise else None
        self.whole = (
            len(self.pieces) == 1
            and self.shape == tuple(self.chunks[1:])
            and all(isinstance(part, slice) and part.start == 0 for part in self.pieces[0][2])
        )
        compression = str_attr(file.attrs, "compression") if "compression" in file.attrs else ""
        chunks = [getattr(d, "chunks", None) for d in self.datasets]
        self.decoders = None
        self._buffers = threading.local()  # each thread's chunk buffer per variable (``_decode_row``)
        try:
            if parallel and all(
                c is not None
                and tuple(c) == self.chunks
                and set(d._filters) == self.FILTERS.get(compression)
                and hasattr(d, "id")
                for c, d in zip(chunks, self.datasets)
            ):
                self.decoders = [chunk_decoder(compression, d.dtype, c) for c, d in zip(chunks, self.datasets)]
        except (AttributeError, TypeError, ValueError, PaigridError):
            self.decoders = None
        # the decoders decode every row, each chunk into a buffer of the thread's and its selected
        # cells copied out (measured on the bench's cube, --top 3: 0.3 s of CPU less than h5py
        # reading a row of several chunks in one call, which holds the GIL and allocates a chunk
        # buffer per chunk), and single chunks (``chunk``)
        self.rows_decoded = self.decoders is not None

    def chunk(self, variable: int, job: int, corner: tuple[int, ...]) -> np.ndarray:
        """Job ``job``'s part of the chunk of variable ``variable`` (its place in ``names``) whose
        first coordinate after the job is ``corner``, over the chunk's other dimensions (cut at
        the dataset's edges when h5py reads it): decoded from its stored bytes, or read through
        h5py where those cannot be (as ``decode``)."""
        start = job - job % self.rows
        d = self.datasets[variable]
        if self.decoders is not None:
            try:
                mask, data = d.id.read_direct_chunk((start, *corner))
                if not mask:
                    return self.decoders[variable](data)[job - start]
            except (OSError, RuntimeError, ValueError, KeyError):
                pass  # h5py reads it below, and fails as HDF5 does if it is damaged
        region = tuple(slice(c0, c0 + c) for c0, c in zip(corner, self.chunks[1:]))
        return np.asarray(d[(job, *region)])

    def raw(self, start: int):
        """The stored bytes of each variable's chunks from job ``start`` (a list per variable, in
        ``pieces`` order; None: read through h5py)."""
        if not self.rows_decoded:
            return None
        stored = []
        for d in self.datasets:
            pieces = []
            for corner, _, _ in self.pieces:
                try:
                    mask, data = d.id.read_direct_chunk((start, *corner))
                except (OSError, RuntimeError, ValueError, KeyError):
                    return None
                if mask:
                    return None
                pieces.append(data)
            stored.append(pieces)
        return stored

    def decode(self, start: int, stored, out: list[np.ndarray] | None = None) -> list[np.ndarray]:
        """Each variable over the jobs ``start`` to ``start + rows`` (fewer at the end) and the
        selected coordinates; ``out``: arrays of a row consumed already (``spare``), filled
        instead of new ones where their shape fits (a fresh array of a few MB costs more in page
        faults than decompressing its chunks)."""
        stop = min(start + self.rows, self.jobs)
        shape = (stop - start, *self.shape)
        given: list[np.ndarray | None] = [None] * len(self.datasets)
        if out:
            given = [o if o.shape == shape and o.dtype == d.dtype else None for o, d in zip(out, self.datasets)]
        if stored is not None and self.rows_decoded:
            try:
                return [
                    self._decode_row(v, pieces if isinstance(pieces, list) else [pieces], shape, o)
                    for v, (pieces, o) in enumerate(zip(stored, given))
                ]
            except (OSError, RuntimeError, ValueError):
                pass  # h5py reads it again below, and fails as HDF5 does if it is damaged
        if self.box is not None:  # runs of coordinates: one read, of exactly the chunks needed
            arrays = []
            for d, o in zip(self.datasets, given):
                o = np.empty(shape, d.dtype) if o is None else o
                d.read_direct(o, (slice(start, stop), *self.box))
                arrays.append(o)
            return arrays
        regions = [
            (slice(start, stop), *(slice(c0, c0 + c) for c0, c in zip(corner, self.chunks[1:])))
            for corner, _, _ in self.pieces
        ]
        return [
            self._assemble(stop - start, [np.asarray(d[region]) for region in regions], o)
            for d, o in zip(self.datasets, given)
        ]

    @staticmethod
    def spare(arrays: list[np.ndarray]) -> list[np.ndarray] | None:
        """``arrays`` of ``decode`` as the ``out`` of a later row, once the row is consumed: None
        where one of them is not an array of its own that can be written."""
        ok = all(a.base is None and a.flags.writeable and a.flags.c_contiguous for a in arrays)
        return arrays if ok else None

    def _decode_row(self, variable: int, pieces: list, shape: tuple, out: np.ndarray | None) -> np.ndarray:
        """Variable ``variable`` over the jobs and selected coordinates of ``shape`` from the
        stored bytes of its chunks (``raw``), each chunk decoded into this thread's buffer for
        that variable and its selected cells copied to ``out`` (a new array when None):
        ``chunk_decoder``."""
        decode = (self.decoders or [])[variable]
        if len(pieces) != len(self.pieces):
            raise ValueError("a chunk is missing")
        n = shape[0]
        if self.whole:
            return decode(pieces[0])[:n]
        buffers = getattr(self._buffers, "arrays", None)
        if buffers is None:
            buffers = self._buffers.arrays = [np.empty(self.chunks, d.dtype) for d in self.datasets]
        out = np.empty(shape, self.datasets[variable].dtype) if out is None else out
        for (_, place, cells), data in zip(self.pieces, pieces):
            self._place(out, place, cells, decode(data, buffers[variable]), n)
        return out

    def _assemble(self, n: int, parts: list[np.ndarray], out: np.ndarray | None = None) -> np.ndarray:
        """The array of ``n`` jobs over the selected coordinates from its chunks, in ``pieces``
        order (chunks read through h5py end at the dataset's edges), in ``out`` if given."""
        if len(parts) != len(self.pieces):
            raise ValueError("a chunk is missing")
        if self.whole:
            return parts[0][:n]
        out = np.empty((n, *self.shape), parts[0].dtype) if out is None else out
        for (_, place, cells), data in zip(self.pieces, parts):
            self._place(out, place, cells, data, n)
        return out

    @staticmethod
    def _place(out: np.ndarray, place: tuple, cells: tuple, data: np.ndarray, n: int) -> None:
        """Copy the cells ``cells`` of the first ``n`` jobs of a chunk ``data`` to ``place`` in
        ``out`` (slices, or index arrays, per dimension after the job)."""
        if all(isinstance(k, slice) for k in (*place, *cells)):
            out[(slice(None), *place)] = data[(slice(0, n), *cells)]
        else:
            rows = np.arange(n)
            out[np.ix_(rows, *map(_indices, place))] = data[np.ix_(rows, *map(_indices, cells))]


def _cut(members: np.ndarray, wanted: np.ndarray, s0: int) -> tuple:
    """Where the selected coordinates ``wanted[members]`` (those in the chunk from ``s0``) go in
    the selection's order, and which cells of the chunk they are: slices when both run in steps
    of one, else index arrays."""
    place, cells = members, wanted[members] - s0
    if len(place) and np.all(np.diff(place) == 1) and np.all(np.diff(cells) == 1):
        return slice(int(place[0]), int(place[-1]) + 1), slice(int(cells[0]), int(cells[-1]) + 1)
    return place, cells


def _indices(part) -> np.ndarray:
    """A slice or an index array as an index array."""
    return np.arange(part.start, part.stop) if isinstance(part, slice) else np.asarray(part)
