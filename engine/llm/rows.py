"""Measured LLM training runs (the ``llm`` row kind): read a row's columns into a model, a
layout, a cluster design and the options of its software stack, and predict its throughput.

Columns (``datasets/llm_public.csv``, ``datasets/llm_public_v2.csv``).  Required: ``id, model,
layers, hidden, heads, ffn_hidden, vocab, seq_len, gpu, gpus_per_node, nodes, intra_link,
network, nics_per_node, precision, tensor_parallel, pipeline_parallel, data_parallel,
global_batch, throughput, throughput_unit`` (columns that must exist; a v2 row may leave some
empty, see below).  Optional: ``kv_heads, ffn_gated, experts, experts_per_token,
nvlink_domain, virtual_stages, context_parallel, expert_parallel, zero_stage, micro_batch,
recompute, sequence_parallel, attention, overlap, framework, peak_memory_GB, source, notes``.

How each cell reaches the model (docs/llm.md, "Measured runs", says the same):

* The model: a row whose ``model`` names a model of ``llm_models.csv`` (or an alias) takes the
  catalogue's shape (head size, multi-head latent attention, shared experts, dense first layers,
  norms, biases) with the row's stated columns on top; a MoE row's ``ffn_hidden`` is the routed
  expert's.  Another row is built from its own columns, GPT style.
* The stack: ``framework`` names a family (``FAMILIES``: Megatron-Core, as in NeMo and
  Megatron-Bridge; torchtitan; DeepSpeed; empty: the Megatron-LM runs of 2020-2021), and every
  empty setting takes the family's default (``FAMILY_DEFAULTS``); the row's ``defaults`` list
  names each default it used, and validate prints them.
* GPUs: ``nodes`` empty (GB200/GB300 trays, whose tables give GPUs, not servers) or 0 (a
  table whose GPU count contradicts its layout) take the layout's tp x pp x cp x dp; a stated
  count that differs from the layout's refuses the row.  ``nvlink_domain`` is the NVLink
  domain (72 for an NVL72 rack), else ``gpus_per_node``.
* Units: ``tokens/s/GPU``, ``tokens/s`` and ``sequences/s`` (whole job), ``model-TFLOP/s/GPU``
  (forward + backward FLOPs: NeMo's and torchtitan's count the full s x s attention,
  Megatron-Bridge's its causal half, ``shapes.model_flops_per_token``),
  ``hw-TFLOP/s/GPU`` (recomputation counted, Megatron-LM's 2020-2021 convention), ``MFU``
  written as ``56.8%`` (model FLOPs over the GPU's dense BF16 peak, torchtitan's convention,
  FP8 runs included); torchtitan's own FLOPs are 6 x all parameters + 12 L h s
  (``torchtitan_flops_per_token``).  Every row is compared in tokens/s of the whole job.
* ``peak_memory_GB``: torchtitan prints GiB (2^30 bytes), so the column is read as GiB.
* Free-text cells: ``recompute`` and ``precision`` are read by their first word
  (``selective (op)`` is selective; ``fp8 (torchao float8 rowwise)`` is fp8); ``sequence_parallel``
  by its first word (``true (...)``); ``overlap`` ``async TP`` overlaps the tensor-parallel
  collectives with the GEMMs.

A row the model cannot express (CPU offload, a GPU or precision not in the catalogues, an
inconsistent GPU count, a bad cell) is refused with its reason by ``read_measured``; validate
lists and counts it and never aborts the file for it.  Twin rows of one run (``-tps`` and
``-tflops`` ids) share a ``run`` key and count once in medians and folds.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

from paigrid.errors import PaigridError
from paigrid.inputs.catalog import Catalogues
from paigrid.inputs.options import check_column
from paigrid.llm.models import Transformer, load_catalogue, transformer_from_cells, whole_cell
from paigrid.llm.parallelism import Layout, check_layout
from paigrid.llm.shapes import RECOMPUTE, hardware_flops_per_token, model_flops_per_token
from paigrid.llm.tables import Hardware, LlmOptions, framework_state_bytes, intra_link_for

REQUIRED = (
    "id",
    "model",
    "layers",
    "hidden",
    "heads",
    "ffn_hidden",
    "vocab",
    "seq_len",
    "gpu",
    "gpus_per_node",
    "nodes",
    "intra_link",
    "network",
    "nics_per_node",
    "precision",
    "tensor_parallel",
    "pipeline_parallel",
    "data_parallel",
    "global_batch",
    "throughput",
    "throughput_unit",
)
OPTIONAL = (
    "kv_heads",
    "ffn_gated",
    "experts",
    "experts_per_token",
    "nvlink_domain",
    "virtual_stages",
    "context_parallel",
    "expert_parallel",
    "zero_stage",
    "micro_batch",
    "recompute",
    "sequence_parallel",
    "attention",
    "overlap",
    "framework",
    "peak_memory_GB",
    "source",
    "notes",
)
UNITS = ("hw-TFLOP/s/GPU", "model-TFLOP/s/GPU", "tokens/s/GPU", "tokens/s", "sequences/s", "MFU")
#: the settings of the Megatron-LM 2020-2021 runs of ``llm_public.csv`` (no framework column)
ROW_OPTIONS = {"attention": "eager", "overlap_dp": False}
DEFAULT_RECOMPUTE = "selective"

#: framework families by a word of the ``framework`` cell (first match)
FAMILIES = (
    ("torchtitan", "torchtitan"),
    ("deepspeed", "deepspeed"),
    ("llm-foundry", "foundry"),
    ("megatron", "megatron"),
    ("nemo", "megatron"),
)
#: what an empty cell means, per family: Megatron-Core's performance recipes (NeMo 2.0 /
#: Megatron-Bridge: distributed optimizer = ZeRO-1, no recomputation, sequence parallelism with
#: TP, TE fused attention, overlapped gradient reduce and parameter gather); torchtitan's
#: defaults (FSDP2 = ZeRO-3, selective activation checkpointing, SDPA flash attention, FSDP
#: prefetch overlap); MosaicML's llm-foundry (Composer's FSDP FULL_SHARD = ZeRO-3, flash
#: attention, FSDP prefetch overlap, no recomputation unless stated); DeepSpeed's
#: Megatron-DeepSpeed (ZeRO as stated, full recomputation); the 2020-2021 Megatron-LM runs
#: (ZeRO-0, selective recomputation, eager attention, no overlap).
#: Megatron-Core's recipes also overlap the tensor-parallel collectives with the GEMMs
#: (``tp_comm_overlap``, Transformer Engine userbuffers, with sequence parallelism) where t > 1.
FAMILY_DEFAULTS = {
    "megatron": {
        "zero": 1,
        "recompute": "none",
        "sp": True,
        "attention": "fused",
        "overlap_dp": True,
        "micro_batch": 1,
        "tp_overlap": True,
    },
    "torchtitan": {
        "zero": 3,
        "recompute": "selective",
        "sp": True,
        "attention": "fused",
        "overlap_dp": True,
        "micro_batch": 1,
    },
    "deepspeed": {
        "zero": 0,
        "recompute": "full",
        "sp": False,
        "attention": "eager",
        "overlap_dp": True,
        "micro_batch": 1,
    },
    "foundry": {
        "zero": 3,
        "recompute": "none",
        "sp": False,
        "attention": "flash",
        "overlap_dp": True,
        "micro_batch": 1,
    },
    "legacy": {
        "zero": 0,
        "recompute": DEFAULT_RECOMPUTE,
        "sp": False,
        "attention": "eager",
        "overlap_dp": False,
        "micro_batch": None,
    },
}
#: the intra link of a free-text ``intra_link`` cell, by the first matching word
INTRA_WORDS = (
    ("nvlink5", "nvlink5"),
    ("nvlink4", "nvswitch-nvlink4"),
    ("nvlink3", "nvswitch-nvlink3"),
    ("nvlink", None),
)
#: the network of a free-text ``network`` cell, by the first matching word
NETWORK_WORDS = (("rdma 400", "rail-roce-400g"),)
#: the network of an empty cell on a multi-server run, per GPU (one NIC per GPU, the DGX
#: SuperPOD reference architectures: HDR 200G on DGX A100, NDR 400G on DGX H100/B200 and GB200
#: trays, XDR 800G (ConnectX-8) on GB300 trays); an ESTIMATE where a table names no network
DEFAULT_NETWORKS = (("GB300", "ib-xdr-800g"), ("A100", "ib-hdr-200g"), ("", "ib-ndr-400g"))
#: precision spellings of the file that the precision catalogue may not have yet, and the
#: catalogue precision a row is then predicted at (same dense peak on the GPUs of the file)
PRECISION_FALLBACK = {"fp8-cs": "fp8", "fp8-blockwise": "fp8", "mxfp8": "fp8", "mixed": "amp-bf16"}
#: the dense BF16 peak column the MFU unit divides by (torchtitan's convention)
MFU_PEAK_COLUMN = "bf16_TFLOP_per_s"


@dataclass(frozen=True)
class LlmRow:
    """One measured run: the model, layout, design and options, the measured tokens/s of the
    job, the peak memory it reports [GiB] (NaN when none), the settings taken by default and
    the twin key ``run``."""

    id: str
    model: Transformer
    layout: Layout
    design: Hardware
    gpus_per_node: int
    nodes: int
    measured: float
    options: LlmOptions | None = None
    family: str = "legacy"
    defaults: tuple[str, ...] = ()
    peak_memory_GiB: float = math.nan
    run: str = ""
    tp_overlap: bool = False
    container: str = ""

    @property
    def software(self) -> str:
        """The calibration key of the row's software release (``software/FAMILY-VERSION``), empty
        when the row names none."""
        return f"software/{self.container}" if self.container else ""

    @property
    def n_gpu(self) -> int:
        """GPUs in the job (the layout's)."""
        return self.layout.n_gpu


def run_key(ident: str) -> str:
    """The run a row measures: its id without a ``-tps`` / ``-tflops`` / ``-mfu`` suffix, so the
    twin rows of one published run share it."""
    return re.sub(r"-(tps|tflops|mfu)$", "", ident.strip())


#: a container / release version in the ``framework`` cell or the notes ("NeMo 26.08 container",
#: "NeMo24.03.01.framework", "NeMo (NeMo25.04.rc2)")
CONTAINER_PATTERN = re.compile(r"(?:NeMo|container)\s?(\d\d\.\d\d(?:\.\d+)?(?:\.rc\d+)?)")


def container_of(cells: dict, family: str) -> str:
    """The software release a row ran, ``FAMILY-VERSION`` (``megatron-26.08``), from its
    ``framework`` cell, else its notes; empty when neither names one (torchtitan rows name
    commits, not releases)."""
    match = CONTAINER_PATTERN.search(_cell(cells, "framework")) or CONTAINER_PATTERN.search(_cell(cells, "notes"))
    return f"{family}-{match.group(1)}" if match else ""


def _cell(cells: dict, column: str) -> str:
    return (cells.get(column) or "").strip()


def _whole(cells: dict, column: str, origin: str, minimum: int = 1, default: int | None = None) -> int:
    return whole_cell(cells.get(column), origin, column, minimum, default)


def _first_word(text: str) -> str:
    return re.split(r"[\s(;,]", text.strip().casefold(), maxsplit=1)[0] if text.strip() else ""


def _flag(cells: dict, column: str, origin: str, default: bool, used: list) -> bool:
    word = _first_word(_cell(cells, column))
    if not word:
        if default:
            used.append(f"{column}=true")
        return default
    if word not in ("true", "false", "yes", "no"):
        raise PaigridError(f"{origin}: {column} must be true or false, not {cells.get(column)!r}.")
    return word in ("true", "yes")


def family_of(framework: str) -> str:
    """The framework family of a ``framework`` cell (``legacy`` when empty; ``megatron`` for a
    name no family matches, with the defaults of the most common stack)."""
    text = framework.strip().casefold()
    if not text:
        return "legacy"
    for word, family in FAMILIES:
        if word in text:
            return family
    return "megatron"


def _model(cells: dict, origin: str, used: list) -> Transformer:
    """The row's model: the catalogue's shape with the row's columns on top, else the row's columns."""
    catalogue = load_catalogue()
    name = _cell(cells, "model")
    try:
        base = catalogue.row(name)
    except PaigridError:
        base = None
    if base is None:
        cells = {**cells, "name": name, "global_batch_sequences": cells.get("global_batch", "")}
        return transformer_from_cells(cells, origin)
    merged = dict(base)
    moe = bool(_cell(cells, "experts")) and _cell(cells, "experts") != "0"
    for column in (
        "layers",
        "hidden",
        "heads",
        "kv_heads",
        "vocab",
        "seq_len",
        "experts",
        "experts_per_token",
        "ffn_gated",
    ):
        if _cell(cells, column):
            merged[column] = _cell(cells, column)
    if _cell(cells, "ffn_hidden"):
        merged["moe_ffn_hidden" if moe else "ffn_hidden"] = _cell(cells, "ffn_hidden")
    if _cell(cells, "global_batch"):
        merged["global_batch_sequences"] = _cell(cells, "global_batch")
    for column in ("vocab", "seq_len"):
        if not _cell(cells, column):
            used.append(f"{column}={base[column]} (llm_models.csv {base['name']})")
    return transformer_from_cells(merged, origin, base["name"])


def _gpu(cells: dict, cats: Catalogues, origin: str) -> str:
    text = _cell(cells, "gpu")
    for candidate in (text, text.split(" (")[0].strip()):
        try:
            return cats.gpus.resolve(candidate)
        except PaigridError:
            continue
    raise PaigridError(f"{origin}: the GPU {text!r} is not in the GPU catalogue.")


def _precision(cells: dict, cats: Catalogues, origin: str, used: list) -> str:
    text = _cell(cells, "precision")
    word = _first_word(text)
    for candidate in (text, word):
        try:
            return cats.precisions.resolve(candidate)
        except PaigridError:
            continue
    fallback = PRECISION_FALLBACK.get(word)
    if fallback:
        used.append(f"precision {word} as {fallback} (not in the precision catalogue)")
        return cats.precisions.resolve(fallback)
    raise PaigridError(f"{origin}: the precision {text!r} is not in the precision catalogue.")


def _recompute(cells: dict, origin: str, family: str, used: list) -> str:
    word = _first_word(_cell(cells, "recompute"))
    if not word:
        used.append(f"recompute={FAMILY_DEFAULTS[family]['recompute']}")
        return FAMILY_DEFAULTS[family]["recompute"]
    if word not in RECOMPUTE:
        raise PaigridError(f"{origin}: recompute must be one of {', '.join(RECOMPUTE)}, not {cells['recompute']!r}.")
    return word


def _intra(cells: dict, gpu: str, cats: Catalogues, n_gpu: int, origin: str) -> str:
    text = _cell(cells, "intra_link")
    if not text or text.casefold() == "none":
        if text.casefold() == "none" and n_gpu != 1:
            raise PaigridError(f"{origin}: intra_link none is only for a one-GPU run.")
        return intra_link_for(cats, gpu)
    try:
        return cats.links.resolve(text)
    except PaigridError:
        pass
    for word, link in INTRA_WORDS:
        if word in text.casefold():
            return link or intra_link_for(cats, gpu)
    raise PaigridError(f"{origin}: the intra link {text!r} is not in the link catalogue.")


def _network(cells: dict, gpu: str, cats: Catalogues, multi: bool, origin: str, used: list) -> str:
    from paigrid.llm.fabrics import resolve_network

    text = _cell(cells, "network")
    if not text:
        if not multi:
            return "none"
        name = next(net for prefix, net in DEFAULT_NETWORKS if prefix in gpu)
        used.append(f"network={name}")
        return resolve_network(name, cats)
    for word, net in NETWORK_WORDS:
        if word in text.casefold():
            return resolve_network(net, cats)
    try:
        return resolve_network(text, cats)
    except PaigridError:
        raise PaigridError(f"{origin}: the network {text!r} is neither a fabric nor a network link.") from None


def _refusal(cells: dict) -> str:
    """The reason the model cannot express a row at all (empty: it can)."""
    notes = _cell(cells, "notes").casefold()
    if "offload" in notes and "cpu offload false" not in notes:
        return (
            "the run offloads optimizer state and activations to CPU memory (ZeRO-Offload), which the model "
            "has no term for"
        )
    return ""


def read_row(cells: dict[str, str], origin: str, cats: Catalogues) -> LlmRow:
    """Check one row and read it (one sentence naming ``origin`` for the first problem)."""
    ident = _cell(cells, "id")
    if not ident:
        raise PaigridError(f"{origin}: id is empty.")
    reason = _refusal(cells)
    if reason:
        raise PaigridError(f"{origin}: {reason}.")
    used: list[str] = []
    family = family_of(_cell(cells, "framework"))
    defaults = FAMILY_DEFAULTS[family]
    model = _model(cells, origin, used)
    gpu = _gpu(cells, cats, origin)
    precision = _precision(cells, cats, origin, used)
    tp, pp = _whole(cells, "tensor_parallel", origin, 1, 1), _whole(cells, "pipeline_parallel", origin, 1, 1)
    cp = _whole(cells, "context_parallel", origin, 1, 1)
    per_node_cell = _cell(cells, "gpus_per_node")
    per_node = _whole(cells, "gpus_per_node", origin, 1, 8)
    if not per_node_cell:
        used.append("gpus_per_node=8")
    nodes_cell = _cell(cells, "nodes")
    stated = per_node * _whole(cells, "nodes", origin, 0) if nodes_cell and nodes_cell != "0" else None
    if _cell(cells, "data_parallel"):
        dp = _whole(cells, "data_parallel", origin)
    elif stated is not None and stated % (tp * pp * cp) == 0:
        dp = stated // (tp * pp * cp)
        used.append(f"data_parallel={dp} (GPUs / tp pp cp)")
    else:
        raise PaigridError(f"{origin}: data_parallel is empty and the GPU count does not give it.")
    n = tp * pp * cp * dp
    if stated is not None and stated != n:
        raise PaigridError(
            f"{origin}: tensor x pipeline x context x data parallel = {n} is not the {stated} GPUs "
            f"of gpus_per_node x nodes."
        )
    if stated is None:
        used.append(f"GPUs={n} (tp x pp x cp x dp; nodes {'0' if nodes_cell else 'empty'})")
    nodes = max(1, -(-n // per_node))
    batch = model.global_batch
    micro_default = defaults["micro_batch"] or (batch // dp if pp == 1 else 1)
    if not _cell(cells, "micro_batch") and family != "legacy":
        used.append(f"micro_batch={micro_default}")
    micro = _whole(cells, "micro_batch", origin, 1, micro_default)
    if family == "torchtitan" and pp > 1 and _cell(cells, "micro_batch") and micro % pp == 0:
        # torchtitan's micro_batch column is its local batch per data-parallel rank; with
        # pipeline parallelism it splits it into pipeline_parallel_microbatches, which
        # defaults to the number of stages
        micro //= pp
        used.append(f"micro_batch={micro} (local batch / {pp} pipeline microbatches, torchtitan's default)")
    recompute = _recompute(cells, origin, family, used)
    zero = _whole(cells, "zero_stage", origin, 0, defaults["zero"])
    if not _cell(cells, "zero_stage") and family != "legacy":
        used.append(f"zero_stage={defaults['zero']}")
    if zero > 3:
        raise PaigridError(f"{origin}: zero_stage must be 0, 1, 2 or 3, not {cells['zero_stage']!r}.")
    sp = _flag(cells, "sequence_parallel", origin, defaults["sp"] and tp > 1, used)
    vpp = _whole(cells, "virtual_stages", origin, 1, 1)
    ep = _whole(cells, "expert_parallel", origin, 1, 1)
    states = "legacy" if family == "legacy" else family
    if family == "torchtitan" and pp > 1 and zero >= 2:
        # pipelining defers FSDP2's gradient reduce-scatter to the last micro-batch: the
        # gradients stay unsharded (ZeRO-1's memory, ZeRO-2's traffic, which the kernel's
        # stage 1 also costs), the parameters gathered ([state_bytes.torchtitan_pipelined])
        zero, states = 1, "torchtitan_pipelined"
        used.append(
            "zero_stage=1 for memory (torchtitan's pipeline keeps FSDP2's gradients unsharded to its last micro-batch)"
        )
    layout = check_layout(Layout(tp, pp, dp, cp, ep, vpp, micro, zero, recompute, sp))
    network = _network(cells, gpu, cats, nodes > 1, origin, used)
    nics = _whole(cells, "nics_per_node", origin, 0, per_node if nodes > 1 else 0)
    if nodes > 1 and not _cell(cells, "nics_per_node") and family != "legacy":
        used.append(f"nics_per_node={per_node}")
    if nodes > 1 and (network == "none" or nics == 0):
        raise PaigridError(f"{origin}: a run on {nodes} servers needs a network and nics_per_node >= 1.")
    intra = _intra(cells, gpu, cats, n, origin)
    domain = _whole(cells, "nvlink_domain", origin, 1, per_node)
    design = Hardware(gpu, precision, domain, intra, network, (nics / per_node) if per_node else 0.0)
    attention_word = _first_word(_cell(cells, "attention"))
    attention = {"sdpa": "fused", "flash": "fused", "fused": "fused", "eager": "eager"}.get(attention_word)
    if attention is None:
        if attention_word:
            raise PaigridError(f"{origin}: attention must be fused, flash, sdpa or eager, not {cells['attention']!r}.")
        attention = defaults["attention"]
        if family != "legacy":
            used.append(f"attention={attention}")
    overlap = _cell(cells, "overlap").casefold()
    tp_overlap = "async tp" in overlap
    if not overlap and defaults.get("tp_overlap") and tp > 1 and sp:
        tp_overlap = True
        used.append("tp_overlap=true")
    stored = float(cats.precisions.row(precision)["activation_bytes"])
    if family == "torchtitan" and recompute == "selective":
        # torchtitan's checkpointing policies keep other tensors than Korthikanti's selective
        # recomputation; their bf16 bytes relative to it scale the stored activations
        stored = 2.0 * torchtitan_checkpoint_scale(model, _cell(cells, "recompute"))
        used.append(
            f"activations x {stored / 2.0:.2f} (torchtitan's {_cell(cells, 'recompute') or 'selective'} "
            f"checkpointing against Korthikanti's selective)"
        )
    options = replace(
        LlmOptions.defaults(),
        # a measured row is read with the tolerance of [memory] measured_memory_margin (the
        # search ranks on the strict check, memory_margin)
        memory_margin=_measured_margin(),
        attention=attention,
        overlap_dp=defaults["overlap_dp"],
        stored_activation_bytes=stored,
        # DTensor tensor parallelism keeps the column-parallel GEMMs' all-gathered inputs
        gathered_inputs=family == "torchtitan",
        # FSDP2 still reduce-scatters layer by layer at the last micro-batch
        reduce_scatter_buffer=states == "torchtitan_pipelined",
        **framework_state_bytes(states, precision),
    )
    if family != "legacy":
        used.append(f"overlap_dp={str(defaults['overlap_dp']).lower()}")
    if family == "torchtitan" and _compiles_loss(_cell(cells, "notes")):
        options = replace(options, logit_bytes=_torchtitan_states()["compiled_loss_logit_bytes"])
        used.append(f"logit_bytes={options.logit_bytes:g} (a torchtitan release that compiles its loss)")
    elif family == "torchtitan" and tp > 1:
        # tensor parallelism shards the logits over the vocabulary and the loss runs under
        # loss_parallel, whose DTensor handlers hold more fp32 copies than the fused kernels
        options = replace(options, logit_bytes=_torchtitan_states()["loss_parallel_logit_bytes"])
        used.append(f"logit_bytes={options.logit_bytes:g} (torchtitan's loss parallel over the vocabulary shards)")
    measured = _tokens(cells, origin, model, recompute, n, cats, gpu)
    return LlmRow(
        ident,
        model,
        layout,
        design,
        per_node,
        nodes,
        measured,
        options,
        family,
        tuple(used),
        _memory(cells, origin),
        run_key(ident),
        tp_overlap,
        container_of(cells, family),
    )


def _torchtitan_states() -> dict:
    from paigrid.llm.tables import _defaults

    return _defaults()["state_bytes"]["torchtitan"]


def _compiles_loss(notes: str) -> bool:
    """True where a torchtitan row's notes say torch.compile and name a commit whose loss
    torch.compile fuses (``compiled_loss_commits`` of ``[state_bytes.torchtitan]``)."""
    if "torch.compile" not in notes:
        return False
    return any(f"torchtitan@{commit}" in notes for commit in _torchtitan_states()["compiled_loss_commits"])


def _measured_margin() -> float:
    """The memory tolerance a measured row is read with (``[memory] measured_memory_margin`` of
    ``datasets/llm_defaults.toml``)."""
    from paigrid.llm.tables import _defaults

    return float(_defaults()["memory"]["measured_memory_margin"])


def _memory(cells: dict, origin: str) -> float:
    text = _cell(cells, "peak_memory_GB")
    if not text:
        return math.nan
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise PaigridError(f"{origin}: peak_memory_GB must be a positive number, not {text!r}.")
    return check_column("peak_memory_GB", value, origin)


def _tokens(cells: dict, origin: str, model: Transformer, recompute: str, n: int, cats: Catalogues, gpu: str) -> float:
    """The row's throughput as tokens/s of the whole job."""
    text = _cell(cells, "throughput")
    unit = _cell(cells, "throughput_unit")
    unit = "model-TFLOP/s/GPU" if unit.startswith("model-TFLOP/s/GPU") else unit
    if unit not in UNITS:
        raise PaigridError(f"{origin}: throughput_unit must be one of {', '.join(UNITS)}, not {unit!r}.")
    percent = unit == "MFU" and text.endswith("%")
    try:
        value = float(text.rstrip("%")) / (100.0 if percent else 1.0)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise PaigridError(f"{origin}: throughput must be a positive number, not {cells['throughput']!r}.")
    check_column("throughput", value, origin)
    framework = _cell(cells, "framework").casefold()
    if "torchtitan" in framework:
        flops = torchtitan_flops_per_token(model)
    else:
        flops = model_flops_per_token(model, "megatron-bridge" in framework)
    if unit == "MFU":
        peak = cats.gpus.number(gpu, MFU_PEAK_COLUMN) * 1e12
        return value * peak * n / flops
    if unit == "hw-TFLOP/s/GPU":
        return value * 1e12 * n / hardware_flops_per_token(model, recompute)
    if unit == "model-TFLOP/s/GPU":
        return value * 1e12 * n / flops
    if unit == "sequences/s":
        return value * model.seq_len
    if unit == "tokens/s/GPU":
        return value * n
    return value


def torchtitan_checkpoint_scale(model: Transformer, cell: str) -> float:
    """Bytes a layer keeps under torchtitan's selective checkpointing relative to Korthikanti's
    selective recomputation (both per token, one GPU of t = 1, bf16).  ``selective (layer)``
    (torchtitan's per-layer policy, every second layer checkpointed): half the layers keep
    everything (flash attention: no s x s), half their input alone.  Otherwise the per-op policy
    (``_save_list`` of torchtitan's ``apply_ac``: matmul and attention outputs, every second
    matmul recomputed): the layer input, the outputs of wq, wv, w1 and w2 (q, v, f and h
    features), the attention output and its log-sum-exp; norms, activations and residuals are
    recomputed."""
    from paigrid.llm.shapes import activation_terms

    terms = activation_terms(model)
    korthikanti = terms["replicated"] + terms["split"]
    if "layer" in cell.casefold():
        kept = 0.5 * (korthikanti + 4.0 * model.heads) + 0.5 * 2.0 * model.hidden
    else:
        kept = (
            2.0
            * (
                model.hidden
                + model.qk_dim
                + model.kv_heads * model.head_dim
                + model.ffn_hidden
                + model.hidden
                + model.value_dim
            )
            + 4.0 * model.heads
        )
    return kept / korthikanti


def torchtitan_flops_per_token(model: Transformer) -> float:
    """torchtitan's model FLOPs per token (``get_num_flop_per_token`` of its 2024 releases):
    6 x every parameter, embeddings included, + 12 L a (h / a) s, the full s x s [FLOP/token]."""
    from paigrid.llm.shapes import parameters

    return 6.0 * parameters(model) + 12.0 * model.layers * model.heads * (model.hidden // model.heads) * model.seq_len


def parse_row(cells: dict[str, str], origin: str, cats: Catalogues) -> LlmRow:
    """Check one row and read it (``read_row``; kept for callers of the first row kind)."""
    return read_row(cells, origin, cats)


def read_measured(cells: dict[str, str], origin: str, cats: Catalogues, eff=None) -> tuple[LlmRow | None, str]:
    """A row and the reason it is refused (empty when it is predicted): the row cannot be read
    or expressed (``read_row``'s sentence), or the model says its layout is invalid on its
    design (the reason sentence of ``llm.parallelism.reason_text``)."""
    try:
        row = read_row(cells, origin, cats)
    except PaigridError as exc:
        text = str(exc)
        return None, text[len(origin) + 2 :] if text.startswith(f"{origin}: ") else text
    if eff is None:
        from paigrid.inputs.efficiency import defaults

        eff = defaults()
    result = predict_row(row, cats, eff)
    row, result = _lightest_recompute_that_fits(row, result, cats, eff)
    row, result = _admit_published(row, result, cats, eff)
    if not result["valid"]:
        return row, result["reason"].rstrip(".")
    # the run fitted: a calibration's workspace or fragmentation never refuses it later
    return replace(row, options=replace(row.options or LlmOptions.defaults(), memory_margin=math.inf)), ""


def _admit_published(row: LlmRow, result: dict, cats: Catalogues, eff) -> tuple[LlmRow, dict]:
    """A published run fitted in its GPUs' memory, so a memory refusal of a measured row is the
    estimate's error, not the run's: the row is predicted all the same (``memory_margin``
    unbounded) and its ``defaults`` record the over-estimate."""
    from paigrid.kernels import llm_columns as K
    from paigrid.llm.tables import memory_bytes

    if result["valid"] or result["reason_code"] != K.REASON_MEMORY:
        return row, result
    admitted = replace(row, options=replace(row.options or LlmOptions.defaults(), memory_margin=math.inf))
    out = predict_row(admitted, cats, eff)
    estimate = out["memory_per_gpu"] / 2**30
    note = (
        f"memory estimate {estimate:.1f} GiB above the GPU's {memory_bytes(cats, row.design.gpu) / 2**30:.1f} GiB "
        f"(admitted: the published run fitted)"
    )
    return replace(admitted, defaults=row.defaults + (note,)), out


def _lightest_recompute_that_fits(row: LlmRow, result: dict, cats: Catalogues, eff) -> tuple[LlmRow, dict]:
    """A row whose recomputation is not stated and whose layout does not fit at its family's
    default takes the least recomputation that fits (none, selective, full): the run did fit,
    so it must have recomputed at least that much; its ``defaults`` say so."""
    from paigrid.kernels import llm_columns as K

    stated = not any(d.startswith("recompute=") for d in row.defaults)
    if result["valid"] or result["reason_code"] != K.REASON_MEMORY or stated:
        return row, result
    for recompute in RECOMPUTE[RECOMPUTE.index(row.layout.recompute) + 1 :]:
        trial = replace(
            row,
            layout=replace(row.layout, recompute=recompute),
            defaults=tuple(
                f"recompute={recompute} (the least that fits; not stated)" if d.startswith("recompute=") else d
                for d in row.defaults
            ),
        )
        trial_result = predict_row(trial, cats, eff)
        if trial_result["valid"]:
            return trial, trial_result
    return row, result


def row_options(options: LlmOptions | None = None, row: LlmRow | None = None) -> LlmOptions:
    """The options a row is predicted with: the row's own (its family's defaults and stated
    settings), else ``options`` (default: the shipped ones) with ``ROW_OPTIONS`` on top."""
    if row is not None and row.options is not None:
        return row.options if options is None else _on_top(row.options, options)
    return replace(options or LlmOptions.defaults(), **ROW_OPTIONS)


def _on_top(row_opts: LlmOptions, given: LlmOptions) -> LlmOptions:
    """The row's stack settings (attention, overlap, state bytes) over ``given``'s other values."""
    keep = (
        "attention",
        "overlap_dp",
        "weight_bytes",
        "grad_bytes",
        "optimizer_bytes",
        "stored_activation_bytes",
        "gathered_inputs",
        "reduce_scatter_buffer",
    )
    return replace(given, **{k: getattr(row_opts, k) for k in keep})


def predict_row(row: LlmRow, cats: Catalogues, eff, options: LlmOptions | None = None) -> dict:
    """The model's breakdown of a row (``llm.evaluate.predict``) at its layout, design and options."""
    from paigrid.llm.evaluate import predict
    from paigrid.llm.tables import llm_factor

    opts = row_options(options, row)
    opts = replace(
        opts,
        tp_overlap=opts.tp_overlap or row.tp_overlap,
        tp_overlap_fraction=min(1.0, opts.tp_overlap_fraction * llm_factor(eff, "tp_overlap")),
        overlap_efficiency=opts.overlap_efficiency * llm_factor(eff, "overlap"),
        workspace_GiB=opts.workspace_GiB * llm_factor(eff, "workspace"),
        fragmentation=opts.fragmentation + llm_factor(eff, "fragmentation") - 1.0,
    )
    return predict(row.model, row.layout, row.design, cats, software_efficiency(eff, row), opts)


def software_efficiency(eff, row: LlmRow):
    """``eff`` with a calibration's factor on the row's software release (``LlmRow.software``)
    applied to the rates its kernels reach: the GEMM and attention efficiencies (a release's
    kernels, fusions and CUDA graphs change how fast the same work runs on the same GPU; the
    factor is 1 unless ``accuracy.llmfit`` fitted it on rows of one model and GPU under several
    releases)."""
    from paigrid.llm.tables import llm_factor

    factor = llm_factor(eff, row.software) if row.software else 1.0
    if factor == 1.0:
        return eff
    llm = dict(getattr(eff, "llm", None) or {})
    llm["gemm"] = llm_factor(eff, "gemm") * factor
    llm["attention"] = llm_factor(eff, "attention") * factor
    return replace(eff, llm=llm)


#: a data-parallel public row (``measured_public_v2.csv``) of the LLM family: llm-foundry's MPT
#: runs, FSDP over every GPU
LLM_FAMILY_FRAMEWORKS = ("llm-foundry",)
#: the inter-server network of a public row's free-text cell: "1600 Gbps node-node interconnect
#: (RoCE)" is 16 x 100 Gb/s RDMA NICs a server of 8 GPUs (``rdma-100g`` of links.csv)
PUBLIC_NETWORKS = (("1600 gbps", "rdma-100g", 16),)


def is_llm_family(cells: dict[str, str]) -> bool:
    """True for a data-parallel public row that is an LLM-family job (an MPT run of llm-foundry)."""
    framework = _cell(cells, "framework").casefold()
    return _cell(cells, "id").startswith("MPT-") or any(word in framework for word in LLM_FAMILY_FRAMEWORKS)


def _note_flag(notes: str, phrase: str) -> bool | None:
    match = re.search(re.escape(phrase) + r"\s+(true|false)", notes, re.IGNORECASE)
    return None if match is None else match.group(1).casefold() == "true"


def llm_cells_from_public(cells: dict[str, str]) -> dict[str, str]:
    """An LLM-family row of the data-parallel public schema as the columns of an llm row
    (``llm_public_v2.csv``'s): one transformer of ``llm_models.csv`` by name, data parallel over
    every GPU (tensor, pipeline, context degree 1), FSDP's FULL_SHARD as ZeRO-3 and
    SHARD_GRAD_OP as ZeRO-2, ``batch_per_gpu`` the micro-batch, global batch = micro-batch x
    accumulation steps x GPUs, "activation checkpointing True" of the notes full recomputation
    (False: none), pure BF16 ("bf16", "MP mode PURE") at amp-bf16's peak, the network as
    ``PUBLIC_NETWORKS`` reads it (empty or "not stated": the GPU's default network)."""
    notes = _cell(cells, "notes")
    per_node = int(_cell(cells, "gpus_per_node") or 8)
    nodes = int(_cell(cells, "nodes") or 1)
    n = per_node * nodes
    micro = int(float(_cell(cells, "batch_per_gpu") or 1))
    accum = int(float(_cell(cells, "grad_accum_steps") or 1))
    checkpointing = _note_flag(notes, "activation checkpointing")
    network_text = _cell(cells, "network").casefold()
    network, nics = "", ""
    for word, link, count in PUBLIC_NETWORKS:
        if word in network_text and nodes > 1:
            network, nics = link, str(count)
    precision = _cell(cells, "precision")
    return {
        "id": _cell(cells, "id"),
        "model": _cell(cells, "model"),
        "layers": "",
        "hidden": "",
        "heads": "",
        "ffn_hidden": "",
        "vocab": "",
        "seq_len": _cell(cells, "seq_len_or_image_size"),
        "gpu": _cell(cells, "gpu").split(" (")[0].strip(),
        "gpus_per_node": str(per_node),
        "nodes": str(nodes),
        "intra_link": "",
        "network": network,
        "nics_per_node": nics,
        "precision": "amp-bf16" if precision.casefold() == "bf16" else precision,
        "tensor_parallel": "1",
        "pipeline_parallel": "1",
        "context_parallel": "1",
        "data_parallel": str(n),
        "zero_stage": "2" if "SHARD_GRAD_OP" in notes else "3",
        "micro_batch": str(micro),
        "global_batch": str(micro * accum * n),
        "recompute": "" if checkpointing is None else ("full" if checkpointing else "none"),
        "framework": _cell(cells, "framework"),
        "throughput": _cell(cells, "throughput"),
        "throughput_unit": _cell(cells, "throughput_unit"),
        "source": _cell(cells, "source"),
        "notes": notes,
    }


def public_llm_reason(cells: dict[str, str], cats: Catalogues) -> str:
    """What the data-parallel public reader says of an LLM-family row: that the LLM model judges
    it, with its prediction against the measurement (or the LLM reader's reason it cannot)."""
    row, reason = read_measured(llm_cells_from_public(cells), _cell(cells, "id"), cats)
    if row is None or reason:
        return f"LLM-family FSDP run, refused by the LLM model: {reason}"
    from paigrid.inputs.efficiency import defaults

    predicted = predict_row(row, cats, defaults())["tokens_per_s"]
    return (
        f"LLM-family FSDP run, judged by the LLM model (docs/accuracy.md, LLM section): ZeRO-{row.layout.zero} "
        f"data parallel over {row.n_gpu} GPUs, {predicted:.0f} tokens/s predicted against "
        f"{row.measured:.0f} measured ({100 * (predicted / row.measured - 1):+.1f}%)"
    )
