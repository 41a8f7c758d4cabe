"""The zoo's workloads as catalogue workloads (``datasets/zoo_workloads.csv``): every zoo model
that ``workloads.csv`` lacks is predictable, its numbers are the zoo's layer counts, the facts
the layers do not give come from a sourced rule, and the default sweep stays as it is."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from paigrid.inputs import zoo
from paigrid.inputs.catalog import Catalogues, check_rows, csv_table, load
from paigrid.inputs.jobs import Job
from paigrid.inputs.kernel_tables import class_fields
from paigrid.kernels import dp_columns as L

ROOT = Path(__file__).resolve().parent.parent
MODELS = zoo.builtin_models()
RULES = zoo.workload_rules()
GENERATED = list(csv.DictReader(io.StringIO(zoo.zoo_workloads_path().read_text(encoding="utf-8"))))


def test_every_zoo_workload_is_a_catalogue_workload_or_llm_family():
    """A zoo workload is in workloads.csv, in zoo_workloads.csv, or an MPT model (LLM family,
    judged by the LLM model): none is left without a catalogue row."""
    catalogue = set(load("workloads").names)
    generated = {r["name"] for r in GENERATED}
    left = [
        w
        for m in MODELS
        for w in m.workloads
        if w not in catalogue and w not in generated and not m.origin.endswith("mpt.toml")
    ]
    assert left == []
    assert not catalogue & generated
    assert not any(name.startswith("mpt-") for name in generated)


def test_generated_rows_are_the_zoo_counts_and_pass_the_catalogue_rules():
    by_workload = {w: m for m in MODELS for w in m.workloads}
    header, rows = csv_table(zoo.zoo_workloads_path().read_text(encoding="utf-8"), "zoo_workloads.csv", "t")
    check_rows("workloads", header, rows, "zoo_workloads.csv")  # raises on a broken cell
    for row in GENERATED:
        model = by_workload[row["name"]]
        assert float(row["params_M"]) == pytest.approx(model.params / 1e6, rel=1e-5)
        assert float(row["fwd_GFLOP_per_sample"]) == pytest.approx(model.flops() / 1e9, rel=1e-5)
        kept = model.kept_bytes("eager") / 1e6
        assert float(row["activation_MB_per_sample"]) == pytest.approx(kept, rel=1e-5)
        assert float(row["membound_MB_per_sample"]) == pytest.approx(zoo.MEMBOUND_PER_KEPT * kept, rel=1e-5)
        rule = zoo.rule_for(row["name"], RULES)
        assert rule is not None and row["rule_source"] == rule["source"]
        assert row["optimizer"] == (model.optimizer or rule["optimizer"])
        assert row["derived_from"] == model.origin


def test_every_rule_is_sourced_used_and_names_catalogue_values():
    cats = Catalogues.load()
    names = [w for m in MODELS for w in m.workloads]
    for rule in RULES:
        assert len(rule["source"]) > 40
        assert any(zoo.rule_for(w, [rule]) for w in names), f"rule {rule['workloads']} matches no zoo workload"
        cats.optimizers.resolve(rule["optimizer"])
        assert int(rule["default_batch"]) >= 1 and float(rule["input_bytes_per_element"]) in (1.0, 4.0, 8.0)


def test_rule_for_takes_the_first_match():
    rules = [
        {"workloads": "timm-*", "source": "a"},
        {"workloads": "timm-resnet18;other", "source": "b"},
    ]
    assert zoo.rule_for("timm-resnet18", rules)["source"] == "a"
    assert zoo.rule_for("other", rules)["source"] == "b"
    assert zoo.rule_for("mpt-7b-seq2048", rules) is None


def test_with_zoo_workloads_extends_only_the_builtin_catalogue(tmp_path):
    cats = Catalogues.load()
    extended = zoo.with_zoo_workloads(cats)
    assert extended.workloads.names[: len(cats.workloads.names)] == cats.workloads.names
    assert set(extended.workloads.names) - set(cats.workloads.names) == {r["name"] for r in GENERATED}
    assert cats.workloads.names == load("workloads").names  # the default sweep's catalogue is untouched
    assert zoo.with_zoo_workloads(extended) is extended
    user = tmp_path / "workloads.csv"
    user.write_text(zoo.builtin_csv_path().with_name("workloads.csv").read_text(encoding="utf-8"), encoding="utf-8")
    mine = Catalogues.load({"workloads": user})
    assert zoo.with_zoo_workloads(mine) is mine


def test_a_zoo_workload_job_is_timed_by_its_operator_classes():
    """A zoo workload reads its workload_classes.csv row (per-class FLOPs, launches) like a
    catalogue workload, not the one-GEMM fallback of a user catalogue."""
    cats = zoo.with_zoo_workloads(Catalogues.load())
    job = Job(name="convnext", model="timm-convnext_tiny", batch=32, options={"grad_accum_steps": 1})
    fields = class_fields(job, cats)
    assert fields[L.J_LAUNCHES] > 0
    assert fields[L.J_CLASS_FLOP + L.CLASS_SMALL_CONV] > 0  # the depthwise 7x7 convolutions


def test_the_public_file_predicts_its_zoo_models():
    from paigrid.accuracy.publicrows import read_public

    reading = read_public(ROOT / "datasets" / "measured_public_v2.csv")
    assert not [r for r in reading.refused if r.category == "zoo model not in the workload catalogue"]
    workloads = {r.workload for r in reading.rows}
    assert {"tacotron2", "ncf", "timm-vit_base_patch16_224", "alexnet"} <= workloads
    assert len(reading.rows) + len(reading.doubtful) > 1800
    # a zoo model's row silent on its optimizer says it took the family rule's
    silent = [r for r in reading.rows if r.workload == "tacotron2"]
    rule = "optimizer not stated: the zoo family rule's (datasets/zoo_workload_rules.csv)"
    assert silent and all(rule in reading.assumptions[r.id] for r in silent)
    stated = [r for r in reading.rows if r.workload == "alexnet"]
    assert stated and not any(rule in reading.assumptions[r.id] for r in stated)
