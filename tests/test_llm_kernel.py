"""The LLM step-time kernel: agreement with its numpy reference (NaN positions included) and
its bubble, ZeRO, expert, context and sequence-parallel terms against the published formulas."""

import dataclasses

import numpy as np
import pytest

from paigrid.inputs.catalog import Catalogues
from paigrid.inputs.efficiency import defaults
from paigrid.kernels import llm_columns as K
from paigrid.kernels.llm import evaluate_llm, hierarchical_allreduce, memory_bytes
from paigrid.kernels.llm_reference import evaluate_llm_reference
from paigrid.llm.evaluate import evaluate, predict, tables
from paigrid.llm.models import model
from paigrid.llm.parallelism import Layout, enumerate_layouts, reason_text
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


def _random_layouts(m, count, seed):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        out.append(
            Layout(
                int(rng.choice([1, 2, 4, 8, 16])),
                int(rng.choice([1, 2, 3, 4, 8])),
                int(rng.choice([1, 2, 4, 16, 64])),
                int(rng.choice([1, 2, 3, 4])),
                int(rng.choice([1, 2, 8])),
                int(rng.choice([1, 2])),
                int(rng.choice([1, 2, 4])),
                int(rng.integers(0, 4)),
                str(rng.choice(["none", "selective", "full"])),
                bool(rng.integers(0, 2)),
            )
        )
    return out


@pytest.mark.parametrize("name", ["llama3-70b", "mixtral-8x7b"])
def test_kernel_agrees_with_the_numpy_reference(name):
    m = model(name)
    layouts = _random_layouts(m, 300, seed=7) + enumerate_layouts(m, 64)[:200]
    arrays = tables(m, layouts, DESIGNS, CATS, EFF, OPTIONS)
    out = np.empty((len(layouts) * len(DESIGNS), K.N_RESULT_FIELDS))
    evaluate_llm(*arrays, out)
    ref = evaluate_llm_reference(*arrays)
    assert np.array_equal(np.isnan(out), np.isnan(ref))
    np.testing.assert_allclose(out, ref, rtol=1e-12, equal_nan=True)
    reasons = set(out[:, K.R_REASON].astype(int))
    assert K.REASON_VALID in reasons and len(reasons) >= 6  # the sample reaches valid and many invalid cases
    no_overlap = dataclasses.replace(OPTIONS, overlap_dp=False)
    arrays = tables(m, layouts, DESIGNS, CATS, EFF, no_overlap)
    evaluate_llm(*arrays, out)
    np.testing.assert_allclose(out, evaluate_llm_reference(*arrays), rtol=1e-12, equal_nan=True)


@pytest.mark.parametrize("name", ["deepseek-v3", "qwen3-30b-a3b", "llama3-405b"])
def test_kernel_agrees_with_the_reference_on_the_new_terms(name):
    """Multi-head latent attention and head sizes apart from hidden / heads (the key/value
    head count the tensor check reads), uneven interleaved stages (v up to 5 on 3 stages),
    hidden async-TP collectives, contended data-parallel overlap, fragmentation, the memory
    margin, the all-gathered GEMM inputs and the reduce-scatter buffer: kernel and reference
    agree, NaN positions included."""
    m = model(name)
    rng = np.random.default_rng(11)
    layouts = [
        dataclasses.replace(lay, vpp=int(rng.choice([1, 2, 3, 5])), pp=int(rng.choice([1, 3, 4, 16])))
        for lay in _random_layouts(m, 300, seed=5)
    ]
    options = dataclasses.replace(
        OPTIONS, tp_overlap=True, tp_overlap_fraction=0.4, overlap_efficiency=0.6, memory_margin=0.0, fragmentation=0.2
    )
    # FP8-stored activations: a full recomputation's 16-bit layer inputs are not scaled
    fp8_stored = dataclasses.replace(options, stored_activation_bytes=1.5, memory_margin=0.3)
    # DTensor tensor parallelism's all-gathered GEMM inputs (with and without sequence parallelism)
    gathered = dataclasses.replace(fp8_stored, gathered_inputs=True)
    # and FSDP2's reduce-scatter buffer below ZeRO-3 (torchtitan's pipeline)
    rs_buffer = dataclasses.replace(gathered, reduce_scatter_buffer=True)
    for opts in (OPTIONS, options, fp8_stored, gathered, rs_buffer):
        arrays = tables(m, layouts, DESIGNS, CATS, EFF, opts)
        out = np.empty((len(layouts) * len(DESIGNS), K.N_RESULT_FIELDS))
        evaluate_llm(*arrays, out)
        ref = evaluate_llm_reference(*arrays)
        assert np.array_equal(np.isnan(out), np.isnan(ref))
        np.testing.assert_allclose(out, ref, rtol=1e-12, equal_nan=True)
        assert K.REASON_VALID in set(out[:, K.R_REASON].astype(int))


def test_interleaved_uneven_stages_hold_v_chunks_of_the_ceiling():
    """126 layers on 16 ranks x 4 virtual stages: 64 chunks of 1 or 2 layers, so the busiest rank
    holds 4 x 2 = 8 layers and the lightest 4 x 1 = 4 (kernel.stage_layers)."""
    from paigrid.kernels.llm import stage_layers

    assert stage_layers(126.0, 16.0, 4.0) == (8.0, 4.0)
    assert stage_layers(126.0, 16.0, 1.0) == (8.0, 7.0)
    assert stage_layers(61.0, 16.0, 1.0) == (4.0, 3.0)
    assert stage_layers(126.0, 16.0, 8.0) == (8.0, 0.0)  # 128 chunks: the embedding and the loss take two
    m = model("llama3-405b")
    hw = dataclasses.replace(H100, domain=72, gpu="B200", intra="nvlink5")
    assert (
        _one(m, Layout(tp=4, pp=16, vpp=8, dp=1, recompute="full"), hw, batch=64)["reason_code"] != K.REASON_PP_LAYERS
    )
    assert (
        _one(m, Layout(tp=4, pp=16, vpp=9, dp=1, recompute="full"), hw, batch=64)["reason_code"] == K.REASON_PP_LAYERS
    )


def test_overlap_contends_instead_of_hiding_whole():
    """With an overlap efficiency e < 1 a data-parallel collective of d seconds under a window w
    leaves d - e min(d, w) exposed (all of it hidden only at e = 1 and d <= w); async TP hides
    its fraction of the tensor-parallel time."""
    m = model("llama3-70b")
    lay = Layout(tp=8, pp=1, dp=32, micro_batch=1, zero=1, recompute="none")
    full = _one(m, lay, options=dataclasses.replace(OPTIONS, overlap_efficiency=1.0))
    part = _one(m, lay, options=dataclasses.replace(OPTIONS, overlap_efficiency=0.5))
    window = full["compute"] / full["microbatches"]
    assert full["dp_comm_exposed"] == pytest.approx(max(0.0, full["dp_comm"] - window))
    assert part["dp_comm_exposed"] == pytest.approx(part["dp_comm"] - 0.5 * min(part["dp_comm"], window))
    hidden = _one(m, lay, options=dataclasses.replace(OPTIONS, tp_overlap=True, tp_overlap_fraction=0.5))
    assert hidden["tp_comm"] == pytest.approx(0.5 * full["tp_comm"])


def _one(m, layout, design=H100, options=OPTIONS, batch=None):
    return predict(m, layout, design, CATS, EFF, options, batch)


def test_bubble_is_narayanan_1f1b_and_interleaved():
    """Bubble time fraction = (p - 1) / m for 1F1B and (p - 1) / (v m) interleaved (Narayanan
    et al. 2021, sections 2.2.1-2.2.2), m micro-batches per pipeline."""
    m = model("llama3-70b")
    for v in (1, 2, 4):
        r = _one(m, Layout(tp=8, pp=4, dp=8, vpp=v, micro_batch=1, recompute="full"))
        assert r["valid"], r["reason"]
        per_microbatch = (r["compute"] + r["tp_comm"] + r["cp_comm_exposed"] + r["ep_comm"]) / r["microbatches"]
        assert r["bubble"] / (r["microbatches"] * per_microbatch) == pytest.approx(3 / (v * r["microbatches"]))
    assert _one(m, Layout(tp=8, pp=1, dp=32, micro_batch=1, recompute="full"))["bubble"] == 0


def test_zero_stages_shard_the_model_states_as_rajbhandari():
    """Per-GPU model states with d data-parallel ranks: 18 P (stage 0), 6 P + 12 P/d (1),
    2 P + 16 P/d (2), 18 P/d (3) with bf16 weights, fp32 gradients and 12 bytes of Adam state
    (Rajbhandari et al. 2020, Figure 1, with Megatron's byte counts)."""
    m = model("llama2-7b")
    d = 16
    mem = {
        z: _one(
            m,
            Layout(tp=1, pp=1, dp=d, micro_batch=1, zero=z, recompute="full"),
            dataclasses.replace(H100, gpu="B200", intra="nvlink5"),
        )["memory_per_gpu"]
        for z in range(4)
    }
    arrays = tables(m, [Layout(dp=d)], [H100], CATS, EFF, OPTIONS)
    vec = arrays[2]
    params = m.layers * vec[K.M_SHARED_PARAMS] + vec[K.M_EMBED_PARAMS]
    # stage 3 also holds FSDP's unsharded working copies: two layers' bf16 weights (this one and
    # the prefetched one) and one layer's 16-bit gradients before the reduce-scatter
    layer = vec[K.M_SHARED_PARAMS]
    states = {
        0: 18 * params,
        1: 6 * params + 12 * params / d,
        2: 2 * params + 16 * params / d,
        3: 18 * params / d + (2 * 2 + 2) * layer,
    }
    for z in range(1, 4):
        assert mem[0] - mem[z] == pytest.approx(states[0] - states[z], rel=1e-9)


def test_expert_parallel_all_to_all_and_expert_memory():
    """Each of the 4 all-to-alls per MoE layer (dispatch, combine; forward and backward) sends
    (e - 1)/e of the token's k copies of h activations (GShard / DeepSpeed-MoE); the routed
    experts' parameters are split e ways, and their optimizer state is sharded over their
    expert-data-parallel replicas."""
    m = model("deepseek-moe-16b")
    base = Layout(tp=1, pp=1, dp=8, ep=1, micro_batch=1, zero=1, recompute="full", sp=False)
    r1 = _one(m, base, dataclasses.replace(H100, gpu="B200", intra="nvlink5"))
    r8 = _one(m, dataclasses.replace(base, ep=8), dataclasses.replace(H100, gpu="B200", intra="nvlink5"))
    assert r1["ep_comm"] == 0 and r8["ep_comm"] > 0
    link = CATS.links.row("nvlink5")
    bw = float(link["nominal_GB_per_s"]) * 1e9 * float(link["efficiency"])
    tokens = 1 * m.seq_len
    per_a2a = tokens * m.experts_per_token * m.hidden * 2 * 7 / 8 / bw + 7 * 3e-6
    # full recomputation runs the forward's two all-to-alls again: 6 per MoE layer per micro-batch
    assert r8["ep_comm"] == pytest.approx(r8["microbatches"] * m.moe_layers * 6 * per_a2a, rel=1e-9)
    vec = tables(m, [base], [H100], CATS, EFF, OPTIONS)[2]
    expert_params = m.layers * vec[K.M_EXPERT_PARAMS]
    # weights and grads are split 8 ways; the ZeRO-1 optimizer state is 1/8 per GPU either way:
    # sharded over the 8 data ranks without expert parallelism, and with it each expert has a
    # single replica (8 x 8 / 8 expert-data ranks: one) that keeps its whole state
    saved = expert_params * (1 - 1 / 8) * (2 + 4)
    assert r1["memory_per_gpu"] - r8["memory_per_gpu"] == pytest.approx(saved, rel=1e-9)


def test_sequence_parallel_keeps_the_volume_and_splits_the_activations():
    """Korthikanti et al. 2022: sequence parallelism replaces each all-reduce by a reduce-scatter
    + all-gather of the same volume and splits the 10 s b h replicated activations t ways."""
    m = model("llama3-70b")
    lay = Layout(tp=8, pp=1, dp=4, micro_batch=1, zero=1, recompute="selective", sp=False)
    off = _one(m, lay, dataclasses.replace(H100, gpu="B200", intra="nvlink5"))
    on = _one(m, dataclasses.replace(lay, sp=True), dataclasses.replace(H100, gpu="B200", intra="nvlink5"))
    assert on["tp_comm"] == pytest.approx(off["tp_comm"], rel=1e-12)
    saved = m.layers * m.seq_len * 10 * m.hidden * (1 - 1 / 8)
    assert off["memory_per_gpu"] - on["memory_per_gpu"] == pytest.approx(saved, rel=1e-9)


def test_context_parallel_is_hidden_behind_attention_until_it_is_not():
    m = model("llama3-8b").with_seq_len(131072)
    lay = Layout(tp=8, pp=1, dp=1, cp=8, micro_batch=1, zero=1, recompute="selective")
    inside = _one(m, lay, dataclasses.replace(H100, domain=72), batch=64)
    across = _one(m, lay, dataclasses.replace(H100, network="eth-10g"), batch=64)
    assert inside["cp_comm_exposed"] == 0.0  # the long attention hides the exchange
    assert across["cp_comm_exposed"] > 0.0


def test_every_reason_code_has_its_sentence():
    m = model("llama3-70b")
    cases = {
        K.REASON_PRECISION: (Layout(tp=8, dp=32), DESIGNS[3]),
        K.REASON_TP_HEADS: (Layout(tp=3, dp=1), H100),
        K.REASON_TP_DOMAIN: (Layout(tp=16, dp=2), DESIGNS[1]),  # beyond the domain with no network
        K.REASON_CP_SEQ: (Layout(tp=8, cp=3, dp=2), H100),
        K.REASON_EP_EXPERTS: (Layout(tp=8, ep=2, dp=4), H100),
        K.REASON_BATCH: (Layout(tp=8, dp=3), H100),
        K.REASON_PP_LAYERS: (Layout(tp=1, pp=81, dp=1), H100),
        K.REASON_INTERLEAVE: (Layout(tp=8, pp=1, vpp=2, dp=4), H100),
        K.REASON_NO_NETWORK: (Layout(tp=8, pp=4, dp=4, recompute="full"), DESIGNS[1]),
        K.REASON_MEMORY: (Layout(tp=1, dp=8, zero=0, recompute="none"), H100),
    }
    for code, (lay, hw) in cases.items():
        r = _one(m, lay, hw)
        assert r["reason_code"] == code, (code, r["reason"])
        assert not r["valid"] and r["reason"].endswith(".") and np.isnan(r["step_time"])
    assert "GiB per GPU" in _one(m, *cases[K.REASON_MEMORY])["reason"]
    assert reason_text(K.REASON_TP_FFN, Layout(tp=3), m).startswith("tensor degree 3")


def test_enumerated_layouts_pass_every_shape_check():
    m = model("llama3-405b")
    layouts = enumerate_layouts(m, 1024)
    assert layouts and all(lay.n_gpu == 1024 for lay in layouts)
    res = evaluate(m, layouts, [dataclasses.replace(H100, domain=72)], CATS, EFF, OPTIONS)
    codes = set(res[:, 0, K.R_REASON].astype(int))
    assert codes <= {K.REASON_VALID, K.REASON_MEMORY}
    assert K.REASON_VALID in codes


def test_capacity_factor_pads_expert_compute_and_all_to_all():
    """A capacity factor of 1.25 sends 1.25 x the routed tokens in each all-to-all and computes
    1.25 x the routed experts' GEMMs; the model FLOPs (useful work) do not change."""
    from paigrid.llm import shapes as S

    m = model("deepseek-moe-16b")
    padded = dataclasses.replace(m, capacity_factor=1.25)
    lay = Layout(tp=1, pp=1, dp=8, ep=8, micro_batch=1, zero=1, recompute="full", sp=False)
    b200 = dataclasses.replace(H100, gpu="B200", intra="nvlink5")
    r1, r2 = _one(m, lay, b200), _one(padded, lay, b200)
    link = CATS.links.row("nvlink5")
    bw = float(link["nominal_GB_per_s"]) * 1e9 * float(link["efficiency"])
    volume = r1["microbatches"] * m.moe_layers * 6 * m.seq_len * m.experts_per_token * m.hidden * 2 * 7 / 8 / bw
    assert r2["ep_comm"] - r1["ep_comm"] == pytest.approx(0.25 * volume, rel=1e-9)
    assert r2["compute"] > r1["compute"]
    assert S.model_flops_per_token(padded) == S.model_flops_per_token(m)
    assert S.padded_expert_flops(padded) == 2 * 0.25 * 6 * 3 * m.hidden * m.moe_ffn_hidden


def test_uneven_layers_are_costed_per_stage():
    """Llama-3 405B's 126 layers on 16 stages: 14 stages of 8 layers and 2 of 7, the output
    layer on the last stage (one of the 7); the slowest stage sets the pace, so one micro-batch
    takes max(8 x layer, 7 x layer + output layer) and the step (m + p - 1) of them plus the
    pipeline sends, the exposed data-parallel time and the optimizer."""
    m = model("llama3-405b")
    hw = dataclasses.replace(H100, domain=72, gpu="B200", intra="nvlink5")
    lay = Layout(tp=8, pp=16, dp=8, micro_batch=1, zero=1, recompute="full")
    arrays = tables(m, [lay], [hw], CATS, EFF, OPTIONS)
    ct = arrays[3][0, 0, 2, 1]
    row = arrays[1][0]
    tokens = m.seq_len
    ring = 2 * 7 / 8 * tokens * m.hidden * 2 / row[K.HW_INTRA_BW] + 2 * 7 * row[K.HW_INTRA_LAT]
    layer = tokens * ct[K.CT_LAYER] + 6 * ring
    out_layer = tokens * ct[K.CT_LOGITS]
    r = _one(m, lay, hw)
    assert r["valid"], r["reason"]
    mb = r["microbatches"]
    t_mb = max(8 * layer, 7 * layer + out_layer)
    assert (r["compute"] + r["tp_comm"]) / mb == pytest.approx(t_mb, rel=1e-12)
    assert r["bubble"] == pytest.approx(15 * t_mb, rel=1e-12)
    assert r["step_time"] == pytest.approx(
        (mb + 15) * t_mb + r["pp_comm"] + r["dp_comm_exposed"] + r["optimizer"], rel=1e-12
    )
    # the even split of 128 layers puts 8 layers and the output layer on the last stage: slower;
    # 112 layers (7 each) are faster; 126 lies between
    step = {n: _one(dataclasses.replace(m, layers=n), lay, hw)["step_time"] for n in (112, 126, 128)}
    assert step[112] < step[126] < step[128]
    # the memory is the first stage's: 8 layers (ceil(126 / 16)) and the embeddings
    vec = arrays[2]
    assert r["memory_per_gpu"] == pytest.approx(float(memory_bytes(arrays[0][0], vec, arrays[4], mb)), rel=1e-12)
    params = 8 * vec[K.M_SHARED_PARAMS] / 8 + vec[K.M_EMBED_PARAMS] / 8
    assert r["optimizer"] == pytest.approx(params / 8 * OPTIONS.update_bytes / row[K.HW_HBM], rel=1e-12)


def test_low_precision_casts_cost_their_bytes_at_the_hbm_rate(monkeypatch):
    """An FP8 layer pays, per token, its cast elements (``shapes.quantized_elements``) x 4 bytes
    (a BF16 read, row- and column-wise FP8 writes; 6 with current scaling's amax pass, 3.125 for
    NVFP4) at the HBM rate over forward + backward; a BF16 layer casts nothing."""
    from paigrid.inputs.kernel_tables import generation
    from paigrid.llm import shapes as S
    from paigrid.llm import tables as T

    assert T.quantization_bytes("amp-bf16") == 0.0
    assert (T.quantization_bytes("fp8"), T.quantization_bytes("fp8-current")) == (4.0, 6.0)
    assert T.quantization_bytes("nvfp4") == pytest.approx(2.0 + 2 * 0.5625)
    m = model("llama3-8b")
    pairs = [("H100-SXM5-80GB", "fp8")]
    with_casts = T.compute_table(m, CATS, EFF, pairs, [1, 2], "fused")
    monkeypatch.setattr(T, "quantization_bytes", lambda precision: 0.0)
    without = T.compute_table(m, CATS, EFF, pairs, [1, 2], "fused")
    hbm = (
        CATS.gpus.number("H100-SXM5-80GB", "hbm_GB_per_s")
        * 1e9
        * EFF.class_for("hbm", generation(CATS, "H100-SXM5-80GB"), "*")
    )
    for ti, t in enumerate((1, 2)):
        cast = S.quantized_elements(m, False, t, m.seq_len) * 4.0 / hbm
        got = with_casts[0, ti, 0, 1, K.CT_LAYER] - without[0, ti, 0, 1, K.CT_LAYER]
        assert got == pytest.approx(cast, rel=1e-9)
        full = with_casts[0, ti, 2, 1, K.CT_LAYER] - without[0, ti, 2, 1, K.CT_LAYER]
        assert full == pytest.approx(cast * 4.0 / 3.0, rel=1e-9)  # a full recomputation casts the inputs again


def test_full_recomputation_keeps_16_bit_layer_inputs_under_fp8():
    """With full recomputation only the layer being recomputed stores FP8 GEMM inputs: halving
    the stored bytes per value changes the memory by half of that one layer's activations, not
    of the checkpointed layer inputs (Korthikanti et al.'s 2 s b h a layer, 16-bit)."""
    from paigrid.llm.parallelism import Layout

    m = model("llama3-70b")
    layout = Layout(tp=8, pp=1, dp=4, cp=1, ep=1, vpp=1, micro_batch=2, zero=1, recompute="full", sp=True)
    arrays = tables(m, [layout], DESIGNS[:1], CATS, EFF, OPTIONS)
    lay, vec = arrays[0][0], arrays[2]
    full16 = memory_bytes(lay, vec, dataclasses.replace(OPTIONS, stored_activation_bytes=2.0).vector(), 64.0)
    full8 = memory_bytes(lay, vec, dataclasses.replace(OPTIONS, stored_activation_bytes=1.0).vector(), 64.0)
    tokens = 2 * m.seq_len
    one_layer = tokens * (vec[K.M_ACT_REPLICATED] / 8 + vec[K.M_ACT_SPLIT] / 8 + vec[K.M_ACT_CORE] / 8)
    assert full16 - full8 == pytest.approx(one_layer / 2, rel=1e-12)


def _ring(nbytes, n, bw, lat):
    """The ring all-reduce: 2 (n - 1) / n x bytes / bw + 2 (n - 1) x latency [s]."""
    return 0.0 if n <= 1 else 2 * (n - 1) / n * nbytes / bw + 2 * (n - 1) * lat


def test_expert_gradients_are_reduced_over_the_expert_data_group():
    """tp 1, ep 8, dp 64 on 8-GPU nodes (Megatron-Core's rank order: tensor, expert, expert-data):
    the dense gradients are all-reduced among the 64 data ranks, 8 per node (a ring in each
    node, then one among the 8 nodes on 1/8 of the volume), but each expert's gradients only
    among its 8 replicas, one per node, so their whole volume crosses the network."""
    m = model("mixtral-8x7b")
    lay = Layout(tp=1, pp=1, dp=64, ep=8, micro_batch=1, zero=1, recompute="full")
    r = _one(m, lay)
    assert r["valid"], r["reason"]
    _, hw, vec, _, opts = tables(m, [lay], [H100], CATS, EFF, OPTIONS)
    hw = hw[0]
    assert hw[K.HW_DOMAIN] == 8 and hw[K.HW_TIER1] >= 8  # 8 nodes: one tier, no oversubscription
    intra, intra_lat = hw[K.HW_INTRA_BW], hw[K.HW_INTRA_LAT]
    net, net_lat = hw[K.HW_NET_BW] * hw[K.HW_NICS_PER_GPU], hw[K.HW_NET_LAT]
    grad = opts[K.OP_GRAD_COMM_BYTES]
    dense = (m.layers * vec[K.M_SHARED_PARAMS] + vec[K.M_EMBED_PARAMS]) * grad
    expert = m.layers * vec[K.M_EXPERT_PARAMS] / 8 * grad
    dense_s = _ring(dense, 8, intra, intra_lat) + _ring(dense / 8, 8, net, net_lat)
    expert_s = _ring(expert, 8, net, net_lat)
    assert r["dp_comm"] == pytest.approx(dense_s + expert_s, rel=1e-12)
    # the one-group cost of before: both volumes split 8 ways inside the node first
    one_group = _ring(dense + expert, 8, intra, intra_lat) + _ring((dense + expert) / 8, 8, net, net_lat)
    assert r["dp_comm"] > 1.5 * one_group
    # in a 72-GPU domain both groups fit (72 / 8 = 9 expert replicas per domain): rings on NVLink
    nvl72 = dataclasses.replace(H100, domain=72)
    hw72 = tables(m, [lay], [nvl72], CATS, EFF, OPTIONS)[1][0]
    r72 = _one(m, lay, nvl72)
    intra72, lat72 = hw72[K.HW_INTRA_BW], hw72[K.HW_INTRA_LAT]
    assert r72["dp_comm"] == pytest.approx(
        _ring(dense, 64, intra72, lat72) + _ring(expert, 8, intra72, lat72), rel=1e-12
    )


@pytest.mark.parametrize(
    ("name", "lay"),
    [
        ("llama2-7b", Layout(tp=2, pp=2, dp=32, zero=0, recompute="full")),
        ("llama2-7b", Layout(tp=1, pp=1, dp=16, zero=3, recompute="full")),
        ("mixtral-8x7b", Layout(tp=2, pp=4, dp=16, ep=1, zero=0, recompute="full")),
    ],
)
def test_one_gradient_group_without_expert_parallelism(name, lay):
    """A dense model, or experts not split (e = 1): every gradient has the same d x c replicas,
    one collective carries them all, bit for bit the hierarchical all-reduce of the whole volume
    (in-network reduction without ZeRO; under ZeRO-3, 1 + 2 m halves and a latency per layer)."""
    m = model(name)
    design = dataclasses.replace(H100, gpu="B200", intra="nvlink5")
    lays, hw, vec, ctab, opts = tables(m, [lay], [design], CATS, EFF, OPTIONS)
    out = np.empty((1, K.N_RESULT_FIELDS))
    evaluate_llm(lays, hw, vec, ctab, opts, out)
    assert out[0, K.R_REASON] == K.REASON_VALID
    most = np.ceil(m.layers / lay.pp)
    params = most * (vec[K.M_SHARED_PARAMS] / lay.tp + vec[K.M_EXPERT_PARAMS] / lay.tp) + vec[K.M_EMBED_PARAMS] / lay.tp
    flag = opts[K.OP_IN_NETWORK] if lay.zero == 0 else 0.0
    h = hw[0]
    per_domain = np.floor(h[K.HW_DOMAIN] / lay.tp)
    dp = hierarchical_allreduce(
        params * opts[K.OP_GRAD_COMM_BYTES], lay.dp, per_domain, h, flag * h[K.HW_NVLS], flag * h[K.HW_SHARP]
    )
    if lay.zero == 3:
        m_mb = vec[K.M_GLOBAL_BATCH] / lay.dp
        lat = hierarchical_allreduce(0.0, lay.dp, per_domain, h, 0.0, 0.0)
        dp = (dp - lat) * 0.5 * (1 + 2 * m_mb) + lat * 0.5 * (1 + 2 * m_mb) * most
    assert out[0, K.R_DP] == dp


def test_an_all_to_all_across_domains_sends_only_the_other_domains_shares_over_the_fabric():
    """ep 16 over two 8-GPU nodes: each GPU's routed tokens go 1/16 to each rank; the 7 shares of
    its own node's ranks take NVLink while the 8 of the other node's take the network, at the
    same time, so the network's share (8/16 of the bytes) sets the time, plus a network latency
    per peer: not every share (15/16) over the network."""
    m = model("deepseek-moe-16b")
    lay = Layout(tp=1, pp=1, dp=16, ep=16, micro_batch=1, zero=1, recompute="full", sp=False)
    r = _one(m, lay)
    assert r["valid"], r["reason"]
    _, hws, _, _, opts = tables(m, [lay], [H100], CATS, EFF, OPTIONS)
    hw = hws[0]
    assert hw[K.HW_DOMAIN] == 8 and hw[K.HW_TIER1] >= 2  # two nodes under one tier
    routed = m.seq_len * m.experts_per_token * m.hidden * opts[K.OP_ACT_BYTES]
    net, net_lat = hw[K.HW_NET_BW] * hw[K.HW_NICS_PER_GPU], hw[K.HW_NET_LAT]
    inside = routed * 7 / 16 / hw[K.HW_INTRA_BW]
    across = routed * 8 / 16 / net
    assert across > inside
    per_a2a = max(inside, across) + 15 * net_lat
    assert r["ep_comm"] == pytest.approx(r["microbatches"] * m.moe_layers * 6 * per_a2a, rel=1e-12)
    all_over_the_network = routed * 15 / 16 / net + 15 * net_lat
    assert r["ep_comm"] < 0.6 * r["microbatches"] * m.moe_layers * 6 * all_over_the_network


def test_zero_shards_the_experts_state_over_their_expert_data_replicas():
    """ep 8 over 32 data ranks: ZeRO-1 splits the dense parameters' optimizer state 32 ways and
    each expert's 4 ways (its 32 x 1 / 8 expert-data-parallel replicas), not 32."""
    m = model("deepseek-moe-16b")
    design = dataclasses.replace(H100, gpu="B200", intra="nvlink5")
    plain = Layout(tp=1, pp=1, dp=32, ep=8, micro_batch=1, zero=0, recompute="full", sp=False)
    r0 = _one(m, plain, design)
    r1 = _one(m, dataclasses.replace(plain, zero=1), design)
    assert r0["valid"] and r1["valid"], (r0["reason"], r1["reason"])
    vec, opts = tables(m, [plain], [design], CATS, EFF, OPTIONS)[2::2]
    dense = m.layers * vec[K.M_SHARED_PARAMS] + vec[K.M_EMBED_PARAMS]
    expert = m.layers * vec[K.M_EXPERT_PARAMS] / 8
    saved = opts[K.OP_OPT_BYTES] * (dense * (1 - 1 / 32) + expert * (1 - 1 / 4))
    assert r0["memory_per_gpu"] - r1["memory_per_gpu"] == pytest.approx(saved, rel=1e-9)


def test_routed_experts_grouped_gemms_fall_with_their_tokens_an_expert(monkeypatch):
    """A routed expert's grouped GEMMs of m tokens run at m / (m + 1024) of their shape's dense
    efficiency (``[gemm] expert_half_tokens``), m = tokens x top-k x ep / E: DeepSeek-MoE 16B
    (E = 64, top-6, h = 2048, expert FFN 1408 gated) on one sequence of 4096 tokens gives each
    expert 384 tokens without expert parallelism and 3072 with ep = 8.  Against the same table
    with the factor off (half tokens 0), each of its 27 MoE layers of 28 pays, forward and
    backward, the routed GEMMs' seconds x (1/g - 1) = x 1024 / m; a calibration's factor 2
    doubles the half tokens.  The dense and shared GEMMs do not change."""
    import copy

    from paigrid.llm import tables as T

    m = model("deepseek-moe-16b")
    pairs = [("H100-SXM5-80GB", "amp-bf16")]
    peak = CATS.peak_TFLOP_per_s("H100-SXM5-80GB", "amp-bf16") * 1e12
    large = 0.75  # Hopper BF16, [gemm.large_efficiency]
    tokens = 4096.0

    def routed_seconds(ep):
        rows = 4096.0 * 6 * ep / 64
        total = 0.0
        for n, k in ((2 * 1408, 2048), (2048, 1408)):  # up (gated) and down projections
            d = min(rows, n, k)
            total += 2 * rows * n * k * (64 / ep) / (peak * large * d / (d + 128.0))
        return total / tokens, rows

    on = {ep: T.compute_table(m, CATS, EFF, pairs, [1], "fused", tokens, ep) for ep in (1, 8)}
    doubled = dataclasses.replace(EFF, llm={"expert_half_tokens": 2.0})
    wide = {ep: T.compute_table(m, CATS, doubled, pairs, [1], "fused", tokens, ep) for ep in (1, 8)}
    off_defaults = copy.deepcopy(T._defaults())
    off_defaults["gemm"]["expert_half_tokens"] = 0.0
    monkeypatch.setattr(T, "_defaults", lambda: off_defaults)
    off = {ep: T.compute_table(m, CATS, EFF, pairs, [1], "fused", tokens, ep) for ep in (1, 8)}
    assert T.expert_half_tokens(EFF) == 0.0
    for ep, want_rows in ((1, 384.0), (8, 3072.0)):
        seconds, rows = routed_seconds(ep)
        assert rows == want_rows
        for table, half in ((on, 1024.0), (wide, 2048.0)):
            got = table[ep][0, 0, 0, 0, K.CT_LAYER] - off[ep][0, 0, 0, 0, K.CT_LAYER]
            assert got == pytest.approx(27 / 28 * 3 * seconds * half / rows, rel=1e-9), (ep, half)
        # the attention core (and with it every non-routed term) is the same
        assert on[ep][0, 0, 0, 0, K.CT_ATTENTION] == off[ep][0, 0, 0, 0, K.CT_ATTENTION]
    # fewer tokens an expert lose more: 1024/384 of the routed time against 1024/3072
    assert (on[1] - off[1])[0, 0, 0, 0, K.CT_LAYER] > (on[8] - off[8])[0, 0, 0, 0, K.CT_LAYER]
