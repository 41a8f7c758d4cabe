"""paigrid: which training architecture and interconnect make a deep-learning job fastest.

The analytical model of the Alibaba-PAI workload study (Wang et al., IISWC 2019), evaluated by
numba kernels (``paigrid.kernels``) over a labelled grid of workloads x hardware and stored as
an HDF5 cube.  See the README for the model, the cube and the commands.
"""

import os
from pathlib import Path

__version__ = "0.1.0"


def _default_numba_cache() -> None:
    """Cache compiled kernels in a user cache directory unless the user chose one already."""
    if "NUMBA_CACHE_DIR" not in os.environ:
        base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
        os.environ["NUMBA_CACHE_DIR"] = str(base / "paigrid" / "numba")


_default_numba_cache()
