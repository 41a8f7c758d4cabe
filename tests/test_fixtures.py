"""The fixtures of older files (tests/data) are read by today's readers: cubes of formats 1, 3
and 4 (format 2 was never kept) and an LLM file of ``paigrid llm sweep`` before the one cube."""

import json
from pathlib import Path

import numpy as np
import pytest

import paigrid
from cli_helpers import assert_clean_error, run
from paigrid.cube import open_cube
from paigrid.llm.query import query_best
from paigrid.query import best_configurations

DATA = Path(__file__).resolve().parent / "data"


@pytest.mark.parametrize("version", [1, 3, 4])
def test_old_cubes_open_and_answer(version):
    cube = open_cube(DATA / f"format{version}" / "cube.h5")
    try:
        assert cube.format == version and cube.complete
        rows = best_configurations(cube)
    finally:
        cube.close()
    assert len(rows) == len(cube.labels["job"]) and all(r["step_time"] > 0 for r in rows)
    ds = paigrid.open_dataset(DATA / f"format{version}" / "cube.h5")
    assert {"valid", "throughput", "cost", "energy"} <= set(ds.variables)
    ds.close()


def test_format3_and_format4_fixtures_answer_alike():
    """Both were swept from the same spec under the frozen pai-v1 model."""
    answers = []
    for version in (3, 4):
        cube = open_cube(DATA / f"format{version}" / "cube.h5")
        try:
            answers.append(best_configurations(cube, "cost", top=3))
        finally:
            cube.close()
    old, new = answers
    assert [(r["job"], r["arch"], r["gpu"], r["n_gpu"]) for r in old] == [
        (r["job"], r["arch"], r["gpu"], r["n_gpu"]) for r in new
    ]
    np.testing.assert_allclose([r["cost"] for r in old], [r["cost"] for r in new], rtol=1e-6)


def test_the_llm_file_of_llm_sweep_still_reads():
    path = DATA / "llm1" / "llm.h5"
    rows = query_best(path, "llama3-70b", tokens=1e12)
    assert [r["n_gpu"] for r in rows] == [8, 64]
    import h5py

    with h5py.File(path, "r") as f:
        stored = f["step_time"][1, 1]  # llama3-70b at 64 GPUs over (gpu, domain, network)
    assert rows[1]["step_time"] == pytest.approx(float(np.nanmin(stored)))
    result = run("llm", "query", path, "--model", "llama3-8b", "--json")
    assert result.exit_code == 0, result.output
    assert len(json.loads(result.output)) == 2


def test_info_describes_the_llm_file_of_llm_sweep_and_query_names_its_reader():
    path = DATA / "llm1" / "llm.h5"
    result = run("info", path)
    assert result.exit_code == 0, result.output
    assert "kind paigrid-llm-best" in result.output and "paigrid llm query reads it" in result.output
    assert "llama3-8b, llama3-70b" in result.output and "ib-ndr-400g, rdma-100g" in result.output
    assert "step_time                [s]" in result.output
    assert_clean_error(run("query", path, "--best-arch"), "paigrid llm query reads it")
