"""The cube file: netCDF-4/HDF5 written through h5netcdf, streamed block by block.

Layout (``xarray.open_dataset(path, engine="h5netcdf")`` opens it, after ``import hdf5plugin``
for the blosc filters):

- dimensions ``job, arch, gpu, n_gpu, intra, network, precision`` with labelled coordinates,
  and ``block`` (units of work);
- the cube variables over all seven dimensions, chunked by ``cube_chunk_shape`` (one job, a
  few GPUs: readers take the chunk shape from the dataset), and the factors that make
  throughput, cost and energy from step_time (``schema.FACTOR_VARIABLES``, format 4);
- ``t_data, t_flop, t_mem, fits_memory`` over (job, gpu, precision), which is all they vary with;
- the per-job reductions ``best_*`` over (job, gpu, n_gpu, precision);
- per-job metadata (model, batch, current configuration and its predicted throughput) and per-GPU
  price and power, so queries need nothing but the file;
- ``block_done`` (block): 1 once a block's data is written and flushed;
- file attributes: paigrid version, the spec, catalogue checksums, mode, ``complete``,
  ``families`` (the job families the file holds: ``dp``, ``llm`` or both);
- the group ``llm`` (format 5, when the sweep has LLM jobs): the LLM family's cells over
  (job, layout, gpu, n_gpu, domain, network, precision), the layout degrees as coordinate
  variables, the per-job bests over the layout axis, and its own ``block_done`` (one block per
  job and GPU count), written by the same writer, under the same lock, flushes and checksums.

The file is written as ``PATH.partial`` and renamed to ``PATH`` only when every block is done,
so an interrupted sweep never leaves a file that looks finished; ``--resume`` reopens the
``.partial`` file and redoes only the blocks not marked done.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import time
from pathlib import Path

import numpy as np

from paigrid import __version__
from paigrid.codecs import chunk_corners, filter_kwargs
from paigrid.errors import PaigridError
from paigrid.evaluate import Block, cube_chunks
from paigrid.faults import fault_point
from paigrid.files import new_file_mode, sync_folder
from paigrid.inputs.kernel_tables import Grid
from paigrid.llm.grid import LlmGrid, result_fields
from paigrid.schema import (
    BAND_DIMS,
    BAND_VARIABLE,
    BEST_DIMS,
    BEST_VARIABLES,
    CRITERIA,
    CUBE_VARIABLES,
    DIMS,
    FACTOR_VARIABLES,
    FLAG_ATTRS,
    FORMAT_VERSION,
    JOB_GPU_DIMS,
    JOB_GPU_VARIABLES,
    LLM_BEST_DIMS,
    LLM_DIMS,
    OVERALL_BEST_DIMS,
    OVERALL_DIMS,
    OVERALL_STEP_DIMS,
    OVERALL_VARIABLES,
    decode_strings,
    format_version,
    partial_path,
    str_attr,
)

CHUNK_TARGET_BYTES = 2 * 2**20
#: a chunk of the cube variables holds at least about this much float32 (unless a block's jobs
#: hold less): below it compression and the per-chunk costs of writing and reading grow
CUBE_CHUNK_BYTES = 2**18


def cube_chunk_shape(grid: Grid, jobs_per_block: int) -> tuple[int, ...]:
    """The chunk shape of the cube variables over (job, arch, gpu, n_gpu, intra, network,
    precision), a function of the grid alone (and of the block size: a chunk never spans two
    blocks).  HDF5 records it; readers take it from the dataset.

    A chunk spans every arch, n_gpu, intra, network and precision, the fewest GPUs (a divisor of
    the grid's) that make about ``CUBE_CHUNK_BYTES`` [bytes] of float32 for one job, and one
    job, or several when one job's every GPU is still much less (small grids).  So one job reads only
    its own chunks, a filter on gpu only that gpu's, and a (gpu, network) plane over every job
    the few GPUs of its chunk x every network.  The networks stay together because they
    compress together: many configurations (the archs that ignore the network, the invalid
    cells) repeat across networks, and chunks of one network compressed about 3x less and made
    the sweep's compression several times slower in the measurements behind this choice (see
    docs/cube.md)."""
    j, a, g, n, i, w, p = grid.shape
    per_gpu = a * n * i * w * p * 4  # float32 bytes of one (job, gpu)
    gpus = _divisor_at_least(g, round(CUBE_CHUNK_BYTES / per_gpu))
    jobs = max(1, min(jobs_per_block, j, round(CUBE_CHUNK_BYTES / (per_gpu * gpus))))
    return (jobs, a, gpus, n, i, w, p)


def _divisor_at_least(size: int, at_least: int) -> int:
    """The smallest divisor of ``size`` that is at least ``at_least`` (``size`` when none is)."""
    return next((d for d in range(max(1, at_least), size + 1) if size % d == 0), size)


def estimated_bytes(grid: Grid, reduce_only: bool) -> int:
    """Uncompressed size of the cube variables [bytes]: what a full sweep could need on disk
    (the variables over seven dimensions and the factors of the derived ones only in a full
    sweep; the reductions and the (job, gpu, precision) terms in both)."""
    per_config = 0 if reduce_only else sum(np.dtype(d).itemsize for d, _, _ in CUBE_VARIABLES.values())
    j, a, g, n, i, w, p = grid.shape
    small = sum(np.dtype(d).itemsize for d, _, _ in JOB_GPU_VARIABLES.values()) * j * g * p
    best = sum(np.dtype(d).itemsize for d, _, _ in BEST_VARIABLES.values()) * j * g * n * p
    return per_config * grid.configs + small + best + (0 if reduce_only else factor_bytes(grid))


def factor_bytes(grid: Grid) -> int:
    """Size of the factors of throughput, cost and energy (``FACTOR_VARIABLES``) [bytes]."""
    size = dict(zip(DIMS, grid.shape))
    return sum(
        np.dtype(dtype).itemsize * math.prod(size[d] for d in dims) for dims, dtype, _, _ in FACTOR_VARIABLES.values()
    )


def grid_model(grid: Grid) -> str:
    """The compute model (``kernels.dp_columns.MODEL_NAMES``) the grid's kernel options select."""
    from paigrid.kernels.dp_columns import MODEL_NAMES, O_MODEL

    return MODEL_NAMES[int(grid.options[O_MODEL])]


def prediction_bands(grid: Grid) -> np.ndarray:
    """(J, N) float32: the prediction band of each job at each GPU count of the grid (its own
    current count when the grid's n_gpu is "current"), ``efficiency.prediction_band`` of the
    grid's model, calibrated or not, and the group of (n_gpu, the job's gpus_per_node)."""
    from paigrid.inputs.efficiency import band_group, prediction_band

    model, calibrated = grid_model(grid), grid.efficiency.origin != "defaults"
    per_node = np.array([job.options["gpus_per_node"] for job in grid.jobs], dtype=np.float64)
    if grid.n_gpu == [0]:
        counts = grid.current_counts[:, None]
    else:
        counts = np.broadcast_to(np.asarray(grid.n_gpu, dtype=np.float64), (len(grid.jobs), len(grid.n_gpu)))
    # each (count, gpus_per_node) pair as one complex number: a 1-D unique sorts it in milliseconds,
    # where np.unique(axis=0) sorted rows as opaque records (about a second at 18,000 jobs)
    pairs = np.add(*np.broadcast_arrays(counts, 1j * per_node[:, None])).reshape(-1)
    distinct, inverse = np.unique(pairs, return_inverse=True)
    bands = np.array([prediction_band(model, calibrated, band_group(p.real, p.imag)) for p in distinct], np.float32)
    return bands[inverse.reshape(-1)].reshape(counts.shape)  # one lookup per distinct (count, gpus_per_node)


def llm_estimated_bytes(llm: LlmGrid | None, reduce_only: bool) -> int:
    """Uncompressed size of the LLM group [bytes]: the cells (float32 per result field and a
    reason byte, full sweeps only) and the bests (float64 per field, the layout index and the
    per-reason counts)."""
    if llm is None:
        return 0
    from paigrid.llm.parallelism import CUBE_REASON_NAMES

    fields = len(result_fields())
    j, lay, g, n, d, w, p = llm.shape
    best = j * g * n * d * w * p * (8 * fields + 4 + 4 * len(CUBE_REASON_NAMES))
    return best + (0 if reduce_only else llm.cells * (4 * fields + 1))


def llm_chunk_shape(llm: LlmGrid) -> tuple[int, ...]:
    """Chunks of the LLM cells: one job, one GPU and one GPU count, every domain, network and
    precision, and as many layouts as make about ``CUBE_CHUNK_BYTES`` of float32."""
    j, lay, g, n, d, w, p = llm.shape
    return (1, max(1, min(lay, CUBE_CHUNK_BYTES // (4 * d * w * p))), 1, 1, d, w, p)


def _strings(values) -> np.ndarray:
    return np.array([v if isinstance(v, str) else str(v) for v in values], dtype=object)


class CubeWriter:
    """Creates (or reopens, to resume) a cube file and writes blocks into it."""

    def __init__(
        self,
        path: str | Path,
        grid: Grid | None,
        provenance: dict,
        blocks: list[tuple[int, int]],
        reduce_only: bool = False,
        compression: str = "lz4",
        resume: bool = False,
        chunks: int | tuple[int, ...] = 1,
        current: dict[str, np.ndarray] | None = None,
        device: str = "cpu",
        flush_seconds: float = 0.0,
        llm: LlmGrid | None = None,
    ):
        import h5netcdf
        import h5py

        self.path = Path(path)
        self.tmp = partial_path(path)
        # A new cube is created under a hidden name and renamed to PATH.partial only once its
        # skeleton and the current-configuration predictions are on disk: a .partial file is
        # always a readable cube that --resume can finish.
        self.creating = None if resume else creating_path(path)
        self.grid = grid
        self.reduce_only = reduce_only
        self.blocks = blocks
        self.chunks = cube_chunks(grid.shape, chunks) if grid is not None else None  # the cube variables'
        self.llm = llm  # the LLM family's grid (None: no LLM jobs)
        self.llm_blocks = llm.blocks() if llm is not None else []
        self.unflushed_llm: list[int] = []
        self.compression = compression
        self.flush_seconds = flush_seconds
        self.unflushed: list[int] = []  # blocks written but not yet flushed and marked done
        self.last_flush = time.monotonic()
        # The HDF5 file is opened here and handed to h5netcdf (which then leaves closing it to us), so
        # that this writer holds it: it flushes it itself and writes blocks straight to its datasets.
        # track_order: the creation order netCDF-4 needs, as h5netcdf sets it on files it creates.
        if resume:  # checked read-only first: a refused resume leaves the file byte for byte as it was
            try:
                with h5py.File(self.tmp, "r") as probe:
                    probe.visit(lambda name: None)  # every object header: damaged metadata fails here
                    self._check_resumable(provenance, probe.attrs)
            except (OSError, RuntimeError, KeyError):
                raise PaigridError(
                    f"{self.tmp} cannot be resumed: its metadata is damaged (as when the disk filled while HDF5 "
                    "was writing); delete it and run the sweep again without --resume."
                ) from None
        self.h5 = h5py.File(self.tmp, "r+") if resume else h5py.File(self.creating, "w", track_order=True)
        try:
            self.file = h5netcdf.File(self.h5, "r+" if resume else "w")
            if resume:
                # chunks must be encoded as the datasets were created, whatever --compression says now
                self.compression = str(self.file.attrs["compression"])
                # register the file's filters (blosc comes from hdf5plugin): HDF5 reads a chunk that
                # the interrupted run left behind before it rewrites part of it
                filter_kwargs(self.compression)
                self._record_device(device)
            else:
                fault_point("creating")
                self._create(provenance, filter_kwargs(compression), compression)
                self.file.attrs["device"] = device
                self.flush()
                fault_point("skeleton-written")
                if current is not None:
                    self.write_current(current)
                self._publish()
            self.done = (
                np.asarray(self.file.variables["block_done"][:], dtype=bool)
                if grid is not None
                else np.zeros(0, dtype=bool)
            )
            self.llm_done = (
                np.asarray(self.h5["llm/block_done"][:], dtype=bool) if llm is not None else np.zeros(0, dtype=bool)
            )
            if resume:
                self._check_blocks()
            # blocks go straight to the h5py datasets: h5netcdf's __setitem__ adds ~1 ms per call
            self.datasets = {name: self.h5[name] for name in self.file.variables}
            self.llm_sets = (
                {name: self.h5["llm"][name] for name in self.file.groups["llm"].variables} if llm is not None else {}
            )
        except BaseException:
            self.close()  # no caller holds this writer to close it
            raise

    # --- creation ---------------------------------------------------------------------------
    def _create(self, provenance: dict, filters: dict, compression: str) -> None:
        f, grid = self.file, self.grid
        if grid is not None:
            self._create_dp(filters)
        f.attrs.update(
            Conventions="CF-1.8",
            title="paigrid design-space cube",
            paigrid_version=__version__,
            format_version=FORMAT_VERSION,
            families=" ".join(self.families()),
            created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            mode="reduce-only" if self.reduce_only else "full",
            compression=compression,
            complete=0,
            **{k: json.dumps(v) if not isinstance(v, str) else v for k, v in provenance.items()},
        )
        if grid is not None:
            f.attrs["model"] = grid_model(grid)
        if self.llm is not None:
            self._create_llm(filters)

    def families(self) -> list[str]:
        """The job families this cube holds (``dp``: data-parallel, ``llm``)."""
        return [name for name, part in (("dp", self.grid), ("llm", self.llm)) if part is not None]

    def _create_dp(self, filters: dict) -> None:
        import h5py

        f, grid = self.file, self.grid
        names = DIMS
        f.dimensions = {
            **dict(zip(names, grid.shape)),
            "block": len(self.blocks),
            "criterion": len(CRITERIA),
            "dimension": len(OVERALL_DIMS),
        }
        text = h5py.string_dtype()
        labels = {
            "job": [j.name for j in grid.jobs],
            "arch": grid.arch,
            "gpu": grid.gpu,
            "intra": grid.intra,
            "network": grid.network,
            "precision": grid.precision,
            "criterion": CRITERIA,
            "dimension": OVERALL_DIMS,
        }
        for dim, values in labels.items():
            f.create_variable(dim, (dim,), dtype=text, data=_strings(values)).attrs["units"] = "1"
        n_gpu = f.create_variable("n_gpu", ("n_gpu",), dtype=np.int32, data=np.asarray(grid.n_gpu, np.int32))
        n_gpu.attrs.update(units="1", long_name="GPUs in the job (0: each job's current count, see current_n_gpu)")
        self._metadata(text)
        # the small variables: a block's jobs per chunk, at most about CHUNK_TARGET_BYTES of the largest
        per_job = 8 * grid.shape[2] * grid.shape[3] * grid.shape[6]
        jobs_per_chunk = max(1, min(self.blocks[0][1] - self.blocks[0][0], CHUNK_TARGET_BYTES // per_job))
        cube_chunk = self.chunks
        groups = [
            (JOB_GPU_VARIABLES, JOB_GPU_DIMS, (jobs_per_chunk, grid.shape[2], grid.shape[6])),
            (
                BEST_VARIABLES,
                BEST_DIMS,
                (jobs_per_chunk, grid.shape[2], grid.shape[3], grid.shape[6]),
            ),
            (
                {"overall_best": OVERALL_VARIABLES["overall_best"]},
                OVERALL_BEST_DIMS,
                (jobs_per_chunk, len(CRITERIA), len(OVERALL_DIMS)),
            ),
            (
                {"overall_step_time": OVERALL_VARIABLES["overall_step_time"]},
                OVERALL_STEP_DIMS,
                (jobs_per_chunk, len(CRITERIA)),
            ),
        ]
        if not self.reduce_only:  # the factors of the derived variables, chunked as the small variables
            groups[:0] = [(CUBE_VARIABLES, names, cube_chunk)] + [
                ({name: (dtype, units, long_name)}, dims, (jobs_per_chunk, grid.shape[DIMS.index(dims[1])]))
                for name, (dims, dtype, units, long_name) in FACTOR_VARIABLES.items()
            ]
        for variables, dims, chunks in groups:
            for name, (dtype, units, long_name) in variables.items():
                fill = np.nan if np.dtype(dtype).kind == "f" else None
                var = f.create_variable(name, dims, dtype=dtype, chunks=chunks, fillvalue=fill, **filters)
                var.attrs.update(units=units, long_name=long_name)
                if name in FLAG_ATTRS:
                    values, meanings = FLAG_ATTRS[name]
                    var.attrs.update(flag_values=np.array(values, dtype=np.uint8), flag_meanings=" ".join(meanings))
        f.variables["best_index"].attrs["flat_index"] = "(arch * n_intra + intra) * n_network + network"
        done = f.create_variable("block_done", ("block",), dtype=np.uint8, data=np.zeros(len(self.blocks), np.uint8))
        done.attrs.update(units="1", long_name="1 once the block is written and flushed")
        start = f.create_variable(
            "block_start", ("block",), dtype=np.int64, data=np.array([b[0] for b in self.blocks], np.int64)
        )
        start.attrs.update(units="1", long_name="index of the block's first job")

    def _create_llm(self, filters: dict) -> None:
        """The group ``llm``: its dimensions and coordinates (the layout degrees as coordinate
        variables over ``layout``), per-job and per-GPU metadata, the cells (full sweeps), the
        bests over the layout axis and ``block_done``."""
        import h5py

        from paigrid.llm.parallelism import CUBE_REASON_NAMES, DEGREES, layout_label, space_to_table

        llm = self.llm
        g = self.file.create_group("llm")
        text = h5py.string_dtype()
        g.dimensions = {
            **dict(zip(LLM_DIMS, llm.shape)),
            "reason": len(CUBE_REASON_NAMES),
            "block": len(self.llm_blocks),
        }
        labels = {
            "job": [j.name for j in llm.jobs],
            "layout": [layout_label(lay, with_dp=False) for lay in llm.layouts],
            "gpu": llm.gpu,
            "network": llm.network,
            "precision": llm.precision,
            "reason": CUBE_REASON_NAMES,
        }
        for dim, values in labels.items():
            g.create_variable(dim, (dim,), dtype=text, data=_strings(values)).attrs["units"] = "1"
        for dim, long_name in (("n_gpu", "GPUs in the job"), ("domain", "GPUs per NVLink domain")):
            var = g.create_variable(dim, (dim,), dtype=np.int32, data=np.asarray(getattr(llm, dim), np.int32))
            var.attrs.update(units="GPUs", long_name=long_name)
        degree_units = {
            "tp": "GPUs",
            "pp": "stages",
            "cp": "GPUs",
            "ep": "GPUs",
            "vpp": "stages per GPU",
            "micro_batch": "sequences",
            "zero": "stage",
            "sp": "1",
        }
        degrees = [d for d in DEGREES if d not in ("dp", "recompute")]
        for name in degrees:
            values = [int(bool(lay.sp and lay.tp > 1)) if name == "sp" else getattr(lay, name) for lay in llm.layouts]
            var = g.create_variable(name, ("layout",), dtype=np.int32, data=np.asarray(values, np.int32))
            var.attrs.update(units=degree_units[name], long_name=f"the layout's {name} (dp = n_gpu / (tp x pp x cp))")
        var = g.create_variable(
            "recompute", ("layout",), dtype=text, data=_strings(lay.recompute for lay in llm.layouts)
        )
        var.attrs.update(units="1", long_name="activation recomputation: none, selective or full")
        coordinates = " ".join([*degrees, "recompute"])
        per_job = {
            "model": (text, _strings(j.model.name for j in llm.jobs), "1", "LLM catalogue model"),
            "global_batch": (
                np.float64,
                [j.model.global_batch for j in llm.jobs],
                "sequences",
                "sequences per optimizer step (one sequence is one sample)",
            ),
            "seq_len": (np.float64, [j.model.seq_len for j in llm.jobs], "tokens/sample", "tokens per sequence"),
        }
        if any(j.current for j in llm.jobs):  # a population's LLM jobs: the design each runs on today
            for dim in ("gpu", "network", "precision"):
                per_job[f"current_{dim}"] = (
                    text,
                    _strings((j.current or {}).get(dim, "") for j in llm.jobs),
                    "1",
                    f"the job's {dim} today (empty: not given)",
                )
            per_job["current_n_gpu"] = (
                np.int32,
                [(j.current or {}).get("n_gpu", 0) for j in llm.jobs],
                "GPUs",
                "the job's GPU count today (0: not given)",
            )
        for name, (dtype, data, units, long_name) in per_job.items():
            var = g.create_variable(name, ("job",), dtype=dtype, data=np.asarray(data, dtype=dtype))
            var.attrs.update(units=units, long_name=long_name)
        cats = llm.cats
        per_gpu = {
            "intra": (text, _strings(llm.intra), "1", "the GPU's intra-domain link (links.csv)"),
            "gpus_per_node": (np.int32, llm.gpus_per_node, "GPUs", "GPUs per server"),
            "price": (
                np.float64,
                [cats.gpus.number(x, "price_USD_per_gpu_hour") for x in llm.gpu],
                "USD/GPU-hour",
                "gpus catalogue column price_USD_per_gpu_hour",
            ),
            "power": (np.float64, [cats.gpus.number(x, "tdp_W") for x in llm.gpu], "W", "gpus catalogue column tdp_W"),
        }
        for name, (dtype, data, units, long_name) in per_gpu.items():
            var = g.create_variable(name, ("gpu",), dtype=dtype, data=np.asarray(data, dtype=dtype))
            var.attrs.update(units=units, long_name=long_name)
        flags = dict(
            flag_values=np.arange(len(CUBE_REASON_NAMES), dtype=np.uint8),
            flag_meanings=" ".join(n.replace("-", "_") for n in CUBE_REASON_NAMES),
        )
        fields = result_fields()
        if not self.reduce_only:
            chunks = llm_chunk_shape(llm)
            for name, (_, units) in fields.items():
                var = g.create_variable(name, LLM_DIMS, dtype=np.float32, chunks=chunks, fillvalue=np.nan, **filters)
                var.attrs.update(
                    units=units, long_name=f"{name} of the layout on the design (NaN: invalid)", coordinates=coordinates
                )
            var = g.create_variable("invalid_reason", LLM_DIMS, dtype=np.uint8, chunks=chunks, **filters)
            var.attrs.update(
                units="1",
                long_name="why the layout cannot run on the design; 0 where it can",
                coordinates=coordinates,
                **flags,
            )
        best_chunks = (1, *llm.shape[2:])
        var = g.create_variable("best_layout", LLM_BEST_DIMS, dtype=np.int32, chunks=best_chunks, **filters)
        var.attrs.update(units="1", long_name="index on the layout axis of the fastest valid layout, -1 if none")
        for name, (_, units) in fields.items():
            var = g.create_variable(
                f"best_{name}", LLM_BEST_DIMS, dtype=np.float64, chunks=best_chunks, fillvalue=np.nan, **filters
            )
            var.attrs.update(units=units, long_name=f"{name} of the fastest valid layout (NaN: none)")
        var = g.create_variable(
            "layouts_by_reason",
            (*LLM_BEST_DIMS, "reason"),
            dtype=np.int32,
            chunks=(*best_chunks, len(CUBE_REASON_NAMES)),
            **filters,
        )
        var.attrs.update(units="layouts", long_name="layouts of the axis per reason code (reason 0: valid)")
        done = g.create_variable(
            "block_done", ("block",), dtype=np.uint8, data=np.zeros(len(self.llm_blocks), np.uint8)
        )
        done.attrs.update(units="1", long_name="1 once the block (one job at one GPU count) is written and flushed")
        for k, name in enumerate(("block_job", "block_n_gpu")):
            var = g.create_variable(
                name, ("block",), dtype=np.int32, data=np.array([b[k] for b in self.llm_blocks], np.int32)
            )
            var.attrs.update(units="1", long_name=f"index of the block's {name[6:]}")
        g.attrs.update(
            family="llm",
            title="paigrid LLM design space",
            layout_grammar=(
                "tp{t}-pp{p}-v{v}-cp{c}-ep{e}-mb{m}-zero{z}-{none|selective|full}-{sp|nosp}; "
                "dp = n_gpu / (tp x pp x cp)"
            ),
            nics_per_gpu=llm.nics_per_gpu,
            space=json.dumps(space_to_table(llm.space)),
            options=json.dumps({k: v for k, v in vars(llm.options).items()}),
            reason_sentences="paigrid.llm.parallelism.reason_text says each code in words",
        )

    def _record_device(self, device: str) -> None:
        """A resumed cube's ``device`` attribute: where each part was computed, when that changed."""
        before = str_attr(self.file.attrs, "device") if "device" in self.file.attrs else "not recorded"
        if before.split("; resumed on ")[-1] != device:
            self.file.attrs["device"] = f"{before}; resumed on {device}"

    def _metadata(self, text) -> None:
        f, grid = self.file, self.grid
        w = grid.cats.workloads
        jobs = grid.jobs
        per_job = {
            "model": (text, _strings(j.model for j in jobs), "1", "workload catalogue name"),
            "batch": (np.float64, [j.batch for j in jobs], "samples", "per-GPU batch of one micro-batch"),
            "samples_per_step": (
                np.float64,
                [j.batch * j.options["grad_accum_steps"] for j in jobs],
                "samples",
                "per-GPU samples of one optimizer step",
            ),
            "tokens_per_sample": (
                np.float64,
                _per_model(jobs, lambda m: _tokens(w, m)),
                "tokens/sample",
                "tokens (or frames) per sample; throughput per token = throughput x this",
            ),
            "sample_unit": (
                text,
                _strings(_per_model(jobs, lambda m: w.row(m).get("sample_unit", "sample"))),
                "1",
                "what one sample is",
            ),
        }
        for option, units in (
            ("gpus_per_node", "1"),
            ("nics_per_node", "1"),
            ("grad_accum_steps", "1"),
            ("overlap", "1"),
        ):
            per_job[option] = (np.float64, [j.options[option] for j in jobs], units, f"the job's {option} option")
        for dim in ("arch", "gpu", "intra", "network", "precision"):
            per_job[f"current_{dim}"] = (
                text,
                _strings((j.current or {}).get(dim, "") for j in jobs),
                "1",
                f"the job's current {dim} (empty: none given)",
            )
        per_job["current_n_gpu"] = (
            np.int32,
            [(j.current or {}).get("n_gpu", 0) for j in jobs],
            "1",
            "the job's current GPU count (0: none given)",
        )
        for name, (dtype, data, units, long_name) in per_job.items():
            var = f.create_variable(name, ("job",), dtype=dtype, data=np.asarray(data, dtype=dtype))
            var.attrs.update(units=units, long_name=long_name)
        name, dtype, units, long_name = BAND_VARIABLE
        var = f.create_variable(name, BAND_DIMS, dtype=dtype, data=prediction_bands(grid))
        var.attrs.update(units=units, long_name=long_name, model=grid_model(grid))
        for name, column, units in (("price", "price_USD_per_gpu_hour", "USD/GPU-hour"), ("power", "tdp_W", "W")):
            var = f.create_variable(
                name, ("gpu",), dtype=np.float64, data=np.array([grid.cats.gpus.number(g, column) for g in grid.gpu])
            )
            var.attrs.update(units=units, source=f"gpus catalogue column {column}")

    def write_current(self, values: dict[str, np.ndarray]) -> None:
        """Store the predicted step time [s] and throughput [samples/s] of each job's current configuration."""
        units = {"current_step_time": "s", "current_throughput": "samples/s", "current_cost": "USD/1e6 samples"}
        for name, data in values.items():
            if name in self.file.variables:
                self.file.variables[name][:] = data
            else:
                var = self.file.create_variable(name, ("job",), dtype=np.float64, data=data)
                var.attrs.update(units=units[name], long_name=f"{name.replace('_', ' ')} predicted by the model")
        self.flush()

    def _publish(self) -> None:
        """Put the new file on disk and rename it to PATH.partial (an open HDF5 file keeps its
        descriptor across the rename)."""
        fd = os.open(self.creating, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(self.creating, self.tmp)
        sync_folder(self.tmp.parent if str(self.tmp.parent) else ".")
        self.creating = None
        fault_point("after-create")

    def _check_blocks(self) -> None:
        """Refuse to resume a file whose blocks are not this sweep's (made by a paigrid that sized
        blocks differently)."""
        if self.llm is not None:
            from paigrid.llm.parallelism import layout_label

            stored = decode_strings(self.h5["llm/layout"][:]) if "llm/layout" in self.h5 else []
            if stored != [layout_label(lay, with_dp=False) for lay in self.llm.layouts]:
                raise PaigridError(
                    f"{self.tmp} was started with another LLM layout axis; resume it with the paigrid "
                    "that started it, or delete it to start over."
                )
        if self.grid is None:
            return
        stored = np.asarray(self.file.variables["block_start"][:], dtype=np.int64)
        if not np.array_equal(stored, np.array([b[0] for b in self.blocks], np.int64)):
            raise PaigridError(
                f"{self.tmp} was started with other blocks of jobs ({len(stored)} blocks, this "
                f"sweep makes {len(self.blocks)}); resume it with the paigrid that started it, or "
                "delete it to start over."
            )

    def _check_resumable(self, provenance: dict, attrs) -> None:
        if format_version(attrs) != FORMAT_VERSION:
            raise PaigridError(
                f"{self.tmp} was started in cube format {format_version(attrs)} and this paigrid "
                f"writes format {FORMAT_VERSION}; delete it to start over."
            )
        # every input file (workloads or population, catalogues, calibration; the spec last, after
        # its content) must be as it was
        changed = self._changed_inputs(provenance, attrs)
        if changed and changed[0][0] != "spec":
            self._refuse_changed(*changed[0])
        for key, value in provenance.items():
            if key == "input_sha256":
                continue
            stored = str_attr(attrs, key) if key in attrs else None
            expected = json.dumps(value) if not isinstance(value, str) else value
            if stored != expected:
                what = _difference(stored, value)
                raise PaigridError(
                    f"{self.tmp} was started with a different {key}{' (' + what + ')' if what else ''}; "
                    "resume it with the same spec, options and catalogues, or delete it to start over."
                )
        if changed:
            self._refuse_changed(*changed[0])
        started = str_attr(attrs, "compression") if "compression" in attrs else None
        if started is not None and self.compression != started:
            raise PaigridError(
                f"{self.tmp} was started with --compression {started}; resume it with --compression "
                f"{started} (its chunks are encoded so), or delete it to start over."
            )
        if str_attr(attrs, "mode") != ("reduce-only" if self.reduce_only else "full"):
            raise PaigridError(f"{self.tmp} was started in {str_attr(attrs, 'mode')} mode; resume it in the same mode.")

    def _changed_inputs(self, provenance: dict, attrs) -> list[tuple[str, dict]]:
        """(role, {"path", "sha256"}) of the input files whose sha256 differs from the one the
        partial file recorded (an input it did not have counts as changed), the spec last."""
        stored = _json_attr(attrs, "input_sha256")
        stored = stored if isinstance(stored, dict) else {}
        current = provenance.get("input_sha256", {})
        changed = [
            (role, entry)
            for role, entry in current.items()
            if not isinstance(stored.get(role), dict) or stored[role].get("sha256") != entry["sha256"]
        ]
        changed += [(role, entry) for role, entry in stored.items() if role not in current and isinstance(entry, dict)]
        return sorted(changed, key=lambda item: item[0] == "spec")

    def _refuse_changed(self, role: str, entry: dict) -> None:
        raise PaigridError(
            f"{entry.get('path', role)} (the {role} file) is not the file {self.tmp} was started "
            f"with (its sha256 differs); resume with the file as it was, or delete {self.tmp} to "
            "start over."
        )

    # --- writing ----------------------------------------------------------------------------
    def pending_llm(self) -> list[int]:
        """Indices of the LLM blocks (``LlmGrid.blocks``) not yet written."""
        return [i for i, done in enumerate(self.llm_done) if not done]

    def write_llm_block(self, index: int, results: np.ndarray, reason: np.ndarray, bests: dict) -> None:
        """Write one LLM block (``llm.grid.evaluate_llm_block`` and ``best_over_layouts``); it is
        marked done by the next ``commit``, due after ``flush_seconds`` as for the other blocks."""
        j, ni = self.llm_blocks[index]
        fields = result_fields()
        if not self.reduce_only:
            for name, (k, _) in fields.items():
                self.llm_sets[name][j, :, :, ni] = results[..., k].astype(np.float32)
            self.llm_sets["invalid_reason"][j, :, :, ni] = reason
        self.llm_sets["best_layout"][j, :, ni] = bests["best_layout"]
        for name, (k, _) in fields.items():
            self.llm_sets[f"best_{name}"][j, :, ni] = bests["best"][..., k]
        self.llm_sets["layouts_by_reason"][j, :, ni] = bests["by_reason"]
        self.unflushed_llm.append(index)
        if time.monotonic() - self.last_flush >= self.flush_seconds:
            self.commit()

    def pending(self) -> list[int]:
        """Indices of the blocks not yet written."""
        return [i for i, done in enumerate(self.done) if not done]

    def write_block(self, block: Block) -> list[int]:
        """Write a block's arrays and encoded chunks; commit (``commit``) the blocks written so
        far when ``flush_seconds`` have passed since the last flush.  Returns the blocks that
        this call marked done (empty when the flush is not due yet)."""
        for name, data in block.arrays.items():
            self.datasets[name][block.start : block.stop] = data
        if block.chunks:  # the chunks in the order encode_cube made them, from the block's first job
            corners = chunk_corners((block.stop - block.start, *self.grid.shape[1:]), self.chunks)
        for name, chunks in block.chunks.items():
            dataset = self.datasets[name]
            for corner, chunk in zip(corners, chunks, strict=True):
                dataset.id.write_direct_chunk((block.start + corner[0], *corner[1:]), chunk)
        self.unflushed.append(block.index)
        if time.monotonic() - self.last_flush >= self.flush_seconds:
            return self.commit()
        return []

    @property
    def blocks_written(self) -> int:
        """The blocks of both families in the file, flushed and marked done or not (what a sweep's
        progress counts)."""
        return int(self.done.sum() + self.llm_done.sum()) + len(self.unflushed) + len(self.unflushed_llm)

    def commit(self) -> list[int]:
        """Flush the blocks written since the last commit, then mark them done and flush again:
        a block is marked done on disk only after its data is there, so a crash at any moment
        never half-marks one (an unmarked block is redone on resume).  Returns those blocks."""
        blocks, self.unflushed = self.unflushed, []
        llm_blocks, self.unflushed_llm = self.unflushed_llm, []
        if not blocks and not llm_blocks:
            return []
        self.flush()
        for written, marks_at in (
            (blocks, self.datasets.get("block_done")),
            (llm_blocks, self.llm_sets.get("block_done")),
        ):
            if not written:
                continue
            lo, hi = min(written), max(written) + 1
            marks = marks_at[lo:hi]  # one read and one write for the whole range
            marks[np.asarray(written) - lo] = 1
            marks_at[lo:hi] = marks
        self.flush()
        self.done[blocks] = True
        self.llm_done[llm_blocks] = True
        self.last_flush = time.monotonic()
        return blocks

    def flush(self) -> None:
        """Put everything written so far on disk, HDF5 metadata included."""
        self.file.flush()  # h5netcdf's own bookkeeping (attributes, dimension scales)
        self.h5.flush()  # h5netcdf's flush does not flush the HDF5 file itself

    def finish(self) -> Path:
        """Mark the file complete, close it and rename it to its final name."""
        self.commit()
        if not self.done.all() or not self.llm_done.all():
            raise PaigridError(f"{len(self.pending()) + len(self.pending_llm())} blocks are not written yet.")
        self.file.attrs["complete"] = 1
        self.file.close()
        self.h5.close()
        fault_point("before-finish")
        # a cube replacing a file keeps that file's permissions; a new one gets the usual ones
        os.chmod(self.tmp, new_file_mode(self.path))
        os.replace(self.tmp, self.path)
        sync_folder(self.path.parent if str(self.path.parent) else ".")
        return self.path

    def abandon(self) -> None:
        """Give the file up without closing it, after HDF5 failed to write it (a full disk): the
        library could crash trying to flush it again.  Blocks flushed before stay on disk; the
        process should exit soon (``os._exit``) without running HDF5's own clean-up."""
        self.abandoned = (self.file, self.h5)  # kept referenced: never deallocated (and flushed) here
        self.creating = None

    def close(self) -> None:
        """Close without finishing (the ``.partial`` file stays, resumable)."""
        # closing after a failed write may fail too: the partial file's unfinished blocks are redone on resume
        with contextlib.suppress(Exception):
            self.file.close()
        with contextlib.suppress(Exception):
            self.h5.close()
        if self.creating is not None:  # never published: nothing to resume
            with contextlib.suppress(OSError):
                os.unlink(self.creating)


def creating_path(path: str | Path) -> Path:
    """The hidden name a new cube has until it is renamed to PATH.partial (one writer at a time
    holds PATH.lock, so one such file per output)."""
    path = Path(path)
    return path.with_name(f".{path.name}.creating")


def _per_model(jobs, value) -> list:
    """``value(model)`` of each job's model, computed once per distinct model."""
    cache: dict = {}
    return [cache[j.model] if j.model in cache else cache.setdefault(j.model, value(j.model)) for j in jobs]


def _json_attr(attrs, name: str):
    value = attrs.get(name)
    if isinstance(value, bytes):
        value = value.decode()
    try:
        return json.loads(value) if isinstance(value, str) else {}
    except ValueError:
        return {}


def _tokens(workloads, model: str) -> float:
    value = workloads.number(model, "tokens_per_sample") if "tokens_per_sample" in workloads.columns else 1.0
    return 1.0 if math.isnan(value) else value


def _difference(stored: str | None, now) -> str:
    """What differs between a provenance value a partial file recorded (JSON text, or a plain
    string) and this sweep's ``now``, in words ("options.overlap: 0.5 then, 0.3 now"), at most
    three differences named; "" when it cannot tell."""
    from paigrid.errors import listing, quoted

    try:
        before = json.loads(stored) if stored is not None else None
    except ValueError:
        before = stored
    if not isinstance(now, (dict, list)) and isinstance(before, (dict, list)):
        return ""
    found: list[str] = []

    def walk(a, b, where: str) -> None:
        if isinstance(a, dict) and isinstance(b, dict):
            for key in list(dict.fromkeys([*a, *b])):
                walk(a.get(key, "(not set)"), b.get(key, "(not set)"), f"{where}.{key}" if where else str(key))
        elif a != b:
            found.append(f"{where or 'the value'}: {quoted(a)} then, {quoted(b)} now")

    walk(before, now, "")
    return listing(found, 3, "other differences")
