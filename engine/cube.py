"""The reader of cube files (h5py, read-only): open a finished cube, its labels, and the checks
that it is a paigrid cube, complete, and made with the expected calibration.

Readers import this module and ``paigrid.schema``, never the writer (``paigrid.store``) or the
driver (``paigrid.evaluate``): opening a cube loads neither numba nor the sweep machinery.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from paigrid.errors import PaigridError
from paigrid.schema import FORMAT_VERSION, LABEL_DIMS, decode_strings, format_version, int_attr, partial_path, str_attr
from paigrid.userfiles import file_sha256


@dataclass
class Cube:
    """An open cube file (h5py, read-only) and its labels."""

    path: Path
    file: object
    labels: dict[str, list]
    complete: bool
    mode: str
    format: int  # the cube format version (``paigrid.schema.FORMAT_VERSION`` when written now)

    def close(self) -> None:
        """Close the file."""
        self.file.close()


def open_cube(path: str | Path, allow_incomplete: bool = False) -> Cube:
    """Open a cube for reading; an unfinished sweep is an error unless ``allow_incomplete``."""
    import h5py
    import hdf5plugin  # noqa: F401  (registers the blosc filters the cube may use)

    path = Path(path)
    if not path.exists():
        if partial_path(path).exists() and allow_incomplete:
            path = partial_path(path)
        elif partial_path(path).exists():
            raise PaigridError(f"the sweep writing {path} is unfinished ({partial_path(path)} exists); "
                               "finish it with paigrid sweep --resume before querying it.")
        else:
            raise PaigridError(f"there is no cube at {path}.")
    try:
        f = h5py.File(path, "r")
    except OSError:
        raise PaigridError(f"{path} is not a readable HDF5 cube.") from None
    if "block_done" not in f or "job" not in f:
        f.close()
        raise PaigridError(f"{path} is an HDF5 file but not a paigrid cube.")
    version = format_version(f.attrs)
    if version > FORMAT_VERSION:
        f.close()
        raise PaigridError(f"{path} is a format-{version} cube, written by a newer paigrid than this one "
                           f"(which reads formats 1 to {FORMAT_VERSION}); upgrade paigrid to read it.")
    labels = {dim: decode_strings(f[dim][:]) for dim in ("job", *LABEL_DIMS)}
    complete = int_attr(f.attrs, "complete") == 1 and bool(np.all(f["block_done"][:] == 1))
    cube = Cube(path, f, labels, complete, str_attr(f.attrs, "mode") or "full", version)
    if not complete and not allow_incomplete:
        done, total = int(np.sum(f["block_done"][:])), len(f["block_done"])
        f.close()
        raise PaigridError(f"{path} is incomplete ({done} of {total} blocks written): its answers would be "
                           "partial; finish it with paigrid sweep --resume.")
    return cube


def check_calibration(cube: Cube, calibration: str | Path | None) -> None:
    """Refuse to answer from a cube computed with other efficiencies than ``calibration`` (None: no check)."""
    if calibration is None:
        return
    if not Path(calibration).is_file():
        raise PaigridError(f"the calibration file {calibration} does not exist.")
    stored = str_attr(cube.file.attrs, "calibration_sha256")
    if stored != file_sha256(calibration):
        made = "with another calibration" if stored else "with the default efficiencies"
        raise PaigridError(f"{cube.path} was computed {made}, not with {calibration}; sweep again with "
                           "--calibration to query those numbers.")
