"""The pruned block kernel: it computes only the valid (arch, n_gpu), (gpu, intra) and (gpu,
precision) combinations and each architecture once along the dimensions it ignores, and must give
exactly the numbers, reason codes and best indices of the unpruned numpy reference, on grids where
most cells are invalid and many valid cells tie."""

import numpy as np
import pytest

from kernel_tables import AMP, FP32, Tables, gpu, job, link
from paigrid.kernels import layout as L

CUBE = ("step_time", "t_comm", "throughput", "cost", "energy", "bottleneck", "invalid_reason")
REDUCTIONS = ("best_step", "best_index", "best_bottleneck")


def sparse_tables(seed, arch=range(5), tie_networks=False):
    """Random tables in which most cells are invalid: most links do not fit most GPUs, a third of
    the (gpu, precision) pairs are unsupported, GPU counts mostly exceed a server, two networks
    are ``none``, one GPU fits no link at all, and small GPU memories make some precisions not
    fit.  ``tie_networks``: every real network is the same link (ties along the network)."""
    rng = np.random.default_rng(seed)
    n_jobs, n_gpus, n_intra, n_prec = 3, 5, 5, 4
    jobs = [job(flop=rng.uniform(1e11, 1e14), membound=rng.uniform(1e8, 1e11), input_bytes=rng.uniform(1e5, 1e8),
                params=rng.uniform(1e6, 4e9), activation=rng.uniform(1e8, 4e10), batch=float(rng.integers(1, 256)),
                accum=float(rng.integers(1, 3)), gpus_per_node=float(rng.choice([2, 4, 8])),
                nics=float(rng.integers(1, 3)), ps_count=float(rng.integers(0, 2)),
                overlap=float(rng.choice([0.0, rng.uniform()])),
                input_rate=float(rng.choice([np.inf, rng.uniform(100, 1e5)]))) for _ in range(n_jobs)]
    gpus = [gpu(mem_bw=rng.uniform(3e11, 5e12), pcie_bw=rng.uniform(5e9, 6e10), memory=rng.uniform(4e9, 8e10),
                price=rng.uniform(0.2, 10), power=rng.uniform(70, 1000)) for _ in range(n_gpus)]
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
    prec = [FP32, AMP, [0.5, 6.0, 2.0, 2.0], [0.25, 6.0, 2.0, 1.0]]
    n_gpu = [1, 2, 4, 8, 16, 64, 512]
    return Tables(jobs, [n_gpu], list(arch), gpus, peak, prec, intra, fits, network,
                  collective=int(rng.integers(0, len(L.COLLECTIVE_NAMES))), topology=int(rng.integers(0, 2)))


def assert_identical(a, b, names):
    for name in names:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)   # NaN == NaN here


def assert_agrees(kernel, reference, names):
    """Kernel against the numpy reference: exact codes and indices, values to float rounding,
    NaN in the same places."""
    for name in names:
        x, y = kernel[name], reference[name]
        if x.dtype.kind == "f":
            np.testing.assert_array_equal(np.isnan(x), np.isnan(y), err_msg=f"NaN positions of {name}")
            np.testing.assert_allclose(x, y, rtol=2e-6, err_msg=name)
        else:
            np.testing.assert_array_equal(x, y, err_msg=name)


@pytest.mark.parametrize("seed", range(8))
def test_pruned_kernel_matches_the_unpruned_reference_on_sparse_grids(seed):
    tables = sparse_tables(seed, tie_networks=seed % 2 == 1)
    expected = tables.run("reference")
    valid = (expected["invalid_reason"] == L.REASON_VALID).mean()
    assert 0.0 < valid < 0.2, valid                                 # mostly invalid, not empty
    assert set(np.unique(expected["invalid_reason"])) >= set(range(1, 6))
    assert (expected["fits_memory"] == 0).any() and (expected["best_index"] >= 0).any()
    full = tables.run("kernel")
    assert_agrees(full, expected, CUBE + REDUCTIONS)
    for mode in ("serial", "kernel"):    # both compilations, with and without the cube
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
    only_single = Tables(tables.jobs, tables.n_gpu, [L.ARCH_1W1G], tables.gpus, tables.peak, tables.prec,
                         tables.intra, tables.fits, tables.network)
    best = only_single.run("kernel", False)["best_index"]
    assert set(np.unique(best)) <= {-1, 0}      # (arch 0, intra 0, network 0) or nothing


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
