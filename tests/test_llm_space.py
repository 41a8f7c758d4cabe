"""The wide LLM layout space and its pruned search: the new layout kinds' cost terms (tensor
groups beyond the NVLink domain on the fabric, interleaving with micro-batches not a multiple of
the stages, uneven stages) against the numpy reference, NaN positions included; the search's
best equal to evaluating every layout of the space one by one; its lower bound never above the
kernel's step."""

import dataclasses

import numpy as np
import pytest

from paigrid.inputs.catalog import Catalogues
from paigrid.inputs.efficiency import defaults
from paigrid.kernels import llm_columns as K
from paigrid.kernels.llm import evaluate_llm
from paigrid.kernels.llm_reference import evaluate_llm_reference
from paigrid.llm.evaluate import evaluate, predict, tables
from paigrid.llm.models import model
from paigrid.llm.parallelism import (
    WIDE,
    Layout,
    Space,
    count_layouts,
    enumerate_layouts,
    layout_label,
    layout_stems,
    parse_label,
    stem_interleaves,
)
from paigrid.llm.search import best_layout, search_tables
from paigrid.llm.tables import Hardware, LlmOptions

CATS = Catalogues.load()
EFF = defaults()
OPTIONS = LlmOptions.defaults()
H100 = Hardware("H100-SXM5-80GB", "amp-bf16", 8, "nvswitch-nvlink4", "ib-ndr-400g", 1.0)
DESIGNS = [
    H100,
    dataclasses.replace(H100, network="none"),
    dataclasses.replace(H100, domain=72, nics_per_gpu=0.5),
    Hardware("V100-SXM2-16GB", "amp-bf16", 8, "nvlink2-hcm", "ib-edr-100g", 0.5),  # no bf16: invalid
    Hardware("A100-SXM4-80GB", "amp-fp16", 8, "nvswitch-nvlink3", "roce-25g", 1.0),
]
#: a small wide space (the exhaustive side of the tests evaluates every layout one by one)
SMALL_WIDE = dataclasses.replace(WIDE, max_tp=16, cp=(1, 2))


def _agree(m, layouts, designs=DESIGNS, options=OPTIONS):
    arrays = tables(m, layouts, designs, CATS, EFF, options)
    out = np.empty((len(layouts) * len(designs), K.N_RESULT_FIELDS))
    evaluate_llm(*arrays, out)
    ref = evaluate_llm_reference(*arrays)
    assert np.array_equal(np.isnan(out), np.isnan(ref))
    np.testing.assert_allclose(out, ref, rtol=1e-12, equal_nan=True)
    return out


@pytest.mark.parametrize("name,n_gpu", [("nemo-gpt3-5b", 64), ("mixtral-8x7b", 64), ("llama3-8b", 32)])
def test_wide_space_agrees_with_the_reference(name, n_gpu):
    """Every layout kind of the wide space (tensor degrees 16 beyond the 8-GPU domain, ZeRO-2,
    sequence parallelism off, interleave factors with uneven stages, every micro-batch) agrees
    with the numpy reference on designs with and without a network, NaN positions included."""
    m = model(name)
    layouts = enumerate_layouts(m, n_gpu, SMALL_WIDE)
    rng = np.random.default_rng(3)
    sample = [layouts[i] for i in rng.choice(len(layouts), size=min(600, len(layouts)), replace=False)]
    assert {lay.zero for lay in sample} == {0, 1, 2, 3} and {lay.sp for lay in sample if lay.tp > 1} == {True, False}
    out = _agree(m, sample)
    reasons = set(out[:, K.R_REASON].astype(int))
    assert K.REASON_VALID in reasons and K.REASON_PRECISION in reasons


def test_tensor_groups_beyond_the_domain_are_costed_on_the_fabric():
    """tp 16 on 8-GPU domains: each all-reduce is a ring inside each domain on the whole message
    and one between the 2 domains on 1/8 of it over the fabric (no in-network reduction); with no
    network the layout is refused (tp-domain); on a 72-GPU domain it stays on NVLink, faster."""
    m = model("llama3-70b")
    lay = Layout(tp=16, pp=1, dp=4, micro_batch=1, zero=1, recompute="selective", sp=True)
    across = predict(m, lay, H100, CATS, EFF, OPTIONS)
    assert across["valid"], across["reason"]
    row = tables(m, [lay], [H100], CATS, EFF, OPTIONS)[1][0]
    message = m.seq_len * m.hidden * OPTIONS.activation_bytes
    inside = 2 * 7 / 8 * message / row[K.HW_INTRA_BW] + 2 * 7 * row[K.HW_INTRA_LAT]
    net = row[K.HW_NET_BW] * row[K.HW_NICS_PER_GPU]
    between = 2 * 1 / 2 * (message / 8) / net + 2 * 1 * row[K.HW_NET_LAT]
    per_layer = 4 * (inside + between) * (1 - (OPTIONS.tp_overlap_fraction if OPTIONS.tp_overlap else 0.0))
    assert across["tp_comm"] == pytest.approx(across["microbatches"] * m.layers * per_layer, rel=1e-12)
    refused = predict(m, lay, dataclasses.replace(H100, network="none"), CATS, EFF, OPTIONS)
    assert refused["reason_code"] == K.REASON_TP_DOMAIN
    nvl = predict(m, lay, dataclasses.replace(H100, domain=72), CATS, EFF, OPTIONS)
    assert nvl["valid"] and nvl["tp_comm"] < across["tp_comm"]


def test_interleaving_takes_any_count_of_at_least_p_micro_batches():
    """An interleaved schedule runs with micro-batches not a multiple of the stages (6 on 4) but
    not with fewer than the stages (2 on 4): reason interleave, in kernel, reference and the
    enumeration."""
    m = model("llama3-70b")
    hw = dataclasses.replace(H100, domain=72)
    six = Layout(tp=8, pp=4, dp=1, vpp=2, micro_batch=1, recompute="full")
    assert predict(m, six, hw, CATS, EFF, OPTIONS, 6)["valid"]
    two = predict(m, six, hw, CATS, EFF, OPTIONS, 2)
    assert two["reason_code"] == K.REASON_INTERLEAVE and "at least" in two["reason"]
    layouts = enumerate_layouts(m, 32, SMALL_WIDE, global_batch=6)
    assert any(lay.vpp > 1 and lay.pp == 4 for lay in layouts)
    assert all(6 // (lay.dp * lay.micro_batch) >= lay.pp for lay in layouts if lay.vpp > 1)
    _agree(m, [dataclasses.replace(six, vpp=v) for v in (1, 2, 3, 20, 21)], [hw])


def test_the_wide_space_holds_the_published_uneven_layouts():
    """Llama 3 405B's 126 layers on 16 stages x 4 virtual stages (Meta's layout, 16,384 H100) and
    DeepSeek-V3's 61 layers on 16 stages are enumerated; the wide space of GPT-3 175B on 1,024
    GPUs is wider than Calculon's 174,840 layouts."""
    llama = model("llama3-405b").with_seq_len(8192)
    stems = layout_stems(llama, 16384, WIDE, global_batch=2048)
    assert (8, 16, 128, 1, 1, 1) in stems
    assert 4 in stem_interleaves(llama, 16, 2048 // 128, WIDE)
    meta = predict(llama, parse_label("tp8-pp16-dp128-v4-cp1-ep1-mb1-zero1-full-sp"), H100, CATS, EFF, OPTIONS, 2048)
    assert meta["valid"], meta["reason"]
    deepseek = model("deepseek-v3")
    assert any(pp == 16 for _, pp, *_ in layout_stems(deepseek, 1024, WIDE))
    gpt3 = model("gpt3-175b")
    assert count_layouts(gpt3, 1024, WIDE) > 174_840
    small = model("nemo-gpt3-5b")
    assert count_layouts(small, 64, SMALL_WIDE) == len(enumerate_layouts(small, 64, SMALL_WIDE))


def _exhaustive(m, n_gpu, designs, space):
    layouts = enumerate_layouts(m, n_gpu, space)
    res = evaluate(m, layouts, designs, CATS, EFF, OPTIONS)
    step = np.where(np.isnan(res[..., K.R_STEP]), np.inf, res[..., K.R_STEP])
    pick = np.argmin(step, axis=0)
    return layouts, [(layouts[i] if np.isfinite(step[i, j]) else None, res[i, j]) for j, i in enumerate(pick)]


@pytest.mark.parametrize(
    "name,n_gpu,space",
    [
        ("nemo-gpt3-5b", 64, SMALL_WIDE),
        ("mixtral-8x7b", 32, SMALL_WIDE),
        ("llama3-8b", 16, dataclasses.replace(SMALL_WIDE, vpp=(1, 2, 3))),
        ("llama3-70b", 64, Space()),
        ("qwen3-30b-a3b", 32, dataclasses.replace(SMALL_WIDE, recompute=("full", "none"), zero=(3, 1))),
    ],
)
def test_pruned_search_equals_the_exhaustive_bests(name, n_gpu, space):
    """The pruned search (memory first, then the lower bound against the incumbent and the best
    so far) finds, per design, the layout and every result field of the fastest layout of the
    whole enumeration evaluated one by one (ties to the first), and no layout where none is
    valid; every enumerated layout is counted once, as pruned or evaluated."""
    m = model(name)
    layouts, exhaustive = _exhaustive(m, n_gpu, DESIGNS, space)
    found = best_layout(m, n_gpu, DESIGNS, CATS, EFF, OPTIONS, space)
    for j, (lay, res) in enumerate(exhaustive):
        assert found.layouts[j] == lay, (j, found.layouts[j], lay)
        if lay is None:
            assert np.isnan(found.results[j, K.R_STEP]) and found.reasons[j] != K.REASON_VALID
        else:
            assert np.array_equal(found.results[j], res, equal_nan=True)
    c = found.counts
    assert c["layouts"] == len(layouts) * len(DESIGNS)
    assert c["pruned_memory"] + c["pruned_bound"] + c["evaluated"] == c["layouts"]
    assert c["pruned_memory"] > 0 and c["pruned_bound"] > 0
    assert sum(lay is not None for lay, _ in exhaustive) >= 2  # valid designs are compared too


def test_the_lower_bound_never_exceeds_the_step():
    """``step_lower_bound`` (the bound the search prunes with) is at most the kernel's
    step on every valid layout of a sample, context and expert parallel ones included."""
    from paigrid.kernels.llm_search import step_lower_bound

    for name, n in (("mixtral-8x7b", 64), ("llama3-8b", 32)):
        m = model(name)
        layouts = enumerate_layouts(m, n, SMALL_WIDE)[::23]
        for opts in (OPTIONS, dataclasses.replace(OPTIONS, overlap_dp=False, tp_overlap=True)):
            lay, hw, mvec, ctab, ovec = tables(m, layouts, DESIGNS, CATS, EFF, opts)
            out = np.empty((len(layouts) * len(DESIGNS), K.N_RESULT_FIELDS))
            evaluate_llm(lay, hw, mvec, ctab, ovec, out)
            step = out[:, K.R_STEP].reshape(len(layouts), len(DESIGNS))
            valid = np.argwhere(~np.isnan(step))
            assert len(valid) > 100
            for i, j in valid:
                assert step_lower_bound(lay[i], hw[j], mvec, ctab, ovec) <= step[i, j]


def test_search_tables_cover_every_stem_shape():
    m = model("mixtral-8x7b")
    stems, hw, mvec, ctab, opts, choices = search_tables(m, 64, DESIGNS[:1], CATS, EFF, OPTIONS, SMALL_WIDE)
    assert stems.shape[0] == len(layout_stems(m, 64, SMALL_WIDE))
    shapes = {(tp, mb / cp, ep) for tp, cp, ep, mb in stems[:, [0, 3, 4, 5]]}  # one GEMM shape each
    assert ctab.shape[1] == len(shapes) and set(stems[:, 6]) == set(range(len(shapes)))
    assert np.all(ctab[0, :, 0, 0, K.CT_LAYER] > 0)


def test_predict_layout_best_prints_the_searched_best():
    """``paigrid predict --layout best``: the search's best layout and its full breakdown (the
    same step as the search), the counts in the JSON; no valid layout is one sentence."""
    import json

    from cli_helpers import assert_clean_error, run

    args = ["predict", "--workload", "nemo-gpt3-5b", "--gpu", "H100-SXM5-80GB", "--n-gpu", 16, "--domain", 8]
    done = run(*args, "--network", "ib-ndr-400g", "--layout", "best", "--json")
    assert done.exit_code == 0, done.output
    out = json.loads(done.output)
    found = best_layout(model("nemo-gpt3-5b"), 16, [H100], CATS, EFF, OPTIONS)
    assert out["layout"] == layout_label(found.layouts[0]) and out["step_time"] == found.fields()["step_time"]
    assert out["searched"]["layouts"] == count_layouts(model("nemo-gpt3-5b"), 16, WIDE)
    table = run(*args, "--network", "ib-ndr-400g", "--layout", "BEST")
    assert table.exit_code == 0 and "layouts searched in" in table.output, table.output
    v100 = ["predict", "--workload", "nemo-gpt3-5b", "--gpu", "V100-SXM2-16GB", "--n-gpu", 16, "--layout", "best"]
    assert_clean_error(run(*v100), "no layout of 16 GPUs is valid", "precision")  # V100 has no bf16


def test_a_search_winner_fits_in_the_gpus_memory():
    """The search ranks on the strict memory check (``memory_margin`` 0 by default): every
    design's best layout, on a space whose layouts run from far too big to small, needs at most
    the GPU's memory (in the bytes it reports), and a margin admits more layouts than none."""
    from paigrid.llm.tables import memory_bytes

    assert OPTIONS.memory_margin == 0.0
    m = model("llama3-70b")
    found = best_layout(m, 64, DESIGNS, CATS, EFF, OPTIONS, Space())
    lenient = best_layout(m, 64, DESIGNS, CATS, EFF, dataclasses.replace(OPTIONS, memory_margin=0.5), Space())
    assert any(lay is not None for lay in found.layouts)
    for j, lay in enumerate(found.layouts):
        if lay is not None:
            assert found.results[j, K.R_MEMORY] <= memory_bytes(CATS, DESIGNS[j].gpu)
    assert lenient.counts["pruned_memory"] < found.counts["pruned_memory"]
