"""The judgement's per-attribute and per-GPU summaries (``paigrid.accuracy.judge``) on rows whose
errors are known by construction."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from paigrid.accuracy import judge


def _row(rid: str, gpu: str, workload: str = "w", precision: str = "tf32") -> SimpleNamespace:
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
        n_gpu=1,
        arch="1w1g",
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
