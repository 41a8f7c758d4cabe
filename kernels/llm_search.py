"""The LLM layout search inside the kernel: the best layout per cluster design, with pruning.

``search_llm(stems, hw, model, ctab, options, choices, best_res, best_lay, counts)`` enumerates,
for each stem (tp, pp, dp, cp, ep, micro-batch: one row of the stem table, ``ST_*``) and each
hardware row, every interleave factor, ZeRO stage, recomputation and sequence-parallel setting
of ``choices`` in the order of ``paigrid.llm.parallelism.enumerate_layouts``, and keeps the fastest
valid layout.  Two prunings skip a layout before the step-time model runs, both exact for the
best (tested equal to evaluating every layout):

- memory first: a layout whose busiest stage does not fit (``llm.memory_bytes`` above the
  GPU's memory times 1 + the memory margin) is invalid whatever else holds;
- then dominance: ``step_lower_bound`` (the compute of the lightest stage's layers for the m
  micro-batches and the bubble) is a lower bound of the step computed in the same floating-point
  order, so a layout whose bound is not below the best step found so far cannot be strictly
  faster (ties go to the earlier layout, as in the exhaustive search); nor can one whose
  bound exceeds the step of any valid layout, and ``probe_llm`` first evaluates a few likely
  good layouts of every stem to find one (the incumbent).

Everything else is ``llm.evaluate_pair``, the kernel the cube uses.  Pruning serves bests only:
a full cube evaluates every layout.
"""

import numpy as np
from numba import prange

from . import llm_columns as K
from .jit import jit, parallel_jit, serial_twin
from .llm import data_parallel_seconds, evaluate_pair, memory_bytes, stage_layers, tensor_seconds
from .llm_columns import (  # the stem table, choices vector and counts (columns declared with the others)
    C_BOUND,
    C_EVALUATED,
    C_LAYOUTS,
    C_MEMORY,
    C_VALID,
    CH_EVERY_VPP,
    N_COUNTS,
    ST_CP,
    ST_DP,
    ST_EP,
    ST_MB,
    ST_PP,
    ST_SHAPE,
    ST_TP,
)

#: chunks a pipeline may hold beyond its layers (the embedding and the loss, as ``llm.layout_reason``)
EXTRA_CHUNKS = 2.0


#: relative margin taken off every bound: the kernel sums the same terms in another order (its
#: per-stage choice compares sums the bound cannot reproduce bit for bit), so the bound holds in
#: exact arithmetic and this margin, far above the few roundings' 1e-15, keeps it below the
#: kernel's rounded step
BOUND_MARGIN = 1e-9


@jit
def micro_batch_bound(most, fewest, tokens, ct_layer, logits, tp):
    """A lower bound of ``evaluate_pair``'s ``t_mb`` [s] (one micro-batch through the pacing
    stage) from its compute and tensor-parallel time alone (no context or expert exchange): the
    kernel paces the pipeline by the slower of the busiest stage (``most`` layers) and the last
    (the ``fewest`` and the output layer's ``logits``), so the greater of the two with each
    layer at ``ct_layer`` s per token plus ``tp`` s (less ``BOUND_MARGIN``)."""
    unit = tokens * ct_layer + tp
    return max(most * unit, fewest * unit + logits) * (1.0 - BOUND_MARGIN)


@jit
def step_bound(t_mb, m, p, v):
    """A lower bound of the step [s] from a lower bound of ``t_mb``: m micro-batches and the
    (p - 1) / v bubble, in the kernel's order (the pipeline sends, data-parallel time and
    optimizer it adds are >= 0)."""
    return m * t_mb + (p - 1.0) / v * t_mb


@jit
def update_terms(lay, hw, model, options, most, m):
    """(seconds of the data-parallel collectives, of the optimizer) per step of a layout with
    ``most`` layers on its busiest stage and ``m`` micro-batches, as ``evaluate_pair`` computes
    them."""
    params, dp = data_parallel_seconds(lay, hw, model, options, most, m)
    updated = params / (lay[K.LA_DP] * lay[K.LA_CP] if lay[K.LA_ZERO] >= 1.0 else 1.0)
    return dp, updated * options[K.OP_UPDATE_BYTES] / hw[K.HW_HBM]


@jit
def exposed_bound(dp, window, options):
    """A lower bound of the exposed data-parallel time [s] from an upper bound of its overlap
    ``window`` (``evaluate_pair``'s dp - e min(dp, window), or dp without overlap): a wider
    window hides no less."""
    if options[K.OP_DP_OVERLAP] > 0.0:
        return dp - options[K.OP_OVERLAP_EFF] * min(dp, window)
    return dp


@jit
def compute_ceiling(most, fewest, tokens, ct_layer, logits):
    """An upper bound of ``evaluate_pair``'s per-micro-batch compute [s] (the overlap window):
    the kernel's compute is one of its two stages' (the busiest's ``most`` layers, or the
    ``fewest`` and the output layer), so the greater of the two, computed as it does."""
    return max(most * tokens * ct_layer, fewest * tokens * ct_layer + 1.0 * logits)


@jit
def step_lower_bound(lay, hw, model, ctab, options):
    """The bound ``search_stem`` prunes one layout on one hardware row with [s], computed as it
    computes it: ``step_bound`` of ``micro_batch_bound``, plus ``exposed_bound`` under the
    window's ceiling (``compute_ceiling``; m times it under ZeRO-3) and the optimizer time.  It
    never exceeds the step ``evaluate_pair`` computes (tested; NaN where the compute table has
    no entry)."""
    p, v, b = lay[K.LA_PP], lay[K.LA_VPP], lay[K.LA_MB]
    most, fewest = stage_layers(model[K.M_LAYERS], p, v)
    tokens = b * model[K.M_SEQ] / lay[K.LA_CP]
    ct = ctab[int(hw[K.HW_CT]), int(lay[K.LA_TP_INDEX]), int(lay[K.LA_RECOMPUTE]), int(lay[K.LA_SP])]
    logits = tokens * ct[K.CT_LOGITS]
    tp = tensor_seconds(lay, hw, model, options, tokens)
    m = model[K.M_GLOBAL_BATCH] / (lay[K.LA_DP] * b)
    bound = step_bound(micro_batch_bound(most, fewest, tokens, ct[K.CT_LAYER], logits, tp), m, p, v)
    ceiling = compute_ceiling(most, fewest, tokens, ct[K.CT_LAYER], logits)
    dp, optimizer = update_terms(lay, hw, model, options, most, m)
    window = m * ceiling if lay[K.LA_ZERO] >= 3.0 else ceiling
    return bound + exposed_bound(dp, window, options) + optimizer


@jit
def interleave_count(p, m, layers, choices):
    """How many interleave factors a stem of ``p`` stages and ``m`` micro-batches tries (the
    values themselves: ``interleave_value``)."""
    if p == 1.0:
        return 1
    if choices[CH_EVERY_VPP] > 0.0:
        return int(np.floor((layers + EXTRA_CHUNKS) / p))
    return int(choices[1])


@jit
def interleave_value(k, p, m, layers, choices):
    """The ``k``-th interleave factor of a stem, or 0 where the schedule does not apply (v > 1
    needs p x v <= layers + 2 chunks and at least p micro-batches)."""
    if p == 1.0:
        return 1.0
    v = k + 1.0 if choices[CH_EVERY_VPP] > 0.0 else choices[2 + k]
    if v == 1.0:
        return 1.0
    if v * p > layers + EXTRA_CHUNKS or m < p:
        return 0.0
    return v


@jit
def choice_offsets(choices):
    """(first ZeRO entry, ZeRO stages, first recompute entry, recompute codes, first sp entry,
    sp flags) of the choices vector."""
    zero_at = 2 + int(choices[1])
    n_zero = int(choices[zero_at])
    rc_at = zero_at + 1 + n_zero
    n_rc = int(choices[rc_at])
    sp_at = rc_at + 1 + n_rc
    return zero_at + 1, n_zero, rc_at + 1, n_rc, sp_at + 1, int(choices[sp_at])


@jit
def set_stem(stem, lay):
    """Write a stem's degrees into the layout row ``lay``."""
    lay[K.LA_TP], lay[K.LA_PP], lay[K.LA_DP] = stem[ST_TP], stem[ST_PP], stem[ST_DP]
    lay[K.LA_CP], lay[K.LA_EP], lay[K.LA_MB] = stem[ST_CP], stem[ST_EP], stem[ST_MB]
    lay[K.LA_TP_INDEX] = stem[ST_SHAPE]


@jit
def search_stem(stem, hw, model, ctab, options, choices, incumbent, res, lay, terms, best_res, best_lay, counts):
    """The best layout of one stem on one hardware row: fills ``best_res`` (N_RESULT_FIELDS),
    ``best_lay`` (N_LAYOUT_FIELDS) and ``counts`` (N_COUNTS); ``incumbent`` is the step [s] of a
    valid layout of the space on this hardware row (``probe_llm``; inf: none), so a layout whose
    bound exceeds it cannot be the best.  Where no layout is valid, ``best_res`` holds NaN and
    the reason of the last invalid layout (memory for one pruned by memory).  ``res``, ``lay``
    and ``terms`` (at least 5 x recompute x sp entries) are scratch.

    The tensor-parallel time and compute-table entries of the stem are looked up once per
    (recompute, sp); an interleave factor whose every bound exceeds the incumbent is skipped
    whole (its layouts counted as pruned by the bound); the others go layout by layout: memory,
    then the bound against the incumbent and the best so far, then ``evaluate_pair``."""
    for f in range(K.N_RESULT_FIELDS):
        best_res[f] = np.nan
    for f in range(N_COUNTS):
        counts[f] = 0.0
    for f in range(K.N_LAYOUT_FIELDS):
        best_lay[f] = np.nan
    set_stem(stem, lay)
    t, p, b = stem[ST_TP], stem[ST_PP], stem[ST_MB]
    layers = model[K.M_LAYERS]
    m = model[K.M_GLOBAL_BATCH] / (stem[ST_DP] * b)
    tokens = b * model[K.M_SEQ] / stem[ST_CP]
    cap = hw[K.HW_MEMORY] * (1.0 + options[K.OP_MEMORY_MARGIN])
    zero_at, n_zero, rc_at, n_rc, sp_at, n_sp = choice_offsets(choices)
    if t == 1.0:
        n_sp = 1
    per = n_rc * n_sp
    ct_row = ctab[int(hw[K.HW_CT]), int(stem[ST_SHAPE])]
    for ri in range(n_rc):
        for si in range(n_sp):
            lay[K.LA_RECOMPUTE] = choices[rc_at + ri]
            lay[K.LA_SP] = choices[sp_at + si] if t > 1.0 else 0.0
            ct = ct_row[int(lay[K.LA_RECOMPUTE]), int(lay[K.LA_SP])]
            q = ri * n_sp + si
            terms[q] = ct[K.CT_LAYER]
            terms[per + q] = tokens * ct[K.CT_LOGITS]
            terms[2 * per + q] = tensor_seconds(lay, hw, model, options, tokens)
    best = np.inf
    for k in range(interleave_count(p, m, layers, choices)):
        v = interleave_value(k, p, m, layers, choices)
        if v == 0.0:
            continue
        most, fewest = stage_layers(layers, p, v)
        least = np.inf
        for q in range(per):
            t_mb = micro_batch_bound(most, fewest, tokens, terms[q], terms[per + q], terms[2 * per + q])
            bound = step_bound(t_mb, m, p, v)
            terms[3 * per + q] = bound
            terms[4 * per + q] = compute_ceiling(most, fewest, tokens, terms[q], terms[per + q])
            least = min(least, bound)
        if least > incumbent:
            counts[C_LAYOUTS] += n_zero * per
            counts[C_BOUND] += n_zero * per
            continue
        lay[K.LA_VPP] = v
        for zi in range(n_zero):
            lay[K.LA_ZERO] = choices[zero_at + zi]
            dp, optimizer = update_terms(lay, hw, model, options, most, m)
            zero3 = lay[K.LA_ZERO] >= 3.0
            for ri in range(n_rc):
                lay[K.LA_RECOMPUTE] = choices[rc_at + ri]
                for si in range(n_sp):
                    lay[K.LA_SP] = choices[sp_at + si] if t > 1.0 else 0.0
                    counts[C_LAYOUTS] += 1.0
                    if memory_bytes(lay, model, options, m) > cap:
                        counts[C_MEMORY] += 1.0
                        if best == np.inf:
                            best_res[K.R_REASON] = K.REASON_MEMORY
                        continue
                    q = ri * n_sp + si
                    window = m * terms[4 * per + q] if zero3 else terms[4 * per + q]
                    bound = terms[3 * per + q] + exposed_bound(dp, window, options) + optimizer
                    if bound >= best or bound > incumbent:
                        counts[C_BOUND] += 1.0
                        continue
                    evaluate_pair(lay, hw, model, ctab, options, res)
                    counts[C_EVALUATED] += 1.0
                    if res[K.R_REASON] != K.REASON_VALID:
                        if best == np.inf:
                            best_res[K.R_REASON] = res[K.R_REASON]
                        continue
                    counts[C_VALID] += 1.0
                    if res[K.R_STEP] < best:
                        best = res[K.R_STEP]
                        for f in range(K.N_RESULT_FIELDS):
                            best_res[f] = res[f]
                        for f in range(K.N_LAYOUT_FIELDS):
                            best_lay[f] = lay[f]


def _search_llm(stems, hw, model, ctab, options, choices, incumbent, best_res, best_lay, counts):
    """Fill ``best_res`` (S x H, N_RESULT_FIELDS), ``best_lay`` (S x H, N_LAYOUT_FIELDS) and
    ``counts`` (S x H, N_COUNTS): row s x H + j is stem s on hardware row j; ``incumbent`` (H,)
    the step of a valid layout per hardware row (``probe_llm``'s least)."""
    n_hw = hw.shape[0]
    for flat in prange(stems.shape[0] * n_hw):
        res = np.empty(K.N_RESULT_FIELDS)
        lay = np.empty(K.N_LAYOUT_FIELDS)
        terms = np.empty(5 * 6)
        search_stem(
            stems[flat // n_hw],
            hw[flat % n_hw],
            model,
            ctab,
            options,
            choices,
            incumbent[flat % n_hw],
            res,
            lay,
            terms,
            best_res[flat],
            best_lay[flat],
            counts[flat],
        )


search_llm = parallel_jit(_search_llm)
#: the same, serial: for a few stems, where starting the thread pool costs more than the work
search_llm_serial = jit(serial_twin(_search_llm, "_search_llm_serial"))


@jit
def probe_stem(stem, hw, model, ctab, options, choices, res, lay):
    """The least step [s] of a few layouts of one stem on one hardware row (inf where none is
    valid): the largest interleave factor that applies, each ZeRO stage, the first
    recomputation of the space that fits in memory, the first sequence-parallel setting.  Any
    valid layout's step bounds the best from above, which lets ``search_stem`` prune more."""
    set_stem(stem, lay)
    t, p = stem[ST_TP], stem[ST_PP]
    layers = model[K.M_LAYERS]
    m = model[K.M_GLOBAL_BATCH] / (stem[ST_DP] * stem[ST_MB])
    cap = hw[K.HW_MEMORY] * (1.0 + options[K.OP_MEMORY_MARGIN])
    zero_at, n_zero, rc_at, n_rc, sp_at, n_sp = choice_offsets(choices)
    v = 0.0
    for k in range(interleave_count(p, m, layers, choices) - 1, -1, -1):
        v = interleave_value(k, p, m, layers, choices)
        if v > 0.0:
            break
    best = np.inf
    if v == 0.0:
        return best
    lay[K.LA_VPP] = v
    lay[K.LA_SP] = choices[sp_at] if t > 1.0 else 0.0
    for zi in range(n_zero):
        lay[K.LA_ZERO] = choices[zero_at + zi]
        for ri in range(n_rc):
            lay[K.LA_RECOMPUTE] = choices[rc_at + ri]
            if memory_bytes(lay, model, options, m) > cap:
                continue
            evaluate_pair(lay, hw, model, ctab, options, res)
            if res[K.R_REASON] == K.REASON_VALID and res[K.R_STEP] < best:
                best = res[K.R_STEP]
            break
    return best


def _probe_llm(stems, hw, model, ctab, options, choices, probe):
    """Fill ``probe`` (S x H): ``probe_stem`` of stem s on hardware row j at s x H + j."""
    n_hw = hw.shape[0]
    for flat in prange(stems.shape[0] * n_hw):
        res = np.empty(K.N_RESULT_FIELDS)
        lay = np.empty(K.N_LAYOUT_FIELDS)
        probe[flat] = probe_stem(stems[flat // n_hw], hw[flat % n_hw], model, ctab, options, choices, res, lay)


probe_llm = parallel_jit(_probe_llm)
#: the same, serial
probe_llm_serial = jit(serial_twin(_probe_llm, "_probe_llm_serial"))
