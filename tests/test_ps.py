"""Parameter server done properly (``kernels/ps.py``): the kernel against its numpy reference,
each option by hand, and the directions: a parameter server that wins where its mechanisms say
it should (sparse embeddings, parameters whose optimizer state does not fit on the GPU) and
loses where it should (dense models on fast all-reduce hardware)."""

import numpy as np
import pytest

from kernel_tables import FP32, GB, Tables, gpu, job, link, one
from paigrid.errors import PaigridError
from paigrid.kernels import dp_columns as L
from test_kernels import assert_same, random_tables

PS, AR = L.ARCH_PS_WORKER, L.ARCH_ALLREDUCE_CLUSTER
ALL_ON = dict(
    ps_local_reduce=1, ps_nic_per_worker=0, ps_colocated=1, ps_latency=1, ps_host_bw=46e9, ps_sparse=1, ps_memory=1
)


def with_ps(tables, seed, **flags):
    """Random embedding tables on the jobs and the PS options ``flags``."""
    rng = np.random.default_rng(100 + seed)
    for row in tables.jobs:
        if rng.random() < 0.7:
            row[L.J_EMB_PARAMS] = row[L.J_PARAMS] * rng.uniform(0.1, 0.99)
            row[L.J_EMB_TOUCHED] = row[L.J_EMB_PARAMS] * rng.choice([1e-4, 0.05, 2.0])
    names = (
        "ps_local_reduce",
        "ps_nic_per_worker",
        "ps_colocated",
        "ps_latency",
        "ps_host_bw",
        "ps_sparse",
        "ps_memory",
    )
    for name, value in flags.items():
        tables.options[L.O_PS_LOCAL_REDUCE + names.index(name)] = value
    return tables


COMBOS = [
    ALL_ON,
    dict(ps_nic_per_worker=1, ps_latency=1),
    dict(ps_local_reduce=1, ps_nic_per_worker=1),
    dict(ps_host_bw=30e9, ps_memory=1),
    dict(ps_sparse=1, ps_colocated=1, ps_local_reduce=1, ps_nic_per_worker=1),
]


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("combo", range(len(COMBOS)))
def test_kernel_matches_reference_with_ps_options(seed, combo):
    tables = with_ps(random_tables(seed, nan_job_field=L.J_PARAMS if seed == 2 else None), seed, **COMBOS[combo])
    if combo == 0:  # with communication v2 too: the PS latency is paid per bucket
        tables.options[L.O_SYNC_LATENCY], tables.options[L.O_BUCKET_BYTES] = 1.0, 4 * 2.0**20
    expected = tables.run("reference")
    assert_same(tables.run("kernel"), expected)
    assert_same(tables.run("serial"), expected)
    assert np.isfinite(expected["t_comm"][:, PS]).any()


def test_ps_options_off_with_embeddings_is_version_1_exactly():
    plain = random_tables(4).run()
    declared = with_ps(random_tables(4), 4).run()  # tables declared, every option off
    for name, values in plain.items():
        np.testing.assert_array_equal(declared[name], values, err_msg=name)


S = 25e6 * 4.0  # the kernel_tables job: 25M parameters, FP32 gradients
NET, PCIE = 3 * GB, 10 * GB


def ps_comm(n, **opts):
    return one(PS, n, **opts).run()["t_comm"].item()


def test_each_option_by_hand():
    """16 GPUs, 8 per server, 2 servers = 2 parameter servers, one NIC of 3 GB/s per server."""
    v1 = 2 * S * 8 / NET + 2 * S / PCIE  # max(2S8/B, 2S16/(2B)) + PCIe
    assert ps_comm(16) == pytest.approx(v1, rel=1e-6)
    ring = 2 * 7 / 8 * S / (100 * GB) + 2 * 7 * 5e-6  # the intra-server all-reduce first
    assert ps_comm(16, ps_local_reduce=1) == pytest.approx(
        max(2 * S / NET, 2 * S * 2 / (2 * NET)) + 2 * S / PCIE + ring, rel=1e-6
    )
    # a NIC per worker: 16 parameter servers, one per worker
    assert ps_comm(16, ps_nic_per_worker=1) == pytest.approx(2 * S / NET + 2 * S / PCIE, rel=1e-6)
    assert ps_comm(16, ps_colocated=1) == pytest.approx(
        2 * S * 8 / NET + 2 * S * 16 / (2 * NET) + 2 * S / PCIE, rel=1e-6
    )
    assert ps_comm(16, ps_latency=1) == pytest.approx(v1 + 2 * 16 * 20e-6, rel=1e-6)  # 2 max(p=2, W=16) alpha
    host = 40e9
    update = (16 * S / 2 + 25e6 * (8 + 2 * 4.0) / 2) / host  # W S / p + params (8 + 2 state) / p
    assert ps_comm(16, ps_host_bw=host) == pytest.approx(v1 + update, rel=1e-6)


def test_sparse_traffic_moves_touched_rows_only():
    """24M of the 25M parameters are embeddings; a micro-batch touches 10k of them, 2 micro-batches
    per step: 1M + 20k parameters travel."""
    emb = job(emb_params=24e6, emb_touched=1e4, accum=2)
    dense = one(PS, 16, job_row=emb).run()["t_comm"].item()
    sparse = one(PS, 16, job_row=emb, ps_sparse=1).run()["t_comm"].item()
    assert sparse == pytest.approx(dense * (1e6 + 2e4) / 25e6, rel=1e-6)
    # all-reduce moves dense gradients whatever the option says
    assert (
        one(AR, 16, job_row=emb, ps_sparse=1).run()["t_comm"].item() == one(AR, 16, job_row=emb).run()["t_comm"].item()
    )


def two_archs(job_row, intra, net, gpu_row=None, **opts):
    gpu_row = gpu() if gpu_row is None else gpu_row
    tables = Tables([job_row], [[16]], [PS, AR], [gpu_row], [[10e12]], [FP32], [intra], [[1]], [net], **opts)
    return tables.run()


def test_ps_wins_for_a_sparse_embedding_model_and_loses_without_its_mechanisms():
    """A recommendation model: 775M parameters, nearly all in embedding tables, 10k touched per
    sample x 1024 samples.  All-reduce moves 3.1 GB per step; a parameter server with sparse
    traffic 41 MB, so it wins; moving dense gradients, it loses."""
    rec = job(
        flop=1e10, membound=1e9, params=775e6, emb_params=774.4e6, emb_touched=9984 * 1024, batch=1024, activation=1e8
    )
    big = gpu(memory=80 * GB)
    pcie, eth = link(10 * GB, 5e-6, L.LINK_PCIE), link(3.125 * GB * 0.5, 30e-6, L.LINK_NETWORK)
    on = two_archs(rec, pcie, eth, gpu_row=big, ps_sparse=1, ps_local_reduce=1, ps_latency=1, ps_host_bw=46e9)
    assert on["step_time"][0, 0].item() < on["step_time"][0, 1].item()
    assert on["best_index"].item() == 0  # PS is the best configuration
    off = two_archs(rec, pcie, eth, gpu_row=big)
    assert off["step_time"][0, 0].item() > off["step_time"][0, 1].item()
    assert off["best_index"].item() == 1


def test_ps_fits_where_all_reduce_cannot_hold_the_optimizer_state():
    """3B parameters under Adam (8 state bytes): 48 GB of weights, gradients and state do not fit
    a 40 GB GPU; 24 GB of weights and gradients do, with the state on the PS hosts."""
    huge = job(params=3e9, opt_state=8.0, activation=5e9)
    a100 = gpu(memory=40 * GB)
    intra, net = link(200 * GB, 5e-6, L.LINK_NVSWITCH), link(12.5 * GB, 5e-6, L.LINK_NETWORK)
    off = two_archs(huge, intra, net, gpu_row=a100)
    assert off["fits_memory"].item() == 0 and np.isnan(off["best_step"].item())
    on = two_archs(huge, intra, net, gpu_row=a100, ps_memory=1, ps_local_reduce=1)
    assert on["best_index"].item() == 0 and on["best_step"].item() == pytest.approx(on["step_time"][0, 0].item())
    assert on["fits_memory"].item() == 0  # the cube's flag stays the all-reduce one


def test_ps_loses_for_a_dense_model_on_nvlink_and_fast_network():
    """ResNet-50-like (25M dense parameters) on NVSwitch + 100 Gb/s: the hierarchical all-reduce
    moves 2(s-1)/s S per NIC; the parameter server, even reducing inside each server, sharing no
    NIC and updating on its hosts, moves 2 S through a NIC and the PCIe copy on top."""
    intra, net = link(200 * GB, 5e-6, L.LINK_NVSWITCH), link(12.5 * GB * 0.9, 5e-6, L.LINK_NETWORK)
    for opts in ({}, dict(ps_local_reduce=1, ps_latency=1, ps_host_bw=46e9, ps_sparse=1, ps_memory=1)):
        out = two_archs(job(), intra, net, **opts)
        assert out["step_time"][0, 0].item() > out["step_time"][0, 1].item(), opts
        assert out["best_index"].item() == 1


def test_directions_of_the_ps_options():
    """Local reduce never slower than every GPU pushing (shared NIC, k' >= 2); co-located never
    faster than separate; latency and update time never faster; a faster host never slower."""
    for n in (2, 8, 16, 64):
        base = ps_comm(n)
        assert ps_comm(n, ps_local_reduce=1) <= base
        assert ps_comm(n, ps_colocated=1) >= base
        assert ps_comm(n, ps_latency=1) > base
        assert ps_comm(n, ps_host_bw=20e9) > ps_comm(n, ps_host_bw=80e9) > base


@pytest.mark.parametrize("arch", [L.ARCH_1W1G, L.ARCH_ALLREDUCE_LOCAL, L.ARCH_ALLREDUCE_CLUSTER])
def test_one_gpu_job_has_zero_communication_latency_with_every_option_on(arch):
    """No exchange on one GPU: t_comm is exactly 0 with communication v2 and every PS option on,
    whatever the link latencies."""
    slow = link(1 * GB, 1e-3, L.LINK_NETWORK)
    out = one(
        arch,
        1,
        net_row=slow,
        intra_row=link(1 * GB, 1e-3, L.LINK_PCIE),
        sync_latency=1,
        bucket_overlap=1,
        bucket_bytes=2.0**20,
        **ALL_ON,
    ).run()
    assert out["invalid_reason"].item() == L.REASON_VALID
    assert out["t_comm"].item() == 0.0


# --- the engine: options, catalogue columns, predictions --------------------------------------------
def test_options_and_their_kernel_values():
    from paigrid.inputs.efficiency import ps_host_bandwidth
    from paigrid.inputs.kernel_tables import option_vector
    from paigrid.inputs.spec import Options

    assert (option_vector(Options())[L.O_PS_LOCAL_REDUCE :] == 0).all()
    vec = option_vector(
        Options().with_overrides(
            {"ps_nic": "per-worker", "ps_placement": "colocated", "ps_update": True, "ps_sparse": True}, "--option"
        )
    )
    assert vec[L.O_PS_NIC_PER_WORKER] == 1 and vec[L.O_PS_COLOCATED] == 1 and vec[L.O_PS_SPARSE] == 1
    assert vec[L.O_PS_HOST_BW] == ps_host_bandwidth() == pytest.approx(76.8e9 * 0.6)
    with pytest.raises(PaigridError, match="ps_nic must be one of shared, per-worker"):
        Options().with_overrides({"ps_nic": "many"}, "--option")
    with pytest.raises(PaigridError, match="ps_sparse must be true or false"):
        Options().with_overrides({"ps_sparse": 1}, "--option")


def test_catalogue_embedding_columns_are_checked(tmp_path):
    from paigrid.inputs.catalog import builtin_text, parse_csv

    text = builtin_text("workloads")
    cats = parse_csv(text, "workloads", "w")
    assert cats.number("multi-interests", "embedding_params_M") == 774.4
    assert np.isnan(cats.number("resnet50", "embedding_params_M"))
    bad = text.replace("774.4,9984", "999.0,9984")
    with pytest.raises(PaigridError, match="more than params_M"):
        parse_csv(bad, "workloads", "w")
    with pytest.raises(PaigridError, match="together"):
        parse_csv(text.replace("774.4,9984", "774.4,"), "workloads", "w")


def test_sparse_prediction_of_multi_interests():
    """The built-in recommendation model on 16 V100s over 25 GbE: sparse traffic cuts the PS
    exchange to the touched rows; all-reduce is unchanged."""
    from paigrid.inputs.catalog import Catalogues
    from paigrid.inputs.efficiency import defaults
    from paigrid.inputs.jobs import Job
    from paigrid.inputs.spec import JOB_OPTIONS, Options
    from paigrid.predict import predict_configs

    cats = Catalogues.load()
    base = {"gpu": "V100-SXM2-16GB", "n_gpu": 16, "intra": "nvlink2-hcm", "network": "eth-25g", "precision": "fp32"}
    job_ = Job("m", "multi-interests", 1024.0, {key: getattr(Options(), key) for key in JOB_OPTIONS})
    out = {}
    for sparse in (False, True):
        options = Options(ps_sparse=sparse)
        ps, ar = predict_configs(
            [job_, job_],
            [{**base, "arch": "ps-worker"}, {**base, "arch": "allreduce-cluster"}],
            cats,
            defaults(),
            options,
        )
        out[sparse] = ps["t_comm"], ar["t_comm"]
    moved = (0.2e6 + 9984 * 1024) / 774.6e6  # dense part + touched rows, of all parameters
    assert out[True][0] == pytest.approx(out[False][0] * moved, rel=1e-5)
    assert out[True][1] == out[False][1]
    assert out[True][0] < out[True][1] < out[False][0]


def test_predict_fits_memory_follows_the_architecture():
    """multi-interests on 12 GB K80s: 775M parameters x (4 + 4 + 8 Adam) bytes do not fit; with the
    optimizer state on the parameter servers a ps-worker GPU holds 6.2 GB and fits, while
    allreduce-cluster still does not."""
    from paigrid.inputs.catalog import Catalogues
    from paigrid.inputs.efficiency import defaults
    from paigrid.inputs.jobs import Job
    from paigrid.inputs.spec import JOB_OPTIONS, Options
    from paigrid.predict import predict_configs

    cats = Catalogues.load()
    job_ = Job("m", "multi-interests", 1024.0, {key: getattr(Options(), key) for key in JOB_OPTIONS})
    config = {"gpu": "K80", "n_gpu": 16, "intra": "pcie3", "network": "eth-25g", "precision": "fp32"}
    configs = [{**config, "arch": "ps-worker"}, {**config, "arch": "allreduce-cluster"}]
    off = predict_configs([job_, job_], configs, cats, defaults(), Options())
    on = predict_configs([job_, job_], configs, cats, defaults(), Options(ps_memory=True))
    assert [r["fits_memory"] for r in off] == [False, False]
    assert [r["fits_memory"] for r in on] == [True, False]
    assert on[0]["step_time"] == off[0]["step_time"]  # the memory check changes no time
