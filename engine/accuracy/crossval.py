"""Cross-validated accuracy: the model judged only on rows its calibration never saw.

Two fold kinds: leave-one-workload-out (each catalogue workload in turn is held out, the rest
calibrate) and leave-one-generation-out (each GPU generation in turn).  Every held-out row is
predicted by the calibration fitted on the other folds, so pooling the folds gives one honest
prediction per row.  Uncalibrated rows are the defaults, except that the defaults which were
themselves fitted to the public rows (``FITTED_DEFAULTS``: their source in
``class_efficiency.csv`` says FITTED) are refitted on each fold's training rows, so that no
default is judged on the rows that fixed it.  The metric is |predicted / measured - 1|,
summarised per group (one GPU, several GPUs in one server, several servers) by its median and
mean.

The fit is ``calibrate.fit`` (what ``paigrid calibrate`` runs) with the model's default
parameter groups, except that pai-v1 fits only its FLOP efficiencies (its link efficiencies
are often undetermined by a fold's rows, and ``fit`` refuses those); a fold whose fit is
refused is predicted with the defaults and says so (``refused``).  Bounds are allowed (the
protocol reports what a fit does, and counts the parameters it put on a bound).

``bands`` turns the pooled calibrated residuals into the uncertainty of a prediction: per group,
the 68th percentile of |predicted / measured - 1| (about one standard deviation).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import replace

from paigrid.accuracy.calibrate import fit
from paigrid.accuracy.measurements import GROUPS, Measurement
from paigrid.accuracy.scalingfit import SCALING_GRIDS, best_point, scaling_grid
from paigrid.accuracy.validate import validate
from paigrid.errors import PaigridError
from paigrid.inputs.catalog import Catalogues
from paigrid.inputs.efficiency import defaults
from paigrid.inputs.spec import Options

#: fold kind -> the row attribute whose values are the folds
FOLDS = {"workload": "leave-one-workload-out", "generation": "leave-one-generation-out"}
#: the fold kinds of the public data-parallel rows (``measured_public_v2.csv``): by workload, by GPU
#: and by source (the id prefix, ``Measurement.source_id``)
V2_FOLDS = {"workload": "leave-one-workload-out", "gpu": "leave-one-GPU-out", "source_id": "leave-one-source-out"}
#: parameter groups of the fits, per model (None: the model's defaults)
FIT_GROUPS = {"pai-v1": ("flop",), "pai-v2": None}
#: pai-v2 also judged with one correction per workload on top of its default groups
#: (``calibrate --fit class,hbm,launch,link,workload``): a held-out workload has none, so
#: leave-one-workload-out shows what the shared groups transfer to a new workload and
#: leave-one-generation-out what a workload's correction carries to a GPU generation it was not
#: fitted on
WITH_WORKLOAD = ("class", "hbm", "launch", "link", "workload")
#: parameter groups whose shipped defaults were fitted to the public rows, per model: refitted per
#: fold in the uncalibrated protocol
FITTED_DEFAULTS = {"pai-v1": (), "pai-v2": ("launch",)}
#: how pai-v2 parameters are shared per fold kind: a held-out generation can only use values
#: shared across generations, a held-out workload those of its own generation
SHARE = {"workload": "generation", "generation": "all", "gpu": "generation", "source_id": "generation"}
#: the quantile of |error| that ``bands`` reports (about one standard deviation)
BAND_QUANTILE = 0.68


def held_out(
    rows: list[Measurement],
    cats: Catalogues,
    options: Options,
    fold_by: str,
    calibrated: bool = True,
    groups: tuple[str, ...] | None = None,
    shrinkage: float | str = 0.0,
    allow_bounds: bool = True,
    linearisation=None,
    max_folds: int | None = None,
) -> tuple[list[dict], list[dict]]:
    """Each row's validate result (``validate.validate`` row dict plus ``fold``) predicted by a
    calibration fitted on the rows of the other ``fold_by`` values (``workload`` or
    ``generation``), or by the defaults when not ``calibrated`` (the ``FITTED_DEFAULTS`` of the
    model refitted on those rows; ``groups``: other parameter groups of the calibrated fit than
    the model's ``FIT_GROUPS``); and one entry per fold with
    its value, training and test row counts, the fitted parameters ({name: value}), those on a
    bound and, when the fit was refused, the reason (that fold then uses the defaults).
    ``fold_by`` may also be a ``V2_FOLDS`` kind (``gpu``, ``source_id``); ``shrinkage``: the
    calibrated fit's (``calibrate.fit``; ``"cv"`` chooses it on each fold's training rows);
    ``allow_bounds``: the fit's (False: a parameter fitted onto a bound goes back to its default,
    as ``paigrid calibrate`` does by default); ``linearisation``: ``calibrate.linearise`` of the
    rows (or more), which each fold's fit slices to its training rows instead of computing it;
    ``max_folds``: with more ``fold_by`` values than this, the values (sorted) are dealt
    round-robin into that many folds, each holding out every row of its values (``fold_values``)."""
    if fold_by not in FOLDS and fold_by not in V2_FOLDS:
        raise PaigridError(f"folds are by {' or '.join({**FOLDS, **V2_FOLDS})}, not {fold_by!r}.")
    base = defaults()
    out, folds = [], []
    for value, members in fold_values(sorted({getattr(r, fold_by) for r in rows}), max_folds):
        test = [r for r in rows if getattr(r, fold_by) in members]
        train = [r for r in rows if getattr(r, fold_by) not in members]
        eff, fold_options = base, options
        entry = {
            "fold": value,
            "train_rows": len(train),
            "test_rows": len(test),
            "parameters": {},
            "at_bound": [],
            "refused": "",
        }
        fitted = (groups or FIT_GROUPS[options.model]) if calibrated else FITTED_DEFAULTS[options.model]
        if train and (calibrated or fitted):
            try:
                result = fit(
                    train,
                    base,
                    options,
                    fitted,
                    cats=cats,
                    allow_bounds=allow_bounds,
                    share=SHARE[fold_by],
                    shrinkage=shrinkage if calibrated else 0.0,
                    linearisation=linearisation if calibrated else None,
                )
            except PaigridError as exc:
                entry["refused"] = str(exc)
            else:
                eff = base.overridden(result.calibration())
                fold_options = result.fitted_options(options)
                entry["parameters"] = {p.name: p.value for p in result.parameters}
                entry["at_bound"] = [p.name for p in result.parameters if p.at_bound]
                entry["shrinkage"] = result.notes.get("shrinkage", 0.0)
        for row in validate(test, eff, fold_options, cats)["rows"]:
            out.append({**row, "fold": value})
        folds.append(entry)
    return out, folds


def fold_values(values: list, max_folds: int | None = None) -> list[tuple[str, set]]:
    """(label, the values it holds out) per fold: one value each, or, with more values than
    ``max_folds``, the sorted values dealt round-robin into ``max_folds`` folds (deterministic;
    every row of a value stays in one fold, so no fold's fit sees a row of a value it judges)."""
    if max_folds is None or len(values) <= max_folds:
        return [(str(v), {v}) for v in values]
    dealt = [values[k::max_folds] for k in range(max_folds)]
    return [(", ".join(str(v) for v in members), set(members)) for members in dealt]


def group_summary(results: list[dict]) -> dict[str, dict]:
    """Per group of ``measurements.GROUPS``: count, median and mean of |error| (None when empty)."""
    out = {}
    for group in GROUPS:
        errors = [abs(r["error"]) for r in results if r["group"] == group and math.isfinite(r["error"])]
        out[group] = {
            "count": len(errors),
            "median_abs_error": statistics.median(errors) if errors else None,
            "mean_abs_error": statistics.fmean(errors) if errors else None,
        }
    return out


def protocol(
    rows: list[Measurement],
    cats: Catalogues | None = None,
    models=("pai-v1", "pai-v2"),
    options: Options | None = None,
    shrinkage: float | str = "cv",
) -> dict:
    """The whole protocol: for each model, each fold kind, uncalibrated and calibrated (pai-v2
    also "calibrated + workload", ``WITH_WORKLOAD``), the held-out rows, the folds and the
    per-group summary.  The calibrated fits are ``paigrid calibrate``'s default (``shrinkage``
    "cv": the strength chosen inside each fold's training rows).  Returns
    ``{model: {fold_by: {"uncalibrated": {...}, "calibrated": {...}, ...}}}``, each holding
    ``rows``, ``folds`` and ``summary`` (``group_summary``)."""
    cats = cats or Catalogues.load()
    options = options or Options()
    out: dict = {}
    for model in models:
        model_options = replace(options, model=model)
        out[model] = {}
        for fold_by in FOLDS:
            out[model][fold_by] = {}
            variants: list[tuple[str, bool, tuple[str, ...] | None]] = [
                ("uncalibrated", False, None),
                ("calibrated", True, None),
            ]
            if model == "pai-v2":
                variants.append(("calibrated + workload", True, WITH_WORKLOAD))
            for label, calibrated, groups in variants:
                results, folds = held_out(rows, cats, model_options, fold_by, calibrated, groups, shrinkage)
                out[model][fold_by][label] = {"rows": results, "folds": folds, "summary": group_summary(results)}
    return out


def bands(results: list[dict]) -> dict[str, float]:
    """Per group: the ``BAND_QUANTILE`` quantile of |predicted / measured - 1| of held-out rows
    (NaN for a group without rows): the relative uncertainty of a prediction in that group."""
    out = {}
    for group in GROUPS:
        errors = sorted(abs(r["error"]) for r in results if r["group"] == group and math.isfinite(r["error"]))
        if not errors:
            out[group] = math.nan
            continue
        position = BAND_QUANTILE * (len(errors) - 1)
        low = int(math.floor(position))
        high = min(low + 1, len(errors) - 1)
        out[group] = errors[low] + (errors[high] - errors[low]) * (position - low)
    return out


# --- the scaling rows: scaling-loss options fitted on rows left out of the judgement ------------------
#: fold kinds of the scaling rows -> the row attribute whose values are the folds
SCALING_FOLDS = {"workload": "leave-one-workload-out", "id": "leave-one-row-out"}


def scaling_held_out(
    rows: list[Measurement], cats: Catalogues, options: Options, fitted: tuple[str, ...], fold_by: str
) -> tuple[list[dict], list[dict]]:
    """Each scaling row predicted with the ``fitted`` options (``SCALING_GRIDS``) least-squares
    fitted on the other rows of its fold kind (``workload``: the rows of the other workloads;
    ``id``: every other row) by ``scalingfit.best_point``, as ``paigrid calibrate`` fits them
    on a scaling file (``scalingfit.fit_scaling``, which also turns ``bucket_overlap`` on), the
    rest of ``options`` unchanged; with nothing fitted, the options as given.  Returns (one dict
    per row: ``id``, ``workload``, ``fold``, ``predicted`` - ``measured`` as ``error`` in points
    as a fraction, ``fitted`` {option: value}) and (one dict per fold: its value, training and
    test row counts, the fitted values and whether one lies on the end of its grid)."""
    if fold_by not in SCALING_FOLDS:
        raise PaigridError(f"scaling folds are by {' or '.join(SCALING_FOLDS)}, not {fold_by!r}.")
    grid = scaling_grid(rows, cats, options, fitted)
    out, folds = [], []
    for value in sorted({getattr(r, fold_by) for r in rows}):
        test = [r for r in rows if getattr(r, fold_by) == value]
        train = {r.id for r in rows if getattr(r, fold_by) != value}
        point, _ = best_point(grid, train)
        errors = next(e for p, e in grid if p == point)
        at_end = [name for name in fitted if point[name] in (SCALING_GRIDS[name][0], SCALING_GRIDS[name][-1])]
        folds.append(
            {"fold": value, "train_rows": len(train), "test_rows": len(test), "fitted": point, "at_grid_end": at_end}
        )
        out += [
            {"id": r.id, "workload": r.workload, "fold": value, "error": errors[r.id], "fitted": point} for r in test
        ]
    order = {r.id: i for i, r in enumerate(rows)}
    return sorted(out, key=lambda r: order[r["id"]]), folds
