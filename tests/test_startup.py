"""The commands that only read a cube start without the compiler: ``paigrid --help``, ``info`` and
the queries answered from the stored bests (of either family) import neither numba (nor llvmlite)
nor scipy, dask, matplotlib or xarray.

Each command runs in a fresh interpreter, which reports the modules it had loaded when the command
ended; a command that needs the kernels (``predict``) is checked the same way and must show numba,
so the check is seen to catch an import.  No timing here: the start-up times are measured by
``bench/bench.py``.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli_helpers import run

FORMAT4 = Path(__file__).parent / "data" / "format4" / "cube.h5"

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

#: run ``paigrid ARGS`` as the console script does and write which heavy modules it loaded
PROBE = """
import json, sys
report, args = sys.argv[1], sys.argv[2:]
sys.argv = ["paigrid", *args]
from paigrid.cli import main
try:
    main()
    code = 0
except SystemExit as stop:
    code = stop.code or 0
heavy = {heavy!r}
loaded = sorted(m for m in heavy if m in sys.modules)
with open(report, "w") as f:
    json.dump({{"code": code, "loaded": loaded}}, f)
"""


@pytest.fixture(scope="module")
def mixed_cube(tmp_path_factory):
    """A small cube with both families: resnet50 and llama3-8b (an ``llm`` group)."""
    folder = tmp_path_factory.mktemp("startup")
    (folder / "spec.toml").write_text(SPEC)
    result = run("sweep", folder / "spec.toml", "-o", folder / "cube.h5", "-q")
    assert result.exit_code == 0, result.output
    return folder / "cube.h5"


def loaded_by(tmp_path, *args):
    """Run ``paigrid ARGS`` in a fresh interpreter: (its stdout, the heavy modules it loaded)."""
    report = tmp_path / "report.json"
    env = {**os.environ, "NUMBA_CACHE_DIR": os.environ.get("NUMBA_CACHE_DIR", str(Path.home() / ".cache" /
                                                                                    "paigrid-tests-numba"))}
    done = subprocess.run([sys.executable, "-c", PROBE.format(heavy=HEAVY), str(report), *map(str, args)],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(report.read_text())
    assert result["code"] == 0, done.stderr
    return done.stdout, result["loaded"]


@pytest.mark.parametrize("args, shown", [
    (["info", "{cube}"], "llama3-8b"),
    (["query", "{cube}", "--best-arch"], "llama3-8b"),
    (["query", "{cube}", "--best-arch", "--json", "--job", "llama3-8b", "--where", "n_gpu=64"], "llama3-8b"),
    (["query", "{cube}", "--best-arch", "--per", "n_gpu"], "resnet50"),
    (["query", "{cube}", "--best-arch", "--tokens", "1e12", "--job", "llama3-8b"], "llama3-8b"),
    (["info", str(FORMAT4)], "resnet50"),
    (["query", str(FORMAT4), "--best-arch", "--where", "gpu=H100"], "resnet50"),
    (["--help"], "sweep"),
])
def test_reading_commands_import_no_compiler(mixed_cube, tmp_path, args, shown):
    out, loaded = loaded_by(tmp_path, *(a.format(cube=mixed_cube) for a in args))
    assert shown in out
    assert loaded == []


def test_the_probe_sees_numba_where_a_command_needs_the_kernels(tmp_path):
    out, loaded = loaded_by(tmp_path, "predict", "--workload", "resnet50", "--arch", "ps-worker", "--gpu", "V100",
                            "--n-gpu", "16", "--intra", "pcie3", "--network", "eth-25g", "--precision", "fp32")
    assert "step_time" in out
    assert "numba" in loaded and "llvmlite" in loaded
