"""Queries on a cube file: the best configuration of each job, by time per sample or by cost.

The stored per-job reductions (best arch x intra x network for each gpu x n_gpu x precision)
answer most queries by reading kilobytes.  A filter on arch, intra or network, or ``top`` > 1,
needs the cube itself, which is then scanned chunk by chunk: only the chunks that hold a
selected configuration (the chunk shape is the file's own), decompressed in parallel threads,
and each job's few candidate rows selected in one pass (``paigrid.kernels.scan``), so a scan
costs little more than decompressing the chunks it needs.

Ordering is the same on both paths, so they agree exactly: configurations are compared by
time per sample (``step_time / (n_gpu x samples_per_step)``, i.e. the inverse throughput) or by
cost, and ties go to the first in (gpu, n_gpu, precision, arch, intra, network) order.
"""

from __future__ import annotations

import math

import numpy as np

from paigrid.cube import Cube
from paigrid.errors import PaigridError
from paigrid.kernels import layout as L
from paigrid.schema import (
    ANY,
    ARCH_IGNORES,
    LABEL_DIMS,
    REDUCED_DIMS,
    cube_model,
    decode_best,
    decode_strings,
    first_of_equivalents,
    str_attr,
)


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
) -> list[dict]:
    """The ``top`` best configurations of each job under the filters, as result rows; with
    ``pareto``, every configuration on the job's Pareto front of time per sample and cost per
    sample instead (fastest first; none is both slower and dearer than another).

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
    where = where or {}
    job_rows = job_indices(cube, jobs)
    needs_cube = top > 1 or any(dim in where for dim in REDUCED_DIMS)
    if needs_cube and cube.mode == "reduce-only":
        raise PaigridError(
            f"{cube.path} holds only the per-job reductions (reduce-only sweep): it can answer "
            "--top 1 with filters on gpu, n_gpu and precision only."
        )
    sel = {dim: np.asarray(where.get(dim, range(len(cube.labels[dim]))), dtype=np.intp) for dim in LABEL_DIMS}
    meta = _job_metadata(cube, job_rows)
    price = cube.file["price"][:]
    # energy per sample ranks as cost does, with board power [W] in place of the price [USD/GPU-hour]
    rank_price = price if by != "energy" else cube.file["power"][:] * 3600.0 / 1e6
    n_values = _n_values(cube, job_rows)
    if needs_cube:
        candidates = _scan(
            cube,
            job_rows,
            sel,
            meta["samples_per_step"],
            n_values,
            rank_price,
            "cost" if by == "energy" else by,
            top,
            pareto,
        )
    else:
        candidates = ((*found, None) for found in _reduced_jobs(cube, job_rows, sel))
    rows = []
    for pos, (j, (step, code, cfg, job_step)) in enumerate(zip(job_rows, candidates)):
        n = n_values[pos][cfg["n"]]
        samples = meta["samples_per_step"][pos]
        time_per_sample = step / (n * samples)
        cost_per_sample = price[cfg["g"]] / 3600.0 * 1e6 / samples * step
        if pareto:
            order = pareto_front(time_per_sample, cost_per_sample) or [0]
        else:
            metric = time_per_sample if by == "time" else rank_price[cfg["g"]] / 3600.0 * 1e6 / samples * step
            order = np.argsort(np.where(np.isnan(metric), np.inf, metric), kind="stable")[:top]
            order = [k for rank, k in enumerate(order) if rank == 0 or not math.isnan(metric[k])]
        for k in order:
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
    with the position of each coordinate in it (``_ChunkReader.position``); None: read from the
    file."""
    from paigrid.inputs.efficiency import band_group, prediction_band

    if math.isnan(step[k]):
        return float("nan"), float("nan")
    g, ni, p = cfg["g"][k], cfg["n"][k], cfg["p"][k]
    if "prediction_band" in meta:  # stored from format 3 on
        band = float(meta["prediction_band"][pos, ni])
    else:
        calibrated = str_attr(cube.file.attrs, "calibration_sha256") not in ("", "null", "None")
        band = prediction_band(cube_model(cube.file.attrs), calibrated, band_group(n[k], meta["gpus_per_node"][pos]))
    if math.isnan(band) or cube.mode == "reduce-only" or pareto:
        return band, float("nan")
    if job_step is None:  # only the chunks of this gpu, n_gpu and precision
        block = np.asarray(cube.file["step_time"][j, :, g, ni, :, :, p])[
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
    distinct = first_of_equivalents(block, arch_names)
    within = np.sum(distinct <= step[k] * (1.0 + band))
    return band, float(max(int(within) - 1, 0))


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


def _job_metadata(cube: Cube, job_rows: np.ndarray) -> dict[str, np.ndarray]:
    """Per-job variables the rows need, read once (whole 1-D variables, then the selected jobs)."""
    f = cube.file
    meta = {name: f[name][:][job_rows] for name in ("samples_per_step", "tokens_per_sample")}
    meta["gpus_per_node"] = f["gpus_per_node"][:][job_rows] if "gpus_per_node" in f else np.full(len(job_rows), 8.0)
    meta["model"] = np.array(decode_strings(f["model"][:]), dtype=object)[job_rows]
    if "prediction_band" in f:  # (job, n_gpu): read once, not per result row
        meta["prediction_band"] = f["prediction_band"][:][job_rows]
    meta["current_throughput"] = (
        f["current_throughput"][:][job_rows] if "current_throughput" in f else np.full(len(job_rows), np.nan)
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
        return cube.file["current_n_gpu"][:][job_rows].astype(np.float64)[:, None]
    return np.tile(labels, (len(job_rows), 1))


def _reduced_jobs(cube: Cube, job_rows: np.ndarray, sel: dict[str, np.ndarray]):
    """Candidates of each job from the stored reductions: one per (gpu, n_gpu, precision).

    The reductions are small (kilobytes per job), so they are read for all jobs at once.
    """
    g, n, p = (sel[d] for d in ("gpu", "n_gpu", "precision"))
    f = cube.file
    every = len(job_rows) > 64
    arrays = [f[name][:] if every else None for name in ("best_step_time", "best_index", "best_bottleneck")]
    gg, nn, pp = (x.reshape(-1) for x in np.meshgrid(g, n, p, indexing="ij"))
    n_i, n_w = len(cube.labels["intra"]), len(cube.labels["network"])
    for j in job_rows:
        step, flat, code = (
            (a[j] if every else f[name][j])[np.ix_(g, n, p)].reshape(-1)
            for a, name in zip(arrays, ("best_step_time", "best_index", "best_bottleneck"))
        )
        a, i, w = decode_best(flat, n_i, n_w)
        yield step, code, {"g": gg, "n": nn, "p": pp, "a": a, "i": i, "w": w}


SCAN_KERNEL_CELLS = 30_000_000
"""From this many selected cells (jobs x configurations) on, a scan selects with the compiled
kernel; below, with numpy alone, since loading numba and its cached kernel (about 0.6 s) would
cost more than it saves.  Either way the chunks are read as ``_ChunkReader`` says (decoded in
parallel threads, their checksums checked with numpy, ``codecs.fletcher32_numpy``, so decoding
loads no numba)."""


def _scan(
    cube: Cube,
    job_rows: np.ndarray,
    sel: dict[str, np.ndarray],
    samples: np.ndarray,
    n_values: np.ndarray,
    price: np.ndarray,
    by: str,
    top: int,
    pareto: bool,
):
    """Candidates of each job in ``job_rows`` from the cube itself, in ``job_rows`` order: for
    each job (step [s], bottleneck code, configuration indices, and the job's step_time [s] over
    the selected coordinates with each coordinate's position in it).

    The cube is read by runs of the jobs that share chunks, each run only in the chunks that hold
    a selected configuration (``_ChunkReader``): the main thread reads the chunks' stored bytes
    and a pool of threads decompresses them and selects, vectorised, the few
    configurations that can be rows (the ``top`` first by (metric, position) with ties kept in
    (gpu, n_gpu, precision, arch, intra, network) order, or for ``pareto`` every one with a time
    and a cost), in that order, so ``best_configurations`` ranks them exactly as it would rank
    every configuration of the job.  ``samples`` [samples/step] and ``n_values`` [GPUs] are per
    position in ``job_rows``; ``price`` [USD/GPU-hour] per gpu.
    """
    import os
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor

    cells = len(job_rows) * math.prod(len(sel[d]) for d in LABEL_DIMS)
    compiled = cells >= SCAN_KERNEL_CELLS
    # only the chunks the filters touch, cut to the selected coordinates ("local" indices)
    reader = _ChunkReader(cube, ("step_time", "bottleneck"), sel)
    local = reader.local
    fits_all = np.ascontiguousarray(
        cube.file["fits_memory"][:][:, sel["gpu"]][:, :, sel["precision"]], dtype=np.uint8
    )  # (job, selected gpu, selected precision): kB
    arch_names = [cube.labels["arch"][a] for a in sel["arch"]]
    full = {d: np.array_equal(local[d], np.arange(reader.shape[k])) for k, d in enumerate(LABEL_DIMS)}
    a_s, g_s, n_s, i_s, w_s, p_s = (np.ascontiguousarray(sel[d], dtype=np.int64) for d in LABEL_DIMS)
    la, lg, ln, li, lw, lp = (np.ascontiguousarray(local[d], dtype=np.int64) for d in LABEL_DIMS)

    kernel = None
    if compiled and not pareto and top <= 256:  # one pass, the k best kept in order (small k)
        from paigrid.kernels.scan import top_configurations as kernel

        ignores = [ARCH_IGNORES.get(str(name), ()) for name in arch_names]
        ignores_intra = np.array(["intra" in ign for ign in ignores], dtype=np.bool_)
        ignores_network = np.array(["network" in ign for ign in ignores], dtype=np.bool_)
        shape = tuple(len(sel[d]) for d in ("gpu", "n_gpu", "precision", "arch", "intra", "network"))
        k = min(top, math.prod(shape))

    def select_in_one_pass(raw_step, raw_code, fits, pos):
        if by == "time":
            factor = np.broadcast_to((n_values[pos][n_s] * samples[pos])[None, :], (len(g_s), len(n_s)))
        else:
            factor = np.broadcast_to((price[g_s] / 3600.0 * 1e6 / samples[pos])[:, None], (len(g_s), len(n_s)))
        cand, step = np.empty(k, dtype=np.int64), np.empty(k, dtype=np.float64)
        count = kernel(
            raw_step,
            fits,
            la,
            lg,
            ln,
            li,
            lw,
            lp,
            ignores_intra,
            ignores_network,
            np.ascontiguousarray(factor, dtype=np.float64),
            by == "time",
            k,
            cand,
            step,
        )
        gi, ni, pi, ai, ii, wi = np.unravel_index(cand[:count], shape)
        cfg = {"g": g_s[gi], "n": n_s[ni], "p": p_s[pi], "a": a_s[ai], "i": i_s[ii], "w": w_s[wi]}
        code = raw_code[la[ai], lg[gi], ln[ni], li[ii], lw[wi], lp[pi]]
        return step[:count], code, cfg, (raw_step, reader.position)

    def select(raw_step, raw_code, fits, pos):
        if kernel is not None:
            return select_in_one_pass(raw_step, raw_code, fits, pos)
        sub = raw_step
        for axis, dim in enumerate(LABEL_DIMS):
            if not full[dim]:
                sub = np.take(sub, local[dim], axis=axis)
        ok = fits[np.ix_(lg, lp)] == 1
        sub = np.where(ok[None, :, None, None, None, :], sub, np.float32(np.nan))
        # to (gpu, n_gpu, precision, arch, intra, network) order, each distinct configuration once
        step = first_of_equivalents(sub.transpose(1, 2, 5, 0, 3, 4), arch_names)
        shape = step.shape
        time = step / (n_values[pos][n_s] * samples[pos])[None, :, None, None, None, None]
        cost = (price[g_s] / 3600.0 * 1e6 / samples[pos])[:, None, None, None, None, None] * step
        if pareto:
            cand = np.flatnonzero(~(np.isnan(time) | np.isnan(cost)))
            if cand.size == 0:
                cand = np.zeros(1, dtype=np.intp)
        else:
            metric = (time if by == "time" else cost).reshape(-1)
            key = np.where(np.isnan(metric), np.inf, metric)
            k = min(top, key.size)
            kth = np.partition(key, k - 1)[k - 1]
            below = np.flatnonzero(key < kth)
            cand = np.union1d(below, np.flatnonzero(key == kth)[: k - below.size])
        gi, ni, pi, ai, ii, wi = np.unravel_index(cand, shape)
        cfg = {"g": g_s[gi], "n": n_s[ni], "p": p_s[pi], "a": a_s[ai], "i": i_s[ii], "w": w_s[wi]}
        code = raw_code[la[ai], lg[gi], ln[ni], li[ii], lw[wi], lp[pi]]
        return step.reshape(-1)[cand], code, cfg, (raw_step, reader.position)

    def work(start, members, stored):
        step_chunk, code_chunk = reader.decode(start, stored)
        return [select(step_chunk[j - start], code_chunk[j - start], fits_all[j], pos) for pos, j in members]

    tasks: list[tuple[int, list]] = []  # runs of consecutive jobs in one chunk
    for pos, j in enumerate(int(j) for j in job_rows):
        start = j - j % reader.rows
        if tasks and tasks[-1][0] == start:
            tasks[-1][1].append((pos, j))
        else:
            tasks.append((start, [(pos, j)]))
    threads = max(
        1, min(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1, len(tasks))
    )
    with ThreadPoolExecutor(threads) as pool:
        pending: deque = deque()
        queued = iter(tasks)
        for start, members in queued:
            pending.append(pool.submit(work, start, members, reader.raw(start)))
            if len(pending) >= 2 * threads:
                break
        while pending:
            done = pending.popleft().result()
            for start, members in queued:
                pending.append(pool.submit(work, start, members, reader.raw(start)))
                break
            yield from done


class _ChunkReader:
    """Chunks of cube variables over job ranges, restricted to the chunks that a selection of
    the other dimensions touches (the chunk shape is the dataset's own, whatever it is: any
    dimension may be split).  ``decode`` gives an array over a row of jobs (one chunk's jobs)
    and the selected coordinates, in the selection's order (``coords[dim]``; ``local[dim]``:
    their positions in the array, ``position[dim]``: each coordinate's, -1 where not selected).
    Where a row's selection is one chunk, its stored bytes are read by h5py in the calling thread
    (``raw``) and decompressed and checked by ``decode`` in any thread, without the GIL; a row of
    several chunks is read by h5py in one call when the selected coordinates run in steps of one
    (their box: exactly those chunks), else chunk by chunk (``pieces``).

    A variable chunked otherwise than the first, an xarray Dataset, unknown filters, or a chunk
    that fails to decode are read through h5py (or xarray) instead, the same chunks, so a damaged
    chunk fails as HDF5 reports it; so is every chunk without ``parallel``."""

    FILTERS = {
        "lz4": {"32001", "fletcher32"},
        "zstd": {"32001", "fletcher32"},
        "gzip": {"gzip", "shuffle", "fletcher32"},
        "none": {"fletcher32"},
    }

    def __init__(self, cube: Cube, names, sel: dict[str, np.ndarray] | None = None, parallel: bool = True):
        import itertools

        from paigrid.codecs import chunk_decoder

        self.datasets = [cube.file[name] for name in names]
        first = self.datasets[0]
        shape = tuple(len(cube.labels[dim]) for dim in ("job", *LABEL_DIMS))
        stored = getattr(first, "chunks", None)
        self.chunks = tuple(stored) if stored else (1, *shape[1:])  # no stored chunks: read per job
        self.rows = self.chunks[0]
        self.jobs = shape[0]
        sel = sel or {}
        self.coords, self.local, self.position, runs = {}, {}, {}, []
        for dim, n, c in zip(LABEL_DIMS, shape[1:], self.chunks[1:]):
            wanted = np.asarray(sel.get(dim, np.arange(n)), dtype=np.intp)
            self.coords[dim], self.local[dim] = wanted, np.arange(len(wanted))
            self.position[dim] = np.full(n, -1, np.intp)
            self.position[dim][wanted[::-1]] = np.arange(len(wanted))[::-1]  # the first place of each
            runs.append(
                [
                    (s0, *_cut(np.flatnonzero((wanted >= s0) & (wanted < s0 + c)), wanted, s0))
                    for s0 in sorted({int(k) // c * c for k in wanted})
                ]
            )
        self.shape = tuple(len(self.coords[dim]) for dim in LABEL_DIMS)
        # each chunk to read: its corner (after the job), where its cells go and which they are
        self.pieces = [
            (tuple(r[0] for r in combo), tuple(r[1] for r in combo), tuple(r[2] for r in combo))
            for combo in itertools.product(*runs)
        ]
        # the selection as one box, when each dimension's coordinates run in steps of one (the box
        # then holds exactly the chunks that hold them)
        stepwise = all(len(v) and np.all(np.diff(v) == 1) for v in self.coords.values())
        self.box = tuple(slice(int(v[0]), int(v[-1]) + 1) for v in self.coords.values()) if stepwise else None
        self.whole = (
            len(self.pieces) == 1
            and self.shape == tuple(self.chunks[1:])
            and all(isinstance(part, slice) and part.start == 0 for part in self.pieces[0][2])
        )
        compression = str_attr(cube.file.attrs, "compression") if "compression" in cube.file.attrs else ""
        chunks = [getattr(d, "chunks", None) for d in self.datasets]
        self.decoders = None
        try:
            # a row of several chunks: h5py reads them in one call (in C), faster than decoding
            # them one by one here (measured on chunks of 2 GPUs: a --top 3 scan 10% slower)
            if (
                parallel
                and len(self.pieces) == 1
                and all(
                    c is not None
                    and tuple(c) == self.chunks
                    and set(d._filters) == self.FILTERS.get(compression)
                    and hasattr(d, "id")
                    for c, d in zip(chunks, self.datasets)
                )
            ):
                self.decoders = [chunk_decoder(compression, d.dtype, c) for c, d in zip(chunks, self.datasets)]
        except (AttributeError, TypeError, ValueError, PaigridError):
            self.decoders = None

    def raw(self, start: int):
        """The stored bytes of each variable's chunks from job ``start`` (a list per variable, in
        ``pieces`` order; None: read through h5py)."""
        if self.decoders is None:
            return None
        stored = []
        for d in self.datasets:
            pieces = []
            for corner, _, _ in self.pieces:
                try:
                    mask, data = d.id.read_direct_chunk((start, *corner))
                except (OSError, RuntimeError, ValueError, KeyError):
                    return None
                if mask:
                    return None
                pieces.append(data)
            stored.append(pieces)
        return stored

    def decode(self, start: int, stored) -> list[np.ndarray]:
        """Each variable over the jobs ``start`` to ``start + rows`` (fewer at the end) and the
        selected coordinates."""
        stop = min(start + self.rows, self.jobs)
        if stored is not None and self.decoders is not None:
            try:
                return [
                    self._assemble(
                        stop - start, [decode(piece) for piece in (data if isinstance(data, list) else [data])]
                    )
                    for decode, data in zip(self.decoders, stored)
                ]
            except (OSError, RuntimeError, ValueError):
                pass  # h5py reads it again below, and fails as HDF5 does if it is damaged
        if self.box is not None:  # runs of coordinates: one read, of exactly the chunks needed
            return [np.asarray(d[(slice(start, stop), *self.box)]) for d in self.datasets]
        regions = [
            (slice(start, stop), *(slice(c0, c0 + c) for c0, c in zip(corner, self.chunks[1:])))
            for corner, _, _ in self.pieces
        ]
        return [self._assemble(stop - start, [np.asarray(d[region]) for region in regions]) for d in self.datasets]

    def _assemble(self, n: int, parts: list[np.ndarray]) -> np.ndarray:
        """The array of ``n`` jobs over the selected coordinates from its chunks, in ``pieces``
        order (chunks read through h5py end at the dataset's edges)."""
        if len(parts) != len(self.pieces):
            raise ValueError("a chunk is missing")
        if self.whole:
            return parts[0][:n]
        out = np.empty((n, *self.shape), parts[0].dtype)
        for (_, place, cells), data in zip(self.pieces, parts):
            if all(isinstance(k, slice) for k in (*place, *cells)):
                out[(slice(None), *place)] = data[(slice(0, n), *cells)]
            else:
                rows = np.arange(n)
                out[np.ix_(rows, *map(_indices, place))] = data[np.ix_(rows, *map(_indices, cells))]
        return out


def _cut(members: np.ndarray, wanted: np.ndarray, s0: int) -> tuple:
    """Where the selected coordinates ``wanted[members]`` (those in the chunk from ``s0``) go in
    the selection's order, and which cells of the chunk they are: slices when both run in steps
    of one, else index arrays."""
    place, cells = members, wanted[members] - s0
    if len(place) and np.all(np.diff(place) == 1) and np.all(np.diff(cells) == 1):
        return slice(int(place[0]), int(place[-1]) + 1), slice(int(cells[0]), int(cells[-1]) + 1)
    return place, cells


def _indices(part) -> np.ndarray:
    """A slice or an index array as an index array."""
    return np.arange(part.start, part.stop) if isinstance(part, slice) else np.asarray(part)


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
        cost=float(price[cfg["g"][k]] / 3600.0 * 1e6 / samples * step[k]),
        bottleneck=L.BOTTLENECK_NAMES[code[k]] if feasible and code[k] < len(L.BOTTLENECK_NAMES) else None,
        speedup=float(throughput / meta["current_throughput"][pos]) if feasible else float("nan"),
    )
    return row
