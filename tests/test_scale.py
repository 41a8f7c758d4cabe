"""Scale and safety: Dask workers over loopback, a worker killed mid-sweep, SIGKILL then --resume,
reduce-only sweeps, and the disk-space refusal.  Every sweep is compared value for value with a
plain single-process sweep of the same spec."""

import os
import signal
import subprocess
import sys

import h5py
import numpy as np
import pytest

from cube_compare import assert_same_cube, read_all
from paigrid.errors import PaigridError
from paigrid.inputs.spec import load_spec
from paigrid.orchestration import prepare, run_sweep
from paigrid.schema import FORMAT_VERSION, int_attr, partial_path

SPEC = """
workloads = ["resnet50", "bert-base", "gpt2-medium", "transformer", "vgg16", "gcn", "a3c", "wgan"]
jobs_per_block = 1

[grid]
gpu = ["V100", "A100", "H100", "T4"]
n_gpu = [1, 2, 8, 32, 256]
intra = ["pcie3", "nvlink2-hcm", "nvswitch-nvlink3", "nvswitch-nvlink4"]
network = ["none", "eth-25g", "eth-100g", "ib-hdr-200g"]
precision = ["fp32", "amp-fp16", "fp8"]
"""


@pytest.fixture(scope="module")
def spec_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("scale") / "spec.toml"
    path.write_text(SPEC)
    return path


@pytest.fixture(scope="module")
def reference_cube(spec_file):
    path = spec_file.parent / "reference.h5"
    run_sweep(load_spec(spec_file), path, progress=False)
    return path


@pytest.fixture(scope="module")
def cluster():
    distributed = pytest.importorskip("dask.distributed", reason="the dask extra is part of the test install")
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0", host="127.0.0.1"
    ) as local:
        yield local


@pytest.mark.dask
def test_dask_cluster_gives_the_same_cube(spec_file, reference_cube, cluster, tmp_path):
    path = tmp_path / "dask.h5"
    run_sweep(load_spec(spec_file), path, scheduler=cluster.scheduler_address, progress=False)
    assert_same_cube(reference_cube, path)


@pytest.mark.dask
@pytest.mark.faults
def test_worker_killed_mid_sweep_loses_nothing(spec_file, reference_cube, cluster, tmp_path):
    from dask.distributed import Client

    killed = []

    def kill_a_worker(written):
        if written == 2 and not killed:
            with Client(cluster.scheduler_address) as client:
                pids = client.run(os.getpid)
            pid = next(iter(pids.values()))
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    path = tmp_path / "killed.h5"
    run_sweep(load_spec(spec_file), path, scheduler=cluster.scheduler_address, progress=False, on_block=kill_a_worker)
    assert killed, "the worker was never killed"
    assert_same_cube(reference_cube, path)


@pytest.mark.dask
def test_local_workers_option_starts_a_cluster(spec_file, reference_cube, tmp_path):
    path = tmp_path / "workers.h5"
    run_sweep(load_spec(spec_file), path, workers=2, progress=False)
    assert_same_cube(reference_cube, path)


@pytest.mark.faults
def test_sigkill_then_resume_gives_the_same_cube(spec_file, reference_cube, tmp_path):
    path = tmp_path / "resumed.h5"
    command = [
        sys.executable,
        "-c",
        "from paigrid.cli import main; main()",
        "sweep",
        str(spec_file),
        "--out",
        str(path),
    ]
    with subprocess.Popen(command, stderr=subprocess.PIPE, text=True) as process:  # closes the pipe
        line = process.stderr.readline()  # "sweep: block 1 of 8 written, ..." after the first block
        process.send_signal(signal.SIGKILL)
        process.wait()
    assert "block 1 of 8" in line, line
    assert not path.exists() and partial_path(path).exists()
    with h5py.File(partial_path(path), "r") as f:
        assert 1 <= int(f["block_done"][:].sum()) < 8
        assert int_attr(f.attrs, "complete") == 0
    with pytest.raises(PaigridError, match="--resume"):
        run_sweep(load_spec(spec_file), path, progress=False)
    with pytest.raises(PaigridError, match="started with --compression lz4"):  # never silently the file's
        run_sweep(load_spec(spec_file), path, resume=True, progress=False, compression="gzip")
    run_sweep(load_spec(spec_file), path, resume=True, progress=False)
    assert_same_cube(reference_cube, path)
    with h5py.File(path, "r") as f:
        assert f.attrs["compression"] == "lz4"


def test_resume_refuses_a_different_spec(spec_file, tmp_path):
    path = tmp_path / "cube.h5"

    def stop(written):
        raise KeyboardInterrupt

    with pytest.raises(PaigridError, match="--resume"):
        run_sweep(load_spec(spec_file), path, progress=False, on_block=stop)
    other = tmp_path / "other.toml"
    other.write_text(SPEC.replace('"T4"', '"L4"'))
    with pytest.raises(PaigridError, match="different spec"):
        run_sweep(load_spec(other), path, resume=True, progress=False)


def test_resume_refuses_a_partial_of_another_cube_format(spec_file, tmp_path):
    path = tmp_path / "cube.h5"

    def stop(written):
        raise KeyboardInterrupt

    with pytest.raises(PaigridError, match="--resume"):
        run_sweep(load_spec(spec_file), path, progress=False, on_block=stop)
    with h5py.File(partial_path(path), "r+") as f:
        assert int_attr(f.attrs, "format_version") == FORMAT_VERSION
        del f.attrs["format_version"]  # as paigrid 0.1.0 wrote it: format 1, variable valid
    with pytest.raises(PaigridError, match=f"started in cube format 1 .* writes format {FORMAT_VERSION}"):
        run_sweep(load_spec(spec_file), path, resume=True, progress=False)


def test_reduce_only_stores_the_same_reductions(spec_file, reference_cube, tmp_path):
    path = tmp_path / "reduced.h5"
    run_sweep(load_spec(spec_file), path, reduce_only=True, progress=False)
    full, reduced = read_all(reference_cube), read_all(path)
    assert "step_time" not in reduced
    from paigrid.cube import open_cube
    from paigrid.query import best_configurations, parse_where

    cube = open_cube(path)
    try:
        assert len(best_configurations(cube, "cost", parse_where(["gpu=A100"], cube))) == 8
        with pytest.raises(PaigridError, match="reduce-only"):
            best_configurations(cube, "time", parse_where(["arch=ps-worker"], cube))
    finally:
        cube.close()
    for name in ("best_step_time", "best_index", "best_bottleneck", "t_flop", "fits_memory", "current_throughput"):
        np.testing.assert_array_equal(full[name], reduced[name], err_msg=name)


def test_sweep_too_large_for_the_disk_is_refused(spec_file, tmp_path, monkeypatch):
    import shutil
    from collections import namedtuple

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(10**9, 10**9 - 1000, 1000))
    with pytest.raises(PaigridError, match="--reduce-only") as info:
        run_sweep(load_spec(spec_file), tmp_path / "big.h5", progress=False)
    assert "MB" in str(info.value)  # sizes below 1 GB are given in MB
    assert not list(tmp_path.glob("big.h5*"))
    grid, _ = prepare(load_spec(spec_file))
    assert grid.configs > 1000
