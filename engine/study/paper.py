"""The PAI study as the paper reports it: its figures beside ours, one mechanism at a time.

Part of the report (``study.report.compute_report`` calls :func:`compute_paper` on the jobs the
cube records, :meth:`Population.from_cube`): where the cube holds the model that made it, this
module predicts the same jobs directly (``predict.config_values``) under *variants* of the
model that made the cube -- that model itself (``base``: pai-v1, the paper's model, or pai-v2, with
the options and the calibrated efficiencies it was swept with), the base plus one named option,
and communication v2 with every parameter-server option on the base (:func:`model_variants`) --
and under scaled resources, so that each difference from
the paper can be traced to a mechanism that can be switched:

* :func:`compute_paper` returns every number: the time shares per architecture, per job and
  weighted by GPUs; the paper's figures beside ours under each variant; the projections of
  PS/Worker jobs changing one thing at a time (the architecture on the same hardware, the
  hardware, then both); the placement bracket; a sensitivity table per architecture; and the
  memory-bound against FLOP-bound time with an operator-fusion factor;
* :func:`render_paper` turns them into a markdown section of ``report.md``.

The variants are predicted, not stored in the cube as a dimension: they are eight models times a
few configurations per job (each job's current one and the projections' targets), a few dozen
predictions per job, where a variant dimension would multiply the whole cube (1,100
configurations per job in the study spec) by eight for figures that read under 1% of it.

A *share* of a job is its component over the sum of the four components; a mean *per job* weighs
every job once, a mean *by GPU* weighs a job by its GPU count (the resource view: PS/Worker jobs
are 29% of the jobs but 81% of the GPUs).  A speedup is the current step time over the projected
one [x].
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np

from paigrid.inputs.catalog import Catalogues
from paigrid.inputs.efficiency import defaults
from paigrid.inputs.jobs import load_jobs
from paigrid.inputs.spec import Options, SweepSpec
from paigrid.predict import _shortest_array, config_values
from paigrid.study.constants import ARCHS, COMPONENTS, ETHERNET, NVLINK_SERVER, pct, times

#: model variants: name -> (what it is, option overrides of the base model).  The base is the model
#: that made the cube (``Population.options``: its compute model, pai-v1 or pai-v2, and every option
#: it was swept with); each variant switches one mechanism on top of it (:func:`model_variants`)
PAPER_MODEL = Options(model="pai-v1")
VARIANTS: dict[str, tuple[str, dict[str, object]]] = {
    "base": ("the cube's model", {}),
    "nic": ("+ one NIC share per worker (ps_nic = per-worker)", {"ps_nic": "per-worker"}),
    "shared-nic": ("+ a server's workers sharing its NIC (ps_nic = shared)", {"ps_nic": "shared"}),
    "reduce": ("+ reduction inside each server (ps_local_reduce)", {"ps_local_reduce": True}),
    "colocated": ("+ co-located parameter servers (ps_placement = colocated)", {"ps_placement": "colocated"}),
    "latency": ("+ per-message latency (ps_latency)", {"ps_latency": True}),
    "update": ("+ update on the PS hosts (ps_update)", {"ps_update": True}),
    "sparse": ("+ sparse embedding traffic (ps_sparse)", {"ps_sparse": True}),
    "comm-v2": (
        "communication v2: every PS option (shared NIC, separate hosts) + sync_latency + bucket_overlap",
        {
            "ps_local_reduce": True,
            "ps_latency": True,
            "ps_update": True,
            "ps_sparse": True,
            "ps_memory": True,
            "sync_latency": True,
            "bucket_overlap": True,
        },
    ),
}


def describe_model(options: Options, efficiency: str = "built-in efficiencies") -> str:
    """The base model in words: its compute model and the options it switches on beyond the defaults."""
    default = Options(model=options.model)
    changed = [
        f"{k} = {getattr(options, k)}"
        for k in Options.__dataclass_fields__
        if k != "model"
        and getattr(options, k) != getattr(default, k)
        and k in {key for _, over in VARIANTS.values() for key in over}
    ]
    name = "version 1, the paper's model" if options.model == "pai-v1" else f"compute model {options.model}"
    return f"{options.model} ({name}" + ("; " + ", ".join(changed) if changed else "") + f"; {efficiency})"


def model_variants(base: Options, names: tuple[str, ...] | None = None) -> dict[str, tuple[str, Options]]:
    """The variants of the model ``base`` (the cube's): name -> (what it switches, options).  The
    base itself is ``base``; a variant that would switch nothing (the base has it on already) is
    left out, and the placement bracket's other side is ``nic`` on a shared-NIC base and
    ``shared-nic`` on a per-worker one.  ``names`` keeps only those variants (and the base)."""
    out: dict[str, tuple[str, Options]] = {}
    for name, (text, over) in VARIANTS.items():
        if name == "shared-nic" and base.ps_nic == "shared" or name == "nic" and base.ps_nic != "shared":
            continue
        options = replace(base, **over)
        if name != "base" and options == base:
            continue
        if names is None or name in names or name == "base":
            out[name] = (text, options)
    return out


def bracket_sides(variants: dict) -> tuple[str, str] | None:
    """(shared-NIC variant, per-worker variant) of the placement bracket among ``variants``."""
    base = variants["base"][1]
    other = "nic" if base.ps_nic == "shared" else "shared-nic"
    if other not in variants:
        return None
    return ("base", other) if base.ps_nic == "shared" else (other, "base")


#: the paper's figures (Wang et al., IISWC 2019: abstract; the last four from secondary notes of it)
PAPER_FIGURES = {
    "ps_comm_share": 0.62,
    "ps_comm_over_80": 0.40,
    "single_io_over_50": 0.05,
    "multi_io_share": 0.03,
    "ps_nvlink_faster": 0.60,
    "ps_nvlink_faster_all": 0.60,
    "eth_speedup": 1.7,
}
FIGURE_TEXT = {
    "ps_comm_share": ("PS/Worker communication share of step time, mean", "~62%"),
    "ps_comm_over_80": ("PS/Worker jobs with more than 80% communication", ">40%"),
    "single_io_over_50": ("1w1g jobs with more than 50% input I/O", "5%"),
    "multi_io_share": ("input-I/O share of multi-GPU jobs, mean", "~3%"),
    "ps_nvlink_faster": ("PS/Worker jobs faster on AllReduce over NVLink", "60%"),
    "ps_nvlink_faster_all": ("the same, a target that does not fit in GPU memory counted as not faster", "60%"),
    "eth_speedup": ("speedup of network jobs from 25 to 100 Gb/s Ethernet, mean", "1.7x"),
}

#: resources of the sensitivity table, each doubled alone (``predict.scale_tables`` keys)
RESOURCES = {
    "flop": "2x FLOP/s",
    "hbm": "2x HBM bandwidth",
    "pcie": "2x PCIe",
    "nvlink": "2x NVLink",
    "network": "2x network",
}
FUSION = 0.5
"""Operator-fusion factor on the memory-bound bytes: fusion (XLA) removes half of them (a what-if, not a
measurement)."""


def _weighted(values: np.ndarray, weights: np.ndarray) -> float:
    """Mean of ``values`` weighted by ``weights`` (NaN when empty)."""
    return float(np.sum(values * weights) / np.sum(weights)) if len(values) else math.nan


def _means(values: np.ndarray, gpus: np.ndarray) -> tuple[float, float]:
    """(mean per job, mean by GPU) of ``values`` (NaN when empty)."""
    return (float(np.mean(values)) if len(values) else math.nan), _weighted(values, gpus)


class Population:
    """A population's jobs and current configurations, and the predictions of them under a variant.

    Built from a population CSV (``Population(path)``) or from a swept cube's recorded jobs
    (:meth:`from_cube`: the report's path, so that the variants are predicted for exactly the jobs,
    batches, per-job options and current configurations the cube holds)."""

    def __init__(
        self,
        path: str | None = None,
        jobs: list | None = None,
        cats: Catalogues | None = None,
        options: Options = PAPER_MODEL,
    ):
        if path is not None:
            cats = Catalogues.load()
            jobs, cats = load_jobs(SweepSpec(workloads=path), cats)
        self.cats = cats
        self.options = options
        self.jobs = [j for j in jobs if j.current is not None]
        cur = [j.current for j in self.jobs]
        self.arch = np.array([c["arch"] for c in cur], dtype=object)
        self.gpu = np.array([c["gpu"] for c in cur], dtype=object)
        self.intra = np.array([c["intra"] for c in cur], dtype=object)
        self.network = np.array([c["network"] for c in cur], dtype=object)
        self.n_gpu = np.array([float(c["n_gpu"]) for c in cur])
        self.per_server = np.array([float(j.options["gpus_per_node"]) for j in self.jobs])
        self.model = np.array([j.model for j in self.jobs], dtype=object)
        self.eff = defaults()
        #: where the efficiencies come from, in words (the report says it beside the variants)
        self.efficiency = "built-in efficiencies"

    @classmethod
    def from_cube(cls, cube, keep=None) -> Population:
        """The jobs recorded in an open cube (``paigrid.cube.Cube``): each job's model, batch,
        per-job options (``gpus_per_node``, ``nics_per_node``, ``grad_accum_steps``, ``overlap``;
        the others from the spec stored in the cube's ``spec`` attribute) and current
        configuration; ``keep`` (bool per job) selects jobs.  The base options are the spec's, so
        the variants switch mechanisms on top of the model that made the cube."""
        import json

        from paigrid.inputs.jobs import Job
        from paigrid.inputs.spec import JOB_OPTIONS
        from paigrid.schema import decode_strings, str_attr

        f = cube.file
        stored = json.loads(str_attr(f.attrs, "spec") or "{}")
        fields = {k: v for k, v in stored.get("options", {}).items() if k in Options.__dataclass_fields__}
        options = Options(**fields) if fields else PAPER_MODEL
        cats = Catalogues.load(stored.get("catalogues") or None)
        names = decode_strings(f["job"][:])
        models = decode_strings(f["model"][:])
        batch = np.asarray(f["batch"][:], dtype=float)
        per_job = {k: np.asarray(f[k][:], dtype=float) for k in JOB_OPTIONS if k in f}
        current = {d: decode_strings(f[f"current_{d}"][:]) for d in ("arch", "gpu", "intra", "network", "precision")}
        n_gpu = np.asarray(f["current_n_gpu"][:], dtype=np.int64)
        base = {k: getattr(options, k) for k in JOB_OPTIONS}
        jobs = []
        for i, name in enumerate(names):
            if (keep is not None and not keep[i]) or not current["arch"][i]:
                continue
            values = dict(base)
            for k, col in per_job.items():
                values[k] = int(col[i]) if isinstance(base[k], int) else float(col[i])
            config = {d: current[d][i] for d in current}
            config["n_gpu"] = int(n_gpu[i])
            jobs.append(Job(name, models[i], float(batch[i]), values, config))
        pop = cls(jobs=jobs, cats=cats, options=options)
        pop.eff, pop.efficiency = cube_efficiency(cube, cats)
        return pop

    def predict(
        self, options: Options, change: dict | None = None, mask: np.ndarray | None = None, scale: dict | None = None
    ) -> dict[str, np.ndarray]:
        """Step time and components [s], ``valid`` and ``fits`` of the jobs in ``mask`` (default all) at
        their current configuration with ``change`` applied (``{dim: value or per-job array}``); NaN
        (and False) outside ``mask`` and where the configuration is invalid."""
        n = len(self.jobs)
        mask = np.ones(n, bool) if mask is None else mask
        out = {v: np.full(n, np.nan) for v in ("step_time", *COMPONENTS)}
        out.update(valid=np.zeros(n, bool), fits=np.zeros(n, bool))
        index = np.flatnonzero(mask)
        configs = []
        for i in index:
            config = dict(self.jobs[i].current)
            for dim, value in (change or {}).items():
                config[dim] = value[i] if isinstance(value, np.ndarray) else value
            configs.append(config)
        if not len(index):
            return out
        values = config_values([self.jobs[i] for i in index], configs, self.cats, self.eff, options, scale)
        valid = np.asarray(values["invalid_reason"]) == 0
        for v in ("step_time", *COMPONENTS):
            # float32 values as predict_one and predict_configs give them (the shortest decimal)
            out[v][index] = np.where(valid, _shortest_array(np.asarray(values[v])), np.nan)
        # fits as ``predict`` says it: for a valid configuration, whether the kernel's memory check of its
        # architecture kept it (best_step_time finite; ps_memory frees a PS worker of optimizer state)
        fits = np.where(
            valid,
            np.isfinite(np.asarray(values["best_step_time"], dtype=float)),
            np.asarray(values["fits_memory"]) == 1,
        )
        out["valid"][index], out["fits"][index] = valid, fits
        return out


def cube_efficiency(cube, cats: Catalogues):
    """The efficiencies a cube was swept with and where they come from, in words: the built-in ones,
    or its calibration file (the path and sha256 its provenance records), read again when it is
    there unchanged; a calibration file that is gone or changed gives the built-in efficiencies,
    and the words say so."""
    import json

    from paigrid.errors import PaigridError
    from paigrid.files import file_sha256
    from paigrid.inputs.efficiency import load_calibration
    from paigrid.schema import str_attr

    f = cube.file
    if (str_attr(f.attrs, "efficiency_source") or "defaults") == "defaults":
        return defaults(), "built-in efficiencies"
    try:
        entry = json.loads(str_attr(f.attrs, "input_sha256") or "{}").get("calibration") or {}
    except ValueError:
        entry = {}
    path = entry.get("path", "")
    candidates = [Path(path), Path(cube.path).parent / path] if path else []
    found = next((c for c in candidates if c.is_file()), None)
    if found is None:
        return defaults(), f"built-in efficiencies: the cube's calibration {path or '(unnamed)'} is gone"
    if entry.get("sha256") and file_sha256(found) != entry["sha256"]:
        return defaults(), f"built-in efficiencies: the calibration {found} has changed since the sweep"
    try:
        return defaults().overridden(load_calibration(found, cats)), f"the calibration {found}"
    except PaigridError as exc:
        return defaults(), f"built-in efficiencies: the calibration {found} no longer reads ({exc})"


def _shares(values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    total = sum(values[c] for c in COMPONENTS)
    return {c: values[c] / np.where(total > 0, total, np.nan) for c in COMPONENTS}


def _speedups(base: dict, target: dict, scope: np.ndarray, must_fit: bool = True) -> np.ndarray:
    """Mask of the jobs in ``scope`` whose target can be used (valid, and fits when ``must_fit``)."""
    return scope & target["valid"] & (target["fits"] | (not must_fit)) & base["valid"]


def _summary(base: dict, target: dict, used: np.ndarray, gpus: np.ndarray) -> dict:
    """Speedups over the ``used`` jobs: count, share faster per job and by GPU, median and mean [x]."""
    speed = base["step_time"][used] / target["step_time"][used]
    faster = (speed > 1.0).astype(float)
    return {
        "jobs": int(used.sum()),
        "gpus": float(gpus[used].sum()),
        "faster": _means(faster, gpus[used]),
        "median": float(np.median(speed)) if len(speed) else math.nan,
        "mean": _means(speed, gpus[used]),
    }


def _figures(pop: Population, options: Options) -> dict:
    """The paper's figures under ``options``: each (per job, by GPU) or a mean speedup pair."""
    gpus = pop.n_gpu
    current = pop.predict(options)
    share = _shares(current)
    ok = current["valid"]
    ps = ok & (pop.arch == "ps-worker")
    single = ok & (pop.arch == "1w1g")
    multi = ok & (pop.n_gpu > 1)
    out = {
        "shares": {
            a: {c: _means(share[c][ok & (pop.arch == a)], gpus[ok & (pop.arch == a)]) for c in COMPONENTS}
            for a in [*dict.fromkeys(pop.arch[ok])]
        },
        "jobs": {a: int(np.sum(ok & (pop.arch == a))) for a in dict.fromkeys(pop.arch[ok])},
    }
    out["shares"]["all"] = {c: _means(share[c][ok], gpus[ok]) for c in COMPONENTS}
    out["jobs"]["all"] = int(ok.sum())
    out["ps_comm_share"] = _means(share["t_comm"][ps], gpus[ps])
    out["ps_comm_over_80"] = _means((share["t_comm"][ps] > 0.8).astype(float), gpus[ps])
    out["single_io_over_50"] = _means((share["t_data"][single] > 0.5).astype(float), gpus[single])
    out["multi_io_share"] = _means(share["t_data"][multi], gpus[multi])
    projections = _projections(pop, options, current, ps)
    out["projections"] = projections
    out["ps_nvlink_faster"] = projections["both"]["faster"]
    out["ps_nvlink_faster_all"] = projections["both"]["faster_all"]
    network_jobs = ok & np.isin(pop.arch, ("ps-worker", "allreduce-cluster")) & (pop.network == ETHERNET[0])
    eth = pop.predict(options, {"network": ETHERNET[1]}, network_jobs)
    eth_summary = _summary(current, eth, _speedups(current, eth, network_jobs, must_fit=False), gpus)
    out["eth"] = eth_summary
    out["eth_speedup"] = eth_summary["mean"]
    out["current"] = current
    return out


def _projections(pop: Population, options: Options, current: dict, ps: np.ndarray) -> dict:
    """PS/Worker jobs changing one thing at a time: the architecture on the same hardware, the
    hardware (PCIe server -> the NVLink server of its generation) with the architecture kept, then
    both; all-reduce is allreduce-local on one server and allreduce-cluster across servers."""
    gpus = pop.n_gpu
    one_server = pop.n_gpu <= pop.per_server
    ar_arch = np.where(one_server, "allreduce-local", "allreduce-cluster").astype(object)
    sibling = [NVLINK_SERVER.get(g, (None, None)) for g in pop.gpu]
    has_nvlink = np.array([s[0] is not None for s in sibling])
    nv_gpu = np.array([s[0] or g for s, g in zip(sibling, pop.gpu)], dtype=object)
    nv_intra = np.array([s[1] or i for s, i in zip(sibling, pop.intra)], dtype=object)
    on_pcie = np.array([str(i).startswith("pcie") for i in pop.intra])
    same = pop.predict(options, {"arch": ar_arch}, ps)
    hardware = pop.predict(options, {"gpu": nv_gpu, "intra": nv_intra}, ps & has_nvlink & on_pcie)
    both = pop.predict(options, {"arch": ar_arch, "gpu": nv_gpu, "intra": nv_intra}, ps & has_nvlink)
    out = {}
    for key, target, scope in (
        ("same_pcie_local", same, ps & on_pcie & one_server),
        ("same_pcie_cluster", same, ps & on_pcie & ~one_server),
        ("same_nvlink_local", same, ps & ~on_pcie & one_server),
        ("same_nvlink_cluster", same, ps & ~on_pcie & ~one_server),
        ("hardware", hardware, ps & has_nvlink & on_pcie),
        ("both_local", both, ps & has_nvlink & one_server),
        ("both_cluster", both, ps & has_nvlink & ~one_server),
        ("both", both, ps & has_nvlink),
    ):
        used = _speedups(current, target, scope, must_fit=key != "hardware")
        out[key] = {**_summary(current, target, used, gpus), "in_scope": int(scope.sum())}
        # over every job in scope whose target is valid: one that does not fit counts as not faster
        valid = scope & target["valid"] & current["valid"]
        faster = used & (current["step_time"] / target["step_time"] > 1.0)
        out[key]["faster_all"] = _means(faster[valid].astype(float), gpus[valid])
    out["no_nvlink"] = int(np.sum(ps & ~has_nvlink))
    return out


def _sensitivity(pop: Population, options: Options, current: dict) -> dict:
    """Mean speedup per current architecture when each resource of :data:`RESOURCES` doubles alone."""
    ok = current["valid"]
    out = {}
    for key in RESOURCES:
        faster = pop.predict(options, scale={key: 2.0}, mask=ok)
        speed = current["step_time"] / faster["step_time"]
        out[key] = {
            a: _means(speed[ok & (pop.arch == a)], pop.n_gpu[ok & (pop.arch == a)]) for a in dict.fromkeys(pop.arch[ok])
        }
    return out


def _memory_bound(pop: Population, options: Options, current: dict) -> dict:
    """Memory-bound against FLOP-bound time per architecture and per model, and the fusion speedup."""
    ok = current["valid"]
    mem_share = current["t_mem"] / (current["t_mem"] + current["t_flop"])
    fused = pop.predict(options, scale={"membound_bytes": FUSION}, mask=ok)
    speed = current["step_time"] / fused["step_time"]
    rows = {}
    archs = sorted(dict.fromkeys(pop.arch[ok]), key=ARCHS.index)
    for group, mask in [*((a, ok & (pop.arch == a)) for a in archs), ("all", ok)]:
        rows[group] = {
            "jobs": int(mask.sum()),
            "mem_share": _means(mem_share[mask], pop.n_gpu[mask]),
            "mem_longer": _means((mem_share[mask] > 0.5).astype(float), pop.n_gpu[mask]),
            "fusion": _means(speed[mask], pop.n_gpu[mask]),
        }
    models = {}
    for m in sorted(dict.fromkeys(pop.model[ok])):
        mask = ok & (pop.model == m)
        models[m] = {
            "jobs": int(mask.sum()),
            "mem_share": float(np.mean(mem_share[mask])),
            "fusion": float(np.mean(speed[mask])),
        }
    return {"archs": rows, "models": models}


def compute_paper(population, variants: tuple[str, ...] | None = None) -> dict:
    """Every number of the paper section for ``population`` (a :class:`Population`, or the path of a
    population CSV; jobs with a current configuration), under the variants of its model
    (:func:`model_variants` of ``Population.options``; ``variants`` keeps only those names):
    ``figures`` per variant (see :func:`_figures`), ``variants`` (name -> what it switches),
    ``model`` (the base in words), ``bracket`` (the placement bracket: PS communication share and
    Ethernet speedup, shared NIC against one share per worker), ``sensitivity`` under the base and
    communication v2, and ``memory`` under the base."""
    pop = population if isinstance(population, Population) else Population(population)
    chosen = model_variants(pop.options, variants)
    figures = {name: _figures(pop, options) for name, (_, options) in chosen.items()}
    ps = pop.arch == "ps-worker"
    declared = np.array([pop.cats.workloads.number(m, "embedding_params_M") > 0 for m in pop.model])
    out = {
        "jobs": len(pop.jobs),
        "gpus": float(pop.n_gpu.sum()),
        "model": describe_model(pop.options, pop.efficiency),
        "base_is_paper": pop.options == PAPER_MODEL,
        "variants": {name: text for name, (text, _) in chosen.items()},
        "figures": figures,
        "ps_embedding_share": float(np.mean(declared[ps])) if ps.any() else math.nan,
    }
    sides = bracket_sides(chosen)
    if sides:
        out["bracket"] = {k: (figures[sides[0]][k], figures[sides[1]][k]) for k in ("ps_comm_share", "eth_speedup")}
    out["sensitivity"], out["memory"] = {}, {}
    for name in ("base", "comm-v2"):
        if name in figures:
            out["sensitivity"][name] = _sensitivity(pop, chosen[name][1], figures[name]["current"])
    # the compute terms are the same under every variant: the memory-bound analysis once, under the base
    out["memory"]["base"] = _memory_bound(pop, chosen["base"][1], figures["base"]["current"])
    return out


# --- markdown -------------------------------------------------------------------------------------
def _pair(values: tuple[float, float], fmt=pct) -> str:
    return f"{fmt(values[0])} / {fmt(values[1])}"


def _inside(paper: float, a: float, b: float) -> str:
    low, high = min(a, b), max(a, b)
    return "inside" if low <= paper <= high else ("below" if paper < low else "above")


def render_paper(numbers: dict) -> str:
    """The markdown section of :func:`compute_paper`'s numbers."""
    figs = numbers["figures"]
    lines = [
        "## The paper's figures, one mechanism at a time",
        "",
        f"{numbers['jobs']:,} jobs on {numbers['gpus']:,.0f} GPUs, each predicted directly at its current "
        "configuration (and at each projection's target) under the model variants below; every cell gives the "
        "mean **per job / by GPU** (a job weighted by its GPU count). Which weighting the paper's figures use "
        "is not known from its abstract, so both stand beside them. The paper's figures: communication share, "
        "60% and 1.7x from the abstract of Wang et al. (IISWC 2019); the PS/Worker, >80%, 5% and 3% figures "
        "from secondary reading notes of the paper, not checked against its full text.",
        "",
        f"The variants are those of the model that made the cube, **{numbers['model']}**: `base` is that "
        "model, each other one switches one mechanism on top of it (a mechanism the base has on already is "
        "not repeated).",
        "",
        "| variant | what it switches |",
        "|---|---|",
    ]
    lines += [f"| `{name}` | {numbers['variants'][name]} |" for name in figs]
    lines += [
        "",
        "### The paper's figures beside ours",
        "",
        "| figure | paper | " + " | ".join(f"`{n}`" for n in figs) + " |",
        "|---|---:|" + "---:|" * len(figs),
    ]
    for key, (text, paper) in FIGURE_TEXT.items():
        fmt = times if key == "eth_speedup" else pct
        lines.append(f"| {text} | {paper} | " + " | ".join(_pair(figs[n][key], fmt) for n in figs) + " |")
    base = figs["base"]
    lines += ["", "How each mechanism moves a figure (the base -> the variant, per job):", ""]
    for name in figs:
        if name == "base":
            continue
        fmts = {k: times if k == "eth_speedup" else pct for k in FIGURE_TEXT}
        moved = [
            f"{FIGURE_TEXT[k][0]} {fmts[k](base[k][0])} -> {fmts[k](figs[name][k][0])}"
            for k in FIGURE_TEXT
            if fmts[k](base[k][0]) != fmts[k](figs[name][k][0])
        ]
        lines.append(f"- `{name}`: " + ("; ".join(moved) if moved else "no figure moves") + ".")
    lowest = min(figs, key=lambda n: figs[n]["ps_nvlink_faster_all"][0])
    lines += [
        "",
        f"PS/Worker -> AllReduce over NVLink: under the base {pct(base['ps_nvlink_faster'][0])} of the jobs "
        "with a usable target are faster"
        + (
            ", because nothing in version 1's formulas can make an all-reduce step slower than the PS/Worker one "
            "(the PS pushes every GPU's gradients through a shared NIC)"
            if numbers.get("base_is_paper")
            else ""
        )
        + ". The mechanisms that "
        "can are switchable: sparse traffic (a PS moves the touched embedding rows, all-reduce the dense "
        "gradients), a PS that reduces inside each server or gives each worker its own NIC share, and "
        "parameters whose all-reduce target does not fit in GPU memory (counted as not "
        f"faster in the second row). The lowest share is `{lowest}`'s, "
        f"{_pair(figs[lowest]['ps_nvlink_faster_all'])}; the paper's 60% is "
        + (
            "reached"
            if figs[lowest]["ps_nvlink_faster_all"][0] <= PAPER_FIGURES["ps_nvlink_faster"]
            else "not reached, and the rest of the gap is not explained by a mechanism of the model"
        )
        + f" (the population is synthetic: its PS/Worker jobs on models that declare embedding tables, "
        f"{pct(numbers['ps_embedding_share'])} of them, set how far sparse traffic can go).",
    ]
    lines += [
        "",
        "`ps_memory` changes no time (only which configurations fit), so it moves no figure here. Input I/O "
        "(the two input-I/O rows) is the host-to-GPU copy over PCIe in every variant, and no mechanism with "
        "sourced numbers moves it: the CPU input-pipeline bound (`input_rate_samples_per_s`) would, but no "
        "per-model decode rate of PAI's jobs is known, so it is left off and the input-I/O differences stay "
        "ones that the model does not explain.",
    ]
    lines += [
        "",
        "### Time shares per architecture, per job and by GPU (the base)",
        "",
        "| architecture | jobs | input I/O | FLOP-bound | memory-bound | communication |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for arch in sorted(base["shares"], key=lambda a: (ARCHS + ("all",)).index(a)):
        shares = base["shares"][arch]
        lines.append(f"| {arch} | {base['jobs'][arch]:,} | " + " | ".join(_pair(shares[c]) for c in COMPONENTS) + " |")
    if "bracket" in numbers:
        b = numbers["bracket"]
        lines += [
            "",
            "### The placement bracket",
            "",
            "The PS/Worker formula lets the workers of a server share its NIC (`ps_nic = shared`, version 1's "
            "default); with one NIC share per worker (`ps_nic = per-worker`) each worker, and each parameter "
            "server, has its own. The two, each on the base model, bracket the placement that the paper does "
            "not state:",
            "",
            "| figure | shared NIC | one share per worker | paper | paper inside? |",
            "|---|---:|---:|---:|---|",
        ]
        for key, fmt in (("ps_comm_share", pct), ("eth_speedup", times)):
            a, c = b[key]
            lines.append(
                f"| {FIGURE_TEXT[key][0]} | {_pair(a, fmt)} | {_pair(c, fmt)} | {FIGURE_TEXT[key][1]} | "
                f"per job {_inside(PAPER_FIGURES[key], a[0], c[0])}, by GPU "
                f"{_inside(PAPER_FIGURES[key], a[1], c[1])} |"
            )
    lines += [
        "",
        "### PS/Worker projections, one change at a time",
        "",
        "All-reduce is `allreduce-local` for a job that fits in one server and `allreduce-cluster` across "
        "servers; *same hardware* keeps the GPU and the intra link (PCIe servers: the ring runs over PCIe; "
        "NVLink servers: over NVLink); the *hardware swap* moves a PCIe-server job to the NVLink server of its "
        "generation (the SXM sibling GPU and its NVLink) and keeps PS/Worker; *both* does the two. A target "
        "that does not fit in GPU memory is left out (GPUs without an NVLink part, K80 and T4, have no "
        f"NVLink server: {base['projections']['no_nvlink']:,} jobs). Faster: share of jobs / of GPUs with a "
        "speedup above 1.",
        "",
    ]
    rows = (
        ("same_pcie_local", "PS -> AllReduce, same hardware, PCIe server, one server"),
        ("same_pcie_cluster", "PS -> AllReduce, same hardware, PCIe servers, across servers"),
        ("same_nvlink_local", "PS -> AllReduce, same hardware, NVLink server, one server"),
        ("same_nvlink_cluster", "PS -> AllReduce, same hardware, NVLink servers, across servers"),
        ("hardware", "hardware swap only: PCIe -> NVLink server, PS kept"),
        ("both_local", "both: AllReduce on the NVLink server, one server"),
        ("both_cluster", "both: AllReduce on NVLink servers, across servers"),
        ("both", "both, all PS/Worker jobs with an NVLink server"),
    )
    for name in [n for n in ("base", "comm-v2") if n in figs]:
        proj = figs[name]["projections"]
        lines += [
            f"Under `{name}`:",
            "",
            "| change | jobs | faster (jobs / GPUs) | median | mean (per job / by GPU) |",
            "|---|---:|---:|---:|---:|",
        ]
        for key, text in rows:
            p = proj[key]
            lines.append(
                f"| {text} | {p['jobs']:,} of {p['in_scope']:,} | {_pair(p['faster'])} | {times(p['median'])} "
                f"| {_pair(p['mean'], times)} |"
            )
        lines.append("")
    for name, sens in numbers["sensitivity"].items():
        archs = sorted(next(iter(sens.values())), key=ARCHS.index)
        lines += [
            f"### Sensitivity per architecture (`{name}`)",
            "",
            "Mean speedup (per job / by GPU) when one resource doubles, everything else fixed; the largest "
            "per architecture in bold. The paper (notes): 1w1g most sensitive to GPU memory bandwidth, 1wng to "
            "PCIe, PS/Worker to Ethernet.",
            "",
            "| architecture | " + " | ".join(RESOURCES.values()) + " | most sensitive to |",
            "|---|" + "---:|" * len(RESOURCES) + "---|",
        ]
        for arch in archs:
            best = max(RESOURCES, key=lambda r: sens[r][arch][0])
            cells = [
                ("**" + _pair(sens[r][arch], times) + "**") if r == best else _pair(sens[r][arch], times)
                for r in RESOURCES
            ]
            lines.append(f"| {arch} | " + " | ".join(cells) + f" | {RESOURCES[best][3:]} |")
        lines.append("")
    for name, mem in numbers["memory"].items():
        lines += [
            f"### Memory-bound against FLOP-bound time (`{name}`)",
            "",
            "Memory-bound share of compute time t_mem / (t_mem + t_flop), the share of jobs whose memory-bound "
            f"time is the longer, and the speedup of operator fusion that removes {1 - FUSION:.0%} of the "
            "memory-bound bytes (the paper's XLA implication; the factor is a what-if, not a measurement). The "
            "paper (notes): memory-bound ops take longer than compute-bound ops in all workloads.",
            "",
            "| architecture | jobs | memory-bound share | memory-bound longer | fusion speedup |",
            "|---|---:|---:|---:|---:|",
        ]
        for group, r in mem["archs"].items():
            lines.append(
                f"| {group} | {r['jobs']:,} | {_pair(r['mem_share'])} | {_pair(r['mem_longer'])} | "
                f"{_pair(r['fusion'], times)} |"
            )
        lines += ["", "| model | jobs | memory-bound share | fusion speedup |", "|---|---:|---:|---:|"]
        for m, r in mem["models"].items():
            lines.append(f"| {m} | {r['jobs']:,} | {pct(r['mem_share'])} | {times(r['fusion'])} |")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
