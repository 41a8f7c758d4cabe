"""The judgement of the public data-parallel rows: absolute errors per group and fold, and the
relative errors upgrade and architecture answers rest on (``bench/accuracy.py`` writes it).

``uncalibrated`` predicts every row with the shipped defaults (none of which was fitted to these
rows).  ``calibrated`` runs the three fold kinds of ``crossval.V2_FOLDS`` (leave one workload,
one GPU, one source out): each held-out row is predicted by ``paigrid calibrate``'s default fit
(``calibrate.fit`` with ``shrinkage="cv"``: the strength chosen on the fold's training rows) on
the other folds' rows.  ``relative`` turns either set of predictions into the ratio errors of
``accuracy.relative``.
"""

from __future__ import annotations

import math
import statistics

from paigrid.accuracy import relative
from paigrid.accuracy.crossval import V2_FOLDS, group_summary, held_out
from paigrid.accuracy.measurements import Measurement
from paigrid.accuracy.validate import validate
from paigrid.inputs.catalog import Catalogues
from paigrid.inputs.efficiency import defaults
from paigrid.inputs.spec import Options

#: the goals of the public rows: median |error| per group, the largest mean, the ratio median,
#: the share of parameter-server vs all-reduce twins in the right order
GOALS = {
    "single_gpu": 0.10,
    "multi_gpu_one_server": 0.10,
    "multi_server": 0.15,
    "mean": 0.15,
    "ratio": 0.05,
    "ps_order": 0.90,
}


def uncalibrated(rows: list[Measurement], cats: Catalogues, options: Options | None = None) -> list[dict]:
    """``validate.validate`` rows of every row with the shipped defaults."""
    return validate(rows, defaults(), options or Options(), cats)["rows"]


#: folds per fold kind of the calibrated judgement: the workloads (61) and GPUs (30) are dealt
#: into this many folds of whole workloads or GPUs (``crossval.fold_values``); the sources (6)
#: stay one per fold
MAX_FOLDS = 10


def calibrated(
    rows: list[Measurement],
    cats: Catalogues,
    options: Options | None = None,
    folds=tuple(V2_FOLDS),
    max_folds: int | None = MAX_FOLDS,
) -> dict[str, dict]:
    """Per fold kind: the held-out rows (``crossval.held_out`` with ``paigrid calibrate``'s
    defaults: ``shrinkage="cv"``, a parameter fitted onto a bound back at its default), the
    folds and the per-group summary.  The model is linearised at the defaults once over every
    row (``calibrate.linearise``); each fold's fit takes its training rows' slice, which is what
    it would compute on them (a row's prediction depends on that row alone)."""
    from paigrid.accuracy.calibrate import linearise

    options = options or Options()
    linear = linearise(rows, defaults(), options, cats=cats)
    out = {}
    for fold_by in folds:
        results, entries = held_out(
            rows,
            cats,
            options,
            fold_by,
            True,
            None,
            "cv",
            allow_bounds=False,
            linearisation=linear,
            max_folds=max_folds,
        )
        out[fold_by] = {"rows": results, "folds": entries, "summary": group_summary(results)}
    return out


def by_attribute(results: list[dict], rows: list[Measurement], attribute: str) -> dict[str, dict]:
    """Count, median and mean |error| and the median signed error (predicted / measured - 1:
    positive where the model predicts the runs faster than measured) of the results per value of
    a row attribute."""
    lookup = {r.id: r for r in rows}
    groups: dict[str, list[float]] = {}
    for r in results:
        groups.setdefault(str(getattr(lookup[r["id"]], attribute)), []).append(r["error"])
    return {k: _errors_summary(v) for k, v in sorted(groups.items())}


def _errors_summary(errors: list[float]) -> dict:
    magnitudes = [abs(e) for e in errors]
    return {
        "count": len(errors),
        "median_abs_error": statistics.median(magnitudes),
        "mean_abs_error": statistics.fmean(magnitudes),
        "median_error": statistics.median(errors),
    }


def gpu_ratio_by(results: list[dict], rows: list[Measurement], key) -> dict[str, dict]:
    """The another-GPU ratio errors (``relative.gpu_ratios``) per value of ``key(row)`` (a
    string, e.g. the GPU or its catalogue segment): each pair counted once for each side, the
    ratio oriented with that side as the numerator, so a positive median error says the model
    predicts the side faster, against the same jobs on other GPUs, than they were measured.
    Count of pair sides, median |error| and median signed error per value; a pair whose two
    sides share the value is counted twice, once from each side."""
    groups: dict[str, list[float]] = {}
    for first, second, error in _gpu_pairs(results, rows):
        groups.setdefault(key(first), []).append(error)
        groups.setdefault(key(second), []).append(_inverted(error))
    return {k: _errors_summary(v) for k, v in sorted(groups.items())}


def gpu_ratio_by_pair(results: list[dict], rows: list[Measurement], key) -> dict[tuple[str, str], dict]:
    """The another-GPU ratio errors (``relative.gpu_ratios``) per pair of values (a, b), a <= b,
    of ``key(row)`` (e.g. the GPUs' catalogue segments), each ratio oriented as a over b: a
    positive median error says the model predicts the a side faster, against the b side, than
    measured.  Count of pairs, median |error| and median signed error per pair of values."""
    groups: dict[tuple[str, str], list[float]] = {}
    for first, second, error in _gpu_pairs(results, rows):
        a, b = key(first), key(second)
        if a > b:
            a, b, error = b, a, _inverted(error)
        groups.setdefault((a, b), []).append(error)
    return {k: _errors_summary(v) for k, v in sorted(groups.items())}


def _inverted(error: float) -> float:
    """The error of a ratio's inverse (b / a) from that of the ratio (a / b): predicted / measured - 1."""
    return 1.0 / (1.0 + error) - 1.0


def _entries(results: list[dict], lookup: dict[str, Measurement]) -> list[dict]:
    """The results as ``accuracy.relative`` takes them: each with its row (``lookup`` maps row ids
    to rows), predicted and measured."""
    return [{"row": lookup[r["id"]], "predicted": r["predicted"], "measured": r["measured"]} for r in results]


def _gpu_pairs(results: list[dict], rows: list[Measurement]):
    """(row a, row b, predicted ratio a / b over measured - 1) of every pair of ``relative.gpu_ratios``."""
    lookup = {r.id: r for r in rows}
    for pair in relative.gpu_ratios(_entries(results, lookup)):
        first, second = (lookup[i] for i in pair["ids"])
        yield first, second, pair["error"]


def relative_summary(results: list[dict], rows: list[Measurement]) -> dict[str, dict]:
    """The ratio errors of ``accuracy.relative`` of one set of predictions: per comparison the
    pairs, the median |error| and the share whose order (which is faster) is right; the ranking
    per job with its mean Spearman correlation and top-1 agreement."""
    entries = _entries(results, {r.id: r for r in rows})
    out = {}
    for name, function in (
        ("gpu", relative.gpu_ratios),
        ("scaling", relative.scaling_ratios),
        ("precision", relative.precision_ratios),
        ("ps_allreduce", relative.ps_allreduce_order),
    ):
        pairs = function(entries)
        out[name] = {
            "pairs": len(pairs),
            "median_abs_error": relative.median_abs(pairs),
            "order_right": (sum(p["order_right"] for p in pairs) / len(pairs)) if pairs else None,
        }
    ranks = relative.ranking(entries)
    finite = [r["spearman"] for r in ranks if math.isfinite(r["spearman"])]
    out["ranking"] = {
        "jobs": len(ranks),
        "mean_spearman": statistics.fmean(finite) if finite else None,
        "top1": (sum(r["top1"] for r in ranks) / len(ranks)) if ranks else None,
    }
    return out
