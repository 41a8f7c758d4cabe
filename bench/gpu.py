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
   projection from figure 1, said as one; the goal is under a minute on one H200-class GPU);
5. **the LLM kernels** (``paigrid.kernels.cuda_llm``): the pairs kernel on every layout of
   Llama-3 70B and 405B at 8..16,384 GPUs on the 32 designs of the default LLM sweep (tables on
   the GPU, best of 3) beside the CPU's ``llm.evaluate_llm``; the wide layout search of GPT-3
   175B on 1,024 GPUs (``llm.search.best_layout``, device cuda against cpu) on one design and
   on the 32, the same best layouts checked on both.

``--page docs/speed.md`` writes what it measured into the page: its output between the
``<!-- gpu -->`` and ``<!-- /gpu -->`` marks and its goals in place of the goals table's GPU
rows (``gpu_goal_rows``).

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
from paigrid.orchestration import prepare, run_sweep

#: the configurations of the study the GPU goal names
STUDY_CONFIGS = 1e12
cuda = None  # numba.cuda, set by ``_bound_kernel_compiled`` before the bound kernel is compiled


def gpu_skip_reason() -> str:
    """Why the GPU section cannot run here ("" when it can)."""
    from paigrid.cuda_sweep import cuda_kernels
    from paigrid.errors import PaigridError

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
    from paigrid.cuda_sweep import CudaBlocks, launch_grid
    from paigrid.kernels import dp_columns as L

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


def bench_gpu_llm(quick: bool = False) -> dict:
    """Figure 5: the LLM pairs kernel and the wide layout search on the GPU beside the CPU."""
    from paigrid.inputs.catalog import Catalogues
    from paigrid.inputs.efficiency import defaults
    from paigrid.kernels import cuda_llm
    from paigrid.kernels import llm_columns as K
    from paigrid.kernels.llm import evaluate_llm
    from paigrid.llm.evaluate import tables
    from paigrid.llm.models import model
    from paigrid.llm.parallelism import WIDE, enumerate_layouts
    from paigrid.llm.search import best_layout
    from paigrid.llm.sweep import DEFAULT_N_GPU, Plan
    from paigrid.llm.tables import Hardware, LlmOptions, intra_link_for

    cats, eff, options = Catalogues.load(), defaults(), LlmOptions.defaults()
    ns = cuda_llm.load()
    names = ("llama3-70b",) if quick else ("llama3-70b", "llama3-405b")
    counts = DEFAULT_N_GPU[:2] if quick else DEFAULT_N_GPU
    designs = Plan([model(n) for n in names]).designs(cats)[: 2 if quick else None]
    gpu_s, cpu_s, configs = 0.0, 0.0, 0
    for name in names:
        m = model(name)
        layouts = [lay for n in counts for lay in enumerate_layouts(m, n)]
        arrays = tables(m, layouts, designs, cats, eff, options)
        rows = len(layouts) * len(designs)
        configs += rows
        device = [ns.cuda.to_device(np.ascontiguousarray(a)) for a in arrays]
        d_out = ns.cuda.device_array((rows, K.N_RESULT_FIELDS), np.float64)
        blocks, threads = cuda_llm.launch_grid(rows)

        def pairs(device=device, d_out=d_out, blocks=blocks, threads=threads):
            ns.pairs_kernel[blocks, threads](*device, d_out)
            ns.cuda.synchronize()

        pairs()  # compile
        gpu_s += _best_of(pairs)
        out = np.empty((rows, K.N_RESULT_FIELDS))
        evaluate_llm(*arrays, out)
        cpu_s += _best_of(lambda arrays=arrays, out=out: evaluate_llm(*arrays, out))
        if not np.array_equal(out, d_out.copy_to_host(), equal_nan=True):
            print(f"  LLM pairs kernel: the GPU's outputs differ from the CPU's for {name}")
    print(
        f"gpu LLM pairs kernel {configs / gpu_s / 1e6:9.1f} M configs/s  ({configs:,} layout x design configs, tables "
        f"on the GPU, best of 3) -> gpu / cpu = {cpu_s / gpu_s:.1f}x (cpu {configs / cpu_s / 1e6:.1f} M/s)"
    )
    gpt3 = model("nemo-gpt3-5b" if quick else "gpt3-175b")
    a100 = Hardware("A100-SXM4-80GB", "amp-bf16", 8, intra_link_for(cats, "A100-SXM4-80GB"), "ib-hdr-200g", 1.0)
    figures = {"gpu_llm_rate": configs / gpu_s, "gpu_llm_cpu_rate": configs / cpu_s}
    for label, hw in (("1 design", [a100]), (f"{len(designs)} designs", designs)):
        n_gpu = 64 if quick else 1024
        times = {}
        found = {}
        for device_name in ("cuda", "cpu"):

            def run(d=device_name, hw=hw, n_gpu=n_gpu):
                return best_layout(gpt3, n_gpu, hw, cats, eff, options, WIDE, device=d)

            found[device_name] = run()  # compile
            times[device_name] = _best_of(run)
        same = found["cuda"].layouts == found["cpu"].layouts
        layouts = found["cpu"].counts["layouts"]
        print(
            f"gpu LLM search, {label:<10} {times['cuda'] * 1e3:8.1f} ms  ({gpt3.name} on {n_gpu:,} GPUs, {layouts:,} "
            f"layouts x designs) -> cpu {times['cpu'] * 1e3:.1f} ms, gpu / cpu = {times['cpu'] / times['cuda']:.1f}x; "
            f"same best layouts: {'yes' if same else 'NO'}"
        )
        key = "one" if label == "1 design" else "all"
        figures[f"gpu_llm_search_{key}_s"] = times["cuda"]
        figures[f"cpu_llm_search_{key}_s"] = times["cpu"]
        figures[f"gpu_llm_search_{key}_same"] = same
    return figures


def gpu_goal_rows(f: dict) -> list[tuple]:
    """The goals table's GPU rows (goal, this run, met or None, why) of the figures ``f``."""
    if "gpu_kernel_rate" not in f:
        return [
            (
                "GPU: reduce kernels >= 50% of a fused-argmin bound; 10^12 configurations < 60 s; the LLM search",
                "not run",
                None,
                f"no NVIDIA GPU here ({f.get('gpu_skipped', 'skipped')})",
            )
        ]
    rows = [
        (
            "GPU reduce kernels >= 50% of the same-run fused-argmin bound",
            f"{f['gpu_kernel_rate'] / f['gpu_bound_rate']:.0%}",
            f["gpu_kernel_rate"] >= 0.5 * f["gpu_bound_rate"],
            "not analysed yet: measured on a GPU only",
        ),
        (
            "a 10^12-configuration reduce-only study < 60 s on one GPU (projected from the kernels' rate)",
            f"{f['gpu_study_s']:.0f} s",
            f["gpu_study_s"] < 60,
            "not analysed yet: measured on a GPU only",
        ),
    ]
    if "gpu_llm_rate" in f:
        rows.append(
            (
                "GPU LLM search (GPT-3 175B, 1,024 GPUs, 32 designs) gives the CPU's best layouts",
                f"{f['gpu_llm_search_all_s'] * 1e3:.1f} ms (cpu {f['cpu_llm_search_all_s'] * 1e3:.1f} ms)",
                bool(f["gpu_llm_search_all_same"] and f["gpu_llm_search_one_same"]),
                "not analysed yet: measured on a GPU only",
            )
        )
    return rows


def write_gpu_lines(page: Path, output: str, figures: dict) -> None:
    """Put this run's GPU output and goal rows into ``page`` (docs/speed.md): the output between
    the ``<!-- gpu -->`` marks (appended under a heading where the page has none) and the goal
    rows in place of the goals table's rows that start with ``| GPU`` (or ``| a 10^12``)."""
    text = page.read_text(encoding="utf-8")
    block = f"<!-- gpu -->\n```\n{output.rstrip()}\n```\n<!-- /gpu -->"
    if "<!-- gpu -->" in text and "<!-- /gpu -->" in text:
        head, rest = text.split("<!-- gpu -->", 1)
        text = head + block + rest.split("<!-- /gpu -->", 1)[1]
    else:
        text = text.rstrip() + "\n\n## GPU run (`python bench/gpu.py`)\n\n" + block + "\n"
    rows = [
        f"| {goal} | {value} | {'-' if met is None else ('yes' if met else '**no**')} |"
        for goal, value, met, _ in gpu_goal_rows(figures)
    ]
    lines, out, placed = text.split("\n"), [], False
    for current in lines:
        if current.startswith(("| GPU", "| a 10^12")):
            if not placed:
                out.extend(rows)
                placed = True
            continue
        out.append(current)
    page.write_text("\n".join(out), encoding="utf-8")


def bench_gpu(spec_for, folder: Path, reduce_jobs: int, full_jobs: int, cpu_jobs: int, quick: bool = False) -> dict:
    """The GPU section (figures 1-5), or one line saying why it is skipped."""
    reason = gpu_skip_reason()
    if reason:
        print(f"gpu               skipped: {reason}")
        return {"gpu_skipped": reason}
    grid, _ = prepare(spec_for(reduce_jobs))
    figures = bench_gpu_kernels(grid, reduce_jobs, cpu_jobs)
    figures.update(bench_gpu_sweeps(spec_for, folder, reduce_jobs, full_jobs, cpu_jobs))
    figures.update(bench_gpu_llm(quick))
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
    parser.add_argument("--page", type=Path, default=None, help="write the GPU lines into this page (docs/speed.md)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="paigrid-gpu-bench-") as name:
        folder = Path(name)
        if args.quick:
            args.reduce_jobs = args.full_jobs = args.cpu_jobs = 2
            spec_for = quick_spec
        else:

            def spec_for(jobs):
                return population_spec(folder, jobs)

        import contextlib
        import io

        buffer = io.StringIO()

        class _Both(io.TextIOBase):
            def write(self, text):
                sys.__stdout__.write(text)
                return buffer.write(text)

        with contextlib.redirect_stdout(_Both()):
            figures = bench_gpu(spec_for, folder, args.reduce_jobs, args.full_jobs, args.cpu_jobs, args.quick)
        if args.page is not None and args.quick:
            print(f"not writing {args.page}: a --quick run is a smoke run (in the simulator its rates mean nothing)")
        elif args.page is not None and "gpu_skipped" not in figures:
            write_gpu_lines(args.page, buffer.getvalue(), figures)
            print(f"wrote the GPU lines of {args.page}")


if __name__ == "__main__":
    main()
