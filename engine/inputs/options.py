"""The model options of both families and the calibration parameters' bounds, each declared once.

Every option is one ``Option``: its name, family (``dp``: the data-parallel model, ``llm``: the
LLM model), type, default, choices, bounds with their source, unit, documentation and the kernel
slot it reaches.  What used to be written out beside each option derives from these
declarations: the parsing and range checks of ``--option KEY=VALUE``, a spec's ``[options]`` and
``[llm.options]`` (``parse_options``: the same for both families, values as TOML scalars), the
``--option`` help of every command (``option_help``), the kernels' options vectors
(``paigrid.inputs.kernel_tables.option_vector``, ``paigrid.llm.tables.LlmOptions.vector``), the
typed fields of ``paigrid.inputs.spec.Options`` and ``paigrid.llm.tables.LlmOptions`` (built by
``fields_class``; the type checker reads the same fields from ``inputs/option_fields.pyi``), the
page ``docs/options.md`` and the bounds file ``datasets/parameter_bounds.csv`` (the page, the
bounds file and the stub are written by ``tools/options_reference.py``; ``tests/test_options.py``
checks they are current).

Why Python declarations rather than a data file: an option's kernel slot often holds a function
of its value (MiB to bytes, a word to a code, a fraction to its complement), which is code; the
declarations are checked by the type checker and by tests; and the generated files (the bounds
CSV, the page) are then data a user can read without Python.  Default values with sources stay in
the sourced data files where they are (``datasets/llm_defaults.toml`` for the LLM family,
``datasets/model_defaults.toml`` for the workspace and parameter-server host), named here.

This module imports only ``paigrid.errors`` and the kernels' column layouts (the slot names are
checked against them), so every layer above may use it.
"""

from __future__ import annotations

import functools
import math
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field, make_dataclass
from importlib import resources

from paigrid.errors import PaigridError
from paigrid.kernels.dp_columns import COLLECTIVE_NAMES, MODEL_NAMES

#: the option families: the data-parallel model (``[options]``) and the LLM model (``[llm.options]``)
FAMILIES = ("dp", "llm")
#: the kinds of option value
KINDS = ("word", "bool", "whole", "number")
#: the largest whole-number option: the kernels count GPUs, servers and steps in int32 range
MAX_WHOLE = 2**31 - 1


@dataclass(frozen=True)
class Bound:
    """The physical range of a value [``unit``] and why (``source``: a citation, or a reason
    saying it is an estimate).  ``lower_open``: the lower bound itself is excluded (a rate that
    must be positive); ``upper`` may be inf (no upper bound)."""

    lower: float
    upper: float
    unit: str
    source: str
    lower_open: bool = False

    def holds(self, value: float) -> bool:
        """Whether ``value`` lies within the bound."""
        above = value > self.lower if self.lower_open else value >= self.lower
        return above and value <= self.upper

    def text(self) -> str:
        """The range in words, e.g. ``0 to 1`` or ``above 0 samples/s``."""
        unit = f" {self.unit}" if self.unit and self.unit != "fraction" else ""
        low = f"above {number_text(self.lower)}" if self.lower_open else number_text(self.lower)
        if self.upper == math.inf:
            return f"{low}{unit}" if self.lower_open else f"{low}{unit} or more"
        return f"{low} {'up to' if self.lower_open else 'to'} {number_text(self.upper)}{unit}"


def number_text(value: float) -> str:
    """A number as a sentence writes it: whole numbers in full (2147483647), others as ``%g``."""
    if isinstance(value, int) or (math.isfinite(value) and value == int(value) and abs(value) < 1e16):
        return str(int(value))
    return f"{value:g}"


@dataclass(frozen=True)
class Option:
    """One model option.  ``kind``: ``word`` (one of ``choices``), ``bool``, ``whole`` or
    ``number``; ``default``: the value an absent option means (for the LLM family ``None`` reads
    it from ``datasets/llm_defaults.toml``); ``bound``: the range of a number; ``slot``: the
    kernel constant the option reaches (``O_*``/``J_*`` of ``kernels.dp_columns``, ``OP_*``/``M_*``
    of ``kernels.llm_columns``); ``encode``: for an options-vector slot, its value as
    ``encode(value, options, option, context)`` (``options``: the whole ``Options`` or
    ``LlmOptions``; ``context``: catalogue values, see ``option_vector``); ``aliases``: old
    spellings of a word, accepted with a deprecation sentence; ``per_job``: a workloads,
    population or measurements CSV may set it per job;
    ``example``: a valid value other than the default (the tests set it and see the slot move);
    ``needs``: the other option values under which the slot reads this option."""

    name: str
    family: str
    kind: str
    doc: str
    example: object
    slot: str
    default: object = None
    choices: tuple[str, ...] = ()
    bound: Bound | None = None
    encode: Callable[..., float] | None = None
    aliases: dict[str, str] = field(default_factory=dict)
    per_job: bool = False
    nullable: bool = False  # ``None`` is a value: unset (``sync_latency``: by compute model)
    needs: dict[str, object] = field(default_factory=dict)


def _bytes_per(unit: str, what: str) -> Bound:
    return Bound(0.0, 64.0, unit, f"bytes per {what}: 0 to 64, eight times an FP64 value (a bound, not a measurement)")


FRACTION = "a fraction: 0 to 1"
_COUNT = Bound(1, MAX_WHOLE, "", "a count: at least 1, at most the int32 range the kernels count in")


def _index(value, options, option: Option, *_) -> float:
    """A word option's slot value: the word's index in its ``choices`` (the kernels' code)."""
    return float(option.choices.index(value))


def _same(value, *_) -> float:
    """A number option's slot value: the number itself, in the unit declared."""
    return float(value)


def _flag(value, *_) -> float:
    """A true/false option's slot value: 1 or 0."""
    return 1.0 if value else 0.0


# --- the data-parallel family (``[options]``, ``paigrid.inputs.spec.Options``) -------------------
DP_OPTIONS: tuple[Option, ...] = (
    Option(
        "model",
        "dp",
        "word",
        "compute model: `pai-v1` the PAI additive model (version 1), `pai-v2` the operator-class roofline "
        "([model](model.md))",
        example="pai-v1",
        slot="O_MODEL",
        default="pai-v2",
        choices=MODEL_NAMES,
        encode=_index,
    ),
    Option(
        "collective",
        "dp",
        "word",
        "`default` = ring inside a server, hierarchical across servers (version 1); `ring` = one flat ring "
        "over all n GPUs (bottleneck link, 2(n-1) latency hops); `tree` = double binary tree (same bandwidth "
        "term, 2 ceil(log2 n) latency hops); `hierarchical` = the default across servers; `pipelined` = the "
        "hierarchical all-reduce with its intra- and inter-server phases pipelined as NCCL does: across servers "
        "max(intra volume time, inter volume time) + the same latency terms, within one server the default (a "
        "large-message approximation, [model](model.md#pipelined-hierarchical-all-reduce))",
        example="tree",
        slot="O_COLLECTIVE",
        default="default",
        choices=COLLECTIVE_NAMES,
        encode=_index,
    ),
    Option(
        "inter_volume",
        "dp",
        "word",
        "the volume an all-reduce moves through a server's NICs across servers, in the default, hierarchical "
        "and pipelined collectives: `hierarchical` 2(s-1)/s S (an ideal hierarchical all-reduce, version 1); "
        "`ring` 2(n-1)/n S (NCCL's rings cross every server) ([model](model.md#inter-server-volume))",
        example="ring",
        slot="O_INTER_VOLUME",
        default="hierarchical",
        choices=("hierarchical", "ring"),
        encode=_index,
    ),
    Option(
        "topology_aware",
        "dp",
        "bool",
        "intra-server bandwidth by topology: NVSwitch full bandwidth for any subset; hybrid cube-mesh (DGX-1) "
        "1/3 of it for 2 GPUs, 2/3 for 3-4, 1/2 for 5-7, all for 8; a PCIe ring spanning more than one of the "
        "`pcie_roots` trees 1/2 (the inter-socket link)",
        example=True,
        slot="O_TOPOLOGY",
        default=False,
        encode=_flag,
    ),
    Option(
        "grad_accum_steps",
        "dp",
        "whole",
        "k micro-batches per optimizer step: compute and input scale by k, one gradient exchange per step",
        example=4,
        slot="J_ACCUM",
        default=1,
        bound=_COUNT,
        per_job=True,
    ),
    Option(
        "overlap",
        "dp",
        "number",
        "fraction of the exchange that may hide behind the backward pass of the last micro-batch (2/3 of its "
        "compute): t_comm = raw - min(overlap x raw, backward)",
        example=0.5,
        slot="J_OVERLAP",
        default=0.0,
        bound=Bound(0.0, 1.0, "fraction", FRACTION),
        per_job=True,
    ),
    Option(
        "gpus_per_node",
        "dp",
        "whole",
        "k, GPUs per server",
        example=4,
        slot="J_GPUS_PER_NODE",
        default=8,
        bound=_COUNT,
        per_job=True,
    ),
    Option(
        "nics_per_node",
        "dp",
        "whole",
        "m, NICs per server (more than 1 for rail-optimised clusters)",
        example=4,
        slot="J_NICS_PER_NODE",
        default=1,
        bound=_COUNT,
        per_job=True,
    ),
    Option(
        "pcie_roots",
        "dp",
        "whole",
        "r, PCIe root links of a server (the 1wng exchange)",
        example=1,
        slot="J_PCIE_ROOTS",
        default=2,
        bound=_COUNT,
        per_job=True,
    ),
    Option(
        "ps_count",
        "dp",
        "whole",
        "parameter servers; 0 = one per worker server",
        example=2,
        slot="J_PS_COUNT",
        default=0,
        bound=Bound(0, MAX_WHOLE, "", "a count (0: one per worker server), at most the int32 range of the kernels"),
        per_job=True,
    ),
    Option(
        "input_rate_samples_per_s",
        "dp",
        "number",
        "samples/s one server's CPU input pipeline can decode: step_time >= min(n,k) x samples per step / rate "
        "(the bottleneck is then input_io); inf: no input-pipeline bound",
        example=1000.0,
        slot="J_INPUT_RATE",
        default=math.inf,
        bound=Bound(0.0, math.inf, "samples/s", "a rate: positive; inf means no bound", lower_open=True),
        per_job=True,
    ),
    Option(
        "sync_latency",
        "dp",
        "bool",
        "communication v2: the exchange's latency hops are paid once per gradient bucket, b = max(1, ceil(S / "
        "bucket)), instead of once per step; unset: true under `pai-v2`, false under `pai-v1` "
        "([model](model.md#communication-v2))",
        example=False,
        slot="O_SYNC_LATENCY",
        default=None,
        nullable=True,
        encode=lambda value, options, *_: 1.0 if options.sync_latency_on else 0.0,
    ),
    Option(
        "bucket_mb",
        "dp",
        "number",
        "gradient bucket size in MiB (PyTorch DDP's `bucket_cap_mb` default); read by `sync_latency` and "
        "`bucket_overlap`",
        example=50.0,
        slot="O_BUCKET_BYTES",
        default=25.0,
        bound=Bound(
            0.0,
            1e7,
            "MiB",
            "positive; at most 10 TiB, beyond the gradients of any model (a bound, not a measurement)",
            lower_open=True,
        ),
        encode=lambda value, *_: value * 2.0**20,
    ),
    Option(
        "bucket_overlap",
        "dp",
        "bool",
        "communication v2: all buckets but the last may hide behind the backward pass: t_comm = raw - "
        "min((b-1)/b x raw, backward); replaces `overlap`",
        example=True,
        slot="O_BUCKET_OVERLAP",
        default=False,
        encode=_flag,
    ),
    Option(
        "ps_local_reduce",
        "dp",
        "bool",
        "parameter server: the GPUs of a server all-reduce their gradients over the intra link first and one "
        "copy per server is pushed (PAI-style one-GPU workers when false) ([model](model.md#parameter-server))",
        example=True,
        slot="O_PS_LOCAL_REDUCE",
        default=False,
        encode=_flag,
    ),
    Option(
        "ps_nic",
        "dp",
        "word",
        "`shared`: a server's k' workers share its m NICs (version 1); `per-worker`: every pushing worker and "
        "every parameter server has a NIC share of its own, and with `ps_count` 0 there are as many parameter "
        "servers as pushing workers",
        example="per-worker",
        slot="O_PS_NIC_PER_WORKER",
        default="shared",
        choices=("shared", "per-worker"),
        encode=_index,
    ),
    Option(
        "ps_placement",
        "dp",
        "word",
        "`separate`: parameter servers on hosts of their own, worker and server traffic in parallel (max, "
        "version 1); `colocated`: on the worker servers, one NIC carries both (sum)",
        example="colocated",
        slot="O_PS_COLOCATED",
        default="separate",
        choices=("separate", "colocated"),
        encode=_index,
    ),
    Option(
        "ps_latency",
        "dp",
        "bool",
        "per-message latency: pushes and pulls to p servers from W workers, 2 max(p, W) alpha_net per step",
        example=True,
        slot="O_PS_LATENCY",
        default=False,
        encode=_flag,
    ),
    Option(
        "ps_update",
        "dp",
        "bool",
        "the update on the parameter server hosts' memory: (W S + params (8 + 2 state bytes)) / (p B_host), "
        "B_host from `model_defaults.toml` `[ps_host]` (76.8 GB/s x 0.6)",
        example=True,
        slot="O_PS_HOST_BW",
        default=False,
        encode=lambda value, options, option, context: context["ps_host_bandwidth"] if value else 0.0,
    ),
    Option(
        "ps_sparse",
        "dp",
        "bool",
        "a parameter server moves only the embedding rows a step touches (workloads' `embedding_params_M`, "
        "`embedding_params_per_sample`); all-reduce still moves dense gradients (see `sparse_allgather`)",
        example=True,
        slot="O_PS_SPARSE",
        default=False,
        encode=_flag,
    ),
    Option(
        "ps_memory",
        "dp",
        "bool",
        "memory check per architecture: a `ps-worker` GPU holds weights and gradients only (the optimizer "
        "state, and with `ps_sparse` the untouched embedding rows, stay on the parameter servers)",
        example=True,
        slot="O_PS_MEMORY",
        default=False,
        encode=_flag,
    ),
    Option(
        "overlap_efficiency",
        "dp",
        "number",
        "fraction of the last backward pass during which the exchange proceeds (it competes with the backward "
        "pass): t_comm = raw - min(share x raw, e x backward), share from `overlap` or `bucket_overlap` "
        "([model](model.md#scaling-losses-of-all-reduce); fitted by `paigrid calibrate` on a scaling file, "
        "[calibration](calibration.md#scaling-losses))",
        example=0.7,
        slot="O_OVERLAP_IDLE",
        default=1.0,
        bound=Bound(0.0, 1.0, "fraction", FRACTION),
        encode=lambda value, *_: 1.0 - value,
    ),
    Option(
        "coordination_us",
        "dp",
        "number",
        "synchronisation time per participant step of each all-reduce (Horovod's negotiation, NCCL's "
        "handshakes), added to the latency terms of `allreduce-local` and `allreduce-cluster` (per bucket with "
        "`sync_latency`)",
        example=20.0,
        slot="O_COORDINATION",
        default=0.0,
        bound=Bound(
            0.0,
            1e6,
            "us",
            "one second per all-reduce step at most, far beyond any measured (calibrate's grid reaches 1000 us); "
            "a larger one makes every step time infinite in effect (a bound, not a measurement)",
        ),
        encode=lambda value, *_: value * 1e-6,
    ),
    Option(
        "coordination_growth",
        "dp",
        "word",
        "participant steps of n GPUs for `coordination_us`: `log2` ceil(log2 n), `linear` n - 1",
        example="linear",
        slot="O_COORDINATION_GROWTH",
        default="log2",
        choices=("log2", "linear"),
        encode=_index,
    ),
    Option(
        "sparse_allgather",
        "dp",
        "bool",
        "all-reduce architectures all-gather the embedding rows a step touches (workloads' "
        "`embedding_params_M`, `embedding_params_per_sample`) and all-reduce the dense rest: bytes of P - E + "
        "n/2 x touched parameters instead of P; wins for few touched rows, loses for many GPUs or dense touches",
        example=True,
        slot="O_SPARSE_ALLGATHER",
        default=False,
        encode=_flag,
    ),
    Option(
        "fabric_tiers",
        "dp",
        "bool",
        "a fabric of `llm_fabrics.csv` in `[grid] network` is a network of the data-parallel jobs too: their "
        "exchange across servers crosses its switch tiers (bandwidth over the uplinks' oversubscription, two "
        "hops more per tier crossed) and uses its in-network reduction (SHARP: S once per NIC); off, the "
        "data-parallel jobs take the network links only ([model](model.md#fabric-tiers))",
        example=True,
        slot="L_TIER1",
        default=False,
    ),
    Option(
        "attention",
        "dp",
        "word",
        "pai-v2: the attention kernels of a workload with attention: `eager` (unfused batched GEMMs and a "
        "softmax) or `fused` (one fused, flash-style kernel: its class rates, launches and the activations it "
        "keeps); a job may name its own (`attention` of the zoo or a population)",
        example="fused",
        slot="J_ACTIVATION_V2",
        default="eager",
        choices=("eager", "fused"),
        aliases={"flash": "fused"},
    ),
    Option(
        "execution",
        "dp",
        "word",
        "pai-v2: kernel launches `eager` or `graphs` (CUDA graphs / compiled execution: the shorter launch time "
        "of `class_efficiency.csv`'s `launch_graphs`)",
        example="graphs",
        slot="J_GRAPHS",
        default="eager",
        choices=("eager", "graphs"),
    ),
    Option(
        "memory_format",
        "dp",
        "word",
        "pai-v2: the activations' memory layout, `channels_last` (NHWC) or `nchw`: under a tensor-core "
        "precision (the half precisions and TF32) an `nchw` job also moves the layout transposes cuDNN runs "
        "around each tensor-core convolution (`gemm_conv_nchw_transpose_train_MB_per_sample` of "
        "`workload_classes.csv`); a measured row's default follows its framework ([calibration](calibration.md))",
        example="nchw",
        slot="J_NCHW_BYTES",
        default="channels_last",
        choices=("channels_last", "nchw"),
        aliases={"nhwc": "channels_last", "channels-last": "channels_last"},
    ),
)


# --- the LLM family (``[llm.options]``, ``paigrid.llm.tables.LlmOptions``) -----------------------
LLM_OPTIONS: tuple[Option, ...] = (
    Option(
        "weight_bytes",
        "llm",
        "number",
        "bytes per parameter of the working weights (bf16: 2)",
        example=4.0,
        slot="OP_WEIGHT_BYTES",
        encode=_same,
        bound=_bytes_per("bytes", "parameter"),
    ),
    Option(
        "grad_bytes",
        "llm",
        "number",
        "bytes per parameter of the gradient buffer (Megatron: fp32 main gradients, 4)",
        example=2.0,
        slot="OP_GRAD_BYTES",
        encode=_same,
        bound=_bytes_per("bytes", "parameter"),
    ),
    Option(
        "optimizer_bytes",
        "llm",
        "number",
        "bytes per parameter of the optimizer state (fp32 master + Adam moments: 12)",
        example=8.0,
        slot="OP_OPT_BYTES",
        encode=_same,
        bound=_bytes_per("bytes", "parameter"),
    ),
    Option(
        "logit_bytes",
        "llm",
        "number",
        "bytes per logit kept for the loss (fp32: 4)",
        example=2.0,
        slot="OP_LOGIT_BYTES",
        encode=_same,
        bound=_bytes_per("bytes", "logit"),
    ),
    Option(
        "workspace_GiB",
        "llm",
        "number",
        "memory per GPU beyond states and activations: CUDA context, NCCL buffers, allocator [GiB, 2^30 bytes]",
        example=4.0,
        slot="OP_WORKSPACE",
        bound=Bound(
            0.0,
            1000.0,
            "GiB",
            "more than 3x the largest GPU memory of gpus.csv (GB300, 279 GB); a bound, not a measurement",
        ),
        encode=lambda value, *_: value * 2.0**30,
    ),
    Option(
        "grad_comm_bytes",
        "llm",
        "number",
        "bytes per parameter of the gradient reduction and parameter gather (bf16: 2)",
        example=4.0,
        slot="OP_GRAD_COMM_BYTES",
        encode=_same,
        bound=_bytes_per("bytes", "parameter"),
    ),
    Option(
        "activation_bytes",
        "llm",
        "number",
        "bytes per activation value sent between GPUs (bf16: 2)",
        example=4.0,
        slot="OP_ACT_BYTES",
        encode=_same,
        bound=_bytes_per("bytes", "value"),
    ),
    Option(
        "overlap_dp",
        "llm",
        "bool",
        "data-parallel communication overlaps compute (Megatron-LM `--overlap-grad-reduce` / `--overlap-param-gather`)",
        example=False,
        slot="OP_DP_OVERLAP",
        encode=_flag,
    ),
    Option(
        "in_network_reduction",
        "llm",
        "bool",
        "all-reduces use the fabric's SHARP and the NVLink domain's NVLS where `llm_fabrics.csv` says the design "
        "has them (false: rings only)",
        example=False,
        slot="OP_IN_NETWORK",
        encode=_flag,
    ),
    Option(
        "update_bytes",
        "llm",
        "number",
        "HBM bytes moved per parameter by the optimizer update",
        example=20.0,
        slot="OP_UPDATE_BYTES",
        encode=_same,
        bound=Bound(0.0, 256.0, "bytes", "bytes per parameter: 0 to 256, 8 times the 30 of an Adam update (a bound)"),
    ),
    Option(
        "attention",
        "llm",
        "word",
        "`fused`: one fused (flash) attention kernel, half the s x s scores under a causal mask and no s x s "
        "softmax kept; `eager`: unfused attention (the old spelling `flash` is accepted for `fused`)",
        example="eager",
        slot="M_ACT_CORE",
        choices=("eager", "fused"),
        aliases={"flash": "fused"},
    ),
    Option(
        "gathered_inputs",
        "llm",
        "bool",
        "with sequence parallelism the column-parallel GEMMs keep their all-gathered inputs (the attention "
        "and FFN inputs, 4h a token, and the output projection's, 2h) for the backward, as PyTorch's DTensor "
        "tensor parallelism (torchtitan) does; off: Megatron's re-gather in the backward (Korthikanti et al.)",
        example=True,
        slot="OP_GATHERED_INPUTS",
        encode=_flag,
    ),
    Option(
        "reduce_scatter_buffer",
        "llm",
        "bool",
        "below ZeRO-3, one layer's gradients at `grad_bytes` in a reduce-scatter buffer: FSDP2 reduce-scatters "
        "layer by layer at the last micro-batch where torchtitan's pipeline keeps the gradients unsharded "
        "(ZeRO-3 counts its own buffer)",
        example=True,
        slot="OP_RS_BUFFER",
        encode=_flag,
    ),
    Option(
        "tp_overlap",
        "llm",
        "bool",
        "async tensor parallelism: `tp_overlap_fraction` of the tensor-parallel collectives hides behind the GEMMs",
        example=True,
        slot="OP_TP_HIDE",
        encode=lambda value, options, *_: options.tp_overlap_fraction if value else 0.0,
    ),
    Option(
        "tp_overlap_fraction",
        "llm",
        "number",
        "fraction of the tensor-parallel collective time hidden with `tp_overlap`",
        example=0.25,
        slot="OP_TP_HIDE",
        bound=Bound(0.0, 1.0, "fraction", FRACTION),
        needs={"tp_overlap": True},
        encode=lambda value, options, *_: value if options.tp_overlap else 0.0,
    ),
    Option(
        "overlap_efficiency",
        "llm",
        "number",
        "fraction of the overlap window that hides data-parallel traffic (the rest is lost to contention for SMs "
        "and links); fitted by `paigrid calibrate`",
        example=0.5,
        slot="OP_OVERLAP_EFF",
        bound=Bound(0.0, 1.0, "fraction", FRACTION),
        encode=lambda value, *_: min(1.0, value),
    ),
    Option(
        "memory_margin",
        "llm",
        "number",
        "a layout is refused only when the memory estimate exceeds (1 + margin) x the GPU's memory",
        example=0.1,
        slot="OP_MEMORY_MARGIN",
        encode=_same,
        bound=Bound(0.0, 10.0, "fraction", "0 to 10: a margin of 10 already admits any layout (a bound)"),
    ),
    Option(
        "fragmentation",
        "llm",
        "number",
        "allocator fragmentation: fraction added to the activations; fitted by `paigrid calibrate`",
        example=0.1,
        slot="OP_FRAGMENTATION",
        encode=_same,
        bound=Bound(0.0, 10.0, "fraction", "0 to 10 times the activations (a bound, not a measurement)"),
    ),
    Option(
        "stored_activation_bytes",
        "llm",
        "number",
        "bytes per stored activation value (2: 16-bit; FP8 GEMM inputs kept in FP8: 1.5)",
        example=1.5,
        slot="OP_ACT_STORE",
        default=2.0,
        bound=Bound(0.0, 8.0, "bytes", "bytes per value: 0 to 8 (an FP64 value)"),
        encode=lambda value, *_: value / 2.0,
    ),
)

#: every option of each family, in declaration order
OPTIONS: dict[str, tuple[Option, ...]] = {"dp": DP_OPTIONS, "llm": LLM_OPTIONS}
#: the options of each family by name
BY_NAME: dict[str, dict[str, Option]] = {family: {o.name: o for o in OPTIONS[family]} for family in FAMILIES}
#: how each family is named in sentences
FAMILY_WORDS = {"dp": "option", "llm": "LLM option"}


# --- the calibration parameters' bounds (``datasets/parameter_bounds.csv`` is written from these) --
PARAMETER_BOUNDS: dict[str, Bound] = {
    "flop_efficiency": Bound(
        0.05,
        1.0,
        "fraction",
        "a fraction of a datasheet peak: positive and at most 1 (no kernel exceeds the datasheet FLOP/s)",
    ),
    "class_efficiency": Bound(0.05, 1.0, "fraction", "a fraction of a datasheet peak FLOP/s: positive and at most 1"),
    "hbm": Bound(
        0.3,
        0.95,
        "fraction",
        "STREAM-like kernels never exceed about 95% of datasheet HBM bandwidth (Jia et al., arXiv 1804.06826, "
        "2018; Deakin et al., BabelStream, IJCSE 2018); below 30% the kernels would not be bandwidth-bound ones",
    ),
    "memory_efficiency": Bound(0.05, 1.0, "fraction", "pai-v1 memory efficiency: a fraction of datasheet bandwidth"),
    "link_efficiency": Bound(0.05, 1.0, "fraction", "a fraction of nominal link bandwidth: positive and at most 1"),
    "launch_eager": Bound(
        1.0,
        30.0,
        "us",
        "eager framework launch cost per kernel: at least the 1-2 us of cudaLaunchKernel, at most the tens of us "
        "of a slow Python dispatch path (PyTorch performance tuning guide; Gray, NVIDIA Technical Blog 2019)",
    ),
    "launch_graphs": Bound(
        0.3,
        10.0,
        "us",
        "per-kernel launch cost inside a CUDA graph (Gray, 'Getting Started with CUDA Graphs', NVIDIA Technical "
        "Blog, 2019)",
    ),
    "overlap": Bound(0.05, 1.0, "fraction", "a fraction of the gradient exchange hidden behind the backward pass"),
    "llm_factor": Bound(
        0.001,
        1000.0,
        "factor",
        "a calibration's factor on an LLM default ([llm] of a calibration file): paigrid calibrate keeps its "
        "fits within 1/4 to 16 of the default; beyond 1000x either way the file is wrong, not the model (a bound)",
    ),
    "workload_efficiency": Bound(
        0.33,
        3.0,
        "factor",
        "a per-workload correction of pai-v2 (its operator classes at this multiple of their default rates): "
        "beyond a factor of 3 either way the workload's description (its layers, FLOPs and bytes) is wrong, not "
        "its efficiency; a bound, not a measurement",
    ),
}


@functools.cache
def llm_default_values() -> dict[str, object]:
    """The LLM options' defaults: ``datasets/llm_defaults.toml`` (``[memory]``, ``[communication]``,
    ``[compute]``, with their sources), else the declaration's ``default``; the old spelling of
    a word is read as the new one."""
    text = resources.files("paigrid.datasets").joinpath("llm_defaults.toml").read_text(encoding="utf-8")
    data = tomllib.loads(text)
    shipped = {**data["memory"], **data["communication"], **data["compute"]}
    out: dict[str, object] = {}
    for option in LLM_OPTIONS:  # the shipped values are checked as a user's would be
        value = shipped.get(option.name, option.default)
        value = option.aliases.get(value, value) if isinstance(value, str) else value
        out[option.name] = parse_value(option, value, "datasets/llm_defaults.toml")
    return out


def default(option: Option) -> object:
    """The value an absent ``option`` means."""
    return llm_default_values()[option.name] if option.family == "llm" else option.default


# --- parsing ------------------------------------------------------------------------------------
def read_scalar(text: str):
    """A command-line value as a TOML scalar (``true``, ``0.5``, ``inf``, ``"tree"``), else the bare
    word itself: how ``--option KEY=VALUE`` reads VALUE for both families."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def _noun(option: Option) -> str:
    if option.kind == "whole":
        return "a whole number"
    if option.bound is not None and option.bound.unit == "fraction":
        return "a fraction"
    return "a number" if option.bound is not None and option.bound.upper == math.inf else "a finite number"


class OldSpelling(FutureWarning):
    """An option value in an old spelling, accepted and read as the new one (the command line shows
    the sentence as ``paigrid: note: ...``; a Python caller sees a FutureWarning)."""


def _deprecated(option: Option, old: str, new: str, origin: str) -> None:
    import warnings

    warnings.warn(
        f"{origin}: {option.name} {old!r} is the old spelling of {new!r}, read as {new!r}; write {new!r} "
        "(a later release will refuse the old one).",
        OldSpelling,
        stacklevel=4,
    )


def parse_value(option: Option, value, origin: str):
    """``value`` (a TOML scalar, or a number from a CSV cell) as ``option``'s type, range-checked
    against its declaration; one sentence naming ``origin``, the option, the value and the
    bounds otherwise."""
    from paigrid.errors import quoted

    key = option.name
    if value is None and option.nullable:
        return None
    if option.kind == "word":
        if not isinstance(value, str):
            raise PaigridError(f"{origin}: {key} must be a word, not {quoted(value)}.")
        if value in option.aliases:
            new = option.aliases[value]
            _deprecated(option, value, new, origin)
            value = new
        if value not in option.choices:
            raise PaigridError(f"{origin}: {key} must be one of {', '.join(option.choices)}, not {quoted(value)}.")
        return value
    if option.kind == "bool":
        if not isinstance(value, bool):
            raise PaigridError(f"{origin}: {key} must be true or false, not {quoted(value)}.")
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise PaigridError(f"{origin}: {key} must be a number, not {quoted(value)}.")
    bound = option.bound
    if math.isnan(value) or (math.isinf(value) and not (bound is not None and bound.holds(value))):
        raise PaigridError(f"{origin}: {key} must be a finite number, not {value}.")
    if option.kind == "whole":
        if value != int(value):
            raise PaigridError(f"{origin}: {key} must be a whole number, not {value!r}.")
        value = int(value)
    else:
        value = float(value)
    if bound is not None and not bound.holds(value):
        unit = f" {bound.unit}" if bound.unit and bound.unit != "fraction" else ""
        if value < bound.lower or (bound.lower_open and value == bound.lower):
            side = f"above {number_text(bound.lower)}" if bound.lower_open else f"at least {number_text(bound.lower)}"
        else:
            side = f"at most {number_text(bound.upper)}"
        raise PaigridError(
            f"{origin}: {key} must be {_noun(option)} {side}{unit}, not {number_text(value)} "
            f"(its bounds: {bound.text()}; {bound.source})."
        )
    return value


def parse_options(family: str, values: dict, origin: str) -> dict:
    """Option values of ``family`` (a spec's table, ``--option`` items read by ``read_scalar``, a
    CSV row's numbers) converted and range-checked by their declarations; one sentence for an
    unknown name or a bad value."""
    known = BY_NAME[family]
    unknown = [k for k in values if k not in known]
    if unknown:
        raise PaigridError(
            f"{origin}: unknown {FAMILY_WORDS[family]}(s) {', '.join(sorted(unknown))}; known: {', '.join(known)}."
        )
    return {key: parse_value(known[key], value, origin) for key, value in values.items()}


# --- what derives from the declarations ----------------------------------------------------------
def option_vector(family: str, options, layout, context: dict | None = None) -> list[tuple[int, float]]:
    """(slot index, value) of every options-vector slot of ``family`` from ``options`` (an
    ``Options`` or ``LlmOptions``); ``layout``: the kernel layout module whose constants name the
    slots; ``context``: catalogue values an encoding reads (``ps_host_bandwidth`` [bytes/s] for
    ``ps_update``).  Options that reach another table (the job table, the model vector) are not
    in it."""
    out = []
    for option in OPTIONS[family]:
        if option.encode is None:
            continue
        value = getattr(options, option.name)
        out.append((getattr(layout, option.slot), float(option.encode(value, options, option, context or {}))))
    return out


# --- the option classes' fields (``spec.Options``, ``llm.tables.LlmOptions``) -------------------
#: the Python type of each kind of option
PYTHON_TYPES: dict[str, type] = {"word": str, "bool": bool, "whole": int, "number": float}
#: the name of the class that holds each family's option values (``fields_class``), as
#: ``inputs/option_fields.pyi`` shows it to the type checker
FIELD_CLASSES = {"dp": "DpOptionFields", "llm": "LlmOptionFields"}


def has_field_default(option: Option) -> bool:
    """Whether ``option``'s field has a default: its declared one (``None`` too, for an option
    where unset is a value); an LLM option whose default is in ``datasets/llm_defaults.toml``
    has none (``LlmOptions.defaults()`` reads the file)."""
    return option.default is not None or option.nullable


def field_type_text(option: Option) -> str:
    """The annotation of ``option``'s field, as the stub writes it (``float``, ``bool | None``)."""
    name = PYTHON_TYPES[option.kind].__name__
    return f"{name} | None" if option.nullable else name


@functools.cache
def fields_class(family: str) -> type:
    """A frozen, keyword-only dataclass with one field per declared option of ``family``, in
    declaration order: its type from the option's kind, its default the declared one
    (``has_field_default``).  ``spec.Options`` and ``llm.tables.LlmOptions`` are its subclasses;
    the type checker reads the same fields from ``inputs/option_fields.pyi`` (``fields_stub``)."""
    specs: list = []
    for option in OPTIONS[family]:
        kind = PYTHON_TYPES[option.kind]
        annotation = kind | None if option.nullable else kind
        specs.append(
            (option.name, annotation, field(default=option.default))
            if has_field_default(option)
            else (option.name, annotation)
        )
    cls = make_dataclass(FIELD_CLASSES[family], specs, frozen=True, kw_only=True)
    cls.__module__ = __name__
    cls.__doc__ = f"One field per declared {FAMILY_WORDS[family]} (``options.fields_class``)."
    return cls


STUB_HEADER = '''"""The fields of the option classes (``paigrid.inputs.spec.Options``,
``paigrid.llm.tables.LlmOptions``) as the type checker sees them.

Written by tools/options_reference.py from the declarations of ``paigrid.inputs.options``; at run
time ``options.fields_class`` builds these classes from the same declarations.  Do not edit:
tests/test_options.py checks that this file is what the declarations say.
"""

from dataclasses import dataclass
'''


def fields_stub() -> str:
    """``engine/inputs/option_fields.pyi``: the classes of ``fields_class``, for the type checker."""
    parts = [STUB_HEADER]
    for family, name in FIELD_CLASSES.items():
        lines = ["", "@dataclass(frozen=True, kw_only=True)", f"class {name}:"]
        for option in OPTIONS[family]:
            default = " = ..." if has_field_default(option) else ""
            lines.append(f"    {option.name}: {field_type_text(option)}{default}")
        parts.append("\n".join(lines) + "\n")
    return "".join(parts)


def option_help(family: str) -> str:
    """The ``--option`` help of ``family``'s commands: every declared option, by name."""
    names = ", ".join(o.name for o in OPTIONS[family])
    if family == "dp":
        return f"Model option KEY=VALUE (repeatable; docs/options.md): {names}."
    return f"LLM model option KEY=VALUE (repeatable; docs/options.md, defaults in datasets/llm_defaults.toml): {names}."


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _value_text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f"`{value}`"
    if isinstance(value, float):
        return "inf" if value == math.inf else f"{value:g}"
    return str(value)


def options_table(family: str) -> str:
    """The options of ``family`` as a Markdown table (docs/options.md)."""
    lines = ["| option | type | default | bounds | effect |", "|---|---|---|---|---|"]
    for option in OPTIONS[family]:
        value = default(option)
        shown = "unset" if value is None else _value_text(value)
        if option.kind == "word":
            kind = " \\| ".join(f"`{c}`" for c in option.choices)
        else:
            kind = {"bool": "true/false", "whole": "whole number", "number": "number"}[option.kind]
        bounds = f"{option.bound.text()} ({option.bound.source})" if option.bound else ""
        lines.append(f"| `{option.name}` | {kind} | {shown} | {_cell(bounds)} | {_cell(option.doc)} |")
    return "\n".join(lines)


def column_bounds_table() -> str:
    """The physical bounds of catalogue and measurement columns (``COLUMN_BOUNDS``) as a Markdown
    table (docs/options.md)."""
    lines = ["| column | bounds | why |", "|---|---|---|"]
    for column, bound in COLUMN_BOUNDS.items():
        name = f"`*{PEAK_SUFFIX}`" if column == PEAK_SUFFIX.lstrip("_") else f"`{column}`"
        lines.append(f"| {name} | {bound.text()} | {_cell(bound.source)} |")
    return "\n".join(lines)


def bounds_csv() -> str:
    """``datasets/parameter_bounds.csv`` as written from ``PARAMETER_BOUNDS``."""
    import csv
    import io

    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["parameter", "lower", "upper", "unit", "source"])
    for name, bound in PARAMETER_BOUNDS.items():
        writer.writerow([name, f"{bound.lower!r}", f"{bound.upper!r}", bound.unit, bound.source])
    return buffer.getvalue()


# --- the physical bounds of the numbers of catalogue and measurement columns ---------------------
# A column's number reaches a model (a peak, a bandwidth, a size, a count); a number outside these
# bounds is a mistake in the file (a unit slip, a typo, 1e308), not a faster GPU or a larger model,
# and is refused in one sentence naming the file, line, column, value and bounds.  Each upper
# bound is generous: where it is "10x the largest of" a built-in catalogue, it is an estimate of
# what no hardware or model of 2026 comes near, not a measurement.
def _ten_x(what: str) -> str:
    return f"an estimate: 10x {what}, beyond any hardware or model of 2026"


_GPUS_PER = "a count of GPUs: at least 1, at most the int32 range the kernels count in"
COLUMN_BOUNDS: dict[str, Bound] = {
    # gpus.csv
    "TFLOP_per_s": Bound(
        0.0, 150000.0, "TFLOP/s", _ten_x("the fastest datasheet peak of gpus.csv (GB300, FP4 dense, 15,000 TFLOP/s)")
    ),
    "hbm_GB_per_s": Bound(
        0.0, 80000.0, "GB/s", _ten_x("the fastest HBM of gpus.csv (GB300, 8,000 GB/s)"), lower_open=True
    ),
    "memory_GB": Bound(
        0.0, 2800.0, "GB", _ten_x("the largest GPU memory of gpus.csv (GB300, 279 GB)"), lower_open=True
    ),
    # memory_GiB has no bound of its own: it must lie within 15% of memory_GB (catalog._check_gpu)
    "nvlink_GB_per_s": Bound(0.0, 9000.0, "GB/s", _ten_x("NVLink 5 (900 GB/s per GPU, the fastest of gpus.csv)")),
    "tdp_W": Bound(0.0, 14000.0, "W", _ten_x("the largest board power of gpus.csv (GB300, 1,400 W)"), lower_open=True),
    "price_USD_per_gpu_hour": Bound(
        0.0,
        200.0,
        "USD/GPU-hour",
        _ten_x("the dearest rental of gpus.csv (GB300, 17.09 USD/GPU-hour)"),
        lower_open=True,
    ),
    "gpus_per_server": Bound(1.0, 1024.0, "GPUs", "a server of 1 to 1,024 GPUs (a bound: the largest sold hold 8-16)"),
    "nvlink_domain_GPUs": Bound(
        1.0, 100000.0, "GPUs", _ten_x("the largest NVLink domain announced by 2026 (NVL576, about 10,000 with margin)")
    ),
    # links.csv and llm_fabrics.csv
    "nominal_GB_per_s": Bound(0.0, 9000.0, "GB/s", _ten_x("the fastest link of links.csv (NVLink 5, 900 GB/s)")),
    "nic_GB_per_s": Bound(0.0, 1000.0, "GB/s", _ten_x("an 800 Gb/s NIC (100 GB/s)"), lower_open=True),
    "latency_us": Bound(
        0.0, 10000.0, "us", "10 ms per message, over 300x the slowest link of links.csv (30 us); a bound"
    ),
    "hop_latency_us": Bound(0.0, 10000.0, "us", "10 ms per switch hop; a bound"),
    # workloads.csv
    "params_M": Bound(
        0.0,
        1e7,
        "M",
        _ten_x("the largest model of llm_models.csv (Kimi K2, 1.04 trillion parameters)"),
        lower_open=True,
    ),
    "embedding_params_M": Bound(0.0, 1e7, "M", "at most the bound of params_M (embedding tables are parameters)"),
    "fwd_GFLOP_per_sample": Bound(
        0.0,
        1e9,
        "GFLOP",
        "an estimate: 2 FLOPs per parameter and token for a model of 1e13 parameters (10x the largest of 2026) at "
        "50,000 tokens a sample",
        lower_open=True,
    ),
    "membound_MB_per_sample": Bound(0.0, 1e8, "MB", "100 TB a sample, over 700x gpt2-xl's 135,572 MB; a bound"),
    "activation_MB_per_sample": Bound(0.0, 1e8, "MB", "100 TB a sample, over 5,000x gpt2-xl's 16,942 MB; a bound"),
    "input_MB_per_sample": Bound(
        0.0, 1e5, "MB", "100 GB of input a sample, 40,000x the largest of workloads.csv (mask-rcnn, 2.6 MB); a bound"
    ),
    "batch": Bound(1.0, 1e7, "samples", "ten million samples a GPU, 10,000x the largest of workloads.csv; a bound"),
    "default_batch": Bound(
        1.0, 1e7, "samples", "ten million samples a GPU, 10,000x the largest of workloads.csv; a bound"
    ),
    "tokens_per_sample": Bound(0.0, 1e7, "tokens", _ten_x("the one-million-token contexts of 2026"), lower_open=True),
    "embedding_params_per_sample": Bound(0.0, 1e13, "parameters", "at most 1e13 parameters (the bound of params_M)"),
    # llm_models.csv and the shape columns of LLM measurement rows
    "layers": Bound(1, 10000, "layers", "over 75x the deepest model of llm_models.csv (128 layers); a bound"),
    "hidden": Bound(1, 1000000, "features", "about 40x the widest model of llm_models.csv (25,600); a bound"),
    "heads": Bound(1, 100000, "heads", "over 600x the most heads of llm_models.csv (160); a bound"),
    "kv_heads": Bound(1, 100000, "heads", "as heads"),
    "ffn_hidden": Bound(1, 10000000, "features", "about 100x the widest FFN of llm_models.csv (102,400); a bound"),
    "moe_ffn_hidden": Bound(0, 10000000, "features", "as ffn_hidden"),
    "vocab": Bound(1, 100000000, "tokens", "about 400x the largest vocabulary of llm_models.csv (256,000); a bound"),
    "seq_len": Bound(1, 100000000, "tokens", "100x the one-million-token contexts of 2026; a bound"),
    "experts": Bound(0, 1000000, "experts", "over 2,500x the most experts of llm_models.csv (384); a bound"),
    "experts_per_token": Bound(0, 1000000, "experts", "at most the bound of experts"),
    "shared_experts": Bound(0, 1000000, "experts", "at most the bound of experts"),
    "dense_layers": Bound(0, 10000, "layers", "at most the bound of layers"),
    "global_batch_sequences": Bound(
        1, 100000000, "sequences", "over 6,000x the largest batch of llm_models.csv (15,360); a bound"
    ),
    "capacity_factor": Bound(1.0, 1000.0, "factor", "buffer slots per routed token: 1 (dropless) to 1000; a bound"),
    "head_size": Bound(0, 100000, "features", "about 400x the largest of llm_models.csv (256); a bound"),
    "q_lora_rank": Bound(0, 1000000, "features", "at most the bound of hidden"),
    "kv_lora_rank": Bound(0, 1000000, "features", "at most the bound of hidden"),
    "rope_head_dim": Bound(0, 100000, "features", "at most the bound of head_size"),
    "v_head_dim": Bound(0, 100000, "features", "at most the bound of head_size"),
    # the layouts of LLM measurement rows (llm_public*.csv)
    "tensor_parallel": Bound(1, MAX_WHOLE, "GPUs", _GPUS_PER),
    "pipeline_parallel": Bound(1, MAX_WHOLE, "GPUs", _GPUS_PER),
    "context_parallel": Bound(1, MAX_WHOLE, "GPUs", _GPUS_PER),
    "data_parallel": Bound(1, MAX_WHOLE, "GPUs", _GPUS_PER),
    "expert_parallel": Bound(1, MAX_WHOLE, "GPUs", _GPUS_PER),
    "nvlink_domain": Bound(1, MAX_WHOLE, "GPUs", _GPUS_PER),
    "virtual_stages": Bound(1, 10000, "stages", "at most the bound of layers"),
    "micro_batch": Bound(1, 100000000, "sequences", "at most the bound of global_batch_sequences"),
    "zero_stage": Bound(0, 3, "stage", "ZeRO stages 0 to 3 (Rajbhandari et al., SC 2020)"),
    "peak_memory_GB": Bound(
        0.0, 2800.0, "GB", _ten_x("the largest GPU memory of gpus.csv (GB300, 279 GB)"), lower_open=True
    ),
    # cluster designs ([grid] nics_per_gpu, --nics-per-gpu)
    "nics_per_gpu": Bound(
        0.0, 64.0, "NICs", "at most 64 NICs per GPU, 64x the one NIC per GPU of a rail-optimised server; a bound"
    ),
    # measurement rows (measurements_public.csv, scaling and collective files)
    "nics_per_node": Bound(0, MAX_WHOLE, "NICs", "a count of NICs, at most the int32 range the kernels count in"),
    "gpus_per_node": Bound(1, MAX_WHOLE, "GPUs", _GPUS_PER),
    "nodes": Bound(1, 10000000, "servers", "ten million servers, 100x the largest clusters of 2026; a bound"),
    "batch_per_gpu": Bound(
        0.0, 1e7, "samples", "ten million samples a GPU (the bound of default_batch)", lower_open=True
    ),
    "throughput": Bound(0.0, 1e15, "per s", "1e15 samples or tokens per second; a bound", lower_open=True),
    "scaling_efficiency": Bound(
        0.0, 2.0, "fraction", "0 to 2: superlinear scaling beyond 2x is a mistake; a bound", lower_open=True
    ),
    "message_size_bytes": Bound(0.0, 1e15, "bytes", "a petabyte per collective; a bound", lower_open=True),
    "bus_bandwidth_GB_per_s": Bound(
        0.0, 9000.0, "GB/s", _ten_x("the fastest link of links.csv (NVLink 5, 900 GB/s)"), lower_open=True
    ),
}
#: the gpus.csv peak columns (``fp32_TFLOP_per_s`` ...) share one bound
PEAK_SUFFIX = "_TFLOP_per_s"


def column_bound(column: str) -> Bound | None:
    """The declared physical bound of a numeric column (``COLUMN_BOUNDS``; every peak column
    ``*_TFLOP_per_s`` shares one), None for a column without one."""
    if column.endswith(PEAK_SUFFIX):
        return COLUMN_BOUNDS["TFLOP_per_s"]
    return COLUMN_BOUNDS.get(column)


def check_column(column: str, value: float, origin: str) -> float:
    """``value`` of ``column`` when it lies within the column's declared bound; one sentence naming
    ``origin`` (the file and line), the column, the value and the bounds otherwise."""
    bound = column_bound(column)
    if bound is not None and math.isfinite(value) and not bound.holds(value):
        raise PaigridError(
            f"{origin}: column {column} holds {number_text(value)}, outside its bounds {bound.text()} ({bound.source})."
        )
    return value


def check_number(name: str, value: float, origin: str) -> float:
    """``value`` of the quantity ``name`` (a design dimension such as ``nics_per_gpu``) when it
    lies within its declared bound (``COLUMN_BOUNDS``); one sentence naming ``origin``, the
    quantity, the value and the bounds otherwise."""
    bound = column_bound(name)
    if bound is not None and not bound.holds(value):
        raise PaigridError(
            f"{origin}: {name} {number_text(value)} is outside its bounds {bound.text()} ({bound.source})."
        )
    return value
