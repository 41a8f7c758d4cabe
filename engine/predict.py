"""One configuration: the full time breakdown of a job on one arch x gpu x n x intra x network x precision."""

from __future__ import annotations

import math
import numpy as np

from paigrid.errors import PaigridError
from paigrid.evaluate import allocate, run_kernel
from paigrid.schema import bottleneck_name
from paigrid.inputs.jobs import Job
from paigrid.inputs.spec import SweepSpec
from paigrid.inputs.tables import build_grid, job_vector


def predict_configs(jobs: list[Job], configs: list[dict], cats, eff, options) -> list[dict]:
    """Breakdown of ``jobs[i]`` at ``configs[i]`` (keys arch, gpu, n_gpu, intra, network, precision).

    Each result holds ``valid``, ``fits_memory``, ``step_time`` [s], ``t_data``, ``t_flop``,
    ``t_mem``, ``t_comm`` [s], ``throughput`` [samples/s], ``throughput_tokens`` [tokens/s],
    ``cost`` [USD per 1e6 samples], ``energy`` [J/sample] and ``bottleneck``.  Configurations
    that are invalid get NaN times and ``valid`` False.  Jobs that share a configuration (all
    but the GPU count) go through the kernel together, one job per row with its own GPU count.
    """
    from paigrid.kernels.model import evaluate_block as kernel

    groups: dict[tuple, list[int]] = {}
    for i, config in enumerate(configs):
        groups.setdefault(tuple(config[d] for d in ("arch", "gpu", "intra", "network", "precision")), []).append(i)
    results: list[dict] = [{} for _ in jobs]
    for (arch, gpu, intra, network, precision), members in groups.items():
        spec = SweepSpec(arch=[arch], gpu=[gpu], n_gpu=[1], intra=[intra], network=[network],
                         precision=[precision], options=options)
        grid = build_grid(spec, [jobs[m] for m in members], cats, eff)
        table = np.stack([job_vector(jobs[m], cats) for m in members])
        n_gpu = np.array([[float(configs[m]["n_gpu"])] for m in members])
        out = allocate(grid, len(members), True)
        run_kernel(kernel, grid, table, n_gpu, True, out)
        for row, m in enumerate(members):
            results[m] = _result(jobs[m], configs[m], {name: array[row].reshape(-1)[0] for name, array in out.items()},
                                 cats)
    return results


def _result(job: Job, config: dict, first: dict, cats) -> dict:
    tokens = cats.workloads.number(job.model, "tokens_per_sample")
    tokens = 1.0 if math.isnan(tokens) else tokens
    valid = bool(first["valid"])
    result = {
        "job": job.name, "model": job.model, **{d: config[d] for d in config},
        "batch": job.batch, "valid": valid, "fits_memory": int(first["fits_memory"]) == 1,
        **{name: _shortest(first[name]) for name in ("step_time", "t_data", "t_flop", "t_mem", "t_comm",
                                                     "throughput", "cost", "energy")},
        "throughput_tokens": _shortest(np.float32(first["throughput"] * tokens)),
        "bottleneck": bottleneck_name(int(first["bottleneck"])),
    }
    if not valid:
        for name in ("t_data", "t_flop", "t_mem"):
            result[name] = float("nan")
    return result


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
    from paigrid.inputs.tables import fits_matrix

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

    from paigrid.inputs.catalog import Catalogues
    from paigrid.inputs.efficiency import with_calibration
    from paigrid.inputs.jobs import load_jobs, resolve_link

    if arch not in ARCH_NAMES:
        raise PaigridError(f"unknown architecture {arch!r}; known: {', '.join(ARCH_NAMES)}.")
    spec = SweepSpec(workloads=[workload])
    eff, spec.options = with_calibration(spec.options, calibration)
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
