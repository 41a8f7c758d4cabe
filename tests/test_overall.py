"""The overall bests of a block (``evaluate.overall_best``, compiled in ``kernels.overall``) equal
their numpy reference (``evaluate.overall_best_reference``) bit for bit: NaN, infinite and tied
metrics, jobs with no feasible configuration, and a real grid's block."""

import numpy as np
import pytest

from paigrid.evaluate import allocate, compute_block, overall_best, overall_best_reference
from paigrid.inputs.spec import SweepSpec
from paigrid.kernels import dp_columns as L
from paigrid.orchestration import prepare


def random_bests(seed, n_jobs=40, n_gpus=3, n_counts=4, n_prec=2, n_intra=2, n_network=3):
    """Per-(gpu, n_gpu, precision) bests with NaN, +inf, repeated (tied) values, jobs without any
    finite one, and flat indices (-1 where none)."""
    rng = np.random.default_rng(seed)
    shape = (n_jobs, n_gpus, n_counts, n_prec)
    step = rng.choice([0.5, 1.0, 2.0, 3.0], size=shape) * rng.choice([1.0, 1.0, 2.0], size=shape)
    step[rng.random(shape) < 0.3] = np.nan
    step[rng.random(shape) < 0.05] = np.inf
    step[:3] = np.nan  # no feasible configuration
    step[3] = np.inf  # only infinite ones
    step[4, 0, 0, 0] = 0.0
    index = rng.integers(0, 4 * n_intra * n_network, size=shape).astype(np.int32)
    index[np.isnan(step)] = -1
    index[5] = -1  # finite step times whose index is missing
    n_gpu = rng.choice([1.0, 2.0, 4.0, 8.0], size=(n_jobs, n_counts))
    samples = rng.choice([1.0, 32.0, 64.0], size=n_jobs)
    price = rng.choice([1.0, 2.5, 4.0], size=n_gpus)
    return step, index, n_gpu, samples, price, n_intra, n_network


def assert_same(args):
    index, step = overall_best(*args)
    want_index, want_step = overall_best_reference(*args)
    assert index.dtype == want_index.dtype and step.dtype == want_step.dtype
    np.testing.assert_array_equal(index, want_index)
    np.testing.assert_array_equal(step, want_step)
    return index


@pytest.mark.parametrize("seed", range(5))
def test_overall_best_matches_the_numpy_reference(seed):
    index = assert_same(random_bests(seed))
    assert (index[:4] == -1).all()  # the examples exercise the jobs with no finite metric
    assert (index[4:] >= 0).any() and (index[5, :, [0, 3, 4]] == -1).all()


def test_overall_best_takes_strided_inputs_and_the_first_of_ties():
    step, index, n_gpu, samples, price, n_intra, n_network = random_bests(7)
    step[:] = 1.0  # every metric ties within a job by time, and by cost within a GPU's price
    price = np.repeat(price, 2)[::2]  # a strided view, as a column of the GPU table is
    got = assert_same((step, index, n_gpu, samples, price, n_intra, n_network))
    # by time the GPU and the precision do not matter: the first of each wins, at the largest count
    assert (got[:, 0, 1] == 0).all() and (got[:, 0, 5] == 0).all()
    assert (n_gpu[np.arange(len(n_gpu)), got[:, 0, 2]] == n_gpu.max(axis=1)).all()


def test_overall_best_of_a_real_block_matches_the_numpy_reference():
    grid, _ = prepare(SweepSpec())
    stop = min(len(grid.jobs), 4)
    block = compute_block(grid, 0, 0, stop, False, allocate(grid, stop, False))
    jobs, n_gpu = grid.job_rows(0, stop)
    args = (
        block.arrays["best_step_time"],
        block.arrays["best_index"],
        n_gpu,
        jobs[:, L.J_BATCH] * jobs[:, L.J_ACCUM],
        grid.gpu_table[:, L.G_PRICE],
        len(grid.intra),
        len(grid.network),
    )
    assert_same(args)
    np.testing.assert_array_equal(block.arrays["overall_best"], overall_best_reference(*args)[0])
