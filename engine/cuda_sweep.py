"""Sweep blocks on an NVIDIA GPU (``--device cuda``) with the kernels of ``paigrid.kernels.cuda``.

The grid's tables go to the GPU once.  The cube keeps the sweep's blocks (``jobs_per_block``, so
a sweep started on one device resumes on the other), but the GPU takes several consecutive
blocks per launch (``jobs_per_launch``: enough threads to fill a large GPU, and a bounded cube
buffer in a full sweep).  Per launch the job rows go up, the compute-terms kernel and the
configurations kernel run (the per-job reductions are folded on the GPU) and the outputs come
back into page-locked host buffers on one CUDA stream.  Two sets of host buffers alternate, so
while the GPU computes launch k+1 (and copies it back), a CPU thread compresses launch k and the
caller writes the blocks of launch k-1.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from paigrid.errors import PaigridError
from paigrid.evaluate import Block, allocate, encode_cube, overall_best, step_factor_arrays
from paigrid.inputs.kernel_tables import Grid
from paigrid.kernels import dp_columns as L
from paigrid.schema import BEST_VARIABLES, CUBE_VARIABLES, JOB_GPU_VARIABLES

#: threads a reduce-only launch aims at: enough to fill a large GPU (an H200 holds 132 x 2,048)
LAUNCH_THREADS = 2**20
#: most cube bytes per launch of a full sweep (on the GPU, and twice in page-locked host memory)
LAUNCH_CUBE_BYTES = 256 * 2**20


def cuda_kernels():
    """The loaded CUDA kernels (``paigrid.kernels.cuda.load``) once a GPU is known to be usable;
    a user error in one sentence where numba.cuda, the CUDA driver or a GPU is missing."""
    from paigrid.kernels import cuda as gpu_kernels

    try:
        kernels = gpu_kernels.load()
    except ImportError as exc:
        raise PaigridError(
            f"--device cuda needs numba's CUDA target, which does not import here ({exc}); install "
            "it with pip install 'paigrid[cuda]'."
        ) from None
    reason = _unavailable_reason(kernels.cuda)
    if reason:
        raise PaigridError(
            f"--device cuda needs an NVIDIA GPU with its driver and the CUDA toolkit, and {reason}; "
            "run on a GPU machine or use --device cpu."
        )
    return kernels


def _unavailable_reason(cuda) -> str:
    """Why numba.cuda cannot run kernels here ("" when it can)."""
    try:
        if cuda.is_available():
            return ""
    except Exception as exc:  # noqa: BLE001  (the driver's own errors vary by version)
        return f"numba.cuda found none ({' '.join(str(exc).split())[:200]})"
    return "numba.cuda found none (no CUDA driver or no GPU is visible to this process)"


def device_name(device: str) -> str:
    """What the cube's ``device`` attribute says: "cpu", or "cuda: " and the GPU's name."""
    if device != "cuda":
        return "cpu"
    cuda = cuda_kernels().cuda
    from numba.core import config

    if config.ENABLE_CUDASIM:
        return "cuda: numba CUDA simulator"
    name = cuda.get_current_device().name
    return f"cuda: {name.decode() if isinstance(name, bytes) else name}"


def jobs_per_launch(grid: Grid, write_cube: bool) -> int:
    """Jobs the GPU evaluates per launch: ``LAUNCH_THREADS`` threads' worth (one thread per
    (job, gpu, n_gpu, precision)), and in a full sweep at most ``LAUNCH_CUBE_BYTES`` of cube."""
    _, a, g, n, i, w, p = grid.shape
    jobs = -(-LAUNCH_THREADS // (g * n * p))
    if write_cube:
        per_job = a * g * n * i * w * p * sum(np.dtype(d).itemsize for d, _, _ in CUBE_VARIABLES.values())
        jobs = min(jobs, LAUNCH_CUBE_BYTES // per_job)
    return max(1, jobs)


def launches(blocks: list[tuple[int, int]], todo: list[int], most_jobs: int) -> list[list[int]]:
    """``todo`` (block indices) cut into runs of consecutive blocks of at most ``most_jobs`` jobs
    together (a block larger than that is a launch of its own)."""
    runs: list[list[int]] = []
    jobs = 0
    for i in todo:
        size = blocks[i][1] - blocks[i][0]
        if runs and runs[-1][-1] == i - 1 and jobs + size <= most_jobs:
            runs[-1].append(i)
            jobs += size
        else:
            runs.append([i])
            jobs = size
    return runs


@dataclass
class _Launched:
    """Blocks whose kernels and copies are queued on the stream (``bounds``: (index, start, stop)
    of each, consecutive from job ``start``); ``done`` fires when their outputs are in ``host``."""

    bounds: list[tuple[int, int, int]]
    start: int
    n_gpu: np.ndarray
    jobs: np.ndarray
    host: dict[str, np.ndarray]
    done: Any  # a numba.cuda event


class CudaBlocks:
    """The GPU state of one sweep: the grid's tables on the device, device outputs sized for the
    largest launch (``largest`` jobs), two sets of page-locked host buffers and one stream."""

    def __init__(self, grid: Grid, largest: int, write_cube: bool):
        self.kernels = cuda_kernels()
        cuda = self.kernels.cuda
        self.grid, self.write_cube = grid, write_cube
        self.stream = cuda.stream()
        class_peak = grid.class_peak
        if class_peak is None:  # pai-v1 tables: the operator-class table is not read
            class_peak = np.full((*grid.peak.shape, L.N_CLASSES), np.nan)
        tables = (
            grid.arch_codes,
            grid.gpu_table,
            grid.peak,
            class_peak,
            grid.prec_table,
            grid.intra_table,
            grid.intra_fits,
            grid.network_table,
            grid.options,
        )
        (
            self.arch,
            self.gpus,
            self.peak,
            self.class_peak,
            self.prec,
            self.intra,
            self.intra_fits,
            self.network,
            self.options,
        ) = (cuda.to_device(np.ascontiguousarray(t), stream=self.stream) for t in tables)
        shapes = allocate(grid, 0, write_cube)  # names, dtypes and trailing shapes
        self.device = {}
        self.host: list[dict[str, np.ndarray]] = [{}, {}]
        for name, array in shapes.items():
            shape = array.shape if name in CUBE_VARIABLES and not write_cube else (largest, *array.shape[1:])
            self.device[name] = cuda.device_array(shape, array.dtype, stream=self.stream)
            for host in self.host:
                host[name] = cuda.pinned_array(shape, array.dtype)
        self.turn = 0

    def run_kernels(self, jobs: np.ndarray, n_gpu: np.ndarray) -> dict:
        """Queue the job rows' upload and both kernels over ``jobs`` (J, N_JOB_FIELDS) and
        ``n_gpu`` (J, N); returns the device outputs (views of the first J jobs)."""
        cuda, k, s = self.kernels.cuda, self.kernels, self.stream
        n = len(jobs)
        d_jobs = cuda.to_device(np.ascontiguousarray(jobs), stream=s)
        d_counts = cuda.to_device(np.ascontiguousarray(n_gpu), stream=s)
        out = {
            name: array if name in CUBE_VARIABLES and not self.write_cube else array[:n]
            for name, array in self.device.items()
        }
        blocks, threads = launch_grid(n * len(self.grid.gpu_table))
        k.terms_kernel[blocks, threads, s](
            d_jobs,
            self.gpus,
            self.peak,
            self.class_peak,
            self.prec,
            self.options,
            *(out[name] for name in JOB_GPU_VARIABLES),
        )
        _, g, counts, _, _, _, p = self.grid.shape
        blocks, threads = launch_grid(n * g * counts * p)
        k.configurations_kernel[blocks, threads, s](
            d_jobs,
            d_counts,
            self.arch,
            self.gpus,
            self.peak,
            self.prec,
            self.intra,
            self.intra_fits,
            self.network,
            self.options,
            self.write_cube,
            *(out[name] for name in CUBE_VARIABLES),
            *(out[name] for name in JOB_GPU_VARIABLES),
            *(out[name] for name in BEST_VARIABLES),
        )
        return out

    def launch(self, bounds: list[tuple[int, int, int]]) -> _Launched:
        """Queue the consecutive blocks ``bounds`` ((index, start, stop) each): upload their job
        rows, run both kernels and copy the outputs back into the next set of host buffers;
        returns at once."""
        start, stop = bounds[0][1], bounds[-1][2]
        jobs, n_gpu = self.grid.job_rows(start, stop)
        out = self.run_kernels(jobs, n_gpu)
        host = self.host[self.turn]
        self.turn = 1 - self.turn
        copied = {}
        for name, array in out.items():
            if name in CUBE_VARIABLES and not self.write_cube:
                continue
            array.copy_to_host(host[name][: stop - start], stream=self.stream)
            copied[name] = host[name][: stop - start]
        done = self.kernels.cuda.event()
        done.record(self.stream)
        return _Launched(bounds, start, n_gpu, jobs, copied, done)

    def finish(self, launched: _Launched, compression: str | None, chunks: int | tuple[int, ...]) -> list[Block]:
        """Wait for a launch's outputs and cut them into its ``Block``s (cube chunks compressed
        with ``compression``), holding no reference to the host buffers."""
        launched.done.synchronize()
        grid = self.grid
        best, step = overall_best(
            launched.host["best_step_time"],
            launched.host["best_index"],
            launched.n_gpu,
            launched.jobs[:, L.J_BATCH] * launched.jobs[:, L.J_ACCUM],
            grid.gpu_table[:, L.G_PRICE],
            len(grid.intra),
            len(grid.network),
        )
        out = []
        for index, start, stop in launched.bounds:
            rows = slice(start - launched.start, stop - launched.start)
            arrays = {name: array[rows] for name, array in launched.host.items()}
            arrays["overall_best"], arrays["overall_step_time"] = best[rows], step[rows]
            if self.write_cube:
                arrays.update(step_factor_arrays(launched.jobs[rows], launched.n_gpu[rows], grid.gpu_table))
            block = Block(index, start, stop, arrays)
            if self.write_cube and compression is not None:
                encode_cube(block, compression, chunks)
            block.arrays = {name: np.array(array) for name, array in block.arrays.items()}
            out.append(block)
        return out


def launch_grid(threads: int) -> tuple[int, int]:
    """(blocks, threads per block) of a CUDA launch over ``threads`` threads."""
    from paigrid.kernels.cuda import launch_grid as grid_of

    return grid_of(threads)


def evaluate_block_cuda(
    grid: Grid,
    index: int,
    start: int,
    stop: int,
    write_cube: bool = True,
    compression: str | None = None,
    chunks: int | tuple[int, ...] = 1,
) -> Block:
    """``evaluate.evaluate_block`` on the GPU, for one block on its own (tests, the bench)."""
    gpu = CudaBlocks(grid, stop - start, write_cube)
    return gpu.finish(gpu.launch([(index, start, stop)]), compression, chunks)[0]


def run_cuda(
    grid: Grid,
    blocks,
    todo: list[int],
    write_cube: bool,
    compression: str,
    chunks: int | tuple[int, ...],
    threads: int | None = None,
):
    """Yield evaluated blocks in order: launch k+1 is queued on the GPU before launch k is
    compressed (in a CPU thread, with ``threads`` compression threads; None: numba's thread
    count) and its blocks handed to the caller to write, so the GPU, the compression and the
    writing overlap."""
    if not todo:
        return
    runs = launches(blocks, todo, jobs_per_launch(grid, write_cube))
    largest = max(blocks[run[-1]][1] - blocks[run[0]][0] for run in runs)
    gpu = CudaBlocks(grid, largest, write_cube)
    with ThreadPoolExecutor(max_workers=1) as pool:
        if threads is not None:  # numba's thread count is per thread: set it in the one that compresses
            import numba

            pool.submit(numba.set_num_threads, min(threads, numba.config.NUMBA_NUM_THREADS)).result()
        pending = None
        for run in runs:
            # its host buffers were freed by the launch before the last, finished below
            launched = gpu.launch([(i, *blocks[i]) for i in run])
            future = pool.submit(gpu.finish, launched, compression, chunks)
            if pending is not None:
                yield from pending.result()
            pending = future
        if pending is not None:
            yield from pending.result()
