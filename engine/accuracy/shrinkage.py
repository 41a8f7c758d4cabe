"""Calibration that never hurts: a fit shrunk toward the sourced defaults, its strength chosen by
cross-validation on the training rows only.  One mechanism for every calibration (the
data-parallel fit of ``accuracy.calibrate`` and the LLM fit call the same two functions).

The fit minimises, over x = log p (p: the parameters, bounded),

    sum_i rho(r_i(x)) + lambda * sum_j (x_j - x0_j)^2

where r_i = log(predicted_i / measured_i), rho is the robust loss (``soft_l1`` with scale
``f_scale``: residuals beyond about f_scale count linearly) and x0 = log of the defaults.  The
penalty is a ridge in log-parameter space: lambda = 0 is the plain fit, lambda = inf the defaults
(no calibration).  It is solved as one least-squares problem on the augmented residual vector
[g(r(x)), sqrt(lambda) (x - x0)], where g turns the robust loss into a square (g(r)^2 =
f_scale^2 rho(r^2 / f_scale^2)), so the penalty stays exactly quadratic.

``choose_strength`` picks lambda from ``STRENGTHS`` (inf included) by K-fold cross-validation
inside the rows it is given: each candidate is fitted on K-1 folds and scored on the fold left out
(mean |log residual|, pooled over the folds); the lowest score wins, ties going to the stronger
shrinkage.  Because "no calibration" (inf) is a candidate, the chosen fit is never worse than the
defaults on the training rows' own held-out folds.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from paigrid.errors import PaigridError

#: candidate strengths lambda (per parameter, in units of squared log residuals); inf = the defaults
STRENGTHS = (0.0, 0.01, 0.1, 1.0, math.inf)
#: folds of the inner cross-validation
INNER_FOLDS = 3


def _robust(r: np.ndarray, f_scale: float) -> tuple[np.ndarray, np.ndarray]:
    """g(r) with g^2 = f^2 rho_soft_l1((r/f)^2) = 2 f^2 (sqrt(1 + (r/f)^2) - 1), and dg/dr."""
    s = np.sqrt(1.0 + (r / f_scale) ** 2)
    g = np.sign(r) * f_scale * np.sqrt(np.maximum(2.0 * (s - 1.0), 0.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        dg = np.where(np.abs(r) > 1e-12 * f_scale, r / (s * np.where(g == 0, 1.0, g)), 1.0)
    return g, dg


def shrunk_least_squares(
    residuals: Callable[[np.ndarray], np.ndarray],
    jacobian: Callable[[np.ndarray], np.ndarray],
    x0: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    strength: float,
    f_scale: float = 0.1,
    max_nfev: int | None = None,
    start: np.ndarray | None = None,
):
    """Minimise sum rho(r(x)) + strength * |x - x0|^2 within [lower, upper] (module docstring).

    ``residuals(x)``: the data residuals r (log predicted / measured, one per row) at x = log p;
    ``jacobian(x)``: dr/dx (rows x parameters); ``x0``: log of the defaults, the start and the
    point shrunk toward; ``strength``: lambda >= 0 (inf returns x0 unchanged); ``f_scale``: the
    soft-l1 scale in log units; ``start``: where the solver starts (default ``x0``).  Returns
    scipy's ``OptimizeResult`` (``x``, ``status``, ...);
    needs scipy."""
    from scipy.optimize import OptimizeResult, least_squares

    x0 = np.asarray(x0, dtype=float)
    if math.isinf(strength):
        return OptimizeResult(x=x0.copy(), status=0, nfev=0)
    if strength < 0:
        raise PaigridError(f"a shrinkage strength is >= 0, not {strength:g}.")
    root = math.sqrt(strength)

    def augmented(x):
        g, _ = _robust(residuals(x), f_scale)
        return np.concatenate([g, root * (x - x0)])

    def augmented_jac(x):
        _, dg = _robust(residuals(x), f_scale)
        return np.vstack([dg[:, None] * jacobian(x), root * np.eye(len(x))])

    start = np.clip(x0 if start is None else np.asarray(start, dtype=float), lower, upper)
    return least_squares(
        augmented,
        start,
        jac=augmented_jac,
        bounds=(lower, upper),
        loss="linear",
        x_scale=1.0,
        max_nfev=max_nfev or 200 * max(1, len(x0)),
    )


@dataclass
class StrengthChoice:
    """The result of ``choose_strength``: the strength chosen and each candidate's score (mean
    |log residual| on the inner held-out folds; inf where a fold could not be fitted)."""

    strength: float
    scores: dict[float, float]
    folds: int
    grouped: bool = True  # False: rows were dealt to the folds (fewer groups than folds)


def inner_folds(groups: Sequence[str], k: int = INNER_FOLDS) -> list[list[int]]:
    """Indices of ``k`` folds: whole groups (a workload, say) dealt round-robin in sorted order
    (deterministic), or rows dealt round-robin when there are fewer than ``k`` groups."""
    names = sorted(set(groups))
    if len(names) >= k:
        fold_of = {name: i % k for i, name in enumerate(names)}
        return [[i for i, g in enumerate(groups) if fold_of[g] == f] for f in range(k)]
    n = len(groups)
    return [[i for i in range(n) if i % k == f] for f in range(min(k, n))]


def choose_strength(
    n_rows: int,
    groups: Sequence[str],
    held_out_residuals: Callable[[list[int], list[int], float], np.ndarray],
    strengths: Sequence[float] = STRENGTHS,
    k: int = INNER_FOLDS,
) -> StrengthChoice:
    """Cross-validate the shrinkage strength on ``n_rows`` training rows (module docstring).

    ``groups``: one label per row (folds keep a label together: ``inner_folds``);
    ``held_out_residuals(train, test, strength)``: log residuals of the rows ``test`` predicted
    by a fit of strength ``strength`` to the rows ``train`` (index lists), the caller's own model
    and parameters (a fit that is refused should return the residuals of the defaults: that is
    what the calibration would predict).  Returns the ``StrengthChoice``; with fewer than two
    rows there is nothing to cross-validate and the defaults (inf) are chosen."""
    if n_rows < 2:
        return StrengthChoice(math.inf, {math.inf: math.nan}, 0)
    folds = inner_folds(list(groups), k)
    scores: dict[float, float] = {}
    for strength in strengths:
        pooled = []
        for test in folds:
            train = [i for i in range(n_rows) if i not in set(test)]
            if not train or not test:
                continue
            pooled.append(np.abs(np.asarray(held_out_residuals(train, test, strength), dtype=float)))
        values = np.concatenate(pooled) if pooled else np.array([np.inf])
        scores[strength] = float(np.mean(values)) if np.all(np.isfinite(values)) else math.inf
    best = min(scores.values())
    # ties (within 1e-9) go to the strongest shrinkage: the closest to the sourced defaults
    chosen = max(s for s, v in scores.items() if v <= best + 1e-9)
    return StrengthChoice(chosen, scores, len(folds), len(set(groups)) >= k)


def shrunk_linear_least_squares(
    r: np.ndarray,
    jac: np.ndarray,
    x_lin: np.ndarray,
    x0: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    strength: float,
    f_scale: float = 0.1,
    start: np.ndarray | None = None,
    iterations: int = 100,
) -> np.ndarray:
    """``shrunk_least_squares`` of a linear model: minimise sum rho(r + J (x - x_lin)) +
    strength * |x - x0|^2 within [lower, upper] (rho: soft-l1 of scale ``f_scale``), by
    iteratively reweighted least squares: rho is concave in r^2, so each reweighted problem
    (weights 1 / sqrt(1 + (r/f)^2) at the current point) bounds the objective from above and
    its minimum lowers it; each is a bounded quadratic in the parameters alone (``jac`` columns),
    solved through the Cholesky factor of its normal matrix (``scipy.optimize.lsq_linear``),
    never through the rows.  Returns x (inf strength: x0)."""
    from scipy.linalg import cho_factor, solve_triangular
    from scipy.optimize import lsq_linear

    x0 = np.asarray(x0, dtype=float)
    if math.isinf(strength):
        return x0.copy()
    if strength < 0:
        raise PaigridError(f"a shrinkage strength is >= 0, not {strength:g}.")
    x = np.clip(x0 if start is None else np.asarray(start, dtype=float), lower, upper)
    base = jac @ x_lin - r  # r + J (x - x_lin) = J x - base
    eye = np.eye(len(x))
    for _ in range(iterations):
        residual = jac @ x - base
        w = 1.0 / np.sqrt(1.0 + (residual / f_scale) ** 2)
        normal = jac.T @ (w[:, None] * jac) + strength * eye
        rhs = jac.T @ (w * base) + strength * x0
        scale = max(float(np.trace(normal)) / max(len(x), 1), 1e-300)
        factor, _ = cho_factor(normal + 1e-12 * scale * eye, lower=True)
        lower_factor = np.tril(factor)
        # 1/2 x^T N x - rhs^T x = 1/2 |L^T x - L^-1 rhs|^2 + const
        target = solve_triangular(lower_factor, rhs, lower=True)
        new = lsq_linear(lower_factor.T, target, bounds=(lower, upper), method="bvls").x
        moved = float(np.max(np.abs(new - x))) if len(x) else 0.0
        x = new
        if moved < 1e-7:
            break
    return x
