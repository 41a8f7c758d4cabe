"""The commands that only read a cube start without the compiler: ``paigrid --help``, ``info`` and
the queries answered from the stored bests (of either family) import neither numba (nor llvmlite)
nor scipy, dask, matplotlib or xarray.

The commands run one after another in a fresh interpreter, which reports the modules loaded after
each; a command that needs the kernels (``predict``) is checked the same way and must show numba,
so the check is seen to catch an import; a warm LLM search (``predict --layout best``, its kernels
precompiled by ``paigrid.precompiled``) must show neither numba nor llvmlite.  No timing here:
the start-up times are measured by ``bench/bench.py``.
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cli_helpers import run

FORMAT4 = Path(__file__).parent / "data" / "format4" / "cube.h5"

#: the variable that turns the precompiled kernels off (``paigrid.precompiled.ENABLE_VARIABLE``)
PRECOMPILED_OFF = "PAIGRID_PRECOMPILED"

#: what a reading command must not load
HEAVY = ("numba", "llvmlite", "scipy", "dask", "matplotlib", "xarray")

SPEC = """
workloads = ["resnet50", "llama3-8b"]

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
recompute = ["selective"]
"""

#: run each ``paigrid ARGS`` of a JSON list in turn, as the console script does, and write after each
#: its exit code, its stdout and the heavy modules loaded so far (a module is blamed on the first
#: command after which it shows)
PROBE = """
import contextlib, io, json, sys
report, commands = sys.argv[1], json.loads(sys.argv[2])
from paigrid.cli import main
results = []
for args in commands:
    sys.argv = ["paigrid", *args]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            main()
            code = 0
        except SystemExit as stop:
            code = stop.code or 0
    loaded = sorted(m for m in {heavy!r} if m in sys.modules)
    results.append({{"args": args, "code": code, "out": out.getvalue(), "loaded": loaded}})
with open(report, "w") as f:
    json.dump(results, f)
"""


@pytest.fixture(scope="module")
def mixed_cube(tmp_path_factory):
    """A small cube with both families: resnet50 and llama3-8b (an ``llm`` group)."""
    folder = tmp_path_factory.mktemp("startup")
    (folder / "spec.toml").write_text(SPEC)
    result = run("sweep", folder / "spec.toml", "-o", folder / "cube.h5", "-q")
    assert result.exit_code == 0, result.output
    return folder / "cube.h5"


def probe(tmp_path, commands, variables=None, watch=HEAVY):
    """Run the ``commands`` (lists of arguments) in one fresh interpreter (with the environment
    ``variables`` added): one result each, its ``loaded`` the modules of ``watch`` loaded so far."""
    report = tmp_path / "report.json"
    env = {
        **os.environ,
        "NUMBA_CACHE_DIR": os.environ.get("NUMBA_CACHE_DIR", str(Path.home() / ".cache" / "paigrid-tests-numba")),
        **(variables or {}),
    }
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            PROBE.format(heavy=tuple(watch)),
            str(report),
            json.dumps([[str(a) for a in args] for args in commands]),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    results = json.loads(report.read_text())
    assert [r["args"] for r in results] == [[str(a) for a in args] for args in commands]
    return results


def test_reading_commands_import_no_compiler(mixed_cube, tmp_path):
    """``--help``, ``info`` and stored-best queries of both families, and of a data-parallel cube."""
    commands = [
        (["info", mixed_cube], "llama3-8b"),
        (["query", mixed_cube, "--best-arch"], "llama3-8b"),
        (["query", mixed_cube, "--best-arch", "--json", "--job", "llama3-8b", "--where", "n_gpu=64"], "llama3-8b"),
        (["query", mixed_cube, "--best-arch", "--per", "n_gpu"], "resnet50"),
        (["query", mixed_cube, "--best-arch", "--tokens", "1e12", "--job", "llama3-8b"], "llama3-8b"),
        (["info", FORMAT4], "resnet50"),
        (["query", FORMAT4, "--best-arch", "--where", "gpu=H100"], "resnet50"),
        (["--help"], "sweep"),
    ]
    for (_, shown), result in zip(commands, probe(tmp_path, [args for args, _ in commands])):
        assert result["code"] == 0, result
        assert shown in result["out"], result
        assert result["loaded"] == [], result


DP_PREDICT = [
    "predict",
    "--workload",
    "resnet50",
    "--arch",
    "ps-worker",
    "--gpu",
    "V100",
    "--n-gpu",
    "16",
    "--intra",
    "pcie3",
    "--network",
    "eth-25g",
    "--precision",
    "fp32",
]


def test_plain_option_values_need_no_pydantic(mixed_cube, tmp_path):
    """Options of plain values (words, whole and real numbers, paths, choices, lists of them)
    are read without typer's pydantic validators (``arguments._defer_coercion``); a value that
    is not plain (a signed number) still asks them, and the probe is seen to report pydantic then."""
    commands = [
        ["info", mixed_cube],
        ["query", mixed_cube, "--best-arch", "--by", "cost", "--tokens", "1e12"],
        [*DP_PREDICT, "--batch", "64"],
        ["query", mixed_cube, "--best-arch", "--job", "llama3-8b", "--job", "resnet50"],
        ["query", mixed_cube, "--best-arch", "--by", "cost", "--tokens", "+1e12"],
    ]
    *plain, listed = probe(tmp_path, commands, watch=("pydantic",))
    for result in plain:
        assert result["code"] == 0 and result["loaded"] == [], result
    import importlib.util

    # a typer without pydantic validators (before 0.29, e.g. the declared minimum) loads none at all
    validators = importlib.util.find_spec("typer._coercion") is not None
    assert listed["code"] == 0 and listed["loaded"] == (["pydantic"] if validators else []), listed


def test_the_probe_sees_numba_where_a_command_needs_the_kernels(tmp_path):
    """The control: ``predict`` runs the kernel, and the probe reports numba and llvmlite."""
    [result] = probe(
        tmp_path,
        [DP_PREDICT],
    )
    assert result["code"] == 0 and "step_time" in result["out"], result
    assert "numba" in result["loaded"] and "llvmlite" in result["loaded"], result


LLM_BEST = ["predict", "--workload", "nemo-gpt3-5b", "--gpu", "H100", "--n-gpu", "16", "--layout", "best"]


@pytest.mark.slow
def test_a_warm_llm_search_imports_no_compiler(tmp_path):
    """``predict --layout best`` of an LLM job, once its kernels are precompiled (the first run
    builds them, ``paigrid.precompiled``), imports neither numba nor llvmlite, and prints what
    the JIT kernels print (``PAIGRID_PRECOMPILED=0``), but for the search's seconds."""
    first, warm = probe(tmp_path, [LLM_BEST]), probe(tmp_path, [LLM_BEST])
    for result in first + warm:
        assert result["code"] == 0 and "step_time" in result["out"], result
    assert warm[0]["loaded"] == [], warm
    [jit] = probe(tmp_path, [LLM_BEST], {PRECOMPILED_OFF: "0"})
    assert "numba" in jit["loaded"], jit

    def unsecond(text):
        return re.sub(r"searched in [0-9.]+ s", "searched in", text)

    assert unsecond(warm[0]["out"]) == unsecond(jit["out"])
