"""The precompiled serial LLM kernels (``paigrid.precompiled``): bit-identical to numba's JIT
kernels they are compiled from, NaN positions and reason codes included, on searches and on
every layout of a space; a build that fails is recorded once and the JIT kernels serve.

Building the module compiles the kernels with numba's ahead-of-time compiler and a C compiler
(about half a minute on the 2-core box, once per kernel sources in the tests' cache folder), so
the tests that need it are marked slow.
"""

import dataclasses
import os
from pathlib import Path

import numpy as np
import pytest

from paigrid import precompiled
from paigrid.inputs.catalog import Catalogues
from paigrid.inputs.efficiency import defaults
from paigrid.kernels import llm as jit_llm
from paigrid.kernels import llm_columns as K
from paigrid.llm.evaluate import tables
from paigrid.llm.models import model
from paigrid.llm.parallelism import WIDE, Space, enumerate_layouts
from paigrid.llm.search import best_layout
from paigrid.llm.tables import Hardware, LlmOptions

CATS = Catalogues.load()
EFF = defaults()
OPTIONS = LlmOptions.defaults()
H100 = Hardware("H100-SXM5-80GB", "amp-bf16", 8, "nvswitch-nvlink4", "ib-ndr-400g", 1.0)
A100 = Hardware("A100-SXM4-80GB", "amp-bf16", 8, "nvswitch-nvlink3", "ib-hdr-200g", 1.0)
V100 = Hardware("V100-SXM2-16GB", "amp-bf16", 8, "nvlink2-hcm", "ib-edr-100g", 0.5)  # no bf16: invalid


@pytest.fixture(scope="module")
def module():
    """The module, built in the tests' kernel cache folder (the one ``test_startup`` uses)."""
    base = os.environ.get("NUMBA_CACHE_DIR", str(Path.home() / ".cache" / "paigrid-tests-numba"))
    saved = os.environ.get("NUMBA_CACHE_DIR")
    os.environ["NUMBA_CACHE_DIR"] = base
    try:
        built = precompiled.load(build=True)
        where = precompiled.folder()
    finally:
        if saved is None:
            del os.environ["NUMBA_CACHE_DIR"]
    assert built is not None, (where / precompiled.FAILED).read_text()
    return built


@pytest.mark.slow
@pytest.mark.parametrize(
    "name,n_gpu,designs",
    [("gpt3-175b", 1024, [A100]), ("nemo-gpt3-5b", 16, [H100, V100]), ("mixtral-8x7b", 64, [H100, A100])],
)
def test_the_precompiled_search_is_the_jit_search(module, monkeypatch, name, n_gpu, designs):
    """The same best layouts, result fields, reasons and counts, bit for bit, from the JIT kernels
    and the precompiled ones (the search of ``predict --layout best`` over the wide space)."""
    monkeypatch.setattr(precompiled, "load", lambda build=False: module)
    m = model(name)
    jit = best_layout(m, n_gpu, designs, CATS, EFF, OPTIONS, WIDE)
    pre = best_layout(m, n_gpu, designs, CATS, EFF, OPTIONS, WIDE, precompiled=True)
    assert pre.layouts == jit.layouts
    assert np.array_equal(pre.results, jit.results, equal_nan=True)
    assert np.array_equal(pre.reasons, jit.reasons)
    assert pre.counts == jit.counts and jit.counts["evaluated"] > 0
    assert any(lay is not None for lay in jit.layouts)


@pytest.mark.slow
def test_the_precompiled_step_model_is_the_jit_one_on_every_layout(module):
    """Every layout of a space (valid and not) on valid and invalid designs: the same results,
    NaN where the JIT kernel has NaN, the same reason codes; and the memory of each layout."""
    m = model("llama3-70b")
    layouts = enumerate_layouts(m, 64, dataclasses.replace(Space(), zero=(0, 1, 3)))
    arrays = tables(m, layouts, [H100, V100, A100], CATS, EFF, OPTIONS)
    jit = np.empty((arrays[0].shape[0] * arrays[1].shape[0], K.N_RESULT_FIELDS))
    pre = np.empty_like(jit)
    jit_llm.evaluate_llm_serial(*arrays, jit)
    module.evaluate_llm_serial(*arrays, pre)
    assert np.isnan(jit).any() and (jit[:, K.R_REASON] == K.REASON_VALID).any()
    assert np.array_equal(pre, jit, equal_nan=True)
    for row in arrays[0][:50]:
        assert module.memory_bytes(row, arrays[2], arrays[4], 8.0) == jit_llm.memory_bytes(
            row, arrays[2], arrays[4], 8.0
        )


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(3))
def test_the_precompiled_scan_selection_is_the_jit_one(module, seed):
    """``top_configurations`` of the module against numba's JIT kernel on random jobs with ties,
    NaN cells and (gpu, precision) that do not fit, by time and by cost, every k."""
    from paigrid.kernels.scan import top_configurations

    rng = np.random.default_rng(seed)
    shape = (5, 3, 4, 3, 4, 2)
    step = np.round(rng.random(shape) * 3 + 0.5, 1).astype(np.float32)
    step[rng.random(shape) < 0.4] = np.nan
    fits = (rng.random((3, 2)) < 0.8).astype(np.uint8)
    factor = rng.choice([1.0, 2.0, 4.0], size=(3, 4))
    sel = [np.arange(n, dtype=np.int64) for n in shape]
    skip_i, skip_w = np.array([1, 1, 0, 1, 0], np.bool_), np.array([1, 1, 1, 0, 0], np.bool_)
    for divide in (True, False):
        for k in (1, 3, 40, step.size):
            got = np.empty(k, np.int64), np.empty(k)
            want = np.empty(k, np.int64), np.empty(k)
            n = module.top_configurations(step, fits, *sel, skip_i, skip_w, factor, divide, k, *got)
            assert n == top_configurations(step, fits, *sel, skip_i, skip_w, factor, divide, k, *want)
            assert np.array_equal(got[0][:n], want[0][:n]) and np.array_equal(got[1][:n], want[1][:n], equal_nan=True)


def test_a_failed_build_is_recorded_once_and_nothing_is_loaded(monkeypatch, tmp_path):
    """Where the module cannot be built, ``load`` returns None (the JIT kernels serve), writes the
    reason beside where the module would be, and does not try again in a later command."""
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(precompiled.ENABLE_VARIABLE, raising=False)
    monkeypatch.setattr(precompiled, "_loaded", {})
    monkeypatch.setattr(precompiled, "shipped_folder", lambda: tmp_path / "no-install")  # none shipped
    tries = []

    def failing(where):
        tries.append(where)
        raise RuntimeError("no C compiler")

    monkeypatch.setattr(precompiled, "_build", failing)
    assert precompiled.load() is None and tries == []  # without build: nothing tried
    assert precompiled.load(build=True) is None and len(tries) == 1
    where = precompiled.folder()
    assert where.is_relative_to(tmp_path)
    assert (where / precompiled.FAILED).read_text() == "RuntimeError: no C compiler\n"
    assert precompiled.load(build=True) is None and len(tries) == 1  # recorded: not retried


def test_the_module_is_off_without_a_cache_folder_or_when_disabled(monkeypatch, tmp_path):
    """No ``NUMBA_CACHE_DIR`` (a library import: numba's own choice of folder), or
    ``PAIGRID_PRECOMPILED=0``: no folder, nothing built nor loaded."""
    monkeypatch.setattr(precompiled, "_build", lambda where: pytest.fail("built"))
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    assert precompiled.folder() is None and precompiled.load(build=True) is None
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv(precompiled.ENABLE_VARIABLE, "0")
    assert precompiled.folder() is None and precompiled.load(build=True) is None


def test_the_folder_is_keyed_by_the_kernel_sources_and_the_toolchain(monkeypatch, tmp_path):
    """The module lives beside numba's cache of the same kernel sources (their fingerprint), in a
    folder named by Python, the platform, numpy and numba, so no other build answers."""
    import platform
    import sys

    import numba

    from paigrid.kernels.fingerprint import source_fingerprint

    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(precompiled.ENABLE_VARIABLE, raising=False)
    where = precompiled.folder()
    assert where.parent == tmp_path / f"paigrid-kernels-{source_fingerprint()}"
    for part in (sys.implementation.cache_tag, platform.machine(), np.__version__, numba.__version__):
        assert part in where.name


def test_a_module_that_does_not_load_is_set_aside(monkeypatch, tmp_path):
    """A file in the module's place that this Python cannot load (here not a shared object at
    all): ``load`` returns None, removes it, records why, and builds nothing in its place."""
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(precompiled.ENABLE_VARIABLE, raising=False)
    monkeypatch.setattr(precompiled, "_loaded", {})
    monkeypatch.setattr(precompiled, "shipped_folder", lambda: tmp_path / "no-install")  # none shipped
    monkeypatch.setattr(precompiled, "_build", lambda where: pytest.fail("built"))
    where = precompiled.folder()
    where.mkdir(parents=True)
    broken = precompiled._path(where)
    broken.write_bytes(b"not an extension module")
    assert precompiled.load(build=True) is None
    assert not broken.exists()
    assert (where / precompiled.FAILED).read_text().startswith("ImportError")
    assert precompiled.status().startswith("failed: ImportError")


@pytest.mark.slow  # needs the built module (the fixture's build, about half a minute once)
def test_a_shipped_module_is_loaded_and_never_written(module, monkeypatch, tmp_path):
    """The module an install ships (``shipped_folder``, setup.py's prebuild) is loaded without
    building one in the command's cache; one that does not load is left where it is (the
    installed tree is never written) and the command's own is built instead."""
    import shutil

    user, shipped = tmp_path / "user", tmp_path / "site" / "shipped"
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(user))
    monkeypatch.delenv(precompiled.ENABLE_VARIABLE, raising=False)
    monkeypatch.setattr(precompiled, "_loaded", {})
    monkeypatch.setattr(precompiled, "shipped_folder", lambda: shipped)
    shipped.mkdir(parents=True)
    shutil.copy2(module.__file__, precompiled._path(shipped))
    monkeypatch.setattr(precompiled, "_build", lambda where: pytest.fail("built"))
    assert precompiled.status().startswith("shipped: ")
    loaded = precompiled.load(build=True)
    assert loaded is not None and Path(loaded.__file__) == precompiled._path(shipped)
    assert all(hasattr(loaded, name) for name in precompiled.EXPORTS)
    assert not user.exists()  # nothing built, nothing recorded

    # another install's file (a new path: Python keeps an extension module loaded from a path)
    monkeypatch.setattr(precompiled, "_loaded", {})
    shipped = tmp_path / "other-site" / "shipped"
    shipped.mkdir(parents=True)
    precompiled._path(shipped).write_bytes(b"not an extension module")
    builds = []

    def build(where):  # the command's own module: a copy of the fixture's
        builds.append(where)
        where.mkdir(parents=True)
        shutil.copy2(module.__file__, precompiled._path(where))

    monkeypatch.setattr(precompiled, "_build", build)
    assert precompiled.load(build=False) is None and builds == []
    assert precompiled.load(build=True) is not None and builds == [precompiled.folder()]
    assert precompiled._path(shipped).read_bytes() == b"not an extension module"
