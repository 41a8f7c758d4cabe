"""The tables the LLM kernel reads: the model vector, the compute table per (GPU at a
precision, tensor degree, recomputation, sequence parallelism), the hardware rows and the
options vector (``kernels.llm_columns`` names their columns).

Compute per token and layer on one GPU of a tensor group of t, forward:
``gemm = 2 W / t / (peak x gemm efficiency)``, ``attention = 4 s h / t / (peak x attention
efficiency)`` (half of it with causal flash attention), ``element-wise = bytes / (HBM x hbm
efficiency)`` with bytes = 2 x the stored inputs of the layer's element-wise operations
(norms, dropouts, residuals: the replicated 10h of ``shapes.activation_terms``, split by t only
with sequence parallelism; the FFN activation function's input; the attention core's softmax
and dropout, 5 a s, only with eager attention), each written once and read once, and under an
FP8 or FP4 recipe the casts of the GEMMs' inputs and output gradients (``quantization_bytes``).  Forward +
backward = 3 x forward; full recomputation adds a forward, selective recomputation the
attention core's forward.  Efficiencies are the engine's operator class values
(``datasets/class_efficiency.csv``: gemm_conv, attention_eager or attention_fused, hbm) of the
GPU's generation at the precision.  The routed experts' grouped GEMMs run at
m / (m + expert_half_tokens) of their shape's efficiency, m the tokens an expert receives a
micro-batch (``grouped_efficiency``).
"""

from __future__ import annotations

import functools
import math
import tomllib
from dataclasses import dataclass, fields, replace
from importlib import resources
from typing import TYPE_CHECKING

import numpy as np

from paigrid.inputs.catalog import Catalogues
from paigrid.inputs.efficiency import Efficiency
from paigrid.inputs.kernel_tables import generation
from paigrid.inputs.options import (
    BY_NAME,
    check_number,
    fields_class,
    llm_default_values,
    option_vector,
    parse_options,
)
from paigrid.kernels import llm_columns as K
from paigrid.llm import shapes as S
from paigrid.llm.models import Transformer

#: the LLM options' declarations by name
LLM = BY_NAME["llm"]


@functools.cache
def _defaults() -> dict:
    text = resources.files("paigrid.datasets").joinpath("llm_defaults.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)


if TYPE_CHECKING:  # the fields as the type checker reads them: written from the same declarations
    from paigrid.inputs.option_fields import LlmOptionFields
else:
    LlmOptionFields = fields_class("llm")


@dataclass(frozen=True)
class LlmOptions(LlmOptionFields):
    """Options of the LLM model: one field per declaration of ``inputs.options.LLM_OPTIONS``
    (type, bounds, documentation, kernel slot; the fields are built from them,
    ``options.fields_class``, keyword-only; defaults: ``datasets/llm_defaults.toml``, read by
    ``defaults``).  Bytes per parameter or per value; ``workspace_GiB`` in GiB (2^30 bytes, as
    GPUs report memory); ``attention`` fused or eager."""

    def __post_init__(self) -> None:
        if self.attention in LLM["attention"].aliases:  # the old spelling "flash", set in Python
            object.__setattr__(self, "attention", LLM["attention"].aliases[self.attention])

    @classmethod
    def defaults(cls) -> LlmOptions:
        """The shipped defaults (``inputs.options.llm_default_values``)."""
        values = llm_default_values()
        return cls(**{f.name: values[f.name] for f in fields(cls)})

    def with_items(self, items: dict, origin: str = "--option") -> LlmOptions:
        """A copy with ``items`` applied: values as a spec's ``[llm.options]`` holds them or as
        ``--option`` reads them (TOML scalars, ``options.read_scalar``), checked against their
        declarations (``options.parse_options``: one sentence for an unknown key or a bad value)."""
        return replace(self, **parse_options("llm", items, origin))

    def vector(self) -> np.ndarray:
        """The kernel's options vector: every declared LLM option's slot (``options.LLM_OPTIONS``)."""
        vec = np.zeros(K.N_OPTION_FIELDS)
        for slot, value in option_vector("llm", self, K):
            vec[slot] = value
        return vec


def framework_state_bytes(family: str, precision: str) -> dict[str, float]:
    """Bytes per parameter of the working weights, gradients and optimizer state of a framework
    family at a precision (``[state_bytes.FAMILY]`` of ``datasets/llm_defaults.toml``: Megatron
    keeps FP32 main gradients, FSDP2 FP32 sharded parameters and gradients; an FP8 precision adds
    the family's cached FP8 weight copy), and where the family's table says so the bytes per
    logit its loss keeps at its peak (``logit_bytes``)."""
    table = _defaults()["state_bytes"]
    row = table.get(family, table["megatron"])
    extra = row.get("fp8_weight_cache_bytes", 0.0) if precision.startswith(("fp8", "mxfp8", "nvfp4")) else 0.0
    out = {
        "weight_bytes": row["weight_bytes"] + extra,
        "grad_bytes": row["grad_bytes"],
        "optimizer_bytes": row["optimizer_bytes"],
    }
    if "logit_bytes" in row:
        out["logit_bytes"] = row["logit_bytes"]
    return out


def llm_factor(eff, key: str) -> float:
    """A calibration's factor on one LLM parameter (``Efficiency.llm``, ``accuracy.llmfit``), 1 when none."""
    table = getattr(eff, "llm", None) or {}
    return float(table.get(key, 1.0))


def gemm_family(precision: str) -> str:
    """The precision family of the GEMM table: amp, fp8 (with its variants) or the precision."""
    return "amp" if precision.startswith("amp-") else ("fp8" if "fp8" in precision else precision)


def default_gemm_key(gen: str, family: str) -> str:
    """The ``[gemm.large_efficiency]`` key a generation's GEMMs at a family take: its own
    (``Hopper/amp``), else the family's shared estimate (``*/fp8``), else the generation's or
    the table's fallback."""
    table = _defaults()["gemm"]["large_efficiency"]
    return next(key for key in (f"{gen}/{family}", f"*/{family}", f"{gen}/*", "*/*") if key in table)


def shared_gemm_key(family: str) -> str:
    """The calibration factor on a family's shared GEMM estimate (``gemm/*/fp8``)."""
    return f"gemm/*/{family}"


def gemm_efficiency(cats: Catalogues, eff, gpu: str, precision: str) -> tuple[float, float]:
    """(large-GEMM efficiency [fraction of the dense peak], half-efficiency side [elements]) of
    ``gpu`` at ``precision``: ``[gemm]`` of ``datasets/llm_defaults.toml`` by generation and
    precision family, times a calibration's ``gemm/GENERATION/FAMILY`` factor, its
    ``gemm/*/FAMILY`` factor where the default is the family's shared estimate (not a sourced
    value of the generation's own), and for an FP8 variant its ``gemm/GENERATION/PRECISION``
    factor."""
    table = _defaults()["gemm"]
    gen = generation(cats, gpu)
    family = gemm_family(precision)
    key = default_gemm_key(gen, family)
    value = table["large_efficiency"][key]
    factor = llm_factor(eff, f"gemm/{gen}/{family}") * llm_factor(eff, "gemm")
    if key.startswith("*/"):
        # a default one estimate gives every generation without its own sourced value also
        # has one factor for them all: what a calibration learns of it on one generation
        # carries to a generation the rows lack
        factor *= llm_factor(eff, shared_gemm_key(family))
    if family == "fp8" and precision != "fp8":
        # an FP8 variant (current scaling, MXFP8's 32-element blocks, blockwise) also has its
        # own factor: its scaling kernels and GEMMs run at their own share of the FP8 peak
        factor *= llm_factor(eff, f"gemm/{gen}/{precision}")
    return min(1.0, value * factor), table["half_side"] * llm_factor(eff, "gemm_half_side")


def shape_efficiency(m: float, n: float, k: float, large: float, half_side: float) -> float:
    """Efficiency of one GEMM of m x k by k x n [fraction of peak]: the large-GEMM value times
    d / (d + half_side) of its smallest side d (tiles and waves under-fill the GPU when one side
    is small; the same for the two backward GEMMs, which permute the sides)."""
    d = min(m, n, k)
    return large * d / (d + half_side)


def expert_half_tokens(eff=None) -> float:
    """Tokens per routed expert at which its grouped GEMMs reach half the efficiency of their
    shape as dense GEMMs [tokens] (``[gemm] expert_half_tokens`` of
    ``datasets/llm_defaults.toml``, times a calibration's ``expert_half_tokens`` factor)."""
    return _defaults()["gemm"]["expert_half_tokens"] * llm_factor(eff, "expert_half_tokens")


def grouped_efficiency(m: float, half_tokens: float) -> float:
    """The share of its dense-GEMM efficiency a routed expert's grouped GEMM of ``m`` tokens
    reaches [fraction]: m / (m + half_tokens) (few tokens an expert leave the grouped GEMM
    bound by reading the expert's weights and by the per-expert launch and scheduling work)."""
    return m / (m + half_tokens)


def _mean_layer(model: Transformer, fn) -> float:
    """Mean of ``fn(moe_layer)`` over the model's layers."""
    dense = model.layers - model.moe_layers
    return (dense * fn(False) + model.moe_layers * (fn(True) if model.moe else 0.0)) / model.layers


def model_vector(model: Transformer, global_batch: int | None = None, attention: str = "eager") -> np.ndarray:
    """The kernel's model vector (``llm_layout.M_*``) of ``model`` at ``global_batch``
    sequences per step (default: the model's).  With ``attention`` fused (flash) the attention core
    keeps no s x s softmax for the backward pass, only its fp32 log-sum-exp, 4 bytes a head and
    token (Dao et al., FlashAttention, 2022, section 3.1), instead of Korthikanti's 5 a s."""
    vec = np.zeros(K.N_MODEL_FIELDS)
    vec[K.M_LAYERS] = model.layers
    vec[K.M_HIDDEN] = model.hidden
    vec[K.M_HEADS] = model.heads
    vec[K.M_KV_DIM] = model.kv_dim
    vec[K.M_KV_HEADS] = model.heads if model.mla else model.kv_heads
    vec[K.M_FFN] = model.ffn_hidden
    vec[K.M_MOE_FFN] = model.moe_ffn_hidden if model.moe else 0
    vec[K.M_SEQ] = model.seq_len
    vec[K.M_EXPERTS] = model.experts
    # routed copies sent by the all-to-all, capacity padding included (shared experts stay local)
    vec[K.M_TOPK] = model.experts_per_token * model.capacity_factor if model.moe else 0
    vec[K.M_GLOBAL_BATCH] = global_batch or model.global_batch
    vec[K.M_SHARED_PARAMS] = _mean_layer(model, lambda moe: S.layer_params(model, moe)["shared"])
    vec[K.M_EXPERT_PARAMS] = _mean_layer(model, lambda moe: S.layer_params(model, moe)["expert"])
    vec[K.M_EMBED_PARAMS] = S.embedding_params(model)
    vec[K.M_ACT_REPLICATED] = _mean_layer(model, lambda moe: S.activation_terms(model, moe)["replicated"])
    vec[K.M_ACT_SPLIT] = _mean_layer(model, lambda moe: S.activation_terms(model, moe)["split"])
    vec[K.M_ACT_CORE] = (
        4.0 * model.heads
        if attention == "fused"
        else _mean_layer(model, lambda moe: S.activation_terms(model, moe)["core"])
    )
    vec[K.M_MODEL_FLOPS] = S.model_flops_per_token(model)
    for i, name in enumerate(S.RECOMPUTE):
        vec[K.M_HW_FLOPS + i] = S.hardware_flops_per_token(model, name)
    vec[K.M_MOE_FRACTION] = model.moe_layers / model.layers
    vec[K.M_VOCAB] = model.vocab
    return vec


def peak_flops(cats: Catalogues, gpu: str, precision: str) -> float:
    """Dense datasheet peak of ``gpu`` at ``precision`` [FLOP/s] (NaN when it has none)."""
    value = cats.peak_TFLOP_per_s(gpu, precision)
    return value * 1e12 if value > 0 else math.nan


def quantization_bytes(precision: str) -> float:
    """HBM bytes per cast element of a low-precision recipe over a step: one BF16 read (2
    bytes, more with a current-scaling amax pass) and two quantized copies, row- and
    column-wise (``[quantization]`` of ``datasets/llm_defaults.toml``); 0 for a precision whose
    GEMMs take BF16 or wider inputs."""
    row = _defaults()["quantization"].get(precision)
    if row is None:
        return 0.0
    return 2.0 * (1.0 + row["amax_reads"]) + 2.0 * row["element_bytes"]


def _forward_seconds(
    model: Transformer, moe: bool, t: int, sp: int, rates: tuple, attention: str, tokens: float, ep: int
) -> tuple[float, float]:
    """Forward seconds per token of one layer on one GPU of t, and of its attention core alone;
    ``rates`` = (peak FLOP/s, large-GEMM efficiency, half-efficiency side, attention FLOP/s, HBM
    bytes/s, bytes per cast element of the precision, expert half-efficiency tokens); every GEMM
    at the efficiency of its shape for ``tokens`` tokens a micro-batch, the routed experts'
    grouped GEMMs times ``grouped_efficiency`` of their tokens an expert.  The casts of a
    low-precision recipe (a step's worth, ``quantization_bytes``) are counted as a third in the
    forward pass, which the table runs three times (forward + backward)."""
    peak, large, half, attn_rate, hbm, cast_bytes, expert_half = rates
    flops = S.layer_forward_flops(model, moe)
    terms = S.activation_terms(model, moe)
    causal = 0.5 if attention == "fused" else 1.0
    gemm = 0.0
    for m, n, k, copies in S.plain_gemms(model, moe, t, tokens):
        gemm += 2.0 * m * n * k * copies / (peak * shape_efficiency(m, n, k, large, half))
    for m, n, k, copies in S.routed_expert_gemms(model, t, tokens, ep) if moe else []:
        rate = peak * shape_efficiency(m, n, k, large, half) * grouped_efficiency(m, expert_half)
        gemm += 2.0 * m * n * k * copies / rate
    gemm /= tokens
    attn = causal * flops["attention"] / t / attn_rate
    core = (2.0 * terms["core"] / t / hbm) if attention == "eager" else 0.0
    elementwise = 2.0 * (terms["replicated"] / (t if sp else 1) + S.ffn_activation_bytes(model, moe) / t) / hbm
    elementwise += S.moe_permute_bytes(model, moe) / t / hbm
    if cast_bytes > 0.0:
        elementwise += S.quantized_elements(model, moe, t, tokens, ep) * cast_bytes / 3.0 / hbm
    return gemm + attn + elementwise + core, attn + core


def compute_table(
    model: Transformer,
    cats: Catalogues,
    eff: Efficiency,
    pairs: list[tuple[str, str]],
    tensor: list[int],
    attention: str,
    tokens: float | None = None,
    ep: int = 1,
) -> np.ndarray:
    """(C, T, 3, 2, N_CT_FIELDS) seconds per token for each (gpu, precision) pair, tensor
    degree, recomputation (none, selective, full) and sequence parallelism (off, on); NaN for a
    GPU without the precision.  ``tokens`` per micro-batch on a GPU (default: one sequence) and
    the expert degree ``ep`` set the GEMM shapes."""
    tokens = float(tokens or model.seq_len)
    out = np.full((len(pairs), len(tensor), 3, 2, K.N_CT_FIELDS), np.nan)
    attention_class = "attention_fused" if attention == "fused" else "attention_eager"
    for ci, (gpu, precision) in enumerate(pairs):
        peak = peak_flops(cats, gpu, precision)
        if not peak > 0:
            continue
        gen = generation(cats, gpu)
        large, half = gemm_efficiency(cats, eff, gpu, precision)
        # the attention core runs at 16 bits whatever the GEMMs' precision (Transformer Engine's
        # fused attention and FlashAttention compute in BF16 unless FP8 attention is asked for)
        attn_peak = attention_peak(cats, gpu, precision, peak)
        rates = (
            peak,
            large,
            half,
            attn_peak * min(1.0, eff.class_for(attention_class, gen, precision) * llm_factor(eff, "attention")),
            cats.gpus.number(gpu, "hbm_GB_per_s")
            * 1e9
            * min(1.0, eff.class_for("hbm", gen, "*") * llm_factor(eff, "hbm")),
            quantization_bytes(precision),
            expert_half_tokens(eff),
        )
        for ti, t in enumerate(tensor):
            side = model.vocab / t
            logit_rate = peak * shape_efficiency(tokens, side, model.hidden, large, half)
            logits = 3.0 * (
                S.logits_forward_flops(model) / t / logit_rate + 3.0 * model.vocab * S_LOGIT_PASS_BYTES / t / rates[4]
            )
            for sp in (0, 1):
                parts = {
                    moe: _forward_seconds(model, moe, t, sp, rates, attention, tokens, ep)
                    for moe in ((False, True) if model.moe else (False,))
                }
                fwd = _mean_layer(model, lambda moe, p=parts: p[moe][0])
                core_fwd = _mean_layer(model, lambda moe, p=parts: p[moe][1])
                overhead = _mean_layer(model, lambda moe: layer_overhead_seconds(model, moe, eff)) / tokens
                for rc, extra in enumerate((0.0, core_fwd, fwd)):
                    passes = 4.0 / 3.0 if rc == 2 else 1.0  # a full recomputation runs the forward kernels again
                    out[ci, ti, rc, sp, K.CT_LAYER] = 3.0 * fwd + extra + passes * overhead
                    out[ci, ti, rc, sp, K.CT_ATTENTION] = 3.0 * core_fwd
                    out[ci, ti, rc, sp, K.CT_LOGITS] = logits
    return out


def attention_peak(cats: Catalogues, gpu: str, precision: str, peak: float) -> float:
    """The dense peak the attention core runs at [FLOP/s]: the GPU's BF16 peak under an 8- or
    4-bit precision (its GEMMs only are low precision), else the precision's own peak."""
    if "fp8" in precision or "fp4" in precision:
        bf16 = cats.gpus.number(gpu, "bf16_TFLOP_per_s")
        return bf16 * 1e12 if bf16 > 0 else peak
    return peak


def layer_overhead_seconds(model: Transformer, moe: bool, eff=None) -> float:
    """Fixed seconds per layer and micro-batch, forward + backward, that no FLOP or byte count
    gives: kernel launch gaps of the layer's ~90 kernels (``[overhead] layer_us``) and, in a MoE
    layer, the router's host synchronisation on per-expert token counts and the token
    permutations (``moe_layer_us``); ``datasets/llm_defaults.toml``, factors ``overhead`` and
    ``moe_overhead`` of a calibration."""
    table = _defaults()["overhead"]
    out = table["layer_us"] * llm_factor(eff, "overhead")
    if moe:
        out += table["moe_layer_us"] * llm_factor(eff, "moe_overhead")
    return out * 1e-6


#: bytes per logit per pass of the loss (fp32 logits written, read by softmax and cross-entropy)
S_LOGIT_PASS_BYTES = 4.0


@dataclass(frozen=True)
class Hardware:
    """One cluster design: a GPU at a precision, its NVLink domain [GPUs] and intra link, the
    network (a fabric of ``datasets/llm_fabrics.csv`` or a network link of ``links.csv``) and
    NICs per GPU."""

    gpu: str
    precision: str
    domain: int
    intra: str
    network: str
    nics_per_gpu: float

    def __post_init__(self) -> None:
        check_number("nics_per_gpu", self.nics_per_gpu, "the cluster design")


def intra_link_for(cats: Catalogues, gpu: str) -> str:
    """The GPU's own NVLink/NVSwitch link (the first such row of links.csv that fits it), else
    its host PCIe link."""
    from paigrid.inputs.kernel_tables import fits_matrix

    intra = cats.links_of_scope("intra")
    fits = fits_matrix(cats, [gpu], intra)[0]
    for name, ok in zip(intra, fits):
        if ok and cats.links.row(name)["kind"] != "pcie":
            return name
    return f"pcie{int(cats.gpus.number(gpu, 'pcie_gen'))}"


def memory_bytes(cats: Catalogues, gpu: str) -> float:
    """Memory of one GPU as it reports it [bytes]: ``memory_GiB`` x 2^30 when the GPU catalogue
    has that column, else ``memory_GB`` x 1e9 (the datasheet's figure, read as decimal GB)."""
    row = cats.gpus.row(gpu)
    text = (row.get("memory_GiB") or "").strip()
    if text:
        return float(text) * 2.0**30
    return cats.gpus.number(gpu, "memory_GB") * 1e9


def _domains(gpus: float, domain: int) -> float:
    """Whole NVLink domains of ``domain`` GPUs in a switch group of ``gpus`` GPUs (at least 1; inf stays inf)."""
    return math.inf if math.isinf(gpus) else max(1.0, float(math.floor(gpus / domain)))


def hardware_table(
    designs: list[Hardware], cats: Catalogues, eff: Efficiency, pairs: list[tuple[str, str]]
) -> np.ndarray:
    """(H, N_HW_FIELDS) rows of the hardware designs; ``pairs`` lists the compute table's
    (gpu, precision) rows."""
    from paigrid.llm.fabrics import fabric

    table = np.zeros((len(designs), K.N_HW_FIELDS))
    for i, hw in enumerate(designs):
        intra, net = cats.links.row(hw.intra), fabric(hw.network, cats, eff)
        table[i, K.HW_CT] = pairs.index((hw.gpu, hw.precision))
        table[i, K.HW_DOMAIN] = hw.domain
        table[i, K.HW_INTRA_BW] = (
            float(intra["nominal_GB_per_s"])
            * 1e9
            * min(1.0, eff.link_for(hw.intra, intra["kind"], float(intra["efficiency"])) * llm_factor(eff, "intra"))
        )
        table[i, K.HW_INTRA_LAT] = float(intra["latency_us"]) * 1e-6
        table[i, K.HW_NET_BW] = net.nic_GB_per_s * 1e9 * min(1.0, net.efficiency * llm_factor(eff, "network"))
        table[i, K.HW_NET_LAT] = net.latency_us * 1e-6
        table[i, K.HW_TIER1] = _domains(net.tier1_GPUs, hw.domain)
        table[i, K.HW_TIER2] = _domains(net.tier2_GPUs, hw.domain)
        table[i, K.HW_TIERS] = net.tiers
        table[i, K.HW_OVERSUB1] = net.oversubscription_tier1
        table[i, K.HW_OVERSUB2] = net.oversubscription_tier2
        table[i, K.HW_HOP_LAT] = net.hop_latency_us * 1e-6
        table[i, K.HW_SHARP] = 1.0 if net.sharp else 0.0
        table[i, K.HW_NVLS] = 1.0 if net.nvls else 0.0
        table[i, K.HW_NICS_PER_GPU] = hw.nics_per_gpu
        table[i, K.HW_MEMORY] = memory_bytes(cats, hw.gpu)
        table[i, K.HW_PRICE] = cats.gpus.number(hw.gpu, "price_USD_per_gpu_hour")
        table[i, K.HW_POWER] = cats.gpus.number(hw.gpu, "tdp_W")
        table[i, K.HW_PEAK] = peak_flops(cats, hw.gpu, hw.precision)
        table[i, K.HW_HBM] = (
            cats.gpus.number(hw.gpu, "hbm_GB_per_s") * 1e9 * eff.class_for("hbm", generation(cats, hw.gpu), "*")
        )
    return table
