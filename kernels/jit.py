"""The one place that fixes how paigrid's kernels are compiled.

Every kernel is compiled with ``cache=True`` (numba caches in ``__pycache__`` beside this
package, or in its user cache directory where that is not writable; the ``paigrid`` command
uses ``~/.cache/paigrid/numba`` unless ``NUMBA_CACHE_DIR`` is set; so a second run does not
recompile), ``nogil=True`` (so Dask threads and the
writer thread run beside a kernel) and ``error_model="numpy"`` (a division by zero gives inf or
NaN instead of raising).  ``fastmath`` is never enabled: it lets LLVM assume that no value is
NaN, which would break the NaN-in, NaN-out guarantee the tests check.

A kernel that serves both large blocks and single configurations is written once, as a plain
function with a ``prange`` loop, and compiled twice: ``parallel_jit(body)`` for blocks and
``jit(serial_twin(body, name))`` for a few configurations, where starting the thread pool costs
more than the work (the engine's driver picks one by size).
"""

import numba

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
