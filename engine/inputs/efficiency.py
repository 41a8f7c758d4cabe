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


def with_calibration(options, calibration: str | Path | None):
    """The default efficiencies and the model ``options`` (a ``spec.Options``), with a
    calibration file's efficiencies and options on top (``None``: no calibration)."""
    eff = defaults()
    if calibration is None:
        return eff, options
    eff = eff.overridden(load_calibration(calibration))
    return eff, options.with_overrides(eff.options, str(calibration))


def load_calibration(path: str | Path) -> Efficiency:
    """Read a calibration TOML into an ``Efficiency`` holding only its overrides."""
    path = Path(path)
    data = read_toml(path, "the calibration file")
    known = {"flop_efficiency", "memory_efficiency", "link_efficiency", "options", "fit"}
    unknown = set(data) - known
    if unknown:
        raise PaigridError(f"{path}: unknown table(s) {', '.join(sorted(unknown))}; known: {', '.join(sorted(known))}.")
    options = dict(data.get("options", {}))
    for key, value in options.items():
        if isinstance(value, float) and not math.isfinite(value):
            raise PaigridError(f"{path}: option {key} must be finite.")
    return Efficiency(_fractions(data.get("flop_efficiency", {}), str(path), "flop_efficiency"),
                      _fractions(data.get("memory_efficiency", {}), str(path), "memory_efficiency"),
                      _fractions(data.get("link_efficiency", {}), str(path), "link_efficiency"),
                      options, origin=str(path))
