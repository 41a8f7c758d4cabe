"""The LLM blocks of a sweep run through the same executors as the data-parallel blocks (the
thread pipeline, a local Dask cluster), with the same lock, resume and checksums; a mixed sweep
killed (SIGKILL) at the named points of its LLM blocks resumes to the same cube, NaN positions
included; and the kernel cache is keyed by every kernel module's source, so a stale cache can
never answer a test's subprocess differently from its parent (the cause of a resume test that
once failed under load)."""

import os
import shutil
import signal
import subprocess
import sys
import tomllib
from pathlib import Path

import h5py
import hdf5plugin  # noqa: F401  (the lz4 filter of the cubes)
import numpy as np
import pytest

from paigrid.inputs.spec import spec_from_dict
from paigrid.orchestration import run_sweep

SPEC = """
workloads = ["resnet50", "llama3-8b", "llama3-70b"]

[grid]
gpu = ["H100-SXM5-80GB"]
n_gpu = [8, 64]
precision = ["amp-bf16"]
network = ["ib-ndr-400g"]

[llm]
cp = [1]
vpp = [1]
micro_batch = [1]
zero = [1]
recompute = ["selective", "full"]
"""


def datasets(path) -> dict:
    """Every dataset of a cube by name (both families)."""
    out = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, item: out.__setitem__(name, item[()]) if isinstance(item, h5py.Dataset) else None)
    return out


def assert_same_cube(a, b) -> None:
    x, y = datasets(a), datasets(b)
    assert x.keys() == y.keys()
    for name in x:
        if x[name].dtype.kind == "f":
            np.testing.assert_array_equal(np.isnan(x[name]), np.isnan(y[name]), err_msg=f"NaN positions of {name}")
        np.testing.assert_array_equal(x[name], y[name], err_msg=name)


@pytest.fixture(scope="module")
def serial(tmp_path_factory):
    folder = tmp_path_factory.mktemp("llm-executors")
    (folder / "spec.toml").write_text(SPEC)
    run_sweep(spec_from_dict(tomllib.loads(SPEC), "spec"), folder / "serial.h5", progress=False)
    return folder


def command(*args, env=None):
    full = {
        **os.environ,
        "NUMBA_CACHE_DIR": os.environ.get("NUMBA_CACHE_DIR", str(Path.home() / ".cache" / "paigrid-tests-numba")),
        **(env or {}),
    }
    return subprocess.run(
        [sys.executable, "-c", "from paigrid.cli import main; main()", *map(str, args)],
        env=full,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.dask
def test_a_mixed_sweep_on_a_local_dask_cluster_gives_the_serial_cube(serial):
    out = serial / "dask.h5"
    done = command("sweep", serial / "spec.toml", "-o", out, "-q", "--workers", "2", "--threads", "1")
    assert done.returncode == 0, done.stderr
    assert_same_cube(out, serial / "serial.h5")


@pytest.mark.parametrize("point", ["llm-block-written-1", "llm-block-written-4", "before-finish"])
def test_a_sigkilled_mixed_sweep_resumes_to_the_same_cube(serial, tmp_path, point):
    """The blocks are flushed every few seconds (the spec does not fix ``jobs_per_block``), so a
    kill after the K-th LLM block is written finds it flushed or not: every block the partial
    file marks done holds the uninterrupted sweep's cells, NaN positions included, and the
    resumed cube is the uninterrupted one."""
    out = tmp_path / "cube.h5"
    killed = command("sweep", serial / "spec.toml", "-o", out, "-q", env={"PAIGRID_TEST_KILL_AT": point})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    partial = Path(f"{out}.partial")
    assert not out.exists() and partial.exists()
    with h5py.File(partial, "r") as f, h5py.File(serial / "serial.h5", "r") as whole:
        assert f["block_done"][:].all()  # the data-parallel blocks come first
        done = np.flatnonzero(f["llm/block_done"][:])
        if point == "before-finish":
            assert len(done) == len(f["llm/block_done"])
        for b in done:
            j, n = int(f["llm/block_job"][b]), int(f["llm/block_n_gpu"][b])
            for name in ("step_time", "invalid_reason", "best_step_time", "best_layout"):
                got = f[f"llm/{name}"][j, ..., n, :, :, :] if name in ("step_time", "invalid_reason") else None
                if got is None:
                    got, want = f[f"llm/{name}"][j, :, n], whole[f"llm/{name}"][j, :, n]
                else:
                    want = whole[f"llm/{name}"][j, ..., n, :, :, :]
                np.testing.assert_array_equal(got, want, err_msg=f"{name} of the done block {b}")
    resumed = command("sweep", serial / "spec.toml", "-o", out, "-q", "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert_same_cube(out, serial / "serial.h5")


def test_the_kernel_cache_is_keyed_by_every_kernel_module():
    """numba's cache checks only a compiled function's own file; a change to a module whose
    constants it compiled in (dp_columns.py's column indices) would otherwise be answered from a
    stale cache.  ``jit.SOURCES`` names every module of the package, and the fingerprint moves
    with any byte of any of them."""

    from paigrid.kernels import jit

    folder = Path(jit.__file__).parent
    assert sorted(jit.SOURCES) == sorted(p.name for p in folder.glob("*.py"))
    before = jit.source_fingerprint()
    # in a fresh process (this one's numba configuration may have been reloaded by a test that
    # changed NUMBA_CACHE_DIR): importing the kernels points numba's cache at the fingerprint's folder
    code = "import numba; from paigrid.kernels import jit; print(jit.source_fingerprint(), numba.config.CACHE_DIR)"
    again, folder_used = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert again == before  # the same sources: the same folder in every process
    assert folder_used.endswith(f"paigrid-kernels-{before}")
    # and it moves with one byte of a module that holds only constants
    copy = Path(os.environ.get("TMPDIR", "/tmp")) / f"paigrid-jit-{os.getpid()}"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(folder, copy, ignore=shutil.ignore_patterns("__pycache__"))
    try:
        layout = copy / "dp_columns.py"
        layout.write_text(layout.read_text() + "# one more line\n")
        load = (
            "import importlib.util, sys; spec = importlib.util.spec_from_file_location('jit_copy', sys.argv[1]); "
            "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); print(m.source_fingerprint())"
        )
        moved = subprocess.run(
            [sys.executable, "-c", load, str(copy / "fingerprint.py")], capture_output=True, text=True, check=True
        ).stdout.strip()
    finally:
        shutil.rmtree(copy, ignore_errors=True)
    assert len(moved) == 16 and moved != before
