"""One configuration: the full time breakdown of a job on one arch x gpu x n x intra x network x precision."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from .errors import PaigridError
from .evaluate import allocate, bottleneck_name, evaluate_block
from .jobs import Job
from .spec import SweepSpec
from .tables import build_grid


def predict_configs(jobs: list[Job], configs: list[dict], cats, eff, options) -> list[dict]:
    """Breakdown of ``jobs[i]`` at ``configs[i]`` (keys arch, gpu, n_gpu, intra, network, precision).

    Each result holds ``valid``, ``fits_memory``, ``step_time`` [s], ``t_data``, ``t_flop``,
    ``t_mem``, ``t_comm`` [s], ``throughput`` [samples/s], ``throughput_tokens`` [tokens/s],
    ``cost`` [USD per 1e6 samples], ``energy`` [J/sample] and ``bottleneck``.  Configurations
    that are invalid get NaN times and ``valid`` False.
    """
    results = []
    cache = {}
    for job, config in zip(jobs, configs):
        key = tuple(config[d] for d in ("arch", "gpu", "intra", "network", "precision"))
        if key not in cache:
            spec = SweepSpec(arch=[config["arch"]], gpu=[config["gpu"]], n_gpu=[1], intra=[config["intra"]],
                             network=[config["network"]], precision=[config["precision"]], options=options)
            cache[key] = build_grid(spec, [job], cats, eff)
        grid = cache[key]
        grid = replace(grid, jobs=[job], n_gpu=[int(config["n_gpu"])])
        out = evaluate_block(grid, 0, 0, 1).arrays
        first = {name: array.reshape(-1)[0] for name, array in out.items()}
        tokens = cats.workloads.number(job.model, "tokens_per_sample")
        tokens = 1.0 if math.isnan(tokens) else tokens
        results.append({
            "job": job.name, "model": job.model, **{d: config[d] for d in config},
            "batch": job.batch, "valid": bool(first["valid"]), "fits_memory": int(first["fits_memory"]) == 1,
            **{name: _shortest(first[name]) for name in ("step_time", "t_data", "t_flop", "t_mem", "t_comm",
                                                         "throughput", "cost", "energy")},
            "throughput_tokens": _shortest(np.float32(first["throughput"] * tokens)),
            "bottleneck": bottleneck_name(int(first["bottleneck"])),
        })
        if not results[-1]["valid"]:
            for name in ("t_data", "t_flop", "t_mem"):
                results[-1][name] = float("nan")
    return results


def _shortest(value) -> float:
    """A float32 cube value as the shortest decimal that round-trips (537.59137, not 537.5913696289062)."""
    return float(str(np.float32(value)))


def current_predictions(jobs: list[Job], cats, eff, options) -> dict[str, np.ndarray]:
    """Predicted step time [s], throughput [samples/s] and cost of each job's current configuration (NaN if none)."""
    step = np.full(len(jobs), np.nan)
    throughput = np.full(len(jobs), np.nan)
    cost = np.full(len(jobs), np.nan)
    with_current = [i for i, j in enumerate(jobs) if j.current is not None]
    if with_current:
        results = predict_configs([jobs[i] for i in with_current], [jobs[i].current for i in with_current],
                                  cats, eff, options)
        for i, r in zip(with_current, results):
            step[i], throughput[i], cost[i] = r["step_time"], r["throughput"], r["cost"]
    return {"current_step_time": step, "current_throughput": throughput, "current_cost": cost}


def invalid_reason(job: Job, config: dict, cats) -> str:
    """Why ``config`` cannot exist for ``job``, in one sentence (empty when it can)."""
    from .tables import fits_matrix

    arch, n, k = config["arch"], int(config["n_gpu"]), int(job.options["gpus_per_node"])
    where = f"{arch} with {n} GPU(s)"
    if arch == "1w1g" and n != 1:
        return f"{where} is invalid: 1w1g runs exactly one GPU."
    if arch in ("1wng", "allreduce-local") and n > k:
        return f"{where} is invalid: {arch} keeps every GPU in one server, which has {k} (gpus_per_node)."
    if arch in ("ps-worker", "allreduce-cluster") and cats.links.row(config["network"])["kind"] == "none":
        return f"{where} is invalid: {arch} needs a network between servers, and the network is 'none'."
    if not fits_matrix(cats, [config["gpu"]], [config["intra"]])[0, 0]:
        return f"the {config['intra']} link cannot connect {config['gpu']} GPUs."
    column = cats.precisions.row(config["precision"])["peak_column"]
    if not cats.gpus.number(config["gpu"], column) > 0:
        return f"the {config['gpu']} has no {config['precision']} support ({column} is empty in the GPU catalogue)."
    return ""


def predict_one(workload: str, arch: str, gpu: str, n_gpu: int, intra: str, network: str, precision: str,
                batch: float | None = None, calibration=None, option_values: dict | None = None,
                catalogues: dict[str, str] | None = None) -> dict:
    """Breakdown of one configuration of a catalogue workload (see ``predict_configs``).

    An invalid configuration is an error whose sentence says why.
    """
    from paigrid.kernels.layout import ARCH_NAMES

    from .catalog import Catalogues
    from .efficiency import defaults, load_calibration
    from .jobs import load_jobs, resolve_link

    if arch not in ARCH_NAMES:
        raise PaigridError(f"unknown architecture {arch!r}; known: {', '.join(ARCH_NAMES)}.")
    spec = SweepSpec(workloads=[workload])
    eff = defaults()
    if calibration is not None:
        eff = eff.overridden(load_calibration(calibration))
        spec.options = spec.options.with_overrides(eff.options, str(calibration))
    spec.options = spec.options.with_overrides(option_values or {}, "--option")
    cats = Catalogues.load(catalogues)
    job = load_jobs(spec, cats)[0][0]
    if batch is not None:
        if not batch >= 1:
            raise PaigridError(f"--batch must be at least 1 sample, not {batch}.")
        job.batch = float(batch)
    config = {"arch": arch, "gpu": cats.gpus.resolve(gpu), "n_gpu": int(n_gpu),
              "intra": resolve_link(cats, intra, "intra"), "network": resolve_link(cats, network, "network"),
              "precision": cats.precisions.resolve(precision)}
    reason = invalid_reason(job, config, cats)
    if reason:
        raise PaigridError(reason)
    return predict_configs([job], [config], cats, eff, spec.options)[0]
