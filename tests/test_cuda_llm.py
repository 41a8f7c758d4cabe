"""The LLM kernels on CUDA (``kernels.cuda_llm``): bit-identical to the CPU kernels in numba's
CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``, set in a subprocess before numba.cuda is imported),
and compiled to PTX with NVVM where it is installed; no GPU is needed."""

import pytest

from cuda_helpers import compile_ptx, run_simulator_checks


@pytest.mark.cuda_sim
def test_cuda_llm_kernels_give_the_cpu_outputs_in_the_simulator():
    stdout = run_simulator_checks("cuda_sim_llm_checks.py")
    for case in ("pairs llama3-70b", "pairs mixtral-8x7b", "pairs deepseek-v3"):
        assert f"ok {case}: 1 outputs equal" in stdout, stdout
    searched = ("nemo-gpt3-5b", "mixtral-8x7b", "deepseek-moe-16b")
    for name in searched:
        for case in (f"probe {name}: 1", f"search {name}: 3", f"best_layout {name}: 1"):
            assert f"ok {case} outputs equal" in stdout, stdout
    assert stdout.count("ok best_layout") == len(searched), stdout
    # every search prunes by memory and by bound and evaluates some layouts: each branch is compared
    pruned = [line.split() for line in stdout.splitlines() if line.startswith("  pruned by memory")]
    assert len(pruned) == len(searched), stdout
    by_memory, by_bound, evaluated = ([int(words[i].rstrip(",")) for words in pruned] for i in (3, 6, 8))
    assert min(by_memory) > 0 and min(by_bound) > 0 and min(evaluated) > 0, stdout
    exercised = [int(line.split(":")[1].split(",")[0]) for line in stdout.splitlines() if "reasons exercised" in line]
    assert len(exercised) == 3 and min(exercised) >= 5, stdout


PTX = """
import types
import numba
import numpy as np
import numba.cuda.dispatcher as dispatcher
from paigrid.inputs.catalog import Catalogues
from paigrid.inputs.efficiency import defaults
from paigrid.kernels import cuda_llm
from paigrid.kernels import llm_columns as K
from paigrid.kernels import llm_search as S
from paigrid.llm.tables import Hardware, LlmOptions
from paigrid.llm.evaluate import tables
from paigrid.llm.parallelism import Layout
from paigrid.llm.models import model
from paigrid.llm.search import search_tables

ns = cuda_llm.load()
# device functions are compiled for the current device's architecture: name one (sm_90), none is here
dispatcher.get_current_device = lambda: types.SimpleNamespace(compute_capability=(9, 0))
cats, eff, opts = Catalogues.load(), defaults(), LlmOptions.defaults()
m = model("mixtral-8x7b")
hw = [Hardware("H100-SXM5-80GB", "amp-bf16", 8, "nvswitch-nvlink4", "ib-ndr-400g", 1.0)]
pairs = tables(m, [Layout(tp=2, dp=4)], hw, cats, eff, opts)
stems = search_tables(m, 16, hw, cats, eff, opts)
rows = stems[0].shape[0]
cases = (
    (ns.pairs_kernel, (*pairs, np.empty((1, K.N_RESULT_FIELDS)))),
    (ns.probe_kernel, (*stems, np.empty(rows))),
    (ns.search_kernel, (*stems, np.empty(1), np.empty((rows, K.N_RESULT_FIELDS)),
                        np.empty((rows, K.N_LAYOUT_FIELDS)), np.empty((rows, S.N_COUNTS)))),
)
for kernel, args in cases:
    ptx, _ = ns.cuda.compile_ptx(kernel.py_func, tuple(numba.typeof(a) for a in args), cc=(9, 0))
    assert ".entry" in ptx
    print("ptx", kernel.py_func.__name__, len(ptx), "fused multiply-adds", ptx.count("fma.rn"))
"""


@pytest.mark.cuda_sim
def test_cuda_llm_kernels_compile_to_ptx():
    # the simulator runs Python; this compiles the real kernels (helpers included) with NVVM for sm_90
    stdout = compile_ptx(PTX)
    lines = [line for line in stdout.splitlines() if line.startswith("ptx ")]
    assert [line.split()[1] for line in lines] == ["_pairs_kernel", "_probe_kernel", "_search_kernel"], stdout
    # no math-library call of these kernels is fma-based, and NVVM is told not to contract a * b + c
    # (-fma=0, kernels.cuda._no_contraction), so the GPU rounds as the CPU does
    assert all(line.endswith(" fused multiply-adds 0") for line in lines), stdout
