"""Fit a few physical efficiency parameters to measured throughputs (robust least squares).

The model is evaluated through ``predict.predict_configs`` exactly as ``validate`` and
``sweep`` evaluate it; the fit only changes the efficiency factors it divides the datasheet
peaks by.  Parameter groups (``parameters=``):

* ``flop``: FLOP efficiency (fraction of dense peak FLOP/s) per GPU and precision present in
  the rows, written as ``[flop_efficiency] "GPU/precision"``; with ``flop_per="precision"``
  one value per precision shared by every GPU (so it transfers to GPUs not in the fit);
* ``link``: achievable fraction of nominal bandwidth per link *kind* (``nvswitch``,
  ``nvlink-hcm``, ``pcie``, ``infiniband``, ...) that multi-GPU rows exchange gradients over;
* ``memory`` (not by default): HBM efficiency per GPU;
* ``overlap`` (not by default): one global fraction of communication hidden behind the
  backward pass.  Throughput alone can rarely tell overlap from link efficiency (both scale the
  exposed communication), so fitting both is usually refused as under-determined;
* ``class``, ``hbm``, ``launch`` (pai-v2, by default with ``link``): operator-class efficiencies,
  HBM efficiency and launch time (``_class_candidates``);
* ``workload`` (pai-v2, not by default): one correction factor per workload of the rows,
  ``[workload_efficiency]``: its operator classes run at that multiple of their default rates.
  It applies only to that workload (a prediction of a workload without measurements keeps 1),
  so the fit reports it as a per-workload correction, not as a property of the GPU.

Every parameter is bounded (``datasets/parameter_bounds.csv``) and fitted as log p.  Residuals are
r = log(predicted) - log(measured); the loss is ``soft_l1`` with scale 0.1 (residuals beyond
about 10 % count linearly, not quadratically).  The standard error of log p comes from the
Jacobian at the solution, cov = s^2 (J^T J)^-1 with s^2 = sum(r^2) / (rows - parameters);
the value's is p x that.

A fit is refused before it starts when the rows cannot determine it: fewer rows than
parameters, a parameter that no row depends on (a 10 % change moves no prediction by 0.1 %),
or parameters the rows cannot tell apart (with 1 % measurement noise a parameter would be
known only to within a factor e: relative standard error of log p above 1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from paigrid.accuracy.measurements import Measurement
from paigrid.accuracy.scalingfit import SCALING_GROUPS
from paigrid.accuracy.shrinkage import StrengthChoice, choose_strength, shrunk_linear_least_squares
from paigrid.accuracy.tomlwrite import non_default_options, toml_key, toml_value
from paigrid.errors import PaigridError
from paigrid.files import write_text_atomically
from paigrid.inputs.catalog import Catalogues
from paigrid.inputs.efficiency import Efficiency
from paigrid.inputs.spec import Options

GROUPS = ("flop", "link", "memory", "overlap", "class", "hbm", "launch", "workload")
DEFAULT_PARAMETERS = ("flop", "link")
#: the default groups of compute model pai-v2: operator-class efficiencies per GPU generation
#: and precision family, HBM efficiency per generation, the eager launch time, link kinds (the
#: per-workload corrections are not among them: on the public rows they put the Volta HBM
#: efficiency on its bound, so a default calibration would be refused; docs/accuracy.md)
DEFAULT_PARAMETERS_V2 = ("class", "hbm", "launch", "link")
#: pai-v2 fits at most one parameter per this many rows (the most informative ones; see ``fit``)
ROWS_PER_PARAMETER = 3
LOWER, UPPER = 0.05, 1.0
LOSS, F_SCALE = "soft_l1", 0.1
STEP = 1e-3  # finite-difference step in log p (predictions are float32)
MIN_SENSITIVITY = 0.01  # |d log throughput / d log p| below which a row does not inform p
NOISE = 0.01  # measurement noise assumed by the identifiability check (1 %)
MAX_RELATIVE_SE = 1.0  # refuse when a parameter's standard error of log p would exceed this


@dataclass
class Parameter:
    """One fitted efficiency: its calibration table and key, start value and result."""

    section: str  # flop_efficiency, memory_efficiency, link_efficiency, class_efficiency,
    #                     workload_efficiency or options
    key: str
    start: float
    value: float = math.nan
    stderr: float = math.nan
    lower: float = LOWER  # bounds from datasets/parameter_bounds.csv (``bounds_for``)
    upper: float = UPPER

    @property
    def name(self) -> str:
        """``section.key``, e.g. ``flop_efficiency.A100-SXM4-80GB/tf32``."""
        return f"{self.section}.{self.key}"

    @property
    def at_bound(self) -> bool:
        """True when the fitted value sits on a bound (its standard error then means little)."""
        return math.isclose(self.value, self.lower, rel_tol=1e-4) or math.isclose(self.value, self.upper, rel_tol=1e-4)


@dataclass
class Fit:
    """Result of ``fit``: the parameters, the rows and their residuals before and after."""

    parameters: list[Parameter]
    rows: list[Measurement]
    predicted: list[float]  # the rows' observed quantity (samples/s, ...) with the fitted values
    start_predicted: list[float]  # the same with the starting (default) values
    options: Options
    degrees_of_freedom: int
    notes: dict = field(default_factory=dict)  # provenance written to the [fit] table

    @property
    def residuals(self) -> list[float]:
        """log(predicted / measured) per row with the fitted values."""
        return [math.log(p / r.measured) for p, r in zip(self.predicted, self.rows)]

    def calibration(self) -> Efficiency:
        """The fitted values as calibration overrides (what ``write_calibration`` stores)."""
        return _overrides(self.parameters, [p.value for p in self.parameters], "fit")

    def fitted_options(self, base: Options | None = None) -> Options:
        """``base`` (default: the fit's options) with a fitted overlap applied."""
        return _with_overlap(base or self.options, self.parameters, [p.value for p in self.parameters])


# --- parameters ---------------------------------------------------------------------------------
def _link_kinds(row: Measurement, cats: Catalogues) -> list[str]:
    """Link kinds a row's gradient exchange crosses (none for one GPU)."""
    if row.n_gpu == 1:
        return []
    intra = cats.links.row(row.intra)["kind"]
    network = cats.links.row(row.network)["kind"]
    if row.arch == "1wng":
        return ["pcie"]
    if row.arch == "allreduce-local":
        return [intra]
    if row.arch == "ps-worker":
        return [network]
    return ([intra] if row.gpus_per_node > 1 else []) + ([network] if row.nodes > 1 else [])


def _bounds() -> dict[str, tuple[float, float]]:
    """(lower, upper) per parameter kind, from ``datasets/parameter_bounds.csv``."""
    from importlib import resources

    from paigrid.inputs.catalog import csv_table

    text = resources.files("paigrid.datasets").joinpath("parameter_bounds.csv").read_text(encoding="utf-8")
    _, rows = csv_table(
        text,
        "the built-in parameter_bounds.csv",
        "the parameter bounds table",
        ("parameter", "lower", "upper", "unit", "source"),
    )
    return {r["parameter"]: (float(r["lower"]), float(r["upper"])) for _, r in rows}


def bounds_for(section: str, key: str) -> tuple[float, float]:
    """Physical (lower, upper) bounds of a parameter (``datasets/parameter_bounds.csv``): by its
    section (flop_efficiency, link_efficiency, ...), for class_efficiency by its class (``hbm``,
    ``launch_eager``, ``launch_graphs``, else any FLOP class)."""
    table = _bounds()
    name = key.split("/")[0] if section == "class_efficiency" else section
    if section == "options":
        name = key
    if name not in table:
        name = "class_efficiency" if section == "class_efficiency" else section
    return table.get(name, (LOWER, UPPER))


#: how pai-v2 parameters are shared across GPUs: one per GPU generation, or one for all generations
SHARES = ("generation", "all")


def _class_candidates(
    row: Measurement, base: Efficiency, options: Options, groups, cats: Catalogues, share: str = "generation"
):
    """(key, start) of the pai-v2 parameters a row depends on: the operator classes with FLOPs in
    its workload (per generation and precision family for GEMM/convolution, per generation for
    the others), the HBM efficiency of its generation and the launch time of its execution mode.
    With ``share="all"`` the generation of every key is ``*`` (one value for all generations,
    so it transfers to a generation the rows do not have)."""
    from paigrid.inputs.efficiency import class_key, precision_family
    from paigrid.inputs.kernel_tables import class_fields, generation
    from paigrid.kernels import dp_columns as L

    gen = generation(cats, row.gpu)
    key_gen = gen if share == "generation" else "*"
    fields = class_fields(row.job(options), cats, options)
    out = []
    if "class" in groups:
        for c, cls in enumerate(L.CLASS_NAMES):
            if c in (L.CLASS_ELEMENTWISE, L.CLASS_EMBEDDING) or fields[L.J_CLASS_FLOP + c] <= 0:
                continue
            family = precision_family(row.precision) if c == L.CLASS_GEMM_CONV else "*"
            start = base.classes[class_key(base.classes, cls, gen, row.precision)]
            out.append((f"{cls}/{key_gen}/{family}", start))
    if "hbm" in groups:
        out.append((f"hbm/{key_gen}/*", base.class_for("hbm", gen, "*")))
    if "launch" in groups:
        mode = "launch_graphs" if fields[L.J_GRAPHS] == 1.0 else "launch_eager"
        out.append((f"{mode}/*/*", base.class_for(mode, "*", "*")))
    return out


def parameters_for(
    rows: list[Measurement],
    base: Efficiency,
    options: Options,
    groups=DEFAULT_PARAMETERS,
    flop_per: str = "gpu-precision",
    cats: Catalogues | None = None,
    share: str = "generation",
) -> list[Parameter]:
    """The parameters of ``groups`` that the rows touch, each with its start value (from ``base``)
    and its bounds (``bounds_for``)."""
    cats = cats or Catalogues.load()
    unknown = [g for g in groups if g not in GROUPS]
    if unknown or not groups:
        raise PaigridError(f"unknown parameter group(s) {', '.join(unknown) or '(none)'}; known: {', '.join(GROUPS)}.")
    if share not in SHARES:
        raise PaigridError(f"pai-v2 parameters are shared per {' or '.join(SHARES)}, not {share!r}.")
    if flop_per not in ("gpu-precision", "precision"):
        raise PaigridError(f"flop efficiency is fitted per gpu-precision or per precision, not {flop_per!r}.")
    params: dict[str, Parameter] = {}

    def add(section, key, start):
        if f"{section}.{key}" not in params:
            lower, upper = bounds_for(section, key)
            params[f"{section}.{key}"] = Parameter(
                section, key, min(max(start, lower * 1.2), upper * 0.99), lower=lower, upper=upper
            )

    for row in rows:
        if row.kind == "collective":  # a collective has no workload: only its links
            groups_of_row = [g for g in groups if g == "link"]
        else:
            groups_of_row = groups
            for key, start in _class_candidates(row, base, options, groups, cats, share):
                add("class_efficiency", key, start)
        if "workload" in groups_of_row:
            add("workload_efficiency", row.workload, base.workload_factor(row.workload))
        if "flop" in groups_of_row:
            key = f"{row.gpu}/{row.precision}" if flop_per == "gpu-precision" else row.precision
            add("flop_efficiency", key, base.flop_for(row.gpu, row.precision))
        if "memory" in groups_of_row:
            add("memory_efficiency", row.gpu, base.memory_for(row.gpu))
        if "link" in groups_of_row:
            for kind in _link_kinds(row, cats):
                starts = [
                    base.link_for(r["name"], kind, float(r["efficiency"])) for r in cats.links.rows if r["kind"] == kind
                ]
                add("link_efficiency", kind, float(np.mean(starts)))
    if "overlap" in groups and any(r.n_gpu > 1 for r in rows):
        add("options", "overlap", options.overlap if options.overlap >= LOWER else 0.5)
    order = (
        "flop_efficiency",
        "memory_efficiency",
        "class_efficiency",
        "workload_efficiency",
        "link_efficiency",
        "options",
    )
    return sorted(params.values(), key=lambda p: (order.index(p.section), p.key))


def _overrides(params: list[Parameter], values, origin: str) -> Efficiency:
    tables = {
        "flop_efficiency": {},
        "memory_efficiency": {},
        "link_efficiency": {},
        "class_efficiency": {},
        "workload_efficiency": {},
    }
    for p, v in zip(params, values):
        if p.section in tables:
            tables[p.section][p.key] = float(v)
    return Efficiency(
        tables["flop_efficiency"],
        tables["memory_efficiency"],
        tables["link_efficiency"],
        {},
        origin,
        tables["class_efficiency"],
        tables["workload_efficiency"],
    )


def _with_overlap(options: Options, params: list[Parameter], values) -> Options:
    for p, v in zip(params, values):
        if p.section == "options":
            options = replace(options, overlap=float(v))
    return options


# --- the fit ------------------------------------------------------------------------------------
class _Model:
    """log residuals of the rows as a function of log parameter values.

    ``support`` (rows x parameters, bool; ``support_of``): which rows a parameter can move at
    all.  With it a forward-difference Jacobian perturbs several parameters in one evaluation
    when no row depends on two of them (a GPU generation's class efficiencies and another
    generation's, say) and evaluates only the rows they touch; a row's prediction depends on its
    own row alone, so the columns are those of one parameter at a time."""

    def __init__(self, rows, base: Efficiency, options: Options, params, cats, support=None):
        self.rows, self.base, self.options, self.params, self.cats = rows, base, options, params, cats
        self.log_measured = np.log([r.measured for r in rows])
        self.lower = np.log([p.lower for p in params])
        self.upper = np.log([p.upper for p in params])
        self.support = None if support is None else np.asarray(support, dtype=bool)

    def predict(self, x: np.ndarray, index=None) -> np.ndarray:
        """Predicted throughput of the rows (of ``index``, positions in ``rows``, when given)."""
        from paigrid.accuracy.rowkinds import predict_observed

        rows = self.rows if index is None else [self.rows[i] for i in index]
        values = np.exp(x)
        eff = self.base.overridden(_overrides(self.params, values, self.base.origin))
        throughput = predict_observed(rows, self.cats, eff, _with_overlap(self.options, self.params, values))
        if not np.all(np.isfinite(throughput) & (throughput > 0)):
            bad = rows[int(np.argmin(np.isfinite(throughput) & (throughput > 0)))].id
            raise PaigridError(f"the model gives no throughput for row {bad!r}; it cannot be fitted.")
        return throughput

    def residuals(self, x: np.ndarray, index=None) -> np.ndarray:
        measured = self.log_measured if index is None else self.log_measured[index]
        return np.log(self.predict(x, index)) - measured

    def colours(self) -> list[list[int]]:
        """Groups of parameters no row depends on two of (greedy, most rows first)."""
        support = self.support
        if support is None:
            return [[j] for j in range(len(self.params))]
        order = sorted(range(len(self.params)), key=lambda j: -int(support[:, j].sum()))
        groups: list[tuple[list[int], np.ndarray]] = []
        for j in order:
            for members, used in groups:
                if not np.any(used & support[:, j]):
                    members.append(j)
                    used |= support[:, j]
                    break
            else:
                groups.append(([j], support[:, j].copy()))
        return [sorted(members) for members, _ in groups]

    def jacobian(self, x: np.ndarray, central: bool = True, here: np.ndarray | None = None) -> np.ndarray:
        """d residual / d log p by central differences of STEP (one-sided at a bound), or forward
        differences (backward at the upper bound) when not ``central``: one evaluation per
        parameter instead of two, or per group of ``colours`` with a ``support`` (``here``: the
        residuals at x, when known)."""
        jac = np.zeros((len(self.rows), len(x)))
        if central:
            for j in range(len(x)):
                up, down = x.copy(), x.copy()
                up[j] = min(x[j] + STEP, self.upper[j])
                down[j] = max(x[j] - STEP, self.lower[j])
                jac[:, j] = (self.residuals(up) - self.residuals(down)) / (up[j] - down[j])
            return jac
        here = self.residuals(x) if here is None else here
        support = np.ones((len(self.rows), len(x)), dtype=bool) if self.support is None else self.support
        for group in self.colours():
            moved = x.copy()
            for j in group:
                moved[j] = x[j] + STEP if x[j] + STEP <= self.upper[j] else x[j] - STEP
            index = np.flatnonzero(support[:, group].any(axis=1))
            if not len(index):
                continue
            change = self.residuals(moved, index) - here[index]
            for j in group:
                rows = support[index, j]
                jac[index[rows], j] = change[rows] / (moved[j] - x[j])
        return jac


def support_of(
    rows: list[Measurement],
    params: list[Parameter],
    base: Efficiency,
    options: Options,
    groups,
    flop_per: str,
    cats: Catalogues,
    share: str,
) -> np.ndarray:
    """rows x params, True where the row depends on the parameter: the parameter is among those
    ``parameters_for`` gives that row alone (the keys its own predictions look up), and the PCIe
    link efficiency for every row (the input batch crosses PCIe to the GPU on one GPU too: the
    input floor)."""
    column = {p.name: j for j, p in enumerate(params)}
    out = np.zeros((len(rows), len(params)), dtype=bool)
    if "link_efficiency.pcie" in column:
        out[:, column["link_efficiency.pcie"]] = True
    for i, row in enumerate(rows):
        for p in parameters_for([row], base, options, tuple(groups), flop_per, cats, share):
            if p.name in column:
                out[i, column[p.name]] = True
    return out


def _refuse_if_undetermined(jac: np.ndarray, params: list[Parameter], rows: list[Measurement]) -> None:
    """One clear sentence when the rows cannot determine the parameters (see the module docstring)."""
    n, m = len(params), len(rows)
    if m < n:
        raise PaigridError(
            f"the fit has {n} parameters ({', '.join(p.name for p in params)}) but only {m} "
            f"row(s); select more rows or fit fewer parameter groups."
        )
    informative = np.abs(jac) >= MIN_SENSITIVITY
    for j, p in enumerate(params):
        if not informative[:, j].any():
            raise PaigridError(
                f"the selected rows cannot determine {p.name}: no row depends on it "
                f"(a 10% change moves every prediction by less than 0.1%); fit fewer "
                f"parameter groups or add rows that depend on it."
            )
    rows_used = int(informative.any(axis=1).sum())
    if rows_used < n:
        raise PaigridError(
            f"only {rows_used} of the selected rows depend on the {n} parameters; the fit is under-determined."
        )
    _, s, vt = np.linalg.svd(jac, full_matrices=False)
    if s[-1] <= s[0] * 1e-10:
        worst = int(np.argmax(np.abs(vt[-1])))
        raise PaigridError(
            f"the selected rows cannot determine {params[worst].name}: it changes the "
            f"predictions only together with other parameters; fit fewer parameter groups."
        )
    cov = np.linalg.inv(jac.T @ jac)
    se = NOISE * np.sqrt(np.diag(cov))
    worst = int(np.argmax(se))
    if se[worst] > MAX_RELATIVE_SE:
        corr = cov[worst] / np.sqrt(cov[worst, worst] * np.diag(cov))
        corr[worst] = 0.0
        partner = f" (it is confounded with {params[int(np.argmax(np.abs(corr)))].name})" if n > 1 else ""
        factor = f"{math.exp(se[worst]):.3g}" if se[worst] < math.log(1000) else "more than 1000"
        raise PaigridError(
            f"the selected rows cannot determine {params[worst].name}{partner}: with 1% "
            f"measurement noise it would be known only within a factor of {factor}; "
            f"fit fewer parameter groups or add rows that vary it."
        )


def _most_informative(model: _Model, params: list[Parameter], x0: np.ndarray, limit: int, jac: np.ndarray):
    """The pai-v2 selection: at most ``limit`` parameters, most informative first (summed
    |d log prediction / d log p| over the rows, ``jac`` the Jacobian at ``x0``), each kept only
    if the rows still determine every kept one (``_refuse_if_undetermined`` passes); the others
    keep their defaults.  Returns the kept parameters' indices, parameters, their start vector
    and the candidates left at their defaults."""
    order = sorted(range(len(params)), key=lambda j: (-float(np.abs(jac[:, j]).sum()), params[j].name))
    kept: list[int] = []
    for j in order:
        if len(kept) >= limit:
            break
        trial = sorted(kept + [j])
        try:
            _refuse_if_undetermined(jac[:, trial], [params[i] for i in trial], model.rows)
        except PaigridError:
            continue
        kept = trial
    left = [params[i] for i in range(len(params)) if i not in kept]
    return kept, [params[i] for i in kept], x0[kept], left


@dataclass
class Linearisation:
    """The model linearised at the defaults: per row (``ids``) its log residual ``r0`` and per
    parameter (``names``) the forward-difference column of d r / d log p (``jac``, rows x
    parameters).  A row's prediction depends on its own row only, so the linearisation of a set
    of rows is the rows' slice of one taken over more rows: the held-out judgement computes it
    once over every row and hands each fold's fit its training rows' slice (``fit``), which is
    what the fit would compute on those rows itself."""

    ids: list[str]
    names: list[str]
    r0: np.ndarray
    jac: np.ndarray
    support: np.ndarray  # rows x parameters: ``support_of``

    def slice(self, rows: list[Measurement], params: list[Parameter]) -> tuple[np.ndarray, ...] | None:
        """(r0, jac, support) of ``rows`` and ``params``, or None when one of them is not in it."""
        where = {i: k for k, i in enumerate(self.ids)}
        column = {n: k for k, n in enumerate(self.names)}
        if any(r.id not in where for r in rows) or any(p.name not in column for p in params):
            return None
        index, columns = [where[r.id] for r in rows], [column[p.name] for p in params]
        return self.r0[index], self.jac[np.ix_(index, columns)], self.support[np.ix_(index, columns)]


def linearise(
    rows: list[Measurement],
    base: Efficiency,
    options: Options,
    parameters=None,
    flop_per: str = "gpu-precision",
    cats: Catalogues | None = None,
    share: str = "generation",
) -> Linearisation:
    """``Linearisation`` of ``rows`` at the defaults for every candidate parameter of the
    groups ``parameters`` (``fit``'s defaults when None): one model evaluation per parameter."""
    from paigrid.accuracy.measurements import modelled

    cats = cats or Catalogues.load()
    rows = [r for r in rows if modelled(r)]
    if parameters is None:
        parameters = DEFAULT_PARAMETERS_V2 if options.model == "pai-v2" else DEFAULT_PARAMETERS
    params = parameters_for(rows, base, options, tuple(parameters), flop_per, cats, share)
    support = support_of(rows, params, base, options, parameters, flop_per, cats, share)
    model = _Model(rows, base, options, params, cats, support)
    x0 = np.log([p.start for p in params])
    r0 = model.residuals(x0)
    return Linearisation([r.id for r in rows], [p.name for p in params], r0, model.jacobian(x0, False, r0), support)


#: at most this many linearisations of the model per fit (``_gauss_newton``)
OUTER_STEPS = 4
#: a fit stops when no log parameter moved by more than this in a step (1%)
OUTER_TOLERANCE = 0.01


def _objective(r: np.ndarray, x: np.ndarray, x0: np.ndarray, strength: float) -> float:
    """The fit's objective: sum of soft-l1 losses of r plus the ridge penalty (``shrinkage``)."""
    loss = 2.0 * F_SCALE**2 * float(np.sum(np.sqrt(1.0 + (r / F_SCALE) ** 2) - 1.0))
    return loss + (0.0 if strength == 0.0 else strength * float(np.sum((x - x0) ** 2)))


def _gauss_newton(model: _Model, x0: np.ndarray, start: tuple, strength: float):
    """Minimise the objective by linearised steps: at x_k the model is r_k + J_k (x - x_k), its
    shrunk robust least-squares minimum (within the bounds, shrunk toward x0) is the next point,
    halved until the model itself (not the linearisation) improves; at most ``OUTER_STEPS``
    linearisations, stopping once no log parameter moves by ``OUTER_TOLERANCE``.  ``start``:
    (x, residuals at x, a Jacobian near x) to begin from (x0 and its precomputable ``jac0``, or
    the point of an earlier fit); each later linearisation costs one model evaluation per group
    of ``_Model.colours``.  Returns (x, the residuals there, the last Jacobian)."""
    x, r, jac = (np.array(v, dtype=float) for v in start)
    best = _objective(r, x, x0, strength)
    for step in range(OUTER_STEPS):
        target = shrunk_linear_least_squares(r, jac, x, x0, model.lower, model.upper, strength, F_SCALE, start=x)
        t, moved = 1.0, False
        while t >= 0.125:
            trial = np.clip(x + t * (target - x), model.lower, model.upper)
            r_trial = model.residuals(trial)
            value = _objective(r_trial, trial, x0, strength)
            if value <= best:
                moved = True
                break
            t /= 2.0
        if not moved:
            break
        shift = float(np.max(np.abs(trial - x))) if len(x) else 0.0
        x, r, best = trial, r_trial, value
        if shift < OUTER_TOLERANCE or step == OUTER_STEPS - 1:
            break
        jac = model.jacobian(x, central=False, here=r)
    return x, r, jac


def fit(
    rows: list[Measurement],
    base_efficiency: Efficiency,
    options: Options,
    parameters=None,
    flop_per: str = "gpu-precision",
    cats: Catalogues | None = None,
    allow_bounds: bool = True,
    share: str = "generation",
    shrinkage: float | str = 0.0,
    linearisation: Linearisation | None = None,
) -> Fit:
    """Fit the efficiency ``parameters`` (groups, see the module docstring; ``None``: the
    model's defaults, ``DEFAULT_PARAMETERS`` for pai-v1, ``DEFAULT_PARAMETERS_V2`` for pai-v2,
    ``link`` alone when every row is a collective row) to ``rows`` (of any row kind: the
    residual is log(predicted / measured) of what the row observed).  Collective rows whose
    algorithm the model has no term for (``measurements.modelled``: NVLS) are left out
    (``Fit.rows`` holds the rows fitted, ``Fit.notes["left_out"]`` the others).

    ``base_efficiency`` gives the start values and everything not fitted; ``options`` the model
    options.  Under pai-v2 at most one parameter per ``ROWS_PER_PARAMETER`` rows is fitted, the
    most informative ones the rows can determine (``_most_informative``); the others keep their
    defaults (``Fit.notes["at_default"]``); ``share`` (``SHARES``) shares them per GPU
    generation (default) or across all generations.  Returns a ``Fit`` with each value and standard
    error (within the bounds of ``datasets/parameter_bounds.csv``: fractions, or us per launch)
    and the predicted throughput [samples/s] per row.  With ``allow_bounds`` False a value on a
    bound is an error naming the parameter.  ``shrinkage``: the ridge strength lambda of
    ``accuracy.shrinkage`` (0: the plain fit; ``math.inf``: the defaults) or ``"cv"``, chosen by
    cross-validation on ``rows`` grouped by workload (``cv_strength``; what ``paigrid calibrate``
    does by default); the choice and each candidate's score are in ``Fit.notes``.  The objective
    is minimised by linearised steps (``_gauss_newton``); ``linearisation``: the model linearised
    at the defaults over these rows or more (``linearise``), which saves the first Jacobian.  A
    parameter the fit puts on a bound, when ``allow_bounds`` is False, is returned to its
    default and the others are fitted again without it (``Fit.notes["bound_to_default"]``): a
    bound is where the physics of the parameter ends, so a value pressed against it stands for
    a term the model lacks, not for that parameter.  Needs scipy (``pip install
    paigrid[calibrate]``).
    """
    if any(r.kind == "llm" for r in rows):
        raise PaigridError(
            "llm rows are fitted by paigrid.accuracy.llmfit (paigrid calibrate on an llm file), "
            "not with the data-parallel model's parameters."
        )
    try:
        import scipy.optimize  # noqa: F401  (the solver of shrinkage.shrunk_linear_least_squares)
    except ImportError:
        raise PaigridError(
            "paigrid calibrate needs scipy; install it with pip install 'paigrid[calibrate]' (or pip install scipy)."
        ) from None
    from paigrid.accuracy.measurements import modelled

    cats = cats or Catalogues.load()
    v2 = options.model == "pai-v2"
    left_out = [r.id for r in rows if not modelled(r)]
    rows = [r for r in rows if modelled(r)]
    if not rows:
        raise PaigridError("the selected rows are all of a kind the model has no term for; nothing to fit.")
    scaling = [g for g in (parameters or ()) if g in SCALING_GROUPS]
    if scaling:
        kinds = ", ".join(sorted({r.kind for r in rows}))
        raise PaigridError(
            f"--fit {','.join(scaling)} applies to scaling-efficiency rows (a file with a "
            f"scaling_efficiency column, such as datasets/scaling_public.csv), not to {kinds} rows."
        )
    if "workload" in (parameters or ()) and not v2:
        raise PaigridError(
            "per-workload corrections (--fit workload) are parameters of compute model pai-v2; pass --model pai-v2."
        )
    if parameters is None:
        collectives = all(r.kind == "collective" for r in rows)
        parameters = ("link",) if collectives else DEFAULT_PARAMETERS_V2 if v2 else DEFAULT_PARAMETERS
    params = parameters_for(rows, base_efficiency, options, tuple(parameters), flop_per, cats, share)
    if not params:
        raise PaigridError("the selected rows touch none of the parameters to fit.")
    x0 = np.log([p.start for p in params])
    given = linearisation.slice(rows, params) if linearisation is not None else None
    if given is not None:
        r0, jac0, support = given
        model = _Model(rows, base_efficiency, options, params, cats, support)
    else:
        support = support_of(rows, params, base_efficiency, options, parameters, flop_per, cats, share)
        model = _Model(rows, base_efficiency, options, params, cats, support)
        r0 = model.residuals(x0)
        jac0 = model.jacobian(x0, central=False, here=r0)
    start_predicted = np.exp(r0 + model.log_measured)
    left: list[Parameter] = []
    if v2:
        limit = max(1, len(rows) // ROWS_PER_PARAMETER)
        kept, params, x0, left = _most_informative(model, params, x0, limit, jac0)
        if not params:
            raise PaigridError("the selected rows cannot determine any parameter of the fit.")
        jac0, support = jac0[:, kept], support[:, kept]
        model = _Model(rows, base_efficiency, options, params, cats, support)
    _refuse_if_undetermined(jac0, params, rows)
    strength, choice = _strength(shrinkage, rows, base_efficiency, options, params, cats, x0, r0, jac0)
    bound_to_default: list[Parameter] = []
    x, residuals, jac = x0, r0, jac0
    while True:
        if not math.isinf(strength):
            x, residuals, jac = _gauss_newton(model, x0, (x, residuals, jac), strength)
        # on a bound: within 1e-4 of it in log p, as ``Parameter.at_bound`` reads it
        on_bound = [j for j in range(len(params)) if min(x[j] - model.lower[j], model.upper[j] - x[j]) < 1e-4]
        if allow_bounds or not on_bound:
            break
        if len(on_bound) == len(params):
            p = params[on_bound[0]]
            raise PaigridError(
                f"the fit put {p.name} on its bound ({math.exp(x[on_bound[0]]):.4g}, bounds {p.lower:g} to "
                f"{p.upper:g} in datasets/parameter_bounds.csv): the model cannot explain these rows with physical "
                f"values; pass --allow-bounds to keep such a fit."
            )
        # back to the defaults: the parameters pressed against their bounds, and fit the rest again
        bound_to_default += [params[j] for j in on_bound]
        keep = [j for j in range(len(params)) if j not in on_bound]
        params, x0, x, jac, support = [params[j] for j in keep], x0[keep], x[keep], jac[:, keep], support[:, keep]
        model = _Model(rows, base_efficiency, options, params, cats, support)
        residuals = model.residuals(x)  # the others where they were, these at their defaults
    dof = len(rows) - len(params)
    with np.errstate(divide="ignore", invalid="ignore"):
        try:
            cov = np.linalg.inv(jac.T @ jac)
            se_log = np.sqrt(np.maximum(np.diag(cov), 0.0) * (residuals @ residuals / dof if dof > 0 else np.nan))
        except np.linalg.LinAlgError:
            se_log = np.full(len(params), np.inf)
    result_status = 0
    for p, xi, se in zip(params, x, se_log):
        p.value = float(math.exp(xi))
        p.stderr = float(p.value * se)
    notes = {
        "loss": LOSS,
        "f_scale": F_SCALE,
        "flop_per": flop_per,
        "share": share,
        "groups": list(parameters),
        "optimizer_status": result_status,
        "model": options.model,
        "shrinkage": "inf" if math.isinf(strength) else float(strength),
    }
    if choice is not None:
        per_workload = any(p.section == "workload_efficiency" for p in params)
        notes["shrinkage_chosen_by"] = (
            f"{choice.folds}-fold cross-validation on the fitted rows (folds of "
            + ("workloads" if choice.grouped and not per_workload else "rows")
            + ")"
        )
        notes["shrinkage_scores"] = [f"lambda {k:g}: mean |log residual| {v:.4f}" for k, v in choice.scores.items()]
    if left_out:
        notes["left_out"] = left_out  # rows the model has no term for (``measurements.NOT_MODELLED``)
    if bound_to_default:
        notes["bound_to_default"] = [p.name for p in bound_to_default]
        notes["bound_to_default_values"] = [float(p.start) for p in bound_to_default]
    if v2:
        notes["at_default"] = [p.name for p in left]
        notes["default_values"] = [float(p.start) for p in left]
    predicted = np.exp(residuals + model.log_measured)
    return Fit(params, rows, [float(v) for v in predicted], [float(v) for v in start_predicted], options, dof, notes)


def cv_strength(
    rows: list[Measurement],
    base: Efficiency,
    options: Options,
    params: list[Parameter],
    cats: Catalogues,
    x0: np.ndarray,
    r0: np.ndarray | None = None,
    jac: np.ndarray | None = None,
) -> StrengthChoice:
    """The shrinkage strength of ``params`` chosen by ``shrinkage.choose_strength`` on ``rows``
    alone: folds of whole workloads (of rows when per-workload corrections are fitted), each
    candidate fitted on the other folds' rows (the same parameters, started at and shrunk toward
    ``x0``) and scored on the fold's rows.

    The inner fits use the model linearised at the defaults, r(x) = r(x0) + J (x - x0) with J
    the forward-difference Jacobian of every row (one model evaluation per parameter), so the
    cross-validation costs one Jacobian instead of a fit per fold and strength; the fit with the
    chosen strength then runs on the model itself."""
    model = _Model(rows, base, options, params, cats)
    if r0 is None or jac is None:
        r0, jac = model.residuals(x0), model.jacobian(x0, central=False)

    def held_out(train, test, strength):
        x = x0
        if not math.isinf(strength):
            x = shrunk_linear_least_squares(r0[train], jac[train], x0, x0, model.lower, model.upper, strength, F_SCALE)
        return r0[test] + jac[test] @ (x - x0)

    # per-workload corrections are judged on their own workload's rows left out: folds of rows
    # (a fold of whole workloads would leave every held-out correction at its default)
    per_workload = any(p.section == "workload_efficiency" for p in params)
    groups = [r.id if per_workload else (r.workload or r.model) for r in rows]
    return choose_strength(len(rows), groups, held_out)


def _strength(
    shrinkage, rows, base, options, params, cats, x0, r0=None, jac=None
) -> tuple[float, StrengthChoice | None]:
    """(lambda, the cross-validation that chose it or None) of a ``fit``'s ``shrinkage`` argument."""
    if isinstance(shrinkage, str):
        if shrinkage.strip().casefold() != "cv":
            raise PaigridError(f"the shrinkage is cv or a strength >= 0, not {shrinkage!r}.")
        choice = cv_strength(rows, base, options, params, cats, x0, r0, jac)
        return choice.strength, choice
    value = float(shrinkage)
    if not value >= 0:
        raise PaigridError(f"the shrinkage strength is >= 0, not {shrinkage!r}.")
    return value, None


# --- writing ------------------------------------------------------------------------------------
def calibration_text(result: Fit, notes: dict | None = None) -> str:
    """The calibration TOML of ``result`` (format of ``efficiency.py``'s docstring, plus [fit])."""
    import statistics

    lines = [
        "# paigrid calibration: efficiencies fitted by `paigrid calibrate` (robust least squares on",
        "# log throughput); each value is a fraction of a datasheet peak, +- one standard error.",
        "",
    ]
    for section in (
        "flop_efficiency",
        "memory_efficiency",
        "class_efficiency",
        "workload_efficiency",
        "link_efficiency",
    ):
        chosen = [p for p in result.parameters if p.section == section]
        if chosen:
            lines.append(
                f"[{section}]"
                + (
                    "   # per-workload corrections: each applies to its workload only"
                    if section == "workload_efficiency"
                    else ""
                )
            )
            lines += [
                f"{toml_key(p.key)} = {toml_value(p.value)}  # +- {p.stderr:.3g}{' (at a bound)' if p.at_bound else ''}"
                for p in chosen
            ]
            lines.append("")
    options = non_default_options(result.fitted_options())
    if options:
        lines.append("[options]   # the model options the fit was made with (overlap: fitted, if listed below)")
        lines += [f"{k} = {toml_value(v)}" for k, v in options.items()]
        lines.append("")
    errors = [p / r.measured - 1.0 for p, r in zip(result.predicted, result.rows)]
    fit_table = {
        **(notes or {}),
        **result.notes,
        "rows": [r.id for r in result.rows],
        "parameters": [p.name for p in result.parameters],
        "degrees_of_freedom": result.degrees_of_freedom,
        "median_abs_error": statistics.median(abs(e) for e in errors),
        "rms_log_residual": math.sqrt(statistics.fmean(r * r for r in result.residuals)),
    }
    lines.append("[fit]   # provenance; paigrid reads only the tables above")
    lines += [f"{k} = {toml_value(v)}" for k, v in fit_table.items()]
    lines += ["", "[fit.uncertainty]   # one standard error of each fitted value"]
    lines += [f"{toml_key(p.name)} = {toml_value(p.stderr)}" for p in result.parameters if math.isfinite(p.stderr)]
    lines += ["", "[fit.residuals]   # log(predicted / measured) per row with the fitted values"]
    lines += [f"{toml_key(r.id)} = {toml_value(res)}" for r, res in zip(result.rows, result.residuals)]
    return "\n".join(lines) + "\n"


def write_calibration(result: Fit, path: str | Path, notes: dict | None = None) -> Path:
    """Write the calibration TOML atomically (``files.write_text_atomically``); returns the path."""
    return write_text_atomically(path, calibration_text(result, notes))
