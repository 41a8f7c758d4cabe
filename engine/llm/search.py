"""The best layout of an LLM job on cluster designs, searched in the kernel with pruning.

``best_layout`` searches a layout space (default ``layouts.WIDE``: tensor degrees up to 64,
every interleave factor with uneven stages, every micro-batch up to what fits, ZeRO 0-3,
sequence parallelism on and off, context and expert parallelism) with
``kernels.llm_search.search_llm``: the stems (tp, pp, dp, cp, ep, micro-batch) come from
``parallelism.layout_stems``; the kernel crosses each with the interleave factors, ZeRO stages,
recomputation and sequence parallelism, skips the layouts that do not fit in memory and those
its lower bound shows cannot be faster than the best so far, and evaluates the rest with the
cube's kernel.  The result equals the fastest layout of ``parallelism.enumerate_layouts`` evaluated
one by one (ties to the first in its order); ``tests/test_llm_space.py`` checks it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from paigrid.errors import PaigridError
from paigrid.inputs.catalog import Catalogues
from paigrid.inputs.efficiency import Efficiency
from paigrid.kernels import llm_columns as K
from paigrid.llm.evaluate import RESULTS, shape_table
from paigrid.llm.models import Transformer
from paigrid.llm.parallelism import WIDE, Layout, Space, layout_stems
from paigrid.llm.shapes import RECOMPUTE
from paigrid.llm.tables import Hardware, LlmOptions, hardware_table, model_vector

#: the kernel's count columns by name (``kernels.llm_columns.C_*``)
COUNT_NAMES = ("layouts", "pruned_memory", "pruned_bound", "evaluated", "valid")


@dataclass
class SearchResult:
    """The best layout per design: ``layouts`` (a ``Layout`` or None where none is valid),
    ``results`` (D, N_RESULT_FIELDS; NaN where none), ``reasons`` (D,) reason codes (0 where a
    layout is valid; else the first in the kernel's order of checks that refused an evaluated
    layout, memory where every layout was pruned by memory), and ``counts`` (name of ``COUNT_NAMES`` ->
    layouts summed over designs)."""

    layouts: list
    results: np.ndarray
    reasons: np.ndarray
    counts: dict

    def fields(self, j: int = 0) -> dict:
        """Design ``j``'s best as ``RESULTS`` names -> values (NaN where none is valid)."""
        return {name: float(self.results[j, index]) for name, (index, _) in RESULTS.items()}


def choices_vector(space: Space) -> np.ndarray:
    """The kernel's choices vector (``kernels.llm_search``): the interleave factors (or every
    one), ZeRO stages, recomputation codes and sequence-parallel flags of ``space``."""
    out = [1.0 if not space.vpp else 0.0, float(len(space.vpp)), *map(float, space.vpp)]
    out += [float(len(space.zero)), *map(float, space.zero)]
    out += [float(len(space.recompute)), *(float(RECOMPUTE.index(r)) for r in space.recompute)]
    out += [float(len(space.sequence_parallel)), *(1.0 if s else 0.0 for s in space.sequence_parallel)]
    return np.array(out)


def search_tables(
    model: Transformer,
    n_gpu: int,
    designs: list[Hardware],
    cats: Catalogues,
    eff: Efficiency,
    options: LlmOptions,
    space: Space = WIDE,
    global_batch: int | None = None,
):
    """The search kernel's inputs: (stems, hardware, model, compute table, options, choices)."""
    if not designs:
        raise PaigridError("there is no hardware design to search layouts on.")
    stems = layout_stems(model, n_gpu, space, global_batch)
    shapes = sorted({(tp, mb * model.seq_len / cp, ep) for tp, _, _, cp, ep, mb in stems})
    position = {shape: i for i, shape in enumerate(shapes)}
    table = np.zeros((len(stems), K.N_STEM_FIELDS))
    for i, (tp, pp, dp, cp, ep, mb) in enumerate(stems):
        table[i] = (tp, pp, dp, cp, ep, mb, position[(tp, mb * model.seq_len / cp, ep)])
    pairs = list(dict.fromkeys((hw.gpu, hw.precision) for hw in designs))
    ctab = (
        shape_table(model, cats, eff, pairs, shapes, options.attention)
        if shapes
        else np.zeros((len(pairs), 1, 3, 2, K.N_CT_FIELDS))
    )
    return (
        table,
        hardware_table(designs, cats, eff, pairs),
        model_vector(model, global_batch, options.attention),
        ctab,
        options.vector(),
        choices_vector(space),
    )


def best_layout(
    model: Transformer,
    n_gpu: int,
    designs: list[Hardware],
    cats: Catalogues,
    eff: Efficiency,
    options: LlmOptions,
    space: Space = WIDE,
    global_batch: int | None = None,
    device: str = "cpu",
    precompiled: bool = False,
) -> SearchResult:
    """The fastest valid layout of ``model`` on ``n_gpu`` GPUs of each design in ``space``
    (pruned search, ``kernels.llm_search``; on ``device`` cuda the same kernels on the GPU,
    ``kernels.cuda_llm``; with ``precompiled``, a serial search on the CPU runs the kernels of
    ``paigrid.precompiled`` where they are built or can be, without importing numba)."""
    arrays = search_tables(model, n_gpu, designs, cats, eff, options, space, global_batch)
    stems, hw = arrays[0], arrays[1]
    rows = stems.shape[0] * hw.shape[0]
    best_res = np.empty((rows, K.N_RESULT_FIELDS))
    best_lay = np.empty((rows, K.N_LAYOUT_FIELDS))
    counts = np.zeros((rows, K.N_COUNTS))
    if rows:
        probe, search = backend(device, rows, precompiled)
        best_res, best_lay, counts = search(arrays, incumbents(arrays, probe, search))
    return reduce_stems(best_res, best_lay, counts, len(designs))


def backend(device: str, rows: int, precompiled: bool = False):
    """(probe, search) of ``device``: functions of (the search tables) and of (the tables, the
    incumbents) giving the kernels' outputs; on the CPU serial below ``PARALLEL_ROWS`` rows (with
    ``precompiled``, those of ``paigrid.precompiled`` where it has them)."""
    if device == "cpu" and precompiled and rows < PARALLEL_ROWS:
        from paigrid import precompiled as P

        module = P.load(build=True)
        if module is not None:
            return _precompiled_backend(module, P.contiguous)
    if device == "cuda":
        from paigrid.kernels import cuda_llm

        def probe_cuda(arrays: tuple) -> np.ndarray:
            stems, hw, model, ctab, options, choices = arrays
            return cuda_llm.probe_llm_cuda(stems, hw, model, ctab, options, choices)

        def search_cuda(arrays: tuple, incumbent: np.ndarray) -> tuple:
            stems, hw, model, ctab, options, choices = arrays
            return cuda_llm.search_llm_cuda(stems, hw, model, ctab, options, choices, incumbent)

        return probe_cuda, search_cuda
    if device != "cpu":
        raise PaigridError(f"the LLM search runs on cpu or cuda, not {device!r}.")
    from paigrid.kernels import llm_search as S

    parallel = rows >= PARALLEL_ROWS

    def probe(arrays):
        out = np.empty(arrays[0].shape[0] * arrays[1].shape[0])
        (S.probe_llm if parallel else S.probe_llm_serial)(*arrays, out)
        return out

    def search(arrays, incumbent):
        n = arrays[0].shape[0] * arrays[1].shape[0]
        outs = (np.empty((n, K.N_RESULT_FIELDS)), np.empty((n, K.N_LAYOUT_FIELDS)), np.zeros((n, K.N_COUNTS)))
        (S.search_llm if n >= PARALLEL_ROWS else S.search_llm_serial)(*arrays, incumbent, *outs)
        return outs

    return probe, search


def _precompiled_backend(module, contiguous):
    """(probe, search) of ``backend`` with the serial kernels of the precompiled ``module``."""

    def probe(arrays):
        out = np.empty(arrays[0].shape[0] * arrays[1].shape[0])
        module.probe_llm_serial(*contiguous(*arrays), out)
        return out

    def search(arrays, incumbent):
        n = arrays[0].shape[0] * arrays[1].shape[0]
        outs = (np.empty((n, K.N_RESULT_FIELDS)), np.empty((n, K.N_LAYOUT_FIELDS)), np.zeros((n, K.N_COUNTS)))
        module.search_llm_serial(*contiguous(*arrays, incumbent), *outs)
        return outs

    return probe, search


#: stem x design rows from which the search runs on every thread (fewer: serially; one stem of the
#: wide space costs about a microsecond once pruned, so the thread pool pays off only on many)
PARALLEL_ROWS = 20_000
#: stems per design searched first to find the incumbent (those whose probe is fastest)
LEADING_STEMS = 16


def incumbents(arrays: tuple, probe, search) -> np.ndarray:
    """Per hardware row, the step [s] of a valid layout of the space (inf where the probes find
    none), to prune against: ``probe`` (``probe_llm``) evaluates a few layouts of every stem,
    then ``search`` searches in full the ``LEADING_STEMS`` stems whose probes are fastest on
    some design, and the best step found is the incumbent.  Any valid layout's step would keep
    the search exact; a fast one prunes more."""
    stems, hw = arrays[0], arrays[1]
    probed = probe(arrays).reshape(stems.shape[0], hw.shape[0])
    incumbent = probed.min(axis=0)
    # the leading stems' rows, sorted and distinct (np.unique's answer without its import of numpy.ma)
    chosen = np.zeros(stems.shape[0], dtype=bool)
    chosen[np.argsort(probed, axis=0, kind="stable")[:LEADING_STEMS].ravel()] = True
    leading = np.flatnonzero(chosen)
    best_res = search((stems[leading], *arrays[1:]), incumbent)[0]
    found = best_res[:, K.R_STEP].reshape(leading.size, hw.shape[0])
    return np.fmin(incumbent, np.nanmin(np.where(np.isnan(found), np.inf, found), axis=0))


def reduce_stems(best_res: np.ndarray, best_lay: np.ndarray, counts: np.ndarray, n_designs: int) -> SearchResult:
    """The per-design best over the stems' bests (the kernel's outputs, row stem x D + design):
    the first stem with the least step (the enumeration's order, as in the exhaustive search);
    where none is valid, the reason of ``SearchResult.reasons``."""
    res = best_res.reshape(-1, n_designs, K.N_RESULT_FIELDS)
    lay = best_lay.reshape(-1, n_designs, K.N_LAYOUT_FIELDS)
    step = res[..., K.R_STEP]
    key = np.where(np.isnan(step), np.inf, step)
    layouts: list[Layout | None] = []
    results = np.full((n_designs, K.N_RESULT_FIELDS), np.nan)
    reasons = np.full(n_designs, K.REASON_MEMORY, dtype=np.int64)
    for j in range(n_designs):
        if not res.shape[0]:
            layouts.append(None)
            continue
        i = int(np.argmin(key[:, j]))
        if not np.isfinite(key[i, j]):
            codes = res[:, j, K.R_REASON]
            known = codes[~np.isnan(codes) & (codes != K.REASON_MEMORY)]
            reasons[j] = int(known.min()) if known.size else K.REASON_MEMORY
            layouts.append(None)
            continue
        results[j] = res[i, j]
        reasons[j] = K.REASON_VALID
        layouts.append(layout_of_row(lay[i, j]))
    totals = counts.reshape(-1, n_designs, counts.shape[-1]).sum(axis=(0, 1))
    return SearchResult(layouts, results, reasons, {name: int(totals[k]) for k, name in enumerate(COUNT_NAMES)})


def layout_of_row(row: np.ndarray) -> Layout:
    """The ``Layout`` of one row of the kernel's layout table."""
    return Layout(
        int(row[K.LA_TP]),
        int(row[K.LA_PP]),
        int(row[K.LA_DP]),
        int(row[K.LA_CP]),
        int(row[K.LA_EP]),
        int(row[K.LA_VPP]),
        int(row[K.LA_MB]),
        int(row[K.LA_ZERO]),
        RECOMPUTE[int(row[K.LA_RECOMPUTE])],
        bool(row[K.LA_SP]),
    )
