"""The kinds of measured row that validate and calibrate compare the model with, one registry.

A row kind names what a measurement observed and how the model predicts it: ``predict(rows,
cats, efficiency, options)`` returns one positive number per row in the unit of
``Measurement.measured``.  ``validate`` and ``calibrate`` go through ``predict_observed``, which
groups the rows by kind, so a new kind of measurement (scaling efficiency, a collective's
bandwidth, an LLM's tokens/s) is one more ``register`` call with its predict function, and the
fit and the accuracy protocol take it unchanged.

Four kinds: ``llm``, tokens/s of a transformer training run at its parallel layout
(``paigrid.llm.rows``); ``throughput``, samples/s of the whole job (``predict.predict_configs`` at the
row's configuration); ``scaling``, the scaling efficiency throughput(n) / (n x throughput(1))
of a multi-GPU configuration (a fraction); ``collective``, the bus bandwidth [GB/s] of an
all-reduce of a given message size among the row's GPUs, from the model's link terms.  A
measurements file's schema names its rows' kind (``measurements.file_kind``); a throughput file
may also name ``throughput`` in an optional ``kind`` column.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from paigrid.errors import PaigridError


@dataclass(frozen=True)
class RowKind:
    """One kind of measured row: its name, the unit of its observed value and how the model predicts it."""

    name: str
    unit: str
    predict: Callable  # (rows, cats, efficiency, options) -> list[float], one per row, in ``unit``


ROW_KINDS: dict[str, RowKind] = {}


def register(kind: RowKind) -> RowKind:
    """Add a row kind to the registry (a name may be registered once)."""
    if kind.name in ROW_KINDS:
        raise PaigridError(f"the row kind {kind.name!r} is registered twice.")
    ROW_KINDS[kind.name] = kind
    return kind


def row_kind(name: str) -> RowKind:
    """The registered kind called ``name`` (one sentence listing the known ones otherwise)."""
    key = (name or "throughput").strip().casefold() or "throughput"
    if key not in ROW_KINDS:
        raise PaigridError(f"unknown row kind {name!r}; known: {', '.join(sorted(ROW_KINDS))}.")
    return ROW_KINDS[key]


def _throughput(rows, cats, efficiency, options) -> list[float]:
    """Samples/s of the whole job at each row's configuration [samples/s]."""
    from paigrid.predict import predict_configs

    results = predict_configs([r.job(options) for r in rows], [r.config() for r in rows], cats, efficiency, options)
    return [float(r["throughput"]) for r in results]


register(RowKind("throughput", "samples/s", _throughput))


def _one_gpu(row):
    """The one-GPU run of a multi-GPU row: the same job on one GPU (1w1g), its intra link if it
    is a PCIe link, else the host PCIe link of the GPU's generation (a 1w1g run sends nothing
    between GPUs, so the link is unused), and no network."""
    return {**row.config(), "arch": "1w1g", "n_gpu": 1, "network": "none"}


def _scaling(rows, cats, efficiency, options) -> list[float]:
    """Scaling efficiency throughput(n) / (n x throughput(1)) of each row's configuration
    [fraction]: the same job, GPU, precision, batch and links, on n GPUs and on one."""
    from paigrid.inputs.jobs import resolve_link
    from paigrid.predict import predict_configs

    jobs = [r.job(options) for r in rows]
    singles = []
    for r in rows:
        single = _one_gpu(r)
        if cats.links.row(r.intra)["kind"] != "pcie":
            single["intra"] = resolve_link(cats, f"pcie{int(cats.gpus.number(r.gpu, 'pcie_gen'))}", "intra")
        singles.append(single)
    many = predict_configs(jobs, [r.config() for r in rows], cats, efficiency, options)
    one = predict_configs(jobs, singles, cats, efficiency, options)
    return [float(m["throughput"]) / (r.n_gpu * float(o["throughput"])) for r, m, o in zip(rows, many, one)]


register(RowKind("scaling", "fraction", _scaling))


def allreduce_seconds(row, cats, efficiency, options, nbytes: float) -> float:
    """The model's all-reduce time [s] of ``nbytes`` among a row's n GPUs (its architecture,
    links, GPUs and NICs per server, the options' collective algorithm and topology), latency
    terms included: ``kernels.model.exchange_seconds``, the function the sweep kernel uses, and
    the options' coordination time of one all-reduce (``coordination_seconds``, 0 by default)."""
    from paigrid.inputs.kernel_tables import COLLECTIVE_CODES, link_table, option_vector
    from paigrid.kernels import dp_columns as L
    from paigrid.kernels.model import coordination_seconds, exchange_seconds, intra_fraction

    intra = link_table(cats, [row.intra], efficiency)[0]
    network = link_table(cats, [row.network], efficiency)[0]
    from paigrid.inputs.spec import JOB_OPTIONS

    job = {key: getattr(options, key) for key in JOB_OPTIONS} | row.job_options
    n, k = float(row.n_gpu), float(job["gpus_per_node"])
    roots = float(job["pcie_roots"])
    intra_bw = intra[L.L_BW] * intra_fraction(intra[L.L_KIND], n, k, roots, 1.0 if options.topology_aware else 0.0)
    arch, vector = float(L.ARCH_NAMES.index(row.arch)), option_vector(options)
    seconds = exchange_seconds(
        arch,
        n,
        k,
        float(job["nics_per_node"]),
        roots,
        float(job["ps_count"]),
        nbytes,
        1.0,
        intra_bw,
        intra[L.L_LATENCY],
        network[L.L_BW],
        network[L.L_LATENCY],
        float(COLLECTIVE_CODES[options.collective]),
        vector,
    )
    return float(seconds + coordination_seconds(arch, n, vector[L.O_COORDINATION], vector[L.O_COORDINATION_GROWTH]))


def _collective(rows, cats, efficiency, options) -> list[float]:
    """Bus bandwidth [GB/s] of each row's all-reduce: algorithm bandwidth (message bytes /
    ``allreduce_seconds``) x 2(n-1)/n, the nccl-tests convention."""
    out = []
    for r in rows:
        nbytes = float(r.cells["message_size_bytes"])  # checked positive when the row was read
        seconds = allreduce_seconds(r, cats, efficiency, options, nbytes)
        out.append(nbytes / seconds * 2.0 * (r.n_gpu - 1) / r.n_gpu / 1e9 if seconds > 0 else float("nan"))
    return out


register(RowKind("collective", "GB/s", _collective))


def _llm(rows, cats, efficiency, options) -> list[float]:
    """Tokens/s of the whole job at each LLM row's model, layout and cluster
    (``paigrid.llm.rows``; each row's stack options); NaN for a row the model refuses."""
    from paigrid.llm.rows import predict_row, read_row

    out = []
    for r in rows:
        if r.refused:
            out.append(float("nan"))
            continue
        llm = r.llm_row if getattr(r, "llm_row", None) is not None else read_row(r.cells, r.id, cats)
        out.append(predict_row(llm, cats, efficiency)["tokens_per_s"])
    return out


register(RowKind("llm", "tokens/s", _llm))


def predict_observed(rows, cats, efficiency, options) -> np.ndarray:
    """The model's value of what each row observed (its kind's unit), in row order; a row the
    model gives no positive finite value is one sentence naming it."""
    out = np.full(len(rows), np.nan)
    by_kind: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        by_kind.setdefault(row_kind(getattr(row, "kind", "throughput")).name, []).append(i)
    for name, members in by_kind.items():
        values = ROW_KINDS[name].predict([rows[i] for i in members], cats, efficiency, options)
        out[members] = values
    bad = ~(np.isfinite(out) & (out > 0)) & np.array([not getattr(r, "refused", "") for r in rows], dtype=bool)
    if bad.any():
        raise PaigridError(
            f"the model gives no {row_kind(getattr(rows[int(np.argmax(bad))], 'kind', '')).unit} "
            f"for row {rows[int(np.argmax(bad))].id!r}; it cannot be fitted."
        )
    return out
