"""Calibration of the LLM step-time model on llm rows, shrunk toward the sourced defaults.

The parameters are log-factors on the model's sourced values (``llm.compute.llm_factor``): the
large-GEMM efficiency per GPU generation and precision family (``gemm/GENERATION/FAMILY``),
the GEMM half-efficiency side, the attention and HBM efficiencies, the NVLink and network
efficiencies, the data-parallel overlap efficiency, the hidden fraction of overlapped
tensor-parallel collectives and the fixed per-layer and per-MoE-layer overheads.  A factor of
1 (log 0) is the default.

The fit is ridge regression in log-parameter space on the rows' log(predicted / measured),
one Gauss-Newton step from the defaults (the Jacobian by forward differences of the real
model): ``theta = argmin |r0 + J theta|^2 + lambda |theta|^2``, each factor bounded to
``BOUNDS`` (``WIDE`` for the fixed overheads).  ``lambda`` is chosen on the training rows
alone, by leave-one-model-out inside them on the linearised residuals, from ``LAMBDAS``,
whose largest keeps the defaults: on those inner folds the chosen fit is no worse than none.
Twin rows of one run (``Measurement.run``) are weighted 1/2 each, so a run counts once.

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

#: ridge strengths tried (per row-weight unit); the last keeps the defaults
LAMBDAS = (0.01, 0.1, 1.0, 10.0, 1e6)
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
    rows, and the shared ones."""
    gemm = sorted({f"gemm/{r.generation or '*'}/{_family(r.precision)}" for r in rows})
    return gemm + [
        "gemm_half_side",
        "attention",
        "hbm",
        "intra",
        "network",
        "overlap",
        "tp_overlap",
        "overhead",
        "moe_overhead",
    ]


def _with(eff, factors: dict[str, float]):
    return replace(eff, llm={**getattr(eff, "llm", {}), **factors}) if factors else eff


def _predict(rows, cats, eff, factors: dict[str, float]) -> np.ndarray:
    from paigrid.trust.rowkinds import predict_observed

    return np.asarray(predict_observed(rows, cats, _with(eff, factors), None), dtype=float)


def _weights(rows) -> np.ndarray:
    counts = defaultdict(int)
    for r in rows:
        counts[r.run or r.id] += 1
    return np.array([1.0 / counts[r.run or r.id] for r in rows])


def _linearise(rows, cats, eff, keys: list[str]):
    """(r0, J): log(predicted / measured) at the defaults and its derivative by each log-factor."""
    measured = np.array([r.measured for r in rows])
    base = np.log(_predict(rows, cats, eff, {}) / measured)
    jac = np.zeros((len(rows), len(keys)))
    for j, key in enumerate(keys):
        shifted = np.log(_predict(rows, cats, eff, {key: math.exp(STEP)}) / measured)
        jac[:, j] = (shifted - base) / STEP
    return base, jac


def _ridge(r0, jac, w, strength: float, keys: list[str] | None = None) -> np.ndarray:
    sw = np.sqrt(w)[:, None]
    a, b = jac * sw, -r0 * sw[:, 0]
    theta = np.linalg.solve(a.T @ a + strength * np.eye(jac.shape[1]), a.T @ b)
    low = np.array([WIDE.get(k, BOUNDS)[0] for k in keys]) if keys else BOUNDS[0]
    high = np.array([WIDE.get(k, BOUNDS)[1] for k in keys]) if keys else BOUNDS[1]
    return np.clip(theta, low, high)


def _choose_strength(r0, jac, w, groups: list[str], keys: list[str] | None = None) -> float:
    """The ridge strength with the least weighted median-free squared held-out residual of
    leave-one-group-out on these rows (linearised)."""
    names = sorted(set(groups))
    if len(names) < 2:
        return LAMBDAS[-1]
    best, best_loss = LAMBDAS[-1], math.inf
    for strength in LAMBDAS:
        loss = 0.0
        for name in names:
            out = np.array([g == name for g in groups])
            theta = _ridge(r0[~out], jac[~out], w[~out], strength, keys)
            loss += float(np.sum(w[out] * (r0[out] + jac[out] @ theta) ** 2))
        if loss < best_loss - 1e-12:
            best, best_loss = strength, loss
    return best


def fit_llm(rows, cats, eff, linear=None) -> LlmFit:
    """Fit the LLM factors to ``rows`` (modelled llm Measurements; refused rows are left out)."""
    rows = [r for r in rows if r.kind == "llm" and not r.refused]
    if len(rows) < 2:
        raise PaigridError("calibrate needs at least two llm rows the model predicts.")
    keys = parameter_keys(rows)
    r0, jac = linear if linear is not None else _linearise(rows, cats, eff, keys)
    w = _weights(rows)
    strength = _choose_strength(r0, jac, w, [r.model for r in rows], keys)
    theta = _ridge(r0, jac, w, strength, keys)
    factors = {k: float(math.exp(t)) for k, t in zip(keys, theta) if abs(t) > 1e-9}
    measured = np.array([r.measured for r in rows])
    return LlmFit(factors, strength, rows, np.exp(r0) * measured, _predict(rows, cats, eff, factors))


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
            w = _weights(train)
            strength = _choose_strength(r0_all[~test], jac_all[~test], w, [r.model for r in train], keys)
            theta = _ridge(r0_all[~test], jac_all[~test], w, strength, keys)
            factors = {k: float(math.exp(t)) for k, t in zip(keys, theta) if abs(t) > 1e-9}
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
    from paigrid.userfiles import write_text_atomically

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
        from paigrid.llm.compute import LlmOptions

        workspace, fragmentation = fit_memory(points)
        result.factors["workspace"] = workspace * 2**30 / 1e9 / LlmOptions.defaults().workspace_GB
        result.factors["fragmentation"] = 1.0 + fragmentation
        memory_note = (
            f"memory fitted on {len(points)} row(s) that report peak memory: workspace "
            f"{workspace:.2f} GiB, fragmentation {100 * fragmentation:.0f}% of the activations"
        )
    write_llm_calibration(result, out, {"measurements": measurements})
    refused = sum(1 for r in rows if r.refused)
    lines = [
        f"fitted {len(result.factors)} LLM factor(s) to {len(result.rows)} llm row(s) "
        f"({refused} refused row(s) left out; ridge in log-factor space toward the sourced defaults, "
        f"strength {result.strength:g} chosen by leave-one-model-out on these rows)",
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
        bare = replace(llm, options=replace(llm.options, workspace_GB=0.0, fragmentation=0.0))
        doubled = replace(llm, options=replace(llm.options, workspace_GB=0.0, fragmentation=1.0))
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
    """(workspace GiB, fragmentation) minimising the squared relative error of
    ``base + workspace + fragmentation x activations`` against the reported peaks, bounded by
    ``MEMORY_BOUNDS`` (a small grid refined once: two parameters)."""
    if not points:
        raise PaigridError("no predicted row reports peak memory; nothing to fit.")
    best = (math.inf, 0.0, 0.0)
    for w in np.linspace(*MEMORY_BOUNDS[0], 81):
        for f in np.linspace(*MEMORY_BOUNDS[1], 101):
            loss = sum(((p["base"] + w + f * p["activations"]) / p["reported"] - 1.0) ** 2 for p in points)
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
