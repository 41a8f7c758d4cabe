"""Helpers of the hostile-input, fault and fuzz tests: a small world of valid input files and a
cube, running a command in process, the one-sentence check, and snapshots of a folder that tell
whether anything in it changed."""

from __future__ import annotations

import csv
import hashlib
import io
import os
import re
import stat
from importlib import resources
from pathlib import Path

from typer.testing import CliRunner

from paigrid.cli import app

runner = CliRunner()

SPEC = """
workloads = ["resnet50", "bert-base"]
jobs_per_block = 1

[grid]
gpu = ["V100", "A100"]
n_gpu = [1, 8]
intra = ["pcie3", "nvlink2-hcm"]
network = ["none", "eth-25g"]
precision = ["fp32"]
"""

STUDY_SPEC = """
jobs_per_block = 2

[grid]
gpu = ["V100", "P100"]
n_gpu = "current"
intra = ["pcie3", "nvlink2-hcm"]
network = ["eth-25g"]
precision = ["fp32"]
"""

#: a comma-separated list naming more than ten items (a message names ten and counts the rest)
LONG_LIST = re.compile(r"(?:[^\s,;()\[\]]+, ){10,}[^\s,;()\[\]]+")

#: exception class names that must never reach the user
CLASS_NAME = re.compile(r"\b[A-Z][A-Za-z]*(Error|Exception|Interrupt|Warning)\b")

#: the five trace tables of a tiny valid PAI trace (headerless CSV rows)
TRACE = {
    "pai_job_table.csv": [["j1", "i1", "u1", "Terminated", "100", "200"]],
    "pai_task_table.csv": [["j1", "worker", "2", "Terminated", "100", "200", "600", "29.3", "100", "V100"]],
    "pai_instance_table.csv": [["j1", "worker", "in0", "w0", "i1", "Terminated", "100", "200", "m1"]],
    "pai_group_tag_table.csv": [["i1", "u1", "", "g1", "bert"]],
    "pai_machine_spec.csv": [["m1", "V100", "96", "512", "8"]],
}


def builtin(kind: str) -> str:
    """Text of a built-in catalogue or dataset file."""
    return resources.files("paigrid.datasets").joinpath(kind).read_text(encoding="utf-8")


def csv_rows(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def csv_text(rows: list[list[str]]) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue()


def edit_cell(text: str, column: str, value: str, row: int = 1) -> str:
    """CSV ``text`` with the cell of ``column`` in data row ``row`` (1 = first) set to ``value``."""
    rows = csv_rows(text)
    rows[row][rows[0].index(column)] = value
    return csv_text(rows)


def drop_column(text: str, column: str) -> str:
    rows = csv_rows(text)
    k = rows[0].index(column)
    return csv_text([r[:k] + r[k + 1 :] for r in rows])


def trace_text(table: str, rows: list[list[str]] | None = None) -> str:
    return csv_text(rows if rows is not None else TRACE[table])


def make_world(folder: Path) -> Path:
    """Valid inputs of every kind, and a finished cube, in ``folder``."""
    from paigrid.inputs.spec import load_spec
    from paigrid.orchestration import run_sweep
    from paigrid.study.population import synthetic_population
    from paigrid.study.trace import write_population

    (folder / "spec.toml").write_text(SPEC)
    (folder / "study.toml").write_text(STUDY_SPEC)
    write_population(synthetic_population(4, 1), folder / "pop.csv")
    for kind in ("gpus", "links", "workloads", "optimizers", "precisions"):
        (folder / f"{kind}.csv").write_text(builtin(f"{kind}.csv"))
    (folder / "measurements.csv").write_text(builtin("measurements_public.csv"))
    (folder / "calib.toml").write_text("[link_efficiency]\nnvswitch = 0.5\n")
    trace = folder / "trace"
    trace.mkdir()
    for table in TRACE:
        (trace / table).write_text(trace_text(table))
    (folder / "text.txt").write_text("just some text\n")
    import h5py

    with h5py.File(folder / "notcube.h5", "w") as f:
        f["x"] = [1, 2, 3]
    run_sweep(load_spec(folder / "spec.toml"), folder / "cube.h5", progress=False)
    run_sweep(load_spec(folder / "spec.toml"), folder / "reduced.h5", progress=False, reduce_only=True)
    return folder


def snapshot(*folders: Path) -> dict[str, tuple]:
    """Every path under ``folders`` -> (type, sha256 or link target, mode): equal snapshots mean
    nothing was created, removed, replaced or changed."""
    seen = {}
    for folder in folders:
        for root, dirs, files in os.walk(folder):
            for name in dirs + files:
                path = Path(root) / name
                info = os.lstat(path)
                if stat.S_ISLNK(info.st_mode):
                    seen[str(path)] = ("link", os.readlink(path), None)
                elif stat.S_ISREG(info.st_mode):
                    seen[str(path)] = ("file", hashlib.sha256(path.read_bytes()).hexdigest(), info.st_mode)
                else:
                    seen[str(path)] = (stat.S_IFMT(info.st_mode), info.st_ino, info.st_mode)
    return seen


def invoke(*args):
    """``paigrid ARGS`` in process; returns (exit code, stdout, stderr)."""
    result = runner.invoke(app, [str(a) for a in args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"paigrid {' '.join(map(str, args))} raised {result.exception!r}") from result.exception
    return result.exit_code, result.stdout, result.stderr


def assert_one_sentence(code: int, stderr: str, *fragments: str) -> str:
    """A non-zero exit and exactly one line on stderr: 'paigrid: error: ...' ending a sentence,
    with no traceback, no exception class name and no 'unexpected error'."""
    text = stderr.strip()
    assert code != 0, f"exit code 0; stderr: {stderr!r}"
    assert len(text.splitlines()) == 1, text
    assert text.startswith("paigrid: error: "), text
    assert "Traceback" not in text and "unexpected error" not in text, text
    assert not CLASS_NAME.search(text), text
    assert text.endswith((".", "?")), text
    assert not LONG_LIST.search(text), f"a list of more than ten items: {text}"
    for fragment in fragments:
        assert fragment in text, f"{fragment!r} not in {text!r}"
    return text
