"""Parallel layouts: the degrees of one layout, the enumeration of the valid ones per GPU count
and the sentence of each invalid-layout reason code (``kernels.llm_columns.REASON_*``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from paigrid.errors import PaigridError
from paigrid.kernels import llm_columns as K
from paigrid.llm.models import Transformer
from paigrid.llm.shapes import RECOMPUTE

#: the layout coordinates, in the order of the HDF5 variables and the tables
DEGREES = K.LAYOUT_DEGREES


@dataclass(frozen=True)
class Layout:
    """One parallel layout: tensor ``tp``, pipeline ``pp`` (with ``vpp`` virtual stages per
    rank: 1 = 1F1B, more = interleaved), data ``dp``, context ``cp`` and expert ``ep`` degrees,
    the ``micro_batch`` [sequences], the ZeRO stage 0-3 (3 = FSDP), recomputation (none,
    selective, full) and sequence parallelism ``sp``.  GPUs = tp x pp x dp x cp."""

    tp: int = 1
    pp: int = 1
    dp: int = 1
    cp: int = 1
    ep: int = 1
    vpp: int = 1
    micro_batch: int = 1
    zero: int = 1
    recompute: str = "selective"
    sp: bool = True

    @property
    def n_gpu(self) -> int:
        """GPUs the layout occupies."""
        return self.tp * self.pp * self.dp * self.cp

    def describe(self) -> str:
        """A compact label: ``tp8 pp4 dp32 cp1 ep1 v1 mb1 zero1 selective sp``."""
        return (
            f"tp{self.tp} pp{self.pp} dp{self.dp} cp{self.cp} ep{self.ep} v{self.vpp} mb{self.micro_batch} "
            f"zero{self.zero} {self.recompute}{' sp' if self.sp and self.tp > 1 else ''}"
        )


def check_layout(layout: Layout) -> Layout:
    """The layout once its degrees are in range (one sentence otherwise)."""
    for name in ("tp", "pp", "dp", "cp", "ep", "vpp", "micro_batch"):
        value = getattr(layout, name)
        if not isinstance(value, int) or value < 1:
            raise PaigridError(f"the layout's {name} must be a whole number >= 1, not {value!r}.")
    if layout.zero not in (0, 1, 2, 3):
        raise PaigridError(f"the layout's zero stage must be 0, 1, 2 or 3, not {layout.zero!r}.")
    if layout.recompute not in RECOMPUTE:
        raise PaigridError(f"recompute must be one of {', '.join(RECOMPUTE)}, not {layout.recompute!r}.")
    return layout


def layout_degrees(lay: Layout) -> list[float]:
    """The layout's degrees in the kernel's column order (``DEGREES``): tp, pp, dp, cp, ep,
    interleave, micro-batch, ZeRO stage, the recompute code, and 1 for sequence parallelism
    (which applies only with tp > 1)."""
    return [
        lay.tp,
        lay.pp,
        lay.dp,
        lay.cp,
        lay.ep,
        lay.vpp,
        lay.micro_batch,
        lay.zero,
        RECOMPUTE.index(lay.recompute),
        1.0 if (lay.sp and lay.tp > 1) else 0.0,
    ]


def layout_array(layouts: list[Layout], shapes: list[tuple], seq_len: int) -> np.ndarray:
    """(N, N_LAYOUT_FIELDS) table of ``layouts``; ``shapes`` lists the compute table's GEMM
    shapes (``gemm_shape`` of each layout at ``seq_len`` tokens a sequence: its tensor degree,
    tokens per micro-batch and expert degree), whose position is the layout's ``LA_TP_INDEX``."""
    position = {shape: i for i, shape in enumerate(shapes)}
    table = np.zeros((len(layouts), K.N_LAYOUT_FIELDS))
    for i, lay in enumerate(layouts):
        table[i] = [*layout_degrees(lay), position[gemm_shape(lay, seq_len)]]
    return table


def gemm_shape(lay: Layout, seq_len: int) -> tuple[int, float, int]:
    """What sets the shapes of a layout's GEMMs (and so its row of the compute table): the
    tensor degree, the tokens of one micro-batch on a GPU (micro-batch x ``seq_len`` / context
    degree) and the expert degree."""
    return (lay.tp, lay.micro_batch * seq_len / lay.cp, lay.ep)


def divisors(n: int) -> list[int]:
    """Every whole divisor of ``n`` >= 1, ascending."""
    small = [k for k in range(1, int(n**0.5) + 1) if n % k == 0]
    return sorted({*small, *(n // k for k in small)})


def powers_of_two(limit: int) -> list[int]:
    """1, 2, 4, ... up to ``limit``."""
    out, k = [], 1
    while k <= limit:
        out.append(k)
        k *= 2
    return out


#: chunks a pipeline may hold beyond its layers: Megatron-Core counts the embedding and the loss
#: as a chunk each (account_for_embedding/loss_in_pipeline_split), as the kernel allows
EXTRA_CHUNKS = 2


@dataclass(frozen=True)
class Space:
    """What the enumeration tries (each a tuple of values): tensor degrees up to ``max_tp``
    (powers of two; beyond the NVLink domain the kernel costs the tensor group on the fabric),
    context degrees, virtual stages, micro-batches, ZeRO stages, recomputation, sequence
    parallelism; pipeline degrees are every divisor that fits the layers, expert degrees every
    divisor of the experts.  An empty ``pp``, ``vpp`` or ``micro_batch`` means every value that
    can apply: every pipeline degree up to the layers, every interleave factor up to (layers +
    2) / p chunks (uneven stages where the layers do not divide), every micro-batch dividing the
    data-parallel replica's batch (the kernel refuses those that do not fit in memory)."""

    max_tp: int = 8
    pp: tuple = ()  # empty: every divisor that fits the layers
    cp: tuple = (1, 2, 4, 8)
    vpp: tuple = (1, 2, 4)
    micro_batch: tuple = (1, 2, 4)
    zero: tuple = (0, 1, 3)
    recompute: tuple = RECOMPUTE
    sequence_parallel: tuple = (True,)


#: the wide search (``search.best_layout``): at least Calculon's space (tensor degrees up to 64,
#: every interleave factor, every micro-batch up to what fits, ZeRO 0-3, sequence parallelism on
#: and off) plus context and expert parallelism
WIDE = Space(max_tp=64, vpp=(), micro_batch=(), zero=(0, 1, 2, 3), sequence_parallel=(True, False))


def layout_stems(model: Transformer, n_gpu: int, space: Space = Space(), global_batch: int | None = None) -> list:
    """The (tp, pp, dp, cp, ep, micro_batch) of every layout ``enumerate_layouts`` gives, in its
    order: the layouts are these stems x the interleave factors of ``stem_interleaves`` x ZeRO
    stages x recomputation x sequence parallelism (``stem_sp``)."""
    batch = global_batch or model.global_batch
    kv = model.kv_heads
    out = []
    for tp in powers_of_two(min(space.max_tp, n_gpu)):
        if n_gpu % tp or model.heads % tp or model.ffn_hidden % tp or (model.moe and model.moe_ffn_hidden % tp):
            continue
        if (tp < kv and kv % tp) or (tp > kv and tp % kv):
            continue
        for cp in space.cp:
            if (n_gpu // tp) % cp or model.seq_len % cp:
                continue
            rest = n_gpu // (tp * cp)
            for pp in divisors(rest):
                dp = rest // pp
                if pp > model.layers or batch % dp or (space.pp and pp not in space.pp):
                    continue
                experts = [e for e in divisors(model.experts) if (dp * cp) % e == 0] if model.moe else [1]
                sizes = divisors(batch // dp) if not space.micro_batch else space.micro_batch
                for ep in experts:
                    for mb in sizes:
                        if batch % (dp * mb):
                            continue
                        out.append((tp, pp, dp, cp, ep, mb))
    return out


def stem_interleaves(model: Transformer, pp: int, microbatches: int, space: Space) -> list[int]:
    """The interleave factors tried on ``pp`` stages with ``microbatches`` per step: 1 without a
    pipeline; else those of the space (every one when empty) with p x v chunks at most the
    layers + 2 and, for v > 1, at least p micro-batches (the interleaved schedule runs them in
    groups of p per virtual stage; fewer would leave its bubble formula wrong)."""
    if pp == 1:
        return [1]
    most = (model.layers + EXTRA_CHUNKS) // pp
    values = space.vpp if space.vpp else range(1, most + 1)
    return [v for v in values if v == 1 or (v <= most and microbatches >= pp)]


def enumerate_layouts(
    model: Transformer,
    n_gpu: int,
    space: Space = Space(),
    global_batch: int | None = None,
) -> list[Layout]:
    """Every layout of ``n_gpu`` GPUs in ``space`` whose degrees suit the model's shape:
    t divides the heads (and the key/value heads, or is a multiple of them) and the FFN sizes,
    c divides the sequence, e divides the experts and d x c, the global batch is a multiple of
    d x micro-batch, p <= layers, p x v <= layers + 2 and interleaving has at least p
    micro-batches.  Hardware-dependent validity (NVLink domain, memory) is the kernel's.  The
    order is the stems' (``layout_stems``), then interleave, ZeRO stage, recomputation, sp."""
    batch = global_batch or model.global_batch
    out = []
    for tp, pp, dp, cp, ep, mb in layout_stems(model, n_gpu, space, batch):
        for vpp in stem_interleaves(model, pp, batch // (dp * mb), space):
            for zero in space.zero:
                for rc in space.recompute:
                    for sp in space.sequence_parallel if tp > 1 else (False,):
                        out.append(Layout(tp, pp, dp, cp, ep, vpp, mb, zero, rc, sp))
    return out


def count_layouts(model: Transformer, n_gpu: int, space: Space = Space(), global_batch: int | None = None) -> int:
    """``len(enumerate_layouts(...))`` without building the layouts: stems x interleave factors
    x ZeRO stages x recomputation x sequence-parallel settings."""
    batch = global_batch or model.global_batch
    rest = len(space.zero) * len(space.recompute)
    return sum(
        len(stem_interleaves(model, pp, batch // (dp * mb), space))
        * rest
        * (len(space.sequence_parallel) if tp > 1 else 1)
        for tp, pp, dp, cp, ep, mb in layout_stems(model, n_gpu, space, batch)
    )


def reason_text(
    code: int,
    layout: Layout,
    model: Transformer,
    domain: int = 0,
    memory: float = float("nan"),
    capacity: float = float("nan"),
) -> str:
    """The sentence of an invalid-layout reason code (``memory`` and ``capacity`` in bytes; the
    sentence speaks GiB, 2^30 bytes, as GPUs report memory)."""
    lay = asdict(layout)
    texts = {
        K.REASON_PRECISION: "the GPU has no peak at this precision",
        K.REASON_TP_HEADS: (
            f"tensor degree {lay['tp']} does not divide the {model.heads} attention heads into whole "
            f"heads with whole key/value groups ({model.kv_heads} key/value heads)"
        ),
        K.REASON_TP_FFN: f"tensor degree {lay['tp']} does not divide the FFN size",
        K.REASON_TP_DOMAIN: f"tensor degree {lay['tp']} exceeds the NVLink domain of {domain} GPUs",
        K.REASON_CP_SEQ: f"context degree {lay['cp']} does not divide the sequence of {model.seq_len} tokens",
        K.REASON_EP_EXPERTS: (
            f"expert degree {lay['ep']} does not divide the {model.experts} experts"
            if model.moe
            else "expert parallelism needs a mixture-of-experts model"
        ),
        K.REASON_EP_GROUP: f"expert degree {lay['ep']} does not divide data x context degree {lay['dp'] * lay['cp']}",
        K.REASON_BATCH: (
            f"the global batch is not a multiple of data degree {lay['dp']} x micro-batch {lay['micro_batch']}"
        ),
        K.REASON_PP_LAYERS: (
            f"{lay['pp']} pipeline stages x {lay['vpp']} virtual stages exceed the {model.layers} layers"
        ),
        K.REASON_INTERLEAVE: (
            "an interleaved schedule needs pipeline degree > 1 and at least as many micro-batches as stages"
        ),
        K.REASON_NO_NETWORK: "the job spans several NVLink domains but the network is none",
        K.REASON_FABRIC: (
            f"the job's {-(-layout.n_gpu // max(domain, 1))} NVLink domains exceed what the fabric's tiers connect"
        ),
        K.REASON_MEMORY: (
            f"the busiest pipeline stage needs {memory / 2**30:.1f} GiB per GPU, more than the "
            f"{capacity / 2**30:.1f} GiB it allows (its memory and the estimate's margin)"
        ),
    }
    return texts.get(code, f"invalid (reason code {code})") + "."


#: short names of the reason codes (HDF5 attribute, tables)
REASON_NAMES = (
    "valid",
    "precision",
    "tp-heads",
    "tp-ffn",
    "tp-domain",
    "cp-seq",
    "ep-experts",
    "ep-group",
    "batch",
    "pp-layers",
    "interleave",
    "no-network",
    "fabric",
    "memory",
)


# --- the layout label grammar ----------------------------------------------------------------
#: the tokens of a layout label, in order: (Layout field, text of a value); a label joins them
#: with "-" (``tp8-pp4-dp2-v2-cp1-ep1-mb1-zero1-selective-sp``); the cube's layout axis leaves
#: the data-parallel token out (dp = n_gpu / (tp x pp x cp) at each GPU count).  A new layout
#: option is one more entry here (and in ``Layout``).
LABEL_TOKENS = (
    ("tp", lambda v: f"tp{v}"),
    ("pp", lambda v: f"pp{v}"),
    ("dp", lambda v: f"dp{v}"),
    ("vpp", lambda v: f"v{v}"),
    ("cp", lambda v: f"cp{v}"),
    ("ep", lambda v: f"ep{v}"),
    ("micro_batch", lambda v: f"mb{v}"),
    ("zero", lambda v: f"zero{v}"),
    ("recompute", str),
    ("sp", lambda v: "sp" if v else "nosp"),
)


def layout_label(layout: Layout, with_dp: bool = True) -> str:
    """The layout's label in the grammar of ``LABEL_TOKENS`` (sequence parallelism shows as
    ``nosp`` where the tensor degree is 1), with or without its data-parallel degree."""
    values = asdict(layout)
    values["sp"] = bool(layout.sp and layout.tp > 1)
    return "-".join(text(values[name]) for name, text in LABEL_TOKENS if with_dp or name != "dp")


def parse_label(label: str, n_gpu: int | None = None) -> Layout:
    """The layout of a label (with its dp token, or without it and ``n_gpu`` given: dp = n_gpu /
    (tp x pp x cp)); one sentence for a label that is not in the grammar."""
    parts = label.strip().casefold().split("-")
    names = [name for name, _ in LABEL_TOKENS if name != "dp" or len(parts) == len(LABEL_TOKENS)]
    if len(parts) != len(names):
        raise PaigridError(f"{label!r} is not a layout label like tp8-pp4-v2-cp1-ep1-mb1-zero1-selective-sp.")
    values: dict = {}
    prefixes = {
        "tp": "tp",
        "pp": "pp",
        "dp": "dp",
        "vpp": "v",
        "cp": "cp",
        "ep": "ep",
        "micro_batch": "mb",
        "zero": "zero",
    }
    for name, part in zip(names, parts):
        if name == "recompute":
            values[name] = part
        elif name == "sp":
            if part not in ("sp", "nosp"):
                raise PaigridError(f"{label!r}: the last token is sp or nosp, not {part!r}.")
            values[name] = part == "sp"
        else:
            digits = part[len(prefixes[name]) :]
            if not part.startswith(prefixes[name]) or not digits.isdigit():
                raise PaigridError(f"{label!r}: expected {prefixes[name]}N for {name}, not {part!r}.")
            values[name] = int(digits)
    if "dp" not in values:
        group = values["tp"] * values["pp"] * values["cp"]
        if n_gpu is None or n_gpu % group:
            raise PaigridError(f"layout {label!r} does not divide {n_gpu} GPUs (tp x pp x cp = {group}).")
        values["dp"] = n_gpu // group
    return check_layout(Layout(**values))


def layout_axis(models: list[Transformer], n_gpus: list[int], space: Space) -> list[Layout]:
    """The cube's layout axis: every layout (with dp = 1, its label without dp) that the
    enumeration gives for some model at some GPU count, in a fixed order (by tp, pp, cp, ep,
    vpp, micro-batch, ZeRO stage, recomputation, sp)."""
    from dataclasses import replace

    seen = {replace(lay, dp=1) for m in models for n in n_gpus for lay in enumerate_layouts(m, n, space)}
    return sorted(
        seen,
        key=lambda lay: (
            lay.tp,
            lay.pp,
            lay.cp,
            lay.ep,
            lay.vpp,
            lay.micro_batch,
            lay.zero,
            RECOMPUTE.index(lay.recompute),
            lay.sp,
        ),
    )


#: code of a cube cell whose layout does not divide its GPU count (after the kernel's codes)
REASON_N_GPU = K.N_REASONS
#: the cube's reason codes by short name: the kernel's, then ``REASON_N_GPU``
CUBE_REASON_NAMES = (*REASON_NAMES, "n-gpu")


# --- the [llm] table of a sweep spec: the layout space, declared once -------------------------
@dataclass(frozen=True)
class SpaceKey:
    """One key of a spec's ``[llm]`` table: the ``Space`` field it sets, its kind (``int``: one
    whole number; ``ints``, ``words``, ``flags``: a list of them), the words or least number
    allowed, and what it means (the help and docs text)."""

    name: str
    kind: str
    doc: str
    least: int = 1
    choices: tuple = ()
    every: bool = False  # an empty list means every value that can apply


#: the largest degree or size an [llm] key takes (a GPU count's bound: no degree exceeds the GPUs)
MAX_SPACE_VALUE = 2**31 - 1
SPACE_KEYS = (
    SpaceKey(
        "max_tp",
        "int",
        "largest tensor degree tried (powers of two up to it; beyond the NVLink domain costed on the fabric)",
    ),
    SpaceKey("pp", "ints", "pipeline degrees tried (empty: every divisor that fits the layers)", every=True),
    SpaceKey("cp", "ints", "context-parallel degrees tried"),
    SpaceKey(
        "vpp",
        "ints",
        "virtual stages per pipeline rank tried (1: 1F1B; more: interleaved, uneven stages allowed; "
        "empty: every one up to (layers + 2) / p)",
        every=True,
    ),
    SpaceKey(
        "micro_batch",
        "ints",
        "micro-batch sizes tried [sequences] (empty: every divisor of the replica's batch, up to what fits)",
        every=True,
    ),
    SpaceKey("zero", "ints", "ZeRO stages tried (3 = FSDP)", least=0, choices=(0, 1, 2, 3)),
    SpaceKey("recompute", "words", "activation recomputation tried", choices=RECOMPUTE),
    SpaceKey("sequence_parallel", "flags", "sequence parallelism tried in tensor groups > 1"),
)


def space_default(key: SpaceKey):
    """The default of a ``[llm]`` key: ``Space``'s (what ``paigrid llm sweep`` enumerates)."""
    value = getattr(Space(), key.name)
    return list(value) if isinstance(value, tuple) else value


def space_from_table(table: dict, origin: str) -> Space:
    """The layout space of a spec's ``[llm]`` table (keys ``SPACE_KEYS``; a missing key keeps
    its default), one sentence for an unknown key or a bad value."""
    if not isinstance(table, dict):
        raise PaigridError(f"{origin}: [llm] must be a table.")
    known = {key.name: key for key in SPACE_KEYS}
    unknown = sorted(set(table) - set(known))
    if unknown:
        raise PaigridError(f"{origin}: unknown [llm] key(s) {', '.join(unknown)}; known: {', '.join(known)}.")
    values = {}
    for name, value in table.items():
        key = known[name]
        where = f"{origin}: llm.{name}"
        if key.kind == "int":
            if isinstance(value, bool) or not isinstance(value, int) or not key.least <= value <= MAX_SPACE_VALUE:
                raise PaigridError(
                    f"{where} must be a whole number from {key.least} to {MAX_SPACE_VALUE}, not {value!r}."
                )
            values[name] = value
            continue
        if not isinstance(value, list) or (not value and not key.every):
            raise PaigridError(f"{where} must be a non-empty list ({key.doc}).")
        for v in value:
            if key.kind == "ints" and (
                isinstance(v, bool)
                or not isinstance(v, int)
                or not key.least <= v <= MAX_SPACE_VALUE
                or (key.choices and v not in key.choices)
            ):
                allowed = (
                    ", ".join(map(str, key.choices))
                    if key.choices
                    else f"whole numbers from {key.least} to {MAX_SPACE_VALUE}"
                )
                raise PaigridError(f"{where} takes {allowed}, not {v!r}.")
            if key.kind == "words" and v not in key.choices:
                raise PaigridError(f"{where} takes {', '.join(key.choices)}, not {v!r}.")
            if key.kind == "flags" and not isinstance(v, bool):
                raise PaigridError(f"{where} takes true or false, not {v!r}.")
        if len(set(value)) != len(value):
            raise PaigridError(f"{where} lists a value twice.")
        values[name] = tuple(value)
    return Space(**values)


def space_to_table(space: Space) -> dict:
    """The ``[llm]`` table of a space (every key), as stored in a cube's spec."""
    return {key.name: (list(v) if isinstance(v := getattr(space, key.name), tuple) else v) for key in SPACE_KEYS}


def space_keys_table() -> str:
    """The [llm] keys as a Markdown table (docs/commands.md holds it; a test checks it is current)."""
    lines = ["| key | what | default |", "|---|---|---|"]
    for key in SPACE_KEYS:
        default = space_default(key)
        shown = (
            ", ".join(str(v).lower() if isinstance(v, bool) else str(v) for v in default)
            if isinstance(default, list)
            else str(default)
        )
        lines.append(f"| `{key.name}` | {key.doc} | {shown or 'every one'} |")
    return "\n".join(lines)
