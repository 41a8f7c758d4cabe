"""Communication model v2, first part: scaling-efficiency and collective-bandwidth rows (their
files, row kinds, ``paigrid validate`` and ``paigrid calibrate`` on them)."""

import json
import math
from importlib import resources

import numpy as np
import pytest

from cli_helpers import assert_clean_error, run
from csv_rows import read_rows, write_rows
from paigrid.accuracy.measurements import load_measurements, modelled
from paigrid.accuracy.rowkinds import allreduce_seconds, predict_observed
from paigrid.accuracy.validate import validate_observed
from paigrid.errors import PaigridError
from paigrid.inputs.efficiency import defaults
from paigrid.inputs.spec import Options
from paigrid.predict import predict_configs

SCALING = str(resources.files("paigrid.datasets").joinpath("scaling_public.csv"))
COLLECTIVES = str(resources.files("paigrid.datasets").joinpath("collectives_public.csv"))


@pytest.fixture(scope="module")
def cats(catalogues):
    return catalogues


# --- the shipped data ---------------------------------------------------------------------------
def test_public_files_have_their_sources():
    scaling, collectives = read_rows(SCALING), read_rows(COLLECTIVES)
    assert len(scaling) == 6 and len(collectives) == 3
    assert all(r["source"].startswith("horovod/horovod@") for r in scaling)
    assert all(r["source"].startswith("https://github.com/NVIDIA/nccl-tests/issues/") for r in collectives)
    assert {r["nodes"] for r in scaling} == {"32", "128"}


def test_file_kind_comes_from_the_columns(cats):
    assert {r.kind for r in load_measurements(SCALING, cats)} == {"scaling"}
    rows = load_measurements(COLLECTIVES, cats)
    assert {r.kind for r in rows} == {"collective"}
    assert [r.arch for r in rows] == ["allreduce-local", "allreduce-local", "allreduce-cluster"]
    assert [modelled(r) for r in rows] == [False, True, True]  # NVLS: an in-switch reduction


def test_unknown_schema_is_one_sentence(tmp_path):
    path = tmp_path / "odd.csv"
    path.write_text("id,speed\na,1\n")
    assert_clean_error(run("validate", path), "is not a measurements file", "scaling_efficiency")


def test_a_scaling_kind_in_a_throughput_file_is_refused(tmp_path, cats):
    public = read_rows(str(resources.files("paigrid.datasets").joinpath("measurements_public.csv")))
    row = {**public[0], "kind": "scaling"}
    with pytest.raises(PaigridError, match="their own file schema"):
        load_measurements(write_rows(tmp_path / "m.csv", [row]), cats)


def test_a_one_gpu_scaling_row_is_refused(tmp_path):
    row = {
        **read_rows(SCALING)[0],
        "gpus_per_node": "1",
        "nodes": "1",
        "network": "none",
        "nics_per_node": "0",
        "arch": "1w1g",
    }
    assert_clean_error(run("validate", write_rows(tmp_path / "s.csv", [row])), "at least 2 GPUs")


# --- predictions --------------------------------------------------------------------------------
def test_scaling_row_is_throughput_ratio_by_hand(cats):
    row = load_measurements(SCALING, cats)[0]
    eff, options = defaults(), Options()
    job = row.job(options)
    many, one = predict_configs(
        [job, job], [row.config(), {**row.config(), "arch": "1w1g", "n_gpu": 1, "network": "none"}], cats, eff, options
    )
    want = many["throughput"] / (row.n_gpu * one["throughput"])
    assert predict_observed([row], cats, eff, options)[0] == pytest.approx(want, rel=1e-12)
    assert 0 < want < 1


def test_collective_bus_bandwidth_by_hand(cats):
    """One server, ring over NVSwitch: t = 2(n-1)/n S / bw + 2(n-1) latency; busbw = S/t x 2(n-1)/n."""
    row = load_measurements(COLLECTIVES, cats)[1]
    link = cats.links.row("nvswitch-nvlink4")
    bw = float(link["nominal_GB_per_s"]) * 1e9 * float(link["efficiency"])
    size, n = 268435456.0, 8
    seconds = 2 * (n - 1) / n * size / bw + 2 * (n - 1) * float(link["latency_us"]) * 1e-6
    assert allreduce_seconds(row, cats, defaults(), Options(), size) == pytest.approx(seconds, rel=1e-12)
    got = predict_observed([row], cats, defaults(), Options())[0]
    assert got == pytest.approx(size / seconds * 2 * (n - 1) / n / 1e9, rel=1e-12)


def test_more_link_bandwidth_never_lowers_bus_bandwidth(cats):
    rows = load_measurements(COLLECTIVES, cats)
    base = predict_observed(rows, cats, defaults(), Options())
    faster = defaults()
    faster.link.update({"nvswitch": 0.95, "infiniband": 0.95})
    assert (predict_observed(rows, cats, faster, Options()) >= base).all()


# --- validate and calibrate ---------------------------------------------------------------------
def test_validate_scaling_in_points():
    result = run("validate", SCALING)
    assert result.exit_code == 0, result.output
    assert "in points" in result.output and " pt" in result.output and "hvd-06" in result.output
    data = json.loads(run("validate", SCALING, "--json").output)
    assert data["kind"] == "scaling" and data["error_kind"] == "points"
    for r in data["rows"]:
        assert r["error"] == pytest.approx(r["predicted"] - r["measured"], abs=1e-12)
    assert data["summary"]["overall"]["count"] == 6


def test_validate_collectives_in_percent_leaves_nvls_out(cats):
    result = run("validate", COLLECTIVES)
    assert result.exit_code == 0, result.output
    assert "not modelled" in result.output and "%" in result.output
    out = validate_observed(load_measurements(COLLECTIVES, cats), defaults(), Options(), cats)
    assert out["summary"]["overall"]["count"] == 2
    for r in out["rows"]:
        assert r["error"] == pytest.approx(r["predicted"] / r["measured"] - 1, rel=1e-12)
        assert math.isfinite(r["predicted"]) and r["predicted"] > 0


# --- communication v2 in the kernel: per-bucket latency and bucketed overlap --------------------
from kernel_tables import GB, link, one  # noqa: E402
from paigrid.kernels import dp_columns as L  # noqa: E402
from test_kernels import assert_same, random_tables  # noqa: E402

MIB = 2.0**20


def with_comm_v2(tables, sync=1, overlap=1, bucket=25 * MIB):
    tables.options[L.O_SYNC_LATENCY] = sync
    tables.options[L.O_BUCKET_BYTES] = bucket
    tables.options[L.O_BUCKET_OVERLAP] = overlap
    return tables


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize(
    ("sync", "overlap", "bucket"), [(1, 0, 25 * MIB), (0, 1, 25 * MIB), (1, 1, 1 * MIB), (1, 1, 1e12)]
)
def test_kernel_matches_reference_with_comm_v2(seed, sync, overlap, bucket):
    tables = with_comm_v2(random_tables(seed, nan_job_field=L.J_PARAMS if seed == 3 else None), sync, overlap, bucket)
    expected = tables.run("reference")
    assert_same(tables.run("kernel"), expected)
    assert_same(tables.run("serial"), expected)


def test_comm_v2_off_is_version_1_exactly():
    base = random_tables(5)
    off = with_comm_v2(random_tables(5), 0, 0, 7 * MIB).run()
    for name, values in base.run().items():
        np.testing.assert_array_equal(off[name], values, err_msg=name)


def test_sync_latency_pays_the_hops_once_per_bucket_by_hand():
    """S = 25e6 params x 4 bytes = 100 MB = 4 buckets of 25 MiB (ceil(95.4 / 25)); ring inside
    one server, 8 GPUs: 2 x 7/8 S / B + 4 x 2 x 7 alpha."""
    intra = link(100 * GB, 5e-6, L.LINK_NVSWITCH)
    t = one(L.ARCH_ALLREDUCE_LOCAL, 8, intra_row=intra, sync_latency=1).run()["t_comm"].item()
    assert t == pytest.approx(2 * 7 / 8 * 100e6 / (100 * GB) + 4 * 2 * 7 * 5e-6, rel=1e-6)


@pytest.mark.parametrize("arch", range(5))
def test_one_gpu_has_exactly_zero_communication_and_latency(arch):
    """On one GPU per-bucket latency adds nothing (there are no latency hops); 1w1g and the
    all-reduce architectures exchange nothing at all, with both options on (1wng and ps-worker
    still copy through the host, as in version 1, and that copy may overlap)."""
    out = one(arch, 1, sync_latency=1, bucket_bytes=1 * MIB).run()
    plain = one(arch, 1).run()
    assert out["invalid_reason"].item() == L.REASON_VALID
    assert out["t_comm"].item() == plain["t_comm"].item()
    assert out["step_time"].item() == plain["step_time"].item()
    if arch in (L.ARCH_1W1G, L.ARCH_ALLREDUCE_LOCAL, L.ARCH_ALLREDUCE_CLUSTER):
        both = one(arch, 1, sync_latency=1, bucket_overlap=1, bucket_bytes=1 * MIB).run()
        assert both["t_comm"].item() == 0.0 and both["step_time"].item() == plain["step_time"].item()


def test_one_gpu_prediction_has_zero_communication_under_both_models(cats):
    config = {
        "arch": "1w1g",
        "gpu": "H100-SXM5-80GB",
        "n_gpu": 1,
        "intra": "pcie5",
        "network": "none",
        "precision": "amp-bf16",
    }
    from paigrid.inputs.jobs import Job
    from paigrid.inputs.spec import JOB_OPTIONS

    for model in ("pai-v1", "pai-v2"):
        on = Options(model=model, sync_latency=True, bucket_overlap=True)
        off = Options(model=model)
        job_ = Job("b", "bert-large-seq128", 32.0, {key: getattr(off, key) for key in JOB_OPTIONS})
        (a,) = predict_configs([job_], [config], cats, defaults(), on)
        (b,) = predict_configs([job_], [config], cats, defaults(), off)
        assert a["t_comm"] == 0.0 and a["step_time"] == b["step_time"]


@pytest.mark.parametrize("collective", range(len(L.COLLECTIVE_NAMES)))
@pytest.mark.parametrize("arch", [L.ARCH_ALLREDUCE_LOCAL, L.ARCH_ALLREDUCE_CLUSTER])
def test_more_participants_never_less_latency(collective, arch):
    """Latency alone (no bytes on the wire): never smaller with more GPUs."""
    counts = [2, 3, 4, 8, 16, 24, 64, 256, 1024] if arch == L.ARCH_ALLREDUCE_CLUSTER else [2, 3, 4, 5, 8]
    free = link(1e30, 5e-6, L.LINK_NVSWITCH)
    net = link(1e30, 20e-6, L.LINK_NETWORK)
    latency = [
        one(arch, n, intra_row=free, net_row=net, sync_latency=1, collective=collective).run()["t_comm"].item()
        for n in counts
    ]
    assert all(b >= a for a, b in zip(latency, latency[1:])), latency
    assert latency[-1] > latency[0]


@pytest.mark.parametrize("seed", range(3))
def test_comm_v2_directions(seed):
    """Per-bucket latency never makes a step faster, bucketed overlap never slower, more
    bandwidth never slower."""
    plain = random_tables(seed).run()
    synced = with_comm_v2(random_tables(seed), 1, 0, 4 * MIB).run()
    overlapped = with_comm_v2(random_tables(seed), 1, 1, 4 * MIB).run()
    ok = plain["invalid_reason"] == L.REASON_VALID
    assert (synced["step_time"][ok] >= plain["step_time"][ok]).all()
    assert (overlapped["step_time"][ok] <= synced["step_time"][ok]).all()
    tables = with_comm_v2(random_tables(seed), 1, 1, 4 * MIB)
    before = tables.run()
    for table in (tables.intra, tables.network):
        table[:, L.L_BW] *= 1.7
        after = tables.run()
        assert (after["step_time"][ok] <= before["step_time"][ok]).all()
        before = after


def test_bucketed_overlap_hides_all_but_the_last_bucket_up_to_the_backward_pass():
    """4 buckets: 3/4 of the exchange may hide, bounded by the backward pass (2/3 of compute)."""
    slow = link(3 * GB, 20e-6, L.LINK_NETWORK)
    plain = one(L.ARCH_ALLREDUCE_CLUSTER, 16, net_row=slow).run()
    hidden = one(L.ARCH_ALLREDUCE_CLUSTER, 16, net_row=slow, bucket_overlap=1).run()
    raw = plain["t_comm"].item()
    backward = 2 / 3 * (plain["t_flop"].item() + plain["t_mem"].item())
    assert hidden["t_comm"].item() == pytest.approx(raw - min(0.75 * raw, backward), rel=1e-6)
    big = one(L.ARCH_ALLREDUCE_CLUSTER, 16, net_row=slow, bucket_overlap=1, bucket_bytes=1e12).run()
    assert big["t_comm"].item() == pytest.approx(raw, rel=1e-6)  # one bucket: nothing hides


def test_bucket_option_is_checked():
    with pytest.raises(PaigridError, match="bucket_mb"):
        Options(bucket_mb=0.0)
    with pytest.raises(PaigridError, match="sync_latency must be true or false"):
        Options().with_overrides({"sync_latency": 1.0}, "--option")


def test_sync_latency_is_on_in_pai_v2_and_off_in_pai_v1_unless_set():
    from paigrid.inputs.kernel_tables import option_vector

    assert not Options(model="pai-v1").sync_latency_on and Options().sync_latency_on  # pai-v2 is the default
    assert not Options(model="pai-v2", sync_latency=False).sync_latency_on
    assert Options(sync_latency=True).sync_latency_on
    assert option_vector(Options(model="pai-v1"))[L.O_SYNC_LATENCY] == 0.0
    assert option_vector(Options())[L.O_SYNC_LATENCY] == 1.0
    assert option_vector(Options())[L.O_BUCKET_BYTES] == 25 * MIB


# --- the inter-server volume of an all-reduce: hierarchical 2(s-1)/s S or NCCL's rings 2(n-1)/n S --
@pytest.mark.parametrize("seed", range(3))
def test_kernel_matches_reference_with_ring_inter_volume(seed):
    tables = random_tables(seed)
    tables.options[L.O_INTER_VOLUME] = 1.0
    tables.options[L.O_COLLECTIVE] = [L.COLLECTIVE_DEFAULT, L.COLLECTIVE_PIPELINED, L.COLLECTIVE_RING][seed]
    expected = tables.run("reference")
    assert_same(tables.run("kernel"), expected)
    assert_same(tables.run("serial"), expected)


@pytest.mark.parametrize("collective", [L.COLLECTIVE_DEFAULT, L.COLLECTIVE_HIERARCHICAL, L.COLLECTIVE_PIPELINED])
def test_ring_inter_volume_by_hand(collective):
    """24 GPUs, 8 per server, 3 servers: the NIC moves 2 x 23/24 S instead of 2 x 2/3 S; the
    intra-server phase and the latency terms are unchanged; on one server nothing changes."""
    intra, net = link(100 * GB, 5e-6, L.LINK_NVSWITCH), link(3 * GB, 20e-6, L.LINK_NETWORK)
    plain = one(L.ARCH_ALLREDUCE_CLUSTER, 24, intra_row=intra, net_row=net, collective=collective).run()
    ring = one(L.ARCH_ALLREDUCE_CLUSTER, 24, intra_row=intra, net_row=net, collective=collective, inter_volume=1).run()
    S = 100e6
    gap = 2 * (23 / 24 - 2 / 3) * S / (3 * GB)
    # pipelined: the inter-server phase is the slower one with either volume, so the gap is the same
    assert ring["t_comm"].item() - plain["t_comm"].item() == pytest.approx(gap, rel=1e-5)
    for n in (1, 8):
        a = one(L.ARCH_ALLREDUCE_CLUSTER, n, collective=collective).run()["t_comm"].item()
        b = one(L.ARCH_ALLREDUCE_CLUSTER, n, collective=collective, inter_volume=1).run()["t_comm"].item()
        assert a == b


def test_ring_inter_volume_on_the_multi_server_collective_row(cats):
    """The 3-server NCCL row: pipelined with the ring volume predicts less than pipelined alone
    (which overshoots) by exactly the volume ratio of the dominant inter-server phase."""
    rows = [r for r in load_measurements(COLLECTIVES, cats) if r.nodes > 1]
    alone = predict_observed(rows, cats, defaults(), Options(collective="pipelined"))[0]
    both = predict_observed(rows, cats, defaults(), Options(collective="pipelined", inter_volume="ring"))[0]
    n, s = rows[0].n_gpu, rows[0].nodes
    assert both < alone
    assert alone / both == pytest.approx(((n - 1) / n) / ((s - 1) / s), rel=0.02)  # latency terms: a little off
    with pytest.raises(PaigridError, match="inter_volume must be one of hierarchical, ring"):
        Options().with_overrides({"inter_volume": "mesh"}, "--option")
