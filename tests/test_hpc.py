"""The HPC recipes of docs/scale.md, run as written on a local multi-process cluster: the
scheduler and the workers are started as separate processes (as a batch script starts them), the
sweep finds them through a scheduler file or an address, and the cube is value for value the one
of a plain single-process sweep.  Also ``--threads``: the same cube, and too many threads refused.

Scaled down for a 2-core machine: a small spec, two workers (``--nworkers 4`` -> 2, 17 MPI ranks
-> 3), one numba thread per task (``--threads 8`` -> 1).
"""

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cli_helpers import assert_clean_error, run
from cube_compare import assert_same_cube
from paigrid.inputs.spec import load_spec
from paigrid.orchestration import run_sweep

pytestmark = pytest.mark.hpc

DOC = Path(__file__).resolve().parent.parent / "docs" / "scale.md"
BIN = Path(sys.executable).parent

SPEC = """
workloads = ["resnet50", "bert-base", "gpt2-medium", "vgg16"]
jobs_per_block = 1

[grid]
gpu = ["V100", "A100"]
n_gpu = [1, 8, 64]
intra = ["pcie3", "nvswitch-nvlink3"]
network = ["none", "ib-hdr-200g"]
precision = ["fp32", "amp-fp16"]
"""

#: how the recipes are scaled down for the test (the rest of each command runs as written)
SCALE_DOWN = {"--threads 8": "--threads 1", "--nworkers 4": "--nworkers 2", "mpiexec -n 17": "mpiexec -n 3"}


def recipe(name: str) -> str:
    """The code block after ``<!-- recipe: NAME -->`` in docs/scale.md."""
    found = re.search(rf"<!-- recipe: {re.escape(name)} -->\n```\w+\n(.*?)```", DOC.read_text(), re.S)
    assert found, f"docs/scale.md has no recipe {name!r}"
    return found.group(1)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    path = tmp_path_factory.mktemp("hpc")
    (path / "big.toml").write_text(SPEC)
    run_sweep(load_spec(path / "big.toml"), path / "reference.h5", progress=False)
    return path


def run_recipe(text: str, folder: Path, replace: dict[str, str] | None = None) -> Path:
    """Run the recipe's lines in ``folder`` (a line ending in ``&`` in the background, in its own
    process group, stopped at the end); returns the cube it wrote."""
    for old, new in {**SCALE_DOWN, **(replace or {})}.items():
        text = text.replace(old, new)
    (folder / "big.h5").unlink(missing_ok=True)
    (folder / "sched.json").unlink(missing_ok=True)
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "DASK_LOGGING__DISTRIBUTED": "error"}
    background = []
    try:
        for line in text.strip().splitlines():
            command = shlex.split(line.split("#")[0].strip().rstrip("&"))
            if line.rstrip().endswith("&"):
                background.append(
                    subprocess.Popen(
                        command,
                        cwd=folder,
                        env=env,
                        start_new_session=True,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                    )
                )
                continue
            _wait_for(folder / "sched.json", background) if "sched.json" in line else None
            done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=120)
            assert done.returncode == 0, f"{line}: {done.stderr}"
    finally:
        for process in background:
            _stop(process)
    return folder / "big.h5"


def _wait_for(path: Path, processes, seconds: float = 60.0) -> None:
    """Until the scheduler file is written (a batch script waits for it too)."""
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert all(p.poll() is None for p in processes), "a cluster process exited early"
        assert time.monotonic() < deadline, f"no {path.name} after {seconds} s"
        time.sleep(0.2)


def _stop(process: subprocess.Popen) -> None:
    """End a process this test started, and its children (its own process group)."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def test_scheduler_file_with_workers_started_separately(folder):
    assert_same_cube(folder / "reference.h5", run_recipe(recipe("scheduler-file"), folder))


def test_dask_mpi_with_the_mpich_wheels(folder):
    if not (BIN / "mpiexec").exists() or not (BIN / "dask-mpi").exists():
        pytest.skip("the MPICH wheels and dask-mpi are not installed here: pip install mpich mpi4py dask-mpi")
    assert_same_cube(folder / "reference.h5", run_recipe(recipe("dask-mpi"), folder))


# dask-jobqueue's LocalCluster kills its job processes without waiting for them (dask_jobqueue.local
# ._close_job): Python warns about the Popen left unreaped when it is collected
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_dask_jobqueue_recipe(folder):
    dask_jobqueue = pytest.importorskip("dask_jobqueue", reason="pip install dask-jobqueue")
    from dask_jobqueue.local import LocalCluster

    code = recipe("jobqueue")
    arguments = re.search(r"SLURMCluster\((.*)\)", code).group(1)
    options = eval(f"dict({arguments})")  # the recipe's own arguments  # noqa: S307
    # the real SLURMCluster takes them and writes the batch script it would submit: one task thread
    # per worker, the node's cores booked for the numba threads (--threads in the sweep command)
    with dask_jobqueue.SLURMCluster(**options, scheduler_options={"host": "127.0.0.1"}) as slurm:
        script = slurm.job_script()
    threads = int(re.search(r"--threads (\d+)", recipe("jobqueue-sweep")).group(1))
    assert f"--cpus-per-task={options['job_cpu']}" in script and "--nthreads 1" in script, script
    assert options["job_cpu"] == options["processes"] * threads
    # the same worker command, run here by dask-jobqueue's LocalCluster (jobs are local processes)
    with LocalCluster(cores=2, processes=2, memory="2GB", scheduler_options={"host": "127.0.0.1"}) as cluster:
        cluster.scale(jobs=1)
        address = cluster.scheduler_address
        out = run_recipe(recipe("jobqueue-sweep"), folder, {"tcp://10.1.2.3:8786": address})
    assert_same_cube(folder / "reference.h5", out)


def test_threads_give_the_same_cube_and_too_many_are_refused(folder, tmp_path):
    run_sweep(load_spec(folder / "big.toml"), tmp_path / "one.h5", progress=False, threads=1)
    assert_same_cube(folder / "reference.h5", tmp_path / "one.h5")
    import numba

    most = numba.config.NUMBA_NUM_THREADS
    assert_clean_error(
        run("sweep", folder / "big.toml", "--out", tmp_path / "x.h5", "--threads", most + 1),
        f"more than the {most} cores",
    )
    assert_clean_error(
        run("sweep", folder / "big.toml", "--out", tmp_path / "x.h5", "--threads", most, "--workers", 2),
        f"{most} threads x 2 workers",
    )
    assert not (tmp_path / "x.h5").exists()


def test_worker_threads_share_the_cores():
    from paigrid.distributed import worker_threads

    assert worker_threads(4, cores=32) == 8
    assert worker_threads(3, cores=2) == 1
