"""What the PAI-study report's numbers, text and figures share: the study's constants (the
pipeline command, the time components, the projections' hardware ladders, the paper's headline
numbers) and the number formatting."""

from __future__ import annotations

import math

from paigrid import schema
from paigrid.kernels import dp_columns as L

SWEEP_COMMAND = (
    "paigrid population --jobs 10000 --seed 1 --out pop.csv && "
    "paigrid study-spec --out study.toml && "
    "paigrid sweep study.toml --workloads pop.csv --out study.h5 && "
    "paigrid report study.h5 --out report/"
)
"""The study pipeline, as printed by ``paigrid report --help`` and in error messages."""

COMPONENTS = ("t_data", "t_flop", "t_mem", "t_comm")
COMPONENT_LABELS = {
    "t_data": "input I/O",
    "t_flop": "FLOP-bound compute",
    "t_mem": "memory-bound ops",
    "t_comm": "communication",
}
BOTTLENECKS = L.BOTTLENECK_NAMES
ARCHS = L.ARCH_NAMES
COORDS = ("arch", "gpu", "intra", "network", "precision")
# (job, arch, gpu, n_gpu, intra, network, precision), and the validity variable of the cube's format
# (schema.validity_variable: valid in format 1, invalid_reason from format 2)
FULL_VARIABLES = ("step_time", "t_comm", "bottleneck")
JOB_GPU_VARIABLES = tuple(schema.JOB_GPU_VARIABLES)  # (job, gpu, precision)
CURRENT_VARIABLES = tuple(f"current_{d}" for d in COORDS) + ("current_n_gpu",)

NETWORK_ARCHS = ("ps-worker", "allreduce-cluster")
"""Architectures whose step uses the inter-server network."""

NVLINK_SERVER = {
    "P100-PCIe-16GB": ("P100-SXM2-16GB", "nvlink1-hcm"),
    "P100-SXM2-16GB": ("P100-SXM2-16GB", "nvlink1-hcm"),
    "V100-PCIe-16GB": ("V100-SXM2-16GB", "nvlink2-hcm"),
    "V100-SXM2-16GB": ("V100-SXM2-16GB", "nvlink2-hcm"),
    "V100-SXM2-32GB": ("V100-SXM2-32GB", "nvlink2-hcm"),
    "V100-SXM3-32GB": ("V100-SXM3-32GB", "nvswitch-nvlink2"),
    "A100-PCIe-40GB": ("A100-SXM4-40GB", "nvswitch-nvlink3"),
    "A100-SXM4-40GB": ("A100-SXM4-40GB", "nvswitch-nvlink3"),
    "A100-PCIe-80GB": ("A100-SXM4-80GB", "nvswitch-nvlink3"),
    "A100-SXM4-80GB": ("A100-SXM4-80GB", "nvswitch-nvlink3"),
    "H100-PCIe-80GB": ("H100-SXM5-80GB", "nvswitch-nvlink4"),
    "H100-SXM5-80GB": ("H100-SXM5-80GB", "nvswitch-nvlink4"),
    "H200": ("H200", "nvswitch-nvlink4"),
}
"""GPU of a PS/Worker job -> (GPU, intra link) of the NVLink server of the same generation.

A PCIe card maps to its SXM sibling of the same memory size (P100-PCIe-16GB -> P100-SXM2-16GB,
whose peak FP32 is 10.6 instead of 9.3 TFLOP/s; V100-PCIe-16GB -> V100-SXM2-16GB, 15.7 instead
of 14 TFLOP/s), an SXM part keeps its GPU.  GPUs with no NVLink part (K80, T4, A10, L4) have no
NVLink server: such jobs are excluded and counted."""

GENERATIONS = ("P100", "V100", "A100", "H100")
GPU_LADDERS = {
    "pcie": (
        ("P100-PCIe-16GB", "pcie3"),
        ("V100-PCIe-16GB", "pcie3"),
        ("A100-PCIe-40GB", "pcie3"),
        ("H100-PCIe-80GB", "pcie3"),
    ),
    "nvlink": (
        ("P100-SXM2-16GB", "nvlink1-hcm"),
        ("V100-SXM2-16GB", "nvlink2-hcm"),
        ("A100-SXM4-40GB", "nvswitch-nvlink3"),
        ("H100-SXM5-80GB", "nvswitch-nvlink4"),
    ),
}
"""(GPU, intra link) of each generation of :data:`GENERATIONS`, for jobs on PCIe servers
(current intra link named ``pcie*``: PCIe cards, intra link unchanged) and on NVLink servers
(SXM parts with their generation's NVLink)."""

ETHERNET = ("eth-25g", "eth-100g")
PRECISIONS = ("fp32", "amp-fp16")

PAPER = {"comm_share": 0.62, "ps_nvlink_faster": 0.60, "eth_speedup": 1.7}
"""The paper's three headline results (abstract of Wang et al., IISWC 2019)."""

REASONS = {
    "not_in_cube": "the configuration is not in the cube",
    "unsupported": "the GPU does not support the precision",
    "invalid": "the configuration is invalid",
    "no_memory": "it does not fit in GPU memory",
    "no_memory_now": "it does not fit in GPU memory by the model's estimate, in its current configuration already",
}


def pct(x: float) -> str:
    """A fraction as a percentage with one decimal ("n/a" when not finite)."""
    return "n/a" if x is None or not math.isfinite(x) else f"{100 * x:.1f}%"


def times(x: float) -> str:
    """A ratio as "1.23x" ("n/a" when not finite)."""
    return "n/a" if x is None or not math.isfinite(x) else f"{x:.2f}x"
