"""The one place that fixes how paigrid's kernels are compiled.

Every kernel is compiled with ``cache=True`` (numba caches in its user cache folder,
``~/.cache/numba``; the ``paigrid`` command uses ``~/.cache/paigrid/numba`` unless
``NUMBA_CACHE_DIR`` is set; in either, in a folder per ``source_fingerprint`` of this package's
modules, so a second run does not recompile and a changed module is never answered by stale
machine code), ``nogil=True`` (so Dask threads and the
writer thread run beside a kernel) and ``error_model="numpy"`` (a division by zero gives inf or
NaN instead of raising).  ``fastmath`` is never enabled: it lets LLVM assume that no value is
NaN, which would break the NaN-in, NaN-out guarantee the tests check.

A kernel that serves both large blocks and single configurations is written once, as a plain
function with a ``prange`` loop, and compiled twice: ``parallel_jit(body)`` for blocks and
``jit(serial_twin(body, name))`` for a few configurations, where starting the thread pool costs
more than the work (the engine's driver picks one by size).
"""

import numba

from .fingerprint import SOURCES, source_fingerprint  # noqa: F401 (also read as jit.SOURCES)


def cache_folder(base: str | None) -> str:
    """The folder numba caches the kernels in: ``base`` (``NUMBA_CACHE_DIR``; None or empty:
    numba's user-wide cache folder, ``~/.cache/numba``) and in it one named by
    ``source_fingerprint``."""
    if not base:
        from numba.misc.appdirs import AppDirs

        base = AppDirs(appname="numba", appauthor=False).user_cache_dir
    return f"{base.rstrip('/')}/paigrid-kernels-{source_fingerprint()}"


# before any kernel is decorated: numba's cache locator reads the folder when it is
numba.config.CACHE_DIR = cache_folder(numba.config.CACHE_DIR)

_OPTIONS: dict = dict(cache=True, nogil=True, error_model="numpy")

#: decorator for serial kernels and helpers (helpers are inlined into their callers by LLVM)
jit = numba.njit(**_OPTIONS)

#: decorator for kernels with a ``prange`` loop over configurations
parallel_jit = numba.njit(parallel=True, **_OPTIONS)


def serial_twin(body, name):
    """A copy of the plain Python kernel ``body`` named ``name``, to compile with ``jit`` beside
    ``parallel_jit(body)``: the same code, serial (``prange`` is ``range`` there).

    numba's on-disk cache files a compilation under its function's name and first line and does
    not record ``parallel``, so the two compilations of one body need two names; otherwise each
    would load the other's machine code from the cache.
    """
    twin = type(body)(body.__code__, body.__globals__, name, body.__defaults__, body.__closure__)
    twin.__qualname__ = name
    twin.__doc__ = body.__doc__
    twin.__module__ = body.__module__
    return twin
