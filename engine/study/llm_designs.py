"""The LLM family's part of the cluster-design ranking (``designs.compute_designs``): each LLM job
of a cube's ``llm`` group on every design, at its best layout.

An LLM job's *design of today* is the one its population row gives (``current_gpu``,
``current_n_gpu``, ``current_network``, ``current_precision``, stored by the sweep in the group),
in the NVLink domain of its GPU (the GPU catalogue's ``nvlink_domain_GPUs``, 8 where the catalogue
has none: the sweep's own default), with the GPU's intra link of the group (``intra``).  Its
layout today is not known (a population row says no parallel layout), so its step time today is
its *best layout* on that design: ``best_step_time`` of the group, the fastest valid layout (memory
included) over the layout axis.  The job is analysed when that cell is in the cube and some layout
is valid there.

On a design (GPU, domain, network; the intra link is the GPU's) the job keeps its precision:

* **at its current GPU count** it runs its best layout there (``best_step_time``);
* **at its cheapest GPU count** it runs, among every GPU count of the group's ``n_gpu`` axis, the
  count with the fewest GPU-hours for its work, at that count's best layout.

An LLM job's global batch is the same at every GPU count, so one step does the same work
everywhere: its work of one hour today takes T / T0 hours and n x T / T0 GPU-hours on n GPUs at
step time T (a data-parallel job, whose per-GPU batch is fixed, takes n0 x T / T0 GPU-hours).  Its
bottleneck on a design is the largest part of its best layout's step (``llm.query.COMPONENTS``:
compute, pipeline bubble, each exposed communication, the optimizer), named ``llm_<part>``.
"""

from __future__ import annotations

import math

import numpy as np

from paigrid.schema import decode_strings

#: the parts of an LLM step whose largest is its bottleneck (``paigrid.llm.query.COMPONENTS``)
PARTS = ("compute", "bubble", "tp_comm", "cp_comm_exposed", "ep_comm", "pp_comm", "dp_comm_exposed", "optimizer")
#: the LLM family's bottleneck names in a design's mix
BOTTLENECKS = tuple(f"llm_{p}" for p in PARTS)
#: why an LLM job is not analysed
REASONS = {
    "no_current_design": "its population row gives no design of today (or the cube predates the stored one)",
    "current_not_in_cube": "its design of today (GPU, GPU count, domain, network, precision) is not in the cube",
    "no_layout_today": "no layout of the sweep's space is valid on its design of today (memory included)",
}


def _index(labels, names) -> np.ndarray:
    where = {str(v): i for i, v in enumerate(labels)}
    return np.array([where.get(str(n), -1) for n in names], dtype=np.int64)


def _domain_of(cats, gpu: str) -> int:
    """The NVLink domain of a GPU as the sweep takes it (``llm.grid.catalogue_default``)."""
    from paigrid.errors import PaigridError
    from paigrid.llm.grid import DEFAULT_SERVER_GPUS, catalogue_default

    try:
        return catalogue_default(cats, gpu, "nvlink_domain_GPUs")
    except PaigridError:  # a GPU the catalogue no longer has: the sweep's default server
        return DEFAULT_SERVER_GPUS


def llm_family(f, cats, block_jobs: int = 256) -> dict | None:
    """The LLM jobs of the open cube file ``f`` on every design of its ``llm`` group, as
    ``designs.compute_designs`` ranks them (see the module docstring); None when the cube holds
    no LLM jobs.  ``cats``: the catalogues the cube was swept with (for the GPUs' domains).

    Returns ``labels`` (one dict per design: gpu, intra, domain, network), per analysed job and
    design ``step`` [s] and ``ok`` at the current count, ``bottleneck`` (names), ``cheap_hours``,
    ``cheap_count``, ``cheap_bottleneck``, per analysed job ``today`` [s], ``n0`` [GPUs], ``gpu``,
    ``model``, ``names``, ``today_bottleneck`` and ``today_layout`` (the best layout's label on
    the design of today), and ``jobs`` / ``excluded`` (jobs not analysed, by :data:`REASONS` key)."""
    if "llm" not in f:
        return None
    g = f["llm"]
    names = decode_strings(g["job"][:])
    n = len(names)
    labels = {d: decode_strings(g[d][:]) for d in ("gpu", "network", "precision")}
    labels["n_gpu"] = [int(v) for v in g["n_gpu"][:]]
    labels["domain"] = [int(v) for v in g["domain"][:]]
    intra = decode_strings(g["intra"][:])
    excluded = dict.fromkeys(REASONS, 0)
    if "current_gpu" not in g:
        excluded["no_current_design"] = n
        return {"jobs": 0, "total_jobs": n, "excluded": excluded, "labels": [], "names": []}
    cur = {d: decode_strings(g[f"current_{d}"][:]) for d in ("gpu", "network", "precision")}
    cur_n = np.asarray(g["current_n_gpu"][:], dtype=np.int64)
    given = np.array([bool(x) for x in cur["gpu"]]) & (cur_n > 0)
    gi = _index(labels["gpu"], cur["gpu"])
    ni = _index(labels["n_gpu"], cur_n)
    di = _index(labels["domain"], [_domain_of(cats, x) if x else -1 for x in cur["gpu"]])
    wi = _index(labels["network"], cur["network"])
    pi = _index(labels["precision"], cur["precision"])
    in_cube = given & (gi >= 0) & (ni >= 0) & (di >= 0) & (wi >= 0) & (pi >= 0)
    shape = (len(labels["gpu"]), len(labels["n_gpu"]), len(labels["domain"]), len(labels["network"]))
    n_designs = shape[0] * shape[2] * shape[3]
    counts = np.array(labels["n_gpu"], dtype=float)
    step = np.full((n, n_designs), np.nan)
    bottleneck = np.full((n, n_designs), "", dtype=object)
    cheap_hours = np.full((n, n_designs), np.inf)
    cheap_count = np.zeros((n, n_designs), np.int64)
    cheap_bn = np.full((n, n_designs), "", dtype=object)
    today = np.full(n, np.nan)
    today_bn = np.full(n, "", dtype=object)
    today_layout = np.full(n, -1, np.int64)
    parts_names = np.array(BOTTLENECKS, dtype=object)
    for j0 in range(0, n, block_jobs):
        j1 = min(n, j0 + block_jobs)
        best = np.asarray(g["best_step_time"][j0:j1], dtype=float)  # (jobs, gpu, n_gpu, domain, network, precision)
        parts = np.stack([np.asarray(g[f"best_{p}"][j0:j1], dtype=float) for p in PARTS], axis=-1)
        best_layout = np.asarray(g["best_layout"][j0:j1])
        for j in range(j0, j1):
            if not in_cube[j]:
                continue
            k = j - j0
            t = best[k][..., pi[j]]  # (gpu, n_gpu, domain, network)
            today[j] = t[gi[j], ni[j], di[j], wi[j]]
            if not math.isfinite(today[j]):
                continue
            code = np.argmax(np.nan_to_num(parts[k][..., pi[j], :], nan=-np.inf), axis=-1)
            names_at = np.where(np.isfinite(t), parts_names[code], "")
            today_bn[j] = names_at[gi[j], ni[j], di[j], wi[j]]
            today_layout[j] = int(best_layout[k, gi[j], ni[j], di[j], wi[j], pi[j]])
            now = t[:, ni[j]]  # (gpu, domain, network)
            step[j] = now.reshape(-1)
            bottleneck[j] = names_at[:, ni[j]].reshape(-1)
            hours = np.where(np.isfinite(t), counts[None, :, None, None] * t / today[j], np.inf)
            pick = np.argmin(hours, axis=1)  # (gpu, domain, network): the count of the fewest GPU-hours
            fewest = np.take_along_axis(hours, pick[:, None], axis=1)[:, 0]
            cheap_hours[j] = fewest.reshape(-1)
            cheap_count[j] = np.where(np.isfinite(fewest), counts[pick], 0).reshape(-1)
            cheap_bn[j] = np.where(
                np.isfinite(fewest), np.take_along_axis(names_at, pick[:, None], axis=1)[:, 0], ""
            ).reshape(-1)
    analysed = in_cube & np.isfinite(today)
    excluded["no_current_design"] = int(np.sum(~given))
    excluded["current_not_in_cube"] = int(np.sum(given & ~in_cube))
    excluded["no_layout_today"] = int(np.sum(in_cube & ~analysed))
    design_labels = [
        {
            "gpu": labels["gpu"][a],
            "intra": intra[a],
            "domain": str(labels["domain"][d]),
            "network": labels["network"][w],
        }
        for a in range(shape[0])
        for d in range(shape[2])
        for w in range(shape[3])
    ]
    keep = np.flatnonzero(analysed)
    models = decode_strings(g["model"][:])
    layouts = decode_strings(g["layout"][:])
    return {
        "jobs": int(analysed.sum()),
        "total_jobs": n,
        "excluded": excluded,
        "labels": design_labels,
        "names": [names[j] for j in keep],
        "model": np.array([models[j] for j in keep], dtype=object),
        "gpu": np.array([cur["gpu"][j] for j in keep], dtype=object),
        "n0": cur_n[keep].astype(float),
        "today": today[keep],
        "today_bottleneck": today_bn[keep],
        "today_layout": [layouts[k] for k in today_layout[keep]],
        "step": step[keep],
        "ok": np.isfinite(step[keep]),
        "bottleneck": bottleneck[keep],
        "cheap_hours": cheap_hours[keep],
        "cheap_count": cheap_count[keep],
        "cheap_bottleneck": cheap_bn[keep],
        "price": dict(zip(labels["gpu"], np.asarray(g["price"][:], dtype=float))),
        "power": dict(zip(labels["gpu"], np.asarray(g["power"][:], dtype=float))),
    }
