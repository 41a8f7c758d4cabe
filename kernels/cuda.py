"""The paigrid model on an NVIDIA GPU, written with numba.cuda.

One definition of the formulas serves both targets: every scalar helper of ``model`` and of
``ps`` (the ``@jit`` functions ``comm_seconds``, ``exchange_seconds``, ``configuration_reason``,
``job_gpu_terms``, ``class_terms``, ``ps_seconds``, ``ps_fits_memory_flag``, ...) is compiled a
second time, from the same Python function, as a CUDA device function (``load`` finds them by
their type, so a helper added to either module later is retargeted too).  The two kernels below
only index the grid and compose those helpers (one configuration is ``model.configuration_step``,
as in ``model._evaluate_block``);
``tests/test_cuda.py`` checks, through numba's CUDA simulator, that every output equals the CPU
kernel's.

- ``terms_kernel``: one thread per (job, gpu); fills t_data, t_flop, t_mem [s per step] and
  fits_memory over precisions with the compute model ``options[O_MODEL]``.
- ``configurations_kernel``: one thread per (job, gpu, n_gpu, precision); loops over
  (arch, intra, network), writes the cube outputs when ``write_cube`` and folds the per-job
  reductions (best_step [s], best_index, best_bottleneck) on the GPU, with the parameter-server
  options (``layout.O_PS_*``), the ring inter-server volume (``O_INTER_VOLUME``) and the memory
  check per architecture (``O_PS_MEMORY``) as on the CPU.

Importing this module needs only numpy and numba: ``numba.cuda`` is imported by ``load``
(``device_namespace``, the load step ``cuda_llm`` shares), so that machines without the CUDA
target can import the package.
"""

import numpy as np
from numba.core.registry import CPUDispatcher

from . import metrics, model, ps
from .dp_columns import (
    ARCH_PS_WORKER,
    FLAG_FILL,
    G_PCIE_BW,
    J_ACCUM,
    J_BATCH,
    J_GPUS_PER_NODE,
    J_INPUT_RATE,
    J_PCIE_ROOTS,
    L_BW,
    L_KIND,
    L_LATENCY,
    MODEL_PAI_V2,
    O_COLLECTIVE,
    O_INTER_VOLUME,
    O_MODEL,
    O_PS_SPARSE,
    O_TOPOLOGY,
    O_WORKSPACE,
    REASON_VALID,
)
from .model import (  # the CPU compilations; ``load`` gives the kernels the GPU ones under these names
    bottleneck_code,
    class_terms,
    configuration_reason,
    configuration_step,
    derived_factor_missing,
    exchange_terms,
    input_floor_seconds,
    intra_fraction,
    job_gpu_terms,
    network_terms,
    precision_reason,
    precision_terms,
    ps_host_update_bytes,
    ps_worker_fits,
    update_seconds,
    wire_fraction,
)
from .ps import ps_wire_fraction

#: threads per CUDA block of both kernels
THREADS_PER_BLOCK = 128

#: the modules whose scalar helpers the GPU kernels share (compiled a second time for the GPU)
SHARED_MODULES = (model, ps)
#: the block kernels of ``model`` and its array functions: compiled for the CPU only (the GPU has
#: its own kernels here; throughput, cost and energy factors are computed on the host)
CPU_ONLY = ("compute_terms", "evaluate_block", "evaluate_block_serial", "step_factors", "config_derived")

cuda = None  # a placeholder: ``load`` compiles copies of the kernels whose globals hold numba.cuda here


def shared_helpers() -> dict:
    """The scalar helpers that the GPU kernels share with the CPU kernel, name -> the module of
    ``SHARED_MODULES`` that defines it: every ``@jit`` function defined there except the block
    kernels (the names are unique across the modules: each imports the other's by name)."""
    return {
        name: module
        for module in SHARED_MODULES
        for name, value in vars(module).items()
        if isinstance(value, CPUDispatcher) and _defined_for(value, module) and name not in CPU_ONLY
    }


def _defined_for(dispatcher, module) -> bool:
    """True for a helper that ``module`` defines, or compiles from ``metrics`` (the numba-free
    formulas of time, cost and energy per sample, which call nothing)."""
    return dispatcher.py_func.__module__ in (module.__name__, metrics.__name__)


def _retarget(function, namespace: dict):
    """The same Python function (its code object) with ``namespace`` as its globals, so that the
    helpers it calls resolve to their CUDA compilations."""
    twin = type(function)(function.__code__, namespace, function.__name__, function.__defaults__, function.__closure__)
    twin.__qualname__ = function.__qualname__
    twin.__doc__ = function.__doc__
    twin.__module__ = function.__module__
    return twin


class CudaKernels:
    """What ``load`` returns: ``cuda`` (the numba.cuda module), ``helpers`` (name -> the CUDA
    device function compiled from the ``model`` helper of that name), ``terms_kernel`` and
    ``configurations_kernel`` (the CUDA kernels)."""

    def __init__(self, cuda, helpers, terms_kernel, configurations_kernel):
        self.cuda, self.helpers = cuda, helpers
        self.terms_kernel, self.configurations_kernel = terms_kernel, configurations_kernel


_LOADED: dict[str, CudaKernels] = {}


def load():
    """The CUDA compilations (a ``CudaKernels``).  Compiled lazily on first launch
    (numba.cuda compiles per argument types); with ``NUMBA_ENABLE_CUDASIM=1`` set before the first
    import of numba.cuda they run in numba's CUDA simulator."""
    if "ns" in _LOADED:
        return _LOADED["ns"]
    numba_cuda, device, kernel_globals = device_namespace(shared_helpers(), SHARED_MODULES, globals())
    ns = CudaKernels(
        numba_cuda,
        device,
        numba_cuda.jit(_retarget(_terms_kernel, kernel_globals)),
        numba_cuda.jit(_retarget(_configurations_kernel, kernel_globals)),
    )
    _LOADED["ns"] = ns
    return ns


def device_namespace(helpers: dict, modules, kernel_globals: dict, prepare=()) -> tuple:
    """The load step of both CUDA modules (this one and ``cuda_llm``): numba.cuda imported (with
    ``np.row_stack`` set first where numpy lacks it, since numba-cuda still registers it),
    numba-cuda's ufunc table completed (``_complete_ufuncs``, then each function of ``prepare``),
    contraction into fused multiply-adds switched off (``_no_contraction``), and every helper of
    ``helpers`` (name -> the module of ``modules`` that defines it) compiled a second time, from
    the same Python function, as a CUDA device function.  Each module gets one copy of its
    globals in which every shared helper (of any of the modules) is its CUDA compilation, so that
    a helper calling another (model's calling ps's) stays on the GPU.  Returns (numba.cuda, name
    -> device function, a copy of ``kernel_globals`` with the device functions and ``cuda`` set:
    the globals to retarget the kernels to)."""
    if not hasattr(np, "row_stack"):  # numba-cuda registers np.row_stack, which numpy 2.5 removed
        np.row_stack = np.vstack
    from numba import cuda as numba_cuda

    _complete_ufuncs()
    for step in prepare:
        step()
    _no_contraction()
    module_globals = {module.__name__: dict(vars(module)) for module in modules}
    namespace = dict(kernel_globals)
    device = {
        name: numba_cuda.jit(device=True)(_retarget(getattr(module, name).py_func, module_globals[module.__name__]))
        for name, module in helpers.items()
    }
    for globals_ in (*module_globals.values(), namespace):
        globals_.update(device)
    namespace["cuda"] = numba_cuda
    return numba_cuda, device, namespace


def _complete_ufuncs() -> None:
    """Add ``np.ceil`` (used by the model's helpers) to numba-cuda's table of NumPy ufuncs, which
    lacks it (numba-cuda 0.30) although numba-cuda implements it (``npyfuncs.np_real_ceil_impl``,
    LLVM's ceil intrinsic, as on the CPU).  Nothing to do in the simulator (plain Python) or where
    the table already has it."""
    from numba.core import config

    if config.ENABLE_CUDASIM:
        return
    try:
        from numba.cuda.np import npyfuncs
        from numba.cuda.ufuncs import ufunc_db
    except ImportError:  # numba's built-in CUDA target: its ufunc table has np.ceil
        return
    table = ufunc_db()
    if np.ceil not in table:
        table[np.ceil] = {"f->f": npyfuncs.np_real_ceil_impl, "d->d": npyfuncs.np_real_ceil_impl}


def _no_contraction() -> None:
    """Compile every CUDA kernel with NVVM's ``-fma=0``: NVVM otherwise contracts a multiply and
    an add into one fused multiply-add (one rounding instead of two), which LLVM does not do on
    the CPU (the kernels never enable ``fastmath``), so the GPU's outputs would differ from the
    CPU kernel's in the last bits.  Wraps numba-cuda's ``nvvm.compile_ir`` once; nothing to do in the simulator (plain
    Python) or where numba-cuda has no such function."""
    from numba.core import config

    if config.ENABLE_CUDASIM:
        return
    try:
        from numba.cuda.cudadrv import nvvm
    except ImportError:
        return
    compile_ir = getattr(nvvm, "compile_ir", None)
    if compile_ir is None or getattr(compile_ir, "paigrid_no_fma", False):
        return

    def compile_ir_without_fma(llvmir, **options):
        options["fma"] = False
        return compile_ir(llvmir, **options)

    compile_ir_without_fma.paigrid_no_fma = True  # type: ignore[attr-defined]  # a mark on the function
    nvvm.compile_ir = compile_ir_without_fma


def launch_grid(threads: int) -> tuple[int, int]:
    """(blocks, threads per block) of a launch over ``threads`` threads."""
    return max(1, -(-threads // THREADS_PER_BLOCK)), THREADS_PER_BLOCK


def _terms_kernel(jobs, gpus, peak, class_peak, prec, options, t_data, t_flop, t_mem, fits_memory):
    """Per-(job, gpu, precision) terms of the compute model (``model.compute_terms`` on the GPU):
    one thread per (job, gpu) of ``jobs`` (J, N_JOB_FIELDS) x ``gpus`` (G, N_GPU_FIELDS); writes
    ``t_data``, ``t_flop``, ``t_mem`` [s per step] and ``fits_memory`` (uint8), all (J, G, P)."""
    jg = cuda.grid(1)
    n_gpus = gpus.shape[0]
    if jg >= jobs.shape[0] * n_gpus:
        return
    j = jg // n_gpus
    g = jg % n_gpus
    if options[O_MODEL] == MODEL_PAI_V2:
        class_terms(
            jobs[j],
            gpus[g],
            peak[g],
            class_peak[g],
            prec,
            options[O_WORKSPACE],
            t_data[j, g],
            t_flop[j, g],
            t_mem[j, g],
            fits_memory[j, g],
        )
    else:
        job_gpu_terms(
            jobs[j],
            gpus[g],
            peak[g],
            prec,
            options[O_WORKSPACE],
            t_data[j, g],
            t_flop[j, g],
            t_mem[j, g],
            fits_memory[j, g],
        )


def _configurations_kernel(
    jobs,
    n_gpu,
    arch,
    gpus,
    peak,
    prec,
    intra,
    intra_fits,
    network,
    options,
    write_cube,
    step_time,
    t_comm,
    bottleneck,
    invalid_reason,
    t_data,
    t_flop,
    t_mem,
    fits_memory,
    best_step,
    best_index,
    best_bottleneck,
):
    """Every configuration of a block of jobs, one thread per (job, gpu, n_gpu, precision).

    Arguments and outputs as ``model.evaluate_block`` (the same layouts, units and meaning; the
    cube outputs (J, A, G, N, I, W, P) are written only when ``write_cube``); ``t_data``,
    ``t_flop``, ``t_mem`` and ``fits_memory`` come from ``terms_kernel``.  The thread loops over
    (arch, intra, network) in cube order, so the first configuration wins ties in ``best_index``
    as on the CPU.  The exchange is ``model.exchange_seconds`` (the parameter-server options on
    ``ps-worker``, the ring inter-server volume on ``allreduce-cluster``); a ``ps-worker``
    configuration also pays the optimizer update on the parameter server hosts [s]
    (``ps.ps_update_fixed_seconds``), moves the ``ps.ps_wire_fraction`` of the gradient bytes,
    and with ``O_PS_MEMORY`` enters the bests when ``ps.ps_fits_memory_flag`` says it fits.
    """
    t = cuda.grid(1)
    n_gpus, n_counts, n_prec = gpus.shape[0], n_gpu.shape[1], prec.shape[0]
    if t >= jobs.shape[0] * n_gpus * n_counts * n_prec:
        return
    p = t % n_prec
    ni = (t // n_prec) % n_counts
    g = (t // (n_prec * n_counts)) % n_gpus
    j = t // (n_prec * n_counts * n_gpus)
    n_arch, n_intra, n_net = arch.shape[0], intra.shape[0], network.shape[0]
    job = jobs[j]
    gpu = gpus[g]
    k = job[J_GPUS_PER_NODE]
    samples_per_step = job[J_BATCH] * job[J_ACCUM]
    missing = derived_factor_missing(gpu, samples_per_step)
    collective = options[O_COLLECTIVE]
    topology = options[O_TOPOLOGY]
    td, tf, tm = t_data[j, g, p], t_flop[j, g, p], t_mem[j, g, p]
    fits = fits_memory[j, g, p] == 1
    base = td + tf + tm
    nbytes, backward, hops, share = precision_terms(job, tf, tm, prec[p], options)
    valid_shape = precision_reason(peak[g, p])
    # parameter server (kernels.ps): the share of S a push moves (sparse traffic), the
    # optimizer-update bytes on its hosts and whether a ps-worker GPU fits (memory per architecture)
    ps_fraction = ps_wire_fraction(job, options[O_PS_SPARSE])
    ps_bytes = ps_host_update_bytes(job, ps_fraction)
    fits_ps = ps_worker_fits(job, gpu, prec[p], fits_memory[j, g, p], options)
    n = n_gpu[j, ni]
    floor = input_floor_seconds(n, k, samples_per_step, job[J_INPUT_RATE])
    best = np.inf
    best_at = -1
    best_code = FLAG_FILL
    for a in range(n_arch):
        update = update_seconds(arch[a], n, k, job, ps_bytes, options)
        fits_arch = fits_ps if arch[a] == ARCH_PS_WORKER else fits
        unit = wire_fraction(job, n, arch[a], ps_fraction, options)  # bytes moved per byte of S
        for i in range(n_intra):
            intra_bw = intra[i, L_BW] * intra_fraction(intra[i, L_KIND], n, k, job[J_PCIE_ROOTS], topology)
            for w in range(n_net):
                shape = configuration_reason(arch[a], n, k, intra_fits[g, i] != 0, network[w, L_KIND])
                if shape == REASON_VALID and not missing:
                    net_bw, net_lat = network_terms(network[w], arch[a], n, k, collective, options[O_INTER_VOLUME])
                    per_byte, latency = exchange_terms(
                        arch[a],
                        n,
                        k,
                        job,
                        gpu[G_PCIE_BW],
                        intra_bw,
                        intra[i, L_LATENCY],
                        net_bw,
                        net_lat,
                        unit,
                        collective,
                        options,
                    )
                else:  # NaN makes every output of the configuration NaN: invalid
                    per_byte = np.nan
                    latency = np.nan
                step, tc, input_bound = configuration_step(
                    base, nbytes, per_byte, hops, latency, update, share, backward, floor
                )
                if write_cube:
                    bad = step != step  # NaN: invalid for one of the reasons 1-6
                    step_time[j, a, g, ni, i, w, p] = step
                    t_comm[j, a, g, ni, i, w, p] = np.nan if bad else tc
                    if bad:
                        bottleneck[j, a, g, ni, i, w, p] = FLAG_FILL
                        invalid_reason[j, a, g, ni, i, w, p] = shape if shape != REASON_VALID else valid_shape
                    else:
                        bottleneck[j, a, g, ni, i, w, p] = bottleneck_code(td, tf, tm, tc, input_bound)
                        invalid_reason[j, a, g, ni, i, w, p] = REASON_VALID
                rounded = np.float32(step)  # the bests compare the stored (float32) step times
                if rounded < best and fits_arch:
                    best = rounded
                    best_at = (a * n_intra + i) * n_net + w
                    best_code = bottleneck_code(td, tf, tm, tc, input_bound)
    best_step[j, g, ni, p] = best if best != np.inf else np.nan
    best_index[j, g, ni, p] = best_at
    best_bottleneck[j, g, ni, p] = best_code
