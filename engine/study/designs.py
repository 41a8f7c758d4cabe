"""Cluster designs for a population: which hardware serves the population's jobs best.

A *design* is one value of every hardware dimension of the cube -- every labelled dimension but
the job's own choices (architecture, GPU count, precision): today GPU, intra-server link and
network (:func:`design_dims`; a dimension the cube gains joins by itself).  For every design and
every analysed job (the report's: a valid current configuration in the cube):

* **at its current GPU count**: the job keeps its architecture, GPU count and precision and runs
  on the design; its step time is read from the cube.
* **at its cheapest GPU count**: among one GPU (``1w1g``) and the powers of two below its current
  count (its architecture kept), the count with the fewest GPU-hours for its work, predicted
  directly by the model that made the cube (``predict.config_values``; the cube holds only the
  current count).

Each job's *work* is what it processes in one hour today (its current configuration), so
today's population costs sum(current GPUs) GPU-hours.  With the per-GPU batch fixed, a job that
runs n GPUs at step time T where it ran n0 GPUs at T0 takes (n0 / n) x T / T0 hours and
n0 x T / T0 GPU-hours; cost = GPU-hours x the GPU's price [USD/GPU-hour], energy = GPU-hours x
its board power [W] / 1000 [kWh] (the cube's ``price`` and ``power``).  A configuration that is
invalid or does not fit in GPU memory cannot run the job; a design's totals are over the jobs it
can run, and it is ranked first by the jobs it cannot run, then by cost.

A job's *best design* is its cheapest at its current count; it is a *tie* when the second
cheapest costs less than the job's prediction band more (the two predictions are not told apart
by the model's accuracy).
"""

from __future__ import annotations

import math

import numpy as np

from paigrid.kernels import layout as L
from paigrid.schema import DIMS, LABEL_DIMS, is_valid, validity_variable
from paigrid.study.bands import total_band

JOB_CHOICES = ("arch", "n_gpu", "precision")
"""Dimensions a job chooses for itself; every other labelled dimension is part of a design."""


def design_dims() -> tuple[str, ...]:
    """The hardware dimensions of a design, in cube order."""
    return tuple(d for d in LABEL_DIMS if d not in JOB_CHOICES)


def read_designs(cube, rows: np.ndarray, arch_idx: np.ndarray, prec_idx: np.ndarray, block_jobs: int = 1024) -> dict:
    """Step time [s], usability and bottleneck of the jobs ``rows`` (indices into the cube) at
    their current architecture ``arch_idx``, current count and precision ``prec_idx`` on every
    design: arrays (len(rows), n_designs), designs flattened in C order over :func:`design_dims`."""
    f = cube.file
    dims = design_dims()
    shape = tuple(len(cube.labels[d]) for d in dims)
    n_designs = int(np.prod(shape))
    out = {
        "step_time": np.full((len(rows), n_designs), np.nan),
        "ok": np.zeros((len(rows), n_designs), bool),
        "bottleneck": np.full((len(rows), n_designs), L.FLAG_FILL, np.uint8),
    }
    validity = validity_variable(cube.format)
    gpu_axis = dims.index("gpu")
    for k0 in range(0, len(rows), block_jobs):
        k1 = min(len(rows), k0 + block_jobs)
        j0, j1 = int(rows[k0:k1].min()), int(rows[k0:k1].max()) + 1
        r = rows[k0:k1] - j0
        index = tuple(
            {"job": r, "arch": arch_idx[k0:k1], "n_gpu": 0, "precision": prec_idx[k0:k1]}.get(d, slice(None))
            for d in DIMS
        )
        step = f["step_time"][j0:j1][index].reshape(k1 - k0, n_designs)
        valid = is_valid(f[validity][j0:j1][index], cube.format).reshape(k1 - k0, n_designs)
        fits = f["fits_memory"][j0:j1][r, :, prec_idx[k0:k1]]  # (jobs, gpu)
        shape_fits = [1] * len(dims)
        shape_fits[gpu_axis] = shape[gpu_axis]
        fits = np.broadcast_to(fits.reshape(k1 - k0, *shape_fits), (k1 - k0, *shape)).reshape(k1 - k0, n_designs)
        out["step_time"][k0:k1] = step
        out["ok"][k0:k1] = valid & (fits == 1) & np.isfinite(step)
        out["bottleneck"][k0:k1] = f["bottleneck"][j0:j1][index].reshape(k1 - k0, n_designs)
    out["labels"] = [
        {d: str(cube.labels[d][int(i)]) for d, i in zip(dims, np.unravel_index(k, shape))} for k in range(n_designs)
    ]
    return out


def cheapest_counts(pop, designs: list[dict], today: np.ndarray, block: int = 20000) -> dict:
    """Per job and design: the step time [s], GPU count and GPU-hours of the cheapest count
    (see the module docstring), predicted under the options of ``pop`` (the cube's); NaN / 0
    where no count can run.  ``today``: current step times [s] of ``pop.jobs``."""
    from paigrid.predict import config_values

    n = len(pop.jobs)
    n0 = pop.n_gpu.astype(int)
    counts = [sorted({1, *[2**k for k in range(1, 12) if 2**k < c]}) for c in n0]
    hours = np.full((n, len(designs)), np.inf)
    best_n = np.zeros((n, len(designs)), np.int64)
    best_t = np.full((n, len(designs)), np.nan)
    best_b = np.full((n, len(designs)), L.FLAG_FILL, np.uint8)
    # the step time at a count on a design does not depend on the job's current hardware: jobs alike in
    # everything else (model, batch, options, architecture, precision, count) are predicted once
    keys = [
        (j.model, j.batch, tuple(sorted(j.options.items())), j.current["arch"], j.current["precision"], int(c))
        for j, c in zip(pop.jobs, n0)
    ]
    distinct = list(dict.fromkeys(keys))
    first_job = {}
    for i, k in enumerate(keys):
        first_job.setdefault(k, i)
    where = {k: u for u, k in enumerate(distinct)}
    of_job = np.array([where[k] for k in keys], dtype=np.int64)
    pairs = [(u, c) for u, k in enumerate(distinct) for c in counts[first_job[k]] if c < k[-1]]
    if not pairs:
        return {"gpu_hours": hours, "n_gpu": best_n, "step_time": best_t, "bottleneck": best_b}
    rep = np.array([first_job[distinct[u]] for u, _ in pairs])
    unit = np.array([u for u, _ in pairs])
    count_of = np.array([c for _, c in pairs])
    u_time = np.full((len(distinct), len(designs)), np.inf)
    u_n = np.zeros((len(distinct), len(designs)), np.int64)
    u_b = np.full((len(distinct), len(designs)), L.FLAG_FILL, np.uint8)
    for d, design in enumerate(designs):
        for p0 in range(0, len(pairs), block):
            sel = slice(p0, p0 + block)
            jobs = [pop.jobs[i] for i in rep[sel]]
            configs = [
                {**pop.jobs[i].current, **design, "n_gpu": int(c), **({"arch": "1w1g"} if c == 1 else {})}
                for i, c in zip(rep[sel], count_of[sel])
            ]
            v = config_values(jobs, configs, pop.cats, pop.eff, pop.options)
            ok = (v["invalid_reason"] == 0) & (v["fits_memory"] == 1)
            t = np.where(ok, np.asarray(v["step_time"], dtype=float), np.inf)
            # per job, GPU-hours n0 x T(n) / T0 are fewest where T(n) is: the count of the shortest step
            order = np.lexsort((t, unit[sel]))
            first = order[np.r_[True, unit[sel][order][1:] != unit[sel][order][:-1]]]
            u = unit[sel][first]
            better = t[first] < u_time[u, d]
            u, m = u[better], first[better]
            u_time[u, d], u_n[u, d], u_b[u, d] = t[m], count_of[sel][m], np.asarray(v["bottleneck"])[m]
    best_t = np.where(np.isfinite(u_time[of_job]), u_time[of_job], np.nan)
    hours = np.where(np.isfinite(best_t), n0[:, None] * best_t / today[:, None], np.inf)
    best_n, best_b = u_n[of_job], u_b[of_job]
    return {"gpu_hours": hours, "n_gpu": best_n, "step_time": best_t, "bottleneck": best_b}


def _per_gpu(cube, pop, variable: str, column: str) -> dict[str, float]:
    """GPU name -> the cube's ``price`` [USD/GPU-hour] or ``power`` [W]; a cube written before
    they were stored takes the GPU catalogue's column."""
    if variable in cube.file:
        return dict(zip(map(str, cube.labels["gpu"]), np.asarray(cube.file[variable][:], dtype=float)))
    return {str(g): pop.cats.gpus.number(str(g), column) for g in cube.labels["gpu"]}


def _bottleneck_mix(codes: np.ndarray) -> dict[str, int]:
    return {name: int(np.sum(codes == k)) for k, name in enumerate(L.BOTTLENECK_NAMES)}


def compute_designs(
    cube,
    pop,
    rows: np.ndarray,
    arch_idx: np.ndarray,
    prec_idx: np.ndarray,
    today: np.ndarray,
    band: np.ndarray,
    block_jobs: int = 1024,
) -> dict:
    """The design ranking of the analysed jobs ``rows`` (cube indices; ``pop.jobs`` the same jobs
    in the same order), with ``today`` their current step times [s] and ``band`` their relative
    prediction bands.  Returns ``designs`` (one dict per design, ranked), ``today`` (the
    population's totals as it runs), ``ties`` and ``best`` (per-job best designs), ``pareto``
    (indices into ``designs`` of the points on the front) and ``dims``."""
    grid = read_designs(cube, rows, arch_idx, prec_idx, block_jobs)
    price, power = (
        _per_gpu(cube, pop, name, column) for name, column in (("price", "price_USD_per_gpu_hour"), ("power", "tdp_W"))
    )
    n0 = pop.n_gpu
    # designs no analysed job can run (an NVLink intra link on a PCIe card) are not designs
    usable = grid["ok"].any(axis=0)
    keep = np.flatnonzero(usable)
    labels = [grid["labels"][k] for k in keep]
    step, ok, bottleneck = grid["step_time"][:, keep], grid["ok"][:, keep], grid["bottleneck"][:, keep]
    cheap = cheapest_counts(pop, labels, today)
    # a job at its current count on the design may be its cheapest count too
    hours_now = n0[:, None] * step / today[:, None]
    cheaper_now = ok & (hours_now <= cheap["gpu_hours"])
    cheap_hours = np.where(cheaper_now, hours_now, cheap["gpu_hours"])
    cheap_count = np.where(cheaper_now, n0[:, None], cheap["n_gpu"])
    cheap_ok = np.isfinite(cheap_hours)
    cheap_bn = np.where(cheaper_now, bottleneck, cheap["bottleneck"])
    wall_now = step / today[:, None]  # hours per job's work
    wall_cheap = np.where(cheap_ok, cheap_hours / np.maximum(cheap_count, 1), np.nan)
    models = np.array([j.model for j in pop.jobs], dtype=object)
    out = []
    for d, lab in enumerate(labels):
        g = lab["gpu"]
        o, c = ok[:, d], cheap_ok[:, d]
        gh_now, gh_cheap = hours_now[o, d], cheap_hours[c, d]
        groups_now = [f"{m}\t{g}" for m in models[o]]
        groups_cheap = [f"{m}\t{g}" for m in models[c]]
        row = {
            "design": lab,
            "cannot_run": int(np.sum(~o)),
            "cannot_run_cheapest": int(np.sum(~c)),
            "jobs": int(o.sum()),
            "current": {
                "gpu_hours": float(gh_now.sum()),
                "cost": float(gh_now.sum() * price[g]),
                "energy_kWh": float(gh_now.sum() * power[g] / 1000),
                "job_hours": float(wall_now[o, d].sum()),
                "band": total_band(gh_now * price[g], band[o], groups_now),
            },
            "cheapest": {
                "gpu_hours": float(gh_cheap.sum()),
                "cost": float(gh_cheap.sum() * price[g]),
                "energy_kWh": float(gh_cheap.sum() * power[g] / 1000),
                "job_hours": float(wall_cheap[c, d].sum()),
                "mean_n_gpu": float(np.mean(cheap_count[c, d])) if c.any() else math.nan,
                "band": total_band(gh_cheap * price[g], band[c], groups_cheap),
            },
            "faster": float(np.mean(step[o, d] < today[o])) if o.any() else math.nan,
            "slower": float(np.mean(step[o, d] > today[o])) if o.any() else math.nan,
            "faster_beyond_band": float(np.mean(step[o, d] * (1 + band[o]) < today[o])) if o.any() else math.nan,
            "slower_beyond_band": float(np.mean(step[o, d] > today[o] * (1 + band[o]))) if o.any() else math.nan,
            "bottlenecks": _bottleneck_mix(bottleneck[o, d]),
            "bottlenecks_cheapest": _bottleneck_mix(cheap_bn[c, d]),
        }
        out.append(row)
    order = sorted(range(len(out)), key=lambda k: (out[k]["cannot_run"], out[k]["current"]["cost"]))
    ranked = [out[k] for k in order]
    today_price = np.array([price.get(str(j.current["gpu"]), math.nan) for j in pop.jobs])
    today_power = np.array([power.get(str(j.current["gpu"]), math.nan) for j in pop.jobs])
    today_totals = {
        "jobs": len(pop.jobs),
        "gpu_hours": float(n0.sum()),
        "cost": float(np.sum(n0 * today_price)),
        "energy_kWh": float(np.sum(n0 * today_power) / 1000),
        "job_hours": float(len(pop.jobs)),
        "band": total_band(n0 * today_price, band, [f"{m}\t{j.current['gpu']}" for m, j in zip(models, pop.jobs)]),
    }
    # each job's best design at its current count (by cost), and ties within its band
    cost_now = np.where(ok, hours_now * np.array([price[lab["gpu"]] for lab in labels])[None, :], np.inf)
    ranked_index = np.array(order)
    cost_now = cost_now[:, ranked_index]
    runnable = np.isfinite(cost_now).any(axis=1)
    sorted_cost = np.sort(cost_now, axis=1)
    first = sorted_cost[:, 0]
    second = sorted_cost[:, 1] if cost_now.shape[1] > 1 else np.full(len(first), np.inf)
    tie = runnable & (second <= first * (1 + band))
    best = np.argmin(cost_now, axis=1)
    best_counts: dict[int, int] = {}
    for k in best[runnable]:
        best_counts[int(k)] = best_counts.get(int(k), 0) + 1
    return {
        "dims": design_dims(),
        "designs": ranked,
        "today": today_totals,
        "ties": {
            "jobs": int(runnable.sum()),
            "tied": int(tie.sum()),
            "share": float(np.mean(tie[runnable])) if runnable.any() else math.nan,
        },
        "best": dict(sorted(best_counts.items(), key=lambda kv: -kv[1])),
        "pareto": pareto(ranked),
    }


def pareto(designs: list[dict]) -> list[tuple[int, str]]:
    """The points on the front of cost against job-hours: ``(design index, "current" or
    "cheapest")``, over the designs that run the most jobs (fewest ``cannot_run``), cheapest first."""
    if not designs:
        return []
    fewest = min(d["cannot_run"] for d in designs)
    points = [
        (k, kind, d[kind]["cost"], d[kind]["job_hours"])
        for k, d in enumerate(designs)
        if d["cannot_run"] == fewest
        for kind in ("current", "cheapest")
        if math.isfinite(d[kind]["cost"]) and d[kind]["job_hours"] > 0
    ]
    points.sort(key=lambda p: (p[2], p[3]))
    front, best_time = [], math.inf
    for k, kind, _cost, hours in points:
        if hours < best_time:
            front.append((k, kind))
            best_time = hours
    return front
