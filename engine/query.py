"""Queries on a cube: the best configurations of each job, by time, cost or energy per sample.

The stored per-job reductions (best arch x intra x network for each gpu x n_gpu x precision)
answer most queries by reading kilobytes.  A filter on arch, intra or network, or ``top`` > 1,
needs the cube itself, which its source scans (``paigrid.sources``: a file chunk by chunk,
only the chunks that hold a selected configuration, decompressed in parallel threads; or an
xarray Dataset), each job's few candidate rows picked by the array core (``paigrid.ranking``,
or in one pass ``paigrid.kernels.scan``), so a scan costs little more than decompressing the
chunks it needs.

Ordering is the same on both paths, so they agree exactly: configurations are compared by
time, cost or energy per sample (``kernels.metrics``, the kernels' one definition; time per
sample is the inverse throughput), and ties go to the first in (gpu, n_gpu, precision, arch,
intra, network) order.
"""

from __future__ import annotations

import math

import numpy as np

from paigrid.cube import Cube
from paigrid.errors import PaigridError
from paigrid.kernels import dp_columns as L
from paigrid.ranking import (
    best_per_group,
    distinct_configurations,
    per_sample,
    rows_to_show,
    shortlist,
    step_factor,
    ties_within,
    time_cost_and_metric,
)
from paigrid.schema import (
    ANY,
    ARCH_IGNORES,
    LABEL_DIMS,
    REDUCED_DIMS,
    cube_model,
    decode_best,
    decode_strings,
    str_attr,
)
from paigrid.sources import ChunkReader as _ChunkReader  # noqa: F401  (the scanner's old name here, kept for callers)


def parse_where(items: list[str], cube: Cube) -> dict[str, list[int]]:
    """Parse DIM=VALUE[,VALUE...] filters into coordinate indices (never evaluated as code)."""
    selected: dict[str, list[int]] = {}
    for item in items:
        dim, sep, text = item.partition("=")
        dim = dim.strip()
        if not sep or dim not in LABEL_DIMS:
            raise PaigridError(f"--where takes DIM=VALUE with DIM one of {', '.join(LABEL_DIMS)}, not {item!r}.")
        indices = label_indices(cube, dim, [v.strip() for v in text.split(",")])
        selected[dim] = sorted(set(selected.get(dim, [])) | set(indices))
    return selected


def label_indices(cube: Cube, dim: str, values) -> list[int]:
    """Coordinate indices along the label dimension ``dim`` of ``values`` (one value or a list):
    names match case-insensitively, GPU aliases resolve (V100 -> V100-SXM2-16GB), n_gpu values
    are whole numbers (given as numbers or text).  A value not in the cube is an error."""
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        values = [values]
    values = list(values)
    if not values:
        raise PaigridError(f"the filter on {dim} lists no values.")
    return sorted({_label_index(dim, value, cube.labels[dim]) for value in values})


def _label_index(dim: str, value, labels: list) -> int:
    if dim == "n_gpu":
        whole = (isinstance(value, (int, np.integer)) and not isinstance(value, bool)) or (
            isinstance(value, (float, np.floating)) and float(value).is_integer()
        )
        if whole:
            number = int(value)
        else:
            try:
                number = int(str(value).strip())
            except ValueError:
                raise PaigridError(f"n_gpu={value!r} is not a whole number.") from None
        if number in labels:
            return labels.index(number)
        raise PaigridError(f"n_gpu={number} is not in the cube; its n_gpu values are {', '.join(map(str, labels))}.")
    value = str(value).strip()
    folded = [str(v).casefold() for v in labels]
    if value.casefold() in folded:
        return folded.index(value.casefold())
    if dim == "gpu":
        from paigrid.inputs.catalog import load

        try:
            canonical = load("gpus").resolve(value)
        except PaigridError:
            canonical = None
        if canonical in labels:
            return labels.index(canonical)
    raise PaigridError(f"{dim}={value} is not in the cube; its {dim} values are {', '.join(map(str, labels))}.")


def best_configurations(
    cube: Cube,
    by: str = "time",
    where: dict[str, list[int]] | None = None,
    jobs: list[str] | None = None,
    top: int = 1,
    pareto: bool = False,
    per_design: bool = False,
) -> list[dict]:
    """The ``top`` best configurations of each job under the filters, as result rows; with
    ``pareto``, every configuration on the job's Pareto front of time per sample and cost per
    sample instead (fastest first; none is both slower and dearer than another); with
    ``per_design``, the best (arch, precision) of each cluster design (gpu, n_gpu, intra,
    network) that has a feasible one, in the cube's order of designs.

    Each row: job, model, arch, intra, network, gpu, n_gpu, precision, step_time [s],
    throughput [samples/s], throughput_tokens [tokens/s], cost [USD per 1e6 samples],
    bottleneck, and speedup (best throughput / current throughput; NaN without a current
    configuration).  A job with no feasible configuration under the filters gets one row of NaN.
    The stored reductions answer the Pareto front exactly too: within one (gpu, n_gpu,
    precision) time and cost per sample are proportional, so the fastest also dominates.
    """
    if by not in ("time", "cost", "energy"):
        raise PaigridError(f"--by takes time, cost or energy, not {by!r}.")
    if top < 1:
        raise PaigridError(f"--top must be at least 1, not {top}.")
    if pareto and top > 1:
        raise PaigridError("--top and --pareto do not go together: the front has as many rows as it has.")
    if per_design and (pareto or top > 1):
        raise PaigridError("--per design gives the best of each design: it goes with neither --top nor --pareto.")
    where = where or {}
    job_rows = job_indices(cube, jobs)
    needs_cube = top > 1 or per_design or any(dim in where for dim in REDUCED_DIMS)
    if per_design and cube.mode == "reduce-only":
        raise PaigridError(
            f"{cube.path} holds only the per-job reductions (reduce-only sweep), which keep one best "
            "over every intra and network: it cannot answer --per design."
        )
    if needs_cube and cube.mode == "reduce-only":
        raise PaigridError(
            f"{cube.path} holds only the per-job reductions (reduce-only sweep): it can answer "
            "--top 1 with filters on gpu, n_gpu and precision only."
        )
    sel = {dim: np.asarray(where.get(dim, range(len(cube.labels[dim]))), dtype=np.intp) for dim in LABEL_DIMS}
    meta = _job_metadata(cube, job_rows)
    price, power = cube.source.read("price"), cube.source.read("power")
    n_values = _n_values(cube, job_rows)
    if needs_cube:
        candidates = _scan(
            cube, job_rows, sel, meta["samples_per_step"], n_values, price, power, by, top, pareto, per_design
        )
    else:
        candidates = ((*found, None) for found in _reduced_jobs(cube, job_rows, sel))
    rows = []
    for pos, (j, (step, code, cfg, job_step)) in enumerate(zip(job_rows, candidates)):
        n = n_values[pos][cfg["n"]]
        samples = meta["samples_per_step"][pos]
        time, cost, metric = time_cost_and_metric(by, step, n, samples, price[cfg["g"]], power[cfg["g"]])
        chosen = (
            [k for k in range(len(step)) if not math.isnan(step[k])] or [0]
            if per_design
            else rows_to_show(time, cost, metric, top, pareto)
        )
        for k in chosen:
            row = _row(cube, j, pos, k, step, code, cfg, n, meta, price)
            row["band"], row["ties"] = _band_and_ties(cube, j, pos, k, step, cfg, n, meta, sel, pareto, job_step)
            rows.append(row)
    return rows


def _band_and_ties(cube: Cube, j, pos, k, step, cfg, n, meta, sel, pareto, job_step=None) -> tuple[float, float]:
    """The prediction band of a result row (the cube's ``prediction_band``; for a cube older
    than format 3 ``efficiency.prediction_band`` of its model, calibrated or not, and the
    row's group) and its ties: how many other feasible
    arch x intra x network configurations of the same job, gpu, n_gpu and precision (within
    the filters) have a step time within the band of this one's, so that the data cannot tell
    them apart (NaN: no band, a reduce-only cube or an infeasible row).  ``job_step`` is the
    job's step_time [s] when a scan has it in memory already, over the selected coordinates,
    with the position of each coordinate in it (``sources.positions``); None: read from the
    file."""
    from paigrid.inputs.efficiency import band_group, prediction_band

    if math.isnan(step[k]):
        return float("nan"), float("nan")
    g, ni, p = cfg["g"][k], cfg["n"][k], cfg["p"][k]
    if "prediction_band" in meta:  # stored from format 3 on
        band = float(meta["prediction_band"][pos, ni])
    else:
        calibrated = str_attr(cube.source.attrs, "calibration_sha256") not in ("", "null", "None")
        band = prediction_band(cube_model(cube.source.attrs), calibrated, band_group(n[k], meta["gpus_per_node"][pos]))
    if math.isnan(band) or cube.mode == "reduce-only" or pareto:
        return band, float("nan")
    if job_step is None:  # only the chunks of this gpu, n_gpu and precision
        block = cube.source.read("step_time", (j, slice(None), g, ni, slice(None), slice(None), p))[
            np.ix_(sel["arch"], sel["intra"], sel["network"])
        ]
    else:
        values, at = job_step
        block = values[
            np.ix_(
                at["arch"][sel["arch"]],
                [at["gpu"][g]],
                [at["n_gpu"][ni]],
                at["intra"][sel["intra"]],
                at["network"][sel["network"]],
                [at["precision"][p]],
            )
        ][:, 0, 0, :, :, 0]
    arch_names = [cube.labels["arch"][a] for a in sel["arch"]]
    return band, ties_within(block, arch_names, float(step[k]), band)


QUERY_UNITS = {
    "step_time": "s",
    "throughput": "samples/s",
    "throughput_tokens": "tokens/s",
    "cost": "USD/1e6 samples",
    "speedup": "x",
}
"""Units of the numeric columns of a result row."""


def result_columns(rows: list[dict], cube: Cube, where: dict[str, list[int]], compact: bool) -> list[str]:
    """The columns worth showing for ``rows`` of ``best_configurations``: with ``compact`` (a
    table for people), a dimension fixed by a filter or by the cube, the model where it equals
    the job name, and tokens/s where it equals samples/s are left out; otherwise every column."""
    fixed = {d for d, idx in where.items() if len(idx) == 1} | {
        d for d in ("gpu", "n_gpu", "precision") if len(cube.labels[d]) == 1
    }
    if cube.labels["n_gpu"] == [0]:  # "current": every job has its own GPU count
        fixed.discard("n_gpu")
    named_by_model = all(r["job"] == r["model"] for r in rows)
    columns = ["job"] + ([] if named_by_model and compact else ["model"]) + ["arch", "intra", "network"]
    columns += [d for d in ("gpu", "n_gpu", "precision") if d not in fixed or not compact]
    columns += ["step_time", "throughput", "cost", "bottleneck", "speedup"]
    if not compact or any(r.get("ties", 0) > 0 for r in rows):  # NaN compares False: shown only with ties
        columns += ["band", "ties"]
    per_token = any(r["throughput_tokens"] != r["throughput"] for r in rows if r["throughput"] == r["throughput"])
    if not compact or per_token:
        columns.insert(columns.index("cost"), "throughput_tokens")
    return columns


def _job_metadata(cube: Cube, job_rows: np.ndarray) -> dict[str, np.ndarray]:
    """Per-job variables the rows need, read once (whole 1-D variables, then the selected jobs)."""
    f = cube.source
    meta = {name: f.read(name)[job_rows] for name in ("samples_per_step", "tokens_per_sample")}
    meta["gpus_per_node"] = f.read("gpus_per_node")[job_rows] if "gpus_per_node" in f else np.full(len(job_rows), 8.0)
    meta["model"] = np.array(decode_strings(f.read("model")), dtype=object)[job_rows]
    if "prediction_band" in f:  # (job, n_gpu): read once, not per result row
        meta["prediction_band"] = f.read("prediction_band")[job_rows]
    meta["current_throughput"] = (
        f.read("current_throughput")[job_rows] if "current_throughput" in f else np.full(len(job_rows), np.nan)
    )
    return meta


def job_indices(cube: Cube, jobs: list[str] | None) -> np.ndarray:
    """Row indices of the named jobs in the cube (every job when ``jobs`` is empty); a name not
    in the cube is an error suggesting close ones."""
    if not jobs:
        return np.arange(len(cube.labels["job"]))
    index = {name: i for i, name in enumerate(cube.labels["job"])}
    missing = [j for j in jobs if j not in index]
    if missing:
        import difflib

        close = difflib.get_close_matches(missing[0], list(index), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else "."
        raise PaigridError(f"job {missing[0]!r} is not in the cube{hint}")
    return np.array([index[j] for j in jobs])


def _n_values(cube: Cube, job_rows: np.ndarray) -> np.ndarray:
    """GPU count of each n_gpu coordinate per job (the current count when the coordinate is 0)."""
    labels = np.asarray(cube.labels["n_gpu"], dtype=np.float64)
    if list(labels) == [0.0]:
        return cube.source.read("current_n_gpu")[job_rows].astype(np.float64)[:, None]
    return np.tile(labels, (len(job_rows), 1))


def _reduced_jobs(cube: Cube, job_rows: np.ndarray, sel: dict[str, np.ndarray]):
    """Candidates of each job from the stored reductions: one per (gpu, n_gpu, precision).

    The reductions are small (kilobytes per job), so they are read for all jobs at once.
    """
    g, n, p = (sel[d] for d in ("gpu", "n_gpu", "precision"))
    f = cube.source
    every = len(job_rows) > 64
    arrays = [f.read(name) if every else None for name in ("best_step_time", "best_index", "best_bottleneck")]
    gg, nn, pp = (x.reshape(-1) for x in np.meshgrid(g, n, p, indexing="ij"))
    n_i, n_w = len(cube.labels["intra"]), len(cube.labels["network"])
    for j in job_rows:
        step, flat, code = (
            (a[j] if every else f.read(name, int(j)))[np.ix_(g, n, p)].reshape(-1)
            for a, name in zip(arrays, ("best_step_time", "best_index", "best_bottleneck"))
        )
        a, i, w = decode_best(flat, n_i, n_w)
        yield step, code, {"g": gg, "n": nn, "p": pp, "a": a, "i": i, "w": w}


SCAN_KERNEL_CELLS = 30_000_000
"""From this many selected cells (jobs x configurations) on, a scan selects with the compiled
kernel; below, with numpy alone, since loading numba and its cached kernel (about 0.6 s) would
cost more than it saves.  Where the kernel compiled ahead of time is there (``paigrid.precompiled``,
in a command's cache folder), every scan selects with it, numba unloaded: on the bench's cube,
0.25 s of CPU less for ``--where network=...`` and 0.35 s less for ``--top 3``.  Either way the
cube's source reads the chunks (``sources.FileSource``: decoded in parallel threads, their
checksums checked by numcodecs, ``codecs.chunk_decoder``, so decoding loads no numba)."""


def _scan(
    cube: Cube,
    job_rows: np.ndarray,
    sel: dict[str, np.ndarray],
    samples: np.ndarray,
    n_values: np.ndarray,
    price: np.ndarray,
    power: np.ndarray,
    by: str,
    top: int,
    pareto: bool,
    per_design: bool = False,
):
    """Candidates of each job in ``job_rows`` from the cube itself, in ``job_rows`` order: for
    each job (step [s], bottleneck code, configuration indices, and the job's step_time [s] over
    the selected coordinates with each coordinate's position in it, which the scan fills again
    for a later job once the next job's candidates are asked for).

    The cube's source (``paigrid.sources``: a file's chunks, or an xarray Dataset) hands each
    job's step times and bottlenecks over the selected coordinates to ``select``, which keeps,
    vectorised, the few configurations that can be rows (``ranking.shortlist``, or in one pass
    the kernel ``kernels.scan.top_configurations``), in (gpu, n_gpu, precision, arch, intra,
    network) order, so ``best_configurations`` ranks them exactly as it would rank every
    configuration of the job; with ``per_design``, the best of each (gpu, n_gpu, intra,
    network) in that order (``ranking.best_per_group``).  ``samples`` [samples/step] and
    ``n_values`` [GPUs] are per position in ``job_rows``; ``price`` [USD/GPU-hour] and ``power``
    [W] per gpu.
    """
    cells = len(job_rows) * math.prod(len(sel[d]) for d in LABEL_DIMS)
    compiled = cells >= SCAN_KERNEL_CELLS
    fits_all = np.ascontiguousarray(
        cube.source.read("fits_memory")[:, sel["gpu"]][:, :, sel["precision"]], dtype=np.uint8
    )  # (job, selected gpu, selected precision): kB
    arch_names = [cube.labels["arch"][a] for a in sel["arch"]]
    a_s, g_s, n_s, i_s, w_s, p_s = (np.ascontiguousarray(sel[d], dtype=np.int64) for d in LABEL_DIMS)
    # the source gives each job's arrays cut to the selected coordinates, in the selection's order
    la, lg, ln, li, lw, lp = (np.arange(len(sel[d]), dtype=np.int64) for d in LABEL_DIMS)
    shape = tuple(len(sel[d]) for d in ("gpu", "n_gpu", "precision", "arch", "intra", "network"))

    one_pass = not pareto and not per_design and top <= 256  # the k best kept in order (small k)
    # no numba to load: every scan selects with it, but only a scan large enough for the JIT
    # kernel builds it where it is missing (a small one selects with numpy rather than wait)
    ahead = _precompiled_scan(build=compiled) if one_pass else None
    jit: list = []  # the future of the JIT kernel, where it serves
    if one_pass and (compiled or ahead is not None):
        ignores = [ARCH_IGNORES.get(str(name), ()) for name in arch_names]
        ignores_intra = np.array(["intra" in ign for ign in ignores], dtype=np.bool_)
        ignores_network = np.array(["network" in ign for ign in ignores], dtype=np.bool_)
        k = min(top, math.prod(shape))
        if ahead is None:
            jit.append(_scan_kernel())  # loading while the first chunks are read and decoded
    else:
        one_pass = False

    def kernel(raw_step):  # the precompiled kernel takes C-contiguous float32 step times only
        if ahead is not None and raw_step.dtype == np.float32 and raw_step.flags.c_contiguous:
            return ahead
        if not jit:
            jit.append(_scan_kernel())
        return jit[0].result()

    def configurations(cand, raw_code):
        gi, ni, pi, ai, ii, wi = np.unravel_index(cand, shape)
        cfg = {"g": g_s[gi], "n": n_s[ni], "p": p_s[pi], "a": a_s[ai], "i": i_s[ii], "w": w_s[wi]}
        return cfg, raw_code[la[ai], lg[gi], ln[ni], li[ii], lw[wi], lp[pi]]

    def select_in_one_pass(raw_step, raw_code, fits, pos):
        factor, divide = step_factor(
            by, n_values[pos][n_s][None, :], samples[pos], price[g_s][:, None], power[g_s][:, None]
        )
        factor = np.ascontiguousarray(np.broadcast_to(factor, (len(g_s), len(n_s))), dtype=np.float64)
        cand, step = np.empty(k, dtype=np.int64), np.empty(k, dtype=np.float64)
        count = kernel(raw_step)(
            raw_step, fits, la, lg, ln, li, lw, lp, ignores_intra, ignores_network, factor, divide, k, cand, step
        )
        cfg, code = configurations(cand[:count], raw_code)
        return step[:count], code, cfg

    def select_with_numpy(raw_step, raw_code, fits, pos):
        # per design, an architecture that ignores the network is a candidate of every network
        step = distinct_configurations(raw_step, fits[np.ix_(lg, lp)], arch_names, dedupe=not per_design)
        grid = (slice(None), *(None,) * 5)  # a per-gpu value over (gpu, n_gpu, precision, arch, intra, network)
        n = n_values[pos][n_s][None, :, None, None, None, None]
        prices, powers = price[g_s][grid], power[g_s][grid]
        if pareto:
            time, cost, metric = time_cost_and_metric(by, step, n, samples[pos], prices, powers)
        else:  # the metric alone: a shortlist by it needs neither of the others
            time = cost = metric = per_sample(by, step, n, samples[pos], prices, powers)
        if per_design:  # the grid is (gpu, n_gpu, precision, arch, intra, network)
            cand = best_per_group(metric, (0, 1, 4, 5))
            cand = cand if cand.size else np.zeros(1, dtype=np.intp)
        else:
            cand = shortlist(time, metric, cost, top, pareto)
        cfg, code = configurations(cand, raw_code)
        return step.reshape(-1)[cand], code, cfg

    select_job = select_in_one_pass if one_pass else select_with_numpy

    def select(arrays, j, pos, position):
        raw_step, raw_code = arrays
        return (*select_job(raw_step, raw_code, fits_all[j], pos), (raw_step, position))

    # the bottleneck codes of the few rows chosen only (a per-design answer has a row per design)
    return cube.source.scan(("step_time", "bottleneck"), sel, job_rows, select, () if per_design else ("bottleneck",))


def _precompiled_scan(build: bool):
    """The selection kernel compiled ahead of time (``paigrid.precompiled``: no numba to import,
    the same machine code as ``kernels.scan.top_configurations``), with ``build`` built where it
    is missing (once per kernel sources, 10-20 s on the 2-core box); None where there is none
    (not built, outside a command, which sets the cache folder; ``PAIGRID_PRECOMPILED=0``; a
    failed build)."""
    from paigrid import precompiled

    module = precompiled.load(build=build)
    return None if module is None else module.top_configurations


def _scan_kernel():
    """A future of the compiled selection kernel (``kernels.scan.top_configurations``): numba
    imported and the cached machine code loaded in a thread of its own (the first call, on a
    tiny job, with the argument types of the scan's calls), while the scan's first chunks are
    read and decompressed (about a second of a command's start on a loaded machine)."""
    from concurrent.futures import ThreadPoolExecutor

    def load():
        from paigrid.kernels.scan import top_configurations

        one, index, flag = np.zeros(1, np.int64), np.zeros(1, np.int64), np.zeros(1, np.bool_)
        top_configurations(
            np.ones((1,) * 6, np.float32),
            np.ones((1, 1), np.uint8),
            *(index,) * 6,
            flag,
            flag,
            np.ones((1, 1)),
            True,
            1,
            one,
            np.empty(1),
        )
        return top_configurations

    pool = ThreadPoolExecutor(max_workers=1)
    try:
        return pool.submit(load)
    finally:
        pool.shutdown(wait=False)  # its thread ends once the kernel is loaded


def _row(cube: Cube, j, pos, k, step, code, cfg, n, meta, price) -> dict:
    labels = cube.labels
    feasible = not math.isnan(step[k])
    samples = meta["samples_per_step"][pos]
    throughput = n[k] * samples / step[k] if feasible else float("nan")
    row = {"job": labels["job"][j], "model": meta["model"][pos]}
    for dim, key in (("arch", "a"), ("intra", "i"), ("network", "w"), ("gpu", "g"), ("precision", "p")):
        row[dim] = labels[dim][cfg[key][k]] if feasible else None
    for dim in ARCH_IGNORES.get(row["arch"], ()):
        row[dim] = ANY
    row["n_gpu"] = int(n[k]) if feasible else None
    row.update(
        step_time=float(step[k]),
        throughput=float(throughput),
        throughput_tokens=float(throughput * meta["tokens_per_sample"][pos]),
        cost=float(per_sample("cost", step[k], n[k], samples, price[cfg["g"][k]], None)),
        bottleneck=L.BOTTLENECK_NAMES[code[k]] if feasible and code[k] < len(L.BOTTLENECK_NAMES) else None,
        speedup=float(throughput / meta["current_throughput"][pos]) if feasible else float("nan"),
    )
    return row
