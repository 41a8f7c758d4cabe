"""Jobs: the workloads of a sweep, each a catalogue model with a batch, options and a current configuration.

Jobs come from the built-in workload catalogue, from a list of its names, from a user CSV in the
catalogue's schema, or from a population CSV (``job`` and ``model`` columns, see
``datasets/README.md``).  Columns named like the per-job options (``spec.JOB_OPTIONS``) and
``batch`` override the spec's values for that row; ``current_*`` columns give the job's current
configuration.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from paigrid.errors import PaigridError
from paigrid.inputs.catalog import Catalogue, Catalogues, csv_table, parse_csv, to_float
from paigrid.inputs.spec import JOB_OPTIONS, MAX_N_GPU, Options, SweepSpec, coerce_options
from paigrid.kernels.layout import ARCH_NAMES
from paigrid.userfiles import read_text

CURRENT_COLUMNS = ("current_arch", "current_gpu", "current_n_gpu", "current_intra",
                   "current_network", "current_precision")


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
    #: name), ``attention`` (eager | fused), ``execution`` (eager | graphs)
    variant: dict[str, str] = field(default_factory=dict)


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
        raise PaigridError(f"{origin}: the current configuration needs every current_* column; "
                           f"{', '.join(empty)} is empty.")
    arch = cells["current_arch"]
    if arch not in ARCH_NAMES:
        raise PaigridError(f"{origin}: unknown current_arch {arch!r}; known: {', '.join(ARCH_NAMES)}.")
    n = to_float(cells["current_n_gpu"], origin, "current_n_gpu")
    if not (1 <= n <= MAX_N_GPU and n == int(n)):
        raise PaigridError(f"{origin}: current_n_gpu must be a whole number from 1 to {MAX_N_GPU}, "
                           f"not {cells['current_n_gpu']!r}.")
    with _located(origin):
        return {"arch": arch, "gpu": cats.gpus.resolve(cells["current_gpu"]), "n_gpu": int(n),
                "intra": resolve_link(cats, cells["current_intra"], "intra"),
                "network": resolve_link(cats, cells["current_network"], "network"),
                "precision": cats.precisions.resolve(cells["current_precision"])}


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
    return batch


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
        return [_catalogue_job(row, cats, spec.options, f"{path} row {row['name']!r}")
                for row in cats.workloads.rows], cats
    if len(set(names)) != len(names):
        raise PaigridError(f"{spec.origin}: a workload is named twice.")
    return [_catalogue_job(cats.workloads.row(n), cats, spec.options, f"workload {n!r}") for n in names], cats


def _catalogue_job(row: dict[str, str], cats: Catalogues, options: Options, origin: str) -> Job:
    check_workload(cats.workloads, row["name"], cats)
    return Job(row["name"], row["name"], _batch(row, row, origin), _row_options(row, options, origin),
               _row_current(row, cats, origin))


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
        jobs.append(Job(name, model, _batch(row, cats.workloads.row(model), origin), option_cells[option_key],
                        current_cells[current_key], extra))
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
