"""Trust: validate and calibrate against measurements, and the model options' documented directions.

The real correctness test of the fit is ``test_fit_recovers_known_efficiencies``: measurements
generated from the model itself with known efficiencies must give those efficiencies back.
"""

import json
import math
import sys
from importlib import resources

import pytest

from cli_helpers import assert_clean_error, run
from csv_rows import read_rows, write_rows
from paigrid.accuracy.calibrate import fit, write_calibration
from paigrid.accuracy.measurements import load_measurements, predict_rows, select
from paigrid.accuracy.validate import validate
from paigrid.errors import PaigridError
from paigrid.inputs.efficiency import Efficiency, defaults, load_calibration
from paigrid.inputs.jobs import Job
from paigrid.inputs.spec import JOB_OPTIONS, Options
from paigrid.predict import predict_configs

PUBLIC = str(resources.files("paigrid.datasets").joinpath("measurements_public.csv"))


@pytest.fixture(scope="module")
def cats(catalogues):
    return catalogues


@pytest.fixture(scope="module")
def public_rows(cats):
    return load_measurements(PUBLIC, cats)


def public_lines():
    return read_rows(PUBLIC)


# --- the shipped data ---------------------------------------------------------------------------
def test_public_file_is_the_shared_one_with_sources():
    lines = public_lines()
    assert len(lines) == 33
    nvidia = [line for line in lines if line["source"].startswith("NVIDIA/DeepLearningExamples")]
    measured = [line for line in lines if line["source"].startswith("Measured for paigrid on one NVIDIA H200")]
    assert len(nvidia) == 20 and len(measured) == 13
    # the H200 rows say what ran: optimizer, attention kernel and execution mode
    assert all(line["optimizer"] and line["attention"] and line["execution"] == "eager" for line in measured)
    assert not any(line["optimizer"] or line["attention"] or line["execution"] for line in nvidia)


def test_model_names_map_through_the_alias_table(public_rows):
    workloads = {r.id: r.workload for r in public_rows}
    assert workloads["pt-rn50-01"] == "resnet50-v1.5"
    assert workloads["pt-bert-03"] == "bert-large-seq128"
    assert workloads["pt-squad-01"] == "bert-large-seq384"


def test_sequence_length_selects_the_catalogue_variant(tmp_path, cats):
    line = dict(public_lines()[12], seq_len_or_image_size="512")  # BERT-large at 512
    rows = load_measurements(write_rows(tmp_path / "m.csv", [line]), cats)
    assert rows[0].workload == "bert-large-seq512"
    line["seq_len_or_image_size"] = "256"
    with pytest.raises(PaigridError, match="no catalogue variant.*128, 384, 512"):
        load_measurements(write_rows(tmp_path / "m.csv", [line]), cats)


def test_one_gpu_rows_use_the_pcie_link_of_their_generation(public_rows):
    first = {r.id: r for r in public_rows}
    assert first["pt-rn50-01"].intra == "pcie4"  # A100: PCIe 4
    assert first["pt-rn50-05"].intra == "pcie3"  # V100: PCIe 3
    assert first["pt-bert-03"].job(Options()).options["grad_accum_steps"] == 64


# --- validate -----------------------------------------------------------------------------------
def test_validate_json_on_the_public_file():
    result = run("validate", PUBLIC, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert len(data["rows"]) == 33
    for row in data["rows"]:
        assert {"id", "predicted", "measured", "error"} <= set(row)
        assert row["error"] == pytest.approx(row["predicted"] / row["measured"] - 1.0)
    summary = data["summary"]
    assert set(summary) == {"overall", "single_gpu", "multi_gpu_one_server", "multi_server"}
    assert [summary[g]["count"] for g in ("overall", "single_gpu", "multi_gpu_one_server")] == [33, 23, 10]
    assert summary["multi_server"] == {"count": 0, "median_abs_error": None, "mean_abs_error": None, "mean_error": None}
    errors = sorted(abs(r["error"]) for r in data["rows"])
    assert summary["overall"]["median_abs_error"] == pytest.approx(errors[16])
    assert summary["overall"]["mean_abs_error"] == pytest.approx(sum(errors) / 33)


def test_error_of_one_row_by_hand(cats):
    """pt-squad-05: BERT-large SQuAD, one V100-SXM2-32GB, AMP, 16 sequences per GPU, 52 sequences/s."""
    options = {key: getattr(Options(), key) for key in JOB_OPTIONS} | {"gpus_per_node": 1}
    job = Job("hand", "bert-large-seq384", 16.0, options)
    config = {
        "arch": "1w1g",
        "gpu": "V100-SXM2-32GB",
        "n_gpu": 1,
        "intra": "pcie3",
        "network": "none",
        "precision": "amp-fp16",
    }
    predicted = predict_configs([job], [config], cats, defaults(), Options())[0]["throughput"]
    rows = json.loads(run("validate", PUBLIC, "--json", "--rows-where", "id=pt-squad-05").stdout)["rows"]
    assert len(rows) == 1
    assert rows[0]["predicted"] == pytest.approx(predicted, rel=1e-9)
    assert rows[0]["measured"] == 52.0
    assert rows[0]["error"] == pytest.approx(predicted / 52.0 - 1.0, rel=1e-9)


def test_scaling_efficiency_of_a_series(public_rows, cats):
    result = validate(public_rows, defaults(), Options(), cats)
    mx = next(s for s in result["series"] if s["framework"] == "MXNet+Horovod")
    assert mx["base_id"] == "mx-rn50-05" and [p["n_gpu"] for p in mx["points"]] == [2, 4, 8]
    eight = mx["points"][-1]
    assert eight["measured"] == pytest.approx(10723 / (8 * 1376))
    by_id = {r["id"]: r for r in result["rows"]}
    one_gpu = by_id["mx-rn50-05"]["predicted"]
    assert eight["predicted"] == pytest.approx(by_id["mx-rn50-08"]["predicted"] / (8 * one_gpu))
    # every multi-GPU public row belongs to a series with its one-GPU row
    assert sum(len(s["points"]) for s in result["series"]) == 10


def test_validate_text_output():
    result = run("validate", PUBLIC)
    assert result.exit_code == 0, result.output
    for fragment in ("pt-rn50-01", "scaling efficiency", "summary", "multi_gpu_one_server"):
        assert fragment in result.stdout


# --- calibrate: the fit recovers what generated the data ----------------------------------------
TRUTH_FLOP = {
    "A100-SXM4-80GB/tf32": 0.42,
    "A100-SXM4-80GB/amp-fp16": 0.33,
    "V100-SXM2-16GB/fp32": 0.66,
    "V100-SXM2-16GB/amp-fp16": 0.48,
}
TRUTH_LINK = {"nvswitch": 0.60, "nvlink-hcm": 0.70, "infiniband": 0.50}
#: the pai-v1 calibration tests below fit its FLOP, link and overlap parameters
V1 = Options(model="pai-v1")
SHAPES = {"A100-SXM4-80GB": ("nvswitch-nvlink3", "ib-hdr-200g", 4), "V100-SXM2-16GB": ("nvlink2-hcm", "ib-edr-100g", 2)}
WORKLOADS = {"ResNet-50 v1.5": ("224", 128), "BERT-large (SQuAD fine-tune)": ("384", 8), "VGG-16": ("224", 32)}


def synthetic_lines():
    """36 runs: 2 GPUs x 2 precisions x 3 models x (1 GPU, 8 GPUs, several servers)."""
    lines = []
    for gpu, (intra, network, nodes) in SHAPES.items():
        for precision in ("tf32", "amp-fp16") if gpu.startswith("A100") else ("fp32", "amp-fp16"):
            for model, (size, batch) in WORKLOADS.items():
                for k, servers in ((1, 1), (8, 1), (8, nodes)):
                    arch = "1w1g" if k == 1 else "allreduce-local" if servers == 1 else "allreduce-cluster"
                    lines.append(
                        {
                            "id": f"syn-{len(lines)}",
                            "model": model,
                            "framework": "synthetic",
                            "gpu": gpu,
                            "gpus_per_node": k,
                            "nodes": servers,
                            "arch": arch,
                            "intra_link": "none" if k == 1 else intra,
                            "network": network if servers > 1 else "none",
                            "nics_per_node": 1 if servers > 1 else 0,
                            "precision": precision,
                            "batch_per_gpu": batch,
                            "grad_accum_steps": 1,
                            "seq_len_or_image_size": size,
                            "throughput": 1.0,
                            "throughput_unit": "samples/s",
                            "data_pipeline": "synthetic",
                            "source": "paigrid model",
                        }
                    )
    return lines


def synthetic_file(tmp_path, cats, flop=TRUTH_FLOP, link=TRUTH_LINK, options=V1, noise=0.0):
    """A measurements CSV whose throughputs are pai-v1's own with known FLOP and link efficiencies."""
    lines = synthetic_lines()
    path = write_rows(tmp_path / "synthetic.csv", lines)
    truth = defaults().overridden(Efficiency(dict(flop), {}, dict(link), {}, "truth"))
    predicted = predict_rows(load_measurements(path, cats), cats, truth, options)
    for i, (line, p) in enumerate(zip(lines, predicted)):
        wobble = 1.0 + noise * (1 if i % 2 else -1) * (1 + i % 3) / 2  # deterministic +-noise..1.5 noise
        line["throughput"] = f"{p['throughput'] * wobble:.9g}"
    return write_rows(path, lines)


def test_fit_recovers_known_efficiencies(tmp_path, cats):
    path = synthetic_file(tmp_path, cats)
    out = tmp_path / "calib.toml"
    result = run("calibrate", path, "--out", out, "--model", "pai-v1")
    assert result.exit_code == 0, result.output
    calib = load_calibration(out)
    assert set(calib.flop) == set(TRUTH_FLOP) and set(calib.link) == set(TRUTH_LINK)
    for key, value in TRUTH_FLOP.items():
        assert calib.flop[key] == pytest.approx(value, rel=0.01), key
    for key, value in TRUTH_LINK.items():
        assert calib.link[key] == pytest.approx(value, rel=0.02), key
    assert "±" in result.stdout and "flop_efficiency.A100-SXM4-80GB/tf32" in result.stdout
    # and the calibrated model reproduces the data
    rows = json.loads(run("validate", path, "--calibration", out, "--model", "pai-v1", "--json").stdout)["rows"]
    assert max(abs(r["error"]) for r in rows) < 1e-3


def test_fit_with_noise_stays_close_and_reports_uncertainty(tmp_path, cats):
    rows = load_measurements(synthetic_file(tmp_path, cats, noise=0.01), cats)
    result = fit(rows, defaults(), V1, cats=cats)
    for p in result.parameters:
        truth = {**TRUTH_FLOP, **TRUTH_LINK}[p.key]
        assert p.stderr > 0 and math.isfinite(p.stderr)
        assert abs(p.value - truth) < max(4 * p.stderr, 0.02), (p.name, p.value, p.stderr)


def test_fit_recovers_overlap_when_links_are_fixed(tmp_path, cats):
    path = synthetic_file(tmp_path, cats, link={}, options=Options(model="pai-v1", overlap=0.4))
    rows = load_measurements(path, cats)
    result = fit(rows, defaults(), V1, parameters=("flop", "overlap"), cats=cats)
    values = {p.name: p.value for p in result.parameters}
    assert values["options.overlap"] == pytest.approx(0.4, abs=0.02)
    assert values["flop_efficiency.V100-SXM2-16GB/fp32"] == pytest.approx(0.66, rel=0.01)


def test_flop_per_precision_shares_one_value_across_gpus(tmp_path, cats):
    flop = {
        "A100-SXM4-80GB/amp-fp16": 0.4,
        "V100-SXM2-16GB/amp-fp16": 0.4,
        "A100-SXM4-80GB/tf32": 0.5,
        "V100-SXM2-16GB/fp32": 0.6,
    }
    rows = load_measurements(synthetic_file(tmp_path, cats, flop=flop), cats)
    result = fit(rows, defaults(), V1, flop_per="precision", cats=cats)
    values = {p.name: p.value for p in result.parameters}
    assert values["flop_efficiency.amp-fp16"] == pytest.approx(0.4, rel=0.01)
    assert values["flop_efficiency.tf32"] == pytest.approx(0.5, rel=0.01)


# --- calibrate: refusals, round trip, held-out split --------------------------------------------
def test_fewer_rows_than_parameters_is_refused(tmp_path):
    result = run(
        "calibrate", PUBLIC, "--out", tmp_path / "c.toml", "--rows-where", "id=pt-squad-02", "--model", "pai-v1"
    )
    assert_clean_error(result, "2 parameters", "only 1 row")
    assert not (tmp_path / "c.toml").exists()


def test_a_parameter_no_row_depends_on_is_refused(tmp_path):
    # ResNet-50 exchanges so little over NVSwitch that its rows cannot determine the link
    result = run(
        "calibrate",
        PUBLIC,
        "--out",
        tmp_path / "c.toml",
        "--rows-where",
        "model=ResNet*",
        "--rows-where",
        "gpu=A100*",
        "--model",
        "pai-v1",
    )
    assert_clean_error(result, "cannot determine link_efficiency.nvswitch")
    ok = run(
        "calibrate",
        PUBLIC,
        "--out",
        tmp_path / "c.toml",
        "--rows-where",
        "model=ResNet*",
        "--rows-where",
        "gpu=A100*",
        "--fit",
        "flop",
        "--model",
        "pai-v1",
    )
    assert ok.exit_code == 0, ok.output


def test_confounded_parameters_are_refused(tmp_path, cats):
    rows = load_measurements(synthetic_file(tmp_path, cats), cats)
    with pytest.raises(PaigridError, match="cannot determine .*confounded with"):
        fit(rows, defaults(), V1, parameters=("link", "overlap"), cats=cats)


def test_calibration_round_trip(tmp_path, public_rows, cats):
    result = fit(public_rows, defaults(), Options(topology_aware=True), parameters=("flop", "link"), cats=cats)
    path = write_calibration(result, tmp_path / "calib.toml")
    calib = load_calibration(path)
    for p in result.parameters:
        table = calib.flop if p.section == "flop_efficiency" else calib.link
        assert table[p.key] == pytest.approx(p.value, rel=1e-5)
    assert calib.options == {"topology_aware": True}
    assert not list(tmp_path.glob("*.partial"))
    eff = defaults().overridden(calib)
    options = Options().with_overrides(calib.options, "calib")
    again = [r["predicted"] for r in validate(public_rows, eff, options, cats)["rows"]]
    assert again == pytest.approx(result.predicted, rel=1e-4)


def test_held_out_split(tmp_path):
    out = tmp_path / "a100.toml"
    result = run(
        "calibrate",
        PUBLIC,
        "--out",
        out,
        "--rows-where",
        "gpu=A100-SXM4-80GB",
        "--flop-per",
        "precision",
        "--model",
        "pai-v1",
    )
    assert result.exit_code == 0, result.output
    import tomllib

    fitted_on = set(tomllib.loads(out.read_text())["fit"]["rows"])
    assert len(fitted_on) == 9 and all(i.startswith(("pt-rn50-0", "pt-bert-03", "pt-squad-0")) for i in fitted_on)
    data = json.loads(
        run("validate", PUBLIC, "--calibration", out, "--rows-where", "gpu=V100*", "--model", "pai-v1", "--json").stdout
    )
    validated_on = {r["id"] for r in data["rows"]}
    assert len(validated_on) == 11 and not validated_on & fitted_on
    assert {r["gpu"] for r in data["rows"]} == {"V100-SXM2-16GB", "V100-SXM2-32GB"}
    # the per-precision amp-fp16 value, fitted on the A100, changes the V100 AMP predictions
    plain = json.loads(run("validate", PUBLIC, "--rows-where", "gpu=V100*", "--model", "pai-v1", "--json").stdout)[
        "rows"
    ]
    changed = {a["id"] for a, b in zip(data["rows"], plain) if a["predicted"] != pytest.approx(b["predicted"])}
    assert "pt-squad-05" in changed and "pt-rn50-05" not in changed  # amp-fp16 yes, fp32 no


def test_missing_scipy_is_one_sentence(monkeypatch, public_rows, cats):
    monkeypatch.setitem(sys.modules, "scipy.optimize", None)
    with pytest.raises(PaigridError, match=r"paigrid\[calibrate\]"):
        fit(public_rows, defaults(), Options(), cats=cats)


# --- bad input ----------------------------------------------------------------------------------
def test_unknown_model_lists_the_known_ones(tmp_path):
    lines = public_lines()
    lines[3]["model"] = "AlexNet-9000"
    result = run("validate", write_rows(tmp_path / "m.csv", lines))
    assert_clean_error(
        result, "line 5", "unknown model 'AlexNet-9000'", "known:", "ResNet-50 v1.5", "bert-large-seq384"
    )


def test_missing_column(tmp_path):
    lines = [{k: v for k, v in line.items() if k != "throughput"} for line in public_lines()]
    assert_clean_error(run("validate", write_rows(tmp_path / "m.csv", lines)), "lacks the column(s) throughput")


@pytest.mark.parametrize(
    "column, value, fragment",
    [
        ("throughput", "-938", "throughput must be a positive number"),
        ("throughput", "fast", "is not a number"),
        ("batch_per_gpu", "0", "batch_per_gpu must be a positive number"),
        ("gpus_per_node", "2.5", "gpus_per_node must be a whole number"),
        ("gpu", "Z900", "unknown gpu 'Z900'"),
        ("precision", "fp4", "unknown precision 'fp4'"),
        ("network", "carrier-pigeon", "carrier-pigeon"),
        ("arch", "magic", "unknown arch 'magic'"),
        ("throughput_unit", "furlongs/s", "unknown throughput_unit"),
    ],
)
def test_bad_cells_are_one_sentence(tmp_path, column, value, fragment):
    lines = public_lines()
    lines[0][column] = value
    for command in (["validate"], ["calibrate", "--out", tmp_path / "c.toml"]):
        result = run(command[0], write_rows(tmp_path / "m.csv", lines), *command[1:])
        assert_clean_error(result, "line 2", fragment)


def test_inconsistent_rows_say_why(tmp_path):
    lines = public_lines()
    lines[1]["intra_link"] = "none"  # 8 GPUs without a link between them
    assert_clean_error(
        run("validate", write_rows(tmp_path / "m.csv", lines)), "intra_link none is only for a one-GPU run"
    )
    lines = public_lines()
    lines[1].update(nodes="2", nics_per_node="1")  # two servers and no network
    assert_clean_error(run("validate", write_rows(tmp_path / "m.csv", lines)), "needs a network")
    lines[1]["network"] = "ib-hdr-200g"  # allreduce-local across two servers
    assert_clean_error(run("validate", write_rows(tmp_path / "m.csv", lines)), "keeps every GPU in one server")


def test_bad_selection_and_files(tmp_path):
    assert_clean_error(run("validate", PUBLIC, "--rows-where", "colour=red"), "unknown column 'colour'")
    assert_clean_error(run("validate", PUBLIC, "--rows-where", "gpu=H100*"), "no measurement row matches")
    assert_clean_error(run("validate", PUBLIC, "--rows-where", "gpu"), "COLUMN=VALUE")
    assert_clean_error(run("validate", tmp_path / "nope.csv"), "does not exist")
    assert_clean_error(run("validate", PUBLIC, "--calibration", tmp_path / "nope.toml"), "does not exist")
    assert_clean_error(run("calibrate", PUBLIC, "--out", tmp_path / "no" / "dir" / "c.toml"), "cannot write")
    assert_clean_error(
        run("calibrate", PUBLIC, "--out", tmp_path / "c.toml", "--fit", "flop,vibes"), "unknown parameter group"
    )


# --- the model options change predictions in the documented direction ---------------------------
def predict(cats, model, batch, config, options=Options(), **job_options):
    values = {key: getattr(options, key) for key in JOB_OPTIONS} | job_options
    return predict_configs([Job("t", model, batch, values)], [config], cats, defaults(), options)[0]


def cluster(n, network="eth-25g", intra="nvlink2-hcm", gpu="V100-SXM2-16GB", precision="fp32"):
    return {
        "arch": "allreduce-cluster",
        "gpu": gpu,
        "n_gpu": n,
        "intra": intra,
        "network": network,
        "precision": precision,
    }


def test_gradient_accumulation_communicates_less_per_sample(cats):
    one = predict(cats, "vgg16", 32, cluster(32))
    four = predict(cats, "vgg16", 32, cluster(32), grad_accum_steps=4)
    assert four["t_comm"] / (32 * 4) < one["t_comm"] / 32
    assert four["throughput"] > one["throughput"]


def test_overlap_is_never_slower(cats):
    results = [predict(cats, "vgg16", 32, cluster(32), overlap=o) for o in (0.0, 0.3, 0.7, 1.0)]
    throughputs = [r["throughput"] for r in results]
    assert throughputs == sorted(throughputs) and throughputs[-1] > throughputs[0]
    assert [r["t_comm"] for r in results] == sorted((r["t_comm"] for r in results), reverse=True)


def test_tree_beats_ring_at_large_scale_with_high_latency(cats):
    config = cluster(512, network="eth-25g")  # 30 us per message
    ring = predict(cats, "a3c", 32, config, Options(collective="ring"))
    tree = predict(cats, "a3c", 32, config, Options(collective="tree"))
    assert tree["t_comm"] < ring["t_comm"] and tree["throughput"] > ring["throughput"]


def test_topology_aware_hybrid_cube_mesh_pair_is_slower(cats):
    config = {
        "arch": "allreduce-local",
        "gpu": "V100-SXM2-16GB",
        "n_gpu": 2,
        "intra": "nvlink2-hcm",
        "network": "none",
        "precision": "fp32",
    }
    plain = predict(cats, "bert-large-seq384", 8, config, gpus_per_node=8)
    aware = predict(cats, "bert-large-seq384", 8, config, Options(topology_aware=True), gpus_per_node=8)
    assert aware["t_comm"] == pytest.approx(3 * plain["t_comm"], rel=0.05)  # 2 of 6 NVLinks
    assert aware["throughput"] < plain["throughput"]


def test_more_nics_is_never_slower(cats):
    results = [predict(cats, "vgg16", 32, cluster(64), nics_per_node=m)["throughput"] for m in (1, 2, 4, 8)]
    assert results == sorted(results) and results[-1] > results[0]


def test_input_rate_caps_throughput_at_servers_times_rate(cats):
    free = predict(cats, "resnet50-v1.5", 64, cluster(32, network="ib-edr-100g"))
    capped = predict(cats, "resnet50-v1.5", 64, cluster(32, network="ib-edr-100g"), input_rate_samples_per_s=500.0)
    assert capped["throughput"] == pytest.approx(4 * 500.0, rel=1e-6)  # 4 servers of 8 GPUs
    assert capped["throughput"] < free["throughput"]
    assert capped["bottleneck"] == "input_io"


def test_measurement_option_columns_reach_the_model(tmp_path, cats):
    lines = public_lines()[:2]
    plain = [
        r["throughput"]
        for r in predict_rows(
            load_measurements(write_rows(tmp_path / "a.csv", lines), cats), cats, defaults(), Options()
        )
    ]
    for line in lines:
        line["input_rate_samples_per_s"] = "100"
    capped = [
        r["throughput"]
        for r in predict_rows(
            load_measurements(write_rows(tmp_path / "b.csv", lines), cats), cats, defaults(), Options()
        )
    ]
    assert capped == pytest.approx([100.0, 100.0]) and plain[1] > 1000


def test_rows_where_matches_canonical_names_and_excludes(public_rows):
    assert len(select(public_rows, ["gpu=A100-80GB"])) == 9  # an alias of the catalogue
    assert len(select(public_rows, ["gpu!=A100*"])) == 24
    assert len(select(public_rows, ["gpu!=A100*", "gpu!=H200"])) == 11
    assert len(select(public_rows, ["generation=Hopper"])) == 13  # the GPU catalogue's generation
    assert len(select(public_rows, ["model=bert-large-seq384", "n_gpu=8"])) == 3
