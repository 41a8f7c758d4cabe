"""Measured training throughputs: read, check and turn each row into a paigrid job and configuration.

A measurements CSV has the schema of ``datasets/measurements_public.csv`` (one row per reported
run).  Required columns: ``id``, ``model``, ``gpu``, ``gpus_per_node``, ``nodes``, ``arch``,
``intra_link``, ``network``, ``precision``, ``batch_per_gpu``, ``throughput``,
``throughput_unit``.  Optional: ``framework``, ``nics_per_node``, ``grad_accum_steps`` (default
1), ``seq_len_or_image_size``, ``data_pipeline``, ``source``, any per-job model option
column (``overlap``, ``pcie_roots``, ``ps_count``, ``input_rate_samples_per_s``), and the
pai-v2 columns ``optimizer`` (an optimizers.csv name or alias, instead of the workload's),
``attention`` (``eager``; ``sdpa``, ``flash`` or ``fused`` for a fused kernel; ``none``) and
``execution`` (``eager`` or ``graphs``).

Each row becomes

* a ``jobs.Job``: the catalogue workload at the row's ``batch_per_gpu`` with the row's
  ``grad_accum_steps``, ``gpus_per_node`` and ``nics_per_node`` as per-job options;
* a configuration for ``predict.predict_configs`` with ``n_gpu = gpus_per_node x nodes``.
  ``intra_link = none`` is accepted only for a one-GPU run and is mapped to the host PCIe link
  of the GPU's generation (``pcie3``, ``pcie4``, ...): a 1w1g run sends nothing between GPUs,
  so the link is unused, but the model needs a link that fits the GPU.  ``network = none``
  means one server.  ``nics_per_node = 0`` (single server) leaves the option at its default:
  it is unused there.

Throughput is of the whole job (all GPUs), in samples per second: ``images/s``,
``sequences/s``, ``samples/s`` and the other sample units are all samples/s; ``tokens/s`` is
divided by the workload's ``tokens_per_sample``.

Model names are matched to the workload catalogue through ``datasets/measurement_aliases.csv``
(``measured_model``, ``seq_len_or_image_size``, ``workload``): a row with a size selects the
catalogue variant for that sequence length or image size, an empty size matches any.  Names the
alias table does not know fall back to the catalogue's own names and aliases.
"""

from __future__ import annotations

import fnmatch
import math
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from paigrid.errors import PaigridError
from paigrid.files import read_text
from paigrid.inputs.catalog import Catalogues, csv_table, to_float
from paigrid.inputs.jobs import Job, resolve_link
from paigrid.inputs.options import check_column
from paigrid.inputs.spec import JOB_OPTIONS, Options, coerce_options
from paigrid.kernels.dp_columns import ARCH_NAMES
from paigrid.llm.rows import REQUIRED as LLM_REQUIRED

REQUIRED = (
    "id",
    "model",
    "gpu",
    "gpus_per_node",
    "nodes",
    "arch",
    "intra_link",
    "network",
    "precision",
    "batch_per_gpu",
    "throughput",
    "throughput_unit",
)
#: throughput units read as samples/s of the whole job
SAMPLE_UNITS = (
    "samples/s",
    "images/s",
    "img/s",
    "sequences/s",
    "seq/s",
    "sentences/s",
    "utterances/s",
    "frames/s",
    "queries/s",
    "graphs/s",
)
TOKEN_UNITS = ("tokens/s",)
#: row groups of the validation summary
GROUPS = ("single_gpu", "multi_gpu_one_server", "multi_server")


@dataclass
class Measurement:
    """One measured run: what ran, on what, and the measured throughput [samples/s, whole job]."""

    id: str
    model: str  # name as measured
    workload: str  # catalogue workload
    framework: str
    gpu: str  # canonical catalogue names from here on
    precision: str
    arch: str
    intra: str
    network: str
    gpus_per_node: int
    nodes: int
    batch: float  # samples per GPU per micro-batch
    grad_accum_steps: int
    size: str  # sequence length or image size, as written
    measured: float  # samples/s of the whole job
    data_pipeline: str = ""
    source: str = ""
    job_options: dict[str, float] = field(default_factory=dict)  # per-job options the row sets
    cells: dict[str, str] = field(default_factory=dict)  # the raw CSV row
    variant: dict[str, str] = field(default_factory=dict)  # optimizer, attention, execution the row sets
    kind: str = "throughput"  # what was measured: a ``accuracy.rowkinds`` name
    generation: str = ""  # the GPU's architecture generation (GPU catalogue), for selections
    refused: str = ""  # why the model cannot predict the row (llm rows; empty: it can)
    note: str = ""  # what the row took by default (llm rows)
    run: str = ""  # the published run it measures (twin llm rows share it)
    llm_row: object = None  # the ``llm.rows.LlmRow`` read from the cells (llm rows)

    @property
    def n_gpu(self) -> int:
        """GPUs in the job (gpus_per_node x nodes)."""
        return self.gpus_per_node * self.nodes

    @property
    def source_id(self) -> str:
        """The source of the row: its id's prefix before the first ``-`` (LV0, LTF, DLE, ...)."""
        return self.id.split("-", 1)[0]

    @property
    def group(self) -> str:
        """``single_gpu``, ``multi_gpu_one_server`` or ``multi_server``."""
        if self.n_gpu == 1:
            return "single_gpu"
        return "multi_gpu_one_server" if self.nodes == 1 else "multi_server"

    def job(self, options: Options) -> Job:
        """The paigrid job of this row: per-job options from ``options``, overridden by the row's."""
        merged = {key: getattr(options, key) for key in JOB_OPTIONS}
        merged.update(self.job_options)
        return Job(self.id, self.workload, float(self.batch), merged, variant=dict(self.variant))

    def config(self) -> dict:
        """The configuration of this row for ``predict.predict_configs``."""
        return {
            "arch": self.arch,
            "gpu": self.gpu,
            "n_gpu": self.n_gpu,
            "intra": self.intra,
            "network": self.network,
            "precision": self.precision,
        }


# --- model names --------------------------------------------------------------------------------
def load_aliases(path: str | Path | None = None) -> list[dict[str, str]]:
    """Rows of the alias table (built-in ``measurement_aliases.csv`` unless ``path``)."""
    if path is None:
        text = resources.files("paigrid.datasets").joinpath("measurement_aliases.csv").read_text(encoding="utf-8")
        origin = "the built-in measurement_aliases.csv"
    else:
        text, origin = read_text(path, "the alias table file"), str(path)
    _, rows = csv_table(text, origin, "an alias table", ("measured_model", "seq_len_or_image_size", "workload"))
    return [row for _, row in rows]


def _square(text: str) -> str:
    """An image size "224x224" as "224" (a square's side); other text unchanged."""
    side, sep, other = text.strip().casefold().partition("x")
    return side if sep and side == other else text.strip().casefold()


def _same_size(a: str, b: str) -> bool:
    a, b = _square(a), _square(b)
    try:
        return float(a) == float(b)
    except ValueError:
        return a == b


def resolve_model(name: str, size: str, aliases: list[dict[str, str]], cats: Catalogues, origin: str) -> str:
    """Catalogue workload of a measured model name at a sequence length or image size.

    The alias table decides first (a row whose size matches, or whose size is empty); a name it
    lists only at other sizes is an error naming those sizes; other names go to the workload
    catalogue's names and aliases.  An unknown name is an error listing the known ones.
    """
    folded = name.strip().casefold()
    entries = [a for a in aliases if a["measured_model"].casefold() == folded]
    for entry in entries:
        if entry["seq_len_or_image_size"] and size.strip() and _same_size(entry["seq_len_or_image_size"], size):
            return cats.workloads.resolve(entry["workload"])
    for entry in entries:
        if not entry["seq_len_or_image_size"]:
            return cats.workloads.resolve(entry["workload"])
    if entries:
        sizes = ", ".join(e["seq_len_or_image_size"] for e in entries)
        raise PaigridError(
            f"{origin}: model {name!r} at seq_len_or_image_size {size or '(empty)'} has no catalogue "
            f"variant; the alias table knows it at {sizes}."
        )
    try:
        return cats.workloads.resolve(name)
    except PaigridError:
        known = sorted({a["measured_model"] for a in aliases} | set(cats.workloads.names), key=str.casefold)
        raise PaigridError(f"{origin}: unknown model {name!r}; known: {', '.join(known)}.") from None


# --- reading ------------------------------------------------------------------------------------
#: the largest whole number a measurement cell gives (a GPU count, a batch): beyond it the
#: model's float arithmetic would overflow, and no real run comes near it
MAX_WHOLE_CELL = 2**31 - 1


def _whole(cell: str, origin: str, column: str, minimum: int) -> int:
    value = to_float(cell, origin, column)
    if not (math.isfinite(value) and value == int(value) and value >= minimum):
        raise PaigridError(f"{origin}: {column} must be a whole number >= {minimum}, not {cell!r}.")
    value = check_column(column, value, origin)  # a declared bound first: its sentence says why
    if value > MAX_WHOLE_CELL:
        raise PaigridError(
            f"{origin}: {column} must be a whole number from {minimum} to {MAX_WHOLE_CELL}, not {cell!r}."
        )
    return int(value)


def _positive(cell: str, origin: str, column: str) -> float:
    value = to_float(cell, origin, column)
    if not (math.isfinite(value) and value > 0):
        raise PaigridError(f"{origin}: {column} must be a positive number, not {cell!r}.")
    return check_column(column, value, origin)


def _samples_per_s(cells: dict[str, str], workload: str, cats: Catalogues, origin: str) -> float:
    value = _positive(cells["throughput"], origin, "throughput")
    unit = cells["throughput_unit"].strip().casefold()
    if unit in SAMPLE_UNITS:
        return value
    if unit in TOKEN_UNITS:
        tokens = cats.workloads.number(workload, "tokens_per_sample")
        return value / (tokens if tokens > 0 else 1.0)
    raise PaigridError(
        f"{origin}: unknown throughput_unit {cells['throughput_unit']!r}; known: "
        f"{', '.join(SAMPLE_UNITS + TOKEN_UNITS)}."
    )


def _row_options(cells: dict[str, str], nodes: int, origin: str) -> dict[str, Any]:
    """Per-job options the row sets: its shape, accumulation and any option column it carries
    (each coerced to its option's type)."""
    values: dict[str, float] = {
        "gpus_per_node": _whole(cells["gpus_per_node"], origin, "gpus_per_node", 1),
        "grad_accum_steps": _whole(cells.get("grad_accum_steps") or "1", origin, "grad_accum_steps", 1),
    }
    nics = (cells.get("nics_per_node") or "").strip()
    if nics:
        count = _whole(nics, origin, "nics_per_node", 0)
        if count == 0 and nodes > 1:
            raise PaigridError(f"{origin}: a run on {nodes} servers needs nics_per_node >= 1, not 0.")
        if count > 0:
            values["nics_per_node"] = count
    for key in JOB_OPTIONS:
        if key not in values and key != "nics_per_node" and (cells.get(key) or "").strip():
            values[key] = to_float(cells[key], origin, key)
    return coerce_options(values, origin)


def _intra(cells: dict[str, str], gpu: str, n_gpu: int, cats: Catalogues, origin: str) -> str:
    name = cells["intra_link"].strip()
    if name.casefold() != "none":
        return resolve_link(cats, name, "intra")
    if n_gpu != 1:
        raise PaigridError(f"{origin}: intra_link none is only for a one-GPU run; this one has {n_gpu} GPUs.")
    return resolve_link(cats, f"pcie{int(cats.gpus.number(gpu, 'pcie_gen'))}", "intra")


def _measurement(cells: dict[str, str], aliases, cats: Catalogues, origin: str) -> Measurement:
    ident = cells["id"].strip()
    if not ident:
        raise PaigridError(f"{origin}: id is empty.")
    size = (cells.get("seq_len_or_image_size") or "").strip()
    workload = resolve_model(cells["model"], size, aliases, cats, origin)
    arch = cells["arch"].strip()
    if arch not in ARCH_NAMES:
        raise PaigridError(f"{origin}: unknown arch {arch!r}; known: {', '.join(ARCH_NAMES)}.")
    gpu = cats.gpus.resolve(cells["gpu"])
    nodes = _whole(cells["nodes"], origin, "nodes", 1)
    options = _row_options(cells, nodes, origin)
    n_gpu = options["gpus_per_node"] * nodes
    network = resolve_link(cats, cells["network"].strip(), "network")
    if nodes > 1 and cats.links.row(network)["kind"] == "none":
        raise PaigridError(f"{origin}: a run on {nodes} servers needs a network, not 'none'.")
    row = Measurement(
        id=ident,
        model=cells["model"].strip(),
        workload=workload,
        framework=(cells.get("framework") or "").strip(),
        gpu=gpu,
        precision=cats.precisions.resolve(cells["precision"]),
        arch=arch,
        intra=_intra(cells, gpu, n_gpu, cats, origin),
        network=network,
        gpus_per_node=options["gpus_per_node"],
        nodes=nodes,
        batch=_positive(cells["batch_per_gpu"], origin, "batch_per_gpu"),
        grad_accum_steps=options["grad_accum_steps"],
        size=size,
        measured=_samples_per_s(cells, workload, cats, origin),
        data_pipeline=(cells.get("data_pipeline") or "").strip(),
        source=(cells.get("source") or "").strip(),
        job_options=options,
        cells=cells,
        variant=_variant(cells, cats, origin),
        kind=_kind(cells, origin),
        generation=(cats.gpus.row(gpu).get("generation") or "").strip(),
    )
    return row


#: words of the optional ``attention`` column and the pai-v2 attention variant each means
#: (``none``: the model has no attention, so the variant does not matter)
ATTENTION_WORDS = {"eager": "eager", "none": "", "sdpa": "fused", "flash": "fused", "fused": "fused"}


def _variant(cells: dict[str, str], cats: Catalogues, origin: str) -> dict[str, str]:
    """The optional ``optimizer``, ``attention``, ``execution`` and ``memory_format`` columns of a row (pai-v2 uses
    them; pai-v1 ignores them), checked: an empty cell keeps the workload's or the sweep's."""
    out = {}
    optimizer = (cells.get("optimizer") or "").strip()
    if optimizer:
        out["optimizer"] = cats.optimizers.resolve(optimizer)
    attention = (cells.get("attention") or "").strip().casefold()
    if attention:
        if attention not in ATTENTION_WORDS:
            raise PaigridError(f"{origin}: attention must be one of {', '.join(ATTENTION_WORDS)}, not {attention!r}.")
        if ATTENTION_WORDS[attention]:
            out["attention"] = ATTENTION_WORDS[attention]
    execution = (cells.get("execution") or "").strip().casefold()
    if execution:
        if execution not in ("eager", "graphs"):
            raise PaigridError(f"{origin}: execution must be eager or graphs, not {execution!r}.")
        out["execution"] = execution
    layout = (cells.get("memory_format") or "").strip().casefold()
    if layout:
        if layout not in ("channels_last", "nchw"):
            raise PaigridError(f"{origin}: memory_format must be channels_last or nchw, not {layout!r}.")
        out["memory_format"] = layout
    return out


def _kind(cells: dict[str, str], origin: str) -> str:
    """The row's kind (optional ``kind`` column, a ``accuracy.rowkinds`` name; empty: throughput)."""
    from paigrid.accuracy.rowkinds import row_kind

    try:
        return row_kind(cells.get("kind") or "").name
    except PaigridError as exc:
        raise PaigridError(f"{origin}: {exc}") from None


def _check_valid(rows: list[Measurement], origins: list[str], cats: Catalogues) -> None:
    """Refuse the first row whose configuration the model cannot run, with the kernel's reason
    (``invalid_reason`` of ``predict.predict_configs``; validity depends on no efficiency)."""
    from paigrid.inputs.efficiency import defaults
    from paigrid.predict import predict_configs, reason_text

    jobs = [row.job(Options()) for row in rows]
    results = predict_configs(jobs, [row.config() for row in rows], cats, defaults(), Options())
    for row, origin, job, result in zip(rows, origins, jobs, results):
        if not result["valid"]:
            raise PaigridError(f"{origin} ({row.id}): {reason_text(result, job, cats)}")


#: the column holding the observed value of each file schema -> the row kind it measures
KIND_COLUMNS = {"throughput": "throughput", "scaling_efficiency": "scaling", "bus_bandwidth_GB_per_s": "collective"}
#: required columns of a scaling-efficiency file (``datasets/scaling_public.csv``)
SCALING_REQUIRED = (
    "id",
    "model",
    "gpu",
    "gpus_per_node",
    "nodes",
    "arch",
    "intra_link",
    "network",
    "precision",
    "batch_per_gpu",
    "scaling_efficiency",
)
#: required columns of a collective-bandwidth file (``datasets/collectives_public.csv``)
COLLECTIVE_REQUIRED = (
    "id",
    "collective",
    "algorithm",
    "gpu",
    "gpus_per_node",
    "nodes",
    "intra_link",
    "network",
    "nics_per_node",
    "message_size_bytes",
    "bus_bandwidth_GB_per_s",
)
#: collective algorithms the model has no term for, with the reason (kept out of fits and summaries)
NOT_MODELLED = {
    "nvls": "NVLink SHARP reduces inside the NVSwitch, so its bus bandwidth is not a link's "
    "bandwidth; the model has no in-switch reduction"
}


def file_kind(header: list[str], origin: str) -> str:
    """The row kind a measurements file holds, from its columns (the observed-value column,
    ``KIND_COLUMNS``; a file with ``throughput_unit`` is a throughput file, whose required
    columns are then checked); one sentence when it has none or several of them."""
    if {"tensor_parallel", "hidden"} <= set(header):  # an LLM file; its required columns are checked next
        return "llm"
    found = [kind for column, kind in KIND_COLUMNS.items() if column in header]
    if not found and "throughput_unit" in header:  # a throughput file that lacks its value column
        return "throughput"
    if len(found) != 1:
        raise PaigridError(
            f"{origin} is not a measurements file paigrid knows: it needs exactly one of the columns "
            f"{', '.join(KIND_COLUMNS)} (throughput, scaling efficiency or collective bus bandwidth)."
        )
    return found[0]


def _scaling(cells: dict[str, str], aliases, cats: Catalogues, origin: str) -> Measurement:
    """A scaling-efficiency row: a throughput row whose observed value is throughput(n) /
    (n x throughput(1)), a fraction."""
    value = _positive(cells["scaling_efficiency"], origin, "scaling_efficiency")
    if value > 1.5:
        raise PaigridError(
            f"{origin}: scaling_efficiency is a fraction (throughput(n) / (n x throughput(1))), "
            f"not {cells['scaling_efficiency']!r}."
        )
    row = _measurement(
        {**cells, "throughput": cells["scaling_efficiency"], "throughput_unit": "samples/s", "kind": ""},
        aliases,
        cats,
        origin,
    )
    if row.n_gpu < 2:
        raise PaigridError(f"{origin}: a scaling row needs at least 2 GPUs, not {row.n_gpu}.")
    row.cells = cells
    row.kind = "scaling"
    return row


def _collective(cells: dict[str, str], cats: Catalogues, origin: str) -> Measurement:
    """A collective row: the bus bandwidth [GB/s] of an all-reduce of ``message_size_bytes``
    among gpus_per_node x nodes GPUs (``arch`` allreduce-local on one server, else
    allreduce-cluster)."""
    ident = cells["id"].strip()
    if not ident:
        raise PaigridError(f"{origin}: id is empty.")
    collective = cells["collective"].strip().casefold()
    if collective != "all_reduce" and cells["algorithm"].strip().casefold() != "ring":
        raise PaigridError(
            f"{origin}: collective must be all_reduce (or a ring-algorithm collective), not {cells['collective']!r}."
        )
    gpu = cats.gpus.resolve(cells["gpu"])
    nodes = _whole(cells["nodes"], origin, "nodes", 1)
    options = _row_options(cells, nodes, origin)
    n_gpu = options["gpus_per_node"] * nodes
    if n_gpu < 2:
        raise PaigridError(f"{origin}: a collective needs at least 2 GPUs, not {n_gpu}.")
    network = resolve_link(cats, cells["network"].strip(), "network")
    if nodes > 1 and cats.links.row(network)["kind"] == "none":
        raise PaigridError(f"{origin}: a collective on {nodes} servers needs a network, not 'none'.")
    intra = _intra(cells, gpu, n_gpu, cats, origin)
    _positive(cells["message_size_bytes"], origin, "message_size_bytes")
    rule = cats.links.row(intra)["fits_gpus"].strip()
    from paigrid.inputs.kernel_tables import fits_matrix

    if not fits_matrix(cats, [gpu], [intra])[0, 0]:
        raise PaigridError(f"{origin}: the intra link {intra} does not connect a {gpu} (it fits {rule}).")
    return Measurement(
        id=ident,
        model=f"{cells['collective'].strip()}/{cells['algorithm'].strip()}",
        workload="",
        framework="",
        gpu=gpu,
        precision="fp32",
        arch="allreduce-local" if nodes == 1 else "allreduce-cluster",
        intra=intra,
        network=network,
        gpus_per_node=options["gpus_per_node"],
        nodes=nodes,
        batch=1.0,
        grad_accum_steps=1,
        size=cells["message_size_bytes"].strip(),
        measured=_positive(cells["bus_bandwidth_GB_per_s"], origin, "bus_bandwidth_GB_per_s"),
        source=(cells.get("source") or "").strip(),
        job_options=options,
        cells=cells,
        kind="collective",
        generation=(cats.gpus.row(gpu).get("generation") or "").strip(),
    )


def _llm(cells: dict[str, str], cats: Catalogues, origin: str) -> Measurement:
    """An LLM training row (``datasets/llm_public*.csv``, ``paigrid.llm.rows``): its measured
    value is tokens/s of the whole job, converted from the row's ``throughput_unit``.  A row the
    model cannot predict is kept with its reason in ``refused`` (``llm.rows.read_measured``)."""
    from paigrid.llm.rows import read_measured, run_key

    llm, reason = read_measured(cells, origin, cats)
    ident = (cells.get("id") or "").strip()
    if llm is None:
        return Measurement(
            id=ident,
            model=(cells.get("model") or "").strip(),
            workload="",
            framework="",
            gpu=(cells.get("gpu") or "").strip(),
            precision=(cells.get("precision") or "").strip(),
            arch="",
            intra="",
            network="",
            gpus_per_node=0,
            nodes=0,
            batch=0.0,
            grad_accum_steps=0,
            size=(cells.get("seq_len") or "").strip(),
            measured=math.nan,
            source=(cells.get("source") or "").strip(),
            cells=cells,
            kind="llm",
            refused=reason,
            run=run_key(ident),
        )
    lay = llm.layout
    return Measurement(
        id=llm.id,
        model=cells["model"].strip(),
        workload="",
        framework=(cells.get("framework") or "").strip(),
        gpu=llm.design.gpu,
        precision=llm.design.precision,
        arch=lay.describe(),
        intra=llm.design.intra,
        network=llm.design.network,
        gpus_per_node=llm.gpus_per_node,
        nodes=llm.nodes,
        batch=float(lay.micro_batch),
        grad_accum_steps=max(1, llm.model.global_batch // (lay.dp * lay.micro_batch)),
        size=cells["seq_len"].strip(),
        measured=llm.measured,
        source=(cells.get("source") or "").strip(),
        cells=cells,
        kind="llm",
        generation=(cats.gpus.row(llm.design.gpu).get("generation") or "").strip(),
        refused=reason,
        note="defaults: " + ", ".join(llm.defaults) if llm.defaults else "",
        run=llm.run,
        llm_row=llm,
    )


def modelled(row: Measurement) -> bool:
    """False for a collective row whose algorithm the model has no term for (``NOT_MODELLED``)
    and for a row the model refuses (``refused``: an llm row it cannot express or whose layout
    it finds invalid)."""
    if row.refused:
        return False
    return not (row.kind == "collective" and row.cells.get("algorithm", "").strip().casefold() in NOT_MODELLED)


def load_measurements(
    path: str | Path, cats: Catalogues | None = None, aliases: list[dict[str, str]] | None = None
) -> list[Measurement]:
    """Read and check every row of a measurements CSV (one clear error for the first problem).

    The file's schema decides its rows' kind (``file_kind``): ``throughput`` (the schema of
    ``datasets/measurements_public.csv``; a ``kind`` column may name another kind per row),
    ``scaling`` (``datasets/scaling_public.csv``: ``scaling_efficiency``, a fraction) or
    ``collective`` (``datasets/collectives_public.csv``: ``bus_bandwidth_GB_per_s`` of an
    all-reduce of ``message_size_bytes``).
    """
    path = Path(path)
    cats = cats or Catalogues.load()
    aliases = load_aliases() if aliases is None else aliases
    text = read_text(path, "the measurements file")
    header, _ = csv_table(text, str(path), "a measurements file")
    kind = file_kind(header, str(path))
    required = {
        "throughput": REQUIRED,
        "scaling": SCALING_REQUIRED,
        "collective": COLLECTIVE_REQUIRED,
        "llm": LLM_REQUIRED,
    }[kind]
    _, table = csv_table(text, str(path), f"a {kind} measurements file", required)
    rows, origins, seen = [], [], set()
    for line_no, cells in table:
        origin = f"{path} line {line_no}"
        try:
            if kind == "llm":
                row = _llm(cells, cats, origin)
            elif kind == "scaling":
                row = _scaling(cells, aliases, cats, origin)
            elif kind == "collective":
                row = _collective(cells, cats, origin)
            else:
                row = _measurement(cells, aliases, cats, origin)
                if row.kind != "throughput":
                    schema = {"scaling": "scaling", "collective": "collectives", "llm": "llm"}[row.kind]
                    raise PaigridError(
                        f"{origin}: kind {row.kind} rows have their own file schema "
                        f"(see datasets/{schema}_public.csv), not a throughput column."
                    )
        except PaigridError as exc:
            if str(exc).startswith(origin):
                raise
            raise PaigridError(f"{origin}: {exc}") from None
        if row.id in seen:
            raise PaigridError(f"{path} line {line_no}: the id {row.id!r} is used twice.")
        seen.add(row.id)
        rows.append(row)
        origins.append(origin)
    checked = [(r, o) for r, o in zip(rows, origins) if r.kind not in ("collective", "llm")]
    if checked:
        _check_valid([r for r, _ in checked], [o for _, o in checked], cats)
    return rows


# --- selecting ----------------------------------------------------------------------------------
def _values(row: Measurement, column: str) -> set[str]:
    """The raw cell and, for name columns, the canonical name it resolved to (casefolded)."""
    resolved = {
        "model": row.workload,
        "gpu": row.gpu,
        "precision": row.precision,
        "intra_link": row.intra,
        "network": row.network,
        "workload": row.workload,
    }
    values = {row.cells.get(column, "")}
    if column in resolved:
        values.add(resolved[column])
    if column == "n_gpu":
        values = {str(row.n_gpu)}
    if column == "generation":
        values = {row.generation}
    return {v.casefold() for v in values}


def _canonical(column: str, pattern: str, cats: Catalogues) -> str | None:
    """Canonical catalogue name of a wildcard-free ``pattern`` in a name column (None if not one)."""
    catalogue = {
        "gpu": cats.gpus,
        "precision": cats.precisions,
        "model": cats.workloads,
        "workload": cats.workloads,
        "intra_link": cats.links,
        "network": cats.links,
    }.get(column)
    if catalogue is None or any(c in pattern for c in "*?["):
        return None
    try:
        return catalogue.resolve(pattern).casefold()
    except PaigridError:
        return None


def select(rows: list[Measurement], items: list[str] | None, cats: Catalogues | None = None) -> list[Measurement]:
    """Rows matching every ``COLUMN=PATTERN[,PATTERN...]`` (or ``COLUMN!=...`` to exclude) item.

    Patterns are shell wildcards (``V100*``), case-insensitive, matched against the raw cell
    and, for ``model``, ``gpu``, ``precision``, ``intra_link`` and ``network``, against the
    canonical name too (a plain catalogue alias such as ``gpu=A100-80GB`` is resolved first);
    ``workload``, ``n_gpu`` and ``generation`` (the GPU's, from the GPU catalogue) are also
    accepted as columns.
    """
    if not items:
        return rows
    cats = cats or Catalogues.load()
    columns = set(rows[0].cells) | {"workload", "n_gpu", "generation"}
    for item in items:
        negate = "!=" in item
        column, sep, text = item.partition("!=" if negate else "=")
        column = column.strip()
        if not sep or not column or not text.strip():
            raise PaigridError(f"--rows-where takes COLUMN=VALUE or COLUMN!=VALUE, not {item!r}.")
        if column not in columns:
            raise PaigridError(f"--rows-where: unknown column {column!r}; known: {', '.join(sorted(columns))}.")
        patterns = [p.strip().casefold() for p in text.split(",") if p.strip()]
        patterns += [c for c in (_canonical(column, p, cats) for p in patterns) if c]
        rows = [
            r for r in rows if any(fnmatch.fnmatchcase(v, p) for v in _values(r, column) for p in patterns) != negate
        ]
    if not rows:
        raise PaigridError(f"no measurement row matches {' and '.join(items)}.")
    return rows


# --- predicting ---------------------------------------------------------------------------------
def predict_rows(rows: list[Measurement], cats: Catalogues, efficiency, options: Options) -> list[dict]:
    """Model breakdown (``predict.predict_configs``) of each row's job at its configuration.

    ``throughput`` is samples/s of the whole job, like ``Measurement.measured``.
    """
    from paigrid.predict import predict_configs

    return predict_configs([r.job(options) for r in rows], [r.config() for r in rows], cats, efficiency, options)
