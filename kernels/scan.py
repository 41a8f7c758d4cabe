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
    n_i, n_w = i_s.size, w_s.size
    keys = np.empty(k, np.float64)
    index = np.empty(k, np.int64)
    values = np.empty(k, np.float64)
    seen = np.zeros((n_i, n_w), np.bool_)
    count = 0
    position = 0
    for gi in range(g_s.size):
        g = g_s[gi]
        for ni in range(n_s.size):
            n = n_s[ni]
            f = factor[gi, ni]
            for pi in range(p_s.size):
                p = p_s[pi]
                ok = fits[g, p] == 1
                for ai in range(a_s.size):
                    a = a_s[ai]
                    skip_i, skip_w = ignores_intra[ai], ignores_network[ai]
                    dedupe = skip_i or skip_w
                    if dedupe:
                        seen[:, :] = False
                    for ii in range(n_i):
                        i = i_s[ii]
                        for wi in range(n_w):
                            v = np.float64(step[a, g, n, i, w_s[wi], p]) if ok else np.nan
                            if dedupe:
                                if not np.isfinite(v):
                                    v = np.nan
                                else:
                                    gr_i = 0 if skip_i else ii
                                    gr_w = 0 if skip_w else wi
                                    if seen[gr_i, gr_w]:
                                        v = np.nan
                                    else:
                                        seen[gr_i, gr_w] = True
                            metric = v / f if divide else f * v
                            key = np.inf if np.isnan(metric) else metric
                            if count < k or key < keys[count - 1]:
                                slot = count if count < k else k - 1
                                while slot > 0 and keys[slot - 1] > key:
                                    keys[slot] = keys[slot - 1]
                                    index[slot] = index[slot - 1]
                                    values[slot] = values[slot - 1]
                                    slot -= 1
                                keys[slot] = key
                                index[slot] = position
                                values[slot] = v
                                if count < k:
                                    count += 1
                            position += 1
    order = np.argsort(index[:count])
    for r in range(count):
        out_index[r] = index[order[r]]
        out_step[r] = values[order[r]]
    return count
