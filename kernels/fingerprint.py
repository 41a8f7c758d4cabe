"""The fingerprint of the kernels' sources, which keys every cache of their compiled code
(numba's, ``jit.cache_folder``, and the precompiled module of ``paigrid.precompiled``).

numpy only, no numba: a command that loads precompiled kernels computes it without importing
the compiler.
"""

import numpy as np

#: the modules of this package whose sources key the kernel cache (``source_fingerprint``;
#: tests/test_one_engine.py checks that it names every module of the package)
SOURCES = (
    "__init__.py",
    "columns.py",
    "cuda.py",
    "cuda_llm.py",
    "dp_columns.py",
    "fingerprint.py",
    "jit.py",
    "llm.py",
    "llm_columns.py",
    "llm_reference.py",
    "llm_search.py",
    "metrics.py",
    "model.py",
    "overall.py",
    "ps.py",
    "reference.py",
    "scan.py",
)


def source_fingerprint() -> str:
    """16 hex digits that change whenever a module of ``SOURCES`` changes (a position-weighted
    sum of its bytes and its length, modulo 2^64; a cache key, not a cryptographic hash).

    numba's on-disk cache checks only the source file of the function it compiled, not the
    modules whose constants and helpers it compiled in (``dp_columns.py``'s column indices,
    ``ps.py``'s helpers): after a change to those alone it loads stale machine code, and two
    caches filled at different times (a test's subprocess and its parent process) answer
    differently.  The kernels are therefore cached per fingerprint (``cache_folder``).
    """
    folder = __file__[: max(__file__.rfind("/"), __file__.rfind("\\")) + 1]
    total = np.uint64(0)
    with np.errstate(over="ignore"):
        for name in SOURCES:
            size, weighted = content_sums(folder + name)
            total = total * np.uint64(1099511628211) + size + weighted
    return f"{int(total):016x}"


def content_sums(path: str) -> tuple[np.uint64, np.uint64]:
    """A file's length and the position-weighted sum of its bytes (modulo 2^64); a file that
    cannot be read (a module this installation lacks) counts as empty."""
    try:
        with open(path, "rb") as handle:
            data = np.frombuffer(handle.read(), dtype=np.uint8).astype(np.uint64)
    except OSError:
        data = np.zeros(0, dtype=np.uint64)
    weights = np.arange(1, data.size + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    with np.errstate(over="ignore"):
        return np.uint64(data.size), np.sum(data * weights, dtype=np.uint64)
