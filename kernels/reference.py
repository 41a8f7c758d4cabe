"""Plain numpy references of the kernels in ``model``, written from the model's formulas.

They broadcast the per-dimension tables over the full grid (J, A, G, N, I, W, P) and so
materialise it: clear, slow and memory-hungry, which is what a reference should be.  They share
no code with the kernels: the communication time is the full expression t_comm = f(S,
bandwidths, latencies) of each architecture (README's table), not the kernel's per-byte and
latency split, and validity is the list of rules of ``layout.INVALID_REASONS`` applied to the
grid.  The tests check that the kernels agree with them (NaN positions and reason codes
included) and ``bench/`` uses them as the baseline.
"""

import numpy as np

from .dp_columns import (
    ARCH_1W1G,
    ARCH_1WNG,
    ARCH_ALLREDUCE_CLUSTER,
    ARCH_ALLREDUCE_LOCAL,
    ARCH_PS_WORKER,
    BOTTLENECK_COMM,
    BOTTLENECK_FLOP,
    BOTTLENECK_INPUT,
    BOTTLENECK_MEM,
    CLASS_ELEMENTWISE,
    CLASS_EMBEDDING,
    CLASS_NAMES,
    COLLECTIVE_PIPELINED,
    COLLECTIVE_RING,
    COLLECTIVE_TREE,
    FLAG_FILL,
    G_CLASS_MEM_BW,
    G_LAUNCH_EAGER,
    G_LAUNCH_GRAPHS,
    G_MEM_BW,
    G_MEMORY,
    G_PCIE_BW,
    G_POWER,
    G_PRICE,
    J_ACCUM,
    J_ACTIVATION,
    J_ACTIVATION_V2,
    J_AMP_CASTS,
    J_AMP_FP32_BYTES,
    J_BATCH,
    J_CLASS_BYTES,
    J_CLASS_FLOP,
    J_EMB_PARAMS,
    J_EMB_TOUCHED,
    J_FLOP,
    J_GPUS_PER_NODE,
    J_GRAPHS,
    J_INPUT,
    J_INPUT_RATE,
    J_LAUNCHES,
    J_MEMBOUND,
    J_NCHW_BYTES,
    J_NICS_PER_NODE,
    J_OPT_STATE,
    J_OVERLAP,
    J_PARAMS,
    J_PCIE_ROOTS,
    J_PS_COUNT,
    J_UPDATE_BYTES,
    L_BW,
    L_HOP_LATENCY,
    L_IN_NETWORK,
    L_KIND,
    L_LATENCY,
    L_OVERSUB1,
    L_OVERSUB2,
    L_TIER1,
    L_TIER2,
    LINK_NONE,
    LINK_NVLINK_HCM,
    LINK_PCIE,
    MODEL_PAI_V2,
    O_BUCKET_BYTES,
    O_BUCKET_OVERLAP,
    O_COLLECTIVE,
    O_COORDINATION,
    O_COORDINATION_GROWTH,
    O_INTER_VOLUME,
    O_MODEL,
    O_OVERLAP_IDLE,
    O_PS_COLOCATED,
    O_PS_HOST_BW,
    O_PS_LATENCY,
    O_PS_LOCAL_REDUCE,
    O_PS_MEMORY,
    O_PS_NIC_PER_WORKER,
    O_PS_SPARSE,
    O_SPARSE_ALLGATHER,
    O_SYNC_LATENCY,
    O_TOPOLOGY,
    O_WORKSPACE,
    P_ACT_RATIO,
    P_COMM_BYTES,
    P_GRAD_BYTES,
    P_TENSOR_CONV,
    P_WEIGHT_BYTES,
    REASON_CLUSTER_ARCH_NEEDS_NETWORK,
    REASON_INTRA_LINK_NOT_ON_GPU,
    REASON_LOCAL_ARCH_EXCEEDS_SERVER,
    REASON_MISSING_INPUT,
    REASON_PRECISION_NOT_ON_GPU,
    REASON_SINGLE_GPU_ARCH,
    REASON_VALID,
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


def comm_seconds(
    arch,
    n,
    k,
    nics,
    pcie_roots,
    ps_count,
    nbytes,
    pcie_bw,
    intra_bw,
    intra_lat,
    net_bw,
    net_lat,
    collective,
    ring_volume=False,
    in_network=False,
):
    """t_comm [s] of one optimizer step before overlap, the README's table written out per
    architecture (every argument but ``collective`` broadcasts).

    S = ``nbytes`` gradient bytes, n GPUs, k per server, s = ceil(n/k) servers, m = ``nics``,
    r = ``pcie_roots``, B bandwidths [bytes/s], alpha latencies [s], and H(x) the latency hops
    of an all-reduce among x peers: 2 (x-1) for a ring, 2 ceil(log2 x) for the tree collective.

    * 1w1g: 0
    * 1wng: 2 S n / (min(r, n) B_pcie)
    * allreduce-local: 2 (n-1)/n S / B_intra + H(n) alpha_intra
    * ps-worker, p = ``ps_count`` (s when 0):
      max(2 S min(n, k) / (m B_net), 2 S n / (p B_net)) + 2 S / B_pcie
    * allreduce-cluster, default and hierarchical collectives, k' = min(n, k):
      2 (k'-1)/k' S / B_intra + H(k') alpha_intra + 2 (s-1)/s S / (m B_net) + 2 (s-1) alpha_net,
      the last two terms only across servers (s > 1)
    * allreduce-cluster, pipelined collective (NCCL overlaps the phases chunk by chunk): the
      slower phase's volume time instead of the sum, the same latency terms,
      max(2 (k'-1)/k' S / B_intra, 2 (s-1)/s S / (m B_net)) + H(k') alpha_intra + 2 (s-1) alpha_net
      across servers (s > 1); on one server as the default
    * ``ring_volume`` (option ``inter_volume = "ring"``): in the default, hierarchical and pipelined
      collectives the inter-server volume 2 (s-1)/s S becomes 2 (n-1)/n S (NCCL's rings cross every
      server)
    * ``in_network`` (a fabric whose switches reduce, SHARP): in the default, hierarchical and
      pipelined collectives the inter-server phase is S / (m B_net) + 2 alpha_net (every NIC sends
      and receives S once, up and down the switch tree) instead of 2 share S / (m B_net) +
      2 (s-1) alpha_net
    * allreduce-cluster, ring and tree: on one server as allreduce-local; across servers one
      flat all-reduce over n GPUs on the slowest hop:
      2 (n-1)/n S / min(B_intra, m B_net) + H(n) max(alpha_intra, alpha_net)
    """
    tree = collective == COLLECTIVE_TREE
    S = nbytes
    s = np.ceil(n / k)
    kk = np.minimum(n, k)
    with np.errstate(divide="ignore", invalid="ignore"):
        hops_n = 2.0 * np.ceil(np.log2(n)) if tree else 2.0 * (n - 1.0)
        hops_kk = 2.0 * (kk - 1.0)  # the default, hierarchical and pipelined collectives ring inside a server
        one_wng = 2.0 * S * n / (np.minimum(pcie_roots, n) * pcie_bw)
        local = 2.0 * (n - 1.0) / n * S / intra_bw + hops_n * intra_lat
        p = np.where(ps_count > 0.0, ps_count, s)
        ps_worker = np.maximum(2.0 * S * kk / (nics * net_bw), 2.0 * S * n / (p * net_bw)) + 2.0 * S / pcie_bw
        if collective == COLLECTIVE_RING or tree:
            flat = 2.0 * (n - 1.0) / n * S / np.minimum(intra_bw, nics * net_bw) + hops_n * np.maximum(
                intra_lat, net_lat
            )
            cluster = np.where(s > 1.0, flat, local)
        else:
            inside = 2.0 * (kk - 1.0) / kk * S / intra_bw + hops_kk * intra_lat
            share = (n - 1.0) / n if ring_volume else (s - 1.0) / s  # of S through a server's NICs, each way
            inter_volume = np.where(in_network, S / (nics * net_bw), 2.0 * share * S / (nics * net_bw))
            inter_hops = np.where(in_network, 2.0 * net_lat, 2.0 * (s - 1.0) * net_lat)
            across = inter_volume + inter_hops
            cluster = np.where(s > 1.0, inside + across, inside)
            if collective == COLLECTIVE_PIPELINED:
                intra_volume = 2.0 * (kk - 1.0) / kk * S / intra_bw
                overlapped = np.maximum(intra_volume, inter_volume) + hops_kk * intra_lat + inter_hops
                cluster = np.where(s > 1.0, overlapped, inside)
    return np.select(
        [arch == ARCH_1W1G, arch == ARCH_1WNG, arch == ARCH_ALLREDUCE_LOCAL, arch == ARCH_PS_WORKER],
        [np.zeros(np.shape(S)), one_wng, local, ps_worker],
        cluster,
    )


def allgather_fraction(params, emb, touched_per_micro_batch, accum, n, all_reduce):
    """Bytes per byte of S an all-reduce architecture's exchange costs when it all-gathers the
    touched embedding rows: P - E dense parameters all-reduced and, every GPU contributing its
    t = min(E, accum x touched) rows, an all-gather that moves (n - 1) t per GPU, as an
    all-reduce of n t / 2 would: (P - E + n t / 2) / P; 1 without embeddings, on one GPU and for
    the other architectures."""
    t = np.minimum(emb, accum * touched_per_micro_batch)
    with np.errstate(divide="ignore", invalid="ignore"):
        fraction = (params - emb + 0.5 * n * t) / params
    return np.where(all_reduce & (emb > 0.0) & (n > 1.0), fraction, 1.0)


def coordination(n, all_reduce, seconds, growth):
    """Coordination time [s] of one all-reduce among n GPUs: ``seconds`` per participant step,
    ceil(log2 n) steps (``growth`` 0) or n - 1 (``growth`` 1); 0 on one GPU, for the other
    architectures and with ``seconds`` 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        steps = n - 1.0 if growth == 1.0 else np.ceil(np.log2(np.maximum(n, 1.0)))
    return np.where(all_reduce & (n > 1.0), seconds * steps, 0.0)


def ps_held_params(params, emb, touched_per_micro_batch, accum, sparse):
    """Parameters a ps-worker step moves and its GPU holds: all, or with sparse traffic the dense
    ones plus the touched embedding rows, params - E + min(E, accum x touched) (E > 0)."""
    if not sparse:
        return params + 0.0 * emb
    return np.where(emb > 0.0, params - emb + np.minimum(emb, accum * touched_per_micro_batch), params)


def ps_worker_seconds(
    n,
    k,
    nics,
    ps_count,
    S_ps,
    held_params,
    opt_state,
    pcie_bw,
    intra_bw,
    intra_lat,
    net_bw,
    net_lat,
    collective,
    options,
):
    """t_comm [s] of a ps-worker step with the parameter-server options of ``options`` (docs/model.md,
    "Parameter server"), the whole expression (broadcasting):

    W = s = ceil(n/k) pushing workers with local reduce, else n; p = ``ps_count``, else W with a
    NIC per worker, else s; k' = min(n, k); S_ps the bytes a worker pushes.

      network = worker (+ if co-located, else max) server,  server = 2 S_ps W / (p B_net),
      worker  = 2 S_ps / B_net (NIC per worker) | 2 S_ps / (m B_net) (local reduce) | 2 S_ps k' / (m B_net)
      t = network + 2 S_ps / B_pcie
          + [local reduce]  2 (k'-1)/k' S_ps / B_intra + H(k') alpha_intra      (k' > 1)
          + [latency]       2 max(p, W) alpha_net
          + [host update]   (W S_ps + held_params (8 + 2 x state bytes)) / (p B_host)
    """
    local = options[O_PS_LOCAL_REDUCE] == 1.0
    per_worker = options[O_PS_NIC_PER_WORKER] == 1.0
    s = np.ceil(n / k)
    kk = np.minimum(n, k)
    W = s if local else n
    p = np.where(ps_count > 0.0, ps_count, W if per_worker else s)
    with np.errstate(divide="ignore", invalid="ignore"):
        if per_worker:
            worker = 2.0 * S_ps / net_bw
        elif local:
            worker = 2.0 * S_ps / (nics * net_bw)
        else:
            worker = 2.0 * S_ps * kk / (nics * net_bw)
        server = 2.0 * S_ps * W / (p * net_bw)
        t = (worker + server if options[O_PS_COLOCATED] == 1.0 else np.maximum(worker, server)) + 2.0 * S_ps / pcie_bw
        if local:
            hops = 2.0 * np.ceil(np.log2(kk)) if collective == COLLECTIVE_TREE else 2.0 * (kk - 1.0)
            t = t + np.where(kk > 1.0, 2.0 * (kk - 1.0) / kk * S_ps / intra_bw + hops * intra_lat, 0.0)
        if options[O_PS_LATENCY] == 1.0:
            t = t + 2.0 * np.maximum(p, W) * net_lat
        host = options[O_PS_HOST_BW]
        if host > 0.0:
            t = t + (W * S_ps + held_params * (8.0 + 2.0 * opt_state)) / (p * host)
    return t


def configuration_reason(arch, n, k, intra_fits, network_kind):
    """Reason codes of rules 1-4 of ``layout.INVALID_REASONS`` (the first that applies; 0 when
    none does), broadcasting: 1w1g runs exactly one GPU, 1wng and allreduce-local keep their n
    GPUs in one server of k, ps-worker and allreduce-cluster need a network (not LINK_NONE), and
    the intra link must connect the GPU (``intra_fits``)."""
    local = (arch == ARCH_1WNG) | (arch == ARCH_ALLREDUCE_LOCAL)
    cluster = (arch != ARCH_1W1G) & ~local
    return np.select(
        [(arch == ARCH_1W1G) & (n != 1.0), local & ~(n <= k), cluster & (network_kind == LINK_NONE), ~intra_fits],
        [
            REASON_SINGLE_GPU_ARCH,
            REASON_LOCAL_ARCH_EXCEEDS_SERVER,
            REASON_CLUSTER_ARCH_NEEDS_NETWORK,
            REASON_INTRA_LINK_NOT_ON_GPU,
        ],
        REASON_VALID,
    )


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


def class_terms(jobs, gpus, peak, class_peak, prec, workspace):
    """Numpy version of ``model.class_terms`` (compute model pai-v2) for all jobs and GPUs.

    Over (J, G, P, C): roofline time of each operator class, max(F / R, a B / bw) with F the
    class FLOPs, R its achievable FLOP/s, B its FP32 bytes, a the precision's activation ratio
    and bw the achievable HBM bandwidth; element-wise/norm and embedding are bytes only (the
    element-wise and embedding bytes ``J_AMP_FP32_BYTES`` that stay FP32 under mixed precision add
    B32 (1 - a) / bw).  Each
    class adds to ``t_flop`` when F / R is the larger, else to ``t_mem``; ``t_mem`` adds
    launches x per-launch seconds (eager or graphs) and, once per step, the optimizer update
    params x (update + gradient + weight - 4 bytes) / bw; at a precision whose convolutions
    run on tensor cores (``P_TENSOR_CONV``: the half precisions and TF32) the NCHW layout
    transposes ``J_NCHW_BYTES`` x a / bw, and at a half precision (a < 1) the mixed-precision
    activation casts ``J_AMP_CASTS`` x per-launch seconds add to it per micro-batch.  Returns
    ``t_data, t_flop, t_mem, fits`` over (J, G, P).
    """
    n_classes = len(CLASS_NAMES)
    flops = jobs[:, J_CLASS_FLOP : J_CLASS_FLOP + n_classes][:, None, None, :]
    nbytes = jobs[:, J_CLASS_BYTES : J_CLASS_BYTES + n_classes][:, None, None, :]
    ratio = prec[:, P_ACT_RATIO][None, None, :, None]
    bw = gpus[:, G_CLASS_MEM_BW][None, :, None, None]
    t_bytes = nbytes * ratio / bw
    with np.errstate(divide="ignore", invalid="ignore"):
        t_compute = np.where(flops == 0.0, 0.0, flops / class_peak[None, :, :, :])
    memory_only = np.isin(np.arange(n_classes), [CLASS_ELEMENTWISE, CLASS_EMBEDDING])[None, None, None, :]
    compute_wins = ~memory_only & ((t_compute >= t_bytes) | np.isnan(t_compute))
    accum = jobs[:, J_ACCUM][:, None, None]
    launch = np.where(
        jobs[:, J_GRAPHS][:, None] == 1.0, gpus[:, G_LAUNCH_GRAPHS][None, :], gpus[:, G_LAUNCH_EAGER][None, :]
    )[:, :, None]
    update_bytes = jobs[:, J_PARAMS][:, None, None] * (
        jobs[:, J_UPDATE_BYTES][:, None, None] + prec[:, P_GRAD_BYTES] + prec[:, P_WEIGHT_BYTES] - 4.0
    )
    t_flop = accum * np.where(compute_wins, t_compute, 0.0).sum(axis=3)
    t_fp32 = jobs[:, J_AMP_FP32_BYTES][:, None, None] * (1.0 - ratio[..., 0]) / bw[..., 0]
    tensor = (prec[:, P_TENSOR_CONV] == 1.0)[None, None, :]
    t_nchw = np.where(tensor, jobs[:, J_NCHW_BYTES][:, None, None] * ratio[..., 0] / bw[..., 0], 0.0)
    t_casts = np.where(ratio[..., 0] < 1.0, jobs[:, J_AMP_CASTS][:, None, None] * launch, 0.0)
    t_mem = (
        accum
        * (
            np.where(compute_wins, 0.0, t_bytes).sum(axis=3)
            + jobs[:, J_LAUNCHES][:, None, None] * launch
            + t_fp32
            + t_nchw
            + t_casts
        )
        + update_bytes / bw[..., 0]
    )
    t_data = accum * jobs[:, J_INPUT][:, None, None] / gpus[:, G_PCIE_BW][None, :, None] + 0.0 * ratio[..., 0]
    state = jobs[:, J_PARAMS][:, None, None] * (
        prec[:, P_WEIGHT_BYTES] + prec[:, P_GRAD_BYTES] + jobs[:, J_OPT_STATE][:, None, None]
    )
    needed = state + jobs[:, J_ACTIVATION_V2][:, None, None] * ratio[..., 0] + workspace
    fits = np.where(needed <= gpus[:, G_MEMORY][None, :, None], 1, 0).astype(np.uint8)
    supported = ~np.isnan(peak)[None, :, :]
    t_data, t_flop, t_mem = (np.where(supported, t, np.nan) for t in (t_data, t_flop, t_mem))
    return t_data, t_flop, t_mem, np.where(supported, fits, FLAG_FILL).astype(np.uint8)


def compute_terms(jobs, gpus, peak, class_peak, prec, options, t_data, t_flop, t_mem, fits_memory):
    """Numpy version of ``model.compute_terms``: same arguments, outputs filled in place."""
    if options[O_MODEL] == MODEL_PAI_V2:
        terms = class_terms(jobs, gpus, peak, class_peak, prec, options[O_WORKSPACE])
    else:
        terms = job_gpu_terms(jobs, gpus, peak, prec, options[O_WORKSPACE])
    t_data[...], t_flop[...], t_mem[...], fits_memory[...] = terms


def evaluate_block(
    jobs,
    n_gpu,
    arch,
    gpus,
    peak,
    prec,
    intra,
    intra_fits,
    network,
    options,
    write_cube,
    step_time,
    t_comm,
    bottleneck,
    invalid_reason,
    t_data,
    t_flop,
    t_mem,
    fits_memory,
    best_step,
    best_index,
    best_bottleneck,
):
    """Numpy version of ``model.evaluate_block``: same arguments, same outputs (filled in place;
    ``t_data``, ``t_flop``, ``t_mem`` and ``fits_memory`` are inputs, from ``compute_terms``)."""
    n_jobs, n_arch, n_gpus = jobs.shape[0], arch.shape[0], gpus.shape[0]
    n_intra, n_net, n_prec = intra.shape[0], network.shape[0], prec.shape[0]
    collective, topology = options[O_COLLECTIVE], options[O_TOPOLOGY]
    shape = (n_jobs, n_arch, n_gpus, n_gpu.shape[1], n_intra, n_net, n_prec)

    # the per-(job, gpu, precision) terms, filled beforehand by ``compute_terms``
    td, tf, tm, fits = (np.array(a) for a in (t_data, t_flop, t_mem, fits_memory))

    def job_col(field):
        return _axis(jobs[:, field], 0)

    a = _axis(arch, 1)
    n = n_gpu.reshape(n_jobs, 1, 1, -1, 1, 1, 1).astype(np.float64)
    k = job_col(J_GPUS_PER_NODE)
    kind = _axis(intra[:, L_KIND], 4)
    intra_bw = _axis(intra[:, L_BW], 4) * intra_fraction(kind, n, k, job_col(J_PCIE_ROOTS), topology)
    S = job_col(J_PARAMS) * _axis(prec[:, P_COMM_BYTES], 6)  # gradient bytes on the wire
    # communication v2: b = max(1, ceil(S / bucket)) gradient buckets, each an all-reduce of its
    # own; every latency term is linear in a per-hop latency, so paying the hops once per bucket
    # is the version-1 formula with every alpha multiplied by b
    with np.errstate(divide="ignore", invalid="ignore"):
        buckets = np.maximum(np.ceil(S / options[O_BUCKET_BYTES]), 1.0)
    per_hop = buckets if options[O_SYNC_LATENCY] == 1.0 else 1.0
    all_reduce = (a == ARCH_ALLREDUCE_LOCAL) | (a == ARCH_ALLREDUCE_CLUSTER)
    # the network as a job of n GPUs sees it: a fabric's tier-1 and tier-2 uplinks (option
    # fabric_tiers) divide the bandwidth by their oversubscription and add two switch hops each
    # once the job outgrows a tier's group; a plain link has no tiers (inf) and stays as it is
    tier2 = n > _axis(network[:, L_TIER2], 5)
    tier1 = (n > _axis(network[:, L_TIER1], 5)) & ~tier2
    over1, over2 = _axis(network[:, L_OVERSUB1], 5), _axis(network[:, L_OVERSUB2], 5)
    hop = _axis(network[:, L_HOP_LATENCY], 5)
    net_bw = _axis(network[:, L_BW], 5)
    net_bw = np.where(tier2, net_bw / (over1 * over2), np.where(tier1, net_bw / over1, net_bw))
    net_lat = _axis(network[:, L_LATENCY], 5)
    net_lat = np.where(tier2, net_lat + 4.0 * hop, np.where(tier1, net_lat + 2.0 * hop, net_lat))
    in_network = _axis(network[:, L_IN_NETWORK], 5) != 0.0
    # sparse all-gather: the all-reduce architectures all-gather the touched embedding rows
    if options[O_SPARSE_ALLGATHER] == 1.0:
        S_wire = S * allgather_fraction(
            job_col(J_PARAMS), job_col(J_EMB_PARAMS), job_col(J_EMB_TOUCHED), job_col(J_ACCUM), n, all_reduce
        )
    else:
        S_wire = S
    raw = comm_seconds(
        a,
        n,
        k,
        job_col(J_NICS_PER_NODE),
        job_col(J_PCIE_ROOTS),
        job_col(J_PS_COUNT),
        S_wire,
        _axis(gpus[:, G_PCIE_BW], 2),
        intra_bw,
        _axis(intra[:, L_LATENCY], 4) * per_hop,
        net_bw,
        net_lat * per_hop,
        collective,
        options[O_INTER_VOLUME] == 1.0,
        in_network,
    )
    # coordination: per all-reduce (per bucket with sync_latency), per participant step
    raw = raw + per_hop * coordination(n, all_reduce, options[O_COORDINATION], options[O_COORDINATION_GROWTH])
    # the parameter server with its options (all off: the version-1 row of comm_seconds, the same
    # formula written again)
    sparse = options[O_PS_SPARSE] == 1.0
    held = ps_held_params(job_col(J_PARAMS), job_col(J_EMB_PARAMS), job_col(J_EMB_TOUCHED), job_col(J_ACCUM), sparse)
    S_ps = held * _axis(prec[:, P_COMM_BYTES], 6)
    ps_raw = ps_worker_seconds(
        n,
        k,
        job_col(J_NICS_PER_NODE),
        job_col(J_PS_COUNT),
        S_ps,
        held,
        job_col(J_OPT_STATE),
        _axis(gpus[:, G_PCIE_BW], 2),
        intra_bw,
        _axis(intra[:, L_LATENCY], 4) * per_hop,
        net_bw,
        net_lat * per_hop,
        collective,
        options,
    )
    raw = np.where(a == ARCH_PS_WORKER, ps_raw, raw)

    grid_td = td[:, None, :, None, None, None, :]
    grid_tf = tf[:, None, :, None, None, None, :]
    grid_tm = tm[:, None, :, None, None, None, :]
    # the part of the last backward pass during which the exchange proceeds (1 - overlap_efficiency idle)
    backward = (1.0 - options[O_OVERLAP_IDLE]) * (2.0 / 3.0 * (grid_tf + grid_tm) / job_col(J_ACCUM))
    overlap = job_col(J_OVERLAP)
    if options[O_BUCKET_OVERLAP] == 1.0:  # all buckets but the last may hide behind the backward pass
        overlap = 1.0 - 1.0 / buckets
    with np.errstate(invalid="ignore"):
        tc = np.where(overlap <= 0.0, raw, raw - np.minimum(overlap * raw, backward))
        step = grid_td + grid_tf + grid_tm + tc
        samples_per_step = job_col(J_BATCH) * job_col(J_ACCUM)
        floor = np.minimum(n, k) * samples_per_step / job_col(J_INPUT_RATE)
        input_bound = floor > step
        step = np.where(input_bound, floor, step)
        # throughput, cost and energy (not outputs): a NaN one makes the configuration invalid
        outputs = {
            "throughput": n * samples_per_step / step,
            "cost": _axis(gpus[:, G_PRICE], 2) / 3600.0 * 1e6 / samples_per_step * step,
            "energy": _axis(gpus[:, G_POWER], 2) / samples_per_step * step,
        }

    # validity: the rules in code order, the first that applies
    fits_intra = intra_fits.reshape(1, 1, n_gpus, 1, n_intra, 1, 1) != 0
    reason = configuration_reason(a, n, k, fits_intra, _axis(network[:, L_KIND], 5))
    reason = np.where(
        (reason == REASON_VALID) & np.isnan(peak)[None, None, :, None, None, None, :],
        REASON_PRECISION_NOT_ON_GPU,
        reason,
    )
    missing = np.isnan(step) | np.isnan(S)  # S counts for every architecture, 1w1g included
    for value in outputs.values():
        missing = missing | np.isnan(value)
    reason = np.broadcast_to(np.where((reason == REASON_VALID) & missing, REASON_MISSING_INPUT, reason), shape)
    ok = reason == REASON_VALID
    step32 = np.where(ok, step, np.nan).astype(np.float32)

    # per (j, g, n, p): first minimum over (arch, intra, network) among feasible configurations
    fits_grid = np.broadcast_to(fits[:, None, :, None, None, None, :], shape)
    if options[O_PS_MEMORY] == 1.0:  # a PS GPU holds weights and gradients only (state on the PS hosts)
        activation = jobs[:, J_ACTIVATION_V2] if options[O_MODEL] == MODEL_PAI_V2 else jobs[:, J_ACTIVATION]
        held_jp = ps_held_params(
            jobs[:, J_PARAMS], jobs[:, J_EMB_PARAMS], jobs[:, J_EMB_TOUCHED], jobs[:, J_ACCUM], sparse
        )[:, None, None]
        need = (
            held_jp * (prec[:, P_WEIGHT_BYTES] + prec[:, P_GRAD_BYTES])
            + activation[:, None, None] * prec[:, P_ACT_RATIO]
            + options[O_WORKSPACE]
        )
        ps_fits = np.where(fits == FLAG_FILL, FLAG_FILL, (need <= gpus[:, G_MEMORY][None, :, None]).astype(np.uint8))
        fits_grid = np.where(a == ARCH_PS_WORKER, ps_fits[:, None, :, None, None, None, :], fits_grid)
    feasible = ok & (fits_grid == 1)
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

    step_time[...] = step32
    t_comm[...] = np.where(ok, tc, np.nan)
    bottleneck[...] = np.where(ok, code, FLAG_FILL)
    invalid_reason[...] = reason.astype(np.uint8)


def step_factors(jobs, n_gpu, gpus):
    """Loop version of ``model.step_factors``: (samples_per_job_step (J, N) [samples],
    cost_per_step_second (J, G) [USD per 1e6 samples per s], energy_per_step_second (J, G)
    [J per sample per s]), one element at a time."""
    n_jobs, n_counts, n_gpus = jobs.shape[0], n_gpu.shape[1], gpus.shape[0]
    samples, cost, energy = np.empty((n_jobs, n_counts)), np.empty((n_jobs, n_gpus)), np.empty((n_jobs, n_gpus))
    with np.errstate(divide="ignore", invalid="ignore"):
        for j in range(n_jobs):
            per_gpu = jobs[j, J_BATCH] * jobs[j, J_ACCUM]
            for ni in range(n_counts):
                samples[j, ni] = n_gpu[j, ni] * per_gpu
            for g in range(n_gpus):
                cost[j, g] = gpus[g, G_PRICE] / 3600.0 * 1e6 / per_gpu
                energy[j, g] = gpus[g, G_POWER] / per_gpu
    return samples, cost, energy


def config_derived(jobs, n_gpu, gpu, step_time, throughput, cost, energy):
    """Vectorised version of ``model.config_derived``: the factors of ``step_factors`` over the
    one GPU ``gpu``, divided by or times the float64 step time, rounded to float32."""
    samples, usd, joule = step_factors(jobs, n_gpu[:, :1], gpu[None, :])
    step = step_time.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        throughput[...] = (samples[:, 0] / step).astype(np.float32)
        cost[...] = (usd[:, 0] * step).astype(np.float32)
        energy[...] = (joule[:, 0] * step).astype(np.float32)
