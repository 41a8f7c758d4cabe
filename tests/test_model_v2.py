"""Compute model selection (pai-v1 | pai-v2), the pai-v2 operator-class kernel against its numpy
reference, the pai-v2 inputs (class table, efficiencies, bounds), calibration under pai-v2, the
row-kind registry and the cross-validated accuracy protocol."""

import csv
import json
import math
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

import paigrid
from cli_helpers import assert_clean_error, run
from cube_compare import assert_within_one_ulp
from kernel_tables import AMP, FP32, GB, Tables, gpu, job, link
from paigrid.accuracy.calibrate import ROWS_PER_PARAMETER, fit
from paigrid.accuracy.crossval import bands, held_out
from paigrid.accuracy.measurements import load_measurements, select
from paigrid.accuracy.rowkinds import ROW_KINDS, row_kind
from paigrid.errors import PaigridError
from paigrid.inputs.efficiency import defaults, load_calibration
from paigrid.inputs.jobs import Job
from paigrid.inputs.kernel_tables import class_fields, job_vector
from paigrid.inputs.spec import JOB_OPTIONS, Options, spec_from_dict
from paigrid.kernels import dp_columns as L
from paigrid.predict import predict_configs
from paigrid.schema import ARCH_IGNORES, cube_model
from test_kernels import assert_same

PUBLIC = str(resources.files("paigrid.datasets").joinpath("measurements_public.csv"))
DATASETS = resources.files("paigrid.datasets")


@pytest.fixture(scope="module")
def cats(catalogues):
    return catalogues


def v2_job(
    flops=(1e12, 0, 0, 2e11, 0, 0, 0),
    nbytes=(1e9, 0, 0, 5e8, 0, 4e9, 1e8),
    launches=600.0,
    update=20.0,
    activation=3e9,
    graphs=0.0,
    **kw,
):
    """A job-table row with pai-v2 class fields (per micro-batch, FP32 bytes)."""
    row = job(**kw)
    row[L.J_CLASS_FLOP : L.J_CLASS_FLOP + L.N_CLASSES] = flops
    row[L.J_CLASS_BYTES : L.J_CLASS_BYTES + L.N_CLASSES] = nbytes
    row[[L.J_LAUNCHES, L.J_UPDATE_BYTES, L.J_ACTIVATION_V2, L.J_GRAPHS]] = [launches, update, activation, graphs]
    return row


def v2_gpu(mem_bw=2e12, launch=6e-6, graphs=2e-6, **kw):
    row = gpu(**kw)
    row[[L.G_CLASS_MEM_BW, L.G_LAUNCH_EAGER, L.G_LAUNCH_GRAPHS]] = [mem_bw, launch, graphs]
    return row


def v2_tables(jobs, gpus, peak, class_peak, prec=(FP32, AMP)):
    return Tables(
        jobs,
        [[1]],
        [L.ARCH_1W1G],
        gpus,
        peak,
        list(prec),
        [link(100 * GB, 5e-6, L.LINK_NVSWITCH)],
        np.ones((len(gpus), 1), np.uint8),
        [link(0.0, 0.0, L.LINK_NONE)],
        compute_model=L.MODEL_PAI_V2,
        class_peak=class_peak,
    )


# --- the pai-v2 compute kernel, by hand and against its reference --------------------------------
def test_v2_terms_by_hand():
    """One class compute-bound, one memory-bound, element-wise bytes, launches and the update."""
    row = v2_job(params=1e8, accum=2)
    class_peak = np.full((1, 1, L.N_CLASSES), np.nan)
    class_peak[0, 0, L.CLASS_GEMM_CONV] = 1e14  # 1e12 FLOPs -> 10 ms; 1e9 B / 2e12 -> 0.5 ms
    class_peak[0, 0, L.CLASS_ATTENTION_EAGER] = 1e15  # 2e11 -> 0.2 ms < 5e8 B -> 0.25 ms: memory-bound
    out = v2_tables([row], [v2_gpu()], [[1e14]], class_peak, prec=(FP32,)).run()
    flop = 2 * 1e12 / 1e14
    mem = 2 * ((5e8 + 4e9 + 1e8) / 2e12 + 600 * 6e-6) + 1e8 * (20 + 4 + 4 - 4) / 2e12
    assert out["t_flop"][0, 0, 0] == pytest.approx(flop, rel=1e-12)
    assert out["t_mem"][0, 0, 0] == pytest.approx(mem, rel=1e-12)
    assert out["t_data"][0, 0, 0] == pytest.approx(2 * 1e7 / 10e9)
    assert out["step_time"][0, 0, 0, 0, 0, 0, 0] == pytest.approx(flop + mem + 2 * 1e7 / 10e9, rel=1e-6)
    assert out["bottleneck"][0, 0, 0, 0, 0, 0, 0] == L.BOTTLENECK_FLOP


def test_v2_graphs_shorten_launch_time_and_amp_halves_bytes():
    class_peak = np.full((1, 2, L.N_CLASSES), 1e14)
    eager = v2_tables([v2_job()], [v2_gpu()], [[1e14, 1e14]], class_peak).run()
    graphs = v2_tables([v2_job(graphs=1.0)], [v2_gpu()], [[1e14, 1e14]], class_peak).run()
    assert eager["t_mem"][0, 0, 0] - graphs["t_mem"][0, 0, 0] == pytest.approx(600 * (6e-6 - 2e-6), rel=1e-9)
    assert eager["t_flop"][0, 0, 0] == graphs["t_flop"][0, 0, 0]
    # AMP: the memory-bound classes' bytes x 0.5 (attention is compute-bound at this class peak); the
    # update reads 2 gradient bytes and writes a 2-byte working copy beside the FP32 master weights,
    # 20 + 2 + 6 - 4 = 20 + 4 + 4 - 4 bytes per parameter: the same as FP32
    element_fp32 = (4e9 + 1e8) / 2e12
    assert eager["t_mem"][0, 0, 0] - eager["t_mem"][0, 0, 1] == pytest.approx(element_fp32 / 2, rel=1e-9)


def test_v2_bytes_that_stay_fp32_under_amp_are_not_halved():
    """J_AMP_FP32_BYTES (part of the element-wise bytes) moves 4 bytes per element at AMP too: it
    adds B32 x (1 - 0.5) / bw to t_mem under AMP and nothing under FP32."""
    class_peak = np.full((1, 2, L.N_CLASSES), 1e14)
    plain = v2_tables([v2_job()], [v2_gpu()], [[1e14, 1e14]], class_peak).run()
    row = v2_job()
    row[L.J_AMP_FP32_BYTES] = 3e9
    kept = v2_tables([row], [v2_gpu()], [[1e14, 1e14]], class_peak).run()
    assert kept["t_mem"][0, 0, 0] == plain["t_mem"][0, 0, 0]
    assert kept["t_mem"][0, 0, 1] - plain["t_mem"][0, 0, 1] == pytest.approx(3e9 * 0.5 / 2e12, rel=1e-9)
    assert kept["t_flop"][0, 0, 1] == plain["t_flop"][0, 0, 1]


TF32 = [1.0, 4.0, 4.0, 4.0, 1.0]  # FP32 tensors, tensor-core convolutions


def test_v2_nchw_transposes_cost_bandwidth_at_tensor_core_precisions_only():
    """J_NCHW_BYTES (the layout transposes of an NCHW job's tensor-core convolutions) adds
    B32 x a / bw to t_mem at a precision whose convolutions run on tensor cores: a half precision
    (a = 0.5 here) and TF32 (a = 1: tensor-core kernels on FP32 tensors); nothing at FP32, whose
    convolutions take NCHW directly; the FLOP side is unchanged."""
    prec = (FP32, AMP, TF32)
    class_peak = np.full((1, 3, L.N_CLASSES), 1e14)
    plain = v2_tables([v2_job(accum=2)], [v2_gpu()], [[1e14, 1e14, 1e14]], class_peak, prec=prec).run()
    row = v2_job(accum=2)
    row[L.J_NCHW_BYTES] = 4e9
    nchw = v2_tables([row], [v2_gpu()], [[1e14, 1e14, 1e14]], class_peak, prec=prec).run()
    assert nchw["t_mem"][0, 0, 0] == plain["t_mem"][0, 0, 0]
    assert nchw["t_mem"][0, 0, 1] - plain["t_mem"][0, 0, 1] == pytest.approx(2 * 4e9 * 0.5 / 2e12, rel=1e-9)
    assert nchw["t_mem"][0, 0, 2] - plain["t_mem"][0, 0, 2] == pytest.approx(2 * 4e9 * 1.0 / 2e12, rel=1e-9)
    assert nchw["t_flop"][0, 0, 1] == plain["t_flop"][0, 0, 1]
    assert nchw["t_flop"][0, 0, 2] == plain["t_flop"][0, 0, 2]


def test_only_fp32_runs_its_convolutions_off_the_tensor_cores(cats):
    """The precision table's ``P_TENSOR_CONV``: 0 for fp32 (SIMT, NCHW kernels), 1 for every
    precision with a tensor-core peak, TF32 among them."""
    from paigrid.inputs.kernel_tables import tensor_convolutions

    flags = {name: tensor_convolutions(cats, name) for name in cats.precisions.names}
    assert flags.pop("fp32") == 0.0
    assert flags["tf32"] == 1.0
    assert set(flags.values()) == {1.0}


def test_v2_amp_casts_cost_launches_at_half_precision_only():
    """J_AMP_CASTS (the activation casts mixed precision launches) adds casts x the per-launch
    time (eager here) to t_mem per micro-batch at a half precision and nothing at FP32, which
    casts nothing; the FLOP side is unchanged."""
    class_peak = np.full((1, 2, L.N_CLASSES), 1e14)
    plain = v2_tables([v2_job(accum=2)], [v2_gpu()], [[1e14, 1e14]], class_peak).run()
    row = v2_job(accum=2)
    row[L.J_AMP_CASTS] = 5000.0
    cast = v2_tables([row], [v2_gpu()], [[1e14, 1e14]], class_peak).run()
    assert cast["t_mem"][0, 0, 0] == plain["t_mem"][0, 0, 0]
    assert cast["t_mem"][0, 0, 1] - plain["t_mem"][0, 0, 1] == pytest.approx(2 * 5000.0 * 6e-6, rel=1e-9)
    assert cast["t_flop"][0, 0, 1] == plain["t_flop"][0, 0, 1]


def test_class_fields_carry_twice_the_zoo_amp_casts(cats):
    """A job's J_AMP_CASTS is 2 x the zoo's forward casts per step (each cast and its
    gradient's cast back), whatever the batch; a model whose layers declare none carries 0."""
    from paigrid.inputs.zoo import with_zoo_workloads

    cats = with_zoo_workloads(cats)
    options = {key: getattr(Options(), key) for key in JOB_OPTIONS}
    with DATASETS.joinpath("workload_classes.csv").open(encoding="utf-8") as handle:
        rows = {r["name"]: r for r in csv.DictReader(handle)}
    forward = float(rows["tacotron2"]["amp_cast_launches_per_step"])
    assert forward > 0
    for batch in (8.0, 64.0):
        fields = class_fields(Job("j", "tacotron2", batch, options), cats, Options())
        assert fields[L.J_AMP_CASTS] == 2.0 * forward
    assert class_fields(Job("j", "resnet50-v1.5", 8.0, options), cats, Options())[L.J_AMP_CASTS] == 0.0


def test_class_fields_carry_the_nchw_transposes_of_an_nchw_job_only(cats):
    """``memory_format = "nchw"`` (a job's variant or the sweep option) carries the zoo's
    transpose bytes x batch; channels-last (the sweep default) carries none, and a network
    without tensor-core convolutions has none to carry."""
    from paigrid.inputs.zoo import with_zoo_workloads

    cats = with_zoo_workloads(cats)
    options = {key: getattr(Options(), key) for key in JOB_OPTIONS}
    with DATASETS.joinpath("workload_classes.csv").open(encoding="utf-8") as handle:
        rows = {r["name"]: r for r in csv.DictReader(handle)}
    expected = float(rows["resnet50-v1.5"]["gemm_conv_nchw_transpose_train_MB_per_sample"]) * 1e6 * 8
    assert expected > 0
    nchw = Job("j", "resnet50-v1.5", 8.0, options, variant={"memory_format": "nchw"})
    assert class_fields(nchw, cats, Options())[L.J_NCHW_BYTES] == pytest.approx(expected)
    as_option = Options().with_overrides({"memory_format": "nchw"}, "--option")
    assert class_fields(Job("j", "resnet50-v1.5", 8.0, options), cats, as_option)[L.J_NCHW_BYTES] == pytest.approx(
        expected
    )
    assert class_fields(Job("j", "resnet50-v1.5", 8.0, options), cats, Options())[L.J_NCHW_BYTES] == 0.0
    gpt2 = Job("j", "gpt2-small", 8.0, options, variant={"memory_format": "nchw"})
    assert class_fields(gpt2, cats, Options())[L.J_NCHW_BYTES] == 0.0


def test_class_fields_carry_the_amp_fp32_bytes(cats):
    options = {key: getattr(Options(), key) for key in JOB_OPTIONS}
    with DATASETS.joinpath("workload_classes.csv").open(encoding="utf-8") as handle:
        rows = {r["name"]: r for r in csv.DictReader(handle)}
    from paigrid.inputs.zoo import with_zoo_workloads

    cats = with_zoo_workloads(cats)
    for name in ("gpt2-small", "resnet50-v1.5", "ncf"):
        fields = class_fields(Job("j", name, 8.0, options), cats, Options())
        fp32_mb = float(rows[name]["elementwise_norm_amp_fp32_train_MB_per_sample"]) + float(
            rows[name]["embedding_amp_fp32_train_MB_per_sample"]
        )
        assert fields[L.J_AMP_FP32_BYTES] == pytest.approx(fp32_mb * 1e6 * 8)
        memory_bound = fields[L.J_CLASS_BYTES + L.CLASS_ELEMENTWISE] + fields[L.J_CLASS_BYTES + L.CLASS_EMBEDDING]
        assert fields[L.J_AMP_FP32_BYTES] <= memory_bound * (1 + 1e-12)
    # the embedding lookups (FP32 tables, which no mixed precision casts) are all FP32 bytes
    ncf = class_fields(Job("j", "ncf", 8.0, options), cats, Options())
    assert ncf[L.J_CLASS_BYTES + L.CLASS_EMBEDDING] > 0
    assert ncf[L.J_AMP_FP32_BYTES] >= ncf[L.J_CLASS_BYTES + L.CLASS_EMBEDDING] * (1 - 1e-12)
    # batchnorm + ReLU networks keep nothing in FP32; HF GPT-2 (LayerNorm, gelu_new, FP32 residual stream) most
    assert class_fields(Job("j", "resnet50-v1.5", 8.0, options), cats, Options())[L.J_AMP_FP32_BYTES] == 0.0
    gpt2 = class_fields(Job("j", "gpt2-small", 8.0, options), cats, Options())
    assert gpt2[L.J_AMP_FP32_BYTES] > 0.8 * gpt2[L.J_CLASS_BYTES + L.CLASS_ELEMENTWISE]


def random_v2_tables(seed, nan_field=None):
    rng = np.random.default_rng(seed)
    jobs = []
    for _ in range(3):
        flops = rng.uniform(0, 1e13, L.N_CLASSES) * (rng.random(L.N_CLASSES) < 0.7)
        nbytes = rng.uniform(0, 1e10, L.N_CLASSES) * (rng.random(L.N_CLASSES) < 0.8)
        jobs.append(
            v2_job(
                tuple(flops),
                tuple(nbytes),
                launches=float(rng.integers(0, 5000)),
                update=float(rng.choice([8.0, 16.0, 24.0])),
                activation=rng.uniform(1e8, 1e11),
                graphs=float(rng.integers(0, 2)),
                params=rng.uniform(1e6, 2e9),
                accum=float(rng.integers(1, 4)),
                batch=float(rng.integers(1, 256)),
            )
        )
        jobs[-1][L.J_AMP_FP32_BYTES] = rng.uniform(0, 1) * nbytes[L.CLASS_ELEMENTWISE]
        jobs[-1][L.J_NCHW_BYTES] = rng.uniform(0, 2) * nbytes[L.CLASS_GEMM_CONV] * (rng.random() < 0.7)
        jobs[-1][L.J_AMP_CASTS] = float(rng.integers(0, 8000)) * (rng.random() < 0.5)
    if nan_field is not None:
        jobs[int(rng.integers(0, 3))][nan_field] = np.nan
    gpus = [
        v2_gpu(
            mem_bw=rng.uniform(3e11, 5e12),
            launch=rng.uniform(1e-6, 2e-5),
            graphs=rng.uniform(3e-7, 5e-6),
            memory=rng.uniform(8e9, 2e11),
        )
        for _ in range(4)
    ]
    peak = rng.uniform(5e12, 2e15, (4, 3))
    peak[rng.random((4, 3)) < 0.2] = np.nan
    class_peak = peak[:, :, None] * rng.uniform(0.05, 1.0, (4, 3, L.N_CLASSES))
    return v2_tables(jobs, gpus, peak, class_peak, prec=(FP32, AMP, [0.25, 6.0, 2.0, 2.0, 1.0]))


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize(
    "nan_field",
    [
        None,
        L.J_CLASS_FLOP + 1,
        L.J_CLASS_BYTES + L.CLASS_ELEMENTWISE,
        L.J_LAUNCHES,
        L.J_ACTIVATION_V2,
        L.J_AMP_FP32_BYTES,
        L.J_NCHW_BYTES,
        L.J_AMP_CASTS,
    ],
)
def test_v2_kernel_matches_its_reference_nan_positions_included(seed, nan_field):
    tables = random_v2_tables(seed, nan_field)
    expected = tables.run("reference")
    assert_same(tables.run("kernel"), expected)
    assert_same(tables.run("serial"), expected)
    if nan_field == L.J_ACTIVATION_V2:  # as in pai-v1: an unknown footprint never fits in memory
        assert (expected["fits_memory"] == 0).any()
    elif nan_field is not None:  # a missing class number is a missing input (rule 6), never a silent 0
        assert np.isnan(expected["t_mem"]).any() or np.isnan(expected["t_flop"]).any()
        assert (expected["invalid_reason"] == L.REASON_MISSING_INPUT).any()


# --- model selection ------------------------------------------------------------------------------
def test_model_is_an_option_a_spec_key_and_checked():
    assert Options().model == "pai-v2"
    assert spec_from_dict({"model": "pai-v1"}, "spec").options.model == "pai-v1"
    assert spec_from_dict({"options": {"model": "pai-v1"}}, "spec").options.model == "pai-v1"
    with pytest.raises(PaigridError, match="model is given twice"):
        spec_from_dict({"model": "pai-v2", "options": {"model": "pai-v1"}}, "spec")
    with pytest.raises(PaigridError, match="model must be one of pai-v1, pai-v2, not 'pai-v3'"):
        spec_from_dict({"model": "pai-v3"}, "spec")
    with pytest.raises(PaigridError, match="execution must be one of eager, graphs"):
        Options().with_overrides({"execution": "compiled"}, "--option")


def test_predict_under_each_model(tmp_path):
    args = (
        "predict",
        "--workload",
        "bert-large-seq128",
        "--arch",
        "1w1g",
        "--gpu",
        "H200",
        "--n-gpu",
        "1",
        "--intra",
        "pcie5",
        "--network",
        "none",
        "--precision",
        "amp-bf16",
        "--json",
    )
    v1 = json.loads(run(*args, "--model", "pai-v1").stdout)
    default = json.loads(run(*args).stdout)
    v2 = json.loads(run(*args, "--model", "pai-v2").stdout)
    assert v2 == default  # pai-v2 is the default
    assert v2["step_time"] != v1["step_time"] and v2["valid"]
    assert v2["bottleneck"] in L.BOTTLENECK_NAMES
    assert_clean_error(run(*args, "--model", "pai-v9"), "model must be one of pai-v1, pai-v2")


def test_the_cube_records_its_model_and_pai_v1_is_the_format1_fixture(tmp_path, small_cube):
    from paigrid.inputs.spec import load_spec
    from paigrid.orchestration import run_sweep

    fixture = Path(__file__).parent / "data" / "format1"
    spec = load_spec(fixture / "spec.toml")  # small_cube is this spec swept with pai-v1
    spec.options = spec.options.with_overrides({"model": "pai-v2"}, "test")
    run_sweep(spec, tmp_path / "v2.h5", progress=False)
    with (
        paigrid.open_dataset(fixture / "cube.h5") as old,
        paigrid.open_dataset(small_cube) as v1,
        paigrid.open_dataset(tmp_path / "v2.h5") as v2,
    ):
        assert cube_model(old.attrs) == "pai-v1"  # written before the attribute existed
        assert v1.attrs["model"] == "pai-v1" and v2.attrs["model"] == "pai-v2"
        for name in ("step_time", "t_flop", "t_mem", "t_data", "best_step_time"):
            np.testing.assert_array_equal(v1[name].values, old[name].values, err_msg=name)
        assert_within_one_ulp(v1["throughput"].values, old["throughput"].values, "throughput")  # derived (format 4)
        assert not np.array_equal(v2["step_time"].values, v1["step_time"].values, equal_nan=True)
        # validity is the model-independent configuration rules: the same NaN positions
        np.testing.assert_array_equal(np.isnan(v2["step_time"].values), np.isnan(v1["step_time"].values))


# --- the pai-v2 inputs ------------------------------------------------------------------------------
def test_every_gpu_has_a_generation_and_every_data_row_a_source(cats):
    generations = {"Kepler", "Pascal", "Volta", "Turing", "Ampere", "Ada", "Hopper", "Blackwell"}
    assert {row["generation"] for row in cats.gpus.rows} <= generations
    assert all(row["generation"] for row in cats.gpus.rows)
    for name in ("class_efficiency.csv", "parameter_bounds.csv"):
        with DATASETS.joinpath(name).open(encoding="utf-8") as handle:
            rows = list(csv.DictReader(handle))
        assert rows and all(len(row["source"]) > 40 for row in rows), name
    eff = defaults()
    # the most specific row applies; amp-fp16 and amp-bf16 share the amp family
    assert eff.class_for("gemm_conv", "Hopper", "amp-bf16") == eff.class_for("gemm_conv", "Hopper", "amp-fp16")
    assert eff.class_for("gemm_conv", "Hopper", "amp-bf16") != eff.class_for("gemm_conv", "Volta", "amp-bf16")
    assert eff.class_for("hbm", "Kepler", "*") < eff.class_for("hbm", "Hopper", "*")
    with pytest.raises(PaigridError, match="no value for class gemm_conv"):
        eff.class_for("gemm_conv", "Hopper", "int4")


def test_class_fields_follow_the_attention_and_execution_choices(cats):
    options = {key: getattr(Options(), key) for key in JOB_OPTIONS}
    eager = class_fields(Job("j", "gpt2-small", 8.0, options), cats, Options())
    fused = class_fields(Job("j", "gpt2-small", 8.0, options, variant={"attention": "fused"}), cats, Options())
    graphs = class_fields(Job("j", "gpt2-small", 8.0, options), cats, Options(execution="graphs"))
    assert eager[L.J_CLASS_FLOP + L.CLASS_ATTENTION_EAGER] > 0 == eager[L.J_CLASS_FLOP + L.CLASS_ATTENTION_FUSED]
    assert fused[L.J_CLASS_FLOP + L.CLASS_ATTENTION_FUSED] > 0 == fused[L.J_CLASS_FLOP + L.CLASS_ATTENTION_EAGER]
    assert fused[L.J_ACTIVATION_V2] < eager[L.J_ACTIVATION_V2] and fused[L.J_LAUNCHES] < eager[L.J_LAUNCHES]
    assert graphs[L.J_GRAPHS] == 1.0 == 1.0 - eager[L.J_GRAPHS]
    # backward = 2 x forward for the GEMM class: 3 x forward FLOPs per sample x batch
    with DATASETS.joinpath("workload_classes.csv").open(encoding="utf-8") as handle:
        row = next(r for r in csv.DictReader(handle) if r["name"] == "gpt2-small")
    assert eager[L.J_CLASS_FLOP] == pytest.approx(3 * float(row["gemm_conv_GFLOP_per_sample"]) * 1e9 * 8)
    # pai-v1 rows are unchanged by the pai-v2 fields
    assert np.array_equal(
        job_vector(Job("j", "gpt2-small", 8.0, options), cats)[:14],
        job_vector(Job("j", "gpt2-small", 8.0, options, variant={"attention": "fused"}), cats)[:14],
    )


def test_measurement_columns_reach_pai_v2_only(cats):
    rows = select(load_measurements(PUBLIC, cats), ["id=h200-02"], cats)
    assert rows[0].variant == {"optimizer": "adamw", "attention": "fused", "execution": "eager"}
    plain = [r.job(Options()) for r in rows]
    plain[0].variant = {}
    for model, differs in (("pai-v1", False), ("pai-v2", True)):
        options = Options(model=model)
        with_columns = predict_configs([rows[0].job(options)], [rows[0].config()], cats, defaults(), options)[0]
        without = predict_configs(plain, [rows[0].config()], cats, defaults(), options)[0]
        assert (with_columns["step_time"] != without["step_time"]) == differs, model


# --- calibration under pai-v2 --------------------------------------------------------------------
@pytest.mark.slow
def test_v2_fit_is_capped_shared_per_generation_and_reports_defaults(cats):
    rows = load_measurements(PUBLIC, cats)
    result = fit(rows, defaults(), Options(model="pai-v2"), cats=cats, allow_bounds=True)
    assert 1 <= len(result.parameters) <= len(rows) // ROWS_PER_PARAMETER
    assert all(p.section == "class_efficiency" or p.section == "link_efficiency" for p in result.parameters)
    generations = {p.key.split("/")[1] for p in result.parameters if p.section == "class_efficiency"}
    assert generations <= {"Volta", "Ampere", "Hopper", "*"}  # never one GPU model
    assert result.notes["at_default"] and len(result.notes["at_default"]) == len(result.notes["default_values"])
    for p in result.parameters:
        assert p.lower <= p.value <= p.upper
    shared = fit(rows, defaults(), Options(model="pai-v2"), cats=cats, allow_bounds=True, share="all")
    assert {p.key.split("/")[1] for p in shared.parameters if p.section == "class_efficiency"} == {"*"}


def test_v2_fit_recovers_a_known_gemm_efficiency(tmp_path, cats):
    """Rows generated by pai-v2 itself with known values give those values back."""
    from paigrid.accuracy.measurements import predict_rows
    from paigrid.inputs.efficiency import Efficiency

    with open(PUBLIC, newline="", encoding="utf-8") as handle:
        lines = [line for line in csv.DictReader(handle) if line["gpu"] == "H200"]
    truth = defaults().overridden(
        Efficiency({}, {}, {}, {}, "truth", {"gemm_conv/Hopper/amp": 0.31, "gemm_conv/Hopper/tf32": 0.37})
    )
    path = tmp_path / "syn.csv"
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(lines[0]))
        writer.writeheader()
        writer.writerows(lines)
    options = Options(model="pai-v2")
    rows = load_measurements(path, cats)
    for line, predicted in zip(lines, predict_rows(rows, cats, truth, options)):
        line["throughput"] = repr(predicted["throughput"])
        line["throughput_unit"] = "samples/s"
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(lines[0]))
        writer.writeheader()
        writer.writerows(lines)
    out = tmp_path / "calib.toml"
    result = run("calibrate", path, "--model", "pai-v2", "--fit", "class", "--out", out, "--allow-bounds")
    assert result.exit_code == 0, result.output
    calib = load_calibration(out)
    assert calib.classes["gemm_conv/Hopper/amp"] == pytest.approx(0.31, rel=0.01)
    assert calib.classes["gemm_conv/Hopper/tf32"] == pytest.approx(0.37, rel=0.01)
    assert "kept at its default" in result.stdout or len(calib.classes) <= len(rows) // ROWS_PER_PARAMETER


def test_a_workload_correction_is_fitted_and_applies_to_its_workload_only(tmp_path, cats):
    """Rows generated with a known per-workload factor give it back (``--fit workload``); the
    factor divides that workload's class FLOPs and bytes and touches no other workload."""
    from paigrid.accuracy.measurements import predict_rows
    from paigrid.inputs.efficiency import Efficiency

    with open(PUBLIC, newline="", encoding="utf-8") as handle:
        lines = [line for line in csv.DictReader(handle) if line["gpu"] == "H200"]
    truth = defaults().overridden(
        Efficiency({}, {}, {}, {}, "truth", workloads={"gpt2-small": 0.7, "resnet50-v1.5": 1.3})
    )
    options = Options(model="pai-v2")
    path = tmp_path / "syn.csv"
    for _ in range(2):  # write, then rewrite with the generated throughputs
        with open(path, "w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(lines[0]))
            writer.writeheader()
            writer.writerows(lines)
        for line, predicted in zip(lines, predict_rows(load_measurements(path, cats), cats, truth, options)):
            line["throughput"], line["throughput_unit"] = repr(predicted["throughput"]), "samples/s"
    out = tmp_path / "calib.toml"
    result = run("calibrate", path, "--fit", "workload", "--out", out)
    assert result.exit_code == 0, result.output
    assert "this workload only" in result.stdout
    calib = load_calibration(out)
    assert calib.workloads["gpt2-small"] == pytest.approx(0.7, rel=0.01)
    assert calib.workloads["resnet50-v1.5"] == pytest.approx(1.3, rel=0.01)
    assert calib.workloads.get("bert-large-seq128", 1.0) == pytest.approx(1.0, rel=0.01)
    # applied: the class FLOPs and bytes of that workload only, divided by the factor
    gpt2 = Job("a", "gpt2-small", 16.0, {k: getattr(Options(), k) for k in JOB_OPTIONS})
    plain = class_fields(gpt2, cats, options)
    corrected = class_fields(gpt2, cats, options, calib)
    for field in (*range(L.J_CLASS_FLOP, L.J_CLASS_FLOP + L.N_CLASSES), L.J_AMP_FP32_BYTES):
        assert corrected[field] == pytest.approx(plain[field] / calib.workloads["gpt2-small"])
    assert corrected[L.J_LAUNCHES] == plain[L.J_LAUNCHES] and corrected[L.J_UPDATE_BYTES] == plain[L.J_UPDATE_BYTES]
    bert = Job("b", "bert-large-seq128", 64.0, gpt2.options)
    assert class_fields(bert, cats, options, calib) == class_fields(bert, cats, options)


def test_the_default_calibration_of_the_public_rows_is_accepted(tmp_path):
    """What a user runs first: ``paigrid calibrate`` on the shipped rows with the defaults fits
    without a parameter on a bound (a bound would make it exit non-zero)."""
    result = run("calibrate", PUBLIC, "--out", tmp_path / "c.toml")
    assert result.exit_code == 0, result.output
    assert "at a bound" not in result.stdout and load_calibration(tmp_path / "c.toml").classes


def test_workload_corrections_are_pai_v2_and_checked(tmp_path):
    refused = run("calibrate", PUBLIC, "--model", "pai-v1", "--fit", "workload", "--out", tmp_path / "c.toml")
    assert_clean_error(refused, "parameters of compute model pai-v2")
    path = tmp_path / "c.toml"
    for text, fragment in (
        ("[workload_efficiency]\ngpt2-small = 0\n", "must be a positive number"),
        ("[workload_efficiency]\nalexnet-9000 = 0.5\n", "names nothing known"),
    ):
        path.write_text(text)
        with pytest.raises(PaigridError, match=fragment):
            load_calibration(path)


def test_a_parameter_fitted_onto_a_bound_keeps_its_default_unless_allowed(tmp_path):
    # the ResNet-50 rows alone push the Volta HBM efficiency onto its upper bound (0.95): by
    # default it goes back to its sourced default and the other parameters are fitted without it
    where = ("--rows-where", "workload=resnet50-v1.5")
    result = run("calibrate", PUBLIC, "--model", "pai-v2", "--out", tmp_path / "c.toml", *where)
    assert result.exit_code == 0, result.output
    line = next(x for x in result.stdout.splitlines() if x.startswith("class_efficiency.hbm/Volta/*"))
    assert "fitted onto a bound, so kept at its default" in line and "at a bound" not in result.stdout
    written = load_calibration(tmp_path / "c.toml")
    assert "hbm/Volta/*" not in written.classes and written.classes
    allowed = run("calibrate", PUBLIC, "--model", "pai-v2", "--out", tmp_path / "d.toml", "--allow-bounds", *where)
    assert allowed.exit_code == 0, allowed.output
    assert "at a bound" in allowed.stdout
    assert load_calibration(tmp_path / "d.toml").classes["hbm/Volta/*"] == pytest.approx(0.95, rel=1e-3)


def test_bad_class_calibration_keys_are_one_sentence(tmp_path):
    path = tmp_path / "c.toml"
    for text, fragment in (
        ('[class_efficiency]\n"gemm/Hopper/amp" = 0.5\n', "must be CLASS/GENERATION/PRECISION"),
        ('[class_efficiency]\n"gemm_conv/Hopper/amp" = 1.5\n', "a fraction in (0, 1]"),
        ('[class_efficiency]\n"launch_eager/*/*" = -3\n', "positive number of microseconds"),
    ):
        path.write_text(text)
        with pytest.raises(PaigridError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
            load_calibration(path)


# --- row kinds and the cross-validated protocol -------------------------------------------------
def test_row_kinds_are_a_registry(tmp_path, cats):
    assert set(ROW_KINDS) == {"throughput", "scaling", "collective", "llm"} and row_kind("").name == "throughput"
    with pytest.raises(PaigridError, match="unknown row kind 'bandwidth'; known: collective, llm, scaling, throughput"):
        row_kind("bandwidth")
    with open(PUBLIC, newline="", encoding="utf-8") as handle:
        lines = list(csv.DictReader(handle))[:2]
    for line in lines:
        line["kind"] = "bandwidth"
    path = tmp_path / "m.csv"
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(lines[0]))
        writer.writeheader()
        writer.writerows(lines)
    assert_clean_error(run("validate", path), "line 2", "unknown row kind 'bandwidth'")


def test_held_out_rows_are_never_in_their_folds_fit(cats):
    rows = [r for r in load_measurements(PUBLIC, cats) if r.gpu != "H200" or r.precision == "amp-bf16"]
    results, folds = held_out(rows, cats, Options(model="pai-v2"), "generation")
    assert sorted(r["id"] for r in results) == sorted(r.id for r in rows)  # one prediction per row
    by_id = {r.id: r for r in rows}
    for fold in folds:
        assert fold["train_rows"] + fold["test_rows"] == len(rows)
        # a generation held out is predicted only by parameters shared across generations
        assert all(
            name.split(".", 1)[1].split("/")[1] == "*"
            for name in fold["parameters"]
            if name.startswith("class_efficiency.")
        )
    assert all(by_id[r["id"]].generation == r["fold"] for r in results)
    band = bands(results)
    assert set(band) == {"single_gpu", "multi_gpu_one_server", "multi_server"}
    assert math.isnan(band["multi_server"]) and band["single_gpu"] > 0


# --- uncertainty bands ----------------------------------------------------------------------------
def _bands_file():
    with DATASETS.joinpath("prediction_bands.csv").open(encoding="utf-8") as handle:
        return {(r["model"], r["calibration"], r["group"]): r for r in csv.DictReader(handle)}


def test_predict_shows_the_band_of_its_group(tmp_path):
    table = _bands_file()
    args = (
        "predict",
        "--workload",
        "resnet50",
        "--gpu",
        "V100",
        "--intra",
        "nvlink2-hcm",
        "--precision",
        "fp32",
        "--model",
        "pai-v2",
        "--json",
    )
    one = json.loads(run(*args, "--arch", "1w1g", "--n-gpu", "1", "--network", "none").stdout)
    eight = json.loads(run(*args, "--arch", "allreduce-local", "--n-gpu", "8", "--network", "none").stdout)
    many = json.loads(run(*args, "--arch", "allreduce-cluster", "--n-gpu", "16", "--network", "eth-25g").stdout)
    assert one["compute_model"] == "pai-v2"
    assert one["band"] == pytest.approx(float(table["pai-v2", "uncalibrated", "single_gpu"]["band"]))
    assert eight["band"] == pytest.approx(float(table["pai-v2", "uncalibrated", "multi_gpu_one_server"]["band"]))
    assert many["band"] is None and table["pai-v2", "uncalibrated", "multi_server"]["band"] == ""
    calib = tmp_path / "c.toml"
    calib.write_text('[class_efficiency]\n"gemm_conv/Volta/fp32" = 0.7\n')
    calibrated = json.loads(
        run(*args, "--arch", "1w1g", "--n-gpu", "1", "--network", "none", "--calibration", calib).stdout
    )
    assert calibrated["band"] == pytest.approx(float(table["pai-v2", "calibrated", "single_gpu"]["band"]))
    text = run(*args[:-1], "--arch", "allreduce-cluster", "--n-gpu", "16", "--network", "eth-25g").stdout
    assert "unknown (no held-out measurement of this group)" in text


@pytest.mark.slow
def test_the_bands_file_is_what_the_protocol_gives():
    import importlib.util

    spec = importlib.util.spec_from_file_location("accuracy", Path(__file__).parent.parent / "bench" / "accuracy.py")
    accuracy = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(accuracy)
    assert accuracy.bands_text(accuracy._default_measurements()) == DATASETS.joinpath("prediction_bands.csv").read_text(
        encoding="utf-8"
    ), "run python bench/accuracy.py"


def test_best_arch_counts_the_configurations_within_the_band_as_ties(tmp_path):
    from paigrid.cube import open_cube
    from paigrid.query import best_configurations, label_indices

    out = tmp_path / "c.h5"
    assert run("sweep", "--out", out, "--workloads", "resnet50", "--model", "pai-v2", "-q").exit_code == 0
    band = float(_bands_file()["pai-v2", "uncalibrated", "multi_gpu_one_server"]["band"])
    cube = open_cube(out)
    try:
        where = {
            "gpu": label_indices(cube, "gpu", ["A100-SXM4-80GB"]),
            "n_gpu": label_indices(cube, "n_gpu", ["8"]),
            "precision": label_indices(cube, "precision", ["amp-fp16"]),
        }
        row = best_configurations(cube, "time", where, ["resnet50"])[0]
        step = cube.file["step_time"][0][:, where["gpu"][0], where["n_gpu"][0], :, :, where["precision"][0]]
        labels = cube.labels
    finally:
        cube.close()
    assert row["band"] == pytest.approx(band)
    # distinct configurations within the band: one per value of the dimensions the arch depends on
    within = set()
    for a, i, w in zip(*np.nonzero(step.astype(np.float64) <= row["step_time"] * (1 + band))):
        arch = labels["arch"][a]
        ignored = ARCH_IGNORES.get(arch, ())
        within.add(
            (
                arch,
                "any" if "intra" in ignored else labels["intra"][i],
                "any" if "network" in ignored else labels["network"][w],
            )
        )
    by_hand = len(within) - 1
    assert row["ties"] == by_hand > 0
    table = run(
        "query",
        out,
        "--best-arch",
        "--where",
        "gpu=A100-SXM4-80GB",
        "--where",
        "n_gpu=8",
        "--where",
        "precision=amp-fp16",
    ).stdout
    assert "ties" in table.splitlines()[0]


def test_the_cube_stores_the_band_per_job_and_gpu_count(tmp_path):
    out = tmp_path / "c.h5"
    spec = tmp_path / "s.toml"
    spec.write_text(
        'model = "pai-v2"\nworkloads = ["resnet50", "bert-large-seq128"]\n[grid]\ngpu = ["V100"]\n'
        'n_gpu = [1, 4, 16]\nprecision = ["fp32"]\n[options]\ngpus_per_node = 4\n'
    )
    assert run("sweep", spec, "--out", out, "-q").exit_code == 0
    table = _bands_file()
    with paigrid.open_dataset(out) as ds:
        band = ds["prediction_band"]
        assert band.dims == ("job", "n_gpu") and int(ds.attrs["format_version"]) >= 3
        for k, group in enumerate(("single_gpu", "multi_gpu_one_server", "multi_server")):  # 1, 4 of 4, 16
            want = table["pai-v2", "uncalibrated", group]["band"]
            values = band.values[:, k]
            assert np.all(np.isnan(values)) if not want else np.allclose(values, float(want)), group
