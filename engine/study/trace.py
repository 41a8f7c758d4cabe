"""Import the public Alibaba PAI GPU trace 2020 as a paigrid population.

The trace (``cluster-trace-gpu-v2020`` of github.com/alibaba/clusterdata, CC BY 4.0; Weng et
al., "MLaaS in the Wild", NSDI 2022) is a set of headerless CSV tables. :func:`import_pai_trace`
reads five of them -- ``pai_job_table.csv``, ``pai_task_table.csv``,
``pai_instance_table.csv``, ``pai_group_tag_table.csv``, ``pai_machine_spec.csv`` (columns in
:data:`TABLE_COLUMNS`; a header line is tolerated) -- row by row with :mod:`csv`, keeping only a
few fields per job, and turns every job into one population row (see
:data:`paigrid.study.population.POPULATION_COLUMNS`). The sensor and machine-metric tables are not
needed.

Rules, job by job, in this order (each skip is counted in ``counts``):

1. Status: ``Failed`` jobs are skipped (``skipped_failed``). ``Terminated`` jobs are kept, and
   so are jobs in any other state (``Running``, ``Waiting``, ...): their requested
   configuration is known, and that is all the model needs; they are counted in
   ``kept_not_terminated``. A job name seen twice keeps its first row (``skipped_duplicate``).
2. Tasks: a job with no row in the task table is skipped (``skipped_no_tasks``). A *GPU task*
   is one with ``plan_gpu > 0``; a job without one is CPU-only and skipped
   (``skipped_cpu_only``), and so is a job whose GPU type is ``CPU``.
3. GPUs: ``plan_gpu`` is in percent of one GPU, per instance. Each instance's request is
   rounded UP to whole GPUs (``ceil(plan_gpu / 100)``: 50 -> 1, 100 -> 1, 150 -> 2), because
   the model has no fractional GPUs and a shared GPU is still a whole GPU of hardware; jobs with
   a fractional request are counted in ``fractional_gpu_rounded``. ``current_n_gpu`` = sum
   over GPU tasks of ``inst_num`` x that (an empty ``inst_num`` counts as 1).
4. GPU type: the ``gpu_type`` of the job's GPU tasks; when they disagree, the type that carries
   the most GPUs (first seen on a tie). When no GPU task names a type, the type of the machines
   its instances ran on (instance table -> machine table; most common) is used and counted in
   ``gpu_type_from_machine``. The type is mapped to a catalogue GPU by
   :data:`GPU_TYPE_TO_CATALOGUE`; a type not in it (or none at all) is skipped
   (``skipped_unknown_gpu``).
5. Architecture (:func:`job_arch`): a task named ``ps`` plus any other task -> ``ps-worker``;
   otherwise one GPU instance with one GPU -> ``1w1g``; one instance with several GPUs ->
   ``allreduce-local`` when a GPU task's name contains one of :data:`ALLREDUCE_MARKERS`
   (``horovod``, ``mpi``, ``nccl``, ``allreduce``, case-insensitive), else ``1wng``; several
   GPU instances without ``ps`` -> ``allreduce-cluster``.
6. Server: ``gpus_per_node`` = the most common ``cap_gpu`` of machines of that ``gpu_type`` in
   the machine table (the larger on a tie; :data:`FALLBACK_GPUS_PER_NODE` = 8, the paper's
   server, if the type has no machine, counted in ``gpus_per_node_default``). A job whose
   configuration (rules 5-8) the model cannot run -- the kernel's ``invalid_reason`` is not 0,
   through :func:`paigrid.predict.predict_configs` -- is skipped (``skipped_inconsistent``): in
   practice a single-instance job asking for more GPUs than its server has, which cannot have
   run on one machine.  So is a job of more than 2**31 - 1 GPUs or with an empty name, which
   the population reader would refuse.
7. Model: the ``workload`` of the job's ``inst_id`` in the group tag table, mapped by
   :data:`WORKLOAD_TO_MODEL` to the workload of its zoo family (a workload that is already a
   catalogue name is kept as is); no tag or an unmapped one gives the default family's workload
   (``default_family``, :func:`default_model`; :data:`DEFAULT_MODEL` unless chosen), counted in
   ``model_default`` (``model_from_tag`` otherwise) and marked in the row's ``source``
   (:data:`SOURCE_DEFAULTED`), so the report of a cube swept from the population counts them.
8. Fixed fields: the trace records no precision, intra-server link or network, so every row gets
   ``current_precision`` fp32, ``current_intra`` pcie3 and ``current_network`` eth-25g (the PAI
   server of Wang et al.: two PCIe 3.0 trees, one 25 GbE NIC), an empty ``batch`` (model
   default) and ``source`` ``pai-trace-2020`` (``pai-trace-2020 (default family)`` under rule 7).
   The job id is the trace's ``job_name``.
"""

from __future__ import annotations

import csv
import functools
import io
import math
import os
from collections import Counter, defaultdict

from paigrid.files import open_input, write_text_atomically
from paigrid.render import CsvWriter
from paigrid.study.population import POPULATION_COLUMNS

TABLE_COLUMNS = {
    "pai_job_table.csv": ("job_name", "inst_id", "user", "status", "start_time", "end_time"),
    "pai_task_table.csv": (
        "job_name",
        "task_name",
        "inst_num",
        "status",
        "start_time",
        "end_time",
        "plan_cpu",
        "plan_mem",
        "plan_gpu",
        "gpu_type",
    ),
    "pai_instance_table.csv": (
        "job_name",
        "task_name",
        "inst_name",
        "worker_name",
        "inst_id",
        "status",
        "start_time",
        "end_time",
        "machine",
    ),
    "pai_group_tag_table.csv": ("inst_id", "user", "gpu_type_spec", "group", "workload"),
    "pai_machine_spec.csv": ("machine", "gpu_type", "cap_cpu", "cap_mem", "cap_gpu"),
}
"""Column names of the five trace tables read, in file order (the files have no header)."""

GPU_TYPE_TO_CATALOGUE = {
    "P100": "P100-PCIe-16GB",
    "T4": "T4",
    "V100": "V100-SXM2-16GB",
    "V100M32": "V100-SXM2-32GB",
    "MISC": "K80",
}
"""Trace ``gpu_type`` -> catalogue GPU name.

P100 machines have 2 GPUs, so PCIe cards (P100-PCIe-16GB). V100 and V100M32 are 8-GPU machines;
the trace does not say whether they are SXM2 or PCIe: we take the SXM2 16 GB / 32 GB parts
(the catalogue's ``V100`` alias), while the intra link stays pcie3 (rule 8 of the module
docstring). MISC groups older 8-GPU machines (K40m, K80, M60): K80 is the one in the catalogue.
``CPU`` is not a GPU type (CPU-only job); any other value is an unknown type.
"""

WORKLOAD_TO_MODEL = {
    "bert": "bert",
    "resnet": "resnet50",
    "nmt": "nmt",
    "ctr": "multi-interests",
    "graphlearn": "gcn",
    "inception": "inception-v3",
    "vgg": "vgg16",
    "transformer": "transformer",
    "xlnet": "transformer-xl-base",
    "gpt": "gpt2-small",
    "speech": "speech",
    "asr": "speech",
    "rl": "a3c",
    "gan": "wgan",
    "detection": "faster-rcnn",
    "rcnn": "faster-rcnn",
    "ssd": "ssd300",
}
"""Trace group-tag ``workload`` (lower-cased) -> catalogue workload.

Each tag maps to the catalogue model of the same family: resnet -> ResNet-50 (the common
depth), ctr (click-through-rate prediction) -> multi-interests (PAI's recommendation case
study), graphlearn (PAI's graph learning platform) -> gcn, xlnet -> transformer-xl-base (XLNet
is built on Transformer-XL), gpt -> gpt2-small, asr -> speech, rl -> a3c, gan -> wgan,
detection and rcnn -> faster-rcnn, ssd -> ssd300. A tag equal to a catalogue name
(e.g. ``resnet101``) is kept as is; anything else gets :data:`DEFAULT_MODEL`.
"""


@functools.cache
def catalogue_models() -> frozenset[str]:
    """Workload names a tag may name directly: the built-in workload catalogue's."""
    from paigrid.inputs.catalog import load

    return frozenset(load("workloads").names)


DEFAULT_MODEL = "resnet50"
"""Model of a job with no (or an unmapped) workload tag unless the user chooses another family
(``default_family``): ResNet-50, the most common tagged vision model and the one model in both
the PAI case studies and TBD."""

SOURCE_DEFAULTED = "pai-trace-2020 (default family)"
"""``source`` of an imported row whose model is the default family's (no or an unmapped tag),
so that the population -- and the report of a cube swept from it -- can count them."""


@functools.cache
def zoo_families() -> dict[str, tuple[str, ...]]:
    """Zoo family (a ``datasets/zoo`` file name without ``.toml``) -> the workloads it describes,
    in file order."""
    from paigrid.inputs.zoo import builtin_folder, load_zoo

    families = {}
    for path in sorted(builtin_folder().glob("*.toml")):
        families[path.stem] = tuple(w for m in load_zoo(path, f"datasets/zoo/{path.name}") for w in m.workloads)
    return families


def default_model(family: str | None) -> str:
    """The workload a job without a usable tag takes: ``family`` names a zoo family (its first
    workload, e.g. ``resnet`` -> resnet50) or a workload of the catalogue; None gives
    :data:`DEFAULT_MODEL`.  Raises ValueError naming the choices for anything else."""
    if family is None:
        return DEFAULT_MODEL
    name = family.strip()
    families = zoo_families()
    if name in families and families[name]:
        return families[name][0]
    if name in catalogue_models():
        return name
    raise ValueError(
        f"unknown default family {family!r}; a zoo family ({', '.join(families)}) or a workload of the catalogue"
    )


ALLREDUCE_MARKERS = ("horovod", "mpi", "nccl", "allreduce", "all-reduce", "all_reduce")
"""Substrings of a task name (lower-cased) that show an all-reduce framework."""

FALLBACK_GPUS_PER_NODE = 8
"""GPUs per server for a GPU type absent from the machine table (the paper's PAI server)."""

INTRA, NETWORK, PRECISION, SOURCE = "pcie3", "eth-25g", "fp32", "pai-trace-2020"

COUNT_KEYS = (
    "jobs_read",
    "imported",
    "skipped_failed",
    "skipped_cpu_only",
    "skipped_unknown_gpu",
    "skipped_no_tasks",
    "skipped_inconsistent",
    "skipped_duplicate",
    "kept_not_terminated",
    "fractional_gpu_rounded",
    "gpu_type_from_machine",
    "gpus_per_node_default",
    "model_from_tag",
    "model_default",
    "tasks_without_job",
    "arch_1w1g",
    "arch_1wng",
    "arch_allreduce-local",
    "arch_ps-worker",
    "arch_allreduce-cluster",
)
"""Keys of the counts dict, in print order; jobs_read = imported + every skipped_* count."""


def _rows(directory, name):
    """Yield ``(line_number, fields)`` of one trace table, checking the column count."""
    path = os.path.join(directory, name)
    columns = TABLE_COLUMNS[name]
    if not os.path.lexists(path):
        raise ValueError(f"Trace table {name} is missing from {directory}.")
    # a regular file only (a FIFO would never end); a byte-order mark is not part of the first job
    with io.TextIOWrapper(open_input(path, "the trace table"), encoding="utf-8-sig", newline="") as f:
        reader = csv.reader(f)
        first = True
        while True:
            try:
                fields = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                raise ValueError(f"{path} line {reader.line_num + 1}: not a CSV row ({exc}).") from None
            except UnicodeDecodeError:
                raise ValueError(f"{path} line {reader.line_num + 1}: not UTF-8 text.") from None
            if not fields:
                continue
            if any("\0" in x for x in fields):
                raise ValueError(f"{path} line {reader.line_num}: holds a NUL byte; the trace tables are text.")
            if first and [x.strip().lower() for x in fields] == list(columns):
                first = False
                continue
            first = False
            if len(fields) != len(columns):
                raise ValueError(
                    f"{path} line {reader.line_num}: expected {len(columns)} "
                    f"columns ({','.join(columns)}), found {len(fields)}."
                )
            yield reader.line_num, fields


#: the largest count a trace field may hold (GPU counts are stored as 32-bit integers)
MAX_COUNT = 2**31 - 1


def _number(text, path, line, column, empty):
    """Parse a numeric trace field; ``empty`` is returned for an empty or NaN cell.  Counts and
    GPU percentages must be finite, 0 or more and at most ``MAX_COUNT``."""
    text = text.strip()
    if text == "" or text.lower() == "nan":
        return empty
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{path} line {line}: column {column} is not a number: {text!r}.") from None
    if not 0 <= value <= MAX_COUNT:
        raise ValueError(
            f"{path} line {line}: column {column} holds {text}; it must be a number from 0 to {MAX_COUNT}."
        )
    return value


def job_arch(task_names, gpu_task_names, gpu_instances, n_gpu):
    """Training architecture of a job from its tasks (rule 5 of the module docstring).

    ``task_names``: names of all the job's tasks, CPU ones too; ``gpu_task_names``: names of
    its GPU tasks; ``gpu_instances``: instances of its GPU tasks (count); ``n_gpu``: GPUs in
    all (count). Returns one of 1w1g, 1wng, allreduce-local, ps-worker, allreduce-cluster.
    """
    lowered = [t.strip().lower() for t in task_names]
    if "ps" in lowered and any(t != "ps" for t in lowered):
        return "ps-worker"
    if gpu_instances <= 1:
        if n_gpu <= 1:
            return "1w1g"
        marked = any(m in t.lower() for t in gpu_task_names for m in ALLREDUCE_MARKERS)
        return "allreduce-local" if marked else "1wng"
    return "allreduce-cluster"


def _machine_tables(directory):
    """Machine -> gpu_type, and gpu_type -> most common cap_gpu (larger on a tie)."""
    name = "pai_machine_spec.csv"
    path = os.path.join(directory, name)
    machine_type, caps = {}, defaultdict(Counter)
    for line, f in _rows(directory, name):
        gtype = f[1].strip().upper()
        machine_type[f[0].strip()] = gtype
        cap = int(_number(f[4], path, line, "cap_gpu", 0.0))
        if cap > 0:
            caps[gtype][cap] += 1
    per_node = {t: max(c.items(), key=lambda kv: (kv[1], kv[0]))[0] for t, c in caps.items()}
    return machine_type, per_node


def _workload_tags(directory):
    """inst_id -> lower-cased workload tag, for tagged instances only."""
    tags = {}
    for _, f in _rows(directory, "pai_group_tag_table.csv"):
        workload = f[4].strip().lower()
        if workload and workload != "nan":
            tags.setdefault(f[0].strip(), workload)
    return tags


def _model_for(workload):
    """Catalogue model for a lower-cased workload tag, or None when unmapped."""
    if workload in WORKLOAD_TO_MODEL:
        return WORKLOAD_TO_MODEL[workload]
    return workload if workload in catalogue_models() else None


def import_pai_trace(directory, default_family=None):
    """Read the PAI GPU trace 2020 tables in ``directory`` into population rows; a job whose
    tag maps to no family takes ``default_family`` (:func:`default_model`; None: resnet50) and
    the ``source`` :data:`SOURCE_DEFAULTED`.

    Returns ``(rows, counts)``: ``rows`` is a list of dicts keyed by
    :data:`paigrid.study.population.POPULATION_COLUMNS` (one per imported job, in job-table order;
    GPU counts as ints, empty batch); ``counts`` maps every key of :data:`COUNT_KEYS` to a
    number of jobs (``tasks_without_job``: task rows). Rules in the module docstring. Raises
    ValueError naming the file (and line) when a table is missing or a row has the wrong
    number of columns or a non-numeric number.
    """
    directory = os.fspath(directory)
    fallback = default_model(default_family)
    for name in TABLE_COLUMNS:
        if not os.path.lexists(os.path.join(directory, name)):
            raise ValueError(f"Trace table {name} is missing from {directory}.")
    counts = dict.fromkeys(COUNT_KEYS, 0)
    machine_type, per_node = _machine_tables(directory)
    tags = _workload_tags(directory)

    jobs = {}  # job_name -> [inst_id, status]
    for _, f in _rows(directory, "pai_job_table.csv"):
        counts["jobs_read"] += 1
        name = f[0].strip()
        if name in jobs:
            counts["skipped_duplicate"] += 1
        else:
            jobs[name] = [f[1].strip(), f[3].strip()]

    tasks = defaultdict(list)  # job_name -> [(task_name, inst_num, gpus_per_inst, type, frac)]
    task_path = os.path.join(directory, "pai_task_table.csv")
    for line, f in _rows(directory, "pai_task_table.csv"):
        name = f[0].strip()
        if name not in jobs:
            counts["tasks_without_job"] += 1
            continue
        inst = int(round(_number(f[2], task_path, line, "inst_num", 1.0)))
        plan = _number(f[8], task_path, line, "plan_gpu", 0.0)
        per_inst = math.ceil(plan / 100.0 - 1e-9) if plan > 0 else 0
        frac = plan > 0 and abs(plan / 100.0 - round(plan / 100.0)) > 1e-9
        tasks[name].append((f[1].strip(), inst, per_inst, f[9].strip().upper(), frac))

    untyped = {n for n, ts in tasks.items() if not any(t[3] for t in ts if t[2] > 0) and any(t[2] > 0 for t in ts)}
    machine_votes = _instance_gpu_types(directory, untyped, machine_type) if untyped else {}

    candidates = []
    for name, (inst_id, status) in jobs.items():
        made = _job_row(
            name, inst_id, status, tasks.get(name), machine_votes.get(name), per_node, tags, counts, fallback
        )
        if made is not None:
            candidates.append(made)
    rows = []
    for (row, tallies), valid in zip(candidates, _model_valid([row for row, _ in candidates])):
        if not valid:
            counts["skipped_inconsistent"] += 1
            continue
        for key in tallies:
            counts[key] += 1
        rows.append(row)
    return rows, counts


def _model_valid(rows):
    """For each population row, whether the model can run its current configuration (the
    kernel's ``invalid_reason`` is 0), each distinct configuration evaluated once."""
    from paigrid.inputs.catalog import Catalogues
    from paigrid.inputs.efficiency import defaults
    from paigrid.inputs.jobs import Job
    from paigrid.inputs.spec import JOB_OPTIONS, Options
    from paigrid.predict import predict_configs

    if not rows:
        return []
    fields = (
        "model",
        "gpus_per_node",
        "current_arch",
        "current_gpu",
        "current_n_gpu",
        "current_intra",
        "current_network",
        "current_precision",
    )
    keys = list(dict.fromkeys(tuple(row[f] for f in fields) for row in rows))
    cats, options = Catalogues.load(), Options()
    jobs, configs = [], []
    for model, gpn, arch, gpu, n_gpu, intra, network, precision in keys:
        values = {key: getattr(options, key) for key in JOB_OPTIONS}
        values["gpus_per_node"] = gpn
        jobs.append(Job(model, model, cats.workloads.number(model, "default_batch"), values))
        configs.append(
            {"arch": arch, "gpu": gpu, "n_gpu": n_gpu, "intra": intra, "network": network, "precision": precision}
        )
    valid = {
        key: result["valid"] for key, result in zip(keys, predict_configs(jobs, configs, cats, defaults(), options))
    }
    return [valid[tuple(row[f] for f in fields)] for row in rows]


def _instance_gpu_types(directory, job_names, machine_type):
    """job_name -> Counter of machine gpu_types its instances ran on, for ``job_names`` only."""
    votes = defaultdict(Counter)
    for _, f in _rows(directory, "pai_instance_table.csv"):
        name = f[0].strip()
        if name in job_names:
            gtype = machine_type.get(f[8].strip())
            if gtype:
                votes[name][gtype] += 1
    return votes


def _job_row(name, inst_id, status, job_tasks, machine_votes, per_node, tags, counts, fallback=DEFAULT_MODEL):
    """``(row, tallies)`` for a job -- its population row and the count keys to add if the
    model can run it (rule 6) -- or None (with the reason counted) when it is skipped."""
    if status.lower() == "failed":
        counts["skipped_failed"] += 1
        return None
    if not job_tasks:
        counts["skipped_no_tasks"] += 1
        return None
    gpu_tasks = [t for t in job_tasks if t[2] > 0]
    if not gpu_tasks:
        counts["skipped_cpu_only"] += 1
        return None
    type_gpus = Counter()
    for _name, inst, per_inst, gtype, _frac in gpu_tasks:
        if gtype:
            type_gpus[gtype] += inst * per_inst
    from_machine = False
    if type_gpus:
        gtype = max(type_gpus, key=lambda t: type_gpus[t])  # first seen wins a tie
    elif machine_votes:
        gtype = max(machine_votes, key=lambda t: (t != "CPU", machine_votes[t]))
        from_machine = True
    else:
        gtype = ""
    if gtype == "CPU":
        counts["skipped_cpu_only"] += 1
        return None
    if gtype not in GPU_TYPE_TO_CATALOGUE:
        counts["skipped_unknown_gpu"] += 1
        return None

    n_gpu = sum(inst * per_inst for _, inst, per_inst, _, _ in gpu_tasks)
    instances = sum(inst for _, inst, _, _, _ in gpu_tasks)
    if n_gpu < 1:  # every GPU task had inst_num 0
        counts["skipped_cpu_only"] += 1
        return None
    if n_gpu > MAX_COUNT or not name:  # the population reader would refuse the row: never written
        counts["skipped_inconsistent"] += 1
        return None
    arch = job_arch([t[0] for t in job_tasks], [t[0] for t in gpu_tasks], instances, n_gpu)
    gpn = per_node.get(gtype)

    tallies = ["imported", "arch_" + arch]
    if status.lower() != "terminated":
        tallies.append("kept_not_terminated")
    if any(t[4] for t in gpu_tasks):
        tallies.append("fractional_gpu_rounded")
    if from_machine:
        tallies.append("gpu_type_from_machine")
    if gpn is None:
        gpn = FALLBACK_GPUS_PER_NODE
        tallies.append("gpus_per_node_default")
    model = _model_for(tags.get(inst_id, ""))
    tallies.append("model_from_tag" if model else "model_default")
    return {
        "job": name,
        "model": model or fallback,
        "batch": "",
        "gpus_per_node": gpn,
        "current_arch": arch,
        "current_gpu": GPU_TYPE_TO_CATALOGUE[gtype],
        "current_n_gpu": n_gpu,
        "current_intra": INTRA,
        "current_network": NETWORK,
        "current_precision": PRECISION,
        "source": SOURCE if model else SOURCE_DEFAULTED,
    }, tallies


def format_counts(counts) -> str:
    """The importer's counts as printable ``key: value`` lines (jobs; tasks for
    ``tasks_without_job``), in :data:`COUNT_KEYS` order, zero lines left out except the
    first five."""
    keys = [k for k in COUNT_KEYS if k in counts]
    keys += [k for k in counts if k not in COUNT_KEYS]
    lines = [f"{k}: {counts[k]}" for i, k in enumerate(keys) if counts[k] or i < 5]
    return "\n".join(lines)


def write_population(rows, path):
    """Write population ``rows`` to the CSV file ``path`` atomically.

    Columns are :data:`paigrid.study.population.POPULATION_COLUMNS` in order, with a header line;
    values are written with ``str`` (an empty batch stays empty). The data go to a temporary
    file in the same directory, which then replaces ``path`` (``os.replace``), so an
    interrupted write never leaves a file that looks whole. Raises ValueError (and leaves
    ``path`` untouched) if a row does not have exactly those columns.
    """
    buffer = io.StringIO()
    writer = CsvWriter(buffer)
    writer.writerow(POPULATION_COLUMNS)
    for i, row in enumerate(rows):
        if set(row) != set(POPULATION_COLUMNS):
            missing = sorted(set(POPULATION_COLUMNS) - set(row))
            extra = sorted(set(row) - set(POPULATION_COLUMNS))
            raise ValueError(
                f"Population row {i} has the wrong columns (missing "
                f"{missing}, extra {extra}); nothing was written to "
                f"{path}."
            )
        writer.writerow("" if row[c] is None else str(row[c]) for c in POPULATION_COLUMNS)
    write_text_atomically(path, buffer.getvalue())
