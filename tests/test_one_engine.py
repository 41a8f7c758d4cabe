"""One engine: data-parallel workloads and LLM models as jobs of one spec, one cube, one query,
one info, one predict and one Python API.

The acceptance sweep: resnet50, bert-large-seq128, llama3-8b and llama3-70b on A100 and H100 at
8, 64 and 512 GPUs in amp-bf16 (the LLM layout space kept small by the spec's ``[llm]`` table,
so that the test takes seconds), swept to one cube, queried, described, opened with xarray, and
killed (SIGKILL) mid-sweep and resumed to the same answers.
"""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
import xarray as xr

import paigrid
from cli_helpers import assert_clean_error, run
from paigrid.errors import PaigridError
from paigrid.inputs.catalog import Catalogues
from paigrid.inputs.efficiency import defaults
from paigrid.inputs.jobs import job_family, split_jobs
from paigrid.inputs.spec import GRID_KEYS, spec_from_dict
from paigrid.kernels import llm_columns as K
from paigrid.llm.evaluate import evaluate
from paigrid.llm.models import model
from paigrid.llm.parallelism import (
    REASON_N_GPU,
    SPACE_KEYS,
    Space,
    layout_label,
    parse_label,
    space_default,
    space_from_table,
)
from paigrid.llm.tables import Hardware, LlmOptions, intra_link_for

SPEC = """
workloads = ["resnet50", "bert-large-seq128", "llama3-8b", "llama3-70b"]
jobs_per_block = 1

[grid]
gpu = ["A100-SXM4-80GB", "H100-SXM5-80GB"]
n_gpu = [8, 64, 512]
precision = ["amp-bf16"]
network = ["ib-ndr-400g", "rdma-100g"]

[llm]
cp = [1]
vpp = [1, 2]
micro_batch = [1]
zero = [1]
recompute = ["selective", "full"]
"""
LABEL = r"^tp\d+-pp\d+-dp\d+-v\d+-cp\d+-ep\d+-mb\d+-zero\d-(none|selective|full)-(sp|nosp)$"


def command(*args, env=None):
    """``paigrid ARGS`` in a process of its own (for SIGKILL)."""
    full = {
        **os.environ,
        "NUMBA_CACHE_DIR": os.environ.get("NUMBA_CACHE_DIR", str(Path.home() / ".cache" / "paigrid-tests-numba")),
        **(env or {}),
    }
    return subprocess.run(
        [sys.executable, "-c", "from paigrid.cli import main; main()", *map(str, args)],
        env=full,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    folder = tmp_path_factory.mktemp("one-engine")
    (folder / "spec.toml").write_text(SPEC)
    result = run("sweep", folder / "spec.toml", "-o", folder / "cube.h5", "-q")
    assert result.exit_code == 0, result.output
    return folder


def test_the_mixed_sweep_writes_one_cube_and_best_arch_gives_one_row_per_job(swept):
    assert sorted(p.name for p in swept.iterdir()) == ["cube.h5", "spec.toml"]
    result = run("query", swept / "cube.h5", "--best-arch", "--json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert [r["job"] for r in rows] == ["resnet50", "bert-large-seq128", "llama3-8b", "llama3-70b"]
    assert [r["family"] for r in rows] == ["dp", "dp", "llm", "llm"]
    columns = list(rows[0])
    assert all(list(r) == columns for r in rows)  # the same columns for both families
    for r in rows[:2]:
        assert r["arch"] in ("1w1g", "1wng", "allreduce-local", "ps-worker", "allreduce-cluster")
        assert r["domain"] is None  # empty where a column does not apply
        assert 0 < r["mfu"] < 1  # model FLOPs over the dense peak (tests/test_reader.py checks the value)
    import re

    for r in rows[2:]:
        assert re.match(LABEL, r["arch"]), r["arch"]
        layout = parse_label(r["arch"])
        assert layout.n_gpu == r["n_gpu"] and 0 < r["mfu"] < 1 and r["domain"] == 8
        assert r["throughput_tokens"] == pytest.approx(r["throughput"] * model(r["job"]).seq_len)
        assert r["cost_tokens"] == pytest.approx(r["cost"] / model(r["job"]).seq_len)
    # the DP rows are those of the data-parallel query alone
    from paigrid.cube import open_cube
    from paigrid.query import best_configurations

    cube = open_cube(swept / "cube.h5")
    try:
        alone = best_configurations(cube)
    finally:
        cube.close()
    assert [(r["arch"], r["gpu"], r["n_gpu"], r["step_time"]) for r in alone] == [
        (r["arch"], r["gpu"], r["n_gpu"], r["step_time"]) for r in rows[:2]
    ]


def test_the_llm_best_is_the_minimum_of_the_kernel_over_every_layout(swept):
    """The stored best of llama3-8b at 64 H100s is the brute-force minimum of the LLM kernel over
    every layout the space enumerates, and the stored cells are the kernel's values."""
    from paigrid.llm.parallelism import enumerate_layouts

    with h5py.File(swept / "cube.h5", "r") as f:
        g = f["llm"]
        labels = [v.decode() for v in g["layout"][:]]
        networks = [v.decode() for v in g["network"][:]]
        best = g["best_step_time"][0, 1, 1, 0, :, 0]  # llama3-8b, H100, 64 GPUs, domain 8, each network
        cells = g["step_time"][0, :, 1, 1, 0, :, 0]
        reason = g["invalid_reason"][0, :, 1, 1, 0, :, 0]
    space = Space(cp=(1,), vpp=(1, 2), micro_batch=(1,), zero=(1,), recompute=("selective", "full"))
    m, cats = model("llama3-8b"), Catalogues.load()
    layouts = enumerate_layouts(m, 64, space)
    designs = [
        Hardware("H100-SXM5-80GB", "amp-bf16", 8, intra_link_for(cats, "H100-SXM5-80GB"), n, 1.0) for n in networks
    ]
    res = evaluate(m, layouts, designs, cats, defaults(), LlmOptions.defaults())
    np.testing.assert_allclose(best, np.nanmin(res[:, :, K.R_STEP], axis=0), rtol=1e-12)
    rows = [labels.index(layout_label(lay, with_dp=False)) for lay in layouts]
    np.testing.assert_array_equal(cells[rows], res[:, :, K.R_STEP].astype(np.float32))
    others = np.setdiff1d(np.arange(len(labels)), rows)  # labels that do not suit 64 GPUs of this model
    assert np.isnan(cells[others]).all() and (reason[others] != 0).all()
    assert (reason == REASON_N_GPU).any()  # some labels do not divide 64 GPUs


def test_info_describes_every_family(swept):
    result = run("info", swept / "cube.h5")
    assert result.exit_code == 0, result.output
    text = result.output
    assert text.startswith("families: dp (data-parallel workloads, at the root), llm (transformers, group llm)")
    assert "llm family (group llm):" in text and "layout grammar: tp{t}-pp{p}" in text
    assert "input_sha256" in text and "llm_catalogue_sha256" in text


def test_every_group_opens_with_xarray_h5netcdf(swept):
    import hdf5plugin  # noqa: F401

    with xr.open_dataset(swept / "cube.h5", engine="h5netcdf") as root:
        assert list(root["job"].values) == ["resnet50", "bert-large-seq128"]
        assert root.attrs["families"] == "dp llm" and int(root.attrs["format_version"]) == 5
    with xr.open_dataset(swept / "cube.h5", engine="h5netcdf", group="llm") as llm:
        assert llm["step_time"].dims == ("job", "layout", "gpu", "n_gpu", "domain", "network", "precision")
        assert {"tp", "pp", "cp", "ep", "vpp", "micro_batch", "zero", "recompute", "sp"} <= set(llm.coords)
        assert llm["step_time"].attrs["units"] == "s" and llm["best_layout"].dtype == np.int32
        assert list(llm["n_gpu"].values) == [8, 64, 512]
    with h5py.File(swept / "cube.h5", "r") as f:
        assert all(f["llm"][name].fletcher32 for name in ("step_time", "invalid_reason", "best_step_time"))


def test_the_python_api_answers_both_families(swept):
    llm = paigrid.open_dataset(swept / "cube.h5", group="llm")
    best = llm.paigrid.best()
    rows = json.loads(run("query", swept / "cube.h5", "--best-arch", "--json").output)[2:]
    assert list(best.arch.values) == [r["arch"] for r in rows]
    np.testing.assert_allclose(best.step_time.values, [r["step_time"] for r in rows])
    front = llm.paigrid.pareto("llama3-70b")
    times = front.step_time.values / 1.0
    assert front.sizes["point"] >= 1 and np.all(np.diff(times) >= 0)
    parts = llm.paigrid.breakdown(
        job="llama3-70b",
        layout=rows[1]["arch"],
        gpu=rows[1]["gpu"],
        domain=8,
        network=rows[1]["network"],
        precision="amp-bf16",
    )
    assert float(parts.step_time) == pytest.approx(rows[1]["step_time"], rel=1e-6)
    llm.close()


def test_where_on_a_dimension_one_family_lacks_filters_the_other_and_says_so(swept):
    result = run("query", swept / "cube.h5", "--best-arch", "--where", "arch=allreduce-cluster", "--json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert all(r["arch"] == "allreduce-cluster" for r in rows[:2])
    assert all(r["family"] == "llm" and r["arch"] for r in rows[2:])
    assert "--where arch filters the data-parallel jobs only" in result.stderr
    tp8 = json.loads(run("query", swept / "cube.h5", "--best-arch", "--where", "tp=8", "--json").stdout)
    assert all(r["arch"].startswith("tp8-") for r in tp8[2:])
    top = json.loads(
        run("query", swept / "cube.h5", "--top", "3", "--job", "llama3-70b", "--best-arch", "--json").output
    )
    assert len(top) == 3 and top[0]["step_time"] <= top[1]["step_time"] <= top[2]["step_time"]
    energy = json.loads(
        run("query", swept / "cube.h5", "--best-arch", "--by", "energy", "--tokens", "1e12", "--json").output
    )
    assert all(r["train_days"] > 0 for r in energy)


def test_predict_takes_either_family():
    llm = run(
        "predict", "--workload", "llama3-70b", "--gpu", "H100", "--n-gpu", "64", "--tp", "8", "--pp", "4", "--json"
    )
    assert llm.exit_code == 0, llm.output
    alias = run(
        "llm", "predict", "--model", "llama3-70b", "--gpu", "H100", "--n-gpu", "64", "--tp", "8", "--pp", "4", "--json"
    )
    assert json.loads(llm.output) == json.loads(alias.output)
    label = run(
        "predict",
        "--workload",
        "llama3-70b",
        "--gpu",
        "H100",
        "--n-gpu",
        "64",
        "--layout",
        "tp8-pp4-v1-cp1-ep1-mb1-zero1-selective-sp",
        "--json",
    )
    assert json.loads(label.output)["step_time"] == json.loads(llm.output)["step_time"]
    assert_clean_error(run("predict", "--workload", "resnet50", "--gpu", "V100", "--n-gpu", "8"), "needs --arch")
    assert_clean_error(
        run("predict", "--workload", "llama3-8b", "--gpu", "H100", "--n-gpu", "8", "--arch", "1w1g"), "LLM model"
    )


def test_a_sigkilled_mixed_sweep_resumes_to_the_same_answers(swept, tmp_path):
    out = tmp_path / "cube.h5"
    killed = command("sweep", swept / "spec.toml", "-o", out, "-q", env={"PAIGRID_TEST_KILL_AT": "after-llm-block-2"})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert not out.exists() and Path(f"{out}.partial").exists()
    with h5py.File(f"{out}.partial", "r") as f:
        assert f["block_done"][:].all() and int(f["llm/block_done"][:].sum()) == 2
    assert_clean_error(run("query", out, "--best-arch"), "unfinished")
    resumed = run("sweep", swept / "spec.toml", "-o", out, "-q", "--resume")
    assert resumed.exit_code == 0, resumed.output
    again = run("query", out, "--best-arch", "--json").output
    assert json.loads(again) == json.loads(run("query", swept / "cube.h5", "--best-arch", "--json").output)
    with h5py.File(out, "r") as a, h5py.File(swept / "cube.h5", "r") as b:
        np.testing.assert_array_equal(a["llm/step_time"][:], b["llm/step_time"][:])


def test_an_llm_only_sweep_and_a_reduce_only_one(tmp_path):
    spec = {
        "workloads": ["llama3-8b"],
        "grid": {"gpu": ["H100"], "n_gpu": [8], "network": ["ib-ndr-400g"]},
        "llm": {"cp": [1], "vpp": [1], "micro_batch": [1], "zero": [1], "recompute": ["selective"]},
    }
    ds = paigrid.sweep(spec, out=tmp_path / "llm.h5")
    assert ds.attrs["family"] == "llm" and ds.sizes["job"] == 1
    ds.close()
    rows = json.loads(run("query", tmp_path / "llm.h5", "--best-arch", "--json").output)
    assert [r["job"] for r in rows] == ["llama3-8b"]
    reduced = paigrid.sweep(spec, out=tmp_path / "reduced.h5", reduce_only=True)
    assert "step_time" not in reduced and "best_step_time" in reduced
    assert float(reduced.paigrid.best().step_time[0]) == rows[0]["step_time"]
    reduced.close()
    assert_clean_error(run("query", tmp_path / "reduced.h5", "--best-arch", "--top", "2"), "reduce-only")
    assert "llm family" in run("info", tmp_path / "llm.h5").output
    with pytest.raises(PaigridError, match="holds no data-parallel jobs"):
        paigrid.open_dataset(tmp_path / "llm.h5")  # the root of an LLM-only cube: one sentence


def test_job_names_of_both_families_and_ambiguity(tmp_path):
    cats = Catalogues.load()
    assert job_family("resnet50", cats) == ("dp", "resnet50")
    assert job_family("llama3-8b", cats) == ("llm", "llama3-8b")
    with pytest.raises(PaigridError, match="nor is it an LLM model"):
        job_family("llama9", cats)
    # a user workloads catalogue that also has a row named llama3-8b: ambiguous, naming both
    text = Path(paigrid.__file__).parent.parent.joinpath("datasets", "workloads.csv").read_text()
    header, first = text.splitlines()[:2]
    (tmp_path / "w.csv").write_text(f"{header}\nllama3-8b{first[first.index(',') :]}\n")
    cats.workloads = __import__("paigrid.inputs.catalog", fromlist=["parse_csv"]).parse_csv(
        (tmp_path / "w.csv").read_text(), "workloads", str(tmp_path / "w.csv")
    )
    with pytest.raises(PaigridError, match="ambiguous: it is the workload 'llama3-8b' of .*w.csv and the LLM model"):
        job_family("llama3-8b", cats)
    # a population mixing both families, and a models CSV in llm_models.csv's columns
    (tmp_path / "pop.csv").write_text("job,model\na,resnet50\nb,llama3-8b\n")
    dp, llm, _ = split_jobs(spec_from_dict({"workloads": "pop.csv"}, "spec", tmp_path), Catalogues.load())
    assert [j.name for j in dp] == ["a"] and [(j.name, j.model.name) for j in llm] == [("b", "llama3-8b")]
    models = Path(paigrid.__file__).parent.parent.joinpath("datasets", "llm_models.csv").read_text().splitlines()
    (tmp_path / "models.csv").write_text("\n".join(models[:2]) + "\n")
    dp, llm, _ = split_jobs(spec_from_dict({"workloads": "models.csv"}, "spec", tmp_path), Catalogues.load())
    assert dp == [] and len(llm) == 1


def test_the_spec_keys_are_declared_once_and_checked():
    assert {k.name for k in GRID_KEYS} >= {
        "gpu",
        "n_gpu",
        "precision",
        "network",
        "domain",
        "gpus_per_node",
        "nics_per_gpu",
    }
    assert space_from_table({}, "x") == Space()
    assert all(
        space_default(k) == (list(v) if isinstance(v := getattr(Space(), k.name), tuple) else v) for k in SPACE_KEYS
    )
    with pytest.raises(PaigridError, match="unknown \\[llm\\] key"):
        space_from_table({"tensor": [2]}, "x")
    with pytest.raises(PaigridError, match="llm.zero takes 0, 1, 2, 3"):
        space_from_table({"zero": [4]}, "x")
    with pytest.raises(PaigridError, match="grid.domain"):
        spec_from_dict({"grid": {"domain": [0]}}, "x")
    spec = spec_from_dict({"grid": {"gpus_per_node": 4, "nics_per_gpu": 0.5}}, "x")
    assert spec.options.gpus_per_node == 4 and spec.options.nics_per_node == 2
    with pytest.raises(PaigridError, match="given twice"):
        spec_from_dict({"grid": {"gpus_per_node": 4}, "options": {"gpus_per_node": 8}}, "x")


def test_layout_labels_round_trip():
    for lay in (
        parse_label("tp8-pp4-dp2-v2-cp1-ep1-mb1-zero1-selective-sp"),
        parse_label("tp2-pp1-dp4-v1-cp2-ep1-mb4-zero3-full-nosp"),
    ):
        assert parse_label(layout_label(lay)) == lay
        assert parse_label(layout_label(lay, with_dp=False), lay.n_gpu) == lay
    one = parse_label("tp1-pp1-v1-cp1-ep1-mb1-zero0-none-nosp", 8)
    assert one.dp == 8 and not one.sp
    with pytest.raises(PaigridError, match="does not divide 12 GPUs"):
        parse_label("tp8-pp1-v1-cp1-ep1-mb1-zero1-selective-sp", 12)
    with pytest.raises(PaigridError, match="not a layout label"):
        parse_label("tp8 pp4")


def test_the_declared_keys_are_documented():
    """docs/commands.md holds the [grid] and [llm] tables as the declarations render them."""
    from paigrid.inputs.spec import grid_keys_table
    from paigrid.llm.parallelism import space_keys_table

    text = (Path(__file__).resolve().parent.parent / "docs" / "commands.md").read_text()
    assert grid_keys_table() in text and space_keys_table() in text


def test_a_population_with_llm_jobs_sweeps_into_one_cube(tmp_path):
    """The rows of ``paigrid population --llm-share`` that name LLM models are LLM-family jobs
    (named by their job column; their data-parallel current_* columns do not apply to them)."""
    from paigrid.study.population import synthetic_population
    from paigrid.study.trace import write_population

    rows = synthetic_population(4, seed=1, llm_share=0.5)
    write_population(rows, tmp_path / "pop.csv")
    spec = {
        "workloads": "pop.csv",
        "grid": {"gpu": ["H100"], "n_gpu": [8, 64], "precision": ["amp-bf16"], "network": ["ib-ndr-400g"]},
        "llm": {"cp": [1], "vpp": [1], "micro_batch": [1], "zero": [1], "recompute": ["full"]},
    }
    dp, llm, _ = split_jobs(spec_from_dict(spec, "spec", tmp_path), Catalogues.load())
    assert [j.name for j in llm] == [r["job"] for r in rows if r["job"].startswith("llm-")]
    assert len(dp) + len(llm) == 4
    (tmp_path / "spec.toml").write_text(
        'workloads = "pop.csv"\n[grid]\ngpu = ["H100"]\nn_gpu = [8, 64]\nprecision = ["amp-bf16"]\n'
        'network = ["ib-ndr-400g"]\n[llm]\ncp = [1]\nvpp = [1]\nmicro_batch = [1]\nzero = [1]\nrecompute = ["full"]\n'
    )
    swept = run("sweep", tmp_path / "spec.toml", "-o", tmp_path / "cube.h5", "-q")
    assert swept.exit_code == 0, swept.output
    answer = json.loads(run("query", tmp_path / "cube.h5", "--best-arch", "--json").output)
    assert sorted(r["job"] for r in answer) == sorted(r["job"] for r in rows)
    assert {r["family"] for r in answer} == {"dp", "llm"}


def test_per_answers_once_per_value_for_every_family(swept):
    rows = json.loads(run("query", swept / "cube.h5", "--best-arch", "--per", "n_gpu", "--json").output)
    by_job = {}
    for r in rows:
        by_job.setdefault(r["job"], []).append(r["n_gpu"])
    assert by_job["resnet50"] == [8, 64, 512] and by_job["llama3-8b"] == [8, 64, 512]
    assert set(by_job["llama3-70b"]) <= {8, 64, 512} and 512 in by_job["llama3-70b"]
    alone = json.loads(run("query", swept / "cube.h5", "--best-arch", "--where", "n_gpu=64", "--json").output)
    assert [r for r in rows if r["n_gpu"] == 64] == [r for r in alone if r["arch"] is not None]
    assert_clean_error(run("query", swept / "cube.h5", "--best-arch", "--per", "arch"), "--per takes")


@pytest.mark.parametrize(
    "spec, fragment",
    [
        ('workloads = ["llama3-8b"]\n[llm]\nzero = [4]\n', "llm.zero takes 0, 1, 2, 3"),
        ('workloads = ["llama3-8b"]\n[llm]\ntensor = [2]\n', "unknown [llm] key(s) tensor"),
        ('workloads = ["llama9"]\n', "nor is it an LLM model"),
        ('workloads = ["llama3-8b"]\n[grid]\ndomain = [0]\n', "grid.domain must be"),
        ('workloads = ["resnet50"]\n[grid]\nnetwork = ["dgx-h100-superpod"]\n', "only fabrics"),
    ],
)
def test_bad_spec_input_of_the_llm_family_is_one_sentence_and_writes_nothing(tmp_path, spec, fragment):
    (tmp_path / "s.toml").write_text(spec)
    assert_clean_error(run("sweep", tmp_path / "s.toml", "-o", tmp_path / "c.h5", "-q"), fragment)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.toml"]


def test_server_defaults_come_from_the_gpu_catalogue_when_it_has_them(tmp_path):
    """gpus.csv columns gpus_per_server and nvlink_domain_GPUs (where a catalogue has them) set the
    LLM family's default domain and server; without them: 8 GPUs (an HGX board)."""
    import csv
    import io

    from paigrid.llm.grid import build_llm_grid, catalogue_default

    assert catalogue_default(Catalogues.load(), "H100-SXM5-80GB", "nvlink_domain_GPUs") == 8  # an HGX server
    text = Path(paigrid.__file__).parent.parent.joinpath("datasets", "gpus.csv").read_text()
    rows = list(csv.DictReader(io.StringIO(text)))
    columns = list(rows[0]) + [c for c in ("gpus_per_server", "nvlink_domain_GPUs") if c not in rows[0]]
    for row in rows:  # B200 as a 4-GPU tray of a 72-GPU domain; the other rows as they are (or empty)
        if row["name"] in ("B200", "H100-SXM5-80GB"):
            row["gpus_per_server"], row["nvlink_domain_GPUs"] = ("4", "72") if row["name"] == "B200" else ("8", "8")
        else:
            row.setdefault("gpus_per_server", "")
            row.setdefault("nvlink_domain_GPUs", "")
    out = io.StringIO()
    writer = csv.DictWriter(out, columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    (tmp_path / "gpus.csv").write_text(out.getvalue())
    spec = spec_from_dict(
        {
            "workloads": ["llama3-8b"],
            "grid": {"gpu": ["H100", "B200"], "n_gpu": [64]},
            "catalogues": {"gpus": "gpus.csv"},
            "llm": {"cp": [1], "vpp": [1], "zero": [1]},
        },
        "spec",
        tmp_path,
    )
    cats = Catalogues.load(spec.catalogues)
    dp, llm, cats = split_jobs(spec, cats)
    grid = build_llm_grid(spec, llm, cats, defaults())
    assert grid.domain == [8, 72] and grid.gpus_per_node == [8, 4]


def test_llm_query_reads_the_llm_jobs_of_a_cube_too(swept):
    """``paigrid llm query`` (the alias of before) answers from a cube's llm group as the one query does."""
    rows = json.loads(run("llm", "query", swept / "cube.h5", "--model", "llama3-70b", "--json").output)
    one = json.loads(
        run("query", swept / "cube.h5", "--best-arch", "--job", "llama3-70b", "--per", "n_gpu", "--json").output
    )
    valid = [r for r in rows if "step_time" in r and r["step_time"] is not None]
    assert [r["step_time"] for r in valid] == [r["step_time"] for r in one]
    assert [r["n_gpu"] for r in valid] == [r["n_gpu"] for r in one]
    assert [parse_label(r["arch"]).describe() for r in one] == [r["layout"] for r in valid]
    assert_clean_error(run("llm", "query", swept / "cube.h5", "--model", "resnet50"), "has no model")
