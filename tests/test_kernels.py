"""The numba kernel against its numpy reference, hand-worked answers, and physical invariants."""

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel_tables import AMP, FP32, GB, Tables, gpu, job, link, one
from paigrid.kernels import dp_columns as L
from paigrid.kernels import model, reference

NVSWITCH = link(100 * GB, 5e-6, L.LINK_NVSWITCH)
ETH = link(3 * GB, 20e-6, L.LINK_NETWORK)
NONE = link(0.0, 0.0, L.LINK_NONE)

# the default job on the default GPU (kernel_tables): per step
T_FLOP = 3e12 / 10e12  # 0.3 s: 3 TFLOP at 10 TFLOP/s
T_MEM = 2e9 / 900e9  # 2 GB of element-wise traffic at 900 GB/s
T_DATA = 1e7 / 10e9  # 10 MB of input over 10 GB/s PCIe
S = 25e6 * 4  # gradient bytes: 25 M fp32 parameters


def value(out, name):
    return float(out[name].reshape(-1)[0])


# --- known answers, one per architecture ---------------------------------------------------
def test_1w1g_has_no_communication():
    out = one(L.ARCH_1W1G, 1).run()
    step = T_DATA + T_FLOP + T_MEM  # 0.001 + 0.3 + 0.0022222 = 0.3032222 s
    assert value(out, "t_comm") == 0.0
    assert value(out, "step_time") == pytest.approx(step, rel=1e-6)
    assert value(out, "throughput") == pytest.approx(32 / step, rel=1e-6)
    assert value(out, "cost") == pytest.approx(3.0 / 3600 * 1e6 / 32 * step, rel=1e-6)  # USD per 1e6 samples
    assert value(out, "energy") == pytest.approx(300.0 / 32 * step, rel=1e-6)  # J per sample
    assert value(out, "bottleneck") == L.BOTTLENECK_FLOP


def test_1wng_sends_all_gradients_through_the_pcie_roots():
    out = one(L.ARCH_1WNG, 4).run()
    comm = 2 * S * 4 / (2 * 10 * GB)  # 2 S n / (r B_pcie) = 0.04 s
    assert value(out, "t_comm") == pytest.approx(comm, rel=1e-6)
    assert value(out, "step_time") == pytest.approx(T_DATA + T_FLOP + T_MEM + comm, rel=1e-6)


def test_allreduce_local_is_a_ring_inside_the_server():
    out = one(L.ARCH_ALLREDUCE_LOCAL, 8).run()
    comm = 2 * 7 / 8 * S / (100 * GB) + 2 * 7 * 5e-6  # 1.75 ms + 70 us
    assert value(out, "t_comm") == pytest.approx(comm, rel=1e-6)


def test_ps_worker_is_bound_by_the_busier_nic():
    out = one(L.ARCH_PS_WORKER, 16).run()
    worker_nic = 2 * S * 8 / (1 * 3 * GB)  # 8 workers share one NIC: 0.5333 s
    server_nic = 2 * S * 16 / (2 * 3 * GB)  # 2 servers (one per worker server): 0.5333 s
    comm = max(worker_nic, server_nic) + 2 * S / (10 * GB)
    assert value(out, "t_comm") == pytest.approx(comm, rel=1e-6)
    assert value(out, "bottleneck") == L.BOTTLENECK_COMM


def test_allreduce_cluster_is_hierarchical():
    out = one(L.ARCH_ALLREDUCE_CLUSTER, 32).run()
    intra = 2 * 7 / 8 * S / (100 * GB) + 2 * 7 * 5e-6  # ring among the 8 GPUs of a server
    inter = 2 * 3 / 4 * S / (1 * 3 * GB) + 2 * 3 * 20e-6  # ring among 4 servers over one NIC each
    assert value(out, "t_comm") == pytest.approx(intra + inter, rel=1e-6)


def test_amp_halves_the_gradient_bytes_and_the_memory_traffic():
    out = one(L.ARCH_ALLREDUCE_LOCAL, 8, prec=AMP).run()
    comm = 2 * 7 / 8 * (25e6 * 2) / (100 * GB) + 2 * 7 * 5e-6
    assert value(out, "t_comm") == pytest.approx(comm, rel=1e-6)
    assert value(out, "t_mem") == pytest.approx(T_MEM * 0.5, rel=1e-6)


def test_memory_feasibility_counts_weights_gradients_optimizer_activations_workspace():
    # 25e6 x (4 + 4 + 4) = 0.3 GB state + 5 GB activations + 1 GB workspace = 6.3 GB
    assert value(one(L.ARCH_1W1G, 1, gpu_row=gpu(memory=6.31 * GB)).run(), "fits_memory") == 1
    assert value(one(L.ARCH_1W1G, 1, gpu_row=gpu(memory=6.29 * GB)).run(), "fits_memory") == 0


# --- invalid combinations ------------------------------------------------------------------
INVALID_CASES = [  # (arch, n, one() arguments, the reason code)
    (L.ARCH_1W1G, 2, {}, L.REASON_SINGLE_GPU_ARCH),
    (L.ARCH_1WNG, 16, {}, L.REASON_LOCAL_ARCH_EXCEEDS_SERVER),
    (L.ARCH_ALLREDUCE_LOCAL, 9, {}, L.REASON_LOCAL_ARCH_EXCEEDS_SERVER),
    (L.ARCH_PS_WORKER, 4, {"net_row": NONE}, L.REASON_CLUSTER_ARCH_NEEDS_NETWORK),
    (L.ARCH_ALLREDUCE_CLUSTER, 16, {"net_row": NONE}, L.REASON_CLUSTER_ARCH_NEEDS_NETWORK),
    (L.ARCH_ALLREDUCE_LOCAL, 4, {"fits": 0}, L.REASON_INTRA_LINK_NOT_ON_GPU),
    (L.ARCH_1W1G, 1, {"peak": np.nan}, L.REASON_PRECISION_NOT_ON_GPU),
    (L.ARCH_1W1G, 1, {"job_row": job(flop=np.nan)}, L.REASON_MISSING_INPUT),
    (L.ARCH_1W1G, 1, {"job_row": job(params=np.nan)}, L.REASON_MISSING_INPUT),  # S counts for 1w1g too
    (L.ARCH_ALLREDUCE_LOCAL, 8, {"job_row": job(batch=np.nan)}, L.REASON_MISSING_INPUT),  # throughput NaN
    (L.ARCH_PS_WORKER, 16, {"gpu_row": gpu(price=np.nan)}, L.REASON_MISSING_INPUT),  # cost NaN
    (L.ARCH_ALLREDUCE_CLUSTER, 16, {"net_row": link(3 * GB, np.nan, L.LINK_NETWORK)}, L.REASON_MISSING_INPUT),
    # the first rule that applies names the reason
    (L.ARCH_1W1G, 2, {"fits": 0, "peak": np.nan, "job_row": job(flop=np.nan)}, L.REASON_SINGLE_GPU_ARCH),
    (L.ARCH_1WNG, 16, {"fits": 0, "net_row": NONE}, L.REASON_LOCAL_ARCH_EXCEEDS_SERVER),
    (L.ARCH_PS_WORKER, 16, {"fits": 0, "net_row": NONE}, L.REASON_CLUSTER_ARCH_NEEDS_NETWORK),
    (L.ARCH_ALLREDUCE_LOCAL, 4, {"fits": 0, "peak": np.nan}, L.REASON_INTRA_LINK_NOT_ON_GPU),
    (L.ARCH_ALLREDUCE_LOCAL, 4, {"peak": np.nan, "job_row": job(flop=np.nan)}, L.REASON_PRECISION_NOT_ON_GPU),
]


@pytest.mark.parametrize("implementation", ["kernel", "serial", "reference"])
@pytest.mark.parametrize("arch, n, kwargs, reason", INVALID_CASES)
def test_invalid_is_never_a_number_and_says_why(arch, n, kwargs, reason, implementation):
    out = one(arch, n, **kwargs).run(implementation)
    for name in ("step_time", "t_comm", "throughput", "cost", "energy"):
        assert np.isnan(value(out, name)), name
    assert value(out, "invalid_reason") == reason
    assert value(out, "bottleneck") == L.FLAG_FILL
    assert value(out, "best_index") == -1 and np.isnan(value(out, "best_step"))


@pytest.mark.parametrize("implementation", ["kernel", "serial", "reference"])
def test_a_valid_configuration_has_reason_zero(implementation):
    for arch, n in (
        (L.ARCH_1W1G, 1),
        (L.ARCH_1WNG, 8),
        (L.ARCH_ALLREDUCE_LOCAL, 8),
        (L.ARCH_PS_WORKER, 16),
        (L.ARCH_ALLREDUCE_CLUSTER, 16),
    ):
        out = one(arch, n).run(implementation)
        assert value(out, "invalid_reason") == L.REASON_VALID
        assert np.isfinite(value(out, "step_time"))


def test_reason_codes_are_the_flag_names_in_order():
    codes = [
        L.REASON_VALID,
        L.REASON_SINGLE_GPU_ARCH,
        L.REASON_LOCAL_ARCH_EXCEEDS_SERVER,
        L.REASON_CLUSTER_ARCH_NEEDS_NETWORK,
        L.REASON_INTRA_LINK_NOT_ON_GPU,
        L.REASON_PRECISION_NOT_ON_GPU,
        L.REASON_MISSING_INPUT,
    ]
    assert codes == list(range(len(L.INVALID_REASONS))) and L.INVALID_REASONS[0] == "valid"
    assert all(name.replace("_", "").isalnum() and name.islower() for name in L.INVALID_REASONS)  # CF flag_meanings
    assert L.FLAG_FILL not in codes


# --- options change predictions in the documented direction --------------------------------
def comm_of(arch, n, **kwargs):
    return value(one(arch, n, **kwargs).run(), "t_comm")


def step_of(arch, n, **kwargs):
    return value(one(arch, n, **kwargs).run(), "step_time")


def test_overlap_hides_communication_up_to_the_backward_pass():
    full = comm_of(L.ARCH_PS_WORKER, 16)
    backward = 2 / 3 * (T_FLOP + T_MEM)  # 0.2015 s of backward pass
    quarter = comm_of(L.ARCH_PS_WORKER, 16, job_row=job(overlap=0.25))
    assert 0.25 * full < backward  # a quarter of 0.5533 s fits behind it
    assert quarter == pytest.approx(full * 0.75, rel=1e-6)
    assert comm_of(L.ARCH_PS_WORKER, 16, job_row=job(overlap=1.0)) == pytest.approx(full - backward, rel=1e-6)


def test_gradient_accumulation_exchanges_once_per_k_micro_batches():
    one_step = one(L.ARCH_ALLREDUCE_CLUSTER, 32).run()
    accum = one(L.ARCH_ALLREDUCE_CLUSTER, 32, job_row=job(accum=4)).run()
    assert value(accum, "t_comm") == pytest.approx(value(one_step, "t_comm"), rel=1e-6)
    assert value(accum, "t_flop") == pytest.approx(4 * T_FLOP, rel=1e-6)
    assert value(accum, "throughput") > value(one_step, "throughput")


def test_tree_latency_grows_with_log2_n_and_ring_with_n():
    slow_net = link(3 * GB, 1e-3, L.LINK_NETWORK)
    ring = comm_of(L.ARCH_ALLREDUCE_CLUSTER, 256, net_row=slow_net, collective=L.COLLECTIVE_RING)
    tree = comm_of(L.ARCH_ALLREDUCE_CLUSTER, 256, net_row=slow_net, collective=L.COLLECTIVE_TREE)
    bandwidth = 2 * 255 / 256 * S / (3 * GB)  # flat: the NIC is the slowest hop
    assert ring == pytest.approx(bandwidth + 2 * 255 * 1e-3, rel=1e-6)
    assert tree == pytest.approx(bandwidth + 2 * 8 * 1e-3, rel=1e-6)


def test_pipelined_collective_by_hand():
    """32 GPUs, 8 per server, 4 servers: the slower phase's volume time plus every latency hop."""
    intra_volume = 2 * 7 / 8 * S / (100 * GB)  # 0.00175 s inside a server (NVSwitch)
    inter_volume = 2 * 3 / 4 * S / (1 * 3 * GB)  # 0.05 s across servers (one 3 GB/s NIC)
    hops = 2 * 7 * 5e-6 + 2 * 3 * 20e-6
    pipelined = comm_of(L.ARCH_ALLREDUCE_CLUSTER, 32, collective=L.COLLECTIVE_PIPELINED)
    assert pipelined == pytest.approx(max(intra_volume, inter_volume) + hops, rel=1e-6)
    assert pipelined == pytest.approx(0.05 + hops, rel=1e-6)
    default = comm_of(L.ARCH_ALLREDUCE_CLUSTER, 32)
    assert default - pipelined == pytest.approx(intra_volume, rel=1e-6)  # the sum less the hidden phase
    # a slow intra link and a fast network: the intra-server phase is the slower one
    slow_intra, fast_net = link(10 * GB, 5e-6, L.LINK_PCIE), link(100 * GB, 20e-6, L.LINK_NETWORK)
    pipelined = comm_of(
        L.ARCH_ALLREDUCE_CLUSTER, 32, intra_row=slow_intra, net_row=fast_net, collective=L.COLLECTIVE_PIPELINED
    )
    assert pipelined == pytest.approx(2 * 7 / 8 * S / (10 * GB) + hops, rel=1e-6)  # 0.0175 s > 0.0015 s
    # within one server it is the default collective, value for value
    for arch, n in ((L.ARCH_ALLREDUCE_CLUSTER, 8), (L.ARCH_ALLREDUCE_CLUSTER, 3), (L.ARCH_ALLREDUCE_LOCAL, 8)):
        assert comm_of(arch, n, collective=L.COLLECTIVE_PIPELINED) == comm_of(arch, n)


@pytest.mark.parametrize("collective", range(len(L.COLLECTIVE_NAMES)))
def test_kernel_matches_reference_for_every_collective(collective):
    tables = random_tables(7)
    tables.options[L.O_COLLECTIVE] = collective
    expected = tables.run("reference")
    assert_same(tables.run("kernel"), expected)
    assert_same(tables.run("serial"), expected)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("sync_latency", [0, 1])
def test_pipelined_is_never_slower_and_the_default_on_one_server(seed, sync_latency):
    """Pipelining the phases never makes the exchange slower than running them one after the
    other (default, hierarchical), and changes nothing where there is one server or no
    hierarchical all-reduce."""

    def run(collective):
        tables = random_tables(seed)
        tables.options[L.O_COLLECTIVE] = collective
        tables.options[L.O_SYNC_LATENCY] = sync_latency
        return tables, tables.run()

    tables, default = run(L.COLLECTIVE_DEFAULT)
    _, hierarchical = run(L.COLLECTIVE_HIERARCHICAL)
    _, pipelined = run(L.COLLECTIVE_PIPELINED)
    ok = finite_valid(default)
    for name in ("t_comm", "step_time"):
        assert (pipelined[name][ok] <= default[name][ok]).all(), name
        assert (pipelined[name][ok] <= hierarchical[name][ok]).all(), name
    n = tables.n_gpu[:, None, None, :, None, None, None]
    k = tables.jobs[:, L.J_GPUS_PER_NODE][:, None, None, None, None, None, None]
    cluster = (tables.arch == L.ARCH_ALLREDUCE_CLUSTER)[None, :, None, None, None, None, None]
    same = np.broadcast_to(~cluster | (n <= k), default["t_comm"].shape)
    for name in ("t_comm", "step_time"):
        np.testing.assert_array_equal(pipelined[name][same], default[name][same], err_msg=name)
    across = ok & ~same
    assert across.any() and (pipelined["t_comm"][across] < default["t_comm"][across]).any()


def test_topology_aware_hybrid_cube_mesh_is_slower_for_pairs_not_for_eight():
    hcm = link(100 * GB, 5e-6, L.LINK_NVLINK_HCM)
    for n, fraction in ((2, 1 / 3), (4, 2 / 3), (6, 1 / 2), (8, 1.0)):
        ideal = comm_of(L.ARCH_ALLREDUCE_LOCAL, n, intra_row=hcm)
        aware = comm_of(L.ARCH_ALLREDUCE_LOCAL, n, intra_row=hcm, topology=1)
        volume = 2 * (n - 1) / n * S / (100 * GB)
        assert aware - ideal == pytest.approx(volume / fraction - volume, rel=1e-6, abs=1e-12)
    nvswitch = comm_of(L.ARCH_ALLREDUCE_LOCAL, 2, topology=1)
    assert nvswitch == comm_of(L.ARCH_ALLREDUCE_LOCAL, 2)


def test_pcie_ring_across_both_trees_is_slower():
    pcie = link(10 * GB, 5e-6, L.LINK_PCIE)
    assert comm_of(L.ARCH_ALLREDUCE_LOCAL, 4, intra_row=pcie, topology=1) == comm_of(
        L.ARCH_ALLREDUCE_LOCAL, 4, intra_row=pcie
    )
    assert comm_of(L.ARCH_ALLREDUCE_LOCAL, 8, intra_row=pcie, topology=1) > comm_of(
        L.ARCH_ALLREDUCE_LOCAL, 8, intra_row=pcie
    )


def test_more_nics_per_node_speed_up_the_inter_server_part():
    assert comm_of(L.ARCH_ALLREDUCE_CLUSTER, 32, job_row=job(nics=4)) < comm_of(L.ARCH_ALLREDUCE_CLUSTER, 32)


def test_input_pipeline_bound_floors_the_step_time():
    # 8 GPUs x 32 samples per server at 100 samples/s: 2.56 s per step
    out = one(L.ARCH_ALLREDUCE_LOCAL, 8, job_row=job(input_rate=100.0)).run()
    assert value(out, "step_time") == pytest.approx(8 * 32 / 100.0, rel=1e-6)
    assert value(out, "bottleneck") == L.BOTTLENECK_INPUT
    fast = one(L.ARCH_ALLREDUCE_LOCAL, 8, job_row=job(input_rate=1e9)).run()
    assert value(fast, "step_time") == value(one(L.ARCH_ALLREDUCE_LOCAL, 8).run(), "step_time")


# --- kernel == numpy reference -------------------------------------------------------------
def random_tables(seed, nan_peak=True, nan_job_field=None):
    rng = np.random.default_rng(seed)
    n_jobs, n_gpus, n_intra, n_net, n_prec = 3, 4, 4, 4, 3
    jobs = [
        job(
            flop=rng.uniform(1e11, 1e14),
            membound=rng.uniform(1e8, 1e11),
            input_bytes=rng.uniform(1e5, 1e8),
            params=rng.uniform(1e6, 2e9),
            activation=rng.uniform(1e8, 4e10),
            batch=float(rng.integers(1, 256)),
            accum=float(rng.integers(1, 4)),
            gpus_per_node=float(rng.choice([2, 4, 8])),
            nics=float(rng.integers(1, 4)),
            ps_count=float(rng.integers(0, 3)),
            overlap=float(rng.choice([0.0, rng.uniform()])),
            input_rate=float(rng.choice([np.inf, rng.uniform(100, 1e5)])),
        )
        for _ in range(n_jobs)
    ]
    gpus = [
        gpu(
            mem_bw=rng.uniform(3e11, 5e12),
            pcie_bw=rng.uniform(5e9, 6e10),
            memory=rng.uniform(8e9, 2e11),
            price=rng.uniform(0.2, 10),
            power=rng.uniform(70, 1000),
        )
        for _ in range(n_gpus)
    ]
    peak = rng.uniform(5e12, 2e15, (n_gpus, n_prec))
    if nan_peak:
        peak[rng.random((n_gpus, n_prec)) < 0.2] = np.nan
    kinds = [L.LINK_PCIE, L.LINK_NVLINK_HCM, L.LINK_NVSWITCH, L.LINK_PCIE]
    intra = [link(rng.uniform(8e9, 9e11), rng.uniform(1e-6, 1e-5), k) for k in kinds]
    net = [NONE] + [link(rng.uniform(1e9, 1e11), rng.uniform(1e-6, 5e-5), L.LINK_NETWORK) for _ in range(n_net - 1)]
    fits = (rng.random((n_gpus, n_intra)) < 0.7).astype(np.uint8)
    prec = [FP32, AMP, [0.25, 6.0, 2.0, 2.0, 1.0]]
    n_gpu = [1, 2, 3, 8, 24, 1024]
    if nan_job_field is not None:  # a missing input number in one job
        jobs[int(rng.integers(0, n_jobs))][nan_job_field] = np.nan
    return Tables(
        jobs,
        [n_gpu],
        range(5),
        gpus,
        peak,
        prec,
        intra,
        fits,
        net,
        collective=int(rng.integers(0, len(L.COLLECTIVE_NAMES))),
        topology=int(rng.integers(0, 2)),
    )


def assert_same(a, b):
    for name in a:
        x, y = a[name], b[name]
        if x.dtype.kind == "f":
            np.testing.assert_array_equal(np.isnan(x), np.isnan(y), err_msg=f"NaN positions of {name}")
            np.testing.assert_allclose(x, y, rtol=2e-6, err_msg=name)
        else:
            np.testing.assert_array_equal(x, y, err_msg=name)


@pytest.mark.parametrize("seed", range(6))
def test_kernel_matches_reference_on_examples(seed):
    tables = random_tables(seed)
    expected = tables.run("reference")
    assert_same(tables.run("kernel"), expected)
    assert_same(tables.run("serial"), expected)
    reasons = np.unique(expected["invalid_reason"])
    assert {
        L.REASON_VALID,
        L.REASON_SINGLE_GPU_ARCH,
        L.REASON_LOCAL_ARCH_EXCEEDS_SERVER,
        L.REASON_CLUSTER_ARCH_NEEDS_NETWORK,
    }.issubset(reasons)  # the examples exercise the rules


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("write_cube", [True, False])
def test_serial_and_parallel_kernels_agree_exactly(seed, write_cube):
    """The engine picks a compilation by size (evaluate.kernel_for): the numbers must not depend on it."""
    tables = random_tables(seed, nan_job_field=L.J_FLOP if seed else None)
    parallel, serial = tables.run("kernel", write_cube), tables.run("serial", write_cube)
    for name in parallel:
        np.testing.assert_array_equal(serial[name], parallel[name], err_msg=name)


def test_the_driver_picks_the_serial_kernel_for_few_configurations():
    from paigrid.evaluate import SERIAL_MAX_CONFIGS, kernel_for
    from paigrid.kernels import model

    assert kernel_for(1) is model.evaluate_block_serial
    assert kernel_for(SERIAL_MAX_CONFIGS) is model.evaluate_block_serial
    assert kernel_for(SERIAL_MAX_CONFIGS + 1) is model.evaluate_block


def test_kernel_matches_reference_with_every_reason():
    tables = random_tables(0, nan_job_field=L.J_FLOP)
    expected = tables.run("reference")
    assert set(np.unique(expected["invalid_reason"])) == set(range(len(L.INVALID_REASONS)))
    assert_same(tables.run("kernel"), expected)
    assert_same(tables.run("serial"), expected)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    seed=st.integers(0, 2**32 - 1),
    nan_peak=st.booleans(),
    nan_job_field=st.sampled_from([None, L.J_FLOP, L.J_MEMBOUND, L.J_INPUT, L.J_PARAMS, L.J_BATCH]),
)
def test_kernel_matches_reference_property(seed, nan_peak, nan_job_field):
    tables = random_tables(seed, nan_peak, nan_job_field)
    expected = tables.run("reference")
    assert_same(tables.run("kernel"), expected)
    assert_same(tables.run("serial"), expected)


@pytest.mark.parametrize("seed", range(3))
def test_reduce_only_gives_the_same_reductions(seed):
    tables = random_tables(seed)
    full, reduced = tables.run("kernel", True), tables.run("kernel", False)
    for name in ("best_step", "best_index", "best_bottleneck", "t_data", "t_flop", "t_mem", "fits_memory"):
        np.testing.assert_array_equal(full[name], reduced[name], err_msg=name)
    assert (reduced["step_time"] == -7).all()  # the cube outputs are left untouched


def test_best_is_the_first_minimum_over_the_cube():
    tables = random_tables(11)
    out = tables.run()
    j, a, g, n, i, w, p = tables.shape
    feasible = (out["invalid_reason"] == L.REASON_VALID) & (out["fits_memory"][:, None, :, None, None, None, :] == 1)
    step = np.where(feasible, out["step_time"], np.inf).transpose(0, 2, 3, 6, 1, 4, 5).reshape(j, g, n, p, -1)
    index = np.argmin(step, axis=-1)
    has = np.isfinite(step.min(axis=-1))
    np.testing.assert_array_equal(np.where(has, index, -1), out["best_index"])
    np.testing.assert_array_equal(np.where(has, step.min(axis=-1), np.nan), out["best_step"])


def test_nan_in_gives_nan_out():
    tables = random_tables(3, nan_peak=False)
    tables.jobs[1, L.J_FLOP] = np.nan
    out = tables.run()
    assert np.isnan(out["t_flop"][1]).all()
    assert np.isnan(out["step_time"][1]).all()
    assert np.isnan(out["throughput"][1]).all()
    assert (out["invalid_reason"][1] != L.REASON_VALID).all()
    assert not np.isnan(out["step_time"][0][out["invalid_reason"][0] == L.REASON_VALID]).any()


# --- invariants ----------------------------------------------------------------------------
def finite_valid(out):
    return out["invalid_reason"] == L.REASON_VALID


@pytest.mark.parametrize("seed", range(4))
def test_more_bandwidth_is_never_slower(seed):
    base = random_tables(seed)
    before = base.run()
    for table, column in (
        (base.intra, L.L_BW),
        (base.network, L.L_BW),
        (base.gpus, L.G_PCIE_BW),
        (base.gpus, L.G_MEM_BW),
    ):
        table[:, column] *= 1.7
        after = base.run()
        ok = finite_valid(before)
        assert (after["step_time"][ok] <= before["step_time"][ok]).all()
        before = after


@pytest.mark.parametrize("seed", range(4))
def test_more_flops_is_never_faster(seed):
    base = random_tables(seed)
    before = base.run()
    base.jobs[:, L.J_FLOP] *= 2.3
    after = base.run()
    ok = finite_valid(before)
    assert (after["step_time"][ok] >= before["step_time"][ok]).all()
    assert (after["step_time"][ok] > before["step_time"][ok]).any()


# --- the kernels as plain Python (coverage) --------------------------------------------------
#: the kernel-vs-reference tests on the small random grids (every collective, one test each, and
#: both topology settings among the seeds) and the invalid-configuration cases, run again with the JIT off
PLAIN_PYTHON_SUBSET = "matches_reference and not property or says_why or reason_zero or jit_is_what"


def test_jit_is_what_the_environment_says():
    import inspect

    from paigrid.kernels import model

    plain = os.environ.get("NUMBA_DISABLE_JIT", "0") not in ("", "0")
    for kernel in (model.evaluate_block, model.evaluate_block_serial, model.comm_seconds, model.configuration_reason):
        assert inspect.isfunction(kernel) == plain, kernel


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("NUMBA_DISABLE_JIT", "0") not in ("", "0"), reason="already without JIT")
def test_kernel_lines_run_as_plain_python():
    """The kernels' lines are compiled by numba, which coverage cannot see: run the kernel tests
    again in a subprocess with NUMBA_DISABLE_JIT=1, where the kernels are plain Python (their
    numpy and prange calls included), so that a coverage run measures them too."""
    import subprocess
    import sys

    env = {**os.environ, "NUMBA_DISABLE_JIT": "1"}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__, "-k", PLAIN_PYTHON_SUBSET]
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    summary = result.stdout.strip().splitlines()[-1]
    assert " passed" in summary and "failed" not in summary and "skipped" not in summary, summary
    assert int(summary.split(" passed")[0].split()[-1]) >= len(INVALID_CASES), summary


def test_kernels_import_only_numpy_and_numba_and_never_use_fastmath():
    import ast
    from pathlib import Path

    import paigrid.kernels

    folder = Path(paigrid.kernels.__file__).parent
    for path in folder.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [] if node.level else [node.module.split(".")[0]]
            else:
                continue
            assert set(names) <= {"numpy", "numba"}, (path.name, names)
        assert "fastmath" not in path.read_text().replace("``fastmath``", ""), path.name


def test_config_derived_agrees_with_its_reference_and_the_readers_incl_nan():
    """``predict``'s compiled throughput, cost and energy of one configuration per job equal the
    reference and what a cube's readers derive (``schema.derived_values`` over
    ``step_factors``) bit for bit, NaN where the step time, batch, price or power is."""
    from paigrid.schema import DERIVED_VARIABLES, derived_values

    tables = random_tables(6)
    tables.jobs[1, L.J_BATCH] = np.nan
    n_gpu = tables.n_gpu[:, :1].copy()
    rng = np.random.default_rng(6)
    step = rng.uniform(1e-4, 10.0, len(tables.jobs)).astype(np.float32)
    step[2] = np.nan
    for gpu_row in tables.gpus:
        results = []
        for implementation in (model, reference):
            outs = [np.full(len(step), -1.0, np.float32) for _ in range(3)]
            implementation.config_derived(tables.jobs, n_gpu, gpu_row, step, *outs)
            results.append(outs)
        factors = dict(zip(DERIVED_VARIABLES, model.step_factors(tables.jobs, n_gpu, gpu_row[None, :])))
        readers = {name: derived_values(name, step, factor.reshape(-1)) for name, factor in factors.items()}
        for k, name in enumerate(DERIVED_VARIABLES):
            got, want = results[0][k], results[1][k]
            assert got.dtype == want.dtype == readers[name].dtype == np.float32, name
            np.testing.assert_array_equal(got, want, err_msg=name)
            np.testing.assert_array_equal(got, readers[name], err_msg=name)
            assert np.isnan(got[1]) and np.isnan(got[2]) and np.isfinite(got[0]), name
    tables.gpus[0, L.G_PRICE] = np.nan
    outs = [np.empty(len(step), np.float32) for _ in range(3)]
    model.config_derived(tables.jobs, n_gpu, tables.gpus[0], step, *outs)
    assert np.isnan(outs[1]).all() and np.isfinite(outs[0][0]) and np.isfinite(outs[2][0])


def test_per_sample_metrics_are_the_formulas_incl_nan():
    """Time, cost and energy per sample (``model.time_per_sample``, ``cost_per_sample``,
    ``energy_per_sample``, which the driver's overall bests and ``config_derived`` use) equal
    the formulas written out here, bit for bit, and are NaN where an input is."""
    step, n, samples, price, power = 0.25, 8.0, 64.0, 2.5, 700.0
    assert model.time_per_sample(step, n, samples) == step / (n * samples)
    assert model.cost_per_sample(step, price, samples) == price / 3600.0 * 1e6 / samples * step
    assert model.energy_per_sample(step, power, samples) == power / samples * step
    assert model.time_per_sample(step, n, samples) * n * samples == pytest.approx(step)
    assert np.isnan(model.time_per_sample(np.nan, n, samples))
    assert np.isnan(model.cost_per_sample(step, np.nan, samples))
    assert np.isnan(model.energy_per_sample(step, power, np.nan))


def test_step_factors_agree_with_their_reference_incl_nan():
    """The factors of throughput, cost and energy (format 4 stores them instead of the three
    variables) equal the loop reference exactly, NaN where a batch, price or power is missing."""
    tables = random_tables(5)
    tables.jobs[1, L.J_BATCH] = np.nan
    tables.gpus[0, L.G_PRICE] = np.nan
    tables.gpus[-1, L.G_POWER] = np.nan
    got = model.step_factors(tables.jobs, tables.n_gpu, tables.gpus)
    want = reference.step_factors(tables.jobs, tables.n_gpu, tables.gpus)
    for name, x, y in zip(("samples", "cost", "energy"), got, want):
        assert x.dtype == y.dtype == np.float64, name
        np.testing.assert_array_equal(x, y, err_msg=name)  # NaN == NaN here
    samples, cost, energy = got
    assert np.isnan(samples[1]).all() and np.isfinite(samples[0]).all()
    assert np.isnan(cost[:, 0]).all() and np.isnan(energy[:, -1]).all() and np.isfinite(energy[0, 0])
    # a missing factor makes the configurations invalid in the kernel, so no NaN derives from a number
    out = tables.run()
    assert (out["invalid_reason"][1] != L.REASON_VALID).all()
    assert (out["invalid_reason"][:, :, 0] != L.REASON_VALID).all()
