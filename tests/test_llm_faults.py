"""Faults of the LLM sweep's file (``paigrid llm sweep``, an alias of ``paigrid sweep``: one
writer, ``store.CubeWriter``): SIGKILL at its named points and Ctrl-C leave no file at the
output's name, only a partial file that ``--resume`` finishes to the same cube (and that a plain
rerun refuses to overwrite) and the hidden file of a cube being created, which the next sweep
removes; a second writer is refused; a sweep that would not fit on the disk is refused before it
starts, and a full disk met while writing is one sentence with nothing replaced; an existing
output keeps its permissions.  And the Dask loop's handling of futures the scheduler dropped
(``distributed._poll_blocks``), on a stand-in client.

These tests guarded the old plain-h5py LLM writer (``userfiles.replacing_file``); each keeps its
hostile input and checks the same guarantee on the unified writer's files (``l.h5.partial``,
``.l.h5.creating``, ``l.h5.lock``) instead of the old writer's (``.l.h5.writing``).
"""

from __future__ import annotations

import errno
import os
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

from hostile_helpers import assert_one_sentence, invoke, snapshot

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
    import paigrid.userfiles as userfiles

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(userfiles.shutil, "disk_usage", lambda folder: usage(10**6, 10**6 - 1000, 1000))
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
    import paigrid.userfiles as userfiles

    out = tmp_path / "l.h5"
    with userfiles.OutputLock(out).acquire(str(out)):
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
