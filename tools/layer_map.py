"""Write the layer map of docs/development.md from the layers that tests/test_architecture.py
checks on the import graph: every module of the package, in its layer (lowest first), with its
folder path and the first sentence of its docstring.

    python tools/layer_map.py           # rewrite the map in docs/development.md
    python tools/layer_map.py --check   # exit 1 when the page's map is not what this writes

The map sits between two marker lines of the page; everything else on the page is left as it
is.  ``tests/test_layer_map.py`` checks that the page is up to date.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "development.md"
BEGIN = "<!-- layer map: written by tools/layer_map.py from tests/test_architecture.py's LAYERS; do not edit -->"
END = "<!-- end of the layer map -->"
LONGEST = 160  # characters of a module's summary in the table


def architecture():
    """tests/test_architecture.py as a module (its ``LAYERS``, ``MODULES`` and ``layer_of``)."""
    spec = importlib.util.spec_from_file_location("test_architecture", ROOT / "tests" / "test_architecture.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def summary(path: Path) -> str:
    """The first sentence of a module's docstring, on one line ("" without a docstring)."""
    doc = ast.get_docstring(ast.parse(path.read_text(), str(path))) or ""
    first = " ".join(doc.split("\n\n")[0].split())
    match = re.match(r"(.+?\.)(\s|$)", first)
    text = match.group(1) if match else first
    if len(text) > LONGEST:  # a long first sentence: cut at a word, marked as cut
        text = text[: text.rfind(" ", 0, LONGEST - 4)] + " ..."
    return text.replace("|", "\\|")


def layer_map() -> str:
    """The map as markdown: one table, a row per module, grouped by layer, lowest first."""
    arch = architecture()
    by_layer: dict[int, list[str]] = {}
    for name in arch.MODULES:
        by_layer.setdefault(arch.layer_of(name), []).append(name)
    lines = [
        BEGIN,
        "",
        "| layer | module | file | what it holds |",
        "|---|---|---|---|",
    ]
    for index, (layer, _) in enumerate(arch.LAYERS):
        for k, name in enumerate(sorted(by_layer.get(index, []))):
            path = arch.MODULES[name].relative_to(ROOT).as_posix()
            lines.append(f"| {layer if k == 0 else ''} | `{name}` | `{path}` | {summary(arch.MODULES[name])} |")
    lines += ["", END]
    return "\n".join(lines)


def page_with_map(text: str) -> str:
    """The page ``text`` with its map (between the markers) replaced by ``layer_map()``."""
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{PAGE} lacks the layer map's marker lines; put {BEGIN!r} and {END!r} where it goes.")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return head + layer_map() + tail


def main(argv: list[str] | None = None) -> int:
    """Rewrite the page, or with ``--check`` say whether it is up to date."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the page is out of date")
    args = parser.parse_args(argv)
    text = PAGE.read_text()
    new = page_with_map(text)
    if args.check:
        if new != text:
            print(f"{PAGE.relative_to(ROOT)} is out of date: run python tools/layer_map.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(new)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
