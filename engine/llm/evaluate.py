"""Evaluate LLM layouts on cluster designs with the kernel, and one layout in full (predict)."""

from __future__ import annotations

import numpy as np

from paigrid.errors import PaigridError
from paigrid.inputs.catalog import Catalogues
from paigrid.inputs.efficiency import Efficiency
from paigrid.kernels import llm_columns as K
from paigrid.llm.models import Transformer
from paigrid.llm.parallelism import Layout, check_layout, gemm_shape, layout_array, reason_text
from paigrid.llm.tables import Hardware, LlmOptions, compute_table, hardware_table, model_vector

#: result fields by name, with their units (the order of ``kernels.llm_columns.R_*``)
RESULTS = {
    "step_time": (K.R_STEP, "s"),
    "tokens_per_s": (K.R_TOKENS, "tokens/s"),
    "mfu": (K.R_MFU, "fraction"),
    "model_tflops_per_gpu": (K.R_MODEL_TFLOPS, "TFLOP/s"),
    "hw_tflops_per_gpu": (K.R_HW_TFLOPS, "TFLOP/s"),
    "memory_per_gpu": (K.R_MEMORY, "bytes"),
    "compute": (K.R_COMPUTE, "s"),
    "bubble": (K.R_BUBBLE, "s"),
    "tp_comm": (K.R_TP, "s"),
    "cp_comm_exposed": (K.R_CP, "s"),
    "ep_comm": (K.R_EP, "s"),
    "pp_comm": (K.R_PP, "s"),
    "dp_comm": (K.R_DP, "s"),
    "dp_comm_exposed": (K.R_DP_EXPOSED, "s"),
    "optimizer": (K.R_OPTIMIZER, "s"),
    "cost_per_step": (K.R_COST, "USD"),
    "energy_per_step": (K.R_ENERGY, "J"),
    "microbatches": (K.R_MICROBATCHES, "count"),
}


#: layout x design pairs from which the kernel runs on every thread (fewer, e.g. one prediction:
#: serially, which spares loading and starting the thread pool)
SERIAL_PAIRS = 2_000


def tables(
    model: Transformer,
    layouts: list[Layout],
    designs: list[Hardware],
    cats: Catalogues,
    eff: Efficiency,
    options: LlmOptions,
    global_batch: int | None = None,
):
    """The kernel's inputs: (layouts, hardware, model, compute table, options) arrays.  The
    compute table's second axis holds one row per GEMM shape of the layouts (``gemm_shape``:
    tensor degree, tokens per micro-batch, expert degree), so that every layout is costed at its
    own GEMM shapes whatever layouts it is evaluated with."""
    if not layouts or not designs:
        raise PaigridError("there is no layout or no hardware design to evaluate.")
    shapes = sorted({gemm_shape(lay, model.seq_len) for lay in layouts})
    pairs = list(dict.fromkeys((hw.gpu, hw.precision) for hw in designs))
    return (
        layout_array(layouts, shapes, model.seq_len),
        hardware_table(designs, cats, eff, pairs),
        model_vector(model, global_batch, options.attention),
        shape_table(model, cats, eff, pairs, shapes, options.attention),
        options.vector(),
    )


def shape_table(
    model: Transformer,
    cats: Catalogues,
    eff: Efficiency,
    pairs: list[tuple[str, str]],
    shapes: list[tuple],
    attention: str,
) -> np.ndarray:
    """(C, len(shapes), 3, 2, N_CT_FIELDS) compute table: ``compute_table`` of each (tokens per
    micro-batch, expert degree) group of ``shapes`` at its tensor degrees, row i for shapes[i]."""
    out = np.empty((len(pairs), len(shapes), 3, 2, K.N_CT_FIELDS))
    groups: dict = {}
    for i, (t, tokens, ep) in enumerate(shapes):
        groups.setdefault((tokens, ep), []).append((i, t))
    for (tokens, ep), members in groups.items():
        rows = compute_table(model, cats, eff, pairs, [t for _, t in members], attention, tokens, ep)
        out[:, [i for i, _ in members]] = rows
    return out


def evaluate(
    model: Transformer,
    layouts: list[Layout],
    designs: list[Hardware],
    cats: Catalogues,
    eff: Efficiency,
    options: LlmOptions,
    global_batch: int | None = None,
    precompiled: bool = False,
) -> np.ndarray:
    """(len(layouts), len(designs), N_RESULT_FIELDS) results from the numba kernel (with
    ``precompiled``, a serial evaluation runs the kernel of ``paigrid.precompiled`` where it is
    built or can be)."""
    arrays = tables(model, layouts, designs, cats, eff, options, global_batch)
    out = np.empty((len(layouts) * len(designs), K.N_RESULT_FIELDS))
    serial = out.shape[0] < SERIAL_PAIRS
    module = _precompiled() if precompiled and serial else None
    if module is not None:
        from paigrid.precompiled import contiguous

        module.evaluate_llm_serial(*contiguous(*arrays), out)
    else:
        from paigrid.kernels import llm as kernel

        (kernel.evaluate_llm_serial if serial else kernel.evaluate_llm)(*arrays, out)
    return out.reshape(len(layouts), len(designs), K.N_RESULT_FIELDS)


def _precompiled():
    """The precompiled module of ``paigrid.precompiled``, built where it can be; None otherwise."""
    from paigrid import precompiled

    return precompiled.load(build=True)


def predict(
    model: Transformer,
    layout: Layout,
    design: Hardware,
    cats: Catalogues,
    eff: Efficiency,
    options: LlmOptions,
    global_batch: int | None = None,
    precompiled: bool = False,
) -> dict:
    """The full breakdown of one layout on one design: every ``RESULTS`` field, ``valid``,
    ``reason`` (a sentence, empty when valid) and ``n_gpu`` (``precompiled`` as ``evaluate``)."""
    check_layout(layout)
    res = evaluate(model, [layout], [design], cats, eff, options, global_batch, precompiled)[0, 0]
    code = int(res[K.R_REASON])
    out = {name: float(res[index]) for name, (index, _) in RESULTS.items()}
    memory = np.nan
    if code == K.REASON_MEMORY:
        arrays = tables(model, [layout], [design], cats, eff, options, global_batch)
        m = arrays[2][K.M_GLOBAL_BATCH] / (layout.dp * layout.micro_batch)
        module = _precompiled() if precompiled else None
        if module is None:
            from paigrid.kernels.llm import memory_bytes
        else:
            from paigrid.precompiled import contiguous

            memory_bytes = module.memory_bytes
            arrays = contiguous(*arrays)
        memory = float(memory_bytes(arrays[0][0], arrays[2], arrays[4], m))
    from paigrid.llm.tables import memory_bytes as gpu_memory

    capacity = gpu_memory(cats, design.gpu) * (1.0 + options.memory_margin)
    out.update(
        valid=code == K.REASON_VALID,
        reason_code=code,
        n_gpu=layout.n_gpu,
        reason="" if code == K.REASON_VALID else reason_text(code, layout, model, design.domain, memory, capacity),
    )
    return out
