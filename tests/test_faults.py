"""Deterministic faults: a sweep killed (SIGKILL) at each named point of its write, interrupted by
SIGINT and SIGTERM (and Ctrl-C on a Dask sweep), two writers on one output with and without
HDF5's file locking, a full disk (a small tmpfs where it can be mounted, injected ENOSPC
always), bit flips in cube chunks, special output files, a closed stdout pipe.

The kill points come from the test hook ``PAIGRID_TEST_KILL_AT`` (``paigrid.faults.fault_point``):
the sweep signals itself at exactly that point, so nothing here depends on timing.  After every
fault the output is checked: nothing that looks whole is left half-written, and the finished
cube (resumed or re-run) equals an uninterrupted one value for value.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import h5py
import numpy as np
import pytest

from cli_helpers import local_dask_workers
from cube_compare import assert_same_cube
from hostile_helpers import assert_one_sentence, invoke
from paigrid.errors import PaigridError
from paigrid.inputs.spec import load_spec
from paigrid.orchestration import run_sweep
from paigrid.schema import partial_path
from paigrid.study.population import synthetic_population
from paigrid.study.trace import write_population

pytestmark = pytest.mark.faults

SPEC = """
jobs_per_block = 1

[grid]
gpu = ["V100", "A100"]
n_gpu = [1, 8]
intra = ["pcie3", "nvlink2-hcm"]
network = ["none", "eth-25g"]
precision = ["fp32", "amp-fp16"]
"""
#: a cube of about 4 MB (8 jobs of the default hardware grid, 8 blocks), for the full-disk tests
BIG_SPEC = """
workloads = ["resnet50", "bert-large-seq384", "gpt2-medium", "vgg16", "transformer", "gcn", "a3c", "wgan"]
jobs_per_block = 1
"""
N_BIG_BLOCKS = 8
N_BLOCKS = 6
POINTS = [
    "lock-taken",
    "creating",
    "skeleton-written",
    "after-create",
    "after-block-1",
    "after-block-4",
    "before-finish",
]


def _default_sigint() -> None:
    """In the child, before Python starts: Ctrl-C as in a terminal.  A test suite started in the
    background (``cmd &`` in a script) inherits SIGINT ignored, and Python then never turns it
    into KeyboardInterrupt, so the Ctrl-C tests would test nothing."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def command(*args, env=None, **popen):
    """``paigrid ARGS`` as a process (kernels cached where the in-process tests cache them), with
    SIGINT at its default disposition (``_default_sigint``)."""
    full = {
        **os.environ,
        "NUMBA_CACHE_DIR": os.environ.get("NUMBA_CACHE_DIR", str(Path.home() / ".cache" / "paigrid-tests-numba")),
        **(env or {}),
    }
    return subprocess.Popen(
        [sys.executable, "-c", "from paigrid.cli import main; main()", *map(str, args)],
        env=full,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_default_sigint,
        **popen,
    )


def run_command(*args, env=None, timeout=120):
    process = command(*args, env=env)
    stdout, stderr = process.communicate(timeout=timeout)
    return process.returncode, stdout, stderr


def leftovers(folder: Path, name: str) -> set[str]:
    return {p.name for p in folder.iterdir() if name in p.name}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("faults")
    (folder / "spec.toml").write_text(SPEC)
    write_population(synthetic_population(N_BLOCKS, 3), folder / "pop.csv")
    spec = load_spec(folder / "spec.toml")
    spec.workloads = str(folder / "pop.csv")
    run_sweep(spec, folder / "reference.h5", progress=False)
    return folder


def sweep_args(inputs, out, *extra):
    return ["sweep", inputs / "spec.toml", "--workloads", inputs / "pop.csv", "--out", out, *extra]


def finish(inputs, out, resume):
    spec = load_spec(inputs / "spec.toml")
    spec.workloads = str(inputs / "pop.csv")
    run_sweep(spec, out, progress=False, resume=resume)


@pytest.mark.parametrize("point", POINTS)
def test_sigkill_at_each_point_leaves_nothing_that_looks_whole(inputs, tmp_path, point):
    out = tmp_path / "cube.h5"
    code, _, _ = run_command(*sweep_args(inputs, out, "-q"), env={"PAIGRID_TEST_KILL_AT": point})
    assert code == -signal.SIGKILL
    assert not out.exists()  # the final name only ever holds a finished cube
    partial = partial_path(out)
    created = point in ("after-create", "before-finish") or point.startswith("after-block")
    assert partial.exists() == created
    if created:
        with h5py.File(partial, "r") as f:  # a .partial file is always a readable cube ...
            done = int(f["block_done"][:].sum())
            assert np.isfinite(f["current_throughput"][:]).all()  # ... with the current predictions
        assert done == {"after-create": 0, "after-block-1": 1, "after-block-4": 4}.get(point, N_BLOCKS)
        code, stdout, stderr = invoke("info", partial)
        assert code == 0, stderr
        assert ("status: complete" if done == N_BLOCKS else f"{done} of {N_BLOCKS} blocks written") in stdout
        with pytest.raises(PaigridError, match="--resume"):
            finish(inputs, out, resume=False)
    else:
        assert_one_sentence(*invoke("info", out)[::2], "no cube")
    finish(inputs, out, resume=created)  # the dead writer's lock is taken over
    assert_same_cube(inputs / "reference.h5", out)
    assert leftovers(tmp_path, "cube.h5") == {"cube.h5"}  # no lock, no partial, no half-created file


@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM"])
def test_sigint_and_sigterm_stop_with_one_sentence_and_resume(inputs, tmp_path, name):
    out = tmp_path / "cube.h5"
    code, stdout, stderr = run_command(
        *sweep_args(inputs, out, "-q"), env={"PAIGRID_TEST_KILL_AT": "after-block-2", "PAIGRID_TEST_SIGNAL": name}
    )
    assert_one_sentence(code, stderr, "interrupted: 2 of 6 blocks are saved", "--resume")
    assert leftovers(tmp_path, "cube.h5") == {"cube.h5.partial"}  # the lock is released
    finish(inputs, out, resume=True)
    assert_same_cube(inputs / "reference.h5", out)


@pytest.mark.dask
def test_ctrl_c_on_a_dask_sweep_prints_one_sentence(inputs, tmp_path):
    """Ctrl-C reaches the whole process group, the local Dask workers included: they ignore it,
    and the sweep stops with one sentence, no worker traceback."""
    pytest.importorskip("dask.distributed", reason="the dask extra is part of the test install")
    out = tmp_path / "cube.h5"
    process = command(
        *sweep_args(inputs, out, "-q", "--workers", "2"),
        start_new_session=True,
        env={
            "PAIGRID_TEST_KILL_AT": "after-block-2",
            "PAIGRID_TEST_SIGNAL": "SIGINT",
            "PAIGRID_TEST_SIGNAL_GROUP": "1",
        },
    )
    _, stderr = process.communicate(timeout=180)
    assert_one_sentence(process.returncode, stderr, "interrupted", "--resume")
    finish(inputs, out, resume=True)
    assert_same_cube(inputs / "reference.h5", out)


def test_a_dask_worker_killed_while_the_client_is_paused_does_not_end_the_sweep(inputs, tmp_path):
    """A local worker SIGKILLed while the writer is busy (the client paused in ``on_block``, the
    futures of the dead worker's blocks dropped or forgotten by the scheduler): the sweep polls
    every future's state and submits the dropped blocks again, instead of ending in
    ``FutureCancelledError ... already forgotten``; the cube equals an uninterrupted one."""
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

    spec = load_spec(inputs / "spec.toml")
    spec.workloads = str(inputs / "pop.csv")
    run_sweep(spec, tmp_path / "cube.h5", progress=False, workers=2, on_block=pause)
    assert killed
    assert_same_cube(inputs / "reference.h5", tmp_path / "cube.h5")


@pytest.mark.parametrize("hdf5_locking", ["TRUE", "FALSE"])
def test_a_second_writer_is_refused_naming_the_first(inputs, tmp_path, monkeypatch, hdf5_locking):
    """Writer A stops itself (SIGSTOP) holding the output after one block; writer B, fresh or
    --resume, is refused with A's pid and host, whether or not HDF5 locks files, and changes
    nothing; A then finishes a correct cube."""
    out = tmp_path / "cube.h5"
    env = {
        "HDF5_USE_FILE_LOCKING": hdf5_locking,
        "PAIGRID_TEST_KILL_AT": "after-block-1",
        "PAIGRID_TEST_SIGNAL": "SIGSTOP",
    }
    first = command(*sweep_args(inputs, out, "-q"), env=env)
    try:
        _, status = os.waitpid(first.pid, os.WUNTRACED)
        assert os.WIFSTOPPED(status)
        monkeypatch.setenv("HDF5_USE_FILE_LOCKING", hdf5_locking)
        before = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in tmp_path.iterdir()}
        for extra in ((), ("--resume",)):
            code, stdout, stderr = invoke(*sweep_args(inputs, out, "-q", *extra))
            assert_one_sentence(code, stderr, f"pid {first.pid} on {socket.gethostname()}", "is writing")
        assert {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in tmp_path.iterdir()} == before
    finally:
        os.kill(first.pid, signal.SIGCONT)
    _, stderr = first.communicate(timeout=120)
    assert first.returncode == 0, stderr
    assert_same_cube(inputs / "reference.h5", out)


@pytest.mark.parametrize("changed", ["population", "spec", "calibration", "catalogue"])
def test_resume_refuses_an_edited_input_file_naming_it(inputs, tmp_path, changed):
    """Every file a sweep reads is hashed into the partial cube; --resume with one of them edited
    is refused with its name, and the file as it was resumes."""
    files = {
        "population": tmp_path / "pop.csv",
        "spec": tmp_path / "spec.toml",
        "calibration": tmp_path / "calib.toml",
        "catalogue": tmp_path / "optimizers.csv",
    }
    shutil.copyfile(inputs / "pop.csv", files["population"])
    files["spec"].write_text(SPEC + '[catalogues]\noptimizers = "optimizers.csv"\n')
    files["calibration"].write_text("[link_efficiency]\nnvswitch = 0.5\n")
    from hostile_helpers import builtin

    files["catalogue"].write_text(builtin("optimizers.csv"))
    out = tmp_path / "cube.h5"
    args = [
        "sweep",
        files["spec"],
        "--workloads",
        files["population"],
        "--calibration",
        files["calibration"],
        "--out",
        out,
        "-q",
    ]
    code, _, stderr = run_command(*args, env={"PAIGRID_TEST_KILL_AT": "after-block-2"})
    assert code == -signal.SIGKILL, stderr
    original = files[changed].read_bytes()
    edited = {
        "population": original.replace(b",fp32,", b",amp-fp16,", 1),
        "spec": original + b"# a comment\n",
        "calibration": original.replace(b"0.5", b"0.6"),
        "catalogue": original.replace(b",4,", b",8,", 1),
    }
    files[changed].write_bytes(edited[changed])
    assert files[changed].read_bytes() != original
    partial = partial_path(out).read_bytes()
    code, _, stderr = invoke(*args, "--resume")
    assert_one_sentence(code, stderr, f"{files[changed]} (the ", "is not the file", "sha256")
    assert partial_path(out).read_bytes() == partial
    files[changed].write_bytes(original)
    code, _, stderr = invoke(*args, "--resume")
    assert code == 0, stderr


def test_a_stale_lock_of_a_dead_process_is_taken_over(inputs, tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    out = tmp_path / "cube.h5"
    Path(f"{out}.lock").write_text(
        json.dumps({"pid": dead.pid, "host": socket.gethostname(), "started": "1", "since": "then"}) + "\n"
    )
    code, _, stderr = invoke(*sweep_args(inputs, out, "-q"))
    assert code == 0, stderr
    assert leftovers(tmp_path, "cube.h5") == {"cube.h5"}


# --- a full disk ------------------------------------------------------------------------------------


def _free_space(limit: int):
    real = shutil.disk_usage

    def usage(path):
        total, used, _ = real(path)
        return type(real(path))(total, used, limit)

    return usage


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    folder = tmp_path_factory.mktemp("big")
    (folder / "spec.toml").write_text(BIG_SPEC)
    run_sweep(load_spec(folder / "spec.toml"), folder / "reference.h5", progress=False)
    return folder


def test_space_check_estimates_the_compressed_size(big, tmp_path, monkeypatch):
    """A cube of a few MB is not refused for lack of its uncompressed size (about 27 times more);
    one larger than the free space is, in MB, with --no-space-check as the way around."""
    import paigrid.orchestration as orchestration

    size = (big / "reference.h5").stat().st_size
    uncompressed = orchestration.estimated_bytes(orchestration.prepare(load_spec(big / "spec.toml"))[0], False)
    assert uncompressed > 10 * size
    monkeypatch.setattr(orchestration.shutil, "disk_usage", _free_space(3 * size))
    code, _, stderr = invoke("sweep", big / "spec.toml", "--out", tmp_path / "fits.h5", "-q")
    assert code == 0, stderr
    assert_same_cube(big / "reference.h5", tmp_path / "fits.h5")
    monkeypatch.setattr(orchestration.shutil, "disk_usage", _free_space(size // 4))
    code, _, stderr = invoke("sweep", big / "spec.toml", "--out", tmp_path / "big.h5", "-q")
    assert_one_sentence(code, stderr, "MB", "--no-space-check")
    assert leftovers(tmp_path, "big.h5") == set()
    # --no-space-check starts anyway; the free space then stops it before a block that cannot fit
    code, _, stderr = invoke("sweep", big / "spec.toml", "--out", tmp_path / "big.h5", "-q", "--no-space-check")
    assert_one_sentence(code, stderr, "No space left on device", "--resume")


def test_injected_full_disk_stops_cleanly_and_resumes(big, tmp_path, monkeypatch):
    """No room for the next block (injected: the free space drops after two blocks): the sweep
    stops before HDF5 runs into the full disk, says so in one sentence, and resumes."""
    import paigrid.orchestration as orchestration

    out = tmp_path / "cube.h5"
    real, calls = shutil.disk_usage, []

    def shrinking(path):
        calls.append(path)
        total, used, free = real(path)
        return type(real(path))(total, used, free if len(calls) <= 2 else 1000)

    monkeypatch.setattr(orchestration.shutil, "disk_usage", shrinking)
    code, _, stderr = invoke("sweep", big / "spec.toml", "--out", out, "-q", "--no-space-check")
    assert_one_sentence(code, stderr, "No space left on device", f"2 of {N_BIG_BLOCKS} blocks are saved", "--resume")
    monkeypatch.undo()
    code, _, stderr = invoke("sweep", big / "spec.toml", "--out", out, "-q", "--resume")
    assert code == 0, stderr
    assert_same_cube(big / "reference.h5", out)


@contextlib.contextmanager
def small_filesystem(folder: Path, size: str):
    """A tmpfs of ``size`` mounted at ``folder`` (root only; skipped where mounting is not allowed)."""
    folder.mkdir()
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("mounting a small file system needs root (the injected ENOSPC test covers the rest)")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.decode().strip()})")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


@pytest.mark.parametrize("guard", ["checked", "inside-hdf5"])
def test_a_real_full_disk_stops_cleanly_and_resumes(big, tmp_path, guard):
    """A tmpfs of half the finished cube's size: the sweep stops with one sentence and a readable
    partial file, either found before writing (the block check) or when HDF5 itself fails to write
    (the check switched off: the process must not crash on the way out); after the disk grows,
    --resume finishes it.  (Sized from the cube, so that the disk is too small whatever the cube
    format stores: 2 MB was half of a format-3 cube, and a format-4 cube of 1.5 MB fits in it.)"""
    half = (big / "reference.h5").stat().st_size // 2 // 1024
    with small_filesystem(tmp_path / "disk", f"{half}k") as disk:
        out = disk / "cube.h5"
        args = ["sweep", big / "spec.toml", "--out", out, "-q", "--no-space-check"]
        if guard == "checked":
            code, _, stderr = run_command(*args)
        else:
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    "import paigrid.orchestration as s; s._check_room = lambda *a: None; "
                    "from paigrid.cli import main; main()",
                    *map(str, args),
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            _, stderr = process.communicate(timeout=120)
            code = process.returncode
        assert_one_sentence(code, stderr, "No space left on device", "blocks are saved", "--resume")
        assert code == 2  # not a crash on the way out
        with h5py.File(partial_path(out), "r") as f:
            assert 0 <= int(f["block_done"][:].sum()) < N_BIG_BLOCKS
        subprocess.run(["mount", "-o", "remount,size=64m", str(disk)], check=True)
        code, _, stderr = run_command("sweep", big / "spec.toml", "--out", out, "-q", "--resume")
        assert code == 0, stderr
        assert_same_cube(big / "reference.h5", out)


# --- damage: chunk checksums -------------------------------------------------------------------------


def flip(path: Path, variable: str, chunk: int) -> None:
    """Flip one bit in the middle of chunk ``chunk`` of ``variable``."""
    with h5py.File(path, "r") as f:
        info = f[variable].id.get_chunk_info(chunk)
    with open(path, "r+b") as handle:
        handle.seek(info.byte_offset + info.size // 2)
        byte = handle.read(1)
        handle.seek(info.byte_offset + info.size // 2)
        handle.write(bytes([byte[0] ^ 0x40]))


@pytest.mark.parametrize(
    "variable,chunk,query",
    [
        ("step_time", 3, ["--where", "arch=ps-worker"]),
        ("bottleneck", 0, ["--top", "2"]),
        ("best_step_time", 0, []),
    ],
)
def test_a_flipped_bit_is_reported_by_every_reader(inputs, tmp_path, variable, chunk, query):
    import hdf5plugin  # noqa: F401
    import xarray as xr

    cube = tmp_path / "cube.h5"
    shutil.copyfile(inputs / "reference.h5", cube)
    with h5py.File(cube, "r") as f:
        assert all(f[name].fletcher32 for name in f if isinstance(f[name], h5py.Dataset) and f[name].chunks)
        first_job = f["job"][:][chunk * f[variable].chunks[0]].decode()
    flip(cube, variable, chunk)
    code, stdout, stderr = invoke("query", cube, "--best-arch", *query)
    expected = f"chunk of job {first_job} of {variable}" if variable == "step_time" else f"of {variable}"
    assert_one_sentence(code, stderr, f"{cube} is damaged", expected, "fails its checksum")
    with xr.open_dataset(cube, engine="h5netcdf") as ds, pytest.raises(OSError):
        _ = ds[variable].values  # xarray (HDF5) verifies the checksum too
    with h5py.File(inputs / "reference.h5", "r") as f, h5py.File(cube, "r") as g:
        np.testing.assert_array_equal(f["job"][:], g["job"][:])  # the rest of the file still reads


def test_the_report_names_a_damaged_chunk(tmp_path):
    (tmp_path / "study.toml").write_text(
        '[grid]\nn_gpu = "current"\ngpu = ["V100", "P100"]\nintra = ["pcie3"]\n'
        'network = ["eth-25g"]\nprecision = ["fp32"]\n'
    )
    write_population(synthetic_population(12, 5), tmp_path / "pop.csv")
    spec = load_spec(tmp_path / "study.toml")
    spec.workloads = str(tmp_path / "pop.csv")
    run_sweep(spec, tmp_path / "study.h5", progress=False)
    flip(tmp_path / "study.h5", "t_comm", 0)
    code, _, stderr = invoke("report", tmp_path / "study.h5", "--out", tmp_path / "report")
    assert_one_sentence(code, stderr, "is damaged", "of t_comm fails its checksum")
    assert not (tmp_path / "report" / "report.md").exists()


@pytest.mark.parametrize("compression", ["none", "gzip", "zstd"])
def test_checksummed_chunks_are_byte_for_byte_hdf5s(tmp_path, compression):
    """The encoder's bytes (compression, then Fletcher-32) equal what HDF5's own pipeline stores
    for the same array (blosc-lz4's bytes differ between library builds; its checksum is checked
    by reading it back through HDF5 in the tests above)."""
    from paigrid.codecs import chunk_encoder, filter_kwargs

    data = np.random.default_rng(1).random((2, 3, 5, 7)).astype(np.float32)
    data[0, 1] = np.nan
    with h5py.File(tmp_path / "x.h5", "w") as f:
        ds = f.create_dataset("x", data=data, chunks=data.shape, **filter_kwargs(compression))
        assert ds.fletcher32
        assert ds.id.read_direct_chunk((0, 0, 0, 0))[1] == chunk_encoder(compression)(data)


@pytest.mark.parametrize("size", [1, 2, 3, 719, 720, 721, 4099])
def test_fletcher32_matches_hdf5_on_odd_and_even_lengths(tmp_path, size):
    from paigrid.codecs import with_checksum

    for fill in ("random", 0xFF, 0):
        data = (
            np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8)
            if fill == "random"
            else np.full(size, fill, np.uint8)
        )
        with h5py.File(tmp_path / "x.h5", "w") as f:
            ds = f.create_dataset("x", data=data, chunks=(size,), fletcher32=True)
            assert ds.id.read_direct_chunk((0,))[1] == with_checksum(data.tobytes())


# --- outputs that are links, FIFOs, devices; closed pipes; killed text writes -----------------------


def test_a_linked_output_replaces_the_target_and_keeps_the_link(inputs, tmp_path):
    (tmp_path / "real.csv").write_text("old\n")
    (tmp_path / "link.csv").symlink_to("real.csv")
    code, _, stderr = invoke("population", "--jobs", "3", "--out", tmp_path / "link.csv")
    assert code == 0, stderr
    assert (tmp_path / "link.csv").is_symlink()
    assert (tmp_path / "real.csv").read_text().startswith("job,model,")
    (tmp_path / "real.h5").write_text("old")
    (tmp_path / "cube.h5").symlink_to("real.h5")
    code, _, stderr = invoke(*sweep_args(inputs, tmp_path / "cube.h5", "-q"))
    assert code == 0, stderr
    assert (tmp_path / "cube.h5").is_symlink()
    assert_same_cube(inputs / "reference.h5", tmp_path / "real.h5")


def test_a_fifo_receives_text_and_stays_a_fifo(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    received = []
    # the reader opens the FIFO before paigrid writes (a FIFO nobody reads is refused), then reads
    # through to the end once paigrid has written and closed it
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)

    def read_to_the_end():
        import select
        import time

        chunks = []
        while select.select([fd], [], [], 30)[0]:
            data = os.read(fd, 1 << 16)
            if data:
                chunks.append(data)
            elif chunks:
                break
            else:
                time.sleep(0.01)  # no writer yet: a read sees an end
        os.close(fd)
        received.append(b"".join(chunks).decode())

    reader = threading.Thread(target=read_to_the_end)
    reader.start()
    code, _, stderr = invoke("study-spec", "--out", fifo)
    reader.join(timeout=30)
    assert code == 0, stderr
    assert received and "[grid]" in received[0]
    assert fifo.is_fifo()


def test_a_device_receives_text_and_is_never_replaced(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("creating a device node needs root")
    null = tmp_path / "null"
    os.mknod(null, 0o666 | 0o020000, os.makedev(1, 3))
    for args in (["study-spec", "--out", null], ["population", "--jobs", "3", "--out", null]):
        code, _, stderr = invoke(*args)
        assert code == 0, stderr
        assert null.is_char_device()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["null"]


def test_a_closed_stdout_pipe_ends_quietly(tmp_path):
    """``paigrid query ... | head -1``: the reader goes away; paigrid stops with no message."""
    (tmp_path / "spec.toml").write_text(
        'jobs_per_block = 1000\n[grid]\nn_gpu = "current"\ngpu = ["V100"]\n'
        'arch = ["1w1g", "ps-worker"]\nintra = ["pcie3"]\nnetwork = ["eth-25g"]\n'
        'precision = ["fp32"]\n'
    )
    write_population(synthetic_population(3000, 2), tmp_path / "pop.csv")
    spec = load_spec(tmp_path / "spec.toml")
    spec.workloads = str(tmp_path / "pop.csv")
    run_sweep(spec, tmp_path / "cube.h5", progress=False)
    process = command("query", tmp_path / "cube.h5", "--best-arch", "--csv")
    assert process.stdout.readline().startswith("job,")
    process.stdout.close()  # more than a pipe buffer of rows is still to come
    stderr = process.stderr.read()
    process.stderr.close()
    process.wait(timeout=60)
    assert process.returncode == 141 and stderr == "", (process.returncode, stderr)


def test_a_text_output_killed_before_its_rename_is_untouched(tmp_path):
    out = tmp_path / "pop.csv"
    out.write_text("precious\n")
    code, _, _ = run_command(
        "population", "--jobs", "5", "--out", out, env={"PAIGRID_TEST_KILL_AT": "text-before-rename"}
    )
    assert code == -signal.SIGKILL
    assert out.read_text() == "precious\n"
