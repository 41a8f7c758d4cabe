"""Tests of paigrid.study.population: the synthetic PAI-like job population and its summary."""

import csv
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import paigrid.datasets
from paigrid.inputs.catalog import load
from paigrid.study import population as pop
from paigrid.study.trace import write_population

GPU_NAMES = set(load("gpus").names)
MODEL_NAMES = set(load("workloads").names)
ARCHS = {"1w1g", "1wng", "allreduce-local", "ps-worker", "allreduce-cluster"}
INTRA = {"pcie3", "pcie4", "nvlink1-hcm", "nvlink2-hcm", "nvswitch-nvlink3"}
PRECISIONS = {"fp32", "tf32", "amp-fp16", "amp-bf16", "fp8"}


@pytest.fixture(scope="module")
def big():
    return pop.synthetic_population(10_000, seed=7)


def _check_row(row, seed):
    assert tuple(row) == pop.POPULATION_COLUMNS
    arch, n, gpn = row["current_arch"], row["current_n_gpu"], row["gpus_per_node"]
    assert arch in ARCHS
    assert isinstance(n, int) and n >= 1
    assert gpn == 8
    if arch == "1w1g":
        assert n == 1
    if arch in ("1wng", "allreduce-local"):
        assert n <= gpn
    if arch in ("ps-worker", "allreduce-cluster"):
        assert row["current_network"] != "none"
    assert row["current_network"] == "eth-25g"
    assert row["current_gpu"] in GPU_NAMES
    assert row["model"] in MODEL_NAMES
    assert row["current_intra"] in INTRA
    assert row["current_precision"] in PRECISIONS
    assert row["batch"] == "" or (isinstance(row["batch"], int) and row["batch"] >= 1)
    assert row["source"] == f"synthetic-seed-{seed}"


def test_reproducible():
    a = pop.synthetic_population(500, seed=42)
    assert a == pop.synthetic_population(500, seed=42)
    assert a != pop.synthetic_population(500, seed=43)


def test_every_row_valid(big):
    for row in big:
        _check_row(row, 7)
    assert len({r["job"] for r in big}) == len(big)


@settings(max_examples=30, deadline=None)
@given(n=st.integers(0, 60), seed=st.integers(0, 2**32 - 1))
def test_valid_for_any_seed(n, seed):
    rows = pop.synthetic_population(n, seed)
    assert len(rows) == n
    for row in rows:
        _check_row(row, seed)


def test_calibrated_shares(big):
    s = pop.population_summary(big)
    assert s["n_jobs"] == 10_000
    assert s["job_share"]["ps-worker"] == pytest.approx(0.29, abs=0.02)
    assert s["gpu_share"]["ps-worker"] == pytest.approx(0.81, abs=0.02)
    assert s["job_share"]["allreduce-cluster"] == 0.0
    assert sum(s["job_share"].values()) == pytest.approx(1.0)
    assert sum(s["gpu_share"].values()) == pytest.approx(1.0)
    others = ("1w1g", "1wng", "allreduce-local")
    assert all(s["job_share"][a] > 0.05 for a in others)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gpu_share_holds_across_seeds(seed):
    s = pop.population_summary(pop.synthetic_population(10_000, seed))
    assert s["gpu_share"]["ps-worker"] == pytest.approx(0.81, abs=0.02)


def test_expected_shares_from_tables():
    e = pop.expected_shares()
    assert e["job_share"]["ps-worker"] == pytest.approx(0.29)
    assert e["gpu_share"]["ps-worker"] == pytest.approx(0.81, abs=0.005)


def test_tables_are_distributions():
    assert sum(pop.ARCH_JOB_SHARE.values()) == pytest.approx(1.0)
    assert sum(pop.GPU_MIX.values()) == pytest.approx(1.0)
    assert sum(pop.MODEL_MIX.values()) == pytest.approx(1.0)
    for values, probs in pop.ARCH_N_GPU.values():
        assert sum(probs) == pytest.approx(1.0) and len(values) == len(probs)
    assert set(pop.GPU_MIX) <= GPU_NAMES
    assert set(pop.MODEL_MIX) <= MODEL_NAMES
    assert set(pop.BATCH_MENU) <= set(pop.MODEL_MIX)


def test_mixes_in_large_population(big):
    gpus = {r["current_gpu"] for r in big}
    assert gpus == set(pop.GPU_MIX)
    assert {r["model"] for r in big} == set(pop.MODEL_MIX)
    nvlink = [r for r in big if r["current_intra"] == "nvlink2-hcm"]
    v100 = [r for r in big if r["current_gpu"].startswith("V100")]
    assert all(r["current_gpu"].startswith("V100-SXM2") for r in nvlink)
    assert 0 < len(nvlink) < len(v100) / 2  # a minority of the V100 servers
    empty = sum(r["batch"] == "" for r in big) / len(big)
    assert 0.6 < empty < 0.8


def test_summary_of_csv_rows_and_empty():
    rows = [{"current_arch": "1w1g", "current_n_gpu": "1"}, {"current_arch": "ps-worker", "current_n_gpu": "3"}]
    s = pop.population_summary(rows)
    assert s["job_share"]["ps-worker"] == 0.5 and s["gpu_share"]["ps-worker"] == 0.75
    empty = pop.population_summary([])
    assert empty["n_jobs"] == 0 and set(empty["gpu_share"]) == ARCHS


def test_bad_n_jobs():
    with pytest.raises(ValueError):
        pop.synthetic_population(-1, 0)
    with pytest.raises(ValueError):
        pop.synthetic_population(2.5, 0)
    with pytest.raises(ValueError):
        pop.synthetic_population(5, None)


def test_written_population_reads_back(tmp_path):
    rows = pop.synthetic_population(200, seed=3)
    path = tmp_path / "pop.csv"
    write_population(rows, path)
    with open(path, newline="") as f:
        back = list(csv.DictReader(f))
    assert len(back) == 200
    assert back[0].keys() == set(pop.POPULATION_COLUMNS)
    assert pop.population_summary(back) == pop.population_summary(rows)


# --- populations of 2026: LLM jobs beside the PAI-era ones ----------------------------------
def _llm_names():
    with open(Path(paigrid.datasets.__file__).parent / "llm_models.csv", newline="") as f:
        return {row["name"] for row in csv.DictReader(f)}


def test_llm_share_keeps_the_pai_part_and_adds_llm_jobs():
    rows = pop.synthetic_population(400, seed=5, llm_share=0.25, llm_pretrain_share=0.4)
    assert len(rows) == 400
    assert rows[:300] == pop.synthetic_population(300, seed=5)  # the PAI-era part is unchanged
    llm = rows[300:]
    assert rows == pop.synthetic_population(400, seed=5, llm_share=0.25, llm_pretrain_share=0.4)
    names = _llm_names()
    for row in llm:
        assert tuple(row) == pop.POPULATION_COLUMNS
        assert row["model"] in names and row["model"] not in MODEL_NAMES
        assert row["current_gpu"] in GPU_NAMES and row["current_gpu"] in pop.LLM_GPU_MIX
        assert row["current_intra"] == pop.LLM_INTRA[row["current_gpu"]]
        assert row["current_network"] == pop.LLM_NETWORK and row["current_precision"] == pop.LLM_PRECISION
        n = row["current_n_gpu"]
        assert row["current_arch"] == ("1w1g" if n == 1 else "allreduce-local" if n <= 8 else "allreduce-cluster")
        assert row["source"] == "synthetic-llm-seed-5" and row["job"].startswith("llm-5-")
    pretrain = [r for r in llm if r["current_n_gpu"] >= 64]
    assert len(pretrain) == 40  # exact quota: 0.4 x 100
    assert all(r["model"] in pop.LLM_PRETRAIN_MIX for r in pretrain)
    assert {r["model"] for r in llm} - set(pop.LLM_PRETRAIN_MIX) - set(pop.LLM_FINETUNE_MIX) == set()
    assert len({r["job"] for r in rows}) == 400


def test_llm_tables_are_distributions_of_known_names():
    names = _llm_names()
    for mix in (pop.LLM_PRETRAIN_MIX, pop.LLM_FINETUNE_MIX, pop.LLM_GPU_MIX):
        assert sum(mix.values()) == pytest.approx(1.0)
    assert set(pop.LLM_PRETRAIN_MIX) <= names and set(pop.LLM_FINETUNE_MIX) <= names
    assert set(pop.LLM_GPU_MIX) <= GPU_NAMES and set(pop.LLM_INTRA) == set(pop.LLM_GPU_MIX)
    for values, probs in pop.LLM_N_GPU.values():
        assert sum(probs) == pytest.approx(1.0) and len(values) == len(probs)


def test_no_llm_share_is_the_pai_population():
    assert pop.synthetic_population(50, seed=2, llm_share=0.0) == pop.synthetic_population(50, seed=2)
    assert all(r["source"] == "synthetic-llm-seed-2" for r in pop.synthetic_population(10, 2, llm_share=1.0))


@pytest.mark.parametrize("bad", [-0.1, 1.5, "half", True])
def test_bad_llm_share(bad):
    with pytest.raises(ValueError, match="fraction"):
        pop.synthetic_population(10, 0, llm_share=bad)
    with pytest.raises(ValueError, match="fraction"):
        pop.synthetic_population(10, 0, llm_pretrain_share=bad)
