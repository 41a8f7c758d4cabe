"""Jobs: the workloads of a sweep, each a catalogue model with a batch, options and a current configuration.

Jobs come from the built-in workload catalogue, from a list of its names, from a user CSV in the
catalogue's schema, or from a population CSV (``job`` and ``model`` columns, see
``datasets/README.md``).  A job is of one of two families: a data-parallel workload (``Job``,
the workload catalogue) or a transformer (``LlmJob``, ``datasets/llm_models.csv``, or a user
models CSV in its columns, told by its header).  A list of names may mix them (``split_jobs``);
a name that both catalogues hold is refused as ambiguous.

Columns named like the per-job options (``spec.JOB_OPTIONS``) and
``batch`` override the spec's values for that row; ``current_*`` columns give the job's current
configuration.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from paigrid.errors import PaigridError
from paigrid.files import read_text
from paigrid.inputs.catalog import Catalogue, Catalogues, csv_table, parse_csv, to_float
from paigrid.inputs.options import check_column
from paigrid.inputs.spec import JOB_OPTIONS, MAX_N_GPU, Options, SweepSpec, coerce_options
from paigrid.kernels.dp_columns import ARCH_NAMES

CURRENT_COLUMNS = (
    "current_arch",
    "current_gpu",
    "current_n_gpu",
    "current_intra",
    "current_network",
    "current_precision",
)


@dataclass
class Job:
    """One training job: a workload model at a per-GPU batch, its options and current configuration."""

    name: str
    model: str
    batch: float
    options: dict[str, float]
    current: dict[str, object] | None = None
    extra: dict[str, str] = field(default_factory=dict)
    #: pai-v2 choices of this job that override the sweep's: ``optimizer`` (an optimizers.csv
    #: name), ``attention`` (eager | fused), ``execution`` (eager | graphs), ``memory_format``
    #: (channels_last | nchw)
    variant: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class LlmJob:
    """One LLM-family job: its name and the transformer it trains (at the model's global batch),
    and, from a population row, the design it runs on today (``current``: ``gpu``, ``n_gpu``,
    ``network``, ``precision``; its layout is the sweep's to search), None where not given."""

    name: str
    model: object  # a ``paigrid.llm.models.Transformer``
    current: dict | None = field(default=None, compare=False, hash=False)


def job_family(name: str, cats: Catalogues, llm_catalogue=None) -> tuple[str, str]:
    """(family, canonical name) of a job name: ``("dp", workload)`` for a workload of the
    catalogue, ``("llm", model)`` for a model of ``llm_models.csv`` (or ``llm_catalogue``); a
    name in both is ambiguous and a name in neither unknown, each one sentence."""
    from paigrid.llm.models import load_catalogue

    llm_catalogue = llm_catalogue or load_catalogue()
    found = {}
    errors = []
    for family, catalogue in (("dp", cats.workloads), ("llm", llm_catalogue)):
        try:
            found[family] = catalogue.resolve(name)
        except PaigridError as exc:
            errors.append(str(exc))
    if len(found) == 2:
        raise PaigridError(
            f"{name!r} is ambiguous: it is the workload {found['dp']!r} of {cats.workloads.origin} "
            f"and the LLM model {found['llm']!r} of {llm_catalogue.origin}; rename one of them."
        )
    if not found:
        raise PaigridError(f"{errors[0].rstrip('.')}; nor is it an LLM model of {llm_catalogue.origin}.")
    family, canonical = next(iter(found.items()))
    return family, canonical


#: the columns that make a CSV an LLM models catalogue (``llm_models.csv``'s required shape columns)
LLM_MODEL_COLUMNS = ("name", "layers", "hidden", "heads", "ffn_hidden", "vocab", "seq_len")


def split_jobs(spec: SweepSpec, cats: Catalogues) -> tuple[list[Job], list[LlmJob], Catalogues]:
    """The spec's jobs of each family: (data-parallel jobs, LLM jobs, the catalogues).  Names
    of either family may mix; a CSV is an LLM models catalogue when its header has
    ``LLM_MODEL_COLUMNS``, else a workloads or population file (whose rows may name LLM models
    in their ``model`` column: LLM jobs named by their ``job`` column)."""
    from paigrid.llm.models import load_catalogue, model

    if isinstance(spec.workloads, list):
        llm_catalogue = load_catalogue()
        dp_names, llm = [], []
        for name in spec.workloads:
            family, canonical = job_family(name, cats, llm_catalogue)
            if family == "dp":
                dp_names.append(canonical)
            else:
                llm.append(LlmJob(canonical, model(canonical, llm_catalogue)))
        names = dp_names + [j.name for j in llm]
        if len(set(names)) != len(names):
            raise PaigridError(f"{spec.origin}: a workload is named twice.")
        return (
            [_catalogue_job(cats.workloads.row(n), cats, spec.options, f"workload {n!r}") for n in dp_names],
            llm,
            cats,
        )
    if isinstance(spec.workloads, str):
        path = Path(spec.workloads)
        header, rows = csv_table(read_text(path, "the workloads file"), str(path), "a workloads or population file")
        if all(c in header for c in LLM_MODEL_COLUMNS) and "job" not in header:
            llm_catalogue = load_catalogue(path)
            return [], [LlmJob(n, model(n, llm_catalogue)) for n in llm_catalogue.names], cats
        if "model" in header and "job" in header:
            llm_catalogue = load_catalogue()
            families = {}  # each distinct model cell resolved once
            for _, r in rows:
                cell = r.get("model", "")
                if cell not in families:
                    families[cell] = _is_llm_model(cell, cats, llm_catalogue)
            llm_rows = [(n, r) for n, r in rows if families[r.get("model", "")]]
            if llm_rows:
                llm = [
                    LlmJob(
                        r["job"].strip(), model(r["model"], llm_catalogue), _llm_current(r, cats, f"{path} line {n}")
                    )
                    for n, r in llm_rows
                ]
                dp_rows = [(n, r) for n, r in rows if not families[r.get("model", "")]]
                dp = _population_jobs(dp_rows, header, path, spec.options, cats) if dp_rows else []
                names = [j.name for j in dp] + [j.name for j in llm]
                if len(set(names)) != len(names) or not all(names):
                    raise PaigridError(f"{path}: job names must be non-empty and unique.")
                return dp, llm, cats
            # data-parallel rows only: the rows read above (load_jobs would read and parse the file again)
            return _population_jobs(rows, header, path, spec.options, cats), [], cats
    jobs, cats = load_jobs(spec, cats)
    return jobs, [], cats


def _is_llm_model(name: str, cats: Catalogues, llm_catalogue) -> bool:
    """Whether a population row's model is an LLM model (ambiguous and unknown names are errors)."""
    try:
        cats.workloads.resolve(name)
    except PaigridError:
        return job_family(name, cats, llm_catalogue)[0] == "llm"
    job_family(name, cats, llm_catalogue)  # a workload that is also an LLM model: ambiguous
    return False


def _row_options(row: dict[str, str], base: Options, origin: str) -> dict[str, float]:
    values = {}
    for key in JOB_OPTIONS:
        cell = (row.get(key) or "").strip()
        if cell:
            values[key] = to_float(cell, origin, key)
    merged = {key: getattr(base, key) for key in JOB_OPTIONS}
    merged.update(coerce_options(values, origin))
    return merged


def _row_current(row: dict[str, str], cats: Catalogues, origin: str) -> dict[str, object] | None:
    cells = {c: (row.get(c) or "").strip() for c in CURRENT_COLUMNS}
    if not any(cells.values()):
        return None
    empty = [c for c, v in cells.items() if not v]
    if empty:
        raise PaigridError(
            f"{origin}: the current configuration needs every current_* column; {', '.join(empty)} is empty."
        )
    arch = cells["current_arch"]
    if arch not in ARCH_NAMES:
        raise PaigridError(f"{origin}: unknown current_arch {arch!r}; known: {', '.join(ARCH_NAMES)}.")
    n = to_float(cells["current_n_gpu"], origin, "current_n_gpu")
    if not (1 <= n <= MAX_N_GPU and n == int(n)):
        raise PaigridError(
            f"{origin}: current_n_gpu must be a whole number from 1 to {MAX_N_GPU}, not {cells['current_n_gpu']!r}."
        )
    with _located(origin):
        return {
            "arch": arch,
            "gpu": cats.gpus.resolve(cells["current_gpu"]),
            "n_gpu": int(n),
            "intra": resolve_link(cats, cells["current_intra"], "intra"),
            "network": resolve_link(cats, cells["current_network"], "network"),
            "precision": cats.precisions.resolve(cells["current_precision"]),
        }


def _llm_current(row: dict[str, str], cats: Catalogues, origin: str) -> dict[str, object] | None:
    """An LLM population row's design of today: its GPU, GPU count, network (a link or a fabric)
    and precision; the architecture and intra link columns say nothing of a layout and are not
    read.  None when the row gives no current configuration."""
    from paigrid.llm.fabrics import resolve_network

    cells = {c: (row.get(f"current_{c}") or "").strip() for c in ("gpu", "n_gpu", "network", "precision")}
    if not any(cells.values()):
        return None
    empty = [f"current_{c}" for c, v in cells.items() if not v]
    if empty:
        raise PaigridError(f"{origin}: the LLM job's current design needs {', '.join(empty)}.")
    n = to_float(cells["n_gpu"], origin, "current_n_gpu")
    if not (1 <= n <= MAX_N_GPU and n == int(n)):
        raise PaigridError(
            f"{origin}: current_n_gpu must be a whole number from 1 to {MAX_N_GPU}, not {cells['n_gpu']!r}."
        )
    with _located(origin):
        return {
            "gpu": cats.gpus.resolve(cells["gpu"]),
            "n_gpu": int(n),
            "network": resolve_network(cells["network"], cats),
            "precision": cats.precisions.resolve(cells["precision"]),
        }


@contextmanager
def _located(origin: str):
    """Prefix an error about a name (an unknown GPU, link, model) with where it was read."""
    try:
        yield
    except PaigridError as exc:
        text = str(exc)
        raise PaigridError(text if text.startswith(origin) else f"{origin}: {text}") from None


def resolve_link(cats: Catalogues, name: str, scope: str) -> str:
    """Canonical name of an intra-server link (scope ``intra``) or network (``network``)."""
    canonical = cats.links.resolve(name)
    if cats.links.row(canonical)["scope"] != scope:
        what = "an intra-server link" if scope == "intra" else "a network"
        raise PaigridError(f"{name!r} is not {what}; known: {', '.join(cats.links_of_scope(scope))}.")
    return canonical


def _batch(row: dict[str, str], model_row: dict[str, str], origin: str) -> float:
    batch = to_float(row.get("batch", ""), origin, "batch")
    if math.isnan(batch):
        batch = to_float(model_row["default_batch"], origin, "default_batch")
    if not 1 <= batch < math.inf:
        raise PaigridError(f"{origin}: batch must be a finite number of at least 1 sample, not {batch}.")
    return check_column("batch", batch, origin)


def load_jobs(spec: SweepSpec, cats: Catalogues) -> tuple[list[Job], Catalogues]:
    """The jobs a spec names, and the catalogues (with the workload catalogue replaced by a
    user CSV in catalogue schema when the spec's workloads file is one)."""
    if spec.workloads is None:
        names = cats.workloads.names
    elif isinstance(spec.workloads, list):
        names = [cats.workloads.resolve(n) for n in spec.workloads]
    else:
        path = Path(spec.workloads)
        text = read_text(path, "the workloads file")
        header, rows = csv_table(text, str(path), "a workloads or population file")
        if "model" in header:
            return _population_jobs(rows, header, path, spec.options, cats), cats
        cats.workloads = parse_csv(text, "workloads", str(path))
        return [
            _catalogue_job(row, cats, spec.options, f"{path} row {row['name']!r}") for row in cats.workloads.rows
        ], cats
    if len(set(names)) != len(names):
        raise PaigridError(f"{spec.origin}: a workload is named twice.")
    return [_catalogue_job(cats.workloads.row(n), cats, spec.options, f"workload {n!r}") for n in names], cats


def _catalogue_job(row: dict[str, str], cats: Catalogues, options: Options, origin: str) -> Job:
    check_workload(cats.workloads, row["name"], cats)
    return Job(
        row["name"],
        row["name"],
        _batch(row, row, origin),
        _row_options(row, options, origin),
        _row_current(row, cats, origin),
    )


def _population_jobs(rows, header, path: Path, options: Options, cats: Catalogues) -> list[Job]:
    if "job" not in header:
        raise PaigridError(f"{path} has a model column but no job column; a population file needs both.")
    jobs, seen = [], set()
    # Rows repeat a few models, option values and current configurations: each distinct one is
    # resolved and checked once (an error names the first line that has it, as row by row would).
    models: dict[str, str] = {}
    option_cells: dict[tuple, dict[str, float]] = {}
    current_cells: dict[tuple, dict[str, object] | None] = {}
    skip = {"job", "model", "batch", *JOB_OPTIONS, *CURRENT_COLUMNS}
    extra_keys = [k for k in header if k not in skip]
    for line_no, row in rows:
        origin = f"{path} line {line_no}"
        name = row["job"].strip()
        if not name or name in seen:
            raise PaigridError(f"{origin}: job names must be non-empty and unique ({name!r}).")
        seen.add(name)
        model = models.get(row["model"])
        if model is None:
            with _located(origin):
                model = cats.workloads.resolve(row["model"])
            check_workload(cats.workloads, model, cats)
            models[row["model"]] = model
        extra = {k: row[k] for k in extra_keys}
        option_key = tuple(row.get(k) for k in JOB_OPTIONS)
        if option_key not in option_cells:
            option_cells[option_key] = _row_options(row, options, origin)
        current_key = tuple(row.get(k) for k in CURRENT_COLUMNS)
        if current_key not in current_cells:
            current_cells[current_key] = _row_current(row, cats, origin)
        # jobs with the same cells share their (never modified) options and current dicts
        jobs.append(
            Job(
                name,
                model,
                _batch(row, cats.workloads.row(model), origin),
                option_cells[option_key],
                current_cells[current_key],
                extra,
            )
        )
    return jobs


_POSITIVE = ("params_M", "fwd_GFLOP_per_sample")
_NON_NEGATIVE = ("membound_MB_per_sample", "input_MB_per_sample", "activation_MB_per_sample")


def check_workload(catalogue: Catalogue, name: str, cats: Catalogues) -> None:
    """Reject a workload row with a missing, negative or non-finite number."""
    for column in _POSITIVE + _NON_NEGATIVE:
        value = catalogue.number(name, column)
        if not math.isfinite(value) or value < 0 or (column in _POSITIVE and value == 0):
            need = "positive" if column in _POSITIVE else "zero or positive"
            raise PaigridError(f"workload {name!r} in {catalogue.origin}: {column} must be {need}, not {value}.")
    with _located(f"workload {name!r} in {catalogue.origin}"):
        cats.optimizers.resolve(catalogue.row(name)["optimizer"])
