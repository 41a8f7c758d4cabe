"""The catalogue of transformer models by shape (``datasets/llm_models.csv``) and the
``Transformer`` each row describes.  A user catalogue of the same columns replaces it; a model
can also be built from the shape columns of a measured row (``transformer_from_cells``)."""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path

from paigrid.errors import PaigridError
from paigrid.files import read_text
from paigrid.inputs.catalog import Catalogue, csv_table, fresh_copy, parsed_once
from paigrid.inputs.options import check_column

REQUIRED = ("name", "layers", "hidden", "heads", "ffn_hidden", "vocab", "seq_len", "source")
NORMS = ("layernorm", "rmsnorm")
#: optional whole-number shape columns beyond the classic ones (0 or empty: not used)
SHAPE_EXTRAS = ("head_size", "q_lora_rank", "kv_lora_rank", "rope_head_dim", "v_head_dim")


@dataclass(frozen=True)
class Transformer:
    """A decoder-only transformer by shape.  Sizes are counts (layers, features, tokens);
    ``experts = 0`` is a dense model.  A mixture-of-experts model has ``dense_layers`` leading
    dense layers (FFN ``ffn_hidden``) and MoE layers of ``experts`` routed experts of
    ``moe_ffn_hidden`` each (``experts_per_token`` chosen per token) plus ``shared_experts``."""

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn_hidden: int
    vocab: int
    seq_len: int
    ffn_gated: bool = False
    experts: int = 0
    experts_per_token: int = 0
    moe_ffn_hidden: int = 0
    shared_experts: int = 0
    dense_layers: int = 0
    tied_embeddings: bool = True
    linear_bias: bool = True
    norm: str = "layernorm"
    learned_positions: bool = True
    global_batch: int = 512  # sequences per optimizer step (the training recipe's)
    capacity_factor: float = 1.0  # MoE: expert buffer slots per routed token (1: dropless, balanced)
    head_size: int = 0  # features per head when not hidden / heads (Qwen3, GPT-OSS); 0: hidden / heads
    # multi-head latent attention (DeepSeek-V2/V3, Kimi K2) when kv_lora_rank > 0: queries through a
    # q_lora_rank bottleneck (0: none), keys and values through kv_lora_rank; query/key heads of
    # head_dim + rope_head_dim features, value heads of v_head_dim
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    rope_head_dim: int = 0
    v_head_dim: int = 0

    @property
    def head_dim(self) -> int:
        """Features per attention head (``head_size``, else hidden / heads; with multi-head
        latent attention the query/key features without the rotary part)."""
        return self.head_size or self.hidden // self.heads

    @property
    def mla(self) -> bool:
        """True for multi-head latent attention."""
        return self.kv_lora_rank > 0

    @property
    def qk_dim(self) -> int:
        """Query (and key) features of all heads."""
        return self.heads * (self.head_dim + (self.rope_head_dim if self.mla else 0))

    @property
    def value_dim(self) -> int:
        """Value (attention output) features of all heads."""
        return self.heads * (self.v_head_dim or self.head_dim) if self.mla else self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        """Key and value features of one token as attention reads them (grouped-query: kv_heads x
        head_dim; multi-head latent attention: its up-projected keys and values, (qk + v) / 2 a head)."""
        if self.mla:
            return (self.qk_dim + self.value_dim) // 2
        return self.kv_heads * self.head_dim

    @property
    def moe(self) -> bool:
        """True for a mixture-of-experts model."""
        return self.experts > 0

    @property
    def moe_layers(self) -> int:
        """Layers with an expert FFN (0 for a dense model)."""
        return self.layers - self.dense_layers if self.moe else 0

    def with_seq_len(self, seq_len: int) -> Transformer:
        """The same model trained at another sequence length [tokens]."""
        return replace(self, seq_len=int(seq_len))


#: the largest whole number a CSV cell gives (a layer count, a width, a degree, a batch): beyond
#: it the model's float arithmetic would overflow, and no real run comes near it
MAX_WHOLE_CELL = 2**31 - 1


def whole_cell(cell: str, origin: str, column: str, minimum: int, default: int | None = None) -> int:
    """A CSV cell as a whole number >= ``minimum`` (``default`` when empty and given); one
    sentence naming ``origin`` and ``column`` otherwise."""
    text = (cell or "").strip()
    if not text and default is not None:
        return default
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value == int(value) and value >= minimum):
        raise PaigridError(f"{origin}: {column} must be a whole number >= {minimum}, not {cell!r}.")
    value = check_column(column, value, origin)  # a declared bound first: its sentence says why
    if value > MAX_WHOLE_CELL:
        raise PaigridError(
            f"{origin}: {column} must be a whole number from {minimum} to {MAX_WHOLE_CELL}, not {cell!r}."
        )
    return int(value)


def _flag(cell: str, origin: str, column: str, default: bool) -> bool:
    text = (cell or "").strip().casefold()
    if not text:
        return default
    if text in ("true", "yes", "1"):
        return True
    if text in ("false", "no", "0"):
        return False
    raise PaigridError(f"{origin}: {column} must be true or false, not {cell!r}.")


def transformer_from_cells(cells: dict[str, str], origin: str, name: str | None = None) -> Transformer:
    """A ``Transformer`` from CSV cells (a catalogue row or a measured row): ``layers``,
    ``hidden``, ``heads``, ``ffn_hidden``, ``vocab``, ``seq_len`` required; ``kv_heads``
    (default: heads), ``ffn_gated`` (false), ``experts``, ``experts_per_token``,
    ``moe_ffn_hidden`` (default: ffn_hidden), ``shared_experts``, ``dense_layers`` (0),
    ``tied_embeddings``, ``linear_bias``, ``learned_positions`` (true: GPT style), ``norm``
    (layernorm), ``global_batch_sequences`` and ``capacity_factor`` (1: dropless; a MoE
    layer's expert buffers hold capacity_factor x the routed tokens, padding computed and sent),
    ``head_size`` (features per head when not hidden / heads) and the multi-head latent
    attention ranks ``q_lora_rank``, ``kv_lora_rank``, ``rope_head_dim``, ``v_head_dim``.
    Every inconsistency is one sentence."""
    g = cells.get
    heads = whole_cell(g("heads", ""), origin, "heads", 1)
    model = Transformer(
        name=(name or g("name") or g("model") or "").strip(),
        layers=whole_cell(g("layers", ""), origin, "layers", 1),
        hidden=whole_cell(g("hidden", ""), origin, "hidden", 1),
        heads=heads,
        kv_heads=whole_cell(g("kv_heads", ""), origin, "kv_heads", 1, heads),
        ffn_hidden=whole_cell(g("ffn_hidden", ""), origin, "ffn_hidden", 1),
        vocab=whole_cell(g("vocab", ""), origin, "vocab", 1),
        seq_len=whole_cell(g("seq_len", ""), origin, "seq_len", 1),
        ffn_gated=_flag(g("ffn_gated", ""), origin, "ffn_gated", False),
        experts=whole_cell(g("experts", ""), origin, "experts", 0, 0),
        experts_per_token=whole_cell(g("experts_per_token", ""), origin, "experts_per_token", 0, 0),
        moe_ffn_hidden=whole_cell(g("moe_ffn_hidden", ""), origin, "moe_ffn_hidden", 0, 0),
        shared_experts=whole_cell(g("shared_experts", ""), origin, "shared_experts", 0, 0),
        dense_layers=whole_cell(g("dense_layers", ""), origin, "dense_layers", 0, 0),
        tied_embeddings=_flag(g("tied_embeddings", ""), origin, "tied_embeddings", True),
        linear_bias=_flag(g("linear_bias", ""), origin, "linear_bias", True),
        norm=(g("norm") or "layernorm").strip().casefold(),
        learned_positions=_flag(g("learned_positions", ""), origin, "learned_positions", True),
        global_batch=whole_cell(g("global_batch_sequences", ""), origin, "global_batch_sequences", 1, 512),
        capacity_factor=_capacity(g("capacity_factor", ""), origin),
        **{column: whole_cell(g(column, ""), origin, column, 0, 0) for column in SHAPE_EXTRAS},
    )
    return check(model, origin)


def _capacity(cell: str, origin: str) -> float:
    text = (cell or "").strip()
    if not text:
        return 1.0
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 1.0):
        raise PaigridError(f"{origin}: capacity_factor must be a number >= 1 (1: dropless), not {cell!r}.")
    return check_column("capacity_factor", value, origin)


def check(model: Transformer, origin: str) -> Transformer:
    """The model, once its shape is consistent (one sentence naming the first problem)."""
    if not model.head_size and model.hidden % model.heads:
        raise PaigridError(f"{origin}: hidden {model.hidden} is not a multiple of heads {model.heads}.")
    if model.heads % model.kv_heads:
        raise PaigridError(f"{origin}: heads {model.heads} is not a multiple of kv_heads {model.kv_heads}.")
    if model.mla and not (model.rope_head_dim and model.v_head_dim and model.head_size):
        raise PaigridError(
            f"{origin}: multi-head latent attention (kv_lora_rank > 0) needs head_size, rope_head_dim and v_head_dim."
        )
    if model.norm not in NORMS:
        raise PaigridError(f"{origin}: norm must be one of {', '.join(NORMS)}, not {model.norm!r}.")
    if model.experts:
        if not 1 <= model.experts_per_token <= model.experts:
            raise PaigridError(
                f"{origin}: experts_per_token must be between 1 and experts ({model.experts}), "
                f"not {model.experts_per_token}."
            )
        if model.dense_layers >= model.layers:
            raise PaigridError(f"{origin}: dense_layers must be fewer than layers in a mixture-of-experts model.")
        if not model.moe_ffn_hidden:
            model = replace(model, moe_ffn_hidden=model.ffn_hidden)
    elif model.experts_per_token or model.shared_experts:
        raise PaigridError(f"{origin}: experts_per_token and shared_experts need experts >= 1.")
    return model


def load_catalogue(path: str | Path | None = None) -> Catalogue:
    """The LLM model catalogue (built-in ``llm_models.csv`` unless ``path``), names and aliases
    resolvable as in the other catalogues."""
    if path is None:
        text = resources.files("paigrid.datasets").joinpath("llm_models.csv").read_text(encoding="utf-8")
        return fresh_copy(parsed_once("llm_models", text, lambda text, _, origin: _parse(text, origin)))
    return _parse(read_text(path, "the LLM model catalogue"), str(path))


def _parse(text: str, origin: str) -> Catalogue:
    """The LLM model catalogue of ``text``, every row checked."""
    header, rows = csv_table(text, origin, "an LLM model catalogue", REQUIRED)
    for line_no, row in rows:
        transformer_from_cells(row, f"{origin} line {line_no}")
    return Catalogue("llm models", origin, header, [row for _, row in rows], hashlib.sha256(text.encode()).hexdigest())


def model(name: str, catalogue: Catalogue | None = None) -> Transformer:
    """The catalogue's model called ``name`` (or an alias of it)."""
    catalogue = catalogue or load_catalogue()
    row = catalogue.row(name)
    return transformer_from_cells(row, catalogue.origin, row["name"])
