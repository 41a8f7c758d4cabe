"""Blocks sized by work and flushed by time: the same cube as fixed blocks flushed one by one, and
a block is marked done on disk only once its data is flushed (killed before a flush, a sweep has
nothing marked and its resume gives the same cube)."""

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import h5py
import numpy as np
import pytest

from cube_compare import assert_same_cube, read_all
from paigrid.errors import PaigridError
from paigrid.inputs.spec import SweepSpec
from paigrid.orchestration import prepare, run_sweep, sweep_blocks, work_jobs_per_block
from paigrid.schema import partial_path
from paigrid.study.population import synthetic_population
from paigrid.study.trace import write_population

GRID = dict(
    gpu=["V100", "A100"],
    n_gpu=[1, 8],
    intra=["pcie3", "nvlink2-hcm"],
    network=["none", "eth-25g"],
    precision=["fp32", "amp-fp16"],
)
N_JOBS = 12
#: configurations per block in the tests: 3 jobs of the grid above (5 x 2 x 2 x 2 x 2 x 2 = 160 each)
SMALL_BLOCK = 3 * 160


@pytest.fixture(scope="module")
def population(tmp_path_factory):
    folder = tmp_path_factory.mktemp("blocks")
    write_population(synthetic_population(N_JOBS, 5), folder / "pop.csv")
    return folder / "pop.csv"


def spec_of(population, jobs_per_block=None):
    return SweepSpec(workloads=str(population), jobs_per_block=jobs_per_block, **GRID)


def test_blocks_are_sized_by_work_unless_the_spec_fixes_them(population, monkeypatch):
    import paigrid.orchestration as orchestration

    grid, _ = prepare(spec_of(population))
    per_job = grid.configs // N_JOBS
    assert work_jobs_per_block(grid, False) == N_JOBS  # the whole small sweep is one unit of work
    monkeypatch.setattr(orchestration, "BLOCK_CONFIGS_FULL", SMALL_BLOCK)
    monkeypatch.setattr(orchestration, "BLOCK_CONFIGS_REDUCE", 2 * SMALL_BLOCK)
    assert work_jobs_per_block(grid, False) * per_job == SMALL_BLOCK
    assert work_jobs_per_block(grid, True) == 2 * work_jobs_per_block(grid, False)
    blocks, _ = sweep_blocks(grid, None, False)
    assert blocks == [(0, 3), (3, 6), (6, 9), (9, 12)]
    assert sweep_blocks(grid, 5, False)[0] == [(0, 5), (5, 10), (10, 12)]  # fixed by the spec: as given
    monkeypatch.setattr(orchestration, "BLOCK_CONFIGS_FULL", 1)
    assert work_jobs_per_block(grid, False) == 1  # never less than one job


@pytest.mark.slow
def test_work_sized_blocks_flushed_by_time_make_the_same_cube(population, tmp_path, monkeypatch):
    import paigrid.orchestration as orchestration

    run_sweep(spec_of(population, jobs_per_block=1), tmp_path / "fixed.h5", progress=False)
    monkeypatch.setattr(orchestration, "BLOCK_CONFIGS_FULL", SMALL_BLOCK)
    calls = []
    result = run_sweep(
        spec_of(population), tmp_path / "work.h5", progress=False, flush_seconds=3600.0, on_block=calls.append
    )
    assert result.blocks == 4
    assert calls == [4]  # one flush, at the end: the four blocks marked together
    fixed, work = read_all(tmp_path / "fixed.h5"), read_all(tmp_path / "work.h5")
    assert fixed.keys() == work.keys()
    for name in fixed:
        if not name.startswith("block"):  # the block axis and its variables
            np.testing.assert_array_equal(fixed[name], work[name], err_msg=name)
    assert work["block_done"].tolist() == [1, 1, 1, 1] and work["block_start"].tolist() == [0, 3, 6, 9]
    calls.clear()
    run_sweep(spec_of(population), tmp_path / "each.h5", progress=False, flush_seconds=0.0, on_block=calls.append)
    assert calls == [1, 2, 3, 4]  # flushed after every block


def test_progress_counts_blocks_written_before_their_flush(population, tmp_path, monkeypatch, capsys):
    """The plain progress line (stderr not a terminal) names the blocks written so far, flushed or
    not, and its rate counts from the sweep's start, which may precede the progress itself."""
    import time

    import paigrid.orchestration as orchestration

    monkeypatch.setattr(orchestration, "BLOCK_CONFIGS_FULL", SMALL_BLOCK)
    run_sweep(spec_of(population), tmp_path / "work.h5", progress=True, flush_seconds=3600.0)
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("sweep: ")]
    assert lines[0].startswith("sweep: block 1 of 4 written, 480 of 1,920 configurations"), lines
    assert lines[-1].startswith("sweep: block 4 of 4 written"), lines
    with orchestration._Progress(True, 10**10, time.perf_counter() - 1000.0) as bar:
        bar.advance(5 * 10**9, 1, 2)
    assert capsys.readouterr().err.strip().endswith("5.0 M configs/s")  # 5e9 in the 1,000 s since the start


SCRIPT = """
import sys
import paigrid.orchestration as orchestration
from paigrid.inputs.spec import SweepSpec
orchestration.BLOCK_CONFIGS_FULL = {block}
spec = SweepSpec(workloads={population!r}, **{grid!r})
orchestration.run_sweep(spec, {out!r}, progress=False, flush_seconds={flush}, resume={resume})
"""


def sweep_process(population, out, flush, kill_at=None, resume=False):
    code = SCRIPT.format(
        block=SMALL_BLOCK, population=str(population), grid=GRID, out=str(out), flush=flush, resume=resume
    )
    env = {
        **os.environ,
        "NUMBA_CACHE_DIR": os.environ.get("NUMBA_CACHE_DIR", str(Path.home() / ".cache" / "paigrid-tests-numba")),
    }
    if kill_at:
        env["PAIGRID_TEST_KILL_AT"] = kill_at
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True, timeout=120
    )


@pytest.fixture(scope="module")
def reference(population, tmp_path_factory):
    """The cube of an uninterrupted sweep in blocks of ``SMALL_BLOCK`` configurations."""
    import paigrid.orchestration as orchestration

    out = tmp_path_factory.mktemp("reference") / "reference.h5"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(orchestration, "BLOCK_CONFIGS_FULL", SMALL_BLOCK)
        run_sweep(spec_of(population), out, progress=False)
    return out


@pytest.mark.faults
@pytest.mark.parametrize("flush, kill_at, done", [(3600.0, "block-written-3", 0), (0.0, "after-block-2", 2)])
def test_a_block_is_marked_done_only_once_flushed(population, reference, tmp_path, monkeypatch, flush, kill_at, done):
    """Killed (SIGKILL) after its third block is written, with a flush due only later: no block
    is marked done on disk; flushed after each block and killed after the second: two are.
    Resumed, the cube is the one an uninterrupted sweep makes."""
    import paigrid.orchestration as orchestration

    out = tmp_path / "cube.h5"
    killed = sweep_process(population, out, flush, kill_at)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    with h5py.File(partial_path(out), "r") as f:
        assert int(f["block_done"][:].sum()) == done
        assert len(f["block_done"]) == 4
    monkeypatch.setattr(orchestration, "BLOCK_CONFIGS_FULL", SMALL_BLOCK)
    run_sweep(spec_of(population), out, progress=False, resume=True, flush_seconds=flush)
    assert_same_cube(reference, out)


def test_resume_refuses_a_file_with_other_blocks(population, tmp_path):
    out = tmp_path / "cube.h5"
    killed = sweep_process(population, out, 0.0, "after-block-1")
    assert killed.returncode == -signal.SIGKILL
    with pytest.raises(PaigridError, match="other blocks of jobs"):
        run_sweep(spec_of(population), out, progress=False, resume=True)  # one block of 12 jobs here


def open_cube_file(path):
    return h5py.File(path, "r")


def test_the_prediction_bands_are_each_job_s_and_gpu_count_s(population):
    # one lookup per distinct (GPU count, gpus_per_node) pair, spread back to every job and count
    from paigrid.inputs.efficiency import band_group, prediction_band
    from paigrid.store import grid_model, prediction_bands

    grid, _ = prepare(SweepSpec(workloads=str(population), **{**GRID, "n_gpu": [1, 4, 8, 16, 64]}))
    bands = prediction_bands(grid)
    model, calibrated = grid_model(grid), grid.efficiency.origin != "defaults"
    expected = [
        [prediction_band(model, calibrated, band_group(n, job.options["gpus_per_node"])) for n in grid.n_gpu]
        for job in grid.jobs
    ]
    assert bands.dtype == np.float32
    assert np.array_equal(bands, np.array(expected, np.float32), equal_nan=True)
    assert len({float(b) for b in bands.reshape(-1) if b == b}) > 1  # more than one group is tested


def test_a_sweep_whose_file_cannot_be_made_stops_its_early_blocks(population, tmp_path, monkeypatch):
    """A new sweep's first blocks compute while its file is made (``_sweep_into``): when making
    the file fails, the error is the usual sentence, nothing is written, and the blocks' threads
    are stopped before it goes on."""
    import threading

    import paigrid.orchestration as orchestration

    monkeypatch.setattr(orchestration, "BLOCK_CONFIGS_FULL", SMALL_BLOCK)
    started = []
    real = orchestration._LocalPipeline

    def pipeline(*args, **kw):
        started.append(real(*args, **kw))
        return started[-1]

    def no_file(*args, **kw):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(orchestration, "_LocalPipeline", pipeline)
    monkeypatch.setattr(orchestration, "CubeWriter", no_file)
    before = set(threading.enumerate())
    with pytest.raises(PaigridError, match="No space left on device.*nothing was saved"):
        run_sweep(spec_of(population), tmp_path / "cube.h5", progress=False)
    assert len(started) == 1 and started[0].submitted == 2  # two blocks were under way
    assert all(f.done() for f in started[0].in_flight)
    assert not [t for t in set(threading.enumerate()) - before if t.is_alive()]
    assert not list(tmp_path.iterdir())
