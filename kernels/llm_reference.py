"""Plain numpy implementation of ``kernels.llm.evaluate_llm``, written independently (whole
arrays at once, no per-pair loop) for the agreement tests: the same formulas, NaN where a
layout is invalid, the same reason codes."""

import numpy as np

from . import llm_columns as K


def _ring(nbytes, n, bw, latency):
    with np.errstate(divide="ignore", invalid="ignore"):
        out = 2.0 * (n - 1.0) / n * nbytes / bw + 2.0 * (n - 1.0) * latency
    return np.where(n <= 1.0, 0.0, out)


def _allreduce(nbytes, n, bw, latency, in_network):
    ring = _ring(nbytes, n, bw, latency)
    with np.errstate(divide="ignore", invalid="ignore"):
        switch = nbytes / bw + 2.0 * latency
    return np.where((in_network > 0) & (n > 1.0), np.minimum(ring, switch), ring)


def _path(domains, H):
    """Bandwidth and latency across the fabric for groups spanning ``domains`` domains."""
    bw = H[K.HW_NET_BW] * H[K.HW_NICS_PER_GPU]
    level = np.where(domains > H[K.HW_TIER2], 2, np.where(domains > H[K.HW_TIER1], 1, 0))
    divisor = np.choose(level, [np.ones_like(bw), H[K.HW_OVERSUB1], H[K.HW_OVERSUB1] * H[K.HW_OVERSUB2]])
    return bw / divisor, H[K.HW_NET_LAT] + 2.0 * level * H[K.HW_HOP_LAT]


def evaluate_llm_reference(layouts, hw, model, ctab, options):
    """(N x H, N_RESULT_FIELDS) results of every layout on every hardware row (row-major:
    layout i, hardware j at i x H + j)."""
    n_lay, n_hw = layouts.shape[0], hw.shape[0]
    L = {f: np.repeat(layouts[:, f], n_hw) for f in range(K.N_LAYOUT_FIELDS)}
    H = {f: np.tile(hw[:, f], n_lay) for f in range(K.N_HW_FIELDS)}
    t, p, d, c, e = L[K.LA_TP], L[K.LA_PP], L[K.LA_DP], L[K.LA_CP], L[K.LA_EP]
    v, b, zero, rc, sp = L[K.LA_VPP], L[K.LA_MB], L[K.LA_ZERO], L[K.LA_RECOMPUTE], L[K.LA_SP]
    M = model
    ct = ctab[H[K.HW_CT].astype(int), L[K.LA_TP_INDEX].astype(int), rc.astype(int), sp.astype(int)]
    n = t * p * d * c
    m = M[K.M_GLOBAL_BATCH] / (d * b)
    h = M[K.M_HIDDEN]
    chunks = np.where(v > 1, p * v, p)  # layers split into p x v chunks, v of them on each rank
    most, fewest = np.ceil(M[K.M_LAYERS] / chunks) * (chunks / p), np.floor(M[K.M_LAYERS] / chunks) * (chunks / p)
    tokens = b * M[K.M_SEQ] / c
    split_repl = np.where(sp > 0, t, 1.0)
    # memory
    # expert tensor degree: t when the experts fit in the data x context ranks, else 1 (folding)
    et = np.where(np.mod(d * c, e) == 0, t, 1.0)
    params = most * (M[K.M_SHARED_PARAMS] / t + M[K.M_EXPERT_PARAMS] / (et * e)) + M[K.M_EMBED_PARAMS] / t
    # ZeRO shards the dense parameters' states over the d x c data ranks and the experts' over
    # their d x c x t / (et x e) expert-data replicas
    expert_params = most * M[K.M_EXPERT_PARAMS] / (et * e)
    dense_params = params - expert_params
    shards, expert_shards = d * c, d * c * t / (et * e)

    def kept(stage):
        """Parameters per GPU of one kind of state sharded from ZeRO ``stage`` on."""
        on = zero >= stage
        return dense_params / np.where(on, shards, 1.0) + expert_params / np.where(on, expert_shards, 1.0)

    states = (
        kept(3) * options[K.OP_WEIGHT_BYTES] + kept(2) * options[K.OP_GRAD_BYTES] + kept(1) * options[K.OP_OPT_BYTES]
    )
    layer_params = M[K.M_SHARED_PARAMS] / t + M[K.M_EXPERT_PARAMS] / (et * e)
    gathered = layer_params * (2.0 * options[K.OP_WEIGHT_BYTES] + options[K.OP_GRAD_COMM_BYTES])
    rs_buffer = layer_params * options[K.OP_GRAD_BYTES]
    states = states + np.where(zero >= 3, gathered, np.where(options[K.OP_RS_BUFFER] > 0, rs_buffer, 0.0))
    # DTensor tensor parallelism keeps the attention and FFN inputs all-gathered (4h a token)
    keep_repl = M[K.M_ACT_REPLICATED] / split_repl + options[K.OP_GATHERED_INPUTS] * 4.0 * h * (1.0 - 1.0 / split_repl)
    keep_split = M[K.M_ACT_SPLIT] / t
    keep_core = M[K.M_ACT_CORE] / t
    per_layer = tokens * np.select(
        [rc == 2, rc == 1], [2.0 * h / split_repl, keep_repl + keep_split], keep_repl + keep_split + keep_core
    )
    factor = np.minimum(m, p) * np.where(v > 1, 1.0 + (p - 1.0) / (p * v), 1.0)
    # full recomputation: the checkpointed layer inputs stay 16-bit whatever the precision; the
    # recomputed layer, like every stored activation otherwise, at the precision's stored bytes
    stored = most * per_layer * factor * (1.0 + options[K.OP_FRAGMENTATION])
    recomputed = tokens * (keep_repl + keep_split + keep_core) * options[K.OP_ACT_STORE]
    acts = np.where(rc == 2, stored + recomputed, stored * options[K.OP_ACT_STORE])
    output_input = options[K.OP_GATHERED_INPUTS] * tokens * 2.0 * h * (1.0 - 1.0 / split_repl)
    acts = acts + np.where(p == 1, tokens * M[K.M_VOCAB] * options[K.OP_LOGIT_BYTES] / t + output_input, 0.0)
    mem = states + acts + options[K.OP_WORKSPACE]
    # reasons, the first that applies
    kv_heads = M[K.M_KV_HEADS]
    net = H[K.HW_NET_BW] * H[K.HW_NICS_PER_GPU]
    experts = M[K.M_EXPERTS]
    checks = [
        (K.REASON_PRECISION, ~(ct[:, K.CT_LAYER] > 0)),
        (
            K.REASON_TP_HEADS,
            (np.mod(M[K.M_HEADS], t) != 0)
            | ((t < kv_heads) & (np.mod(kv_heads, t) != 0))
            | ((t > kv_heads) & (np.mod(t, kv_heads) != 0)),
        ),
        (K.REASON_TP_FFN, (np.mod(M[K.M_FFN], t) != 0) | ((experts > 0) & (np.mod(M[K.M_MOE_FFN], t) != 0))),
        (K.REASON_TP_DOMAIN, (t > H[K.HW_DOMAIN]) & ~(net > 0)),
        (K.REASON_CP_SEQ, np.mod(M[K.M_SEQ], c) != 0),
        (K.REASON_EP_EXPERTS, ((experts == 0) & (e > 1)) | ((experts > 0) & (np.mod(experts, e) != 0))),
        (K.REASON_EP_GROUP, (np.mod(d * c, e) != 0) & (np.mod(t * d * c, e) != 0)),
        (K.REASON_BATCH, np.mod(M[K.M_GLOBAL_BATCH], d * b) != 0),
        (K.REASON_PP_LAYERS, (p > M[K.M_LAYERS]) | ((v > 1) & (p * v > M[K.M_LAYERS] + 2.0))),
        (K.REASON_INTERLEAVE, (v > 1) & ((p == 1) | (m < p))),
        (K.REASON_NO_NETWORK, (n > H[K.HW_DOMAIN]) & ~(net > 0)),
        (
            K.REASON_FABRIC,
            np.ceil(n / H[K.HW_DOMAIN])
            > np.select([H[K.HW_TIERS] <= 1, H[K.HW_TIERS] <= 2], [H[K.HW_TIER1], H[K.HW_TIER2]], np.inf),
        ),
        (K.REASON_MEMORY, mem > H[K.HW_MEMORY] * (1.0 + options[K.OP_MEMORY_MARGIN])),
    ]
    reason = np.zeros(n_lay * n_hw)
    for code, bad in reversed(checks):
        reason = np.where(bad, code, reason)
    # times, per layer and micro-batch first
    intra_bw, intra_lat, dom = H[K.HW_INTRA_BW], H[K.HW_INTRA_LAT], H[K.HW_DOMAIN]
    innet = options[K.OP_IN_NETWORK]
    act = options[K.OP_ACT_BYTES]
    extra = np.where(rc == 2, 2.0, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        # a tensor group beyond the NVLink domain: a ring inside each domain on the whole message,
        # then one among the domains on 1 / domain of it, over the fabric path of that many domains
        message = tokens * h * act
        inside = _allreduce(message, t, intra_bw, intra_lat, innet * H[K.HW_NVLS] * (1 - sp))
        tp_domains = np.ceil(t / dom)
        bw_t, lat_t = _path(tp_domains, H)
        spans = _ring(message, dom, intra_bw, intra_lat) + _ring(message / dom, tp_domains, bw_t, lat_t)
        tp1 = np.where(t > 1, (4.0 + extra) * np.where(t > dom, spans, inside), 0.0)
        bw_n, lat_n = _path(np.ceil(t * c / dom), H)
        cp_inside = t * c <= dom
        bw_cp, lat_cp = np.where(cp_inside, intra_bw, bw_n), np.where(cp_inside, intra_lat, lat_n)
        exchange = (3.0 + extra / 2.0) * (c - 1.0) * (tokens * 2.0 * M[K.M_KV_DIM] / t * act / bw_cp + lat_cp)
        cp1 = np.where(c > 1, np.maximum(0.0, exchange - tokens * ct[:, K.CT_ATTENTION]), 0.0)
        # the all-to-all among the e expert ranks over et x e GPUs: inside a domain on NVLink;
        # across domains the shares of the ranks in the GPU's own domain on NVLink, the others on
        # the fabric, at the same time, and a fabric latency per peer
        ep_domains = np.ceil(et * e / dom)
        bw_n, lat_n = _path(ep_domains, H)
        routed = tokens * M[K.M_TOPK] * h * act / t
        per_domain = np.maximum(e / ep_domains, 1.0)
        spread = np.maximum(routed * (per_domain - 1.0) / e / intra_bw, routed * (e - per_domain) / e / bw_n)
        a2a = np.where(
            et * e <= dom,
            routed * (e - 1.0) / e / intra_bw + (e - 1.0) * intra_lat,
            spread + (e - 1.0) * lat_n,
        )
        ep1 = np.where(e > 1, M[K.M_MOE_FRACTION] * (4.0 + extra) * a2a, 0.0)
        tp1 = tp1 * (1.0 - options[K.OP_TP_HIDE])
        unit = tokens * ct[:, K.CT_LAYER] + tp1 + cp1 + ep1
        out_layer = tokens * ct[:, K.CT_LOGITS]
        last_paces = ~(most * unit > fewest * unit + out_layer)
        layers = np.where(last_paces, fewest, most)
        compute = layers * tokens * ct[:, K.CT_LAYER] + np.where(last_paces, out_layer, 0.0)
        tp, cp, ep = layers * tp1, layers * cp1, layers * ep1
        t_mb = compute + tp + cp + ep
        bubble = (p - 1.0) / v * t_mb
        bw_n, lat_n = _path(np.ceil(n / dom), H)
        pp_inside = n <= dom
        bw_pp, lat_pp = np.where(pp_inside, intra_bw, bw_n), np.where(pp_inside, intra_lat, lat_n)
        pp = np.where(p > 1, 2.0 * v * m * (tokens * h * act / t / bw_pp + lat_pp), 0.0)
        group = d * c
        halves = 0.5 * (1.0 + 2.0 * m)
        plain = np.where(zero == 0, innet, 0.0)

        def gradients(nbytes, n_ranks, per_domain):
            """The hierarchical all-reduce (ZeRO-3: 1 + 2 m halves, a latency per layer)."""
            k = np.maximum(np.minimum(n_ranks, per_domain), 1.0)
            domains = np.ceil(n_ranks / k)
            bw_dp, lat_dp = _path(domains, H)
            across = np.where(domains > 1, _allreduce(nbytes / k, domains, bw_dp, lat_dp, plain * H[K.HW_SHARP]), 0.0)
            out = _allreduce(nbytes, k, intra_bw, intra_lat, plain * H[K.HW_NVLS]) + across
            lat = 2.0 * (k - 1.0) * intra_lat + np.where(domains > 1, 2.0 * (domains - 1.0) * lat_dp, 0.0)
            return np.where(zero >= 3, (out - lat) * halves + lat * halves * most, out)

        # dense gradients over the d x c data ranks (t apart); expert gradients over the
        # d x c x t / (et x e) expert-data ranks (et x e apart); one collective where they coincide
        dense_domain = np.where(t <= dom, np.floor(dom / t), 1.0)
        expert_ranks = group * t / (et * e)
        expert_domain = np.maximum(np.floor(dom / (et * e)), 1.0)
        grad = options[K.OP_GRAD_COMM_BYTES]
        dense = most * M[K.M_SHARED_PARAMS] / t + M[K.M_EMBED_PARAMS] / t
        expert = most * M[K.M_EXPERT_PARAMS] / (et * e)
        same = (expert == 0) | ((expert_ranks == group) & (expert_domain == dense_domain))
        dp = np.where(
            same,
            gradients(params * grad, group, dense_domain),
            gradients(dense * grad, group, dense_domain) + gradients(expert * grad, expert_ranks, expert_domain),
        )
        window = np.where(zero >= 3, m * compute, compute)
        exposed = dp - options[K.OP_OVERLAP_EFF] * np.minimum(dp, window) if options[K.OP_DP_OVERLAP] > 0 else dp
        optimizer = kept(1) * options[K.OP_UPDATE_BYTES] / H[K.HW_HBM]
        step = m * t_mb + bubble + pp + exposed + optimizer
    job_tokens = M[K.M_GLOBAL_BATCH] * M[K.M_SEQ]
    out = np.full((n_lay * n_hw, K.N_RESULT_FIELDS), np.nan)
    out[:, K.R_STEP] = step
    out[:, K.R_TOKENS] = job_tokens / step
    out[:, K.R_MODEL_TFLOPS] = M[K.M_MODEL_FLOPS] * job_tokens / step / n / 1e12
    hw_flops = np.asarray(M[K.M_HW_FLOPS : K.M_HW_FLOPS + 3])[rc.astype(int)]
    out[:, K.R_HW_TFLOPS] = hw_flops * job_tokens / step / n / 1e12
    out[:, K.R_MFU] = M[K.M_MODEL_FLOPS] * job_tokens / step / n / H[K.HW_PEAK]
    out[:, K.R_MEMORY] = mem
    out[:, K.R_COMPUTE] = m * compute
    out[:, K.R_BUBBLE] = bubble
    out[:, K.R_TP] = m * tp
    out[:, K.R_CP] = m * cp
    out[:, K.R_EP] = m * ep
    out[:, K.R_PP] = pp
    out[:, K.R_DP] = dp
    out[:, K.R_DP_EXPOSED] = exposed
    out[:, K.R_OPTIMIZER] = optimizer
    out[:, K.R_COST] = H[K.HW_PRICE] * n * step / 3600.0
    out[:, K.R_ENERGY] = H[K.HW_POWER] * n * step
    out[:, K.R_MICROBATCHES] = m
    out[reason != 0] = np.nan
    out[:, K.R_REASON] = reason
    return out
