"""Run the model kernel on a block of jobs, or on one configuration.

``evaluate_block`` allocates the outputs of one block and calls the numba kernel (or the numpy
reference, for the benchmark).  ``Block`` is what a worker sends to the writer.  The kernel has
two compilations of one body (``paigrid.kernels.model``): ``kernel_for`` picks the serial one for
calls of at most ``SERIAL_MAX_CONFIGS`` configurations and the parallel one above.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from paigrid.inputs.kernel_tables import Grid, KernelTables
from paigrid.kernels import dp_columns as L
from paigrid.llm.grid import LlmGrid, best_over_layouts, evaluate_llm_block
from paigrid.schema import (
    BEST_VARIABLES,
    CRITERIA,
    CUBE_VARIABLES,
    FACTOR_VARIABLES,
    JOB_GPU_VARIABLES,
    OVERALL_DIMS,
    decode_best,
)

#: a kernel call over at most this many configurations runs the serial compilation: it evaluates
#: about 10^8 configurations/s on one core, so up to here a call takes under a millisecond, which
#: is about what starting and joining the parallel thread pool costs on a many-core or busy machine
SERIAL_MAX_CONFIGS = 50_000


def kernel_for(configs: int):
    """The compiled block kernel for one call over ``configs`` configurations:
    ``model.evaluate_block_serial`` up to ``SERIAL_MAX_CONFIGS``, ``model.evaluate_block``
    (parallel over jobs x GPUs) above.  Both give the same numbers."""
    from paigrid.kernels import model

    return model.evaluate_block_serial if configs <= SERIAL_MAX_CONFIGS else model.evaluate_block


@dataclass
class Block:
    """The outputs of jobs[start:stop]: reductions and small variables as arrays, and the cube
    variables either as arrays or, once encoded, as their compressed chunks (bytes, in
    ``codecs.chunk_corners`` order over the block's jobs)."""

    index: int
    start: int
    stop: int
    arrays: dict[str, np.ndarray]
    chunks: dict[str, list[bytes]] = field(default_factory=dict)


def allocate(grid: Grid | KernelTables, n_jobs: int, write_cube: bool) -> dict[str, np.ndarray]:
    """Output arrays for ``n_jobs`` jobs (cube arrays are 1-element dummies in reduce-only mode)."""
    _, a, g, n, i, w, p = grid.shape
    full = (n_jobs, a, g, n, i, w, p) if write_cube else (1,) * 7
    out = {name: np.empty(full, dtype) for name, (dtype, _, _) in CUBE_VARIABLES.items()}
    # the kernel reads these back for every configuration, so they are computed in float64
    # (h5py rounds them to the stored float32 on write)
    out.update(
        {
            name: np.empty((n_jobs, g, p), np.float64 if np.dtype(dtype).kind == "f" else dtype)
            for name, (dtype, _, _) in JOB_GPU_VARIABLES.items()
        }
    )
    out.update({name: np.empty((n_jobs, g, n, p), dtype) for name, (dtype, _, _) in BEST_VARIABLES.items()})
    return out


def run_kernel(
    kernel, grid: Grid | KernelTables, jobs: np.ndarray, n_gpu: np.ndarray, write_cube: bool, out: dict[str, np.ndarray]
) -> None:
    """Call ``kernel`` (``model.evaluate_block``, ``model.evaluate_block_serial`` or
    ``reference.evaluate_block``) on the job table ``jobs`` (J, N_JOB_FIELDS) and GPU counts
    ``n_gpu`` (J, N) over ``grid``'s tables, into ``out`` (from ``allocate``).  First the
    compute model (``compute_terms`` of ``kernels.model``, or of ``kernels.reference`` for the
    reference kernel) fills the per-(job, gpu, precision) terms that the block kernel reads."""
    from paigrid.kernels import model, reference

    compute = reference.compute_terms if kernel is reference.evaluate_block else model.compute_terms
    class_peak = grid.class_peak
    if class_peak is None:  # pai-v1 tables: the operator-class table is not read
        class_peak = np.full((*grid.peak.shape, L.N_CLASSES), np.nan)
    compute(
        jobs,
        grid.gpu_table,
        grid.peak,
        class_peak,
        grid.prec_table,
        grid.options,
        *(out[name] for name in JOB_GPU_VARIABLES),
    )
    kernel(
        jobs,
        n_gpu,
        grid.arch_codes,
        grid.gpu_table,
        grid.peak,
        grid.prec_table,
        grid.intra_table,
        grid.intra_fits,
        grid.network_table,
        grid.options,
        write_cube,
        *(out[name] for name in CUBE_VARIABLES),
        *(out[name] for name in JOB_GPU_VARIABLES),
        *(out[name] for name in BEST_VARIABLES),
    )


def evaluate_block(
    grid: Grid,
    index: int,
    start: int,
    stop: int,
    write_cube: bool = True,
    buffers: dict[str, np.ndarray] | None = None,
    compression: str | None = None,
    chunks: int | tuple[int, ...] = 1,
    threads: int | None = None,
) -> Block:
    """Evaluate jobs[start:stop] of ``grid`` with the numba kernel (``kernel_for`` its size).

    ``buffers`` (from ``allocate`` for at least ``stop - start`` jobs) are reused instead of new
    arrays: fresh arrays cost a page fault per 4 KiB on first touch, a good part of a block's time.
    With ``compression`` (a ``codecs.COMPRESSIONS`` name) the cube variables come back encoded
    in chunks of shape ``chunks`` (``cube_chunks``), compressed in parallel threads; the buffers are then
    free again on return.  ``threads``: numba's thread count for this call's thread (kernel and
    compression; None: as it is, at most ``NUMBA_NUM_THREADS``).
    """
    block = compute_block(grid, index, start, stop, write_cube, buffers, threads)
    return release_buffers(block, compression, chunks, buffers is not None)


def compute_block(
    grid: Grid,
    index: int,
    start: int,
    stop: int,
    write_cube: bool,
    buffers: dict[str, np.ndarray] | None,
    threads: int | None = None,
) -> Block:
    """The kernel part of ``evaluate_block`` (same arguments): the block's arrays are left in
    ``buffers`` (views), so they must be handed over (``release_buffers``) before the buffers
    serve another block."""
    if threads is not None:
        import numba

        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    kernel = kernel_for((stop - start) * math.prod(grid.shape[1:]))
    jobs, n_gpu = grid.job_rows(start, stop)
    if buffers is None:
        out = allocate(grid, stop - start, write_cube)
    else:  # leading-axis slices of C-contiguous arrays stay contiguous (reduce-only: dummies as they are)
        out = {
            name: array if name in CUBE_VARIABLES and not write_cube else array[: stop - start]
            for name, array in buffers.items()
        }
    run_kernel(kernel, grid, jobs, n_gpu, write_cube, out)
    if not write_cube:
        out = {k: v for k, v in out.items() if k not in CUBE_VARIABLES}
    else:
        out.update(step_factor_arrays(jobs, n_gpu, grid.gpu_table))
    out["overall_best"], out["overall_step_time"] = _block_overall_best(grid, jobs, n_gpu, out)
    return Block(index, start, stop, out)


def _block_overall_best(grid: Grid, jobs: np.ndarray, n_gpu: np.ndarray, out: dict[str, np.ndarray]):
    """``overall_best`` of a block's per-job bests in ``out`` (its job rows ``jobs``, GPU counts
    ``n_gpu``)."""
    return overall_best(
        out["best_step_time"],
        out["best_index"],
        n_gpu,
        jobs[:, L.J_BATCH] * jobs[:, L.J_ACCUM],
        grid.gpu_table[:, L.G_PRICE],
        len(grid.intra),
        len(grid.network),
    )


def load_kernels(grid: Grid, configs: int, write_cube: bool) -> None:
    """Load (from numba's cache, or compile) the kernels that ``compute_block`` calls on a block
    of ``configs`` configurations, by calling them on no job: so that a caller can pay the
    loading (numba's start, about 0.3 s of CPU holding the GIL) before it starts the blocks,
    rather than while its other threads compete for the GIL."""
    kernel = kernel_for(configs)
    jobs, n_gpu = grid.job_rows(0, 0)
    out = allocate(grid, 0, write_cube)
    run_kernel(kernel, grid, jobs, n_gpu, write_cube, out)
    _block_overall_best(grid, jobs, n_gpu, out)


def release_buffers(block: Block, compression: str | None, chunks: int | tuple[int, ...], in_buffers: bool) -> Block:
    """Encode ``block``'s cube arrays when ``compression`` is given (``encode_cube``) and, when
    its arrays are views of reused buffers (``in_buffers``), replace them by copies, so that the
    buffers are free for the next block.  Returns the block."""
    if compression is not None and any(name in block.arrays for name in CUBE_VARIABLES):
        encode_cube(block, compression, chunks)
    if in_buffers:
        block.arrays = {name: np.array(array) for name, array in block.arrays.items()}
    return block


def step_factor_arrays(jobs: np.ndarray, n_gpu: np.ndarray, gpu_table: np.ndarray) -> dict[str, np.ndarray]:
    """The stored factors of throughput, cost and energy (``schema.FACTOR_VARIABLES``) of the
    job rows ``jobs`` (J, N_JOB_FIELDS) at GPU counts ``n_gpu`` (J, N) over the GPU table
    (``kernels.model.step_factors``: float64, the kernel's formulas)."""
    from paigrid.kernels.model import step_factors

    return dict(zip(FACTOR_VARIABLES, step_factors(jobs, n_gpu, gpu_table)))


def cube_chunks(shape: tuple[int, ...], chunks: int | tuple[int, ...]) -> tuple[int, ...]:
    """The chunk shape of cube variables of ``shape``: ``chunks`` itself (a chunk shape, from
    ``store.cube_chunk_shape``), or for an int that many jobs with every other dimension whole."""
    if isinstance(chunks, (int, np.integer)):
        return (int(chunks), *shape[1:])
    return tuple(int(c) for c in chunks)


def encode_cube(block: Block, compression: str, chunks: int | tuple[int, ...]) -> None:
    """Replace the block's cube arrays by compressed chunks of shape ``chunks`` (``cube_chunks``),
    one list per variable in ``codecs.chunk_corners`` order over the block's jobs, in parallel
    threads (the codecs release the GIL; see ``codecs.chunk_encoder``).  A chunk past the end of
    a dimension is padded to the full chunk shape, as HDF5 stores edge chunks.
    """
    from concurrent.futures import ThreadPoolExecutor

    import numba

    from paigrid.codecs import chunk_corners, chunk_encoder

    encode = chunk_encoder(compression)
    names = [name for name in CUBE_VARIABLES if name in block.arrays]
    if not names:
        return
    shape = cube_chunks(block.arrays[names[0]].shape, chunks)
    corners = chunk_corners((block.stop - block.start, *block.arrays[names[0]].shape[1:]), shape)
    pieces = [(name, corner) for name in names for corner in corners]

    def encode_piece(piece):
        name, corner = piece
        array = block.arrays[name]
        data = array[tuple(slice(c, c + n) for c, n in zip(corner, shape))]
        if data.shape != shape:
            padded = np.zeros(shape, array.dtype)
            padded[tuple(slice(0, n) for n in data.shape)] = data
            data = padded
        return encode(np.ascontiguousarray(data))

    with ThreadPoolExecutor(max_workers=numba.get_num_threads()) as pool:
        encoded = list(pool.map(encode_piece, pieces))
    for name in names:
        del block.arrays[name]
    for (name, _), chunk in zip(pieces, encoded):
        block.chunks.setdefault(name, []).append(chunk)


def overall_best(best_step, best_index, n_gpu, samples_per_step, price, n_intra, n_network):
    """Best configuration of each job over everything, from the per-(gpu, n_gpu, precision) bests.

    ``best_step`` (J, G, N, P) [s], ``best_index`` (J, G, N, P) (``decode_best``'s flat
    indices), ``n_gpu`` (J, N), ``samples_per_step`` (J,), ``price`` (G,) [USD/GPU-hour].
    Criteria: time per sample (``kernels.model.time_per_sample``) and cost per sample
    (``kernels.model.cost_per_sample``: ``cost_per_step_second`` x step); ties go to the first
    in (gpu, n_gpu, precision) order, as in ``paigrid.query``.  Returns indices (J, 2, 6) in
    ``OVERALL_DIMS`` order (-1: no feasible configuration) and their step times (J, 2) [s].
    Computed by the compiled ``kernels.overall.overall_bests`` in one pass (a block's bests in
    about a millisecond, where ``overall_best_reference``'s numpy takes about ten); the same
    numbers as ``overall_best_reference``.
    """
    from paigrid.kernels.overall import overall_bests

    n_jobs = best_step.shape[0]
    index = np.empty((n_jobs, len(CRITERIA), len(OVERALL_DIMS)), dtype=np.int32)
    step = np.empty((n_jobs, len(CRITERIA)))
    overall_bests(
        np.ascontiguousarray(best_step, dtype=np.float64),
        np.ascontiguousarray(best_index, dtype=np.int32),
        np.ascontiguousarray(n_gpu, dtype=np.float64),
        np.ascontiguousarray(samples_per_step, dtype=np.float64),
        np.ascontiguousarray(price, dtype=np.float64),
        int(n_intra),
        int(n_network),
        index,
        step,
    )
    return index, step


def overall_best_reference(best_step, best_index, n_gpu, samples_per_step, price, n_intra, n_network):
    """``overall_best`` in numpy (the reference its compiled kernel is tested against): the
    metrics of every (gpu, n_gpu, precision) best as whole arrays, NaN as +inf, ``np.argmin``."""
    from paigrid.kernels import model

    n_jobs, n_gpus, n_counts, n_prec = best_step.shape
    samples = samples_per_step[:, None, None, None]
    # the kernels' scalar formulas, applied here to whole arrays (their plain Python bodies)
    metrics = (
        _formula(model.time_per_sample)(best_step, n_gpu[:, None, :, None], samples),
        _formula(model.cost_per_step_second)(price[None, :, None, None], samples) * best_step,
    )
    index = np.full((n_jobs, len(CRITERIA), len(OVERALL_DIMS)), -1, dtype=np.int32)
    step = np.full((n_jobs, len(CRITERIA)), np.nan)
    for c, metric in enumerate(metrics):
        flat = np.where(np.isnan(metric), np.inf, metric).reshape(n_jobs, -1)
        k = np.argmin(flat, axis=1)
        found = np.isfinite(flat[np.arange(n_jobs), k])
        g, n, p = np.unravel_index(k, (n_gpus, n_counts, n_prec))
        a, i, w = decode_best(best_index[np.arange(n_jobs), g, n, p], n_intra, n_network)
        index[:, c] = np.where(found[:, None], np.stack([a, g, n, i, w, p], axis=1), -1)
        step[:, c] = np.where(found, best_step[np.arange(n_jobs), g, n, p], np.nan)
    return index, step


def _formula(kernel):
    """The plain Python body of a ``@jit`` scalar formula of ``kernels`` (itself without the JIT),
    which numpy applies to whole arrays with the kernel's operations in the kernel's order."""
    return getattr(kernel, "py_func", kernel)


# --- the LLM family's blocks -------------------------------------------------------------------
@dataclass
class LlmBlock:
    """One evaluated LLM block (one job at one GPU count, ``LlmGrid.blocks``): its ``index``,
    the cells (``results`` float32 (layout, gpu, domain, network, precision, fields), None for a
    reduce-only sweep; ``reason`` uint8 codes) and the per-design ``bests``
    (``llm.grid.best_over_layouts``)."""

    index: int
    results: np.ndarray | None
    reason: np.ndarray
    bests: dict


def compute_llm_block(llm: LlmGrid, index: int, write_cube: bool = True, threads: int | None = None) -> LlmBlock:
    """Evaluate the LLM block ``index`` and its bests (here, in a pipeline thread, or on a Dask
    worker): the cells are kept only for a full cube (``write_cube``), in float32 as the cube
    stores them; ``threads``: numba's thread count for the kernel (None: as it is)."""
    from paigrid.llm.parallelism import CUBE_REASON_NAMES

    if threads is not None:
        import numba

        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    results, reason = evaluate_llm_block(llm, *llm.blocks()[index])
    bests = best_over_layouts(results, reason, len(CUBE_REASON_NAMES))
    return LlmBlock(index, results.astype("float32") if write_cube else None, reason, bests)
