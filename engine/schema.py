"""The cube format, in one place: the variables, their dimensions, units and flags, the file
naming, and the decoding of stored indices.  The writer (``paigrid.store``), the driver
(``paigrid.evaluate``) and every reader (``paigrid.cube``, ``paigrid.query``, ``paigrid.xarray_api``,
``paigrid.describe``, the study report) import it; it imports only numpy and the kernel layout.

``FORMAT_VERSION`` is written into every cube (file attribute ``format_version``).  Any change
to the stored variables bumps it and keeps a reader for the older versions (see
``docs/cube.md``).  The formats:

1. paigrid 0.1.0, no ``format_version`` attribute: validity is stored as ``valid`` (uint8 over
   the seven dimensions, 1 where the configuration can exist).
2. ``valid`` is replaced by ``invalid_reason`` (uint8 over the seven dimensions): the code of
   the first rule that makes the configuration impossible, 0 where it can exist, with CF
   ``flag_values`` 0..6 and ``flag_meanings`` from ``kernels.dp_columns.INVALID_REASONS`` (valid,
   single_gpu_arch_needs_one_gpu, local_arch_exceeds_server, cluster_arch_needs_network,
   intra_link_not_on_gpu, precision_not_on_gpu, missing_input_number).  ``valid`` is
   ``invalid_reason == 0``; ``reason_sentence`` says a code in words.  Every other variable
   is unchanged.

3. adds ``prediction_band`` (float32 over (job, n_gpu)): the relative uncertainty of the
   predictions of that job at that GPU count, the cross-validated error of its group
   (``efficiency.prediction_band``; it depends on the model, on whether the sweep was
   calibrated, and on the group: one GPU, one server, several servers).  Every other variable
   is unchanged.
4. ``throughput``, ``cost`` and ``energy`` are no longer stored over the seven dimensions: each
   is ``step_time`` times or divided into a factor that depends on fewer dimensions, and the
   factors are stored instead (``FACTOR_VARIABLES``, float64): ``samples_per_job_step`` over
   (job, n_gpu) [samples] (throughput = it / step_time), ``cost_per_step_second`` and
   ``energy_per_step_second`` over (job, gpu) [USD/1e6 samples and J/sample per second of
   step] (cost, energy = it x step_time).  Readers present the three as before
   (``DERIVED_VARIABLES``, ``derived_values``): computed in float64 from the stored float32
   step time and rounded to float32, they are within one float32 unit in the last place of the
   values format 3 stored (which the kernel rounded from its float64 step time), NaN where
   step_time is.  Every other variable is unchanged.

5. adds the job families: the file attribute ``families`` (``dp``, ``llm`` or ``dp llm``) and,
   for a sweep with LLM jobs, the netCDF-4 group ``llm`` (``paigrid.llm.grid``, docs/cube.md):
   the LLM family's cells over (job, layout, gpu, n_gpu, domain, network, precision), the
   layout degrees as coordinate variables over ``layout``, ``invalid_reason`` with its own
   flag meanings, the per-job bests ``best_*`` over the layout axis, and its ``block_done``.
   A cube of LLM jobs only has no data-parallel variables at the root, only its attributes.
   The root's data-parallel variables are those of format 4, unchanged.

Every cube also carries the file attribute ``model``: the compute model that made it
(``pai-v1`` or ``pai-v2``, ``kernels.dp_columns.MODEL_NAMES``; ``cube_model`` reads it, ``pai-v1``
when absent).  The attribute alone would not have bumped the format: the variables mean the
same under both models (``t_flop`` compute-bound, ``t_mem`` memory-bound time, which in pai-v2
includes launch overhead and the optimizer update).

A reader that needs validity reads ``valid == 1`` from a format-1 cube and ``invalid_reason ==
0`` from a later one (``validity_variable`` names the stored variable).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from paigrid.kernels import dp_columns as L

#: version of the stored variables (see the module docstring); 1 = paigrid 0.1.0 (no attribute)
FORMAT_VERSION = 5

#: the relative uncertainty of the predictions, per job and GPU count (format 3 on): name ->
#: (dtype, units, long name)
BAND_VARIABLE = (
    "prediction_band",
    np.float32,
    "1",
    "relative uncertainty of step time and throughput: the cross-validated |predicted / measured - 1| "
    "(68th percentile) of the configuration's group (one GPU, one server, several servers); NaN: "
    "no held-out measurement of the group",
)

#: the seven dimensions of the cube, in storage order
DIMS = ("job", "arch", "gpu", "n_gpu", "intra", "network", "precision")
#: the labelled dimensions of one configuration (every dimension but ``job``)
LABEL_DIMS = DIMS[1:]
#: the dimensions of the LLM group's cells (``paigrid.llm.grid``), in storage order
LLM_DIMS = ("job", "layout", "gpu", "n_gpu", "domain", "network", "precision")
#: the dimensions of the LLM group's per-job bests (the layout folded)
LLM_BEST_DIMS = tuple(d for d in LLM_DIMS if d != "layout")
#: the dimensions that the stored per-(job, gpu, n_gpu, precision) reductions fold
REDUCED_DIMS = ("arch", "intra", "network")

#: outputs over all seven dimensions: name -> (dtype, units, long name)
CUBE_VARIABLES = {
    "step_time": (np.float32, "s", "time of one optimizer step of one replica"),
    "t_comm": (np.float32, "s", "exposed weight/gradient communication per step"),
    "bottleneck": (np.uint8, "1", "largest time component"),
    "invalid_reason": (np.uint8, "1", "why the configuration cannot exist; 0 where it can"),
}
#: the factors that make the derived variables from step_time (format 4 on), over fewer
#: dimensions: name -> (dims, dtype, units, long name)
FACTOR_VARIABLES = {
    "samples_per_job_step": (
        ("job", "n_gpu"),
        np.float64,
        "samples",
        "samples of the whole job per optimizer step (n_gpu x per-GPU samples per step); "
        "throughput = samples_per_job_step / step_time",
    ),
    "cost_per_step_second": (
        ("job", "gpu"),
        np.float64,
        "USD/1e6 samples/s",
        "GPU rental cost per million samples per second of step time (USD/GPU-hour / 3600 x "
        "1e6 / per-GPU samples per step); cost = cost_per_step_second x step_time",
    ),
    "energy_per_step_second": (
        ("job", "gpu"),
        np.float64,
        "J/sample/s",
        "GPU energy per sample per second of step time (board power / per-GPU samples per "
        "step); energy = energy_per_step_second x step_time",
    ),
}
#: the variables over the seven dimensions that format 4 derives instead of storing: name ->
#: (factor in ``FACTOR_VARIABLES``, "divide" (factor / step_time) or "multiply" (factor x
#: step_time), dtype, units, long name); formats 1 to 3 store them with these attributes
DERIVED_VARIABLES = {
    "throughput": ("samples_per_job_step", "divide", np.float32, "samples/s", "samples per second of the whole job"),
    "cost": ("cost_per_step_second", "multiply", np.float32, "USD/1e6 samples", "GPU rental cost per million samples"),
    "energy": ("energy_per_step_second", "multiply", np.float32, "J/sample", "GPU energy per sample at board power"),
}

#: the dimensions of the smaller variables' groups
JOB_GPU_DIMS = ("job", "gpu", "precision")
BEST_DIMS = ("job", "gpu", "n_gpu", "precision")
OVERALL_BEST_DIMS = ("job", "criterion", "dimension")
OVERALL_STEP_DIMS = ("job", "criterion")
BAND_DIMS = ("job", "n_gpu")

#: outputs over (job, gpu, precision)
JOB_GPU_VARIABLES = {
    "t_data": (np.float32, "s", "host-to-GPU input copy per step"),
    "t_flop": (np.float32, "s", "compute-bound ops per step"),
    "t_mem": (np.float32, "s", "memory-bound ops per step"),
    "fits_memory": (
        np.uint8,
        "1",
        "1 where weights, gradients, optimizer state, activations and workspace fit in GPU memory",
    ),
}
#: per-job reductions over (job, gpu, n_gpu, precision)
BEST_VARIABLES = {
    "best_step_time": (np.float64, "s", "smallest step time over arch x intra x network (float32-rounded)"),
    "best_index": (
        np.int32,
        "1",
        "flat index (arch * n_intra + intra) * n_network + network of the best configuration, -1 if none",
    ),
    "best_bottleneck": (np.uint8, "1", "bottleneck of the best configuration"),
}

#: per-job best over everything, per criterion (time per sample, cost per sample)
CRITERIA = ("time", "cost")
OVERALL_DIMS = LABEL_DIMS
OVERALL_VARIABLES = {
    "overall_best": (
        np.int32,
        "1",
        "index into each of arch, gpu, n_gpu, intra, network, precision of the best "
        "feasible configuration over everything, per criterion; -1 if none",
    ),
    "overall_step_time": (np.float64, "s", "step time of that configuration (float32-rounded)"),
}

#: CF flag_values / flag_meanings of the flag variables
FLAG_ATTRS = {
    "bottleneck": ((*range(len(L.BOTTLENECK_NAMES)), L.FLAG_FILL), (*L.BOTTLENECK_NAMES, "invalid_configuration")),
    "best_bottleneck": (
        (*range(len(L.BOTTLENECK_NAMES)), L.FLAG_FILL),
        (*L.BOTTLENECK_NAMES, "no_feasible_configuration"),
    ),
    "invalid_reason": (tuple(range(len(L.INVALID_REASONS))), L.INVALID_REASONS),
    "fits_memory": ((0, 1, L.FLAG_FILL), ("does_not_fit", "fits", "precision_unsupported")),
}
#: what each ``invalid_reason`` code means for one configuration, as a sentence: filled by
#: ``reason_sentence`` from the configuration's labels (arch, gpu, n_gpu, intra, network,
#: precision) and ``job``, ``gpus_per_node`` and ``lacks`` (why the GPU lacks the precision:
#: ``Catalogues.lacks_precision``)
REASON_SENTENCES = {
    L.REASON_VALID: "",
    L.REASON_SINGLE_GPU_ARCH: "{arch} with {n_gpu} GPU(s) is invalid: 1w1g runs exactly one GPU.",
    L.REASON_LOCAL_ARCH_EXCEEDS_SERVER: "{arch} with {n_gpu} GPU(s) is invalid: {arch} keeps every GPU in one "
    "server, which has {gpus_per_node} (gpus_per_node).",
    L.REASON_CLUSTER_ARCH_NEEDS_NETWORK: "{arch} with {n_gpu} GPU(s) is invalid: {arch} needs a network between "
    "servers, and the network is {network!r} (single server only).",
    L.REASON_INTRA_LINK_NOT_ON_GPU: "the {intra} link cannot connect {gpu} GPUs.",
    L.REASON_PRECISION_NOT_ON_GPU: "the {gpu} has no {precision} support ({lacks}).",
    L.REASON_MISSING_INPUT: "{job} on {arch} with {n_gpu} {gpu} GPU(s), {intra}, {network}, {precision} has no "
    "prediction: a number the model needs is missing (NaN) in the catalogues or the "
    "job's options.",
}


#: dimensions an architecture's step time does not depend on (every valid value gives the same
#: numbers, by the kernel's formulas; tests/test_sweep.py checks it on swept cubes): one GPU and
#: one worker with n GPUs exchange nothing over the intra link or the network (1wng goes through
#: the host's PCIe), a single-server all-reduce uses no network, and a parameter server talks to
#: its workers over the network and PCIe only.  Queries show such a dimension once, as ``ANY``.
ARCH_IGNORES = {
    "1w1g": ("intra", "network"),
    "1wng": ("intra", "network"),
    "allreduce-local": ("network",),
    "ps-worker": ("intra",),
}
#: the label a query shows for a dimension the configuration's architecture does not depend on
ANY = "any"


def first_of_equivalents(values: np.ndarray, arch_names, copy: bool = True) -> np.ndarray:
    """``values`` over (..., arch, intra, network) with NaN in every cell that repeats an earlier
    finite cell of the same architecture along the dimensions it ignores (``ARCH_IGNORES``), so
    that each distinct configuration is counted and listed once (as float64; without ``copy``,
    float64 ``values`` are changed in place and returned)."""
    out = np.array(values, dtype=np.float64) if copy else np.asarray(values, dtype=np.float64)
    for a, name in enumerate(arch_names):
        ignored = ARCH_IGNORES.get(str(name), ())
        if not ignored:
            continue
        block = out[..., a, :, :]  # a view: written in place
        both = "intra" in ignored and "network" in ignored
        if both:
            along = block.reshape(*block.shape[:-2], -1)
        elif "network" in ignored:
            along = block
        else:  # intra ignored: look along the intra axis
            along = np.swapaxes(block, -1, -2)
        finite = np.isfinite(along)
        keep = finite & (np.cumsum(finite, axis=-1) == 1)  # the first finite cell along the axis
        if both:
            keep = keep.reshape(block.shape)
        elif "network" not in ignored:
            keep = np.swapaxes(keep, -1, -2)
        np.copyto(block, np.nan, where=~keep)
    return out


def reason_sentence(code: int, fields: dict) -> str:
    """The sentence of an ``invalid_reason`` code (empty for 0, valid) for one configuration.

    ``fields`` maps the names used by ``REASON_SENTENCES`` (arch, gpu, n_gpu, intra, network,
    precision, job, gpus_per_node, lacks) to values; only those of this code's sentence
    are read.
    """
    return REASON_SENTENCES[int(code)].format(**fields)


def validity_variable(version: int) -> str:
    """The stored variable that holds validity in a cube of format ``version``: ``valid`` (1 =
    valid) in format 1, ``invalid_reason`` (0 = valid) from format 2 on."""
    return "valid" if version < 2 else "invalid_reason"


def is_valid(values: np.ndarray, version: int) -> np.ndarray:
    """True where a configuration can exist, from the values of ``validity_variable(version)``."""
    return np.asarray(values) == (1 if version < 2 else L.REASON_VALID)


def derived_values(name: str, step_time, factor) -> np.ndarray:
    """The values of the derived variable ``name`` (``DERIVED_VARIABLES``: throughput
    [samples/s], cost [USD/1e6 samples], energy [J/sample]) from ``step_time`` [s] and the
    variable's factor (``FACTOR_VARIABLES``), broadcast against each other: computed in float64
    and rounded to float32, NaN where step_time is NaN."""
    _, operation, dtype, _, _ = DERIVED_VARIABLES[name]
    step = np.asarray(step_time, dtype=np.float64)
    factor = np.asarray(factor, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return (factor / step if operation == "divide" else factor * step).astype(dtype)


def factor_for_cube(name: str, values, dims=DIMS) -> np.ndarray:
    """The factor ``name`` (``FACTOR_VARIABLES``), its values over its own dimensions, with
    length-1 axes added so that it broadcasts against a variable over ``dims`` (the seven cube
    dimensions, or those of a selection that keeps some of them, in cube order)."""
    own = FACTOR_VARIABLES[name][0]
    values = np.asarray(values)
    kept = [d for d in own if d in dims]  # a dimension selected away is already indexed in ``values``
    if [d for d in dims if d in own] != kept:
        raise ValueError(f"{name}'s dimensions {own} are not in the order of {dims}")
    shape = [values.shape[kept.index(d)] if d in kept else 1 for d in dims]
    return values.reshape(shape)


def stores_derived(version: int) -> bool:
    """Whether a cube of format ``version`` stores throughput, cost and energy over the seven
    dimensions (formats 1 to 3) rather than their factors (format 4 on)."""
    return version < 4


def partial_path(path: str | Path) -> Path:
    """Where a sweep writes until it is complete."""
    return Path(f"{path}.partial")


def int_attr(attrs, name: str, default: int = 0) -> int:
    """An integer file attribute (netCDF stores scalars as 1-element arrays)."""
    return int(np.asarray(attrs.get(name, default)).reshape(-1)[0])


def str_attr(attrs, name: str) -> str:
    """A text file attribute ("" when absent), whether h5py returns it as bytes or str."""
    value = attrs.get(name, "")
    return value.decode() if isinstance(value, bytes) else str(value)


def decode_strings(values) -> list:
    """Values of a string variable as str (h5py may return bytes); other values unchanged."""
    return [v.decode() if isinstance(v, bytes) else v for v in values]


def cube_model(attrs) -> str:
    """The compute model that made a cube (file attribute ``model``; ``pai-v1`` for cubes written
    before the attribute existed, which only that model could make)."""
    value = attrs.get("model", "pai-v1")
    return value.decode() if isinstance(value, bytes) else str(value)


def cube_families(attrs, has_root_jobs: bool = True) -> list[str]:
    """The job families a cube holds (file attribute ``families``, format 5 on; before it every
    cube held data-parallel jobs only)."""
    value = attrs.get("families")
    if value is None:
        return ["dp"] if has_root_jobs else []
    value = value.decode() if isinstance(value, bytes) else str(value)
    return value.split()


def format_version(attrs) -> int:
    """The cube format of a file from its attributes (1 when the attribute is absent)."""
    return int_attr(attrs, "format_version", 1)


def decode_best(best_index: np.ndarray, n_intra: int, n_network: int):
    """Split flat best indices into (arch, intra, network) indices; -1 stays -1."""
    none = best_index < 0
    idx = np.where(none, 0, best_index)
    arch, rest = np.divmod(idx, n_intra * n_network)
    intra, network = np.divmod(rest, n_network)
    return tuple(np.where(none, -1, x) for x in (arch, intra, network))


def bottleneck_name(code: int) -> str:
    """Readable name of a bottleneck flag."""
    return L.BOTTLENECK_NAMES[code] if code < len(L.BOTTLENECK_NAMES) else "invalid"


def _flag_text(name: str) -> str:
    values, meanings = FLAG_ATTRS[name]
    return "; flags: " + ", ".join(f"{v} {m}" for v, m in zip(values, meanings))


def variables_table() -> str:
    """The root group's declared variables (``CUBE_VARIABLES``, ``DERIVED_VARIABLES``,
    ``FACTOR_VARIABLES``, ``JOB_GPU_VARIABLES``, ``BEST_VARIABLES``, ``OVERALL_VARIABLES``,
    ``BAND_VARIABLE``) as a Markdown table: name, dimensions, dtype, units and meaning, with the
    flag meanings of the flag variables (docs/cube.md holds it; a test checks it is current)."""
    rows = []

    def add(name: str, dims, dtype, units: str, meaning: str, note: str = "") -> None:
        flags = _flag_text(name) if name in FLAG_ATTRS else ""
        text = " ".join(f"{meaning}{flags}{note}".split()).replace("|", "\\|")
        rows.append(f"| `{name}` | {', '.join(dims)} | {np.dtype(dtype).name} | {units} | {text} |")

    for name, (dtype, units, meaning) in CUBE_VARIABLES.items():
        note = " (format 2 on; format 1 stores `valid`)" if name == "invalid_reason" else ""
        add(name, DIMS, dtype, units, meaning, note)
    for name, (_, _, dtype, units, meaning) in DERIVED_VARIABLES.items():
        add(name, DIMS, dtype, units, meaning, " (derived by readers from format 4 on, stored before)")
    for name, (dims, dtype, units, meaning) in FACTOR_VARIABLES.items():
        add(name, dims, dtype, units, meaning, " (format 4 on)")
    for name, (dtype, units, meaning) in JOB_GPU_VARIABLES.items():
        add(name, JOB_GPU_DIMS, dtype, units, meaning)
    for name, (dtype, units, meaning) in BEST_VARIABLES.items():
        add(name, BEST_DIMS, dtype, units, meaning)
    for name, (dtype, units, meaning) in OVERALL_VARIABLES.items():
        add(name, OVERALL_BEST_DIMS if name == "overall_best" else OVERALL_STEP_DIMS, dtype, units, meaning)
    name, dtype, units, meaning = BAND_VARIABLE
    add(name, BAND_DIMS, dtype, units, meaning, " (format 3 on)")
    header = ["| variable | dims | dtype | units | meaning |", "|---|---|---|---|---|"]
    return "\n".join(header + rows)
