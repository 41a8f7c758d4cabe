"""Job tables built without per-job work: the same rows and current predictions as job by job."""

import numpy as np

from paigrid.inputs.kernel_tables import job_table_index, job_vector
from paigrid.inputs.spec import SweepSpec
from paigrid.orchestration import prepare
from paigrid.predict import current_predictions, predict_configs
from paigrid.study.population import synthetic_population
from paigrid.study.trace import write_population


def population_grid(tmp_path, jobs=300, model="pai-v2"):
    write_population(synthetic_population(jobs, 11), tmp_path / "pop.csv")
    spec = SweepSpec(
        workloads=str(tmp_path / "pop.csv"),
        gpu=["V100", "A100"],
        n_gpu=[1, 8],
        network=["eth-25g"],
        precision=["fp32", "amp-fp16"],
    )
    spec.options = spec.options.with_overrides({"model": model}, "the test")
    return prepare(spec)[0]


def test_job_rows_are_the_rows_built_job_by_job(tmp_path):
    grid = population_grid(tmp_path)
    grid.jobs[3].variant = {"optimizer": "sgd"}  # a pai-v2 choice of one job: a row of its own
    grid.jobs[4].batch = grid.jobs[4].batch + 1.0
    by_job = np.stack([job_vector(job, grid.cats, grid.model_options, grid.efficiency) for job in grid.jobs])
    rows, index = job_table_index(grid.jobs, grid.cats, grid.model_options, grid.efficiency)
    assert len(rows) < len(grid.jobs) / 3  # the population repeats models, batches, options
    np.testing.assert_array_equal(rows[index], by_job)
    table, counts = grid.job_rows(100, 250)
    np.testing.assert_array_equal(table, by_job[100:250])
    np.testing.assert_array_equal(counts, np.tile([1.0, 8.0], (150, 1)))


def test_current_predictions_are_the_single_predictions(tmp_path):
    grid = population_grid(tmp_path, 120, "pai-v1")
    jobs = grid.jobs
    found = current_predictions(jobs, grid.cats, grid.efficiency, grid.model_options)
    one_by_one = [
        predict_configs([job], [job.current], grid.cats, grid.efficiency, grid.model_options)[0] for job in jobs
    ]
    assert all(job.current is not None for job in jobs)
    for name in ("step_time", "throughput", "cost"):
        expected = np.array([result[name] for result in one_by_one])
        np.testing.assert_array_equal(found[f"current_{name}"], expected, err_msg=name)
    assert np.isfinite(found["current_step_time"]).sum() > 60


def test_job_rows_carry_the_per_workload_corrections(tmp_path):
    """A per-workload correction of the sweep's efficiency (pai-v2, ``Efficiency.workload_factor``)
    divides that workload's class FLOPs in the distinct rows as in the rows built job by job, and
    leaves the other workloads' rows alone."""
    import dataclasses

    from paigrid.kernels import dp_columns as L

    grid = population_grid(tmp_path, 200)
    models = sorted({job.model for job in grid.jobs})
    corrected = dataclasses.replace(grid.efficiency, workloads={models[0]: 0.5})
    plain_rows, index = job_table_index(grid.jobs, grid.cats, grid.model_options, grid.efficiency)
    rows, same_index = job_table_index(grid.jobs, grid.cats, grid.model_options, corrected)
    np.testing.assert_array_equal(index, same_index)
    by_job = np.stack([job_vector(job, grid.cats, grid.model_options, corrected) for job in grid.jobs])
    np.testing.assert_array_equal(rows[index], by_job)
    flop = slice(L.J_CLASS_FLOP, L.J_CLASS_FLOP + L.N_CLASSES)
    hit = np.array([job.model == models[0] for job in grid.jobs])
    assert hit.any() and (~hit).any()
    np.testing.assert_allclose(rows[index][hit, flop], 2.0 * plain_rows[index][hit, flop], rtol=1e-12)
    np.testing.assert_array_equal(rows[index][~hit], plain_rows[index][~hit])
