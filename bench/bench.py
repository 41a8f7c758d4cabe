"""paigrid's speed, as ratios against baselines measured in the same run on this machine.

    python bench/bench.py [--out-dir DIR] [--query-jobs N] [--quick] [--no-page]

Prints, one line each:
1. kernel configurations/s, against the numpy reference of the same model (ratio 1) and against
   the output-bandwidth bound = this machine's parallel memory-fill bandwidth / bytes written
   per configuration (ratio 2);
2. full sweep to HDF5 configurations/s, against a raw h5py write of the same bytes with the
   same chunking and filter (ratio 3);
3. reduce-only sweep configurations/s;
4. ``query --best-arch`` latency on a cube of about 10^9 configurations (in process and as a
   command), and ``paigrid --help`` wall time (warm);
5. a single configuration: the median of 1,000 warm ``predict_configs`` calls of one
   configuration (what predict, validate, calibrate and the sweep's current-configuration
   predictions do; serial kernel), against the same calls through the parallel kernel, and the
   goal (< 100 microseconds);
6. on a machine with an NVIDIA GPU, the GPU section (``bench/gpu.py``): ``--device cuda``
   reduce-only and full sweeps beside the CPU's, and the reduce kernels against a minimal
   fused-argmin CUDA kernel on the same grid; elsewhere one line saying why it is skipped.
Nothing here asserts a time.  The default run (about a minute on 2 cores) writes
``docs/speed.md``: the machine, the printed lines as they are, and the targets table computed
from the figures; whatever ``main`` prints between the header and the end is part of the page.
``--quick`` is a smoke run of a few seconds at small sizes and writes no page.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from numba import njit, prange

from paigrid.codecs import filter_kwargs
from paigrid.evaluate import allocate, evaluate_block, run_kernel
from paigrid.inputs.spec import SweepSpec
from paigrid.kernels import model, reference
from paigrid.schema import CUBE_VARIABLES
from paigrid.sweeping import prepare, run_sweep

PAGE = Path(__file__).resolve().parent.parent / "docs" / "speed.md"


def best_of(fn, repeat=3):
    """Smallest wall time [s] of ``repeat`` calls."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


@njit(parallel=True, nogil=True, cache=True)
def _fill(arrays_f4, arrays_u1):
    """Write every element of the cube's output arrays once (the output-bandwidth baseline)."""
    for k in range(len(arrays_f4)):
        a = arrays_f4[k]
        for i in prange(a.size):
            a[i] = 1.0
    for k in range(len(arrays_u1)):
        a = arrays_u1[k]
        for i in prange(a.size):
            a[i] = 1


def bench_kernel(grid, n_jobs):
    """Kernel vs numpy reference vs memory-fill bound on ``n_jobs`` jobs of the default grid."""
    jobs, n_gpu = grid.job_rows(0, n_jobs)
    out = allocate(grid, n_jobs, True)
    run_kernel(model.evaluate_block, grid, jobs, n_gpu, True, out)       # compile / warm up
    configs = grid.configs // len(grid.jobs) * n_jobs
    t_kernel = best_of(lambda: run_kernel(model.evaluate_block, grid, jobs, n_gpu, True, out))
    ref_jobs = max(1, n_jobs // 8)
    ref_out = allocate(grid, ref_jobs, True)
    t_ref = best_of(lambda: run_kernel(reference.evaluate_block, grid, jobs[:ref_jobs], n_gpu[:ref_jobs], True,
                                       ref_out), repeat=1)
    ref_rate = grid.configs // len(grid.jobs) * ref_jobs / t_ref
    f4 = [out[n].reshape(-1) for n, (d, _, _) in CUBE_VARIABLES.items() if np.dtype(d).itemsize == 4]
    u1 = [out[n].reshape(-1) for n, (d, _, _) in CUBE_VARIABLES.items() if np.dtype(d).itemsize == 1]
    from numba.typed import List

    f4l, u1l = List(f4), List(u1)
    _fill(f4l, u1l)
    t_fill = best_of(lambda: _fill(f4l, u1l), repeat=7)
    bytes_per_config = sum(np.dtype(d).itemsize for d, _, _ in CUBE_VARIABLES.values())
    fill_bw = bytes_per_config * configs / t_fill
    rate = configs / t_kernel
    bound = fill_bw / bytes_per_config
    print(f"kernel            {rate / 1e6:9.1f} M configs/s  ({configs:,} configs, {bytes_per_config} B written each)")
    print(f"  numpy reference {ref_rate / 1e6:9.2f} M configs/s   -> kernel / numpy       = {rate / ref_rate:7.1f}x")
    print(f"  fill bound      {bound / 1e6:9.1f} M configs/s   ({fill_bw / 1e9:.1f} GB/s parallel fill)"
          f" -> kernel / bound = {rate / bound:6.1%}")
    return {"kernel_rate": rate, "kernel_configs": configs, "kernel_jobs": n_jobs, "ref_jobs": ref_jobs,
            "kernel_vs_numpy": rate / ref_rate, "kernel_vs_bound": rate / bound, "fill_bw": fill_bw,
            "bytes_per_config": bytes_per_config}


SINGLE_GOAL_US = 100.0   # goal for one warm single-configuration prediction [microseconds]


def bench_single(calls: int = 1000):
    """Median wall time [us] of ``calls`` warm single-configuration ``predict_configs`` calls, as
    the engine makes them (``evaluate.kernel_for`` picks the serial kernel), and through the
    parallel kernel instead (the baseline)."""
    import statistics

    import paigrid.predict as predict
    from paigrid.inputs.catalog import Catalogues
    from paigrid.inputs.efficiency import defaults
    from paigrid.inputs.jobs import load_jobs
    from paigrid.inputs.spec import Options

    cats = Catalogues.load()
    job = load_jobs(SweepSpec(workloads=["resnet50"]), cats)[0][0]
    config = {"arch": "ps-worker", "gpu": "V100-SXM2-16GB", "n_gpu": 16, "intra": "pcie3", "network": "eth-25g",
              "precision": "fp32"}
    eff, options = defaults(), Options()

    def median_us():
        for _ in range(20):   # warm: compiled, loaded, caches filled
            predict.predict_configs([job], [config], cats, eff, options)
        times = []
        for _ in range(calls):
            start = time.perf_counter()
            predict.predict_configs([job], [config], cats, eff, options)
            times.append(time.perf_counter() - start)
        return statistics.median(times) * 1e6

    serial = median_us()
    chooser = predict.kernel_for
    predict.kernel_for = lambda configs: model.evaluate_block
    try:
        parallel = median_us()
    finally:
        predict.kernel_for = chooser
    met = "met" if serial < SINGLE_GOAL_US else "NOT met"
    print(f"single configuration {serial:6.1f} us median of {calls:,} warm predictions (serial kernel)"
          f"  -> goal < {SINGLE_GOAL_US:.0f} us: {met}")
    print(f"  parallel kernel {parallel:9.1f} us median             -> parallel / serial     ="
          f" {parallel / serial:7.1f}x")
    return {"single_us": serial, "single_parallel_us": parallel}


def bench_sweep(spec, folder, compression):
    """Full sweep rate against a raw h5py write of the same arrays, same chunks and filter."""
    import h5py

    grid, _ = prepare(spec)
    path = folder / "sweep.h5"
    warm = SweepSpec(workloads=["resnet50"])   # load the compiled kernel before timing
    run_sweep(warm, path, compression=compression, progress=False)
    path.unlink()
    start = time.perf_counter()
    run_sweep(spec, path, compression=compression, progress=False)
    t_sweep = time.perf_counter() - start
    size = path.stat().st_size
    path.unlink()
    # the raw baseline: the same arrays, each block computed untimed, then written with h5py alone
    raw = folder / "raw.h5"
    t_raw = 0.0
    with h5py.File(raw, "w") as f:
        datasets = {}
        for start_job in range(0, len(grid.jobs), spec.jobs_per_block):
            block = evaluate_block(grid, 0, start_job, min(start_job + spec.jobs_per_block, len(grid.jobs)))
            start = time.perf_counter()
            for name, array in block.arrays.items():
                if name not in datasets:
                    shape = (len(grid.jobs), *array.shape[1:])
                    per_chunk = 1 if name in CUBE_VARIABLES else spec.jobs_per_block
                    chunks = (per_chunk, *array.shape[1:])
                    datasets[name] = f.create_dataset(name, shape, array.dtype, chunks=chunks,
                                                      **filter_kwargs(compression))
                datasets[name][block.start:block.stop] = array
            t_raw += time.perf_counter() - start
    raw.unlink()
    rate, raw_rate = grid.configs / t_sweep, grid.configs / t_raw
    print(f"full sweep ({compression}) {rate / 1e6:7.1f} M configs/s  ({grid.configs:,} configs, "
          f"{size / 1e6:.0f} MB file, {t_sweep:.1f} s incl. set-up)")
    print(f"  raw h5py write  {raw_rate / 1e6:9.1f} M configs/s   -> sweep / raw write    = {rate / raw_rate:6.1%}")
    return {"sweep_rate": rate, "sweep_configs": grid.configs, "sweep_jobs": len(grid.jobs), "sweep_mb": size / 1e6,
            "sweep_vs_raw": rate / raw_rate}


def population_spec(folder: Path, jobs: int) -> SweepSpec:
    """The default grid over ``jobs`` synthetic population jobs (about 0.58 M configurations per job)."""
    from paigrid.study.population import synthetic_population
    from paigrid.study.trace import write_population

    csv_path = folder / f"population-{jobs}.csv"
    write_population(synthetic_population(jobs, seed=7), csv_path)
    return SweepSpec(workloads=str(csv_path), jobs_per_block=8)  # 8 jobs: ~100 MB of cube per block


def bench_reduce_and_query(folder: Path, jobs: int):
    """Reduce-only sweep rate on ~``jobs`` x 0.58 M configurations, then query latency on that cube."""
    from paigrid.cube import open_cube
    from paigrid.query import best_configurations

    spec = population_spec(folder, jobs)
    grid, _ = prepare(spec)
    path = folder / "big.h5"
    start = time.perf_counter()
    run_sweep(spec, path, reduce_only=True, progress=False)
    t_total = time.perf_counter() - start
    print(f"reduce-only sweep {grid.configs / t_total / 1e6:9.1f} M configs/s  ({grid.configs:,} configs,"
          f" {t_total:.1f} s incl. set-up and the current-configuration predictions)")

    def in_process():
        cube = open_cube(path)
        try:
            best_configurations(cube, "time")
        finally:
            cube.close()

    t_query = best_of(in_process)
    command = [sys.executable, "-c", "from paigrid.cli import main; main()", "query", str(path), "--best-arch",
               "--csv"]
    subprocess.run(command, check=True, capture_output=True)
    t_cli = best_of(lambda: subprocess.run(command, check=True, capture_output=True))
    print(f"query --best-arch {t_query:9.3f} s in process, {t_cli:.3f} s as a command"
          f"  ({grid.configs:,}-configuration cube, {len(grid.jobs)} jobs)")
    path.unlink()
    return {"reduce_rate": grid.configs / t_total, "reduce_configs": grid.configs, "query_jobs": len(grid.jobs),
            "query_s": t_query, "query_cli_s": t_cli}


def bench_help():
    """Warm wall time of ``paigrid --help``."""
    command = [sys.executable, "-c", "from paigrid.cli import main; main()", "--help"]
    subprocess.run(command, check=True, capture_output=True)
    t_help = best_of(lambda: subprocess.run(command, check=True, capture_output=True))
    print(f"paigrid --help    {t_help:9.3f} s (warm)")
    return {"help_s": t_help}


def bench_default_sweep(folder: Path):
    """Wall time of the README's first command's sweep (the default spec), as a command, warm."""
    path = folder / "default.h5"
    command = [sys.executable, "-c", "from paigrid.cli import main; main()", "sweep", "--out", str(path), "-q"]
    subprocess.run(command, check=True, capture_output=True)  # compile into the cache if needed
    path.unlink()
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    t_sweep = time.perf_counter() - start
    size = path.stat().st_size
    path.unlink()
    grid, _ = prepare(SweepSpec())
    print(f"paigrid sweep     {t_sweep:9.3f} s as a command, warm  (the default spec: {grid.configs:,} configs,"
          f" {len(grid.jobs)} jobs, {size / 1e6:.0f} MB file)")
    return {"default_sweep_s": t_sweep, "default_configs": grid.configs, "default_jobs": len(grid.jobs)}


def bench_llm(figures: dict):
    """The LLM kernel (``kernels.llm.evaluate_llm``): Llama-3 70B and 405B, every valid layout at
    8 .. 16,384 GPUs on every design of the default LLM sweep (GPUs x NVLink domains x networks),
    outputs preallocated, best of 3; then the whole ``paigrid llm sweep`` of the same space
    (enumeration, blocks, reduction and the HDF5 file), against the data-parallel kernel's rate
    measured in the same run."""
    from paigrid.inputs.catalog import Catalogues
    from paigrid.inputs.efficiency import defaults
    from paigrid.kernels import llm_layout as K
    from paigrid.kernels.llm import evaluate_llm
    from paigrid.llm.compute import LlmOptions
    from paigrid.llm.evaluate import tables
    from paigrid.llm.layouts import enumerate_layouts
    from paigrid.llm.models import model
    from paigrid.llm.sweep import DEFAULT_N_GPU, Plan, run_sweep

    cats, eff, options = Catalogues.load(), defaults(), LlmOptions.defaults()
    plan = Plan([model("llama3-70b"), model("llama3-405b")])
    designs = plan.designs(cats)
    work = []
    for m in plan.models:
        layouts = [lay for n in DEFAULT_N_GPU for lay in enumerate_layouts(m, n)]
        arrays = tables(m, layouts, designs, cats, eff, options)
        work.append((arrays, np.empty((len(layouts) * len(designs), K.N_RESULT_FIELDS))))
    evaluate_llm(*work[0][0], work[0][1])  # compile or load from the cache
    configs = sum(out.shape[0] for _, out in work)
    t_kernel = best_of(lambda: [evaluate_llm(*arrays, out) for arrays, out in work])
    rate = configs / t_kernel
    folder = Path(tempfile.mkdtemp(prefix="paigrid-llm-"))
    try:
        started = time.perf_counter()
        run_sweep(plan, folder / "llm.h5", cats, eff, options)
        t_sweep = time.perf_counter() - started
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    ratio = rate / figures["kernel_rate"] if "kernel_rate" in figures else float("nan")
    print(f"LLM kernel        {rate / 1e6:9.2f} M configs/s  ({configs:,} layout x design configurations: Llama-3 70B "
          f"and 405B, 8..16,384 GPUs, {len(designs)} designs)  -> LLM / data-parallel kernel = {ratio:.3f}")
    print(f"  paigrid llm sweep {configs / t_sweep / 1e6:7.2f} M configs/s  ({t_sweep:.2f} s, enumeration, blocks, "
          f"best-layout reduction and the HDF5 file included)")
    return {"llm_rate": rate, "llm_configs": configs, "llm_sweep_rate": configs / t_sweep, "llm_designs": len(designs)}


# --- the page -----------------------------------------------------------------------------------
PAGE_TEMPLATE = """\
# Speed

<!-- generated by bench/bench.py; do not edit: run `python bench/bench.py` -->

`python bench/bench.py` measures everything below in one run on the current machine, and prints
each figure next to a baseline measured in the same run. This page is that script's latest run,
written by it; the printed lines are as they came.

| | |
|---|---|
| machine | {cpu}, {cores} cores, {memory} |
| load average (1 min) at the start, at the end | {load_start:.2f}, {load_end:.2f} |
| software | Python {python}, numpy {numpy}, numba {numba}, h5py {h5py} |
| date | {date} |
| the whole run | {wall:.0f} s |

```
{output}
```

## Targets

| target ({cores} cores) | this run | met |
|---|---|---|
{targets}

The figures are rates of a shared machine: they move with its load (above) from run to run. The
ratios compare with a baseline measured in the same run, so they move less than the rates.

## How the figures are made

- **Kernel**: `model.evaluate_block` on {kernel_jobs} jobs of the default grid
  ({kernel_configs:,} configurations, outputs preallocated), best of 3, against
  `reference.evaluate_block` (the numpy implementation of the same model) on {ref_jobs} job(s),
  timed once. The **bound** is the bytes each configuration writes ({bytes_per_config}: {layout})
  divided into the bandwidth of a parallel fill of the same output arrays (numba `prange`, which
  LLVM turns into `memset`). The kernel is arithmetic per configuration, not a copy: its innermost
  loop runs branch-free over a contiguous (network x precision) row, and numba emits no
  non-temporal stores, so it sits below a `memset` on a machine whose memory keeps up. A full
  sweep is bound by compressing and writing, not by the kernel (below), and the reduce-only path
  writes almost nothing.
- **LLM kernel**: `kernels.llm.evaluate_llm` on every valid layout of Llama-3 70B and 405B at
  8 to 16,384 GPUs (powers of two) on the {llm_designs} designs of the default `paigrid llm sweep`
  ({llm_configs:,} layout x design configurations, outputs preallocated), best of 3, beside the
  data-parallel kernel above; then that whole sweep as `llm.sweep.run_sweep` (enumeration, blocks,
  best-layout reduction, HDF5 file). An LLM configuration does more arithmetic than a
  data-parallel one (five parallel degrees, memory, several collectives).
- **Single configuration**: the median of 1,000 warm `predict_configs` calls of one configuration
  (what `predict`, `validate`, `calibrate` and the sweep's current-configuration predictions do),
  through the kernel the engine picks for a few configurations (the serial one), against the same
  calls through the parallel kernel.
- **Full sweep**: `paigrid sweep` of {sweep_jobs} population jobs over the default grid
  ({sweep_configs:,} configurations, {sweep_mb:.0f} MB on disk), set-up included, against writing
  the same arrays (each block computed beforehand, untimed) with plain h5py, the same chunking and
  the same blosc-lz4 filter. The sweep compresses the chunks itself, in parallel threads that
  release the GIL (numcodecs' blosc, the format of the HDF5 blosc filter), while the next block is
  computed, and writes them with `write_direct_chunk`; HDF5's own filter pipeline compresses in one
  thread holding the GIL. With Dask the workers compress.
- **Reduce-only**: `paigrid sweep --reduce-only` of {query_jobs:,} population jobs
  ({reduce_configs:,} configurations), set-up and the current-configuration predictions included.
- **Query**: `paigrid query --best-arch` on that {reduce_configs:,}-configuration cube, in process
  and as a command. It is answered from the stored per-job reductions; the cube variables are never
  read, so a full cube of the same grid is answered from the same bytes.
- **Help**: `paigrid --help` in a fresh process after a warm-up run: the command line imports
  numpy, numba, h5py and xarray only inside the commands that need them.
- **GPU** (`bench/gpu.py`, run by this script where numba.cuda finds an NVIDIA GPU, skipped
  with the reason printed elsewhere): the reduce-only kernels of `--device cuda` over 18,000
  population jobs at once with the tables already on the GPU, best of 3, against a minimal
  fused-argmin CUDA kernel over the same threads and loop (one multiply-add chain per
  configuration on tables prepared beforehand, and the running float32 argmin: the bound), and
  against the CPU's reduce-only kernel on 1,800 jobs; then reduce-only (18,000 jobs on the GPU,
  1,800 on the CPU) and full sweeps (512 jobs each, lz4) as `paigrid sweep` runs them, set-up
  included, on each device; and the time a 10^12-configuration reduce-only study would take at
  the kernels' rate (a projection). To measure it on a GPU machine: `pip install -e
  '.[test,cuda]'`, then `python bench/bench.py` (everything, this page) or `python bench/gpu.py`
  (the GPU section alone; `--reduce-jobs`, `--full-jobs`, `--cpu-jobs` set the sizes).
- **Default sweep**: the sweep of the README's first line ({default_configs:,} configurations,
  {default_jobs} jobs) as a command, after a first run that compiled the kernels into the numba
  cache (the very first run on a machine takes a few seconds more for that).
"""


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory() -> str:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return f"{int(line.split()[1]) / 2**20:.0f} GiB memory"
    except OSError:
        pass
    return "memory unknown"


def _targets(f: dict) -> str:
    """The targets table: (target, this run, met) from the figures of the run."""
    rows = [
        ("kernel >= 8x the numpy reference", f"{f['kernel_vs_numpy']:.0f}x", f["kernel_vs_numpy"] >= 8),
        ("kernel >= 50% of the output-bandwidth bound", f"{f['kernel_vs_bound']:.0%}", f["kernel_vs_bound"] >= 0.5),
        ("full sweep >= 70% of a raw h5py write of the same bytes, same chunks and filter",
         f"{f['sweep_vs_raw']:.0%}", f["sweep_vs_raw"] >= 0.7),
        ("reduce-only >= 500 M configurations/s", f"{f['reduce_rate'] / 1e6:.0f} M/s", f["reduce_rate"] >= 500e6),
        (f"`query --best-arch` < 1 s on {f['reduce_configs'] / 1e9:.2f} x 10^9 configurations, as a command",
         f"{f['query_s']:.2f} s in process, {f['query_cli_s']:.2f} s as a command", f["query_cli_s"] < 1),
        ("`paigrid --help` < 1 s warm", f"{f['help_s']:.2f} s", f["help_s"] < 1),
        (f"one warm single-configuration prediction < {SINGLE_GOAL_US:.0f} us (median of 1,000)",
         f"{f['single_us']:.0f} us", f["single_us"] < SINGLE_GOAL_US),
    ]
    if "gpu_kernel_rate" in f:  # the GPU section ran (a GPU was found)
        rows += [("GPU reduce kernels >= 50% of the same-run fused-argmin bound",
                  f"{f['gpu_kernel_rate'] / f['gpu_bound_rate']:.0%}",
                  f["gpu_kernel_rate"] >= 0.5 * f["gpu_bound_rate"]),
                 ("a 10^12-configuration reduce-only study < 60 s on one GPU (projected from the kernels' rate)",
                  f"{f['gpu_study_s']:.0f} s", f["gpu_study_s"] < 60)]
    return "\n".join(f"| {t} | {v} | {'yes' if ok else '**no**'} |" for t, v, ok in rows)


def write_page(page: Path, output: str, figures: dict, load_start: float, wall: float) -> None:
    import h5py
    import numba

    layout = {}
    for dtype, _, _ in CUBE_VARIABLES.values():
        layout[np.dtype(dtype).name] = layout.get(np.dtype(dtype).name, 0) + 1
    text = PAGE_TEMPLATE.format(
        cpu=_cpu(), cores=os.cpu_count(), memory=_memory(), load_start=load_start, load_end=os.getloadavg()[0],
        python=platform.python_version(), numpy=np.__version__, numba=numba.__version__, h5py=h5py.__version__,
        date=time.strftime("%Y-%m-%d"), wall=wall, output=output.rstrip(), targets=_targets(figures),
        layout=", ".join(f"{n} {name}" for name, n in layout.items()), **figures)
    page.write_text(text, encoding="utf-8")


class _Tee(io.StringIO):
    """Prints as usual and keeps a copy of what was printed (the page's output block)."""

    def write(self, text):
        sys.__stdout__.write(text)
        sys.__stdout__.flush()
        return super().write(text)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", type=Path, default=None,
                        help="where the bench writes its files (default: a temp dir)")
    parser.add_argument("--query-jobs", type=int, default=1800, help="jobs of the ~10^9-configuration query cube")
    parser.add_argument("--kernel-jobs", type=int, default=8)
    parser.add_argument("--sweep-jobs", type=int, default=512, help="population jobs of the full-sweep comparison")
    parser.add_argument("--compression", default="lz4")
    parser.add_argument("--gpu-jobs", type=int, nargs=3, default=(18000, 512, 1800),
                        metavar=("REDUCE", "FULL", "CPU"), help="jobs of the GPU section (bench/gpu.py)")
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run (writes no page)")
    parser.add_argument("--page", type=Path, default=PAGE, help="where to write the page (default: docs/speed.md)")
    parser.add_argument("--no-page", action="store_true", help="only print the figures")
    parser.add_argument("--llm-only", action="store_true", help="only the two kernels' lines (writes no page)")
    args = parser.parse_args()
    if args.quick:
        args.query_jobs, args.kernel_jobs, args.sweep_jobs, args.gpu_jobs = 40, 2, 8, (40, 8, 8)
    folder = Path(tempfile.mkdtemp(prefix="paigrid-bench-", dir=args.out_dir))
    load_start, start = os.getloadavg()[0], time.perf_counter()
    figures = {}
    try:
        with contextlib.redirect_stdout(_Tee()) as output:
            print(f"paigrid bench on {os.cpu_count()} cores, {time.strftime('%Y-%m-%d')}")
            grid, _ = prepare(SweepSpec())
            figures.update(bench_kernel(grid, args.kernel_jobs))
            figures.update(bench_llm(figures))
            if args.llm_only:
                return
            figures.update(bench_single())
            sweep_spec = population_spec(folder, args.sweep_jobs)
            figures.update(bench_sweep(sweep_spec, folder, args.compression))
            figures.update(bench_reduce_and_query(folder, args.query_jobs))
            figures.update(bench_help())
            figures.update(bench_default_sweep(folder))
            from gpu import bench_gpu  # bench/gpu.py, beside this file

            figures.update(bench_gpu(lambda jobs: population_spec(folder, jobs), folder, *args.gpu_jobs))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if not (args.quick or args.no_page or args.llm_only):
        write_page(args.page, output.getvalue(), figures, load_start, time.perf_counter() - start)
        print(f"wrote {args.page}")


if __name__ == "__main__":
    main()
