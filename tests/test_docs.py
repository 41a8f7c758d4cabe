"""The documentation holds together: the navigation and the pages match, links and the repository
paths that pages name resolve, and the generated pages are what their scripts write now.

The full check, `mkdocs build --strict` (every link and anchor of every page), is in .ci/run; these
are the cheap checks that need no mkdocs.
"""

from __future__ import annotations

import importlib.util
import re
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
MKDOCS = ROOT / "mkdocs.yml"
#: top-level folders of the repository: a `path` in a page that starts with one must exist
REPO_FOLDERS = ("engine", "kernels", "datasets", "bench", "tools", "tests", "docs", ".ci")


def nav_pages() -> list[str]:
    """The pages named in mkdocs.yml's nav (every `*.md` after `nav:`)."""
    text = MKDOCS.read_text(encoding="utf-8")
    nav = text[text.index("\nnav:") :]
    return re.findall(r"[\w./-]+\.md\b", nav)


def slug(heading: str) -> str:
    """Python-Markdown's toc slug of a heading (what mkdocs makes its anchor)."""
    text = re.sub(r"`|\*|\[|\]\([^)]*\)", "", heading)
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(page: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.MULTILINE | re.DOTALL)
    return {slug(m) for m in re.findall(r"^#+ (.+)$", text, flags=re.MULTILINE)}


def links(page: Path) -> list[str]:
    """Markdown link targets of a page, outside code blocks and code spans."""
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.MULTILINE | re.DOTALL)
    text = re.sub(r"`[^`\n]*`", "", text)
    return re.findall(r"\]\(([^)\s]+)\)", text)


def test_every_nav_page_exists():
    pages = nav_pages()
    assert "index.md" in pages
    missing = [p for p in pages if not (DOCS / p).is_file()]
    assert not missing, f"pages in mkdocs.yml's nav that docs/ lacks: {missing}"


def test_every_page_is_in_the_nav():
    pages = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    left_out = sorted(pages - set(nav_pages()))
    assert not left_out, f"pages of docs/ missing from mkdocs.yml's nav: {left_out}"


@pytest.mark.parametrize("page", [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))], ids=lambda p: p.name)
def test_links_resolve(page: Path):
    """Relative links lead to a file of the repository, and their anchors to a heading of it."""
    broken = []
    for target in links(page):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists() or (anchor and file.suffix == ".md" and anchor not in anchors(file)):
            broken.append(target)
    assert not broken, f"{page.relative_to(ROOT)}: links that lead nowhere: {broken}"


@pytest.mark.parametrize("page", [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))], ids=lambda p: p.name)
def test_repository_paths_named_exist(page: Path):
    """A `path` into the repository's folders names a file that is there, and nothing outside it is cited."""
    text = page.read_text(encoding="utf-8")
    outside = ("DESIGN" + ".md", "../" + "shared", "shared" + "/")  # spelled apart: this file cites none
    assert not any(name in text for name in outside), f"{page.relative_to(ROOT)} cites a file outside the repository"
    missing = []
    for span in re.findall(r"`([^`\s]+)`", text):
        path = span.rstrip("/").split("#")[0]
        in_repo = path.split("/")[0] in REPO_FOLDERS and "/" in path and "*" not in path
        if in_repo and not (ROOT / path).exists():
            missing.append(span)
    assert not missing, f"{page.relative_to(ROOT)} names repository paths that do not exist: {missing}"


def _module(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem + "_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cli_reference_is_up_to_date():
    cli_reference = _module(ROOT / "tools" / "cli_reference.py")
    assert cli_reference.render() == (DOCS / "cli.md").read_text(encoding="utf-8"), (
        "docs/cli.md is not what the command-line app says: run python tools/cli_reference.py"
    )


def test_cube_variable_table_is_up_to_date():
    cube_reference = _module(ROOT / "tools" / "cube_reference.py")
    text = (DOCS / "cube.md").read_text(encoding="utf-8")
    assert cube_reference.render(text) == text, (
        "docs/cube.md's variable table is not what paigrid.schema declares: run python tools/cube_reference.py"
    )
    for name in ("step_time", "throughput", "samples_per_job_step", "best_index", "prediction_band"):
        assert f"| `{name}` |" in text


@pytest.mark.slow
def test_accuracy_page_is_up_to_date():
    accuracy = _module(ROOT / "bench" / "accuracy.py")
    assert accuracy.render_page() == (DOCS / "accuracy.md").read_text(encoding="utf-8"), (
        "docs/accuracy.md is not what bench/accuracy.py measures now: run python bench/accuracy.py"
    )
