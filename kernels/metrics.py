"""Time, cost and energy per sample: the one definition, as plain functions of scalars or numpy
arrays (no numba here, so a reader that only ranks stored numbers loads no compiler).

``kernels.model`` compiles them with ``@jit`` for the kernels (and ``kernels.cuda`` for the GPU);
the driver's overall bests (``paigrid.evaluate``) and the queries (``paigrid.ranking``) call them
on arrays, so every ranking of configurations divides and multiplies in the same order.
"""


def cost_per_step_second(price, samples_per_step):
    """USD per 1e6 samples per second of step time: ``price`` [USD/GPU-hour] / 3600 x 1e6 /
    the per-GPU samples per step (cost = it x step time)."""
    return price / 3600.0 * 1e6 / samples_per_step


def energy_per_step_second(power, samples_per_step):
    """J per sample per second of step time: board ``power`` [W] / the per-GPU samples per step
    (energy = it x step time)."""
    return power / samples_per_step


def time_per_sample(step, n, samples_per_step):
    """Seconds per sample of a step of ``step`` [s] on n GPUs of ``samples_per_step`` samples
    each (the ``time`` criterion of the overall bests and the queries)."""
    return step / (n * samples_per_step)


def cost_per_sample(step, price, samples_per_step):
    """USD per 1e6 samples of a step of ``step`` [s] on GPUs rented at ``price`` [USD/GPU-hour],
    ``samples_per_step`` samples each: ``cost_per_step_second`` x step (the ``cost`` criterion),
    written out so that the compiled copy calls nothing."""
    return price / 3600.0 * 1e6 / samples_per_step * step


def energy_per_sample(step, power, samples_per_step):
    """J per sample of a step of ``step`` [s] on GPUs of board ``power`` [W],
    ``samples_per_step`` samples each: ``energy_per_step_second`` x step (the ``energy``
    criterion)."""
    return power / samples_per_step * step


def model_flops_utilisation(flop_per_sample, samples_per_step, step, peak_flop_per_s):
    """Model FLOPs utilisation [fraction]: the model's training FLOPs of one step of one GPU
    (``flop_per_sample`` [FLOP/sample] x ``samples_per_step`` [samples]) over what the GPU's
    dense peak ``peak_flop_per_s`` [FLOP/s] does in the step time ``step`` [s]."""
    return flop_per_sample * samples_per_step / (step * peak_flop_per_s)
