"""The LLM sweep: every valid layout of each model at each GPU count on every cluster design,
reduced to the best layout per (model, n_gpu, gpu, domain, network), written to HDF5.

The layout axis is never stored densely: per GPU count only the layouts that suit the model's
shape are enumerated (``layouts.enumerate_layouts``) and evaluated in blocks of at most
``BLOCK_PAIRS`` layout x design pairs, so no block outgrows memory.  The file holds, per
(model, n_gpu, gpu, domain, network), the best layout's degrees and every result field, the
number of layouts tried and of valid ones, and how many were invalid for each reason.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from paigrid.errors import PaigridError
from paigrid.inputs.catalog import Catalogues
from paigrid.inputs.efficiency import Efficiency
from paigrid.kernels import llm_layout as K
from paigrid.llm.compute import Hardware, LlmOptions, intra_link_for
from paigrid.llm.evaluate import RESULTS, evaluate
from paigrid.llm.fabrics import resolve_network
from paigrid.llm.layouts import DEGREES, REASON_NAMES, Space, enumerate_layouts, layout_degrees
from paigrid.llm.models import Transformer
from paigrid.userfiles import output_target, replacing_file

#: the most layout x design pairs evaluated at once (each pair holds N_RESULT_FIELDS doubles)
BLOCK_PAIRS = 400_000
DEFAULT_N_GPU = tuple(2**k for k in range(3, 15))  # 8 .. 16384
DEFAULT_GPUS = ("A100-SXM4-80GB", "H100-SXM5-80GB", "H200", "B200")
DEFAULT_DOMAINS = (8, 72)
DEFAULT_NETWORKS = ("rdma-100g", "ib-hdr-200g", "ib-ndr-400g", "ib-xdr-800g")
DEGREE_UNITS = {
    "tp": "GPUs",
    "pp": "stages",
    "dp": "replicas",
    "cp": "GPUs",
    "ep": "GPUs",
    "vpp": "stages per GPU",
    "micro_batch": "sequences",
    "zero": "stage",
    "recompute": "code: 0 none, 1 selective, 2 full",
    "sp": "flag",
}


@dataclass
class Plan:
    """What an LLM sweep covers: models, GPU counts, and the designs' GPUs, NVLink domain
    sizes, networks, NICs per GPU and precision."""

    models: list[Transformer]
    n_gpu: list[int] = field(default_factory=lambda: list(DEFAULT_N_GPU))
    gpus: list[str] = field(default_factory=lambda: list(DEFAULT_GPUS))
    domains: list[int] = field(default_factory=lambda: list(DEFAULT_DOMAINS))
    networks: list[str] = field(default_factory=lambda: list(DEFAULT_NETWORKS))
    nics_per_gpu: float = 1.0
    precision: str = "amp-bf16"
    space: Space = field(default_factory=Space)

    def designs(self, cats: Catalogues) -> list[Hardware]:
        """Every (gpu, domain, network) design, in C order of those axes."""
        return [
            Hardware(g, self.precision, d, intra_link_for(cats, g), n, self.nics_per_gpu)
            for g in self.gpus
            for d in self.domains
            for n in self.networks
        ]


def best_layouts(
    model: Transformer,
    n_gpu: int,
    designs: list[Hardware],
    cats: Catalogues,
    eff: Efficiency,
    options: LlmOptions,
    space: Space,
    sink=None,
    layouts: list | None = None,
) -> dict:
    """The fastest valid layout per design at ``n_gpu`` GPUs: ``results`` (D, N_RESULT_FIELDS),
    ``degrees`` (D, len(DEGREES)), ``tried`` (layouts enumerated), ``valid`` (D,) and
    ``reasons`` (D, N_REASONS) counts.  ``sink(start, results)``, when given, receives every
    block's full (layouts, D, N_RESULT_FIELDS) results, ``start`` its first layout's index."""
    layouts = enumerate_layouts(model, n_gpu, space) if layouts is None else layouts
    d = len(designs)
    best = np.full((d, K.N_RESULT_FIELDS), np.nan)
    degrees = np.full((d, len(DEGREES)), np.nan)
    reasons = np.zeros((d, K.N_REASONS), dtype=np.int64)
    step = max(1, BLOCK_PAIRS // d)
    for start in range(0, len(layouts), step):
        block = layouts[start : start + step]
        res = evaluate(model, block, designs, cats, eff, options)
        if sink is not None:
            sink(start, res)
        codes = res[:, :, K.R_REASON].astype(np.int64)
        for j in range(d):
            reasons[j] += np.bincount(codes[:, j], minlength=K.N_REASONS)
        times = np.where(np.isnan(res[:, :, K.R_STEP]), np.inf, res[:, :, K.R_STEP])
        pick = np.argmin(times, axis=0)
        for j in range(d):
            i = pick[j]
            if np.isfinite(times[i, j]) and not (times[i, j] >= np.nan_to_num(best[j, K.R_STEP], nan=np.inf)):
                best[j] = res[i, j]
                degrees[j] = layout_degrees(block[i])
    return {
        "results": best,
        "degrees": degrees,
        "tried": len(layouts),
        "valid": reasons[:, K.REASON_VALID],
        "reasons": reasons,
    }


#: bytes per layout x design pair of a full sweep: every result field in float64, the reason in int8
FULL_BYTES_PER_PAIR = 8 * (K.N_RESULT_FIELDS - 1) + 1
#: free space a full sweep asks for, as a multiple of its results' size (HDF5's overhead, the reductions)
FULL_SPACE_MARGIN = 1.1
#: the largest full sweep written without ``max_full_GB`` raised [1e9 bytes]
FULL_LIMIT_GB = 1.0


def full_size(plan: Plan, cats: Catalogues) -> dict:
    """What a full (not reduce-only) sweep of ``plan`` would write: ``layouts`` per (model,
    n_gpu) summed, ``designs``, ``pairs`` (layout x design), ``bytes`` (the results, before
    HDF5 overhead)."""
    layouts = sum(len(enumerate_layouts(m, n, plan.space)) for m in plan.models for n in plan.n_gpu)
    designs = len(plan.gpus) * len(plan.domains) * len(plan.networks)
    return {
        "layouts": layouts,
        "designs": designs,
        "pairs": layouts * designs,
        "bytes": layouts * designs * FULL_BYTES_PER_PAIR,
    }


def run_sweep(
    plan: Plan,
    out: str | Path,
    cats: Catalogues,
    eff: Efficiency,
    options: LlmOptions,
    progress=None,
    full: bool = False,
    max_full_GB: float = FULL_LIMIT_GB,
) -> dict:
    """Sweep ``plan`` and write the reduced file ``out`` atomically (a temporary file in the same
    folder, renamed when whole).  With ``full`` the file also holds every layout x design
    result (group ``full/<model index>/<n_gpu>``: the layouts' degrees along a ``layout`` axis,
    each result field and the reason code over (layout, gpu, domain, network)); its size is
    stated through ``progress`` first and a sweep above ``max_full_GB`` [1e9 bytes] is refused.
    Returns ``{"pairs": layout x design pairs evaluated, "seconds": wall time, "bytes": the
    full results' size (0 reduce-only)}``."""
    import h5py

    target = output_target(out)
    if target.stream:
        raise PaigridError(f"cannot write {target.given}: an LLM sweep writes a file, not a stream.")
    for g in plan.gpus:
        cats.gpus.resolve(g)
    plan.networks = [resolve_network(n, cats) for n in plan.networks]
    if not plan.models or not plan.n_gpu:
        raise PaigridError("an LLM sweep needs at least one model and one GPU count.")
    size = {"bytes": 0}
    if full:
        size = full_size(plan, cats)
        if progress:
            progress(
                f"full LLM sweep: {size['layouts']:,} layouts x {size['designs']} designs = {size['pairs']:,} "
                f"pairs, {size['bytes'] / 1e9:.3g} GB of results"
            )
        if size["bytes"] > max_full_GB * 1e9:
            raise PaigridError(
                f"a full LLM sweep of this plan writes {size['bytes'] / 1e9:.3g} GB, more than the "
                f"limit of {max_full_GB:g} GB; raise --max-full-gb to write it or drop --full."
            )
    designs = plan.designs(cats)
    shape = (len(plan.models), len(plan.n_gpu), len(plan.gpus), len(plan.domains), len(plan.networks))
    results = np.full(shape + (K.N_RESULT_FIELDS,), np.nan)
    degrees = np.full(shape + (len(DEGREES),), np.nan)
    tried = np.zeros(shape[:2], dtype=np.int64)
    reasons = np.zeros(shape + (K.N_REASONS,), dtype=np.int64)
    pairs, started = 0, time.perf_counter()
    with replacing_file(
        target.given,
        "the LLM sweep",
        size["bytes"] * FULL_SPACE_MARGIN,
        "drop --full, or sweep fewer models, GPU counts or designs",
    ) as tmp:
        with h5py.File(tmp, "w") as f:
            for mi, model in enumerate(plan.models):
                for ni, n in enumerate(plan.n_gpu):
                    layouts = enumerate_layouts(model, n, plan.space)
                    sink = _full_sink(f, mi, n, layouts, shape[2:]) if full else None
                    found = best_layouts(model, n, designs, cats, eff, options, plan.space, sink, layouts)
                    results[mi, ni] = found["results"].reshape(shape[2:] + (K.N_RESULT_FIELDS,))
                    degrees[mi, ni] = found["degrees"].reshape(shape[2:] + (len(DEGREES),))
                    reasons[mi, ni] = found["reasons"].reshape(shape[2:] + (K.N_REASONS,))
                    tried[mi, ni] = found["tried"]
                    pairs += found["tried"] * len(designs)
                    if progress:
                        progress(f"{model.name}: {n} GPUs, {found['tried']} layouts x {len(designs)} designs")
            _write(f, plan, results, degrees, tried, reasons, options)
            f.attrs["full"] = bool(full)
        seconds = time.perf_counter() - started
    return {"pairs": pairs, "seconds": seconds, "bytes": size["bytes"]}


def _full_sink(f, mi: int, n_gpu: int, layouts: list, design_shape: tuple):
    """A ``best_layouts`` sink writing every block of one (model, n_gpu) into ``full/mi/n_gpu``."""
    group = f.require_group("full").require_group(str(mi)).create_group(str(n_gpu))
    group.attrs["model_index"] = mi
    group.attrs["n_gpu"] = n_gpu
    group.attrs["dimensions"] = "layout,gpu,domain,network"
    count = len(layouts)
    table = np.array([layout_degrees(lay) for lay in layouts])
    for i, name in enumerate(DEGREES):
        group.create_dataset(name, data=table[:, i].astype(np.int64)).attrs["units"] = DEGREE_UNITS[name]
    full_shape = (count,) + tuple(design_shape)
    chunks = (max(1, min(count, 4096)),) + tuple(design_shape)
    store = {}
    for name, (index, units) in RESULTS.items():
        store[index] = group.create_dataset(name, shape=full_shape, dtype="f8", chunks=chunks)
        store[index].attrs["units"] = units
    store[K.R_REASON] = group.create_dataset("reason", shape=full_shape, dtype="i1", chunks=chunks)
    store[K.R_REASON].attrs["units"] = "code: index into the root's reason coordinate (0 valid)"

    def sink(start: int, res: np.ndarray) -> None:
        rows = res.shape[0]
        block = res.reshape((rows,) + tuple(design_shape) + (K.N_RESULT_FIELDS,))
        for index, dataset in store.items():
            values = block[..., index]
            dataset[start : start + rows] = values.astype(np.int8) if index == K.R_REASON else values

    return sink


def _coordinate(f, name: str, values, units: str) -> None:
    data = np.array(values, dtype=h5_str()) if isinstance(values[0], str) else np.asarray(values)
    f.create_dataset(name, data=data).attrs["units"] = units


def h5_str():
    """The HDF5 variable-length UTF-8 string type."""
    import h5py

    return h5py.string_dtype("utf-8")


def _write(f, plan: Plan, results, degrees, tried, reasons, options: LlmOptions) -> None:
    dims = ("model", "n_gpu", "gpu", "domain", "network")
    f.attrs["kind"] = "paigrid-llm-best"
    f.attrs["dimensions"] = ",".join(dims)
    f.attrs["precision"] = plan.precision
    f.attrs["nics_per_gpu"] = plan.nics_per_gpu
    f.attrs["options"] = repr(options)
    _coordinate(f, "model", [m.name for m in plan.models], "name")
    _coordinate(f, "n_gpu", plan.n_gpu, "GPUs")
    _coordinate(f, "gpu", plan.gpus, "name")
    _coordinate(f, "domain", plan.domains, "GPUs per NVLink domain")
    _coordinate(f, "network", plan.networks, "name")
    _coordinate(f, "reason", list(REASON_NAMES), "name")
    f.create_dataset("global_batch", data=[m.global_batch for m in plan.models]).attrs["units"] = "sequences"
    f.create_dataset("seq_len", data=[m.seq_len for m in plan.models]).attrs["units"] = "tokens"
    for name, (index, units) in RESULTS.items():
        f.create_dataset(name, data=results[..., index]).attrs["units"] = units
    for i, name in enumerate(DEGREES):
        f.create_dataset(name, data=degrees[..., i]).attrs["units"] = DEGREE_UNITS[name]
    f.create_dataset("layouts_tried", data=tried).attrs["units"] = "layouts per (model, n_gpu)"
    f.create_dataset("layouts_by_reason", data=reasons).attrs["units"] = "layouts (last axis: reason)"
