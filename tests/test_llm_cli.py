"""The LLM commands and the ``llm`` row kind: validate, sweep, query, predict, their files and
their one-sentence errors."""

import csv
import json
import re
from pathlib import Path

import h5py
import numpy as np
import pytest

from cli_helpers import assert_clean_error, run
from paigrid.inputs.catalog import Catalogues
from paigrid.inputs.efficiency import defaults
from paigrid.kernels import llm_columns as K
from paigrid.llm.evaluate import evaluate
from paigrid.llm.models import model
from paigrid.llm.parallelism import enumerate_layouts, layout_label
from paigrid.llm.rows import parse_row
from paigrid.llm.shapes import megatron_flops_per_iteration
from paigrid.llm.tables import Hardware, LlmOptions, intra_link_for

ROOT = Path(__file__).resolve().parent.parent
PUBLIC = ROOT / "datasets" / "llm_public.csv"
CATS = Catalogues.load()


def _rows():
    with open(PUBLIC, newline="") as handle:
        return list(csv.DictReader(handle))


def test_public_rows_convert_to_the_iteration_times_they_state():
    """hw-TFLOP/s/GPU -> tokens/s with the row's FLOPs per token gives back the iteration time
    written in each row's notes (Megatron's formula, so this checks the conversion)."""
    for cells in _rows():
        row = parse_row(cells, cells["id"], CATS)
        stated = float(re.search(r"iteration time (\d+) ms", cells["notes"]).group(1)) / 1000
        batch, seq = int(cells["global_batch"]), int(cells["seq_len"])
        assert batch * seq / row.measured == pytest.approx(stated, rel=0.005)
        flops = megatron_flops_per_iteration(
            batch, seq, int(cells["layers"]), int(cells["hidden"]), int(cells["vocab"])
        )
        n = int(cells["gpus_per_node"]) * int(cells["nodes"])
        assert flops / stated / n / 1e12 == pytest.approx(float(cells["throughput"]), rel=0.005)


def test_validate_llm_rows():
    result = run("validate", PUBLIC, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["kind"] == "llm" and data["unit"] == "tokens/s" and len(data["rows"]) == 8
    for r in data["rows"]:
        assert r["predicted"] > 0 and r["error"] == pytest.approx(r["predicted"] / r["measured"] - 1)
    errors = sorted(abs(r["error"]) for r in data["rows"])
    assert data["summary"]["overall"]["median_abs_error"] == pytest.approx((errors[3] + errors[4]) / 2)
    text = run("validate", PUBLIC)
    assert text.exit_code == 0 and "median |error|" in text.output


@pytest.mark.parametrize(
    "change, fragment",
    [
        ({"throughput_unit": "TFLOPS"}, "throughput_unit must be one of"),
        ({"data_parallel": "3"}, "is not the"),
        ({"gpu": "Z900"}, "is not in the GPU catalogue"),
        ({"recompute": "some"}, "recompute must be one of"),
        ({"heads": "7"}, "not a multiple of heads"),
        ({"sequence_parallel": "maybe"}, "true or false"),
    ],
)
def test_a_bad_llm_row_is_refused_with_its_sentence_and_the_file_goes_on(tmp_path, change, fragment):
    """One bad row no longer aborts the file: it is listed as refused with its one sentence,
    counted in the summary and left out of the medians; the other rows are predicted."""
    rows = _rows()
    rows[1].update(change)
    path = tmp_path / "bad.csv"
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    result = run("validate", path, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    bad = [r for r in data["rows"] if not r["modelled"]]
    assert [r["id"] for r in bad] == [rows[1]["id"]]
    assert fragment in bad[0]["note"] and bad[0]["note"].startswith("refused: ")
    assert data["summary"]["refused"] == {"count": 1, "runs": 1}
    assert data["summary"]["overall"]["count"] == len(rows) - 1
    text = run("validate", path)
    assert text.exit_code == 0 and "refused: 1 row(s) of 1 run(s)" in text.output


def test_a_missing_required_column_is_named(tmp_path):
    text = PUBLIC.read_text().replace(",global_batch,", ",batch,", 1)
    path = tmp_path / "missing.csv"
    path.write_text(text)
    assert_clean_error(run("validate", path), "global_batch")


def test_sweep_query_and_their_file(tmp_path):
    out = tmp_path / "llm.h5"
    result = run(
        "llm",
        "sweep",
        "-o",
        out,
        "--models",
        "llama3-8b",
        "--n-gpu",
        "8,64",
        "--gpu",
        "H100",
        "--domain",
        "8",
        "--network",
        "ib-ndr-400g,rdma-100g",
        "-q",
    )
    assert result.exit_code == 0, result.output
    # an alias of paigrid sweep: a format-5 cube, reduce-only, the results in its group llm
    with h5py.File(out) as f:
        assert f.attrs["format_version"][0] == 5 and f.attrs["families"] == "llm" and f.attrs["complete"]
        group = f["llm"]
        for name, item in group.items():
            phantom = b"not a netCDF variable" in bytes(item.attrs.get("NAME", b""))  # a bare dimension
            if isinstance(item, h5py.Dataset) and not phantom:
                assert "units" in item.attrs, name
        assert "step_time" not in group  # no --full: the bests only
        # over (job, gpu, n_gpu, domain, network, precision)
        step = group["best_step_time"][0, 0, 1, 0, :, 0]
    # the stored best is the brute-force minimum over every enumerated layout
    m = model("llama3-8b")
    layouts = enumerate_layouts(m, 64)
    designs = [
        Hardware("H100-SXM5-80GB", "amp-bf16", 8, intra_link_for(CATS, "H100-SXM5-80GB"), n, 1.0)
        for n in ("ib-ndr-400g", "rdma-100g")
    ]
    res = evaluate(m, layouts, designs, CATS, defaults(), LlmOptions.defaults())
    assert np.allclose(step, np.nanmin(res[:, :, K.R_STEP], axis=0), rtol=1e-12)
    query = run("llm", "query", out, "--model", "llama3-8b", "--tokens", "1e12", "--json")
    assert query.exit_code == 0, query.output
    rows = json.loads(query.output)
    assert [r["n_gpu"] for r in rows] == [8, 64]
    best64 = rows[1]
    assert best64["step_time"] == pytest.approx(float(np.nanmin(step)))
    assert best64["train_days"] == pytest.approx(1e12 / best64["tokens_per_s"] / 86400)
    every = json.loads(run("llm", "query", out, "--model", "llama3-8b", "--every-design", "--json").output)
    assert len(every) == 4
    assert_clean_error(run("llm", "query", out, "--model", "llama3-70b"), "has no model")
    assert_clean_error(run("llm", "query", out, "--model", "llama3-8b", "--n-gpu", "16"), "no n_gpu 16")
    assert_clean_error(run("llm", "query", tmp_path / "nothing.h5", "--model", "x"), "cannot read")


def test_predict_breakdown_and_invalid_layouts():
    ok = run(
        "llm",
        "predict",
        "--model",
        "llama3-70b",
        "--gpu",
        "H100",
        "--n-gpu",
        "64",
        "--tp",
        "8",
        "--pp",
        "4",
        "--vpp",
        "2",
        "--recompute",
        "full",
        "--tokens",
        "1e12",
        "--json",
    )
    assert ok.exit_code == 0, ok.output
    r = json.loads(ok.output)
    assert r["valid"] and r["bubble"] > 0 and r["tp_comm"] > 0 and r["pp_comm"] > 0
    parts = r["compute"] + r["tp_comm"] + r["cp_comm_exposed"] + r["ep_comm"]
    assert r["step_time"] == pytest.approx(parts + r["bubble"] + r["pp_comm"] + r["dp_comm_exposed"] + r["optimizer"])
    table = run(
        "llm",
        "predict",
        "--model",
        "llama3-70b",
        "--gpu",
        "H100",
        "--n-gpu",
        "64",
        "--tp",
        "8",
        "--pp",
        "4",
        "--recompute",
        "full",
    )
    assert table.exit_code == 0 and "bubble" in table.output
    assert_clean_error(
        run("llm", "predict", "--model", "llama3-70b", "--gpu", "H100", "--n-gpu", "8"),
        "invalid layout tp1 pp1 dp8",
        "GiB per GPU",
    )
    assert_clean_error(run("llm", "predict", "--model", "llama9", "--gpu", "H100", "--n-gpu", "8"), "unknown")
    assert_clean_error(
        run("llm", "predict", "--model", "llama3-70b", "--gpu", "H100", "--n-gpu", "12", "--tp", "8"), "not a multiple"
    )
    assert_clean_error(
        run("llm", "predict", "--model", "llama3-70b", "--gpu", "H100", "--n-gpu", "8", "--option", "attention=magic"),
        "one of eager, fused",
    )


def test_models_lists_the_catalogue():
    result = run("llm", "models", "--json")
    assert result.exit_code == 0
    names = [r["model"] for r in json.loads(result.output)]
    assert "llama3-405b" in names and "mixtral-8x7b" in names


@pytest.mark.slow
def test_llm_page_is_current():
    """docs/llm.md is what tools/llm_page.py writes now (its tables are computed)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("llm_page_under_test", ROOT / "tools" / "llm_page.py")
    page = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(page)
    assert page.render() == (ROOT / "docs" / "llm.md").read_text(encoding="utf-8"), (
        "docs/llm.md is not current: run python tools/llm_page.py"
    )


def test_full_sweep_states_its_size_refuses_above_the_limit_and_keeps_every_pair(tmp_path):
    out = tmp_path / "full.h5"
    args = [
        "llm",
        "sweep",
        "-o",
        out,
        "--models",
        "llama3-8b",
        "--n-gpu",
        "8,64",
        "--gpu",
        "H100",
        "--domain",
        "8",
        "--network",
        "ib-ndr-400g,tor-roce-3to1",
        "--full",
        "-q",
    ]
    refused = run(*args, "--max-full-gb", "0.0001")
    # the size line first, then the one-sentence error (it states the same size)
    lines = refused.output.strip().splitlines()
    assert refused.exit_code != 0 and "Traceback" not in refused.output and len(lines) == 2
    assert lines[0].startswith("full LLM sweep: ") and " cells, " in lines[0]
    stated = re.search(r" cells, ([0-9.e+-]+) GB of results$", lines[0]).group(1)
    assert float(stated) > 0.0001
    assert lines[1] == (
        f"paigrid: error: a full LLM sweep of these flags writes {stated} GB, more than the limit of 0.0001 GB; "
        "raise --max-full-gb to write it or drop --full."
    )
    assert not out.exists() and not list(tmp_path.iterdir())
    result = run(*args)
    assert result.exit_code == 0, result.output
    assert "full LLM sweep: " in result.output
    m = model("llama3-8b")
    layouts = enumerate_layouts(m, 64)
    designs = [
        Hardware("H100-SXM5-80GB", "amp-bf16", 8, intra_link_for(CATS, "H100-SXM5-80GB"), n, 1.0)
        for n in ("ib-ndr-400g", "tor-roce-3to1")
    ]
    res = evaluate(m, layouts, designs, CATS, defaults(), LlmOptions.defaults())
    # the unified cube (paigrid sweep's, group llm): cells over (job, layout, gpu, n_gpu, domain,
    # network, precision) in float32, the layout axis one list of labels for every GPU count
    with h5py.File(out) as f:
        assert f.attrs["mode"] == "full"
        group = f["llm"]
        for name in ("step_time", "invalid_reason", "tp", "best_step_time"):
            assert "units" in group[name].attrs, name
        axis = [v.decode() for v in group["layout"][:]]
        assert group["step_time"].shape == (1, len(axis), 1, 2, 1, 2, 1)
        at = [axis.index(layout_label(lay, with_dp=False)) for lay in layouts]  # every enumerated layout is there
        cells = group["step_time"][0, :, 0, 1, 0, :, 0]  # at 64 GPUs
        expected = np.where(res[:, :, K.R_REASON] == K.REASON_VALID, res[:, :, K.R_STEP], np.nan)
        np.testing.assert_array_equal(cells[at], expected.astype(np.float32))
        np.testing.assert_array_equal(group["invalid_reason"][0, :, 0, 1, 0, :, 0][at], res[:, :, K.R_REASON])
        assert [int(group["tp"][i]) for i in at] == [lay.tp for lay in layouts]
        # the reduced part is the minimum of the full one (every label of the axis at 64 GPUs)
        best = group["best_step_time"][0, 0, 1, 0, :, 0]
        np.testing.assert_array_equal(best.astype(np.float32), np.nanmin(cells, axis=0))
        assert np.allclose(best, np.nanmin(expected, axis=0), rtol=1e-12)
