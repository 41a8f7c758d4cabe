"""The cheap parts of the calibration: the coloured Jacobian, the shared linearisation, the
linear robust solve and the folds of whole values, each checked against the plain computation."""

from __future__ import annotations

import numpy as np
import pytest

from paigrid.accuracy import calibrate as C
from paigrid.accuracy.crossval import fold_values
from paigrid.accuracy.publicrows import read_public
from paigrid.accuracy.shrinkage import shrunk_least_squares, shrunk_linear_least_squares
from paigrid.inputs.catalog import Catalogues
from paigrid.inputs.efficiency import defaults
from paigrid.inputs.spec import Options

pytest.importorskip("scipy")


@pytest.fixture(scope="module")
def sample():
    """Every 12th modelled public row (one and several GPUs, every generation of the file)."""
    from importlib import resources

    reading = read_public(
        str(resources.files("paigrid.datasets").joinpath("measured_public_v2.csv")), Catalogues.load()
    )
    return reading.cats, reading.rows[::12]


@pytest.mark.slow
def test_the_coloured_jacobian_is_the_plain_one(sample):
    cats, rows = sample
    eff, options = defaults(), Options()
    params = C.parameters_for(rows, eff, options, C.DEFAULT_PARAMETERS_V2, "gpu-precision", cats, "generation")
    support = C.support_of(rows, params, eff, options, C.DEFAULT_PARAMETERS_V2, "gpu-precision", cats, "generation")
    x0 = np.log([p.start for p in params])
    coloured = C._Model(rows, eff, options, params, cats, support)
    assert len(coloured.colours()) < len(params) / 2  # the point of it
    plain = C._Model(rows, eff, options, params, cats).jacobian(x0, central=False)
    assert np.array_equal(coloured.jacobian(x0, central=False), plain)
    assert not np.any(plain[~support])  # no row moves with a parameter outside its support


@pytest.mark.slow
def test_a_fit_on_a_slice_of_a_shared_linearisation_is_the_fit_on_its_own(sample):
    cats, rows = sample
    eff, options = defaults(), Options()
    shared = C.linearise(rows, eff, options, cats=cats)
    train = [r for r in rows if r.gpu != rows[0].gpu]
    own = C.fit(train, eff, options, cats=cats, allow_bounds=False, shrinkage=0.1)
    sliced = C.fit(train, eff, options, cats=cats, allow_bounds=False, shrinkage=0.1, linearisation=shared)
    assert [p.name for p in own.parameters] == [p.name for p in sliced.parameters]
    assert [p.value for p in own.parameters] == pytest.approx([p.value for p in sliced.parameters], rel=1e-9)
    assert own.notes.get("bound_to_default") == sliced.notes.get("bound_to_default")


@pytest.mark.parametrize("strength", [0.0, 0.01, 1.0])
def test_the_linear_robust_solve_is_the_general_one(strength):
    rng = np.random.default_rng(7)
    jac = rng.normal(size=(200, 6))
    r = 0.3 * rng.normal(size=200) + 2.0 * (rng.random(200) < 0.1)  # a tenth of the rows outliers
    x0, lower, upper = np.zeros(6), np.full(6, -0.3), np.full(6, 0.5)
    general = shrunk_least_squares(lambda v: r + jac @ v, lambda v: jac, x0, lower, upper, strength, 0.1).x
    linear = shrunk_linear_least_squares(r, jac, x0, x0, lower, upper, strength, 0.1)
    assert linear == pytest.approx(general, abs=1e-4)
    assert np.all(linear >= lower) and np.all(linear <= upper)


def test_folds_of_whole_values():
    values = [f"w{i:02d}" for i in range(23)]
    folds = fold_values(values, 10)
    held = [v for _, members in folds for v in members]
    assert len(folds) == 10 and sorted(held) == values  # each value in exactly one fold
    assert fold_values(values, 10) == folds  # deterministic
    assert fold_values(values[:4], 10) == [(v, {v}) for v in values[:4]]  # few values: one each
