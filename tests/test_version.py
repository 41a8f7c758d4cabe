"""One version: ``paigrid.__version__`` is what the package metadata, ``paigrid --version`` and the
``paigrid_version`` attribute of a cube written now say, and the changelog has its section."""

from importlib.metadata import version
from pathlib import Path

import h5py

import paigrid
from cli_helpers import run

ROOT = Path(__file__).resolve().parent.parent


def test_the_metadata_reads_the_one_version():
    assert version("paigrid") == paigrid.__version__, (
        "the installed metadata is of another version: reinstall (pip install -e .) after changing __version__"
    )


def test_version_option_prints_it():
    result = run("--version")
    assert result.exit_code == 0, result.output
    assert result.output == f"paigrid {paigrid.__version__}\n"


def test_a_cube_records_the_version(small_cube):
    with h5py.File(small_cube, "r") as f:
        assert f.attrs["paigrid_version"] == paigrid.__version__


def test_the_changelog_has_a_section_for_the_version():
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert f"## Unreleased ({paigrid.__version__})" in text or f"\n## {paigrid.__version__} (" in text
