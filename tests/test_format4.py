"""Cube format 4: throughput, cost and energy are derived from step_time and stored factors.

A small spec swept now (format 4) is compared with the same spec swept by the last paigrid that
stored the three variables (``tests/data/format3``, pai-v1, whose numbers are frozen): the
stored variables are equal, the derived ones agree with the stored ones to float32 rounding with
NaN in the same places (through ``paigrid.open_dataset``, lazily and with dask chunks, and
through the query path), and every query answers the same from both cubes.
"""

import json
from pathlib import Path

import h5py
import numpy as np
import pytest

import paigrid
from cli_helpers import run
from cube_compare import assert_within_one_ulp
from paigrid.cube import open_cube
from paigrid.inputs.spec import load_spec
from paigrid.orchestration import prepare, run_sweep
from paigrid.query import best_configurations, parse_where
from paigrid.schema import (
    CUBE_VARIABLES,
    DERIVED_VARIABLES,
    DIMS,
    FACTOR_VARIABLES,
    FORMAT_VERSION,
    derived_values,
    factor_for_cube,
    format_version,
    stores_derived,
)
from paigrid.store import estimated_bytes
from paigrid.xarray_api import present

FORMAT3 = Path(__file__).resolve().parent / "data" / "format3"


@pytest.fixture(scope="module")
def cube4(tmp_path_factory):
    """The format-3 fixture's spec, swept now."""
    path = tmp_path_factory.mktemp("format4") / "cube.h5"
    run_sweep(load_spec(FORMAT3 / "spec.toml"), path, progress=False)
    return path


def test_format4_stores_the_factors_and_not_the_derived_variables(cube4):
    import h5netcdf

    with h5py.File(cube4, "r") as f, h5py.File(FORMAT3 / "cube.h5", "r") as old, h5netcdf.File(cube4, "r") as nc:
        # swept now: the newest format, whose data-parallel root is format 4's (format 5 adds the llm group)
        assert format_version(f.attrs) == FORMAT_VERSION >= 4 and format_version(old.attrs) == 3
        assert not stores_derived(4) and stores_derived(3)
        for name in DERIVED_VARIABLES:
            assert name not in f and name in old
        for name, (dims, dtype, units, long_name) in FACTOR_VARIABLES.items():
            assert f[name].dtype == dtype and f[name].attrs["units"] == units, name
            assert nc.variables[name].dimensions == dims, name
            assert "=" in long_name and "step_time" in long_name, name
        assert set(CUBE_VARIABLES) == {"step_time", "t_comm", "bottleneck", "invalid_reason"}
        # every variable the old cube stores (but the three derived ones) is stored the same
        for name in old:
            if isinstance(old[name], h5py.Dataset) and name not in DERIVED_VARIABLES and old[name].dtype.kind == "f":
                np.testing.assert_array_equal(f[name][()], old[name][()], err_msg=name)


def test_the_factors_are_what_the_old_formulas_multiply(cube4):
    """samples_per_job_step = n_gpu x samples_per_step, cost_per_step_second = price / 3600 x 1e6
    / samples_per_step and energy_per_step_second = power / samples_per_step, from the cube's own
    per-job and per-GPU variables."""
    with h5py.File(cube4, "r") as f:
        samples, n = f["samples_per_step"][()], f["n_gpu"][()].astype(np.float64)
        np.testing.assert_array_equal(f["samples_per_job_step"][()], n[None, :] * samples[:, None])
        np.testing.assert_array_equal(
            f["cost_per_step_second"][()], f["price"][()][None, :] / 3600.0 * 1e6 / samples[:, None]
        )
        np.testing.assert_array_equal(f["energy_per_step_second"][()], f["power"][()][None, :] / samples[:, None])


def test_derived_variables_agree_with_the_stored_ones_of_format3(cube4):
    with paigrid.open_dataset(FORMAT3 / "cube.h5") as old, paigrid.open_dataset(cube4) as new:
        np.testing.assert_array_equal(new.step_time.values, old.step_time.values)
        for name, (factor, _, dtype, units, long_name) in DERIVED_VARIABLES.items():
            got = new[name]
            assert not got.variable._in_memory, name  # derived lazily
            assert got.dims == DIMS and got.dtype == dtype == old[name].dtype, name
            assert got.attrs["units"] == units == old[name].attrs["units"], name
            assert got.attrs["long_name"] == long_name and factor in got.attrs["derived_from"], name
            values = got.values
            assert_within_one_ulp(values, old[name].values, name)
            assert np.isnan(values).any() and np.isfinite(values).any(), name
            # the derivation is the float64 formula of the old kernel, on the stored float32 step
            step = old.step_time.values.astype(np.float64)
            if name == "throughput":
                want = (
                    new.n_gpu.values[None, None, None, :, None, None, None]
                    * old.samples_per_step.values[:, None, None, None, None, None, None]
                    / step
                )
            else:
                per_gpu = (old.price.values / 3600.0 * 1e6) if name == "cost" else old.power.values
                want = (
                    per_gpu[None, None, :, None, None, None, None]
                    / old.samples_per_step.values[:, None, None, None, None, None, None]
                    * step
                )
            np.testing.assert_array_equal(values, want.astype(np.float32), err_msg=name)
            # an indexed part reads and derives only that part, the same numbers
            part = dict(job=[2, 0], arch=[4, 1], gpu=slice(1, 3), n_gpu=1, network=[2, 0])
            np.testing.assert_array_equal(got.isel(part).values, new.isel(part)[name].values)
            np.testing.assert_array_equal(
                got.isel(part).values, values[[2, 0]][:, [4, 1]][:, :, 1:3, 1][:, :, :, :, [2, 0]], err_msg=name
            )
            one = dict(job=3, arch=4, gpu=2, n_gpu=2, intra=1, network=2, precision=1)
            assert np.array_equal(got.isel(one).values, values[3, 4, 2, 2, 1, 2, 1], equal_nan=True)
            finite = np.argwhere(np.isfinite(values))[-1]
            assert got.isel(dict(zip(DIMS, finite))).values == values[tuple(finite)]


def test_derived_variables_with_dask_chunks(cube4):
    pytest.importorskip("dask")
    import xarray as xr

    with paigrid.open_dataset(cube4) as lazy, xr.open_dataset(cube4, engine="h5netcdf", chunks={}) as data:
        present(data)
        for name in DERIVED_VARIABLES:
            assert data[name].chunks is not None and data[name].dtype == np.float32, name
            assert data[name].attrs["units"] == lazy[name].attrs["units"], name
            np.testing.assert_array_equal(data[name].values, lazy[name].values, err_msg=name)
    with paigrid.open_dataset(cube4, chunks={}) as data, paigrid.open_dataset(cube4) as lazy:
        assert data.cost.chunks is not None
        np.testing.assert_array_equal(data.cost.isel(job=1, gpu=[2, 0]).values, lazy.cost.values[1][:, [2, 0]])


def test_a_format3_dataset_keeps_its_stored_variables():
    with paigrid.open_dataset(FORMAT3 / "cube.h5") as old, h5py.File(FORMAT3 / "cube.h5", "r") as f:
        for name in DERIVED_VARIABLES:
            assert "derived_from" not in old[name].attrs
            np.testing.assert_array_equal(old[name].values, f[name][()], err_msg=name)


QUERIES = [
    ("time", [], 1, False),
    ("cost", [], 1, False),
    ("time", [], 5, False),
    ("cost", [], 7, False),
    ("time", ["gpu=V100", "n_gpu=8"], 1, False),
    ("time", ["network=eth-25g"], 3, False),
    ("cost", ["arch=ps-worker,allreduce-cluster"], 1, False),
    ("time", [], 1, True),
    ("time", ["precision=fp32"], 1, True),
    ("time", ["intra=pcie3"], 4, False),
]


@pytest.mark.parametrize("by, where, top, pareto", QUERIES)
def test_queries_answer_the_same_from_format3_and_format4(cube4, by, where, top, pareto):
    answers = []
    for path in (FORMAT3 / "cube.h5", cube4):
        cube = open_cube(path)
        try:
            answers.append(best_configurations(cube, by, parse_where(where, cube), None, top, pareto))
        finally:
            cube.close()
    old, new = answers
    assert len(old) == len(new) > 0
    for a, b in zip(old, new):
        assert json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)
    # and the rows' throughput and cost are the derived variables at the rows' configurations
    with paigrid.open_dataset(cube4) as ds:
        for row in new:
            if row["arch"] is None:
                continue
            at = {d: row[d] for d in ("arch", "gpu", "n_gpu", "precision")}
            cell = ds.sel(job=row["job"], **at)
            cell = cell.isel(
                intra=0 if row["intra"] == "any" else list(ds.intra.values).index(row["intra"]),
                network=0 if row["network"] == "any" else list(ds.network.values).index(row["network"]),
            )
            if np.isnan(cell.step_time.values):  # a representative of an "any" dimension that is invalid
                continue
            assert float(cell.throughput) == np.float32(row["throughput"])
            assert float(cell.cost) == np.float32(row["cost"])


def test_the_command_line_answers_the_same_from_both(cube4):
    for args in (["--best-arch", "--top", "3"], ["--pareto", "--by", "cost"], ["--best-arch", "--where", "gpu=H100"]):
        old = run("query", FORMAT3 / "cube.h5", *args, "--json")
        new = run("query", cube4, *args, "--json")
        assert old.exit_code == new.exit_code == 0, new.output
        assert json.loads(old.stdout) == json.loads(new.stdout)
    info = run("info", cube4).output
    assert "derived (not stored" in info and "throughput" in info.split("derived (not stored")[1]
    assert "derived (not stored" not in run("info", FORMAT3 / "cube.h5").output


def test_the_size_estimate_counts_10_bytes_a_configuration_and_the_factors():
    grid = prepare(load_spec(FORMAT3 / "spec.toml"))[0]
    j, a, g, n, i, w, p = grid.shape
    full, reduce_only = estimated_bytes(grid, False), estimated_bytes(grid, True)
    assert sum(np.dtype(d).itemsize for d, _, _ in CUBE_VARIABLES.values()) == 10
    assert full - reduce_only == 10 * grid.configs + 8 * (j * n + 2 * j * g)


def test_derived_values_keep_nan_and_round_once():
    step = np.array([np.nan, 0.5, 3.0], dtype=np.float32)
    np.testing.assert_array_equal(
        derived_values("throughput", step, 3.0), np.array([np.nan, 6.0, 1.0], dtype=np.float32)
    )
    got = derived_values("cost", step, 1.0 / 3.0)
    assert got.dtype == np.float32 and np.isnan(got[0]) and got[2] == np.float32(1.0)
    assert factor_for_cube("samples_per_job_step", np.ones((4, 3))).shape == (4, 1, 1, 3, 1, 1, 1)
    assert factor_for_cube("cost_per_step_second", np.ones((2, 5))).shape == (2, 1, 5, 1, 1, 1, 1)
    assert factor_for_cube("cost_per_step_second", np.ones(5), ("arch", "gpu")).shape == (1, 5)
