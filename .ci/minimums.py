"""Print pip constraints that pin every declared minimum version of pyproject.toml.

    python .ci/minimums.py > minimums.txt
    pip install -c minimums.txt -e '.[test,docs,cuda]'

Each requirement of ``[project] dependencies`` and of every extra that has a lower bound
(``name>=X``) becomes ``name==X`` (with its environment marker), so the install gets exactly the
oldest versions that paigrid says it works with; requirements without a lower bound (the CUDA
compiler wheels), with another operator (``ruff~=0.17.6``, a pinned series) and paigrid's own extras
are left to pip.  .ci/run installs them in a fresh virtual environment and runs the fast test
subset there, so a minimum that no longer works fails CI (docs/development.md).
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


def minimum_pins(project: dict) -> list[str]:
    """``name==minimum`` (with the requirement's marker) for every requirement with a ``>=`` bound."""
    requirements = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        requirements += extra
    pins: dict[str, str] = {}
    for text in requirements:
        requirement = Requirement(text)
        if requirement.name == project["name"]:
            continue
        lower = [spec.version for spec in requirement.specifier if spec.operator == ">="]
        if not lower:
            continue
        line = f"{requirement.name}=={lower[0]}"
        if requirement.marker is not None:
            line += f"; {requirement.marker}"
        if pins.setdefault(requirement.name, line) != line:
            sys.exit(f"{requirement.name} has two different minimum versions in pyproject.toml")
    return sorted(pins.values())


if __name__ == "__main__":
    project = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]
    print("\n".join(minimum_pins(project)))
