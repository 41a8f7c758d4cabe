"""The judgement's per-attribute and per-GPU summaries (``paigrid.accuracy.judge``) on rows whose
errors are known by construction."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from paigrid.accuracy import judge


def _row(
    rid: str, gpu: str, workload: str = "w", precision: str = "tf32", n_gpu: int = 1, arch: str = "1w1g"
) -> SimpleNamespace:
    return SimpleNamespace(
        id=rid,
        gpu=gpu,
        workload=workload,
        precision=precision,
        batch=32.0,
        grad_accum_steps=1,
        framework="f",
        source_id="S",
        variant={},
        n_gpu=n_gpu,
        arch=arch,
        intra="pcie4",
    )


def _result(rid: str, predicted: float, measured: float) -> dict:
    return {"id": rid, "predicted": predicted, "measured": measured, "error": predicted / measured - 1.0}


def test_by_attribute_gives_the_signed_median_beside_the_absolute_one():
    rows = [_row("a", "X"), _row("b", "X"), _row("c", "X"), _row("d", "Y")]
    results = [_result("a", 1.5, 1.0), _result("b", 1.2, 1.0), _result("c", 0.6, 1.0), _result("d", 0.9, 1.0)]
    table = judge.by_attribute(results, rows, "gpu")
    assert table["X"]["count"] == 3
    assert table["X"]["median_abs_error"] == pytest.approx(0.4)  # |+0.5|, |+0.2|, |-0.4|
    assert table["X"]["median_error"] == pytest.approx(0.2)  # +0.5, +0.2, -0.4: too fast, mostly
    assert table["X"]["mean_abs_error"] == pytest.approx((0.5 + 0.2 + 0.4) / 3)
    assert table["Y"]["median_error"] == pytest.approx(-0.1)  # predicted slower than measured


def _two_gpu_job(workload: str, fast_factor: float) -> tuple[list, list]:
    """One job on GPUs A and B: A predicted ``fast_factor`` times as fast as measured, B exactly."""
    rows = [_row(f"{workload}-A", "A", workload), _row(f"{workload}-B", "B", workload)]
    results = [_result(f"{workload}-A", 2.0 * fast_factor, 2.0), _result(f"{workload}-B", 1.0, 1.0)]
    return rows, results


def test_gpu_ratio_by_gpu_orients_each_pair_with_that_gpu_as_the_numerator():
    rows, results = [], []
    for workload, factor in (("w1", 1.25), ("w2", 1.25), ("w3", 1.0)):
        more_rows, more_results = _two_gpu_job(workload, factor)
        rows += more_rows
        results += more_results
    table = judge.gpu_ratio_by(results, rows, lambda r: r.gpu)
    assert table["A"]["count"] == table["B"]["count"] == 3
    assert table["A"]["median_error"] == pytest.approx(0.25)  # A over B: predicted 25% faster
    assert table["B"]["median_error"] == pytest.approx(1 / 1.25 - 1)  # B over A: the same pairs, inverted
    assert table["A"]["median_abs_error"] == pytest.approx(0.25)


def test_gpu_ratio_by_pair_orients_each_pair_by_the_sorted_values():
    rows, results = _two_gpu_job("w1", 1.25)
    segment = {"A": "workstation", "B": "consumer"}
    table = judge.gpu_ratio_by_pair(results, rows, lambda r: segment[r.gpu])
    assert list(table) == [("consumer", "workstation")]
    # consumer (B) over workstation (A): predicted ratio 1 / 2.5, measured 1 / 2
    assert table["consumer", "workstation"]["median_error"] == pytest.approx(1 / 1.25 - 1)
    assert table["consumer", "workstation"]["count"] == 1


def test_a_job_on_one_gpu_makes_no_pair():
    rows = [_row("a", "A"), _row("b", "A", "other")]
    results = [_result("a", 2.0, 1.0), _result("b", 1.0, 1.0)]
    assert judge.gpu_ratio_by(results, rows, lambda r: r.gpu) == {}
    assert judge.by_attribute(results, rows, "gpu")["A"]["median_error"] == pytest.approx(0.5)  # +1.0 and 0.0


def test_relative_summary_counts_each_comparison_on_a_hand_built_set():
    """Five runs of one job whose ratio errors are known by construction: one GPU pair, two
    scaling pairs, one AMP pair and one parameter-server twin whose order is predicted wrong."""
    rows = [
        _row("a", "A"),
        _row("b", "B"),
        _row("c", "A", n_gpu=2, arch="allreduce-local"),
        _row("d", "A", precision="amp-fp16"),
        _row("e", "A", n_gpu=2, arch="1wng"),
    ]
    predicted_measured = {"a": (2.0, 2.0), "b": (1.0, 1.25), "c": (3.6, 4.0), "d": (6.0, 4.0), "e": (3.0, 4.4)}
    results = [_result(rid, *pm) for rid, pm in predicted_measured.items()]
    summary = judge.relative_summary(results, rows)
    # B over A: predicted 1 / 2, measured 1.25 / 2
    assert summary["gpu"] == {"pairs": 1, "median_abs_error": pytest.approx(0.2), "order_right": 1.0}
    # c and e (2 GPUs) over a: predicted 1.8 and 1.5, measured 2.0 and 2.2
    scaling = [abs(1.8 / 2.0 - 1), abs(1.5 / 2.2 - 1)]
    assert summary["scaling"] == {"pairs": 2, "median_abs_error": pytest.approx(sum(scaling) / 2), "order_right": 1.0}
    # d (AMP) over a: predicted 3, measured 2
    assert summary["precision"] == {"pairs": 1, "median_abs_error": pytest.approx(0.5), "order_right": 1.0}
    # e (parameter server) over c: predicted slower (3.0 / 3.6), measured faster (4.4 / 4.0)
    assert summary["ps_allreduce"] == {
        "pairs": 1,
        "median_abs_error": pytest.approx(abs((3.0 / 3.6) / 1.1 - 1)),
        "order_right": 0.0,
    }
    ranks_predicted, ranks_measured = [1, 0, 3, 4, 2], [1, 0, 2.5, 2.5, 4]  # average ranks for the tie
    expected = float(np.corrcoef(ranks_predicted, ranks_measured)[0, 1])
    # one job: predicted best d, measured best e
    assert summary["ranking"] == {"jobs": 1, "mean_spearman": pytest.approx(expected), "top1": 0.0}


def test_relative_summary_of_a_set_without_pairs_says_none():
    summary = judge.relative_summary([_result("a", 2.0, 1.0)], [_row("a", "A")])
    for name in ("gpu", "scaling", "precision", "ps_allreduce"):
        assert summary[name] == {"pairs": 0, "median_abs_error": None, "order_right": None}
    assert summary["ranking"] == {"jobs": 0, "mean_spearman": None, "top1": None}
