"""Sweep orchestration: spec -> grid -> blocks of jobs -> kernel -> cube file (or reductions only).

Blocks are computed by the numba kernel (in a helper thread, or on Dask workers) while the
writer streams finished blocks into the file, so the cube is never held in memory whole.
"""

from __future__ import annotations

import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from paigrid import __version__
from paigrid.inputs.catalog import Catalogues
from paigrid.inputs.efficiency import with_calibration
from paigrid.errors import PaigridError
from paigrid.evaluate import evaluate_block
from paigrid.inputs.jobs import load_jobs
from paigrid.predict import current_predictions
from paigrid.inputs.spec import SweepSpec
from paigrid.schema import partial_path
from paigrid.store import CubeWriter, cube_jobs_per_chunk, estimated_bytes
from paigrid.inputs.tables import Grid, build_grid
from paigrid.userfiles import check_writable_file, file_sha256


@dataclass
class SweepResult:
    """What a finished sweep reports."""

    path: Path
    configs: int
    blocks: int
    seconds: float


def prepare(spec: SweepSpec, calibration: str | Path | None = None) -> tuple[Grid, dict]:
    """Resolve a spec into a grid and the provenance attributes its cube will carry."""
    cats = Catalogues.load(spec.catalogues)
    eff, spec.options = with_calibration(spec.options, calibration)
    jobs, cats = load_jobs(spec, cats)
    grid = build_grid(spec, jobs, cats, eff)
    provenance = {"spec": spec.to_toml_dict(), "catalogue_sha256": cats.checksums(),
                  "efficiency_source": eff.origin, "calibration_sha256": file_sha256(calibration),
                  "paigrid_version_started": __version__}
    return grid, provenance


def block_bounds(n_jobs: int, jobs_per_block: int) -> list[tuple[int, int]]:
    """(start, stop) job ranges of the blocks."""
    return [(s, min(s + jobs_per_block, n_jobs)) for s in range(0, n_jobs, jobs_per_block)]


def check_disk(path: Path, grid: Grid, reduce_only: bool) -> None:
    """Refuse, before starting, a cube that could outgrow the free disk space."""
    need = estimated_bytes(grid, reduce_only)
    free = shutil.disk_usage(path.parent if str(path.parent) else Path(".")).free
    if need > free:
        hint = "" if reduce_only else "; use --reduce-only to keep only the per-job bests, or sweep a smaller grid"
        raise PaigridError(f"the cube needs up to {need / 1e9:.1f} GB uncompressed and {path.parent or '.'} has "
                           f"{free / 1e9:.1f} GB free{hint}.")


def check_output(path: Path, resume: bool) -> None:
    """Clear errors for an output path that cannot be written, before any work is done."""
    check_writable_file(path)
    if resume and not partial_path(path).exists():
        raise PaigridError(f"there is no interrupted sweep to resume at {partial_path(path)}.")
    if not resume and partial_path(path).exists():
        raise PaigridError(f"an interrupted sweep is waiting at {partial_path(path)}: pass --resume to "
                           "continue it, or delete it to start over.")


def run_sweep(spec: SweepSpec, out: str | Path, *, calibration=None, compression: str = "lz4",
              reduce_only: bool = False, resume: bool = False, scheduler: str | None = None,
              workers: int | None = None, progress: bool = True, on_block=None) -> SweepResult:
    """Sweep ``spec`` into the cube file ``out`` and return what was done.

    ``reduce_only`` stores only the per-job reductions; ``resume`` continues ``out.partial``;
    ``scheduler`` (a Dask scheduler address) or ``workers`` (a local Dask cluster of that many
    processes) run the blocks on Dask workers; otherwise they run in this process.
    ``on_block(n_written)`` is called after each block is safely written.
    """
    out = Path(out)
    check_output(out, resume)
    grid, provenance = prepare(spec, calibration)
    if not resume:
        check_disk(out, grid, reduce_only)
    per_chunk = cube_jobs_per_chunk(grid, spec.jobs_per_block)
    blocks = block_bounds(len(grid.jobs), spec.jobs_per_block // per_chunk * per_chunk)
    started = time.perf_counter()
    writer = CubeWriter(out, grid, provenance, blocks, reduce_only, compression, resume, per_chunk)
    compression = writer.compression  # on --resume: the file's own
    try:
        if not resume:
            writer.write_current(current_predictions(grid.jobs, grid.cats, grid.efficiency, spec.options))
        todo = writer.pending()
        per_job = grid.configs // len(grid.jobs)
        with _Progress(progress, sum(blocks[i][1] - blocks[i][0] for i in todo) * per_job) as bar:
            if scheduler or workers:
                from paigrid.distributed import run_on_dask

                source = run_on_dask(grid, blocks, todo, not reduce_only, scheduler, workers, compression, per_chunk)
            else:
                source = _run_local(grid, blocks, todo, not reduce_only, compression, per_chunk)
            for block in source:
                writer.write_block(block)
                bar.advance((block.stop - block.start) * per_job, int(writer.done.sum()), len(blocks))
                if on_block is not None:
                    on_block(int(writer.done.sum()))
        path = writer.finish()
    except KeyboardInterrupt:
        writer.close()
        raise PaigridError(f"interrupted: {int(writer.done.sum())} of {len(blocks)} blocks are saved in "
                           f"{partial_path(out)}; run the same command with --resume to finish.") from None
    except OSError as exc:
        writer.close()
        raise PaigridError(f"writing {partial_path(out)} failed ({exc.strerror or exc}); "
                           f"{int(writer.done.sum())} of {len(blocks)} blocks are saved; fix the cause and "
                           "run the same command with --resume.") from None
    except BaseException:
        writer.close()
        raise
    return SweepResult(path, grid.configs, len(blocks), time.perf_counter() - started)


def _run_local(grid: Grid, blocks, todo: list[int], write_cube: bool, compression: str, jobs_per_chunk: int):
    """Yield evaluated blocks in order, computing (and compressing) the next one while the
    caller writes this one.  One set of output buffers serves every block: a block leaves
    ``evaluate_block`` as compressed chunks, so its buffers are free before the next starts."""
    from paigrid.evaluate import allocate

    largest = max(stop - start for start, stop in blocks)
    buffers = allocate(grid, largest, write_cube)
    with ThreadPoolExecutor(max_workers=1) as pool:
        pending = None
        for i in todo:
            future = pool.submit(evaluate_block, grid, i, *blocks[i], write_cube, buffers, compression,
                                 jobs_per_chunk)
            if pending is not None:
                yield pending.result()
            pending = future
        if pending is not None:
            yield pending.result()


class _Progress:
    """Progress on stderr with configurations per second: a rich bar on a terminal, otherwise
    (batch jobs, logs) a plain line after the first block and then at most every 10 seconds."""

    def __init__(self, enabled: bool, total: int):
        self.enabled, self.total = enabled, total
        self.bar = None

    def __enter__(self):
        self.started = time.perf_counter()
        self.last_line = None
        self.done = 0
        if self.enabled and sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

            self.bar = Progress(TextColumn("sweep"), BarColumn(), TextColumn("{task.percentage:>5.1f}%"),
                                TextColumn("{task.fields[rate]}"), TimeRemainingColumn(),
                                console=Console(file=sys.stderr))
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
            print(f"sweep: block {blocks_done} of {blocks} written, {self.done:,} of {self.total:,} "
                  f"configurations, {rate}", file=sys.stderr, flush=True)

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.stop()
        return False
