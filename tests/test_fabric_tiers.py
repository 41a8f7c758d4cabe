"""The option ``fabric_tiers``: a fabric of llm_fabrics.csv in a data-parallel grid's network
axis, whose switch tiers (oversubscription, hop latency) and in-network reduction the
all-reduce across servers crosses.  Kernel against the numpy reference (NaN positions
included), worked by hand, plain links unchanged bit for bit, and a sweep with the option off
giving the cube of the network links alone (pai-v1 and pai-v2)."""

import itertools

import h5py
import numpy as np
import pytest

from kernel_tables import AMP, FP32, GB, Tables, gpu, job, link, one
from paigrid.inputs.spec import spec_from_dict
from paigrid.kernels import dp_columns as L
from paigrid.kernels import model
from paigrid.orchestration import run_sweep


def assert_same(a, b):
    for name in a:
        x, y = a[name], b[name]
        if x.dtype.kind == "f":
            np.testing.assert_array_equal(np.isnan(x), np.isnan(y), err_msg=f"NaN positions of {name}")
            np.testing.assert_allclose(x, y, rtol=2e-6, err_msg=name)
        else:
            np.testing.assert_array_equal(x, y, err_msg=name)


def fabric_tables(seed, collective, inter_volume):
    """Random tables whose networks are none, a plain link and fabrics of every kind: one, two
    and three tiers, oversubscribed or not, with and without in-network reduction, one with a
    missing latency (NaN in, NaN out)."""
    rng = np.random.default_rng(seed)
    jobs = [
        job(
            params=rng.uniform(1e6, 2e9),
            gpus_per_node=float(rng.choice([2, 4, 8])),
            nics=float(rng.integers(1, 4)),
            ps_count=float(rng.integers(0, 3)),
            overlap=float(rng.choice([0.0, 0.5])),
        )
        for _ in range(3)
    ]
    net = [
        link(0.0, 0.0, L.LINK_NONE),
        link(12.5 * GB, 5e-6, L.LINK_NETWORK),
        link(45 * GB, 3e-6, L.LINK_NETWORK, tier1=16, tier2=256, oversub1=3.0, oversub2=7.0, hop=0.7e-6),
        link(45 * GB, 2e-6, L.LINK_NETWORK, tier1=8, tier2=np.inf, oversub1=2.0, hop=0.13e-6, in_network=1),
        link(45 * GB, 2e-6, L.LINK_NETWORK, tier1=4, tier2=64, oversub1=1.0, oversub2=1.0, hop=1e-6, in_network=1),
        link(45 * GB, np.nan, L.LINK_NETWORK, tier1=16, tier2=128, oversub1=3.0, oversub2=3.0, hop=0.7e-6),
    ]
    intra = [link(100 * GB, 5e-6, L.LINK_NVSWITCH), link(10 * GB, 5e-6, L.LINK_PCIE)]
    return Tables(
        jobs,
        [[1, 2, 8, 16, 24, 64, 512, 4096]],
        range(5),
        [gpu(), gpu(mem_bw=2000 * GB, pcie_bw=25 * GB, memory=80 * GB)],
        [[30e12, 60e12], [150e12, 300e12]],
        [FP32, AMP],
        intra,
        [[1, 1], [1, 0]],
        net,
        collective=collective,
        inter_volume=inter_volume,
        sync_latency=seed % 2,
    )


@pytest.mark.parametrize("collective, inter_volume", list(itertools.product(range(len(L.COLLECTIVE_NAMES)), (0, 1))))
def test_kernel_matches_reference_on_fabrics(collective, inter_volume):
    tables = fabric_tables(collective + 10 * inter_volume, collective, inter_volume)
    expected = tables.run("reference")
    assert np.isnan(expected["step_time"][..., 5, :]).any()  # the NaN latency reaches the outputs
    assert_same(tables.run("kernel"), expected)
    assert_same(tables.run("serial"), expected)
    assert_same(tables.run("kernel", False), tables.run("reference", False))


def test_a_plain_link_is_what_it_was_bit_for_bit():
    """``network_terms`` hands a plain link's bandwidth and latency to the exchange as they are,
    for every architecture, GPU count, server size and collective: the kernel's data-parallel
    answers are those of before the option (which only admits fabrics to the network axis)."""
    row = np.array(link(12.345e9, 7.7e-6, L.LINK_NETWORK), dtype=np.float64)
    for arch, n, k, collective, volume in itertools.product(
        range(5), (1, 2, 7, 8, 9, 64, 1e6), (1, 4, 8), range(5), (0.0, 1.0)
    ):
        assert model.network_terms(row, arch, float(n), float(k), collective, volume) == (row[L.L_BW], row[L.L_LATENCY])
    # a fabric row with no tiers, no oversubscription and no reduction is that plain link
    plain = one(L.ARCH_ALLREDUCE_CLUSTER, 64, net_row=link(3 * GB, 20e-6, L.LINK_NETWORK)).run()
    neutral = one(
        L.ARCH_ALLREDUCE_CLUSTER, 64, net_row=link(3 * GB, 20e-6, L.LINK_NETWORK, 1e9, 1e9, 1.0, 1.0, 0.0, 0)
    ).run()
    assert_same(neutral, plain)


def test_tiers_and_in_network_reduction_by_hand():
    """allreduce-cluster, default collective, 8 GPUs a server, one NIC: the inter-server phase
    is 2 (s-1)/s S / B + 2 (s-1) alpha on a plain link; past the tier-1 group the bandwidth is
    B / o1 and alpha gains two hops, past the tier-2 group B / (o1 o2) and four hops; with
    in-network reduction the phase is S / B' + 2 alpha'."""
    params, B, alpha, hop = 25e6, 3 * GB, 20e-6, 1e-6
    S = 4.0 * params
    intra = 2.0 * 7.0 / 8.0 * S / (100 * GB) + 2.0 * 7.0 * 5e-6

    def t_comm(n, **fabric):
        row = link(B, alpha, L.LINK_NETWORK, **fabric)
        return float(
            one(L.ARCH_ALLREDUCE_CLUSTER, n, net_row=row, job_row=job(params=params)).run()["t_comm"][
                0, 0, 0, 0, 0, 0, 0
            ]
        )

    s = 4.0  # 32 GPUs
    tiers = dict(tier1=16, tier2=64, oversub1=3.0, oversub2=2.0, hop=hop)
    assert t_comm(32) == pytest.approx(intra + 2 * (s - 1) / s * S / B + 2 * (s - 1) * alpha, rel=1e-6)
    assert t_comm(16, **tiers) == pytest.approx(intra + 2 * 1 / 2 * S / B + 2 * 1 * alpha, rel=1e-6)
    assert t_comm(32, **tiers) == pytest.approx(
        intra + 2 * (s - 1) / s * S / (B / 3) + 2 * (s - 1) * (alpha + 2 * hop), rel=1e-6
    )
    s = 16.0  # 128 GPUs: past the tier-2 group
    assert t_comm(128, **tiers) == pytest.approx(
        intra + 2 * (s - 1) / s * S / (B / 6) + 2 * (s - 1) * (alpha + 4 * hop), rel=1e-6
    )
    assert t_comm(128, **tiers, in_network=1) == pytest.approx(intra + S / (B / 6) + 2 * (alpha + 4 * hop), rel=1e-6)
    # in-network reduction is never slower, and on one server there is no inter-server phase
    assert t_comm(8, **tiers, in_network=1) == pytest.approx(intra, rel=1e-6)


SPEC = {
    "workloads": ["resnet50", "bert-large-seq128"],
    "jobs_per_block": 1,
    "grid": {
        "arch": ["allreduce-local", "allreduce-cluster", "ps-worker"],
        "gpu": ["H100-SXM5-80GB"],
        "n_gpu": [8, 64, 512],
        "intra": ["nvswitch-nvlink4"],
        "network": ["ib-ndr-400g", "tor-roce-3to1"],
        "precision": ["amp-bf16"],
    },
}


def cube(tmp_path, name, network, **options):
    spec = {**SPEC, "grid": {**SPEC["grid"], "network": network}, "options": options}
    out = tmp_path / f"{name}.h5"
    run_sweep(spec_from_dict(spec, name), out, progress=False)
    with h5py.File(out, "r") as f:
        return [v.decode() for v in f["network"][:]], f["step_time"][:], f["best_step_time"][:]


@pytest.mark.parametrize("version", ["pai-v1", "pai-v2"])
def test_off_the_data_parallel_answers_are_those_of_the_network_links(tmp_path, version):
    names, step, best = cube(tmp_path, "off", ["ib-ndr-400g", "tor-roce-3to1"], model=version)
    assert names == ["ib-ndr-400g"]  # the fabric is the LLM family's only
    alone = cube(tmp_path, "alone", ["ib-ndr-400g"], model=version)
    np.testing.assert_array_equal(step, alone[1])
    np.testing.assert_array_equal(best, alone[2])
    on_names, on_step, _ = cube(tmp_path, "on", ["ib-ndr-400g", "tor-roce-3to1"], model=version, fabric_tiers=True)
    assert on_names == ["ib-ndr-400g", "tor-roce-3to1"]
    np.testing.assert_array_equal(on_step[..., :1, :], step)  # the link's cells do not move
    cluster = SPEC["grid"]["arch"].index("allreduce-cluster")
    fabric = on_step[:, cluster, 0, :, 0, 1, 0]  # over (job, n_gpu)
    link_cells = step[:, cluster, 0, :, 0, 0, 0]
    assert np.all(np.isfinite(fabric[:, 1:]))
    # 512 GPUs cross tor-roce-3to1's 3:1 tier-1 uplinks (32 GPUs a group): slower than the plain link
    assert np.all(fabric[:, 2] > link_cells[:, 2])
