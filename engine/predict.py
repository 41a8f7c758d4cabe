"""One configuration: the full time breakdown of a job on one arch x gpu x n x intra x network x precision."""

from __future__ import annotations

import math

import numpy as np

from paigrid.errors import PaigridError
from paigrid.inputs.jobs import Job, resolve_link
from paigrid.inputs.spec import SweepSpec
from paigrid.kernels.dp_columns import ARCH_NAMES, REASON_VALID
from paigrid.schema import DERIVED_VARIABLES, bottleneck_name, reason_sentence

#: resources ``predict_configs`` can scale (the study's sensitivity analysis and fusion factor)
SCALABLE = ("flop", "hbm", "pcie", "nvlink", "network", "membound_bytes")


def scale_tables(scale: dict[str, float], gpu_table, peak, class_peak, intra_table, network_table, job_table) -> None:
    """Scale, in place, the kernel tables' resources named in ``scale`` (keys of :data:`SCALABLE`,
    factors [x]): ``flop`` every achievable FLOP/s, ``hbm`` the memory bandwidth, ``pcie`` the
    host PCIe link and the PCIe intra links, ``nvlink`` the NVLink/NVSwitch intra links,
    ``network`` the networks, ``membound_bytes`` the memory-bound bytes of every job (an
    operator-fusion factor: 0.5 = fusion removes half of them)."""
    from paigrid.kernels import dp_columns as L

    unknown = set(scale) - set(SCALABLE)
    if unknown:
        raise PaigridError(f"cannot scale {', '.join(sorted(unknown))}; known: {', '.join(SCALABLE)}.")
    flop, hbm, pcie = scale.get("flop", 1.0), scale.get("hbm", 1.0), scale.get("pcie", 1.0)
    peak *= flop
    if class_peak is not None:
        class_peak *= flop
    gpu_table[:, L.G_MEM_BW] *= hbm
    gpu_table[:, L.G_CLASS_MEM_BW] *= hbm
    gpu_table[:, L.G_PCIE_BW] *= pcie
    is_pcie = intra_table[:, L.L_KIND] == L.LINK_PCIE
    intra_table[is_pcie, L.L_BW] *= pcie
    intra_table[~is_pcie, L.L_BW] *= scale.get("nvlink", 1.0)
    network_table[:, L.L_BW] *= scale.get("network", 1.0)
    fused = scale.get("membound_bytes", 1.0)
    for field in (
        L.J_MEMBOUND,
        L.J_CLASS_BYTES + L.CLASS_ELEMENTWISE,
        L.J_CLASS_BYTES + L.CLASS_EMBEDDING,
        L.J_AMP_FP32_BYTES,
        L.J_NCHW_BYTES,
    ):
        job_table[:, field] *= fused


#: up to this many jobs, ``config_values`` builds the job table row by row
FEW_JOBS = 8


def predict_configs(
    jobs: list[Job], configs: list[dict], cats, eff, options, scale: dict[str, float] | None = None
) -> list[dict]:
    """Breakdown of ``jobs[i]`` at ``configs[i]`` (see ``config_values``) as one dict per job."""
    values = config_values(jobs, configs, cats, eff, options, scale)
    return [
        _result(job, config, {name: array[m] for name, array in values.items()}, cats)
        for m, (job, config) in enumerate(zip(jobs, configs))
    ]


def config_values(
    jobs: list[Job], configs: list[dict], cats, eff, options, scale: dict[str, float] | None = None
) -> dict[str, np.ndarray]:
    """Breakdown of ``jobs[i]`` at ``configs[i]`` (keys arch, gpu, n_gpu, intra, network, precision).

    Each result holds ``valid`` (bool), ``invalid_reason`` (the kernel's code, 0 when valid;
    ``schema.reason_sentence`` / ``reason_text`` say it in words), ``fits_memory``,
    ``step_time`` [s], ``t_data``, ``t_flop``, ``t_mem``, ``t_comm`` [s], ``throughput``
    [samples/s], ``throughput_tokens`` [tokens/s], ``cost`` [USD per 1e6 samples], ``energy``
    [J/sample] and ``bottleneck``.  Configurations that are invalid get NaN times and ``valid``
    False.  The kernel tables of every GPU, link and precision named are built once per call;
    jobs that share a configuration (all but the GPU count) then go through the kernel together,
    one job per row with its own GPU count, in the serial compilation of the kernel unless the
    group is large (``evaluate.kernel_for``).  ``scale`` multiplies resources (``scale_tables``).
    Returns every kernel output at each job's configuration, and throughput, cost and energy
    derived from its step time as a cube's readers derive them (``schema.derived_values``;
    here in one compiled loop, ``kernels.model.config_derived``, equal to them bit for bit), as
    arrays over the jobs (name -> (len(jobs),), the kernel's dtypes); ``predict_configs`` makes
    the dicts.
    """
    if not jobs:
        return {}
    # the data-parallel kernel and its tables, imported here so that an LLM prediction does not load them
    from paigrid.evaluate import allocate, kernel_for, run_kernel
    from paigrid.inputs.kernel_tables import KernelTables, job_table_index, job_vector
    from paigrid.kernels.model import config_derived

    # every name once, canonical, and its position in the call's tables
    resolvers = {
        "gpu": cats.gpus.resolve,
        "intra": lambda n: resolve_link(cats, n, "intra"),
        "network": lambda n: resolve_link(cats, n, "network"),
        "precision": cats.precisions.resolve,
    }
    canonical: dict[str, dict[str, str]] = {dim: {} for dim in resolvers}
    for config in configs:
        for dim, resolve in resolvers.items():
            if config[dim] not in canonical[dim]:
                canonical[dim][config[dim]] = resolve(config[dim])
    names = {dim: list(dict.fromkeys(values.values())) for dim, values in canonical.items()}
    position = {dim: {name: k for k, name in enumerate(names[dim])} for dim in names}
    gpu_table, peak, prec_table, class_peak, intra_table, network_table, fits, option_row = _call_tables(
        cats, eff, options, names, copy=bool(scale)
    )
    if len(jobs) <= FEW_JOBS:  # a few (predict, validate): row by row costs less than finding the distinct ones
        job_table = (
            job_vector(jobs[0], cats, options, eff)[None]
            if len(jobs) == 1
            else np.stack([job_vector(job, cats, options, eff) for job in jobs])
        )
    else:
        distinct, job_index = job_table_index(jobs, cats, options, eff)
        job_table = distinct[job_index]  # a copy: ``scale_tables`` below scales it in place
    n_gpu = np.array([[float(config["n_gpu"])] for config in configs])
    if scale:
        scale_tables(scale, gpu_table, peak, class_peak, intra_table, network_table, job_table)

    groups: dict[tuple, list[int]] = {}
    for i, config in enumerate(configs):
        key = (
            ARCH_NAMES.index(config["arch"]),
            *(position[dim][canonical[dim][config[dim]]] for dim in ("gpu", "intra", "network", "precision")),
        )
        groups.setdefault(key, []).append(i)
    values: dict[str, np.ndarray] = {}
    for (a, g, i, w, p), members in groups.items():
        tables = KernelTables(
            np.array([a], dtype=np.int64),
            gpu_table[g : g + 1],
            np.ascontiguousarray(peak[g : g + 1, p : p + 1]),
            prec_table[p : p + 1],
            intra_table[i : i + 1],
            np.ascontiguousarray(fits[g : g + 1, i : i + 1]),
            network_table[w : w + 1],
            option_row,
            1,
            None if class_peak is None else np.ascontiguousarray(class_peak[g : g + 1, p : p + 1]),
        )
        if len(groups) == 1:  # every job, in order
            rows, group_jobs, group_n = None, job_table, n_gpu
        else:
            rows = np.array(members)
            group_jobs, group_n = job_table[rows], n_gpu[rows]
        out = allocate(tables, len(members), True)
        run_kernel(kernel_for(len(members)), tables, group_jobs, group_n, True, out)
        # throughput, cost and energy as a cube presents them: from the stored (float32) step time,
        # one configuration per job (every output of the call has one value per job), in one
        # compiled loop (``schema.derived_values`` on one-element arrays cost about 20 us)
        derived = {name: np.empty(len(members), dtype) for name, (_, _, dtype, _, _) in DERIVED_VARIABLES.items()}
        config_derived(group_jobs, group_n, gpu_table[g], out["step_time"].reshape(-1), *derived.values())
        out.update(derived)
        # every output has one value per job (one configuration each)
        if rows is None:  # every job, in order: the outputs as they are
            return {name: array.reshape(len(members)) for name, array in out.items()}
        for name, array in out.items():
            if name not in values:
                values[name] = np.empty(len(jobs), array.dtype)
            values[name][rows] = array.reshape(len(members))
    return values


#: the most kernel-table sets one ``Efficiency`` keeps (``_call_tables``); then it starts again
TABLE_MEMO_SIZE = 256


def _call_tables(cats, eff, options, names: dict[str, list[str]], copy: bool) -> tuple:
    """The kernel tables of one ``config_values`` call: GPU, peak [FLOP/s], precision and class
    peak tables of ``names["gpu"]`` x ``names["precision"]``, the intra and network link tables,
    the (gpu, intra) fits and the option vector.  Built once per (catalogues, options, names) and
    kept on ``eff`` (whose factors never change once made, as ``Efficiency.class_for``'s memo
    assumes): a warm single-configuration prediction spends about a third of its time building
    them otherwise.  The arrays are shared by later calls: nothing writes them, and ``copy``
    gives fresh ones that the caller may scale in place (they stay writeable: a read-only array
    is another numba type, which would compile the kernels again)."""
    from paigrid.inputs.kernel_tables import class_tables, fits_matrix, gpu_tables, link_table, option_vector

    key = (id(cats), options, *(tuple(names[dim]) for dim in ("gpu", "intra", "network", "precision")))
    memo = eff._table_memo.get(key)
    if memo is None or memo[0] is not cats:  # an id of catalogues since collected is not these
        gpu_table, peak, prec_table = gpu_tables(cats, names["gpu"], names["precision"], eff)
        class_peak = (
            class_tables(cats, names["gpu"], names["precision"], eff, gpu_table) if options.model == "pai-v2" else None
        )
        tables = (
            gpu_table,
            peak,
            prec_table,
            class_peak,
            link_table(cats, names["intra"], eff),
            link_table(cats, names["network"], eff),
            fits_matrix(cats, names["gpu"], names["intra"]),
            option_vector(options),
        )
        if len(eff._table_memo) >= TABLE_MEMO_SIZE:
            eff._table_memo.clear()
        memo = eff._table_memo[key] = (cats, tables)
    if copy:
        return tuple(None if array is None else array.copy() for array in memo[1])
    return memo[1]


def _result(job: Job, config: dict, first: dict, cats) -> dict:
    tokens = cats.workloads.number(job.model, "tokens_per_sample")
    tokens = 1.0 if math.isnan(tokens) else tokens
    reason = int(first["invalid_reason"])
    valid = reason == REASON_VALID
    result = {
        "job": job.name,
        "model": job.model,
        **{d: config[d] for d in config},
        "batch": job.batch,
        "valid": valid,
        "invalid_reason": reason,
        "fits_memory": _fits(first, valid),
        **{
            name: _shortest(first[name])
            for name in ("step_time", "t_data", "t_flop", "t_mem", "t_comm", "throughput", "cost", "energy")
        },
        "throughput_tokens": _shortest(np.float32(first["throughput"] * tokens)),
        "bottleneck": bottleneck_name(int(first["bottleneck"])),
    }
    if not valid:
        for name in ("t_data", "t_flop", "t_mem"):
            result[name] = float("nan")
    return result


def _fits(first: dict, valid: bool) -> bool:
    """Whether the configuration fits in GPU memory by the check of its architecture: for a valid
    one, whether the kernel's best-configuration reduction kept it (``ps_memory`` makes a
    ``ps-worker`` GPU hold no optimizer state); otherwise the (job, gpu, precision) flag."""
    if valid:
        return bool(np.isfinite(first["best_step_time"]))
    return int(first["fits_memory"]) == 1


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
        values = config_values(
            [jobs[i] for i in with_current], [jobs[i].current for i in with_current], cats, eff, options
        )
        step[with_current] = _shortest_array(values["step_time"])
        throughput[with_current] = _shortest_array(values["throughput"])
        cost[with_current] = _shortest_array(values["cost"])
    return {"current_step_time": step, "current_throughput": throughput, "current_cost": cost}


def _shortest_array(values: np.ndarray) -> np.ndarray:
    """``_shortest`` of every float32 value, converted once per distinct value."""
    distinct, inverse = np.unique(values.astype(np.float32), return_inverse=True)
    return np.array([_shortest(v) for v in distinct], dtype=np.float64)[inverse.reshape(-1)]


def reason_text(result: dict, job: Job, cats) -> str:
    """Why the configuration of a ``predict_configs`` result cannot exist, in one sentence
    (``schema.reason_sentence`` of its ``invalid_reason`` code, naming the configuration, the
    job's ``gpus_per_node`` and why the GPU lacks the precision); empty when it can."""
    fields = {
        **result,
        "job": job.name,
        "gpus_per_node": int(job.options["gpus_per_node"]),
        "lacks": cats.lacks_precision(result["gpu"], result["precision"]),
    }
    return reason_sentence(result["invalid_reason"], fields)


def predict_one(
    workload: str,
    arch: str,
    gpu: str,
    n_gpu: int,
    intra: str,
    network: str,
    precision: str,
    batch: float | None = None,
    calibration=None,
    option_values: dict | None = None,
    catalogues: dict[str, str] | None = None,
) -> dict:
    """Breakdown of one configuration of a catalogue workload (see ``predict_configs``), with
    ``compute_model`` (pai-v1 or pai-v2) and ``band``: the relative uncertainty of the
    prediction [fraction of step_time and of throughput], the cross-validated error of its group
    (``efficiency.prediction_band``; NaN where no measurement of the group was held out).

    An invalid configuration is an error whose sentence says why.
    """
    from paigrid.inputs.catalog import Catalogues
    from paigrid.inputs.efficiency import with_calibration
    from paigrid.inputs.jobs import load_jobs, resolve_link
    from paigrid.kernels.dp_columns import ARCH_NAMES

    if arch not in ARCH_NAMES:
        raise PaigridError(f"unknown architecture {arch!r}; known: {', '.join(ARCH_NAMES)}.")
    spec = SweepSpec(workloads=[workload])
    cats = Catalogues.load(catalogues)
    eff, spec.options = with_calibration(spec.options, calibration, cats)
    spec.options = spec.options.with_overrides(option_values or {}, "--option")
    job = load_jobs(spec, cats)[0][0]
    if batch is not None:
        if not 1 <= batch < math.inf:
            raise PaigridError(f"--batch must be a finite number of at least 1 sample, not {batch}.")
        job.batch = float(batch)
    config = {
        "arch": arch,
        "gpu": cats.gpus.resolve(gpu),
        "n_gpu": int(n_gpu),
        "intra": resolve_link(cats, intra, "intra"),
        "network": resolve_link(cats, network, "network"),
        "precision": cats.precisions.resolve(precision),
    }
    result = predict_configs([job], [config], cats, eff, spec.options)[0]
    if not result["valid"]:
        raise PaigridError(reason_text(result, job, cats))
    from paigrid.inputs.efficiency import band_group, prediction_band

    result["compute_model"] = spec.options.model
    result["band"] = prediction_band(
        spec.options.model, calibration is not None, band_group(n_gpu, job.options["gpus_per_node"])
    )
    return result


def _design(cats, gpu: str, n_domain: int | None, network: str, precision: str, nics_per_gpu: float):
    """The LLM cluster design of ``predict_llm``'s arguments (``domain`` from the catalogue's server by default)."""
    from paigrid.llm.fabrics import resolve_network
    from paigrid.llm.grid import catalogue_default
    from paigrid.llm.tables import Hardware, intra_link_for

    g = cats.gpus.resolve(gpu)
    return Hardware(
        g,
        cats.precisions.resolve(precision),
        n_domain or catalogue_default(cats, g, "nvlink_domain_GPUs"),
        intra_link_for(cats, g),
        resolve_network(network, cats),
        nics_per_gpu,
    )


def _searched_layout(cats, m, gpu, n_gpu, domain, network, precision, nics_per_gpu, option_items, global_batch):
    """(the fastest layout of the wide space, the search's counts and seconds) for ``--layout
    best`` (``llm.search.best_layout``); one sentence where no layout is valid."""
    import time

    from paigrid.inputs.efficiency import defaults
    from paigrid.llm.search import best_layout
    from paigrid.llm.tables import LlmOptions

    design = _design(cats, gpu, domain, network, precision, nics_per_gpu)
    options = LlmOptions.defaults().with_items(option_items or {})
    started = time.perf_counter()
    found = best_layout(m, n_gpu, [design], cats, defaults(), options, global_batch=global_batch, precompiled=True)
    seconds = time.perf_counter() - started
    if found.layouts[0] is None:
        from paigrid.llm.parallelism import CUBE_REASON_NAMES

        if not found.counts["layouts"]:
            raise PaigridError(f"no layout of {n_gpu} GPUs suits {m.name}'s shape and batch.")
        raise PaigridError(
            f"no layout of {n_gpu} GPUs is valid for {m.name} on {design.gpu} (NVLink domain {design.domain}, "
            f"{design.network}): every layout is refused (first reason: {CUBE_REASON_NAMES[int(found.reasons[0])]})."
        )
    return found.layouts[0], {**found.counts, "seconds": seconds}


def predict_llm(
    model_name: str,
    gpu: str,
    n_gpu: int,
    layout: dict,
    domain: int | None = None,
    network: str = "ib-ndr-400g",
    precision: str = "amp-bf16",
    nics_per_gpu: float = 1.0,
    option_items: dict | None = None,
    global_batch: int | None = None,
    seq_len: int | None = None,
    tokens: float | None = None,
) -> dict:
    """The full breakdown of one LLM layout on one cluster design (``llm.evaluate.predict``):
    ``layout`` holds tp, pp, cp, ep, vpp, micro_batch, zero, recompute, sp (dp = n_gpu / (tp x
    pp x cp)) or ``label`` (a layout label, with or without its dp); ``domain`` [GPUs] defaults
    to the GPU's catalogue server size (``llm.grid.catalogue_default``).  Adds ``layout`` (the
    label with dp) and, for ``tokens`` [tokens], ``train_days``, ``train_cost`` [USD] and
    ``train_energy_MWh`` (``llm.query.train_totals``).  A layout that does not divide ``n_gpu`` is one sentence."""
    from paigrid.inputs.catalog import Catalogues
    from paigrid.inputs.efficiency import defaults
    from paigrid.llm.evaluate import predict as run
    from paigrid.llm.fabrics import resolve_network
    from paigrid.llm.grid import catalogue_default
    from paigrid.llm.models import model
    from paigrid.llm.parallelism import Layout, layout_label, parse_label
    from paigrid.llm.tables import Hardware, LlmOptions, intra_link_for

    cats = Catalogues.load()
    m = model(model_name)
    m = m.with_seq_len(seq_len) if seq_len else m
    searched = None
    if str(layout.get("label", "")).strip().casefold() == "best":
        lay, searched = _searched_layout(
            cats, m, gpu, n_gpu, domain, network, precision, nics_per_gpu, option_items, global_batch
        )
    elif layout.get("label"):
        lay = parse_label(layout["label"], n_gpu)
        if lay.n_gpu != n_gpu:
            raise PaigridError(f"layout {layout['label']} occupies {lay.n_gpu} GPUs, not --n-gpu {n_gpu}.")
    else:
        group = layout.get("tp", 1) * layout.get("pp", 1) * layout.get("cp", 1)
        if n_gpu % group:
            raise PaigridError(f"--n-gpu {n_gpu} is not a multiple of tp x pp x cp = {group}.")
        lay = Layout(
            layout.get("tp", 1),
            layout.get("pp", 1),
            n_gpu // group,
            layout.get("cp", 1),
            layout.get("ep", 1),
            layout.get("vpp", 1),
            layout.get("micro_batch", 1),
            layout.get("zero", 1),
            str(layout.get("recompute", "selective")).strip().casefold(),
            bool(layout.get("sp", True)),
        )
    g = cats.gpus.resolve(gpu)
    design = Hardware(
        g,
        cats.precisions.resolve(precision),
        domain or catalogue_default(cats, g, "nvlink_domain_GPUs"),
        intra_link_for(cats, g),
        resolve_network(network, cats),
        nics_per_gpu,
    )
    options = LlmOptions.defaults().with_items(option_items or {})
    result = run(m, lay, design, cats, defaults(), options, global_batch, precompiled=True)
    result["layout"] = layout_label(lay)
    result["layout_text"] = lay.describe()
    result["design"] = design
    if searched is not None:
        result["searched"] = searched
    if tokens and result["valid"]:
        from paigrid.llm.query import train_totals

        batch_tokens = (global_batch or m.global_batch) * m.seq_len
        result.update(
            train_totals(
                tokens,
                result["tokens_per_s"],
                result["cost_per_step"] / batch_tokens,
                result["energy_per_step"] / batch_tokens,
            )
        )
    return result
