"""Efficiency factors: the achievable fractions of datasheet peaks, from defaults or a calibration.

Version 1 reads ``datasets/model_defaults.toml`` (FLOP efficiency per precision, memory
efficiency) and the ``efficiency`` column of ``links.csv``.  A calibration file (TOML, written by
``paigrid calibrate``) may override, each table optional:

    [flop_efficiency]          # per precision, or per "GPU/precision"
    amp-fp16 = 0.5
    "A100-SXM4-80GB/tf32" = 0.62
    [memory_efficiency]        # "default", or per GPU
    default = 0.8
    [link_efficiency]          # per link kind (pcie, nvlink-hcm, nvswitch, ethernet, rdma, infiniband) or per link name
    nvswitch = 0.7
    [options]                  # model options, e.g. overlap = 0.4
    [class_efficiency]         # compute model pai-v2: "CLASS/GENERATION/PRECISION" (each may be *)
    "gemm_conv/Hopper/amp" = 0.6   # fractions of peak; hbm: of HBM bandwidth; launch_*: us per launch
    [workload_efficiency]      # compute model pai-v2, per workload (catalogue name or alias)
    gpt2-small = 0.8           # its operator classes run at 0.8 x their default rates

Compute model pai-v2 reads ``datasets/class_efficiency.csv`` (one row per class, GPU generation
and precision, ``*`` for any; precision ``amp`` stands for every amp-* precision (amp-fp16,
amp-bf16 and their autocast and FP16-wire variants), ``fp8`` for fp8 and its scaling variants
fp8-current, fp8-blockwise and mxfp8) and its calibrations; the most specific row applies (``Efficiency.class_for``).
"""

from __future__ import annotations

import functools
import math
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from paigrid.errors import PaigridError
from paigrid.files import read_toml


@dataclass
class Efficiency:
    """Achievable fractions (0 < value <= 1) used to turn peaks into achievable rates."""

    flop: dict[str, float]  # per precision or "gpu/precision"
    memory: dict[str, float]  # "default" or per GPU
    link: dict[str, float] = field(default_factory=dict)  # per link kind or link name
    options: dict[str, object] = field(default_factory=dict)  # model options set by a calibration
    origin: str = "defaults"
    classes: dict[str, float] = field(default_factory=dict)  # pai-v2: "class/generation/precision"
    workloads: dict[str, float] = field(default_factory=dict)  # pai-v2: per-workload correction factor
    llm: dict[str, float] = field(default_factory=dict)  # LLM model: factors on its parameters (trust.llmfit)
    # class_for's answers (a prediction looks up every class of its GPU and precision); never an
    # argument, so ``replace`` and ``overridden`` start an empty one
    _class_memo: dict = field(default_factory=dict, init=False, repr=False, compare=False)
    # the kernel tables a prediction built from these factors (``predict.config_values``), by the
    # catalogues, options and names they were built for; the same kind of memo as ``_class_memo``
    _table_memo: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def flop_for(self, gpu: str, precision: str) -> float:
        """FLOP efficiency of ``gpu`` at ``precision``: per-GPU value if calibrated, else per precision."""
        return self.flop.get(f"{gpu}/{precision}", self.flop[precision])

    def memory_for(self, gpu: str) -> float:
        """Memory-bandwidth efficiency of ``gpu``."""
        return self.memory.get(gpu, self.memory["default"])

    def link_for(self, name: str, kind: str, catalogue_value: float) -> float:
        """Efficiency of a link: per-name override, else per-kind override, else the catalogue's."""
        return self.link.get(name, self.link.get(kind, catalogue_value))

    def class_for(self, cls: str, generation: str, precision: str) -> float:
        """pai-v2 value of operator class ``cls`` (a fraction of peak; ``hbm``: of HBM bandwidth;
        ``launch_eager`` / ``launch_graphs``: us per launch) on a GPU ``generation`` at
        ``precision``: the most specific key, in the order generation before precision, exact
        precision before its family (``amp`` for amp-*) before ``*``."""
        memo = self._class_memo.get((cls, generation, precision))
        if memo is None:
            memo = self._class_memo[cls, generation, precision] = self.classes[
                class_key(self.classes, cls, generation, precision)
            ]
        return memo

    def overridden(self, calibration: Efficiency) -> Efficiency:
        """A copy of these factors with ``calibration``'s values on top."""
        return Efficiency(
            {**self.flop, **calibration.flop},
            {**self.memory, **calibration.memory},
            {**self.link, **calibration.link},
            {**self.options, **calibration.options},
            calibration.origin,
            {**self.classes, **calibration.classes},
            {**self.workloads, **calibration.workloads},
            llm={**self.llm, **calibration.llm},
        )

    def workload_factor(self, workload: str) -> float:
        """pai-v2 correction of ``workload`` (a calibration's ``[workload_efficiency]``): its
        operator classes run at this multiple of their default rates (1 when not calibrated)."""
        return self.workloads.get(workload, 1.0)


#: pai-v2 classes in ``class_efficiency.csv`` that are not fractions of a peak (us per launch)
LAUNCH_CLASSES = ("launch_eager", "launch_graphs")
#: every class name ``class_efficiency.csv`` may use
CLASS_KEYS = ("gemm_conv", "small_conv", "recurrent", "attention_eager", "attention_fused", "hbm", *LAUNCH_CLASSES)


#: the FP8 recipes that share fp8's tensor-core rate and, until rows of their own exist, its efficiencies
FP8_FAMILY = ("fp8-current", "fp8-blockwise", "mxfp8")


def precision_family(precision: str) -> str:
    """The family a precision shares tensor-core rates with: ``amp`` for every amp-* precision, ``fp8``
    for the FP8 scaling recipes (``FP8_FAMILY``)."""
    if precision.startswith("amp-"):
        return "amp"
    return "fp8" if precision in FP8_FAMILY else precision


def class_key(table: dict, cls: str, generation: str, precision: str) -> str:
    """The most specific ``class/generation/precision`` key of ``table`` for the arguments
    (``*`` matches any generation or precision); one sentence when none applies."""
    for gen in (generation, "*"):
        for prec in dict.fromkeys((precision, precision_family(precision), "*")):
            key = f"{cls}/{gen}/{prec}"
            if key in table:
                return key
    raise PaigridError(
        f"class_efficiency has no value for class {cls} on generation {generation} at {precision} (not even {cls}/*/*)."
    )


def _fractions(table: dict, origin: str, section: str) -> dict[str, float]:
    values = {}
    for key, value in table.items():
        if key == "source":
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not (0 < value <= 1):
            raise PaigridError(f"{origin}: [{section}] {key} must be a fraction in (0, 1], not {value!r}.")
        values[key] = float(value)
    return values


@functools.cache
def _model_defaults() -> dict:
    text = resources.files("paigrid.datasets").joinpath("model_defaults.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)


@functools.cache
def _class_defaults() -> dict[str, float]:
    from paigrid.inputs.catalog import csv_table

    origin = "the built-in class_efficiency.csv"
    text = resources.files("paigrid.datasets").joinpath("class_efficiency.csv").read_text(encoding="utf-8")
    _, rows = csv_table(
        text, origin, "the class efficiency table", ("class", "generation", "precision", "value", "unit", "source")
    )
    return _class_values(
        {f"{r['class']}/{r['generation']}/{r['precision']}": float(r["value"]) for _, r in rows}, origin
    )


def _class_values(values: dict, origin: str) -> dict[str, float]:
    """Check ``class/generation/precision`` keys and their values (fractions; launch: positive us)."""
    out = {}
    for key, value in values.items():
        parts = key.split("/")
        if len(parts) != 3 or parts[0] not in CLASS_KEYS or not all(p.strip() for p in parts):
            raise PaigridError(
                f"{origin}: [class_efficiency] key {key!r} must be CLASS/GENERATION/PRECISION with "
                f"CLASS one of {', '.join(CLASS_KEYS)}."
            )
        launch = parts[0] in LAUNCH_CLASSES
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
            or not (value > 0 if launch else 0 < value <= 1)
        ):
            what = "a positive number of microseconds" if launch else "a fraction in (0, 1]"
            raise PaigridError(f"{origin}: [class_efficiency] {key} must be {what}, not {value!r}.")
        out[key] = float(value)
    return out


def band_group(n_gpu: float, gpus_per_node: float) -> str:
    """The accuracy group of a configuration: ``single_gpu``, ``multi_gpu_one_server`` or
    ``multi_server`` (n GPUs, k per server)."""
    if n_gpu == 1:
        return "single_gpu"
    return "multi_gpu_one_server" if n_gpu <= gpus_per_node else "multi_server"


#: the measurements whose bands ``prediction_band`` prefers where both files give one: the public
#: v2 file (1,891 modelled rows of 70 workloads on about 30 GPUs) over measurements_public.csv (33)
PREFERRED_BANDS = "measured_public_v2.csv"


@functools.cache
def _bands() -> dict[tuple[str, str, str], float]:
    from paigrid.inputs.catalog import csv_table

    origin = "the built-in prediction_bands.csv"
    text = resources.files("paigrid.datasets").joinpath("prediction_bands.csv").read_text(encoding="utf-8")
    _, rows = csv_table(
        text, origin, "the prediction bands table", ("model", "calibration", "group", "band", "predictions", "source")
    )
    out: dict[tuple[str, str, str], float] = {}
    for _, r in sorted(rows, key=lambda lr: lr[1].get("measurements", "") == PREFERRED_BANDS):
        band = float(r["band"]) if r["band"].strip() else math.nan
        key = (r["model"], r["calibration"], r["group"])
        if key not in out or not math.isnan(band):  # the preferred file's band, where it has one
            out[key] = band
    return out


def prediction_band(model: str, calibrated: bool, group: str) -> float:
    """Relative uncertainty of a prediction (a fraction of the predicted time or throughput: the
    68th percentile of the cross-validated |predicted / measured - 1| of its ``group``, from
    ``datasets/prediction_bands.csv``, which ``bench/accuracy.py`` writes: the public v2 file's
    band where it gives one (``PREFERRED_BANDS``), else measurements_public.csv's); NaN where no
    measurement of the group was held out."""
    return _bands().get((model, "calibrated" if calibrated else "uncalibrated", group), math.nan)


def defaults() -> Efficiency:
    """The efficiency factors shipped in ``datasets/model_defaults.toml`` (pai-v1) and
    ``datasets/class_efficiency.csv`` (pai-v2)."""
    data = _model_defaults()
    return Efficiency(
        _fractions(data["flop_efficiency"], "model_defaults.toml", "flop_efficiency"),
        _fractions(data["memory_efficiency"], "model_defaults.toml", "memory_efficiency"),
        classes=dict(_class_defaults()),
    )


def ps_host_bandwidth() -> float:
    """Achievable memory bandwidth [bytes/s] of a parameter server host (option ``ps_update``):
    nominal x efficiency of ``[ps_host]`` in ``datasets/model_defaults.toml``."""
    host = _model_defaults()["ps_host"]
    return host["memory_GB_per_s"] * 1e9 * host["efficiency"]


def workspace_bytes() -> float:
    """Per-GPU framework workspace [bytes] of the memory-feasibility check."""
    return _model_defaults()["workspace"]["GB"] * 1e9


def with_calibration(options, calibration: str | Path | None, cats=None):
    """The default efficiencies and the model ``options`` (a ``spec.Options``), with a
    calibration file's efficiencies and options on top (``None``: no calibration).  Its keys
    are resolved against the catalogues ``cats`` (default: the built-in ones)."""
    eff = defaults()
    if calibration is None:
        return eff, options
    eff = eff.overridden(load_calibration(calibration, cats))
    return eff, options.with_overrides(eff.options, str(calibration))


def load_calibration(path: str | Path, cats=None) -> Efficiency:
    """Read a calibration TOML into an ``Efficiency`` holding only its overrides, every key
    resolved to its canonical catalogue name (aliases allowed): a key that names no precision,
    GPU, link or link kind of ``cats`` (default: the built-in catalogues) is an error listing
    the close matches, never silently ignored."""
    path = Path(path)
    data = read_toml(path, "the calibration file")
    known = {
        "flop_efficiency",
        "memory_efficiency",
        "link_efficiency",
        "class_efficiency",
        "workload_efficiency",
        "options",
        "fit",
        "llm",
    }
    unknown = set(data) - known
    if unknown:
        raise PaigridError(f"{path}: unknown table(s) {', '.join(sorted(unknown))}; known: {', '.join(sorted(known))}.")
    for name in known:
        if name in data and not isinstance(data[name], dict):
            raise PaigridError(f"{path}: [{name}] must be a table, not {data[name]!r}.")
    options = dict(data.get("options", {}))
    for key, value in options.items():
        if isinstance(value, float) and not math.isfinite(value):
            raise PaigridError(f"{path}: option {key} must be finite.")
    if cats is None:
        from paigrid.inputs.catalog import Catalogues

        cats = Catalogues.load()
    origin = str(path)
    tables = {
        section: _fractions(data.get(section, {}), origin, section)
        for section in ("flop_efficiency", "memory_efficiency", "link_efficiency")
    }
    tables["class_efficiency"] = _class_values(dict(data.get("class_efficiency", {})), origin)
    tables["workload_efficiency"] = _factors(dict(data.get("workload_efficiency", {})), origin, "workload_efficiency")
    for section, table in tables.items():  # each section's own checks first, then the physical range
        _within_bounds(table, origin, section)
    return Efficiency(
        _canonical(tables["flop_efficiency"], origin, "flop_efficiency", lambda k: _flop_key(k, cats)),
        _canonical(
            tables["memory_efficiency"],
            origin,
            "memory_efficiency",
            lambda k: "default" if k.strip().casefold() == "default" else cats.gpus.resolve(k),
        ),
        _canonical(tables["link_efficiency"], origin, "link_efficiency", lambda k: _link_key(k, cats)),
        options,
        origin=origin,
        classes=_canonical(tables["class_efficiency"], origin, "class_efficiency", lambda k: _class_key(k, cats)),
        workloads=_canonical(tables["workload_efficiency"], origin, "workload_efficiency", cats.workloads.resolve),
        llm=_factors(dict(data.get("llm", {})), origin, "llm"),
    )


@functools.cache
def declared_bounds() -> dict[str, tuple[float, float, str]]:
    """(lower, upper, unit) of each efficiency parameter kind, from
    ``datasets/parameter_bounds.csv`` (the physical range a value may take)."""
    from paigrid.inputs.catalog import csv_table

    text = resources.files("paigrid.datasets").joinpath("parameter_bounds.csv").read_text(encoding="utf-8")
    _, rows = csv_table(
        text,
        "the built-in parameter_bounds.csv",
        "the parameter bounds table",
        ("parameter", "lower", "upper", "unit", "source"),
    )
    return {r["parameter"]: (float(r["lower"]), float(r["upper"]), r["unit"]) for _, r in rows}


def _within_bounds(table: dict, origin: str, section: str) -> None:
    """One sentence for a calibration value outside its declared physical bounds
    (``declared_bounds``: by section, for class_efficiency by class); a value of the wrong type
    is left to the section's own check."""
    bounds = declared_bounds()
    for key, value in table.items():
        if key == "source" or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        name = key.split("/")[0] if section == "class_efficiency" else section
        lower, upper, unit = bounds.get(name, bounds.get(section, (-math.inf, math.inf, "")))
        if math.isfinite(value) and not lower <= value <= upper:
            raise PaigridError(
                f"{origin}: [{section}] {key} = {value:g} {unit} is outside its physical range "
                f"{lower:g} to {upper:g} {unit} (datasets/parameter_bounds.csv)."
            )


def _factors(table: dict, origin: str, section: str) -> dict[str, float]:
    """Positive finite factors (per-workload corrections may exceed 1)."""
    values = {}
    for key, value in table.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and value > 0):
            raise PaigridError(f"{origin}: [{section}] {key} must be a positive number, not {value!r}.")
        if section == "llm":  # the declared bounds of an LLM factor (datasets/parameter_bounds.csv)
            lower, upper, unit = declared_bounds()["llm_factor"]
            if not lower <= value <= upper:
                raise PaigridError(
                    f"{origin}: [llm] {key} = {value:g} is outside the bounds of an LLM factor, {lower:g} to "
                    f"{upper:g} (datasets/parameter_bounds.csv)."
                )
        values[key] = float(value)
    return values


def _class_key(key: str, cats) -> str:
    """A class-efficiency key CLASS/GENERATION/PRECISION: the generation one of the GPU
    catalogue's (or *), the precision a catalogue precision, ``amp`` or * (checked by
    ``_class_values`` for its shape and class)."""
    import difflib

    cls, generation, precision = (part.strip() for part in key.split("/"))
    generations = sorted({(row.get("generation") or "").strip() for row in cats.gpus.rows} - {""})
    if generation != "*" and generation not in generations:
        close = difflib.get_close_matches(generation, generations, n=3, cutoff=0.5)
        hint = f"did you mean {', '.join(close)}?" if close else f"known: {', '.join(generations) or 'none'}, or *."
        raise PaigridError(f"no GPU of {cats.gpus.origin} is of generation {generation!r}; {hint}")
    if precision not in ("*", "amp"):
        precision = cats.precisions.resolve(precision)
    return f"{cls}/{generation}/{precision}"


def _canonical(values: dict[str, float], origin: str, section: str, resolve) -> dict[str, float]:
    """``values`` with each key replaced by ``resolve(key)`` (one sentence for a key that does
    not resolve, or two keys naming the same thing)."""
    out: dict[str, float] = {}
    given: dict[str, str] = {}
    for key, value in values.items():
        try:
            canonical = resolve(key)
        except PaigridError as exc:
            raise PaigridError(f"{origin}: [{section}] key {key!r} names nothing known: {exc}") from None
        if canonical in out:
            raise PaigridError(f"{origin}: [{section}] keys {given[canonical]!r} and {key!r} both name {canonical}.")
        out[canonical], given[canonical] = value, key
    return out


def _flop_key(key: str, cats) -> str:
    """A FLOP-efficiency key: a precision, or GPU/precision."""
    gpu, slash, precision = key.rpartition("/")
    if not slash:
        return cats.precisions.resolve(key)
    return f"{cats.gpus.resolve(gpu)}/{cats.precisions.resolve(precision)}"


def _link_key(key: str, cats) -> str:
    """A link-efficiency key: a link kind (pcie, nvswitch, ethernet, ...) or a link name."""
    import difflib

    kinds = sorted({row["kind"] for row in cats.links.rows})
    if key.strip().casefold() in kinds:
        return key.strip().casefold()
    try:
        return cats.links.resolve(key)
    except PaigridError:
        close = difflib.get_close_matches(key, kinds + cats.links.names, n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else f"; known kinds: {', '.join(kinds)}."
        raise PaigridError(f"{key!r} is neither a link kind nor a link name in {cats.links.origin}{hint}") from None
