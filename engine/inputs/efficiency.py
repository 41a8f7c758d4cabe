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
"""

from __future__ import annotations

import functools
import math
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from paigrid.errors import PaigridError
from paigrid.userfiles import read_toml


@dataclass
class Efficiency:
    """Achievable fractions (0 < value <= 1) used to turn peaks into achievable rates."""

    flop: dict[str, float]                                   # per precision or "gpu/precision"
    memory: dict[str, float]                                 # "default" or per GPU
    link: dict[str, float] = field(default_factory=dict)     # per link kind or link name
    options: dict[str, object] = field(default_factory=dict)  # model options set by a calibration
    origin: str = "defaults"

    def flop_for(self, gpu: str, precision: str) -> float:
        """FLOP efficiency of ``gpu`` at ``precision``: per-GPU value if calibrated, else per precision."""
        return self.flop.get(f"{gpu}/{precision}", self.flop[precision])

    def memory_for(self, gpu: str) -> float:
        """Memory-bandwidth efficiency of ``gpu``."""
        return self.memory.get(gpu, self.memory["default"])

    def link_for(self, name: str, kind: str, catalogue_value: float) -> float:
        """Efficiency of a link: per-name override, else per-kind override, else the catalogue's."""
        return self.link.get(name, self.link.get(kind, catalogue_value))

    def overridden(self, calibration: "Efficiency") -> "Efficiency":
        """A copy of these factors with ``calibration``'s values on top."""
        return Efficiency({**self.flop, **calibration.flop}, {**self.memory, **calibration.memory},
                          {**self.link, **calibration.link}, {**self.options, **calibration.options},
                          calibration.origin)


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


def defaults() -> Efficiency:
    """The version-1 efficiency factors shipped in ``datasets/model_defaults.toml``."""
    data = _model_defaults()
    return Efficiency(_fractions(data["flop_efficiency"], "model_defaults.toml", "flop_efficiency"),
                      _fractions(data["memory_efficiency"], "model_defaults.toml", "memory_efficiency"))


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
    known = {"flop_efficiency", "memory_efficiency", "link_efficiency", "options", "fit"}
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
    tables = {section: _fractions(data.get(section, {}), origin, section)
              for section in ("flop_efficiency", "memory_efficiency", "link_efficiency")}
    return Efficiency(_canonical(tables["flop_efficiency"], origin, "flop_efficiency", lambda k: _flop_key(k, cats)),
                      _canonical(tables["memory_efficiency"], origin, "memory_efficiency",
                                 lambda k: "default" if k.strip().casefold() == "default" else cats.gpus.resolve(k)),
                      _canonical(tables["link_efficiency"], origin, "link_efficiency", lambda k: _link_key(k, cats)),
                      options, origin=origin)


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
