"""The LLM kernels on an NVIDIA GPU, written with numba.cuda.

One definition of the formulas serves both targets, as for the data-parallel kernel
(``kernels.cuda``): every scalar ``@jit`` helper of ``llm`` (``evaluate_pair``,
``memory_bytes``, ``layout_reason``, ``tensor_seconds``, ...) and of ``llm_search``
(``search_stem``, ``probe_stem``, the bounds) is compiled a second time, from the same Python
function, as a CUDA device function (``load`` finds them by their type, so a helper added to
either module later is retargeted too).  The kernels below only index the grid:

- ``pairs_kernel``: one thread per (layout, hardware row) pair, ``llm.evaluate_pair`` into its
  row of ``out`` (the layout i x H + j of ``llm.evaluate_llm``);
- ``probe_kernel`` and ``search_kernel``: one thread per (stem, hardware row),
  ``llm_search.probe_stem`` and ``llm_search.search_stem`` (the layout search of
  ``llm_search.search_llm``, pruning included) with their scratch in thread-local arrays.

``tests/test_cuda_llm.py`` checks, through numba's CUDA simulator, that every output equals the
CPU kernels' bit for bit, and compiles the kernels to PTX where NVVM is installed.  Importing
this module needs only numpy and numba; ``numba.cuda`` is imported by ``load`` (the load step
is ``cuda.device_namespace``, shared with the data-parallel kernels).
"""

import numpy as np
from numba.core.registry import CPUDispatcher

from . import llm, llm_search
from . import llm_columns as K
from .cuda import _retarget, device_namespace, launch_grid
from .llm import evaluate_pair  # the CPU compilations; ``load`` gives the kernels the GPU ones under these names
from .llm_search import probe_stem, search_stem

#: the modules whose scalar helpers the GPU kernels share (compiled a second time for the GPU)
SHARED_MODULES = (llm, llm_search)
#: their block kernels (``prange`` loops over pairs or stems): compiled for the CPU only
CPU_ONLY = (
    "evaluate_llm",
    "evaluate_llm_serial",
    "search_llm",
    "search_llm_serial",
    "probe_llm",
    "probe_llm_serial",
)
#: scratch entries per thread of the search (``llm_search.search_stem``'s ``terms``: 5 x 3 x 2)
TERMS = 30
#: the sizes of the thread-local arrays, as globals (cuda.local.array needs compile-time constants)
RESULT_FIELDS = K.N_RESULT_FIELDS
LAYOUT_FIELDS = K.N_LAYOUT_FIELDS

cuda = None  # a placeholder: ``load`` compiles copies of the kernels whose globals hold numba.cuda here


def shared_helpers() -> dict:
    """The scalar helpers the GPU kernels share with the CPU kernels, name -> the module of
    ``SHARED_MODULES`` that defines it (every ``@jit`` function defined there but the block
    kernels)."""
    return {
        name: module
        for module in SHARED_MODULES
        for name, value in vars(module).items()
        if isinstance(value, CPUDispatcher) and value.py_func.__module__ == module.__name__ and name not in CPU_ONLY
    }


class CudaLlmKernels:
    """What ``load`` returns: ``cuda`` (the numba.cuda module), ``helpers`` (name -> CUDA device
    function), ``pairs_kernel``, ``probe_kernel`` and ``search_kernel``."""

    def __init__(self, cuda, helpers, pairs_kernel, probe_kernel, search_kernel):
        self.cuda, self.helpers = cuda, helpers
        self.pairs_kernel, self.probe_kernel, self.search_kernel = pairs_kernel, probe_kernel, search_kernel


_LOADED: dict[str, CudaLlmKernels] = {}


def load() -> CudaLlmKernels:
    """The CUDA compilations (compiled lazily on first launch; with ``NUMBA_ENABLE_CUDASIM=1``
    set before numba.cuda is first imported they run in numba's CUDA simulator)."""
    if "ns" in _LOADED:
        return _LOADED["ns"]
    numba_cuda, device, kernel_globals = device_namespace(
        shared_helpers(), SHARED_MODULES, globals(), prepare=(_complete_floor,)
    )
    ns = CudaLlmKernels(
        numba_cuda,
        device,
        numba_cuda.jit(_retarget(_pairs_kernel, kernel_globals)),
        numba_cuda.jit(_retarget(_probe_kernel, kernel_globals)),
        numba_cuda.jit(_retarget(_search_kernel, kernel_globals)),
    )
    _LOADED["ns"] = ns
    return ns


def _complete_floor() -> None:
    """Add ``np.floor`` (the LLM helpers' stage split, divisibility and domain counts) to
    numba-cuda's table of NumPy ufuncs, which lacks it as it lacks ``np.ceil``
    (``cuda._complete_ufuncs``), with numba-cuda's own implementation (LLVM's floor intrinsic,
    as on the CPU).  Nothing to do in the simulator or where the table has it."""
    from numba.core import config

    if config.ENABLE_CUDASIM:
        return
    try:
        from numba.cuda.np import npyfuncs
        from numba.cuda.ufuncs import ufunc_db
    except ImportError:  # numba's built-in CUDA target: its ufunc table has np.floor
        return
    table = ufunc_db()
    if np.floor not in table:
        table[np.floor] = {"f->f": npyfuncs.np_real_floor_impl, "d->d": npyfuncs.np_real_floor_impl}


def _pairs_kernel(layouts, hw, model, ctab, options, out):
    """``llm.evaluate_llm`` on the GPU: thread i x H + j evaluates layout i on hardware row j
    into ``out[i x H + j]`` (N_RESULT_FIELDS)."""
    flat = cuda.grid(1)
    n_hw = hw.shape[0]
    if flat >= layouts.shape[0] * n_hw:
        return
    evaluate_pair(layouts[flat // n_hw], hw[flat % n_hw], model, ctab, options, out[flat])


def _probe_kernel(stems, hw, model, ctab, options, choices, probe):
    """``llm_search.probe_llm`` on the GPU: thread s x H + j writes ``probe[s x H + j]``."""
    flat = cuda.grid(1)
    n_hw = hw.shape[0]
    if flat >= stems.shape[0] * n_hw:
        return
    res = cuda.local.array(RESULT_FIELDS, np.float64)
    lay = cuda.local.array(LAYOUT_FIELDS, np.float64)
    probe[flat] = probe_stem(stems[flat // n_hw], hw[flat % n_hw], model, ctab, options, choices, res, lay)


def _search_kernel(stems, hw, model, ctab, options, choices, incumbent, best_res, best_lay, counts):
    """``llm_search.search_llm`` on the GPU: thread s x H + j searches stem s on hardware row j."""
    flat = cuda.grid(1)
    n_hw = hw.shape[0]
    if flat >= stems.shape[0] * n_hw:
        return
    res = cuda.local.array(RESULT_FIELDS, np.float64)
    lay = cuda.local.array(LAYOUT_FIELDS, np.float64)
    terms = cuda.local.array(TERMS, np.float64)
    search_stem(
        stems[flat // n_hw],
        hw[flat % n_hw],
        model,
        ctab,
        options,
        choices,
        incumbent[flat % n_hw],
        res,
        lay,
        terms,
        best_res[flat],
        best_lay[flat],
        counts[flat],
    )


def evaluate_llm_cuda(layouts, hw, model, ctab, options) -> np.ndarray:
    """(N x H, N_RESULT_FIELDS) results of ``llm.evaluate_llm`` computed on the GPU (inputs and
    outputs on the host)."""
    ns = load()
    out = np.empty((layouts.shape[0] * hw.shape[0], K.N_RESULT_FIELDS))
    blocks, threads = launch_grid(out.shape[0])
    device = [ns.cuda.to_device(np.ascontiguousarray(a)) for a in (layouts, hw, model, ctab, options)]
    d_out = ns.cuda.to_device(out)
    ns.pairs_kernel[blocks, threads](*device, d_out)
    return d_out.copy_to_host()


def probe_llm_cuda(stems, hw, model, ctab, options, choices) -> np.ndarray:
    """(S x H,) ``llm_search.probe_llm`` on the GPU."""
    ns = load()
    probe = np.empty(stems.shape[0] * hw.shape[0])
    blocks, threads = launch_grid(probe.size)
    device = [ns.cuda.to_device(np.ascontiguousarray(a)) for a in (stems, hw, model, ctab, options, choices)]
    d_probe = ns.cuda.to_device(probe)
    ns.probe_kernel[blocks, threads](*device, d_probe)
    return d_probe.copy_to_host()


def search_llm_cuda(stems, hw, model, ctab, options, choices, incumbent):
    """(best_res, best_lay, counts) of ``llm_search.search_llm`` computed on the GPU."""
    ns = load()
    rows = stems.shape[0] * hw.shape[0]
    outs = [
        np.empty((rows, K.N_RESULT_FIELDS)),
        np.empty((rows, K.N_LAYOUT_FIELDS)),
        np.zeros((rows, llm_search.N_COUNTS)),
    ]
    blocks, threads = launch_grid(rows)
    device = [ns.cuda.to_device(np.ascontiguousarray(a)) for a in (stems, hw, model, ctab, options, choices, incumbent)]
    d_outs = [ns.cuda.to_device(a) for a in outs]
    ns.search_kernel[blocks, threads](*device, *d_outs)
    return tuple(d.copy_to_host() for d in d_outs)
