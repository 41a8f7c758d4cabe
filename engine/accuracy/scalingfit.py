"""Fit the scaling-loss options to scaling-efficiency rows: least squares in efficiency points on a grid.

What a scaling row measures, throughput(n) / (n x throughput(1)), is set by the exposed gradient
exchange, not by the datasheet peaks, so its fit is not ``calibrate.fit`` (efficiency factors,
log throughput) but one over the scaling-loss options of the model
(docs/model.md, "Scaling losses of all-reduce"):

* group ``scaling`` (the default; also ``overlap_efficiency``): the overlap efficiency, the
  fraction of the last backward pass during which the exchange proceeds, with bucketed overlap;
* group ``coordination`` (also ``coordination_us``): the coordination time per participant step
  of each all-reduce [us] (``coordination_growth`` as the options give it).

Every fit is made with ``bucket_overlap`` on (``FIT_OPTIONS``) on top of the options given.  The
fitted options take every combination of the values of ``SCALING_GRIDS``; the one with the least
sum of squared errors, error = predicted - measured scaling efficiency (a fraction: 0.01 is one
point), over the rows wins (the first in grid order on ties).  ``paigrid calibrate`` on a
scaling file and the cross-validation of ``crossval.scaling_held_out`` both fit this way (one
``scaling_grid`` and ``best_point``).  A grid fit has no standard error; its resolution is the
grid step.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from paigrid.accuracy.measurements import Measurement
from paigrid.accuracy.tomlwrite import non_default_options, toml_key, toml_value
from paigrid.errors import PaigridError
from paigrid.files import write_text_atomically
from paigrid.inputs.catalog import Catalogues
from paigrid.inputs.efficiency import Efficiency, defaults
from paigrid.inputs.spec import Options

#: the grids of the options a scaling fit may set: the overlap efficiency (a fraction) in steps of
#: 0.02, the coordination time [us] 0 and 0.1 to 1000 us, 8 values a decade
SCALING_GRIDS = {
    "overlap_efficiency": tuple(i / 50 for i in range(51)),
    "coordination_us": (0.0, *(round(10.0 ** (x / 8), 4) for x in range(-8, 25))),
}
#: each grid in words (the ``[fit]`` table records it)
GRID_TEXT = {
    "overlap_efficiency": "0 to 1 in steps of 0.02",
    "coordination_us": "0 and 0.1 to 1000 us, 8 values a decade",
}
#: --fit groups of a scaling file -> the option each fits (the option names are groups too)
SCALING_GROUPS = {
    "scaling": "overlap_efficiency",
    "overlap_efficiency": "overlap_efficiency",
    "coordination": "coordination_us",
    "coordination_us": "coordination_us",
}
DEFAULT_SCALING_GROUPS = ("scaling",)
#: the options every scaling fit is made with (the overlap efficiency is a fraction of its window)
FIT_OPTIONS: dict[str, Any] = {"bucket_overlap": True}
#: a fit needs this many rows more than it fits options (one option: at least 2 rows)
MIN_EXTRA_ROWS = 1


def scaling_options(groups) -> tuple[str, ...]:
    """The options that the ``--fit`` ``groups`` of a scaling file fit (``SCALING_GROUPS``), in
    ``SCALING_GRIDS`` order; ``None``: ``DEFAULT_SCALING_GROUPS``.  A group of another file kind
    (``flop``, ``link``, ...) or an unknown one is one sentence."""
    groups = DEFAULT_SCALING_GROUPS if groups is None else tuple(groups)
    wrong = [g for g in groups if g not in SCALING_GROUPS]
    if wrong or not groups:
        raise PaigridError(
            f"--fit {','.join(wrong) or '(none)'} does not apply to scaling-efficiency rows, which "
            f"determine the scaling-loss options: fit scaling (overlap_efficiency), coordination "
            f"(coordination_us) or both."
        )
    chosen = {SCALING_GROUPS[g] for g in groups}
    return tuple(name for name in SCALING_GRIDS if name in chosen)


def _grid_points(fitted: tuple[str, ...]) -> list[dict]:
    """Every combination of the ``SCALING_GRIDS`` values of the ``fitted`` options, in grid order."""
    unknown = [name for name in fitted if name not in SCALING_GRIDS]
    if unknown:
        raise PaigridError(f"a scaling fit sets {' and '.join(SCALING_GRIDS)}, not {', '.join(unknown)}.")
    points: list[dict] = [{}]
    for name in fitted:
        points = [{**p, name: value} for p in points for value in SCALING_GRIDS[name]]
    return points


def scaling_grid(
    rows: list[Measurement],
    cats: Catalogues,
    options: Options,
    fitted: tuple[str, ...],
    efficiency: Efficiency | None = None,
) -> list[tuple[dict, dict[str, float]]]:
    """Each grid point of the ``fitted`` options (``SCALING_GRIDS``) with every row's error in
    efficiency points as a fraction (predicted - measured) under ``options`` with that point
    applied and ``efficiency`` (default: the defaults): [(point, {row id: error})].  A row's
    prediction does not depend on the other rows, so a fit to any subset of the rows
    (``best_point``) chooses among these without recomputing them."""
    from paigrid.accuracy.validate import validate_observed

    efficiency = efficiency or defaults()
    out = []
    for point in _grid_points(fitted):
        result = validate_observed(rows, efficiency, replace(options, **point), cats)
        out.append((point, {r["id"]: r["error"] for r in result["rows"]}))
    return out


def best_point(grid: list[tuple[dict, dict[str, float]]], ids: set[str]) -> tuple[dict, float]:
    """The grid point with the least sum of squared errors (points as fractions, squared) over
    the rows ``ids`` (the first on ties) and that sum."""
    best, best_sse = {}, math.inf
    for point, errors in grid:
        sse = sum(errors[i] ** 2 for i in ids)
        if sse < best_sse:
            best, best_sse = point, sse
    return best, best_sse


@dataclass
class ScalingFit:
    """Result of ``fit_scaling``: the fitted options, the rows and their errors before and after."""

    fitted: dict[str, float]  # option -> fitted value (overlap_efficiency a fraction, coordination_us us)
    start: dict[str, float]  # option -> its value in the options given
    rows: list[Measurement]
    errors: list[float]  # predicted - measured scaling efficiency per row, fitted (fraction)
    start_errors: list[float]  # the same with the start values (and FIT_OPTIONS)
    options: Options  # the options given, with FIT_OPTIONS and the fitted values
    sse: float  # sum of squared errors (fractions squared)
    at_grid_end: list[str]  # fitted options on the first or last value of their grid
    notes: dict = field(default_factory=dict)

    @property
    def degrees_of_freedom(self) -> int:
        """Rows minus fitted options."""
        return len(self.rows) - len(self.fitted)


def fit_scaling(
    rows: list[Measurement], efficiency: Efficiency, options: Options, groups=None, cats: Catalogues | None = None
) -> ScalingFit:
    """Fit the scaling-loss options of ``groups`` (``scaling_options``; default: the overlap
    efficiency) to scaling-efficiency ``rows`` by least squares in efficiency points on
    ``SCALING_GRIDS``, under ``options`` with ``FIT_OPTIONS`` on top and ``efficiency``.
    Refused in one sentence: rows of another kind, fewer than the fitted options plus
    ``MIN_EXTRA_ROWS`` rows (2 for one option), or an option that moves no row's prediction."""
    fitted = scaling_options(groups)
    kinds = sorted({r.kind for r in rows})
    if kinds != ["scaling"]:
        raise PaigridError(f"a scaling fit takes scaling-efficiency rows, not {', '.join(kinds) or 'no'} rows.")
    needed = len(fitted) + MIN_EXTRA_ROWS
    if len(rows) < needed:
        raise PaigridError(
            f"fitting {' and '.join(fitted)} needs at least {needed} scaling rows, not {len(rows)}; select more rows."
        )
    cats = cats or Catalogues.load()
    base = replace(options, **FIT_OPTIONS)
    grid = scaling_grid(rows, cats, base, fitted, efficiency)
    ids = {r.id for r in rows}
    point, sse = best_point(grid, ids)
    for name in fitted:
        others = {k: v for k, v in point.items() if k != name}
        sums = [sum(e[i] ** 2 for i in ids) for p, e in grid if all(p[k] == v for k, v in others.items())]
        if max(sums) - min(sums) <= 1e-12:
            raise PaigridError(
                f"the selected rows cannot determine {name}: no value on its grid "
                f"({GRID_TEXT[name]}) moves their predictions; select rows whose exchange it affects."
            )
    errors = next(e for p, e in grid if p == point)
    start_point = {name: getattr(base, name) for name in fitted}
    start = replace(base, **start_point)
    from paigrid.accuracy.validate import validate_observed

    start_errors = {r["id"]: r["error"] for r in validate_observed(rows, efficiency, start, cats)["rows"]}
    at_end = [name for name in fitted if point[name] in (SCALING_GRIDS[name][0], SCALING_GRIDS[name][-1])]
    notes = {"groups": list(groups or DEFAULT_SCALING_GROUPS), "model": options.model}
    return ScalingFit(
        dict(point),
        start_point,
        list(rows),
        [errors[r.id] for r in rows],
        [start_errors[r.id] for r in rows],
        replace(base, **point),
        sse,
        at_end,
        notes,
    )


def scaling_calibration_text(result: ScalingFit, notes: dict | None = None) -> str:
    """The calibration TOML of a scaling fit: ``[options]`` (``FIT_OPTIONS``, the fitted values and
    any other non-default option the fit was made with) and the ``[fit]`` table (provenance,
    grid, rows, errors in points), which paigrid does not read."""
    errors = result.errors
    fit_table = {
        **(notes or {}),
        **result.notes,
        "method": "least squares in scaling-efficiency points on a grid",
        "fitted": list(result.fitted),
        "grid": [f"{n}: {GRID_TEXT[n]}" for n in result.fitted],
        "at_grid_end": result.at_grid_end,
        "rows": [r.id for r in result.rows],
        "degrees_of_freedom": result.degrees_of_freedom,
        "median_abs_error_points": 100 * statistics.median(abs(e) for e in errors),
        "rms_error_points": 100 * math.sqrt(statistics.fmean(e * e for e in errors)),
    }
    lines = [
        "# paigrid calibration: scaling-loss options fitted by `paigrid calibrate` to scaling-efficiency",
        "# rows (least squares in efficiency points on a grid; the grid step is the resolution).",
        "",
        "[options]   # bucketed overlap, the fitted options and any other non-default option of the fit",
    ]
    options = {**non_default_options(result.options), **FIT_OPTIONS, **result.fitted}
    lines += [f"{k} = {toml_value(v)}" for k, v in options.items()]
    lines += ["", "[fit]   # provenance; paigrid reads only the table above"]
    lines += [f"{k} = {toml_value(v)}" for k, v in fit_table.items()]
    lines += ["", "[fit.start]   # each fitted option's value before the fit"]
    lines += [f"{k} = {toml_value(v)}" for k, v in result.start.items()]
    lines += ["", "[fit.residuals]   # predicted - measured scaling efficiency per row, fitted, in points"]
    lines += [f"{toml_key(r.id)} = {toml_value(100 * e)}" for r, e in zip(result.rows, errors)]
    return "\n".join(lines) + "\n"


def write_scaling_calibration(result: ScalingFit, path: str | Path, notes: dict | None = None) -> Path:
    """Write the calibration TOML of a scaling fit atomically; returns the path."""
    return write_text_atomically(path, scaling_calibration_text(result, notes))
