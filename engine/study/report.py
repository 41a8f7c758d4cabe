"""The PAI-study report (``paigrid report``): the analyses of Wang et al. (IISWC 2019) on a cube.

The cube must come from the study spec (``paigrid study-spec``): ``n_gpu = "current"`` (one
``n_gpu`` coordinate, 0, meaning each job's own GPU count) and the full cube, not reduce-only.
Every number is read from it, job block by job block, so a cube of any size is reported
without loading it whole:

1. :func:`compute_report` gathers, for every job, the model's outputs at a few configurations
   (its current one and each projection's targets) and reduces them to plain dicts and arrays:
   the mean time breakdown and the communication-share distribution per architecture, the
   bottleneck counts, and the four projections (PS/Worker -> AllReduce-NVLink, Ethernet 25 ->
   100 Gb/s, GPU generations P100 -> V100 -> A100 -> H100, fp32 -> mixed precision).
2. ``report_text.render_markdown`` turns those numbers into ``report.md``;
   ``report_figures.write_figures`` draws the PNG figures (matplotlib, Agg canvas).
3. :func:`write_report` does both into a temporary folder and moves the files into place,
   ``report.md`` last, so a failed report never looks whole.

A *speedup* is the job's current step time over its projected step time [x]; the GPU count and
the samples per step are unchanged by every projection, so it is also the throughput ratio.
"""

from __future__ import annotations

import math
import os
import shutil
import uuid
from pathlib import Path

import numpy as np

from paigrid.cube import Cube, open_cube
from paigrid.errors import PaigridError
from paigrid.kernels import dp_columns as L
from paigrid.schema import cube_model, decode_strings, is_valid, str_attr, validity_variable
from paigrid.study.constants import (
    ARCHS,
    BOTTLENECKS,
    COMPONENTS,
    COORDS,
    CURRENT_VARIABLES,
    ETHERNET,
    FULL_VARIABLES,
    GENERATIONS,
    GPU_LADDERS,
    JOB_GPU_VARIABLES,
    NETWORK_ARCHS,
    NVLINK_SERVER,
    PAPER,
    PRECISIONS,
    REASONS,
    SWEEP_COMMAND,
)


# --- reading the cube ----------------------------------------------------------------------------
def _strings(dataset) -> np.ndarray:
    return np.array(decode_strings(dataset[:]), dtype=object)


def _check_cube(cube: Cube) -> None:
    """Refuse, in one sentence each, a cube the report cannot read."""
    f = cube.file
    if cube.mode != "full":
        raise PaigridError(
            f"{cube.path} holds only the per-job reductions (reduce-only sweep); the report needs "
            f"the full cube: {SWEEP_COMMAND}."
        )
    needed = FULL_VARIABLES + (validity_variable(cube.format),) + JOB_GPU_VARIABLES + CURRENT_VARIABLES
    missing = [v for v in needed if v not in f]
    if missing:
        raise PaigridError(
            f"{cube.path} lacks the variable(s) {', '.join(missing)} that the report needs; "
            f"sweep it again with the study spec: {SWEEP_COMMAND}."
        )
    if list(cube.labels["n_gpu"]) != [0]:
        swept = ", ".join(map(str, cube.labels["n_gpu"]))
        raise PaigridError(
            f'{cube.path} was swept over n_gpu = [{swept}], not n_gpu = "current": '
            f"the report needs each job at its own GPU count; sweep it with the study spec: "
            f"{SWEEP_COMMAND}."
        )
    if f["step_time"].ndim != 7:
        raise PaigridError(f"{cube.path}: step_time does not have the seven cube dimensions.")


def _index(labels: list, names) -> np.ndarray:
    """Index of each name in ``labels`` (-1 where absent)."""
    where = {str(v): i for i, v in enumerate(labels)}
    return np.array([where.get(str(n), -1) for n in names], dtype=np.int64)


def gather(cube: Cube, coords: dict[str, np.ndarray], block_jobs: int = 1024) -> dict[str, dict[str, np.ndarray]]:
    """The model's outputs at one configuration per job, for each set of ``coords``.

    ``coords[name]`` is an int array (n_jobs, 5) of indices into the cube's arch, gpu, intra,
    network and precision labels (-1: no such configuration).  Returns ``{name: {variable:
    array(n_jobs)}}`` with ``step_time``, ``t_data``, ``t_flop``, ``t_mem``, ``t_comm`` [s]
    (NaN where absent), ``valid`` (bool), ``bottleneck`` (flag, 255 where absent),
    ``fits_memory`` (flag 0/1/255; 254 where absent) and ``present`` (bool).  Reads
    ``block_jobs`` jobs at a time.
    """
    import hdf5plugin  # noqa: F401  (the blosc filters of the cube's chunks)

    f = cube.file
    n = len(cube.labels["job"])
    validity = validity_variable(cube.format)  # valid (format 1) or invalid_reason
    out = {}
    for name in coords:
        out[name] = {v: np.full(n, np.nan) for v in ("step_time", "t_data", "t_flop", "t_mem", "t_comm")}
        out[name].update(
            valid=np.zeros(n, bool),
            present=np.zeros(n, bool),
            bottleneck=np.full(n, L.FLAG_FILL, np.uint8),
            fits_memory=np.full(n, 254, np.uint8),
        )
    for j0 in range(0, n, block_jobs):
        j1 = min(n, j0 + block_jobs)
        full = {v: f[v][j0:j1] for v in FULL_VARIABLES}
        valid = is_valid(f[validity][j0:j1], cube.format)
        small = {v: f[v][j0:j1] for v in JOB_GPU_VARIABLES}
        rows = np.arange(j1 - j0)
        for name, c in coords.items():
            c = c[j0:j1]
            ok = (c >= 0).all(axis=1)
            a, g, i, w, p = np.where(c < 0, 0, c).T
            o = out[name]
            o["present"][j0:j1] = ok
            o["step_time"][j0:j1] = np.where(ok, full["step_time"][rows, a, g, 0, i, w, p], np.nan)
            o["t_comm"][j0:j1] = np.where(ok, full["t_comm"][rows, a, g, 0, i, w, p], np.nan)
            o["valid"][j0:j1] = ok & valid[rows, a, g, 0, i, w, p]
            o["bottleneck"][j0:j1] = np.where(ok, full["bottleneck"][rows, a, g, 0, i, w, p], L.FLAG_FILL)
            for v in ("t_data", "t_flop", "t_mem"):
                o[v][j0:j1] = np.where(ok, small[v][rows, g, p], np.nan)
            o["fits_memory"][j0:j1] = np.where(ok, small["fits_memory"][rows, g, p], 254)
    return out


def _exclusion(values: dict[str, np.ndarray], must_fit: bool = True) -> np.ndarray:
    """Per job: '' when the configuration can be used, else a key of :data:`REASONS`."""
    reason = np.full(len(values["valid"]), "", dtype=object)
    if must_fit:
        reason[values["fits_memory"] == 0] = "no_memory"
    reason[~values["valid"]] = "invalid"
    reason[values["fits_memory"] == L.FLAG_FILL] = "unsupported"
    reason[~values["present"]] = "not_in_cube"
    return reason


# --- the analyses ---------------------------------------------------------------------------------
def _summary(speedup: np.ndarray) -> dict:
    """Share of jobs faster (speedup > 1), mean, median, 10th/90th percentile, min, max [x]."""
    if len(speedup) == 0:
        return {
            "jobs": 0,
            "share_faster": math.nan,
            "mean": math.nan,
            "median": math.nan,
            "p10": math.nan,
            "p90": math.nan,
            "min": math.nan,
            "max": math.nan,
        }
    return {
        "jobs": int(len(speedup)),
        "share_faster": float(np.mean(speedup > 1.0)),
        "mean": float(np.mean(speedup)),
        "median": float(np.median(speedup)),
        "p10": float(np.percentile(speedup, 10)),
        "p90": float(np.percentile(speedup, 90)),
        "min": float(np.min(speedup)),
        "max": float(np.max(speedup)),
    }


def _projection(
    scope: np.ndarray, base: dict, target: dict, pre: np.ndarray | None = None, base_must_fit: bool = False
) -> dict:
    """Speedups base -> target of the jobs in ``scope`` whose configurations can be used.

    ``pre`` holds reasons (keys or free text) decided before the cube is read.  Returns
    ``{"in_scope", "excluded": {reason: jobs}, "job_index": indices of the jobs used, "speedup":
    array, **summary}`` (summary keys from :func:`_summary`; ``jobs`` is the number used).
    """
    reason = np.full(len(scope), "", dtype=object) if pre is None else pre.copy()
    for values, must_fit in ((target, True), (base, base_must_fit)):
        later = _exclusion(values, must_fit)
        reason = np.where(reason == "", later, reason)
    if not base_must_fit:  # the baseline is the current configuration: say when it does not fit either
        reason = np.where((reason == "no_memory") & (base["fits_memory"] == 0), "no_memory_now", reason)
    used = scope & (reason == "")
    jobs = np.flatnonzero(used)
    speedup = base["step_time"][jobs] / target["step_time"][jobs]
    excluded: dict[str, int] = {}
    for r in reason[scope & (reason != "")]:
        excluded[r] = excluded.get(r, 0) + 1
    return {
        "in_scope": int(scope.sum()),
        "excluded": excluded,
        "job_index": jobs,
        "speedup": speedup,
        **_summary(speedup),
    }


def compute_report(path: str | Path, block_jobs: int = 1024) -> dict:
    """Every number of the report, computed from the cube at ``path`` (see the module docstring).

    Returns a dict with ``cube`` (path, jobs, labels, provenance), ``current`` (per-job arrays
    at the current configuration), ``analysed`` (jobs with a valid current configuration in the
    cube) and ``excluded`` (the others, by reason), ``breakdown`` ({arch: {"jobs", t_data,
    t_flop, t_mem, t_comm}}: mean shares of step time, fractions), ``comm_share`` ({arch: sorted
    per-job communication shares}), ``bottlenecks`` ({arch: {flag name: jobs}}),
    ``projections`` (``ps_nvlink``, ``ethernet``, ``amp`` and ``gpu`` with one entry per
    generation step) and ``headline`` (rows of paigrid's figure next to the paper's).
    ``"all"`` is every analysed job.  Shares are fractions, speedups ratios [x].
    """
    cube = open_cube(path)
    try:
        _check_cube(cube)
        return _compute(cube, block_jobs)
    finally:
        cube.close()


def _compute(cube: Cube, block_jobs: int) -> dict:
    f, labels = cube.file, cube.labels
    n = len(labels["job"])
    cur = {d: _strings(f[f"current_{d}"]) for d in COORDS}
    cur_idx = {d: _index(labels[d], cur[d]) for d in COORDS}
    n_gpu = np.asarray(f["current_n_gpu"][:], dtype=np.int64)

    def coords(**change) -> np.ndarray:
        cols = [change.get(d, cur_idx[d]) for d in COORDS]
        return np.stack([np.broadcast_to(np.asarray(c, dtype=np.int64), (n,)) for c in cols], axis=1)

    def label(dim: str, name: str) -> int:
        return int(_index(labels[dim], [name])[0])

    sets = {"current": coords(), "one_server": coords(arch=label("arch", "allreduce-local"))}
    sibling = [NVLINK_SERVER.get(g, (None, None)) for g in cur["gpu"]]
    sets["nvlink"] = coords(
        arch=label("arch", "allreduce-local"),
        gpu=_index(labels["gpu"], [s[0] for s in sibling]),
        intra=_index(labels["intra"], [s[1] for s in sibling]),
    )
    sets["eth100"] = coords(network=label("network", ETHERNET[1]))
    sets["amp"] = coords(precision=label("precision", PRECISIONS[1]))
    ladder = np.where([str(i).startswith("pcie") for i in cur["intra"]], "pcie", "nvlink")
    for r, gen in enumerate(GENERATIONS):
        rung = [GPU_LADDERS[k][r] for k in ladder]
        sets[gen] = coords(
            gpu=_index(labels["gpu"], [x[0] for x in rung]), intra=_index(labels["intra"], [x[1] for x in rung])
        )
    for arch in labels["arch"]:
        sets[f"arch:{arch}"] = coords(arch=label("arch", str(arch)))
    values = gather(cube, sets, block_jobs)

    current = values["current"]
    has_current = cur["arch"] != ""
    analysed = has_current & current["valid"]
    excluded = {
        "no_current_configuration": int(np.sum(~has_current)),
        "current_not_in_cube": int(np.sum(has_current & ~current["present"])),
        "current_invalid": int(np.sum(has_current & current["present"] & ~current["valid"])),
    }
    archs = [a for a in ARCHS if np.any(analysed & (cur["arch"] == a))]
    groups = {a: analysed & (cur["arch"] == a) for a in archs}
    groups["all"] = analysed

    total = sum(current[c] for c in COMPONENTS)
    shares = {c: current[c] / np.where(total > 0, total, np.nan) for c in COMPONENTS}
    breakdown, comm_share, bottlenecks = {}, {}, {}
    for key, mask in groups.items():
        breakdown[key] = {"jobs": int(mask.sum()), **{c: float(np.mean(shares[c][mask])) for c in COMPONENTS}}
        comm_share[key] = np.sort(shares["t_comm"][mask])
        codes = current["bottleneck"][mask]
        bottlenecks[key] = {name: int(np.sum(codes == k)) for k, name in enumerate(BOTTLENECKS)}

    projections = {
        "ps_nvlink": _ps_nvlink(cur, analysed, values, sibling, _strings(f["model"])),
        "ethernet": _ethernet(cur, analysed, values, labels),
        "amp": _amp(cur, analysed, values, labels),
        "gpu": _gpu_upgrades(analysed, values, ladder),
    }
    result = {
        "cube": {
            "path": str(cube.path),
            "jobs": n,
            "job_names": list(map(str, labels["job"])),
            "labels": {d: list(map(str, labels[d])) for d in COORDS},
            "created": str_attr(f.attrs, "created"),
            "paigrid_version": str_attr(f.attrs, "paigrid_version"),
            "model": cube_model(f.attrs),
            # the LLM family's jobs (the cube's ``llm`` group) have no PAI architecture to study
            "llm_jobs": len(f["llm/job"]) if "llm" in f else 0,
        },
        "current": {
            "arch": cur["arch"],
            "gpu": cur["gpu"],
            "n_gpu": n_gpu,
            **{c: current[c] for c in COMPONENTS},
            "step_time": current["step_time"],
            "bottleneck": current["bottleneck"],
        },
        "analysed": analysed,
        "excluded": excluded,
        "current_not_fitting": int(np.sum(analysed & (current["fits_memory"] == 0))),
        "archs": archs,
        "breakdown": breakdown,
        "comm_share": comm_share,
        "bottlenecks": bottlenecks,
        "projections": projections,
    }
    result["headline"] = headline_rows(result)
    models = _strings(f["model"])
    band, fallback = _job_bands(cube, n)
    result["job_band"] = band
    result["bands"] = {"fallback": fallback, "fallback_jobs": int(np.sum(analysed & fallback["used"]))}
    _headline_bands(result, values, cur, sibling, models, band)
    result["best_arch"] = _best_arch(values, labels, analysed, cur["arch"], band)
    result["population"] = population_sources(cube)
    result["paper"], result["designs"], result["llm"] = _paper_and_designs(
        cube, analysed, cur_idx, current, band, block_jobs, fallback["band"]
    )
    return result


def population_sources(cube: Cube) -> dict:
    """Where the cube's jobs came from: the population file its provenance names (``input_sha256``
    of the sweep), and, when that file is still there unchanged, its jobs per ``source`` -- among
    them the trace importer's jobs that took the default family.  ``{"path", "status": "read" |
    "missing" | "changed" | "none", "sources": {source: jobs}}``."""
    import csv
    import json

    from paigrid.files import file_sha256

    inputs = json.loads(str_attr(cube.file.attrs, "input_sha256") or "{}")
    entry = inputs.get("workloads") or {}
    if not entry.get("path"):
        return {"path": "", "status": "none", "sources": {}}
    recorded = Path(entry["path"])
    candidates = [recorded] if recorded.is_absolute() else [recorded, Path(cube.path).parent / recorded]
    found = next((c for c in candidates if c.is_file()), None)
    if found is None:
        return {"path": str(recorded), "status": "missing", "sources": {}}
    if entry.get("sha256") and file_sha256(found) != entry["sha256"]:
        return {"path": str(found), "status": "changed", "sources": {}}
    sources: dict[str, int] = {}
    with open(found, newline="", encoding="utf-8-sig") as handle:
        reader = csv.DictReader(handle)
        if "source" not in (reader.fieldnames or []):
            return {"path": str(found), "status": "read", "sources": {}}
        for row in reader:
            key = (row.get("source") or "").strip() or "(none)"
            sources[key] = sources.get(key, 0) + 1
    return {"path": str(found), "status": "read", "sources": sources}


def _job_bands(cube: Cube, n: int) -> tuple[np.ndarray, dict]:
    """Each job's relative prediction band at its current GPU count (the cube's
    ``prediction_band``), a group without one taking the largest band of the cube's model
    (``bands.fallback_band``, counted)."""
    from paigrid.inputs.efficiency import prediction_band
    from paigrid.study.bands import fallback_band

    f = cube.file
    stored = np.asarray(f["prediction_band"][:, 0], dtype=float) if "prediction_band" in f else np.full(n, np.nan)
    model = cube_model(f.attrs)
    calibrated = (str_attr(f.attrs, "efficiency_source") or "defaults") != "defaults"
    known = [prediction_band(model, calibrated, g) for g in ("single_gpu", "multi_gpu_one_server", "multi_server")]
    value = fallback_band(np.array(known))
    used = ~np.isfinite(stored)
    return np.where(used, value, stored), {"band": value, "used": used, "model": model, "calibrated": calibrated}


def _headline_bands(result: dict, values: dict, cur: dict, sibling: list, models: np.ndarray, band: np.ndarray) -> None:
    """Add to every headline row its band under correlated and under independent errors
    (``bands``): ``band_correlated`` and ``band_independent``, (low, high) in the row's unit."""
    from paigrid.study.bands import ErrorModel, share_band, speedup_band

    current = values["current"]
    total = sum(current[c] for c in COMPONENTS)
    share = current["t_comm"] / np.where(total > 0, total, np.nan)
    analysed = result["analysed"]
    ps_all = int(np.sum(analysed & (cur["arch"] == "ps-worker")))
    target_gpu = np.array([s[0] or g for s, g in zip(sibling, cur["gpu"])], dtype=object)
    projections = result["projections"]
    for model in (ErrorModel(correlated=True), ErrorModel(correlated=False)):
        key = "band_correlated" if model.correlated else "band_independent"
        for row in result["headline"]:
            what = row["what"]
            if what.startswith("communication share"):
                mask = analysed & ((cur["arch"] == "ps-worker") if "PS/Worker" in what else True)
                row[key] = share_band(model, models[mask], cur["gpu"][mask], band[mask], share[mask], np.mean)
                continue
            if "AllReduce-NVLink" in what:
                p, tgt, gpus = projections["ps_nvlink"], values["nvlink"], target_gpu
                if "fit in one server" in what:

                    def figure(s):
                        return float(np.mean(s > 1.0))
                else:

                    def figure(s):
                        return float(np.sum(s > 1.0) / ps_all)
            else:
                p, tgt, gpus, figure = projections["ethernet"], values["eth100"], cur["gpu"], np.mean
            jobs = p["job_index"]
            row[key] = speedup_band(
                model,
                models[jobs],
                cur["gpu"][jobs],
                gpus[jobs],
                band[jobs],
                band[jobs],
                current["step_time"][jobs],
                tgt["step_time"][jobs],
                figure,
            )
        for row in result["headline"]:
            if row["unit"] == "share":  # a share of jobs or of time stays within 0 and 1
                row[key] = tuple(float(np.clip(x, 0.0, 1.0)) for x in row[key])


def _best_arch(values: dict, labels: dict, analysed: np.ndarray, current_arch: np.ndarray, band: np.ndarray) -> dict:
    """Each analysed job's fastest architecture on its current hardware, count and precision (the
    first in label order among equals), whether another is faster than its own, and whether the best
    is a tie: the second fastest is slower by less than the job's band."""
    archs = [str(a) for a in labels["arch"]]
    times = np.stack(
        [
            np.where(
                values[f"arch:{a}"]["valid"] & (values[f"arch:{a}"]["fits_memory"] != 0),
                values[f"arch:{a}"]["step_time"],
                np.inf,
            )
            for a in archs
        ],
        axis=1,
    )
    ranked = np.sort(times, axis=1)
    usable = analysed & np.isfinite(ranked[:, 0])
    tie = usable & (ranked[:, 1] <= ranked[:, 0] * (1 + band)) if len(archs) > 1 else np.zeros(len(band), bool)
    best = np.array(archs, dtype=object)[np.argmin(times, axis=1)]
    own = np.array([times[k, archs.index(a)] if a in archs else np.inf for k, a in enumerate(current_arch)])
    changes = usable & (own > ranked[:, 0])  # a job already on one of its fastest architectures stays
    counts = {a: int(np.sum(usable & (best == a))) for a in archs if np.any(usable & (best == a))}
    return {
        "jobs": int(usable.sum()),
        "tied": int(tie.sum()),
        "not_current": int(changes.sum()),
        "share_tied": float(np.mean(tie[usable])) if usable.any() else math.nan,
        "share_not_current": float(np.mean(changes[usable])) if usable.any() else math.nan,
        "best": counts,
    }


def _paper_and_designs(
    cube: Cube, analysed: np.ndarray, cur_idx: dict, current: dict, band: np.ndarray, block_jobs: int, llm_band: float
) -> tuple[dict, dict, dict | None]:
    """The paper's figures under the model variants (``paper.compute_paper``), the cluster-design
    ranking (``designs.compute_designs``) of the analysed jobs of both families as the cube records
    them, and the LLM family's own summary (:func:`_llm_summary`; None without LLM jobs)."""
    from paigrid.study.designs import compute_designs
    from paigrid.study.llm_designs import llm_family
    from paigrid.study.paper import Population, compute_paper

    pop = Population.from_cube(cube, keep=analysed)
    rows = np.flatnonzero(analysed)
    paper = compute_paper(pop) if len(pop.jobs) else None
    llm = llm_family(cube.file, pop.cats, max(1, block_jobs // 4))
    designs = (
        compute_designs(
            cube,
            pop,
            rows,
            cur_idx["arch"][rows],
            cur_idx["precision"][rows],
            current["step_time"][rows],
            band[rows],
            block_jobs,
            llm=llm,
            llm_band=llm_band,
        )
        if len(rows) or (llm is not None and llm["jobs"])
        else None
    )
    return paper, designs, _llm_summary(llm, designs)


def _llm_summary(llm: dict | None, designs: dict | None) -> dict | None:
    """What the report says of the LLM jobs: how many are analysed and why the others are not,
    the bottleneck of each one's best layout on its design of today, the layouts they run best,
    and the designs they find cheapest (``designs["best"]`` over the LLM jobs only)."""
    if llm is None:
        return None
    out = {"jobs": llm["total_jobs"], "analysed": llm["jobs"], "excluded": llm["excluded"]}
    if not llm["jobs"]:
        return out
    from paigrid.study.llm_designs import BOTTLENECKS

    out["bottlenecks_today"] = {b: int(np.sum(llm["today_bottleneck"] == b)) for b in BOTTLENECKS}
    tp_pp: dict[str, int] = {}
    for label in llm["today_layout"]:
        key = "-".join(label.split("-")[:2])  # tp{t}-pp{p}
        tp_pp[key] = tp_pp.get(key, 0) + 1
    out["layouts_today"] = dict(sorted(tp_pp.items(), key=lambda kv: -kv[1]))
    out["gpu_hours_today"] = float(np.sum(llm["n0"]))
    if designs is not None:
        out["best"] = designs.get("best_llm", {})
    return out


def _ps_nvlink(cur, analysed, values, sibling, model) -> dict:
    """PS/Worker jobs that fit in one server, moved to allreduce-local on its NVLink server.

    Besides the summary: ``median_by_model`` ({model: median speedup [x]}, largest first)."""
    ps = analysed & (cur["arch"] == "ps-worker")
    fits_server = values["one_server"]["valid"]
    scope = ps & fits_server
    pre = np.array(["" if s[0] else "no NVLink server for this GPU" for s in sibling], dtype=object)
    proj = _projection(scope, values["current"], values["nvlink"], pre)
    no_nvlink = sorted({str(g) for g, s, m in zip(cur["gpu"], sibling, scope) if m and not s[0]})
    used_models = model[proj["job_index"]]
    medians = {str(m): float(np.median(proj["speedup"][used_models == m])) for m in set(used_models)}
    proj.update(
        ps_worker_jobs=int(ps.sum()),
        beyond_one_server=int(np.sum(ps & ~fits_server)),
        median_by_model=dict(sorted(medians.items(), key=lambda kv: -kv[1])),
        gpus_without_nvlink=no_nvlink,
        share_faster_of_all_ps=(float(np.sum(proj["speedup"] > 1.0) / ps.sum()) if ps.sum() else math.nan),
    )
    return proj


def _ethernet(cur, analysed, values, labels) -> dict:
    """Jobs on network architectures over eth-25g, moved to eth-100g."""
    if any(e not in labels["network"] for e in ETHERNET):
        return {"available": False, "missing": f"network {' and '.join(ETHERNET)}"}
    net = analysed & np.isin(cur["arch"], NETWORK_ARCHS)
    scope = net & (cur["network"] == ETHERNET[0])
    base, target = values["current"], values["eth100"]
    proj = _projection(scope, base, target)
    jobs = proj["job_index"]
    comm_ratio = base["t_comm"][jobs] / target["t_comm"][jobs]
    share = base["t_comm"][jobs] / sum(base[c][jobs] for c in COMPONENTS)
    proj.update(
        network_jobs=int(net.sum()),
        other_network=int(np.sum(net & ~scope)),
        comm_ratio_median=float(np.median(comm_ratio)) if len(jobs) else math.nan,
        comm_share_mean=float(np.mean(share)) if len(jobs) else math.nan,
    )
    return proj


def _amp(cur, analysed, values, labels) -> dict:
    """fp32 jobs moved to amp-fp16, everything else unchanged."""
    if any(p not in labels["precision"] for p in PRECISIONS):
        return {"available": False, "missing": f"precision {' and '.join(PRECISIONS)}"}
    scope = analysed & (cur["precision"] == PRECISIONS[0])
    proj = _projection(scope, values["current"], values["amp"])
    proj.update(other_precision=int(np.sum(analysed & ~scope)))
    return proj


def _gpu_upgrades(analysed, values, ladder) -> dict:
    """Every analysed job on each generation of its ladder; one projection per upgrade step."""
    steps = {}
    pairs = list(zip(GENERATIONS[:-1], GENERATIONS[1:])) + [(GENERATIONS[0], GENERATIONS[-1])]
    for old, new in pairs:
        proj = _projection(analysed, values[old], values[new], base_must_fit=True)
        proj["excluded"] = _split_rungs(analysed, values[old], values[new], old, new)
        steps[f"{old}->{new}"] = proj
    return {
        "steps": steps,
        "pcie_jobs": int(np.sum(analysed & (ladder == "pcie"))),
        "nvlink_jobs": int(np.sum(analysed & (ladder == "nvlink"))),
    }


def _split_rungs(scope, old: dict, new: dict, old_name: str, new_name: str) -> dict[str, int]:
    """Exclusions of a generation step, saying on which generation the configuration fails."""
    target, base = _exclusion(new), _exclusion(old)
    out: dict[str, int] = {}
    for t, b in zip(target[scope], base[scope]):
        key = f"{REASONS[t]} on the {new_name}" if t else f"{REASONS[b]} on the {old_name}" if b else ""
        if key:
            out[key] = out.get(key, 0) + 1
    return out


def headline_rows(numbers: dict) -> list[dict]:
    """The comparison table: paigrid's figure next to the paper's three headline results.

    Each row: ``what``, ``paigrid`` (number), ``paper`` (number or None), ``unit``
    (``share`` or ``x``), ``jobs`` (jobs behind paigrid's figure), ``note``.
    """
    b = numbers["breakdown"]
    ps, eth = numbers["projections"]["ps_nvlink"], numbers["projections"]["ethernet"]
    rows = [
        {
            "what": "communication share of step time, mean over all jobs",
            "paigrid": b["all"]["t_comm"],
            "paper": PAPER["comm_share"],
            "unit": "share",
            "jobs": b["all"]["jobs"],
            "note": "paper: ~62% of total execution time, on average over all workloads (abstract)",
        },
    ]
    if "ps-worker" in b:
        rows.append(
            {
                "what": "communication share of step time, mean over PS/Worker jobs",
                "paigrid": b["ps-worker"]["t_comm"],
                "paper": PAPER["comm_share"],
                "unit": "share",
                "jobs": b["ps-worker"]["jobs"],
                "note": "third-party notes give 62% for PS/Worker jobs (not checked against the paper)",
            }
        )
    rows.append(
        {
            "what": "PS/Worker jobs faster on AllReduce-NVLink (jobs that fit in one server)",
            "paigrid": ps["share_faster"],
            "paper": PAPER["ps_nvlink_faster"],
            "unit": "share",
            "jobs": ps["jobs"],
            "note": "paper: 60% of PS/Worker workloads",
        }
    )
    rows.append(
        {
            "what": "PS/Worker jobs faster on AllReduce-NVLink (share of all PS/Worker jobs)",
            "paigrid": ps["share_faster_of_all_ps"],
            "paper": PAPER["ps_nvlink_faster"],
            "unit": "share",
            "jobs": ps["ps_worker_jobs"],
            "note": "jobs beyond one server count as not faster",
        }
    )
    if eth.get("available", True):
        rows.append(
            {
                "what": "mean speedup from 25 to 100 Gb/s Ethernet",
                "paigrid": eth["mean"],
                "paper": PAPER["eth_speedup"],
                "unit": "x",
                "jobs": eth["jobs"],
                "note": "paper: 1.7x average speedup",
            }
        )
    return rows


# --- markdown -------------------------------------------------------------------------------------


# --- writing --------------------------------------------------------------------------------------
def write_report(path: str | Path, out_dir: str | Path, block_jobs: int = 1024) -> Path:
    """Compute the report of the cube ``path`` and write ``out_dir/report.md`` and its PNG figures.

    Everything is written into a temporary folder beside ``out_dir`` first and then moved into
    place, ``report.md`` last, so an error leaves no report that looks whole.  Returns the path
    of ``report.md``.
    """
    out_dir = Path(out_dir)
    parent = out_dir.parent if str(out_dir.parent) else Path(".")
    if out_dir.exists() and not out_dir.is_dir():
        raise PaigridError(f"cannot write the report into {out_dir}: it is a file, not a folder.")
    if not parent.is_dir():
        raise PaigridError(f"cannot write the report into {out_dir}: the folder {parent} does not exist.")
    numbers = compute_report(path, block_jobs)
    tmp = parent / f".{out_dir.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        tmp.mkdir()  # mode 0o777 less the umask, like any folder the user makes
    except OSError as exc:
        raise PaigridError(f"cannot write the report into {out_dir} ({exc.strerror or exc}).") from None
    from paigrid.study.report_figures import write_figures
    from paigrid.study.report_text import render_markdown

    try:
        figures = write_figures(numbers, tmp)
        (tmp / "report.md").write_text(render_markdown(numbers, figures), encoding="utf-8")
        if not out_dir.exists():
            os.replace(tmp, out_dir)
        else:
            for name in [*figures.values(), "report.md"]:
                os.replace(tmp / name, out_dir / name)
            tmp.rmdir()
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return out_dir / "report.md"
