"""The reader of cubes: open a finished cube, its labels, and the checks that it is a paigrid
cube, complete, and made with the expected calibration.  Its data come from one of two sources
(``paigrid.sources``): the file through h5py (``open_cube``, read-only, scanned chunk by
chunk) or an xarray Dataset (``cube_from_dataset``), so the queries answer from either alike.

Readers import this module and ``paigrid.schema``, never the writer (``paigrid.store``) or the
driver (``paigrid.evaluate``): opening a cube loads neither numba nor the sweep machinery.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from paigrid.errors import PaigridError
from paigrid.files import file_sha256
from paigrid.schema import (
    FORMAT_VERSION,
    LABEL_DIMS,
    LLM_DIMS,
    cube_families,
    decode_strings,
    format_version,
    int_attr,
    partial_path,
    str_attr,
)
from paigrid.sources import CubeSource, DatasetSource, FileSource


class CubeFile(Protocol):
    """What the readers use of an open cube file: an ``h5py.File`` opened read-only (``name in
    f``, ``f[name][key]``, ``len(f[name])``, ``f.attrs``, ``f.close()``)."""

    @property
    def attrs(self) -> Mapping[str, Any]: ...

    def __contains__(self, name: str) -> bool: ...

    def __getitem__(self, name: str) -> Any: ...

    def close(self) -> None: ...


@dataclass
class Cube:
    """An open cube: the source of its data (``sources.FileSource``: an h5py file, read-only;
    ``sources.DatasetSource``: an xarray Dataset) and its labels."""

    path: Path
    source: CubeSource
    labels: dict[str, list]
    complete: bool
    mode: str
    format: int  # the cube format version (``paigrid.schema.FORMAT_VERSION`` when written now)

    @property
    def file(self) -> CubeFile:
        """The h5py file of a cube read from a file (a cube seen from a Dataset has none: its
        data are read through ``source``)."""
        file = getattr(self.source, "file", None)
        if file is None:
            raise PaigridError(f"{self.path} is an xarray Dataset here, not an open file; read it through its source.")
        return file

    def close(self) -> None:
        """Close the file (nothing for a Dataset, which belongs to the caller)."""
        self.source.close()


def open_cube(path: str | Path, allow_incomplete: bool = False) -> Cube:
    """Open a cube for reading; an unfinished sweep is an error unless ``allow_incomplete``."""
    import h5py
    import hdf5plugin  # noqa: F401  (registers the blosc filters the cube may use)

    path = Path(path)
    if not path.exists():
        if partial_path(path).exists() and allow_incomplete:
            path = partial_path(path)
        elif partial_path(path).exists():
            raise PaigridError(
                f"the sweep writing {path} is unfinished ({partial_path(path)} exists); "
                "finish it with paigrid sweep --resume before querying it."
            )
        else:
            raise PaigridError(f"there is no cube at {path}.")
    from paigrid.files import input_problem

    problem = input_problem(path)  # a FIFO or a device would never end: refused before HDF5 waits on it
    if problem:
        raise PaigridError(f"{path} is not a readable HDF5 cube: {problem}.")
    try:
        f = h5py.File(path, "r")
    except OSError:
        raise PaigridError(f"{path} is not a readable HDF5 cube.") from None
    try:
        return _checked(path, FileSource(f), allow_incomplete)
    except PaigridError:
        f.close()
        raise
    except (KeyError, OSError, RuntimeError) as exc:  # h5py's errors for damaged metadata (a header, a B-tree)
        f.close()
        reason = " ".join(str(exc).strip("'\"").split("(")[-1].rstrip(")").split())
        raise PaigridError(f"{path} is damaged: its metadata cannot be read ({reason or 'unreadable'}).") from None


def cube_from_dataset(ds, allow_incomplete: bool = False) -> Cube:
    """An xarray Dataset of a cube (from ``paigrid.open_dataset``, ``xarray.open_dataset`` or
    ``paigrid.sweep``, lazy or in memory) seen as a ``Cube``, so that the queries of
    ``paigrid.query`` answer from it by the same code as from a file.  It is checked as
    ``open_cube`` checks a file: a paigrid cube, not newer than this reader, complete."""
    source = ds.encoding.get("source")
    missing = [dim for dim in ("job", *LABEL_DIMS) if dim not in ds.dims]
    if "block_done" in ds.variables and missing:
        raise PaigridError(
            f"the dataset has no {missing[0]} dimension (one {missing[0]} was selected); keep it "
            f"by selecting with a list, or pass the value as a filter instead."
        )
    return _checked(
        Path(source) if source else Path("the dataset"), DatasetSource(ds), allow_incomplete, "an xarray Dataset"
    )


def _checked(path: Path, f: CubeSource, allow_incomplete: bool, kind: str = "an HDF5 file") -> Cube:
    """The cube's source ``f`` (a file's or a Dataset's) as a Cube, once it is known to be a
    complete paigrid cube this reader understands (the caller closes ``f`` on error)."""
    if "block_done" not in f or "job" not in f:
        families = cube_families(f.attrs, has_root_jobs=False)
        if families and "dp" not in families:
            raise PaigridError(
                f"{path} holds no data-parallel jobs (its job families: {', '.join(families)}); "
                "paigrid query and paigrid info answer every family, and "
                'paigrid.open_dataset(path, group="llm") opens the LLM one.'
            )
        raise PaigridError(f"{path} is {kind} but not a paigrid cube.")
    version = format_version(f.attrs)
    if version > FORMAT_VERSION:
        raise PaigridError(
            f"{path} is a format-{version} cube, written by a newer paigrid than this one "
            f"(which reads formats 1 to {FORMAT_VERSION}); upgrade paigrid to read it."
        )
    labels = {dim: decode_strings(f.read(dim)) for dim in ("job", *LABEL_DIMS)}
    complete = int_attr(f.attrs, "complete") == 1 and bool(np.all(f.read("block_done") == 1))
    cube = Cube(path, f, labels, complete, str_attr(f.attrs, "mode") or "full", version)
    if not complete and not allow_incomplete:
        done, total = int(np.sum(f.read("block_done"))), f.size("block_done")
        raise PaigridError(
            f"{path} is incomplete ({done} of {total} blocks written): its answers would be "
            "partial; finish it with paigrid sweep --resume."
        )
    return cube


def check_calibration(cube: Cube, calibration: str | Path | None) -> None:
    """Refuse to answer from a cube computed with other efficiencies than ``calibration`` (None: no check)."""
    if calibration is None:
        return
    from paigrid.files import input_problem

    problem = input_problem(calibration)  # a FIFO is refused, not read (file_sha256 would wait on it)
    if problem:
        raise PaigridError(f"the calibration file {calibration} cannot be read: {problem}.")
    stored = str_attr(cube.source.attrs, "calibration_sha256")
    if stored != file_sha256(calibration):
        made = "with another calibration" if stored else "with the default efficiencies"
        raise PaigridError(
            f"{cube.path} was computed {made}, not with {calibration}; sweep again with "
            "--calibration to query those numbers."
        )


@contextmanager
def reading(path: str | Path):
    """Turn a failed read of the cube at ``path`` (h5py's OSError, e.g. a chunk whose Fletcher-32
    checksum does not match) into one sentence naming the damaged chunk (``damage``)."""
    try:
        yield
    except (OSError, RuntimeError) as exc:
        raise damage(path, exc) from None
    except KeyError as exc:  # h5py's for an object whose header fails its checksum
        if "Unable to" not in str(exc):
            raise
        raise damage(path, exc) from None


def damage(path: str | Path, exc: BaseException | None = None) -> PaigridError:
    """The sentence for a cube that failed to read: every chunked variable is read chunk by
    chunk, and the first chunk that fails (its checksum, or its decompression) is named by its
    job(s) and variable: "cube.h5 is damaged: chunk of job J of step_time fails its checksum"."""
    import h5py
    import hdf5plugin  # noqa: F401  (the blosc filters)

    path = Path(path)
    if not path.exists() and partial_path(path).exists():
        path = partial_path(path)
    try:
        with h5py.File(path, "r") as f:
            groups = [("", f)] + ([("llm/", f["llm"])] if isinstance(f.get("llm"), h5py.Group) else [])
            for prefix, group in groups:  # the root (data-parallel family), then the group llm
                jobs = decode_strings(group["job"][:]) if "job" in group else []
                for name, dataset in group.items():
                    if not isinstance(dataset, h5py.Dataset) or dataset.chunks is None or dataset.ndim == 0:
                        continue
                    for chunk in dataset.iter_chunks():
                        try:
                            dataset[chunk]
                        except (OSError, RuntimeError):
                            return PaigridError(
                                f"{path} is damaged: chunk of {_jobs_of(chunk[0], jobs, dataset)} "
                                f"of {prefix}{name} fails its checksum."
                            )
    except (OSError, RuntimeError, KeyError, ValueError):
        pass
    reason = f" ({str(exc).strip().rstrip('.')})" if exc is not None and str(exc).strip() else ""
    return PaigridError(f"{path} cannot be read{reason}; it is damaged, or not a paigrid cube.")


def _jobs_of(rows: slice, jobs: list, dataset) -> str:
    """The job(s) of a chunk's first-axis slice, in words."""
    if not jobs or dataset.shape[0] != len(jobs):
        return f"rows {rows.start} to {rows.stop - 1}"
    first, last = rows.start, min(rows.stop, len(jobs)) - 1
    return f"job {jobs[first]}" if first == last else f"jobs {jobs[first]} to {jobs[last]}"


#: the dimensions of the LLM group's cells, whose labels the group stores
LLM_LABEL_DIMS = LLM_DIMS


@dataclass
class LlmCube:
    """The LLM family of an open cube (format 5 on): the file (h5py, read-only), its group
    ``llm`` and the group's labels, the layout degrees, mode and completeness."""

    path: Path
    file: CubeFile
    group: object
    labels: dict[str, list]
    complete: bool
    mode: str
    format: int

    def close(self) -> None:
        """Close the file."""
        self.file.close()


def families_of(path: str | Path) -> list[str]:
    """The job families of the cube at ``path`` (``dp``, ``llm``); one sentence for a path that
    is no cube (``open_cube``'s sentences)."""
    import h5py

    from paigrid.files import input_problem

    path = Path(path)
    if not path.exists():
        open_cube(path)  # its sentence for a missing or unfinished cube
    problem = input_problem(path)  # a FIFO or a device would never end: refused before HDF5 waits on it
    if problem:
        raise PaigridError(f"{path} is not a readable HDF5 cube: {problem}.")
    try:
        with h5py.File(path, "r") as f:
            families = cube_families(f.attrs, has_root_jobs="block_done" in f and "job" in f)
            if f.attrs.get("kind") == b"paigrid-llm-best" or str_attr(f.attrs, "kind") == "paigrid-llm-best":
                raise PaigridError(
                    f"{path} is an LLM sweep file of paigrid llm sweep, not a cube; paigrid llm query reads it."
                )
    except OSError:
        raise PaigridError(f"{path} is not a readable HDF5 cube.") from None
    if not families:
        raise PaigridError(f"{path} is an HDF5 file but not a paigrid cube.")
    return families


def open_llm(path: str | Path, allow_incomplete: bool = False) -> LlmCube:
    """Open the LLM family of a cube for reading (the checks of ``open_cube``: a finished
    paigrid cube this reader understands, with an ``llm`` group)."""
    import h5py
    import hdf5plugin  # noqa: F401  (registers the blosc filters the cube may use)

    path = Path(path)
    if "llm" not in families_of(path):
        raise PaigridError(f"{path} holds no LLM jobs (its job families: {', '.join(families_of(path))}).")
    f = h5py.File(path, "r")
    try:
        version = format_version(f.attrs)
        if version > FORMAT_VERSION:
            raise PaigridError(
                f"{path} is a format-{version} cube, written by a newer paigrid than this one "
                f"(which reads formats 1 to {FORMAT_VERSION}); upgrade paigrid to read it."
            )
        g = f["llm"]
        labels = {dim: decode_strings(g[dim][:]) for dim in LLM_LABEL_DIMS}
        labels["n_gpu"] = [int(v) for v in labels["n_gpu"]]
        labels["domain"] = [int(v) for v in labels["domain"]]
        complete = int_attr(f.attrs, "complete") == 1 and bool(np.all(g["block_done"][:] == 1))
        if not complete and not allow_incomplete:
            done, total = int(np.sum(g["block_done"][:])), len(g["block_done"])
            raise PaigridError(
                f"{path} is incomplete ({done} of {total} LLM blocks written): its answers would be "
                "partial; finish it with paigrid sweep --resume."
            )
        return LlmCube(path, f, g, labels, complete, str_attr(f.attrs, "mode") or "full", version)
    except BaseException:
        f.close()
        raise
