"""Parameter server done properly: the scalar helpers of the ``ps-worker`` exchange (numba).

Every mechanism is a named option, off by default; with all of them off ``ps_seconds`` is the
version-1 formula, operation for operation:

    t = max(2 S k' / (m B_net), 2 S n / (p B_net)) + 2 S / B_pcie,   k' = min(n, k), p = ps_count or s

The options (``layout.O_PS_*``; docs/model.md, "Parameter server"):

* local reduce: the GPUs of a server all-reduce their gradients over the intra link first, so one
  copy per server (s = ceil(n/k) copies in all) crosses the network instead of one per GPU;
* NIC per worker: every pushing worker (and every parameter server) has a NIC share of its own
  instead of the k' workers of a server sharing its m NICs; with ``ps_count`` 0 there are then
  as many parameter servers as pushing workers;
* co-located: the parameter servers run on the worker servers, so a NIC carries the workers'
  and the server's traffic one after the other (sum) instead of on separate hosts (max);
* per-message latency: a worker sends a push and a pull message to each of the p servers and a
  server answers each of the W pushing workers: 2 max(p, W) alpha_net;
* server-side update on the parameter server host's CPU and memory (``host_bw`` bytes/s, 0 off):
  summing the W pushed copies of its shard, W S / (p host_bw), and the optimizer update of its
  parameters, params x (8 + 2 x state bytes) / (p host_bw) (``ps_update_fixed_seconds``);
* sparse traffic: a workload that declares embedding tables moves, to and from the parameter
  servers, only the rows a step touches (``ps_wire_fraction``), while all-reduce moves dense
  gradients;
* memory: a parameter server keeps the optimizer state (and, with sparse traffic, the untouched
  embedding rows) on its hosts, so the GPU holds only weights and gradients
  (``ps_fits_memory_flag``).
"""

import numpy as np

from .dp_columns import (
    COLLECTIVE_TREE,
    G_MEMORY,
    J_ACCUM,
    J_EMB_PARAMS,
    J_EMB_TOUCHED,
    J_PARAMS,
    P_GRAD_BYTES,
    P_WEIGHT_BYTES,
)
from .jit import jit


@jit
def ps_pushers(n, k, local_reduce):
    """Gradient copies that leave for the parameter servers per step: one per server, s =
    ceil(n/k), when the server reduces them first (``local_reduce`` 1), one per GPU otherwise."""
    return np.ceil(n / k) if local_reduce != 0.0 else n


@jit
def ps_server_count(n, k, ps_count, local_reduce, nic_per_worker):
    """Parameter servers p: ``ps_count`` when set (> 0), else one per pushing worker with a NIC
    per worker, else one per worker server, s = ceil(n/k) (version 1)."""
    if ps_count > 0.0:
        return ps_count
    if nic_per_worker != 0.0:
        return ps_pushers(n, k, local_reduce)
    return np.ceil(n / k)


@jit
def ps_ring_seconds(nbytes, n, bandwidth, latency, collective):
    """The all-reduce of ``nbytes`` among the n GPUs of one server before the push (ring or
    tree: 2(n-1)/n bytes/bw plus the latency hops); 0 for one GPU."""
    if n <= 1.0:
        return 0.0
    hops = 2.0 * np.ceil(np.log2(n)) if collective == COLLECTIVE_TREE else 2.0 * (n - 1.0)
    return 2.0 * (n - 1.0) / n * nbytes / bandwidth + hops * latency


@jit
def ps_seconds(
    n,
    k,
    nics,
    ps_count,
    nbytes,
    pcie_bw,
    intra_bw,
    intra_lat,
    net_bw,
    net_lat,
    collective,
    local_reduce,
    nic_per_worker,
    colocated,
    latency_on,
    host_bw,
):
    """Exchange time [s] of one ``ps-worker`` step before overlap, every PS option applied.

    ``nbytes``: bytes pushed (and pulled) per worker, S (the touched rows only under sparse
    traffic: the caller scales S); bandwidths [bytes/s], latencies [s]; n GPUs, k per server,
    ``nics`` NICs per server; flags 0/1: ``local_reduce``, ``nic_per_worker``, ``colocated``,
    ``latency_on``; ``host_bw`` the parameter server host's achievable memory bandwidth
    [bytes/s] (0: no update time).  The W-copy summation part of the update is here (linear in
    S); the optimizer update itself is ``ps_update_fixed_seconds``.
    """
    per_server = min(n, k)
    pushers = ps_pushers(n, k, local_reduce)
    ps = ps_server_count(n, k, ps_count, local_reduce, nic_per_worker)
    if nic_per_worker != 0.0:
        worker_side = 2.0 * nbytes / net_bw
    elif local_reduce != 0.0:
        worker_side = 2.0 * nbytes / (nics * net_bw)
    else:
        worker_side = 2.0 * nbytes * per_server / (nics * net_bw)
    server_side = 2.0 * nbytes * pushers / (ps * net_bw)
    network = worker_side + server_side if colocated != 0.0 else max(worker_side, server_side)
    t = network + 2.0 * nbytes / pcie_bw
    if local_reduce != 0.0:
        t += ps_ring_seconds(nbytes, per_server, intra_bw, intra_lat, collective)
    if latency_on != 0.0:
        t += 2.0 * max(ps, pushers) * net_lat
    if host_bw > 0.0:
        t += pushers * nbytes / (ps * host_bw)
    return t


@jit
def ps_update_fixed_seconds(n, k, ps_count, local_reduce, nic_per_worker, update_bytes, host_bw):
    """Optimizer-update time [s] on the parameter server hosts: ``update_bytes`` (params x (8 +
    2 x optimizer state bytes): the FP32 weight and every state slot read and written) spread
    over p servers, each with ``host_bw`` bytes/s; 0 when ``host_bw`` is 0 (option off)."""
    if host_bw <= 0.0:
        return 0.0
    return update_bytes / (ps_server_count(n, k, ps_count, local_reduce, nic_per_worker) * host_bw)


@jit
def ps_dense_params(job, sparse_on):
    """Parameters a ``ps-worker`` step moves and the GPU holds: all of them, or with sparse
    traffic (``sparse_on``) the dense ones plus the embedding rows one optimizer step touches,
    params - E + min(E, accum x touched per micro-batch)."""
    emb = job[J_EMB_PARAMS]
    if sparse_on == 0.0 or not emb > 0.0:
        return job[J_PARAMS]
    touched = job[J_ACCUM] * job[J_EMB_TOUCHED]
    return job[J_PARAMS] - emb + (touched if touched < emb else emb)


@jit
def ps_wire_fraction(job, sparse_on):
    """Fraction of the dense gradient bytes S that a ``ps-worker`` step moves (1 without sparse
    traffic)."""
    if sparse_on == 0.0:
        return 1.0
    return ps_dense_params(job, sparse_on) / job[J_PARAMS]


@jit
def ps_fits_memory_flag(job, gpu, prec_row, activation_bytes, workspace, sparse_on):
    """1 when a ``ps-worker`` GPU fits: weights and gradients of the parameters it holds
    (``ps_dense_params``; no optimizer state, which stays on the parameter servers), the kept
    ``activation_bytes`` and ``workspace`` [bytes], against the GPU's memory; else 0."""
    held = ps_dense_params(job, sparse_on) * (prec_row[P_WEIGHT_BYTES] + prec_row[P_GRAD_BYTES])
    return 1 if held + activation_bytes + workspace <= gpu[G_MEMORY] else 0
