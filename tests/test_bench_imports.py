"""The bench scripts import each other without a circle (they share helpers through bench/specs.py)."""

import ast
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench"


def _local_imports(path: Path, local: set[str]) -> set[str]:
    """The bench modules that ``path`` imports, at any depth of its code (function-level imports too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found & local - {path.stem}


def test_bench_scripts_have_no_import_circle():
    scripts = {p.stem: p for p in BENCH.glob("*.py")}
    graph = {name: _local_imports(path, set(scripts)) for name, path in scripts.items()}
    assert graph["bench"] >= {"specs"}, "bench.py should take its shared specs from bench/specs.py"

    def reaches(start: str, target: str, seen: set[str]) -> bool:
        return any(nxt == target or (nxt not in seen and reaches(nxt, target, seen | {nxt})) for nxt in graph[start])

    circles = sorted(name for name in graph if reaches(name, name, {name}))
    assert not circles, f"bench modules in an import circle: {circles} ({graph})"
