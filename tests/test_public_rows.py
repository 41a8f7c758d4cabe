"""The public data-parallel file read as published, the run settings, the shrunk calibration and
the relative errors (``accuracy.publicrows``, ``accuracy.settings``, ``accuracy.shrinkage``, ``accuracy.relative``)."""

import csv
import json
import math
from importlib import resources

import numpy as np
import pytest

from cli_helpers import assert_clean_error, run
from paigrid.accuracy import relative
from paigrid.accuracy.crossval import held_out
from paigrid.accuracy.measurements import load_measurements
from paigrid.accuracy.publicrows import read_public
from paigrid.accuracy.settings import row_settings
from paigrid.accuracy.shrinkage import choose_strength, inner_folds, shrunk_least_squares
from paigrid.inputs.catalog import Catalogues
from paigrid.inputs.efficiency import defaults
from paigrid.inputs.spec import Options
from paigrid.inputs.zoo import builtin_models

V2 = str(resources.files("paigrid.datasets").joinpath("measured_public_v2.csv"))
OLD = str(resources.files("paigrid.datasets").joinpath("measurements_public.csv"))
COLUMNS = [
    "id",
    "model",
    "model_config",
    "framework",
    "gpu",
    "gpus_per_node",
    "nodes",
    "arch",
    "intra_link",
    "network",
    "precision",
    "batch_per_gpu",
    "grad_accum_steps",
    "seq_len_or_image_size",
    "throughput",
    "throughput_unit",
    "data_pipeline",
    "optimizer",
    "source",
    "notes",
]
BASE = {
    "id": "X-0001",
    "model": "GNMT v2 (LSTM seq2seq)",
    "model_config": "GNMT v2",
    "framework": "PyTorch (NGC PyTorch 21.04-py3)",
    "gpu": "A100-SXM4-80GB",
    "gpus_per_node": "1",
    "nodes": "1",
    "arch": "1w1g",
    "intra_link": "n/a (1 GPU)",
    "network": "",
    "precision": "amp-fp16",
    "batch_per_gpu": "128",
    "grad_accum_steps": "1",
    "seq_len_or_image_size": "",
    "throughput": "30000",
    "throughput_unit": "tokens/s",
    "data_pipeline": "real data (WMT16 en-de)",
    "optimizer": "Adam (lr=0)",
    "source": "test",
    "notes": "throughput is total for all GPUs",
}


@pytest.fixture(scope="module")
def cats():
    return Catalogues.load()


@pytest.fixture(scope="module")
def reading(cats):
    return read_public(V2, cats)


def write(tmp_path, rows, name="v2.csv"):
    path = tmp_path / name
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        for i, row in enumerate(rows):
            writer.writerow({**BASE, "id": f"X-{i:04d}", **row})
    return path


def one(tmp_path, cats, **cells):
    result = read_public(write(tmp_path, [cells]), cats)
    return result, (result.rows + result.doubtful + [None])[0]


# --- the shipped file ----------------------------------------------------------------------------
def test_every_row_of_the_shipped_file_is_accounted_for(reading):
    with open(V2, newline="", encoding="utf-8") as handle:
        ids = [r["id"] for r in csv.DictReader(handle)]
    assert reading.total_rows == len(ids) == 2183
    accounted = [r.id for r in reading.rows + reading.doubtful] + [r.id for r in reading.refused]
    assert sorted(accounted) == sorted(ids)  # each row once: modelled, DOUBTFUL or listed
    assert all(r.reason for r in reading.refused)
    assert sum(reading.counts().values()) == len(reading.refused)
    assert reading.rows  # some rows are modelled today
    mpt = [r for r in reading.refused if r.id.startswith("MPT-")]
    assert len(mpt) == 174 and all(r.reason.startswith("LLM-family") for r in mpt)


def test_validate_reads_the_published_file_and_lists_what_it_cannot_model():
    result = run("validate", V2)
    assert result.exit_code == 0, result.output
    assert "not modelled (id, line: reason)" in result.output
    assert "batch per GPU not stated" in result.output
    data = json.loads(run("validate", V2, "--json").stdout)
    assert len(data["not_modelled"]) + len(data["rows"]) + len(data["doubtful"]) == 2183
    assert all(isinstance(data["assumptions"][r["id"]], list) for r in data["rows"])


def test_a_file_with_no_row_to_model_is_one_sentence(tmp_path):
    path = write(tmp_path, [{"gpu": "Imaginary GPU 9000 (1GB)"}, {"batch_per_gpu": ""}])
    assert_clean_error(run("validate", path), "none of the 2 rows can be modelled", "GPU not in the catalogue")


# --- the awkward values ---------------------------------------------------------------------------
def test_links_as_published(tmp_path, cats):
    multi = {"gpus_per_node": "8", "arch": "allreduce-local", "gpu": "A100-SXM4-80GB"}
    _, row = one(tmp_path, cats, **multi, intra_link="not stated")
    assert row.intra == "nvswitch-nvlink3"
    reading, row = one(tmp_path, cats, **multi, intra_link="nvswitch (implied by DGX A100 platform named in source)")
    assert row.intra == "nvswitch-nvlink3" and "intra_link not stated" not in " ".join(reading.assumptions[row.id])
    _, row = one(tmp_path, cats, **multi, intra_link="pcie (same host without NVLink)")
    assert row.intra == "pcie4"
    _, row = one(tmp_path, cats, **{**multi, "gpu": "V100-SXM3-32GB"}, intra_link="nvswitch (implied by DGX-2)")
    assert row.intra == "nvswitch-nvlink2"
    _, row = one(tmp_path, cats, **{**multi, "gpu": "V100-SXM2-16GB"}, intra_link="nvlink (implied by DGX-1)")
    assert row.intra == "nvlink2-hcm"
    reading, row = one(
        tmp_path,
        cats,
        **{**multi, "gpu": "V100-PCIe-16GB"},
        intra_link="nvlink (bridge, per folder name; bridge topology not stated)",
    )
    if not any(r["kind"] == "nvlink-bridge" for r in cats.links.rows):
        assert row.intra == "pcie3" and any("NVLink bridge" in a for a in reading.assumptions[row.id])
    reading, row = one(
        tmp_path,
        cats,
        gpus_per_node="8",
        nodes="2",
        arch="allreduce-cluster",
        intra_link="nvswitch (implied by DGX A100)",
        network="1600 Gbps node-node interconnect (RoCE) (section title)",
    )
    assert (row.network, row.job_options["nics_per_node"]) == ("ib-hdr-200g", 8)
    assert any("RoCE" in a for a in reading.assumptions[row.id])


def test_gpus_cells_and_units_as_published(tmp_path, cats):
    _, row = one(tmp_path, cats, gpu="A100-80GB (source: a100_80gb; form factor not stated)")
    assert row.gpu == "A100-SXM4-80GB"
    reading, row = one(tmp_path, cats, gpu="Imaginary 9000 (12GB)")
    assert row is None and reading.refused[0].reason == "GPU not in the catalogue: Imaginary 9000"
    reading, row = one(tmp_path, cats, model="A model nobody catalogued")
    assert reading.refused[0].reason == "model not in the zoo: A model nobody catalogued"
    tokens = cats.workloads.number("gnmt", "tokens_per_sample")
    # DLE GNMT's tok/s counts source + target tokens: the zoo's per_sample tokens (30 + 30), not
    # the catalogue's tokens_per_sample (the 30 of one side); the row lists the assumption
    pair = next(m for m in builtin_models() if m.name == "gnmt").per_sample["tokens"]
    assert pair == 2 * tokens
    reading, row = one(tmp_path, cats, throughput="30000", throughput_unit="tokens/s")
    assert row.measured == pytest.approx(30000 / pair)
    assert any("per_sample tokens" in a for a in reading.assumptions[row.id])
    # where the zoo and the catalogue agree (Transformer-XL base: 192) the count is that, unremarked
    reading, row = one(
        tmp_path,
        cats,
        model="Transformer-XL base",
        seq_len_or_image_size="192",
        throughput="19200",
        throughput_unit="tokens/s",
    )
    assert row.measured == pytest.approx(100)
    assert not any("per_sample tokens" in a for a in reading.assumptions[row.id])
    _, row = one(tmp_path, cats, throughput="2", throughput_unit="Msamples/s (value printed with M suffix)")
    assert row.measured == pytest.approx(2e6)
    _, row = one(tmp_path, cats, throughput="3", throughput_unit="molecules/ms")
    assert row.measured == pytest.approx(3000)
    _, row = one(
        tmp_path,
        cats,
        throughput="80000",
        throughput_unit="audio samples/s (DLE)",
        seq_len_or_image_size="segment 8000 samples",
    )
    assert row.measured == pytest.approx(10)
    reading, row = one(tmp_path, cats, throughput_unit="audio samples/s (DLE)")
    assert reading.refused[0].reason.startswith("audio samples/s not convertible")
    reading, _ = one(
        tmp_path,
        cats,
        model="VGG-16 (tf_cnn_benchmarks)",
        seq_len_or_image_size="224x224",
        throughput_unit="mel frames/s (DLE)",
    )  # an image model has no mel frames
    assert reading.refused[0].reason.startswith("mel frames/s not convertible")
    _, row = one(tmp_path, cats, throughput="30000", throughput_unit="mel frames/s (DLE)")
    assert row.measured == pytest.approx(30000 / tokens)  # frames per sample: tokens_per_sample
    reading, _ = one(tmp_path, cats, throughput_unit="furlongs/fortnight")
    assert reading.refused[0].reason == "throughput unit not convertible: furlongs/fortnight"


def test_batch_accumulation_precision_and_doubtful(tmp_path, cats):
    reading, row = one(tmp_path, cats, batch_per_gpu="")
    assert row is None and reading.refused[0].reason == "batch per GPU not stated"
    reading, row = one(tmp_path, cats, grad_accum_steps="")
    assert row.grad_accum_steps == 1 and "grad_accum_steps empty: 1" in reading.assumptions[row.id]
    _, row = one(tmp_path, cats, precision="fp32")  # NGC PyTorch on an A100: TF32 math
    assert row.precision == "tf32"
    _, row = one(tmp_path, cats, precision="fp32", gpu="V100-SXM2-16GB")  # Volta has no TF32
    assert row.precision == "fp32"
    # TensorFlow before 2.4 had no upstream Ampere build: on an A100 it is NVIDIA's, TF32 by default
    _, row = one(tmp_path, cats, precision="fp32", framework="TensorFlow 1.15 (tf_cnn_benchmarks)")
    assert row.precision == "tf32"
    _, row = one(tmp_path, cats, precision="fp32", framework="TensorFlow 1.15", gpu="V100-SXM2-16GB")
    assert row.precision == "fp32"
    _, row = one(tmp_path, cats, precision="fp32", framework="PyTorch 2.1 (pip wheel)")  # not NGC: kept fp32
    assert row.precision == "fp32"
    _, row = one(tmp_path, cats, precision="amp (fp16 or bf16 not stated)")
    assert row.precision == "amp-fp16-autocast"


def test_an_amp_row_takes_the_gradient_bytes_of_its_framework(tmp_path, cats):
    """NGC PyTorch 21.04 AMP is torch.cuda.amp (FP32 gradients and all-reduce); notes naming apex
    opt_level O2 keep FP16 gradients; tf_cnn_benchmarks --use_fp16 all-reduces FP32 gradients in
    FP16; a PyTorch before 1.6 has no torch.cuda.amp (apex, read as O1); each reading is listed."""
    cases = [
        ({}, "amp-fp16-autocast", "AMP as torch.cuda.amp"),
        ({"precision": "amp-bf16"}, "amp-bf16-autocast", "AMP as torch.cuda.amp"),
        ({"notes": "AMP active per run log (apex opt_level O2); throughput is total"}, "amp-fp16", "apex opt_level O2"),
        (
            {"framework": "TensorFlow 1.15 (tf_cnn_benchmarks via lambda-tensorflow-benchmark)"},
            "amp-fp16-fp16wire",
            "tf_cnn_benchmarks --use_fp16",
        ),
        ({"framework": "PyTorch 1.4.0a0+a5b4d78 (NGC container)"}, "amp-fp16-autocast", "PyTorch before 1.6"),
        ({"framework": "PyTorch 1.13.0a0+d0d6b1f (NGC container 22.09)"}, "amp-fp16-autocast", "AMP as torch.cuda.amp"),
        ({"precision": "fp32", "gpu": "V100-SXM2-16GB"}, "fp32", None),
    ]
    for cells, precision, note in cases:
        reading, row = one(tmp_path, cats, **cells)
        assert row.precision == precision, cells
        said = [n for n in reading.assumptions[row.id] if "AMP" in n or "tf_cnn_benchmarks --use_fp16" in n]
        assert (note is None and not said) or (len(said) == 1 and note in said[0]), (cells, said)
    bytes_of = {
        name: (
            cats.precisions.number(name, "grad_bytes_per_param"),
            cats.precisions.number(name, "comm_bytes_per_param"),
        )
        for name in ("amp-fp16", "amp-fp16-autocast", "amp-bf16-autocast", "amp-fp16-fp16wire")
    }
    assert bytes_of == {
        "amp-fp16": (2, 2),
        "amp-fp16-autocast": (4, 4),
        "amp-bf16-autocast": (4, 4),
        "amp-fp16-fp16wire": (4, 2),
    }
    reading, row = one(tmp_path, cats, notes="DOUBTFUL (automated check): super-linear")
    assert row is not None and reading.doubtful == [row] and not reading.rows
    path = write(tmp_path, [{}, {"notes": "DOUBTFUL label"}])
    plain = json.loads(run("validate", path, "--json").stdout)
    doubtful = json.loads(run("validate", path, "--include-doubtful", "--json").stdout)
    assert (len(plain["rows"]), plain["doubtful"], len(doubtful["rows"])) == (1, ["X-0001"], 2)


# --- how it was run --------------------------------------------------------------------------------
def test_run_settings_from_the_cells():
    tf = row_settings(
        {
            "framework": "TensorFlow 1.15 (tf_cnn_benchmarks)",
            "notes": "XLA in folder name",
            "data_pipeline": "synthetic (tf_cnn_benchmarks, no --data_dir)",
        }
    )
    assert (tf.framework, tf.execution, tf.pipeline, tf.xla) == ("tf1", "graphs", "synthetic", True)
    plain = row_settings({"framework": "TensorFlow 2.4", "notes": "no XLA in folder name", "data_pipeline": ""})
    assert (plain.framework, plain.execution, plain.pipeline) == ("tf2", "eager", "not stated")
    assert "input pipeline not stated: no input-pipeline bound" in plain.defaults_used
    torch = row_settings(
        {"framework": "PyTorch 1.12", "notes": "NHWC", "data_pipeline": "real data (COCO 2017, PyTorch dataloader)"}
    )
    assert (torch.execution, torch.pipeline, torch.channels_last) == ("eager", "cpu-decode", True)
    compiled = row_settings(
        {
            "framework": "PyTorch 2.3 with torch.compile",
            "notes": "",
            "data_pipeline": "real data (MovieLens-20M, on GPU)",
        }
    )
    assert (compiled.execution, compiled.pipeline) == ("graphs", "gpu-cached")
    silent = row_settings({"framework": "", "notes": "", "data_pipeline": "DALI"})
    assert silent.framework == "pytorch" and "framework not stated: PyTorch" in silent.defaults_used


def test_the_execution_setting_reaches_the_model(tmp_path, cats):
    from paigrid.accuracy.measurements import predict_rows

    reading = read_public(write(tmp_path, [{"framework": "PyTorch"}, {"framework": "PyTorch, torch.compile"}]), cats)
    eager, graphs = reading.rows
    assert (eager.variant["execution"], graphs.variant["execution"]) == ("eager", "graphs")
    options = Options(model="pai-v2")
    fast, slow = (p["throughput"] for p in predict_rows([graphs, eager], cats, defaults(), options))
    assert fast > slow  # compiled launches cost less than eager ones


def test_the_memory_format_setting_from_the_notes_or_the_framework():
    said = {
        "PyTorch 1.12": ("single GPU; NCHW; train_step_time 184.877 ms", "nchw"),
        "PyTorch 1.13": ("single GPU; channels-last (NHWC)", "channels_last"),
        "PyTorch (NGC 21.03), DLE ConvNets": ("AMP config uses channels-last (memory_format nhwc)", "channels_last"),
    }
    for framework, (notes, layout) in said.items():
        settings = row_settings({"framework": framework, "notes": notes, "data_pipeline": ""})
        assert settings.memory_format == layout, framework
        assert not any("memory layout" in d for d in settings.defaults_used)
    silent = {
        "PyTorch 1.10": "nchw",
        "TensorFlow 1.15 (tf_cnn_benchmarks via lambda-tensorflow-benchmark)": "nchw",
        "TensorFlow 2.4 (tf_cnn_benchmarks via lambda-tensorflow-benchmark)": "nchw",
        "TensorFlow 1 (NGC TensorFlow 20.06-tf1-py3), DLE TensorFlow ConvNets, Horovod": "channels_last",
        "MXNet 1.8": "channels_last",
    }
    for framework, layout in silent.items():
        settings = row_settings({"framework": framework, "notes": "", "data_pipeline": ""})
        assert settings.memory_format == layout, framework
        assert any(d.startswith(f"memory layout not stated: {layout} (") for d in settings.defaults_used)


def test_the_memory_format_setting_reaches_the_model(tmp_path, cats):
    """An NCHW row of a convolutional network is predicted slower than its channels-last twin
    where its convolutions run on tensor cores (the layout transposes): under AMP, and under the
    TF32 that an fp32 row of an NGC PyTorch on an A100 runs; the same under FP32 on a V100 (no
    TF32: the convolutions run on the FP32 units, on NCHW)."""
    from paigrid.accuracy.measurements import predict_rows

    twins = [
        {"model": "timm resnet18", "precision": precision, "gpu": gpu, "notes": notes, "throughput_unit": "samples/s"}
        for precision, gpu in (("amp-fp16", "A100-SXM4-80GB"), ("fp32", "A100-SXM4-80GB"), ("fp32", "V100-SXM2-16GB"))
        for notes in ("NCHW", "channels-last (NHWC)")
    ]
    reading = read_public(write(tmp_path, twins), cats)
    assert [r.variant["memory_format"] for r in reading.rows] == ["nchw", "channels_last"] * 3
    assert [r.precision for r in reading.rows][2:] == ["tf32", "tf32", "fp32", "fp32"]
    amp_nchw, amp_nhwc, tf32_nchw, tf32_nhwc, fp32_nchw, fp32_nhwc = (
        p["throughput"] for p in predict_rows(reading.rows, reading.cats, defaults(), Options(model="pai-v2"))
    )
    assert amp_nhwc > 1.05 * amp_nchw
    assert tf32_nhwc > 1.05 * tf32_nchw
    assert fp32_nhwc == fp32_nchw


# --- shrinkage -------------------------------------------------------------------------------------
def _toy(truth, noise=0.0, seed=0):
    """Residuals of a linear toy model: r = A x - b (log units)."""
    rng = np.random.default_rng(seed)
    a = rng.uniform(0.5, 1.5, size=(12, 2))
    b = a @ truth + noise * rng.standard_normal(12)
    return a, b


def test_shrunk_least_squares_limits():
    from scipy.optimize import least_squares

    a, b = _toy(np.array([0.3, -0.2]), noise=0.05)
    x0, lo, hi = np.zeros(2), np.full(2, -3.0), np.full(2, 3.0)
    res, jac = (lambda x: a @ x - b), (lambda x: a)
    plain = least_squares(res, x0, jac=jac, bounds=(lo, hi), loss="soft_l1", f_scale=0.1).x
    assert shrunk_least_squares(res, jac, x0, lo, hi, 0.0).x == pytest.approx(plain, abs=1e-5)
    assert np.array_equal(shrunk_least_squares(res, jac, x0, lo, hi, math.inf).x, x0)
    distances = [np.linalg.norm(shrunk_least_squares(res, jac, x0, lo, hi, s).x - x0) for s in (0.01, 0.1, 1, 10)]
    assert all(d1 > d2 for d1, d2 in zip(distances, distances[1:]))  # stronger shrinkage, closer to x0


def test_choose_strength_keeps_the_defaults_when_fitting_learns_noise():
    def chooser(truth, noise):
        a, b = _toy(truth, noise, seed=3)

        def held_out(train, test, strength):
            x = shrunk_least_squares(
                lambda x: a[train] @ x - b[train],
                lambda x: a[train],
                np.zeros(2),
                np.full(2, -3.0),
                np.full(2, 3.0),
                strength,
            ).x
            return a[test] @ x - b[test]

        return choose_strength(12, [str(i % 4) for i in range(12)], held_out)

    assert chooser(np.array([0.4, -0.3]), 0.0).strength == 0.0  # clean data far from x0: fit freely
    noisy = chooser(np.zeros(2), 0.2)  # x0 is right: the fit only learns noise
    assert noisy.strength > 0 and noisy.scores[noisy.strength] <= noisy.scores[0.0]
    assert [sorted(f) for f in inner_folds(["a", "b", "a", "c"], 3)] == [[0, 2], [1], [3]]


def test_calibration_is_never_worse_than_none_on_held_out_public_folds(cats):
    """The default calibration (shrinkage cross-validated on each fold's training rows), judged on
    the public rows of measurements_public.csv left out one GPU generation at a time."""
    rows = load_measurements(OLD, cats)
    options = Options(model="pai-v2")
    plain, _ = held_out(rows, cats, options, "generation", calibrated=False)
    shrunk, folds = held_out(rows, cats, options, "generation", calibrated=True, shrinkage="cv")
    median = lambda results: float(np.median([abs(r["error"]) for r in results]))  # noqa: E731
    assert len(shrunk) == len(plain) == len(rows)
    assert median(shrunk) <= median(plain)
    assert all("shrinkage" in f or f["refused"] for f in folds)


def test_calibrate_reports_its_shrinkage(tmp_path):
    out = tmp_path / "c.toml"
    result = run("calibrate", OLD, "--out", out, "--rows-where", "gpu=A100*")
    assert result.exit_code == 0, result.output
    assert "shrinkage:" in result.stdout and "cross-validation" in result.stdout
    assert "shrinkage =" in out.read_text(encoding="utf-8")
    assert_clean_error(run("calibrate", OLD, "--out", out, "--shrinkage", "-1"), "--shrinkage takes cv")


# --- relative errors --------------------------------------------------------------------------------
def test_spearman_and_ratio_pairs(reading):
    assert relative.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert relative.spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert math.isnan(relative.spearman([1, 1], [1, 2]))
    rows = [r for r in reading.rows if r.workload == "gnmt"]
    entries = [{"row": r, "predicted": 2.0 * r.measured, "measured": r.measured} for r in rows]
    for pairs in (relative.gpu_ratios(entries), relative.scaling_ratios(entries)):
        assert pairs and all(p["error"] == pytest.approx(0.0) and p["order_right"] for p in pairs)
    scaled = relative.scaling_ratios(entries)
    by_id = {r.id: r for r in rows}
    assert all(by_id[p["ids"][0]].n_gpu > by_id[p["ids"][1]].n_gpu for p in scaled)


def test_parameter_server_twins_are_read_and_paired(cats):
    """The tf_cnn_benchmarks parameter-server rows (Quadro RTX 8000 hosts, NVLink-bridged) and
    their all-reduce twins are read (the bridge as PCIe, stated) and paired, PS against
    all-reduce on the same host.  Their models are zoo entries without a workloads.csv row yet,
    so an alias maps tf_cnn_benchmarks' Inception-v3 to the catalogue's inception-v3 (a stand-in
    for the pairing, not a claim about the model)."""
    from paigrid.accuracy.measurements import load_aliases

    stand_in = {
        "measured_model": "Inception-v3 (tf_cnn_benchmarks)",
        "seq_len_or_image_size": "",
        "workload": "inception-v3",
        "note": "test stand-in",
    }
    reading = read_public(V2, cats, load_aliases() + [stand_in])
    twins = [r for r in reading.rows if r.arch == "1wng"]
    assert twins and all(r.intra.startswith("pcie") for r in twins)
    assert all(any("NVLink bridge" in a for a in reading.assumptions[r.id]) for r in twins)
    entries = [
        {"row": r, "predicted": 1.0 + (r.arch == "1wng"), "measured": 1.0 + (r.arch == "1wng")} for r in reading.rows
    ]
    pairs = relative.ps_allreduce_order(entries)
    by_id = {r.id: r for r in reading.rows}
    assert pairs and all(
        by_id[a].arch == "1wng"
        and by_id[b].arch == "allreduce-local"
        and by_id[a].n_gpu == by_id[b].n_gpu
        and by_id[a].workload == by_id[b].workload
        and by_id[a].gpu == by_id[b].gpu
        for a, b in (p["ids"] for p in pairs)
    )
    assert all(p["order_right"] and p["error"] == pytest.approx(0.0) for p in pairs)
