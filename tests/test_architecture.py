"""The package's architecture, checked on its import graph: the layers import only downward,
there are no import circles, readers never reach the writer or the driver, and the kernels
import only numpy and numba.

The imports are read from the source with ``ast`` (imports inside functions included, since a
lazy import is still a dependency), so the test needs no module to be importable.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = {"paigrid": ROOT / "engine", "paigrid.kernels": ROOT / "kernels", "paigrid.datasets": ROOT / "datasets"}

#: the layer order, lowest first: a module may import modules of its own layer or below
LAYERS = [
    ("kernels", ["paigrid.kernels", "paigrid.kernels.*", "paigrid.datasets"]),
    (
        "base",
        [
            "paigrid",
            "paigrid.errors",
            "paigrid.faults",
            "paigrid.files",
            "paigrid.locking",
            "paigrid.render",
            "paigrid.llm",
            "paigrid.precompiled",
        ],
    ),
    (
        "inputs",
        [
            "paigrid.inputs",
            "paigrid.inputs.options",
            "paigrid.inputs.catalog",
            "paigrid.inputs.spec",
            "paigrid.inputs.efficiency",
            "paigrid.inputs.zoo",
            "paigrid.llm.models",
            "paigrid.llm.shapes",
            "paigrid.llm.fabrics",
        ],
    ),
    (
        "jobs and tables",
        [
            "paigrid.inputs.jobs",
            "paigrid.inputs.kernel_tables",
            "paigrid.llm.tables",
            "paigrid.llm.parallelism",
            "paigrid.llm.grid",
            "paigrid.llm.evaluate",
            "paigrid.llm.search",
            "paigrid.llm.rows",
        ],
    ),
    ("schema", ["paigrid.schema", "paigrid.codecs", "paigrid.ranking"]),
    ("driver", ["paigrid.evaluate", "paigrid.cuda_sweep"]),
    ("writer and reader", ["paigrid.store", "paigrid.cube", "paigrid.sources"]),
    (
        "operations",
        [
            "paigrid.orchestration",
            "paigrid.distributed",
            "paigrid.query",
            "paigrid.predict",
            "paigrid.describe",
            "paigrid.xarray_api",
            "paigrid.llm.sweep",
            "paigrid.llm.query",
        ],
    ),
    ("trust and study", ["paigrid.accuracy", "paigrid.accuracy.*", "paigrid.study", "paigrid.study.*"]),
    ("cli", ["paigrid.cli", "paigrid.cli.*"]),
]
#: modules that only read cubes, and the write side they must never reach, even indirectly
READERS = (
    "paigrid.cube",
    "paigrid.sources",
    "paigrid.ranking",
    "paigrid.query",
    "paigrid.describe",
    "paigrid.xarray_api",
    "paigrid.llm.query",
)
WRITE_SIDE = ("paigrid.store", "paigrid.evaluate", "paigrid.cuda_sweep", "paigrid.orchestration", "paigrid.distributed")


def module_files() -> dict[str, Path]:
    """Every module of the package -> its source file."""
    found = {}
    for package, folder in FOLDERS.items():
        for path in folder.rglob("*.py"):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join([package, *parts])] = path
    return found


MODULES = module_files()


def imports_of(name: str) -> set[str]:
    """The package modules that module ``name`` imports (anywhere in its body)."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            # "from pkg import sub" imports the submodule pkg.sub where one exists
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        else:
            continue
        out.update(t for t in targets if t in MODULES)
    out.discard(name)
    return out


GRAPH = {name: imports_of(name) for name in MODULES}


def layer_of(name: str) -> int:
    """Index of the layer a module belongs to (a test failure when it belongs to none)."""
    for index, (_, patterns) in enumerate(LAYERS):
        for pattern in patterns:
            if name == pattern or (pattern.endswith(".*") and name.startswith(pattern[:-1])):
                return index
    pytest.fail(f"module {name} is in no layer of tests/test_architecture.py: place it in one")


def test_every_module_has_a_layer():
    for name in MODULES:
        layer_of(name)


def test_no_module_imports_a_higher_layer():
    upward = [
        f"{name} ({LAYERS[layer_of(name)][0]}) imports {target} ({LAYERS[layer_of(target)][0]})"
        for name, targets in GRAPH.items()
        for target in targets
        if layer_of(target) > layer_of(name) and name != "paigrid"
    ]
    assert not upward, "\n".join(upward)


def test_package_init_imports_nothing_eagerly():
    """``paigrid/__init__.py`` resolves its public names lazily (module ``__getattr__``): importing
    ``paigrid.cube`` must not pull in the writer through the package."""
    tree = ast.parse(MODULES["paigrid"].read_text())
    eager = [
        node
        for node in tree.body
        if isinstance(node, (ast.Import, ast.ImportFrom))
        and any((getattr(node, "module", None) or a.name).startswith("paigrid") for a in node.names)
    ]
    assert not eager


def _cycle_from(start: str) -> list[str] | None:
    stack, on_path = [(start, iter(sorted(GRAPH[start])))], [start]
    while stack:
        node, children = stack[-1]
        child = next(children, None)
        if child is None:
            stack.pop()
            on_path.pop()
        elif child == start:
            return [*on_path, start]
        elif child not in on_path:
            stack.append((child, iter(sorted(GRAPH[child]))))
            on_path.append(child)
    return None


def test_no_import_circles():
    cycles = {" -> ".join(c) for c in map(_cycle_from, GRAPH) if c}
    assert not cycles, "\n".join(sorted(cycles))


def reachable(name: str) -> set[str]:
    """Modules that ``name`` imports, directly or through others."""
    seen, todo = set(), [name]
    while todo:
        for target in GRAPH[todo.pop()]:
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


@pytest.mark.parametrize("reader", READERS)
def test_readers_never_reach_the_write_side(reader):
    if reader not in MODULES:
        pytest.fail(f"{reader} is listed as a reader but does not exist")
    assert not reachable(reader) & set(WRITE_SIDE)


def test_kernels_import_only_numpy_and_numba():
    for name, path in MODULES.items():
        if not name.startswith("paigrid.kernels"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                roots = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                roots = [] if node.level else [(node.module or "").split(".")[0]]
            else:
                continue
            assert set(roots) <= {"numpy", "numba"}, f"{name} imports {roots}"


def test_the_checker_sees_a_circle_and_an_upward_import(monkeypatch):
    """The checks above can fail: made-up edges schema <-> cube form a circle (and cube -> schema
    alone is a fine downward import), and cube -> store makes a reader reach the writer."""
    monkeypatch.setitem(GRAPH, "paigrid.schema", GRAPH["paigrid.schema"] | {"paigrid.cube"})
    monkeypatch.setitem(GRAPH, "paigrid.cube", GRAPH["paigrid.cube"] | {"paigrid.schema"})
    assert _cycle_from("paigrid.schema")
    assert layer_of("paigrid.cube") > layer_of("paigrid.schema")
    monkeypatch.setitem(GRAPH, "paigrid.cube", GRAPH["paigrid.cube"] | {"paigrid.store"})
    assert "paigrid.store" in reachable("paigrid.cube")
