"""The selection kernel of a cube scan (``paigrid query --top``, filters on arch, intra or
network): the ``k`` best configurations of one job in one pass over its step times.

It does what ``paigrid.query`` does with numpy (mask the cells whose (gpu, precision) does not
fit in memory, keep each distinct configuration once as ``paigrid.schema.first_of_equivalents``
does, order by the metric with NaN last and ties in (gpu, n_gpu, precision, arch, intra,
network) order) without the full-size temporaries, so a scan costs little more than the
decompression of the chunks it reads.
"""

import numpy as np

from .jit import jit


@jit
def top_configurations(
    step, fits, a_s, g_s, n_s, i_s, w_s, p_s, ignores_intra, ignores_network, factor, divide, k, out_index, out_step
):
    """The ``k`` first configurations of one job by (metric, position), positions counted over
    the selected (gpu, n_gpu, precision, arch, intra, network) in that order.

    ``step`` [s]: the job's step times over (arch, gpu, n_gpu, intra, network, precision);
    ``fits``: 1 where a (gpu, precision) fits in memory; ``a_s`` ... ``p_s``: the selected
    coordinates of each dimension; ``ignores_intra`` / ``ignores_network``: per selected arch,
    whether it ignores that dimension (then only its first finite cell along it counts);
    ``factor`` over (selected gpu, selected n_gpu): the metric is ``step / factor`` with
    ``divide`` (time per sample [s], factor = GPUs x samples per step) and ``factor x step``
    without (cost per sample).  A NaN metric ranks as +inf.  Writes the positions, in
    increasing order, to ``out_index`` and their step times [s] (NaN where masked) to
    ``out_step``; returns how many (``min(k, configurations)``).
    """
    n_a, n_g, n_n, n_i, n_w, n_p = a_s.size, g_s.size, n_s.size, i_s.size, w_s.size, p_s.size
    keys = np.empty(k, np.float64)
    index = np.empty(k, np.int64)
    values = np.empty(k, np.float64)
    # the cells are visited in the order they lie in memory, (arch, gpu, n_gpu, intra, network,
    # precision), and ranked by (metric, position), so ties go to the first position whatever the
    # visiting order; an architecture that ignores a dimension keeps, per (gpu, n_gpu, precision),
    # the first finite cell in (intra, network) order, which this order visits first too
    seen = np.zeros((n_i, n_w, n_p), np.bool_)
    ok = np.empty((n_g, n_p), np.bool_)
    for gi in range(n_g):
        for pi in range(n_p):
            ok[gi, pi] = fits[g_s[gi], p_s[pi]] == 1
    count = 0
    worst = np.inf  # the k-th key kept, once k are kept
    stride_p = n_a * n_i * n_w  # the position's stride of each selected precision
    # where every intra, network and precision is selected, in order (a scan's arrays are cut to
    # the selection), the cells of one (arch, gpu, n_gpu) lie together, and a block none of whose
    # step times is within the bound is skipped whole: a cell above it is skipped below anyway, and
    # the cells that repeat another (``seen``) are tracked within a block only
    whole = n_i == step.shape[3] and n_w == step.shape[4] and n_p == step.shape[5]
    for ii in range(n_i):
        whole = whole and i_s[ii] == ii
    for wi in range(n_w):
        whole = whole and w_s[wi] == wi
    for pi in range(n_p):
        whole = whole and p_s[pi] == pi
    # each block's lowest step time, where the blocks can be skipped (``whole``) and it is known
    # exactly (``_lowest_steps``): the blocks are then visited from the lowest metric any of their
    # cells could have up, so that the k kept are found in the first blocks and the bound skips the
    # rest by their lowest step time alone (the order decides nothing: ties go by position)
    n_blocks = n_a * n_g * n_n
    lowest = np.empty(n_blocks)
    known = whole and _lowest_steps(step, a_s, g_s, n_s, lowest)
    order = np.arange(n_blocks)
    if known:
        lows = np.empty(n_blocks)
        for b in range(n_blocks):
            f = factor[b // n_n % n_g, b % n_n]
            lows[b] = lowest[b] / f if divide else f * lowest[b]
        order = np.argsort(lows, kind="mergesort")
    for b in order:
        ai, gi, ni = b // (n_g * n_n), b // n_n % n_g, b % n_n
        a, g, n = a_s[ai], g_s[gi], n_s[ni]
        skip_i, skip_w = ignores_intra[ai], ignores_network[ai]
        dedupe = skip_i or skip_w
        f = factor[gi, ni]
        bound = _step_bound(worst, f, divide)
        if whole and bound == bound:
            within = lowest[b] <= bound if known else _any_within(step, a, g, n, bound)
            if not within:
                continue
        if dedupe:
            seen[:, :, :] = False
        base_gn = (gi * n_n + ni) * n_p
        for ii in range(n_i):
            i = i_s[ii]
            gr_i = 0 if skip_i else ii
            for wi in range(n_w):
                w = w_s[wi]
                gr_w = 0 if skip_w else wi
                base = (ai * n_i + ii) * n_w + wi
                for pi in range(n_p):
                    v = np.float64(step[a, g, n, i, w, p_s[pi]]) if ok[gi, pi] else np.nan
                    if dedupe and np.isfinite(v):
                        if seen[gr_i, gr_w, pi]:
                            v = np.nan
                        else:
                            seen[gr_i, gr_w, pi] = True
                    # NaN, or a metric surely above the k-th kept (a NaN bound skips nothing)
                    if bound == bound and not v <= bound:
                        continue
                    metric = v / f if divide else f * v
                    key = np.inf if np.isnan(metric) else metric
                    if count == k and key > worst:
                        continue
                    position = (base_gn + pi) * stride_p + base
                    if count == k and key == worst and position > index[k - 1]:
                        continue
                    slot = count if count < k else k - 1
                    while slot > 0 and (keys[slot - 1] > key or (keys[slot - 1] == key and index[slot - 1] > position)):
                        keys[slot] = keys[slot - 1]
                        index[slot] = index[slot - 1]
                        values[slot] = values[slot - 1]
                        slot -= 1
                    keys[slot] = key
                    index[slot] = position
                    values[slot] = v
                    if count < k:
                        count += 1
                    if count == k:
                        worst = keys[k - 1]
                        bound = _step_bound(worst, f, divide)
    order = np.argsort(index[:count])
    for r in range(count):
        out_index[r] = index[order[r]]
        out_step[r] = values[order[r]]
    return count


@jit
def _lowest_steps(step, a_s, g_s, n_s, lowest):
    """Fill ``lowest`` with the lowest step time [s] of each (arch, gpu, n_gpu) block of the selection
    (``step[a_s[ai], g_s[gi], n_s[ni]]``, NaN ignored: NaN where every cell is NaN) in (arch, gpu,
    n_gpu) order, and return True; or return False where that cannot be done so, exactly and fast:
    step times not float32 in a C-contiguous array, or a cell with its sign bit set (a negative
    value, -0 or a negative NaN).  The minimum is that of the cells' bits as int32, a loop that
    vectorises (a float minimum does not, NaN in the way): non-negative float32 order as their bits
    do, and the NaN with a clear sign bit lie above +inf."""
    if not (step.flags.c_contiguous and step.itemsize == 4):
        return False
    n_g, n_n = g_s.size, n_s.size
    bits = np.empty(lowest.size, np.int32)
    for b in range(lowest.size):
        cells = step[a_s[b // (n_g * n_n)], g_s[b // n_n % n_g], n_s[b % n_n]].ravel().view(np.int32)
        low = np.int32(0x7FFFFFFF)  # a NaN: no cell
        for c in range(cells.size):
            low = min(low, cells[c])
        if low < 0:
            return False
        bits[b] = low
    lowest[:] = bits.view(np.float32)
    return True


@jit
def _any_within(step, a, g, n, bound):
    """Whether any step time [s] of ``step[a, g, n]`` (one (arch, gpu, n_gpu)'s cells) is at most
    ``bound`` (NaN is not), counted without an early exit so that the loop vectorises: over the
    block's cells as one run where they lie together (a C-contiguous ``step``: one loop of a few
    hundred cells, where the nested loops' innermost ran over the few precisions only and took
    twice as long on the bench's cube), else along each dimension."""
    within = 0
    if step.flags.c_contiguous:
        cells = step[a, g, n].ravel()
        for c in range(cells.size):
            within += np.float64(cells[c]) <= bound
        return within > 0
    for i in range(step.shape[3]):
        for w in range(step.shape[4]):
            for p in range(step.shape[5]):
                within += np.float64(step[a, g, n, i, w, p]) <= bound
    return within > 0


@jit
def _step_bound(worst, f, divide):
    """A step time [s] above which a cell's metric (``v / f`` with ``divide``, else ``f x v``) is
    surely above ``worst`` (the k-th key kept), rounding included (a relative margin of 1e-12
    against float64's 1.1e-16 per operation), so that the kernel skips most cells without
    computing their metric; NaN, which skips nothing, while no finite k-th key is kept (NaN
    cells rank then too) or where the factor gives no such bound (not positive)."""
    if not (np.isfinite(worst) and f > 0):
        return np.nan
    bound = worst * f if divide else worst / f
    if not np.isfinite(bound):
        return np.nan
    return bound * (1.0 + 1e-12) if bound >= 0 else bound * (1.0 - 1e-12)
