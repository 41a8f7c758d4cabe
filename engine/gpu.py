"""Sweep blocks on an NVIDIA GPU (``--device cuda``) with the kernels of ``paigrid.kernels.cuda``.

The grid's tables go to the GPU once; per block the job rows go up, the compute-terms kernel and
the configurations kernel run (the per-job reductions are folded on the GPU) and the outputs come
back into page-locked host buffers on one CUDA stream.  Two sets of host buffers alternate, so
while the GPU computes block b+1 (and copies it back), a CPU thread compresses block b and the
caller writes block b-1.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from paigrid.errors import PaigridError
from paigrid.evaluate import Block, allocate, encode_cube, overall_best
from paigrid.inputs.tables import Grid
from paigrid.kernels import layout as L
from paigrid.schema import BEST_VARIABLES, CUBE_VARIABLES, JOB_GPU_VARIABLES


def cuda_kernels():
    """The loaded CUDA kernels (``paigrid.kernels.cuda.load``) once a GPU is known to be usable;
    a user error in one sentence where numba.cuda, the CUDA driver or a GPU is missing."""
    from paigrid.kernels import cuda as gpu_kernels

    try:
        kernels = gpu_kernels.load()
    except ImportError as exc:
        raise PaigridError(f"--device cuda needs numba's CUDA target, which does not import here ({exc}); install "
                           "it with pip install 'paigrid[cuda]'.") from None
    reason = _unavailable_reason(kernels.cuda)
    if reason:
        raise PaigridError(f"--device cuda needs an NVIDIA GPU with its driver and the CUDA toolkit, and {reason}; "
                           "run on a GPU machine or use --device cpu.")
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


@dataclass
class _Launched:
    """A block whose kernels and copies are queued on the stream; ``done`` fires when its outputs
    are in ``host``."""

    index: int
    start: int
    stop: int
    n_gpu: np.ndarray
    jobs: np.ndarray
    host: dict[str, np.ndarray]
    done: object


class CudaBlocks:
    """The GPU state of one sweep: the grid's tables on the device, device outputs sized for the
    largest block, two sets of page-locked host buffers and one stream."""

    def __init__(self, grid: Grid, largest: int, write_cube: bool):
        self.kernels = cuda_kernels()
        cuda = self.kernels.cuda
        self.grid, self.write_cube = grid, write_cube
        self.stream = cuda.stream()
        class_peak = grid.class_peak
        if class_peak is None:  # pai-v1 tables: the operator-class table is not read
            class_peak = np.full((*grid.peak.shape, L.N_CLASSES), np.nan)
        tables = (grid.arch_codes, grid.gpu_table, grid.peak, class_peak, grid.prec_table, grid.intra_table,
                  grid.intra_fits, grid.network_table, grid.options)
        (self.arch, self.gpus, self.peak, self.class_peak, self.prec, self.intra, self.intra_fits, self.network,
         self.options) = (cuda.to_device(np.ascontiguousarray(t), stream=self.stream) for t in tables)
        shapes = allocate(grid, 0, write_cube)  # names, dtypes and trailing shapes
        self.device = {}
        self.host = [{}, {}]
        for name, array in shapes.items():
            shape = array.shape if name in CUBE_VARIABLES and not write_cube else (largest, *array.shape[1:])
            self.device[name] = cuda.device_array(shape, array.dtype, stream=self.stream)
            for host in self.host:
                host[name] = cuda.pinned_array(shape, array.dtype)
        self.turn = 0

    def launch(self, index: int, start: int, stop: int) -> _Launched:
        """Queue block ``index`` (jobs[start:stop]): upload its job rows, run both kernels and copy
        its outputs back into the next set of host buffers; returns at once."""
        cuda, k, s = self.kernels.cuda, self.kernels, self.stream
        jobs, n_gpu = self.grid.job_rows(start, stop)
        n = stop - start
        d_jobs = cuda.to_device(np.ascontiguousarray(jobs), stream=s)
        d_counts = cuda.to_device(np.ascontiguousarray(n_gpu), stream=s)
        out = {name: array if name in CUBE_VARIABLES and not self.write_cube else array[:n]
               for name, array in self.device.items()}
        blocks, threads = _launch(n * len(self.grid.gpu_table))
        k.terms_kernel[blocks, threads, s](d_jobs, self.gpus, self.peak, self.class_peak, self.prec, self.options,
                                          *(out[name] for name in JOB_GPU_VARIABLES))
        _, g, counts, _, _, _, p = self.grid.shape
        blocks, threads = _launch(n * g * counts * p)
        k.configurations_kernel[blocks, threads, s](
            d_jobs, d_counts, self.arch, self.gpus, self.peak, self.prec, self.intra, self.intra_fits, self.network,
            self.options, self.write_cube, *(out[name] for name in CUBE_VARIABLES),
            *(out[name] for name in JOB_GPU_VARIABLES), *(out[name] for name in BEST_VARIABLES))
        host = self.host[self.turn]
        self.turn = 1 - self.turn
        copied = {}
        for name, array in out.items():
            if name in CUBE_VARIABLES and not self.write_cube:
                continue
            array.copy_to_host(host[name][:n], stream=s)
            copied[name] = host[name][:n]
        done = cuda.event()
        done.record(s)
        return _Launched(index, start, stop, n_gpu, jobs, copied, done)

    def finish(self, launched: _Launched, compression: str | None, jobs_per_chunk: int) -> Block:
        """Wait for a launched block's outputs and turn them into a ``Block`` (cube chunks
        compressed with ``compression``), holding no reference to the host buffers."""
        launched.done.synchronize()
        out = dict(launched.host)
        out["overall_best"], out["overall_step_time"] = overall_best(
            out["best_step_time"], out["best_index"], launched.n_gpu,
            launched.jobs[:, L.J_BATCH] * launched.jobs[:, L.J_ACCUM], self.grid.gpu_table[:, L.G_PRICE],
            len(self.grid.intra), len(self.grid.network))
        block = Block(launched.index, launched.start, launched.stop, out)
        if self.write_cube and compression is not None:
            encode_cube(block, compression, jobs_per_chunk)
        block.arrays = {name: np.array(array) for name, array in block.arrays.items()}
        return block


def _launch(threads: int) -> tuple[int, int]:
    from paigrid.kernels.cuda import launch_grid

    return launch_grid(threads)


def evaluate_block_cuda(grid: Grid, index: int, start: int, stop: int, write_cube: bool = True,
                        compression: str | None = None, jobs_per_chunk: int = 1) -> Block:
    """``evaluate.evaluate_block`` on the GPU, for one block on its own (tests, the bench)."""
    blocks = CudaBlocks(grid, stop - start, write_cube)
    return blocks.finish(blocks.launch(index, start, stop), compression, jobs_per_chunk)


def run_cuda(grid: Grid, blocks, todo: list[int], write_cube: bool, compression: str, jobs_per_chunk: int):
    """Yield evaluated blocks in order: block b+1 is queued on the GPU before block b is
    compressed (in a CPU thread) and handed to the caller to write, so the GPU, the compression
    and the writing overlap."""
    if not todo:
        return
    gpu = CudaBlocks(grid, max(stop - start for start, stop in blocks), write_cube)
    with ThreadPoolExecutor(max_workers=1) as pool:
        pending = None
        for i in todo:
            launched = gpu.launch(i, *blocks[i])   # its host buffers were freed by the block before the last
            future = pool.submit(gpu.finish, launched, compression, jobs_per_chunk)
            if pending is not None:
                yield pending.result()
            pending = future
        yield pending.result()

