"""The CUDA kernels against the CPU kernel, output for output, in numba's CUDA simulator.

Run by tests/test_cuda.py in a subprocess, since NUMBA_ENABLE_CUDASIM must be set before numba.cuda
is first imported: ``python tests/cuda_sim_checks.py``.  Prints one line per case and exits 1 on
the first difference.  Every case sweeps a small grid with real catalogue rows (every
architecture, GPUs with and without FP8, a single-server network and a cluster one) under one
compute model and one set of options, with the full cube and reduce-only.
"""

import os
import sys

os.environ["NUMBA_ENABLE_CUDASIM"] = "1"

import numpy as np  # noqa: E402

from paigrid.evaluate import evaluate_block  # noqa: E402
from paigrid.gpu import evaluate_block_cuda  # noqa: E402
from paigrid.inputs.spec import spec_from_dict  # noqa: E402
from paigrid.kernels import cuda as gpu_kernels  # noqa: E402
from paigrid.kernels import layout as L  # noqa: E402
from paigrid.kernels import model  # noqa: E402
from paigrid.sweeping import prepare  # noqa: E402

GRID = {"gpu": ["V100", "A100", "H100"], "n_gpu": [1, 4, 32], "intra": ["pcie3", "nvswitch-nvlink4"],
        "network": ["none", "ib-hdr-200g"], "precision": ["fp32", "amp-fp16", "fp8"]}
WORKLOADS = ["resnet50", "bert-large-seq384"]

#: (name, options): both compute models and every option that changes a formula
CASES = [
    ("pai-v1", {"model": "pai-v1"}),
    ("pai-v2", {"model": "pai-v2"}),
    ("pai-v1 ring, topology, overlap, accumulation, input bound",
     {"model": "pai-v1", "collective": "ring", "topology_aware": True, "overlap": 0.5, "grad_accum_steps": 2,
      "input_rate_samples_per_s": 2000.0}),
    ("pai-v2 tree, buckets, parameter servers, NICs",
     {"model": "pai-v2", "collective": "tree", "sync_latency": True, "bucket_overlap": True, "bucket_mb": 4.0,
      "ps_count": 2, "nics_per_node": 2, "pcie_roots": 1}),
    ("pai-v1 pipelined", {"model": "pai-v1", "collective": "pipelined", "gpus_per_node": 4}),
    ("pai-v2 hierarchical, fused attention, graphs",
     {"model": "pai-v2", "collective": "hierarchical", "attention": "fused", "execution": "graphs"}),
]


def grid_for(options):
    """The small grid of ``GRID`` x ``WORKLOADS`` under ``options``."""
    spec = spec_from_dict({"workloads": WORKLOADS, "grid": GRID, "options": options}, "the CUDA check")
    return prepare(spec)[0]


def with_missing_numbers(grid):
    """The grid with NaN inputs: one GPU's price, one network's latency, one job's parameter
    count (so rule 6, a missing input number, and NaN propagation are compared too)."""
    grid.gpu_table = grid.gpu_table.copy()
    grid.gpu_table[1, L.G_PRICE] = np.nan
    grid.network_table = grid.network_table.copy()
    grid.network_table[1, L.L_LATENCY] = np.nan
    rows = grid.job_rows

    def job_rows(start, stop):
        jobs, n_gpu = rows(start, stop)
        jobs = jobs.copy()
        jobs[-1, L.J_PARAMS] = np.nan
        return jobs, n_gpu

    grid.job_rows = job_rows
    return grid


def compare(name, grid, write_cube):
    """Exit 1 unless every output of the CPU kernel and the CUDA kernels is equal (NaN to NaN)."""
    n = len(grid.jobs)
    cpu = evaluate_block(grid, 0, 0, n, write_cube).arrays
    gpu = evaluate_block_cuda(grid, 0, 0, n, write_cube).arrays
    if cpu.keys() != gpu.keys():
        sys.exit(f"{name}: outputs {sorted(cpu)} != {sorted(gpu)}")
    for key in cpu:
        a, b = cpu[key], gpu[key]
        if a.shape != b.shape or a.dtype != b.dtype or not np.array_equal(a, b, equal_nan=a.dtype.kind == "f"):
            sys.exit(f"{name}: {key} differs between the CPU and the CUDA kernels")
    valid = int(np.sum(cpu["invalid_reason"] == 0)) if write_cube else -1
    reasons = sorted(set(np.unique(cpu["invalid_reason"]).tolist())) if write_cube else []
    print(f"ok {name} ({'full' if write_cube else 'reduce-only'}): {len(cpu)} outputs equal; "
          f"valid {valid}, reasons {reasons}")


def main():
    ns = gpu_kernels.load()
    shared = gpu_kernels.shared_helpers()
    for name in ("comm_seconds", "configuration_reason", "class_terms", "job_gpu_terms", "bottleneck_code"):
        if name not in shared:
            sys.exit(f"{name} is not among the helpers shared with the GPU: {shared}")
    for name in shared:  # the GPU compiles the CPU helper's own code object
        if ns.helpers[name].fn.__code__ is not getattr(model, name).py_func.__code__:
            sys.exit(f"the GPU's {name} is not compiled from the CPU helper's code")
    print(f"ok {len(shared)} shared helpers: {', '.join(shared)}")
    for name, options in CASES:
        grid = grid_for(options)
        compare(name, grid, True)
        compare(name, grid, False)
    compare("missing input numbers", with_missing_numbers(grid_for({"model": "pai-v2"})), True)
    pipelined_launches()


def pipelined_launches():
    """``run_cuda`` with one job per launch (so the two sets of host buffers alternate over
    several launches) and blocks left out (as on --resume): each block as the CPU computes it."""
    from paigrid import gpu

    grid = grid_for({"model": "pai-v1"})
    blocks = [(0, 1), (1, 2)]
    gpu.LAUNCH_THREADS = 1
    for write_cube in (True, False):
        for todo in ([0, 1], [1]):
            got = list(gpu.run_cuda(grid, blocks, todo, write_cube, None, 1))
            if [b.index for b in got] != todo:
                sys.exit(f"run_cuda gave blocks {[b.index for b in got]} for {todo}")
            for block in got:
                cpu = evaluate_block(grid, block.index, block.start, block.stop, write_cube).arrays
                for key, a in cpu.items():
                    if not np.array_equal(a, block.arrays[key], equal_nan=a.dtype.kind == "f"):
                        sys.exit(f"run_cuda: {key} of block {block.index} differs from the CPU's")
    print("ok run_cuda over several launches, full and reduce-only, all blocks and some")


if __name__ == "__main__":
    main()
