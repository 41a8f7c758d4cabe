"""The LLM step-time kernel: every parallel layout x every cluster design, one model.

``evaluate_llm(layouts, hw, model, ctab, options, out)`` fills ``out`` (N x H, N_RESULT_FIELDS)
for the N layouts and H hardware rows of ``kernels.llm_columns``; an invalid pair gets NaN in
every field but ``R_REASON`` (its reason code).  Per optimizer step, paced by the slowest
pipeline stage, with m = global batch / (d x micro-batch) micro-batches and v virtual stages:

    step = m x t_mb + (p - 1) / v x t_mb + pp_comm + dp_exposed + optimizer

``t_mb`` is one micro-batch through the slowest stage (ceil(L / p) layers, or floor(L / p)
and the output layer on the last): compute (the compute table x tokens x layers) +
tensor-parallel collectives + the context-parallel exchange not hidden behind attention + the
expert all-to-alls.  Traffic between NVLink domains takes the fabric path of the domains it
spans (``network_path``: oversubscription and hops per tier); all-reduces may use in-network
reduction (SHARP / NVLS, ``allreduce``).  ``(p - 1) / v x t_mb`` is the 1F1B / interleaved bubble (Narayanan
et al., SC 2021, sections 2.2.1-2.2.2).  docs/llm.md gives every term.
"""

import numpy as np
from numba import prange

from . import llm_columns as K
from .jit import jit, parallel_jit, serial_twin


@jit
def ring_allreduce(nbytes, n, bw, latency):
    """Seconds of a ring all-reduce of ``nbytes`` among ``n`` GPUs at ``bw`` bytes/s per GPU
    (2 (n-1)/n x bytes / bw + 2 (n-1) x latency); also a reduce-scatter + all-gather pair."""
    if n <= 1.0:
        return 0.0
    return 2.0 * (n - 1.0) / n * nbytes / bw + 2.0 * (n - 1.0) * latency


@jit
def allreduce(nbytes, n, bw, latency, in_network):
    """Seconds of an all-reduce of ``nbytes`` among ``n`` GPUs at ``bw`` bytes/s per GPU and
    ``latency`` s per message: the ring, or with ``in_network`` > 0 (SHARP / NVLS: the switches
    reduce and multicast, each GPU sends and receives the message once, 1 / bw per byte
    instead of 2 (n-1)/n, and pays the tree's latency up and down) the faster of the two, as
    NCCL picks its algorithm."""
    ring = ring_allreduce(nbytes, n, bw, latency)
    if in_network > 0.0 and n > 1.0:
        return min(ring, nbytes / bw + 2.0 * latency)
    return ring


@jit
def network_path(domains, hw):
    """(bytes/s per GPU, s per message) across the fabric for a group spanning ``domains``
    NVLink domains: within one tier-1 group the NICs' bandwidth and the link's latency; a group
    that spans tier-1 groups shares their uplinks (bandwidth / tier-1 oversubscription, two
    more switch hops), one that spans tier-2 groups also the tier-2 uplinks (/ both
    oversubscriptions, four more hops)."""
    bw = hw[K.HW_NET_BW] * hw[K.HW_NICS_PER_GPU]
    lat = hw[K.HW_NET_LAT]
    if domains > hw[K.HW_TIER2]:
        return bw / (hw[K.HW_OVERSUB1] * hw[K.HW_OVERSUB2]), lat + 4.0 * hw[K.HW_HOP_LAT]
    if domains > hw[K.HW_TIER1]:
        return bw / hw[K.HW_OVERSUB1], lat + 2.0 * hw[K.HW_HOP_LAT]
    return bw, lat


@jit
def group_path(gpus, hw):
    """(bytes/s per GPU, s per message) of a group spanning ``gpus`` consecutive GPUs: the NVLink
    domain's link when it fits in one domain, else the fabric path of the domains it spans."""
    domain = hw[K.HW_DOMAIN]
    if gpus <= domain:
        return hw[K.HW_INTRA_BW], hw[K.HW_INTRA_LAT]
    return network_path(np.ceil(gpus / domain), hw)


@jit
def fabric_capacity(hw):
    """The most NVLink domains the fabric's tiers connect (inf with three tiers)."""
    tiers = hw[K.HW_TIERS]
    if tiers <= 1.0:
        return hw[K.HW_TIER1]
    if tiers <= 2.0:
        return hw[K.HW_TIER2]
    return np.inf


@jit
def hierarchical_allreduce(nbytes, n, per_domain, hw, nvls, sharp):
    """Seconds of an all-reduce among ``n`` GPUs, ``per_domain`` of them in each NVLink domain:
    an all-reduce inside each domain on the full message (in-switch with ``nvls``), then one
    across the n / per_domain domains on 1 / per_domain of it over the fabric path of that many
    domains (in-network with ``sharp``), every GPU on its own share of the NICs."""
    k = min(n, per_domain)
    if k < 1.0:
        k = 1.0
    domains = np.ceil(n / k)
    out = allreduce(nbytes, k, hw[K.HW_INTRA_BW], hw[K.HW_INTRA_LAT], nvls)
    if domains > 1.0:
        bw, lat = network_path(domains, hw)
        out += allreduce(nbytes / k, domains, bw, lat, sharp)
    return out


@jit
def all_to_all_seconds(nbytes, ranks, span, hw):
    """Seconds of one all-to-all among ``ranks`` GPUs spread evenly over ``span`` consecutive
    GPUs, each holding ``nbytes`` [bytes] split evenly over the ranks (its own share stays).
    Inside one NVLink domain every share goes on the domain's link.  Across domains, the shares
    for the ranks of the GPU's own domain go on the NVLink link while the rest go over the fabric
    path of the domains spanned, both at once (the slower sets the time); one latency of that
    path per peer."""
    if span <= hw[K.HW_DOMAIN]:
        return nbytes * (ranks - 1.0) / ranks / hw[K.HW_INTRA_BW] + (ranks - 1.0) * hw[K.HW_INTRA_LAT]
    domains = np.ceil(span / hw[K.HW_DOMAIN])
    bw, lat = network_path(domains, hw)
    local = max(1.0, ranks / domains)  # the group's ranks in each domain, the GPU's own included
    inside = nbytes * (local - 1.0) / ranks / hw[K.HW_INTRA_BW]
    across = nbytes * (ranks - local) / ranks / bw
    return max(inside, across) + (ranks - 1.0) * lat


@jit
def tensor_allreduce(nbytes, t, hw, in_switch):
    """Seconds of one tensor-parallel all-reduce of ``nbytes`` among ``t`` GPUs: on the NVLink
    domain's link (in-switch with ``in_switch``) when the group fits in one domain, else costed
    on the fabric: inside each domain on the full message, then across the t / domain domains
    on 1 / domain of it (``hierarchical_allreduce``; rings only)."""
    if t <= hw[K.HW_DOMAIN]:
        return allreduce(nbytes, t, hw[K.HW_INTRA_BW], hw[K.HW_INTRA_LAT], in_switch)
    return hierarchical_allreduce(nbytes, t, hw[K.HW_DOMAIN], hw, 0.0, 0.0)


@jit
def tensor_seconds(lay, hw, model, options, tokens):
    """Exposed seconds of the tensor-parallel collectives of one layer and micro-batch of
    ``tokens`` tokens: 2 all-reduces forward, 2 backward, 2 more in a full recomputation (with
    SP: reduce-scatter + all-gather pairs of the same volume, which in-switch reduction does not
    shorten), less the fraction async TP hides (``OP_TP_HIDE``)."""
    t = lay[K.LA_TP]
    tp = 0.0
    if t > 1.0:
        count = 4.0 + (2.0 if lay[K.LA_RECOMPUTE] == 2.0 else 0.0)
        in_switch = options[K.OP_IN_NETWORK] * hw[K.HW_NVLS] * (1.0 - lay[K.LA_SP])
        tp = count * tensor_allreduce(tokens * model[K.M_HIDDEN] * options[K.OP_ACT_BYTES], t, hw, in_switch)
    return tp * (1.0 - options[K.OP_TP_HIDE])


@jit
def interleave_reason(p, v, m):
    """True where an interleaved schedule (v > 1) cannot run: without a pipeline (p = 1) or with
    fewer micro-batches than stages (the schedule runs them in groups of p per virtual stage;
    m need not be a multiple of p, as Megatron-Core allows since it groups them)."""
    return v > 1.0 and (p == 1.0 or m < p)


@jit
def expert_tensor(t, d, c, e):
    """The expert tensor-parallel degree: t when the e expert ranks fit in the d x c data ranks
    (each expert split like the dense layers), else 1 (Megatron-Core's parallel folding: the
    experts are not split and the expert group takes tensor ranks too, e | t x d x c)."""
    return t if (d * c) % e == 0.0 else 1.0


@jit
def stage_layers(layers, p, v):
    """(most, fewest) layers a pipeline rank holds: ceil / floor of L / p, or with v > 1
    virtual stages v chunks of ceil / floor of L / (p v) layers (uneven stages where the layers
    do not divide, as Megatron-Core splits them)."""
    if v > 1.0:
        return v * np.ceil(layers / (p * v)), v * np.floor(layers / (p * v))
    return np.ceil(layers / p), np.floor(layers / p)


@jit
def divides(k, n):
    """True where ``k`` divides ``n`` (whole numbers held as floats, below 2^53): n / k is then
    exact and whole (a quotient off a whole number by at least 1 / k cannot round onto one), and
    a division is cheaper than the float remainder; NaN or inf divides nothing."""
    q = n / k
    return q == np.floor(q) and q < 9007199254740992.0


@jit
def layout_reason(lay, hw, model, ctab, options, mem_bytes):
    """The reason code of one layout on one hardware row (0 when valid), memory checked last
    against ``mem_bytes`` (NaN: not checked) with the options' memory margin."""
    t, p, d, c, e = lay[K.LA_TP], lay[K.LA_PP], lay[K.LA_DP], lay[K.LA_CP], lay[K.LA_EP]
    v, b = lay[K.LA_VPP], lay[K.LA_MB]
    ct = int(hw[K.HW_CT])
    if not ctab[ct, int(lay[K.LA_TP_INDEX]), int(lay[K.LA_RECOMPUTE]), int(lay[K.LA_SP]), K.CT_LAYER] > 0.0:
        return K.REASON_PRECISION
    heads, kv_heads = model[K.M_HEADS], model[K.M_KV_HEADS]
    if (
        not divides(t, heads)
        or (t < kv_heads and not divides(t, kv_heads))
        or (t > kv_heads and not divides(kv_heads, t))
    ):
        return K.REASON_TP_HEADS
    if not divides(t, model[K.M_FFN]) or (model[K.M_EXPERTS] > 0.0 and not divides(t, model[K.M_MOE_FFN])):
        return K.REASON_TP_FFN
    if t > hw[K.HW_DOMAIN] and not hw[K.HW_NET_BW] * hw[K.HW_NICS_PER_GPU] > 0.0:
        return K.REASON_TP_DOMAIN
    if not divides(c, model[K.M_SEQ]):
        return K.REASON_CP_SEQ
    if (model[K.M_EXPERTS] == 0.0 and e > 1.0) or (model[K.M_EXPERTS] > 0.0 and not divides(e, model[K.M_EXPERTS])):
        return K.REASON_EP_EXPERTS
    if not divides(e, d * c) and not divides(e, t * d * c):
        return K.REASON_EP_GROUP
    if not divides(d * b, model[K.M_GLOBAL_BATCH]):
        return K.REASON_BATCH
    # interleaved chunks may be two more than the layers: Megatron-Core counts the embedding and
    # the loss as a chunk each (account_for_embedding/loss_in_pipeline_split)
    if p > model[K.M_LAYERS] or (v > 1.0 and p * v > model[K.M_LAYERS] + 2.0):
        return K.REASON_PP_LAYERS
    if interleave_reason(p, v, model[K.M_GLOBAL_BATCH] / (d * b)):
        return K.REASON_INTERLEAVE
    if t * p * d * c > hw[K.HW_DOMAIN] and not hw[K.HW_NET_BW] * hw[K.HW_NICS_PER_GPU] > 0.0:
        return K.REASON_NO_NETWORK
    if np.ceil(t * p * d * c / hw[K.HW_DOMAIN]) > fabric_capacity(hw):
        return K.REASON_FABRIC
    if mem_bytes > hw[K.HW_MEMORY] * (1.0 + options[K.OP_MEMORY_MARGIN]):
        return K.REASON_MEMORY
    return K.REASON_VALID


@jit
def expert_replicas(t, d, c, e):
    """The expert-data-parallel ranks that hold a replica of each routed expert: d x c x t /
    (et x e), et the expert tensor degree (``expert_tensor``; Megatron-Core's rank order: tensor,
    then expert, then expert-data-parallel)."""
    return d * c * t / (expert_tensor(t, d, c, e) * e)


@jit
def per_gpu_params(params, expert, shards, expert_shards, sharded):
    """Parameters [count] a GPU keeps of a stage's ``params`` (``expert`` of them experts' ones)
    of one kind of state: all of them, or with ``sharded`` (ZeRO), the dense ones split over the
    ``shards`` data-parallel ranks and the experts' over their ``expert_shards``
    expert-data-parallel replicas (Megatron-Core's distributed optimizer shards each over the
    group that reduces its gradients); ``params / shards`` where the two groups coincide."""
    if not sharded:
        return params
    if expert_shards == shards or expert == 0.0:
        return params / shards
    return (params - expert) / shards + expert / expert_shards


@jit
def memory_bytes(lay, model, options, m):
    """Bytes per GPU on the busiest (first) pipeline stage: weights, gradients and optimizer
    state (sharded by ZeRO stage over the d x c data-parallel ranks, the experts' over their
    d x c x t / (et x e) expert-data-parallel replicas, ``per_gpu_params``; ZeRO-3 adds two
    layers' gathered weights and one layer's gradients; below it ``rs_buffer`` one layer's
    gradients at the gradient bytes), the activations of the micro-batches in flight
    (Korthikanti et al. 2022; at the stored bytes of the precision, but a full recomputation's
    16-bit layer inputs; with ``gathered_inputs`` and sequence parallelism the column-parallel
    GEMMs' inputs kept all-gathered: 4h a token a layer and the output projection's 2h) and the
    workspace."""
    t, p, d, c, e = lay[K.LA_TP], lay[K.LA_PP], lay[K.LA_DP], lay[K.LA_CP], lay[K.LA_EP]
    v, b, zero, rc, sp = lay[K.LA_VPP], lay[K.LA_MB], lay[K.LA_ZERO], lay[K.LA_RECOMPUTE], lay[K.LA_SP]
    layers = stage_layers(model[K.M_LAYERS], p, v)[0]
    et = expert_tensor(t, d, c, e)
    layer = model[K.M_SHARED_PARAMS] / t + model[K.M_EXPERT_PARAMS] / (et * e)  # one layer's parameters per GPU
    params = layers * layer + model[K.M_EMBED_PARAMS] / t
    expert = layers * model[K.M_EXPERT_PARAMS] / (et * e)
    shards, expert_shards = d * c, expert_replicas(t, d, c, e)
    weights = per_gpu_params(params, expert, shards, expert_shards, zero >= 3.0) * options[K.OP_WEIGHT_BYTES]
    grads = per_gpu_params(params, expert, shards, expert_shards, zero >= 2.0) * options[K.OP_GRAD_BYTES]
    state = per_gpu_params(params, expert, shards, expert_shards, zero >= 1.0) * options[K.OP_OPT_BYTES]
    if zero >= 3.0:  # FSDP's unsharded working copies: this layer's and the prefetched layer's
        # weights, and this layer's gradients before their reduce-scatter
        weights += layer * (2.0 * options[K.OP_WEIGHT_BYTES] + options[K.OP_GRAD_COMM_BYTES])
    elif options[K.OP_RS_BUFFER] > 0.0:  # one layer's gradients copied into FSDP2's reduce-scatter input
        weights += layer * options[K.OP_GRAD_BYTES]
    tokens = b * model[K.M_SEQ] / c
    split_repl = t if sp > 0.0 else 1.0
    # the attention and FFN inputs (2h + 2h of the replicated 10h) kept all-gathered, whole
    gathered = options[K.OP_GATHERED_INPUTS] * 4.0 * model[K.M_HIDDEN] * (1.0 - 1.0 / split_repl)
    full_layer = tokens * (
        model[K.M_ACT_REPLICATED] / split_repl + gathered + model[K.M_ACT_SPLIT] / t + model[K.M_ACT_CORE] / t
    )
    if rc == 2.0:
        per_layer = tokens * 2.0 * model[K.M_HIDDEN] / split_repl
    elif rc == 1.0:
        per_layer = tokens * (model[K.M_ACT_REPLICATED] / split_repl + gathered + model[K.M_ACT_SPLIT] / t)
    else:
        per_layer = full_layer
    in_flight = min(m, p)
    if v > 1.0:
        in_flight *= 1.0 + (p - 1.0) / (p * v)
    activations = layers * per_layer * in_flight * (1.0 + options[K.OP_FRAGMENTATION])
    if rc == 2.0:
        # a full recomputation keeps each layer's input, the 16-bit residual stream that no
        # low-precision recipe casts; only the layer being recomputed holds GEMM inputs
        activations += full_layer * options[K.OP_ACT_STORE]
    else:
        activations *= options[K.OP_ACT_STORE]
    if p == 1.0:
        activations += tokens * model[K.M_VOCAB] * options[K.OP_LOGIT_BYTES] / t
        # the output projection's all-gathered 16-bit input (no low-precision recipe casts it)
        activations += options[K.OP_GATHERED_INPUTS] * tokens * 2.0 * model[K.M_HIDDEN] * (1.0 - 1.0 / split_repl)
    return weights + grads + state + activations + options[K.OP_WORKSPACE]


@jit
def gradient_collectives(nbytes, group, per_domain, hw, options, zero, most, m):
    """Seconds per step of the data-parallel collectives of ``nbytes`` of gradients among
    ``group`` GPUs, ``per_domain`` of them in each NVLink domain: one all-reduce without ZeRO
    (which SHARP / NVLS shorten; ZeRO 1-2: its reduce-scatter + all-gather pair, no in-network
    reduction), or under ZeRO-3 (FSDP) every layer's parameters gathered again for every
    micro-batch, forward and backward, and its gradients reduce-scattered once: 1 + 2 m
    half-all-reduces of the volume, each of the ``most`` layers' collectives paying its own
    latency."""
    reduce = options[K.OP_IN_NETWORK] if zero == 0.0 else 0.0
    dp = hierarchical_allreduce(nbytes, group, per_domain, hw, reduce * hw[K.HW_NVLS], reduce * hw[K.HW_SHARP])
    if zero >= 3.0:
        latency = hierarchical_allreduce(0.0, group, per_domain, hw, 0.0, 0.0)
        dp = (dp - latency) * 0.5 * (1.0 + 2.0 * m) + latency * 0.5 * (1.0 + 2.0 * m) * most
    return dp


@jit
def data_parallel_seconds(lay, hw, model, options, most, m):
    """(parameters on the busiest stage, seconds of its data-parallel collectives per step) with
    ``most`` layers and ``m`` micro-batches, for the stage with the most parameters (the first).
    Each parameter's gradients are reduced over the ranks that hold a replica of it
    (Megatron-Core's rank order: tensor, then expert, then expert-data-parallel):

    - dense (most x shared / t + embedding / t parameters): the d x c data ranks, t apart,
      floor(domain / t) of them per NVLink domain (1 where t spans domains);
    - expert (most x expert / (et x e) parameters, et = ``expert_tensor``): the d x c x t /
      (et x e) expert-data-parallel ranks, et x e apart, max(1, floor(domain / (et x e))) per
      domain.

    Each group's volume (parameters x gradient bytes) is costed by ``gradient_collectives``;
    where the two groups are the same (no experts, e = 1, or folded experts with e = t) one
    collective carries both, bit for bit as one group."""
    t, d, c, e, zero = lay[K.LA_TP], lay[K.LA_DP], lay[K.LA_CP], lay[K.LA_EP], lay[K.LA_ZERO]
    domain = hw[K.HW_DOMAIN]
    grad = options[K.OP_GRAD_COMM_BYTES]
    et = expert_tensor(t, d, c, e)
    dense = most * model[K.M_SHARED_PARAMS] / t + model[K.M_EMBED_PARAMS] / t
    expert = most * model[K.M_EXPERT_PARAMS] / (et * e)
    params = most * (model[K.M_SHARED_PARAMS] / t + model[K.M_EXPERT_PARAMS] / (et * e)) + model[K.M_EMBED_PARAMS] / t
    group = d * c
    per_domain = np.floor(domain / t) if t <= domain else 1.0
    expert_group = expert_replicas(t, d, c, e)
    expert_per_domain = max(1.0, np.floor(domain / (et * e)))
    if expert == 0.0 or (expert_group == group and expert_per_domain == per_domain):
        return params, gradient_collectives(params * grad, group, per_domain, hw, options, zero, most, m)
    dp = gradient_collectives(dense * grad, group, per_domain, hw, options, zero, most, m)
    dp += gradient_collectives(expert * grad, expert_group, expert_per_domain, hw, options, zero, most, m)
    return params, dp


@jit
def evaluate_pair(lay, hw, model, ctab, options, res):
    """Fill ``res`` (N_RESULT_FIELDS) for one layout on one hardware row."""
    for f in range(K.N_RESULT_FIELDS):
        res[f] = np.nan
    t, p, d, c, e = lay[K.LA_TP], lay[K.LA_PP], lay[K.LA_DP], lay[K.LA_CP], lay[K.LA_EP]
    v, b, zero, rc = lay[K.LA_VPP], lay[K.LA_MB], lay[K.LA_ZERO], lay[K.LA_RECOMPUTE]
    n = t * p * d * c
    m = model[K.M_GLOBAL_BATCH] / (d * b)
    mem = memory_bytes(lay, model, options, m)  # finite for any degrees >= 1; checked last
    reason = layout_reason(lay, hw, model, ctab, options, mem)
    if reason != K.REASON_VALID:
        res[K.R_REASON] = reason
        return
    ct = ctab[int(hw[K.HW_CT]), int(lay[K.LA_TP_INDEX]), int(rc), int(lay[K.LA_SP])]
    act = options[K.OP_ACT_BYTES]
    h = model[K.M_HIDDEN]
    # the stages hold ceil(L / p) or floor(L / p) layers; the output layer sits on the last,
    # which gets the fewer: the slowest stage sets the pace of the pipeline
    most, fewest = stage_layers(model[K.M_LAYERS], p, v)
    tokens = b * model[K.M_SEQ] / c
    # per layer and micro-batch: tensor parallel (``tensor_seconds``)
    tp = tensor_seconds(lay, hw, model, options, tokens)
    # context parallel: ring exchange of K and V chunks (c - 1 steps), forward + 2x backward
    # (+ forward again in a full recomputation), hidden behind the attention compute
    cp = 0.0
    if c > 1.0:
        passes = 3.0 + (1.0 if rc == 2.0 else 0.0)
        bw, lat = group_path(t * c, hw)
        chunk = tokens * 2.0 * model[K.M_KV_DIM] / t * act
        exchange = passes * (c - 1.0) * (chunk / bw + lat)
        cp = max(0.0, exchange - tokens * ct[K.CT_ATTENTION])
    # expert parallel: dispatch + combine all-to-alls, forward and backward (+ recomputation),
    # among the e expert ranks (et x e consecutive GPUs) of the routed tokens' hidden states
    ep = 0.0
    if e > 1.0:
        count = 4.0 + (2.0 if rc == 2.0 else 0.0)
        routed = tokens * model[K.M_TOPK] * h * act / t
        ep = model[K.M_MOE_FRACTION] * count * all_to_all_seconds(routed, e, expert_tensor(t, d, c, e) * e, hw)
    per_layer = tokens * ct[K.CT_LAYER] + tp + cp + ep
    logits = tokens * ct[K.CT_LOGITS]
    if most * per_layer > fewest * per_layer + logits:
        layers, on_last = most, 0.0
    else:
        layers, on_last = fewest, 1.0
    compute = layers * tokens * ct[K.CT_LAYER] + on_last * logits
    tp *= layers
    cp *= layers
    ep *= layers
    t_mb = compute + tp + cp + ep
    # pipeline: bubble and the point-to-point sends (1/t of the activation each: scatter-gather)
    bubble = (p - 1.0) / v * t_mb
    pp = 0.0
    if p > 1.0:
        bw, lat = group_path(n, hw)
        pp = 2.0 * v * m * (tokens * h * act / t / bw + lat)
    params, dp = data_parallel_seconds(lay, hw, model, options, most, m)
    window = m * compute if zero >= 3.0 else compute
    exposed = dp - options[K.OP_OVERLAP_EFF] * min(dp, window) if options[K.OP_DP_OVERLAP] > 0.0 else dp
    expert = most * model[K.M_EXPERT_PARAMS] / (expert_tensor(t, d, c, e) * e)
    updated = per_gpu_params(params, expert, d * c, expert_replicas(t, d, c, e), zero >= 1.0)
    optimizer = updated * options[K.OP_UPDATE_BYTES] / hw[K.HW_HBM]
    step = m * t_mb + bubble + pp + exposed + optimizer
    job_tokens = model[K.M_GLOBAL_BATCH] * model[K.M_SEQ]
    res[K.R_STEP] = step
    res[K.R_TOKENS] = job_tokens / step
    res[K.R_MODEL_TFLOPS] = model[K.M_MODEL_FLOPS] * job_tokens / step / n / 1e12
    res[K.R_HW_TFLOPS] = model[K.M_HW_FLOPS + int(rc)] * job_tokens / step / n / 1e12
    res[K.R_MFU] = res[K.R_MODEL_TFLOPS] * 1e12 / hw[K.HW_PEAK]
    res[K.R_MEMORY] = mem
    res[K.R_COMPUTE] = m * compute
    res[K.R_BUBBLE] = bubble
    res[K.R_TP] = m * tp
    res[K.R_CP] = m * cp
    res[K.R_EP] = m * ep
    res[K.R_PP] = pp
    res[K.R_DP] = dp
    res[K.R_DP_EXPOSED] = exposed
    res[K.R_OPTIMIZER] = optimizer
    res[K.R_COST] = hw[K.HW_PRICE] * n * step / 3600.0
    res[K.R_ENERGY] = hw[K.HW_POWER] * n * step
    res[K.R_MICROBATCHES] = m
    res[K.R_REASON] = K.REASON_VALID


def _evaluate_llm(layouts, hw, model, ctab, options, out):
    """Fill ``out`` (N x H, N_RESULT_FIELDS): row i x H + j is layout i on hardware row j."""
    n_hw = hw.shape[0]
    for flat in prange(layouts.shape[0] * n_hw):
        evaluate_pair(layouts[flat // n_hw], hw[flat % n_hw], model, ctab, options, out[flat])


evaluate_llm = parallel_jit(_evaluate_llm)
#: the same, serial: for a few pairs (one layout's prediction), where starting the thread pool costs more than the work
evaluate_llm_serial = jit(serial_twin(_evaluate_llm, "_evaluate_llm_serial"))
