"""Sweep orchestration: spec -> grid -> blocks of jobs -> kernel -> cube file (or reductions only).

A spec's jobs may be of both families (``inputs.jobs.split_jobs``): the data-parallel ones make
the root's grid, the LLM ones the ``llm`` group's (``llm.grid``); one writer, one lock, one
``.partial`` file, one resume and one progress bar cover both, the LLM blocks (one per job and
GPU count) after the data-parallel ones, through the same executor (a pipeline thread here, or
the Dask workers).

Blocks are computed by the numba kernel (in a helper thread, or on Dask workers) while the
writer streams finished blocks into the file, so the cube is never held in memory whole.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from paigrid import __version__
from paigrid.errors import PaigridError
from paigrid.evaluate import compute_llm_block, evaluate_block
from paigrid.faults import fault_point
from paigrid.files import check_output_is_no_input, file_sha256, megabytes, os_reason, output_target
from paigrid.inputs.catalog import Catalogues
from paigrid.inputs.efficiency import with_calibration
from paigrid.inputs.jobs import split_jobs
from paigrid.inputs.kernel_tables import Grid, build_grid
from paigrid.inputs.spec import SweepSpec
from paigrid.llm.grid import LlmGrid, build_llm_grid
from paigrid.locking import OutputLock
from paigrid.predict import current_predictions
from paigrid.schema import partial_path
from paigrid.store import (
    CubeWriter,
    creating_path,
    cube_chunk_shape,
    estimated_bytes,
    factor_bytes,
    llm_estimated_bytes,
)


@dataclass
class SweepResult:
    """What a finished sweep reports."""

    path: Path
    configs: int
    blocks: int
    seconds: float


def prepare(spec: SweepSpec, calibration: str | Path | None = None) -> tuple[Grid, dict]:
    """Resolve a spec into a grid and the provenance attributes its cube will carry, among them
    the sha256 of every input file (``input_sha256``), which ``--resume`` checks.  The
    data-parallel family only (``prepare_families`` gives both)."""
    grid, _, provenance = prepare_families(spec, calibration)
    if grid is None:
        raise PaigridError("the sweep has no jobs.")
    return grid, provenance


def prepare_families(
    spec: SweepSpec,
    calibration: str | Path | None = None,
) -> tuple[Grid | None, LlmGrid | None, dict]:
    """The grids of both job families of a spec (None for a family without jobs) and the
    provenance attributes of their cube (``prepare``'s, with the LLM catalogues' sha256)."""
    import copy

    from paigrid.llm.fabrics import is_fabric, load_fabrics
    from paigrid.llm.models import load_catalogue

    cats = Catalogues.load(spec.catalogues)
    eff, spec.options = with_calibration(spec.options, calibration, cats)
    jobs, llm_jobs, cats = split_jobs(spec, cats)
    if not jobs and not llm_jobs:
        raise PaigridError("the sweep has no jobs.")
    grid = None
    if jobs:
        dp_spec = spec
        # fabrics are the LLM family's; the data-parallel one takes the network links, and the
        # fabrics too with the option fabric_tiers (its all-reduce then crosses their tiers)
        if spec.network and not spec.options.fabric_tiers:
            dp_spec = copy.copy(spec)
            dp_spec.network = [n for n in spec.network if not is_fabric(n)]
            if not dp_spec.network:
                raise PaigridError(
                    f"{spec.origin}: grid.network lists only fabrics of llm_fabrics.csv, which the "
                    "data-parallel jobs cannot use; add a network of links.csv."
                )
        grid = build_grid(dp_spec, jobs, cats, eff)
    llm = build_llm_grid(spec, llm_jobs, cats, eff) if llm_jobs else None
    provenance = {
        "spec": spec.to_toml_dict(),
        "catalogue_sha256": cats.checksums(),
        "efficiency_source": eff.origin,
        "calibration_sha256": file_sha256(calibration),
        "paigrid_version_started": __version__,
        "input_sha256": input_files(spec, calibration),
    }
    if llm is not None:
        provenance["llm_catalogue_sha256"] = {
            "llm_models": load_catalogue().sha256,
            "llm_fabrics": load_fabrics().sha256,
        }
    return grid, llm, provenance


def input_files(spec: SweepSpec, calibration: str | Path | None) -> dict[str, dict[str, str]]:
    """role -> {"path", "sha256"} of every file a sweep reads: the spec, the workloads or
    population CSV, the user catalogues and the calibration."""
    files = {}
    if spec.sha256:
        files["spec"] = {"path": spec.origin, "sha256": spec.sha256}
    if isinstance(spec.workloads, str):
        files["workloads"] = {"path": str(spec.workloads), "sha256": file_sha256(spec.workloads)}
    for kind, path in sorted(spec.catalogues.items()):
        files[f"{kind} catalogue"] = {"path": str(path), "sha256": file_sha256(path)}
    if calibration is not None:
        files["calibration"] = {"path": str(calibration), "sha256": file_sha256(calibration)}
    return files


def block_bounds(n_jobs: int, jobs_per_block: int) -> list[tuple[int, int]]:
    """(start, stop) job ranges of the blocks."""
    return [(s, min(s + jobs_per_block, n_jobs)) for s in range(0, n_jobs, jobs_per_block)]


#: configurations per block of a full sweep when the spec does not fix ``jobs_per_block``: the
#: block's cube outputs (10 bytes a configuration, about 40 MB) are in memory at once, twice (one
#: block computed while the previous one is compressed), beside the compressed chunks of the block
#: being written
BLOCK_CONFIGS_FULL = 2**22
#: the same for a reduce-only sweep, whose block keeps only its reductions in memory
BLOCK_CONFIGS_REDUCE = 2**28
#: at most this many jobs per block (the block's job table and reductions stay small)
MAX_JOBS_PER_BLOCK = 2**16
#: seconds between two flushes of a sweep whose blocks are sized by work (one whose spec fixes
#: ``jobs_per_block`` flushes after every block); a block is marked done only once flushed
FLUSH_SECONDS = 5.0


def work_jobs_per_block(grid: Grid, reduce_only: bool) -> int:
    """Jobs per block sized by work: about ``BLOCK_CONFIGS_FULL`` (or, reduce-only,
    ``BLOCK_CONFIGS_REDUCE``) configurations of the grid per block, at least one job, at most
    ``MAX_JOBS_PER_BLOCK`` and every job."""
    per_job = max(1, grid.configs // len(grid.jobs))
    target = BLOCK_CONFIGS_REDUCE if reduce_only else BLOCK_CONFIGS_FULL
    return max(1, min(MAX_JOBS_PER_BLOCK, len(grid.jobs), target // per_job))


def sweep_blocks(
    grid: Grid, jobs_per_block: int | None, reduce_only: bool
) -> tuple[list[tuple[int, int]], tuple[int, ...]]:
    """The blocks of a sweep ((start, stop) job ranges) and the chunk shape of its cube
    variables (``store.cube_chunk_shape``): ``jobs_per_block`` jobs per block as the spec fixes
    it, or sized by work (``work_jobs_per_block``) when it is None; a block holds whole chunks."""
    per_block = jobs_per_block if jobs_per_block is not None else work_jobs_per_block(grid, reduce_only)
    chunks = cube_chunk_shape(grid, per_block)
    return block_bounds(len(grid.jobs), per_block // chunks[0] * chunks[0]), chunks


#: jobs chunks evaluated and compressed to estimate the size of a full cube
SIZE_SAMPLES = 3
#: the estimate is this much above the sample's extrapolation (jobs compress differently)
SIZE_MARGIN = 1.25


def estimated_cube_bytes(grid: Grid, reduce_only: bool, compression: str, chunks: tuple[int, ...]) -> int:
    """The cube's likely size on disk [bytes]: a few chunks of jobs spread over the job list are
    evaluated and compressed as the sweep would, and their size is extrapolated to every job
    (with a margin); the small variables (and the factors of the derived ones) count
    uncompressed.  A reduce-only cube: the
    uncompressed reductions."""
    small = estimated_bytes(grid, True)
    n_jobs = len(grid.jobs)
    if reduce_only:
        return small
    small += factor_bytes(grid)  # stored uncompressed-sized: (job, n_gpu) and (job, gpu) float64
    jobs = chunks[0]
    starts = sorted({int(k * (n_jobs - 1) / max(SIZE_SAMPLES - 1, 1)) // jobs * jobs for k in range(SIZE_SAMPLES)})
    sampled = stored = 0
    for start in starts:
        stop = min(start + jobs, n_jobs)
        block = evaluate_block(grid, -1, start, stop, True, None, compression, chunks)
        stored += sum(len(chunk) for encoded in block.chunks.values() for chunk in encoded)
        sampled += stop - start
    return int(stored / sampled * n_jobs * SIZE_MARGIN) + small


def check_disk(
    path: Path,
    grid: Grid | None,
    reduce_only: bool,
    compression: str = "lz4",
    chunks: int | tuple[int, ...] = 1,
    llm: LlmGrid | None = None,
) -> None:
    """Refuse, before starting, a cube that would not fit in the free disk space (its compressed
    size estimated from a sample, ``estimated_cube_bytes``; the LLM group's uncompressed)."""
    folder = path.parent if str(path.parent) else Path(".")
    free = shutil.disk_usage(folder).free
    llm_bytes = llm_estimated_bytes(llm, reduce_only)
    if (estimated_bytes(grid, reduce_only) if grid is not None else 0) + llm_bytes <= free:
        return  # fits even uncompressed: no need to estimate
    need = llm_bytes + (estimated_cube_bytes(grid, reduce_only, compression, chunks) if grid is not None else 0)
    if need > free:
        hint = "" if reduce_only else "; use --reduce-only to keep only the per-job bests, or sweep a smaller grid"
        raise PaigridError(
            f"the cube needs about {megabytes(need)} (estimated from a sample of its jobs, compressed) "
            f"and {folder} has {megabytes(free)} free{hint}, or pass --no-space-check to try anyway."
        )


def check_output(path: Path, resume: bool) -> None:
    """Clear errors for a partial file that is missing (``resume``) or in the way (not
    ``resume``), before any work is done."""
    partial = partial_path(path)
    if partial.is_symlink():
        raise PaigridError(f"{partial} is a symbolic link, not an interrupted sweep; move it away.")
    if partial.exists() and not partial.is_file():
        raise PaigridError(f"{partial} is in the way and is not a file; move it away.")
    if resume and not partial.exists():
        raise PaigridError(f"there is no interrupted sweep to resume at {partial}.")
    if not resume and partial.exists():
        raise PaigridError(
            f"an interrupted sweep is waiting at {partial}: pass --resume to continue it, or delete it to start over."
        )
    if resume:
        _check_readable_partial(partial)


def _check_readable_partial(partial: Path) -> None:
    """One sentence for a partial file that is not a cube to resume (or that another program holds)."""
    import errno

    import h5py

    try:
        with h5py.File(partial, "r") as f:
            if "block_done" not in f and "llm/block_done" not in f:
                raise PaigridError(f"{partial} is not an interrupted paigrid sweep; delete it to start over.")
    except PaigridError:
        raise
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK) and "lock" in str(exc):
            raise PaigridError(
                f"another program has {partial} open (HDF5 file lock); close it and run the same command again."
            ) from None
        raise PaigridError(
            f"{partial} cannot be read as a cube (it is damaged, or was interrupted while being "
            "created by an older paigrid); delete it to start over."
        ) from None
    except (RuntimeError, KeyError, ValueError):
        raise PaigridError(f"{partial} cannot be read as a cube (it is damaged); delete it to start over.") from None


def cube_output(out: str | Path) -> Path:
    """Where the cube named ``out`` goes: a symbolic link is followed (its target is replaced, the
    link stays); a FIFO or a device is refused, since HDF5 needs a regular file."""
    target = output_target(out)
    if target.stream:
        raise PaigridError(
            f"cannot write a cube to {out}: it is a {target.kind}, and an HDF5 cube needs a regular "
            "file; give the path of a file."
        )
    return target.path


def sweep_inputs(spec: SweepSpec, calibration=None) -> list[tuple[str, str | Path | None]]:
    """The files a sweep of ``spec`` reads, each with what it is (none may be its output)."""
    return [
        ("the spec file", spec.origin if spec.sha256 else None),
        ("the workloads file", spec.workloads if isinstance(spec.workloads, str) else None),
        ("the calibration file", calibration if isinstance(calibration, (str, Path)) else None),
        *((f"the {kind} catalogue", path) for kind, path in spec.catalogues.items()),
    ]


def run_sweep(
    spec: SweepSpec,
    out: str | Path,
    *,
    calibration=None,
    compression: str = "lz4",
    reduce_only: bool = False,
    resume: bool = False,
    scheduler: str | None = None,
    workers: int | None = None,
    progress: bool = True,
    on_block=None,
    space_check: bool = True,
    device: str | None = None,
    threads: int | None = None,
    flush_seconds: float | None = None,
) -> SweepResult:
    """Sweep ``spec`` into the cube file ``out`` and return what was done.

    ``reduce_only`` stores only the per-job reductions; ``resume`` continues ``out.partial``;
    ``scheduler`` (a Dask scheduler address) or ``workers`` (a local Dask cluster of that many
    processes) run the blocks on Dask workers; otherwise they run in this process.
    ``on_block(n_written)`` is called each time blocks are safely written (flushed and marked
    done; ``n_written`` of them so far).  ``space_check`` refuses, before starting, a cube that
    would not fit in the free disk space.  ``device`` ("cpu" or "cuda"; None: the spec's) is
    where the kernels run; ``threads`` is numba's thread count for the kernels and the
    compression (None: every core this process may use; with ``workers``, the cores shared out
    among the worker processes).  ``flush_seconds``: the least time between two flushes (blocks
    written in between are marked done together, once flushed); default 0 (after every block)
    when the spec fixes ``jobs_per_block``, ``FLUSH_SECONDS`` when the blocks are sized by work.

    One writer at a time: ``out.lock`` (``locking.OutputLock``) names the process writing.
    """
    out = cube_output(out)
    check_output_is_no_input(out, sweep_inputs(spec, calibration))
    device = spec.device if device is None else device
    from paigrid.distributed import check_workers

    check_workers(workers, scheduler)
    threads = check_threads(threads, workers, scheduler)
    if device != "cpu" and (scheduler or workers):
        raise PaigridError(
            "--device cuda runs the kernels in this process; it cannot be combined with --scheduler or --workers."
        )
    made_on = device_label(device)  # before any file: no GPU is one sentence, nothing written
    grid, llm, provenance = prepare_families(spec, calibration)
    if grid is None and device != "cpu":
        raise PaigridError(
            "the LLM family's blocks run on CPUs (this machine's, or Dask workers' with --workers or "
            "--scheduler); --device cuda needs data-parallel jobs."
        )
    with OutputLock(out).acquire(str(out)):
        fault_point("lock-taken")
        with contextlib.suppress(OSError):
            os.unlink(creating_path(out))  # left by a writer killed while creating: never published
        check_output(out, resume)
        blocks, chunks = sweep_blocks(grid, spec.jobs_per_block, reduce_only) if grid is not None else ([], None)
        if flush_seconds is None:
            flush_seconds = 0.0 if spec.jobs_per_block is not None else FLUSH_SECONDS
        if not resume and space_check:
            check_disk(out, grid, reduce_only, compression, chunks, llm)
        return _sweep_into(
            out,
            grid,
            provenance,
            blocks,
            chunks,
            spec,
            compression,
            reduce_only,
            resume,
            scheduler,
            workers,
            progress,
            on_block,
            made_on,
            threads,
            flush_seconds,
            llm,
        )


def check_threads(threads: int | None, workers: int | None, scheduler: str | None) -> int | None:
    """``threads`` checked against the cores numba may use here (``NUMBA_NUM_THREADS``) for a
    sweep in this process or on a local cluster; on an existing cluster (``scheduler``) each
    worker caps it at its own ``NUMBA_NUM_THREADS``."""
    if threads is None:
        return None
    if threads < 1:
        raise PaigridError(f"--threads must be at least 1, not {threads}.")
    import numba

    most = numba.config.NUMBA_NUM_THREADS
    if not scheduler and threads * (workers or 1) > most:
        per = f"{threads} threads x {workers} workers" if workers else f"{threads} threads"
        raise PaigridError(
            f"{per} is more than the {most} cores numba may use here (NUMBA_NUM_THREADS); ask for fewer."
        )
    return threads


def device_label(device: str) -> str:
    """The cube's ``device`` attribute for a sweep on ``device``: "cpu", or "cuda: " and the GPU's
    name (a user error in one sentence when no GPU can run the kernels)."""
    if device == "cpu":
        return "cpu"
    from paigrid.cuda_sweep import device_name

    return device_name(device)


def _sweep_into(
    out,
    grid,
    provenance,
    blocks,
    chunks,
    spec,
    compression,
    reduce_only,
    resume,
    scheduler,
    workers,
    progress,
    on_block,
    made_on="cpu",
    threads=None,
    flush_seconds=0.0,
    llm=None,
) -> SweepResult:
    started = time.perf_counter()
    with contextlib.ExitStack() as stack:
        early = None
        if grid is not None and blocks and not resume and not (scheduler or workers) and made_on == "cpu":
            # a new sweep on this machine's CPUs: its first blocks compute (the kernel, which
            # releases the GIL, in the pipeline's threads) while this thread makes the
            # current-configuration predictions and the file's skeleton, Python that would
            # otherwise leave the cores idle; closed (the running block finished) on any error
            early = stack.enter_context(
                contextlib.closing(
                    _LocalPipeline(
                        grid, blocks, list(range(len(blocks))), not reduce_only, compression, chunks, threads
                    )
                )
            )
        current = (
            None if resume or grid is None else current_predictions(grid.jobs, grid.cats, grid.efficiency, spec.options)
        )
        client = None
        if scheduler or workers:
            from paigrid.distributed import dask_client

            client = dask_client(stack, scheduler, workers, threads)  # before the file: a bad address leaves nothing
        try:
            writer = CubeWriter(
                out,
                grid,
                provenance,
                blocks,
                reduce_only,
                compression,
                resume,
                chunks,
                current,
                device=made_on,
                flush_seconds=flush_seconds,
                llm=llm,
            )
        except KeyboardInterrupt:
            if resume or partial_path(out).exists():
                raise _interrupted(
                    f"interrupted: the blocks saved so far are in {partial_path(out)}; run the same "
                    "command with --resume to finish."
                ) from None
            raise _interrupted("interrupted before the first block; nothing was saved.") from None
        except (OSError, RuntimeError) as exc:
            if isinstance(exc, RuntimeError) and not _hdf5_io_error(exc):
                raise
            what = "opening" if resume else "creating"
            raise _write_failure(
                f"{what} {partial_path(out)} failed ({os_reason(exc)}); "
                f"{'nothing was written' if resume else 'nothing was saved'}.",
                exc,
            ) from None
        compression = writer.compression  # on --resume: the file's own
        try:
            if grid is not None and resume and "current_step_time" not in writer.file.variables:
                writer.write_current(current_predictions(grid.jobs, grid.cats, grid.efficiency, spec.options))
            todo = writer.pending()
            per_job = grid.configs // len(grid.jobs) if grid is not None else 0
            llm_todo = writer.pending_llm()
            per_llm_block = llm.cells // len(llm.blocks()) if llm is not None else 0
            total = sum(blocks[i][1] - blocks[i][0] for i in todo) * per_job + len(llm_todo) * per_llm_block
            all_blocks = len(blocks) + len(writer.llm_blocks)
            with _Progress(progress, total, started) as bar:
                if grid is None:
                    source: Any = (block for block in ())  # no data-parallel jobs: no blocks
                elif client is not None:
                    from paigrid.distributed import run_on_dask

                    source = run_on_dask(
                        grid,
                        blocks,
                        todo,
                        not reduce_only,
                        scheduler,
                        workers,
                        compression,
                        chunks,
                        client=client,
                        threads=threads,
                    )
                elif made_on != "cpu":
                    from paigrid.cuda_sweep import run_cuda

                    source = run_cuda(grid, blocks, todo, not reduce_only, compression, chunks, threads)
                elif early is not None and early.todo == todo:  # started above (a new file: every block)
                    source = early
                else:
                    source = _LocalPipeline(grid, blocks, todo, not reduce_only, compression, chunks, threads)
                # closing: on an error the block being computed is finished (its thread stopped)
                # before the error goes on, never left running while the interpreter exits
                with contextlib.closing(source):
                    for count, block in enumerate(source, 1):
                        _check_room(out, block)
                        committed = writer.write_block(block)
                        fault_point(f"block-written-{count}")
                        written = int(writer.done.sum())
                        if committed:
                            fault_point(f"after-block-{written}")
                        bar.advance((block.stop - block.start) * per_job, writer.blocks_written, all_blocks)
                        if committed and on_block is not None:
                            on_block(written)
                    if writer.commit():  # the blocks written since the last flush
                        fault_point(f"after-block-{int(writer.done.sum())}")
                        if on_block is not None:
                            on_block(int(writer.done.sum()))
                if llm is not None and llm_todo:
                    if client is not None:
                        from paigrid.distributed import run_llm_on_dask

                        llm_source = run_llm_on_dask(client, llm, llm_todo, not reduce_only, threads)
                    else:
                        llm_source = _run_llm_local(llm, llm_todo, not reduce_only, threads)
                    with contextlib.closing(llm_source):
                        _sweep_llm(writer, llm_source, bar, per_llm_block, all_blocks, on_block)
            path = writer.finish()
        except KeyboardInterrupt:
            _commit_quietly(writer)  # the blocks written whole before the interrupt
            writer.close()
            raise _interrupted(
                f"interrupted: {_saved(writer)} of {len(blocks) + len(writer.llm_blocks)} blocks are "
                f"saved in "
                f"{partial_path(out)}; run the same command with --resume to finish."
            ) from None
        except (OSError, RuntimeError) as exc:
            if isinstance(exc, RuntimeError) and not _hdf5_io_error(exc):
                writer.close()
                raise
            if not isinstance(exc, _NoRoom):
                writer.abandon()  # HDF5 failed mid-write: closing could crash; the flushed blocks are safe
            else:
                _commit_quietly(writer)  # found before HDF5 tried: the blocks written so far are whole
                writer.close()
            raise _write_failure(
                f"writing {partial_path(out)} failed ({os_reason(exc)}); "
                f"{_saved(writer)} of {len(blocks) + len(writer.llm_blocks)} blocks are saved; "
                "fix the cause and "
                "run the same command with --resume.",
                exc,
            ) from None
        except BaseException:
            writer.close()
            raise
    configs = (grid.configs if grid is not None else 0) + (llm.cells if llm is not None else 0)
    return SweepResult(path, configs, len(blocks) + len(writer.llm_blocks), time.perf_counter() - started)


def _interrupted(sentence: str) -> PaigridError:
    """The error of an interrupted sweep (Ctrl-C): its sentence says what is saved, and the
    command exits with the interruption's code (130), not bad input's."""
    error = PaigridError(sentence)
    error.interrupted = True
    return error


def _saved(writer) -> int:
    """Blocks of both families marked done in the writer's file."""
    return int(writer.done.sum()) + int(writer.llm_done.sum())


def _run_llm_local(llm: LlmGrid, todo: list[int], write_cube: bool, threads: int | None = None):
    """Yield the LLM blocks ``todo`` (``evaluate.LlmBlock``) in order, each computed in a helper
    thread while the caller writes the one before (the kernel releases the GIL), as
    ``_LocalPipeline`` does for the data-parallel blocks."""
    pool = ThreadPoolExecutor(max_workers=1)
    try:
        ahead = [pool.submit(compute_llm_block, llm, i, write_cube, threads) for i in todo[:1]]
        for following in [*todo[1:], None]:
            block = ahead.pop().result()
            if following is not None:
                ahead.append(pool.submit(compute_llm_block, llm, following, write_cube, threads))
            yield block
    finally:
        pool.shutdown(wait=True, cancel_futures=True)  # on an error or an interrupt: the running block finishes first


def _sweep_llm(writer, source, bar, per_block: int, all_blocks: int, on_block=None) -> None:
    """Write the evaluated LLM blocks of ``source`` (``LlmBlock``, in any order), committing as
    the data-parallel blocks are (``fault_point`` names: ``llm-block-written-K``,
    ``after-llm-block-K``)."""
    for count, block in enumerate(source, 1):
        _check_llm_room(writer, block.results, block.reason, block.bests)
        before = int(writer.llm_done.sum())
        writer.write_llm_block(block.index, block.results, block.reason, block.bests)
        fault_point(f"llm-block-written-{count}")
        written = int(writer.llm_done.sum())
        if written > before:
            fault_point(f"after-llm-block-{written}")
            if on_block is not None:
                on_block(int(writer.done.sum()) + written)
        bar.advance(per_block, writer.blocks_written, all_blocks)
    before = int(writer.llm_done.sum())
    writer.commit()  # (its return value lists data-parallel blocks only: LLM ones are counted here)
    if int(writer.llm_done.sum()) > before:
        fault_point(f"after-llm-block-{int(writer.llm_done.sum())}")
        if on_block is not None:  # as after the data-parallel blocks: the last ones committed are reported too
            on_block(int(writer.done.sum()) + int(writer.llm_done.sum()))


def _check_llm_room(writer, results, reason, bests) -> None:
    """``_check_room`` for an LLM block: its uncompressed bytes (the float32 cells of a full
    sweep and the bests) and some slack must fit in the free disk space."""
    need = sum(a.nbytes for a in bests.values()) + ROOM_SLACK
    if not writer.reduce_only and results is not None:
        need += results.size * 4 + reason.nbytes
    folder = writer.path.parent if str(writer.path.parent) else Path(".")
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return
    if need > free:
        import errno

        raise _NoRoom(errno.ENOSPC, os.strerror(errno.ENOSPC))


def _commit_quietly(writer) -> None:
    """Flush and mark done the blocks written whole so far, on the way out of an interrupted
    sweep; if that fails they are simply redone on resume."""
    with contextlib.suppress(Exception):
        writer.commit()


#: free disk space [bytes] a block must leave beside its own bytes, for HDF5's metadata
ROOM_SLACK = 2**20


class _NoRoom(OSError):
    """The disk has no room for the next block: found before HDF5 tried (and failed) to write it."""


def _check_room(out: Path, block) -> None:
    """Stop cleanly, before HDF5 runs into a full disk (after which the library cannot even close
    the file), when the free space would not hold this block and some slack."""
    need = sum(len(c) for chunks in block.chunks.values() for c in chunks)
    need += sum(a.nbytes for a in block.arrays.values()) + ROOM_SLACK
    folder = out.parent if str(out.parent) else Path(".")
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return
    if need > free:
        import errno

        raise _NoRoom(errno.ENOSPC, os.strerror(errno.ENOSPC))


def _hdf5_io_error(exc: BaseException) -> bool:
    """A RuntimeError of HDF5 (through h5py) caused by the operating system, e.g. a full disk."""
    return "errno =" in str(exc) or "file write failed" in str(exc)


def _write_failure(sentence: str, exc: BaseException) -> PaigridError:
    """The error of a failed write; after a failure inside HDF5 (not one found beforehand) the
    command exits without closing the file (``exit_hard``), which HDF5 could crash on."""
    error = PaigridError(sentence)
    error.exit_hard = not isinstance(exc, _NoRoom)
    return error


def sweep(spec=None, out: str | Path | None = None, reduce_only: bool = False, group: str | None = None, **kw):
    """Sweep from Python and return the cube as an ``xarray.Dataset`` (``paigrid sweep`` as a
    function, for notebooks and libraries).

    Parameters
    ----------
    spec : SweepSpec, str, Path, dict or None
        A ``SweepSpec``, the path of a TOML spec, a dict of the same keys (``workloads``,
        ``jobs_per_block``, ``[grid]``, ``[options]``, ``[catalogues]``; relative paths from the
        current directory) or None for the default sweep.
    out : str or Path, optional
        The cube file to write.  None: the cube is written to a temporary file, loaded into
        memory and the file removed (mind the size: 22 bytes per configuration once loaded, the
        10 stored and throughput, cost and energy derived from them).
    reduce_only : bool
        Keep only the per-job reductions.
    group : str, optional
        The family returned, as the spec's workloads may name LLM models too (``llama3-8b``):
        None the data-parallel root (or, for a sweep of LLM jobs only, the ``llm`` group),
        ``"llm"`` the LLM group (``paigrid.open_dataset(path, group="llm")``); both are in ``out``.
    **kw
        ``run_sweep``'s keyword-only arguments: calibration (a TOML path), compression ("lz4",
        "zstd", "gzip", "none"), resume, scheduler (a Dask address or scheduler file), workers (a
        local Dask cluster), progress (default False: no progress lines on stderr), on_block,
        device ("cpu" or "cuda"), threads (numba threads), and the others.

    Returns
    -------
    xarray.Dataset
        The cube: in memory when ``out`` is None, else ``out`` opened lazily by
        ``paigrid.open_dataset``.  The variables carry their units (step_time [s], throughput
        [samples/s], cost [USD/1e6 samples], ...).

    Raises
    ------
    PaigridError
        For an unknown keyword, a spec of another kind, or any input the sweep refuses (one
        sentence, as ``paigrid sweep`` prints it).
    """
    import copy
    import inspect
    import tempfile

    from paigrid.cube import families_of
    from paigrid.inputs.spec import load_spec, spec_from_dict
    from paigrid.xarray_api import open_dataset

    known = [
        name
        for name, p in inspect.signature(run_sweep).parameters.items()
        if p.kind == p.KEYWORD_ONLY and name != "reduce_only"
    ]
    unknown = sorted(set(kw) - set(known))
    if unknown:
        raise PaigridError(f"sweep() takes {', '.join(known)} besides spec, out and reduce_only, not {unknown[0]!r}.")
    if spec is None:
        spec = SweepSpec()
    elif isinstance(spec, SweepSpec):
        spec = copy.deepcopy(spec)  # preparing a sweep fills in its options
    elif isinstance(spec, dict):
        spec = spec_from_dict(spec, "the spec dict", Path.cwd())
    elif isinstance(spec, (str, Path)):
        spec = load_spec(spec)
    else:
        raise PaigridError(
            f"spec must be a SweepSpec, the path of a TOML spec, a dict or None, not {type(spec).__name__}."
        )
    kw.setdefault("progress", False)

    def family(path):
        return group if group is not None or "dp" in families_of(path) else "llm"

    if out is not None:
        run_sweep(spec, out, reduce_only=reduce_only, **kw)
        return open_dataset(out, group=family(out))
    if kw.get("resume"):
        raise PaigridError("resume needs the out file of the interrupted sweep.")
    with tempfile.TemporaryDirectory(prefix="paigrid-") as folder:
        path = Path(folder) / "cube.h5"
        try:
            run_sweep(spec, path, reduce_only=reduce_only, **kw)
        except PaigridError as exc:
            if "--resume" not in str(exc):
                raise
            # the partial file is in a temporary folder that is removed now: there is nothing to resume
            what = (
                "was interrupted"
                if str(exc).startswith("interrupted")
                else f"failed ({str(exc).split(';')[0].replace(str(path), 'its temporary file')})"
            )
            raise PaigridError(
                f"the in-memory sweep (out=None) {what} and kept nothing; give out= a path to be "
                "able to resume a sweep."
            ) from None
        with open_dataset(path, group=family(path)) as ds:
            ds.load()
        ds.encoding.pop("source", None)  # the file is gone
        return ds


class _LocalPipeline:
    """The evaluated blocks ``todo`` in order, on ``threads`` threads (None: numba's default): a
    pipeline of three stages, each in its own thread.  The kernel computes block k into one of
    two buffer sets while block k - 1 is handed over (a full cube's arrays compressed in parallel
    threads, the reductions copied out) and block k - 2 is written by the caller; a buffer set is
    reused only once its block is handed over.

    The first blocks start computing when this is made, before it is iterated; iterating yields
    the blocks (``evaluate.Block``), each one's successor submitted before it is yielded, so the
    kernel never waits for the caller's write.  ``close`` stops it: queued blocks are dropped,
    the running one finishes first (on an error or an interrupt)."""

    def __init__(
        self,
        grid: Grid,
        blocks,
        todo: list[int],
        write_cube: bool,
        compression: str,
        chunks: tuple[int, ...],
        threads: int | None = None,
    ):
        import math

        from paigrid.evaluate import allocate, load_kernels

        self.grid, self.blocks, self.todo, self.write_cube = grid, blocks, list(todo), write_cube
        self.compression, self.chunks, self.threads = compression, chunks, threads
        largest = max(stop - start for start, stop in blocks)
        if self.todo:
            # here, before the kernel thread starts: its first block then runs its kernel (which
            # releases the GIL) at once, beside this thread's own work, instead of loading the
            # kernels while this thread holds the GIL half of the time
            first = blocks[self.todo[0]]
            load_kernels(grid, (first[1] - first[0]) * math.prod(grid.shape[1:]), write_cube)
        self.slots = [allocate(grid, largest, write_cube) for _ in range(min(2, len(self.todo)))]
        self.in_flight: list = []  # the encoded blocks' futures, oldest first: at most one per buffer set
        self.submitted = 0
        self.kernels, self.encoders = ThreadPoolExecutor(max_workers=1), ThreadPoolExecutor(max_workers=1)
        try:
            while len(self.in_flight) < len(self.slots):
                self._submit()
        except BaseException:
            self.close()
            raise

    def _encode(self, computed):
        from paigrid.evaluate import release_buffers

        if self.threads is not None:  # numba's thread count is per thread: the compression's pool follows it
            import numba

            numba.set_num_threads(min(self.threads, numba.config.NUMBA_NUM_THREADS))
        return release_buffers(computed.result(), self.compression, self.chunks, True)

    def _submit(self) -> None:
        """Start the next block of ``todo`` in the buffer set its predecessor but one used."""
        from paigrid.evaluate import compute_block

        count, i = self.submitted, self.todo[self.submitted]
        computed = self.kernels.submit(
            compute_block,
            self.grid,
            i,
            *self.blocks[i],
            self.write_cube,
            self.slots[count % len(self.slots)],
            self.threads,
        )
        self.in_flight.append(self.encoders.submit(self._encode, computed))
        self.submitted += 1

    def __iter__(self):
        while self.in_flight:
            block = self.in_flight.pop(0).result()  # handed over: its buffer set is free
            if self.submitted < len(self.todo):
                self._submit()
            yield block

    def close(self) -> None:
        """Drop the queued blocks and wait for the running one (idempotent)."""
        self.kernels.shutdown(wait=True, cancel_futures=True)
        self.encoders.shutdown(wait=True, cancel_futures=True)


class _Progress:
    """Progress on stderr with configurations per second: a rich bar on a terminal, otherwise
    (batch jobs, logs) a plain line after the first block and then at most every 10 seconds.
    The rate counts from ``started`` (``time.perf_counter``), the sweep's start: a new sweep's
    first blocks compute while its file is made, before the bar opens."""

    def __init__(self, enabled: bool, total: int, started: float):
        self.enabled, self.total, self.started = enabled, total, started
        self.bar = None

    def __enter__(self):
        self.last_line = None
        self.done = 0
        if self.enabled and sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

            self.bar = Progress(
                TextColumn("sweep"),
                BarColumn(),
                TextColumn("{task.percentage:>5.1f}%"),
                TextColumn("{task.fields[rate]}"),
                TimeRemainingColumn(),
                console=Console(file=sys.stderr),
            )
            self.bar.start()
            self.task = self.bar.add_task("sweep", total=self.total, rate="")
        return self

    def advance(self, configs: int, blocks_done: int, blocks: int) -> None:
        """Count ``configs`` more configurations as done."""
        if not self.enabled:
            return
        self.done += configs
        now = time.perf_counter()
        rate = f"{self.done / max(now - self.started, 1e-9) / 1e6:,.1f} M configs/s"
        if self.bar is not None:
            self.bar.update(self.task, advance=configs, rate=rate)
        elif self.last_line is None or now - self.last_line >= 10.0 or blocks_done == blocks:
            self.last_line = now
            print(
                f"sweep: block {blocks_done} of {blocks} written, {self.done:,} of {self.total:,} "
                f"configurations, {rate}",
                file=sys.stderr,
                flush=True,
            )

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.stop()
        return False
