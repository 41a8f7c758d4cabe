"""Predicted against measured throughput: per row, per scaling series, and summarised.

The error of a row is ``predicted / measured - 1`` (relative, signed: +0.10 means the model
predicts 10 % more samples/s than was measured).  Summaries use its absolute value.

A *series* is the rows of one model on one GPU type with the same precision, framework,
per-GPU batch, gradient accumulation and sequence length / image size, at several GPU counts.
Its scaling efficiency at n GPUs is ``throughput(n) / (n x throughput(1))``; when the series has
no one-GPU row it is taken relative to its smallest count n0:
``(throughput(n) / n) / (throughput(n0) / n0)``.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict

from paigrid.accuracy.measurements import GROUPS, NOT_MODELLED, Measurement, modelled, predict_rows
from paigrid.errors import PaigridError
from paigrid.inputs.catalog import Catalogues
from paigrid.inputs.spec import Options


def error_summary(errors: list[float]) -> dict:
    """Count, median and mean absolute relative error, and mean signed error (bias) of ``errors``.

    Empty input (or only NaN) gives count 0 and null (None) values.
    """
    finite = [e for e in errors if math.isfinite(e)]
    if not finite:
        return {"count": 0, "median_abs_error": None, "mean_abs_error": None, "mean_error": None}
    absolute = [abs(e) for e in finite]
    return {
        "count": len(finite),
        "median_abs_error": statistics.median(absolute),
        "mean_abs_error": statistics.fmean(absolute),
        "mean_error": statistics.fmean(finite),
    }


def summarise(rows: list[dict]) -> dict:
    """``overall`` and per-group (single GPU, several GPUs in one server, several servers) summaries."""
    summary = {"overall": error_summary([r["error"] for r in rows])}
    for group in GROUPS:
        summary[group] = error_summary([r["error"] for r in rows if r["group"] == group])
    return summary


def series_key(row: Measurement) -> tuple:
    """What must be equal for rows to form one scaling series (everything but the GPU count)."""
    return (
        row.model.casefold(),
        row.workload,
        row.gpu,
        row.precision,
        row.framework.casefold(),
        row.batch,
        row.grad_accum_steps,
        row.size,
    )


def scaling_series(rows: list[Measurement], results: list[dict]) -> list[dict]:
    """Predicted and measured scaling efficiency of every series with at least two GPU counts.

    One entry per series: its identity, the base row and one point per other row with
    ``n_gpu``, ``predicted`` and ``measured`` efficiency and their difference ``error``
    (predicted - measured, in efficiency points).
    """
    groups: dict[tuple, list[int]] = defaultdict(list)
    for i, row in enumerate(rows):
        groups[series_key(row)].append(i)
    out = []
    for members in groups.values():
        if len({rows[i].n_gpu for i in members}) < 2:
            continue
        members.sort(key=lambda i: (rows[i].n_gpu, rows[i].id))
        base = members[0]
        n0 = rows[base].n_gpu
        points = []
        for i in members[1:]:
            n = rows[i].n_gpu
            if n == n0:
                continue
            predicted = results[i]["predicted"] / n / (results[base]["predicted"] / n0)
            measured = rows[i].measured / n / (rows[base].measured / n0)
            points.append(
                {
                    "id": rows[i].id,
                    "n_gpu": n,
                    "nodes": rows[i].nodes,
                    "intra": rows[i].intra,
                    "network": rows[i].network,
                    "predicted": predicted,
                    "measured": measured,
                    "error": predicted - measured,
                }
            )
        first = rows[base]
        out.append(
            {
                "model": first.model,
                "workload": first.workload,
                "gpu": first.gpu,
                "precision": first.precision,
                "framework": first.framework,
                "batch_per_gpu": first.batch,
                "data_pipeline": first.data_pipeline,
                "base_id": first.id,
                "base_n_gpu": n0,
                "points": points,
            }
        )
    return out


def validate(rows: list[Measurement], efficiency, options: Options, cats: Catalogues | None = None) -> dict:
    """Compare the model with measured rows.

    Returns ``{"rows": [...], "series": [...], "summary": {...}}``.  Each row: ``id``, ``model``,
    ``workload``, ``gpu``, ``precision``, ``arch``, ``n_gpu``, ``nodes``, ``group``,
    ``predicted`` and ``measured`` [samples/s, whole job], ``error`` (predicted/measured - 1),
    ``bottleneck``, ``fits_memory`` and ``data_pipeline``.  ``series``: see
    ``scaling_series``.  ``summary``: see ``summarise``.
    """
    cats = cats or Catalogues.load()
    predictions = predict_rows(rows, cats, efficiency, options)
    results = []
    for row, p in zip(rows, predictions):
        predicted = p["throughput"]
        results.append(
            {
                "id": row.id,
                "model": row.model,
                "workload": row.workload,
                "gpu": row.gpu,
                "precision": row.precision,
                "arch": row.arch,
                "n_gpu": row.n_gpu,
                "nodes": row.nodes,
                "group": row.group,
                "predicted": predicted,
                "measured": row.measured,
                "error": predicted / row.measured - 1.0,
                "bottleneck": p["bottleneck"],
                "fits_memory": p["fits_memory"],
                "data_pipeline": row.data_pipeline,
            }
        )
    return {"rows": results, "series": scaling_series(rows, results), "summary": summarise(results)}


#: how a row kind's error is measured: ``points`` (predicted - measured, for fractions) or
#: ``relative`` (predicted / measured - 1)
ERROR_KINDS = {"throughput": "relative", "scaling": "points", "collective": "relative", "llm": "relative"}


def row_error(kind: str, predicted: float, measured: float) -> float:
    """The error of a row of ``kind``: predicted - measured for ``scaling`` (efficiency points as
    a fraction: 0.05 = 5 points), predicted / measured - 1 otherwise."""
    return predicted - measured if ERROR_KINDS.get(kind) == "points" else predicted / measured - 1.0


def validate_observed(rows: list[Measurement], efficiency, options: Options, cats: Catalogues | None = None) -> dict:
    """Compare the model with scaling or collective rows (``rowkinds.predict_observed``).

    Returns ``{"kind", "unit", "error_kind", "rows", "summary"}``.  Each row: ``id``, ``model``
    (a scaling row's model; a collective row's ``collective/algorithm``), ``gpu``, ``arch``,
    ``n_gpu``, ``nodes``, ``intra``, ``network``, ``predicted`` and ``measured`` (the kind's
    unit: a fraction for scaling, GB/s bus bandwidth for collective), ``error``
    (``row_error``) and ``note``.  A collective row whose algorithm the model has no term for
    (``measurements.NOT_MODELLED``, e.g. NVLS) is listed with its prediction by the model's
    algorithm, its note says why, and it is left out of ``summary`` (``error_summary`` of
    the others: |error| in points for scaling, relative for collective).
    """
    from paigrid.accuracy.rowkinds import predict_observed, row_kind

    cats = cats or Catalogues.load()
    kinds = {r.kind for r in rows}
    if len(kinds) != 1:
        raise PaigridError(f"validate takes rows of one kind at a time, not {', '.join(sorted(kinds))}.")
    kind = kinds.pop()
    predicted = predict_observed(rows, cats, efficiency, options)
    out = []
    for row, value in zip(rows, predicted):
        algorithm = row.cells.get("algorithm", "").strip().casefold()
        if row.refused:
            note = f"refused: {row.refused}"
        else:
            note = row.note if modelled(row) else f"not modelled ({NOT_MODELLED[algorithm]}); left out of the summary"
        out.append(
            {
                "id": row.id,
                "model": row.model,
                "gpu": row.gpu,
                "arch": row.arch,
                "n_gpu": row.n_gpu,
                "nodes": row.nodes,
                "intra": row.intra,
                "network": row.network,
                "predicted": float(value),
                "measured": row.measured,
                "error": row_error(kind, float(value), row.measured),
                "modelled": modelled(row),
                "note": note,
                "run": row.run or row.id,
            }
        )
    summary = {"overall": error_summary(_once_per_run([r for r in out if r["modelled"]]))}
    if kind == "llm":
        summary["refused"] = {
            "count": sum(1 for r in rows if r.refused),
            "runs": len({r.run for r in rows if r.refused}),
        }
    return {"kind": kind, "unit": row_kind(kind).unit, "error_kind": ERROR_KINDS[kind], "rows": out, "summary": summary}


def _once_per_run(rows: list[dict]) -> list[float]:
    """One error per published run: the mean of its twin rows' errors (llm rows of one run
    share ``run``; every other row is its own run)."""
    runs: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        runs[r["run"]].append(r["error"])
    return [statistics.fmean(errors) for errors in runs.values()]
