"""The serial LLM kernels of one search or one prediction, and the selection kernel of a cube
scan, compiled ahead of time into a Python extension module, so that a warm ``paigrid predict``
of an LLM job and a warm ``paigrid query`` scan run without importing numba.

A command that imports numba spends most of its start there: numba's import, its CPU target's
registries and the loading of each cached kernel take 0.6-1 s of CPU on the 2-core box, against
tens of milliseconds of search.  ``load(build=True)`` compiles the kernels of ``EXPORTS`` (the
serial LLM ones and the scan's selection) once with numba's ahead-of-time compiler (``numba.pycc``:
the same numba functions, compiled by the same numba, into a module that needs only numpy to run)
into the command's kernel cache, keyed like numba's own cache by the kernels'
``source_fingerprint`` and further by Python, the platform, numpy and numba's versions; later
commands import that module.  An install ships one (setup.py builds it beside the default sweep's
kernels, in ``kernels/_prebuilt/``), so that a fresh install's first LLM ``predict`` or large
``query`` scan does not wait for it either; a shipped module that does not match these sources or
this toolchain is never looked at.  Where it cannot be built (no C compiler, a numba without
``pycc``) the reason is written beside it once, and the callers fall back to numba's JIT kernels,
which give the same numbers (``tests/test_precompiled.py`` checks they are bit-identical).

Only the single-search paths use it (``predict``, ``llm predict``) and the scans of ``query``
(``top_configurations``, the selection of each job's k best: a command that scans then imports no
numba, and selects with it even where a scan is too small to be worth numba's import): the
module's functions hold the GIL while they run (numba's ahead-of-time wrappers do not release
it), which the sweeps' threads must not wait on, so they keep the ``nogil`` JIT kernels.  The
folder is keyed by ``EXPORTS`` too, so a module of other exports is never loaded.
"""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path

import numpy as np

#: the module's name (its ``PyInit_`` symbol); one file per cache folder
MODULE = "paigrid_llm_precompiled"
#: set to 0 to never build nor load the module (the JIT kernels serve)
ENABLE_VARIABLE = "PAIGRID_PRECOMPILED"
#: what a failed build leaves in the folder, with its reason: later commands do not retry
FAILED = "failed.txt"

_C2 = "f8[:, ::1]"
#: exported name -> (kernel module, kernel name, numba signature); every array C-contiguous
EXPORTS = {
    "probe_llm_serial": (
        "llm_search",
        "probe_llm_serial",
        f"void({_C2}, {_C2}, f8[::1], f8[:, :, :, :, ::1], f8[::1], f8[::1], f8[::1])",
    ),
    "search_llm_serial": (
        "llm_search",
        "search_llm_serial",
        f"void({_C2}, {_C2}, f8[::1], f8[:, :, :, :, ::1], f8[::1], f8[::1], f8[::1], {_C2}, {_C2}, {_C2})",
    ),
    "evaluate_llm_serial": (
        "llm",
        "evaluate_llm_serial",
        f"void({_C2}, {_C2}, f8[::1], f8[:, :, :, :, ::1], f8[::1], {_C2})",
    ),
    "memory_bytes": ("llm", "memory_bytes", "f8(f8[::1], f8[::1], f8[::1], f8)"),
    # a scan's selection (``paigrid.query``): step times float32 as a cube stores them
    "top_configurations": (
        "scan",
        "top_configurations",
        "i8(f4[:, :, :, :, :, ::1], u1[:, ::1], i8[::1], i8[::1], i8[::1], i8[::1], i8[::1], i8[::1], "
        "b1[::1], b1[::1], f8[:, ::1], b1, i8, i8[::1], f8[::1])",
    ),
}

_loaded: dict = {}


def folder() -> Path | None:
    """Where the module of these sources, this Python, platform, numpy and numba lives: a folder
    in the kernel cache (``NUMBA_CACHE_DIR``, which the command always sets; None where it is
    not set, or where ``ENABLE_VARIABLE`` is 0)."""
    base = os.environ.get("NUMBA_CACHE_DIR")
    if not base or os.environ.get(ENABLE_VARIABLE, "1").strip() == "0":
        return None
    return Path(base) / _subfolder()


@functools.cache
def _subfolder() -> str:
    """The module's folder under the cache, made once per process: the kernel sources'
    fingerprint reads every kernel module, and a command loads the module more than once."""
    import platform
    import zlib

    from paigrid.kernels.fingerprint import source_fingerprint

    exports = zlib.crc32(repr(sorted(EXPORTS.items())).encode())  # a module of other exports never answers
    key = f"{sys.implementation.cache_tag}-{platform.machine()}-numpy{np.__version__}-numba{_numba_version()}"
    key += f"-x{exports:08x}"
    return f"paigrid-kernels-{source_fingerprint()}/precompiled-{key}"


def _numba_version() -> str:
    """numba's installed version, read from its distribution's metadata folder beside the package
    (no import of numba; ``importlib.metadata`` where the folder is not found)."""
    from importlib.util import find_spec

    spec = find_spec("numba")
    if spec is None or not spec.origin:
        return "none"
    for entry in Path(spec.origin).parent.parent.glob("numba-*.dist-info"):
        return entry.name[len("numba-") : -len(".dist-info")]
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("numba")
    except PackageNotFoundError:
        return "unknown"


def _path(where: Path) -> Path:
    from importlib.machinery import EXTENSION_SUFFIXES

    return where / f"{MODULE}{EXTENSION_SUFFIXES[0]}"


def shipped_folder() -> Path:
    """Where an install ships the module: the package's ``kernels/_prebuilt/`` (setup.py builds it
    there with the default sweep's kernels), in the subfolder of these sources and toolchain."""
    from paigrid import kernels

    return Path(kernels.__file__).resolve().parent / "_prebuilt" / _subfolder()


def load(build: bool = False):
    """The precompiled module (functions named as in ``EXPORTS``), or None where there is none:
    the one the install shipped (``shipped_folder``, read, never written) where it loads, else
    the command's own; with ``build`` that is compiled first where it is missing and has not
    failed before (as long as numba's own compilation of the same kernels, about 25 s on the
    2-core box)."""
    where = folder()
    if where is None:
        return None
    if where in _loaded:
        return _loaded[where]
    path = _path(where)
    if not path.exists():
        shipped = _path(shipped_folder())
        if shipped.exists():
            try:
                _loaded[where] = _import(shipped)
                return _loaded[where]
            except (ImportError, OSError):  # another build's file: the command's own serves
                pass
        if not build or (where / FAILED).exists():
            return None
        try:
            _build(where)
        except Exception as error:  # noqa: BLE001 (any failure of the C toolchain: the JIT kernels serve)
            return _failed(where, error)
    try:
        module = _import(path)
    except (ImportError, OSError) as error:  # a module this Python cannot load: set aside, not retried
        path.unlink(missing_ok=True)
        return _failed(where, error)
    _loaded[where] = module
    return module


def _import(path: Path):
    """The extension module at ``path``, checked to hold every export (ImportError otherwise)."""
    from importlib.machinery import ExtensionFileLoader, ModuleSpec
    from importlib.util import module_from_spec

    loader = ExtensionFileLoader(MODULE, str(path))
    module = module_from_spec(ModuleSpec(MODULE, loader, origin=str(path)))
    loader.exec_module(module)
    missing = [name for name in EXPORTS if not hasattr(module, name)]
    if missing:
        raise ImportError(f"the module lacks {', '.join(missing)}")
    return module


def _failed(where: Path, error: Exception) -> None:
    """Record why the module of ``where`` is not there (``FAILED``), where the folder can be
    written; the callers then use the JIT kernels."""
    _loaded[where] = None
    try:
        where.mkdir(parents=True, exist_ok=True)
        (where / FAILED).write_text(f"{type(error).__name__}: {error}\n", encoding="utf-8")
    except OSError:
        pass  # a cache folder that cannot be written: nothing is recorded, nothing is built either
    return None


def status() -> str:
    """One line on the module for these sources: built (its path), shipped with the install (its
    path), failed (the recorded reason), not built yet, or off (no ``NUMBA_CACHE_DIR``, or
    ``ENABLE_VARIABLE`` 0)."""
    where = folder()
    if where is None:
        return "off"
    if _path(where).exists():
        return f"built: {_path(where)}"
    shipped = _path(shipped_folder())
    if shipped.exists():
        return f"shipped: {shipped}"
    if (where / FAILED).exists():
        return f"failed: {(where / FAILED).read_text(encoding='utf-8').strip()}"
    return "not built yet"


def _calling(kernel, n_args: int):
    """A function of ``n_args`` arrays that calls the numba ``kernel``: what is exported, so the
    kernel itself is compiled with its own options (``kernels.jit``: ``error_model="numpy"``,
    no fastmath), not the ahead-of-time compiler's defaults (``error_model="python"``)."""
    names = ", ".join(f"a{i}" for i in range(n_args))
    scope = {"kernel": kernel}
    exec(f"def call({names}):\n    return kernel({names})\n", scope)  # noqa: S102 (a fixed template)
    return scope["call"]


def _build(where: Path) -> None:
    """Compile ``EXPORTS`` with ``numba.pycc`` in a private folder beside ``where``, then move the
    module into ``where`` in one rename (two commands building at once each finish, one wins)."""
    import importlib
    import shutil
    import tempfile
    import warnings

    where.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="build-", dir=where))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # numba.pycc's pending deprecation notice
            from numba.pycc import CC

            cc = CC(MODULE)
            cc.output_dir = str(scratch)
            cc.verbose = False
            for name, (module, kernel, signature) in EXPORTS.items():
                dispatcher = getattr(importlib.import_module(f"paigrid.kernels.{module}"), kernel)
                n_args = dispatcher.py_func.__code__.co_argcount
                cc.export(name, signature)(_calling(dispatcher, n_args))
            cc.compile()
        built = next(scratch.glob(f"{MODULE}*"))
        os.replace(built, _path(where))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def contiguous(*arrays: np.ndarray) -> list[np.ndarray]:
    """The ``arrays`` as C-contiguous float64 (copies only where they are not): the module's
    functions are compiled for exactly that and do not check it."""
    return [np.ascontiguousarray(a, dtype=np.float64) for a in arrays]
