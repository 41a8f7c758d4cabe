"""The one place that fixes how paigrid's kernels are compiled.

Every kernel is compiled with numba's on-disk cache (the ``paigrid`` command caches in
``~/.cache/paigrid/numba``, a library import in numba's user cache folder, ``~/.cache/numba``;
``NUMBA_CACHE_DIR`` is honoured by both), in a folder per ``source_fingerprint`` of this package's
modules, so a second run does not recompile and a changed module is never answered by stale
machine code; ``nogil=True`` (so Dask threads and the writer thread run beside a kernel) and
``error_model="numpy"`` (a division by zero gives inf or NaN instead of raising).  ``fastmath`` is
never enabled: it lets LLVM assume that no value is NaN, which would break the NaN-in, NaN-out
guarantee the tests check.

The cache is keyed by content, not by place (``_ContentLocator``): numba's own locators file a
function under a hash of its source folder's path and check the source file's stamp, so machine
code compiled in a build tree would never be found once installed.  That is what lets ``setup.py``
compile the default sweep's kernels when paigrid is built and ship them in ``_prebuilt/`` beside
this module (docs/development.md, "The kernel cache"): a kernel missing from the user cache is
looked up there (read only) before it is compiled.  numba itself ignores an entry of another numba
version (the index's version) or another CPU (the codegen's magic tuple), and the stamp carries
the fingerprint and numpy's version, so a prebuilt entry that does not fit is compiled again.

A kernel that serves both large blocks and single configurations is written once, as a plain
function with a ``prange`` loop, and compiled twice: ``parallel_jit(body)`` for blocks and
``jit(serial_twin(body, name))`` for a few configurations, where starting the thread pool costs
more than the work (the engine's driver picks one by size).
"""

import numba
import numpy as np
from numba.core import caching

from .fingerprint import SOURCES, content_sums, source_fingerprint  # noqa: F401 (also read as jit.SOURCES)

#: this module's folder, with its trailing separator
_FOLDER = __file__[: max(__file__.rfind("/"), __file__.rfind("\\")) + 1]


def cache_folder(base: str | None) -> str:
    """The folder numba caches the kernels in: ``base`` (``NUMBA_CACHE_DIR``; None or empty:
    numba's user-wide cache folder, ``~/.cache/numba``) and in it one named by
    ``source_fingerprint``."""
    if not base:
        from numba.misc.appdirs import AppDirs

        base = AppDirs(appname="numba", appauthor=False).user_cache_dir
    return f"{base.rstrip('/')}/paigrid-kernels-{FINGERPRINT}"


#: ``source_fingerprint`` of this installation's sources (read once)
FINGERPRINT = source_fingerprint()
#: the folder this process caches compiled kernels in (numba's ``CACHE_DIR`` is pointed at it too)
CACHE_FOLDER = cache_folder(numba.config.CACHE_DIR)
numba.config.CACHE_DIR = CACHE_FOLDER
#: the cache ``setup.py`` compiled at build time for these sources (read only; absent when the
#: build could not compile, or after a kernel module changed)
PREBUILT_FOLDER = f"{_FOLDER}_prebuilt/paigrid-kernels-{FINGERPRINT}"

_MODULE_SUMS: dict[str, str] = {}


def content_stamp(py_file: str) -> tuple[str, str, str, str]:
    """What a cached function's index must carry to be used (numba's "source stamp"): the
    fingerprint of the kernel modules, a content sum of the function's own file (``py_file``,
    which may be outside them: ``paigrid.codecs``) and numpy's version.  numba's own locators
    file the cache under a hash of the file's folder path (and numba before 0.68 stamps it with
    the file's modification time), which change when the file is copied or installed."""
    if py_file not in _MODULE_SUMS:
        size, weighted = content_sums(py_file)
        _MODULE_SUMS[py_file] = f"{int(size):x}-{int(weighted):016x}"
    return ("paigrid", FINGERPRINT, _MODULE_SUMS[py_file], np.__version__)


class _ContentLocator(caching._CacheLocator):
    """numba's cache locator for paigrid's functions: ``CACHE_FOLDER/<package>/`` (the package
    of the function's module, so paths and places never enter) with ``content_stamp`` as the
    stamp.  For a function of another package, or where the folder cannot be written, it declines
    and numba's own locators are asked (as before)."""

    _writable: set[str] = set()  # folders this process has found writable

    def __init__(self, py_func, py_file):
        self._lineno = py_func.__code__.co_firstlineno
        self._package = py_func.__module__.rpartition(".")[0]
        self._path = f"{CACHE_FOLDER}/{self._package}"
        self._stamp = content_stamp(py_file)

    def get_cache_path(self):
        return self._path

    def get_source_stamp(self):
        return self._stamp

    def get_disambiguator(self):
        return str(self._lineno)

    def ensure_cache_path(self):
        if self._path not in self._writable:  # numba's check writes a temporary file: once a folder
            super().ensure_cache_path()
            self._writable.add(self._path)

    @classmethod
    def from_function(cls, py_func, py_file):
        if not (py_func.__module__ or "").startswith("paigrid."):
            return None
        try:
            open(py_file, "rb").close()
        except OSError:  # no source file (an interactive definition)
            return None
        locator = cls(py_func, py_file)
        try:
            locator.ensure_cache_path()
        except OSError:  # cannot write there: numba's own locators are tried
            return None
        return locator


class _KernelCacheImpl(caching.CompileResultCacheImpl):
    _locator_classes = [_ContentLocator, *caching.CompileResultCacheImpl._locator_classes]


class KernelCache(caching.FunctionCache):
    """numba's per-function cache with ``_ContentLocator`` first, and the build's prebuilt cache
    (``PREBUILT_FOLDER``) read, never written, when the user cache has no entry: a miss in both is
    compiled and saved in the user cache as usual.  An unreadable or unusable prebuilt entry is a
    miss."""

    _impl_class = _KernelCacheImpl

    def __init__(self, py_func):
        super().__init__(py_func)
        self._prebuilt = caching.IndexDataCacheFile(
            cache_path=f"{PREBUILT_FOLDER}/{py_func.__module__.rpartition('.')[0]}",
            filename_base=self._impl.filename_base,
            source_stamp=content_stamp(py_func.__code__.co_filename),
        )

    def _load_overload(self, sig, target_context):
        data = super()._load_overload(sig, target_context)
        if data is not None or not self._enabled:
            return data
        try:
            found = self._prebuilt.load(self._index_key(sig, target_context.codegen()))
            return None if found is None else self._impl.rebuild(target_context, found)
        except Exception:  # a damaged or foreign prebuilt entry: compile instead
            return None


def _cached(dispatcher):
    """``dispatcher`` with ``KernelCache`` as its cache (what ``cache=True`` would enable, with
    numba's own locators only); under ``NUMBA_DISABLE_JIT=1`` numba hands back the plain
    function, which has no cache."""
    if not hasattr(dispatcher, "py_func"):
        return dispatcher
    dispatcher._cache = KernelCache(dispatcher.py_func)
    return dispatcher


_OPTIONS: dict = dict(nogil=True, error_model="numpy")


def jit(function):
    """Decorator for serial kernels and helpers (helpers are inlined into their callers by LLVM)."""
    return _cached(numba.njit(**_OPTIONS)(function))


def parallel_jit(function):
    """Decorator for kernels with a ``prange`` loop over configurations."""
    return _cached(numba.njit(parallel=True, **_OPTIONS)(function))


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
