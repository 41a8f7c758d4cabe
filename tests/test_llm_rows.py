"""The llm row kind on the public runs of 2022-2026 (``datasets/llm_public_v2.csv``): every row
predicted or refused with its reason, the stack defaults named, the file's awkward values read
as documented, twin rows counted once, published layouts admitted, and the LLM calibration."""

import csv
import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest

from cli_helpers import run
from paigrid.accuracy import llmfit
from paigrid.accuracy.measurements import load_measurements
from paigrid.inputs.catalog import Catalogues
from paigrid.inputs.efficiency import defaults
from paigrid.llm import shapes as S
from paigrid.llm.evaluate import predict
from paigrid.llm.models import model
from paigrid.llm.parallelism import Layout
from paigrid.llm.rows import read_measured, read_row, run_key
from paigrid.llm.tables import Hardware, LlmOptions, framework_state_bytes

ROOT = Path(__file__).resolve().parent.parent
PUBLIC = ROOT / "datasets" / "llm_public_v2.csv"
CATS = Catalogues.load()
EFF = defaults()


def _cells() -> dict[str, dict]:
    with open(PUBLIC, newline="") as handle:
        return {r["id"]: r for r in csv.DictReader(handle)}


CELLS = _cells()


def _write(tmp_path, rows, name="rows.csv"):
    path = tmp_path / name
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(next(iter(CELLS.values()))))
        writer.writeheader()
        writer.writerows(rows)
    return path


def test_the_file_is_read_as_it_is():
    assert len(CELLS) == 605 and len({run_key(i) for i in CELLS}) == 343


def test_every_row_is_predicted_or_refused_with_its_reason():
    rows = load_measurements(PUBLIC, CATS)
    assert len(rows) == 605
    for r in rows:
        if r.refused:
            assert r.refused.strip() and "Error" not in r.refused and "Traceback" not in r.refused
        else:
            assert math.isfinite(r.measured) and r.measured > 0 and r.llm_row is not None
    offload = [r for r in rows if "DeepSpeed" in r.cells["framework"]]
    assert len(offload) == 4 and all("offload" in r.refused for r in offload)


def test_stack_defaults_are_named_per_family():
    megatron = read_row(CELLS["A-mbridge-26.04-h100-LLAMA3_70B-64g-fp8-pre-tps"], "x", CATS)
    assert megatron.family == "megatron" and megatron.layout.zero == 1 and megatron.layout.recompute == "none"
    assert {"recompute=none", "zero_stage=1", "attention=fused", "overlap_dp=true"} <= set(megatron.defaults)
    assert megatron.layout.vpp == 5 and megatron.layout.sp
    titan = read_row(CELLS["A-torchtitan-202506-trainy-h200-llama3.1-8b-32g"], "x", CATS)
    assert titan.family == "torchtitan" and titan.layout.zero == 3 and titan.layout.recompute == "selective"
    assert titan.options.grad_bytes == 4 and titan.options.weight_bytes == 4 and titan.options.optimizer_bytes == 8
    assert megatron.options.weight_bytes == 3  # bf16 weights + Transformer Engine's FP8 copy
    assert framework_state_bytes("megatron", "amp-bf16")["grad_bytes"] == 4  # fp32 main gradients
    # torchtitan's eager loss keeps at its backward peak the log-softmax, nll_loss's gradient and
    # the log-softmax's gradient (12 bytes a logit, fused aten kernels at t = 1); with tensor
    # parallelism it runs under loss_parallel, whose DTensor handlers also hold the zero-filled
    # grad_input, exp(x) and their sum (16); the 2025 release compiles it (bf16 logits and gradient)
    titan_2024 = read_row(CELLS["A-torchtitan-202412-T1-llama3.1-8b-8g-compile"], "x", CATS)
    assert (
        titan_2024.options.logit_bytes == 12 and megatron.options.logit_bytes == LlmOptions.defaults().logit_bytes == 4
    )
    assert titan.options.logit_bytes == 4 and any(d.startswith("logit_bytes=4") for d in titan.defaults)
    assert not any(d.startswith("logit_bytes") for d in titan_2024.defaults)
    tp = read_row(CELLS["A-torchtitan-202412-T4-llama3.1-70b-256g-tp"], "x", CATS)
    assert tp.layout.tp == 8 and tp.options.logit_bytes == 16
    assert any(d.startswith("logit_bytes=16 (torchtitan's loss parallel") for d in tp.defaults)
    t2 = read_row(CELLS["A-torchtitan-202412-T2-llama3.1-8b-8g-cp4"], "x", CATS)
    plain = dataclasses.replace(t2, options=dataclasses.replace(t2.options, logit_bytes=4.0))
    from paigrid.llm.rows import predict_row

    extra = predict_row(t2, CATS, EFF)["memory_per_gpu"] - predict_row(plain, CATS, EFF)["memory_per_gpu"]
    tokens = t2.layout.micro_batch * t2.model.seq_len / t2.layout.cp
    assert extra == pytest.approx(8.0 * tokens * t2.model.vocab, rel=1e-9)  # 12 - 4 bytes a logit, t = 1
    # under loss parallel each GPU keeps 16 bytes for each of its V / t logits
    bare = dataclasses.replace(tp, options=dataclasses.replace(tp.options, logit_bytes=0.0))
    extra = predict_row(tp, CATS, EFF)["memory_per_gpu"] - predict_row(bare, CATS, EFF)["memory_per_gpu"]
    tokens = tp.layout.micro_batch * tp.model.seq_len
    assert extra == pytest.approx(16.0 * tokens * tp.model.vocab / 8, rel=1e-9)


def test_torchtitan_tensor_parallelism_keeps_the_gathered_gemm_inputs():
    """torchtitan's DTensor tensor parallelism saves the all-gathered inputs of its column-parallel
    GEMMs (Megatron re-gathers them): on the 70B row (t 8, sequence parallel, full recomputation,
    one stage) the extra memory is the recomputed layer's attention and FFN inputs, 4h a token
    x (1 - 1/t) at the stored bytes, and the output projection's 16-bit input, 2h x (1 - 1/t);
    nothing at t = 1, and Megatron's rows keep the option off."""
    from paigrid.llm.rows import predict_row

    tp = read_row(CELLS["A-torchtitan-202412-T4-llama3.1-70b-256g-tp"], "x", CATS)
    assert tp.options.gathered_inputs and tp.layout.sp and tp.layout.recompute == "full" and tp.layout.pp == 1
    off = dataclasses.replace(tp, options=dataclasses.replace(tp.options, gathered_inputs=False))
    extra = predict_row(tp, CATS, EFF)["memory_per_gpu"] - predict_row(off, CATS, EFF)["memory_per_gpu"]
    tokens, h, t = tp.layout.micro_batch * tp.model.seq_len, tp.model.hidden, tp.layout.tp
    store = tp.options.stored_activation_bytes / 2.0
    assert extra == pytest.approx(tokens * h * (1 - 1 / t) * (4.0 * store + 2.0), rel=1e-9)
    single = read_row(CELLS["A-torchtitan-202412-T1-llama3.1-8b-8g-compile"], "x", CATS)
    off = dataclasses.replace(single, options=dataclasses.replace(single.options, gathered_inputs=False))
    assert predict_row(single, CATS, EFF)["memory_per_gpu"] == predict_row(off, CATS, EFF)["memory_per_gpu"]
    megatron = read_row(CELLS["A-mbridge-26.04-h100-LLAMA3_70B-64g-fp8-pre-tps"], "x", CATS)
    assert not megatron.options.gathered_inputs


def test_torchtitan_pipeline_keeps_one_layer_reduce_scatter_buffer():
    """torchtitan with pipeline parallelism is read as ZeRO-1 for memory, but FSDP2 still
    reduce-scatters each layer at the last micro-batch through a copy of its unsharded fp32
    gradients: one layer's parameters of the stage x grad_bytes more; a row without
    pipeline parallelism (ZeRO-3, its own buffer counted) does not take the option."""
    from paigrid.llm.rows import predict_row
    from paigrid.llm.shapes import parameters

    pp = read_row(CELLS["A-torchtitan-202412-T5-llama3.1-405b-512g-1f1b"], "x", CATS)
    assert pp.layout.pp == 8 and pp.layout.zero == 1 and pp.options.reduce_scatter_buffer
    off = dataclasses.replace(pp, options=dataclasses.replace(pp.options, reduce_scatter_buffer=False))
    extra = predict_row(pp, CATS, EFF)["memory_per_gpu"] - predict_row(off, CATS, EFF)["memory_per_gpu"]
    m = pp.model
    layer = (parameters(m) - 2 * m.vocab * m.hidden) / m.layers / pp.layout.tp  # untied embeddings
    assert extra == pytest.approx(layer * pp.options.grad_bytes, rel=1e-3)
    flat = read_row(CELLS["A-torchtitan-202412-T4-llama3.1-70b-256g-tp"], "x", CATS)
    assert flat.layout.zero == 3 and not flat.options.reduce_scatter_buffer


def test_free_text_cells_and_units():
    titan = read_row(CELLS["A-torchtitan-202506-trainy-h200-llama3.1-8b-32g"], "x", CATS)
    assert titan.design.precision == "fp8" and titan.peak_memory_GiB == pytest.approx(47.96)  # GiB as printed
    assert titan.measured == pytest.approx(10938 * 32)  # tokens/s/GPU x GPUs
    mx = read_row(CELLS["A-mbridge-26.02-b200-Qwen3_30B_a3B-8g-mxfp8-pre-tps"], "x", CATS)
    assert any(d.startswith("precision mxfp8 as fp8") for d in mx.defaults) or mx.design.precision == "mxfp8"
    # an MFU row and its tokens/s twin give the same tokens/s (MFU of the dense BF16 peak)
    for ident in [i for i in CELLS if i.endswith("-mfu") and "a100" in i]:
        twin = ident[:-4] + "-wps"
        if twin in CELLS:
            a, b = read_row(CELLS[ident], "a", CATS), read_row(CELLS[twin], "b", CATS)
            assert a.measured == pytest.approx(b.measured, rel=0.03), ident
    recomputed = read_row(CELLS["A-torchtitan-2024-a100-llama2_13b-64g-bs2-selective-op-wps"], "x", CATS)
    assert recomputed.layout.recompute == "selective"


def test_megatron_bridge_counts_causal_attention_and_nemo_the_full():
    """The twin rows of one run fix each source's FLOP convention: tokens/s x model FLOPs per
    token (causal half for Megatron-Bridge, full for NeMo) = the TFLOP/s row."""
    for ident, causal in (
        ("A-mbridge-26.02-b200-Qwen3_30B_a3B-8g-mxfp8-pre", True),
        ("A-nemo-24.07-h100-LLAMA3-70B-64g-pre", False),
    ):
        tps, tflops = read_row(CELLS[ident + "-tps"], "a", CATS), read_row(CELLS[ident + "-tflops"], "b", CATS)
        assert tps.measured == pytest.approx(tflops.measured, rel=0.05)
        flops = S.model_flops_per_token(tps.model, causal)
        assert tps.measured / tps.n_gpu * flops / 1e12 == pytest.approx(
            float(CELLS[ident + "-tflops"]["throughput"]), rel=0.05
        )


def test_empty_or_zero_nodes_take_the_layout_and_a_wrong_count_refuses():
    cells = dict(CELLS["A-mbridge-26.04-h100-LLAMA3_70B-64g-fp8-pre-tps"])
    for nodes in ("", "0"):
        row = read_row({**cells, "nodes": nodes}, "x", CATS)
        assert row.n_gpu == 64 and any(d.startswith("GPUs=64") for d in row.defaults)
    row, reason = read_measured({**cells, "nodes": "3"}, "line 9", CATS, EFF)
    assert row is None and "is not the 24 GPUs" in reason


def test_twin_rows_count_once(tmp_path):
    ids = [
        "A-nemo-24.07-h100-LLAMA3-70B-64g-pre-tps",
        "A-nemo-24.07-h100-LLAMA3-70B-64g-pre-tflops",
        "A-nemo-24.07-h100-GPT3-5B-64g-pre-tps",
    ]
    result = run("validate", _write(tmp_path, [CELLS[i] for i in ids]), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["summary"]["overall"]["count"] == 2
    assert run_key(ids[0]) == run_key(ids[1]) != run_key(ids[2])


def test_llama3_405b_published_layout_is_admitted():
    """Meta's layout (Dubey et al. 2024: t 8, p 16, d 128, c 1, 8,192-token sequences, 16M-token
    batches on 16,384 H100) fits with full recomputation, and a measured row of it that does
    not state its recomputation takes the least that fits instead of being refused."""
    m = model("llama3-405b")
    h100 = Hardware("H100-SXM5-80GB", "amp-bf16", 8, "nvswitch-nvlink4", "ib-ndr-400g", 1.0)
    lay = Layout(tp=8, pp=16, dp=128, cp=1, vpp=1, micro_batch=1, zero=1, recompute="full", sp=True)
    result = predict(m, lay, h100, CATS, EFF, LlmOptions.defaults(), 2048)
    assert result["valid"] and result["n_gpu"] == 16384 and result["memory_per_gpu"] < 80 * 2**30
    cells = {
        **CELLS["A-mbridge-26.04.01-h100-LLAMA3.1_405B-1024g-fp8-pre-tps"],
        "tensor_parallel": "8",
        "pipeline_parallel": "16",
        "virtual_stages": "",
        "context_parallel": "1",
        "data_parallel": "128",
        "global_batch": "2048",
        "nodes": "2048",
        "gpus_per_node": "8",
        "precision": "amp-bf16",
        "recompute": "",
        "micro_batch": "1",
    }
    row, reason = read_measured(cells, "meta", CATS, EFF)
    assert reason == "" and row.layout.recompute in ("selective", "full") and row.n_gpu == 16384


def test_public_rows_are_never_refused_for_memory():
    rows = load_measurements(PUBLIC, CATS)
    assert not [r.id for r in rows if "busiest pipeline stage" in r.refused]


def test_layer_gemms_add_up_to_the_layer_flops():
    for name in ("llama3-70b", "deepseek-v3", "qwen3-30b-a3b", "gpt-oss-120b", "mixtral-8x7b"):
        m = dataclasses.replace(model(name), capacity_factor=1.25) if name == "mixtral-8x7b" else model(name)
        for t, ep, moe in ((1, 1, False), (4, 8, True), (8, 2, True)):
            if moe and not m.moe:
                continue
            tokens = 4096.0
            flops = sum(2 * a * b * c * k for a, b, c, k in S.layer_gemms(m, moe, t, tokens, ep)) / tokens
            want = (S.layer_forward_flops(m, moe)["gemm"] + (S.padded_expert_flops(m) if moe else 0.0)) / t
            assert flops == pytest.approx(want, rel=1e-12), (name, t, ep, moe)


def test_llm_fit_is_the_shared_shrinkage():
    """llmfit fits through trust.shrinkage: a weak strength recovers the truth of a linear
    problem, inf keeps the defaults, the bounds hold, and the strength cross-validated over
    groups is one of STRENGTHS."""
    rng = np.random.default_rng(3)
    jac = rng.normal(size=(40, 3))
    truth = np.array([0.3, -0.2, 0.1])
    r0 = -jac @ truth
    w = np.ones(40)
    keys = ["gemm", "hbm", "attention"]
    assert np.allclose(llmfit.fit_linearised(r0, jac, w, 1e-9, keys), truth, atol=1e-5)
    assert np.allclose(llmfit.fit_linearised(r0, jac, w, math.inf, keys), 0.0)
    assert np.all(llmfit.fit_linearised(100 * r0, jac, w, 1e-9, keys) <= llmfit.BOUNDS[1] + 1e-12)
    groups = [f"m{i % 5}" for i in range(40)]
    assert llmfit.choose_llm_strength(r0, jac, w, groups, keys) in llmfit.STRENGTHS
    assert math.isinf(llmfit.choose_llm_strength(r0, jac, w, ["one"] * 40, keys))


def test_software_release_keys_need_two_releases_of_one_model_and_gpu():
    rows = [r for r in load_measurements(PUBLIC, CATS) if not r.refused]
    keys = llmfit.software_keys(rows)
    assert "software/megatron-26.06.01" in keys
    seen = {}
    for r in rows:
        seen.setdefault((r.llm_row.model.name, r.llm_row.design.gpu, r.llm_row.design.precision), set()).add(
            r.llm_row.software
        )
    assert all(any(key in s and len(s) > 1 for s in seen.values()) for key in keys)
    assert not any(r.llm_row.software for r in rows if r.llm_row.family == "torchtitan")


def test_memory_fit_recovers_workspace_and_fragmentation():
    points = [
        {"base": b, "activations": a, "reported": b + 3.0 + 0.2 * a, "run": str(i), "id": str(i), "default": b}
        for i, (b, a) in enumerate([(20, 10), (30, 40), (10, 60), (50, 5)])
    ]
    w, f = llmfit.fit_memory(points)
    assert w == pytest.approx(3.0, abs=0.05) and f == pytest.approx(0.2, abs=0.01)
    held = llmfit.memory_crossval(points)
    assert len(held) == 4 and max(abs(p["error"]) for p in held) < 0.01


def test_calibrate_llm_rows_writes_what_validate_reads(tmp_path):
    ids = [i for i in CELLS if "nemo-24.07-h100" in i][:12]
    path = _write(tmp_path, [CELLS[i] for i in ids])
    out = tmp_path / "llm.toml"
    result = run("calibrate", path, "--out", out)
    assert result.exit_code == 0, result.output
    assert "LLM factor(s)" in result.output and out.read_text().startswith("# paigrid calibrate on llm rows")
    before = json.loads(run("validate", path, "--json").output)["summary"]["overall"]["median_abs_error"]
    after = run("validate", path, "--calibration", out, "--json")
    assert after.exit_code == 0, after.output
    assert json.loads(after.output)["summary"]["overall"]["median_abs_error"] <= before + 1e-9


def test_kernel_activation_memory_is_korthikanti_with_sequence_parallelism():
    """GPT-3 175B at t 8 with sequence parallelism and selective recomputation on one stage, one
    micro-batch: the kernel's memory less the model states, the fp32 logits and the workspace
    is L s b h 34 / t (Korthikanti et al. 2022, Table 2), and the FP8 storage scale and the
    fragmentation multiply exactly that part."""
    m = model("gpt3-175b")
    lay = Layout(tp=8, pp=1, dp=1, micro_batch=1, zero=0, recompute="selective", sp=True)
    a100 = Hardware("A100-SXM4-80GB", "amp-bf16", 8, "nvswitch-nvlink3", "ib-hdr-200g", 1.0)
    base = dataclasses.replace(LlmOptions.defaults(), workspace_GiB=0.0, memory_margin=math.inf)
    r = predict(m, lay, a100, CATS, EFF, base, 8)
    states = S.parameters(m) / 8 * (base.weight_bytes + base.grad_bytes + base.optimizer_bytes)
    logits = m.seq_len * m.vocab * base.logit_bytes / 8
    activations = m.layers * m.seq_len * m.hidden * 34 / 8
    assert r["memory_per_gpu"] - states - logits == pytest.approx(activations, rel=2e-3)
    scaled = predict(
        m, lay, a100, CATS, EFF, dataclasses.replace(base, stored_activation_bytes=1.5, fragmentation=0.1), 8
    )
    assert scaled["memory_per_gpu"] - states - logits == pytest.approx(activations * 0.75 * 1.1, rel=2e-3)


def test_a_calibration_never_turns_a_measured_run_away(tmp_path):
    """A calibration whose workspace would not fit any GPU still predicts every row the defaults
    predict: the runs fitted, so memory never refuses a measured row."""
    ids = [i for i in CELLS if "nemo-24.07-h100" in i][:6]
    path = _write(tmp_path, [CELLS[i] for i in ids])
    toml = tmp_path / "huge.toml"
    toml.write_text('[llm]\n"workspace" = 60\n')
    plain = json.loads(run("validate", path, "--json").output)["summary"]["overall"]["count"]
    result = run("validate", path, "--calibration", toml, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["summary"]["overall"]["count"] == plain > 0


def test_torchtitan_local_batch_is_split_into_one_microbatch_per_stage():
    rows = {r.id: r for r in load_measurements(PUBLIC, CATS)}
    row = rows["A-torchtitan-202412-T5-llama3.1-405b-512g-1f1b"].llm_row
    assert row.layout.pp == 8 and row.layout.micro_batch == 32 // 8
    assert any("pipeline microbatches" in d for d in row.defaults)


def test_a_release_factor_slows_only_its_own_rows():
    from paigrid.llm.rows import predict_row

    rows = [r for r in load_measurements(PUBLIC, CATS) if not r.refused and r.llm_row.container]
    mine = next(r.llm_row for r in rows if r.llm_row.container == "megatron-26.08")
    other = next(r.llm_row for r in rows if r.llm_row.container == "megatron-26.06")
    slow = dataclasses.replace(EFF, llm={"software/megatron-26.08": 0.5})
    assert predict_row(mine, CATS, slow)["tokens_per_s"] < predict_row(mine, CATS, EFF)["tokens_per_s"]
    assert predict_row(other, CATS, slow)["tokens_per_s"] == predict_row(other, CATS, EFF)["tokens_per_s"]


def test_mpt_rows_of_the_data_parallel_file_are_zero3_llm_jobs():
    rows = llmfit.public_llm_measurements(ROOT / "datasets" / "measured_public_v2.csv", CATS)
    assert len(rows) == 174 and not [r.id for r in rows if r.refused]
    for r in rows:
        lay = r.llm_row.layout
        assert r.kind == "llm" and r.llm_row.family == "foundry"
        assert (lay.tp, lay.pp, lay.cp) == (1, 1, 1) and lay.dp == r.llm_row.n_gpu
        assert lay.zero == (2 if "SHARD_GRAD_OP" in r.cells["notes"] else 3)
        assert lay.recompute == ("full" if "activation checkpointing True" in r.cells["notes"] else "none")
        assert r.llm_row.model.name.startswith("mpt-")
    first = next(r for r in rows if r.id == "MPT-0001")
    # 512 H100 at 8 sequences of 2048 tokens, one accumulation step: 4096 sequences a step
    assert first.llm_row.n_gpu == 512 and first.llm_row.model.global_batch == 4096
    assert first.measured == pytest.approx(515636.0)
    assert first.llm_row.design.network == "ib-ndr-400g"  # "not stated": the H100's default network
    # the cells are the llm row's: a "1600 Gbps ... (RoCE)" network cell became rdma-100g
    roce = [r for r in rows if r.cells["network"] and r.llm_row.nodes > 1]
    assert len(roce) == 26 and all(r.llm_row.design.network == "rdma-100g" for r in roce)
    assert all(r.llm_row.design.nics_per_gpu == 2.0 for r in roce)  # 16 x 100 Gb/s a server of 8


def test_the_data_parallel_reader_hands_mpt_rows_to_the_llm_model():
    from paigrid.accuracy.publicrows import read_public

    reading = read_public(ROOT / "datasets" / "measured_public_v2.csv", CATS)
    mpt = [r for r in reading.refused if r.id.startswith("MPT-")]
    assert len(mpt) == 174
    assert all(r.reason.startswith("LLM-family FSDP run, judged by the LLM model") for r in mpt)
    assert all("tokens/s predicted against" in r.reason for r in mpt)
    assert not [r for r in reading.rows if r.id.startswith("MPT-")]


def test_torchtitan_pipelined_rows_keep_unsharded_gradients():
    """torchtitan with pipeline parallelism keeps FSDP2's gradients unsharded until the last
    micro-batch and its parameters gathered: the row is read as ZeRO-1 with 2 + 4 bytes a
    parameter unsharded and 16 sharded, and its traffic (ZeRO-1's, which is ZeRO-2's) leaves
    the step as the stated stage 2 gives it; its memory is the stage's parameters x (6 + 16 / d)
    over the file's ZeRO-2 reading."""
    from paigrid.llm.rows import predict_row

    rows = {r.id: r for r in load_measurements(PUBLIC, CATS)}
    row = rows["A-torchtitan-202412-T6-llama3.1-405b-512g-cp1"].llm_row
    assert row.layout.zero == 1 and any("unsharded" in d for d in row.defaults)
    o = row.options
    assert (o.weight_bytes, o.grad_bytes, o.optimizer_bytes) == (2.0, 4.0, 16.0)
    stated = dataclasses.replace(
        row,
        layout=dataclasses.replace(row.layout, zero=2),
        options=dataclasses.replace(o, **framework_state_bytes("torchtitan", "fp8")),
    )
    mine, theirs = predict_row(row, CATS, EFF), predict_row(stated, CATS, EFF)
    assert mine["tokens_per_s"] == theirs["tokens_per_s"]
    m, lay = row.model, row.layout
    params = (
        math.ceil(m.layers / lay.pp) * (S.layer_params(m, False)["shared"]) / lay.tp + S.embedding_params(m) / lay.tp
    )
    shards = lay.dp * lay.cp
    expected = params * ((2 + 4 + 16 / shards) - (4 + (4 + 8) / shards))
    assert mine["memory_per_gpu"] - theirs["memory_per_gpu"] == pytest.approx(expected, rel=1e-9)
