"""Cluster designs for a population: which hardware serves the population's jobs best.

A *design* is where a job runs, one concept for both job families: a GPU, its intra-server link,
its NVLink domain and a network (or fabric), with the servers and NICs the sweep gave it.  The
data-parallel designs are every value of the cube's hardware dimensions -- every labelled
dimension but the job's own choices (architecture, GPU count, precision): GPU, intra-server link
and network (:func:`design_dims`; a dimension the cube gains joins by itself).  The LLM family's
designs are the ``llm`` group's (GPU, domain, network), each GPU with its one intra link
(``llm_designs``).  A cube with both families ranks one list of designs
(:func:`join_designs`): each family reads a design by its own dimensions and runs it the same
whatever the value of a dimension it does not have.  For every design and every analysed job
(the report's: a valid current configuration in the cube):

* **at its current GPU count**: the job keeps its architecture (an LLM job: its best layout on
  the design), GPU count and precision; its step time is read from the cube.
* **at its cheapest GPU count**: for a data-parallel job, among one GPU (``1w1g``) and the powers
  of two below its current count (its architecture kept), the count with the fewest GPU-hours
  for its work, predicted directly by the model that made the cube (``predict.config_values``;
  the cube holds only the current count); for an LLM job, among every count of the group's
  ``n_gpu`` axis, read from the cube.

Each job's *work* is what it processes in one hour today (its current configuration), so
today's population costs sum(current GPUs) GPU-hours.  With the per-GPU batch fixed, a
data-parallel job that runs n GPUs at step time T where it ran n0 GPUs at T0 takes (n0 / n) x T /
T0 hours and n0 x T / T0 GPU-hours; an LLM job's global batch is fixed, so it takes T / T0 hours
and n x T / T0 GPU-hours.  Cost = GPU-hours x the GPU's price [USD/GPU-hour], energy = GPU-hours
x its board power [W] / 1000 [kWh] (the cube's ``price`` and ``power``).  A configuration that is
invalid or does not fit in GPU memory cannot run the job; a design's totals are over the jobs it
can run, and it is ranked first by the jobs it cannot run, then by cost.

A job's *best design* is its cheapest at its current count; it is a *tie* when the second
cheapest costs less than the job's prediction band more (the two predictions are not told apart
by the model's accuracy).  The second cheapest is another design *to the job*: designs that
differ only in a dimension the job does not depend on -- one its family does not have (the NVLink
domain for a data-parallel job) or one its architecture ignores (``schema.ARCH_IGNORES``: the
network of a 1w1g job) -- give it the same step time and are one design to it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from paigrid.kernels import dp_columns as L
from paigrid.schema import ARCH_IGNORES, DIMS, LABEL_DIMS, is_valid, validity_variable
from paigrid.study.bands import total_band

JOB_CHOICES = ("arch", "n_gpu", "precision")
#: the dimensions ``fits_memory`` and the other per-(job, GPU) terms are stored over when a file
#: names none (``schema.JOB_GPU_VARIABLES``)
JOB_GPU_DIMS = ("job", "gpu", "precision")
"""Dimensions a job chooses for itself; every other labelled dimension is part of a design."""


def design_dims() -> tuple[str, ...]:
    """The hardware dimensions of a design, in cube order."""
    return tuple(d for d in LABEL_DIMS if d not in JOB_CHOICES)


def variable_dims(variable, fallback: tuple[str, ...]) -> tuple[str, ...]:
    """The dimension names of a cube variable: an h5py dataset's attached dimension scales, an
    xarray variable's ``dims``; ``fallback`` (the schema's) when it names none."""
    inner = getattr(variable, "variable", None)  # the report's stand-in over an xarray Dataset
    if inner is not None and getattr(inner, "dims", None):
        return tuple(inner.dims)
    try:
        names = tuple(str(dim[0].name).rsplit("/", 1)[-1] for dim in variable.dims)
    except (AttributeError, IndexError, KeyError, TypeError, RuntimeError):
        return fallback
    return names if len(names) == len(fallback) or len(names) == getattr(variable, "ndim", -1) else fallback


def read_at(f, name: str, rows: slice, index: dict, fallback: tuple[str, ...]) -> np.ndarray:
    """The variable ``name`` of the open cube ``f`` for the jobs ``rows``, indexed by dimension
    name: ``index[dim]`` (an int, an array aligned with the jobs, or absent for every value);
    the result's axes are the jobs, then each dimension left whole, in the variable's order."""
    dims = variable_dims(f[name], fallback)
    block = np.moveaxis(f[name][tuple(rows if d == "job" else slice(None) for d in dims)], dims.index("job"), 0)
    dims = ("job", *(d for d in dims if d != "job"))
    # the job and the chosen dimensions are advanced indices, so they come first, as one axis
    key = tuple(np.arange(block.shape[0]) if d == "job" else index.get(d, slice(None)) for d in dims)
    return block[key]


def _on_designs(block: tuple, name: str, stored: tuple[str, ...] = DIMS) -> np.ndarray:
    """(jobs, designs) of the variable ``name`` for one block of jobs (``block``: the file, the
    slice of jobs read, the rows of the analysed jobs in it, the job's own choices, the design
    dimensions and their sizes), broadcast over the design dimensions the variable lacks."""
    f, rows, r, choice, dims, shape = block
    have = variable_dims(f[name], stored)
    values = read_at(f, name, rows, choice, stored)[r]
    left = [d for d in have if d != "job" and d not in choice]
    expand = [shape[dims.index(d)] if d in left else 1 for d in dims]
    values = values.transpose([0, *[1 + left.index(d) for d in dims if d in left]])
    n = len(r)
    return np.broadcast_to(values.reshape(n, *expand), (n, *shape)).reshape(n, int(np.prod(shape)))


def read_designs(cube, rows: np.ndarray, arch_idx: np.ndarray, prec_idx: np.ndarray, block_jobs: int = 1024) -> dict:
    """Step time [s], usability and bottleneck of the jobs ``rows`` (indices into the cube) at
    their current architecture ``arch_idx``, current count and precision ``prec_idx`` on every
    design: arrays (len(rows), n_designs), designs flattened in C order over :func:`design_dims`.
    Every variable is read by its own dimension names (``fits_memory`` over whatever it is stored
    over), and a variable that does not vary along a design dimension is broadcast over it."""
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
    for k0 in range(0, len(rows), block_jobs):
        k1 = min(len(rows), k0 + block_jobs)
        j0, j1 = int(rows[k0:k1].min()), int(rows[k0:k1].max()) + 1
        r = rows[k0:k1] - j0
        choice = {"arch": arch_idx[k0:k1], "n_gpu": 0, "precision": prec_idx[k0:k1]}
        block = (f, slice(j0, j1), r, choice, dims, shape)
        step = _on_designs(block, "step_time")
        valid = is_valid(_on_designs(block, validity), cube.format)
        fits = _on_designs(block, "fits_memory", JOB_GPU_DIMS)
        out["step_time"][k0:k1] = step
        out["ok"][k0:k1] = valid & (fits == 1) & np.isfinite(step)
        out["bottleneck"][k0:k1] = _on_designs(block, "bottleneck")
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


def _mix(names: np.ndarray, order: tuple[str, ...]) -> dict[str, int]:
    """Jobs per bottleneck name, in ``order`` (every name of it present)."""
    return {name: int(np.sum(names == name)) for name in order}


def dp_family(cube, pop, rows, arch_idx, prec_idx, today: np.ndarray, block_jobs: int = 1024) -> dict:
    """The data-parallel jobs ``rows`` on every design their cube holds and some of them can run:
    the per-job arrays that :func:`compute_designs` ranks (see ``llm_designs.llm_family`` for the
    same arrays of the LLM family)."""
    grid = read_designs(cube, rows, arch_idx, prec_idx, block_jobs)
    # designs no analysed job can run (an NVLink intra link on a PCIe card) are not designs
    keep = np.flatnonzero(grid["ok"].any(axis=0))
    labels = [grid["labels"][k] for k in keep]
    step, ok = grid["step_time"][:, keep], grid["ok"][:, keep]
    names = np.array([*L.BOTTLENECK_NAMES, ""], dtype=object)
    to_name = np.full(256, len(L.BOTTLENECK_NAMES))
    to_name[: len(L.BOTTLENECK_NAMES)] = np.arange(len(L.BOTTLENECK_NAMES))
    bottleneck = names[to_name[grid["bottleneck"][:, keep]]]
    cheap = cheapest_counts(pop, labels, today)
    n0 = pop.n_gpu
    # a job at its current count on the design may be its cheapest count too
    hours_now = n0[:, None] * step / today[:, None]
    cheaper_now = ok & (hours_now <= cheap["gpu_hours"])
    # two designs are one to a job when they differ only in dimensions its architecture does not
    # depend on (schema.ARCH_IGNORES: a 1w1g job and the network, say)
    archs = [str(j.current["arch"]) for j in pop.jobs]
    same: dict[str, np.ndarray] = {}
    for arch in dict.fromkeys(archs):
        ignored = ARCH_IGNORES.get(arch, ())
        keys = [tuple(v for d, v in lab.items() if d not in ignored) for lab in labels]
        first = {k: i for i, k in reversed(list(enumerate(keys)))}
        same[arch] = np.array([first[k] for k in keys], dtype=np.int64)
    return {
        "labels": labels,
        "same": np.array([same[a] for a in archs]).reshape(len(archs), len(labels)),
        "names": [j.name for j in pop.jobs],
        "model": np.array([j.model for j in pop.jobs], dtype=object),
        "gpu": np.array([str(j.current["gpu"]) for j in pop.jobs], dtype=object),
        "n0": np.asarray(n0, dtype=float),
        "today": np.asarray(today, dtype=float),
        "step": step,
        "ok": ok,
        "bottleneck": np.where(ok, bottleneck, ""),
        "cheap_hours": np.where(cheaper_now, hours_now, cheap["gpu_hours"]),
        "cheap_count": np.where(cheaper_now, n0[:, None], cheap["n_gpu"]),
        "cheap_bottleneck": np.where(cheaper_now, bottleneck, names[to_name[cheap["bottleneck"]]]),
    }


#: the order of a design's dimensions when the families' designs are joined
DESIGN_ORDER = ("gpu", "intra", "domain", "network")


def join_designs(families: list[dict]) -> tuple[tuple[str, ...], list[dict], list[np.ndarray]]:
    """One list of designs for every family: the product of the values of every design dimension of
    any family, each family reading a design by its own dimensions (``-1``: the family's cube does
    not hold it).  A family's step time does not depend on a dimension it does not have (the
    data-parallel model has no NVLink domain: its intra link joins every GPU of a server); the LLM
    family has one intra link per GPU, so it runs a design only with that link.  Returns (dims,
    designs, one index array per family)."""
    present = [d for d in DESIGN_ORDER if any(d in f["labels"][0] for f in families if f["labels"])]
    present += [d for f in families if f["labels"] for d in f["labels"][0] if d not in present]
    values = {d: list(dict.fromkeys(lab[d] for f in families for lab in f["labels"] if d in lab)) for d in present}
    designs = [dict(zip(present, combo)) for combo in _product([values[d] for d in present])]
    maps = []
    for f in families:
        own = list(f["labels"][0]) if f["labels"] else []
        where = {tuple(lab[d] for d in own): k for k, lab in enumerate(f["labels"])}
        maps.append(np.array([where.get(tuple(x[d] for d in own), -1) for x in designs], dtype=np.int64))
    return tuple(present), designs, maps


def _product(lists: list[list]) -> list[tuple]:
    out: list[tuple] = [()]
    for values in lists:
        out = [(*head, v) for head in out for v in values]
    return out


def _take(values: np.ndarray, index: np.ndarray, fill) -> np.ndarray:
    """``values[:, index]`` with ``fill`` where the index is -1."""
    if values.shape[1] == 0:
        return np.full((values.shape[0], len(index)), fill, dtype=values.dtype)
    out = values[:, np.maximum(index, 0)]
    out[:, index < 0] = fill
    return out


def compute_designs(
    cube,
    pop,
    rows: np.ndarray,
    arch_idx: np.ndarray,
    prec_idx: np.ndarray,
    today: np.ndarray,
    band: np.ndarray,
    block_jobs: int = 1024,
    llm: dict | None = None,
    llm_band: float = math.nan,
) -> dict:
    """The design ranking of the analysed jobs ``rows`` (cube indices; ``pop.jobs`` the same jobs
    in the same order), with ``today`` their current step times [s] and ``band`` their relative
    prediction bands, and of the LLM jobs of ``llm`` (``llm_designs.llm_family``, each with the
    band ``llm_band``) on the same designs.  Returns ``designs`` (one dict per design, ranked),
    ``today`` (the population's totals as it runs), ``ties`` and ``best`` (per-job best designs),
    ``pareto`` (indices into ``designs`` of the points on the front), ``dims`` and ``families``
    (jobs ranked per family)."""
    families = [dp_family(cube, pop, rows, arch_idx, prec_idx, today, block_jobs)] if len(rows) else []
    bands = [np.asarray(band, dtype=float)] if len(rows) else []
    if llm is not None and llm["jobs"]:
        families.append(llm)
        bands.append(np.full(llm["jobs"], llm_band))
    price, power = (
        _per_gpu(cube, pop, name, column) for name, column in (("price", "price_USD_per_gpu_hour"), ("power", "tdp_W"))
    )
    if llm is not None and llm["jobs"]:
        price, power = {**llm["price"], **price}, {**llm["power"], **power}
    dims, designs, maps = join_designs(families)

    def stack(key: str, fill) -> np.ndarray:
        return np.concatenate([_take(f[key], m, fill) for f, m in zip(families, maps)], axis=0)

    step, ok = stack("step", np.nan), stack("ok", False)
    # per job and design: which of its family's designs it is, designs that are one to the job alike
    own = np.concatenate(
        [
            np.where(m[None, :] >= 0, f["same"][:, np.maximum(m, 0)], -1)
            if "same" in f
            else np.broadcast_to(m, (len(f["n0"]), len(m)))
            for f, m in zip(families, maps)
        ],
        axis=0,
    )
    bottleneck, cheap_bn = stack("bottleneck", ""), stack("cheap_bottleneck", "")
    cheap_hours, cheap_count = stack("cheap_hours", np.inf), stack("cheap_count", 0)
    t0 = np.concatenate([f["today"] for f in families])
    n0 = np.concatenate([f["n0"] for f in families])
    band = np.concatenate(bands)
    models = np.concatenate([f["model"] for f in families])
    now_gpu = np.concatenate([f["gpu"] for f in families])
    # designs no job of either family can run are not designs
    keep = np.flatnonzero(ok.any(axis=0))
    labels = [designs[k] for k in keep]
    step, ok, bottleneck, own = step[:, keep], ok[:, keep], bottleneck[:, keep], own[:, keep]
    cheap_hours, cheap_count, cheap_bn = cheap_hours[:, keep], cheap_count[:, keep], cheap_bn[:, keep]
    cheap_ok = np.isfinite(cheap_hours)
    hours_now = n0[:, None] * step / t0[:, None]
    wall_now = step / t0[:, None]  # hours per job's work
    wall_cheap = np.where(cheap_ok, cheap_hours / np.maximum(cheap_count, 1), np.nan)
    out: list[dict[str, Any]] = []
    order_names = L.BOTTLENECK_NAMES + (_llm_bottlenecks() if llm is not None and llm["jobs"] else ())
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
            "faster": float(np.mean(step[o, d] < t0[o])) if o.any() else math.nan,
            "slower": float(np.mean(step[o, d] > t0[o])) if o.any() else math.nan,
            "faster_beyond_band": float(np.mean(step[o, d] * (1 + band[o]) < t0[o])) if o.any() else math.nan,
            "slower_beyond_band": float(np.mean(step[o, d] > t0[o] * (1 + band[o]))) if o.any() else math.nan,
            "bottlenecks": _mix(bottleneck[o, d], order_names),
            "bottlenecks_cheapest": _mix(cheap_bn[c, d], order_names),
        }
        out.append(row)
    order = sorted(range(len(out)), key=lambda k: (out[k]["cannot_run"], out[k]["current"]["cost"]))
    ranked = [out[k] for k in order]
    today_price = np.array([price.get(str(x), math.nan) for x in now_gpu])
    today_power = np.array([power.get(str(x), math.nan) for x in now_gpu])
    today_totals = {
        "jobs": len(n0),
        "gpu_hours": float(n0.sum()),
        "cost": float(np.sum(n0 * today_price)),
        "energy_kWh": float(np.sum(n0 * today_power) / 1000),
        "job_hours": float(len(n0)),
        "band": total_band(n0 * today_price, band, [f"{m}\t{x}" for m, x in zip(models, now_gpu)]),
    }
    # each job's best design at its current count (by cost), and ties within its band
    cost_now = np.where(ok, hours_now * np.array([price[lab["gpu"]] for lab in labels])[None, :], np.inf)
    ranked_index = np.array(order, dtype=np.int64)
    cost_now = cost_now[:, ranked_index]
    runnable = np.isfinite(cost_now).any(axis=1)
    best = np.argmin(cost_now, axis=1)
    first = cost_now[np.arange(len(best)), best]
    # the runner-up is another design *for the job*: designs that differ only in a dimension the
    # job does not depend on (its family does not read it, or its architecture ignores it) are one
    seen = own[:, ranked_index]
    other = seen != seen[np.arange(len(best)), best][:, None]
    second = np.min(np.where(other, cost_now, np.inf), axis=1) if cost_now.shape[1] else first
    tie = runnable & (second <= first * (1 + band))
    n_dp = len(families[0]["n0"]) if len(rows) else 0
    is_llm = np.arange(len(n0)) >= n_dp

    def counts(mask: Any) -> dict[int, int]:
        found: dict[int, int] = {}
        for k in best[mask]:
            found[int(k)] = found.get(int(k), 0) + 1
        return dict(sorted(found.items(), key=lambda kv: -kv[1]))

    return {
        "dims": dims,
        "designs": ranked,
        "today": today_totals,
        "families": {"dp": n_dp, "llm": len(n0) - n_dp},
        "ties": {
            "jobs": int(runnable.sum()),
            "tied": int(tie.sum()),
            "share": float(np.mean(tie[runnable])) if runnable.any() else math.nan,
        },
        "best": counts(runnable),
        "best_llm": counts(runnable & is_llm),
        "ties_llm": {"jobs": int(np.sum(runnable & is_llm)), "tied": int(np.sum(tie & is_llm))},
        "pareto": pareto(ranked),
    }


def _llm_bottlenecks() -> tuple[str, ...]:
    from paigrid.study.llm_designs import BOTTLENECKS

    return BOTTLENECKS


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
