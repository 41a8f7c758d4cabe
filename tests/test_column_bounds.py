"""Every number of a catalogue or measurement column that reaches a model is checked against its
declared physical bounds (``paigrid.inputs.options.COLUMN_BOUNDS``): a value outside is one
sentence naming the file, line, column, value and bounds, and a non-zero exit on the command line.
Table-driven: one case per table, a few columns each, each case one cell of a built-in file."""

import csv
import io
import math
from importlib import resources

import pytest

from cli_helpers import assert_clean_error, run
from paigrid.accuracy.measurements import load_measurements
from paigrid.errors import PaigridError
from paigrid.inputs.catalog import parse_csv
from paigrid.inputs.options import COLUMN_BOUNDS, column_bound
from paigrid.llm.fabrics import load_fabrics
from paigrid.llm.models import load_catalogue


def _with_cell(name: str, column: str, value: str) -> str:
    """The header and first row of the built-in ``datasets/NAME``, with ``column`` set to ``value``."""
    text = resources.files("paigrid.datasets").joinpath(name).read_text(encoding="utf-8")
    rows = list(csv.reader(io.StringIO(text)))[:2]
    rows[1][rows[0].index(column)] = value
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue()


def _catalogue(kind):
    return lambda path: parse_csv(path.read_text(encoding="utf-8"), kind, str(path))


READERS = {
    "gpus.csv": _catalogue("gpus"),
    "links.csv": _catalogue("links"),
    "workloads.csv": _catalogue("workloads"),
    "llm_models.csv": load_catalogue,
    "llm_fabrics.csv": load_fabrics,
    "measurements_public.csv": load_measurements,
    "scaling_public.csv": load_measurements,
    "collectives_public.csv": load_measurements,
}
#: LLM measurement rows: a row that cannot be read is kept, refused with its sentence (never predicted)
LLM_ROWS = "llm_public_v2.csv"
CASES = [
    ("gpus.csv", "fp16_TFLOP_per_s", "1e308"),
    ("gpus.csv", "hbm_GB_per_s", "8e9"),  # bytes/s written where GB/s belongs
    ("gpus.csv", "memory_GB", "80000000000"),
    ("gpus.csv", "tdp_W", "1e6"),
    ("gpus.csv", "price_USD_per_gpu_hour", "3000"),
    ("links.csv", "nominal_GB_per_s", "1e308"),
    ("links.csv", "latency_us", "1e9"),
    ("workloads.csv", "fwd_GFLOP_per_sample", "1e308"),
    ("workloads.csv", "params_M", "25000000000"),  # parameters written where millions belong
    ("workloads.csv", "input_MB_per_sample", "1e12"),
    ("workloads.csv", "default_batch", "1e12"),
    ("llm_models.csv", "layers", "1000000000"),
    ("llm_models.csv", "seq_len", "1000000000000"),
    ("llm_models.csv", "vocab", "1e12"),
    ("llm_fabrics.csv", "nic_GB_per_s", "1e308"),
    ("llm_fabrics.csv", "latency_us", "1e12"),
    ("measurements_public.csv", "throughput", "1e308"),
    ("measurements_public.csv", "batch_per_gpu", "1e300"),
    ("measurements_public.csv", "nodes", "100000000000"),
    ("scaling_public.csv", "scaling_efficiency", "50"),
    ("collectives_public.csv", "bus_bandwidth_GB_per_s", "1e308"),
    (LLM_ROWS, "throughput", "1e308"),
    (LLM_ROWS, "tensor_parallel", "1e12"),
    (LLM_ROWS, "nodes", "1e12"),
]


@pytest.mark.parametrize(("name", "column", "value"), CASES, ids=[f"{n}-{c}" for n, c, _ in CASES])
def test_a_value_beyond_its_bounds_is_one_sentence(tmp_path, name, column, value):
    path = tmp_path / name
    path.write_text(_with_cell(name, column, value), encoding="utf-8")
    if name == LLM_ROWS:
        first = load_measurements(path)[0]
        assert math.isnan(first.measured)
        text = f"{path} line 2: {first.refused}"
    else:
        with pytest.raises(PaigridError) as info:
            READERS[name](path)
        text = str(info.value)
    bound = column_bound(column)
    assert bound is not None and not bound.holds(float(value))
    assert text.startswith(f"{path} line 2: column {column} holds "), text
    assert f"outside its bounds {bound.text()} ({bound.source})." in text, text
    assert "\n" not in text


@pytest.mark.parametrize("name", sorted(READERS))
def test_the_built_in_files_lie_within_the_bounds(tmp_path, name):
    path = tmp_path / name
    path.write_text(resources.files("paigrid.datasets").joinpath(name).read_text(encoding="utf-8"), encoding="utf-8")
    READERS[name](path)


def test_every_bound_is_a_range_with_a_source():
    for column, bound in COLUMN_BOUNDS.items():
        assert bound.lower < bound.upper < math.inf, column
        assert bound.source and bound.unit, column


def test_a_user_workloads_file_beyond_the_bounds_is_refused_on_the_command_line(tmp_path):
    path = tmp_path / "mine.csv"
    path.write_text(_with_cell("workloads.csv", "fwd_GFLOP_per_sample", "1e308"), encoding="utf-8")
    result = run("sweep", "--workloads", path, "--out", tmp_path / "c.h5", "-q")
    assert_clean_error(result, str(path), "line 2", "fwd_GFLOP_per_sample", "1e+308", "outside its bounds")
    assert not (tmp_path / "c.h5").exists()


def test_a_population_batch_beyond_the_bounds_is_refused(tmp_path):
    path = tmp_path / "jobs.csv"
    path.write_text("job,model,batch\na,resnet50,32\nb,resnet50,1e12\n", encoding="utf-8")
    result = run("sweep", "--workloads", path, "--out", tmp_path / "c.h5", "-q")
    assert_clean_error(result, f"{path} line 3", "column batch holds 1000000000000", "outside its bounds")


def test_a_calibration_llm_factor_beyond_its_bound_is_one_sentence(tmp_path):
    from paigrid.inputs.efficiency import load_calibration

    path = tmp_path / "c.toml"
    path.write_text("[llm]\nworkspace = 1e300\n", encoding="utf-8")
    with pytest.raises(PaigridError, match=r"\[llm\] workspace = 1e\+300 is outside the bounds of an LLM factor"):
        load_calibration(path)
    path.write_text("[llm]\nworkspace = 2.0\n", encoding="utf-8")
    assert load_calibration(path).llm == {"workspace": 2.0}


def test_the_shipped_llm_defaults_are_checked_as_a_users_values(monkeypatch):
    import dataclasses

    from paigrid.inputs import options as D

    assert D.llm_default_values()["attention"] == "fused"  # the file's spelling is the declared one
    tight = dataclasses.replace(D.BY_NAME["llm"]["workspace_GiB"], bound=D.Bound(0.0, 1.0, "GiB", "a test bound"))
    monkeypatch.setattr(D, "LLM_OPTIONS", tuple(tight if o.name == "workspace_GiB" else o for o in D.LLM_OPTIONS))
    D.llm_default_values.cache_clear()
    try:
        with pytest.raises(
            PaigridError, match="datasets/llm_defaults.toml: workspace_GiB must be a finite number at most 1"
        ):
            D.llm_default_values()  # the shipped 2 GB is outside the tightened bound
    finally:
        D.llm_default_values.cache_clear()


def test_nics_per_gpu_beyond_its_bound_is_one_sentence(tmp_path):
    from paigrid.inputs.spec import spec_from_dict

    with pytest.raises(PaigridError, match=r"s.toml: \[grid\]: nics_per_gpu 1e\+300 is outside its bounds 0 to 64"):
        spec_from_dict({"grid": {"nics_per_gpu": 1e300}}, "s.toml")
    result = run("llm", "predict", "--model", "llama3-8b", "--gpu", "H100", "--n-gpu", "8", "--nics-per-gpu", "1e300")
    assert_clean_error(result, "nics_per_gpu 1e+300 is outside its bounds 0 to 64 NICs")
