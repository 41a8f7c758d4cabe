"""What the CUDA tests share (tests/test_cuda.py, tests/test_cuda_llm.py): the simulator runner
(a check script in a subprocess, since numba's CUDA simulator must be switched on before
numba.cuda is first imported) and the PTX compilation with NVVM, skipped where it is missing."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent


def run_simulator_checks(script: str) -> str:
    """The stdout of ``tests/SCRIPT`` (``cuda_sim_checks.py``, ``cuda_sim_llm_checks.py``: each
    sets ``NUMBA_ENABLE_CUDASIM=1`` before it imports numba.cuda, compares the CUDA kernels'
    outputs with the CPU kernels' and exits 1 on the first difference), run in a subprocess; a
    test failure with its output when it fails."""
    done = subprocess.run([sys.executable, str(HERE / script)], capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        pytest.fail(f"{script} exited with {done.returncode}:\n{done.stdout}{done.stderr}")
    return done.stdout


def nvvm_missing() -> str:
    """'' when numba-cuda and libNVVM are installed here (PTX can be made without a GPU), else why not."""
    probe = subprocess.run(
        [sys.executable, "-c", "from numba.cuda.cudadrv import nvvm; nvvm.NVVM()"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return "" if probe.returncode == 0 else (probe.stderr.strip().splitlines() or ["no libNVVM"])[-1]


def compile_ptx(program: str) -> str:
    """The stdout of ``program`` (Python that compiles the real kernels to PTX with NVVM and
    prints a line per kernel), run in a subprocess without the simulator; skipped where NVVM is
    not installed, a test failure when the program fails."""
    reason = nvvm_missing()
    if reason:
        pytest.skip(f"numba-cuda's NVVM is not installed here ({reason}); pip install 'paigrid[cuda]' to run this")
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=300, env=env)
    if done.returncode != 0:
        pytest.fail(f"the PTX compilation failed:\n{done.stderr[-3000:]}")
    return done.stdout
