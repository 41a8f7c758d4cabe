"""The kernel tables a prediction builds are kept on its ``Efficiency`` and reused
(``predict._call_tables``): a reused set gives the numbers a fresh one gives, a scaled prediction
scales copies (never the kept tables), and other catalogues get their own tables."""

import csv
import math
from pathlib import Path

import pytest

from paigrid import predict
from paigrid.inputs.catalog import Catalogues
from paigrid.inputs.efficiency import defaults
from paigrid.inputs.jobs import load_jobs
from paigrid.inputs.spec import Options, SweepSpec

CONFIG = {
    "arch": "ps-worker",
    "gpu": "V100-SXM2-16GB",
    "n_gpu": 16,
    "intra": "pcie3",
    "network": "eth-25g",
    "precision": "fp32",
}
DATASETS = Path(__file__).resolve().parents[1] / "datasets"
NUMBERS = ("step_time", "t_data", "t_flop", "t_mem", "t_comm", "throughput", "cost", "energy")


@pytest.fixture(scope="module")
def setting():
    cats = Catalogues.load()
    jobs = load_jobs(SweepSpec(workloads=["resnet50", "bert-base"]), cats)[0]
    return cats, jobs


def numbers(results):
    return [[r[name] for name in NUMBERS] for r in results]


def same(a, b):
    return all(x == y or (math.isnan(x) and math.isnan(y)) for ra, rb in zip(a, b) for x, y in zip(ra, rb))


def test_a_second_prediction_reuses_the_first_ones_tables_and_agrees_with_fresh_ones(setting):
    cats, jobs = setting
    eff, options = defaults(), Options()
    first = numbers(predict.predict_configs(jobs, [CONFIG] * len(jobs), cats, eff, options))
    assert len(eff._table_memo) == 1
    kept = next(iter(eff._table_memo.values()))[1]
    second = numbers(predict.predict_configs(jobs, [CONFIG] * len(jobs), cats, eff, options))
    assert next(iter(eff._table_memo.values()))[1] is kept
    fresh = numbers(predict.predict_configs(jobs, [CONFIG] * len(jobs), cats, defaults(), options))
    assert same(first, second) and same(first, fresh)
    assert not math.isnan(first[0][0])


def test_other_options_or_names_get_their_own_tables(setting):
    cats, jobs = setting
    eff = defaults()
    predict.predict_configs(jobs[:1], [CONFIG], cats, eff, Options())
    predict.predict_configs(jobs[:1], [CONFIG], cats, eff, Options(model="pai-v1"))
    predict.predict_configs(jobs[:1], [{**CONFIG, "network": "ib-edr-100g"}], cats, eff, Options())
    assert len(eff._table_memo) == 3


def test_a_scaled_prediction_leaves_the_kept_tables_as_they_were(setting):
    cats, jobs = setting
    eff, options = defaults(), Options()
    configs = [CONFIG] * len(jobs)
    plain = numbers(predict.predict_configs(jobs, configs, cats, eff, options))
    scale = {"flop": 2.0, "hbm": 2.0, "pcie": 2.0, "network": 3.0}
    scaled = numbers(predict.predict_configs(jobs, configs, cats, eff, options, scale=scale))
    again = numbers(predict.predict_configs(jobs, configs, cats, eff, options))
    fresh_scaled = numbers(predict.predict_configs(jobs, configs, cats, defaults(), options, scale=scale))
    assert same(plain, again)
    assert same(scaled, fresh_scaled)
    assert scaled[0][0] < plain[0][0]  # the scale did reach the kernel


def test_other_catalogues_never_get_tables_built_from_these(setting, tmp_path):
    cats, jobs = setting
    eff, options = defaults(), Options()
    plain = numbers(predict.predict_configs(jobs[:1], [CONFIG], cats, eff, options))
    with open(DATASETS / "gpus.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:
        if row["name"] == CONFIG["gpu"]:
            row["hbm_GB_per_s"] = str(float(row["hbm_GB_per_s"]) * 4)
    path = tmp_path / "gpus.csv"
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    other = Catalogues.load({"gpus": path})
    changed = numbers(predict.predict_configs(jobs[:1], [CONFIG], other, eff, options))
    fresh = numbers(predict.predict_configs(jobs[:1], [CONFIG], other, defaults(), options))
    assert same(changed, fresh)
    assert changed[0][3] < plain[0][3]  # t_mem: the faster memory of the other catalogue
