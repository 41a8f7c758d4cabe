"""Uncertainty of the report's figures, from the prediction bands of the model that made the cube.

A prediction's band ``b`` (``datasets/prediction_bands.csv``, stored per job in the cube's
``prediction_band``) is the 68th percentile of the model's cross-validated relative error
|predicted / measured - 1| for the configuration's group (one GPU, one server, several
servers).  Here a prediction's error is drawn as ``e = z x b`` with ``z`` standard normal (so
|e| <= b with probability 68%), and every figure is recomputed under many draws; its band is
the spread of the 16th to 84th percentile of the recomputed figure around its median, placed
around the figure (:func:`interval`).

How the jobs' errors combine (:class:`ErrorModel`):

* ``correlated`` (the default): one ``z`` per (workload, GPU) group, shared by every job of the
  workload on that GPU and by every configuration of those jobs on that GPU (the model's error
  comes mostly from its per-GPU efficiencies and per-workload byte counts, so it is the same
  sign for them); groups are independent of each other.  A ratio of two predictions on the
  same GPU and in the same band group (the Ethernet and mixed-precision projections) then has
  no band: the error cancels.
* ``independent``: every prediction its own ``z`` -- what the band would be if nothing were
  correlated; the widest band for a ratio, the narrowest for a total.

Neither is shown by the data (the bands are pooled over held-out workloads and GPU
generations, not measured per pair), so the report gives both.  Totals (GPU-hours, cost,
energy) are also given with every error of the same sign (:func:`total_band`), the widest a
total can be.  A job in a group with no band (NaN: no held-out measurement, e.g. several
servers) takes :func:`fallback_band` -- the largest band of the model -- and is counted.
"""

from __future__ import annotations

import math
import zlib

import numpy as np

N_DRAWS = 400
"""Draws of the errors per figure (the 16th/84th percentiles move by well under 1% of the band
between seeds at this count)."""


def fallback_band(bands: np.ndarray) -> float:
    """The band of a prediction whose group has none: the largest finite band given (a
    fraction), an assumption; NaN when there is none at all."""
    finite = np.asarray(bands, dtype=float)
    finite = finite[np.isfinite(finite)]
    return float(finite.max()) if len(finite) else math.nan


class ErrorModel:
    """Relative errors of predictions, drawn reproducibly (see the module docstring)."""

    def __init__(self, correlated: bool = True, n_draws: int = N_DRAWS, seed: int = 0):
        self.correlated, self.n_draws, self.seed = correlated, n_draws, seed
        self._calls = 0

    def _z(self, key: str) -> np.ndarray:
        rng = np.random.default_rng([self.seed, zlib.crc32(key.encode())])
        return rng.standard_normal(self.n_draws)

    def errors(self, workload, gpu, band) -> np.ndarray:
        """(n_draws, n) relative errors of n predictions: ``workload`` and ``gpu`` (names per
        prediction) choose the group, ``band`` (fraction per prediction) scales it.  Errors are
        kept above -0.9 (a time stays positive)."""
        band = np.asarray(band, dtype=float)
        n = len(band)
        if self.correlated:
            keys = [f"{w}\t{g}" for w, g in zip(workload, gpu)]
            distinct = list(dict.fromkeys(keys))
            table = np.stack([self._z(k) for k in distinct], axis=1) if distinct else np.zeros((self.n_draws, 0))
            where = {k: i for i, k in enumerate(distinct)}
            z = table[:, [where[k] for k in keys]] if n else np.zeros((self.n_draws, 0))
        else:
            self._calls += 1
            z = np.random.default_rng([self.seed, 1 << 20, self._calls]).standard_normal((self.n_draws, n))
        return np.maximum(z * band[None, :], -0.9)


def interval(values: np.ndarray, point: float) -> tuple[float, float]:
    """The band of a figure whose value is ``point``, from its recomputed ``values`` under the
    drawn errors: the spread of their 16th and 84th percentiles around their median, placed
    around ``point`` (so a figure that averages ratios, whose draws are skewed, keeps its value
    inside its band); NaN when no draw is finite."""
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    if not len(values) or not math.isfinite(point):
        return (math.nan, math.nan)
    low, mid, high = np.percentile(values, [16, 50, 84])
    return float(point + low - mid), float(point + high - mid)


def speedup_band(
    model: ErrorModel, workload, base_gpu, target_gpu, base_band, target_band, base_time, target_time, figure
) -> tuple[float, float]:
    """Band of ``figure(speedups)`` (a callable over an array of per-job speedups, e.g. the mean)
    when each job's base and target step times [s] carry the errors of ``model``."""
    if len(base_time) == 0:
        return (math.nan, math.nan)
    eb = model.errors(workload, base_gpu, base_band)
    et = model.errors(workload, target_gpu, target_band)
    base_time, target_time = np.asarray(base_time, dtype=float), np.asarray(target_time, dtype=float)
    speed = (base_time[None, :] * (1 + eb)) / (target_time[None, :] * (1 + et))
    return interval([figure(row) for row in speed], figure(base_time / target_time))


def share_band(model: ErrorModel, workload, gpu, band, share, figure) -> tuple[float, float]:
    """Band of ``figure(shares)`` for a time share of one prediction (e.g. communication over the
    step), taking the whole error of the step time as an error of that component, for the jobs
    whose component is not zero: share' = (share + e) / (1 + e), within [0, 1]."""
    if len(share) == 0:
        return (math.nan, math.nan)
    e = model.errors(workload, gpu, band)
    share = np.asarray(share, dtype=float)[None, :]
    moved = np.where(share > 0, np.clip((share + e) / (1 + e), 0.0, 1.0), share)
    return interval([figure(row) for row in moved], figure(share[0]))


def total_band(values: np.ndarray, bands: np.ndarray, groups) -> dict[str, float]:
    """Band of a total sum(values) whose terms carry relative bands, as absolute half-widths in
    the values' units: ``correlated`` (fully correlated within each group, independent across
    groups: sqrt of the sum over groups of (sum of value x band)^2) and ``same_sign`` (every
    error of the same sign: the sum of value x band)."""
    values, bands = np.asarray(values, dtype=float), np.asarray(bands, dtype=float)
    per_group: dict = {}
    for g, x in zip(groups, values * bands):
        per_group[g] = per_group.get(g, 0.0) + x
    return {
        "correlated": float(math.sqrt(sum(v * v for v in per_group.values()))),
        "same_sign": float(np.sum(values * bands)),
    }
