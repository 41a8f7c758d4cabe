"""paigrid's speed, as ratios against baselines and bounds measured in the same run on this machine.

    python bench/bench.py [--quick] [--out-dir DIR] [--page PAGE] [--no-page] [--llm-only]
                          [--only scans,reduce,blockcost]

Two profiles: ``--quick`` (under two minutes on 2 cores; writes docs/speed.md unless
``--no-page``) and the full one (the default: larger sweeps, the 10^10-configuration reduce-only
study, a million-job table).  Every figure is printed next to the baseline or bound it is
compared with, measured in the same run; baselines are warm (a first untimed call) and repeated,
reported as min / median / max.  Nothing here asserts a time: the page's goals table says which
goals are met and, where one is missed, by how much.  Commands run as an installed paigrid runs
them, with its bytecode compiled first (``bench/installed.py``).

The lines (each section's function says how it measures):
1. the block kernel (full cube) against the numpy reference and a parallel fill of its outputs;
   the LLM kernel (``kernels.llm.evaluate_llm``) and ``paigrid llm sweep`` beside it; the wide
   LLM layout search of GPT-3 175B on 1,024 A100 in process and as a command beside Calculon's
   recorded figures (``bench/llm_search.py``);
2. a single warm configuration (serial kernel) against the parallel kernel;
3. the full sweep (``run_sweep`` with the CLI's defaults) against its two limits: compressing the
   same chunks on every core, and writing the already-compressed chunks with
   ``write_direct_chunk``;
4. queries on that full cube (stored best, scans) against the decompression floor (reading every
   chunk of the scanned variables that holds a selected configuration);
5. reduce-only: the kernel alone on prebuilt tables against a same-model fused argmin
   (``bench/bounds.py``) and against the ``paigrid sweep --reduce-only`` command on the same grid;
   the kernel with one thread and with every thread; the writer's time per block against the
   block's compute time (``bench/blockcost.py``);
6. job tables: seconds and memory per job of building them (the population read, the job table
   and the current-configuration predictions), and the memory of one block;
7. the CLI's defaults: ``paigrid --help`` and ``paigrid sweep`` as commands, and the first
   run's overhead (``paigrid sweep`` with an empty numba cache against a warm one, then the
   LLM ``predict --layout best`` on that cache, first against second);
8. on a machine with an NVIDIA GPU, the GPU section (``bench/gpu.py``): ``--device cuda``
   reduce-only and full sweeps beside the CPU's, and the reduce kernels against a minimal
   fused-argmin CUDA kernel on the same grid; elsewhere one line saying why it is skipped.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from numba import njit, prange

sys.path.insert(0, str(Path(__file__).resolve().parent))

from blockcost import block_costs  # noqa: E402
from bounds import run_fused  # noqa: E402
from installed import compile_paigrid  # noqa: E402
from specs import population_spec  # noqa: E402

from paigrid import orchestration  # noqa: E402
from paigrid.evaluate import allocate, encode_cube, evaluate_block, run_kernel  # noqa: E402
from paigrid.inputs.spec import SweepSpec  # noqa: E402
from paigrid.kernels import model, reference  # noqa: E402
from paigrid.orchestration import prepare, run_sweep, sweep_blocks  # noqa: E402
from paigrid.schema import BEST_VARIABLES, CUBE_VARIABLES, JOB_GPU_VARIABLES  # noqa: E402

PAGE = Path(__file__).resolve().parent.parent / "docs" / "speed.md"
COMMAND = [sys.executable, "-c", "from paigrid.cli import main; main()"]


def timed(fn, repeat=3, warm=True):
    """(min, median, max) wall time [s] of ``repeat`` calls of ``fn``, after one untimed call
    when ``warm``."""
    if warm:
        fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times), statistics.median(times), max(times)


def timed_pair(first, second, repeat=3):
    """``timed`` of two functions, their calls alternating (so that both see the same load)."""
    first()
    second()
    times = ([], [])
    for _ in range(repeat):
        for fn, out in zip((first, second), times):
            start = time.perf_counter()
            fn()
            out.append(time.perf_counter() - start)
    return [(min(t), statistics.median(t), max(t)) for t in times]


def spread(times, configs=None) -> str:
    """'min / median / max' of times [s], or of rates [M configurations/s] when ``configs``."""
    if configs is None:
        return " / ".join(f"{t:.3g}" for t in times) + " s"
    return " / ".join(f"{configs / t / 1e6:,.0f}" for t in sorted(times, reverse=True)) + " M/s"


def line(label, value, note=""):
    """One printed line of the bench: label, value, what it is compared with."""
    print(f"{label:<34} {value:>22}  {note}".rstrip())


def ratio_line(label, ratio, against):
    """One printed ratio of the bench and the same-run baseline it is taken against."""
    print(f"  {label:<32} {ratio:>22}  (against {against})")


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


# --- 1. the block kernel --------------------------------------------------------------------------
def bench_kernel(grid, n_jobs):
    """Kernel (full cube) vs the numpy reference (warm, repeated) vs a parallel fill of its outputs."""
    from numba.typed import List

    jobs, n_gpu = grid.job_rows(0, n_jobs)
    out = allocate(grid, n_jobs, True)
    configs = grid.configs // len(grid.jobs) * n_jobs
    f4 = List([out[n].reshape(-1) for n, (d, _, _) in CUBE_VARIABLES.items() if np.dtype(d).itemsize == 4])
    u1 = List([out[n].reshape(-1) for n, (d, _, _) in CUBE_VARIABLES.items() if np.dtype(d).itemsize == 1])
    t_kernel, t_fill = timed_pair(
        lambda: run_kernel(model.evaluate_block, grid, jobs, n_gpu, True, out), lambda: _fill(f4, u1), 5
    )
    ref_out = allocate(grid, 1, True)
    t_ref = timed(lambda: run_kernel(reference.evaluate_block, grid, jobs[:1], n_gpu[:1], True, ref_out), 2)
    ref_configs = grid.configs // len(grid.jobs)
    bytes_per_config = sum(np.dtype(d).itemsize for d, _, _ in CUBE_VARIABLES.values())
    rate, ref_rate, fill_rate = configs / t_kernel[0], ref_configs / t_ref[0], configs / t_fill[0]
    line("kernel, full cube", spread(t_kernel, configs), f"{configs:,} configs, {bytes_per_config} B written each")
    line("  numpy reference", spread(t_ref, ref_configs), "1 job, warm")
    line("  parallel fill of the outputs", spread(t_fill, configs), f"{bytes_per_config * fill_rate / 1e9:.1f} GB/s")
    ratio_line("kernel / numpy", f"{rate / ref_rate:.1f}x", "the numpy reference, best of each")
    ratio_line("kernel / fill", f"{rate / fill_rate:.0%}", "the fill, best of each")
    return {
        "kernel_rate": rate,
        "kernel_configs": configs,
        "kernel_jobs": n_jobs,
        "kernel_vs_numpy": rate / ref_rate,
        "kernel_vs_fill": rate / fill_rate,
        "bytes_per_config": bytes_per_config,
    }


def bench_llm(figures: dict):
    """The LLM kernel (``kernels.llm.evaluate_llm``): Llama-3 70B and 405B, every valid layout at
    8 .. 16,384 GPUs on every design of the default LLM sweep (GPUs x NVLink domains x networks),
    outputs preallocated, warm, repeated; then the whole ``paigrid llm sweep`` of the same space
    (enumeration, blocks, reduction and the HDF5 file), against the data-parallel kernel's rate
    [configurations/s] measured in the same run (``figures["kernel_rate"]``)."""
    from paigrid.inputs.catalog import Catalogues
    from paigrid.inputs.efficiency import defaults
    from paigrid.kernels import llm_columns as K
    from paigrid.kernels.llm import evaluate_llm
    from paigrid.llm.evaluate import tables
    from paigrid.llm.grid import DEFAULT_N_GPU
    from paigrid.llm.models import model as llm_model
    from paigrid.llm.parallelism import enumerate_layouts
    from paigrid.llm.sweep import alias_spec
    from paigrid.llm.tables import LlmOptions
    from paigrid.orchestration import prepare_families, run_sweep

    cats, eff, options = Catalogues.load(), defaults(), LlmOptions.defaults()
    names = ["llama3-70b", "llama3-405b"]
    spec = alias_spec(names, domains=[8, 72])  # the default paigrid llm sweep of before, on 8- and 72-GPU domains
    designs = prepare_families(spec)[1].designs()
    work = []
    for m in map(llm_model, names):
        layouts = [lay for n in DEFAULT_N_GPU for lay in enumerate_layouts(m, n)]
        arrays = tables(m, layouts, designs, cats, eff, options)
        work.append((arrays, np.empty((len(layouts) * len(designs), K.N_RESULT_FIELDS))))
    configs = sum(out.shape[0] for _, out in work)
    t_kernel = timed(lambda: [evaluate_llm(*arrays, out) for arrays, out in work], 3)  # warm: compiled or cached
    rate = configs / t_kernel[0]
    folder = Path(tempfile.mkdtemp(prefix="paigrid-llm-"))
    try:
        started = time.perf_counter()
        run_sweep(spec, folder / "llm.h5", reduce_only=True, progress=False)  # paigrid llm sweep
        t_sweep = time.perf_counter() - started
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    ratio = rate / figures["kernel_rate"] if "kernel_rate" in figures else float("nan")
    rates = " / ".join(f"{configs / t / 1e6:,.2f}" for t in sorted(t_kernel, reverse=True)) + " M/s"
    line(
        "LLM kernel",
        rates,
        f"{configs:,} layout x design configs: Llama-3 70B and 405B, 8..16,384 GPUs, {len(designs)} designs",
    )
    ratio_line("LLM / data-parallel kernel", f"{ratio:.3f}", "the full-cube kernel above, best of each")
    line(
        "  paigrid llm sweep",
        f"{configs / t_sweep / 1e6:,.2f} M/s",
        f"{t_sweep:.2f} s, enumeration, blocks, best-layout reduction and the HDF5 file included",
    )
    return {"llm_rate": rate, "llm_configs": configs, "llm_sweep_rate": configs / t_sweep, "llm_designs": len(designs)}


# --- 2. a single configuration -------------------------------------------------------------------
SINGLE_GOAL_US = 100.0  # goal for one warm single-configuration prediction [microseconds]


def bench_single(calls: int = 1000):
    """Median wall time [us] of ``calls`` warm single-configuration ``predict_configs`` calls, as
    the engine makes them (``evaluate.kernel_for`` picks the serial kernel), and through the
    parallel kernel instead (the baseline)."""
    import statistics

    import paigrid.evaluate as evaluate
    import paigrid.predict as predict
    from paigrid.inputs.catalog import Catalogues
    from paigrid.inputs.efficiency import defaults
    from paigrid.inputs.jobs import load_jobs
    from paigrid.inputs.spec import Options

    cats = Catalogues.load()
    job = load_jobs(SweepSpec(workloads=["resnet50"]), cats)[0][0]
    config = {
        "arch": "ps-worker",
        "gpu": "V100-SXM2-16GB",
        "n_gpu": 16,
        "intra": "pcie3",
        "network": "eth-25g",
        "precision": "fp32",
    }
    eff, options = defaults(), Options()

    def median_us():
        for _ in range(20):  # warm: compiled, loaded, caches filled
            predict.predict_configs([job], [config], cats, eff, options)
        times = []
        for _ in range(calls):
            start = time.perf_counter()
            predict.predict_configs([job], [config], cats, eff, options)
            times.append(time.perf_counter() - start)
        return statistics.median(times) * 1e6

    serial = median_us()
    chooser = evaluate.kernel_for  # predict imports it from evaluate at each call
    evaluate.kernel_for = lambda configs: model.evaluate_block
    try:
        parallel = median_us()
    finally:
        evaluate.kernel_for = chooser
    line("single configuration", f"{serial:.1f} us", f"median of {calls:,} warm predictions, serial kernel")
    line("  parallel kernel", f"{parallel:.1f} us", "the same calls")
    ratio_line("parallel / serial", f"{parallel / serial:.1f}x", "the serial kernel")
    return {"single_us": serial, "single_parallel_us": parallel}


# --- 3. the full sweep and its limits -------------------------------------------------------------
def bench_sweep(spec, folder, compression, repeat):
    """``run_sweep`` with the CLI's defaults, against compressing the same chunks on every core
    and writing the already-compressed chunks with ``write_direct_chunk`` (both block by block,
    each block computed beforehand, untimed).  Leaves the cube at folder/full.h5 for the queries."""
    import h5py
    import numba

    from paigrid.codecs import chunk_corners, filter_kwargs

    grid, _ = prepare(spec)
    path = folder / "full.h5"
    run_sweep(SweepSpec(workloads=["resnet50"]), folder / "warm.h5", compression=compression, progress=False)
    times = []
    for _ in range(repeat):
        path.unlink(missing_ok=True)
        start = time.perf_counter()
        result = run_sweep(spec, path, compression=compression, progress=False)
        times.append(time.perf_counter() - start)
    size = path.stat().st_size
    blocks, chunks = sweep_blocks(grid, spec.jobs_per_block, False)
    t_compress = t_write = 0.0
    raw = folder / "direct.h5"
    with h5py.File(raw, "w") as f:
        datasets = {
            name: f.create_dataset(name, grid.shape, dtype, chunks=chunks, **filter_kwargs(compression))
            for name, (dtype, _, _) in CUBE_VARIABLES.items()
        }
        for index, (first, stop) in enumerate(blocks):
            block = evaluate_block(grid, index, first, stop, True)  # untimed
            start = time.perf_counter()
            encode_cube(block, compression, chunks)  # every core (numba's thread count)
            t_compress += time.perf_counter() - start
            start = time.perf_counter()
            corners = chunk_corners((stop - first, *grid.shape[1:]), chunks)
            for name, encoded in block.chunks.items():
                for corner, chunk in zip(corners, encoded):
                    datasets[name].id.write_direct_chunk((first + corner[0], *corner[1:]), chunk)
            f.flush()
            t_write += time.perf_counter() - start
    raw.unlink()
    configs = grid.configs
    rate, compress_rate, write_rate = configs / min(times), configs / t_compress, configs / t_write
    bound = min(compress_rate, write_rate)
    line(
        f"full sweep ({compression})",
        spread(times, configs),
        f"{configs:,} configs, {result.blocks} blocks, {size / 1e6:.0f} MB, CLI defaults",
    )
    line(
        f"  compress on {numba.config.NUMBA_NUM_THREADS} threads",
        f"{compress_rate / 1e6:,.0f} M/s",
        "the same chunks, block by block",
    )
    line("  write_direct_chunk", f"{write_rate / 1e6:,.0f} M/s", "the same compressed chunks, flushed per block")
    ratio_line(
        "sweep / smaller limit", f"{rate / bound:.0%}", "compression" if compress_rate < write_rate else "writing"
    )
    return {
        "sweep_rate": rate,
        "sweep_configs": configs,
        "sweep_jobs": len(grid.jobs),
        "sweep_mb": size / 1e6,
        "sweep_blocks": result.blocks,
        "sweep_vs_limit": rate / bound,
        "compress_rate": compress_rate,
        "write_rate": write_rate,
        "sweep_limit_is": "compression" if compress_rate < write_rate else "writing",
    }


# --- 4. queries on the full cube ------------------------------------------------------------------
def bench_queries(folder, network):
    """``paigrid query`` as a command on the full cube: --best-arch (answered from the stored
    bests), --top 3 and --where network=... (scans of the cube), against the decompression floor
    of each scan: h5py reading (and decompressing) every chunk of step_time that the scan must
    read (every chunk for --top 3; for --where, the chunks of that network, which are fewer when
    the cube is chunked along network), job by job into one buffer.  step_time is what a scan
    ranks by; it also reads the bottleneck codes of its result rows (a chunk or a few of a job's,
    uint8), which the floor leaves out, so the floor is a little below what the scan must read.
    The floor before (step_time and invalid_reason, which no scan reads, each read whole into
    one array, whose page faults cost more than the decompression of its 1.2 GB) is printed
    beside it."""
    import h5py
    import hdf5plugin  # noqa: F401  (the blosc filters)

    path = folder / "full.h5"
    with h5py.File(path, "r") as f:
        w = [label.decode() if isinstance(label, bytes) else str(label) for label in f["network"][:]].index(network)
        chunks = f["step_time"].chunks

    def command(*extra):
        return lambda: subprocess.run(
            [*COMMAND, "query", str(path), "--best-arch", "--csv", *extra], check=True, capture_output=True
        )

    def floor(region=()):
        def read():
            with h5py.File(path, "r") as f:
                d = f["step_time"]
                buffer = np.empty(d[(0, *region)].shape, d.dtype)
                for j in range(len(d)):
                    d.read_direct(buffer, (j, *region))

        return read

    def floor_before(region=()):
        def read():
            with h5py.File(path, "r") as f:
                for name in ("step_time", "invalid_reason"):
                    f[name][(slice(None), *region)]

        return read

    t_best = timed(command(), 3)
    t_top = timed(command("--top", "3"), 1)
    t_where = timed(command("--where", f"network={network}"), 1)
    region = (slice(None),) * 4 + (slice(w, w + 1),)
    t_floor, t_floor_before = timed_pair(floor(), floor_before(), 3)
    t_where_floor, t_where_floor_before = timed_pair(floor(region), floor_before(region), 3)
    line("query --best-arch (stored bests)", spread(t_best), "command, warm")
    line("query --best-arch --top 3", spread(t_top), "command, a scan of the cube")
    line(f"query --where network={network}", spread(t_where), "command, a scan of the cube")
    line("  decompression floor", spread(t_floor), "h5py reads every chunk of step_time, job by job")
    line(
        f"  floor of network={network}",
        spread(t_where_floor),
        f"h5py reads the chunks of that network, job by job (chunks {'x'.join(map(str, chunks))})",
    )
    line(
        "  floors before",
        f"{t_floor_before[0]:.3g} / {t_where_floor_before[0]:.3g} s",
        "step_time and invalid_reason, whole",
    )
    ratio_line("--top 3 / floor", f"{t_top[0] / t_floor[0]:.1f}x", "the decompression floor")
    ratio_line("--where / its floor", f"{t_where[0] / t_where_floor[0]:.1f}x", "the floor of that network")
    return {
        "query_best_s": t_best[0],
        "query_top_s": t_top[0],
        "query_where_s": t_where[0],
        "floor_s": t_floor[0],
        "where_floor_s": t_where_floor[0],
        "floor_before_s": t_floor_before[0],
        "where_floor_before_s": t_where_floor_before[0],
        "cube_chunks": "x".join(map(str, chunks)),
    }


# --- 5. reduce-only -----------------------------------------------------------------------------------
def reduce_tables(grid, start=0, stop=None):
    """The prebuilt tables of jobs[start:stop]: job table, counts, reduce-only outputs with the
    per-(job, gpu, precision) terms filled."""
    stop = len(grid.jobs) if stop is None else stop
    jobs, n_gpu = grid.job_rows(start, stop)
    out = allocate(grid, stop - start, False)
    run_kernel(model.evaluate_block, grid, jobs, n_gpu, False, out)
    return jobs, n_gpu, out


def reduce_kernel(grid, jobs, n_gpu, out):
    """One call of the block kernel, reduce-only, on prebuilt tables."""
    model.evaluate_block(
        jobs,
        n_gpu,
        grid.arch_codes,
        grid.gpu_table,
        grid.peak,
        grid.prec_table,
        grid.intra_table,
        grid.intra_fits,
        grid.network_table,
        grid.options,
        False,
        *(out[n] for n in CUBE_VARIABLES),
        *(out[n] for n in JOB_GPU_VARIABLES),
        *(out[n] for n in BEST_VARIABLES),
    )


def bench_reduce(folder, jobs, repeat):
    """At ~``jobs`` x 0.58 M configurations: the reduce kernel alone on prebuilt tables (one call
    over every job: no Python loop, no I/O), the fused argmin of the same model on the same
    tables (the bound; its bests are checked equal to the kernel's), and ``paigrid sweep
    --reduce-only`` as a command with the CLI's defaults (warm: a first run untimed)."""
    spec = population_spec(folder, jobs)
    grid, _ = prepare(spec)
    t_kernel, t_fused, same = _kernel_and_bound(grid, repeat)
    path = folder / f"reduce-{jobs}.h5"
    command = [*COMMAND, "sweep", "--workloads", spec.workloads, "--reduce-only", "--out", str(path), "-q"]

    def run_command():
        path.unlink(missing_ok=True)
        subprocess.run(command, check=True, capture_output=True)

    t_command = timed(run_command, 2)  # repeated, as the kernel is: min against min
    configs = grid.configs
    line(f"reduce kernel alone, {jobs:,} jobs", spread(t_kernel, configs), f"{configs:,} configs, prebuilt tables")
    line("  fused argmin (the bound)", spread(t_fused, configs), "same bests" if same else "BESTS DIFFER")
    line("  sweep --reduce-only command", spread(t_command, configs), "CLI defaults, set-up and imports included")
    ratio_line("kernel / fused argmin", f"{t_fused[0] / t_kernel[0]:.0%}", "the fused argmin")
    ratio_line("command / kernel alone", f"{t_kernel[0] / t_command[0]:.0%}", "the kernel alone")
    key = f"reduce{jobs}"
    return {
        f"{key}_configs": configs,
        f"{key}_kernel_rate": configs / t_kernel[0],
        f"{key}_fused_rate": configs / t_fused[0],
        f"{key}_command_rate": configs / t_command[0],
        f"{key}_vs_fused": t_fused[0] / t_kernel[0],
        f"{key}_command_vs_kernel": t_kernel[0] / t_command[0],
        f"{key}_same": same,
        "reduce_path": path,
    }


def _kernel_and_bound(grid, repeat):
    """Times of the reduce kernel and of the fused argmin on the grid's prebuilt tables, and
    whether their bests are equal."""
    tables = reduce_tables(grid)
    terms = [tables[2][n] for n in JOB_GPU_VARIABLES]
    reduce_kernel(grid, *tables)
    best = run_fused(grid, tables[0], tables[1], terms)
    same = np.array_equal(best[0], tables[2]["best_step_time"], equal_nan=True) and np.array_equal(
        best[1], tables[2]["best_index"]
    )
    t_kernel, t_fused = timed_pair(
        lambda: reduce_kernel(grid, *tables), lambda: run_fused(grid, tables[0], tables[1], terms), repeat
    )
    return t_kernel, t_fused, same


def bench_block_costs(folder, jobs, repeat=3):
    """The writer's time per block against the block's compute time (``bench/blockcost.py``),
    over ``jobs`` population jobs reduce-only: with the CLI's block sizes, and ``repeat`` times in
    4-job blocks (hundreds of them) flushed by time as the CLI does, each run's last tenth
    against its first (the writer's median time per block); the goal's figure is the median run,
    each run is printed (the machine's speed drifting during a run of a few seconds moves one
    run's ratio by a few tenths either way)."""
    spec = population_spec(folder, jobs)
    cli = block_costs(spec, folder)
    runs = [
        block_costs(population_spec(folder, jobs, jobs_per_block=4), folder, orchestration.FLUSH_SECONDS)
        for _ in range(repeat)
    ]
    small = runs[0]
    growth = [r["write_last_s"] / r["write_first_s"] for r in runs]
    line(
        "per-block cost, CLI blocks",
        f"{cli['share']:.1%}",
        f"writer / block compute time, {cli['blocks']} blocks of {cli['compute_s'] * 1e3:,.0f} ms, "
        f"{cli['write_s'] * 1e3:.1f} ms written each",
    )
    line(
        "per-block cost, 4-job blocks",
        f"{small['share']:.1%}",
        f"{small['blocks']} blocks of {small['compute_s'] * 1e3:,.1f} ms, "
        f"flushed every {orchestration.FLUSH_SECONDS:.0f} s",
    )
    ratio_line(
        "last tenth / first tenth",
        " / ".join(f"{g:.2f}" for g in growth) + "x",
        f"the writer's median per block in the first tenth ({small['write_first_s'] * 1e3:.2f} ms), {repeat} runs",
    )
    return {
        "block_writer_share": cli["share"],
        "block_writer_blocks": cli["blocks"],
        "small_block_growth": statistics.median(growth),
        "small_block_growth_runs": " / ".join(f"{g:.2f}" for g in growth),
        "small_block_share": small["share"],
    }


def bench_threads(folder, jobs):
    """The reduce kernel on prebuilt tables with one thread and with every thread."""
    import numba

    spec = population_spec(folder, jobs)
    grid, _ = prepare(spec)
    tables = reduce_tables(grid)
    cores = numba.config.NUMBA_NUM_THREADS

    def one_thread():
        numba.set_num_threads(1)
        try:
            reduce_kernel(grid, *tables)
        finally:
            numba.set_num_threads(cores)

    t_one, t_all = timed_pair(one_thread, lambda: reduce_kernel(grid, *tables), 3)
    scaling = t_one[0] / t_all[0]
    line("reduce kernel, 1 thread", spread(t_one, grid.configs), f"{grid.configs:,} configs")
    line(f"reduce kernel, {cores} threads", spread(t_all, grid.configs))
    ratio_line(f"{cores} threads / 1 thread", f"{scaling:.2f}x", f"1 thread; goal 0.75 x {cores} = {0.75 * cores:.2f}x")
    return {"threads": cores, "thread_scaling": scaling}


# --- 6. job tables and blocks -----------------------------------------------------------------------
JOB_TABLE_SCRIPT = """
import json, resource, sys, time
from paigrid.inputs.spec import SweepSpec
from paigrid.predict import current_predictions
from paigrid.orchestration import prepare
import paigrid.store, paigrid.evaluate, numba  # imported before the baseline
def rss():  # this process's peak resident memory [bytes] (VmHWM: ru_maxrss would start at the parent's)
    for text in open("/proc/self/status"):
        if text.startswith("VmHWM:"):
            return int(text.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
spec = SweepSpec(workloads=sys.argv[1])
base = rss()
start = time.perf_counter()
grid, _ = prepare(spec)
grid.job_index
read = time.perf_counter() - start
read_bytes = rss() - base
start = time.perf_counter()
current_predictions(grid.jobs, grid.cats, grid.efficiency, spec.options)
current = time.perf_counter() - start
print(json.dumps({"jobs": len(grid.jobs), "read_s": read, "current_s": current, "read_bytes": read_bytes,
                  "bytes": rss() - base}))
"""


def bench_job_tables(folder, jobs):
    """In a fresh process: seconds to read ``jobs`` population jobs and build their job table, and
    to predict their current configurations; the process's peak memory increase per job."""
    spec = population_spec(folder, jobs)
    done = subprocess.run(
        [sys.executable, "-c", JOB_TABLE_SCRIPT, spec.workloads], check=True, capture_output=True, text=True
    )
    found = json.loads(done.stdout.strip().splitlines()[-1])
    line(
        f"job tables, {jobs:,} jobs",
        f"{found['read_s'] + found['current_s']:.1f} s",
        f"read + table {found['read_s']:.1f} s and {found['read_bytes'] / jobs:,.0f} B/job; current predictions "
        f"{found['current_s']:.1f} s, {found['bytes'] / jobs:,.0f} B/job in all (peak)",
    )
    return {f"jobs{jobs}_s": found["read_s"] + found["current_s"], f"jobs{jobs}_bytes": found["bytes"] / jobs}


def bench_block_memory(folder):
    """Memory of one block with the CLI's defaults (the kernel's output arrays), full and reduce-only."""
    spec = population_spec(folder, 1800)
    grid, _ = prepare(spec)
    out = {}
    for reduce_only in (False, True):
        blocks, _ = sweep_blocks(grid, None, reduce_only)
        per_block = blocks[0][1] - blocks[0][0]
        nbytes = sum(a.nbytes for a in allocate(grid, per_block, not reduce_only).values())
        mode = "reduce-only" if reduce_only else "full"
        line(
            f"one block, {mode}",
            f"{nbytes / 1e6:,.1f} MB",
            f"{per_block} jobs of {grid.configs // len(grid.jobs):,} configs, {nbytes / per_block / 1e3:,.0f} kB/job",
        )
        out[f"block_{mode}_mb"] = nbytes / 1e6
    return out


# --- 7. the CLI's defaults ----------------------------------------------------------------------------
def bench_help():
    """Warm wall time of ``paigrid --help``."""
    t_help = timed(lambda: subprocess.run([*COMMAND, "--help"], check=True, capture_output=True), 3)
    line("paigrid --help", spread(t_help), "warm")
    return {"help_s": t_help[0]}


def bench_default_sweep(folder: Path):
    """Wall time of the README's first command's sweep (the default spec), as a command, warm."""
    path = folder / "default.h5"

    def run():
        path.unlink(missing_ok=True)
        subprocess.run([*COMMAND, "sweep", "--out", str(path), "-q"], check=True, capture_output=True)

    t_sweep = timed(run, 1)
    grid, _ = prepare(SweepSpec())
    line("paigrid sweep (the default spec)", spread(t_sweep), f"command, warm, {grid.configs:,} configs")
    return {"default_sweep_s": t_sweep[0], "default_configs": grid.configs}


#: a fresh install's first default sweep may take at most this much longer than a warm one [s]
FIRST_RUN_GOAL_S = 3.0


def bench_first_run(folder: Path):
    """The first-run overhead: the default ``paigrid sweep`` as a command with ``NUMBA_CACHE_DIR``
    pointed at a new empty folder (cold: every kernel it uses is compiled and cached), then the
    same command again on that cache (warm); the overhead is cold minus warm [s], against
    ``FIRST_RUN_GOAL_S``.  One run of each (a cold run can only happen once per cache); then the
    same for an LLM ``predict`` (``_first_llm_predict``)."""
    path = folder / "first-run.h5"
    env = {**os.environ, "NUMBA_CACHE_DIR": tempfile.mkdtemp(prefix="numba-cold-", dir=folder)}

    def run():
        path.unlink(missing_ok=True)
        start = time.perf_counter()
        subprocess.run([*COMMAND, "sweep", "--out", str(path), "-q"], check=True, capture_output=True, env=env)
        return time.perf_counter() - start

    from paigrid.kernels import jit

    # the cache setup.py compiled when this installation was built (absent: a build that could not
    # compile, or a kernel module edited since an editable install)
    prebuilt = Path(jit.PREBUILT_FOLDER).is_dir()
    # untimed: import what the sweep imports, in the same environment (an import compiles nothing),
    # so that both runs find the files in the OS's cache and their difference is the compiler's
    subprocess.run(
        [sys.executable, "-c", "import paigrid.cli, paigrid.orchestration, paigrid.store, paigrid.kernels.model"],
        check=True,
        capture_output=True,
        env=env,
    )
    cold, warm = _first_and_second(
        run,
        "paigrid sweep",
        ("empty NUMBA_CACHE_DIR", "the cache the first run wrote"),
        "the kernels prebuilt at install" if prebuilt else "no prebuilt kernel cache for these sources",
    )
    overhead = cold - warm
    return {
        "first_run_cold_s": cold,
        "first_run_warm_s": warm,
        "first_run_overhead_s": overhead,
        "first_run_prebuilt": prebuilt,
        **_first_llm_predict(env),
    }


def _first_llm_predict(env: dict) -> dict:
    """The first and second ``paigrid predict --layout best`` of the LLM search's job
    (``llm_search.COMMAND``) on the first-run cache, which holds no precompiled module yet: the
    first loads the one the install shipped (``paigrid.precompiled``) or builds it."""
    from llm_search import COMMAND as SEARCH  # bench/llm_search.py, beside this file

    from paigrid import precompiled

    def run():
        start = time.perf_counter()
        subprocess.run(SEARCH, check=True, capture_output=True, env=env)
        return time.perf_counter() - start

    shipped = precompiled._path(precompiled.shipped_folder()).exists()
    cold, warm = _first_and_second(
        run,
        "LLM predict",
        ("--layout best, the first-run cache", "--layout best, the same cache"),
        "the precompiled module shipped at install" if shipped else "no precompiled module shipped",
    )
    return {
        "first_llm_cold_s": cold,
        "first_llm_warm_s": warm,
        "first_llm_overhead_s": cold - warm,
        "first_llm_shipped": shipped,
    }


def _first_and_second(run, label: str, caches: tuple[str, str], origin: str) -> tuple[float, float]:
    """The seconds of a first and a second ``run()`` (each returns its wall time [s]) on the
    caches ``caches`` say, printed with their difference against ``FIRST_RUN_GOAL_S`` and where
    the compiled code came from (``origin``)."""
    cold, warm = run(), run()
    overhead = cold - warm
    line(f"{label}, first run (cold)", f"{cold:.3g} s", f"command, {caches[0]}")
    line(f"{label}, second run (warm)", f"{warm:.3g} s", f"command, {caches[1]}")
    met = "met" if overhead < FIRST_RUN_GOAL_S else "missed"
    line("  first-run overhead", f"{overhead:.3g} s", f"cold - warm, goal < {FIRST_RUN_GOAL_S:.0f} s: {met}; {origin}")
    return cold, warm


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


class _Tee(io.StringIO):
    """Prints as usual and keeps a copy of what was printed (the page's output block)."""

    def write(self, text):
        sys.__stdout__.write(text)
        sys.__stdout__.flush()
        return super().write(text)


# --- the page -------------------------------------------------------------------------------------
PAGE_TEMPLATE = """\
# Speed

<!-- generated by bench/bench.py; do not edit: run `python bench/bench.py --quick` (or the full profile) -->

`python bench/bench.py` measures everything below in one run on the current machine and prints
each figure next to the baseline or bound it is compared with, measured in the same run. This page
is that script's latest run ({profile} profile), written by it; the printed lines are as they
came. Times are min / median / max of the repeats; rates are the same three, fastest first.

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

## Goals

| goal ({cores} cores) | this run | met |
|---|---|---|
{targets}

{missed}

The figures are rates of a shared machine: they move with its load (above) from run to run. The
ratios compare with a baseline measured in the same run, so they move less than the rates.

## Methodology

- **Warm and repeated.** Every timed call follows an untimed one (compiled kernels loaded, caches
  and page tables filled); each figure is repeated (the count depends on its cost) and reported
  as min / median / max; ratios use the best of each side.
- **Kernel**: `model.evaluate_block` writing the full cube for {kernel_jobs} jobs of the default
  grid ({kernel_configs:,} configurations, outputs preallocated) against `reference.evaluate_block`
  (the numpy implementation of the same model, one job, warm) and against a parallel fill of the
  same output arrays ({bytes_per_config} bytes a configuration). The kernel computes only the
  valid cells and fills the rest, so on the default grid (about 10% valid) it is close to the
  fill.
- **LLM kernel**: `kernels.llm.evaluate_llm` on every valid layout of Llama-3 70B and 405B at
  8 to 16,384 GPUs (powers of two) on the {llm_designs} designs of the default `paigrid llm sweep`
  ({llm_configs:,} layout x design configurations, outputs preallocated), warm and repeated,
  beside the data-parallel kernel above; then that whole sweep as `paigrid llm sweep` runs it
  (enumeration, blocks, best-layout reduction, HDF5 file). An LLM configuration does more
  arithmetic than a data-parallel one (five parallel degrees, memory, several collectives).
- **Single configuration**: the median of 1,000 warm `predict_configs` calls of one
  configuration through the serial kernel, against the same calls through the parallel one.
- **Full sweep**: `run_sweep` of {sweep_jobs} population jobs ({sweep_configs:,} configurations,
  {sweep_blocks} blocks sized by work, as the CLI does), set-up included. Its two limits, block
  by block over the same blocks, each block computed beforehand (untimed): compressing the
  block's chunks with the sweep's own encoder on every thread (the **compression bound**), and
  writing the already-compressed chunks with h5py `write_direct_chunk`, flushing after each
  block (the **I/O bound**). The sweep overlaps its kernel with compression and writing, so its
  limit is the smaller of the two; the goal is 70% of it.
- **Queries**: `paigrid query` as a command on that full cube (warm). `--best-arch` is answered
  from the stored per-job bests; `--top 3` and `--where network=...` scan the cube. The
  **decompression floor** of a scan is h5py reading, in one thread, job by job into one buffer,
  the chunks of `step_time` (what a scan ranks by) that hold the configurations it selects (what
  the scan must at least decompress; it also reads the bottleneck codes of its result rows, a
  chunk or a few of a job's, which the floor leaves out): every chunk for `--top 3`; for
  `--where network=...`, `[..., network, :]`, which reads only that network's chunks if the
  cube's chunks split the networks (the line names the chunk shape; the default chunks hold
  every network).  The floors before (`step_time` and `invalid_reason`, which no scan reads,
  each read whole into one array, whose page faults cost more than decompressing its 1.2 GB)
  are printed beside them.
- **Reduce-only**: the block kernel with `write_cube=False` in one call over every job, on job
  tables and per-(job, gpu, precision) terms built beforehand (no Python loop, no I/O), against a
  **fused argmin** of the same model (`bench/bounds.py`: the kernel's scalar formulas and pruning,
  folded as computed, no row buffers; its bests are checked equal to the kernel's) and against
  the `paigrid sweep --reduce-only` command with the CLI's defaults on the same grid (process
  start, imports, job tables, current-configuration predictions and writing included). The
  kernel with one thread and with every thread is timed on the same prebuilt tables.
- **Per-block cost** (`bench/blockcost.py`): `run_sweep` reduce-only in this process (warm: a
  first run untimed), with two calls wrapped in a timer: `evaluate.compute_block` (the block's compute:
  compute-model terms, block kernel, overall bests, in the kernel's thread) and
  `CubeWriter.write_block` (writing its reductions and, when due, the flush and the done marks).
  The share is the writer's time over the compute time, summed over the blocks: once with the
  CLI's block sizes, once with 4-job blocks flushed every few seconds as the CLI does (hundreds
  of blocks, so that a cost growing with the file shows as the last tenth's median writer time
  over the first tenth's), three times: the goal's figure is the median run, every run is
  printed.
- **Job tables**: in a fresh process, reading a population CSV of that many jobs and building the
  job table, then predicting every job's current configuration; the memory is the process's peak
  resident size after minus before. A block's memory is the kernel's output arrays of one block
  of the CLI's default size (a full sweep holds two such sets: one block is computed while the
  previous one is compressed).
- **CLI defaults**: `paigrid --help` and the default `paigrid sweep` as commands, warm.
- **First run**: the default `paigrid sweep` as a command with `NUMBA_CACHE_DIR` pointed at an
  empty folder, then again on the cache it wrote; the overhead is the first minus the second, one
  run each, after an untimed import of the modules the sweep imports (so that neither run reads
  them from disk while the other finds them in the OS's file cache). The first loads the kernels
  that `setup.py` compiled when paigrid was built (the prebuilt kernel cache of
  docs/development.md) where this installation has one for its sources, and compiles them
  otherwise; the line says which. Then the LLM search's `paigrid predict --layout best` twice on
  that cache, which holds no precompiled module yet: the first loads the one the installation
  shipped (`paigrid.precompiled`) or builds it; the line says which.
- **Commands** run as an installed paigrid runs them: `bench/installed.py` compiles paigrid's
  bytecode first, as pip does at install (an editable install in an environment that sets
  `PYTHONDONTWRITEBYTECODE` would otherwise compile its modules from source in every command).
- **GPU** (`bench/gpu.py`, run by this script where numba.cuda finds an NVIDIA GPU, skipped
  with the reason printed elsewhere): the reduce-only kernels of `--device cuda` over many
  population jobs at once with the tables already on the GPU, best of 3, against a minimal
  fused-argmin CUDA kernel over the same threads and loop (one multiply-add chain per
  configuration on tables prepared beforehand, and the running float32 argmin: the bound), and
  against the CPU's reduce-only kernel; then reduce-only and full sweeps as `paigrid sweep` runs
  them, set-up included, on each device; and the time a 10^12-configuration reduce-only study
  would take at the kernels' rate (a projection). To measure it on a GPU machine: `pip install -e
  '.[test,cuda]'`, then `python bench/bench.py` (everything, this page) or `python bench/gpu.py`
  (the GPU section alone; `--reduce-jobs`, `--full-jobs`, `--cpu-jobs` set the sizes).
"""


def _reduce_command_reason(f: dict) -> str:
    """Why the reduce-only command is slower than its kernel alone, with this run's seconds (the
    parts' seconds are from a profile of the command on the 2-core box, not measured here)."""
    key = "reduce18000" if "reduce18000_configs" in f else "reduce1800"
    kernel = f[f"{key}_configs"] / f[f"{key}_kernel_rate"]
    command = f[f"{key}_configs"] / f[f"{key}_command_rate"]
    return (
        f"{command - kernel:.1f} s around a kernel of {kernel:.1f} s: starting the process and importing (about "
        "0.2 s in a profile of the command), numba's start and the kernels' load (about 1 s), reading the jobs and "
        "preparing the families before the first block (about 0.6 s; the current predictions and the file's "
        "skeleton run beside the first blocks), and in the blocks the compute model's terms and the writer's "
        "compressed reductions, which share the 2 cores with the kernel"
    )


def _targets(f: dict) -> list[tuple[str, str, bool | None, str]]:
    """(goal, this run, met (None: not measured), why when missed) rows from the figures."""
    rows = [
        ("kernel >= 8x the numpy reference", f"{f['kernel_vs_numpy']:.0f}x", f["kernel_vs_numpy"] >= 8, ""),
        (
            f"one warm single-configuration prediction < {SINGLE_GOAL_US:.0f} us (median of 1,000)",
            f"{f['single_us']:.0f} us",
            f["single_us"] < SINGLE_GOAL_US,
            "Python set-up per call (catalogue look-ups, building the tables of one configuration, the result "
            "dict) outweighs the kernel, and it moves with the machine's load; throughput, cost and energy are "
            "derived after the kernel in one compiled loop (about 1 us; as numpy operations on one-element arrays "
            "they had cost about 20 us), and a call of one job skips copying its rows and reshaping the outputs "
            "(about 82 us against 120 us before, same machine, same minute)",
        ),
        (
            "full sweep >= 70% of the smaller of its compression and I/O bounds",
            f"{f['sweep_vs_limit']:.0%} (of {f['sweep_limit_is']})",
            f["sweep_vs_limit"] >= 0.7,
            "the sweep pipelines each block through the kernel, the compression and the writer in three threads, "
            "but on 2 cores the kernel and the compression compete for the same cores, so the kernel's time adds "
            "to the compression's, which the bound counts alone; its set-up (reading the jobs, the "
            "current-configuration predictions, creating the file) is included too",
        ),
        (
            "`query --best-arch` < 1 s (stored bests, as a command)",
            f"{f['query_best_s']:.2f} s",
            f["query_best_s"] < 1,
            "starting Python and importing numpy, h5py and xarray on a loaded machine",
        ),
        (
            "`query --top 3` within 3x of the decompression floor",
            f"{f['query_top_s'] / f['floor_s']:.1f}x",
            f["query_top_s"] <= 3 * f["floor_s"],
            "the command's fixed start (Python, numpy, h5py and typer: the --best-arch line, which reads "
            "kilobytes, is that cost) against a floor of about a third of a second; the scan decodes step_time's "
            "chunks outside h5py, each into a buffer of its thread's, selects each job's k best in one pass (the "
            "kernel compiled ahead of time, paigrid.precompiled: no numba to import) that skips most cells, and "
            "blocks of cells, by a bound of the k-th kept, and reads the bottleneck codes of the chosen rows only",
        ),
        (
            "`query --where network=...` within 3x of its decompression floor",
            f"{f['query_where_s'] / f['where_floor_s']:.1f}x",
            f["query_where_s"] <= 3 * f["where_floor_s"],
            "the command's fixed start above is most of the floor; the cube's chunks hold every network (they "
            "compress together), so the scan decodes every chunk (in every thread, checked by numcodecs' compiled "
            "Fletcher-32) and keeps one network of each; it selects with the precompiled kernel as --top does",
        ),
    ]
    large = "reduce18000_vs_fused"
    rows.append(
        (
            "reduce kernel >= 78% of the same-model fused argmin at 10^9 configurations and >= 81% at 10^10 "
            "(within 5 points of its 83% / 86% before the block kernel became step, traversal and fold)",
            f"{f['reduce1800_vs_fused']:.0%}" + (f" / {f[large]:.0%}" if large in f else " (10^10: quick profile)"),
            f["reduce1800_vs_fused"] >= 0.78 and (f[large] >= 0.81 if large in f else True),
            "the kernel checks each configuration's validity and per-architecture memory fit, which the bound "
            "leaves to its tables, and the machine's load moves both sides",
        )
    )
    big = "reduce18000_command_vs_kernel"
    rows.append(
        (
            "`sweep --reduce-only` command >= 80% of the kernel alone at 10^10 configurations",
            f"{f[big]:.0%}"
            if big in f
            else f"not run (quick profile; {f['reduce1800_command_vs_kernel']:.0%} at 10^9)",
            (f[big] >= 0.8) if big in f else None,
            _reduce_command_reason(f),
        )
    )
    rows.append(
        (
            "the writer's time per block < 5% of the block's compute time (CLI blocks, reduce-only), and "
            "not growing as the file fills (last tenth of 4-job blocks within 1.25x of the first, the "
            "median of 3 runs)",
            f"{f['block_writer_share']:.1%}, {f['small_block_growth']:.2f}x ({f['small_block_growth_runs']})",
            f["block_writer_share"] < 0.05 and f["small_block_growth"] <= 1.25,
            "writing a block's reductions is a few h5py writes of about 0.1 ms each whatever the block's size, "
            "growing with neither the file's chunk index nor its free space (450 4-job chunks written alone cost "
            "the same in the last tenth as in the first), but in a sweep each write shares the cores and the GIL "
            "with the kernel's and the compression's threads, so one run's tenths differ with the machine's load",
        )
    )
    rows.append(
        (
            f"reduce kernel on {f['threads']} threads >= 0.75 x {f['threads']} x one thread",
            f"{f['thread_scaling']:.2f}x",
            f["thread_scaling"] >= 0.75 * f["threads"],
            "the 2 cores are shared with other work (see the load average above): the second thread "
            "rarely has a core to itself",
        )
    )
    jobs = "jobs1000000_s" if "jobs1000000_s" in f else "jobs100000_s"
    count = 10**6 if jobs == "jobs1000000_s" else 10**5
    goal = f"job tables of {count:,} jobs in under {count // 10**4} s"
    rows.append(
        (
            goal if count == 10**6 else f"{goal} (a million in under 100 s: the full profile)",
            f"{f[jobs]:.1f} s, {f[jobs.replace('_s', '_bytes')]:,.0f} B/job",
            f[jobs] < count / 10**4,
            "reading the jobs is still Python per row (one Job object each, about 10 us)",
        )
    )
    if "llm_search_s" in f:
        rows.append(
            (
                "LLM search (GPT-3 175B, 1,024 A100, the wide space) in process < 48 ms (10^4 x Calculon's 484 s)",
                f"{f['llm_search_s'] * 1e3:.1f} ms",
                f["llm_search_s"] < 0.0484,
                "tables (a compute-table row per GEMM shape) and the probe before the pruned search",
            )
        )
        rows.append(
            (
                "LLM search as a command (`paigrid predict --layout best`) < 0.48 s (10^3 x Calculon)",
                f"{f['llm_search_command_s']:.2f} s",
                f["llm_search_command_s"] < 0.48,
                "the command's start: the interpreter with numpy (its floor, "
                f"{f.get('llm_command_floor_s', float('nan')):.2f} s in the same run), typer (which builds a pydantic "
                "validator per option) and the catalogues, on the loaded box, against tens of milliseconds of search "
                "with the precompiled kernels",
            )
        )
    if "llm_predict_command_s" in f:
        rows.append(
            (
                "a warm LLM `paigrid predict` (one layout) < 0.3 s",
                f"{f['llm_predict_command_s']:.2f} s",
                f["llm_predict_command_s"] < 0.3,
                "the same start-up as the search command (the interpreter, numpy, typer and pydantic)",
            )
        )
    rows.append(("`paigrid --help` < 1 s warm", f"{f['help_s']:.2f} s", f["help_s"] < 1, "imports"))
    rows.append(
        (
            f"first default `paigrid sweep` < {FIRST_RUN_GOAL_S:.0f} s more than a warm one",
            f"{f['first_run_overhead_s']:.1f} s",
            f["first_run_overhead_s"] < FIRST_RUN_GOAL_S,
            "compiling the kernels (numba)"
            + (
                ""
                if f.get("first_run_prebuilt")
                else ": this installation has no prebuilt kernel cache for its sources"
            ),
        )
    )
    if "first_llm_overhead_s" in f:
        rows.append(
            (
                f"first LLM `paigrid predict --layout best` < {FIRST_RUN_GOAL_S:.0f} s more than a warm one",
                f"{f['first_llm_overhead_s']:.1f} s",
                f["first_llm_overhead_s"] < FIRST_RUN_GOAL_S,
                "building the precompiled module"
                + ("" if f.get("first_llm_shipped") else ": this installation shipped none for its sources"),
            )
        )
    from gpu import gpu_goal_rows  # bench/gpu.py, beside this file

    rows += gpu_goal_rows(f)
    return rows


def write_page(page, output, figures, load_start, wall, profile):
    """Write the speed page: the machine, the printed ``output``, the goals table from
    ``figures`` and the methodology."""
    import h5py
    import numba

    rows = _targets(figures)
    table = "\n".join(
        f"| {goal} | {value} | {'-' if ok is None else 'yes' if ok else '**no**'} |" for goal, value, ok, _ in rows
    )
    missed = [f"- **{goal}**: {value}; {why}." for goal, value, ok, why in rows if ok is False]
    missed_text = ("Missed, and why:\n\n" + "\n".join(missed)) if missed else "Every goal measured here is met."
    figures = {k: v for k, v in figures.items() if not isinstance(v, Path)}
    text = PAGE_TEMPLATE.format(
        cpu=_cpu(),
        cores=os.cpu_count(),
        memory=_memory(),
        load_start=load_start,
        load_end=os.getloadavg()[0],
        python=platform.python_version(),
        numpy=np.__version__,
        numba=numba.__version__,
        h5py=h5py.__version__,
        date=time.strftime("%Y-%m-%d"),
        wall=wall,
        output=output.rstrip(),
        targets=table,
        missed=missed_text,
        profile=profile,
        **figures,
    )
    page.write_text(text, encoding="utf-8")


PROFILES = {
    # kernel jobs, full-sweep jobs, sweep repeats, reduce-only job counts, thread-test jobs, per-block-cost jobs,
    # job-table sizes
    # and the GPU section's (reduce-only, full, CPU) jobs
    "quick": dict(
        kernel_jobs=8,
        sweep_jobs=64,
        sweep_repeat=1,
        reduce_jobs=(1800,),
        thread_jobs=128,
        block_cost_jobs=1800,
        table_jobs=(100_000,),
        gpu_jobs=(1800, 64, 180),
    ),
    "full": dict(
        kernel_jobs=8,
        sweep_jobs=512,
        sweep_repeat=2,
        reduce_jobs=(1800, 18000),
        thread_jobs=1800,
        block_cost_jobs=1800,
        table_jobs=(100_000, 1_000_000),
        gpu_jobs=(18000, 512, 1800),
    ),
}


#: the sections ``--only`` runs on their own: the lines of the scan, reduce-only and writer goals
ONLY = ("scans", "reduce", "blockcost")


def run_only(args) -> None:
    """Only the sections ``args.only`` names (``ONLY``), in that order, on the chosen profile's
    sizes; the scans' cube is swept first, untimed, as the full sweep line would leave it."""
    chosen = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in ONLY]
    if unknown:
        raise SystemExit(f"--only takes {', '.join(ONLY)}, not {unknown[0]!r}.")
    p = PROFILES["quick" if args.quick else "full"]
    folder = Path(tempfile.mkdtemp(prefix="paigrid-bench-", dir=args.out_dir))
    try:
        print(f"paigrid bench, {', '.join(chosen)} only, load average {os.getloadavg()[0]:.2f}")
        print(compile_paigrid())
        grid, _ = prepare(SweepSpec())
        for name in chosen:
            if name == "scans":
                run_sweep(
                    population_spec(folder, p["sweep_jobs"]),
                    folder / "full.h5",
                    compression=args.compression,
                    progress=False,
                )
                bench_queries(folder, grid.network[-3])
            elif name == "reduce":
                for jobs in p["reduce_jobs"]:
                    bench_reduce(folder, jobs, 3 if jobs < 10_000 else 2)
            else:
                bench_block_costs(folder, p["block_cost_jobs"])
        print(f"load average at the end {os.getloadavg()[0]:.2f}")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main():
    """Run the chosen profile, print every figure beside its baseline and write the page."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out-dir", type=Path, default=None, help="where the bench writes its files (default: a temp dir)"
    )
    parser.add_argument("--compression", default="lz4")
    parser.add_argument("--quick", action="store_true", help="the quick profile (under two minutes on 2 cores)")
    parser.add_argument("--page", type=Path, default=PAGE, help="where to write the page (default: docs/speed.md)")
    parser.add_argument("--no-page", action="store_true", help="only print the figures")
    parser.add_argument("--llm-only", action="store_true", help="only the two kernels' lines (writes no page)")
    parser.add_argument(
        "--only",
        default="",
        help=f"only these sections, comma-separated, of {', '.join(ONLY)} (writes no page; scans sweep the "
        "full cube first, untimed)",
    )
    args = parser.parse_args()
    if args.only:
        return run_only(args)
    profile = "quick" if args.quick else "full"
    p = PROFILES[profile]
    folder = Path(tempfile.mkdtemp(prefix="paigrid-bench-", dir=args.out_dir))
    load_start, start = os.getloadavg()[0], time.perf_counter()
    figures = {}
    try:
        with contextlib.redirect_stdout(_Tee()) as output:
            print(f"paigrid bench ({profile} profile) on {os.cpu_count()} cores, {time.strftime('%Y-%m-%d')}")
            print(compile_paigrid())
            grid, _ = prepare(SweepSpec())
            figures.update(bench_kernel(grid, p["kernel_jobs"]))
            figures.update(bench_llm(figures))
            from llm_search import bench_llm_search  # bench/llm_search.py, beside this file

            figures.update(bench_llm_search())
            if args.llm_only:
                return
            figures.update(bench_single())
            figures.update(
                bench_sweep(population_spec(folder, p["sweep_jobs"]), folder, args.compression, p["sweep_repeat"])
            )
            figures.update(bench_queries(folder, grid.network[-3]))
            for jobs in p["reduce_jobs"]:
                figures.update(bench_reduce(folder, jobs, 3 if jobs < 10_000 else 2))
            figures.update(bench_block_costs(folder, p["block_cost_jobs"]))
            figures.update(bench_threads(folder, p["thread_jobs"]))
            for jobs in p["table_jobs"]:
                figures.update(bench_job_tables(folder, jobs))
            figures.update(bench_block_memory(folder))
            figures.update(bench_help())
            figures.update(bench_default_sweep(folder))
            figures.update(bench_first_run(folder))
            from gpu import bench_gpu  # bench/gpu.py, beside this file

            figures.update(bench_gpu(lambda jobs: population_spec(folder, jobs), folder, *p["gpu_jobs"]))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if not (args.no_page or args.llm_only):
        write_page(args.page, output.getvalue(), figures, load_start, time.perf_counter() - start, profile)
        print(f"wrote {args.page}")


if __name__ == "__main__":
    main()
