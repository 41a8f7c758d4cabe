"""Faults of the LLM sweep's file (``paigrid llm sweep``, an alias of ``paigrid sweep``: one
writer, ``store.CubeWriter``): SIGKILL at its named points and Ctrl-C leave no file at the
output's name, only a partial file that ``--resume`` finishes to the same cube (and that a plain
rerun refuses to overwrite) and the hidden file of a cube being created, which the next sweep
removes; a second writer is refused; a sweep that would not fit on the disk is refused before it
starts, and a full disk met while writing is one sentence with nothing replaced; an existing
output keeps its permissions.  And the Dask loop's handling of futures the scheduler dropped
(``distributed._poll_blocks``), on a stand-in client.

These tests guarded the old plain-h5py LLM writer (since removed); each keeps its
hostile input and checks the same guarantee on the unified writer's files (``l.h5.partial``,
``.l.h5.creating``, ``l.h5.lock``) instead of the old writer's (``.l.h5.writing``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import stat
import subprocess
import sys
from collections import namedtuple
from concurrent.futures import CancelledError
from pathlib import Path

import h5py
import numpy as np
import pytest

from cli_helpers import local_dask_workers
from hostile_helpers import assert_one_sentence, invoke, snapshot
from paigrid.errors import PaigridError
from paigrid.inputs.spec import load_spec
from paigrid.orchestration import run_sweep

ARGS = [
    "llm",
    "sweep",
    "--models",
    "llama3-8b",
    "--n-gpu",
    "8,16",
    "--gpu",
    "H100",
    "--domain",
    "8",
    "--network",
    "ib-ndr-400g",
    "--full",
    "-q",
]


def command(out: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    full = {
        **os.environ,
        "NUMBA_CACHE_DIR": os.environ.get("NUMBA_CACHE_DIR", str(Path.home() / ".cache" / "paigrid-tests-numba")),
        **(env or {}),
    }
    return subprocess.run(
        [sys.executable, "-c", "from paigrid.cli import main; main()", *ARGS, "-o", str(out)],
        env=full,
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def error_line(stderr: str) -> str:
    """stderr less the size line a full sweep states first."""
    return "\n".join(line for line in stderr.splitlines() if not line.startswith("full LLM sweep: "))


def contents(path: Path) -> dict[str, np.ndarray]:
    """Every dataset of an HDF5 file by name."""
    out = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, item: out.__setitem__(name, item[()]) if isinstance(item, h5py.Dataset) else None)
    return out


def assert_same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    out = tmp_path_factory.mktemp("reference") / "l.h5"
    code, _, stderr = invoke(*ARGS, "-o", out)
    assert code == 0, stderr
    return contents(out)


#: what a killed or interrupted sweep may leave beside the output: its lock, the hidden cube being
#: created, and the resumable partial cube
LEFT = {"l.h5.lock", ".l.h5.creating", "l.h5.partial"}


@pytest.mark.parametrize("point", ["lock-taken", "creating", "llm-block-written-1", "before-finish"])
def test_a_killed_full_sweep_leaves_nothing_that_looks_whole_and_the_next_one_cleans_up(reference, tmp_path, point):
    out = tmp_path / "l.h5"
    killed = command(out, {"PAIGRID_TEST_KILL_AT": point})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert not out.exists()
    left = {p.name for p in tmp_path.iterdir()}
    assert left <= LEFT, left
    if point == "creating":
        assert ".l.h5.creating" in left  # the hidden, unfinished file: never at the output's name
    if point in ("llm-block-written-1", "before-finish"):
        assert "l.h5.partial" in left  # the resumable partial cube: never at the output's name
        partial = str(tmp_path / "l.h5.partial")
        before = snapshot(tmp_path)[partial]
        code, _, stderr = invoke(*ARGS, "-o", out)  # without --resume: refused, the partial kept as it was
        assert_one_sentence(code, error_line(stderr), "interrupted sweep is waiting", "--resume")
        assert snapshot(tmp_path) == {partial: before}  # the killed writer's stale lock taken over and released
        code, _, stderr = invoke(*ARGS, "-o", out, "--resume")
    else:
        code, _, stderr = invoke(*ARGS, "-o", out)
    assert code == 0, stderr
    assert {p.name for p in tmp_path.iterdir()} == {"l.h5"}  # the stale lock taken over, the hidden file removed
    assert_same(contents(out), reference)


def test_ctrl_c_is_one_sentence_and_leaves_nothing_at_the_output(reference, tmp_path):
    out = tmp_path / "l.h5"
    stopped = command(out, {"PAIGRID_TEST_KILL_AT": "llm-block-written-1", "PAIGRID_TEST_SIGNAL": "SIGINT"})
    assert_one_sentence(stopped.returncode, error_line(stopped.stderr), "interrupted", "--resume")
    assert stopped.returncode == 130
    assert {p.name for p in tmp_path.iterdir()} == {"l.h5.partial"}  # the lock released, no output
    code, _, stderr = invoke(*ARGS, "-o", out, "--resume")
    assert code == 0, stderr
    assert {p.name for p in tmp_path.iterdir()} == {"l.h5"}
    assert_same(contents(out), reference)


def test_a_sweep_that_would_not_fit_is_refused_before_it_starts(tmp_path, monkeypatch):
    import paigrid.files as files

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(files.shutil, "disk_usage", lambda folder: usage(10**6, 10**6 - 1000, 1000))
    (tmp_path / "l.h5").write_bytes(b"an earlier result")
    before = snapshot(tmp_path)
    code, _, stderr = invoke(*ARGS, "-o", tmp_path / "l.h5")
    assert_one_sentence(code, error_line(stderr), "the cube needs about", "free", "drop --full")
    assert snapshot(tmp_path) == before


def test_a_full_disk_while_writing_is_one_sentence_and_replaces_nothing(tmp_path, monkeypatch):
    from paigrid.store import CubeWriter

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(CubeWriter, "write_llm_block", full)
    (tmp_path / "l.h5").write_bytes(b"an earlier result")
    before = snapshot(tmp_path)
    code, _, stderr = invoke(*ARGS, "-o", tmp_path / "l.h5")
    assert_one_sentence(code, error_line(stderr), "No space left on device", "0 of 2 blocks are saved", "--resume")
    after = snapshot(tmp_path)
    kept = str(tmp_path / "l.h5")
    assert after[kept] == before[kept]  # the earlier result is not replaced
    assert set(after) - set(before) <= {str(tmp_path / "l.h5.partial")}  # only the resumable partial cube


def test_an_existing_output_keeps_its_permissions_and_a_new_one_gets_the_usual(tmp_path):
    kept = tmp_path / "kept.h5"
    kept.write_bytes(b"old")
    kept.chmod(0o640)
    code, _, stderr = invoke(*ARGS, "-o", kept)
    assert code == 0, stderr
    assert stat.S_IMODE(kept.stat().st_mode) == 0o640 and h5py.is_hdf5(kept)
    new = tmp_path / "new.h5"
    umask = os.umask(0o022)
    try:
        code, _, stderr = invoke(*ARGS, "-o", new)
    finally:
        os.umask(umask)
    assert code == 0, stderr
    assert stat.S_IMODE(new.stat().st_mode) == 0o644


def test_a_second_writer_is_refused_naming_the_first(tmp_path):
    import paigrid.locking as locking

    out = tmp_path / "l.h5"
    with locking.OutputLock(out).acquire(str(out)):
        code, _, stderr = invoke(*ARGS, "-o", out)
    assert_one_sentence(code, error_line(stderr), f"pid {os.getpid()}", "is writing")
    assert not out.exists()


# --- Dask: futures the scheduler dropped -----------------------------------------------------------------
class _Future:
    """A stand-in for a distributed Future: its ``status`` follows a script ("cancelled" once, as
    after a worker killed while the client was paused, then "finished")."""

    def __init__(self, index: int, states: list[str]):
        self.index, self.states = index, states
        self.status = states.pop(0) if states else "finished"
        self.released = False

    def result(self):
        if self.status == "cancelled":
            raise CancelledError(f"paigrid-block-{self.index} already forgotten")
        if self.status == "error":
            raise ValueError("the task's own error")
        return ("block", self.index)

    def release(self):
        self.released = True


class _Client:
    def __init__(self, script: dict[int, list[list[str]]]):
        self.script = script  # block -> the state lists of its successive submissions
        self.submitted: list[int] = []

    def scatter(self, grid, broadcast=True):
        return _Future(-1, [])

    def submit(self, function, shared, index, *args, key=None, **kwargs):
        self.submitted.append(index)
        runs = self.script.get(index, [])
        return _Future(index, runs.pop(0) if runs else [])


@pytest.fixture
def no_wait(monkeypatch):
    import dask.distributed

    def wait(futures, timeout=None, return_when=None):  # as distributed's: it raises for a cancelled future
        if any(f.status == "cancelled" for f in futures):
            raise CancelledError("1 Future cancelled for reason: already forgotten.")

    monkeypatch.setattr(dask.distributed, "wait", wait)


def test_a_dropped_future_is_submitted_again_instead_of_ending_the_sweep(no_wait):
    from paigrid.distributed import _poll_blocks

    client = _Client({1: [["cancelled"]], 3: [["cancelled"], ["cancelled"]]})
    blocks = [(i, i + 1) for i in range(5)]
    got = list(_poll_blocks(client, None, blocks, list(range(5)), True, "lz4", (1,), None, 2))
    assert sorted(index for _, index in got) == [0, 1, 2, 3, 4]
    assert client.submitted.count(1) == 2 and client.submitted.count(3) == 3


def test_a_block_dropped_too_often_is_one_sentence(no_wait):
    from paigrid.distributed import RESUBMITS, _poll_blocks
    from paigrid.errors import PaigridError

    client = _Client({0: [["cancelled"] for _ in range(RESUBMITS + 2)]})
    with pytest.raises(PaigridError, match="lost block 0 .* --resume"):
        list(_poll_blocks(client, None, [(0, 1)], [0], True, "lz4", (1,), None, 2))


def test_a_tasks_own_error_still_reaches_the_caller(no_wait):
    from paigrid.distributed import _poll_blocks

    client = _Client({0: [["error"]]})
    with pytest.raises(ValueError, match="the task's own error"):
        list(_poll_blocks(client, None, [(0, 1)], [0], True, "lz4", (1,), None, 2))


# --- the unified cube's LLM group: paigrid sweep with LLM jobs ------------------------------------------
#: data-parallel and LLM jobs in one spec: 2 data-parallel blocks, then 3 LLM blocks (one job at one
#: GPU count each), the layout space kept small so that a sweep takes seconds
MIXED_SPEC = """
workloads = ["resnet50", "bert-base", "llama3-8b"]
jobs_per_block = 1

[grid]
gpu = ["H100-SXM5-80GB"]
n_gpu = [8, 16, 64]
precision = ["amp-bf16"]
network = ["ib-ndr-400g"]

[llm]
cp = [1]
vpp = [1]
micro_batch = [1]
zero = [1]
recompute = ["selective"]
"""
N_DP_BLOCKS, N_LLM_BLOCKS = 2, 3
#: an LLM-heavy cube of about 1.5 MB (the default [llm] space: 5,481 layouts), for the full disk
BIG_LLM_SPEC = """
workloads = ["resnet50", "llama3-8b"]
jobs_per_block = 1

[grid]
gpu = ["H100-SXM5-80GB"]
n_gpu = [8, 64, 512]
precision = ["amp-bf16"]
network = ["ib-ndr-400g"]
"""


def paigrid_process(*args, env: dict | None = None, prelude: str = "") -> subprocess.CompletedProcess:
    """``paigrid ARGS`` in a process of its own (kernels cached where the in-process tests cache
    them), SIGINT at its default disposition; ``prelude`` is Python run before the command."""
    full = {
        **os.environ,
        "NUMBA_CACHE_DIR": os.environ.get("NUMBA_CACHE_DIR", str(Path.home() / ".cache" / "paigrid-tests-numba")),
        **(env or {}),
    }
    return subprocess.run(
        [sys.executable, "-c", f"{prelude}from paigrid.cli import main; main()", *map(str, args)],
        env=full,
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    """A folder with the mixed spec and its uninterrupted cube ``reference.h5``."""
    folder = tmp_path_factory.mktemp("mixed")
    (folder / "spec.toml").write_text(MIXED_SPEC)
    code, _, stderr = invoke("sweep", folder / "spec.toml", "-o", folder / "reference.h5", "-q")
    assert code == 0, stderr
    with h5py.File(folder / "reference.h5", "r") as f:
        assert len(f["block_done"]) == N_DP_BLOCKS and len(f["llm/block_done"]) == N_LLM_BLOCKS
    return folder


def names_left(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir()}


#: the points of a mixed sweep's write (``faults.fault_point``), each with the blocks of each
#: family its partial file holds when killed there (None: no partial file yet)
MIXED_POINTS = {
    "lock-taken": None,
    "creating": None,
    "skeleton-written": None,
    "after-create": (0, 0),
    "after-block-2": (2, 0),
    "llm-block-written-1": (2, 1),
    "after-llm-block-2": (2, 2),
    "before-finish": (2, 3),
}


@pytest.mark.faults
@pytest.mark.parametrize("point", MIXED_POINTS)
def test_a_mixed_sweep_killed_at_each_point_leaves_nothing_that_looks_whole(mixed, tmp_path, point):
    """SIGKILL at each named point of a sweep with LLM jobs: no file at the output's name; a
    partial file, once there, is a readable cube holding exactly the blocks written whole of both
    families; the next sweep (--resume when there is a partial) takes the dead writer's lock over,
    removes its half-created file, and ends with the same cube, LLM group included."""
    out = tmp_path / "cube.h5"
    killed = paigrid_process("sweep", mixed / "spec.toml", "-o", out, "-q", env={"PAIGRID_TEST_KILL_AT": point})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert not out.exists()
    assert names_left(tmp_path) <= {"cube.h5.lock", "cube.h5.partial", ".cube.h5.creating"}, names_left(tmp_path)
    expected = MIXED_POINTS[point]
    partial = tmp_path / "cube.h5.partial"
    assert partial.exists() == (expected is not None)
    if expected is not None:
        with h5py.File(partial, "r") as f:
            assert (int(f["block_done"][:].sum()), int(f["llm/block_done"][:].sum())) == expected
        assert_one_sentence(*invoke("query", out, "--best-arch")[::2], "unfinished", "--resume")
    resume = ["--resume"] if expected is not None else []
    code, _, stderr = invoke("sweep", mixed / "spec.toml", "-o", out, "-q", *resume)
    assert code == 0, stderr
    assert names_left(tmp_path) == {"cube.h5"}  # no lock, no partial, no half-created file
    assert_same(contents(out), contents(mixed / "reference.h5"))


@pytest.mark.faults
def test_ctrl_c_during_the_llm_blocks_is_one_sentence_and_resumes(mixed, tmp_path):
    out = tmp_path / "cube.h5"
    stopped = paigrid_process(
        "sweep",
        mixed / "spec.toml",
        "-o",
        out,
        "-q",
        env={"PAIGRID_TEST_KILL_AT": "after-llm-block-1", "PAIGRID_TEST_SIGNAL": "SIGINT"},
    )
    assert_one_sentence(stopped.returncode, stopped.stderr, "interrupted: 3 of 5 blocks are saved", "--resume")
    assert names_left(tmp_path) == {"cube.h5.partial"}  # the lock released
    code, _, stderr = invoke("sweep", mixed / "spec.toml", "-o", out, "-q", "--resume")
    assert code == 0, stderr
    assert_same(contents(out), contents(mixed / "reference.h5"))


def test_the_space_check_counts_the_llm_group(tmp_path, monkeypatch):
    """A sweep of LLM jobs only (nothing data-parallel to count) that would not fit is refused
    before anything is written."""
    import paigrid.orchestration as orchestration

    (tmp_path / "spec.toml").write_text(BIG_LLM_SPEC.replace('"resnet50", ', ""))
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(orchestration.shutil, "disk_usage", lambda folder: usage(10**9, 10**9 - 20_000, 20_000))
    before = snapshot(tmp_path)
    code, _, stderr = invoke("sweep", tmp_path / "spec.toml", "-o", tmp_path / "cube.h5", "-q")
    assert_one_sentence(code, stderr, "MB", "free", "--no-space-check")
    assert snapshot(tmp_path) == before


@pytest.mark.faults
def test_an_injected_full_disk_in_the_llm_group_stops_cleanly_and_resumes(mixed, tmp_path, monkeypatch):
    """The free space drops once the data-parallel blocks are written: the first LLM block's room
    check stops the sweep in one sentence before HDF5 meets the full disk; the partial holds the
    data-parallel blocks, and --resume finishes the cube."""
    import paigrid.orchestration as orchestration

    real = shutil.disk_usage
    full = {"now": False}

    def usage(folder):
        total, used, free = real(folder)
        return type(real(folder))(total, used, 1000 if full["now"] else free)

    def fill(_written):
        full["now"] = _written >= N_DP_BLOCKS

    out = tmp_path / "cube.h5"
    monkeypatch.setattr(orchestration.shutil, "disk_usage", usage)
    spec = load_spec(mixed / "spec.toml")
    with pytest.raises(PaigridError, match=r"No space left on device.*2 of 5 blocks are saved.*--resume"):
        run_sweep(spec, out, progress=False, on_block=fill)
    monkeypatch.undo()
    assert names_left(tmp_path) == {"cube.h5.partial"}
    with h5py.File(tmp_path / "cube.h5.partial", "r") as f:
        assert f["block_done"][:].all() and not f["llm/block_done"][:].any()
    code, _, stderr = invoke("sweep", mixed / "spec.toml", "-o", out, "-q", "--resume")
    assert code == 0, stderr
    assert_same(contents(out), contents(mixed / "reference.h5"))


@contextlib.contextmanager
def small_filesystem(folder: Path, size: str):
    """A tmpfs of ``size`` mounted at ``folder`` (root only; skipped where mounting is not allowed)."""
    folder.mkdir()
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("mounting a small file system needs root (the injected full-disk test covers the rest)")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.decode().strip()})")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


@pytest.fixture(scope="module")
def big_llm(tmp_path_factory):
    """The LLM-heavy spec, its uninterrupted cube, and ``data-parallel-part``: the size of its
    partial file once the data-parallel block is written (killed there) [bytes]."""
    folder = tmp_path_factory.mktemp("big-llm")
    (folder / "spec.toml").write_text(BIG_LLM_SPEC)
    code, _, stderr = invoke("sweep", folder / "spec.toml", "-o", folder / "reference.h5", "-q")
    assert code == 0, stderr
    killed = paigrid_process(
        "sweep", folder / "spec.toml", "-o", folder / "k.h5", "-q", env={"PAIGRID_TEST_KILL_AT": "after-block-1"}
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    (folder / "data-parallel-part").write_text(str((folder / "k.h5.partial").stat().st_size))
    return folder


@pytest.mark.faults
@pytest.mark.parametrize("guard", ["checked", "inside-hdf5"])
def test_a_real_disk_filling_during_the_llm_group_leaves_nothing_that_looks_whole(big_llm, tmp_path, guard):
    """A tmpfs that holds the partial file with its data-parallel block and 64 kB more (and the
    slack the room checks keep free, when they are on), less than the first LLM block needs
    (about 230 kB compressed).  The sweep stops in one sentence (found by the LLM block's room
    check, or, with that check off, when HDF5 itself fails to write: no crash on the way out);
    nothing is at the output's name and the partial is a readable cube with the blocks written
    whole; once the disk grows, --resume gives the uninterrupted cube."""
    import paigrid.orchestration as orchestration

    slack = orchestration.ROOM_SLACK if guard == "checked" else 0
    room = (int((big_llm / "data-parallel-part").read_text()) + slack) // 1024 + 64
    assert (room - 64) * 1024 + 230_000 > (big_llm / "data-parallel-part").stat().st_size
    with small_filesystem(tmp_path / "disk", f"{room}k") as disk:
        out = disk / "cube.h5"
        prelude = (
            "import paigrid.orchestration as s; s._check_room = s._check_llm_room = lambda *a: None; "
            if guard == "inside-hdf5"
            else ""
        )
        done = paigrid_process("sweep", big_llm / "spec.toml", "-o", out, "-q", "--no-space-check", prelude=prelude)
        assert_one_sentence(done.returncode, done.stderr, "No space left on device", "blocks are saved", "--resume")
        assert done.returncode == 2  # not a crash on the way out
        assert not out.exists()
        with h5py.File(disk / "cube.h5.partial", "r") as f:
            assert int(f["block_done"][:].sum()) == 1 and int(f["llm/block_done"][:].sum()) < 3
        subprocess.run(["mount", "-o", "remount,size=64m", str(disk)], check=True)
        if guard == "inside-hdf5":
            # HDF5 failed between two flushes and left index entries past the file's recorded end:
            # the partial cannot be resumed, which --resume says (leaving it as it was) rather than
            # failing inside HDF5; a sweep afresh then gives the cube
            before = snapshot(disk)
            code, _, stderr = invoke("sweep", big_llm / "spec.toml", "-o", out, "-q", "--resume")
            assert_one_sentence(code, stderr, "cannot be resumed", "metadata is damaged", "delete it")
            assert snapshot(disk) == before
            (disk / "cube.h5.partial").unlink()
            code, _, stderr = invoke("sweep", big_llm / "spec.toml", "-o", out, "-q")
        else:
            code, _, stderr = invoke("sweep", big_llm / "spec.toml", "-o", out, "-q", "--resume")
        assert code == 0, stderr
        assert_same(contents(out), contents(big_llm / "reference.h5"))


def test_a_second_writer_of_a_mixed_sweep_is_refused_naming_the_first(mixed, tmp_path):
    import paigrid.locking as locking

    out = tmp_path / "cube.h5"
    with locking.OutputLock(out).acquire(str(out)):
        before = snapshot(tmp_path)
        code, _, stderr = invoke("sweep", mixed / "spec.toml", "-o", out, "-q")
        assert_one_sentence(code, stderr, f"pid {os.getpid()}", "is writing")
        assert snapshot(tmp_path) == before


def test_a_mixed_sweep_keeps_an_existing_outputs_permissions(mixed, tmp_path):
    kept = tmp_path / "kept.h5"
    shutil.copyfile(mixed / "reference.h5", kept)
    kept.chmod(0o640)
    code, _, stderr = invoke("sweep", mixed / "spec.toml", "-o", kept, "-q")
    assert code == 0, stderr
    assert stat.S_IMODE(kept.stat().st_mode) == 0o640
    new = tmp_path / "new.h5"
    umask = os.umask(0o022)
    try:
        code, _, stderr = invoke("sweep", mixed / "spec.toml", "-o", new, "-q")
    finally:
        os.umask(umask)
    assert code == 0, stderr
    assert stat.S_IMODE(new.stat().st_mode) == 0o644
    assert_same(contents(kept), contents(mixed / "reference.h5"))


def _flip_llm_chunk(path: Path, variable: str = "step_time", chunk: int = 1) -> None:
    with h5py.File(path, "r") as f:
        info = f[f"llm/{variable}"].id.get_chunk_info(chunk)
    with open(path, "r+b") as handle:
        handle.seek(info.byte_offset + info.size // 2)
        byte = handle.read(1)
        handle.seek(info.byte_offset + info.size // 2)
        handle.write(bytes([byte[0] ^ 0x10]))


@pytest.mark.parametrize("read", ["values", "breakdown", "load"])
def test_a_flipped_bit_in_an_llm_chunk_is_named_by_query_and_the_api(mixed, tmp_path, read):
    import paigrid

    cube = tmp_path / "cube.h5"
    shutil.copyfile(mixed / "reference.h5", cube)
    _flip_llm_chunk(cube)
    sentence = "chunk of job llama3-8b of llm/step_time fails its checksum"
    with h5py.File(cube, "r") as f:
        label = f["llm/layout"][0].decode()
    code, _, stderr = invoke("query", cube, "--best-arch", "--where", f"layout={label}")
    assert_one_sentence(code, stderr, sentence)
    ds = paigrid.open_dataset(cube, group="llm")
    with pytest.raises(PaigridError, match=sentence) as error:
        if read == "values":
            _ = ds.step_time.values
        elif read == "breakdown":
            ds.paigrid.breakdown(job="llama3-8b", n_gpu=16)
        else:
            ds.load()
    assert "\n" not in str(error.value) and "errno" not in str(error.value)
    ds.close()


@pytest.mark.slow
@pytest.mark.dask
def test_a_mixed_sweep_survives_a_dask_worker_killed_while_the_client_is_paused(mixed, tmp_path):
    """The data-parallel blocks on a local Dask cluster, a worker SIGKILLed while the client is
    paused in ``on_block`` (its futures dropped by the scheduler), then the LLM blocks: the cube,
    LLM group included, equals an uninterrupted one."""
    pytest.importorskip("dask.distributed", reason="the dask extra is part of the test install")
    import time

    killed = []

    def pause(_written):
        if killed:
            return
        workers = local_dask_workers()
        assert workers, "no local Dask worker process found"
        workers[-1].send_signal(signal.SIGKILL)
        killed.append(workers[-1].pid)
        time.sleep(3)  # the client does nothing meanwhile: the scheduler notices the dead worker

    run_sweep(load_spec(mixed / "spec.toml"), tmp_path / "cube.h5", progress=False, workers=2, on_block=pause)
    assert killed
    assert_same(contents(tmp_path / "cube.h5"), contents(mixed / "reference.h5"))


@pytest.mark.parametrize(
    "old,new,fragment",
    [
        ('recompute = ["selective"]', 'recompute = ["full"]', "llm.recompute: ['selective'] then, ['full'] now"),
        ("[llm]\n", '[llm.options]\nattention = "eager"\n\n[llm]\n', "llm.options"),
        ("n_gpu = [8, 16, 64]", "n_gpu = [8, 16]", "n_gpu"),
    ],
)
def test_a_resume_of_a_mixed_partial_with_another_llm_space_says_what_changed(mixed, tmp_path, old, new, fragment):
    """Interrupted during its LLM blocks, then resumed from a spec whose [llm] table (or grid)
    changed: refused, naming the change, and the partial is left byte for byte."""
    out = tmp_path / "cube.h5"

    def stop(written):
        if written > N_DP_BLOCKS:
            raise KeyboardInterrupt

    with pytest.raises(PaigridError, match="--resume"):
        run_sweep(load_spec(mixed / "spec.toml"), out, progress=False, on_block=stop)
    assert new not in MIXED_SPEC and old in MIXED_SPEC
    (tmp_path / "spec.toml").write_text(MIXED_SPEC.replace(old, new, 1))
    before = snapshot(tmp_path)
    code, _, stderr = invoke("sweep", tmp_path / "spec.toml", "-o", out, "-q", "--resume")
    assert_one_sentence(code, stderr, "different spec", fragment)
    assert snapshot(tmp_path) == before
