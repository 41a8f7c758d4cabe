"""Build the kernels' small per-dimension tables (SI units) from the catalogues, jobs and efficiencies.

``Grid`` holds the labelled coordinates of a sweep and the tables for them; the kernel loops
over their Cartesian product.  ``Grid.job_rows(j0, j1)`` gives the job table of one block, so a
grid of millions of jobs is never held as one array.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from paigrid.errors import PaigridError
from paigrid.inputs.catalog import Catalogues
from paigrid.inputs.efficiency import Efficiency, ps_host_bandwidth, workspace_bytes
from paigrid.inputs.jobs import Job, resolve_link
from paigrid.inputs.options import option_vector as declared_option_vector
from paigrid.inputs.spec import CURRENT, DEFAULT_N_GPU, PRECISIONS_ORDER, Options, SweepSpec
from paigrid.kernels import dp_columns as L

LINK_KIND_CODES = {
    "pcie": L.LINK_PCIE,
    "nvlink-hcm": L.LINK_NVLINK_HCM,
    "nvswitch": L.LINK_NVSWITCH,
    "nvlink": L.LINK_NVSWITCH,
    "none": L.LINK_NONE,
}
COLLECTIVE_CODES = {name: code for code, name in enumerate(L.COLLECTIVE_NAMES)}
#: workload catalogues whose names are the built-in ``workload_classes.csv``'s: the built-in one
#: and the built-in one extended with the zoo's workloads (``zoo.with_zoo_workloads``)
BUILTIN_WORKLOAD_ORIGINS = ("the built-in workloads.csv", "the built-in workloads.csv and zoo_workloads.csv")


@dataclass
class KernelTables:
    """The per-dimension kernel tables of one kernel call (SI units, layouts in
    ``kernels.dp_columns``): what ``evaluate.run_kernel`` and ``evaluate.allocate`` read.  A
    ``Grid`` is one, with the labels and jobs of a sweep beside the tables; ``predict`` builds
    bare ones for single configurations."""

    arch_codes: np.ndarray  # (A,) int64
    gpu_table: np.ndarray  # (G, N_GPU_FIELDS)
    peak: np.ndarray  # (G, P) achievable FLOP/s, NaN where unsupported
    prec_table: np.ndarray  # (P, N_PREC_FIELDS)
    intra_table: np.ndarray  # (I, N_LINK_FIELDS)
    intra_fits: np.ndarray  # (G, I) uint8
    network_table: np.ndarray  # (W, N_LINK_FIELDS)
    options: np.ndarray  # (N_OPTIONS,)
    n_counts: int = 1  # GPU counts per job
    class_peak: np.ndarray | None = None  # (G, P, N_CLASSES) achievable FLOP/s per operator class (pai-v2)

    @property
    def shape(self) -> tuple[int, ...]:
        """Sizes of (job, arch, gpu, n_gpu, intra, network, precision); the job size is 0 (set per call)."""
        return (
            0,
            len(self.arch_codes),
            len(self.gpu_table),
            self.n_counts,
            len(self.intra_table),
            len(self.network_table),
            len(self.prec_table),
        )


@dataclass(kw_only=True)
class Grid(KernelTables):
    """Coordinates of every dimension and the kernel tables that describe them."""

    jobs: list[Job]
    arch: list[str]
    gpu: list[str]
    n_gpu: list[int]  # [0] means "each job's current GPU count"
    intra: list[str]
    network: list[str]
    precision: list[str]
    cats: Catalogues
    efficiency: Efficiency
    model_options: Options | None = None  # the sweep's options (the jobs' pai-v2 defaults)

    @property
    def shape(self) -> tuple[int, ...]:
        """Sizes of (job, arch, gpu, n_gpu, intra, network, precision)."""
        return (
            len(self.jobs),
            len(self.arch),
            len(self.gpu),
            len(self.n_gpu),
            len(self.intra),
            len(self.network),
            len(self.precision),
        )

    @property
    def configs(self) -> int:
        """Number of configurations in the grid."""
        return math.prod(self.shape)

    @functools.cached_property
    def job_index(self) -> tuple[np.ndarray, np.ndarray]:
        """The job table as (distinct rows, row of each job): ``job_table_index`` of the jobs,
        built once per grid."""
        return job_table_index(self.jobs, self.cats, self.model_options, self.efficiency)

    @functools.cached_property
    def current_counts(self) -> np.ndarray:
        """(J,) each job's current GPU count (read when ``n_gpu`` is ``[0]``)."""
        return np.array(
            [np.nan if job.current is None else job.current["n_gpu"] for job in self.jobs], dtype=np.float64
        )

    def job_rows(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        """Job table (J, N_JOB_FIELDS) and GPU-count table (J, N) of jobs[start:stop] (array
        gathers from ``job_index``: no Python per job)."""
        rows, index = self.job_index
        table = rows[index[start:stop]]
        if self.n_gpu == [0]:
            counts = self.current_counts[start:stop, None].copy()
        else:
            counts = np.tile(np.asarray(self.n_gpu, dtype=np.float64), (len(table), 1))
        return table, counts


@functools.cache
def _workload_classes() -> dict[str, dict[str, str]]:
    """Rows of the built-in ``workload_classes.csv`` by workload name."""
    from paigrid.inputs.catalog import load

    return {row["name"]: row for row in load("workload_classes").rows}


@functools.cache
def _class_numbers(model: str, attention: str) -> tuple | None:
    """The numbers of a built-in workload's ``workload_classes.csv`` row for one attention
    variant, parsed once: per class (GFLOP per sample, train MB per sample, weight MB per step;
    zeros for the attention class not chosen), forward launches, FP32-under-AMP MB per sample
    (element-wise/norm and embedding), kept activation MB per sample, the NCHW layout
    transposes' MB per sample and the forward activation casts of mixed precision per step;
    None for a workload not in the file."""
    row = _workload_classes().get(model)
    if row is None:
        return None
    per_class = tuple(
        (0.0, 0.0, 0.0)
        if name.startswith("attention_") and name != f"attention_{attention}"
        else (
            float(row[f"{name}_GFLOP_per_sample"]),
            float(row[f"{name}_train_MB_per_sample"]),
            float(row[f"{name}_weight_MB_per_step"]),
        )
        for name in L.CLASS_NAMES
    )
    return (
        per_class,
        float(row[f"launches_{attention}_per_step"]),
        float(row["elementwise_norm_amp_fp32_train_MB_per_sample"])
        + float(row["embedding_amp_fp32_train_MB_per_sample"]),
        float(row[f"activation_{attention}_MB_per_sample"]),
        float(row["gemm_conv_nchw_transpose_train_MB_per_sample"]),
        float(row["amp_cast_launches_per_step"]),
    )


def class_fields(
    job: Job, cats: Catalogues, options: Options | None = None, efficiency: Efficiency | None = None
) -> dict[int, float]:
    """The pai-v2 fields of a job-table row (``layout.J_CLASS_FLOP`` ... ``J_GRAPHS``), SI units.

    From ``datasets/workload_classes.csv`` (a built-in workload): per class, FLOPs = 3 x forward
    (backward = 2 x forward for GEMMs, convolutions, recurrent and attention GEMMs; the
    element-wise and embedding classes are timed by their bytes only), bytes = forward +
    backward activation traffic x batch + 3 x the weight traffic of a forward pass (read
    forward, read backward, write the gradient), launches = 3 x the forward launches; the
    attention class and the kept activations of the job's attention variant (``eager`` or
    ``fused``); the element-wise and embedding bytes that stay FP32 under mixed precision; the
    NCHW layout transposes of an ``nchw`` job (``memory_format``); the activation casts of
    mixed precision, 2 x the forward casts (each cast and its gradient's cast back); the optimizer update
    8 + 2 x state bytes per parameter (+12 for LAMB) beyond the
    precision's gradient and working-copy bytes.  A workload not in that file (a user catalogue)
    is one GEMM class of 3 x ``fwd_GFLOP_per_sample`` plus its memory-bound bytes, no launches.
    A per-workload correction f of ``efficiency`` (``Efficiency.workload_factor``, fitted by
    ``paigrid calibrate --fit workload``) divides the class FLOPs and bytes by f: its classes run
    at f x their default rates (launches and the optimizer update are unchanged).
    """
    from paigrid.inputs.zoo import LAMB_EXTRA_BYTES

    options = options or Options()
    w = cats.workloads
    b = job.batch
    attention = job.variant.get("attention", options.attention)
    optimizer = cats.optimizers.resolve(job.variant.get("optimizer", w.row(job.model)["optimizer"]))
    state = cats.optimizers.number(optimizer, "state_bytes_per_param")
    out = {L.J_CLASS_FLOP + c: 0.0 for c in range(L.N_CLASSES)}
    out.update({L.J_CLASS_BYTES + c: 0.0 for c in range(L.N_CLASSES)})
    out.update({L.J_LAUNCHES: 0.0, L.J_AMP_CASTS: 0.0, L.J_AMP_FP32_BYTES: 0.0, L.J_NCHW_BYTES: 0.0})
    numbers = _class_numbers(job.model, attention) if w.origin in BUILTIN_WORKLOAD_ORIGINS else None
    if numbers is None:
        out[L.J_CLASS_FLOP + L.CLASS_GEMM_CONV] = 3.0 * w.number(job.model, "fwd_GFLOP_per_sample") * 1e9 * b
        out[L.J_CLASS_BYTES + L.CLASS_ELEMENTWISE] = w.number(job.model, "membound_MB_per_sample") * 1e6 * b
        out[L.J_ACTIVATION_V2] = w.number(job.model, "activation_MB_per_sample") * 1e6 * b
    else:
        per_class, launches, amp_fp32, activation, nchw, casts = numbers
        for c, (gflop, train_mb, weight_mb) in enumerate(per_class):
            out[L.J_CLASS_FLOP + c] = 3.0 * gflop * 1e9 * b
            out[L.J_CLASS_BYTES + c] = train_mb * 1e6 * b + 3.0 * weight_mb * 1e6
        out[L.J_LAUNCHES] = 3.0 * launches
        out[L.J_AMP_CASTS] = 2.0 * casts
        out[L.J_AMP_FP32_BYTES] = amp_fp32 * 1e6 * b
        out[L.J_ACTIVATION_V2] = activation * 1e6 * b
        if job.variant.get("memory_format", options.memory_format) == "nchw":
            out[L.J_NCHW_BYTES] = nchw * 1e6 * b
    factor = efficiency.workload_factor(job.model) if efficiency is not None else 1.0
    if factor != 1.0:
        for field_index in (
            *range(L.J_CLASS_FLOP, L.J_CLASS_FLOP + L.N_CLASSES),
            *range(L.J_CLASS_BYTES, L.J_CLASS_BYTES + L.N_CLASSES),
            L.J_AMP_FP32_BYTES,
            L.J_NCHW_BYTES,
        ):
            out[field_index] /= factor
    out[L.J_UPDATE_BYTES] = 8.0 + 2.0 * state + (LAMB_EXTRA_BYTES if optimizer == "lamb" else 0.0)
    out[L.J_GRAPHS] = 1.0 if job.variant.get("execution", options.execution) == "graphs" else 0.0
    return out


def job_vector(
    job: Job, cats: Catalogues, options: Options | None = None, efficiency: Efficiency | None = None
) -> np.ndarray:
    """One row of the job table: per-micro-batch FLOPs and bytes of one GPU, and the job's options
    (``options``: the sweep's, for the pai-v2 fields; under pai-v2 a job's own optimizer sets
    its optimizer state too; ``efficiency``: its per-workload corrections, see ``class_fields``)."""
    w = cats.workloads
    row = np.zeros(L.N_JOB_FIELDS)
    b = job.batch
    row[L.J_FLOP] = 3.0 * w.number(job.model, "fwd_GFLOP_per_sample") * 1e9 * b
    row[L.J_MEMBOUND] = w.number(job.model, "membound_MB_per_sample") * 1e6 * b
    row[L.J_INPUT] = w.number(job.model, "input_MB_per_sample") * 1e6 * b
    row[L.J_PARAMS] = w.number(job.model, "params_M") * 1e6
    row[L.J_ACTIVATION] = w.number(job.model, "activation_MB_per_sample") * 1e6 * b
    row[L.J_OPT_STATE] = cats.optimizers.number(w.row(job.model)["optimizer"], "state_bytes_per_param")
    row[L.J_BATCH] = b
    o = job.options
    row[L.J_ACCUM] = o["grad_accum_steps"]
    row[L.J_GPUS_PER_NODE] = o["gpus_per_node"]
    row[L.J_NICS_PER_NODE] = o["nics_per_node"]
    row[L.J_PCIE_ROOTS] = o["pcie_roots"]
    row[L.J_PS_COUNT] = o["ps_count"]
    row[L.J_OVERLAP] = o["overlap"]
    row[L.J_INPUT_RATE] = o["input_rate_samples_per_s"]
    emb = w.number(job.model, "embedding_params_M")  # optional columns: NaN (none declared) -> 0
    touched = w.number(job.model, "embedding_params_per_sample")
    row[L.J_EMB_PARAMS] = emb * 1e6 if emb > 0 else 0.0
    row[L.J_EMB_TOUCHED] = touched * b if emb > 0 and touched >= 0 else 0.0
    for field_index, value in class_fields(job, cats, options, efficiency).items():
        row[field_index] = value
    if (options or Options()).model == "pai-v2" and "optimizer" in job.variant:
        row[L.J_OPT_STATE] = cats.optimizers.number(job.variant["optimizer"], "state_bytes_per_param")
    return row


def job_table_index(
    jobs: list[Job], cats: Catalogues, options: Options | None = None, efficiency: Efficiency | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The job table of ``jobs`` as (K, N_JOB_FIELDS) distinct rows and the (J,) int32 row of
    each job: ``job_vector`` once per distinct (model, batch, options, pai-v2 choices), which is
    all a row depends on (``options`` and ``efficiency``, the sweep's, are the same for every
    job; the embedding fields and a per-workload correction follow the model), so that
    ``rows[index]`` equals the rows built job by job."""
    keys: dict[tuple, int] = {}
    index = np.empty(len(jobs), np.int32)
    rows: list[np.ndarray] = []
    for j, job in enumerate(jobs):
        key = (job.model, job.batch, tuple(job.options.items()), tuple(job.variant.items()))
        k = keys.get(key)
        if k is None:
            k = keys[key] = len(rows)
            rows.append(job_vector(job, cats, options, efficiency))
        index[j] = k
    table = np.stack(rows) if rows else np.zeros((0, L.N_JOB_FIELDS))
    return table, index


def _pcie_bandwidth(cats: Catalogues, gen: float, eff: Efficiency) -> float:
    """Achievable host-link bandwidth [bytes/s] of a PCIe generation, from the ``pcieN`` link row."""
    name = f"pcie{int(gen)}"
    try:
        row = cats.links.row(name)
    except PaigridError:
        raise PaigridError(
            f"the links catalogue has no {name} row, which a GPU with PCIe gen {int(gen)} needs."
        ) from None
    nominal = float(row["nominal_GB_per_s"]) * 1e9
    return nominal * eff.link_for(name, row["kind"], float(row["efficiency"]))


def generation(cats: Catalogues, gpu: str) -> str:
    """The GPU's architecture generation (``generation`` column of the GPU catalogue; ``*``, the
    generation-independent pai-v2 defaults, when a user catalogue has none)."""
    return (cats.gpus.row(gpu).get("generation") or "").strip() or "*"


def class_tables(
    cats: Catalogues, gpus: list[str], precisions: list[str], eff: Efficiency, table: np.ndarray
) -> np.ndarray:
    """Fill the pai-v2 fields of the GPU ``table`` (achievable HBM bytes/s, seconds per launch)
    and return ``class_peak`` (G, P, N_CLASSES): achievable FLOP/s of each operator class,
    class efficiency of the GPU's generation and precision x datasheet peak (NaN where the GPU
    lacks the precision; the memory-bound classes, which no peak limits, NaN too)."""
    g = cats.gpus
    class_peak = np.full((len(gpus), len(precisions), L.N_CLASSES), np.nan)
    for i, name in enumerate(gpus):
        gen = generation(cats, name)
        table[i, L.G_CLASS_MEM_BW] = g.number(name, "hbm_GB_per_s") * 1e9 * eff.class_for("hbm", gen, "*")
        table[i, L.G_LAUNCH_EAGER] = eff.class_for("launch_eager", gen, "*") * 1e-6
        table[i, L.G_LAUNCH_GRAPHS] = eff.class_for("launch_graphs", gen, "*") * 1e-6
        for k, precision in enumerate(precisions):
            tflops = cats.peak_TFLOP_per_s(name, precision)
            if not tflops > 0:
                continue
            for c, cls in enumerate(L.CLASS_NAMES):
                if c not in (L.CLASS_ELEMENTWISE, L.CLASS_EMBEDDING):
                    class_peak[i, k, c] = tflops * 1e12 * eff.class_for(cls, gen, precision)
    return class_peak


def tensor_convolutions(cats: Catalogues, precision: str) -> float:
    """1.0 where ``precision``'s convolutions run on tensor cores, else 0.0: every precision whose
    peak is not the FP32 (SIMT) peak (``peak_column`` of precisions.csv), TF32 included: TF32 is
    tensor-core math on FP32 tensors (NVIDIA A100 Tensor Core GPU Architecture whitepaper, 2020),
    so its convolutions are cuDNN's tensor-core kernels, which take NHWC tensors as the half
    precisions' do (the zoo's ``gemm_conv_nchw_transpose_train_MB_per_sample``)."""
    return 0.0 if cats.precisions.row(precision)["peak_column"] == "fp32_TFLOP_per_s" else 1.0


def gpu_tables(cats: Catalogues, gpus: list[str], precisions: list[str], eff: Efficiency):
    """GPU table (G, N_GPU_FIELDS), achievable peak (G, P) and precision table (P, N_PREC_FIELDS);
    ``class_tables`` fills the table's pai-v2 fields."""
    g = cats.gpus
    table = np.zeros((len(gpus), L.N_GPU_FIELDS))
    for i, name in enumerate(gpus):
        table[i, L.G_MEM_BW] = g.number(name, "hbm_GB_per_s") * 1e9 * eff.memory_for(name)
        table[i, L.G_PCIE_BW] = _pcie_bandwidth(cats, g.number(name, "pcie_gen"), eff)
        table[i, L.G_MEMORY] = g.number(name, "memory_GB") * 1e9
        table[i, L.G_PRICE] = g.number(name, "price_USD_per_gpu_hour")
        table[i, L.G_POWER] = g.number(name, "tdp_W")
    bad = ~np.isfinite(table[:, : L.G_CLASS_MEM_BW]) | (table[:, : L.G_CLASS_MEM_BW] <= 0)
    if bad.any():
        i, f = np.argwhere(bad)[0]
        column = {
            L.G_MEM_BW: "hbm_GB_per_s",
            L.G_PCIE_BW: "pcie_gen",
            L.G_MEMORY: "memory_GB",
            L.G_PRICE: "price_USD_per_gpu_hour",
            L.G_POWER: "tdp_W",
        }[f]
        raise PaigridError(f"GPU {gpus[i]!r} in {g.origin} lacks a positive {column} value, which the model needs.")
    p = cats.precisions
    prec = np.zeros((len(precisions), L.N_PREC_FIELDS))
    peak = np.full((len(gpus), len(precisions)), np.nan)
    for k, name in enumerate(precisions):
        prec[k] = [
            p.number(name, "activation_bytes") / 4.0,
            p.number(name, "weight_bytes_per_param"),
            p.number(name, "grad_bytes_per_param"),
            p.number(name, "comm_bytes_per_param"),
            tensor_convolutions(cats, name),
        ]
        for i, gname in enumerate(gpus):
            tflops = cats.peak_TFLOP_per_s(gname, name)
            if tflops > 0:
                peak[i, k] = tflops * 1e12 * eff.flop_for(gname, name)
    return table, peak, prec


def link_table(cats: Catalogues, names: list[str], eff: Efficiency) -> np.ndarray:
    """Link table (L, N_LINK_FIELDS): achievable bytes/s, latency [s] and kind code; a plain
    link has no switch tiers (``L_TIER1`` = ``L_TIER2`` = inf, oversubscription 1, no hop
    latency, no in-network reduction), a fabric of ``llm_fabrics.csv`` (option
    ``fabric_tiers``) its tiers (``fabric_link_row``)."""
    table = np.zeros((len(names), L.N_LINK_FIELDS))
    table[:, [L.L_TIER1, L.L_TIER2]] = np.inf
    table[:, [L.L_OVERSUB1, L.L_OVERSUB2]] = 1.0
    for i, name in enumerate(names):
        if name not in cats.links.names:
            table[i] = fabric_link_row(cats, name, eff)
            continue
        row = cats.links.row(name)
        nominal = float(row["nominal_GB_per_s"]) * 1e9
        table[i, L.L_BW] = nominal * eff.link_for(name, row["kind"], float(row["efficiency"]))
        table[i, L.L_LATENCY] = float(row["latency_us"]) * 1e-6
        table[i, L.L_KIND] = LINK_KIND_CODES.get(row["kind"], L.LINK_NETWORK)
        if row["kind"] != "none" and not table[i, L.L_BW] > 0:
            raise PaigridError(f"link {name!r} in {cats.links.origin} has no positive bandwidth.")
    return table


def fabric_link_row(cats: Catalogues, name: str, eff: Efficiency) -> np.ndarray:
    """The link-table row of the fabric ``name`` of ``llm_fabrics.csv`` as the data-parallel
    kernel reads it (option ``fabric_tiers``): bytes/s per NIC (nominal x efficiency, or the
    calibration's link efficiency for its kind), latency [s] through one switch, kind network,
    the GPUs below a tier-1 and a tier-2 switch group (inf above the fabric's tiers: one tier
    has no tier-1 uplinks, two no tier-2 ones), their oversubscriptions, s per extra hop and 1
    where the switches reduce (SHARP)."""
    from paigrid.llm.fabrics import fabric

    f = fabric(name, cats, eff)
    row = np.zeros(L.N_LINK_FIELDS)
    row[L.L_BW] = f.nic_GB_per_s * 1e9 * f.efficiency
    row[L.L_LATENCY] = f.latency_us * 1e-6
    row[L.L_KIND] = L.LINK_NETWORK
    row[L.L_TIER1] = f.tier1_GPUs if f.tiers >= 2 else np.inf
    row[L.L_TIER2] = f.tier2_GPUs if f.tiers >= 3 else np.inf
    row[L.L_OVERSUB1] = f.oversubscription_tier1
    row[L.L_OVERSUB2] = f.oversubscription_tier2
    row[L.L_HOP_LATENCY] = f.hop_latency_us * 1e-6
    row[L.L_IN_NETWORK] = 1.0 if f.sharp else 0.0
    return row


def fits_matrix(cats: Catalogues, gpus: list[str], intra: list[str]) -> np.ndarray:
    """(G, I) uint8: 1 where the intra-server link can connect the GPU (``fits_gpus`` column)."""
    fits = np.zeros((len(gpus), len(intra)), dtype=np.uint8)
    for i, link in enumerate(intra):
        rule = cats.links.row(link)["fits_gpus"].strip()
        for gi, gpu in enumerate(gpus):
            if rule.startswith("pcie>="):
                fits[gi, i] = cats.gpus.number(gpu, "pcie_gen") >= float(rule[len("pcie>=") :])
            else:
                fits[gi, i] = gpu in {cats.gpus.resolve(n) for n in rule.split(";") if n.strip()}
    return fits


def option_vector(options: Options) -> np.ndarray:
    """The global options array of the kernel: every options-vector slot of the declared
    data-parallel options (``inputs.options.DP_OPTIONS``: slot and encoding), and the framework
    workspace per GPU (``model_defaults.toml``, not an option)."""
    vec = np.zeros(L.N_OPTIONS)
    for slot, value in declared_option_vector("dp", options, L, {"ps_host_bandwidth": ps_host_bandwidth()}):
        vec[slot] = value
    vec[L.O_WORKSPACE] = workspace_bytes()
    return vec


def _unique(names: list[str], dim: str) -> list[str]:
    if len(set(names)) != len(names):
        raise PaigridError(f"the {dim} values name the same entry twice.")
    return names


def resolve_dp_network(cats: Catalogues, name: str, fabric_tiers: bool) -> str:
    """The catalogue name of ``name`` (a name or alias) as a network of the data-parallel grid:
    a network link of links.csv, or, with the option ``fabric_tiers`` true, also a fabric of
    ``llm_fabrics.csv`` (its canonical name; the link table then carries its switch tiers).
    One sentence for a name that is neither, or an intra-server link."""
    if fabric_tiers:
        from paigrid.llm.fabrics import is_fabric, load_fabrics

        if is_fabric(name):
            return load_fabrics().resolve(name)
    return resolve_link(cats, name, "network")


def build_grid(spec: SweepSpec, jobs: list[Job], cats: Catalogues, eff: Efficiency) -> Grid:
    """Resolve the spec's dimension values against the catalogues and build the tables."""
    if not jobs:
        raise PaigridError("the sweep has no jobs.")
    arch = list(spec.arch or L.ARCH_NAMES)
    gpus = _unique([cats.gpus.resolve(n) for n in (spec.gpu or cats.gpus.default_names)], "gpu")
    intra = _unique(
        [resolve_link(cats, n, "intra") for n in (spec.intra or cats.links_of_scope("intra", default_only=True))],
        "intra",
    )
    network = _unique(
        [
            resolve_dp_network(cats, n, spec.options.fabric_tiers)
            for n in (spec.network or cats.links_of_scope("network", default_only=True))
        ],
        "network",
    )
    defaults = cats.precisions.default_names
    known_prec = [p for p in PRECISIONS_ORDER if p in defaults] + [p for p in defaults if p not in PRECISIONS_ORDER]
    precision = _unique([cats.precisions.resolve(n) for n in (spec.precision or known_prec)], "precision")
    if spec.n_gpu == CURRENT:
        missing = [j.name for j in jobs if j.current is None]
        if missing:
            raise PaigridError(
                f'n_gpu = "current" needs a current configuration for every job; {missing[0]!r} has none.'
            )
        n_gpu = [0]
    elif isinstance(spec.n_gpu, str):
        raise PaigridError(f'n_gpu must be a list of GPU counts or "current", not {spec.n_gpu!r}.')
    else:
        n_gpu = list(spec.n_gpu or DEFAULT_N_GPU)
    gpu_table, peak, prec = gpu_tables(cats, gpus, precision, eff)
    class_peak = class_tables(cats, gpus, precision, eff, gpu_table) if spec.options.model == "pai-v2" else None
    return Grid(
        jobs=jobs,
        arch=arch,
        gpu=gpus,
        n_gpu=n_gpu,
        intra=intra,
        network=network,
        precision=precision,
        arch_codes=np.array([L.ARCH_NAMES.index(a) for a in arch], dtype=np.int64),
        gpu_table=gpu_table,
        peak=peak,
        prec_table=prec,
        intra_table=link_table(cats, intra, eff),
        intra_fits=fits_matrix(cats, gpus, intra),
        network_table=link_table(cats, network, eff),
        options=option_vector(spec.options),
        cats=cats,
        efficiency=eff,
        class_peak=class_peak,
        model_options=spec.options,
        n_counts=len(n_gpu),
    )
