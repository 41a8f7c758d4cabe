"""The bench's GPU section: ``--device cuda`` beside the CPU and against a minimal fused-argmin
CUDA kernel on the same grid, all in one run.

    python bench/gpu.py [--reduce-jobs N] [--full-jobs N] [--cpu-jobs N] [--quick]

``bench/bench.py`` calls ``bench_gpu``; where numba.cuda finds no GPU it prints one line saying
why and measures nothing.  Figures, in configurations/s, on the default grid over synthetic
population jobs (about 0.58 M configurations per job):

1. **reduce kernels alone**: the compute-terms and configurations kernels of
   ``paigrid.kernels.cuda`` (reduce-only) over ``--reduce-jobs`` jobs at once, tables already on
   the GPU (no Python loop, no I/O), best of 3; beside the CPU's reduce-only kernel
   (``model.evaluate_block``, every core) on ``--cpu-jobs`` jobs of the same grid;
2. **the bound**: a minimal fused-argmin kernel over the same threads (one per (job, gpu, n_gpu,
   precision)) and the same loop over (arch, intra, network): per configuration one multiply-add
   chain on tables prepared beforehand and the running float32 argmin; no validity rules, no
   communication model.  Goal: the reduce kernels >= 50% of it;
3. **the commands**: ``run_sweep`` (what ``paigrid sweep`` runs, set-up included) reduce-only on
   ``--reduce-jobs`` jobs on the GPU and ``--cpu-jobs`` on the CPU; full sweeps to HDF5 (lz4) on
   ``--full-jobs`` jobs on each device;
4. the time a 10^12-configuration reduce-only study would take at the measured kernel rate (a
   projection from figure 1, said as one; the goal is under a minute on one H200-class GPU).

Nothing here asserts a time.  ``--quick`` runs a small grid in seconds (a smoke run; with
``NUMBA_ENABLE_CUDASIM=1`` it runs in numba's CUDA simulator, whose rates mean nothing).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from paigrid.evaluate import allocate, run_kernel
from paigrid.inputs.spec import SweepSpec
from paigrid.kernels import model
from paigrid.sweeping import prepare, run_sweep

#: the configurations of the study the GPU goal names
STUDY_CONFIGS = 1e12
cuda = None  # numba.cuda, set by ``_bound_kernel_compiled`` before the bound kernel is compiled


def gpu_skip_reason() -> str:
    """Why the GPU section cannot run here ("" when it can)."""
    from paigrid.errors import PaigridError
    from paigrid.gpu import cuda_kernels

    try:
        cuda_kernels()
    except PaigridError as exc:
        return str(exc)
    return ""


def _best_of(fn, repeat=3) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def _argmin_bound(base, nbytes, n_gpu, per_byte, latency, best_step, best_index):
    """The bound: one thread per (job, gpu, n_gpu, precision) of ``base`` (J, G, P) [s] and
    ``n_gpu`` (J, N); over every (arch, intra, network) c, step = base + bytes x ring factor x
    ``per_byte[c]`` [s/byte] + n x ``latency[c]`` [s]; the float32 argmin into ``best_step``
    (J, G, N, P) and ``best_index``."""
    t = cuda.grid(1)
    n_jobs, n_gpus, n_prec = base.shape
    n_counts = n_gpu.shape[1]
    if t >= n_jobs * n_gpus * n_counts * n_prec:
        return
    p = t % n_prec
    ni = (t // n_prec) % n_counts
    g = (t // (n_prec * n_counts)) % n_gpus
    j = t // (n_prec * n_counts * n_gpus)
    n = n_gpu[j, ni]
    b = base[j, g, p]
    volume = nbytes[j, p] * 2.0 * (n - 1.0) / n
    best = np.inf
    at = -1
    for c in range(per_byte.shape[0]):
        rounded = np.float32(b + volume * per_byte[c] + n * latency[c])
        if rounded < best:
            best = rounded
            at = c
    best_step[j, g, ni, p] = best
    best_index[j, g, ni, p] = at


_BOUND = {}


def _bound_kernel_compiled(numba_cuda):
    global cuda
    cuda = numba_cuda
    if "kernel" not in _BOUND:
        _BOUND["kernel"] = numba_cuda.jit(_argmin_bound)
    return _BOUND["kernel"]


def bench_gpu_kernels(grid, jobs: int, cpu_jobs: int) -> dict:
    """Figures 1, 2 and 4: the reduce kernels alone on the GPU and on the CPU, and the bound."""
    from paigrid.gpu import CudaBlocks, launch_grid
    from paigrid.kernels import layout as L

    per_job = grid.configs // len(grid.jobs)
    rows, counts = grid.job_rows(0, jobs)
    gpu = CudaBlocks(grid, jobs, write_cube=False)
    cuda_mod = gpu.kernels.cuda

    def reduce_kernels():
        gpu.run_kernels(rows, counts)
        gpu.stream.synchronize()

    reduce_kernels()  # compile
    t_gpu = _best_of(reduce_kernels)
    # the bound's inputs: the same per-(job, gpu, precision) base times, prepared on the GPU beforehand
    out = gpu.run_kernels(rows, counts)
    base = out["t_data"].copy_to_host() + out["t_flop"].copy_to_host() + out["t_mem"].copy_to_host()
    _, a, g, n, i, w, p = grid.shape
    nbytes = rows[:, L.J_PARAMS, None] * grid.prec_table[None, :, L.P_COMM_BYTES]
    links = np.array(
        [
            (
                1.0 / min(grid.intra_table[ii, L.L_BW], grid.network_table[ww, L.L_BW] or np.inf),
                grid.intra_table[ii, L.L_LATENCY] + grid.network_table[ww, L.L_LATENCY],
            )
            for _ in range(a)
            for ii in range(i)
            for ww in range(w)
        ]
    )
    d = {
        name: cuda_mod.to_device(np.ascontiguousarray(x))
        for name, x in (
            ("base", base),
            ("nbytes", nbytes),
            ("n_gpu", counts),
            ("per_byte", links[:, 0]),
            ("latency", links[:, 1]),
        )
    }
    best = cuda_mod.device_array((jobs, g, n, p), np.float64)
    index = cuda_mod.device_array((jobs, g, n, p), np.int32)
    kernel = _bound_kernel_compiled(cuda_mod)
    blocks, threads = launch_grid(jobs * g * n * p)

    def bound():
        kernel[blocks, threads](d["base"], d["nbytes"], d["n_gpu"], d["per_byte"], d["latency"], best, index)
        cuda_mod.synchronize()

    bound()  # compile
    t_bound = _best_of(bound)
    # the CPU's reduce-only kernel (every core) on fewer jobs of the same grid
    cpu_rows, cpu_counts = grid.job_rows(0, cpu_jobs)
    buffers = allocate(grid, cpu_jobs, False)
    run_kernel(model.evaluate_block, grid, cpu_rows, cpu_counts, False, buffers)
    t_cpu = _best_of(lambda: run_kernel(model.evaluate_block, grid, cpu_rows, cpu_counts, False, buffers))
    rate, bound_rate, cpu_rate = per_job * jobs / t_gpu, per_job * jobs / t_bound, per_job * cpu_jobs / t_cpu
    print(
        f"gpu reduce kernels {rate / 1e9:8.2f} G configs/s  ({per_job * jobs:,} configs, {jobs} jobs, tables on "
        f"the GPU, best of 3)"
    )
    print(
        f"  fused-argmin bound {bound_rate / 1e9:6.2f} G configs/s   -> kernels / bound      = {rate / bound_rate:6.1%}"
    )
    print(
        f"  cpu reduce kernel {cpu_rate / 1e9:7.2f} G configs/s   -> gpu / cpu            = {rate / cpu_rate:6.1f}x"
        f"  ({cpu_jobs} jobs)"
    )
    print(f"  10^12 configurations at the kernels' rate: {STUDY_CONFIGS / rate:.0f} s (a projection, not a run)")
    return {
        "gpu_kernel_rate": rate,
        "gpu_bound_rate": bound_rate,
        "gpu_cpu_kernel_rate": cpu_rate,
        "gpu_study_s": STUDY_CONFIGS / rate,
    }


def bench_gpu_sweeps(spec_for, folder: Path, reduce_jobs: int, full_jobs: int, cpu_jobs: int) -> dict:
    """Figure 3: the sweeps on each device (``spec_for(jobs)``: the spec of that many jobs)."""
    figures = {}
    for label, jobs, reduce_only in (("reduce-only", reduce_jobs, True), ("full", full_jobs, False)):
        rates = {}
        for device, n in (("cuda", jobs), ("cpu", cpu_jobs if reduce_only else jobs)):
            spec = spec_for(n)
            path = folder / f"{device}-{label}.h5"
            warm = spec_for(1)  # compile (GPU and CPU) before timing
            run_sweep(warm, folder / "warm.h5", reduce_only=reduce_only, progress=False, device=device)
            (folder / "warm.h5").unlink()
            configs = prepare(spec)[0].configs
            start = time.perf_counter()
            run_sweep(spec, path, reduce_only=reduce_only, progress=False, device=device)
            rates[device] = configs / (time.perf_counter() - start)
            path.unlink()
            print(
                f"{label + ' sweep':<18} {device:<4} {rates[device] / 1e6:9.1f} M configs/s  ({configs:,} configs, "
                "set-up included)"
            )
        print(f"  -> cuda / cpu = {rates['cuda'] / rates['cpu']:.1f}x")
        figures[f"gpu_{label}_sweep_rate"] = rates["cuda"]
        figures[f"cpu_{label}_sweep_rate"] = rates["cpu"]
    return figures


def bench_gpu(spec_for, folder: Path, reduce_jobs: int, full_jobs: int, cpu_jobs: int) -> dict:
    """The GPU section (figures 1-4), or one line saying why it is skipped."""
    reason = gpu_skip_reason()
    if reason:
        print(f"gpu               skipped: {reason}")
        return {"gpu_skipped": reason}
    grid, _ = prepare(spec_for(reduce_jobs))
    figures = bench_gpu_kernels(grid, reduce_jobs, cpu_jobs)
    figures.update(bench_gpu_sweeps(spec_for, folder, reduce_jobs, full_jobs, cpu_jobs))
    return figures


def quick_spec(jobs: int) -> SweepSpec:
    """A small grid over the first ``jobs`` built-in workloads, for smoke runs."""
    from paigrid.inputs.catalog import load

    names = load("workloads").names
    return SweepSpec(
        workloads=names[:jobs],
        gpu=["V100", "H100"],
        n_gpu=[1, 8],
        intra=["pcie3"],
        network=["none", "eth-100g"],
        precision=["fp32", "amp-fp16"],
        jobs_per_block=2,
    )


def main():
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from specs import population_spec  # bench/specs.py, beside this file

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reduce-jobs", type=int, default=18000, help="jobs of the GPU reduce-only figures")
    parser.add_argument("--full-jobs", type=int, default=512, help="jobs of the full sweeps, on each device")
    parser.add_argument("--cpu-jobs", type=int, default=1800, help="jobs of the CPU reduce-only figures")
    parser.add_argument("--quick", action="store_true", help="a small grid, a smoke run of a few seconds")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="paigrid-gpu-bench-") as name:
        folder = Path(name)
        if args.quick:
            args.reduce_jobs = args.full_jobs = args.cpu_jobs = 2
            spec_for = quick_spec
        else:

            def spec_for(jobs):
                return population_spec(folder, jobs)

        bench_gpu(spec_for, folder, args.reduce_jobs, args.full_jobs, args.cpu_jobs)


if __name__ == "__main__":
    main()
