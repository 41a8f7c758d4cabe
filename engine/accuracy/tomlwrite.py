"""Writing calibration TOML: values, keys and the ``[options]`` table (``calibrate``, ``scalingfit``)."""

from __future__ import annotations

import json
import math
from dataclasses import asdict

from paigrid.inputs.spec import Options


def toml_value(value) -> str:
    """``value`` (bool, int, float rounded to 6 significant decimals, list or text) as a TOML value."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, float):
        value = float(value)
        return repr(round(value, 6)) if math.isfinite(value) else ("nan" if math.isnan(value) else "inf")
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return json.dumps(str(value))


def toml_key(text: str) -> str:
    """``text`` as a quoted TOML key."""
    return json.dumps(text)


def non_default_options(options: Options) -> dict:
    """The options that differ from ``Options()``, as a calibration's ``[options]`` table holds them
    (the rows always set their own shape and accumulation, so those options never shape a fit)."""
    return {
        k: v
        for k, v in asdict(options).items()
        if v != getattr(Options(), k) and k not in ("gpus_per_node", "grad_accum_steps")
    }
