"""Measured LLM training runs (the ``llm`` row kind): read a row's columns into a model, a
layout and a cluster design, and predict its throughput.

Columns (``datasets/llm_public.csv``).  Required: ``id, model, layers, hidden, heads,
ffn_hidden, vocab, seq_len, gpu, gpus_per_node, nodes, intra_link, network, nics_per_node,
precision, tensor_parallel, pipeline_parallel, data_parallel, global_batch, throughput,
throughput_unit``.  Optional: ``kv_heads`` (default: heads), ``ffn_gated`` (false),
``experts``, ``experts_per_token``, ``micro_batch`` (empty: global_batch / data_parallel when
pipeline_parallel is 1, else 1), ``recompute`` (none, selective or full; empty: selective,
Megatron-LM's recommended setting since Korthikanti et al. 2022), ``sequence_parallel``
(false), ``zero_stage`` (0), ``source``, ``notes``.

``throughput_unit``: ``hw-TFLOP/s/GPU`` (recomputation counted, the Megatron-LM 2020-2021
convention), ``model-TFLOP/s/GPU`` (forward + backward only), ``tokens/s`` or ``sequences/s``
(whole job).  Every row is compared in tokens/s of the whole job: a TFLOP/s row is converted
with the FLOPs per token of ``llm.shapes`` (hardware FLOPs at the row's recomputation, or
model FLOPs), which for a GPT shape is Megatron-LM's own formula.

The rows are Megatron-LM runs of 2020-2021, before FlashAttention and before Megatron overlapped
the data-parallel traffic: the row kind predicts with ``ROW_OPTIONS`` (unfused attention, no
data-parallel overlap) on top of the defaults.  The model is GPT-style (layer norm, biases,
learned positions, tied embeddings).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from paigrid.errors import PaigridError
from paigrid.inputs.catalog import Catalogues
from paigrid.llm.compute import Hardware, LlmOptions, intra_link_for
from paigrid.llm.layouts import Layout, check_layout
from paigrid.llm.models import Transformer, transformer_from_cells, whole_cell
from paigrid.llm.shapes import RECOMPUTE, hardware_flops_per_token, model_flops_per_token

REQUIRED = ("id", "model", "layers", "hidden", "heads", "ffn_hidden", "vocab", "seq_len", "gpu", "gpus_per_node",
            "nodes", "intra_link", "network", "nics_per_node", "precision", "tensor_parallel", "pipeline_parallel",
            "data_parallel", "global_batch", "throughput", "throughput_unit")
OPTIONAL = ("kv_heads", "ffn_gated", "experts", "experts_per_token", "micro_batch", "recompute", "sequence_parallel",
            "zero_stage", "source", "notes")
UNITS = ("hw-TFLOP/s/GPU", "model-TFLOP/s/GPU", "tokens/s", "sequences/s")
#: the settings of the Megatron-LM 2020-2021 runs the rows come from
ROW_OPTIONS = {"attention": "eager", "overlap_dp": False}
DEFAULT_RECOMPUTE = "selective"


@dataclass(frozen=True)
class LlmRow:
    """One measured run: the model, layout and design, and the measured tokens/s of the job."""

    id: str
    model: Transformer
    layout: Layout
    design: Hardware
    gpus_per_node: int
    nodes: int
    measured: float


def _whole(cells: dict, column: str, origin: str, minimum: int = 1, default: int | None = None) -> int:
    return whole_cell(cells.get(column), origin, column, minimum, default)


def _flag(cells: dict, column: str, origin: str) -> bool:
    text = (cells.get(column) or "").strip().casefold()
    if text not in ("", "true", "false"):
        raise PaigridError(f"{origin}: {column} must be true or false, not {cells.get(column)!r}.")
    return text == "true"


def parse_row(cells: dict[str, str], origin: str, cats: Catalogues) -> LlmRow:
    """Check one row and read it (one sentence naming ``origin`` for the first problem)."""
    ident = (cells.get("id") or "").strip()
    if not ident:
        raise PaigridError(f"{origin}: id is empty.")
    model = transformer_from_cells({**cells, "name": cells.get("model", ""), "global_batch_sequences":
                                    cells.get("global_batch", "")}, origin)
    gpu = cats.gpus.resolve(cells["gpu"])
    precision = cats.precisions.resolve(cells["precision"])
    per_node = _whole(cells, "gpus_per_node", origin)
    nodes = _whole(cells, "nodes", origin)
    tp, pp = _whole(cells, "tensor_parallel", origin), _whole(cells, "pipeline_parallel", origin)
    dp = _whole(cells, "data_parallel", origin)
    if tp * pp * dp != per_node * nodes:
        raise PaigridError(f"{origin}: tensor x pipeline x data parallel = {tp * pp * dp} is not the "
                           f"{per_node * nodes} GPUs of gpus_per_node x nodes.")
    batch = model.global_batch
    micro = _whole(cells, "micro_batch", origin, 1, batch // dp if pp == 1 else 1)
    recompute = (cells.get("recompute") or "").strip().casefold() or DEFAULT_RECOMPUTE
    if recompute not in RECOMPUTE:
        raise PaigridError(f"{origin}: recompute must be one of {', '.join(RECOMPUTE)}, not {cells['recompute']!r}.")
    zero = _whole(cells, "zero_stage", origin, 0, 0)
    if zero > 3:
        raise PaigridError(f"{origin}: zero_stage must be 0, 1, 2 or 3, not {cells['zero_stage']!r}.")
    layout = check_layout(Layout(tp, pp, dp, 1, 1, 1, micro, zero, recompute, _flag(cells, "sequence_parallel",
                                                                                     origin)))
    network = cats.links.resolve(cells["network"].strip())
    nics = _whole(cells, "nics_per_node", origin, 0)
    if nodes > 1 and (cats.links.row(network)["kind"] == "none" or nics == 0):
        raise PaigridError(f"{origin}: a run on {nodes} servers needs a network and nics_per_node >= 1.")
    intra_cell = cells["intra_link"].strip()
    if intra_cell.casefold() == "none":
        if per_node * nodes != 1:
            raise PaigridError(f"{origin}: intra_link none is only for a one-GPU run.")
        intra = intra_link_for(cats, gpu)
    else:
        intra = cats.links.resolve(intra_cell)
    design = Hardware(gpu, precision, per_node, intra, network, nics / per_node)
    value = _whole_positive(cells, origin)
    unit = cells["throughput_unit"].strip()
    if unit not in UNITS:
        raise PaigridError(f"{origin}: throughput_unit must be one of {', '.join(UNITS)}, not {unit!r}.")
    n = per_node * nodes
    if unit == "hw-TFLOP/s/GPU":
        tokens = value * 1e12 * n / hardware_flops_per_token(model, recompute)
    elif unit == "model-TFLOP/s/GPU":
        tokens = value * 1e12 * n / model_flops_per_token(model)
    elif unit == "sequences/s":
        tokens = value * model.seq_len
    else:
        tokens = value
    return LlmRow(ident, model, layout, design, per_node, nodes, tokens)


def _whole_positive(cells: dict, origin: str) -> float:
    try:
        value = float(cells["throughput"])
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise PaigridError(f"{origin}: throughput must be a positive number, not {cells['throughput']!r}.")
    return value


def row_options(options: LlmOptions | None = None) -> LlmOptions:
    """The options a row is predicted with: ``options`` (default: the shipped ones) with
    ``ROW_OPTIONS`` on top."""
    return replace(options or LlmOptions.defaults(), **ROW_OPTIONS)


def predict_row(row: LlmRow, cats: Catalogues, eff, options: LlmOptions | None = None) -> dict:
    """The model's breakdown of a row (``llm.evaluate.predict``) at its layout and design."""
    from paigrid.llm.evaluate import predict

    return predict(row.model, row.layout, row.design, cats, eff, row_options(options))
