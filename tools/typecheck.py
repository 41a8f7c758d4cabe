"""Type-check the import package ``paigrid`` (``engine/`` and ``kernels/``) with mypy.

    python tools/typecheck.py            # mypy -p paigrid with pyproject.toml's [tool.mypy]
    python tools/typecheck.py -- ARGS    # the same, with more mypy arguments (e.g. -- --check-untyped-defs)

The import package is assembled from renamed folders (``engine/`` is ``paigrid``, ``kernels/`` is
``paigrid.kernels``, see setup.py), which mypy cannot map, and an editable install finds them with
an import hook that mypy does not run.  So this script lays a tree of symbolic links named as the
package (``paigrid/<each entry of engine/>``, ``paigrid/kernels``, ``paigrid/datasets``) in a
temporary folder and runs ``mypy -p paigrid`` there, with pyproject.toml's configuration and the
Python interpreter running this script (for the installed packages' types).  Messages name the
files as ``paigrid/...``; ``paigrid/kernels/x.py`` is ``kernels/x.py`` and the rest ``engine/...``.
``tests/test_lint.py`` runs it; it exits with mypy's status.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = {"kernels": "kernels", "datasets": "datasets"}  # subpackage of paigrid -> folder, as in setup.py


def link_tree(target: Path) -> Path:
    """Lay ``target/paigrid`` as symbolic links into engine/, kernels/ and datasets/; returns it."""
    package = target / "paigrid"
    package.mkdir()
    for entry in sorted((ROOT / "engine").iterdir()):
        if entry.name != "__pycache__":
            (package / entry.name).symlink_to(entry)
    for sub, folder in FOLDERS.items():
        (package / sub).symlink_to(ROOT / folder)
    return package


def main(extra: list[str]) -> int:
    """Run mypy over the linked package; returns mypy's exit status."""
    with tempfile.TemporaryDirectory(prefix="paigrid-typecheck-") as tmp:
        link_tree(Path(tmp))
        command = [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "--python-executable",
            sys.executable,
            "--cache-dir",
            str(Path(tmp) / ".mypy_cache"),
            "-p",
            "paigrid",
            *extra,
        ]
        return subprocess.run(command, cwd=tmp).returncode


if __name__ == "__main__":
    args = sys.argv[1:]
    sys.exit(main(args[1:] if args[:1] == ["--"] else args))
