"""Plain numpy implementations of the kernels in ``model``, with the same names and signatures.

They broadcast the per-dimension tables over the full grid (J, A, G, N, I, W, P) and so
materialise it: clear, slow and memory-hungry, which is what a reference should be.  The tests
check that the kernels agree with them (NaN positions included) and ``bench/`` uses them as
the baseline.
"""

import numpy as np

from .layout import (
    ARCH_1W1G, ARCH_1WNG, ARCH_ALLREDUCE_LOCAL, ARCH_PS_WORKER,
    BOTTLENECK_COMM, BOTTLENECK_FLOP, BOTTLENECK_INPUT, BOTTLENECK_MEM,
    COLLECTIVE_RING, COLLECTIVE_TREE, FLAG_FILL,
    G_MEM_BW, G_MEMORY, G_PCIE_BW, G_POWER, G_PRICE,
    J_ACCUM, J_ACTIVATION, J_BATCH, J_FLOP, J_GPUS_PER_NODE, J_INPUT, J_INPUT_RATE, J_MEMBOUND,
    J_NICS_PER_NODE, J_OPT_STATE, J_OVERLAP, J_PARAMS, J_PCIE_ROOTS, J_PS_COUNT,
    L_BW, L_KIND, L_LATENCY, LINK_NONE, LINK_NVLINK_HCM, LINK_PCIE,
    O_COLLECTIVE, O_TOPOLOGY, O_WORKSPACE,
    P_ACT_RATIO, P_COMM_BYTES, P_GRAD_BYTES, P_WEIGHT_BYTES,
)


def _axis(values, axis):
    """View a 1-D table column along ``axis`` of the 7-D grid (J, A, G, N, I, W, P)."""
    shape = [1] * 7
    shape[axis] = -1
    return np.asarray(values).reshape(shape)


def intra_fraction(kind, n, k, pcie_roots, topology_aware):
    """Numpy version of ``model.intra_fraction`` (broadcasting arrays)."""
    kind, n, k, roots = np.broadcast_arrays(kind, n, k, pcie_roots)
    frac = np.ones(n.shape)
    if topology_aware == 0.0:
        return frac
    hcm = np.select([n <= 2.0, n <= 4.0, n < 8.0], [1.0 / 3.0, 2.0 / 3.0, 0.5], 1.0)
    frac = np.where(kind == LINK_NVLINK_HCM, hcm, frac)
    frac = np.where((kind == LINK_PCIE) & (n > k / roots), 0.5, frac)
    return np.where(n <= 1.0, 1.0, frac)


def ring_or_tree_seconds(nbytes, n, bandwidth, latency, collective):
    """Numpy version of ``model.ring_or_tree_seconds``."""
    with np.errstate(divide="ignore", invalid="ignore"):
        volume = 2.0 * (n - 1.0) / n * nbytes / bandwidth
        if collective == COLLECTIVE_TREE:
            hops = 2.0 * np.ceil(np.log2(np.maximum(n, 1.0))) * latency
        else:
            hops = 2.0 * (n - 1.0) * latency
        return np.where(n <= 1.0, 0.0, volume + hops)


def comm_seconds(arch, n, k, nics, pcie_roots, ps_count, nbytes, pcie_bw,
                 intra_bw, intra_lat, net_bw, net_lat, collective):
    """Numpy version of ``model.comm_seconds`` (every argument but ``collective`` broadcasts)."""
    servers = np.ceil(n / k)
    with np.errstate(divide="ignore", invalid="ignore"):
        one_wng = 2.0 * nbytes * n / (np.minimum(pcie_roots, n) * pcie_bw)
        local = ring_or_tree_seconds(nbytes, n, intra_bw, intra_lat, collective)
        ps = np.where(ps_count > 0.0, ps_count, servers)
        ps_worker = np.maximum(2.0 * nbytes * np.minimum(n, k) / (nics * net_bw),
                               2.0 * nbytes * n / (ps * net_bw)) + 2.0 * nbytes / pcie_bw
        if collective == COLLECTIVE_RING or collective == COLLECTIVE_TREE:
            slowest = np.minimum(intra_bw, nics * net_bw)
            flat = ring_or_tree_seconds(nbytes, n, slowest, np.maximum(intra_lat, net_lat),
                                        collective)
            cluster = np.where(servers <= 1.0, local, flat)
        else:
            intra = ring_or_tree_seconds(nbytes, np.minimum(n, k), intra_bw, intra_lat, collective)
            inter = (2.0 * (servers - 1.0) / servers * nbytes / (nics * net_bw)
                     + 2.0 * (servers - 1.0) * net_lat)
            cluster = np.where(servers <= 1.0, intra, intra + inter)
    return np.select(
        [arch == ARCH_1W1G, arch == ARCH_1WNG, arch == ARCH_ALLREDUCE_LOCAL, arch == ARCH_PS_WORKER],
        [0.0, one_wng, local, ps_worker], cluster)


def job_gpu_terms(jobs, gpus, peak, prec, workspace):
    """Numpy version of ``model.job_gpu_terms`` for all jobs and GPUs at once.

    Returns ``t_data, t_flop, t_mem, fits`` over (J, G, P).
    """
    job = {f: jobs[:, f][:, None, None] for f in range(jobs.shape[1])}
    ratio = prec[:, P_ACT_RATIO][None, None, :]
    supported = ~np.isnan(peak)[None, :, :]
    accum = job[J_ACCUM]
    t_data = accum * job[J_INPUT] / gpus[:, G_PCIE_BW][None, :, None] + 0.0 * ratio
    t_flop = accum * job[J_FLOP] / peak[None, :, :]
    t_mem = accum * job[J_MEMBOUND] * ratio / gpus[:, G_MEM_BW][None, :, None]
    state = job[J_PARAMS] * (prec[:, P_WEIGHT_BYTES] + prec[:, P_GRAD_BYTES] + job[J_OPT_STATE])
    needed = state + job[J_ACTIVATION] * ratio + workspace
    fits = np.where(needed <= gpus[:, G_MEMORY][None, :, None], 1, 0).astype(np.uint8)
    t_data, t_flop, t_mem = (np.where(supported, t, np.nan) for t in (t_data, t_flop, t_mem))
    return t_data, t_flop, t_mem, np.where(supported, fits, FLAG_FILL).astype(np.uint8)


def evaluate_block(jobs, n_gpu, arch, gpus, peak, prec, intra, intra_fits, network, options,
                   write_cube,
                   step_time, t_comm, throughput, cost, energy, bottleneck, valid,
                   t_data, t_flop, t_mem, fits_memory,
                   best_step, best_index, best_bottleneck):
    """Numpy version of ``model.evaluate_block``: same arguments, same outputs (filled in place)."""
    n_jobs, n_arch, n_gpus = jobs.shape[0], arch.shape[0], gpus.shape[0]
    n_intra, n_net, n_prec = intra.shape[0], network.shape[0], prec.shape[0]
    collective, topology = options[O_COLLECTIVE], options[O_TOPOLOGY]

    td, tf, tm, fits = job_gpu_terms(jobs, gpus, peak, prec, options[O_WORKSPACE])
    t_data[...], t_flop[...], t_mem[...], fits_memory[...] = td, tf, tm, fits

    def job_col(field):
        return _axis(jobs[:, field], 0)

    a = _axis(arch, 1)
    n = n_gpu.reshape(n_jobs, 1, 1, -1, 1, 1, 1).astype(np.float64)
    k = job_col(J_GPUS_PER_NODE)
    kind = _axis(intra[:, L_KIND], 4)
    intra_bw = _axis(intra[:, L_BW], 4) * intra_fraction(kind, n, k, job_col(J_PCIE_ROOTS), topology)
    pcie_bw = _axis(gpus[:, G_PCIE_BW], 2)
    common = dict(arch=a, n=n, k=k, nics=job_col(J_NICS_PER_NODE),
                  pcie_roots=job_col(J_PCIE_ROOTS), ps_count=job_col(J_PS_COUNT),
                  pcie_bw=pcie_bw, intra_bw=intra_bw, net_bw=_axis(network[:, L_BW], 5),
                  collective=collective)
    per_byte = comm_seconds(nbytes=1.0, intra_lat=0.0, net_lat=0.0, **common)
    latency = comm_seconds(nbytes=0.0, intra_lat=_axis(intra[:, L_LATENCY], 4),
                           net_lat=_axis(network[:, L_LATENCY], 5), **common)

    fits_intra = intra_fits.reshape(1, 1, n_gpus, 1, n_intra, 1, 1) != 0
    net_kind = _axis(network[:, L_KIND], 5)
    ok = fits_intra & np.select(
        [a == ARCH_1W1G, (a == ARCH_1WNG) | (a == ARCH_ALLREDUCE_LOCAL)],
        [n == 1.0, n <= k], net_kind != LINK_NONE)

    grid_td = td[:, None, :, None, None, None, :]
    grid_tf = tf[:, None, :, None, None, None, :]
    grid_tm = tm[:, None, :, None, None, None, :]
    raw = job_col(J_PARAMS) * _axis(prec[:, P_COMM_BYTES], 6) * per_byte + latency
    backward = 2.0 / 3.0 * (grid_tf + grid_tm) / job_col(J_ACCUM)
    overlap = job_col(J_OVERLAP)
    tc = np.where(overlap <= 0.0, raw, raw - np.minimum(overlap * raw, backward))
    step = grid_td + grid_tf + grid_tm + tc
    samples_per_step = job_col(J_BATCH) * job_col(J_ACCUM)
    floor = np.minimum(n, k) * samples_per_step / job_col(J_INPUT_RATE)
    input_bound = floor > step
    step = np.where(input_bound, floor, step)
    ok = ok & ~np.isnan(step)   # the GPU lacks the precision, or an input is missing
    shape = (n_jobs, n_arch, n_gpus, n_gpu.shape[1], n_intra, n_net, n_prec)
    ok = np.broadcast_to(ok, shape)
    step32 = np.where(ok, step, np.nan).astype(np.float32)

    # per (j, g, n, p): first minimum over (arch, intra, network) among feasible configurations
    feasible = ok & (fits[:, None, :, None, None, None, :] == 1)
    candidates = np.where(feasible, step32, np.inf).transpose(0, 2, 3, 6, 1, 4, 5)
    candidates = candidates.reshape(n_jobs, n_gpus, n_gpu.shape[1], n_prec, -1)
    index = np.argmin(candidates, axis=-1)
    smallest = np.take_along_axis(candidates, index[..., None], axis=-1)[..., 0]
    none = np.isinf(smallest)
    with np.errstate(invalid="ignore"):
        largest = np.stack(np.broadcast_arrays(grid_td, grid_tf, grid_tm, tc), axis=0)
        code = np.argmax(largest, axis=0)  # first maximum on ties, like the kernel
    assert (BOTTLENECK_INPUT, BOTTLENECK_FLOP, BOTTLENECK_MEM, BOTTLENECK_COMM) == (0, 1, 2, 3)
    code = np.broadcast_to(np.where(input_bound, BOTTLENECK_INPUT, code), shape)
    best_code = code.transpose(0, 2, 3, 6, 1, 4, 5).reshape(candidates.shape)
    best_code = np.take_along_axis(best_code, index[..., None], axis=-1)[..., 0]
    best_step[...] = np.where(none, np.nan, smallest)
    best_index[...] = np.where(none, -1, index)
    best_bottleneck[...] = np.where(none, FLAG_FILL, best_code)
    if not write_cube:
        return

    price = _axis(gpus[:, G_PRICE], 2)
    power = _axis(gpus[:, G_POWER], 2)
    step_time[...] = step32
    t_comm[...] = np.where(ok, tc, np.nan)
    throughput[...] = np.where(ok, n * samples_per_step / step, np.nan)
    cost[...] = np.where(ok, price / 3600.0 * 1e6 / samples_per_step * step, np.nan)
    energy[...] = np.where(ok, power / samples_per_step * step, np.nan)
    bottleneck[...] = np.where(ok, code, FLAG_FILL)
    valid[...] = ok.astype(np.uint8)
