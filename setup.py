"""Package discovery, and the kernel cache compiled at build time (the metadata lives in pyproject.toml).

The import package ``paigrid`` is assembled from three top-level folders: ``engine/`` is
``paigrid``, ``kernels/`` is ``paigrid.kernels`` and ``datasets/`` is ``paigrid.datasets``.
``pyproject.toml`` cannot express "find the subpackages of a renamed folder", so they are found
here with setuptools' ``find_packages``: a new subpackage is picked up without a list to edit.

``build_py`` also compiles the kernels that the default ``paigrid sweep`` calls into
``paigrid/kernels/_prebuilt/`` (``prebuild_kernel_cache``): in the wheel for an install, in the
source tree for an editable one.  A fresh install's first sweep then loads them instead of
spending about a minute in numba's compiler (``paigrid.kernels.jit`` reads that folder, never
writes it).  Beside them, at the same time, it builds the precompiled module of the LLM
``predict`` and of ``query``'s scans (``paigrid.precompiled``, about 25 s), which the first such
command would otherwise wait for.  A build that cannot compile (no numba in a build without
isolation, a compiler error, a time-out) prints one line and goes on: the wheel works, and the
first run compiles as before.
``PAIGRID_PREBUILD=0`` skips the step (a build whose environment's numba differs from the one the
package will run with, as pip's isolated build under pinned minimum versions: its cache would be
ignored).
"""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
FOLDERS = {"paigrid": "engine", "paigrid.kernels": "kernels", "paigrid.datasets": "datasets"}
#: where the prebuilt cache lives, under the package folder ``paigrid`` (``kernels.jit.PREBUILT_FOLDER``'s parent)
PREBUILT = ("kernels", "_prebuilt")
#: the most a build waits for the compiler [s] (about a minute on 2 busy cores)
PREBUILD_TIMEOUT_S = 900

#: run in a fresh interpreter on a copy of the package (argv[1]: the folder holding ``paigrid/``,
#: with NUMBA_CACHE_DIR at its ``paigrid/kernels/_prebuilt``): what the default ``paigrid sweep``
#: compiles, called as the sweep calls it (``evaluate.compute_block`` on a block of the default
#: grid, the factors of the derived variables, the chunk checksum), and what a population's sweep
#: adds (its jobs' current configurations, predicted first) and an LLM job's sweep (the layouts'
#: kernel), so the signatures are the sweeps'
SWEEP_KERNELS = """
import sys
sys.path.insert(0, sys.argv[1])
from paigrid.kernels import jit
if not jit.__file__.startswith(sys.argv[1]):
    sys.exit(f"imported paigrid.kernels from {jit.__file__}, not from the copy being built")
from paigrid import codecs, evaluate
from paigrid.inputs.spec import SweepSpec
from paigrid.orchestration import prepare

grid, _ = prepare(SweepSpec())
stop = 1
while stop < len(grid.jobs) and stop * grid.configs // len(grid.jobs) <= evaluate.SERIAL_MAX_CONFIGS:
    stop += 1  # the sweep's blocks are larger than the serial kernel's limit: so is this one
evaluate.compute_block(grid, 0, 0, stop, True, None)
jobs, n_gpu = grid.job_rows(0, stop)
evaluate.step_factor_arrays(jobs, n_gpu, grid.gpu_table)
codecs.fletcher32(b"")
# a population's jobs state their current configuration, which its sweep predicts first (the
# study's sweep: the serial kernel on a few jobs and the derived values)
from pathlib import Path
from paigrid.predict import current_predictions
from paigrid.study.population import synthetic_population
from paigrid.study.trace import write_population
population = Path(sys.argv[1]) / "population.csv"
write_population(synthetic_population(16, seed=1), population)
population_grid, _ = prepare(SweepSpec(workloads=str(population)))
current_predictions(population_grid.jobs, population_grid.cats, population_grid.efficiency, SweepSpec().options)
# and an LLM job's sweep (its layouts' kernel)
from paigrid.orchestration import run_sweep
run_sweep(SweepSpec(workloads=["llama3-8b"]), Path(sys.argv[1]) / "llm.h5", progress=False)
print(f"compiled the default, population and LLM sweeps' kernels for fingerprint {jit.FINGERPRINT}")
"""


def _copy_package(into: Path) -> None:
    """The package as it installs (``FOLDERS``), under ``into/paigrid``, without caches."""
    skip = shutil.ignore_patterns("__pycache__", "*.pyc", "_prebuilt")
    for package, folder in FOLDERS.items():
        shutil.copytree(ROOT / folder, into.joinpath(*package.split(".")), ignore=skip, dirs_exist_ok=True)


#: run like ``SWEEP_KERNELS``, beside it: the module of ``paigrid.precompiled`` (the serial LLM
#: kernels and the scan's selection, compiled ahead of time), which ``predict`` and ``query`` load
PRECOMPILED_MODULE = """
import sys
sys.path.insert(0, sys.argv[1])
from paigrid import precompiled
if not precompiled.__file__.startswith(sys.argv[1]):
    sys.exit(f"imported paigrid.precompiled from {precompiled.__file__}, not from the copy being built")
if precompiled.load(build=True) is None:
    sys.exit(f"the precompiled kernels were not built ({precompiled.status()})")
print("compiled the precompiled kernels of predict and query")
"""

#: what a build compiles, each in a fresh interpreter of its own, at once
BUILT_AT_INSTALL = (SWEEP_KERNELS, PRECOMPILED_MODULE)


#: how the line of a build step that could not compile starts
NOT_COMPILED = "the kernels were not compiled at build time"


def _not_compiled(reason: str) -> str:
    """The line of a build step that could not compile, with its ``reason``."""
    return f"{NOT_COMPILED} ({reason}); the first run compiles them"


def prebuild_kernel_cache(target: Path, codes=BUILT_AT_INSTALL, timeout: float = PREBUILD_TIMEOUT_S) -> str:
    """Compile what each of ``codes`` calls (default: the default sweep's kernels and the
    precompiled module), each in a fresh interpreter of its own and all at once, on a copy of the
    package, and put the cache they fill in ``target`` (replaced), for ``paigrid.kernels.jit`` and
    ``paigrid.precompiled`` to load.  Returns each child's last line, joined by "; ": what it
    compiled, or why it could not (where none could, ``target`` is left as it was)."""
    import time

    with tempfile.TemporaryDirectory(prefix="paigrid-prebuild-") as folder:
        tree = Path(folder)
        _copy_package(tree)
        built = tree.joinpath("paigrid", *PREBUILT)
        # PYTHONPATH stays: pip's isolated build environment reaches its numba through it
        env = {key: value for key, value in os.environ.items() if key != "NUMBA_DISABLE_JIT"}
        env["NUMBA_CACHE_DIR"] = str(built)
        command = dict(env=env, cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + timeout
        children, said = [], []
        for code in codes:
            try:
                children.append(subprocess.Popen([sys.executable, "-c", code, folder], **command))
            except OSError as error:  # no interpreter to start: the ones started still finish
                said.append(_not_compiled(str(error)))
                break
        for child in children:
            try:
                output, _ = child.communicate(timeout=max(deadline - time.monotonic(), 0.0))
            except subprocess.TimeoutExpired:
                child.kill()
                child.communicate()
                said.append(_not_compiled(f"no result after {timeout:.0f} s"))
                continue
            last = (output.strip().splitlines() or ["(no output)"])[-1]
            said.append(last if child.returncode == 0 else _not_compiled(last))
        if not built.is_dir():  # steps that say they compiled, but wrote no cache
            said = [line if line.startswith(NOT_COMPILED) else _not_compiled(line) for line in said]
        if any(not line.startswith(NOT_COMPILED) for line in said):
            for failure in built.rglob("failed.txt"):  # paigrid.precompiled's record: the first run may retry
                failure.unlink()
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(built, target)
        return "; ".join(said)


class BuildWithKernelCache(build_py):
    """``build_py``, then ``prebuild_kernel_cache`` into the built package (or, for an editable
    install, into the source tree's ``kernels/_prebuilt``, which git ignores)."""

    def run(self):
        super().run()
        if self.dry_run:
            return
        if os.environ.get("PAIGRID_PREBUILD") == "0":  # .ci/run's minimum versions: see docs/development.md
            print("paigrid: PAIGRID_PREBUILD=0: the kernels were not compiled at build time", file=sys.stderr)
            return
        if getattr(self, "editable_mode", False):
            target = ROOT.joinpath(FOLDERS["paigrid.kernels"], *PREBUILT[1:])
        else:
            target = Path(self.build_lib).joinpath("paigrid", *PREBUILT)
        print(f"paigrid: {prebuild_kernel_cache(target)}", file=sys.stderr)


packages = []
package_dir = {}
for package, folder in FOLDERS.items():
    package_dir[package] = folder
    packages += [package] + [f"{package}.{sub}" for sub in find_packages(folder)]

if __name__ == "__main__":  # setuptools runs this file as __main__; the tests import it for prebuild_kernel_cache
    setup(packages=packages, package_dir=package_dir, cmdclass={"build_py": BuildWithKernelCache})
