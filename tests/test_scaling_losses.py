"""Scaling losses of data-parallel all-reduce: overlap efficiency, coordination per all-reduce and
the sparse all-gather of embedding rows (``kernels.model.overlap_window``,
``coordination_seconds``, ``allgather_wire_fraction``): the kernel against its numpy reference,
each by hand, their directions, the options, and the leave-out fit of the scaling rows
(``accuracy.crossval.scaling_held_out``)."""

from importlib import resources

import numpy as np
import pytest

from kernel_tables import GB, job, link, one
from paigrid.errors import PaigridError
from paigrid.inputs.spec import Options
from paigrid.kernels import dp_columns as L
from test_kernels import assert_same, random_tables

AR, LOCAL, PS = L.ARCH_ALLREDUCE_CLUSTER, L.ARCH_ALLREDUCE_LOCAL, L.ARCH_PS_WORKER
SCALING = str(resources.files("paigrid.datasets").joinpath("scaling_public.csv"))


def with_scaling_options(tables, seed, idle, coordination, growth, allgather):
    """Random embedding declarations on the jobs and the scaling-loss options."""
    rng = np.random.default_rng(200 + seed)
    for row in tables.jobs:
        if rng.random() < 0.7:
            row[L.J_EMB_PARAMS] = row[L.J_PARAMS] * rng.uniform(0.1, 0.99)
            row[L.J_EMB_TOUCHED] = row[L.J_EMB_PARAMS] * rng.choice([1e-4, 0.05, 2.0])
    tables.options[[L.O_OVERLAP_IDLE, L.O_COORDINATION, L.O_COORDINATION_GROWTH, L.O_SPARSE_ALLGATHER]] = [
        idle,
        coordination,
        growth,
        allgather,
    ]
    return tables


CASES = [(0.7, 0.0, 0, 0), (0.0, 20e-6, 0, 0), (0.0, 20e-6, 1, 0), (0.0, 0.0, 0, 1), (0.4, 5e-6, 1, 1)]


@pytest.mark.parametrize("seed", range(2))
@pytest.mark.parametrize("case", range(len(CASES)))
def test_kernel_matches_reference_with_scaling_options(seed, case):
    tables = with_scaling_options(random_tables(seed, nan_job_field=L.J_PARAMS if seed else None), seed, *CASES[case])
    tables.options[L.O_SYNC_LATENCY], tables.options[L.O_BUCKET_OVERLAP] = float(seed), 1.0
    tables.options[L.O_BUCKET_BYTES] = 4 * 2.0**20
    expected = tables.run("reference")
    assert_same(tables.run("kernel"), expected)
    assert_same(tables.run("serial"), expected)
    reduced = tables.run("kernel", write_cube=False)
    assert_same(
        {k: reduced[k] for k in ("best_step", "best_index", "best_bottleneck")},
        {k: expected[k] for k in ("best_step", "best_index", "best_bottleneck")},
    )


def test_the_defaults_are_version_1_exactly():
    plain = random_tables(5).run()
    declared = with_scaling_options(random_tables(5), 5, 0.0, 0.0, 1, 0).run()  # embeddings, options off
    for name, values in plain.items():
        np.testing.assert_array_equal(declared[name], values, err_msg=name)


# --- overlap efficiency ------------------------------------------------------------------------------
def test_overlap_efficiency_shrinks_the_window_by_hand():
    """overlap 0.9 of a 0.1 s exchange may hide, but only during (1 - idle) of the 2/3 x 0.5 s
    backward pass: idle 0.8 leaves 0.0667 s, so 0.1 - 0.0667 s stays exposed."""
    row = job(flop=5e12, membound=0.0, overlap=0.9)  # t_flop = 0.5 s on a 10 TFLOP/s GPU
    net = link(1 * GB, 0.0, L.LINK_NETWORK)
    intra = link(1e15, 0.0, L.LINK_PCIE)
    full = one(AR, 16, job_row=row, intra_row=intra, net_row=net).run()
    idle = one(AR, 16, job_row=row, intra_row=intra, net_row=net, overlap_idle=0.8).run()
    raw = 2 * (2 - 1) / 2 * 100e6 / GB  # 2 servers: 0.1 s through one NIC
    backward = 2 / 3 * 0.5
    assert full["t_comm"].item() == pytest.approx(raw - 0.9 * raw, rel=1e-5)  # the window is not the limit
    assert idle["t_comm"].item() == pytest.approx(raw - 0.2 * backward, rel=1e-5)
    none = one(AR, 16, job_row=row, intra_row=intra, net_row=net, overlap_idle=1.0).run()
    assert none["t_comm"].item() == pytest.approx(raw, rel=1e-5)  # no window: everything exposed


# --- coordination -------------------------------------------------------------------------------------
@pytest.mark.parametrize("growth, steps", [(0, np.ceil(np.log2(24))), (1, 23)])
def test_coordination_per_bucket_and_participant_step_by_hand(growth, steps):
    net = link(3 * GB, 0.0, L.LINK_NETWORK)
    intra = link(100 * GB, 0.0, L.LINK_NVSWITCH)
    base = one(AR, 24, intra_row=intra, net_row=net, sync_latency=1, bucket_bytes=10e6).run()["t_comm"].item()
    more = (
        one(
            AR,
            24,
            intra_row=intra,
            net_row=net,
            sync_latency=1,
            bucket_bytes=10e6,
            coordination=1e-5,
            coordination_growth=growth,
        )
        .run()["t_comm"]
        .item()
    )
    assert more - base == pytest.approx(10 * steps * 1e-5, rel=1e-4)  # 100 MB in 10 MB buckets
    # one GPU, and the architectures that do not all-reduce, have none
    for arch, n in ((L.ARCH_1W1G, 1), (AR, 1), (PS, 24), (L.ARCH_1WNG, 8)):
        a = one(arch, n, net_row=net, coordination=1e-3).run()["t_comm"].item()
        assert a == one(arch, n, net_row=net).run()["t_comm"].item()


def test_linear_coordination_grows_faster_than_log2():
    net = link(3 * GB, 0.0, L.LINK_NETWORK)
    growth = {}
    for kind in (0, 1):
        t = [
            one(AR, n, net_row=net, coordination=1e-5, coordination_growth=kind).run()["t_comm"].item()
            for n in (128, 512)
        ]
        growth[kind] = t[1] - t[0]
    assert 0 < growth[0] < growth[1]


# --- sparse all-gather --------------------------------------------------------------------------------
def rec_job(touched_per_sample):
    """24M of 25M parameters in embedding tables, batch 32."""
    return job(params=25e6, emb_params=24e6, emb_touched=touched_per_sample * 32, batch=32)


def test_sparse_allgather_bytes_by_hand():
    """16 GPUs, 2 servers: the dense 1M parameters are all-reduced and each GPU's 2 x 32 x 1000
    touched rows all-gathered, which costs what an all-reduce of 16/2 times them costs."""
    row = job(params=25e6, emb_params=24e6, emb_touched=32e3, batch=32, accum=2)
    net, intra = link(3 * GB, 0.0, L.LINK_NETWORK), link(100 * GB, 0.0, L.LINK_NVSWITCH)
    dense = one(AR, 16, job_row=row, intra_row=intra, net_row=net).run()["t_comm"].item()
    sparse = one(AR, 16, job_row=row, intra_row=intra, net_row=net, sparse_allgather=1).run()["t_comm"].item()
    assert sparse == pytest.approx(dense * (1e6 + 8 * 64e3) / 25e6, rel=1e-6)
    # a parameter server and a job without embeddings are unchanged
    assert (
        one(PS, 16, job_row=row, net_row=net, sparse_allgather=1).run()["t_comm"].item()
        == one(PS, 16, job_row=row, net_row=net).run()["t_comm"].item()
    )
    plain = job()
    assert (
        one(AR, 16, job_row=plain, net_row=net, sparse_allgather=1).run()["t_comm"].item()
        == one(AR, 16, job_row=plain, net_row=net).run()["t_comm"].item()
    )


@pytest.mark.parametrize("arch", [AR, LOCAL])
def test_sparse_allgather_wins_for_few_touched_rows(arch):
    """8 GPUs, 320 touched rows per step of 24M: far less than 2/n of the table."""
    row = rec_job(10)
    on = one(arch, 8, job_row=row, sparse_allgather=1).run()["step_time"].item()
    assert on < one(arch, 8, job_row=row).run()["step_time"].item()


def test_sparse_allgather_loses_for_many_gpus_or_dense_touches():
    """An all-gather moves (n - 1) x touched rows per GPU: at 1024 GPUs, or when a step touches a
    large part of the tables, that is more than the dense all-reduce's 2 (n - 1)/n x E."""
    net = link(3 * GB, 0.0, L.LINK_NETWORK)
    few = rec_job(10)  # 320 rows of 24M per GPU
    assert (
        one(AR, 8, job_row=few, net_row=net, sparse_allgather=1).run()["step_time"].item()
        < one(AR, 8, job_row=few, net_row=net).run()["step_time"].item()
    )
    dense_touch = rec_job(24e6 / 32 / 2)  # each GPU touches half of the tables
    for n in (8, 1024):
        assert (
            one(AR, n, job_row=dense_touch, net_row=net, sparse_allgather=1).run()["step_time"].item()
            > one(AR, n, job_row=dense_touch, net_row=net).run()["step_time"].item()
        )
    mid = rec_job(24e6 / 32 / 100)  # 1% of the tables: wins on 8 GPUs, loses on 1024
    assert (
        one(AR, 8, job_row=mid, net_row=net, sparse_allgather=1).run()["step_time"].item()
        < one(AR, 8, job_row=mid, net_row=net).run()["step_time"].item()
    )
    assert (
        one(AR, 1024, job_row=mid, net_row=net, sparse_allgather=1).run()["step_time"].item()
        > one(AR, 1024, job_row=mid, net_row=net).run()["step_time"].item()
    )


# --- options -----------------------------------------------------------------------------------------
def test_options_and_their_kernel_values():
    from paigrid.inputs.kernel_tables import option_vector

    vec = option_vector(Options())
    assert vec[L.O_OVERLAP_IDLE] == vec[L.O_COORDINATION] == vec[L.O_SPARSE_ALLGATHER] == 0.0
    vec = option_vector(
        Options().with_overrides(
            {
                "overlap_efficiency": 0.25,
                "coordination_us": 40.0,
                "coordination_growth": "linear",
                "sparse_allgather": True,
            },
            "--option",
        )
    )
    assert vec[L.O_OVERLAP_IDLE] == 0.75 and vec[L.O_COORDINATION] == pytest.approx(40e-6)
    assert vec[L.O_COORDINATION_GROWTH] == 1.0 and vec[L.O_SPARSE_ALLGATHER] == 1.0
    for values, message in (
        ({"overlap_efficiency": 1.5}, "overlap_efficiency must be a fraction"),
        ({"coordination_us": -1.0}, "coordination_us must be a finite number"),
        ({"coordination_growth": "cubic"}, "coordination_growth must be one of log2, linear"),
        ({"sparse_allgather": 1}, "sparse_allgather must be true or false"),
    ):
        with pytest.raises(PaigridError, match=message):
            Options().with_overrides(values, "--option")


# --- the leave-out fit of the scaling rows -----------------------------------------------------------
def test_a_held_out_row_never_informs_its_own_fit():
    """Leave one row out: moving a row's measured efficiency by 30 points leaves the value fitted
    for it (on the other rows) unchanged and its error moves by exactly those points, while the
    folds that train on it fit another value."""
    from dataclasses import replace

    from paigrid.accuracy.crossval import scaling_held_out
    from paigrid.accuracy.measurements import load_measurements
    from paigrid.inputs.catalog import Catalogues

    cats = Catalogues.load()
    rows = load_measurements(SCALING, cats)
    options = Options(bucket_overlap=True)
    before, folds = scaling_held_out(rows, cats, options, ("overlap_efficiency",), "id")
    moved = [replace(r, measured=r.measured - 0.3) if r.id == "hvd-01" else r for r in rows]
    after, _ = scaling_held_out(moved, cats, options, ("overlap_efficiency",), "id")
    assert [r["id"] for r in before] == [r.id for r in rows] and len(folds) == 6
    assert before[0]["fitted"] == after[0]["fitted"]
    assert after[0]["error"] - before[0]["error"] == pytest.approx(0.3, abs=1e-12)
    assert any(a["fitted"] != b["fitted"] for a, b in zip(after[1:], before[1:]))
    # by workload: the two Inception-v3 rows are judged by one fit on the four other rows
    by_workload, folds = scaling_held_out(rows, cats, options, ("overlap_efficiency",), "workload")
    assert len(folds) == 3 and all(f["train_rows"] == 4 and f["test_rows"] == 2 for f in folds)
    assert by_workload[0]["fitted"] == by_workload[3]["fitted"]
    with pytest.raises(PaigridError, match="scaling folds are by"):
        scaling_held_out(rows, cats, options, ("overlap_efficiency",), "gpu")
    with pytest.raises(PaigridError, match="a scaling fit sets"):
        scaling_held_out(rows, cats, options, ("bucket_mb",), "id")


def test_sparse_allgather_prediction_of_multi_interests():
    """The built-in recommendation model (774.6M parameters, 774.4M of them in embedding tables,
    9984 touched per sample, batch 1024) on 16 V100s over 25 GbE: all-reducing the tables' dense
    gradients costs what all-reducing all 774.6M does; all-gathering the touched rows costs what
    all-reducing 0.2M + 16/2 x 9984 x 1024 does, far less; a parameter server is unchanged."""
    from paigrid.inputs.catalog import Catalogues
    from paigrid.inputs.efficiency import defaults
    from paigrid.inputs.jobs import Job
    from paigrid.inputs.spec import JOB_OPTIONS
    from paigrid.predict import predict_configs

    cats = Catalogues.load()
    base = {"gpu": "V100-SXM2-16GB", "n_gpu": 16, "intra": "nvlink2-hcm", "network": "eth-25g", "precision": "fp32"}
    job_ = Job("m", "multi-interests", 1024.0, {key: getattr(Options(), key) for key in JOB_OPTIONS})
    out = {}
    for on in (False, True):
        options = Options(model="pai-v1", sparse_allgather=on)
        ar, ps = predict_configs(
            [job_, job_],
            [{**base, "arch": "allreduce-cluster"}, {**base, "arch": "ps-worker"}],
            cats,
            defaults(),
            options,
        )
        out[on] = ar["t_comm"], ps["t_comm"]
    moved = (0.2e6 + 16 / 2 * 9984 * 1024) / 774.6e6
    assert out[True][0] == pytest.approx(out[False][0] * moved, rel=1e-3)  # latency terms: a little off
    assert out[True][1] == out[False][1]


def test_coordination_lowers_a_collective_rows_bus_bandwidth():
    """A collective row's all-reduce pays the coordination once (no buckets): 24 GPUs, log2
    growth, ceil(log2 24) = 5 steps of 100 us."""
    from paigrid.accuracy.measurements import load_measurements
    from paigrid.accuracy.rowkinds import allreduce_seconds
    from paigrid.inputs.catalog import Catalogues
    from paigrid.inputs.efficiency import defaults

    cats = Catalogues.load()
    path = str(resources.files("paigrid.datasets").joinpath("collectives_public.csv"))
    row = [r for r in load_measurements(path, cats) if r.nodes > 1][0]
    plain = allreduce_seconds(row, cats, defaults(), Options(), 1e8)
    more = allreduce_seconds(row, cats, defaults(), Options(coordination_us=100.0), 1e8)
    assert more - plain == pytest.approx(5 * 100e-6, rel=1e-9)
