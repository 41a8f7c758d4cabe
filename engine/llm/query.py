"""The LLM family's queries: the best layouts of a cube's LLM jobs (the array core of best / top
/ Pareto over the group ``llm``, from its bests or from the chunks of its cells), one query over
every family of a cube, and the LLM files of ``paigrid llm sweep`` (h5py, read-only); time, cost
and energy to train a stated number of tokens."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np

from paigrid.errors import PaigridError
from paigrid.kernels.llm_columns import LAYOUT_DEGREES, RECOMPUTE_NAMES
from paigrid.schema import LABEL_DIMS, LLM_DIMS

#: the dimensions of an LLM file of ``paigrid llm sweep`` (before the one cube)
DIMS = ("model", "n_gpu", "gpu", "domain", "network")
LAYOUT_FIELDS = LAYOUT_DEGREES
VALUE_FIELDS = (
    "step_time",
    "tokens_per_s",
    "mfu",
    "model_tflops_per_gpu",
    "memory_per_gpu",
    "cost_per_step",
    "energy_per_step",
    "bubble",
    "tp_comm",
    "dp_comm_exposed",
)
RECOMPUTE = RECOMPUTE_NAMES
PER = ("n_gpu", "network", "design")
BY = {"time": "step_time", "cost": "cost_per_step", "energy": "energy_per_step"}


def _open(path: str | Path):
    import h5py

    from paigrid.files import input_problem, os_reason

    problem = input_problem(path)
    if problem:
        raise PaigridError(f"cannot read {path}: {problem}.")
    try:
        f = h5py.File(path, "r")
    except OSError as exc:
        reason = "not an HDF5 file" if "signature" in str(exc) else os_reason(exc)
        raise PaigridError(f"cannot read {path}: {reason}.") from None
    if f.attrs.get("kind") != "paigrid-llm-best" and not ("llm" in f and "block_done" in f["llm"]):
        f.close()
        raise PaigridError(f"{path} is not an LLM sweep file (paigrid llm sweep writes them) nor a cube with LLM jobs.")
    return f


def _legacy_view(f, path, model: str):
    """(labels, per-field arrays over (n_gpu, gpu, domain, network), layouts per reason, reason
    names, tokens per step) of ``model`` in an LLM file of ``paigrid llm sweep`` or in the group
    ``llm`` of a cube (its bests, at its one precision), so ``query_best`` reads either."""
    if f.attrs.get("kind") == "paigrid-llm-best":
        labels = {d: _labels(f, d) for d in DIMS}
        mi = _model_index(labels, path, model)
        data = {name: f[name][mi] for name in (*VALUE_FIELDS, *LAYOUT_FIELDS)}
        return (
            labels,
            data,
            f["layouts_by_reason"][mi],
            _labels(f, "reason"),
            float(f["global_batch"][mi]) * float(f["seq_len"][mi]),
        )
    from paigrid.cube import open_llm

    llm = open_llm(path)  # the checks of a cube: finished, not newer than this reader
    llm.close()
    g = f["llm"]
    labels = {"model": _labels(g, "job"), **{d: _labels(g, d) for d in DIMS[1:]}}
    mi = _model_index(labels, path, model)
    if len(g["precision"]) != 1:
        raise PaigridError(f"{path} holds several precisions; paigrid query answers it (with --where precision=...).")
    best = {name: np.asarray(g[f"best_{name}"][mi][..., 0]).transpose(1, 0, 2, 3) for name in VALUE_FIELDS}
    pick = np.asarray(g["best_layout"][mi][..., 0]).transpose(1, 0, 2, 3)
    none = pick < 0
    at = np.where(none, 0, pick)
    degrees = {}
    for name in ("tp", "pp", "cp", "ep", "vpp", "micro_batch", "zero", "sp"):
        degrees[name] = np.where(none, np.nan, np.asarray(g[name][:], dtype=np.float64)[at])
    codes = np.array([RECOMPUTE.index(v.decode() if isinstance(v, bytes) else v) for v in g["recompute"][:]], float)
    degrees["recompute"] = np.where(none, np.nan, codes[at])
    n = np.asarray(labels["n_gpu"], dtype=np.float64)[:, None, None, None]
    degrees["dp"] = n / (degrees["tp"] * degrees["pp"] * degrees["cp"])
    by_reason = np.asarray(g["layouts_by_reason"][mi][..., 0, :]).transpose(1, 0, 2, 3, 4).copy()
    from paigrid.llm.parallelism import REASON_N_GPU

    by_reason[..., REASON_N_GPU] = 0  # labels of other GPU counts: not a reason of this one
    return (
        labels,
        {**best, **degrees},
        by_reason,
        _labels(g, "reason"),
        float(g["global_batch"][mi]) * float(g["seq_len"][mi]),
    )


def _model_index(labels: dict, path, model: str) -> int:
    names = [str(m).casefold() for m in labels["model"]]
    if model.casefold() not in names:
        raise PaigridError(f"{path} has no model {model!r}; it has {', '.join(labels['model'])}.")
    return names.index(model.casefold())


def _labels(f, dim: str) -> list:
    values = f[dim][()]
    return [v.decode() if isinstance(v, bytes) else (int(v) if dim in ("n_gpu", "domain") else v) for v in values]


def query_best(
    path: str | Path,
    model: str,
    n_gpu: list[int] | None = None,
    where: dict[str, list] | None = None,
    by: str = "time",
    per: str = "n_gpu",
    tokens: float | None = None,
) -> list[dict]:
    """The best design and layout of ``model`` for each GPU count (``per="n_gpu"``), for each
    (GPU count, network) (``per="network"``: the best GPU, domain and layout on each network)
    or for each (GPU count, gpu, domain, network) (``per="design"``), ranked ``by`` time, cost or energy
    per step; ``where`` restricts gpu/domain/network.  Each row: the labels, the layout
    (``layout`` text and degrees), the result values, ``cost_per_hour`` [USD/h] and, for
    ``tokens`` [tokens], ``train_days``, ``train_cost`` [USD] and ``train_energy_MWh``."""
    if by not in BY:
        raise PaigridError(f"--by must be one of {', '.join(BY)}, not {by!r}.")
    if per not in PER:
        raise PaigridError(f"--per must be one of {', '.join(PER)}, not {per!r}.")
    with _open(path) as f:
        labels, data, by_reason, reason_names, batch_tokens = _legacy_view(f, path, model)
    keep = {d: list(range(len(labels[d]))) for d in DIMS[1:]}
    if n_gpu:
        missing = [n for n in n_gpu if n not in labels["n_gpu"]]
        if missing:
            raise PaigridError(f"the sweep has no n_gpu {missing[0]}; it has {', '.join(map(str, labels['n_gpu']))}.")
        keep["n_gpu"] = [labels["n_gpu"].index(n) for n in n_gpu]
    for dim, wanted in (where or {}).items():
        folded = [str(v).casefold() for v in labels[dim]]
        for w in wanted:
            if str(w).casefold() not in folded:
                raise PaigridError(f"the sweep has no {dim} {w!r}; it has {', '.join(map(str, labels[dim]))}.")
        keep[dim] = [i for i in keep[dim] if folded[i] in {str(w).casefold() for w in wanted}]
    score = data[BY[by]]
    rows = []
    for ni in keep["n_gpu"]:
        cells = [(ni, g, d, w) for g in keep["gpu"] for d in keep["domain"] for w in keep["network"]]
        groups = [[c for c in cells if c[3] == w] for w in keep["network"]] if per == "network" else [cells]
        for group in groups:
            if not any(np.isfinite(score[c]) for c in group):
                counts = sum(by_reason[c] for c in group)
                counts[0] = 0
                row = {
                    "n_gpu": labels["n_gpu"][ni],
                    "layout": f"no valid layout (most often: {reason_names[int(np.argmax(counts))]})",
                }
                if per == "network":
                    row["network"] = labels["network"][group[0][3]]
                rows.append(row)
                continue
            finite = sorted((c for c in group if np.isfinite(score[c])), key=lambda c: score[c])
            for c in finite if per == "design" else finite[:1]:
                rows.append(_row(labels, data, c, batch_tokens, tokens))
    return rows


def _row(labels, data, c, batch_tokens: float, tokens: float | None) -> dict:
    ni, g, d, w = c
    n = labels["n_gpu"][ni]
    row = {"n_gpu": n, "gpu": labels["gpu"][g], "domain": labels["domain"][d], "network": labels["network"][w]}
    degrees = {k: int(data[k][c]) for k in LAYOUT_FIELDS}
    row["layout"] = (
        f"tp{degrees['tp']} pp{degrees['pp']} dp{degrees['dp']} cp{degrees['cp']} ep{degrees['ep']} "
        f"v{degrees['vpp']} mb{degrees['micro_batch']} zero{degrees['zero']} "
        f"{RECOMPUTE[degrees['recompute']]}{' sp' if degrees['sp'] else ''}"
    )
    row.update(degrees)
    row.update({k: float(data[k][c]) for k in VALUE_FIELDS})
    row["memory_per_gpu_GiB"] = row.pop("memory_per_gpu") / 2**30
    row["cost_per_hour"] = row["cost_per_step"] / row["step_time"] * 3600.0
    if tokens:
        row.update(
            train_totals(
                tokens, row["tokens_per_s"], row["cost_per_step"] / batch_tokens, row["energy_per_step"] / batch_tokens
            )
        )
    return row


def train_totals(tokens: float, tokens_per_s: float, usd_per_token: float, joules_per_token: float) -> dict:
    """Time, cost and energy to train ``tokens`` [tokens] at ``tokens_per_s`` [tokens/s],
    ``usd_per_token`` [USD/token] and ``joules_per_token`` [J/token]: ``train_days`` [days],
    ``train_cost`` [USD], ``train_energy_MWh`` [MWh] (the one place this arithmetic is written;
    the query, the LLM file's query and predict use it)."""
    return {
        "train_days": tokens / tokens_per_s / 86400.0,
        "train_cost": tokens * usd_per_token,
        "train_energy_MWh": tokens * joules_per_token / 3.6e9,
    }


# --- the LLM family of a cube (format 5): the array core of best / top / pareto --------------
#: the LLM group's dimensions a ``--where`` selects on (``layout`` labels carry no dp)
LLM_WHERE_DIMS = LLM_DIMS[1:]
#: the layout degrees a ``--where`` may filter on (each a coordinate variable over ``layout``)
LAYOUT_FILTERS = tuple(d for d in LAYOUT_DEGREES if d != "dp")
#: the parts of a step whose largest is the row's bottleneck
COMPONENTS = ("compute", "bubble", "tp_comm", "cp_comm_exposed", "ep_comm", "pp_comm", "dp_comm_exposed", "optimizer")
#: the stored result field each ``--by`` ranks (within one job the global batch is fixed, so
#: time, cost and energy per step rank as per sample and per token)
RANK_FIELDS = {"time": "step_time", "cost": "cost_per_step", "energy": "energy_per_step"}
ROW_FIELDS = ("step_time", "tokens_per_s", "mfu", "cost_per_step", "energy_per_step", "memory_per_gpu", *COMPONENTS)


class GroupSource:
    """The LLM group's variables as numpy arrays, from an h5py group or an xarray Dataset (the
    array core reads through this, so the command line and the accessor answer alike)."""

    def __init__(self, group):
        self.group = group

    def __contains__(self, name: str) -> bool:
        return name in (self.group.variables if hasattr(self.group, "variables") else self.group)

    def get(self, name: str, key=()) -> np.ndarray:
        """The variable ``name`` (indexed by ``key``) as a numpy array."""
        item = self.group[name]
        if hasattr(item, "values") and hasattr(item, "dims"):  # xarray
            return np.asarray(item.variable[key].values) if key != () else np.asarray(item.values)
        return np.asarray(item[key] if key != () else item[()])

    def strings(self, name: str) -> list[str]:
        """A string variable as str."""
        return [v.decode() if isinstance(v, bytes) else str(v) for v in self.get(name)]

    def cells(self, names: tuple[str, ...], j: int, sel: list[np.ndarray]) -> list[np.ndarray]:
        """The cell variables ``names`` of job ``j`` over the selected coordinates ``sel`` (index
        arrays along ``LLM_WHERE_DIMS``), each read only where it is stored: from a file, the
        chunks that hold a selected cell (``sources.ChunkReader``: a layout filter reads the
        chunks of those layouts, a gpu or n_gpu filter those of that gpu or GPU count); from a
        Dataset, the selected part through xarray."""
        if hasattr(self.group, "variables"):  # xarray: orthogonal indexing of the selection
            return [np.asarray(self.group.variables[name][(j, *sel)].values) for name in names]
        from types import SimpleNamespace

        from paigrid.sources import ChunkReader

        owner = SimpleNamespace(file=self.group.file)  # the root: its compression attribute, paths to the group
        paths = tuple(f"{self.group.name}/{name}" for name in names)
        reader = ChunkReader(owner, paths, dict(zip(LLM_WHERE_DIMS, sel)), dims=LLM_WHERE_DIMS)
        start = j - j % reader.rows
        return [values[j - start] for values in reader.decode(start, reader.raw(start))]


def llm_labels(source: GroupSource) -> dict[str, list]:
    """The group's labels along ``LLM_WHERE_DIMS`` and ``job``."""
    labels = {dim: source.strings(dim) for dim in ("job", "layout", "gpu", "network", "precision")}
    labels["n_gpu"] = [int(v) for v in source.get("n_gpu")]
    labels["domain"] = [int(v) for v in source.get("domain")]
    return labels


def llm_where(source: GroupSource, labels: dict, dim: str, values: list) -> list[int]:
    """Indices along ``dim`` (``LLM_WHERE_DIMS``; a ``LAYOUT_FILTERS`` degree gives ``layout``
    indices) of ``values``; a value not in the group is an error naming what it has."""
    if dim in LAYOUT_FILTERS:
        column = source.strings(dim) if dim == "recompute" else [int(v) for v in source.get(dim)]
        wanted = set()
        for v in values:
            text = str(v).strip().casefold()
            if dim == "recompute":
                wanted.add(text)
            elif dim == "sp" and text in ("true", "false", "sp", "nosp"):
                wanted.add(1 if text in ("true", "sp") else 0)
            else:
                try:
                    wanted.add(int(text))
                except ValueError:
                    raise PaigridError(f"{dim}={v} is not a whole number.") from None
        hits = [i for i, c in enumerate(column) if (str(c).casefold() if dim == "recompute" else c) in wanted]
        if not hits:
            shown = ", ".join(map(str, sorted(set(column), key=str)))
            raise PaigridError(
                f"{dim}={','.join(map(str, values))} is not in the cube's LLM layouts; its {dim} values are {shown}."
            )
        return hits
    out = []
    for v in values:
        if dim in ("n_gpu", "domain"):
            try:
                number = int(str(v).strip())
            except ValueError:
                raise PaigridError(f"{dim}={v!r} is not a whole number.") from None
            if number not in labels[dim]:
                raise PaigridError(
                    f"{dim}={number} is not in the cube's LLM family; its {dim} values are "
                    f"{', '.join(map(str, labels[dim]))}."
                )
            out.append(labels[dim].index(number))
            continue
        folded = [str(x).casefold() for x in labels[dim]]
        text = str(v).strip().casefold()
        if text not in folded and dim == "gpu":
            import contextlib

            from paigrid.inputs.catalog import load

            with contextlib.suppress(PaigridError):
                text = load("gpus").resolve(str(v).strip()).casefold()
        if text not in folded:
            raise PaigridError(
                f"{dim}={v} is not in the cube's LLM family; its {dim} values are {', '.join(map(str, labels[dim]))}."
            )
        out.append(folded.index(text))
    return sorted(set(out))


def llm_best(
    source: GroupSource,
    by: str = "time",
    where: dict[str, list[int]] | None = None,
    jobs: list[str] | None = None,
    top: int = 1,
    pareto: bool = False,
    mode: str = "full",
    per_design: bool = False,
) -> list[dict]:
    """The ``top`` best (layout, design) cells of each LLM job under ``where`` (indices along
    ``LLM_WHERE_DIMS``), ranked ``by`` time, cost or energy per step, or with ``pareto`` each
    job's front of time and cost per sample, or with ``per_design`` the best (layout,
    precision) of each cluster design (gpu, n_gpu, domain, network) that has a valid one; rows
    in the columns of ``FAMILY_COLUMNS``.  Without a layout filter and for one row per job (or
    design) the stored bests answer (within one design time, cost and energy are proportional,
    so the fastest layout is also the cheapest); otherwise the cells (``GroupSource.cells``: only
    the chunks the filters touch), which a reduce-only cube does not hold."""
    from paigrid.llm.parallelism import CUBE_REASON_NAMES, REASON_N_GPU, Layout, layout_label

    if by not in RANK_FIELDS:
        raise PaigridError(f"--by takes time, cost or energy, not {by!r}.")
    where = where or {}
    labels = llm_labels(source)
    needs_cells = top > 1 or "layout" in where
    if needs_cells and mode == "reduce-only":
        raise PaigridError(
            "the cube holds only the per-job bests of its LLM jobs (reduce-only sweep): it can answer "
            "--top 1 without layout filters only."
        )
    names = labels["job"]
    rows_of = range(len(names)) if not jobs else [names.index(j) for j in jobs if j in names]
    sel = [np.asarray(where.get(d, range(len(labels[d]))), dtype=np.intp) for d in LLM_WHERE_DIMS]
    degrees = {d: (source.strings(d) if d == "recompute" else [int(v) for v in source.get(d)]) for d in LAYOUT_FILTERS}
    meta = {name: source.get(name) for name in ("global_batch", "seq_len", "price", "power")}
    intra = source.strings("intra")
    out = []
    for j in rows_of:
        if needs_cells or pareto and "layout" in where:
            names_read = tuple(dict.fromkeys(("step_time", RANK_FIELDS[by], "cost_per_step")))
            read = dict(zip(names_read, source.cells(names_read, j, sel)))
            step, rank, cost = read["step_time"], read[RANK_FIELDS[by]], read["cost_per_step"]
            layout_of = None
        else:
            step = source.get("best_step_time", (j,))[np.ix_(*sel[1:])][None]
            rank = step if by == "time" else source.get(f"best_{RANK_FIELDS[by]}", (j,))[np.ix_(*sel[1:])][None]
            cost = source.get("best_cost_per_step", (j,))[np.ix_(*sel[1:])][None]
            layout_of = source.get("best_layout", (j,))[np.ix_(*sel[1:])][None]
        rank = np.asarray(rank, dtype=np.float64)
        if per_design:  # (layout, gpu, n_gpu, domain, network, precision): a design is axes 1 to 4
            from paigrid.ranking import best_per_group

            flat = [int(k) for k in best_per_group(rank, (1, 2, 3, 4))]
        elif pareto:
            from paigrid.ranking import pareto_front

            flat = pareto_front(np.asarray(step, np.float64).reshape(-1), np.asarray(cost, np.float64).reshape(-1))
        else:
            key = np.where(np.isnan(rank), np.inf, rank).reshape(-1)
            flat = [int(k) for k in np.argsort(key, kind="stable")[:top] if np.isfinite(key[k])]
        if not flat:
            counts = source.get("layouts_by_reason", (j,))[np.ix_(*sel[1:])].reshape(-1, len(CUBE_REASON_NAMES))
            counts = counts.sum(axis=0)
            counts[0] = 0
            counts[REASON_N_GPU] = 0  # labels of other GPU counts say nothing about this one
            out.append(_empty_row(names[j], CUBE_REASON_NAMES[int(np.argmax(counts))] if counts.any() else None))
            continue
        for k in flat:
            idx = np.unravel_index(k, step.shape)
            cell = tuple(int(sel[a + 1][idx[a + 1]]) for a in range(5))  # gpu, n_gpu, domain, network, precision
            if layout_of is None:
                li = int(sel[0][idx[0]])
                values = {f: float(source.get(f, (j, li, *cell))) for f in ROW_FIELDS}
            else:
                li = int(layout_of[idx])
                values = {f: float(source.get(f"best_{f}", (j, *cell))) for f in ROW_FIELDS}
            g, ni, di, wi, pi = cell
            n = labels["n_gpu"][ni]
            lay = Layout(
                **{d: degrees[d][li] for d in ("tp", "pp", "cp", "ep", "vpp", "micro_batch", "zero")},
                recompute=degrees["recompute"][li],
                sp=bool(degrees["sp"][li]),
            )
            lay = replace(lay, dp=n // (lay.tp * lay.pp * lay.cp))
            batch, seq = float(meta["global_batch"][j]), float(meta["seq_len"][j])
            parts = {c: values[c] for c in COMPONENTS}
            out.append(
                {
                    "job": names[j],
                    "family": "llm",
                    "model": names[j],
                    "arch": layout_label(lay),
                    "gpu": labels["gpu"][g],
                    "n_gpu": n,
                    "intra": intra[g],
                    "domain": labels["domain"][di],
                    "network": labels["network"][wi],
                    "precision": labels["precision"][pi],
                    "step_time": values["step_time"],
                    "throughput": batch / values["step_time"],
                    "throughput_tokens": values["tokens_per_s"],
                    "cost": values["cost_per_step"] / batch * 1e6,
                    "cost_tokens": values["cost_per_step"] / (batch * seq) * 1e6,
                    "energy": values["energy_per_step"] / batch,
                    "energy_tokens": values["energy_per_step"] / (batch * seq),
                    "mfu": values["mfu"],
                    "memory_per_gpu_GiB": values["memory_per_gpu"] / 2**30,
                    "bottleneck": max(parts, key=lambda c: parts[c]),
                    "speedup": float("nan"),
                    "layout": layout_label(lay),
                    **parts,
                }
            )
    return out


def _empty_row(job: str, reason: str | None) -> dict:
    """The row of a job with no valid cell under the filters (``reason``: the most frequent code)."""
    row = {c: None for c in ("arch", "gpu", "n_gpu", "intra", "domain", "network", "precision", "bottleneck")}
    row.update(
        {
            c: float("nan")
            for c in (
                "step_time",
                "throughput",
                "throughput_tokens",
                "cost",
                "cost_tokens",
                "energy",
                "energy_tokens",
                "mfu",
                "speedup",
            )
        }
    )
    row.update(job=job, family="llm", model=job, reason=reason)
    return row


# --- one query over every family of a cube ---------------------------------------------------
#: the columns of a query row, the same for both families (empty where one does not apply)
FAMILY_COLUMNS = [
    "job",
    "family",
    "arch",
    "gpu",
    "n_gpu",
    "intra",
    "domain",
    "network",
    "precision",
    "step_time",
    "throughput",
    "throughput_tokens",
    "cost",
    "cost_tokens",
    "energy",
    "energy_tokens",
    "mfu",
    "bottleneck",
    "speedup",
]
FAMILY_UNITS = {
    "step_time": "s",
    "throughput": "samples/s",
    "throughput_tokens": "tokens/s",
    "cost": "USD/1e6 samples",
    "cost_tokens": "USD/1e6 tokens",
    "energy": "J/sample",
    "energy_tokens": "J/token",
    "mfu": "fraction",
    "speedup": "x",
    "domain": "GPUs",
    "train_days": "days",
    "train_cost": "USD",
    "train_energy_MWh": "MWh",
}
#: the columns ``tokens`` adds: time, cost and energy to train that many tokens
TRAIN_COLUMNS = ["train_days", "train_cost", "train_energy_MWh"]
#: the dimensions of each family a ``--where`` may name
DP_WHERE_DIMS = LABEL_DIMS
ALL_LLM_WHERE = (*LLM_WHERE_DIMS, *LAYOUT_FILTERS)


def dp_family_row(row: dict, power: float, samples_per_step: float, peaks: DpPeaks | None = None) -> dict:
    """A data-parallel result row of ``paigrid.query.best_configurations`` in the columns of
    ``FAMILY_COLUMNS``: per token from its tokens per sample, energy [J/sample] =
    ``kernels.metrics.energy_per_sample`` of board power [W], step time and samples per GPU per
    step, and ``mfu`` from ``peaks`` (``DpPeaks.mfu``; NaN without them)."""
    from paigrid.kernels.metrics import energy_per_sample

    out = dict(row, family="dp", domain=None)
    per_token = row["throughput_tokens"] / row["throughput"] if row["throughput"] == row["throughput"] else math.nan
    out["cost_tokens"] = row["cost"] / per_token if per_token else math.nan
    out["energy"] = energy_per_sample(row["step_time"], power, samples_per_step)
    out["energy_tokens"] = out["energy"] / per_token if per_token else math.nan
    out["mfu"] = peaks.mfu(row, samples_per_step) if peaks is not None else math.nan
    return out


class DpPeaks:
    """What the data-parallel MFU needs that a cube does not store, from the built-in catalogues:
    each workload's training FLOPs per sample, 3 x ``fwd_GFLOP_per_sample`` x 1e9 [FLOP/sample]
    (forward, and a backward pass of twice its FLOPs: the model's FLOPs, not the hardware's),
    and each GPU's dense datasheet peak at the precision [FLOP/s] (``gpus.csv``'s column that
    ``precisions.csv`` names as the precision's ``peak_column``, e.g. ``bf16_TFLOP_per_s`` for
    ``amp-bf16``: no sparsity).  When the cube records other checksums of those three
    catalogues than the built-in ones (a sweep with the user's catalogues), the FLOPs and peaks
    would not be the cube's: ``note`` says so and every MFU is NaN."""

    KINDS = ("gpus", "workloads", "precisions")

    def __init__(self, attrs=None):
        import json

        from paigrid.inputs.catalog import Catalogues
        from paigrid.schema import str_attr

        self.cats = Catalogues.load()
        recorded = json.loads(str_attr(attrs, "catalogue_sha256") or "{}") if attrs is not None else {}
        other = [k for k in self.KINDS if k in recorded and recorded[k] != getattr(self.cats, k).sha256]
        self.note = (
            f"mfu is empty for the data-parallel jobs: the cube was swept with other {', '.join(other)} "
            "catalogues than the built-in ones, which hold the FLOPs and peaks the MFU needs."
            if other
            else ""
        )

    def flop_per_sample(self, model: str) -> float:
        """Training FLOPs per sample [FLOP] of the workload ``model`` (NaN: not in the catalogue)."""
        try:
            return 3.0 * self.cats.workloads.number(model, "fwd_GFLOP_per_sample") * 1e9
        except PaigridError:
            return math.nan

    def peak(self, gpu: str, precision: str) -> float:
        """Dense peak [FLOP/s] of ``gpu`` at ``precision`` (NaN: not in the catalogue, or no such math)."""
        try:
            return self.cats.peak_TFLOP_per_s(gpu, precision) * 1e12
        except PaigridError:
            return math.nan

    def mfu(self, row: dict, samples_per_step: float) -> float:
        """Model FLOPs utilisation [fraction] of a data-parallel result row: the model's FLOPs of
        one GPU's step (``samples_per_step`` [samples]) over the step time x the GPU's dense peak
        (``kernels.metrics.model_flops_utilisation``); NaN for a row without a configuration."""
        from paigrid.kernels.metrics import model_flops_utilisation

        if self.note or row.get("gpu") is None or row["step_time"] != row["step_time"]:
            return math.nan
        return float(
            model_flops_utilisation(
                self.flop_per_sample(str(row.get("model") or row["job"])),
                samples_per_step,
                row["step_time"],
                self.peak(row["gpu"], row["precision"]),
            )
        )


def split_where(
    items: list[str], dp_labels: dict | None, llm_source: GroupSource | None, llm_labels_: dict | None
) -> tuple[dict, dict, list[str]]:
    """``--where DIM=VALUE[,VALUE...]`` items split by family: (data-parallel filters by index,
    LLM filters by index, notes).  A dimension only one family has filters that family alone
    (a note says so); a value that one family lacks leaves that family's jobs with no row under
    the filters; a value no family has is an error."""
    from paigrid.query import label_indices

    dp_where: dict[str, list[int]] = {}
    llm_where_: dict[str, list[int]] = {}
    notes = []
    for item in items:
        dim, sep, text = item.partition("=")
        dim = dim.strip()
        values = [v.strip() for v in text.split(",")]
        in_dp, in_llm = dp_labels is not None and dim in DP_WHERE_DIMS, llm_source is not None and dim in ALL_LLM_WHERE
        if not sep or not (in_dp or in_llm):
            known = sorted(
                set(DP_WHERE_DIMS if dp_labels is not None else ())
                | set(ALL_LLM_WHERE if llm_source is not None else ())
            )
            raise PaigridError(f"--where takes DIM=VALUE with DIM one of {', '.join(known)}, not {item!r}.")
        errors = []
        found = {}
        if in_dp:
            try:
                found["dp"] = [i for v in values for i in label_indices(_Labelled(dp_labels), dim, v)]
            except PaigridError as exc:
                found["dp"] = []
                errors.append(str(exc))
        if in_llm:
            try:
                found["llm"] = [i for v in values for i in llm_where(llm_source, llm_labels_, dim, [v])]
            except PaigridError as exc:
                found["llm"] = []
                errors.append(str(exc))
        if not any(found.values()):
            raise PaigridError(errors[0])
        for family, hits in found.items():
            if not hits:
                name = "data-parallel" if family == "dp" else "LLM"
                notes.append(f"--where {item}: no {name} job has it, so the {name} jobs have no row under the filters.")
        if "dp" in found:
            dp_where[dim] = sorted(set(dp_where.get(dim, [])) | set(found["dp"]))
        if "llm" in found:
            key = "layout" if dim in LAYOUT_FILTERS else dim
            hits = set(found["llm"])
            llm_where_[key] = sorted(
                hits & set(llm_where_[key])
                if key in llm_where_ and dim in LAYOUT_FILTERS
                else set(llm_where_.get(key, [])) | hits
            )
        if dp_labels is not None and llm_source is not None and not (in_dp and in_llm):
            family, other = ("data-parallel", "LLM") if in_dp else ("LLM", "data-parallel")
            notes.append(
                f"--where {dim} filters the {family} jobs only; the {other} jobs have no {dim} and are not "
                "filtered by it."
            )
    return dp_where, llm_where_, notes


class _Labelled:
    """Labels seen as a ``paigrid.query.label_indices`` cube."""

    def __init__(self, labels: dict):
        self.labels = labels


#: the dimensions ``--per`` may group the rows of every job by
PER_DIMS = ("n_gpu", "network", "gpu", "precision", "design")


def query_every_family(
    path: str | Path,
    by: str = "time",
    where: list[str] | None = None,
    jobs: list[str] | None = None,
    top: int = 1,
    pareto: bool = False,
    tokens: float | None = None,
    calibration=None,
    per: str | None = None,
) -> tuple[list[dict], list[str]]:
    """``paigrid query`` over every job family of a cube: (rows in ``FAMILY_COLUMNS`` (and
    ``TRAIN_COLUMNS`` for ``tokens`` [tokens]), notes), data-parallel jobs first.  ``per`` (one
    of ``PER_DIMS``) answers once per value of that dimension (each job's best at each GPU
    count, on each network, ...), as if ``--where DIM=VALUE`` were given for each value; ``per
    = "design"`` once per cluster design: the best of each job at each (gpu, n_gpu, intra,
    network) of the data-parallel family and each (gpu, n_gpu, domain, network) of the LLM
    family (the architecture or layout, and the precision, are what is chosen)."""
    if per is not None and per != "design":
        return _per_value(path, by, where or [], jobs, top, pareto, tokens, calibration, per)
    per_design = per == "design"  # each job's best at each cluster design
    if per_design and (top > 1 or pareto):
        raise PaigridError("--per design gives the best of each design: it goes with neither --top nor --pareto.")
    from paigrid.cube import check_calibration, families_of, open_cube, open_llm, reading
    from paigrid.query import best_configurations

    families = families_of(path)
    dp = open_cube(path) if "dp" in families else None
    llm = open_llm(path) if "llm" in families else None
    try:
        if dp is not None:
            check_calibration(dp, calibration)
        source = GroupSource(llm.group) if llm is not None else None
        labels = llm_labels(source) if source is not None else None
        dp_where, llm_where_, notes = split_where(where or [], dp.labels if dp else None, source, labels)
        names_dp = set(dp.labels["job"]) if dp else set()
        names_llm = set(labels["job"]) if labels else set()
        unknown = [j for j in jobs or [] if j not in names_dp | names_llm]
        if unknown:
            raise PaigridError(f"job {unknown[0]!r} is not in the cube.")
        rows = []
        with reading(path):
            if dp is not None and (not jobs or names_dp & set(jobs)):
                dp_jobs = [j for j in jobs or [] if j in names_dp] or None
                if any(len(v) == 0 for v in dp_where.values()):
                    picked = dp_jobs or dp.labels["job"]
                    rows += [dict(_empty_row(j, None), family="dp") for j in picked]
                else:
                    power = dp.source.read("power")
                    samples = dict(zip(dp.labels["job"], dp.source.read("samples_per_step")))
                    peaks = DpPeaks(dp.source.attrs)
                    if peaks.note:
                        notes.append(peaks.note)
                    for row in best_configurations(dp, by, dp_where, dp_jobs, top, pareto, per_design):
                        g = dp.labels["gpu"].index(row["gpu"]) if row["gpu"] else 0
                        rows.append(dp_family_row(row, float(power[g]), float(samples[row["job"]]), peaks))
            if llm is not None and (not jobs or names_llm & set(jobs)):
                llm_jobs = [j for j in jobs or [] if j in names_llm] or None
                if any(len(v) == 0 for v in llm_where_.values()):
                    rows += [_empty_row(j, None) for j in (llm_jobs or labels["job"])]
                else:
                    rows += llm_best(source, by, llm_where_, llm_jobs, top, pareto, llm.mode, per_design)
    finally:
        for part in (dp, llm):
            if part is not None:
                part.close()
    if per_design:  # a design without a valid configuration is no row
        rows = [r for r in rows if r.get("arch") is not None]
    if tokens:
        for row in rows:
            row.update(train_totals(tokens, row["throughput_tokens"], row["cost_tokens"] / 1e6, row["energy_tokens"]))
    return rows, notes


def _per_value(path, by, where, jobs, top, pareto, tokens, calibration, per) -> tuple[list[dict], list[str]]:
    """``query_every_family`` once per value of the dimension ``per`` (values of either family,
    in the data-parallel family's order, then the LLM family's), rows grouped by job."""
    from paigrid.cube import families_of, open_cube, open_llm

    if per not in PER_DIMS:
        raise PaigridError(f"--per takes one of {', '.join(PER_DIMS)}, not {per!r}.")
    if any(item.partition("=")[0].strip() == per for item in where):
        raise PaigridError(f"--per {per} and --where {per}=... do not go together.")
    values = []
    families = families_of(path)
    if "dp" in families:
        cube = open_cube(path)
        try:
            values += [str(v) for v in cube.labels[per]]
        finally:
            cube.close()
    if "llm" in families:
        llm = open_llm(path)
        try:
            values += [str(v) for v in llm.labels[per] if str(v) not in values]
        finally:
            llm.close()
    rows, notes = [], []
    for value in values:
        found, said = query_every_family(path, by, [*where, f"{per}={value}"], jobs, top, pareto, tokens, calibration)
        rows += [r for r in found if r.get("arch") is not None]
        notes += [n for n in said if n not in notes and f"{per}={value}" not in n]
    order = {}
    for row in rows:
        order.setdefault(row["job"], len(order))
    return sorted(rows, key=lambda r: order[r["job"]]), notes
