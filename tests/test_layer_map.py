"""The map of the package in docs/development.md and the list of commands in docs/commands.md
cannot go stale: the layer map is what ``tools/layer_map.py`` writes from the layers of
``tests/test_architecture.py`` (so it names every module, in its layer), and every command and
subcommand of ``paigrid --help`` is on the commands page."""

import importlib.util
import re
from pathlib import Path

import typer

from paigrid.cli import app

ROOT = Path(__file__).resolve().parent.parent


def _tool():
    spec = importlib.util.spec_from_file_location("layer_map", ROOT / "tools" / "layer_map.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def commands(group=None, prefix="paigrid") -> list[str]:
    """Every visible command of the CLI, with its group's names before it ("paigrid llm sweep")."""
    group = group if group is not None else typer.main.get_command(app)
    out = []
    for name, command in sorted(getattr(group, "commands", {}).items()):
        if getattr(command, "hidden", False):
            continue
        out.append(f"{prefix} {name}")
        out += commands(command, f"{prefix} {name}")
    return out


def unlisted_modules(page: str, modules) -> list[str]:
    """The modules that the page's table does not name."""
    return [name for name in modules if f"| `{name}` |" not in page]


def unlisted_commands(page: str, names: list[str]) -> list[str]:
    """The commands that the page does not name in code (`paigrid llm sweep ...`)."""
    return [name for name in names if not re.search(f"`{re.escape(name)}[ `]", page)]


def test_the_layer_map_is_up_to_date():
    tool = _tool()
    page = (ROOT / "docs" / "development.md").read_text()
    assert tool.page_with_map(page) == page, "docs/development.md's layer map is stale: run python tools/layer_map.py"


def test_the_development_page_lists_every_module():
    tool = _tool()
    arch = tool.architecture()
    page = (ROOT / "docs" / "development.md").read_text()
    assert len(arch.MODULES) > 50
    assert not unlisted_modules(page, arch.MODULES)
    assert unlisted_modules(page, [*arch.MODULES, "paigrid.not_listed"]) == ["paigrid.not_listed"]  # it can fail


def test_the_commands_page_lists_every_command():
    page = (ROOT / "docs" / "commands.md").read_text()
    names = commands()
    assert {"paigrid sweep", "paigrid query", "paigrid llm sweep", "paigrid trace import"} <= set(names)
    assert not unlisted_commands(page, names)
    assert unlisted_commands(page, ["paigrid nonesuch"]) == ["paigrid nonesuch"]  # it can fail
