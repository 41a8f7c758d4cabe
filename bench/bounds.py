"""Same-run bounds of the bench: a fused per-job argmin of the same model (what reduce-only could
reach), and the two limits of a full sweep (compressing its chunks on every core, and writing the
already-compressed chunks with ``write_direct_chunk``).

``fused_argmin`` computes the same bests as ``kernels.model.evaluate_block`` with
``write_cube=False`` (the bench checks that it does) in the leanest loop: no row buffers, no
scratch, every valid (arch, intra, network) of each (job, gpu, n_gpu, precision) folded as it is
computed, with the kernel's own scalar formulas (``exchange_seconds``, the parameter server's
wire fraction and update term, and the rest) and the same pruning (valid combinations only, an
architecture once along what it ignores).  It checks memory with the one flag of
``compute_terms`` for every architecture, so it equals the kernel unless ``ps_memory`` is on
(where ps-worker has a check of its own); the bench runs the defaults, where it is off.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from paigrid.kernels.dp_columns import (
    ARCH_PS_WORKER,
    G_PCIE_BW,
    J_ACCUM,
    J_BATCH,
    J_GPUS_PER_NODE,
    J_INPUT_RATE,
    J_OPT_STATE,
    J_OVERLAP,
    J_PARAMS,
    J_PCIE_ROOTS,
    J_PS_COUNT,
    L_BW,
    L_KIND,
    L_LATENCY,
    LINK_NETWORK,
    O_BUCKET_BYTES,
    O_BUCKET_OVERLAP,
    O_COLLECTIVE,
    O_OVERLAP_IDLE,
    O_PS_HOST_BW,
    O_PS_LOCAL_REDUCE,
    O_PS_NIC_PER_WORKER,
    O_PS_SPARSE,
    O_SYNC_LATENCY,
    O_TOPOLOGY,
    P_COMM_BYTES,
    REASON_VALID,
)
from paigrid.kernels.model import (
    configuration_reason,
    exchange_terms,
    exposed_comm_seconds,
    ignores_intra,
    ignores_network,
    intra_fraction,
    latency_multiplier,
    overlap_fraction,
    overlap_window,
    wire_fraction,
)
from paigrid.kernels.ps import ps_update_fixed_seconds, ps_wire_fraction


@njit(parallel=True, nogil=True, cache=True, error_model="numpy")
def fused_argmin(
    jobs,
    n_gpu,
    arch,
    gpus,
    prec,
    intra,
    intra_fits,
    network,
    options,
    t_data,
    t_flop,
    t_mem,
    fits_memory,
    best_step,
    best_index,
):
    """Per (job, gpu, n_gpu, precision): the smallest float32 step time [s] over the valid
    (arch, intra, network) that fit in memory and its flat index (a * I + i) * W + w (first on
    ties; NaN and -1 when none), computed and folded in one pass: the communication time once
    per (arch, n_gpu, intra, network), then every foldable precision."""
    n_jobs, n_gpus = jobs.shape[0], gpus.shape[0]
    n_arch, n_counts = arch.shape[0], n_gpu.shape[1]
    n_intra, n_net, n_prec = intra.shape[0], network.shape[0], prec.shape[0]
    collective, topology = options[O_COLLECTIVE], options[O_TOPOLOGY]
    sync_latency, bucket_bytes, bucket_overlap = (
        options[O_SYNC_LATENCY],
        options[O_BUCKET_BYTES],
        options[O_BUCKET_OVERLAP],
    )
    per_prec = np.empty((n_jobs * n_gpus, 5, n_prec))  # base, bytes, backward, hops, overlap
    kept = np.empty((n_jobs * n_gpus, n_prec), np.int64)
    smallest = np.empty((n_jobs * n_gpus, n_prec))
    where = np.empty((n_jobs * n_gpus, n_prec), np.int64)
    for jg in prange(n_jobs * n_gpus):
        j = jg // n_gpus
        g = jg % n_gpus
        job = jobs[j]
        k = job[J_GPUS_PER_NODE]
        samples_per_step = job[J_BATCH] * job[J_ACCUM]
        values, columns, low, at = per_prec[jg], kept[jg], smallest[jg], where[jg]
        ps_fraction = ps_wire_fraction(job, options[O_PS_SPARSE])  # bytes a ps-worker moves per byte of S
        ps_update_bytes = job[J_PARAMS] * ps_fraction * (8.0 + 2.0 * job[J_OPT_STATE])
        n_kept = 0
        for p in range(n_prec):
            base = t_data[j, g, p] + t_flop[j, g, p] + t_mem[j, g, p]
            if fits_memory[j, g, p] != 1 or base != base:
                continue
            nbytes = job[J_PARAMS] * prec[p, P_COMM_BYTES]
            values[0, n_kept] = base
            values[1, n_kept] = nbytes
            values[2, n_kept] = overlap_window(t_flop[j, g, p], t_mem[j, g, p], job[J_ACCUM], options[O_OVERLAP_IDLE])
            values[3, n_kept] = latency_multiplier(nbytes, sync_latency, bucket_bytes)
            values[4, n_kept] = overlap_fraction(nbytes, job[J_OVERLAP], bucket_overlap, bucket_bytes)
            columns[n_kept] = p
            n_kept += 1
        for ni in range(n_counts):
            n = n_gpu[j, ni]
            floor = min(n, k) * samples_per_step / job[J_INPUT_RATE]
            for c in range(n_kept):
                low[c] = np.inf
                at[c] = -1
            for a in range(n_arch):
                if n_kept == 0 or configuration_reason(arch[a], n, k, True, LINK_NETWORK) != REASON_VALID:
                    continue
                is_ps = arch[a] == ARCH_PS_WORKER
                unit = wire_fraction(job, n, arch[a], ps_fraction, options)
                update = (
                    ps_update_fixed_seconds(
                        n,
                        k,
                        job[J_PS_COUNT],
                        options[O_PS_LOCAL_REDUCE],
                        options[O_PS_NIC_PER_WORKER],
                        ps_update_bytes,
                        options[O_PS_HOST_BW],
                    )
                    if is_ps
                    else 0.0
                )
                for i in range(n_intra):
                    if intra_fits[g, i] == 0:
                        continue
                    bw = intra[i, L_BW] * intra_fraction(intra[i, L_KIND], n, k, job[J_PCIE_ROOTS], topology)
                    for w in range(1 if ignores_network(arch[a]) else n_net):
                        if configuration_reason(arch[a], n, k, True, network[w, L_KIND]) != REASON_VALID:
                            continue
                        per_byte, latency = exchange_terms(
                            arch[a],
                            n,
                            k,
                            job,
                            gpus[g, G_PCIE_BW],
                            bw,
                            intra[i, L_LATENCY],
                            network[w, L_BW],
                            network[w, L_LATENCY],
                            unit,
                            collective,
                            options,
                        )
                        for c in range(n_kept):
                            tc = exposed_comm_seconds(
                                values[1, c] * per_byte + values[3, c] * latency + update, values[4, c], values[2, c]
                            )
                            step = values[0, c] + tc
                            rounded = np.float32(floor if floor > step else step)
                            if rounded < low[c]:
                                low[c] = rounded
                                at[c] = (a * n_intra + i) * n_net + w
                    if ignores_intra(arch[a]):
                        break  # the other links give the same numbers: the first one is the best
            for p in range(n_prec):
                best_step[j, g, ni, p] = np.nan
                best_index[j, g, ni, p] = -1
            for c in range(n_kept):
                if at[c] >= 0:
                    best_step[j, g, ni, columns[c]] = low[c]
                    best_index[j, g, ni, columns[c]] = at[c]


def run_fused(grid, jobs, n_gpu, terms):
    """``fused_argmin`` over ``grid``'s tables for the job table ``jobs`` and GPU counts
    ``n_gpu``, with the per-(job, gpu, precision) ``terms`` (t_data, t_flop, t_mem, fits_memory)
    from ``model.compute_terms``; returns (best_step, best_index)."""
    shape = (len(jobs), len(grid.gpu_table), n_gpu.shape[1], len(grid.prec_table))
    best_step, best_index = np.empty(shape), np.empty(shape, np.int32)
    fused_argmin(
        jobs,
        n_gpu,
        grid.arch_codes,
        grid.gpu_table,
        grid.prec_table,
        grid.intra_table,
        grid.intra_fits,
        grid.network_table,
        grid.options,
        *terms,
        best_step,
        best_index,
    )
    return best_step, best_index
