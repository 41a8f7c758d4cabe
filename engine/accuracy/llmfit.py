"""Calibration of the LLM step-time model on llm rows, shrunk toward the sourced defaults.

The parameters are log-factors on the model's sourced values (``llm.tables.llm_factor``): the
large-GEMM efficiency per GPU generation and precision family (``gemm/GENERATION/FAMILY``),
the GEMM half-efficiency side, the routed experts' half-efficiency tokens
(``expert_half_tokens``), the attention and HBM efficiencies, the NVLink and network
efficiencies, the data-parallel overlap efficiency, the hidden fraction of overlapped
tensor-parallel collectives and the fixed per-layer and per-MoE-layer overheads.  A factor of
1 (log 0) is the default.

The fit is the shrinkage of ``accuracy.shrinkage`` (the one mechanism of both families): over the
log-factors theta it minimises the robust (soft-l1, scale ``F_SCALE``) loss of the rows'
log(predicted / measured) plus ``lambda |theta|^2``, each factor bounded to ``BOUNDS`` (``WIDE``
for the fixed overheads), on the residuals linearised at the defaults (the Jacobian by forward
differences of the real model), then linearised again at that fit and refitted
(``GAUSS_NEWTON_STEPS``).  ``lambda`` is chosen on the training rows alone by
``shrinkage.choose_strength`` over whole models (``INNER_FOLDS`` folds) on the linearised
residuals, from ``STRENGTHS``, whose last (inf) keeps the defaults: on those inner folds the
chosen fit is no worse than none.  Twin rows of one run (``Measurement.run``) are weighted 1/2
each, so a run counts once.

Beside the model's rates, two kinds of factor describe the software stack: an FP8 variant's
own GEMM factor (``gemm/GENERATION/PRECISION``: current scaling, MXFP8, blockwise), and a
software release's (``software/FAMILY-VERSION``, ``llm.rows.software_efficiency``) where the
rows hold one model on one GPU at one precision under two releases or more.

``crossval`` reports the held-out error of three fold kinds (leave one model out, one GPU
generation out, one framework family out): each fold fits on the other rows and predicts its
own with the real model.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from dataclasses import dataclass, replace

import numpy as np

from paigrid.errors import PaigridError

#: shrinkage strengths tried (``shrinkage.shrunk_least_squares``'s lambda, in squared log-factor
#: units against the rows' summed robust loss); inf keeps the defaults
STRENGTHS = (0.01, 0.1, 1.0, 10.0, math.inf)
#: inner cross-validation folds (whole models) that choose the strength
INNER_FOLDS = 5
#: the robust loss's scale in log units: a row off by more than about 10% counts linearly
F_SCALE = 0.1
#: Gauss-Newton steps of the fit (1: linearised at the defaults only)
GAUSS_NEWTON_STEPS = 2
#: each factor stays within [1/4, 4] of its default; the fixed overheads, whose defaults are
#: order-of-magnitude estimates, within [1/4, 16] (``WIDE``)
BOUNDS = (math.log(0.25), math.log(4.0))
WIDE = {"overhead": (math.log(0.25), math.log(16.0)), "moe_overhead": (math.log(0.25), math.log(16.0))}
STEP = 0.02  # forward-difference step in log-factor
FOLD_KINDS = ("model", "generation", "framework")


@dataclass
class LlmFit:
    """A fitted LLM calibration: ``factors`` (key -> factor on the default), the ridge
    strength, and per row the predicted tokens/s before and after."""

    factors: dict[str, float]
    strength: float
    rows: list
    start_predicted: np.ndarray
    predicted: np.ndarray


def _family(precision: str) -> str:
    return "amp" if precision.startswith("amp-") else ("fp8" if "fp8" in precision else precision)


def parameter_keys(rows) -> list[str]:
    """The factors the rows can inform: a GEMM factor per (generation, precision family) of the
    rows and, for a family whose default is one estimate shared by the generations without a
    sourced value of their own (``*/fp8``), one factor on that estimate (the shrinkage splits a
    shift every such generation shows between the two, so a held-out generation inherits the
    shared part), and the shared ones."""
    from paigrid.llm.tables import default_gemm_key, shared_gemm_key

    gemm = sorted({f"gemm/{r.generation or '*'}/{_family(r.precision)}" for r in rows})
    # a family's shared factor where some rows' generation takes the family's shared estimate
    shared = {
        shared_gemm_key(_family(r.precision))
        for r in rows
        if default_gemm_key(r.generation or "*", _family(r.precision)).startswith("*/")
    }
    gemm += sorted(shared - set(gemm))
    variants = sorted(
        {
            f"gemm/{r.generation or '*'}/{r.precision}"
            for r in rows
            if _family(r.precision) == "fp8" and r.precision != "fp8"
        }
    )
    return (
        gemm
        + variants
        + software_keys(rows)
        + [
            "gemm_half_side",
            "expert_half_tokens",
            "attention",
            "hbm",
            "intra",
            "network",
            "overlap",
            "tp_overlap",
            "overhead",
            "moe_overhead",
        ]
    )


def software_keys(rows) -> list[str]:
    """The software-release factors the rows can inform (``llm.rows.LlmRow.software``): only a
    release that some model, GPU and precision of the rows ran under another release too, so
    that the factor measures the release, not the model or the GPU."""
    releases = defaultdict(set)
    for r in rows:
        llm = getattr(r, "llm_row", None)
        if llm is not None and llm.software:
            releases[(llm.model.name, llm.design.gpu, llm.design.precision)].add(llm.software)
    return sorted({key for keys in releases.values() if len(keys) > 1 for key in keys})


def _with(eff, factors: dict[str, float]):
    return replace(eff, llm={**getattr(eff, "llm", {}), **factors}) if factors else eff


def _predict(rows, cats, eff, factors: dict[str, float]) -> np.ndarray:
    from paigrid.accuracy.rowkinds import predict_observed

    return np.asarray(predict_observed(rows, cats, _with(eff, factors), None), dtype=float)


def _weights(rows) -> np.ndarray:
    counts = defaultdict(int)
    for r in rows:
        counts[r.run or r.id] += 1
    return np.array([1.0 / counts[r.run or r.id] for r in rows])


def _linearise(rows, cats, eff, keys: list[str], at: dict[str, float] | None = None):
    """(r0, J): log(predicted / measured) at the factors ``at`` (default: the defaults) and its
    derivative by each log-factor (forward differences of the real model)."""
    at = at or {}
    measured = np.array([r.measured for r in rows])
    base = np.log(_predict(rows, cats, eff, at) / measured)
    jac = np.zeros((len(rows), len(keys)))
    for j, key in enumerate(keys):
        shifted = np.log(_predict(rows, cats, eff, {**at, key: at.get(key, 1.0) * math.exp(STEP)}) / measured)
        jac[:, j] = (shifted - base) / STEP
    return base, jac


def _bounds(keys: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) log-factor bounds of ``keys`` (``BOUNDS``, ``WIDE`` for the overheads)."""
    low = np.array([WIDE.get(k, BOUNDS)[0] for k in keys])
    high = np.array([WIDE.get(k, BOUNDS)[1] for k in keys])
    return low, high


def fit_linearised(r0, jac, w, strength: float, keys: list[str], at=None) -> np.ndarray:
    """The log-factors of ``shrinkage.shrunk_least_squares`` on the linearised residuals
    ``r0 + J (theta - at)`` (``at``: where they were linearised, default the defaults), each
    row's residual weighted by sqrt(w), shrunk toward the defaults (theta = 0) with ``strength``
    and bounded by ``BOUNDS`` / ``WIDE``."""
    from paigrid.accuracy.shrinkage import shrunk_least_squares

    at = np.zeros(jac.shape[1]) if at is None else np.asarray(at, dtype=float)
    sw = np.sqrt(np.asarray(w, dtype=float))
    low, high = _bounds(keys)
    result = shrunk_least_squares(
        lambda x: sw * (r0 + jac @ (x - at)),
        lambda x: sw[:, None] * jac,
        np.zeros(jac.shape[1]),
        low,
        high,
        strength,
        f_scale=F_SCALE,
    )
    return np.clip(result.x, low, high)


def choose_llm_strength(r0, jac, w, groups: list[str], keys: list[str]) -> float:
    """The shrinkage strength (``STRENGTHS``, inf = the defaults) that ``shrinkage.choose_strength``
    picks by cross-validation over whole ``groups`` (models) of these rows, on the linearised
    residuals."""
    from paigrid.accuracy.shrinkage import choose_strength

    def held_out(train, test, strength):
        theta = fit_linearised(r0[train], jac[train], w[train], strength, keys)
        return r0[test] + jac[test] @ theta

    k = min(INNER_FOLDS, len(set(groups)))
    if k < 2:
        return math.inf
    return choose_strength(len(r0), groups, held_out, STRENGTHS, k).strength


def _fit(rows, cats, eff, keys: list[str], r0, jac, steps: int = 1) -> tuple[float, np.ndarray]:
    """(strength, log-factors) fitted to ``rows`` from their linearisation at the defaults; with
    ``steps`` > 1 the real model is linearised again at the fit (Gauss-Newton) and refitted at
    the same strength, so a factor far from 1 is fitted where the model's response is measured."""
    w = _weights(rows)
    strength = choose_llm_strength(r0, jac, w, [r.model for r in rows], keys)
    theta = fit_linearised(r0, jac, w, strength, keys)
    for _ in range(steps - 1):
        if math.isinf(strength) or not np.any(theta):
            break
        r1, j1 = _linearise(rows, cats, eff, keys, _factors(keys, theta))
        theta = fit_linearised(r1, j1, w, strength, keys, at=theta)
    return strength, theta


def _factors(keys: list[str], theta) -> dict[str, float]:
    return {k: float(math.exp(t)) for k, t in zip(keys, theta) if abs(t) > 1e-9}


def fit_llm(rows, cats, eff, linear=None) -> LlmFit:
    """Fit the LLM factors to ``rows`` (modelled llm Measurements; refused rows are left out)."""
    rows = [r for r in rows if r.kind == "llm" and not r.refused]
    if len(rows) < 2:
        raise PaigridError("calibrate needs at least two llm rows the model predicts.")
    keys = parameter_keys(rows)
    r0, jac = linear if linear is not None else _linearise(rows, cats, eff, keys)
    strength, theta = _fit(rows, cats, eff, keys, r0, jac, GAUSS_NEWTON_STEPS)
    factors = _factors(keys, theta)
    measured = np.array([r.measured for r in rows])
    return LlmFit(factors, strength, rows, np.exp(r0) * measured, _predict(rows, cats, eff, factors))


def public_llm_measurements(path, cats) -> list:
    """The LLM-family rows of a data-parallel public file (``measured_public_v2.csv``) as llm
    Measurements (``accuracy.measurements``), refused ones with their reason, for the LLM
    accuracy section and its cross-validation."""
    from paigrid.accuracy.measurements import _llm as llm_measurement  # the llm row kind's reader
    from paigrid.files import read_text
    from paigrid.inputs.catalog import csv_table
    from paigrid.llm.rows import is_llm_family, llm_cells_from_public

    _, table = csv_table(read_text(path, "the measurements file"), str(path), "a public measurements file")
    return [
        llm_measurement(llm_cells_from_public(cells), cats, f"{path} line {line}")
        for line, cells in table
        if is_llm_family(cells)
    ]


def fold_of(row, kind: str) -> str:
    """The fold a row belongs to under ``kind`` (model, generation or framework family)."""
    from paigrid.llm.rows import family_of

    if kind == "model":
        return row.model
    if kind == "generation":
        return row.generation or "*"
    return family_of(row.framework)


def crossval(rows, cats, eff) -> dict:
    """Held-out errors per fold kind: ``{kind: {"folds": [...], "median_abs_error",
    "median_abs_error_defaults", "errors": {run: error}}}``; every held-out error is the real
    model's prediction at the factors fitted without the fold (each run counted once)."""
    rows = [r for r in rows if r.kind == "llm" and not r.refused]
    keys = parameter_keys(rows)
    r0_all, jac_all = _linearise(rows, cats, eff, keys)
    measured = np.array([r.measured for r in rows])
    out = {}
    for kind in FOLD_KINDS:
        groups = [fold_of(r, kind) for r in rows]
        errors, before, folds = {}, {}, []
        for name in sorted(set(groups)):
            test = np.array([g == name for g in groups])
            train = [r for r, t in zip(rows, test) if not t]
            if not train:
                continue
            strength, theta = _fit(train, cats, eff, keys, r0_all[~test], jac_all[~test], GAUSS_NEWTON_STEPS)
            factors = _factors(keys, theta)
            held = [r for r, t in zip(rows, test) if t]
            predicted = _predict(held, cats, eff, factors)
            runs = defaultdict(list)
            runs_before = defaultdict(list)
            for r, p, r0 in zip(held, predicted, r0_all[test]):
                runs[r.run or r.id].append(p / r.measured - 1.0)
                runs_before[r.run or r.id].append(math.exp(r0) - 1.0)
            for run, values in runs.items():
                errors[run] = statistics.fmean(values)
                before[run] = statistics.fmean(runs_before[run])
            folds.append(
                {
                    "fold": name,
                    "rows": int(test.sum()),
                    "strength": strength,
                    "median_abs_error": statistics.median(abs(statistics.fmean(v)) for v in runs.values()),
                }
            )
        out[kind] = {
            "folds": folds,
            "errors": errors,
            "errors_defaults": before,
            "median_abs_error": statistics.median(abs(e) for e in errors.values()),
            "median_abs_error_defaults": statistics.median(abs(e) for e in before.values()),
        }
    del measured
    return out


def write_llm_calibration(result: LlmFit, path, notes: dict) -> None:
    """Write ``[llm]`` factors (and ``[fit]`` notes) as a calibration TOML that ``paigrid
    validate --calibration`` reads; the file appears whole or not at all."""
    from paigrid.files import write_text_atomically

    lines = ["# paigrid calibrate on llm rows: factors on the LLM model's sourced defaults (trust.llmfit)", "[llm]"]
    lines += [f'"{key}" = {value:.6g}' for key, value in sorted(result.factors.items())]
    lines += ["", "[fit]", f"rows = {len(result.rows)}", f"ridge_strength = {result.strength:g}"]
    lines += [f'{key} = "{value}"' for key, value in notes.items() if isinstance(value, str)]
    write_text_atomically(path, "\n".join(lines) + "\n")


def calibrate_text(rows, cats, eff, out, measurements: str) -> str:
    """Fit, write ``out`` and return the report of ``paigrid calibrate`` on llm rows."""
    result = fit_llm(rows, cats, eff)
    points = memory_points(rows, cats, eff)
    memory_note = "no row reports peak memory: workspace and fragmentation keep their defaults"
    if len(points) >= 2:
        from paigrid.llm.tables import LlmOptions

        workspace, fragmentation = fit_memory(points)
        result.factors["workspace"] = workspace / LlmOptions.defaults().workspace_GiB
        result.factors["fragmentation"] = 1.0 + fragmentation
        memory_note = (
            f"memory fitted on {len(points)} row(s) that report peak memory: workspace "
            f"{workspace:.2f} GiB, fragmentation {100 * fragmentation:.0f}% of the activations"
        )
    write_llm_calibration(result, out, {"measurements": measurements})
    refused = sum(1 for r in rows if r.refused)
    lines = [
        f"fitted {len(result.factors)} LLM factor(s) to {len(result.rows)} llm row(s) "
        f"({refused} refused row(s) left out; trust.shrinkage's robust fit in log-factor space shrunk toward "
        f"the sourced defaults, strength {result.strength:g} chosen by cross-validation over the rows' models)",
        "factor                          value",
    ]
    lines += [f"{key:30s}  {value:.3f}" for key, value in sorted(result.factors.items())] or ["(none: the defaults)"]
    before = [abs(p / r.measured - 1) for r, p in zip(result.rows, result.start_predicted)]
    after = [abs(p / r.measured - 1) for r, p in zip(result.rows, result.predicted)]
    lines.append(
        f"median |error| on these rows: {100 * statistics.median(before):.1f}% at the defaults, "
        f"{100 * statistics.median(after):.1f}% fitted (in-sample; docs/accuracy.md has the held-out figures)"
    )
    lines.append(memory_note)
    lines.append(f"wrote {out}")
    return "\n".join(lines)


def memory_points(rows, cats, eff) -> list[dict]:
    """Per predicted llm row that reports peak memory: the reported GiB and the model's parts at
    no workspace and no fragmentation (``base`` GiB) and its activations (``activations`` GiB,
    what fragmentation multiplies)."""
    from paigrid.llm.rows import predict_row

    out = []
    for r in rows:
        llm = getattr(r, "llm_row", None)
        if r.refused or llm is None or not math.isfinite(llm.peak_memory_GiB):
            continue
        bare = replace(llm, options=replace(llm.options, workspace_GiB=0.0, fragmentation=0.0))
        doubled = replace(llm, options=replace(llm.options, workspace_GiB=0.0, fragmentation=1.0))
        base = predict_row(bare, cats, eff)["memory_per_gpu"] / 2**30
        activations = predict_row(doubled, cats, eff)["memory_per_gpu"] / 2**30 - base
        out.append(
            {
                "id": r.id,
                "run": r.run or r.id,
                "reported": llm.peak_memory_GiB,
                "base": base,
                "activations": activations,
                "default": predict_row(llm, cats, eff)["memory_per_gpu"] / 2**30,
            }
        )
    return out


#: bounds of the memory fit: workspace [GiB] (at least the CUDA context's half GiB),
#: fragmentation [fraction of the activations]
MEMORY_BOUNDS = ((0.5, 8.0), (0.0, 1.0))


def fit_memory(points: list[dict]) -> tuple[float, float]:
    """(workspace GiB, fragmentation) minimising the absolute relative error (robust: a few
    rows the estimate misses by a third do not drag the others) of
    ``base + workspace + fragmentation x activations`` against the reported peaks, bounded by
    ``MEMORY_BOUNDS`` (a small grid refined once: two parameters)."""
    if not points:
        raise PaigridError("no predicted row reports peak memory; nothing to fit.")
    best = (math.inf, 0.0, 0.0)
    for w in np.linspace(*MEMORY_BOUNDS[0], 81):
        for f in np.linspace(*MEMORY_BOUNDS[1], 101):
            loss = sum(abs((p["base"] + w + f * p["activations"]) / p["reported"] - 1.0) for p in points)
            best = min(best, (loss, float(w), float(f)))
    return best[1], best[2]


def memory_crossval(points: list[dict]) -> list[dict]:
    """Leave-one-run-out memory errors: each run's rows predicted with the workspace and
    fragmentation fitted on the other runs' rows, and with the defaults."""
    out = []
    for run in sorted({p["run"] for p in points}):
        train = [p for p in points if p["run"] != run]
        w, f = fit_memory(train) if train else (0.0, 0.0)
        for p in points:
            if p["run"] == run:
                held = p["base"] + w + f * p["activations"]
                out.append(
                    {
                        **p,
                        "held_out": held,
                        "error": held / p["reported"] - 1.0,
                        "error_default": p["default"] / p["reported"] - 1.0,
                    }
                )
    return out
