"""paigrid's speed, as ratios against baselines measured in the same run on this machine.

    python bench/bench.py [--out-dir DIR] [--query-jobs N] [--quick]

Prints, one line each:
1. kernel configurations/s, against the numpy reference of the same model (ratio 1) and against
   the output-bandwidth bound = this machine's parallel memory-fill bandwidth / bytes written
   per configuration (ratio 2);
2. full sweep to HDF5 configurations/s, against a raw h5py write of the same bytes with the
   same chunking and filter (ratio 3);
3. reduce-only sweep configurations/s;
4. ``query --best-arch`` latency on a cube of about 10^9 configurations (in process and as a
   command), and ``paigrid --help`` wall time (warm).
Nothing here asserts a time: the figures are for the README.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from numba import njit, prange

from paigrid.evaluate import allocate, evaluate_block, run_kernel
from paigrid.schema import CUBE_VARIABLES
from paigrid.kernels import model, reference
from paigrid.inputs.spec import SweepSpec
from paigrid.codecs import filter_kwargs
from paigrid.sweeping import prepare, run_sweep


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
                    chunks = (1, *array.shape[1:]) if name in CUBE_VARIABLES else (spec.jobs_per_block, *array.shape[1:])
                    datasets[name] = f.create_dataset(name, shape, array.dtype, chunks=chunks,
                                                      **filter_kwargs(compression))
                datasets[name][block.start:block.stop] = array
            t_raw += time.perf_counter() - start
    raw.unlink()
    rate, raw_rate = grid.configs / t_sweep, grid.configs / t_raw
    print(f"full sweep ({compression}) {rate / 1e6:7.1f} M configs/s  ({grid.configs:,} configs, {size / 1e6:.0f} MB file,"
          f" {t_sweep:.1f} s incl. set-up)")
    print(f"  raw h5py write  {raw_rate / 1e6:9.1f} M configs/s   -> sweep / raw write    = {rate / raw_rate:6.1%}")


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


def bench_help():
    """Warm wall time of ``paigrid --help``."""
    command = [sys.executable, "-c", "from paigrid.cli import main; main()", "--help"]
    subprocess.run(command, check=True, capture_output=True)
    print(f"paigrid --help    {best_of(lambda: subprocess.run(command, check=True, capture_output=True)):9.3f} s (warm)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", type=Path, default=None, help="where the bench writes its files (default: a temp dir)")
    parser.add_argument("--query-jobs", type=int, default=1800, help="jobs of the ~10^9-configuration query cube")
    parser.add_argument("--kernel-jobs", type=int, default=8)
    parser.add_argument("--sweep-jobs", type=int, default=512, help="population jobs of the full-sweep comparison")
    parser.add_argument("--compression", default="lz4")
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    args = parser.parse_args()
    if args.quick:
        args.query_jobs, args.kernel_jobs, args.sweep_jobs = 40, 2, 8
    folder = Path(tempfile.mkdtemp(prefix="paigrid-bench-", dir=args.out_dir))
    try:
        print(f"paigrid bench on {os.cpu_count()} cores, {time.strftime('%Y-%m-%d')}")
        grid, _ = prepare(SweepSpec())
        bench_kernel(grid, args.kernel_jobs)
        sweep_spec = population_spec(folder, args.sweep_jobs)
        bench_sweep(sweep_spec, folder, args.compression)
        bench_reduce_and_query(folder, args.query_jobs)
        bench_help()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
