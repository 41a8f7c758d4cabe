"""The one place that fixes how paigrid's kernels are compiled.

Every kernel is compiled with ``cache=True`` (the engine points ``NUMBA_CACHE_DIR`` at a user
cache directory, so a second run does not recompile), ``nogil=True`` (so Dask threads and the
writer thread run beside a kernel) and ``error_model="numpy"`` (a division by zero gives inf or
NaN instead of raising).  ``fastmath`` is never enabled: it lets LLVM assume that no value is
NaN, which would break the NaN-in, NaN-out guarantee the tests check.
"""

import numba

_OPTIONS = dict(cache=True, nogil=True, error_model="numpy")

#: decorator for serial kernels and helpers (helpers are inlined into their callers by LLVM)
jit = numba.njit(**_OPTIONS)

#: decorator for kernels with a ``prange`` loop over configurations
parallel_jit = numba.njit(parallel=True, **_OPTIONS)
