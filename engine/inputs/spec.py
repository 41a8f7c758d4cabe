"""Sweep specifications: which jobs and which values of each dimension, and the model options.

A spec is TOML (read with the standard library's ``tomllib``); every key is optional and the
empty spec sweeps the built-in workloads over the catalogues' default grid (the GPUs, links and
precisions whose ``default_grid`` column is ``yes``; every row of a catalogue without one):

    model = "pai-v2"                                # compute model: pai-v1 | pai-v2 (default: DEFAULT_MODEL)
    workloads = ["resnet50", "bert-large-seq384"]   # names, or a CSV path; default: all built-in
    jobs_per_block = 4                              # jobs per unit of work (default: sized by work)
    device = "cpu"                                  # cpu | cuda (an NVIDIA GPU; as --device)

    [grid]                                          # GRID_KEYS; default: the catalogues' default_grid rows
    arch = ["1w1g", "allreduce-local"]              # data-parallel family only
    gpu = ["V100", "A100"]                          # aliases resolve to catalogue names
    n_gpu = [1, 2, 4, 8]                            # or "current": each job's own GPU count
    intra = ["pcie3", "nvlink2-hcm"]                # data-parallel family only
    network = ["eth-25g", "eth-100g"]               # LLM family: also fabrics of llm_fabrics.csv
    precision = ["fp32", "amp-fp16"]
    domain = [8, 72]                                # LLM family: NVLink domain sizes [GPUs]
    gpus_per_node = 8                               # GPUs per server (both families)
    nics_per_gpu = 1.0                              # NICs per GPU (both families)

    [llm]                                           # the LLM layouts tried (llm.parallelism.SPACE_KEYS)
    max_tp = 8
    zero = [0, 1, 3]

    [options]                                       # the model's named options (README)
    collective = "default"                          # default | ring | tree | hierarchical | pipelined
    topology_aware = false
    grad_accum_steps = 1
    overlap = 0.0
    gpus_per_node = 8
    nics_per_node = 1
    pcie_roots = 2
    ps_count = 0                                    # 0: one parameter server per worker server
    input_rate_samples_per_s = inf                  # per server; inf: no input-pipeline bound
    sync_latency = true                             # latency hops once per gradient bucket (unset: pai-v2 only)
    bucket_mb = 25.0                                # gradient bucket size, MiB
    bucket_overlap = false                          # all buckets but the last hide behind backward
    ps_local_reduce = false                         # parameter server: reduce inside each server first
    ps_nic = "shared"                               # shared | per-worker NIC share
    ps_placement = "separate"                       # separate | colocated parameter servers
    ps_latency = false                              # per-message latency of pushes and pulls
    ps_update = false                               # update time on the parameter server hosts
    ps_sparse = false                               # only the touched embedding rows travel
    ps_memory = false                               # optimizer state on the parameter server hosts
    inter_volume = "hierarchical"                   # hierarchical | ring: all-reduce volume across servers
    overlap_efficiency = 1.0                        # fraction of the backward pass the exchange proceeds in
    coordination_us = 0.0                           # per participant step of each all-reduce
    coordination_growth = "log2"                    # log2 | linear participant steps of n GPUs
    sparse_allgather = false                        # all-reduce all-gathers the touched embedding rows
    fabric_tiers = false                            # a fabric in grid.network: its tiers for the all-reduce
    attention = "eager"                             # pai-v2: eager | fused attention kernels
    execution = "eager"                             # pai-v2: eager | graphs kernel launches
    memory_format = "channels_last"                 # pai-v2: channels_last | nchw (layout transposes)

    [catalogues]                                    # replace a built-in catalogue by a CSV
    gpus = "my_gpus.csv"
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from paigrid.errors import PaigridError
from paigrid.inputs.options import BY_NAME, DP_OPTIONS, MAX_WHOLE, check_number, parse_options, parse_value
from paigrid.kernels.dp_columns import ARCH_NAMES
from paigrid.userfiles import read_text

PRECISIONS_ORDER = ("fp32", "tf32", "amp-fp16", "amp-bf16", "fp8")
DEFAULT_N_GPU = tuple(2**i for i in range(11))  # 1 .. 1024
CURRENT = "current"
#: where a sweep's kernels run (``device`` in a spec, ``paigrid sweep --device``)
DEVICES = ("cpu", "cuda")
#: the largest GPU count (the cube stores GPU counts as 32-bit integers)
MAX_N_GPU = MAX_WHOLE


#: the model options of the data-parallel family, each declared once (``inputs.options``)
_DP = BY_NAME["dp"]
#: the compute model of a sweep, predict, validate or calibrate that names none
DEFAULT_MODEL: str = _DP["model"].default
#: options whose values are words, and the words each accepts
TEXT_OPTIONS = {o.name: o.choices for o in DP_OPTIONS if o.kind == "word"}
#: options whose values are true or false
BOOL_OPTIONS = tuple(o.name for o in DP_OPTIONS if o.kind == "bool")
#: per-job options: a workloads or population CSV may set them in columns of the same name
JOB_OPTIONS = tuple(o.name for o in DP_OPTIONS if o.per_job)


def _default(name: str):
    """The declared default of the data-parallel option ``name`` (a dataclass field default)."""
    return field(default=_DP[name].default)


@dataclass(frozen=True)
class Options:
    """The model's named options (declared in ``inputs.options.DP_OPTIONS``: type, default,
    bounds, documentation and kernel slot; a test checks that these fields are those
    declarations); with ``model="pai-v1"`` and every other option at its default they are
    version 1 of the model, value for value."""

    collective: str = _default("collective")
    topology_aware: bool = _default("topology_aware")
    grad_accum_steps: int = _default("grad_accum_steps")
    overlap: float = _default("overlap")
    gpus_per_node: int = _default("gpus_per_node")
    nics_per_node: int = _default("nics_per_node")
    pcie_roots: int = _default("pcie_roots")
    ps_count: int = _default("ps_count")
    input_rate_samples_per_s: float = _default("input_rate_samples_per_s")
    model: str = _default("model")
    attention: str = _default("attention")
    execution: str = _default("execution")
    memory_format: str = _default("memory_format")
    sync_latency: bool | None = _default("sync_latency")
    bucket_mb: float = _default("bucket_mb")
    bucket_overlap: bool = _default("bucket_overlap")
    ps_local_reduce: bool = _default("ps_local_reduce")
    ps_nic: str = _default("ps_nic")
    ps_placement: str = _default("ps_placement")
    ps_latency: bool = _default("ps_latency")
    ps_update: bool = _default("ps_update")
    ps_sparse: bool = _default("ps_sparse")
    ps_memory: bool = _default("ps_memory")
    inter_volume: str = _default("inter_volume")
    overlap_efficiency: float = _default("overlap_efficiency")
    coordination_us: float = _default("coordination_us")
    coordination_growth: str = _default("coordination_growth")
    sparse_allgather: bool = _default("sparse_allgather")
    fabric_tiers: bool = _default("fabric_tiers")

    def __post_init__(self) -> None:
        for option in DP_OPTIONS:  # a value set in Python is checked as one read from a file
            value = getattr(self, option.name)
            object.__setattr__(self, option.name, parse_value(option, value, "options"))

    @property
    def sync_latency_on(self) -> bool:
        """Whether the exchange's latency hops are paid once per gradient bucket: ``sync_latency``
        when set, else on under compute model pai-v2 and off under pai-v1 (version 1)."""
        return self.model == "pai-v2" if self.sync_latency is None else self.sync_latency

    def with_overrides(self, values: dict, origin: str) -> Options:
        """A copy with ``values`` (from a spec, a calibration or the command line) applied."""
        return replace(self, **coerce_options(values, origin))


def coerce_options(values: dict, origin: str) -> dict:
    """Option values converted to their declared types and range-checked against their declared
    bounds (``inputs.options.parse_options``), with one clear sentence for an unknown or bad one."""
    return parse_options("dp", values, origin)


def check_options(values: dict, origin: str) -> None:
    """Range checks of option values (``coerce_options`` without the result)."""
    parse_options("dp", values, origin)


@dataclass(frozen=True)
class GridKey:
    """One key of a spec's ``[grid]`` table, declared once: parsing, the defaults' wording in the
    docs and the help derive from these.  ``kind``: ``names`` (a list of catalogue names),
    ``counts`` (a list of whole numbers >= 1), ``count`` (one whole number >= 1) or ``number``
    (one number >= 0); ``families``: the job families it applies to (dp, llm); ``default``: what
    an absent key means."""

    name: str
    kind: str
    families: tuple
    unit: str
    default: str
    doc: str


GRID_KEYS = (
    GridKey("arch", "names", ("dp",), "", "every architecture", "training architectures (data-parallel family)"),
    GridKey(
        "gpu",
        "names",
        ("dp", "llm"),
        "",
        "dp: the default_grid rows of gpus.csv; llm: A100-SXM4-80GB, H100-SXM5-80GB, H200, B200",
        "GPUs (names or aliases of gpus.csv)",
    ),
    GridKey(
        "n_gpu",
        "counts",
        ("dp", "llm"),
        "GPUs",
        "dp: 1, 2, ..., 1024; llm: 8, 16, ..., 16384",
        'GPU counts ("current": each job\'s own; the LLM family then sweeps 1, 2, 4, ..., 16384 and them)',
    ),
    GridKey(
        "intra",
        "names",
        ("dp",),
        "",
        "the default_grid intra links of links.csv",
        "intra-server links (data-parallel family)",
    ),
    GridKey(
        "network",
        "names",
        ("dp", "llm"),
        "",
        "dp: the default_grid networks of links.csv; llm: rdma-100g, ib-hdr-200g, ib-ndr-400g, ib-xdr-800g",
        "networks: links of links.csv (both families) or fabrics of llm_fabrics.csv "
        "(LLM family; data-parallel too with the option fabric_tiers)",
    ),
    GridKey(
        "precision", "names", ("dp", "llm"), "", "dp: the default_grid precisions; llm: amp-bf16", "numeric precisions"
    ),
    GridKey(
        "domain",
        "counts",
        ("llm",),
        "GPUs",
        "each GPU's nvlink_domain_GPUs column of gpus.csv, else 8 (an HGX server)",
        "NVLink domain sizes",
    ),
    GridKey(
        "gpus_per_node",
        "count",
        ("dp", "llm"),
        "GPUs",
        "each GPU's gpus_per_server column of gpus.csv, else 8; dp: the option gpus_per_node",
        "GPUs per server (sets the NICs and PCIe roots of a server)",
    ),
    GridKey(
        "nics_per_gpu",
        "number",
        ("dp", "llm"),
        "NICs",
        "llm: 1; dp: the option nics_per_node (1 per server)",
        "NICs per GPU (dp: nics_per_node = nics_per_gpu x gpus_per_node)",
    ),
)
#: the [grid] keys by name
GRID = {key.name: key for key in GRID_KEYS}


@dataclass
class SweepSpec:
    """What to sweep: the jobs, the value lists of the hardware dimensions, options and catalogues."""

    workloads: list[str] | str | None = None  # None: all built-in; str: a CSV path
    arch: list[str] | None = None
    gpu: list[str] | None = None
    n_gpu: list[int] | str | None = None  # None: 1..1024; "current": each job's own count
    intra: list[str] | None = None
    network: list[str] | None = None
    precision: list[str] | None = None
    domain: list[int] | None = None  # LLM family: NVLink domain sizes [GPUs]
    gpus_per_node: int | None = None  # both families: GPUs per server
    nics_per_gpu: float | None = None  # both families: NICs per GPU
    llm: dict = field(default_factory=dict)  # the [llm] table (checked by llm.parallelism.space_from_table)
    options: Options = field(default_factory=Options)
    catalogues: dict[str, str] = field(default_factory=dict)
    jobs_per_block: int | None = None  # None: blocks sized by work (``orchestration.work_jobs_per_block``)
    device: str = "cpu"  # where the kernels run: "cpu" or "cuda" (not a model input)
    origin: str = "the default spec"
    sha256: str = ""  # of the spec file ("" when not read from a file)

    def to_toml_dict(self) -> dict:
        """The spec as plain data, stored in the cube so it says how it was made."""
        data = {
            "workloads": self.workloads,
            "jobs_per_block": self.jobs_per_block,
            "grid": {k.name: getattr(self, k.name) for k in GRID_KEYS if getattr(self, k.name) is not None},
            "llm": self.llm or None,
            "options": {k: v for k, v in asdict(self.options).items()},
            "catalogues": self.catalogues,
        }
        return {k: v for k, v in data.items() if v is not None}


def _string_list(value, key: str, origin: str) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise PaigridError(f"{origin}: {key} must be a non-empty list of names.")
    return value


def _n_gpu_list(value, origin: str) -> list[int] | str:
    if value == CURRENT:
        return CURRENT
    if not isinstance(value, list) or not value:
        raise PaigridError(f'{origin}: n_gpu must be a non-empty list of GPU counts or "current".')
    for v in value:
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_N_GPU:
            raise PaigridError(f"{origin}: n_gpu values must be whole numbers from 1 to {MAX_N_GPU}, not {v!r}.")
    if len(set(value)) != len(value):
        raise PaigridError(f"{origin}: n_gpu lists a GPU count twice.")
    return list(value)


def _grid_value(key: GridKey, value, origin: str):
    """A [grid] value checked as its declaration says."""
    where = f"grid.{key.name}"
    if key.name == "n_gpu":
        return _n_gpu_list(value, origin)
    if key.kind == "names":
        return _string_list(value, where, origin)
    if key.kind == "counts":
        if (
            not isinstance(value, list)
            or not value
            or any(isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_N_GPU for v in value)
        ):
            raise PaigridError(f"{origin}: {where} must be a non-empty list of whole numbers of {key.unit} >= 1.")
        if len(set(value)) != len(value):
            raise PaigridError(f"{origin}: {where} lists a value twice.")
        return list(value)
    if key.kind == "count":
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_N_GPU:
            raise PaigridError(f"{origin}: {where} must be one whole number of {key.unit} >= 1, not {value!r}.")
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
        raise PaigridError(f"{origin}: {where} must be one number of {key.unit} >= 0, not {value!r}.")
    return check_number(key.name, float(value), f"{origin}: [grid]")


def _server_options(spec: SweepSpec, options: dict, origin: str) -> dict:
    """The data-parallel options that [grid] gpus_per_node and nics_per_gpu set (gpus_per_node,
    nics_per_node = nics_per_gpu x gpus_per_node); a value given twice is refused."""
    out = {}
    if spec.gpus_per_node is not None:
        if "gpus_per_node" in options and options["gpus_per_node"] != spec.gpus_per_node:
            raise PaigridError(f"{origin}: gpus_per_node is given twice (in [grid] and in [options]).")
        out["gpus_per_node"] = spec.gpus_per_node
    if spec.nics_per_gpu is not None:
        if "nics_per_node" in options:
            raise PaigridError(f"{origin}: give nics_per_gpu in [grid] or nics_per_node in [options], not both.")
        per_node = spec.nics_per_gpu * out.get("gpus_per_node", options.get("gpus_per_node", Options.gpus_per_node))
        if per_node != int(per_node) or per_node < 1:
            raise PaigridError(
                f"{origin}: grid.nics_per_gpu x gpus_per_node = {per_node:g} must be a whole number "
                ">= 1 of NICs per server for the data-parallel family."
            )
        out["nics_per_node"] = int(per_node)
    return out


def spec_from_dict(data: dict, origin: str, base_dir: Path | None = None) -> SweepSpec:
    """Validate parsed TOML into a ``SweepSpec``; relative paths are taken from ``base_dir``."""
    known = {"workloads", "grid", "options", "catalogues", "jobs_per_block", "model", "device", "llm"}
    unknown = set(data) - known
    if unknown:
        raise PaigridError(f"{origin}: unknown key(s) {', '.join(sorted(unknown))}; known: {', '.join(sorted(known))}.")
    spec = SweepSpec(origin=origin)
    base_dir = base_dir or Path(".")
    workloads = data.get("workloads")
    if isinstance(workloads, str) and workloads.endswith(".csv"):
        spec.workloads = str(base_dir / workloads)
    elif workloads is not None:
        spec.workloads = _string_list(workloads, "workloads", origin)
    grid = data.get("grid", {})
    if not isinstance(grid, dict):
        raise PaigridError(f"{origin}: [grid] must be a table.")
    unknown = set(grid) - set(GRID)
    if unknown:
        raise PaigridError(
            f"{origin}: unknown grid dimension(s) {', '.join(sorted(unknown))}; known: {', '.join(GRID)}."
        )
    for name, value in grid.items():
        setattr(spec, name, _grid_value(GRID[name], value, origin))
    if spec.arch:
        for name in spec.arch:
            if name not in ARCH_NAMES:
                raise PaigridError(f"{origin}: unknown architecture {name!r}; known: {', '.join(ARCH_NAMES)}.")
        if len(set(spec.arch)) != len(spec.arch):
            raise PaigridError(f"{origin}: grid.arch names an architecture twice.")
    options = data.get("options", {})
    if not isinstance(options, dict):
        raise PaigridError(f"{origin}: [options] must be a table.")
    if "model" in data:
        if "model" in options:
            raise PaigridError(f"{origin}: model is given twice (at the top and in [options]).")
        options = {**options, "model": data["model"]}
    spec.options = Options().with_overrides({**options, **_server_options(spec, options, origin)}, origin)
    llm = data.get("llm", {})
    if not isinstance(llm, dict):
        raise PaigridError(f"{origin}: [llm] must be a table.")
    spec.llm = dict(llm)
    catalogues = data.get("catalogues", {})
    if not isinstance(catalogues, dict):
        raise PaigridError(f'{origin}: [catalogues] must be a table of KIND = "FILE.csv".')
    for kind, value in catalogues.items():
        if not isinstance(value, str) or not value.strip():
            raise PaigridError(f"{origin}: catalogues.{kind} must be the path of a CSV file, not {value!r}.")
    spec.catalogues = {k: str(base_dir / v) for k, v in catalogues.items()}
    if "jobs_per_block" in data:
        blocks = data["jobs_per_block"]
        if isinstance(blocks, bool) or not isinstance(blocks, int) or blocks < 1:
            raise PaigridError(f"{origin}: jobs_per_block must be a whole number >= 1.")
        spec.jobs_per_block = blocks
    device = data.get("device", spec.device)
    if device not in DEVICES:
        raise PaigridError(f"{origin}: device must be one of {', '.join(DEVICES)}, not {device!r}.")
    spec.device = device
    return spec


def load_spec(path: str | Path | None) -> SweepSpec:
    """Read a TOML spec file (``None``: the default spec)."""
    if path is None:
        return SweepSpec()
    import hashlib

    path = Path(path)
    text = read_text(path, "the spec file")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PaigridError(f"the spec file {path} is not valid TOML ({exc}).") from None
    except RecursionError:
        raise PaigridError(f"the spec file {path} is not valid TOML (it nests too deeply).") from None
    spec = spec_from_dict(data, str(path), path.parent)
    spec.sha256 = hashlib.sha256(text.encode()).hexdigest()
    return spec


def grid_keys_table() -> str:
    """The [grid] keys as a Markdown table (docs/commands.md holds it; a test checks it is current)."""
    lines = ["| key | families | what | default |", "|---|---|---|---|"]
    for key in GRID_KEYS:
        unit = f" [{key.unit}]" if key.unit else ""
        lines.append(f"| `{key.name}` | {', '.join(key.families)} | {key.doc}{unit} | {key.default} |")
    return "\n".join(lines)
