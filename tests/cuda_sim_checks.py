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

from paigrid.cuda_sweep import evaluate_block_cuda  # noqa: E402
from paigrid.evaluate import evaluate_block  # noqa: E402
from paigrid.inputs.spec import spec_from_dict  # noqa: E402
from paigrid.kernels import cuda as gpu_kernels  # noqa: E402
from paigrid.kernels import dp_columns as L  # noqa: E402
from paigrid.orchestration import prepare  # noqa: E402

GRID = {
    "gpu": ["V100", "A100", "H100"],
    "n_gpu": [1, 4, 32],
    "intra": ["pcie3", "nvswitch-nvlink4"],
    "network": ["none", "ib-hdr-200g"],
    "precision": ["fp32", "amp-fp16", "fp8"],
}
WORKLOADS = ["resnet50", "bert-large-seq384"]
#: with sparse embedding tables (multi-interests: 774 M parameters, nearly all of them embeddings)
SPARSE_WORKLOADS = ["multi-interests", "nmt", "resnet50"]


def small_v100(grid):
    """The grid with the first GPU's (V100's) memory at 4 GB, so that multi-interests (774 M
    parameters, 774 M of them in embedding tables) fits a ps-worker GPU with sparse traffic and
    no optimizer state (``ps_fits_memory_flag``), and no other way."""
    grid.gpu_table = grid.gpu_table.copy()
    grid.gpu_table[0, L.G_MEMORY] = 4e9
    return grid


#: every parameter-server option, and the ring inter-server volume
ALL_PS = {
    "ps_local_reduce": True,
    "ps_nic": "per-worker",
    "ps_placement": "colocated",
    "ps_latency": True,
    "ps_update": True,
    "ps_sparse": True,
    "ps_memory": True,
    "inter_volume": "ring",
}


def small_fabric(grid, in_network=1.0):
    """The grid with its cluster network (ib-hdr-200g) replaced by a fabric's row (option
    ``fabric_tiers``: ``tables.fabric_link_row`` of tor-roce-3to1) whose tier groups are 2 and 16
    GPUs, with in-network reduction, so that 4 GPUs cross the tier-1 uplinks and 32 the tier-2
    ones."""
    from paigrid.inputs.kernel_tables import fabric_link_row

    grid.network_table = grid.network_table.copy()
    row = fabric_link_row(grid.cats, "tor-roce-3to1", grid.efficiency)
    row[[L.L_TIER1, L.L_TIER2, L.L_IN_NETWORK]] = [2.0, 16.0, in_network]
    grid.network_table[1] = row
    return grid


def small_fabric_without_reduction(grid):
    """``small_fabric`` with no in-network reduction (so that the ring inter-server volume counts)."""
    return small_fabric(grid, 0.0)


#: (name, options, workloads, adjust: None or a function of the grid): both compute models (pai-v2
#: the default) and every option that changes a formula
CASES = [
    ("pai-v1", {"model": "pai-v1"}, WORKLOADS, None),
    ("pai-v2", {"model": "pai-v2"}, WORKLOADS, None),
    (
        "pai-v1 ring, topology, overlap, accumulation, input bound",
        {
            "model": "pai-v1",
            "collective": "ring",
            "topology_aware": True,
            "overlap": 0.5,
            "grad_accum_steps": 2,
            "input_rate_samples_per_s": 2000.0,
        },
        WORKLOADS,
        None,
    ),
    (
        "pai-v2 tree, buckets, parameter servers, NICs",
        {
            "model": "pai-v2",
            "collective": "tree",
            "sync_latency": True,
            "bucket_overlap": True,
            "bucket_mb": 4.0,
            "ps_count": 2,
            "nics_per_node": 2,
            "pcie_roots": 1,
        },
        WORKLOADS,
        None,
    ),
    ("pai-v1 pipelined", {"model": "pai-v1", "collective": "pipelined", "gpus_per_node": 4}, WORKLOADS, None),
    (
        "pai-v2 hierarchical, fused attention, graphs",
        {"model": "pai-v2", "collective": "hierarchical", "attention": "fused", "execution": "graphs"},
        WORKLOADS,
        None,
    ),
    ("default model, every ps option, ring inter-server volume, a 4 GB V100", ALL_PS, SPARSE_WORKLOADS, small_v100),
    (
        "pai-v1 ps update, sparse, memory, 3 servers, accumulation; ring volume, pipelined",
        {
            "model": "pai-v1",
            "ps_update": True,
            "ps_sparse": True,
            "ps_memory": True,
            "ps_count": 3,
            "grad_accum_steps": 2,
            "inter_volume": "ring",
            "collective": "pipelined",
            "gpus_per_node": 4,
        },
        # transformer-xl-large: a ps-worker V100 at fp32 fits with pai-v2's activation bytes, not with pai-v1's
        [*SPARSE_WORKLOADS, "transformer-xl-large"],
        None,
    ),
    (
        "pai-v2 ps memory without sparse traffic, local reduce, latency, tree, buckets, overlap; ring volume "
        "(which the tree ignores)",
        {
            "model": "pai-v2",
            "ps_memory": True,
            "ps_local_reduce": True,
            "ps_latency": True,
            "collective": "tree",
            "sync_latency": True,
            "bucket_overlap": True,
            "inter_volume": "ring",
            "overlap": 0.5,
        },
        ["gpt2-xl", "bert-large-seq384"],
        None,
    ),  # gpt2-xl fits an A100 at amp-fp16 only without optimizer state
    (
        "pai-v2 scaling losses: overlap efficiency, linear coordination, sparse all-gather, bucketed overlap",
        {
            "model": "pai-v2",
            "bucket_overlap": True,
            "overlap_efficiency": 0.3,
            "coordination_us": 20.0,
            "coordination_growth": "linear",
            "sparse_allgather": True,
        },
        SPARSE_WORKLOADS,
        None,
    ),
    ("pai-v2 fabric tiers: oversubscribed tiers, hop latency, in-network reduction", {}, WORKLOADS, small_fabric),
    (
        "pai-v1 fabric tiers without reduction, pipelined, ring volume, parameter-server latency, 4 GPUs a server",
        {"model": "pai-v1", "collective": "pipelined", "inter_volume": "ring", "ps_latency": True, "gpus_per_node": 4},
        WORKLOADS,
        small_fabric_without_reduction,
    ),
]

#: the options of main's parameter-server work: a case that sets any of them must change the CPU's
#: outputs against the same case without them (so that it exercises the formulas it compares)
NEW_OPTIONS = tuple(ALL_PS)
#: the scaling-loss options: a case that sets them must change an allreduce-cluster step time
SCALING_OPTIONS = ("overlap_efficiency", "coordination_us", "coordination_growth", "sparse_allgather")


def grid_for(options, workloads=WORKLOADS, adjust=None):
    """The small grid of ``GRID`` x ``workloads`` under ``options``, changed by ``adjust``."""
    spec = spec_from_dict({"workloads": workloads, "grid": GRID, "options": options}, "the CUDA check")
    grid = prepare(spec)[0]
    return grid if adjust is None else adjust(grid)


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
    print(
        f"ok {name} ({'full' if write_cube else 'reduce-only'}): {len(cpu)} outputs equal; "
        f"valid {valid}, reasons {reasons}"
    )


def exercised(name, options, workloads, adjust):
    """Exit 1 unless the parameter-server and inter-volume options of the case change the CPU
    kernel's step times and, with ``ps_memory``, its best configurations (so the case compares
    those formulas, not the version-1 ones); a case without them passes."""
    if not any(key in options for key in (*NEW_OPTIONS, *SCALING_OPTIONS)):
        return
    plain = {key: value for key, value in options.items() if key not in (*NEW_OPTIONS, *SCALING_OPTIONS)}
    grid, base = grid_for(options, workloads, adjust), grid_for(plain, workloads, adjust)
    n = len(grid.jobs)
    got, ref = evaluate_block(grid, 0, 0, n, True).arrays, evaluate_block(base, 0, 0, n, True).arrays
    ps, cluster = L.ARCH_NAMES.index("ps-worker"), L.ARCH_NAMES.index("allreduce-cluster")
    changed = []
    for arch in (ps, cluster):
        a, b = got["step_time"][:, arch], ref["step_time"][:, arch]
        changed.append(int(np.sum(~((a == b) | (np.isnan(a) & np.isnan(b))))))
    if any(key in options for key in NEW_OPTIONS) and changed[0] == 0:
        sys.exit(f"{name}: the options do not change a ps-worker step time")
    if any(key in options for key in SCALING_OPTIONS) and changed[1] == 0:
        sys.exit(f"{name}: the scaling-loss options do not change an allreduce-cluster step time")
    if options.get("inter_volume") == "ring" and options.get("collective") != "tree" and changed[1] == 0:
        sys.exit(f"{name}: inter_volume = ring does not change an allreduce-cluster step time")
    if options.get("ps_memory") and np.array_equal(got["best_index"], ref["best_index"]):
        sys.exit(f"{name}: ps_memory does not change a best configuration")
    print(f"ok {name} exercised: {changed[0]} ps-worker and {changed[1]} allreduce-cluster step times changed")


def main():
    ns = gpu_kernels.load()
    shared = gpu_kernels.shared_helpers()
    for name in (
        "comm_seconds",
        "exchange_seconds",
        "configuration_reason",
        "class_terms",
        "job_gpu_terms",
        "bottleneck_code",
        "ps_seconds",
        "ps_update_fixed_seconds",
        "ps_wire_fraction",
        "ps_fits_memory_flag",
        "overlap_window",
        "coordination_seconds",
        "allgather_wire_fraction",
        "wire_fraction",
    ):
        if name not in shared:
            sys.exit(f"{name} is not among the helpers shared with the GPU: {sorted(shared)}")
    for name, module in shared.items():  # the GPU compiles the CPU helper's own code object
        if ns.helpers[name].fn.__code__ is not getattr(module, name).py_func.__code__:
            sys.exit(f"the GPU's {name} is not compiled from the CPU helper's code")
    print(f"ok {len(shared)} shared helpers: {', '.join(shared)}")
    if grid_for({}).options[L.O_MODEL] != L.MODEL_PAI_V2:
        sys.exit("the default compute model is not pai-v2: the default-model case does not compare pai-v2")
    for name, options, workloads, adjust in CASES:
        exercised(name, options, workloads, adjust)
        grid = grid_for(options, workloads, adjust)
        compare(name, grid, True)
        compare(name, grid, False)
    compare("missing input numbers", with_missing_numbers(grid_for({"model": "pai-v2"})), True)
    compare(
        "missing input numbers, every ps option",
        with_missing_numbers(grid_for(ALL_PS, SPARSE_WORKLOADS, small_v100)),
        True,
    )
    pipelined_launches()


def pipelined_launches():
    """``run_cuda`` with one job per launch (so the two sets of host buffers alternate over
    several launches) and blocks left out (as on --resume): each block as the CPU computes it."""
    from paigrid import cuda_sweep

    grid = grid_for({"model": "pai-v1"})
    blocks = [(0, 1), (1, 2)]
    cuda_sweep.LAUNCH_THREADS = 1
    for write_cube in (True, False):
        for todo in ([0, 1], [1]):
            got = list(cuda_sweep.run_cuda(grid, blocks, todo, write_cube, None, 1))
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
