"""End to end: sweep a small grid, open it with xarray, and check queries against brute force."""

import hdf5plugin  # noqa: F401  (registers the blosc filter for reading)
import numpy as np
import pytest
import xarray as xr

from paigrid.cube import open_cube
from paigrid.errors import PaigridError
from paigrid.inputs.spec import load_spec, spec_from_dict
from paigrid.kernels import dp_columns as L
from paigrid.orchestration import run_sweep
from paigrid.predict import predict_one
from paigrid.query import best_configurations, parse_where
from paigrid.schema import ANY, ARCH_IGNORES, FORMAT_VERSION, partial_path

SPEC = """
workloads = ["resnet50", "bert-large-seq384", "gpt2-xl", "transformer"]
jobs_per_block = 2

[grid]
gpu = ["V100", "A100-SXM4-80GB", "H100"]
n_gpu = [1, 8, 64]
intra = ["pcie3", "nvlink2-hcm", "nvswitch-nvlink3"]
network = ["none", "eth-25g", "ib-hdr-200g"]
precision = ["fp32", "amp-fp16"]
"""
DIMS = ("job", "arch", "gpu", "n_gpu", "intra", "network", "precision")


@pytest.fixture(scope="module")
def cube_path(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sweep")
    (folder / "spec.toml").write_text(SPEC)
    path = folder / "cube.h5"
    run_sweep(load_spec(folder / "spec.toml"), path, progress=False)
    return path


@pytest.fixture(scope="module")
def ds(cube_path):
    with xr.open_dataset(cube_path, engine="h5netcdf") as data:
        yield data.load()


def test_cube_opens_with_named_dimensions_and_coordinates(ds):
    assert ds.step_time.dims == DIMS
    assert list(ds.arch.values) == ["1w1g", "1wng", "allreduce-local", "ps-worker", "allreduce-cluster"]
    assert list(ds.gpu.values) == ["V100-SXM2-16GB", "A100-SXM4-80GB", "H100-SXM5-80GB"]
    assert list(ds.n_gpu.values) == [1, 8, 64]
    assert ds.t_flop.dims == ("job", "gpu", "precision")
    assert ds.best_step_time.dims == ("job", "gpu", "n_gpu", "precision")
    assert ds.sizes["job"] == 4


def test_every_variable_has_units_and_flags_are_cf(ds):
    for name, var in {**ds.data_vars, **ds.coords}.items():
        assert "units" in var.attrs, name
    assert ds.step_time.attrs["units"] == "s"
    assert "throughput" not in ds.variables  # format 4 stores its factor; paigrid.open_dataset derives it
    assert ds.samples_per_job_step.attrs["units"] == "samples" and ds.samples_per_job_step.dims == ("job", "n_gpu")
    assert ds.cost_per_step_second.attrs["units"] == "USD/1e6 samples/s"
    assert ds.energy_per_step_second.dims == ("job", "gpu")
    assert ds.bottleneck.dtype == np.uint8
    assert list(ds.bottleneck.attrs["flag_values"]) == [0, 1, 2, 3, 255]
    assert ds.bottleneck.attrs["flag_meanings"].split()[:4] == list(L.BOTTLENECK_NAMES)
    assert ds.invalid_reason.dtype == np.uint8 and ds.invalid_reason.dims == DIMS
    assert list(ds.invalid_reason.attrs["flag_values"]) == list(range(7))
    assert ds.invalid_reason.attrs["flag_meanings"].split() == list(L.INVALID_REASONS)
    assert "valid" not in ds.variables  # format 2 stores the reason code instead


def test_provenance_attributes(ds):
    assert ds.attrs["complete"] == 1
    assert "paigrid_version" in ds.attrs and "catalogue_sha256" in ds.attrs
    assert int(ds.attrs["format_version"]) == FORMAT_VERSION == 5
    assert "bert-large-seq384" in ds.attrs["spec"]


def test_invalid_configurations_are_nan_and_flagged(ds):
    reason = ds.invalid_reason
    one_gpu_many = ds.step_time.sel(arch="1w1g", n_gpu=8)
    assert np.isnan(one_gpu_many).all() and (reason.sel(arch="1w1g", n_gpu=8) == L.REASON_SINGLE_GPU_ARCH).all()
    assert (reason.sel(arch="allreduce-local", n_gpu=64) == L.REASON_LOCAL_ARCH_EXCEEDS_SERVER).all()
    cluster_without_network = ds.step_time.sel(arch="ps-worker", network="none")
    assert np.isnan(cluster_without_network).all()
    assert (reason.sel(arch="ps-worker", network="none") == L.REASON_CLUSTER_ARCH_NEEDS_NETWORK).all()
    nvlink2_on_a100 = ds.step_time.sel(gpu="A100-SXM4-80GB", intra="nvlink2-hcm")
    assert np.isnan(nvlink2_on_a100).all()
    assert (
        reason.sel(gpu="A100-SXM4-80GB", intra="nvlink2-hcm", arch="allreduce-cluster", network="eth-25g")
        == L.REASON_INTRA_LINK_NOT_ON_GPU
    ).all()
    assert np.isnan(ds.step_time.where(reason != L.REASON_VALID)).all()
    assert int((~np.isnan(ds.step_time)).sum()) == int((reason == L.REASON_VALID).sum())


def test_components_add_up_to_the_step_time(ds):
    total = ds.t_data + ds.t_flop + ds.t_mem + ds.t_comm
    ok = ds.invalid_reason == L.REASON_VALID
    total = total.transpose(*ds.step_time.dims)
    np.testing.assert_allclose(total.where(ok).values, ds.step_time.where(ok).values, rtol=1e-5)


def test_cube_point_equals_predict(ds):
    point = dict(
        job="gpt2-xl",
        arch="allreduce-cluster",
        gpu="A100-SXM4-80GB",
        n_gpu=64,
        intra="nvswitch-nvlink3",
        network="ib-hdr-200g",
        precision="amp-fp16",
    )
    result = predict_one("gpt2-xl", point["arch"], point["gpu"], 64, point["intra"], point["network"], "amp-fp16")
    assert float(ds.step_time.sel(point)) == pytest.approx(result["step_time"], rel=1e-6)
    assert float(ds.t_comm.sel(point)) == pytest.approx(result["t_comm"], rel=1e-6)


@pytest.mark.parametrize(
    "arch, gpu, n, intra, network, precision, reason, fragments",
    [
        (
            "1w1g",
            "V100",
            4,
            "pcie3",
            "none",
            "fp32",
            L.REASON_SINGLE_GPU_ARCH,
            ["1w1g with 4 GPU(s)", "exactly one GPU"],
        ),
        (
            "1wng",
            "V100",
            16,
            "pcie3",
            "none",
            "fp32",
            L.REASON_LOCAL_ARCH_EXCEEDS_SERVER,
            ["1wng with 16 GPU(s)", "keeps every GPU in one server, which has 8 (gpus_per_node)"],
        ),
        (
            "ps-worker",
            "V100",
            8,
            "pcie3",
            "none",
            "fp32",
            L.REASON_CLUSTER_ARCH_NEEDS_NETWORK,
            ["ps-worker with 8 GPU(s)", "needs a network between servers", "'none'"],
        ),
        (
            "allreduce-local",
            "A100-SXM4-80GB",
            8,
            "nvlink2-hcm",
            "none",
            "fp32",
            L.REASON_INTRA_LINK_NOT_ON_GPU,
            ["the nvlink2-hcm link cannot connect A100-SXM4-80GB GPUs"],
        ),
        (
            "1w1g",
            "V100",
            1,
            "pcie3",
            "none",
            "fp8",
            L.REASON_PRECISION_NOT_ON_GPU,
            ["the V100-SXM2-16GB has no fp8 support (fp8_TFLOP_per_s is empty in the GPU catalogue)"],
        ),
    ],
)
def test_invalid_predictions_carry_the_kernels_reason(arch, gpu, n, intra, network, precision, reason, fragments):
    with pytest.raises(PaigridError) as caught:
        predict_one("resnet50", arch, gpu, n, intra, network, precision)
    for fragment in fragments:
        assert fragment in str(caught.value)
    from paigrid.inputs.catalog import Catalogues
    from paigrid.inputs.efficiency import defaults
    from paigrid.inputs.jobs import Job
    from paigrid.inputs.spec import JOB_OPTIONS, Options
    from paigrid.predict import predict_configs

    options = Options()
    job = Job("j", "resnet50", 32.0, {key: getattr(options, key) for key in JOB_OPTIONS})
    config = {"arch": arch, "gpu": gpu, "n_gpu": n, "intra": intra, "network": network, "precision": precision}
    valid_config = {"arch": "1w1g", "gpu": "V100", "n_gpu": 1, "intra": "pcie3", "network": "none", "precision": "fp32"}
    bad, good = predict_configs([job, job], [config, valid_config], Catalogues.load(), defaults(), options)
    assert (bad["invalid_reason"], bad["valid"]) == (reason, False)
    assert np.isnan(bad["step_time"]) and bad["bottleneck"] == "invalid"
    assert (good["invalid_reason"], good["valid"]) == (L.REASON_VALID, True) and good["step_time"] > 0


def test_every_reason_code_has_a_sentence():
    from paigrid.schema import REASON_SENTENCES, reason_sentence

    assert sorted(REASON_SENTENCES) == list(range(len(L.INVALID_REASONS)))
    fields = {
        "arch": "ps-worker",
        "gpu": "V100-SXM2-16GB",
        "n_gpu": 16,
        "intra": "pcie3",
        "network": "eth-25g",
        "precision": "fp32",
        "job": "resnet50",
        "gpus_per_node": 8,
        "lacks": "fp32_TFLOP_per_s is empty in the GPU catalogue",
    }
    assert reason_sentence(L.REASON_VALID, fields) == ""
    for code in range(1, len(L.INVALID_REASONS)):
        sentence = reason_sentence(code, fields)
        assert sentence.endswith(".") and "{" not in sentence, sentence
    assert "resnet50" in reason_sentence(L.REASON_MISSING_INPUT, fields)
    assert "missing" in reason_sentence(L.REASON_MISSING_INPUT, fields)


def brute_force(ds, by, **where):
    """Best configuration per job by direct argmin over the opened cube."""
    sub = ds.sel({k: v for k, v in where.items()})
    step = sub.step_time.where((sub.invalid_reason == L.REASON_VALID) & (sub.fits_memory == 1))
    if by == "time":
        metric = step / (sub.n_gpu * sub.samples_per_step)
    else:
        metric = sub.price / 3600.0 * 1e6 / sub.samples_per_step * step
    order = ("gpu", "n_gpu", "precision", "arch", "intra", "network")
    answers = {}
    for job in ds.job.values:
        m = metric.sel(job=job).transpose(*[d for d in order if d in metric.dims])
        flat = np.where(np.isnan(m.values), np.inf, m.values).reshape(-1)
        k = int(np.argmin(flat))
        index = np.unravel_index(k, m.shape)
        if np.isinf(flat[k]):  # nothing feasible (e.g. does not fit in memory)
            answers[job] = {d: None for d in order} | {"metric": np.nan}
            continue
        answers[job] = {d: m[d].values[i].item() for d, i in zip(m.dims, index)}
        answers[job]["metric"] = flat[k]
    return answers


@pytest.mark.parametrize("by", ["time", "cost"])
@pytest.mark.parametrize(
    "where",
    [
        {},
        {"n_gpu": 8},
        {"gpu": "V100-SXM2-16GB", "precision": "fp32"},
        {"network": "eth-25g"},
        {"arch": "ps-worker", "n_gpu": 64},
    ],
)
def test_best_arch_equals_brute_force_argmin(cube_path, ds, by, where):
    expected = brute_force(ds, by, **where)
    cube = open_cube(cube_path)
    try:
        rows = best_configurations(cube, by, parse_where([f"{k}={v}" for k, v in where.items()], cube))
    finally:
        cube.close()
    assert [r["job"] for r in rows] == list(ds.job.values)
    for row in rows:
        want = expected[row["job"]]
        arch = want.get("arch", where.get("arch"))
        for dim in ("arch", "gpu", "n_gpu", "intra", "network", "precision"):
            label = ANY if dim in ARCH_IGNORES.get(arch, ()) else want[dim] if dim in want else where[dim]
            assert row[dim] == label, (row["job"], dim)
        if row["arch"] is None:
            assert np.isnan(row["step_time"]) and np.isnan(want["metric"])
            continue
        samples = float(ds.samples_per_step.sel(job=row["job"]))
        got = row["step_time"] / (row["n_gpu"] * samples) if by == "time" else row["cost"]
        assert got == pytest.approx(want["metric"], rel=1e-12)
    assert any(row["arch"] is not None for row in rows)


def test_top_k_is_sorted_and_starts_with_the_best(cube_path, ds):
    samples = float(ds.samples_per_step.sel(job="resnet50"))
    cube = open_cube(cube_path)
    try:
        best = best_configurations(cube, "time", {}, ["resnet50"])
        top = best_configurations(cube, "time", {}, ["resnet50"], top=5)
    finally:
        cube.close()
    assert len(top) == 5
    assert top[0].keys() == best[0].keys()
    for key, value in best[0].items():  # NaN (speedup, band, ties without a band) equals NaN here
        assert top[0][key] == value or (value != value and top[0][key] != top[0][key]), key
    per_sample = [r["step_time"] / (r["n_gpu"] * samples) for r in top]
    assert per_sample == sorted(per_sample)


def test_top_k_lists_each_distinct_configuration_once(cube_path):
    """A dimension the architecture does not depend on is shown once, as "any": --top K gives K
    distinct configurations, not one repeated over every network."""
    cube = open_cube(cube_path)
    try:
        top = best_configurations(cube, "time", parse_where(["gpu=V100", "n_gpu=8"], cube), ["resnet50"], top=6)
    finally:
        cube.close()
    labels = [tuple(r[d] for d in ("arch", "intra", "network", "precision")) for r in top]
    assert len(set(labels)) == len(labels) == 6
    assert any(r["arch"] == "allreduce-local" and r["network"] == ANY for r in top)


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"model": "pai-v2", "sync_latency": True, "bucket_overlap": True, "topology_aware": True, "collective": "tree"},
    ],
)
def test_architectures_do_not_depend_on_the_dimensions_they_ignore(tmp_path, options):
    """``schema.ARCH_IGNORES`` is true of the kernel: every valid value of an ignored dimension
    gives the same step time, whatever the options."""
    spec = spec_from_dict(
        {
            "workloads": ["resnet50", "bert-large-seq384"],
            "grid": {
                "gpu": ["V100", "A100-SXM4-80GB"],
                "n_gpu": [1, 4, 16],
                "intra": ["pcie3", "nvlink2-hcm", "nvswitch-nvlink3"],
                "network": ["none", "eth-25g", "ib-hdr-200g"],
                "precision": ["fp32"],
            },
            "options": options,
        },
        "test",
    )
    run_sweep(spec, tmp_path / "c.h5", progress=False)
    with xr.open_dataset(tmp_path / "c.h5", engine="h5netcdf") as data:
        step = data.step_time.where(data.invalid_reason == L.REASON_VALID).load()
    checked = 0
    for arch, ignored in ARCH_IGNORES.items():
        values = step.sel(arch=arch)
        spread = values.max(list(ignored)) - values.min(list(ignored))
        assert float(spread.max()) == 0.0, arch
        checked += int(values.count())
    assert checked > 0


def test_unfinished_cube_is_refused(tmp_path):
    (tmp_path / "spec.toml").write_text(SPEC)
    path = tmp_path / "cube.h5"
    with pytest.raises(RuntimeError):

        def stop(written):
            raise RuntimeError("stop after the first block")

        run_sweep(load_spec(tmp_path / "spec.toml"), path, progress=False, on_block=stop)
    assert not path.exists() and partial_path(path).exists()
    with pytest.raises(PaigridError, match="unfinished"):
        open_cube(path)
    from paigrid.describe import describe

    assert "INCOMPLETE: 1 of 2 blocks written" in describe(path)


@pytest.mark.parametrize("by", ["time", "cost"])
def test_stored_overall_best_equals_the_query(cube_path, ds, by):
    cube = open_cube(cube_path)
    try:
        rows = best_configurations(cube, by)
    finally:
        cube.close()
    stored = ds.overall_best.sel(criterion=by)
    for row in rows:
        index = stored.sel(job=row["job"]).values
        if row["arch"] is None:
            assert (index == -1).all()
            continue
        for dim, k in zip(ds.dimension.values, index):  # the stored index names one representative
            label = ANY if dim in ARCH_IGNORES.get(row["arch"], ()) else ds[dim].values[k].item()
            assert label == row[dim], (row["job"], dim)
        assert float(ds.overall_step_time.sel(job=row["job"], criterion=by)) == row["step_time"]


@pytest.mark.parametrize("compression", ["zstd", "gzip", "none"])
def test_every_compression_stores_the_same_values(cube_path, tmp_path, compression):
    import h5py

    path = tmp_path / f"{compression}.h5"
    run_sweep(load_spec(cube_path.parent / "spec.toml"), path, compression=compression, progress=False)
    with h5py.File(cube_path, "r") as lz4, h5py.File(path, "r") as other:
        assert other.attrs["compression"] == compression
        for name in ("step_time", "samples_per_job_step", "bottleneck", "invalid_reason", "t_flop", "best_step_time"):
            np.testing.assert_array_equal(lz4[name][()], other[name][()], err_msg=name)
        if compression != "none":
            assert other["step_time"].compression is not None or other["step_time"]._filters


@pytest.mark.parametrize("compression", ["lz4", "gzip"])
def test_chunks_of_several_jobs_with_a_partial_last_chunk(tmp_path, compression):
    import h5py

    five = SPEC.replace('"transformer"]', '"transformer", "vgg16"]').replace("jobs_per_block = 2", "jobs_per_block = 4")
    single = five.replace("jobs_per_block = 4", "jobs_per_block = 1")
    (tmp_path / "five.toml").write_text(five)
    (tmp_path / "single.toml").write_text(single)
    run_sweep(load_spec(tmp_path / "five.toml"), tmp_path / "five.h5", compression=compression, progress=False)
    run_sweep(load_spec(tmp_path / "single.toml"), tmp_path / "single.h5", compression=compression, progress=False)
    with h5py.File(tmp_path / "five.h5", "r") as a, h5py.File(tmp_path / "single.h5", "r") as b:
        assert a["step_time"].chunks[0] == 4 and b["step_time"].chunks[0] == 1  # 5 jobs: chunks of 4 + 1
        for name in (
            "step_time",
            "t_comm",
            "samples_per_job_step",
            "cost_per_step_second",
            "energy_per_step_second",
            "bottleneck",
            "invalid_reason",
        ):
            np.testing.assert_array_equal(a[name][()], b[name][()], err_msg=name)


def brute_force_front(ds, job, **where):
    """Every feasible configuration of ``job`` not dominated in (time per sample, cost per sample)."""
    sub = ds.sel(job=job).sel({k: [v] for k, v in where.items()})  # lists keep the dimensions
    step = sub.step_time.where((sub.invalid_reason == L.REASON_VALID) & (sub.fits_memory == 1))
    order = ("gpu", "n_gpu", "precision", "arch", "intra", "network")
    time = (step / (sub.n_gpu * sub.samples_per_step)).transpose(*order)
    cost = (sub.price / 3600.0 * 1e6 / sub.samples_per_step * step).transpose(*order)
    t, c = time.values.reshape(-1), cost.values.reshape(-1)
    points = []
    for k in np.nonzero(~np.isnan(t))[0]:
        dominated = np.any((t <= t[k]) & (c <= c[k]) & ((t < t[k]) | (c < c[k])))
        duplicate_before = np.any((t[:k] == t[k]) & (c[:k] == c[k]))
        if not dominated and not duplicate_before:
            index = np.unravel_index(k, time.shape)
            points.append({d: time[d].values[i].item() for d, i in zip(order, index)})
    points.sort(key=lambda p: (float(time.sel(p)), float(cost.sel(p))))
    return [{d: ANY if d in ARCH_IGNORES.get(p["arch"], ()) else v for d, v in p.items()} for p in points]


@pytest.mark.parametrize("where", [{}, {"network": "eth-25g"}])
def test_pareto_front_equals_brute_force(cube_path, ds, where):
    cube = open_cube(cube_path)
    try:
        rows = best_configurations(cube, "time", parse_where([f"{k}={v}" for k, v in where.items()], cube), pareto=True)
    finally:
        cube.close()
    for job in ds.job.values:
        got = [
            {d: r[d] for d in ("gpu", "n_gpu", "precision", "arch", "intra", "network")}
            for r in rows
            if r["job"] == job
        ]
        want = brute_force_front(ds, job, **where) or [dict.fromkeys(got[0])]
        assert got == want, job
    sizes = [sum(r["job"] == job for r in rows) for job in ds.job.values]
    assert max(sizes) > 1  # a real trade-off exists in this grid
