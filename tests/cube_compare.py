"""Comparing two cube files dataset for dataset (for interrupted-and-resumed sweeps)."""

import h5py
import numpy as np


def read_all(path):
    """Every dataset of a cube file as numpy arrays (attributes that change run to run left out)."""
    with h5py.File(path, "r") as f:
        return {name: f[name][()] for name in f if isinstance(f[name], h5py.Dataset)}


def assert_same_cube(a, b):
    """The two cube files hold the same datasets with equal values (NaN equal to NaN)."""
    x, y = read_all(a), read_all(b)
    assert x.keys() == y.keys()
    for name in x:
        np.testing.assert_array_equal(x[name], y[name], err_msg=name)


def assert_within_one_ulp(got, want, err_msg=""):
    """Two float32 arrays NaN in the same places and elsewhere at most one unit in the last place
    apart: a variable derived from the stored float32 step time (format 4) against the value the
    kernel rounded from its float64 step time (formats 1 to 3)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype == np.float32, err_msg
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=f"NaN positions of {err_msg}")
    finite = ~np.isnan(want)
    assert np.all(np.sign(got[finite]) == np.sign(want[finite])), err_msg
    ulps = np.abs(got[finite].view(np.int32).astype(np.int64) - want[finite].view(np.int32).astype(np.int64))
    assert ulps.size == 0 or ulps.max() <= 1, f"{err_msg}: {ulps.max()} units in the last place apart"
