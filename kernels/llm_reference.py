"""Plain numpy implementation of ``kernels.llm.evaluate_llm``, written independently (whole
arrays at once, no per-pair loop) for the agreement tests: the same formulas, NaN where a
layout is invalid, the same reason codes."""

import numpy as np

from . import llm_layout as K


def _ring(nbytes, n, bw, latency):
    with np.errstate(divide="ignore", invalid="ignore"):
        out = 2.0 * (n - 1.0) / n * nbytes / bw + 2.0 * (n - 1.0) * latency
    return np.where(n <= 1.0, 0.0, out)


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
    layers = np.ceil(M[K.M_LAYERS] / (p * v)) * v
    tokens = b * M[K.M_SEQ] / c
    split_repl = np.where(sp > 0, t, 1.0)
    # memory
    params = layers * (M[K.M_SHARED_PARAMS] / t + M[K.M_EXPERT_PARAMS] / (t * e)) + M[K.M_EMBED_PARAMS] / t
    shards = d * c
    states = params * (options[K.OP_WEIGHT_BYTES] / np.where(zero >= 3, shards, 1.0)
                       + options[K.OP_GRAD_BYTES] / np.where(zero >= 2, shards, 1.0)
                       + options[K.OP_OPT_BYTES] / np.where(zero >= 1, shards, 1.0))
    gathered = (M[K.M_SHARED_PARAMS] / t + M[K.M_EXPERT_PARAMS] / (t * e)) * (
        2.0 * options[K.OP_WEIGHT_BYTES] + options[K.OP_GRAD_COMM_BYTES])
    states = states + np.where(zero >= 3, gathered, 0.0)
    keep_repl = M[K.M_ACT_REPLICATED] / split_repl
    keep_split = M[K.M_ACT_SPLIT] / t
    keep_core = M[K.M_ACT_CORE] / t
    per_layer = tokens * np.select([rc == 2, rc == 1], [2.0 * h / split_repl, keep_repl + keep_split],
                                   keep_repl + keep_split + keep_core)
    factor = np.minimum(m, p) * np.where(v > 1, 1.0 + (p - 1.0) / (p * v), 1.0)
    acts = layers * per_layer * factor + np.where(rc == 2, tokens * (keep_repl + keep_split + keep_core), 0.0)
    acts = acts + np.where(p == 1, tokens * M[K.M_VOCAB] * options[K.OP_LOGIT_BYTES] / t, 0.0)
    mem = states + acts + options[K.OP_WORKSPACE]
    # reasons, the first that applies
    kv_heads = M[K.M_KV_DIM] / (h / M[K.M_HEADS])
    net = H[K.HW_NET_BW] * H[K.HW_NICS_PER_GPU]
    experts = M[K.M_EXPERTS]
    checks = [
        (K.REASON_PRECISION, ~(ct[:, K.CT_LAYER] > 0)),
        (K.REASON_TP_HEADS, (np.mod(M[K.M_HEADS], t) != 0) | ((t < kv_heads) & (np.mod(kv_heads, t) != 0))
         | ((t > kv_heads) & (np.mod(t, kv_heads) != 0))),
        (K.REASON_TP_FFN, (np.mod(M[K.M_FFN], t) != 0) | ((experts > 0) & (np.mod(M[K.M_MOE_FFN], t) != 0))),
        (K.REASON_TP_DOMAIN, t > H[K.HW_DOMAIN]),
        (K.REASON_CP_SEQ, np.mod(M[K.M_SEQ], c) != 0),
        (K.REASON_EP_EXPERTS, ((experts == 0) & (e > 1)) | ((experts > 0) & (np.mod(experts, e) != 0))),
        (K.REASON_EP_GROUP, np.mod(d * c, e) != 0),
        (K.REASON_BATCH, np.mod(M[K.M_GLOBAL_BATCH], d * b) != 0),
        (K.REASON_PP_LAYERS, p * v > M[K.M_LAYERS]),
        (K.REASON_INTERLEAVE, (v > 1) & ((p == 1) | (np.mod(m, p) != 0))),
        (K.REASON_NO_NETWORK, (n > H[K.HW_DOMAIN]) & ~(net > 0)),
        (K.REASON_MEMORY, mem > H[K.HW_MEMORY]),
    ]
    reason = np.zeros(n_lay * n_hw)
    for code, bad in reversed(checks):
        reason = np.where(bad, code, reason)
    # times
    intra_bw, intra_lat, net_lat = H[K.HW_INTRA_BW], H[K.HW_INTRA_LAT], H[K.HW_NET_LAT]
    act = options[K.OP_ACT_BYTES]
    compute = layers * tokens * ct[:, K.CT_LAYER] + tokens * ct[:, K.CT_LOGITS]
    extra = np.where(rc == 2, 2.0, 0.0)
    tp = np.where(t > 1, layers * (4.0 + extra) * _ring(tokens * h * act, t, intra_bw, intra_lat), 0.0)
    cp_inside = t * c <= H[K.HW_DOMAIN]
    bw_cp, lat_cp = np.where(cp_inside, intra_bw, net), np.where(cp_inside, intra_lat, net_lat)
    with np.errstate(divide="ignore", invalid="ignore"):
        exchange = (3.0 + extra / 2.0) * (c - 1.0) * (tokens * 2.0 * M[K.M_KV_DIM] / t * act / bw_cp + lat_cp)
        cp = np.where(c > 1, layers * np.maximum(0.0, exchange - tokens * ct[:, K.CT_ATTENTION]), 0.0)
        ep_inside = t * e <= H[K.HW_DOMAIN]
        bw_ep, lat_ep = np.where(ep_inside, intra_bw, net), np.where(ep_inside, intra_lat, net_lat)
        a2a = tokens * M[K.M_TOPK] * h * act / t * (e - 1.0) / e / bw_ep + (e - 1.0) * lat_ep
        ep = np.where(e > 1, layers * M[K.M_MOE_FRACTION] * (4.0 + extra) * a2a, 0.0)
        t_mb = compute + tp + cp + ep
        bubble = (p - 1.0) / v * t_mb
        pp_inside = n <= H[K.HW_DOMAIN]
        bw_pp, lat_pp = np.where(pp_inside, intra_bw, net), np.where(pp_inside, intra_lat, net_lat)
        pp = np.where(p > 1, 2.0 * v * m * (tokens * h * act / t / bw_pp + lat_pp), 0.0)
        group = d * c
        per_domain = np.where(t <= H[K.HW_DOMAIN], np.floor(H[K.HW_DOMAIN] / t), 1.0)
        k = np.maximum(np.minimum(group, per_domain), 1.0)
        domains = np.ceil(group / k)
        nbytes = params * options[K.OP_GRAD_COMM_BYTES]
        across = np.where(domains > 1, _ring(nbytes / k, domains, net, net_lat), 0.0)
        dp = _ring(nbytes, k, intra_bw, intra_lat) + across
        lat = (2.0 * (k - 1.0) * intra_lat + np.where(domains > 1, 2.0 * (domains - 1.0) * net_lat, 0.0))
        halves = 0.5 * (1.0 + 2.0 * m)
        dp = np.where(zero >= 3, (dp - lat) * halves + lat * halves * layers, dp)
        window = np.where(zero >= 3, m * compute, compute)
        exposed = np.maximum(0.0, dp - window) if options[K.OP_DP_OVERLAP] > 0 else dp
        optimizer = params / np.where(zero >= 1, group, 1.0) * options[K.OP_UPDATE_BYTES] / H[K.HW_HBM]
        step = m * t_mb + bubble + pp + exposed + optimizer
    job_tokens = M[K.M_GLOBAL_BATCH] * M[K.M_SEQ]
    out = np.full((n_lay * n_hw, K.N_RESULT_FIELDS), np.nan)
    out[:, K.R_STEP] = step
    out[:, K.R_TOKENS] = job_tokens / step
    out[:, K.R_MODEL_TFLOPS] = M[K.M_MODEL_FLOPS] * job_tokens / step / n / 1e12
    hw_flops = np.asarray(M[K.M_HW_FLOPS:K.M_HW_FLOPS + 3])[rc.astype(int)]
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
