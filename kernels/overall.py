"""The overall best configuration of each job, from its per-(gpu, n_gpu, precision) bests, in one
compiled pass (``paigrid.evaluate.overall_best`` calls it on every block of a sweep).

It does what ``paigrid.evaluate.overall_best_reference`` does with numpy (the metric of each
(gpu, n_gpu, precision) best, NaN ranking as +inf, the first smallest in (gpu, n_gpu, precision)
order, no configuration when that smallest is not finite) without its full-size temporaries.
"""

import numpy as np

from .jit import jit
from .model import cost_per_sample, time_per_sample


@jit
def overall_bests(best_step, best_index, n_gpu, samples_per_step, price, n_intra, n_network, out_index, out_step):
    """Fill ``out_index`` (J, 2, 6) int32 and ``out_step`` (J, 2) [s] with each job's best
    configuration by time per sample (criterion 0, ``time_per_sample``) and by cost per sample
    (criterion 1, ``cost_per_sample``).

    ``best_step`` (J, G, N, P) [s] and ``best_index`` (J, G, N, P) (flat (arch * n_intra +
    intra) * n_network + network, -1: none) are the per-(gpu, n_gpu, precision) bests,
    ``n_gpu`` (J, N) the GPU counts, ``samples_per_step`` (J,) and ``price`` (G,)
    [USD/GPU-hour].  A row of ``out_index`` is (arch, gpu, n_gpu, intra, network, precision),
    all -1 when the smallest metric is not finite (then ``out_step`` is NaN); ties go to the
    first in (gpu, n_gpu, precision) order.
    """
    n_jobs, n_gpus, n_counts, n_prec = best_step.shape
    per_arch = n_intra * n_network
    for j in range(n_jobs):
        samples = samples_per_step[j]
        for c in range(2):
            best = np.inf
            at_g = at_n = at_p = -1
            for g in range(n_gpus):
                for n in range(n_counts):
                    for p in range(n_prec):
                        step = best_step[j, g, n, p]
                        if c == 0:
                            metric = time_per_sample(step, n_gpu[j, n], samples)
                        else:
                            metric = cost_per_sample(step, price[g], samples)
                        if metric < best:  # NaN never is: it ranks as +inf
                            best = metric
                            at_g, at_n, at_p = g, n, p
            if at_g < 0 or not np.isfinite(best):
                out_index[j, c, :] = -1
                out_step[j, c] = np.nan
                continue
            flat = best_index[j, at_g, at_n, at_p]
            if flat < 0:
                arch = intra = network = -1
            else:
                arch = flat // per_arch
                intra = flat % per_arch // n_network
                network = flat % per_arch % n_network
            out_index[j, c, 0] = arch
            out_index[j, c, 1] = at_g
            out_index[j, c, 2] = at_n
            out_index[j, c, 3] = intra
            out_index[j, c, 4] = network
            out_index[j, c, 5] = at_p
            out_step[j, c] = best_step[j, at_g, at_n, at_p]
