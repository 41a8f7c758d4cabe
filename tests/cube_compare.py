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
