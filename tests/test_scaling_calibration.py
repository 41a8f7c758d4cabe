"""paigrid calibrate on a scaling-efficiency file: the scaling-loss options fitted by the grid fit
that the cross-validation uses (``accuracy.scalingfit``), written as a calibration that validate
applies."""

import json
import tomllib
from importlib import resources

import pytest

from cli_helpers import assert_clean_error, run
from csv_rows import read_rows, write_rows
from paigrid.accuracy.crossval import scaling_held_out
from paigrid.accuracy.measurements import load_measurements
from paigrid.inputs.catalog import Catalogues
from paigrid.inputs.efficiency import load_calibration, with_calibration
from paigrid.inputs.spec import Options

SCALING = str(resources.files("paigrid.datasets").joinpath("scaling_public.csv"))
PUBLIC = str(resources.files("paigrid.datasets").joinpath("measurements_public.csv"))
COLLECTIVES = str(resources.files("paigrid.datasets").joinpath("collectives_public.csv"))


@pytest.fixture(scope="module")
def leave_one_row_out():
    """crossval's leave-one-row-out of the overlap efficiency (with bucketed overlap), by row id."""
    cats = Catalogues.load()
    rows = load_measurements(SCALING, cats)
    results, _ = scaling_held_out(rows, cats, Options(bucket_overlap=True), ("overlap_efficiency",), "id")
    return {r["id"]: r for r in results}


def test_a_fit_on_five_rows_predicts_the_sixth_as_the_cross_validation_does(tmp_path, leave_one_row_out):
    out = tmp_path / "scaling.toml"
    result = run("calibrate", SCALING, "--rows-where", "id!=hvd-01", "--out", out)
    assert result.exit_code == 0, result.output
    written = tomllib.loads(out.read_text(encoding="utf-8"))
    fitted = leave_one_row_out["hvd-01"]["fitted"]["overlap_efficiency"]
    assert written["options"] == {"bucket_overlap": True, "overlap_efficiency": fitted}
    assert written["fit"]["rows"] == ["hvd-02", "hvd-03", "hvd-04", "hvd-05", "hvd-06"]
    assert written["fit"]["degrees_of_freedom"] == 4 and written["fit"]["rows_where"] == ["id!=hvd-01"]
    assert set(written["fit"]["residuals"]) == set(written["fit"]["rows"])
    # the printed fit: the value, the rows used and their residuals in points
    assert f"overlap_efficiency  1      {fitted:g}" in result.stdout
    assert "hvd-01" not in result.stdout and "hvd-06" in result.stdout and " pt" in result.stdout
    # validate applies the calibration's options: the held-out row's error is the cross-validation's
    held = json.loads(run("validate", SCALING, "--rows-where", "id=hvd-01", "--calibration", out, "--json").stdout)
    assert [r["id"] for r in held["rows"]] == ["hvd-01"]
    assert held["rows"][0]["error"] == pytest.approx(leave_one_row_out["hvd-01"]["error"], abs=1e-12)
    plain = json.loads(run("validate", SCALING, "--rows-where", "id=hvd-01", "--json").stdout)
    assert abs(plain["rows"][0]["error"] - held["rows"][0]["error"]) > 0.01  # the calibration moved it


def test_the_written_calibration_loads(tmp_path):
    out = tmp_path / "scaling.toml"
    assert run("calibrate", SCALING, "--out", out, "--option", "coordination_growth=linear").exit_code == 0
    calibration = load_calibration(out)
    assert calibration.options["bucket_overlap"] is True
    _, options = with_calibration(Options(), out)
    assert options.bucket_overlap and options.coordination_growth == "linear"
    assert options.overlap_efficiency == tomllib.loads(out.read_text(encoding="utf-8"))["options"]["overlap_efficiency"]
    assert 0.0 < options.overlap_efficiency < 1.0


def test_the_default_fit_of_a_scaling_file_is_the_overlap_efficiency(tmp_path):
    texts = {}
    for name, flags in (
        ("default", []),
        ("scaling", ["--fit", "scaling"]),
        ("option name", ["--fit", "overlap_efficiency"]),
    ):
        result = run("calibrate", SCALING, "--out", tmp_path / "c.toml", *flags)
        assert result.exit_code == 0, result.output
        texts[name] = tomllib.loads((tmp_path / "c.toml").read_text(encoding="utf-8"))
    assert texts["default"]["fit"]["fitted"] == ["overlap_efficiency"]
    assert "link_efficiency" not in texts["default"]
    assert texts["default"]["options"] == texts["scaling"]["options"] == texts["option name"]["options"]
    # two options: the coordination time joins, on its own grid
    result = run("calibrate", SCALING, "--out", tmp_path / "c2.toml", "--fit", "scaling,coordination")
    assert result.exit_code == 0, result.output
    both = tomllib.loads((tmp_path / "c2.toml").read_text(encoding="utf-8"))
    assert both["fit"]["fitted"] == ["overlap_efficiency", "coordination_us"] and both["fit"]["degrees_of_freedom"] == 4
    assert set(both["options"]) == {"bucket_overlap", "overlap_efficiency", "coordination_us"}


def test_scaling_fits_refuse_in_one_sentence(tmp_path):
    out = tmp_path / "c.toml"
    assert_clean_error(
        run("calibrate", SCALING, "--out", out, "--rows-where", "id=hvd-01"), "needs at least 2 scaling rows, not 1"
    )
    assert_clean_error(
        run("calibrate", SCALING, "--out", out, "--rows-where", "id=hvd-01,hvd-02", "--fit", "scaling,coordination"),
        "needs at least 3 scaling rows, not 2",
    )
    assert_clean_error(
        run("calibrate", SCALING, "--out", out, "--fit", "link"), "--fit link does not apply to scaling-efficiency rows"
    )
    assert_clean_error(
        run("calibrate", SCALING, "--out", out, "--allow-bounds"),
        "--allow-bounds applies to fits of efficiency parameters",
    )
    for path, kind in ((PUBLIC, "throughput"), (COLLECTIVES, "collective")):
        assert_clean_error(
            run("calibrate", path, "--out", out, "--fit", "scaling"),
            "--fit scaling applies to scaling-efficiency rows",
            f"not to {kind} rows",
        )
    # rows whose exchange has no all-reduce do not depend on the coordination time
    lines = read_rows(SCALING)
    for line in lines:
        line["arch"] = "ps-worker"
    assert_clean_error(
        run("calibrate", write_rows(tmp_path / "ps.csv", lines), "--out", out, "--fit", "coordination"),
        "cannot determine coordination_us",
    )
    assert not out.exists()
