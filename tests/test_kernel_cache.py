"""The kernel cache compiled at build time (setup.py's ``prebuild_kernel_cache``, read by
``paigrid.kernels.jit.KernelCache``): a fresh process on an installed copy of the package loads
the prebuilt machine code without compiling and without writing the installed tree, and an entry
that does not fit (another fingerprint, another numba version, a damaged index) is compiled
instead.  The copies are laid out as the wheel installs them (``paigrid/``, ``paigrid/kernels/``,
``paigrid/datasets/``) in temporary folders, each with its own empty user cache."""

import importlib.util
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: a prebuild of one small kernel (seconds, not the minute of the default sweep's)
STEP_FACTORS = """
import sys
sys.path.insert(0, sys.argv[1])
import numpy as np
from paigrid.kernels import dp_columns as L, jit, model
assert jit.__file__.startswith(sys.argv[1]), jit.__file__
model.step_factors(np.ones((2, L.N_JOB_FIELDS)), np.ones((2, 3)), np.ones((4, L.N_GPU_FIELDS)))
print("compiled step_factors")
"""

#: run on an installed copy (argv[1]): call step_factors as above and print its cache statistics
CALL = """
import json, sys
sys.path.insert(0, sys.argv[1])
import numpy as np
from paigrid.kernels import dp_columns as L, jit, model
assert jit.__file__.startswith(sys.argv[1]), jit.__file__
samples, cost, energy = model.step_factors(np.ones((2, L.N_JOB_FIELDS)), np.ones((2, 3)), np.ones((4, L.N_GPU_FIELDS)))
stats = model.step_factors.stats
print(json.dumps({"hits": sum(stats.cache_hits.values()), "misses": sum(stats.cache_misses.values()),
                  "sum": float(samples.sum() + cost.sum() + energy.sum()), "prebuilt": jit.PREBUILT_FOLDER}))
"""


def _setup_module():
    """setup.py as a module (it calls ``setup()`` only when run as a script)."""
    spec = importlib.util.spec_from_file_location("paigrid_setup", ROOT / "setup.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _environment(cache: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_DISABLE_JIT", "NUMBA_DEBUG_CACHE")}
    env["NUMBA_CACHE_DIR"] = str(cache)
    return env


def _install(setup, prebuilt: Path, folder: Path) -> Path:
    """A copy of the package in ``folder`` with ``prebuilt`` as its kernels' ``_prebuilt``."""
    setup._copy_package(folder)
    shutil.copytree(prebuilt, folder.joinpath("paigrid", *setup.PREBUILT))
    return folder


def _call(installed: Path, cache: Path) -> dict:
    import json

    run = subprocess.run(
        [sys.executable, "-c", CALL, str(installed)], env=_environment(cache), capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.strip().splitlines()[-1])


def _indexes(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*.nbi"))


@pytest.fixture(scope="module")
def prebuilt(tmp_path_factory):
    """setup.py's prebuild, of step_factors alone, into a temporary folder."""
    setup = _setup_module()
    target = tmp_path_factory.mktemp("prebuilt") / "_prebuilt"
    said = setup.prebuild_kernel_cache(target, codes=(STEP_FACTORS,))
    assert said == "compiled step_factors"
    assert any("step_factors" in name for name in _indexes(target))
    return setup, target


@pytest.mark.slow  # a compilation and three fresh processes: about 10 s on 2 busy cores
def test_a_fresh_process_loads_the_prebuilt_cache_without_compiling(prebuilt, tmp_path):
    setup, target = prebuilt
    installed = _install(setup, target, tmp_path / "site")
    shipped = sorted(p.relative_to(installed).as_posix() for p in installed.rglob("*") if p.suffix in (".nbi", ".nbc"))
    user = tmp_path / "user-cache"
    first = _call(installed, user)
    assert (first["hits"], first["misses"]) == (1, 0)
    assert first["prebuilt"].startswith(str(installed))
    # nothing compiled, so nothing saved in the user cache, and nothing written in the installed tree
    assert not any("step_factors" in name for name in _indexes(user))
    assert (
        sorted(p.relative_to(installed).as_posix() for p in installed.rglob("*") if p.suffix in (".nbi", ".nbc"))
        == shipped
    )
    # the same numbers as a compilation in a process without the prebuilt cache
    shutil.rmtree(installed.joinpath("paigrid", *setup.PREBUILT))
    compiled = _call(installed, tmp_path / "other-cache")
    assert (compiled["hits"], compiled["misses"]) == (0, 1)
    assert compiled["sum"] == first["sum"]


def _rewrite_index(index: Path, how: str) -> None:
    """Make a prebuilt index one that must not be used: another kernel fingerprint in its stamp,
    another numba version in its header, or cut short."""
    raw = index.read_bytes()
    if how == "damaged":
        index.write_bytes(raw[: len(raw) // 2])
        return
    with index.open("rb") as handle:
        version = pickle.load(handle)
        stamp, overloads = pickle.loads(handle.read())
    if how == "fingerprint":
        stamp = (stamp[0], "0123456789abcdef", *stamp[2:])
    else:
        version = "0.0.0"
    with index.open("wb") as handle:
        pickle.dump(version, handle, protocol=-1)
        handle.write(pickle.dumps((stamp, overloads), protocol=-1))


@pytest.mark.slow  # a compilation and two fresh processes each
@pytest.mark.parametrize("how", ["fingerprint", "numba version", "damaged"])
def test_a_prebuilt_entry_that_does_not_fit_is_compiled_instead(prebuilt, tmp_path, how):
    setup, target = prebuilt
    installed = _install(setup, target, tmp_path / "site")
    (index,) = [p for p in installed.rglob("*.nbi") if "step_factors" in p.name]
    _rewrite_index(index, how)
    user = tmp_path / "user-cache"
    got = _call(installed, user)
    assert (got["hits"], got["misses"]) == (0, 1)  # compiled, not loaded
    assert any("step_factors" in name for name in _indexes(user))  # and saved in the user cache
    again = _call(installed, user)
    assert (again["hits"], again["misses"]) == (1, 0) and again["sum"] == got["sum"]


@pytest.mark.parametrize(
    "code,timeout,reason",
    [
        ("import sys; sys.exit('no numba here')", 900.0, "no numba here"),  # a step that fails
        ("print('nothing compiled')", 900.0, "nothing compiled"),  # one that exits cleanly but writes no cache
        ("import time; time.sleep(60)", 1.0, "no result after 1 s"),  # one past its time, stopped
    ],
)
def test_a_build_that_does_not_compile_says_why_and_leaves_the_target(tmp_path, code, timeout, reason):
    setup = _setup_module()
    target = tmp_path / "_prebuilt"
    said = setup.prebuild_kernel_cache(target, codes=(code,), timeout=timeout)
    assert said == f"the kernels were not compiled at build time ({reason}); the first run compiles them"
    assert not target.exists()


def test_one_build_that_cannot_compile_leaves_the_others(prebuilt, tmp_path):
    """Of two builds, the one that fails says why and the other's cache is still installed."""
    setup, _ = prebuilt
    target = tmp_path / "_prebuilt"
    said = setup.prebuild_kernel_cache(target, codes=("import sys; sys.exit('no compiler here')", STEP_FACTORS))
    failed = "the kernels were not compiled at build time (no compiler here); the first run compiles them"
    assert said == f"{failed}; compiled step_factors"
    assert any("step_factors" in name for name in _indexes(target))


@pytest.mark.slow
def test_the_default_sweep_compiles_nothing_on_the_prebuilt_cache(tmp_path):
    """setup.py's real prebuild (the sweeps' kernels, about half a minute, and beside them the
    precompiled module), then the README's ``paigrid sweep``, a population's sweep, an LLM job's
    sweep and an LLM ``predict`` in fresh processes on the installed copy with an empty user
    cache: every compiled function is saved in the user cache, and the precompiled module would
    be built there, so an empty one means nothing was compiled."""
    setup = _setup_module()
    target = tmp_path / "_prebuilt"
    said = setup.prebuild_kernel_cache(target)
    first, second = said.split("; ")
    assert first.startswith("compiled the default, population and LLM sweeps' kernels"), said
    assert second == "compiled the precompiled kernels of predict and query", said
    installed = _install(setup, target, tmp_path / "site")
    user = tmp_path / "user-cache"
    code = "import sys; sys.path.insert(0, sys.argv.pop(1)); from paigrid.cli import main; main()"
    commands = [
        ["sweep", "--out", str(tmp_path / "cube.h5"), "-q"],
        ["population", "--jobs", "32", "--seed", "3", "--out", str(tmp_path / "pop.csv")],
        ["sweep", "--workloads", str(tmp_path / "pop.csv"), "--out", str(tmp_path / "population.h5"), "-q"],
        ["sweep", "--workloads", "llama3-8b", "--out", str(tmp_path / "llm.h5"), "-q"],
        ["predict", "--workload", "llama3-8b", "--gpu", "H100-SXM5-80GB", "--n-gpu", "8", "--layout", "best"],
    ]
    for command in commands:
        run = subprocess.run(
            [sys.executable, "-c", code, str(installed), *command],
            env=_environment(user),
            capture_output=True,
            text=True,
            cwd=tmp_path,
        )
        assert run.returncode == 0, run.stderr
    assert all((tmp_path / name).exists() for name in ("cube.h5", "population.h5", "llm.h5"))
    assert _indexes(user) == []
    assert not any(path.name.startswith("precompiled-") for path in user.rglob("*")), sorted(user.rglob("*"))
