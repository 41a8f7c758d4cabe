"""Hostile inputs of the surfaces beyond the files of ``test_hostile.py``, by table: the LLM
commands, calibrate/validate and a calibration's physical bounds, trace import, inputs that
never end (FIFOs, devices, sockets), numbers beyond int64 or not finite, line breaks in
``--option``, long and escaped text in messages.  Each case must end with a non-zero exit and
one sentence on stderr, print nothing on stdout and leave every file as it was (as in
``test_hostile.py``).

The unified commands with LLM jobs (``paigrid sweep`` of a spec naming LLM models, ``predict``
of an LLM job, ``query``/``info``/``report`` of a cube with an ``llm`` group) get the same kinds;
an output that is one of the command's inputs is refused, and so is a text output that is a
FIFO nobody reads.  Two tests keep the corpus whole: every CLI command must have a case here or
in ``test_hostile.py``, and every public callable of the Python API (and of its ``ds.paigrid``
accessor) one in ``API_CASES``.

Then the kinds that are not one sentence but must hold: text written back (CSV cells that a
spreadsheet would run, control characters in a table), the Python API's sentences, a resume
that says what changed, trace tables with a byte-order mark or rows the population reader would
refuse, and a closed stdout.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from hostile_helpers import TRACE, assert_one_sentence, invoke, make_world, snapshot, trace_text
from paigrid.errors import MAX_MESSAGE_CHARS, PaigridError, listing, printable, quoted, tidy

W, T = "{w}", "{t}"
PREDICT = [
    "predict",
    "--workload",
    "resnet50",
    "--arch",
    "1w1g",
    "--gpu",
    "V100",
    "--n-gpu",
    "1",
    "--intra",
    "pcie3",
    "--network",
    "none",
    "--precision",
    "fp32",
]
LLM_SWEEP = [
    "llm",
    "sweep",
    "--models",
    "llama3-8b",
    "--gpu",
    "H100",
    "--domain",
    "8",
    "--network",
    "ib-ndr-400g",
    "-q",
    "-o",
    f"{T}/l.h5",
]
LLM_PREDICT = ["llm", "predict", "--model", "llama3-8b", "--gpu", "H100", "--n-gpu", "8"]
HUGE = "99999999999999999999"


@dataclass
class Case:
    id: str
    args: list[str]
    files: dict = field(default_factory=dict)
    expect: tuple[str, ...] = ()


CASES: list[Case] = []


def case(id, args, files=None, expect=()):
    CASES.append(Case(id, list(args), files or {}, (expect,) if isinstance(expect, str) else tuple(expect)))


# --- the LLM commands ------------------------------------------------------------------------------
case("llm-sweep-n-gpu-twice", [*LLM_SWEEP, "--n-gpu", "8,8"], {}, "names 8 twice")
case("llm-sweep-n-gpu-twice-full", [*LLM_SWEEP, "--n-gpu", "8,16,8", "--full"], {}, "names 8 twice")
case("llm-sweep-n-gpu-trillion", [*LLM_SWEEP, "--n-gpu", "1000000000000"], {}, "from 1 to")
case("llm-sweep-n-gpu-beyond-int64", [*LLM_SWEEP, "--n-gpu", HUGE], {}, "from 1 to")
case("llm-sweep-n-gpu-zero", [*LLM_SWEEP, "--n-gpu", "0"], {}, "from 1 to")
case("llm-sweep-seq-len-beyond-int64", [*LLM_SWEEP, "--n-gpu", "8", "--seq-len", HUGE], {}, "largest whole number")
case("llm-sweep-max-tp-beyond-int64", [*LLM_SWEEP, "--n-gpu", "8", "--max-tp", HUGE], {}, "largest whole number")
case(
    "llm-sweep-network-empty",
    [*LLM_SWEEP[:-3], "--network", "", "-o", f"{T}/l.h5", "--n-gpu", "8"],
    {},
    "--network is empty",
)
case(
    "llm-sweep-network-commas",
    [*LLM_SWEEP[:-3], "--network", ",,", "-o", f"{T}/l.h5", "--n-gpu", "8"],
    {},
    "--network is empty",
)
case(
    "llm-sweep-network-twice",
    [*LLM_SWEEP[:-3], "--network", "ib-ndr-400g,IB-NDR-400G", "-o", f"{T}/l.h5", "--n-gpu", "8"],
    {},
    "twice",
)
case("llm-sweep-gpu-empty", [*LLM_SWEEP, "--gpu", "", "--n-gpu", "8"], {}, "--gpu is empty")
case("llm-sweep-gpu-alias-twice", [*LLM_SWEEP, "--gpu", "H100,H100-SXM5-80GB", "--n-gpu", "8"], {}, "twice")
case("llm-sweep-models-empty", [*LLM_SWEEP, "--models", "", "--n-gpu", "8"], {}, "--models is empty")
case("llm-sweep-models-twice", [*LLM_SWEEP, "--models", "llama3-8b,llama3-8b", "--n-gpu", "8"], {}, "twice")
case("llm-sweep-domain-twice", [*LLM_SWEEP, "--domain", "8,8", "--n-gpu", "8"], {}, "twice")
case("llm-sweep-nics-inf", [*LLM_SWEEP, "--n-gpu", "8", "--nics-per-gpu", "inf"], {}, "not a finite number")
case("llm-sweep-max-full-nan", [*LLM_SWEEP, "--n-gpu", "8", "--full", "--max-full-gb", "nan"], {}, "--max-full-gb")
case("llm-sweep-max-full-inf", [*LLM_SWEEP, "--n-gpu", "8", "--full", "--max-full-gb", "inf"], {}, "not a finite")
case(
    "llm-sweep-option-newline",
    [*LLM_SWEEP, "--n-gpu", "8", "--option", "weight_bytes=2\nattention=flash"],
    {},
    "line break",
)
case(
    "llm-sweep-out-fifo",
    [*LLM_SWEEP[:-2], "-o", f"{T}/f", "--n-gpu", "8"],
    {"f": ("fifo",)},
    ("FIFO", "needs a regular file"),
)
case("llm-sweep-locked", [*LLM_SWEEP, "--n-gpu", "8"], {"l.h5.lock": ("lock-live",)}, "is writing")
case("llm-query-folder", ["llm", "query", T, "--model", "llama3-8b"], {}, "folder")
case("llm-query-fifo", ["llm", "query", f"{T}/f", "--model", "llama3-8b"], {"f": ("fifo",)}, "FIFO")
case("llm-query-text", ["llm", "query", f"{W}/text.txt", "--model", "llama3-8b"], {}, "not an HDF5 file")
case("llm-query-tokens-inf", ["llm", "query", f"{W}/cube.h5", "--model", "x", "--tokens", "inf"], {}, "finite")
case("llm-query-tokens-nan", ["llm", "query", f"{W}/cube.h5", "--model", "x", "--tokens", "nan"], {}, "--tokens")
case("llm-query-n-gpu-twice", ["llm", "query", f"{W}/cube.h5", "--model", "x", "--n-gpu", "8,8"], {}, "twice")
case("llm-query-gpu-empty", ["llm", "query", f"{W}/cube.h5", "--model", "x", "--gpu", ""], {}, "--gpu is empty")
case("llm-predict-tokens-inf", [*LLM_PREDICT, "--tokens", "inf"], {}, "not a finite number")
case("llm-predict-n-gpu-beyond-int64", [*LLM_PREDICT[:-1], HUGE], {}, "largest whole number")
case("llm-predict-seq-len-beyond-int64", [*LLM_PREDICT, "--seq-len", HUGE], {}, "largest whole number")
case("llm-predict-nics-nan", [*LLM_PREDICT, "--nics-per-gpu", "nan"], {}, "--nics-per-gpu")
case("llm-predict-nics-inf", [*LLM_PREDICT, "--nics-per-gpu", "inf"], {}, "not a finite number")
case("llm-predict-option-newline", [*LLM_PREDICT, "--option", "weight_bytes=2\r\nx=1"], {}, "line break")

# the unified commands with an LLM job (one engine: predict and sweep take LLM models as workloads)
UNIFIED = ["predict", "--workload", "llama3-8b", "--gpu", "H100", "--n-gpu", "8"]
case("unified-predict-tokens-inf", [*UNIFIED, "--tokens", "inf"], {}, "not a finite number")
case("unified-predict-n-gpu-beyond-int64", [*UNIFIED[:-1], HUGE], {}, "--n-gpu")
case("unified-predict-option-newline", [*UNIFIED, "--option", "weight_bytes=2\nx=1"], {}, "line break")
case(
    "unified-sweep-llm-n-gpu-twice",
    ["sweep", f"{T}/s.toml", "--out", f"{T}/o.h5", "-q"],
    {"s.toml": 'workloads = ["llama3-8b"]\n[grid]\ngpu = ["H100"]\nn_gpu = [8, 8]\n'},
    "twice",
)

# --- inputs that never end: FIFOs, devices, sockets, folders ---------------------------------------
for what, args in (
    ("spec", ["sweep", f"{T}/in", "--out", f"{T}/o.h5", "-q"]),
    ("workloads", ["sweep", f"{W}/spec.toml", "--workloads", f"{T}/in", "--out", f"{T}/o.h5", "-q"]),
    ("calibration-predict", [*PREDICT, "--calibration", f"{T}/in"]),
    ("calibration-sweep", ["sweep", f"{W}/spec.toml", "--calibration", f"{T}/in", "--out", f"{T}/o.h5", "-q"]),
    ("catalogue", [*PREDICT, "--catalogue", f"gpus={T}/in"]),
    ("measurements-validate", ["validate", f"{T}/in"]),
    ("measurements-calibrate", ["calibrate", f"{T}/in", "--out", f"{T}/c.toml"]),
    ("scheduler-file", ["sweep", f"{W}/spec.toml", "--out", f"{T}/o.h5", "-q", "--scheduler", f"{T}/in"]),
):
    case(f"fifo-{what}", args, {"in": ("fifo",)}, "FIFO")
    case(f"socket-{what}", args, {"in": ("socket",)}, "socket")
case("device-spec", ["sweep", "/dev/zero", "--out", f"{T}/o.h5", "-q"], {}, "device")
case("device-calibration", [*PREDICT, "--calibration", "/dev/urandom"], {}, "device")
case("device-measurements", ["validate", "/dev/null"], {}, "device")
case("folder-calibration", [*PREDICT, "--calibration", T], {}, "folder")
case("folder-measurements", ["validate", T], {}, "folder")
case(
    "fifo-trace-table",
    ["trace", "import", f"{T}/tr", "--out", f"{T}/p.csv"],
    {
        **{f"tr/{name}": trace_text(name) for name in TRACE if name != "pai_task_table.csv"},
        "tr/pai_task_table.csv": ("fifo",),
    },
    "FIFO",
)
case(
    "scheduler-file-not-json",
    ["sweep", f"{W}/spec.toml", "--out", f"{T}/o.h5", "-q", "--scheduler", f"{W}/text.txt"],
    {},
    "not a Dask scheduler file",
)
case(
    "scheduler-file-no-address",
    ["sweep", f"{W}/spec.toml", "--out", f"{T}/o.h5", "-q", "--scheduler", f"{T}/s.json"],
    {"s.json": '{"id": "Scheduler-1"}\n'},
    "not a Dask scheduler file",
)

# --- values out of their physical range -------------------------------------------------------------
for command, args in (
    ("predict", [*PREDICT, "--calibration", f"{T}/c.toml"]),
    ("sweep", ["sweep", f"{W}/spec.toml", "--out", f"{T}/o.h5", "-q", "--calibration", f"{T}/c.toml"]),
    ("validate", ["validate", f"{W}/measurements.csv", "--calibration", f"{T}/c.toml"]),
):
    for id, text in (
        ("launch-eager-1e9", '[class_efficiency]\n"launch_eager/*/*" = 1e9\n'),
        ("launch-eager-1e308", '[class_efficiency]\n"launch_eager/*/*" = 1e308\n'),
    ):
        case(f"bounds-{command}-{id}", args, {"c.toml": text}, ("launch_eager", "physical range 1 to 30 us"))
for id, text, fragment in (
    ("launch-graphs-tiny", '[class_efficiency]\n"launch_graphs/*/*" = 0.001\n', "launch_graphs"),
    ("hbm-above", '[class_efficiency]\n"hbm/*/*" = 0.99\n', "hbm"),
    ("flop-tiny", "[flop_efficiency]\nfp32 = 0.001\n", "flop_efficiency"),
    ("link-tiny", "[link_efficiency]\nnvswitch = 0.0001\n", "link_efficiency"),
    ("workload-tenfold", "[workload_efficiency]\nresnet50 = 10\n", "workload_efficiency"),
):
    case(f"bounds-{id}", [*PREDICT, "--calibration", f"{T}/c.toml"], {"c.toml": text}, (fragment, "physical range"))

# --- numbers beyond int64, inf and nan in options ------------------------------------------------------
case("predict-n-gpu-beyond-int64", [*PREDICT[:8], HUGE, *PREDICT[9:]], {}, "--n-gpu")
case("population-jobs-beyond-int64", ["population", "--jobs", HUGE, "--out", f"{T}/p.csv"], {}, "largest whole")
case("population-seed-beyond-int64", ["population", "--seed", HUGE, "--out", f"{T}/p.csv"], {}, "largest whole")
case("query-top-beyond-int64", ["query", f"{W}/cube.h5", "--best-arch", "--top", HUGE], {}, "largest whole")
case(
    "sweep-workers-beyond-int64",
    ["sweep", f"{W}/spec.toml", "--out", f"{T}/o.h5", "--workers", HUGE],
    {},
    "largest whole",
)
case(
    "sweep-threads-beyond-int64",
    ["sweep", f"{W}/spec.toml", "--out", f"{T}/o.h5", "--threads", HUGE],
    {},
    "largest whole",
)
case(
    "report-block-jobs-beyond-int64",
    ["report", f"{W}/cube.h5", "--out", f"{T}/r", "--block-jobs", HUGE],
    {},
    "largest whole",
)
case(
    "calibrate-max-jobs-nan",
    ["calibrate", f"{W}/measurements.csv", "--out", f"{T}/c.toml", "--option", "overlap=nan"],
    {},
    "overlap",
)

for id, item, fragment in (
    ("coordination-huge", "coordination_us=1e308", "coordination_us"),
    ("gpus-per-node-beyond-int64", f"gpus_per_node={HUGE}", "gpus_per_node"),
    ("grad-accum-trillion", "grad_accum_steps=1000000000000", "at most 2147483647"),
    ("bucket-inf", "bucket_mb=inf", "bucket_mb"),
):
    case(f"option-{id}", [*PREDICT, "--option", item], {}, fragment)

# --- text: line breaks in --option, long values, escape codes --------------------------------------------
for command, args in (
    ("predict", PREDICT),
    ("sweep", ["sweep", f"{W}/spec.toml", "--out", f"{T}/o.h5", "-q"]),
    ("validate", ["validate", f"{W}/measurements.csv"]),
    ("calibrate", ["calibrate", f"{W}/measurements.csv", "--out", f"{T}/c.toml"]),
):
    case(f"option-newline-{command}", [*args, "--option", "overlap=0.5\ncollective=tree"], {}, "line break")
    case(f"option-carriage-return-{command}", [*args, "--option", "overlap=0.5\rx"], {}, "line break")
case(
    "spec-long-value",
    ["sweep", f"{T}/s.toml", "--out", f"{T}/o.h5", "-q"],
    {"s.toml": 'workloads = ["' + "r" * 3_000_000 + '"]\n'},
    "3,000,000 characters",
)
case(
    "spec-escape-codes",
    ["sweep", f"{T}/s.toml", "--out", f"{T}/o.h5", "-q"],
    {"s.toml": 'workloads = ["\\u001b[2J\\u001b[31mresnet\\nfifty"]\n'},
    "\\x1b[2J",
)
case(
    "spec-many-unknown-keys",
    ["sweep", f"{T}/s.toml", "--out", f"{T}/o.h5", "-q"],
    {"s.toml": "".join(f"key{i} = 1\n" for i in range(500))},
    "and 490 more",
)
case(
    "where-escape-codes", ["query", f"{W}/cube.h5", "--best-arch", "--where", "gpu=\x1b[31mV100\nA100"], {}, "\\x1b[31m"
)
case("predict-workload-long", ["predict", "--workload", "w" * 100_000, *PREDICT[3:]], {}, "100,000 characters")


# --- the unified commands with LLM jobs: the same kinds as above --------------------------------------
LLM_SPEC = 'workloads = ["llama3-8b"]\n[grid]\ngpu = ["H100"]\nn_gpu = [8]\n'
for id, text, fragment in (
    ("gpu-alias-twice", LLM_SPEC.replace('["H100"]', '["H100", "H100-SXM5-80GB"]'), "names H100-SXM5-80GB twice"),
    ("precision-twice", LLM_SPEC + 'precision = ["amp-bf16", "amp-bf16"]\n', "names amp-bf16 twice"),
    ("network-alias-twice", LLM_SPEC + 'network = ["ib-ndr-400g", "IB-NDR-400G"]\n', "twice"),
    ("network-empty-name", LLM_SPEC + 'network = [""]\n', "unknown network ''"),
    ("n-gpu-beyond-int64", LLM_SPEC.replace("[8]", f"[{HUGE}]"), "from 1 to"),
    ("n-gpu-trillion", LLM_SPEC.replace("[8]", "[1000000000000]"), "from 1 to"),
    ("n-gpu-int32-max", LLM_SPEC.replace("[8]", "[2147483647]"), "from 1 to 1,048,576"),
    ("n-gpu-above-the-llm-bound", LLM_SPEC.replace("[8]", "[8, 1048577]"), "not 1,048,577"),
    ("max-tp-beyond-int64", LLM_SPEC + f"[llm]\nmax_tp = {HUGE}\n", "llm.max_tp"),
    ("pp-beyond-int64", LLM_SPEC + f"[llm]\npp = [{HUGE}]\n", "llm.pp"),
    ("micro-batch-twice", LLM_SPEC + "[llm]\nmicro_batch = [1, 1]\n", "twice"),
    ("recompute-empty", LLM_SPEC + "[llm]\nrecompute = []\n", "llm.recompute"),
    ("option-nan", LLM_SPEC + '[llm.options]\nworkspace_GB = "nan"\n', "workspace_GB"),
    ("option-inf", LLM_SPEC + "[llm.options]\nweight_bytes = 1e400\n", "weight_bytes"),
    ("option-line-break", LLM_SPEC + '[llm.options]\nattention = "flash\\neager"\n', "flash\\neager"),
    ("nics-inf", LLM_SPEC + "nics_per_gpu = inf\n", "nics_per_gpu"),
):
    case(f"unified-sweep-llm-{id}", ["sweep", f"{T}/s.toml", "--out", f"{T}/o.h5", "-q"], {"s.toml": text}, fragment)
case(
    "unified-sweep-workloads-empty",
    ["sweep", f"{W}/spec.toml", "--workloads", "", "--out", f"{T}/o.h5", "-q"],
    {},
    "--workloads is empty",
)
case(
    "unified-sweep-workloads-empty-name",
    ["sweep", f"{W}/spec.toml", "--workloads", "llama3-8b,,resnet50", "--out", f"{T}/o.h5", "-q"],
    {},
    "names an empty job",
)
case("unified-predict-network-empty", [*UNIFIED, "--tp", "8", "--network", ""], {}, "unknown network ''")
case("unified-predict-precision-empty", [*UNIFIED, "--tp", "8", "--precision", ""], {}, "unknown precision ''")
case("unified-predict-json-invalid-layout", [*UNIFIED, "--tp", "3", "--json"], {}, "not a multiple of tp")
case("unified-predict-json-no-memory", [*UNIFIED, "--json"], {}, ("invalid layout", "GiB per GPU"))
case(
    "unified-predict-layout-beyond-int64",
    [*UNIFIED, "--layout", f"tp{HUGE}-pp1-v1-cp1-ep1-mb1-zero1-none-sp"],
    {},
    "does not divide 8 GPUs",
)
case("unified-predict-calibration-for-llm", [*UNIFIED, "--calibration", f"{W}/calib.toml"], {}, "--calibration")
case("llm-models-json-and-csv", ["llm", "models", "--json", "--csv"], {}, "--json")
case("unified-query-fifo", ["query", f"{T}/f", "--best-arch"], {"f": ("fifo",)}, "FIFO")
case("unified-query-socket", ["query", f"{T}/f", "--best-arch", "--tokens", "1e12"], {"f": ("socket",)}, "socket")
case("unified-info-fifo", ["info", f"{T}/f"], {"f": ("fifo",)}, "FIFO")
case("unified-report-fifo", ["report", f"{T}/f", "--out", f"{T}/r"], {"f": ("fifo",)}, "FIFO")
case("unified-query-tokens-inf", ["query", f"{W}/cube.h5", "--best-arch", "--tokens", "inf"], {}, "finite")
case("unified-query-tokens-overflow", ["query", f"{W}/cube.h5", "--best-arch", "--tokens", "1e400"], {}, "finite")
case(
    "unified-query-calibration-fifo",
    ["query", f"{W}/cube.h5", "--best-arch", "--calibration", f"{T}/f"],
    {"f": ("fifo",)},
    "FIFO",
)
case("unified-query-calibration-folder", ["query", f"{W}/cube.h5", "--best-arch", "--calibration", W], {}, "folder")
case("unified-query-per-unknown", ["query", f"{W}/cube.h5", "--best-arch", "--per", "layout"], {}, "--per")

# --- an output that is one of the command's inputs: never written over --------------------------------
case(
    "sweep-out-is-the-spec",
    ["sweep", f"{T}/s.toml", "--out", f"{T}/s.toml", "-q"],
    {"s.toml": LLM_SPEC},
    "is the spec file",
)
case(
    "sweep-out-is-the-calibration",
    ["sweep", f"{W}/spec.toml", "--calibration", f"{T}/c.toml", "--out", f"{T}/c.toml", "-q"],
    {"c.toml": "[link_efficiency]\nnvswitch = 0.5\n"},
    "is the calibration file",
)
case(
    "sweep-out-is-a-catalogue",
    ["sweep", f"{W}/spec.toml", "--catalogue", f"gpus={W}/gpus.csv", "--out", f"{W}/gpus.csv", "-q"],
    {},
    "is the gpus catalogue",
)
case(
    "calibrate-out-is-the-measurements",
    ["calibrate", f"{W}/measurements.csv", "--out", f"{W}/measurements.csv"],
    {},
    "is the measurements file",
)
case(
    "trace-import-out-is-a-table",
    ["trace", "import", f"{W}/trace", "--out", f"{W}/trace/pai_job_table.csv"],
    {},
    "is the trace table pai_job_table.csv",
)

# --- text outputs that are FIFOs nobody reads: refused at once, never waited on -------------------------
for what, args in (
    ("study-spec", ["study-spec", "--out", f"{T}/f"]),
    ("population", ["population", "--jobs", "3", "--out", f"{T}/f"]),
    ("population-llm", ["population", "--jobs", "3", "--llm-share", "0.5", "--out", f"{T}/f"]),
    ("trace-import", ["trace", "import", f"{W}/trace", "--out", f"{T}/f"]),
):
    case(f"out-fifo-no-reader-{what}", args, {"f": ("fifo",)}, "no process is reading")


# --- the world and the runner ---------------------------------------------------------------------------
def _make(folder: Path, name: str, content) -> None:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif isinstance(content, str):
        path.write_text(content)
    elif content[0] == "fifo":
        os.mkfifo(path)
    elif content[0] == "socket":
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(path))
        sock.close()
    elif content[0] == "lock-live":
        path.write_text(json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "started": "", "since": "now"}))
    else:
        raise ValueError(content)


@contextlib.contextmanager
def fifos_released(folder: Path, after: float = 20.0):
    """If a reader blocks on a FIFO under ``folder`` (a regression), open it for writing after
    ``after`` seconds, so that the reader sees an empty input and the case fails instead of
    hanging the suite."""
    done = threading.Event()

    def release():
        if done.wait(after):
            return
        for root, _, files in os.walk(folder):
            for name in files:
                path = os.path.join(root, name)
                with contextlib.suppress(OSError):
                    if os.path.exists(path) and Path(path).is_fifo():
                        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))

    thread = threading.Thread(target=release, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return make_world(tmp_path_factory.mktemp("world"))


def test_the_table_covers_every_llm_command_and_kind():
    commands = {" ".join(c.args[:2]) if c.args[0] == "llm" else c.args[0] for c in CASES}
    assert {
        "llm sweep",
        "llm query",
        "llm predict",
        "sweep",
        "predict",
        "validate",
        "calibrate",
        "trace",
        "query",
        "population",
        "report",
    } <= commands
    assert len({c.id for c in CASES}) == len(CASES), "case ids must be unique"
    assert len(CASES) >= 80, len(CASES)


@pytest.mark.parametrize("hostile", CASES, ids=[c.id for c in CASES])
def test_hostile_surface_gets_one_sentence_and_damages_nothing(hostile, world, tmp_path):
    for name, content in hostile.files.items():
        _make(tmp_path, name, content)
    before = snapshot(world, tmp_path)
    args = [a.replace(W, str(world)).replace(T, str(tmp_path)) for a in hostile.args]
    with fifos_released(tmp_path):
        code, stdout, stderr = invoke(*args)
    text = assert_one_sentence(code, stderr, *hostile.expect)
    assert len(text) <= MAX_MESSAGE_CHARS + 200, len(text)
    assert "\x1b" not in stderr and "\r" not in stderr
    assert stdout == "", stdout
    assert snapshot(world, tmp_path) == before


# --- the message helpers ------------------------------------------------------------------------------
def test_messages_escape_control_characters_and_cut_long_values_and_lists():
    assert printable("a\nb\x1b[31m\tc\x85\u2028") == "a\\nb\\x1b[31m\\tc\\x85\\u2028"
    assert quoted("x" * 500) == "'" + "x" * 190 + "'... (500 characters)"
    assert tidy(f"bad {quoted('x' * 500)}.") == f"bad {quoted('x' * 500)}."  # cut once, never twice
    assert tidy("w " + "y" * 300) == "w " + "y" * 190 + "... (300 characters)"
    assert listing(range(25)) == "0, 1, 2, 3, 4, 5, 6, 7, 8, 9 and 15 more"
    assert listing(["a", "b"]) == "a, b"
    text = tidy("unknown key(s) " + ", ".join(f"k{i}" for i in range(40)) + "; known: a, b.")
    assert "k9 and 30 more" in text and "k10" not in text and text.endswith("known: a, b.")
    long = str(PaigridError("spec " + "y " * 100_000 + "end."))
    assert len(long) <= MAX_MESSAGE_CHARS + 100 and long.endswith("end.") and "characters left out" in long
    assert str(PaigridError("bad value 'a\nb'.")) == "bad value 'a\\nb'."


# --- text written back -----------------------------------------------------------------------------------
FORMULAS = [
    "=cmd|' /C calc'!A0",
    '+HYPERLINK("http://x","y")',
    "-2+3+cmd|' /C calc'!A0",
    "@SUM(1+1)*cmd",
    "\tTAB",
    "\rCR",
]


def test_csv_cells_that_a_spreadsheet_would_run_get_a_quote():
    from paigrid.render import csv_cell, emit

    for text in FORMULAS:
        assert csv_cell(text) == "'" + text
    for number in ("-1", "+2.5", "-1e-3", "-inf"):
        assert csv_cell(number) == number
    assert csv_cell(-3.0) == -3.0 and csv_cell("plain") == "plain"
    stream = io.StringIO()
    emit([{"job": t, "x": -1.0} for t in FORMULAS], ["job", "x"], "csv", stream=stream)
    rows = list(csv.reader(io.StringIO(stream.getvalue(), newline="")))
    assert [r[0] for r in rows[1:]] == ["'" + t for t in FORMULAS]
    assert [r[1] for r in rows[1:]] == ["-1.0"] * len(FORMULAS)


def test_a_population_with_hostile_job_names_is_written_back_neutralised(tmp_path):
    """Job names of a population (from a trace, or a user's CSV) are CSV cells once the
    population is written again, and rows of a table once queried: neither runs nor splits."""
    from paigrid.study.trace import write_population

    names = [*FORMULAS, "esc\x1b[2Jape", "two\nlines"]
    rows = [
        {
            "job": n,
            "model": "resnet50",
            "batch": "",
            "gpus_per_node": 8,
            "current_arch": "1w1g",
            "current_gpu": "V100",
            "current_n_gpu": 1,
            "current_intra": "pcie3",
            "current_network": "none",
            "current_precision": "fp32",
            "source": "test",
        }
        for n in names
    ]
    write_population(rows, tmp_path / "p.csv")
    with open(tmp_path / "p.csv", newline="") as handle:
        written = [r["job"] for r in csv.DictReader(handle)]
    assert written == ["'" + n for n in FORMULAS] + names[-2:]
    stream = io.StringIO()
    from paigrid.render import emit

    emit([{"job": n, "step_time": 1.0} for n in names], ["job", "step_time"], "table", {"step_time": "s"}, stream)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 1 + len(names) and "\x1b" not in stream.getvalue() and "\r" not in stream.getvalue()
    assert any("esc\\x1b[2Jape" in line for line in lines) and any("two\\nlines" in line for line in lines)


# --- trace import ------------------------------------------------------------------------------------------
def _trace(folder: Path, tables: dict[str, str | bytes]) -> Path:
    folder.mkdir()
    for name in TRACE:
        content = tables.get(name, trace_text(name))
        (folder / name).write_bytes(content if isinstance(content, bytes) else content.encode())
    return folder


def test_trace_tables_with_a_byte_order_mark_import_their_first_job(tmp_path):
    tables = {name: b"\xef\xbb\xbf" + trace_text(name).encode() for name in TRACE}
    folder = _trace(tmp_path / "tr", tables)
    code, _, stderr = invoke("trace", "import", folder, "--out", tmp_path / "p.csv")
    assert code == 0, stderr
    with open(tmp_path / "p.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [r["job"] for r in rows] == ["j1"] and rows[0]["current_gpu"].startswith("V100")


def test_empty_trace_tables_are_one_sentence_and_write_nothing(tmp_path):
    folder = _trace(tmp_path / "tr", dict.fromkeys(TRACE, ""))
    before = snapshot(tmp_path)
    code, stdout, stderr = invoke("trace", "import", folder, "--out", tmp_path / "p.csv")
    assert_one_sentence(code, stderr, "no job", "nothing was written")
    assert stdout == "" and snapshot(tmp_path) == before


def test_a_trace_job_the_population_reader_would_refuse_is_not_written(tmp_path):
    """A job of 2 x 2**31 GPUs and a job with an empty name: both skipped (counted as
    inconsistent), so the population written is one the next sweep reads."""
    from paigrid.inputs.catalog import Catalogues
    from paigrid.inputs.jobs import load_jobs
    from paigrid.inputs.spec import spec_from_dict

    jobs = [
        ["j1", "i1", "u1", "Terminated", "100", "200"],
        ["big", "i1", "u1", "Terminated", "100", "200"],
        [" ", "i1", "u1", "Terminated", "100", "200"],
    ]
    tasks = [
        TRACE["pai_task_table.csv"][0],
        ["big", "worker", "2147483647", "Terminated", "100", "200", "600", "29.3", "200", "V100"],
        [" ", "worker", "1", "Terminated", "100", "200", "600", "29.3", "100", "V100"],
    ]
    folder = _trace(
        tmp_path / "tr", {"pai_job_table.csv": trace_text("", jobs), "pai_task_table.csv": trace_text("", tasks)}
    )
    code, _, stderr = invoke("trace", "import", folder, "--out", tmp_path / "p.csv")
    assert code == 0, stderr
    assert "skipped_inconsistent: 2" in stderr
    spec = spec_from_dict({"workloads": str(tmp_path / "p.csv")}, "test", tmp_path)
    loaded, _ = load_jobs(spec, Catalogues.load())
    assert [j.name for j in loaded] == ["j1"]


# --- the Python API -----------------------------------------------------------------------------------------
def _flip(path: Path) -> str:
    import h5py

    with h5py.File(path, "r") as f:
        info = f["step_time"].id.get_chunk_info(1)
        job = f["job"][1].decode()
    with open(path, "r+b") as handle:
        handle.seek(info.byte_offset + info.size // 2)
        byte = handle.read(1)
        handle.seek(info.byte_offset + info.size // 2)
        handle.write(bytes([byte[0] ^ 0x01]))
    return job


@pytest.mark.parametrize("read", ["values", "throughput", "best", "breakdown"])
def test_the_api_names_a_damaged_chunk_as_the_cli_does(world, tmp_path, read):
    import shutil

    import paigrid

    cube = tmp_path / "cube.h5"
    shutil.copyfile(world / "cube.h5", cube)
    job = _flip(cube)
    ds = paigrid.open_dataset(cube)
    with pytest.raises(PaigridError, match=f"chunk of job {job} of step_time fails its checksum"):
        if read == "values":
            _ = ds.step_time.values
        elif read == "throughput":
            _ = ds.throughput.values
        elif read == "best":
            ds.paigrid.best()
        else:
            ds.paigrid.breakdown(job=job, gpu="V100", precision="fp32")
    ds.close()
    code, _, stderr = invoke("query", cube, "--best-arch")
    assert_one_sentence(code, stderr, f"chunk of job {job} of step_time fails its checksum")


@pytest.mark.parametrize("variable", ["step_time", "gpu", "job"])
def test_damaged_metadata_is_one_sentence_from_the_cli_and_the_api(world, tmp_path, variable):
    """Bytes of a variable's object header flipped (its metadata checksum fails): h5py raises a
    KeyError or OSError; the query and open_dataset say the file is damaged."""
    import shutil

    import h5py

    import paigrid

    cube = tmp_path / "cube.h5"
    shutil.copyfile(world / "cube.h5", cube)
    with h5py.File(cube, "r") as f:
        address = h5py.h5o.get_info(f[variable].id).addr
    with open(cube, "r+b") as handle:
        handle.seek(address + 16)
        data = handle.read(8)
        handle.seek(address + 16)
        handle.write(bytes(b ^ 0xFF for b in data))
    code, _, stderr = invoke("query", cube, "--best-arch")
    assert_one_sentence(code, stderr, "damaged")
    with pytest.raises(PaigridError, match="damaged"), paigrid.open_dataset(cube) as ds:
        ds.paigrid.best()


def test_an_undamaged_cube_reads_the_same_through_the_api(world):
    import h5py
    import numpy as np

    import paigrid

    with paigrid.open_dataset(world / "cube.h5") as ds, h5py.File(world / "cube.h5", "r") as f:
        stored = f["step_time"][:]
        assert ds.step_time.dims[0] == "job"
        np.testing.assert_array_equal(ds.step_time.values, stored)
        np.testing.assert_array_equal(ds.step_time.isel(job=[1, 0]).values, stored[[1, 0]])
        np.testing.assert_array_equal(ds.step_time.isel(job=1).values, stored[1])


@pytest.mark.parametrize("workers", [-3, 0, 1.5, True, "2"])
def test_the_api_refuses_bad_workers_at_once_as_the_cli_does(world, tmp_path, workers):
    import paigrid

    with pytest.raises(PaigridError, match="whole number of at least 1"):
        paigrid.sweep(world / "spec.toml", tmp_path / "o.h5", workers=workers)
    with pytest.raises(PaigridError, match="whole number of at least 1"):
        paigrid.sweep(world / "spec.toml", workers=workers)
    assert list(tmp_path.iterdir()) == []


def test_an_interrupted_in_memory_sweep_does_not_advise_a_resume(world):
    import paigrid

    def stop(_written):
        raise KeyboardInterrupt

    with pytest.raises(PaigridError, match=r"in-memory sweep \(out=None\) was interrupted and kept nothing") as error:
        paigrid.sweep(world / "spec.toml", on_block=stop)
    assert "--resume" not in str(error.value) and ".partial" not in str(error.value)


def test_an_interrupted_in_memory_llm_sweep_does_not_advise_a_resume():
    """LLM jobs only, blocks sized by work (their commits batched): ``on_block`` still reports the
    blocks committed at the end, so an interrupt there is the in-memory sentence."""
    import paigrid

    spec = {"workloads": ["llama3-8b"], "grid": {"gpu": ["H100"], "n_gpu": [8, 16]}, "llm": {"vpp": [1], "cp": [1]}}
    calls = []

    def stop(written):
        calls.append(written)
        raise KeyboardInterrupt

    with pytest.raises(PaigridError, match=r"in-memory sweep \(out=None\) was interrupted and kept nothing"):
        paigrid.sweep(spec, on_block=stop)
    assert calls == [2]


def test_the_api_refuses_workers_with_a_scheduler_as_the_cli_does(world, tmp_path):
    import paigrid

    with pytest.raises(PaigridError, match="choose one of --scheduler and --workers"):
        paigrid.sweep(world / "spec.toml", tmp_path / "o.h5", workers=2, scheduler="tcp://127.0.0.1:1")
    with pytest.raises(PaigridError, match="scheduler="):
        paigrid.sweep(world / "spec.toml", tmp_path / "o.h5", scheduler=8786)
    assert list(tmp_path.iterdir()) == []


# --- resume: what changed is named ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def interrupted(world, tmp_path_factory):
    """A partial cube: the sweep of the world's spec interrupted after its first block."""
    from paigrid.inputs.spec import load_spec
    from paigrid.orchestration import run_sweep

    out = tmp_path_factory.mktemp("resume") / "r.h5"

    def stop(_written):
        raise KeyboardInterrupt

    with pytest.raises(PaigridError, match="--resume"):
        run_sweep(load_spec(world / "spec.toml"), out, progress=False, on_block=stop)
    return out


@pytest.mark.parametrize(
    "extra,fragment",
    [
        (["--option", "overlap=0.3"], "options.overlap: 0.0 then, 0.3 now"),
        (["--model", "pai-v1"], "options.model: 'pai-v2' then, 'pai-v1' now"),
        (["--workloads", "resnet50"], "workloads: ['resnet50', 'bert-base'] then, ['resnet50'] now"),
        (["--compression", "zstd"], "started with --compression lz4"),
    ],
)
def test_a_changed_resume_is_refused_saying_what_changed(world, interrupted, extra, fragment):
    before = snapshot(interrupted.parent)
    code, _, stderr = invoke("sweep", world / "spec.toml", "--out", interrupted, "-q", "--resume", *extra)
    assert_one_sentence(code, stderr, fragment)
    assert snapshot(interrupted.parent) == before


# --- streams --------------------------------------------------------------------------------------------------
def _closed_stdout():
    os.close(1)


@pytest.mark.parametrize("args", [["catalogues"], ["llm", "models", "--csv"], ["study-spec"]])
def test_a_closed_stdout_is_one_sentence(args):
    result = subprocess.run(
        [sys.executable, "-c", "from paigrid.cli import main; main()", *args],
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_closed_stdout,
        timeout=120,
    )
    assert_one_sentence(result.returncode, result.stderr, "stdout is closed")


def test_a_command_that_prints_nothing_runs_with_stdout_closed(tmp_path):
    result = subprocess.run(
        [sys.executable, "-c", "from paigrid.cli import main; main()", "study-spec", "--out", str(tmp_path / "s.toml")],
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_closed_stdout,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "s.toml").read_text().startswith(("#", "[", "jobs", "workloads"))


# --- text outputs that are streams: bounded, never waited on ----------------------------------------------
def test_a_fifo_whose_reader_stops_reading_ends_in_one_sentence(tmp_path, monkeypatch):
    """A reader that opened the FIFO and reads nothing: once the pipe's buffer is full the write
    would wait forever; after ``STREAM_STALL_SECONDS`` without progress it is one sentence."""
    import paigrid.files as files

    monkeypatch.setattr(files, "STREAM_STALL_SECONDS", 0.5)
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # open, never read
    try:
        code, stdout, stderr = invoke("population", "--jobs", "3000", "--out", fifo)
    finally:
        os.close(reader)
    assert_one_sentence(code, stderr, "its reader took no text for 0.5 s", "bytes written")
    assert stdout == "" and fifo.is_fifo() and sorted(p.name for p in tmp_path.iterdir()) == ["f"]


def test_a_fifo_whose_reader_went_away_ends_in_one_sentence(tmp_path, monkeypatch):
    """The reader closes the FIFO after the first piece: the rest cannot be written (a broken
    pipe), which is one sentence, not a traceback or a silent success."""
    import paigrid.files as files

    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    real_write = os.write

    def write_then_reader_gone(fd, data):
        written = real_write(fd, data)
        with contextlib.suppress(OSError):
            os.close(reader)
        return written

    monkeypatch.setattr(files.os, "write", write_then_reader_gone)
    code, _, stderr = invoke("population", "--jobs", "3000", "--out", fifo)
    monkeypatch.undo()
    assert_one_sentence(code, stderr, "its reader closed it before the end")
    assert fifo.is_fifo()


def test_a_fifo_with_a_reader_receives_the_whole_text(tmp_path):
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # the reader is there before paigrid writes
    received = []

    def read_all():  # until the text and then its end (before paigrid opens the FIFO, a read sees an end too)
        import select
        import time

        chunks = []
        while select.select([reader], [], [], 60)[0]:
            data = os.read(reader, 1 << 16)
            if data:
                chunks.append(data)
            elif chunks:
                break
            else:
                time.sleep(0.01)
        os.close(reader)
        received.append(b"".join(chunks))

    thread = threading.Thread(target=read_all)
    thread.start()
    code, _, stderr = invoke("population", "--jobs", "3000", "--out", fifo)
    thread.join(timeout=60)
    assert code == 0, stderr
    rows = list(csv.DictReader(io.StringIO(received[0].decode())))
    assert len(rows) == 3000 and fifo.is_fifo()


# --- whole numbers of the public files: bounded, a row refused, never a crash --------------------------------
PUBLIC = Path(__file__).resolve().parent.parent / "datasets"


@pytest.mark.parametrize(
    "name,column",
    [
        ("llm_public.csv", "layers"),
        ("llm_public.csv", "seq_len"),
        ("llm_public.csv", "micro_batch"),
        ("llm_public_v2.csv", "hidden"),
        ("llm_public_v2.csv", "layers"),
        ("llm_public_v2.csv", "seq_len"),
        ("llm_public_v2.csv", "micro_batch"),
        ("measured_public_v2.csv", "gpus_per_node"),
        ("measured_public_v2.csv", "nodes"),
    ],
)
@pytest.mark.parametrize("value", ["1e308", HUGE, "inf", "nan"])
def test_a_public_files_whole_number_beyond_range_refuses_its_row(tmp_path, name, column, value):
    """A layer count, width, sequence length, micro-batch or GPU count of 1e308 (or beyond int64,
    or not finite) in a row of a public file: that row is refused with its reason (or the file
    is one sentence when no row is left), never an OverflowError or a ValueError."""
    with open(PUBLIC / name, newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))[:4]
    rows[1][rows[0].index(column)] = value
    path = tmp_path / name
    with open(path, "w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(rows)
    code, stdout, stderr = invoke("validate", path)
    assert "unexpected error" not in stderr and "Error" not in stderr, stderr
    if code == 0:
        # the LLM readers say "refused", the data-parallel public reader "not modelled"
        word = "not modelled" if name == "measured_public_v2.csv" else "refused"
        assert word in stdout and column in stdout, stdout
    else:
        assert_one_sentence(code, stderr, column)


# --- the corpus covers every command and the Python API ---------------------------------------------------
def _commands() -> set[str]:
    """Every command of the CLI's help by its full name ("sweep", "llm query", "trace import", ...):
    a hidden one is an old name (``datasets``) that runs the command it names, its bad input
    checked in tests/test_cli.py."""
    import typer.main

    from paigrid.cli import app

    def walk(command, prefix=()):
        subs = getattr(command, "commands", None)
        if subs:
            for name, sub in subs.items():
                if not sub.hidden:
                    yield from walk(sub, (*prefix, name))
        else:
            yield " ".join(prefix)

    return set(walk(typer.main.get_command(app)))


def _command_of(args: list[str], groups: set[str]) -> str:
    return " ".join(args[:2]) if args[0] in groups else args[0]


def test_the_hostile_corpus_has_a_case_for_every_command():
    """A command added to the CLI without a hostile case fails here: give it cases in this table
    or in test_hostile.py's."""
    import test_hostile

    commands = _commands()
    groups = {name.split()[0] for name in commands if " " in name}
    covered = {_command_of(c.args, groups) for c in CASES + test_hostile.CASES}
    missing = sorted(commands - covered)
    assert not missing, f"commands with no hostile case: {missing}"


#: the Python API's hostile cases: each public callable and accessor method -> a call that must
#: raise PaigridError with the CLI's kind of sentence (FIXTURE: the world folder)
API_CASES = {
    "open_dataset": [
        lambda w: __import__("paigrid").open_dataset(w / "text.txt"),
        lambda w: __import__("paigrid").open_dataset(w / "trace"),
        lambda w: __import__("paigrid").open_dataset(w / "cube.h5", group="llm"),
        lambda w: __import__("paigrid").open_dataset(w / "cube.h5", group="bogus"),
    ],
    "sweep": [
        lambda w: __import__("paigrid").sweep(w / "spec.toml", workers=0),
        lambda w: __import__("paigrid").sweep(w / "spec.toml", w / "spec.toml"),
        lambda w: __import__("paigrid").sweep({"workloads": ["llama3-8b"], "llm": {"max_tp": 10**30}}),
        lambda w: __import__("paigrid").sweep({"workloads": ["llama3-8b"], "grid": {"gpu": ["H100", "H100"]}}),
        lambda w: __import__("paigrid").sweep(w / "spec.toml", group="bogus"),
    ],
    "best": [lambda w: __import__("paigrid").open_dataset(w / "cube.h5").paigrid.best(by="speed")],
    "pareto": [lambda w: __import__("paigrid").open_dataset(w / "cube.h5").paigrid.pareto(job="resnet5")],
    "breakdown": [lambda w: __import__("paigrid").open_dataset(w / "cube.h5").paigrid.breakdown(job="resnet5")],
}


@pytest.mark.parametrize(
    "call", [(name, k) for name, calls in API_CASES.items() for k in range(len(calls))], ids=lambda c: f"{c[0]}-{c[1]}"
)
def test_the_api_refuses_hostile_input_in_one_sentence(world, call):
    name, k = call
    before = snapshot(world)
    with pytest.raises(PaigridError) as error:
        API_CASES[name][k](world)
    message = str(error.value)
    assert "\n" not in message and "Traceback" not in message and len(message) <= MAX_MESSAGE_CHARS + 200
    assert message.endswith((".", "?")), message
    assert snapshot(world) == before


def test_the_api_corpus_has_cases_for_every_public_callable():
    import inspect

    import paigrid
    from paigrid.xarray_api import PaigridAccessor

    public = {n for n in paigrid.__all__ if callable(getattr(paigrid, n))}
    methods = {n for n, m in inspect.getmembers(PaigridAccessor, inspect.isfunction) if not n.startswith("_")}
    missing = sorted((public | methods) - set(API_CASES))
    assert not missing, f"public API with no hostile case: {missing}"


# --- a header that names a column twice ---------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "command"),
    [
        ("llm_public_v2.csv", "validate"),
        ("measured_public_v2.csv", "validate"),
        ("workloads.csv", "sweep"),
    ],
)
def test_a_header_that_names_a_column_twice_is_one_sentence(tmp_path, name, command):
    """A CSV whose header repeats a column would be read by name with the last twin winning: it
    is refused in one sentence naming the column, for the public files and a user's workloads."""
    with open(PUBLIC / name, newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))[:4]
    twin = rows[0][1]
    rows = [[*row, row[1]] for row in rows]
    path = tmp_path / name
    with open(path, "w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(rows)
    args = ("validate", path) if command == "validate" else ("sweep", "--workloads", path, "-o", tmp_path / "c.h5")
    code, _, stderr = invoke(*args)
    assert_one_sentence(code, stderr, twin, "twice")
    assert not (tmp_path / "c.h5").exists()
