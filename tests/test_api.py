"""The Python API: paigrid.open_dataset (lazy, every cube format presented alike), the
Dataset.paigrid accessor (the same answers as paigrid.query), paigrid.sweep, the lazy top-level
names, and the example of docs/api.md, executed."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
import xarray as xr

import paigrid
from cube_compare import assert_within_one_ulp
from paigrid.cube import open_cube
from paigrid.errors import PaigridError
from paigrid.inputs.spec import load_spec
from paigrid.orchestration import run_sweep
from paigrid.query import best_configurations, parse_where
from paigrid.schema import DERIVED_VARIABLES, FACTOR_VARIABLES, derived_values, factor_for_cube, partial_path
from paigrid.xarray_api import VALID_ATTRS, present

ROOT = Path(__file__).resolve().parent.parent
FORMAT1 = ROOT / "tests" / "data" / "format1"
LABELS = ("arch", "gpu", "n_gpu", "intra", "network", "precision")


@pytest.fixture(scope="module")
def cube_path(small_cube):
    """The format-1 fixture's spec, swept now (the current format) with the model it was made with,
    pai-v1 (the default since is pai-v2): conftest's ``small_cube``."""
    return small_cube


@pytest.fixture(scope="module")
def ds(cube_path):
    with paigrid.open_dataset(cube_path) as data:
        yield data


# --- open_dataset ------------------------------------------------------------------------------


def test_open_dataset_is_lazy_and_reads_the_file_values(cube_path):
    with paigrid.open_dataset(cube_path) as data:
        assert isinstance(data, xr.Dataset)
        assert not data.step_time.variable._in_memory  # nothing read until indexed
        assert not data.valid.variable._in_memory
        with h5py.File(cube_path, "r") as f:
            np.testing.assert_array_equal(data.step_time.isel(job=2).values, f["step_time"][2])
            np.testing.assert_array_equal(
                data.valid.values, f["valid"][()] if "valid" in f else (f["invalid_reason"][()] == 0).astype(np.uint8)
            )
        for name, var in data.variables.items():
            assert "units" in var.attrs, name


def _refusal(function, path) -> str:
    with pytest.raises(PaigridError) as caught:
        function(path)
    return str(caught.value)


def test_open_dataset_refuses_with_the_sentences_of_open_cube(tmp_path):
    text = tmp_path / "notes.h5"
    text.write_text("not HDF5")
    foreign = tmp_path / "foreign.h5"
    with h5py.File(foreign, "w") as f:
        f["x"] = np.arange(3)
    unfinished = tmp_path / "unfinished.h5"

    def stop(written):
        raise RuntimeError("stop after the first block")

    with pytest.raises(RuntimeError):
        run_sweep(load_spec(FORMAT1 / "spec.toml"), unfinished, progress=False, on_block=stop)
    assert partial_path(unfinished).exists()
    expected = {
        tmp_path / "missing.h5": "there is no cube",
        text: "not a readable HDF5 cube",
        foreign: "not a paigrid cube",
        unfinished: "unfinished",
    }
    for path, fragment in expected.items():
        sentence = _refusal(paigrid.open_dataset, path)
        assert sentence == _refusal(open_cube, path)
        assert fragment in sentence


def test_a_cube_written_now_reads_as_the_format1_fixture(cube_path):
    """Variable for variable, the numbers of paigrid 0.1.0 (format 1) are those of a cube written
    now, both read through open_dataset; the stored form of validity may differ by format (valid
    in format 1, invalid_reason from format 2), the presented ``valid`` may not; format 3 adds
    prediction_band; format 4 stores the factors of throughput, cost and energy instead, and they
    are presented derived from step_time, within one float32 unit in the last place of format 1's
    and exactly as the old step times and the new factors give them."""
    with paigrid.open_dataset(FORMAT1 / "cube.h5") as old, paigrid.open_dataset(cube_path) as new:
        assert "invalid_reason" not in old.variables
        assert set(new.variables) - {"invalid_reason", "prediction_band", *FACTOR_VARIABLES} == set(old.variables)
        for name, want in old.variables.items():
            got = new.variables[name]
            assert got.dims == want.dims and got.dtype == want.dtype, name
            if name in DERIVED_VARIABLES:
                assert_within_one_ulp(got.values, want.values, name)
                factor = DERIVED_VARIABLES[name][0]
                np.testing.assert_array_equal(
                    got.values,
                    derived_values(name, old.step_time.values, factor_for_cube(factor, new[factor].values)),
                    err_msg=name,
                )
            elif want.dtype.kind == "f":
                np.testing.assert_array_equal(got.values, want.values, err_msg=name)
            else:
                assert np.array_equal(got.values, want.values), name
            for key in ("units", "flag_values", "flag_meanings"):
                assert np.array_equal(np.asarray(got.attrs.get(key)), np.asarray(want.attrs.get(key))), (name, key)
        for data in (old, new):
            assert data.valid.dtype == np.uint8
            assert data.valid.attrs.keys() == VALID_ATTRS.keys()
            assert all(np.array_equal(data.valid.attrs[k], v) for k, v in VALID_ATTRS.items())


def test_valid_is_derived_lazily_from_the_reason_code(tmp_path):
    """A format-2 layout (invalid_reason, no valid) presents valid = (invalid_reason == 0), read
    for the indexed part only, with the attributes of format 1's valid."""
    with paigrid.open_dataset(FORMAT1 / "cube.h5") as old:
        reference = old.load()
        codes = (np.arange(old.valid.size) % 5 + 1).reshape(old.valid.shape)  # every nonzero code is invalid
        reason = xr.where(old.valid == 1, 0, codes).astype(np.uint8)
        reason.attrs.update(units="1", flag_values=np.arange(6, dtype=np.uint8), flag_meanings="valid a b c d e")
        layout2 = old.drop_vars("valid").assign(invalid_reason=reason)
        layout2.to_netcdf(tmp_path / "layout2.h5", engine="h5netcdf")
    with xr.open_dataset(tmp_path / "layout2.h5", engine="h5netcdf") as data:
        assert "valid" not in data.variables
        present(data)
        assert not data.valid.variable._in_memory
        assert data.valid.dtype == np.uint8 and data.valid.dims == reference.valid.dims
        assert all(np.array_equal(data.valid.attrs[k], v) for k, v in VALID_ATTRS.items())
        part = dict(job=1, arch=[0, 2, 4], gpu=slice(0, 2), network=[2, 0])
        np.testing.assert_array_equal(data.valid.isel(part).values, reference.valid.isel(part).values)
        np.testing.assert_array_equal(data.valid.values, reference.valid.values)
        assert (reference.valid == 0).any() and (reference.valid == 1).any()
        broken = data.paigrid.breakdown(job="gpt2-xl", gpu="H100", n_gpu=64, precision="amp-fp16")
        np.testing.assert_array_equal(
            broken.step_time.values,
            reference.step_time.sel(job="gpt2-xl", gpu="H100-SXM5-80GB", n_gpu=64, precision="amp-fp16").values,
        )
    pytest.importorskip("dask")
    with xr.open_dataset(tmp_path / "layout2.h5", engine="h5netcdf", chunks={}) as data:
        present(data)
        assert data.valid.chunks is not None and data.valid.dtype == np.uint8
        np.testing.assert_array_equal(data.valid.values, reference.valid.values)


# --- the accessor against paigrid.query ----------------------------------------------------------


def _query(cube_path, by, fixed, pareto=False):
    """What paigrid.query answers for ``fixed`` (label -> value or list) on the file."""
    jobs = fixed.get("job")
    items = [f"{dim}={','.join(map(str, v)) if isinstance(v, list) else v}" for dim, v in fixed.items() if dim != "job"]
    cube = open_cube(cube_path)
    try:
        return best_configurations(
            cube, by, parse_where(items, cube), [jobs] if isinstance(jobs, str) else jobs, pareto=pareto
        )
    finally:
        cube.close()


def _same(answer, rows):
    """An accessor answer holds the query's rows, in order."""
    assert answer.sizes[answer.step_time.dims[0]] == len(rows)
    for k, row in enumerate(rows):
        for name in ("model", *LABELS, "bottleneck"):
            value = answer[name].values[k]
            assert value == (row[name] if row[name] is not None else (0 if name == "n_gpu" else "")), (k, name)
        for name in ("step_time", "throughput", "throughput_tokens", "cost", "speedup"):
            np.testing.assert_equal(float(answer[name].values[k]), row[name], err_msg=name)


FILTERS = [
    {},
    {"gpu": "V100"},
    {"n_gpu": [8, 64]},
    {"gpu": "v100-sxm2-16gb", "precision": "fp32"},
    {"network": "eth-25g"},
    {"arch": "ps-worker", "n_gpu": 64},
    {"job": ["gpt2-xl", "resnet50"], "gpu": ["H100", "V100"], "intra": ["pcie3", "nvswitch-nvlink3"]},
]


@pytest.mark.parametrize("by", ["time", "cost"])
@pytest.mark.parametrize("fixed", FILTERS, ids=lambda f: json.dumps(f))
def test_best_equals_the_query(cube_path, ds, by, fixed):
    rows = _query(cube_path, by, fixed)
    answer = ds.paigrid.best(by, **fixed)
    assert list(answer.job.values) == [r["job"] for r in rows]
    _same(answer, rows)
    assert answer.attrs["criterion"] == by
    for name, var in {**answer.variables}.items():
        assert "units" in var.attrs, name


def test_best_marks_a_job_without_a_feasible_configuration(ds):
    answer = ds.paigrid.best(gpu="V100", n_gpu=1, precision="fp32")
    none = answer.sel(job="gpt2-xl")  # 1.5 B parameters do not fit one 16 GB V100
    assert none.arch.item() == "" and none.n_gpu.item() == 0 and np.isnan(none.step_time.item())
    assert answer.sel(job="resnet50").arch.item() == "1w1g"


def test_best_works_on_a_dataset_in_memory(ds, cube_path):
    loaded = ds.load().copy()
    for by in ("time", "cost"):
        _same(loaded.paigrid.best(by, n_gpu=8), _query(cube_path, by, {"n_gpu": 8}))


@pytest.mark.parametrize(
    "fixed", [{}, {"network": "eth-25g"}, {"gpu": ["V100", "H100"], "precision": "fp32"}], ids=lambda f: json.dumps(f)
)
def test_pareto_equals_the_query_fastest_first(cube_path, ds, fixed):
    sizes = []
    for job in ds.job.values:
        rows = [r for r in _query(cube_path, "time", {**fixed, "job": job}, pareto=True) if r["arch"] is not None]
        front = ds.paigrid.pareto(job, **fixed)
        assert front.job.item() == job
        _same(front, rows)
        assert np.all(np.diff(front.throughput.values) < 0) and np.all(np.diff(front.cost.values) < 0)
        sizes.append(front.sizes["point"])
    assert max(sizes) > 1


def test_pareto_of_a_job_that_fits_nowhere_is_empty(ds):
    front = ds.paigrid.pareto("gpt2-xl", gpu="V100", n_gpu=1, precision="fp32")
    assert front.sizes["point"] == 0 and front.step_time.attrs["units"] == "s"


def test_breakdown_broadcasts_the_components(ds):
    parts = ds.paigrid.breakdown(job="resnet50", gpu="V100", n_gpu=[8, 64], precision="fp32")
    assert parts.step_time.dims == ("arch", "n_gpu", "intra", "network")
    assert list(parts.n_gpu.values) == [8, 64]
    sel = ds.sel(job="resnet50", gpu="V100-SXM2-16GB", n_gpu=[8, 64], precision="fp32")
    ok = sel.valid == 1
    np.testing.assert_array_equal(parts.step_time.values, sel.step_time.values)
    np.testing.assert_array_equal(parts.bottleneck.values, sel.bottleneck.values)
    np.testing.assert_array_equal(parts.t_comm.values, sel.t_comm.where(ok).values)
    for name in ("t_data", "t_flop", "t_mem"):
        want = xr.broadcast(sel[name], sel.step_time)[0].transpose(*parts.step_time.dims).where(ok)
        np.testing.assert_array_equal(parts[name].values, want.values, err_msg=name)
    total = parts.t_data + parts.t_flop + parts.t_mem + parts.t_comm
    np.testing.assert_allclose(total.values, parts.step_time.values, rtol=1e-5)
    assert np.isnan(parts.t_flop.sel(arch="1w1g")).all() and ok.any()
    for name, var in parts.data_vars.items():
        assert var.attrs["units"] == ("1" if name == "bottleneck" else "s"), name
    assert parts.bottleneck.attrs["flag_meanings"].split()[0] == "input_io"


@pytest.mark.parametrize(
    "call, fragment",
    [
        (lambda a: a.best("speed"), "ranks by 'time' or 'cost'"),
        (lambda a: a.best(colour="red"), "filters by job, arch"),
        (lambda a: a.best(gpu="Z80"), "gpu=Z80 is not in the cube"),
        (lambda a: a.best(n_gpu=8.5), "not a whole number"),
        (lambda a: a.best(n_gpu=[]), "lists no values"),
        (lambda a: a.best(job="resnet5"), "did you mean resnet50"),
        (lambda a: a.pareto("resnet5"), "did you mean resnet50"),
        (lambda a: a.pareto(["resnet50"]), "one job name"),
        (lambda a: a.pareto("resnet50", colour="red"), "filters by arch, gpu"),
        (lambda a: a.breakdown(colour="red"), "selects by job, arch"),
        (lambda a: a.breakdown(network="eth-1g"), "network=eth-1g is not in the cube"),
    ],
)
def test_bad_arguments_are_one_sentence(ds, call, fragment):
    with pytest.raises(PaigridError, match=re.escape(fragment)):
        call(ds.paigrid)


def test_the_accessor_refuses_a_cut_its_reductions_cannot_answer(ds, cube_path):
    with pytest.raises(PaigridError, match="keeps 2 of its 3; call it on the whole dataset with network="):
        ds.isel(network=[0, 2]).paigrid.best()
    with pytest.raises(PaigridError, match="no precision dimension"):
        ds.sel(precision="fp32").paigrid.best()
    cut = ds.sel(job=["gpt2-xl", "resnet50"], gpu=["H100-SXM5-80GB"], n_gpu=[8, 64])  # the reductions are cut alike
    _same(
        cut.paigrid.best("cost"),
        _query(cube_path, "cost", {"job": ["gpt2-xl", "resnet50"], "gpu": "H100", "n_gpu": [8, 64]}),
    )


def test_the_accessor_refuses_a_dataset_that_is_no_finished_cube(ds):
    with pytest.raises(PaigridError, match="is an xarray Dataset but not a paigrid cube"):
        xr.Dataset({"x": ("a", [1, 2])}).paigrid.best()
    unfinished = ds.copy()
    unfinished.attrs["complete"] = 0
    with pytest.raises(PaigridError, match="incomplete"):
        unfinished.paigrid.best()


# --- paigrid.sweep -------------------------------------------------------------------------------

SMALL = {
    "workloads": ["resnet50", "transformer"],
    "grid": {"gpu": ["V100", "H100"], "n_gpu": [1, 8], "network": ["none", "eth-25g"], "precision": ["fp32"]},
}


def _same_values(a: xr.Dataset, b: xr.Dataset):
    assert set(a.variables) == set(b.variables)
    for name in a.variables:
        assert np.array_equal(a[name].values, b[name].values, equal_nan=a[name].dtype.kind == "f"), name


def test_sweep_in_memory_removes_its_file_and_equals_a_written_cube(tmp_path, monkeypatch):
    import tempfile

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    data = paigrid.sweep(SMALL)
    assert list(scratch.iterdir()) == []
    assert all(var._in_memory for var in data.variables.values())
    assert "source" not in data.encoding
    (tmp_path / "small.toml").write_text(
        'workloads = ["resnet50", "transformer"]\n[grid]\ngpu = ["V100", "H100"]\nn_gpu = [1, 8]\n'
        'network = ["none", "eth-25g"]\nprecision = ["fp32"]\n'
    )
    written = paigrid.sweep(tmp_path / "small.toml", out=tmp_path / "small.h5")
    try:
        assert (tmp_path / "small.h5").exists() and not written.step_time.variable._in_memory
        _same_values(data, written)
        for by in ("time", "cost"):  # answers from memory and from the file agree
            xr.testing.assert_identical(data.paigrid.best(by), written.paigrid.best(by))
    finally:
        written.close()


def test_sweep_takes_a_spec_object_without_changing_it(tmp_path):
    from paigrid.inputs.spec import SweepSpec, spec_from_dict

    spec = spec_from_dict(SMALL, "test")
    before = json.dumps(spec.to_toml_dict(), sort_keys=True)
    with paigrid.sweep(spec, out=tmp_path / "a.h5", compression="gzip") as data:
        assert data.attrs["compression"] == "gzip" and data.sizes["job"] == 2
    assert json.dumps(spec.to_toml_dict(), sort_keys=True) == before
    assert isinstance(spec, SweepSpec)


def test_reduce_only_sweep_answers_best_but_has_no_breakdown():
    data = paigrid.sweep(SMALL, reduce_only=True)
    assert "step_time" not in data.variables and "best_step_time" in data.variables
    assert data.paigrid.best(gpu="V100").sizes["job"] == 2
    with pytest.raises(PaigridError, match="reduce-only"):
        data.paigrid.breakdown(job="resnet50")
    with pytest.raises(PaigridError, match="reduce-only"):
        data.paigrid.best(network="eth-25g")


@pytest.mark.parametrize(
    "call, fragment",
    [
        (lambda: paigrid.sweep(42), "spec must be a SweepSpec"),
        (lambda: paigrid.sweep(SMALL, workres=2), "not 'workres'"),
        (lambda: paigrid.sweep(SMALL, resume=True), "resume needs the out file"),
        (lambda: paigrid.sweep({"grid": {"gpu": ["Z80"]}}), "Z80"),
        (lambda: paigrid.sweep({"colour": 1}), "unknown key"),
    ],
)
def test_sweep_refuses_bad_input_in_one_sentence(call, fragment):
    with pytest.raises(PaigridError, match=re.escape(fragment)):
        call()


# --- the package ---------------------------------------------------------------------------------

IMPORTS = """
import json, os, sys
import {modules}
heavy = ("paigrid.store", "paigrid.evaluate", "paigrid.orchestration", "numba", "xarray")
report = {{"before": [m for m in heavy if m in sys.modules], "cache": os.environ.get("NUMBA_CACHE_DIR")}}
import paigrid
ds = paigrid.open_dataset(sys.argv[1])
report["best"] = list(ds.paigrid.best(gpu="V100").arch.values)
report["after"] = [m for m in heavy if m in sys.modules]
print(json.dumps(report))
"""


@pytest.mark.parametrize("modules", ["paigrid", "paigrid.cube", "paigrid.cube, paigrid.query"])
def test_importing_loads_neither_the_writer_nor_numba(modules):
    """In a fresh interpreter: importing the package or the reader loads no writer, driver,
    numba or xarray and sets no environment; reading a cube through the API loads xarray only."""
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    done = subprocess.run(
        [sys.executable, "-c", IMPORTS.format(modules=modules), str(FORMAT1 / "cube.h5")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["before"] == [] and report["cache"] is None
    assert report["after"] == ["xarray"]
    assert len(report["best"]) == 4


def test_public_names_are_lazy_and_listed():
    assert isinstance(paigrid.__version__, str)
    assert {"open_dataset", "sweep", "__version__"} <= set(paigrid.__all__) <= set(dir(paigrid))
    from paigrid.orchestration import sweep
    from paigrid.xarray_api import open_dataset

    assert paigrid.open_dataset is open_dataset and paigrid.sweep is sweep
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        _ = paigrid.nothing


def test_the_command_sets_a_default_numba_cache(monkeypatch, tmp_path):
    from paigrid import cli

    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(sys, "argv", ["paigrid", "--help"])
    # main() is the console process's entry point: it allows a hard exit (os._exit) on a failed
    # HDF5 write; undo that after this test, or a later in-process command would end pytest itself
    monkeypatch.setattr("paigrid.cli.arguments.HARD_EXIT_ALLOWED", False)
    with pytest.raises(SystemExit):
        cli.main()
    assert os.environ["NUMBA_CACHE_DIR"] == str(tmp_path / "paigrid" / "numba")
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "mine"))
    with pytest.raises(SystemExit):
        cli.main()
    assert os.environ["NUMBA_CACHE_DIR"] == str(tmp_path / "mine")


# --- docs/api.md ---------------------------------------------------------------------------------


def test_the_api_documentation_runs(tmp_path, monkeypatch, capsys):
    """Every python block of docs/api.md, in order, in a fresh directory: the example cannot go
    stale."""
    text = (ROOT / "docs" / "api.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    code = "\n".join(blocks)
    for call in (
        "paigrid.sweep(",
        "paigrid.open_dataset(",
        ".paigrid.best(",
        ".paigrid.pareto(",
        ".paigrid.breakdown(",
    ):
        assert call in code, call
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "docs_api"}
    for k, block in enumerate(blocks):
        exec(compile(block, f"docs/api.md block {k + 1}", "exec"), namespace)
    assert (tmp_path / "cube.h5").exists()
    for value in namespace.values():
        if isinstance(value, xr.Dataset):
            value.close()
