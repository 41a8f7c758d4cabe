"""Shared test set-up: the fixtures that several test files use.

``tests/`` is importable (``cli_helpers``, ``kernel_tables``, ``cube_compare``, ...) through the
``pythonpath`` setting of pyproject.toml's [tool.pytest.ini_options], which also registers the
markers that the fast subset leaves out (docs/development.md).  numba caches the compiled kernels
as it does outside the tests (numba's user cache folder, or ``NUMBA_CACHE_DIR`` where it is set,
in a folder per fingerprint of the kernel modules: ``kernels.jit.cache_folder``), so a second run
does not compile them again and no process is answered from a stale cache.

The tests listed in ``tests/slow_tests.txt`` (written by ``tools/slow_tests.py`` from a timed run
of the whole suite) get the ``slow`` marker here, so the fast subset keeps the tests of under half
a second each.
"""

from pathlib import Path

import pytest

FORMAT1 = Path(__file__).parent / "data" / "format1"
SLOW_TESTS = Path(__file__).parent / "slow_tests.txt"


def _listed_slow() -> set[str]:
    """Node ids of ``tests/slow_tests.txt`` (comments and blank lines left out)."""
    lines = SLOW_TESTS.read_text(encoding="utf-8").splitlines()
    return {line.split("#")[0].strip() for line in lines if line.split("#")[0].strip()}


#: module fixtures whose set-up alone is many seconds: every test that uses one is slow (the list
#: above would only mark the first, and the set-up would move to the next)
SLOW_FIXTURES = {"study": "tests/test_report.py's 70-job study sweep and its report, about 10 s"}


def pytest_collection_modifyitems(config, items):
    """Mark as slow the tests that ``tests/slow_tests.txt`` lists (by their measured time) and
    those that use a fixture of ``SLOW_FIXTURES``."""
    listed = _listed_slow()
    for item in items:
        if item.nodeid in listed or SLOW_FIXTURES.keys() & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def catalogues():
    """The built-in catalogues (``Catalogues.load()``), loaded once a session; tests read them and
    never change them (a test that needs other catalogues loads its own)."""
    from paigrid.inputs.catalog import Catalogues

    return Catalogues.load()


@pytest.fixture(scope="session")
def small_cube(tmp_path_factory) -> Path:
    """A small finished cube in the current format, swept once a session: the sweep of the
    format-1 fixture (``tests/data/format1/spec.toml``, 4 workloads) with the model it was made with,
    pai-v1 (the default since is pai-v2).  Tests read it and never write to it."""
    from paigrid.inputs.spec import load_spec
    from paigrid.orchestration import run_sweep

    path = tmp_path_factory.mktemp("small-cube") / "cube.h5"
    spec = load_spec(FORMAT1 / "spec.toml")
    spec.options = spec.options.with_overrides({"model": "pai-v1"}, "test")
    run_sweep(spec, path, progress=False)
    return path
