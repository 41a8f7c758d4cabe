"""The pruned block kernel: it computes only the valid (arch, n_gpu), (gpu, intra) and (gpu,
precision) combinations and each architecture once along the dimensions it ignores, and must give
exactly the numbers, reason codes and best indices of the unpruned numpy reference, on grids where
most cells are invalid and many valid cells tie."""

import numpy as np
import pytest

from kernel_tables import AMP, FP32, GB, Tables, gpu, job, link
from paigrid.kernels import dp_columns as L
from test_kernels import assert_same

CUBE = ("step_time", "t_comm", "throughput", "cost", "energy", "bottleneck", "invalid_reason")
REDUCTIONS = ("best_step", "best_index", "best_bottleneck")


def sparse_tables(seed, arch=range(5), tie_networks=False):
    """Random tables in which most cells are invalid: most links do not fit most GPUs, a third of
    the (gpu, precision) pairs are unsupported, GPU counts mostly exceed a server, two networks
    are ``none``, one GPU fits no link at all, and small GPU memories make some precisions not
    fit.  ``tie_networks``: every real network is the same link (ties along the network)."""
    rng = np.random.default_rng(seed)
    n_jobs, n_gpus, n_intra, n_prec = 3, 5, 5, 4
    jobs = [
        job(
            flop=rng.uniform(1e11, 1e14),
            membound=rng.uniform(1e8, 1e11),
            input_bytes=rng.uniform(1e5, 1e8),
            params=rng.uniform(1e6, 4e9),
            activation=rng.uniform(1e8, 4e10),
            batch=float(rng.integers(1, 256)),
            accum=float(rng.integers(1, 3)),
            gpus_per_node=float(rng.choice([2, 4, 8])),
            nics=float(rng.integers(1, 3)),
            ps_count=float(rng.integers(0, 2)),
            overlap=float(rng.choice([0.0, rng.uniform()])),
            input_rate=float(rng.choice([np.inf, rng.uniform(100, 1e5)])),
        )
        for _ in range(n_jobs)
    ]
    gpus = [
        gpu(
            mem_bw=rng.uniform(3e11, 5e12),
            pcie_bw=rng.uniform(5e9, 6e10),
            memory=rng.uniform(4e9, 8e10),
            price=rng.uniform(0.2, 10),
            power=rng.uniform(70, 1000),
        )
        for _ in range(n_gpus)
    ]
    peak = rng.uniform(5e12, 2e15, (n_gpus, n_prec))
    peak[rng.random((n_gpus, n_prec)) < 0.35] = np.nan
    kinds = [L.LINK_PCIE, L.LINK_NVLINK_HCM, L.LINK_NVSWITCH, L.LINK_PCIE, L.LINK_NVSWITCH]
    intra = [link(rng.uniform(8e9, 9e11), rng.uniform(1e-6, 1e-5), k) for k in kinds]
    fits = (rng.random((n_gpus, n_intra)) < 0.3).astype(np.uint8)
    fits[rng.integers(0, n_gpus)] = 0
    real = [link(rng.uniform(1e9, 1e11), rng.uniform(1e-6, 5e-5), L.LINK_NETWORK) for _ in range(3)]
    if tie_networks:
        real = [real[0]] * 3
    none = link(0.0, 0.0, L.LINK_NONE)
    network = [real[0], none, real[1], none, real[2]]
    prec = [FP32, AMP, [0.5, 6.0, 2.0, 2.0, 1.0], [0.25, 6.0, 2.0, 1.0, 1.0]]
    n_gpu = [1, 2, 4, 8, 16, 64, 512]
    return Tables(
        jobs,
        [n_gpu],
        list(arch),
        gpus,
        peak,
        prec,
        intra,
        fits,
        network,
        collective=int(rng.integers(0, len(L.COLLECTIVE_NAMES))),
        topology=int(rng.integers(0, 2)),
    )


def assert_identical(a, b, names):
    for name in names:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)  # NaN == NaN here


def assert_agrees(kernel, reference, names):
    """Kernel against the numpy reference: exact codes and indices, values to float rounding,
    NaN in the same places (``test_kernels.assert_same`` over ``names``)."""
    assert_same({name: kernel[name] for name in names}, reference)


@pytest.mark.parametrize("seed", range(8))
def test_pruned_kernel_matches_the_unpruned_reference_on_sparse_grids(seed):
    tables = sparse_tables(seed, tie_networks=seed % 2 == 1)
    expected = tables.run("reference")
    valid = (expected["invalid_reason"] == L.REASON_VALID).mean()
    assert 0.0 < valid < 0.2, valid  # mostly invalid, not empty
    assert set(np.unique(expected["invalid_reason"])) >= set(range(1, 6))
    assert (expected["fits_memory"] == 0).any() and (expected["best_index"] >= 0).any()
    full = tables.run("kernel")
    assert_agrees(full, expected, CUBE + REDUCTIONS)
    for mode in ("serial", "kernel"):  # both compilations, with and without the cube
        for write_cube in (True, False):
            out = tables.run(mode, write_cube)
            assert_identical(out, full, REDUCTIONS + (CUBE if write_cube else ()))


@pytest.mark.parametrize("arch", [(4, 0, 2), (3,), (1, 0), (2, 4, 3, 1, 0)])
def test_pruning_follows_the_architecture_codes_in_any_order(arch):
    tables = sparse_tables(20 + len(arch), arch=arch, tie_networks=True)
    expected = tables.run("reference")
    assert_agrees(tables.run("kernel"), expected, CUBE + REDUCTIONS)
    assert_identical(tables.run("serial", False), tables.run("kernel"), REDUCTIONS)


def test_copies_along_an_ignored_dimension_are_exact_and_the_first_one_is_the_best():
    """1w1g and 1wng are computed on the first link that fits and copied to the others; the
    single-server architectures on the first network and copied to the rest: the copies equal the
    first cell bit for bit, and the best index names the first."""
    tables = sparse_tables(3)
    tables.fits[:] = 1
    tables.peak[:] = 1e14
    out = tables.run("kernel")
    step = out["step_time"]
    for a, code in enumerate(tables.arch):
        if code in (L.ARCH_1W1G, L.ARCH_1WNG):
            np.testing.assert_array_equal(step[:, a], np.broadcast_to(step[:, a, :, :, :1, :1], step[:, a].shape))
        if code == L.ARCH_ALLREDUCE_LOCAL:
            np.testing.assert_array_equal(step[:, a], np.broadcast_to(step[:, a, :, :, :, :1], step[:, a].shape))
    assert_agrees(out, tables.run("reference"), CUBE + REDUCTIONS)
    only_single = Tables(
        tables.jobs,
        tables.n_gpu,
        [L.ARCH_1W1G],
        tables.gpus,
        tables.peak,
        tables.prec,
        tables.intra,
        tables.fits,
        tables.network,
    )
    best = only_single.run("kernel", False)["best_index"]
    assert set(np.unique(best)) <= {-1, 0}  # (arch 0, intra 0, network 0) or nothing


def test_reduce_only_with_nothing_to_fold():
    """Every precision unsupported on every GPU: reduce-only skips everything and leaves no best."""
    tables = sparse_tables(5)
    tables.peak[:] = np.nan
    for write_cube in (True, False):
        out = tables.run("serial", write_cube)
        assert np.isnan(out["best_step"]).all()
        assert (out["best_index"] == -1).all() and (out["best_bottleneck"] == L.FLAG_FILL).all()
    assert_agrees(tables.run("kernel"), tables.run("reference"), CUBE + REDUCTIONS)


def test_the_kernel_ignores_what_the_schema_says_architectures_ignore():
    """The kernel computes an architecture once along a dimension only where the cube schema
    (``ARCH_IGNORES``, which queries use) also says the architecture ignores it."""
    from paigrid.kernels import model
    from paigrid.schema import ARCH_IGNORES

    for code, name in enumerate(L.ARCH_NAMES):
        ignored = ARCH_IGNORES.get(name, ())
        if model.ignores_intra(code):
            assert "intra" in ignored, name
        if model.ignores_network(code):
            assert "network" in ignored, name
    assert model.ignores_intra(L.ARCH_1W1G) and model.ignores_network(L.ARCH_ALLREDUCE_LOCAL)
    assert not model.ignores_network(L.ARCH_PS_WORKER) and not model.ignores_intra(L.ARCH_ALLREDUCE_CLUSTER)


# --- the parameter-server options, the ring inter-server volume and the pai-v2 compute model -------
PS_OPTIONS = (
    "ps_local_reduce",
    "ps_nic_per_worker",
    "ps_colocated",
    "ps_latency",
    "ps_host_bw",
    "ps_sparse",
    "ps_memory",
)
OPTION_CASES = {
    "ps_memory": dict(ps_memory=1),
    "ps_sparse and ps_memory": dict(ps_sparse=1, ps_memory=1),
    "every ps option": dict(ps_local_reduce=1, ps_colocated=1, ps_latency=1, ps_host_bw=46e9, ps_sparse=1, ps_memory=1),
    "ps per-worker nic and update": dict(ps_nic_per_worker=1, ps_host_bw=30e9, ps_local_reduce=1),
    "ring inter-server volume": dict(inter_volume=1),
}


def with_options(tables, seed, v2=False, **flags):
    """``tables`` with embedding tables on most jobs (sparse parameter-server traffic), the options
    ``flags`` (names of ``PS_OPTIONS`` and ``inter_volume``) and, when ``v2``, the pai-v2 compute
    model with random class fields (per micro-batch FLOPs and bytes), class peaks [FLOP/s] and
    launch overheads [s]."""
    rng = np.random.default_rng(300 + seed)
    for row in tables.jobs:
        if rng.random() < 0.7:
            row[L.J_EMB_PARAMS] = row[L.J_PARAMS] * rng.uniform(0.1, 0.99)
            row[L.J_EMB_TOUCHED] = row[L.J_EMB_PARAMS] * rng.choice([1e-4, 0.05, 2.0])
    for name, value in flags.items():
        index = L.O_INTER_VOLUME if name == "inter_volume" else L.O_PS_LOCAL_REDUCE + PS_OPTIONS.index(name)
        tables.options[index] = value
    if "inter_volume" in flags:  # the ring volume applies to the default, hierarchical and pipelined collectives
        tables.options[L.O_COLLECTIVE] = float(
            rng.choice([L.COLLECTIVE_DEFAULT, L.COLLECTIVE_HIERARCHICAL, L.COLLECTIVE_PIPELINED])
        )
    if v2:
        tables.options[L.O_MODEL] = L.MODEL_PAI_V2
        for row in tables.jobs:
            row[L.J_CLASS_FLOP : L.J_CLASS_FLOP + L.N_CLASSES] = row[L.J_FLOP] * rng.dirichlet(np.ones(L.N_CLASSES))
            row[L.J_CLASS_BYTES : L.J_CLASS_BYTES + L.N_CLASSES] = row[L.J_MEMBOUND] * rng.dirichlet(
                np.ones(L.N_CLASSES)
            )
            row[[L.J_LAUNCHES, L.J_UPDATE_BYTES, L.J_ACTIVATION_V2, L.J_GRAPHS]] = [
                rng.uniform(100, 3000),
                rng.uniform(8, 24),
                row[L.J_ACTIVATION] * rng.uniform(0.5, 1.5),
                float(rng.integers(0, 2)),
            ]
        tables.gpus[:, L.G_CLASS_MEM_BW] = tables.gpus[:, L.G_MEM_BW]
        tables.gpus[:, L.G_LAUNCH_EAGER] = rng.uniform(3e-6, 9e-6, len(tables.gpus))
        tables.gpus[:, L.G_LAUNCH_GRAPHS] = rng.uniform(1e-6, 3e-6, len(tables.gpus))
        tables.class_peak = tables.peak[:, :, None] * rng.uniform(0.2, 1.0, tables.class_peak.shape)
    return tables


@pytest.mark.parametrize("v2", [False, True], ids=["pai-v1", "pai-v2"])
@pytest.mark.parametrize("case", list(OPTION_CASES))
@pytest.mark.parametrize("seed", range(3))
def test_pruned_kernel_matches_the_reference_with_ps_and_volume_options(seed, case, v2):
    """Every option that changes the exchange (``exchange_seconds``, the ps-worker update and sparse
    traffic) or the memory check of ps-worker, under both compute models: the pruned kernel, full
    cube and reduce-only, serial and parallel, gives the unpruned reference's numbers."""
    tables = with_options(sparse_tables(40 + seed, tie_networks=seed == 1), seed, v2=v2, **OPTION_CASES[case])
    expected = tables.run("reference")
    assert (expected["best_index"] >= 0).any()
    full = tables.run("kernel")
    assert_agrees(full, expected, CUBE + REDUCTIONS)
    for mode in ("serial", "kernel"):
        for write_cube in (True, False):
            out = tables.run(mode, write_cube)
            assert_identical(out, full, REDUCTIONS + (CUBE if write_cube else ()))


def ps_only_fit_tables(**options):
    """Two jobs whose parameters, gradients and optimizer state (FP32, 8 bytes of state a
    parameter: 16 B x 1.5e9 = 24 GB) do not fit a 20 GB GPU with 1 GB of activations and 1 GB of
    workspace, while their weights and gradients alone (12 GB) do: all-reduce fits no
    precision, ps-worker with ``ps_memory`` fits FP32 and AMP's (6 + 2) bytes a parameter.  Every
    architecture, GPU counts inside one server and across several, a NVSwitch and a PCIe link, a
    network and none; the second job declares embeddings (sparse traffic)."""
    jobs = [
        job(params=1.5e9, activation=1e9, opt_state=8.0, gpus_per_node=4, batch=64),
        job(
            params=1.5e9,
            activation=1e9,
            opt_state=8.0,
            gpus_per_node=8,
            batch=32,
            nics=2,
            emb_params=1.2e9,
            emb_touched=3e6,
        ),
    ]
    gpus = [gpu(memory=20 * GB), gpu(memory=20 * GB, mem_bw=2000 * GB, pcie_bw=25 * GB)]
    intra = [link(300 * GB, 3e-6, L.LINK_NVSWITCH), link(12 * GB, 8e-6, L.LINK_PCIE)]
    network = [link(12.5 * GB, 2e-5, L.LINK_NETWORK), link(0.0, 0.0, L.LINK_NONE), link(50 * GB, 1e-5, L.LINK_NETWORK)]
    return Tables(
        jobs,
        [[1, 2, 4, 8, 16, 32]],
        list(range(5)),
        gpus,
        [[15e12, 60e12], [30e12, 120e12]],
        [FP32, AMP],
        intra,
        [[1, 1], [1, 1]],
        network,
        **options,
    )


@pytest.mark.parametrize(
    "extra",
    [{}, dict(ps_sparse=1), dict(ps_sparse=1, ps_local_reduce=1, ps_host_bw=46e9)],
    ids=["dense", "sparse", "sparse, local reduce, update"],
)
def test_reduce_only_folds_ps_worker_where_only_it_fits(extra):
    """With ``ps_memory`` a precision that fits in memory for no other architecture still fits for
    ps-worker: reduce-only must keep it and fold it for ps-worker alone.  The bests are ps-worker
    configurations exactly where the reference says so; without ``ps_memory`` nothing fits."""
    on = ps_only_fit_tables(ps_memory=1, **extra)
    expected = on.run("reference")
    assert (expected["fits_memory"] == 0).all()  # the all-reduce check fails everywhere
    arch_of_best = np.where(expected["best_index"] >= 0, expected["best_index"] // (2 * 3), -1)
    assert (arch_of_best == L.ARCH_PS_WORKER).all()  # a network exists: ps-worker is valid everywhere
    full = on.run("kernel")
    assert_agrees(full, expected, CUBE + REDUCTIONS)
    for mode in ("serial", "kernel"):
        for write_cube in (True, False):
            assert_identical(on.run(mode, write_cube), full, REDUCTIONS + (CUBE if write_cube else ()))
    off = ps_only_fit_tables(**extra)
    for mode in ("serial", "kernel"):
        out = off.run(mode, False)
        assert np.isnan(out["best_step"]).all() and (out["best_index"] == -1).all()


def test_reduce_only_keeps_each_architectures_own_fit():
    """A job that fits for every architecture in pure FP16 but only for ps-worker in FP32
    (ps_memory): in reduce-only the FP16 bests range over every architecture and the FP32 bests
    over ps-worker only, as in the reference.  Per parameter: FP32 4 + 4 + 4 B of state (16.4 GB
    with activations and workspace, over 14 GB), FP16 2 + 2 + 4 B (11.1 GB); a ps-worker GPU
    holds 8 B (FP32, 11.6 GB)."""
    big = job(params=1.2e9, activation=1e9, opt_state=4.0, gpus_per_node=8)
    fp16 = [0.5, 2.0, 2.0, 2.0, 1.0]
    tables = Tables(
        [big],
        [[1, 4, 8, 16]],
        list(range(5)),
        [gpu(memory=14 * GB)],
        [[15e12, 60e12]],
        [FP32, fp16],
        [link(300 * GB, 3e-6, L.LINK_NVSWITCH)],
        [[1]],
        [link(12.5 * GB, 2e-5, L.LINK_NETWORK)],
        ps_memory=1,
    )
    expected = tables.run("reference")
    assert list(expected["fits_memory"][0, 0]) == [0, 1]
    arch_of_best = expected["best_index"][0, 0] // 1  # one intra link, one network: index = arch
    assert (arch_of_best[:, 0] == L.ARCH_PS_WORKER).all()  # FP32: ps-worker only
    assert (arch_of_best[:, 1] != L.ARCH_PS_WORKER).any()  # FP16: the others take part
    for mode in ("serial", "kernel"):
        assert_identical(tables.run(mode, False), tables.run("kernel"), REDUCTIONS)
    assert_agrees(tables.run("kernel"), expected, CUBE + REDUCTIONS)


@pytest.mark.parametrize("model", ["pai-v1", "pai-v2"])
def test_catalogue_grid_with_a_sparse_workload_matches_the_reference(model):
    """End to end from the catalogues: multi-interests (declared embedding tables) and a dense
    model on K80 (12 GB: multi-interests' Adam state does not fit) and A100 GPUs, every
    architecture, with sparse traffic, the PS memory check and the update on: the pruned kernel,
    full cube and reduce-only, gives the reference's numbers and bests, and ps-worker is the best
    of some (job, gpu, n_gpu, precision) where the all-reduce check fails."""
    from paigrid.evaluate import allocate, run_kernel
    from paigrid.inputs.spec import SweepSpec
    from paigrid.kernels import model as kernel_model
    from paigrid.kernels import reference
    from paigrid.orchestration import prepare

    spec = SweepSpec(
        workloads=["multi-interests", "resnet50"],
        gpu=["K80", "A100"],
        n_gpu=[1, 4, 16],
        intra=["pcie3", "nvswitch-nvlink3"],
        network=["none", "eth-25g"],
        precision=["fp32", "amp-fp16"],
    )
    spec.options = spec.options.with_overrides(
        {"model": model, "ps_sparse": True, "ps_memory": True, "ps_update": True}, "the test"
    )
    grid = prepare(spec)[0]
    jobs, n_gpu = grid.job_rows(0, len(grid.jobs))
    assert (jobs[:, L.J_EMB_PARAMS] > 0).any()
    expected = allocate(grid, len(grid.jobs), True)
    run_kernel(reference.evaluate_block, grid, jobs, n_gpu, True, expected)
    full = allocate(grid, len(grid.jobs), True)
    run_kernel(kernel_model.evaluate_block, grid, jobs, n_gpu, True, full)
    assert_agrees(full, expected, [name for name in full if name in expected])
    for kernel in (kernel_model.evaluate_block, kernel_model.evaluate_block_serial):
        reduced = allocate(grid, len(grid.jobs), False)
        run_kernel(kernel, grid, jobs, n_gpu, False, reduced)
        for name in ("best_step_time", "best_index", "best_bottleneck"):
            np.testing.assert_array_equal(reduced[name], full[name], err_msg=name)
    best, fits = full["best_index"], full["fits_memory"]
    w = len(grid.network) * len(grid.intra)
    ps_where_ar_fails = (
        (best >= 0) & (best // w == list(grid.arch_codes).index(L.ARCH_PS_WORKER)) & (fits[:, :, None, :] == 0)
    )
    assert ps_where_ar_fails.any()
