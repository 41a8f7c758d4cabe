"""LLM shapes: parameters, FLOPs per token and activation memory against published counts and
formulas (model cards, Megatron-LM's FLOP formula, Korthikanti et al. 2022 Table 2)."""

import math

import pytest

from paigrid.errors import PaigridError
from paigrid.llm import shapes as S
from paigrid.llm.models import Transformer, load_catalogue, model, transformer_from_cells

CATALOGUE = load_catalogue()


@pytest.mark.parametrize("name", CATALOGUE.names)
def test_parameters_match_the_published_count(name):
    """Every catalogue model's parameter count from its shape is its published count (exact
    model-card counts to the parameter; papers' rounded counts to their last digit).  A model
    published only by a rounded name (Nemotron-3 "8B", Kimi K2 "1T") has no count, and its
    source must say that no count is checked and what the shape gives."""
    row = CATALOGUE.row(name)
    if not row["published_params_B"]:
        assert "not checked" in row["source"] and "the shape gives" in row["source"]
        return
    published = float(row["published_params_B"]) * 1e9
    digits = len(row["published_params_B"].partition(".")[2])
    tolerance = 0.5 * 10.0**-digits * 1e9  # half a unit of the published count's last digit
    if name == "gpt3-175b":
        tolerance = 0.5e9  # the paper rounds 174.6 B to "175B"
    assert abs(S.parameters(model(name, CATALOGUE)) - published) <= tolerance
    if row["published_active_params_B"]:
        active = float(row["published_active_params_B"]) * 1e9
        digits = len(row["published_active_params_B"].partition(".")[2])
        assert abs(S.active_parameters(model(name, CATALOGUE)) - active) <= 0.5 * 10.0**-digits * 1e9


def test_exact_model_card_counts():
    assert S.parameters(model("llama2-70b")) == 68_976_648_192
    assert S.parameters(model("Llama-3-405B")) == 405_853_388_800
    assert S.parameters(model("llama2-7b")) == 6_738_415_616


def test_megatron_parameter_formula():
    """Narayanan et al. 2021: P = 12 l h^2 (1 + 13/12h + (V + s)/12 l h) for their GPT models
    (the formula leaves out the final layer norm, 2h parameters)."""
    for name in ("megatron-gpt-146b", "megatron-gpt-1t", "gpt2-8.67b-megatron"):
        m = model(name)
        n, h = m.layers, m.hidden
        formula = 12 * n * h**2 * (1 + 13 / (12 * h) + (m.vocab + m.seq_len) / (12 * n * h))
        assert S.parameters(m) - 2 * h == pytest.approx(formula, rel=1e-12)


@pytest.mark.parametrize("name", ["gpt2-1.16b-megatron", "gpt2-8.67b-megatron", "gpt3-175b"])
def test_hardware_flops_reproduce_megatron_eq3(name):
    m = model(name)
    batch = 16
    per_iteration = S.hardware_flops_per_token(m, "full") * batch * m.seq_len
    assert per_iteration == pytest.approx(
        S.megatron_flops_per_iteration(batch, m.seq_len, m.layers, m.hidden, m.vocab), rel=1e-12
    )
    # without recomputation: 72 B s L h^2 (1 + s/6h + V/12 L h)
    n, h, s, v = m.layers, m.hidden, m.seq_len, m.vocab
    assert S.model_flops_per_token(m) * s == pytest.approx(
        72 * s * n * h**2 * (1 + s / (6 * h) + v / (12 * n * h)), rel=1e-12
    )


def test_model_flops_are_six_times_active_parameters_plus_attention():
    """6 N + 12 L s h per token, N the active parameters less the input embedding (a lookup,
    no FLOPs) and the norms (negligible)."""
    for name in ("llama3-70b", "mixtral-8x7b"):
        m = model(name)
        attention = 12 * m.layers * m.seq_len * m.hidden
        weights = S.active_parameters(m) - m.vocab * m.hidden
        assert S.model_flops_per_token(m) - attention == pytest.approx(6 * weights, rel=1e-4)
    selective = S.hardware_flops_per_token(m, "selective") - S.model_flops_per_token(m)
    assert selective == 4 * m.layers * m.seq_len * m.hidden


GPT = Transformer("gpt", layers=4, hidden=2048, heads=16, kv_heads=16, ffn_hidden=8192, vocab=1000, seq_len=2048)


@pytest.mark.parametrize("t", [1, 2, 8])
def test_activation_memory_is_korthikanti_table_2(t):
    s, b, h, a = GPT.seq_len, 4, GPT.hidden, GPT.heads
    sbh = s * b * h
    cases = {
        (False, "none"): sbh * (10 + 24 / t + 5 * a * s / (h * t)),
        (True, "none"): sbh * (34 / t + 5 * a * s / (h * t)),
        (False, "selective"): sbh * (10 + 24 / t),
        (True, "selective"): sbh * 34 / t,
        (False, "full"): 2 * sbh,
        (True, "full"): 2 * sbh / t,
    }
    for (sp, recompute), expected in cases.items():
        assert S.activation_bytes_per_layer(GPT, b, t, sp, recompute) == pytest.approx(expected, rel=1e-12)
    # no parallelism at all: s b h (34 + 5 a s / h)
    assert S.activation_bytes_per_layer(GPT, b, 1, False, "none") == pytest.approx(sbh * (34 + 5 * a * s / h))


def test_context_parallel_divides_the_tokens():
    full = S.activation_bytes_per_layer(GPT, 1, 2, True, "none")
    assert S.activation_bytes_per_layer(GPT, 1, 2, True, "none", context=4) == pytest.approx(full / 4)


def test_bad_shapes_are_one_sentence():
    cells = {"layers": "2", "hidden": "100", "heads": "3", "ffn_hidden": "400", "vocab": "10", "seq_len": "8"}
    with pytest.raises(PaigridError, match="not a multiple of heads"):
        transformer_from_cells(cells, "x")
    with pytest.raises(PaigridError, match="whole number"):
        transformer_from_cells({**cells, "heads": "2.5"}, "x")
    with pytest.raises(PaigridError, match="experts_per_token"):
        transformer_from_cells({**cells, "heads": "4", "experts": "4", "experts_per_token": "5"}, "x")
    with pytest.raises(PaigridError, match="unknown"):
        model("no-such-model")
    assert math.isfinite(S.parameters(transformer_from_cells({**cells, "heads": "4"}, "x")))


def test_moe_permutations_move_sixteen_bytes_per_routed_copy_and_feature():
    m = model("deepseek-v3")
    assert S.moe_permute_bytes(m, True) == 16.0 * m.capacity_factor * m.experts_per_token * m.hidden
    assert S.moe_permute_bytes(m, False) == 0.0
    assert S.moe_permute_bytes(model("llama3-70b"), True) == 0.0


def test_quantized_elements_count_every_gemm_input_and_output():
    """A dense gated layer casts, over a step, each Linear GEMM's input (k) and output gradient
    (n): QKV h + (h + 2 kv), output projection h + h, gate/up h + 2 f, down f + h (Llama 3 8B:
    69,632 elements a token), split by the tensor degree where the GEMM's side is."""
    m = model("llama3-8b")
    h, kv, f = m.hidden, m.kv_heads * m.head_dim, m.ffn_hidden
    assert S.quantized_elements(m, False, 1, 8192) == (h + h + 2 * kv) + 2 * h + (h + 2 * f) + (f + h) == 69632
    assert S.quantized_elements(m, False, 4, 8192) == (h + (h + 2 * kv) / 4) + (h / 4 + h) + (h + 2 * f / 4) + (
        f / 4 + h
    )
