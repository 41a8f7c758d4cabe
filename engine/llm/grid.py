"""The LLM family's part of a sweep: its grid over (job, layout, gpu, n_gpu, domain, network,
precision), its blocks of work (one per job and GPU count) and the evaluation of one block.

The layout axis is one list of labels for every GPU count (``parallelism.layout_axis``: the
labels carry no data-parallel degree); at a GPU count a label that does not divide it is an
invalid cell with reason ``layouts.REASON_N_GPU``, and every other cell is evaluated by the LLM
kernel (``llm.evaluate.evaluate``), which gives the reason of a layout that does not suit the
model or the design (memory included).  The sweep writer (``paigrid.store``) stores the cells
and the per-job bests over the layout axis.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from paigrid.errors import PaigridError
from paigrid.inputs.catalog import Catalogues
from paigrid.inputs.efficiency import Efficiency
from paigrid.inputs.jobs import LlmJob
from paigrid.inputs.spec import CURRENT, SweepSpec
from paigrid.kernels import llm_columns as K
from paigrid.llm.evaluate import RESULTS, evaluate
from paigrid.llm.fabrics import resolve_network
from paigrid.llm.parallelism import REASON_N_GPU, Layout, Space, layout_axis, space_from_table
from paigrid.llm.tables import Hardware, LlmOptions, intra_link_for

#: today's defaults of the LLM family for [grid] keys a spec leaves out
DEFAULT_GPUS = ("A100-SXM4-80GB", "H100-SXM5-80GB", "H200", "B200")
DEFAULT_N_GPU = tuple(2**k for k in range(3, 15))  # 8 .. 16384
DEFAULT_NETWORKS = ("rdma-100g", "ib-hdr-200g", "ib-ndr-400g", "ib-xdr-800g")
DEFAULT_PRECISIONS = ("amp-bf16",)
#: the server when the GPU catalogue has no gpus_per_server / nvlink_domain_GPUs column (an HGX board)
DEFAULT_SERVER_GPUS = 8
#: the most layout x design pairs evaluated at once (each pair holds N_RESULT_FIELDS doubles)
BLOCK_PAIRS = 400_000


@dataclass
class LlmGrid:
    """The LLM family of a sweep: jobs, the layout axis (dp = 1 in each ``Layout``), the design
    dimensions, the per-GPU intra link and server size, NICs per GPU, the layout space and the
    LLM model's options."""

    jobs: list[LlmJob]
    layouts: list[Layout]
    gpu: list[str]
    n_gpu: list[int]
    domain: list[int]
    network: list[str]
    precision: list[str]
    intra: list[str]
    gpus_per_node: list[int]
    nics_per_gpu: float
    space: Space
    options: LlmOptions
    cats: Catalogues
    efficiency: Efficiency

    @property
    def shape(self) -> tuple[int, ...]:
        """Sizes along ``schema.LLM_DIMS``."""
        return (
            len(self.jobs),
            len(self.layouts),
            len(self.gpu),
            len(self.n_gpu),
            len(self.domain),
            len(self.network),
            len(self.precision),
        )

    @property
    def cells(self) -> int:
        """Cells of the LLM cube (job x layout x design)."""
        return int(np.prod(self.shape))

    def blocks(self) -> list[tuple[int, int]]:
        """The blocks of work: (job index, n_gpu index), jobs slowest."""
        return [(j, n) for j in range(len(self.jobs)) for n in range(len(self.n_gpu))]

    def designs(self) -> list[Hardware]:
        """Every (gpu, domain, network, precision) design, in C order of those axes."""
        return [
            Hardware(g, p, d, self.intra[gi], w, self.nics_per_gpu)
            for gi, g in enumerate(self.gpu)
            for d in self.domain
            for w in self.network
            for p in self.precision
        ]


def catalogue_default(cats: Catalogues, gpu: str, column: str) -> int:
    """A GPU's server size from its catalogue column (``gpus_per_server`` or
    ``nvlink_domain_GPUs``) where gpus.csv has it, else ``DEFAULT_SERVER_GPUS``."""
    if column in cats.gpus.columns:
        value = cats.gpus.number(gpu, column)
        if value == value and value >= 1:
            return int(value)
    return DEFAULT_SERVER_GPUS


#: the most GPUs an LLM job is swept at (as ``paigrid llm sweep``'s --n-gpu)
MAX_LLM_GPUS = 1 << 20


def _once(names: list[str], dim: str, origin: str) -> list[str]:
    """``names`` (resolved catalogue names), one sentence when two of them are one entry (an alias
    and its name): a grid value given twice would sweep the same cells twice."""
    twice = [name for k, name in enumerate(names) if name in names[:k]]
    if twice:
        raise PaigridError(f"{origin}: grid.{dim} names {twice[0]} twice (an alias and its name, or a repeat).")
    return names


def build_llm_grid(spec: SweepSpec, jobs: list[LlmJob], cats: Catalogues, eff: Efficiency) -> LlmGrid:
    """The LLM family's grid of ``spec``: the [grid] keys it shares with the data-parallel family
    where given (``inputs.spec.GRID_KEYS``), else this family's defaults; its [llm] table's
    layout space and model options (``[llm.options]``)."""
    table = dict(spec.llm)
    option_items = table.pop("options", {})
    if not isinstance(option_items, dict):
        raise PaigridError(f"{spec.origin}: [llm.options] must be a table of KEY = VALUE.")
    space = space_from_table(table, spec.origin)
    options = LlmOptions.defaults().with_items(option_items, f"{spec.origin}: [llm.options]")
    gpus = _once([cats.gpus.resolve(g) for g in (spec.gpu or DEFAULT_GPUS)], "gpu", spec.origin)
    if spec.n_gpu == CURRENT:  # every power of two from 1 to 16384, and each job's count of today
        n_gpu = sorted({2**k for k in range(15)} | {int(j.current["n_gpu"]) for j in jobs if j.current})
    else:
        n_gpu = list(DEFAULT_N_GPU) if spec.n_gpu is None else list(spec.n_gpu)
    beyond = [n for n in n_gpu if isinstance(n, int) and n > MAX_LLM_GPUS]
    if beyond:  # the layouts are enumerated over the divisors of each count: beyond this, hours
        raise PaigridError(
            f"{spec.origin}: the LLM jobs take GPU counts from 1 to {MAX_LLM_GPUS:,}, not {beyond[0]:,} "
            "(its layouts would be enumerated over every divisor)."
        )
    domain = spec.domain or sorted({catalogue_default(cats, g, "nvlink_domain_GPUs") for g in gpus})
    networks = _once([resolve_network(n, cats) for n in (spec.network or DEFAULT_NETWORKS)], "network", spec.origin)
    precision = _once(
        [cats.precisions.resolve(p) for p in (spec.precision or DEFAULT_PRECISIONS)], "precision", spec.origin
    )
    per_node = [spec.gpus_per_node or catalogue_default(cats, g, "gpus_per_server") for g in gpus]
    layouts = layout_axis([j.model for j in jobs], n_gpu, space)
    if not layouts:
        raise PaigridError(
            f"{spec.origin}: the [llm] layout space has no layout that suits any LLM job at these GPU counts."
        )
    return LlmGrid(
        jobs,
        layouts,
        gpus,
        n_gpu,
        list(domain),
        networks,
        precision,
        [intra_link_for(cats, g) for g in gpus],
        per_node,
        1.0 if spec.nics_per_gpu is None else spec.nics_per_gpu,
        space,
        options,
        cats,
        eff,
    )


def evaluate_llm_block(grid: LlmGrid, j: int, ni: int) -> tuple[np.ndarray, np.ndarray]:
    """Every cell of job ``j`` at GPU count index ``ni``: (results (layout, gpu, domain,
    network, precision, N_RESULT_FIELDS) float64, NaN where invalid; reason codes (layout, gpu,
    domain, network, precision) uint8, ``REASON_N_GPU`` where the layout does not divide the
    GPU count)."""
    n = grid.n_gpu[ni]
    design_shape = grid.shape[2:3] + grid.shape[4:]
    designs = grid.designs()
    results = np.full((len(grid.layouts), len(designs), K.N_RESULT_FIELDS), np.nan)
    reason = np.full((len(grid.layouts), len(designs)), REASON_N_GPU, dtype=np.uint8)
    fits = [i for i, lay in enumerate(grid.layouts) if n % (lay.tp * lay.pp * lay.cp) == 0]
    step = max(1, BLOCK_PAIRS // len(designs))
    model = grid.jobs[j].model
    for start in range(0, len(fits), step):
        rows = fits[start : start + step]
        layouts = [
            replace(grid.layouts[i], dp=n // (grid.layouts[i].tp * grid.layouts[i].pp * grid.layouts[i].cp))
            for i in rows
        ]
        res = evaluate(model, layouts, designs, grid.cats, grid.efficiency, grid.options)
        results[rows] = res
        reason[rows] = res[:, :, K.R_REASON].astype(np.uint8)
    invalid = reason != K.REASON_VALID
    results[invalid] = np.nan
    return (
        results.reshape((len(grid.layouts), *design_shape, K.N_RESULT_FIELDS)),
        reason.reshape((len(grid.layouts), *design_shape)),
    )


def best_over_layouts(results: np.ndarray, reason: np.ndarray, n_reasons: int) -> dict[str, np.ndarray]:
    """The per-design bests of one block (``evaluate_llm_block``'s arrays): ``best_layout``
    (index on the layout axis, -1 where none is valid), ``best`` (the best's result fields,
    NaN where none) and ``by_reason`` (layouts per reason code) over (gpu, domain, network,
    precision).  Ties go to the first layout of the axis."""
    step = results[..., K.R_STEP]
    key = np.where(np.isnan(step), np.inf, step)
    pick = np.argmin(key, axis=0)
    none = ~np.isfinite(np.take_along_axis(key, pick[None], axis=0)[0])
    best = np.take_along_axis(results, pick[None, ..., None], axis=0)[0]
    best[none] = np.nan
    counts = np.stack([(reason == code).sum(axis=0) for code in range(n_reasons)], axis=-1).astype(np.int32)
    return {"best_layout": np.where(none, -1, pick).astype(np.int32), "best": best, "by_reason": counts}


def result_fields() -> dict[str, tuple[int, str]]:
    """The kernel's result fields stored in the cube: name -> (index, units)."""
    return dict(RESULTS)
