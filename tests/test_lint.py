"""The repository passes ``ruff check`` with the rules of pyproject.toml's [tool.ruff], is formatted as
``ruff format`` formats it, and ``engine/`` and ``kernels/`` pass mypy with pyproject.toml's [tool.mypy]
(ruff and mypy are in the test extra; docs/development.md says how to run each)."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_ruff_check_passes():
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", "."],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_leaves_the_tree_as_it_is():
    """``ruff format --check``: nothing to reformat (pyproject.toml's [tool.ruff.format]).  Fails until the
    one commit that formats the whole tree; after it, every commit keeps it formatted (pre-commit does)."""
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--check", "--no-cache", "."], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, "run `ruff format .`; ruff would reformat:\n" + result.stdout + result.stderr


def test_mypy_passes_on_engine_and_kernels():
    """tools/typecheck.py (mypy over the package paigrid) finds no error, and checked every module."""
    result = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "typecheck.py")], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
    modules = [p for folder in ("engine", "kernels", "datasets") for p in (ROOT / folder).rglob("*.py")]
    checked = re.search(r"no issues found in (\d+) source files", result.stdout)
    assert checked and int(checked.group(1)) >= len(modules), result.stdout
