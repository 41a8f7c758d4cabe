"""The array core of the queries: best, top and Pareto front over numpy arrays of step times and
their coordinate labels, whatever the arrays were read from (``paigrid.sources``: a file's
chunks or an xarray Dataset) and whichever family they hold.

Configurations are compared by time, cost or energy per sample (``kernels.metrics``, the one
definition the kernels use too); a NaN metric ranks last, and ties go to the first in the
arrays' order, so every path that ranks the same configurations in the same order gives the
same rows.  Nothing here reads a file or imports numba.
"""

from __future__ import annotations

import math

import numpy as np

from paigrid.kernels.metrics import (
    cost_per_sample,
    cost_per_step_second,
    energy_per_sample,
    energy_per_step_second,
    time_per_sample,
)
from paigrid.schema import first_of_equivalents

#: what a query ranks by: time, cost or energy per sample
RANKINGS = ("time", "cost", "energy")


def per_sample(by: str, step, n, samples_per_step, price, power):
    """The metric ``by`` ranks of configurations of ``step`` [s] on ``n`` GPUs of
    ``samples_per_step`` samples each, at ``price`` [USD/GPU-hour] and board ``power`` [W]
    (arrays broadcast): time [s/sample], cost [USD/1e6 samples] or energy [J/sample] per sample."""
    if by == "time":
        return time_per_sample(step, n, samples_per_step)
    if by == "cost":
        return cost_per_sample(step, price, samples_per_step)
    return energy_per_sample(step, power, samples_per_step)


def time_cost_and_metric(by: str, step, n, samples_per_step, price, power) -> tuple:
    """(time, cost, the metric ``by`` ranks) per sample of step times ``step`` [s] (``per_sample``;
    the metric is one of the other two unless ``by`` is energy)."""
    time = per_sample("time", step, n, samples_per_step, price, power)
    cost = per_sample("cost", step, n, samples_per_step, price, power)
    metric = time if by == "time" else cost if by == "cost" else per_sample(by, step, n, samples_per_step, price, power)
    return time, cost, metric


def step_factor(by: str, n, samples_per_step, price, power) -> tuple[np.ndarray, bool]:
    """(factor, divide): ``per_sample(by, step, ...)`` is ``step / factor`` with ``divide`` (time:
    factor = GPUs x samples per step) and ``factor x step`` without (cost and energy: their
    ``*_per_step_second``), the form the one-pass scan kernel (``kernels.scan``) takes."""
    if by == "time":
        return np.asarray(n * samples_per_step, dtype=np.float64), True
    if by == "cost":
        return np.asarray(cost_per_step_second(price, samples_per_step), dtype=np.float64), False
    return np.asarray(energy_per_step_second(power, samples_per_step), dtype=np.float64), False


def ranked(metric: np.ndarray, top: int) -> list[int]:
    """Positions of the ``top`` smallest of ``metric`` (NaN last, ties in position order), the
    first always (a NaN first: nothing qualifies), NaN ones after it left out."""
    order = np.argsort(np.where(np.isnan(metric), np.inf, metric), kind="stable")[:top]
    return [int(k) for rank, k in enumerate(order) if rank == 0 or not math.isnan(metric[k])]


def pareto_front(time: np.ndarray, cost: np.ndarray) -> list[int]:
    """Indices of the non-dominated points (smaller is better in both), by increasing time;
    of equal points the first is kept, NaN points are left out."""
    candidates = np.nonzero(~(np.isnan(time) | np.isnan(cost)))[0]
    front, cheapest = [], np.inf
    for k in candidates[np.lexsort((cost[candidates], time[candidates]))]:  # stable: first of equals
        if cost[k] < cheapest:
            front.append(int(k))
            cheapest = cost[k]
    return front


def rows_to_show(time: np.ndarray, cost: np.ndarray, metric: np.ndarray, top: int, pareto: bool) -> list[int]:
    """The candidates that become result rows: the Pareto front of time and cost per sample (the
    first candidate when there is none), or the ``top`` first by ``metric`` (``ranked``)."""
    if pareto:
        return pareto_front(time, cost) or [0]
    return ranked(metric, top)


def shortlist(time: np.ndarray, metric: np.ndarray, cost: np.ndarray, top: int, pareto: bool) -> np.ndarray:
    """Flat positions, increasing, of the few configurations of one job that can be rows: for
    ``pareto`` every one with a time and a cost (position 0 when none has), else the ``top``
    first by (metric, position), NaN last: ``ranked`` of these picks what it would pick of all."""
    if pareto:
        cand = np.flatnonzero(~(np.isnan(time) | np.isnan(cost)))
        return cand if cand.size else np.zeros(1, dtype=np.intp)
    key = np.where(np.isnan(metric), np.inf, metric).reshape(-1)
    if top == 1:  # the first of the smallest: argmin, without partitioning every key
        return np.array([int(np.argmin(key))], dtype=np.intp)
    k = min(top, key.size)
    kth = np.partition(key, k - 1)[k - 1]
    below = np.flatnonzero(key < kth)
    return np.union1d(below, np.flatnonzero(key == kth)[: k - below.size])


def distinct_configurations(
    step: np.ndarray, fits: np.ndarray, arch_names: list[str], dedupe: bool = True
) -> np.ndarray:
    """One job's step times [s] over (arch, gpu, n_gpu, intra, network, precision) as (gpu, n_gpu,
    precision, arch, intra, network), NaN where the (gpu, precision) does not fit in memory
    (``fits`` over (gpu, precision), 1 where it does) and, with ``dedupe``, each distinct
    configuration once (``schema.first_of_equivalents``: an architecture that ignores intra or
    network counts its first finite cell along it; without, it stays in every design)."""
    # one copy, float64 in the order of the positions; then the (gpu, precision) that do not fit,
    # a few slices, instead of a masked temporary of the whole job
    out = np.array(step.transpose(1, 2, 5, 0, 3, 4), dtype=np.float64)
    for g, p in zip(*np.nonzero(fits != 1)):
        out[g, :, p] = np.nan
    return first_of_equivalents(out, arch_names, copy=False) if dedupe else out


def ties_within(block: np.ndarray, arch_names: list[str], step: float, band: float) -> float:
    """How many other distinct configurations of ``block`` (step times [s] over (arch, intra,
    network)) have a step time within ``band`` (a fraction) of ``step`` [s]."""
    within = np.sum(first_of_equivalents(block, arch_names) <= step * (1.0 + band))
    return float(max(int(within) - 1, 0))


def best_per_group(metric: np.ndarray, group_axes: tuple[int, ...]) -> np.ndarray:
    """Flat positions in ``metric`` (any shape) of the best of each group, the groups being the
    coordinates along ``group_axes`` (a cluster design: e.g. gpu, n_gpu, intra, network), in the
    groups' order; the best is the smallest (ties: the first by position), a group without a
    finite value has none."""
    shape = metric.shape
    others = tuple(a for a in range(metric.ndim) if a not in group_axes)
    key = np.where(np.isnan(metric), np.inf, metric).transpose(*group_axes, *others)
    groups = math.prod(shape[a] for a in group_axes)
    flat = key.reshape(groups, -1)
    best = np.argmin(flat, axis=1)  # the first of equals: the other axes keep their order
    found = np.isfinite(flat[np.arange(groups), best])
    index = [np.empty(0, np.intp)] * metric.ndim
    for a, idx in zip(group_axes, np.unravel_index(np.arange(groups), [shape[a] for a in group_axes])):
        index[a] = idx
    for a, idx in zip(others, np.unravel_index(best, [shape[a] for a in others])):
        index[a] = idx
    return np.ravel_multi_index(tuple(index), shape)[found]
