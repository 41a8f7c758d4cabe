"""The CUDA LLM kernels against the CPU ones, bit for bit, in numba's CUDA simulator.

Run by tests/test_cuda_llm.py in a subprocess, since NUMBA_ENABLE_CUDASIM must be set before
numba.cuda is first imported: ``python tests/cuda_sim_llm_checks.py``.  Prints one line per case
and exits 1 on the first difference.  The pairs kernel runs random layouts (every reason code's
neighbourhood: tensor degrees beyond the domain, uneven interleaving, ZeRO 0-3, SP on and off,
context and expert parallelism) on designs with and without a network and a GPU without the
precision; the search kernels run a small wide space of a dense model and a narrow one of two MoE models
(routed experts; shared experts and a dense first layer) on two designs.
"""

import dataclasses
import os
import sys

os.environ["NUMBA_ENABLE_CUDASIM"] = "1"

import numpy as np  # noqa: E402

from paigrid.inputs.catalog import Catalogues  # noqa: E402
from paigrid.inputs.efficiency import defaults  # noqa: E402
from paigrid.kernels import cuda_llm  # noqa: E402
from paigrid.kernels import llm_columns as K  # noqa: E402
from paigrid.kernels import llm_search as S  # noqa: E402
from paigrid.kernels.llm import evaluate_llm  # noqa: E402
from paigrid.llm.evaluate import tables  # noqa: E402
from paigrid.llm.models import model  # noqa: E402
from paigrid.llm.parallelism import WIDE, Layout  # noqa: E402
from paigrid.llm.search import best_layout, search_tables  # noqa: E402
from paigrid.llm.tables import Hardware, LlmOptions  # noqa: E402

CATS, EFF = Catalogues.load(), defaults()
H100 = Hardware("H100-SXM5-80GB", "amp-bf16", 8, "nvswitch-nvlink4", "ib-ndr-400g", 1.0)
DESIGNS = [
    H100,
    dataclasses.replace(H100, network="none"),
    dataclasses.replace(H100, domain=72, nics_per_gpu=0.5),
    Hardware("V100-SXM2-16GB", "amp-bf16", 8, "nvlink2-hcm", "ib-edr-100g", 0.5),  # no bf16: invalid
]


def random_layouts(count: int, seed: int) -> list[Layout]:
    rng = np.random.default_rng(seed)
    return [
        Layout(
            int(rng.choice([1, 2, 4, 8, 16])),
            int(rng.choice([1, 2, 3, 4, 8])),
            int(rng.choice([1, 2, 4, 16])),
            int(rng.choice([1, 2, 4])),
            int(rng.choice([1, 2, 8])),
            int(rng.choice([1, 2, 3])),
            int(rng.choice([1, 2, 4])),
            int(rng.integers(0, 4)),
            str(rng.choice(["none", "selective", "full"])),
            bool(rng.integers(0, 2)),
        )
        for _ in range(count)
    ]


def check(name: str, cpu, gpu) -> None:
    for i, (a, b) in enumerate(zip(cpu, gpu)):
        if not np.array_equal(a, b, equal_nan=True):
            print(f"DIFFERENT {name} (output {i})")
            sys.exit(1)
    print(f"ok {name}: {len(cpu)} outputs equal")


def pairs(name: str, options: LlmOptions, seed: int) -> None:
    m = model(name)
    arrays = tables(m, random_layouts(60, seed), DESIGNS, CATS, EFF, options)
    out = np.empty((arrays[0].shape[0] * len(DESIGNS), K.N_RESULT_FIELDS))
    evaluate_llm(*arrays, out)
    codes = set(out[:, K.R_REASON].astype(int))
    check(f"pairs {name}", [out], [cuda_llm.evaluate_llm_cuda(*arrays)])
    print(f"  reasons exercised: {len(codes)}, valid: {int((out[:, K.R_REASON] == 0).sum())}")


#: the dense search's space, and a narrow one for the MoE searches (the simulator runs each
#: thread's enumeration in Python)
DENSE = dataclasses.replace(WIDE, max_tp=8, cp=(1, 2), recompute=("selective", "full"))
NARROW = dataclasses.replace(
    WIDE,
    max_tp=4,
    cp=(1,),
    vpp=(1, 2),
    micro_batch=(1, 2),
    zero=(1, 3),
    recompute=("selective",),
    sequence_parallel=(True,),
)


def search(name: str, n_gpu: int, space=DENSE) -> None:
    m = model(name)
    designs = DESIGNS[:1] + DESIGNS[2:3]
    arrays = search_tables(m, n_gpu, designs, CATS, EFF, LlmOptions.defaults(), space)
    rows = arrays[0].shape[0] * len(designs)
    probe = np.empty(rows)
    S.probe_llm(*arrays, probe)
    check(f"probe {name}", [probe], [cuda_llm.probe_llm_cuda(*arrays)])
    incumbent = probe.reshape(-1, len(designs)).min(axis=0)
    outs = (np.empty((rows, K.N_RESULT_FIELDS)), np.empty((rows, K.N_LAYOUT_FIELDS)), np.zeros((rows, S.N_COUNTS)))
    S.search_llm(*arrays, incumbent, *outs)
    check(f"search {name}", list(outs), list(cuda_llm.search_llm_cuda(*arrays, incumbent)))
    cpu = best_layout(m, n_gpu, designs, CATS, EFF, LlmOptions.defaults(), space)
    gpu = best_layout(m, n_gpu, designs, CATS, EFF, LlmOptions.defaults(), space, device="cuda")
    assert cpu.layouts == gpu.layouts and cpu.counts == gpu.counts, (cpu.layouts, gpu.layouts)
    check(f"best_layout {name}", [cpu.results], [gpu.results])
    counts = outs[2].sum(axis=0).astype(int)
    print(f"  pruned by memory {counts[S.C_MEMORY]}, by bound {counts[S.C_BOUND]}, evaluated {counts[S.C_EVALUATED]}")
    print(f"  {cpu.counts['layouts']} layouts, {cpu.counts['evaluated']} evaluated, best {cpu.layouts}")


if __name__ == "__main__":
    base = LlmOptions.defaults()
    pairs("llama3-70b", base, 1)
    pairs("mixtral-8x7b", dataclasses.replace(base, overlap_dp=False, tp_overlap=True), 2)
    pairs("deepseek-v3", dataclasses.replace(base, in_network_reduction=True, memory_margin=0.0), 3)
    # the search on the simulator is pure Python per thread: the dense model over a wide space,
    # the MoE models (Mixtral's experts; DeepSeek-MoE's shared experts and dense first layer) over
    # a narrow one (an MoE search over 16 GPUs in the dense model's space took 2 to over 10 minutes
    # simulated when last tried)
    search("nemo-gpt3-5b", 16)
    search("mixtral-8x7b", 16, NARROW)
    search("deepseek-moe-16b", 8, NARROW)
