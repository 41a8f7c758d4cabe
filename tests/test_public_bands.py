"""The prediction bands of the public v2 file (``datasets/prediction_bands.csv``): computed by
``bench/accuracy_public.py`` from the held-out (uncalibrated) predictions of its rows, and the
bands ``prediction_band`` gives where they exist."""

from __future__ import annotations

import csv
import io
import math
import runpy
from importlib import resources
from pathlib import Path

from paigrid.inputs.efficiency import PREFERRED_BANDS, prediction_band

ROOT = Path(__file__).resolve().parent.parent
TEXT = resources.files("paigrid.datasets").joinpath("prediction_bands.csv").read_text(encoding="utf-8")
ROWS = list(csv.DictReader(io.StringIO(TEXT)))


def _v2_rows():
    return [r for r in ROWS if r["measurements"] == PREFERRED_BANDS]


def test_the_v2_bands_are_what_the_script_computes():
    computed = runpy.run_path(str(ROOT / "bench" / "accuracy_public.py"))["v2_band_rows"]()
    stored = [[r[c] for c in ROWS[0]] for r in _v2_rows()]
    assert [[str(c) for c in row] for row in computed] == stored, "run python bench/accuracy.py"


def test_every_band_row_names_its_file_and_the_command():
    assert {r["measurements"] for r in ROWS} == {"measurements_public.csv", PREFERRED_BANDS}
    v2 = _v2_rows()
    assert {r["group"] for r in v2} == {"single_gpu", "multi_gpu_one_server", "multi_server"}
    assert all("python bench/accuracy.py" in r["source"] and "measured_public_v2.csv" in r["source"] for r in v2)
    for r in v2:  # a band from fewer rows than the minimum is left empty and says why
        assert (r["band"] == "") == (int(r["predictions"]) < 10)
        assert r["band"] or "fewer than" in r["source"]


def test_prediction_band_prefers_the_v2_band_and_falls_back():
    v2 = {r["group"]: r for r in _v2_rows()}
    old = {(r["calibration"], r["group"]): r for r in ROWS if r["model"] == "pai-v2" and r not in _v2_rows()}
    for group, row in v2.items():
        band = prediction_band("pai-v2", False, group)
        if row["band"]:
            assert band == float(row["band"])
        elif old["uncalibrated", group]["band"]:
            assert band == float(old["uncalibrated", group]["band"])
        else:
            assert math.isnan(band)
    # the v2 file gives no calibrated band (the held-out fits need the full run): the 33 rows' band
    assert prediction_band("pai-v2", True, "single_gpu") == float(old["calibrated", "single_gpu"]["band"])


def test_a_calibrated_block_of_another_reading_is_marked_out_of_date():
    page = runpy.run_path(str(ROOT / "bench" / "accuracy_public.py"))
    block = ["### Calibrated, held out", "| uncalibrated | 41.8%, 43.7% (133) | 39.8%, 51.3% (292) | -, - (0) |"]
    assert page["block_row_count"](block) == 425
    assert page["stale_note"](block, 425) == []
    note = " ".join(page["stale_note"](block, 1891))
    assert "out of date" in note and "425" in note and "1891" in note
    assert page["stale_note"](["(not computed yet: run `python bench/accuracy.py`)"], 1891) == []
