"""The paigrid performance model as numba kernels over flat tables.

``compute_terms`` fills the per-(job, gpu, precision) terms t_data, t_flop, t_mem and
fits_memory with the compute model chosen in the options (pai-v1: ``job_gpu_terms``; pai-v2:
``class_terms``, the operator-class roofline); ``evaluate_block`` reads them.  ``t_flop`` is
compute-bound time and ``t_mem`` memory-bound time (with, in pai-v2, launch overhead and the
optimizer update), so the bottleneck flags mean the same under both models.

``evaluate_block`` evaluates every configuration of a block of jobs (the Cartesian product
job x arch x gpu x n_gpu x intra x network x precision) and folds it into the per-job
reductions at the same time; with ``write_cube=False`` it only folds (reduce-only sweeps).  It
computes only the valid (arch, n_gpu), (gpu, intra) and (gpu, precision) combinations, and an
architecture once along the dimensions it ignores (``ignores_intra``, ``ignores_network``); the
rest of the cube is written as invalid cells or copies, the same values a full evaluation gives.
The scalar helpers are small ``@jit`` functions that LLVM inlines into the loop.  The block
kernel reads in three parts: one configuration step (``configuration_step``, from the terms of
``precision_terms``, ``exchange_terms``, ``update_seconds`` and ``input_floor_seconds``; its
validity from ``configuration_reason`` and ``precision_reason``), shared by the CPU traversal,
the fold and the CUDA kernel (``kernels.cuda``); the traversal with its pruning
(``_evaluate_block``, ``select_precisions``, and ``fold_pair`` for a (job, gpu) in reduce-only);
and the fold into the bests (``fold_pair``'s per-column bests in reduce-only, ``fold_row`` when
the cube is written).  Time, cost and energy per sample are
``time_per_sample``, ``cost_per_sample`` and ``energy_per_sample``.

All times are seconds per optimizer step of one data-parallel replica.  With the default
options and one micro-batch per step this is exactly version 1 of the model:

    step_time = t_data + t_flop + t_mem + t_comm

Options (each off by default): gradient accumulation (``J_ACCUM`` micro-batches per exchange),
overlap (``J_OVERLAP``: a fraction of the exchange hides behind the last backward pass), the
collective algorithm, topology-aware intra-server bandwidth, NICs per server, an input
pipeline bound (``J_INPUT_RATE`` samples/s per server, a floor on the step time) and, for
communication v2, gradient buckets of ``O_BUCKET_BYTES``: the latency hops paid once per bucket
(``O_SYNC_LATENCY``, ``latency_multiplier``) and all buckets but the last hidden behind the
backward pass (``O_BUCKET_OVERLAP``, ``overlap_fraction``); the scaling losses of all-reduce:
the part of the backward pass during which the exchange proceeds (``O_OVERLAP_IDLE``,
``overlap_window``), coordination per all-reduce (``O_COORDINATION``, ``coordination_seconds``)
and the sparse all-gather of touched embedding rows (``O_SPARSE_ALLGATHER``,
``allgather_wire_fraction``).

Validity is decided here and nowhere else: the kernel writes, per configuration, the code of the
first rule (``layout.INVALID_REASONS``, in code order) that makes it impossible, 0 when none
does.  Rules 1-4 are the configuration's shape (``configuration_reason``), 5 is a precision the
GPU lacks, and 6 is any other NaN in an output -- a missing input number (the gradient bytes S
count for every architecture, 1w1g included).  An invalid configuration is NaN in every output.

``evaluate_block`` (parallel over (job, gpu) with ``prange``) and ``evaluate_block_serial``
(the same body, serial) are two compilations of one function; the engine's driver picks one by
the number of configurations.
"""

import numpy as np
from numba import prange

from . import metrics
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
    LINK_NETWORK,
    LINK_NONE,
    LINK_NVLINK_HCM,
    LINK_PCIE,
    MODEL_PAI_V2,
    N_CLASSES,
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
from .jit import jit, parallel_jit, serial_twin
from .ps import ps_fits_memory_flag, ps_seconds, ps_update_fixed_seconds, ps_wire_fraction


@jit
def configuration_reason(arch, n, k, intra_fits, network_kind):
    """Reason code (rules 1-4 of ``layout.INVALID_REASONS``, first match) why the architecture
    cannot run n GPUs, k per server, on this intra link (``intra_fits``: it connects the GPU)
    and network (``network_kind``, a LINK_* code); ``REASON_VALID`` (0) when it can."""
    if arch == ARCH_1W1G:
        if n != 1.0:
            return REASON_SINGLE_GPU_ARCH
    elif arch == ARCH_1WNG or arch == ARCH_ALLREDUCE_LOCAL:
        if not n <= k:
            return REASON_LOCAL_ARCH_EXCEEDS_SERVER
    elif network_kind == LINK_NONE:
        return REASON_CLUSTER_ARCH_NEEDS_NETWORK
    if not intra_fits:
        return REASON_INTRA_LINK_NOT_ON_GPU
    return REASON_VALID


@jit
def intra_fraction(kind, n, k, pcie_roots, topology_aware):
    """Fraction of an intra link's bandwidth a collective over n GPUs gets (1 in version 1).

    Topology-aware: NVSwitch gives any subset full bandwidth; a DGX-1 hybrid cube-mesh links a
    pair with 2 of a GPU's 6 NVLinks (1/3), a fully linked quad uses 4 of 6 (2/3), 5-7 GPUs
    cannot close all rings over NVLink (1/2) and 8 GPUs use every link (1); a ring over PCIe
    that spans more than one of the ``pcie_roots`` trees crosses the inter-socket link (1/2).
    """
    if topology_aware == 0.0 or n <= 1.0:
        return 1.0
    if kind == LINK_NVLINK_HCM:
        if n <= 2.0:
            return 1.0 / 3.0
        if n <= 4.0:
            return 2.0 / 3.0
        if n < 8.0:
            return 0.5
        return 1.0
    if kind == LINK_PCIE and n > k / pcie_roots:
        return 0.5
    return 1.0


@jit
def ring_or_tree_seconds(nbytes, n, bandwidth, latency, collective):
    """One-level all-reduce of ``nbytes`` among n peers: 2(n-1)/n bytes/bw plus latency hops."""
    if n <= 1.0:
        return 0.0
    volume = 2.0 * (n - 1.0) / n * nbytes / bandwidth
    if collective == COLLECTIVE_TREE:
        return volume + 2.0 * np.ceil(np.log2(n)) * latency
    return volume + 2.0 * (n - 1.0) * latency


@jit
def comm_seconds(
    arch, n, k, nics, pcie_roots, ps_count, nbytes, pcie_bw, intra_bw, intra_lat, net_bw, net_lat, collective
):
    """Gradient/weight exchange time [s] of one optimizer step, before any overlap.

    nbytes: gradient bytes S; bandwidths in bytes/s (achievable); latencies in s; n GPUs with
    k per server, ``nics`` NICs per server, ``pcie_roots`` PCIe root links per server and
    ``ps_count`` parameter servers (0: one per worker server).
    """
    servers = np.ceil(n / k)
    if arch == ARCH_1W1G:
        return 0.0
    if arch == ARCH_1WNG:
        return 2.0 * nbytes * n / (min(pcie_roots, n) * pcie_bw)
    if arch == ARCH_ALLREDUCE_LOCAL:
        return ring_or_tree_seconds(nbytes, n, intra_bw, intra_lat, collective)
    if arch == ARCH_PS_WORKER:
        ps = ps_count if ps_count > 0.0 else servers
        worker_side = 2.0 * nbytes * min(n, k) / (nics * net_bw)
        server_side = 2.0 * nbytes * n / (ps * net_bw)
        return max(worker_side, server_side) + 2.0 * nbytes / pcie_bw
    # ARCH_ALLREDUCE_CLUSTER
    if collective == COLLECTIVE_RING or collective == COLLECTIVE_TREE:
        if servers <= 1.0:
            return ring_or_tree_seconds(nbytes, n, intra_bw, intra_lat, collective)
        slowest = min(intra_bw, nics * net_bw)
        # the slower hop's latency; a missing (NaN) one stays missing, as max() would drop it
        latency = net_lat if (net_lat > intra_lat or net_lat != net_lat) else intra_lat
        return ring_or_tree_seconds(nbytes, n, slowest, latency, collective)
    return hierarchical_seconds(n, k, nics, nbytes, intra_bw, intra_lat, net_bw, net_lat, collective, servers)


@jit
def hierarchical_seconds(n, k, nics, nbytes, intra_bw, intra_lat, net_bw, net_lat, collective, ring_size):
    """``allreduce-cluster`` with the default (hierarchical) or pipelined collective: a ring
    inside each server, then 2 (r - 1) / r x S through a server's ``nics`` NICs for an
    inter-server ring of r = ``ring_size`` members (s servers, or every GPU), one
    phase after the other (default) or overlapped chunk by chunk (pipelined: the slower phase's
    volume time plus every latency hop); 2 (s - 1) network latency hops for s servers."""
    servers = np.ceil(n / k)
    per_server = min(n, k)
    intra = ring_or_tree_seconds(nbytes, per_server, intra_bw, intra_lat, collective)
    if servers <= 1.0:
        return intra
    inter = 2.0 * (ring_size - 1.0) / ring_size * nbytes / (nics * net_bw)
    if collective == COLLECTIVE_PIPELINED:
        intra_volume = ring_or_tree_seconds(nbytes, per_server, intra_bw, 0.0, collective)
        intra_hops = ring_or_tree_seconds(0.0, per_server, intra_bw, intra_lat, collective)
        slower = inter if (inter > intra_volume or inter != inter) else intra_volume  # NaN stays NaN
        return slower + intra_hops + 2.0 * (servers - 1.0) * net_lat
    return intra + inter + 2.0 * (servers - 1.0) * net_lat


@jit
def ring_volume_cluster_seconds(n, k, nics, nbytes, intra_bw, intra_lat, net_bw, net_lat, collective):
    """``allreduce-cluster`` with the default, hierarchical or pipelined collective when the
    inter-server phase moves 2(n-1)/n S through a server's NICs (NCCL's rings cross every server)
    instead of the hierarchical 2(s-1)/s S (``hierarchical_seconds``)."""
    return hierarchical_seconds(n, k, nics, nbytes, intra_bw, intra_lat, net_bw, net_lat, collective, n)


@jit
def network_terms(link, arch, n, k, collective, inter_volume):
    """(bytes/s per NIC, s per message) of the network row ``link`` for ``n`` GPUs, ``k`` per
    server: a plain link's ``L_BW`` and ``L_LATENCY`` as they are; a fabric's (option
    ``fabric_tiers``) through the switch tiers the job spans: above ``L_TIER2`` GPUs the
    bandwidth over both uplinks' oversubscriptions and four more hops of ``L_HOP_LATENCY``,
    above ``L_TIER1`` over the tier-1 one and two more hops.  With in-network reduction
    (``L_IN_NETWORK``: the switches reduce and multicast) the inter-server phase of a
    hierarchical or pipelined ``allreduce-cluster`` sends and receives S once per NIC instead of
    2 (r-1)/r S (r servers, or n GPUs with ``inter_volume``) and pays 2 latencies instead of
    2 (s-1) for s servers: returned as the bandwidth and latency that give those seconds in
    ``hierarchical_seconds``."""
    bw = link[L_BW]
    lat = link[L_LATENCY]
    if n > link[L_TIER2]:
        bw = bw / (link[L_OVERSUB1] * link[L_OVERSUB2])
        lat = lat + 4.0 * link[L_HOP_LATENCY]
    elif n > link[L_TIER1]:
        bw = bw / link[L_OVERSUB1]
        lat = lat + 2.0 * link[L_HOP_LATENCY]
    servers = np.ceil(n / k)
    if (
        link[L_IN_NETWORK] != 0.0
        and arch == ARCH_ALLREDUCE_CLUSTER
        and servers > 1.0
        and collective != COLLECTIVE_RING
        and collective != COLLECTIVE_TREE
    ):
        ring = n if inter_volume != 0.0 else servers
        bw = bw * (2.0 * (ring - 1.0) / ring)
        lat = lat / (servers - 1.0)
    return bw, lat


@jit
def exchange_seconds(
    arch, n, k, nics, pcie_roots, ps_count, nbytes, pcie_bw, intra_bw, intra_lat, net_bw, net_lat, collective, options
):
    """``comm_seconds`` with the parameter-server options of ``options`` (``layout.O_PS_*``,
    ``kernels.ps``) applied to ``ps-worker`` and the ring inter-server volume
    (``O_INTER_VOLUME``, ``ring_volume_cluster_seconds``) to ``allreduce-cluster``; exactly
    ``comm_seconds`` with them all off."""
    if (
        arch == ARCH_ALLREDUCE_CLUSTER
        and options[O_INTER_VOLUME] != 0.0
        and collective != COLLECTIVE_RING
        and collective != COLLECTIVE_TREE
    ):
        return ring_volume_cluster_seconds(n, k, nics, nbytes, intra_bw, intra_lat, net_bw, net_lat, collective)
    if arch == ARCH_PS_WORKER:
        return ps_seconds(
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
            options[O_PS_LOCAL_REDUCE],
            options[O_PS_NIC_PER_WORKER],
            options[O_PS_COLOCATED],
            options[O_PS_LATENCY],
            options[O_PS_HOST_BW],
        )
    return comm_seconds(
        arch, n, k, nics, pcie_roots, ps_count, nbytes, pcie_bw, intra_bw, intra_lat, net_bw, net_lat, collective
    )


@jit
def coordination_seconds(arch, n, coordination, growth):
    """Synchronisation time [s] of one all-reduce among n GPUs apart from its link latencies
    (Horovod's negotiation of which tensors are ready, NCCL's launch and handshakes):
    ``coordination`` seconds per participant step, ceil(log2 n) steps (``growth`` 0: tree-like)
    or n - 1 (``growth`` 1: linear); 0 for one GPU and for architectures that do not all-reduce
    (0 with ``coordination`` 0, version 1)."""
    if coordination == 0.0 or n <= 1.0 or (arch != ARCH_ALLREDUCE_LOCAL and arch != ARCH_ALLREDUCE_CLUSTER):
        return 0.0
    steps = n - 1.0 if growth != 0.0 else np.ceil(np.log2(n))
    return coordination * steps


@jit
def allgather_wire_fraction(job, n, arch, sparse_allgather):
    """Bytes an all-reduce architecture's exchange costs per byte of the dense gradients S when
    it all-gathers the touched embedding rows (``sparse_allgather``; TensorFlow's IndexedSlices
    under Horovod) and all-reduces the rest: (P - E + n/2 x min(E, accum x touched)) / P for P
    parameters of which E are embedding rows.  An all-gather in which every GPU contributes t
    bytes moves (n - 1) t per GPU, what an all-reduce of n t / 2 bytes moves, hence n/2 (row
    indices not counted).  1 when off, for a job without embeddings and for other architectures."""
    emb = job[J_EMB_PARAMS]
    if (
        sparse_allgather == 0.0
        or not emb > 0.0
        or n <= 1.0
        or (arch != ARCH_ALLREDUCE_LOCAL and arch != ARCH_ALLREDUCE_CLUSTER)
    ):
        return 1.0
    touched = job[J_ACCUM] * job[J_EMB_TOUCHED]
    touched = touched if touched < emb else emb
    return (job[J_PARAMS] - emb + 0.5 * n * touched) / job[J_PARAMS]


@jit
def wire_fraction(job, n, arch, ps_fraction, options):
    """Bytes an architecture's exchange moves per byte of S: ``ps_fraction``
    (``ps.ps_wire_fraction``) for ``ps-worker``, ``allgather_wire_fraction`` for the all-reduce
    architectures, 1 otherwise."""
    if arch == ARCH_PS_WORKER:
        return ps_fraction
    return allgather_wire_fraction(job, n, arch, options[O_SPARSE_ALLGATHER])


@jit
def exchange_terms(arch, n, k, job, pcie_bw, intra_bw, intra_lat, net_bw, net_lat, unit, collective, options):
    """(seconds per byte of S, seconds of latency) of one configuration's exchange: the bytes
    term (``unit`` bytes moved per byte of S, latencies 0) and the latency term (no bytes) of
    ``exchange_seconds``, with the job's NICs, PCIe roots and parameter servers (``job``, a row
    of the job table); the latency term includes ``coordination_seconds``."""
    per_byte = exchange_seconds(
        arch,
        n,
        k,
        job[J_NICS_PER_NODE],
        job[J_PCIE_ROOTS],
        job[J_PS_COUNT],
        unit,
        pcie_bw,
        intra_bw,
        0.0,
        net_bw,
        0.0,
        collective,
        options,
    )
    latency = exchange_seconds(
        arch,
        n,
        k,
        job[J_NICS_PER_NODE],
        job[J_PCIE_ROOTS],
        job[J_PS_COUNT],
        0.0,
        pcie_bw,
        intra_bw,
        intra_lat,
        net_bw,
        net_lat,
        collective,
        options,
    )
    latency += coordination_seconds(arch, n, options[O_COORDINATION], options[O_COORDINATION_GROWTH])
    return per_byte, latency


@jit
def exposed_comm_seconds(raw, overlap, backward):
    """Communication left on the critical path when ``overlap`` of it may hide behind ``backward``
    (exactly ``raw`` for overlap 0, since ``backward`` >= 0)."""
    hidden = overlap * raw
    return raw - (backward if backward < hidden else hidden)


@jit
def overlap_window(t_flop, t_mem, accum, idle):
    """Seconds of the last micro-batch's backward pass (2/3 of its compute, ``t_flop`` +
    ``t_mem`` over ``accum`` micro-batches) during which the exchange proceeds: all of it but
    the fraction ``idle`` (1 - option ``overlap_efficiency``; 0 in version 1), for an exchange
    that competes with the backward pass for the GPU, the PCIe link and the framework's
    communication thread."""
    return (1.0 - idle) * (2.0 / 3.0 * (t_flop + t_mem) / accum)


@jit
def bucket_count(nbytes, bucket_bytes):
    """Gradient buckets of one exchange: ceil(``nbytes`` / ``bucket_bytes``), at least 1 (NaN
    bytes give NaN)."""
    count = np.ceil(nbytes / bucket_bytes)
    return count if count > 1.0 else (count if count != count else 1.0)


@jit
def latency_multiplier(nbytes, sync_latency, bucket_bytes):
    """How many times a step pays its exchange's latency hops: once per gradient bucket with
    ``sync_latency`` (communication v2), once per step otherwise (version 1)."""
    return bucket_count(nbytes, bucket_bytes) if sync_latency != 0.0 else 1.0


@jit
def overlap_fraction(nbytes, job_overlap, bucket_overlap, bucket_bytes):
    """Fraction of the exchange that may hide behind the backward pass: (b - 1) / b for b
    gradient buckets with ``bucket_overlap`` (every bucket but the last is all-reduced while the
    backward pass goes on), the job's ``overlap`` option otherwise (version 1)."""
    if bucket_overlap == 0.0:
        return job_overlap
    count = bucket_count(nbytes, bucket_bytes)
    return (count - 1.0) / count


@jit
def bottleneck_code(t_data, t_flop, t_mem, t_comm, input_bound):
    """Flag of the largest time component (the first one on ties)."""
    if input_bound:
        return BOTTLENECK_INPUT
    code = BOTTLENECK_INPUT
    largest = t_data
    if t_flop > largest:
        code, largest = BOTTLENECK_FLOP, t_flop
    if t_mem > largest:
        code, largest = BOTTLENECK_MEM, t_mem
    if t_comm > largest:
        code = BOTTLENECK_COMM
    return code


@jit
def mark_unsupported(p, out_data, out_flop, out_mem, out_fits):
    """Outputs of precision ``p`` on a GPU that lacks it: NaN times, fits flag 255."""
    out_data[p] = np.nan
    out_flop[p] = np.nan
    out_mem[p] = np.nan
    out_fits[p] = FLAG_FILL


@jit
def fits_memory_flag(job, gpu, prec_row, activation_bytes, workspace):
    """1 when weights, gradients and optimizer state (per parameter, from ``prec_row`` and the
    job), the kept ``activation_bytes`` and ``workspace`` [bytes] fit in the GPU's memory, else 0."""
    state = job[J_PARAMS] * (prec_row[P_WEIGHT_BYTES] + prec_row[P_GRAD_BYTES] + job[J_OPT_STATE])
    return 1 if state + activation_bytes + workspace <= gpu[G_MEMORY] else 0


@jit
def job_gpu_terms(job, gpu, peak, prec, workspace, out_data, out_flop, out_mem, out_fits):
    """Per-step times [s] that depend only on (job, gpu, precision), and memory feasibility.

    ``peak`` holds the achievable FLOP/s of this GPU per precision (NaN: unsupported).
    Writes ``out_*[p]`` for every precision p; the outputs are NaN (fits 255) where the GPU
    lacks the precision.
    """
    accum = job[J_ACCUM]
    for p in range(prec.shape[0]):
        if np.isnan(peak[p]):
            mark_unsupported(p, out_data, out_flop, out_mem, out_fits)
            continue
        ratio = prec[p, P_ACT_RATIO]
        out_data[p] = accum * job[J_INPUT] / gpu[G_PCIE_BW]
        out_flop[p] = accum * job[J_FLOP] / peak[p]
        out_mem[p] = accum * job[J_MEMBOUND] * ratio / gpu[G_MEM_BW]
        out_fits[p] = fits_memory_flag(job, gpu, prec[p], job[J_ACTIVATION] * ratio, workspace)


@jit
def class_terms(job, gpu, peak, class_peak, prec, workspace, out_data, out_flop, out_mem, out_fits):
    """Compute model pai-v2: per-step times [s] of (job, gpu, precision) from operator classes.

    Per class c of ``layout.CLASS_NAMES`` (FLOPs F_c and FP32 bytes B_c of one micro-batch,
    forward + backward, from the job table): the roofline time max(F_c / class_peak[p, c],
    a B_c / bw), a = activation bytes of the precision / 4 and bw the achievable HBM bandwidth
    (``G_CLASS_MEM_BW``); the time goes to ``t_flop`` when the FLOP side is the larger, to
    ``t_mem`` otherwise (element-wise/norm and embedding classes are memory-bound by
    definition; the element-wise bytes ``J_AMP_FP32_BYTES`` that stay FP32 under mixed
    precision move 4 bytes per element at every precision: + B32 (1 - a) / bw).  ``t_mem`` also
    holds the kernel launches x the per-launch time (eager or graphs) and, once per optimizer
    step, the update traffic params x (update bytes + gradient bytes + weight bytes - 4) / bw;
    at a precision whose convolutions run on tensor cores (``P_TENSOR_CONV``: the half precisions
    and TF32) the NCHW layout transposes ``J_NCHW_BYTES`` x a / bw; at a half precision (a < 1)
    the activation casts of mixed precision add ``J_AMP_CASTS`` x the per-launch time.
    ``class_peak`` (P, N_CLASSES) holds achievable FLOP/s; NaN ``peak[p]`` means the GPU lacks
    the precision (outputs NaN, fits 255).
    """
    accum = job[J_ACCUM]
    bw = gpu[G_CLASS_MEM_BW]
    launch = gpu[G_LAUNCH_GRAPHS] if job[J_GRAPHS] == 1.0 else gpu[G_LAUNCH_EAGER]
    for p in range(prec.shape[0]):
        if np.isnan(peak[p]):
            mark_unsupported(p, out_data, out_flop, out_mem, out_fits)
            continue
        ratio = prec[p, P_ACT_RATIO]
        flop_side = 0.0
        mem_side = 0.0
        for c in range(N_CLASSES):
            t_bytes = job[J_CLASS_BYTES + c] * ratio / bw
            flops = job[J_CLASS_FLOP + c]
            if c >= CLASS_ELEMENTWISE:  # element-wise/norm and embedding, the last classes: bytes only
                mem_side += t_bytes
                if (
                    c == CLASS_ELEMENTWISE
                ):  # the tensors that stay FP32 under mixed precision (element-wise and embedding)
                    mem_side += job[J_AMP_FP32_BYTES] * (1.0 - ratio) / bw
                continue
            t_compute = flops / class_peak[p, c] if flops != 0.0 else 0.0
            if t_compute >= t_bytes or t_compute != t_compute:
                flop_side += t_compute
            else:
                mem_side += t_bytes
        mem_side += job[J_LAUNCHES] * launch
        if prec[p, P_TENSOR_CONV] == 1.0:  # tensor-core convolutions (half precisions, TF32): NHWC kernels
            mem_side += job[J_NCHW_BYTES] * ratio / bw
        if ratio < 1.0:  # half precision: autocast's activation casts launch kernels
            mem_side += job[J_AMP_CASTS] * launch
        update = job[J_PARAMS] * (job[J_UPDATE_BYTES] + prec[p, P_GRAD_BYTES] + prec[p, P_WEIGHT_BYTES] - 4.0) / bw
        out_data[p] = accum * job[J_INPUT] / gpu[G_PCIE_BW]
        out_flop[p] = accum * flop_side
        out_mem[p] = accum * mem_side + update
        out_fits[p] = fits_memory_flag(job, gpu, prec[p], job[J_ACTIVATION_V2] * ratio, workspace)


def _compute_terms(jobs, gpus, peak, class_peak, prec, options, t_data, t_flop, t_mem, fits_memory):
    """Fill the per-(job, gpu, precision) terms that ``evaluate_block`` reads: ``t_data``,
    ``t_flop``, ``t_mem`` [s per optimizer step] and ``fits_memory`` (uint8), all (J, G, P),
    with the compute model ``options[O_MODEL]`` (``layout.MODEL_*``): ``job_gpu_terms``
    (pai-v1) or ``class_terms`` (pai-v2).  ``peak`` (G, P) and ``class_peak`` (G, P,
    N_CLASSES) are achievable FLOP/s (NaN: the GPU lacks the precision)."""
    n_jobs, n_gpus = jobs.shape[0], gpus.shape[0]
    v2 = options[O_MODEL] == MODEL_PAI_V2
    for jg in prange(n_jobs * n_gpus):
        j = jg // n_gpus
        g = jg % n_gpus
        if v2:
            class_terms(
                jobs[j],
                gpus[g],
                peak[g],
                class_peak[g],
                prec,
                options[O_WORKSPACE],
                t_data[j, g],
                t_flop[j, g],
                t_mem[j, g],
                fits_memory[j, g],
            )
        else:
            job_gpu_terms(
                jobs[j],
                gpus[g],
                peak[g],
                prec,
                options[O_WORKSPACE],
                t_data[j, g],
                t_flop[j, g],
                t_mem[j, g],
                fits_memory[j, g],
            )


#: the compute-terms kernel (serial: (job, gpu) pairs are few per block)
compute_terms = jit(serial_twin(_compute_terms, "compute_terms"))


@jit
def ignores_intra(arch):
    """True for the architectures whose numbers do not read the intra-server link (1w1g, 1wng:
    they exchange nothing over it); their validity still does (``intra_fits``)."""
    return arch == ARCH_1W1G or arch == ARCH_1WNG


@jit
def ignores_network(arch):
    """True for the single-server architectures (1w1g, 1wng, allreduce-local): neither their
    numbers nor their validity read the network."""
    return arch == ARCH_1W1G or arch == ARCH_1WNG or arch == ARCH_ALLREDUCE_LOCAL


@jit
def fill_invalid(st, tcm, bot, why, start, stop, code):
    """Write cells [start, stop) of the flat cube outputs as invalid with reason ``code``: NaN
    in every float output, ``FLAG_FILL`` bottleneck (one array at a time: each loop is a fill)."""
    for out in (st, tcm):
        for o in range(start, stop):
            out[o] = np.nan
    for o in range(start, stop):
        bot[o] = FLAG_FILL
    for o in range(start, stop):
        why[o] = code


@jit
def copy_cells(st, tcm, bot, why, source, target, count):
    """Copy ``count`` cells of the flat cube outputs from offset ``source`` to ``target`` (one
    array at a time: each loop is a copy)."""
    for out in (st, tcm):
        for q in range(count):
            out[target + q] = out[source + q]
    for q in range(count):
        bot[target + q] = bot[source + q]
    for q in range(count):
        why[target + q] = why[source + q]


# --- one configuration: its time composed from its terms -----------------------------------------
# The CPU traversal, the reduce-only fold and the CUDA kernel (``kernels.cuda``) compose a
# configuration from these helpers and nothing else; the numpy reference (``kernels.reference``)
# writes the same formulas again, independently.


@jit
def derived_factor_missing(gpu, samples_per_step):
    """True when the cost or energy factor of (job, gpu) is NaN (a missing batch, price or power):
    throughput, cost or energy would be NaN for a numeric step, so every configuration of the
    pair is invalid (``REASON_MISSING_INPUT``).  The factors themselves are ``step_factors``."""
    usd_per_step = cost_per_step_second(gpu[G_PRICE], samples_per_step)
    joule_per_step = energy_per_step_second(gpu[G_POWER], samples_per_step)
    return usd_per_step != usd_per_step or joule_per_step != joule_per_step


@jit
def ps_host_update_bytes(job, ps_fraction):
    """Bytes [B] of the optimizer update on the parameter-server hosts per step: the pushed share
    ``ps_fraction`` (``ps.ps_wire_fraction``) of the parameters x (8 + 2 x optimizer-state bytes)."""
    return job[J_PARAMS] * ps_fraction * (8.0 + 2.0 * job[J_OPT_STATE])


@jit
def ps_worker_fits(job, gpu, prec_row, fits_flag, options):
    """Whether a ps-worker GPU holds the job at precision ``prec_row``: the common memory check
    (``fits_flag`` == 1) unless ``O_PS_MEMORY``, where its GPUs hold no optimizer state
    (``ps.ps_fits_memory_flag``, with the compute model's activation bytes); the common check for
    a precision the GPU lacks (``fits_flag`` ``FLAG_FILL``)."""
    if options[O_PS_MEMORY] == 0.0 or fits_flag == FLAG_FILL:
        return fits_flag == 1
    activation = job[J_ACTIVATION_V2] if options[O_MODEL] == MODEL_PAI_V2 else job[J_ACTIVATION]
    return (
        ps_fits_memory_flag(
            job, gpu, prec_row, activation * prec_row[P_ACT_RATIO], options[O_WORKSPACE], options[O_PS_SPARSE]
        )
        == 1
    )


@jit
def precision_terms(job, t_flop, t_mem, prec_row, options):
    """The exchange terms of (job, precision) that no link changes: (gradient bytes S [B], the
    backward window the exchange may hide behind [s] (``overlap_window``), how many times the
    latency hops are paid (``latency_multiplier``), the share of the exchange that may hide
    (``overlap_fraction``)); ``t_flop``, ``t_mem`` [s per step] of that precision."""
    nbytes = job[J_PARAMS] * prec_row[P_COMM_BYTES]
    backward = overlap_window(t_flop, t_mem, job[J_ACCUM], options[O_OVERLAP_IDLE])
    hops = latency_multiplier(nbytes, options[O_SYNC_LATENCY], options[O_BUCKET_BYTES])
    share = overlap_fraction(nbytes, job[J_OVERLAP], options[O_BUCKET_OVERLAP], options[O_BUCKET_BYTES])
    return nbytes, backward, hops, share


@jit
def precision_reason(peak):
    """Reason code of a configuration that passes rules 1-4 and still has a NaN step: rule 5 when
    the GPU lacks the precision (NaN ``peak`` FLOP/s), else rule 6 (a missing input number)."""
    return REASON_PRECISION_NOT_ON_GPU if np.isnan(peak) else REASON_MISSING_INPUT


@jit
def input_floor_seconds(n, k, samples_per_step, input_rate):
    """Shortest step [s] the input pipeline allows: a server's pipeline feeds its min(n, k) GPUs
    ``samples_per_step`` samples each at ``input_rate`` samples/s (0 for an unbounded rate)."""
    return min(n, k) * samples_per_step / input_rate


@jit
def update_seconds(arch, n, k, job, ps_bytes, options):
    """Optimizer update on the parameter-server hosts [s] (``ps.ps_update_fixed_seconds`` of
    ``ps_bytes``, ``ps_host_update_bytes``) for ``ps-worker``; 0 for every other architecture."""
    if arch != ARCH_PS_WORKER:
        return 0.0
    return ps_update_fixed_seconds(
        n, k, job[J_PS_COUNT], options[O_PS_LOCAL_REDUCE], options[O_PS_NIC_PER_WORKER], ps_bytes, options[O_PS_HOST_BW]
    )


@jit
def configuration_step(base, nbytes, per_byte, hops, latency, update, share, backward, floor):
    """(step time [s], exposed communication [s], input-bound flag) of one configuration.

    The exchange is ``nbytes`` x ``per_byte`` + ``hops`` x ``latency`` + ``update`` [s]
    (``exchange_terms``, ``precision_terms``, ``update_seconds``), of which ``share`` hides behind
    ``backward`` (``exposed_comm_seconds``); the step is ``base`` (t_data + t_flop + t_mem) plus
    the exposed part, or the input ``floor`` when that is longer.  A NaN term gives a NaN step: an
    invalid configuration."""
    t_comm = exposed_comm_seconds(nbytes * per_byte + hops * latency + update, share, backward)
    step = base + t_comm
    input_bound = floor > step
    return (floor if input_bound else step), t_comm, input_bound


# --- the fold: each configuration's float32 step into the bests of (n_gpu, precision) ------------
@jit
def reset_bests(best_step, best_index, best_bottleneck):
    """Start the bests of one (job, gpu), (N, P) each: +inf (so that any step wins), -1, fill."""
    for ni in range(best_step.shape[0]):
        for p in range(best_step.shape[1]):
            best_step[ni, p] = np.inf
            best_index[ni, p] = -1
            best_bottleneck[ni, p] = FLAG_FILL


@jit
def close_bests(best_step):
    """NaN for the bests that nothing feasible reached (still +inf)."""
    for ni in range(best_step.shape[0]):
        for p in range(best_step.shape[1]):
            if best_step[ni, p] == np.inf:
                best_step[ni, p] = np.nan


@jit
def fold_pair(
    job,
    gpu,
    n_gpu,
    arch,
    intra,
    intra_fits,
    network,
    options,
    kept,
    n_kept,
    folded,
    n_folded,
    folded_ps,
    n_folded_ps,
    t_data,
    t_flop,
    t_mem,
    base,
    nbytes,
    hops,
    share,
    backward,
    ps_fraction,
    ps_bytes,
    net_ok,
    net_bw,
    net_lat,
    low,
    low_index,
    low_comm,
    low_input_bound,
    best_step,
    best_index,
    best_bottleneck,
):
    """Reduce-only: the traversal and fold of one (job, gpu) without the cube.

    For each GPU count ``n_gpu[ni]``, every valid (arch, intra, network) configuration's step at
    every folded column (``select_precisions``: column c holds precision ``kept[c]``; ps-worker
    folds ``folded_ps``, the others ``folded``) is computed (``configuration_step``) and the
    smallest float32 step kept per column in ``low`` (with its flat index (a * I + i) * W + w,
    exposed communication and input-bound flag), visiting configurations in increasing index so
    that the first one wins ties; then written into ``best_step``, ``best_index`` and
    ``best_bottleneck`` (N, P) at ``kept[c]``, the bottleneck computed once per best.  The
    per-column rows ``t_data`` .. ``backward`` are read at the column; a network's terms
    (``network_terms``, ``net_ok``, ``net_bw``, ``net_lat``: scratch of the network count) do not
    depend on the intra link, so they are computed once per (arch, n)."""
    n_arch, n_intra, n_net = arch.shape[0], intra.shape[0], network.shape[0]
    k = job[J_GPUS_PER_NODE]
    samples_per_step = job[J_BATCH] * job[J_ACCUM]
    collective = options[O_COLLECTIVE]
    for ni in range(n_gpu.shape[0]):
        n = n_gpu[ni]
        for c in range(n_kept):
            low[c] = np.inf
            low_index[c] = -1
        for a in range(n_arch):
            # rules 1-2 (the architecture cannot run n GPUs, k per server) hold for every link
            if configuration_reason(arch[a], n, k, True, LINK_NETWORK) != REASON_VALID:
                continue
            floor = input_floor_seconds(n, k, samples_per_step, job[J_INPUT_RATE])
            update = update_seconds(arch[a], n, k, job, ps_bytes, options)
            unit = wire_fraction(job, n, arch[a], ps_fraction, options)  # bytes moved per byte of S
            # the columns this architecture folds: its own memory-fit check
            columns = folded_ps if arch[a] == ARCH_PS_WORKER else folded
            n_columns = n_folded_ps if arch[a] == ARCH_PS_WORKER else n_folded
            n_w = 1 if ignores_network(arch[a]) else n_net  # the other networks tie with the first
            for w in range(n_w):
                net_ok[w] = configuration_reason(arch[a], n, k, True, network[w, L_KIND]) == REASON_VALID
                if net_ok[w]:
                    net_bw[w], net_lat[w] = network_terms(
                        network[w], arch[a], n, k, collective, options[O_INTER_VOLUME]
                    )
            for i in range(n_intra):
                if intra_fits[i] == 0:  # rule 4 (or 3, which comes first)
                    continue
                intra_bw = intra[i, L_BW] * intra_fraction(
                    intra[i, L_KIND], n, k, job[J_PCIE_ROOTS], options[O_TOPOLOGY]
                )
                first_index = (a * n_intra + i) * n_net  # the flat index of network 0
                for w in range(n_w):
                    if not net_ok[w]:
                        continue
                    per_byte, latency = exchange_terms(
                        arch[a],
                        n,
                        k,
                        job,
                        gpu[G_PCIE_BW],
                        intra_bw,
                        intra[i, L_LATENCY],
                        net_bw[w],
                        net_lat[w],
                        unit,
                        collective,
                        options,
                    )
                    for f in range(n_columns):
                        c = columns[f]
                        step, t_comm, input_bound = configuration_step(
                            base[c], nbytes[c], per_byte, hops[c], latency, update, share[c], backward[c], floor
                        )
                        rounded = np.float32(step)  # the bests compare the stored (float32) step times
                        if rounded < low[c]:
                            low[c] = rounded
                            low_index[c] = first_index + w
                            low_comm[c] = t_comm
                            low_input_bound[c] = input_bound
                if ignores_intra(arch[a]):
                    break  # the other links give the same numbers as this first fitting one
        for c in range(n_kept):
            if low_index[c] >= 0:
                p = kept[c]
                best_step[ni, p] = low[c]
                best_index[ni, p] = low_index[c]
                best_bottleneck[ni, p] = bottleneck_code(
                    t_data[c], t_flop[c], t_mem[c], low_comm[c], low_input_bound[c]
                )


@jit
def fold_row(
    best_step,
    best_index,
    best_bottleneck,
    ni,
    first_index,
    steps,
    codes,
    offset,
    n_networks,
    n_kept,
    kept,
    columns,
    n_columns,
):
    """With the cube written: fold a computed row of (network, kept precision) float32 ``steps``
    (the bottleneck ``codes`` of the cube at ``offset`` + the same position) into the bests of GPU
    count ``ni``, for the first ``n_networks`` networks and the columns ``columns[:n_columns]``;
    configuration index ``first_index`` + network."""
    for w in range(n_networks):
        for f in range(n_columns):
            c = columns[f]
            q = w * n_kept + c
            p = kept[c]
            if steps[q] < best_step[ni, p]:
                best_step[ni, p] = steps[q]
                best_index[ni, p] = first_index + w
                best_bottleneck[ni, p] = codes[offset + q]


# --- the traversal -------------------------------------------------------------------------------
@jit
def select_precisions(
    job, gpu, prec, t_data, t_flop, t_mem, fits, missing, options, write_cube, kept, folded, folded_ps
):
    """The precisions one (job, gpu) computes, and those it folds (the rows' columns).

    ``kept`` (column c holds precision kept[c]): all of them when the cube is written; in
    reduce-only those some architecture can fold.  ``folded`` / ``folded_ps``: the columns of a
    numeric step that fits in memory for every architecture but ps-worker / for ps-worker
    (``ps_worker_fits``: a precision may fit there and not elsewhere).  Returns (n_kept,
    n_folded, n_folded_ps); ``missing``: ``derived_factor_missing`` of the pair."""
    n_kept = 0
    n_folded = 0
    n_folded_ps = 0
    for p in range(prec.shape[0]):
        numeric = not np.isnan(t_data[p] + t_flop[p] + t_mem[p]) and not missing
        foldable = numeric and fits[p] == 1
        foldable_ps = numeric and ps_worker_fits(job, gpu, prec[p], fits[p], options)
        if write_cube or foldable or foldable_ps:
            if foldable:
                folded[n_folded] = n_kept
                n_folded += 1
            if foldable_ps:
                folded_ps[n_folded_ps] = n_kept
                n_folded_ps += 1
            kept[n_kept] = p
            n_kept += 1
    return n_kept, n_folded, n_folded_ps


def _evaluate_block(
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
    """Evaluate every configuration of a block of jobs and fold it into the per-job bests.

    Inputs (tables, SI units; layouts in ``layout``): ``jobs`` (J, N_JOB_FIELDS),
    ``n_gpu`` (J, N) GPU counts per job, ``arch`` (A,) architecture codes, ``gpus``
    (G, N_GPU_FIELDS), ``peak`` (G, P) achievable FLOP/s, ``prec`` (P, N_PREC_FIELDS),
    ``intra`` (I, N_LINK_FIELDS), ``intra_fits`` (G, I) uint8, ``network`` (W, N_LINK_FIELDS),
    ``options`` (N_OPTIONS,).

    Outputs over (J, A, G, N, I, W, P), float32 unless said: ``step_time`` [s],
    ``t_comm`` [s, exposed], ``bottleneck`` (uint8 flag) and ``invalid_reason`` (uint8, a
    ``layout.REASON_*`` code, 0 where the configuration can exist); written only when
    ``write_cube`` (pass arrays of any shape otherwise).  Throughput, cost and energy are
    step_time divided into or times a factor of (job, n_gpu) or (job, gpu) (``step_factors``):
    they are not outputs, but a NaN factor (a missing batch, price or power) makes the
    configuration invalid (``REASON_MISSING_INPUT``), as the model needs it.  Inputs over (J, G, P), filled
    beforehand by ``compute_terms`` (the compute model): ``t_data``, ``t_flop``, ``t_mem``
    [s per step, float64: read back for every configuration], ``fits_memory`` (uint8).
    Over (J, G, N, P):
    ``best_step`` (float64, the smallest float32-rounded step time over arch x intra x
    network among valid configurations that fit in memory, NaN when none), ``best_index``
    (int32, the flat index (a * I + i) * W + w of that configuration, first one on ties, -1
    when none) and ``best_bottleneck`` (uint8, its bottleneck flag).

    The grid is pruned: only the valid (arch, n_gpu), (gpu, intra) and (gpu, precision)
    combinations are computed.  An (arch, n_gpu) slab that rules 1-2 forbid and a (gpu, intra)
    row the link cannot connect are written as invalid cells (with their reason codes) when the
    cube is written and skipped otherwise; a precision whose per-(job, gpu) terms are NaN (the
    GPU lacks it, or an input is missing) is computed only when the cube is written (its cells
    come out NaN with their reason codes like any other) and, in reduce-only, so is a precision
    that fits in memory under no architecture's check (the reductions never take it).  The check
    is per architecture: with ``O_PS_MEMORY`` a ps-worker GPU holds no optimizer state
    (``ps_fits_memory_flag``), so a precision may fit for ps-worker and not for the others; each
    architecture folds only the precisions that fit by its own check.  An architecture that ignores a
    dimension (``ignores_intra``, ``ignores_network``) is computed once along it: the other
    cells are copies (cube) or are not folded (they tie with the first, which the bests keep).
    When the cube is written, each (arch, n_gpu, intra) row of (network, precision) is computed
    branch-free and then folded; in reduce-only each step is folded as it is computed.
    """
    n_jobs = jobs.shape[0]
    n_gpus = gpus.shape[0]
    n_arch, n_counts = arch.shape[0], n_gpu.shape[1]
    n_intra, n_net, n_prec = intra.shape[0], network.shape[0], prec.shape[0]
    n_pairs = n_jobs * n_gpus
    collective = options[O_COLLECTIVE]
    topology = options[O_TOPOLOGY]
    # Rows over (network, kept precision) per (job, gpu), allocated once before the parallel loop:
    # the per-precision terms repeated per network, so that the innermost loop of a cube row is
    # branch-free over contiguous memory and LLVM vectorises it; reduce-only needs them once.
    n_rows = n_net if write_cube else 1
    row = n_rows * n_prec  # with the cube, one contiguous row of it: every (network, precision)
    row_t_data, row_t_flop, row_t_mem = np.empty((n_pairs, row)), np.empty((n_pairs, row)), np.empty((n_pairs, row))
    row_base, row_bytes, row_backward = np.empty((n_pairs, row)), np.empty((n_pairs, row)), np.empty((n_pairs, row))
    row_hops, row_share = np.empty((n_pairs, row)), np.empty((n_pairs, row))
    cube_row = row if write_cube else 0  # the rows only the cube's traversal reads
    row_per_byte, row_latency = np.empty((n_pairs, cube_row)), np.empty((n_pairs, cube_row))  # per network
    row_step = np.empty((n_pairs, cube_row), np.float32)
    row_reason = np.empty((n_pairs, cube_row), np.uint8)  # the reason code of the configuration if its step is NaN
    row_precision_reason = np.empty((n_pairs, cube_row), np.uint8)  # the same when rules 1-4 pass
    # per (job, gpu): the kept precisions and the columns folded (``select_precisions``)
    kept_of = np.empty((n_pairs, n_prec), np.int64)
    folded_of = np.empty((n_pairs, n_prec), np.int64)
    folded_ps_of = np.empty((n_pairs, n_prec), np.int64)
    # reduce-only scratch (``fold_pair``): per network, and each column's best so far
    n_scratch = 0 if write_cube else n_pairs
    net_ok_of = np.empty((n_scratch, n_net), np.bool_)
    net_bw_of, net_lat_of = np.empty((n_scratch, n_net)), np.empty((n_scratch, n_net))
    low_of, low_comm_of = np.empty((n_scratch, n_prec), np.float32), np.empty((n_scratch, n_prec))
    low_index_of = np.empty((n_scratch, n_prec), np.int64)
    low_input_bound_of = np.empty((n_scratch, n_prec), np.bool_)
    zero_code = np.uint8(REASON_VALID)  # typed once: the store below stays a uint8 select
    for jg in prange(n_pairs):
        j = jg // n_gpus
        g = jg % n_gpus
        job = jobs[j]
        gpu = gpus[g]
        # the per-(job, gpu, precision) terms, filled beforehand by ``compute_terms``
        tdv, tfv, tmv = t_data[j, g], t_flop[j, g], t_mem[j, g]
        k = job[J_GPUS_PER_NODE]
        samples_per_step = job[J_BATCH] * job[J_ACCUM]
        missing = derived_factor_missing(gpu, samples_per_step)
        ps_fraction = ps_wire_fraction(job, options[O_PS_SPARSE])  # the share of S a push moves
        ps_bytes = ps_host_update_bytes(job, ps_fraction)
        st, tcm = step_time.reshape(-1), t_comm.reshape(-1)  # flat views of the cube outputs
        bot, why = bottleneck.reshape(-1), invalid_reason.reshape(-1)
        bsv, biv, bbv = best_step[j, g], best_index[j, g], best_bottleneck[j, g]
        reset_bests(bsv, biv, bbv)
        kept, folded, folded_ps = kept_of[jg], folded_of[jg], folded_ps_of[jg]
        n_kept, n_folded, n_folded_ps = select_precisions(
            job, gpu, prec, tdv, tfv, tmv, fits_memory[j, g], missing, options, write_cube, kept, folded, folded_ps
        )
        if n_kept == 0:  # reduce-only, and nothing to fold
            close_bests(bsv)
            continue
        r_td, r_tf, r_tm, r_base = row_t_data[jg], row_t_flop[jg], row_t_mem[jg], row_base[jg]
        r_bytes, r_backward, r_hops, r_share = row_bytes[jg], row_backward[jg], row_hops[jg], row_share[jg]
        r_per_byte, r_latency, r_step = row_per_byte[jg], row_latency[jg], row_step[jg]
        r_reason, r_precision_reason = row_reason[jg], row_precision_reason[jg]
        for w in range(n_rows):
            for c in range(n_kept):
                p = kept[c]
                q = w * n_kept + c
                r_td[q], r_tf[q], r_tm[q] = tdv[p], tfv[p], tmv[p]
                r_base[q] = tdv[p] + tfv[p] + tmv[p]
                r_bytes[q], r_backward[q], r_hops[q], r_share[q] = precision_terms(
                    job, tfv[p], tmv[p], prec[p], options
                )
                if write_cube:
                    r_precision_reason[q] = precision_reason(peak[g, p])
        if not write_cube:  # reduce-only: each step folded as it is computed, no rows
            fold_pair(
                job,
                gpu,
                n_gpu[j],
                arch,
                intra,
                intra_fits[g],
                network,
                options,
                kept,
                n_kept,
                folded,
                n_folded,
                folded_ps,
                n_folded_ps,
                r_td,
                r_tf,
                r_tm,
                r_base,
                r_bytes,
                r_hops,
                r_share,
                r_backward,
                ps_fraction,
                ps_bytes,
                net_ok_of[jg],
                net_bw_of[jg],
                net_lat_of[jg],
                low_of[jg],
                low_index_of[jg],
                low_comm_of[jg],
                low_input_bound_of[jg],
                bsv,
                biv,
                bbv,
            )
            close_bests(bsv)
            continue
        # the cube is written (the kept precisions are all of them: a row is a row of the cube)
        for a in range(n_arch):
            n_w = 1 if ignores_network(arch[a]) else n_net  # networks computed (the rest copy the first)
            # the columns this architecture folds: its own memory-fit check
            fold_cols = folded_ps if arch[a] == ARCH_PS_WORKER else folded
            n_fold = n_folded_ps if arch[a] == ARCH_PS_WORKER else n_folded
            for ni in range(n_counts):
                n = n_gpu[j, ni]
                slab = (((j * n_arch + a) * n_gpus + g) * n_counts + ni) * n_intra * row
                # rules 1-2 (the architecture cannot run n GPUs, k per server) hold for the whole slab
                arch_reason = configuration_reason(arch[a], n, k, True, LINK_NETWORK)
                if arch_reason != REASON_VALID:
                    fill_invalid(st, tcm, bot, why, slab, slab + n_intra * row, arch_reason)
                    continue
                floor = input_floor_seconds(n, k, samples_per_step, job[J_INPUT_RATE])
                update = update_seconds(arch[a], n, k, job, ps_bytes, options)
                unit = wire_fraction(job, n, arch[a], ps_fraction, options)  # bytes moved per byte of S
                first_intra = -1  # the intra link computed, for an architecture that ignores it
                for i in range(n_intra):
                    o = slab + i * row
                    first_index = (a * n_intra + i) * n_net  # best_index of network 0
                    if intra_fits[g, i] == 0:  # rule 4 (or 3, which comes first)
                        for w in range(n_net):
                            fill_invalid(
                                st,
                                tcm,
                                bot,
                                why,
                                o + w * n_prec,
                                o + (w + 1) * n_prec,
                                configuration_reason(arch[a], n, k, False, network[w, L_KIND]),
                            )
                        continue
                    if ignores_intra(arch[a]) and first_intra >= 0:  # the same numbers as the first fitting link
                        copy_cells(st, tcm, bot, why, slab + first_intra * row, o, row)
                        continue
                    first_intra = i
                    intra_bw = intra[i, L_BW] * intra_fraction(intra[i, L_KIND], n, k, job[J_PCIE_ROOTS], topology)
                    for w in range(n_w):
                        shape = configuration_reason(arch[a], n, k, True, network[w, L_KIND])
                        if shape == REASON_VALID and not missing:
                            net_bw, net_lat = network_terms(
                                network[w], arch[a], n, k, collective, options[O_INTER_VOLUME]
                            )
                            per_byte, latency = exchange_terms(
                                arch[a],
                                n,
                                k,
                                job,
                                gpu[G_PCIE_BW],
                                intra_bw,
                                intra[i, L_LATENCY],
                                net_bw,
                                net_lat,
                                unit,
                                collective,
                                options,
                            )
                        else:  # NaN makes every output of the configuration NaN: invalid
                            per_byte = np.nan
                            latency = np.nan
                        for c in range(n_kept):
                            q = w * n_kept + c
                            r_per_byte[q] = per_byte
                            r_latency[q] = latency
                            r_reason[q] = shape if shape != REASON_VALID else r_precision_reason[q]
                    for q in range(n_w * n_kept):  # branch-free: vectorised
                        step, tc, input_bound = configuration_step(
                            r_base[q],
                            r_bytes[q],
                            r_per_byte[q],
                            r_hops[q],
                            r_latency[q],
                            update,
                            r_share[q],
                            r_backward[q],
                            floor,
                        )
                        r_step[q] = step
                        bad = step != step  # NaN: invalid for one of the reasons 1-6
                        st[o + q] = step
                        tcm[o + q] = np.nan if bad else tc
                        bot[o + q] = FLAG_FILL if bad else bottleneck_code(r_td[q], r_tf[q], r_tm[q], tc, input_bound)
                        why[o + q] = r_reason[q] if bad else zero_code
                    for w in range(n_w, n_net):  # an architecture that ignores the network: copies
                        copy_cells(st, tcm, bot, why, o, o + w * n_prec, n_prec)
                    fold_row(bsv, biv, bbv, ni, first_index, r_step, bot, o, n_w, n_kept, kept, fold_cols, n_fold)
        close_bests(bsv)


# time, cost and energy per sample: defined once, numba-free, in ``kernels.metrics``
cost_per_step_second = jit(metrics.cost_per_step_second)
energy_per_step_second = jit(metrics.energy_per_step_second)
time_per_sample = jit(metrics.time_per_sample)
cost_per_sample = jit(metrics.cost_per_sample)
energy_per_sample = jit(metrics.energy_per_sample)


@jit
def step_factors(jobs, n_gpu, gpus):
    """The factors that make throughput, cost and energy from a configuration's step time [s],
    which the block kernel does not write (float64, the kernel's formulas):
    ``samples_per_job_step`` (J, N) [samples] = n x batch x accumulation (throughput = it /
    step), ``cost_per_step_second`` (J, G) [USD per 1e6 samples per s] and
    ``energy_per_step_second`` (J, G) [J per sample per s] (cost, energy = it x step).
    ``jobs`` (J, N_JOB_FIELDS), ``n_gpu`` (J, N), ``gpus`` (G, N_GPU_FIELDS)."""
    n_jobs, n_counts, n_gpus = jobs.shape[0], n_gpu.shape[1], gpus.shape[0]
    samples = np.empty((n_jobs, n_counts))
    cost = np.empty((n_jobs, n_gpus))
    energy = np.empty((n_jobs, n_gpus))
    for j in range(n_jobs):
        per_gpu = jobs[j, J_BATCH] * jobs[j, J_ACCUM]
        for ni in range(n_counts):
            samples[j, ni] = n_gpu[j, ni] * per_gpu
        for g in range(n_gpus):
            cost[j, g] = cost_per_step_second(gpus[g, G_PRICE], per_gpu)
            energy[j, g] = energy_per_step_second(gpus[g, G_POWER], per_gpu)
    return samples, cost, energy


@jit
def config_derived(jobs, n_gpu, gpu, step_time, throughput, cost, energy):
    """Throughput [samples/s], cost [USD/1e6 samples] and energy [J/sample] of one configuration
    per job, as a cube's readers derive them (``schema.derived_values``): the job's factor
    (``step_factors``) divided by or times its float32 step time, in float64, rounded to
    float32, NaN where the step time is.  ``jobs`` (J, N_JOB_FIELDS), ``n_gpu`` (J, 1), ``gpu``
    (N_GPU_FIELDS,), ``step_time`` (J,) float32; writes the (J,) float32 outputs.  For
    ``predict``, where a dozen numpy operations on one-element arrays cost more than the kernel."""
    for j in range(jobs.shape[0]):
        per_gpu = jobs[j, J_BATCH] * jobs[j, J_ACCUM]
        step = np.float64(step_time[j])
        throughput[j] = np.float32(n_gpu[j, 0] * per_gpu / step)
        cost[j] = np.float32(cost_per_sample(step, gpu[G_PRICE], per_gpu))
        energy[j] = np.float32(energy_per_sample(step, gpu[G_POWER], per_gpu))


#: the block kernel for many configurations: parallel over (job, gpu)
evaluate_block = parallel_jit(_evaluate_block)
#: the same kernel, serial: for a few configurations, where the thread pool costs more than the work
evaluate_block_serial = jit(serial_twin(_evaluate_block, "evaluate_block_serial"))
