"""The kinds of measured row that validate and calibrate compare the model with, one registry.

A row kind names what a measurement observed and how the model predicts it: ``predict(rows,
cats, efficiency, options)`` returns one positive number per row in the unit of
``Measurement.measured``.  ``validate`` and ``calibrate`` go through ``predict_observed``, which
groups the rows by kind, so a new kind of measurement (scaling efficiency, a collective's
bandwidth, an LLM's tokens/s) is one more ``register`` call with its predict function, and the
fit and the accuracy protocol take it unchanged.

Today there is one kind, ``throughput``: samples/s of the whole job (``predict.predict_configs``
at the row's configuration).  A measurements CSV names a row's kind in an optional ``kind``
column; empty means ``throughput``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from paigrid.errors import PaigridError


@dataclass(frozen=True)
class RowKind:
    """One kind of measured row: its name, the unit of its observed value and how the model predicts it."""

    name: str
    unit: str
    predict: Callable  # (rows, cats, efficiency, options) -> list[float], one per row, in ``unit``


ROW_KINDS: dict[str, RowKind] = {}


def register(kind: RowKind) -> RowKind:
    """Add a row kind to the registry (a name may be registered once)."""
    if kind.name in ROW_KINDS:
        raise PaigridError(f"the row kind {kind.name!r} is registered twice.")
    ROW_KINDS[kind.name] = kind
    return kind


def row_kind(name: str) -> RowKind:
    """The registered kind called ``name`` (one sentence listing the known ones otherwise)."""
    key = (name or "throughput").strip().casefold() or "throughput"
    if key not in ROW_KINDS:
        raise PaigridError(f"unknown row kind {name!r}; known: {', '.join(sorted(ROW_KINDS))}.")
    return ROW_KINDS[key]


def _throughput(rows, cats, efficiency, options) -> list[float]:
    """Samples/s of the whole job at each row's configuration [samples/s]."""
    from paigrid.predict import predict_configs

    results = predict_configs([r.job(options) for r in rows], [r.config() for r in rows], cats, efficiency, options)
    return [float(r["throughput"]) for r in results]


register(RowKind("throughput", "samples/s", _throughput))


def predict_observed(rows, cats, efficiency, options) -> np.ndarray:
    """The model's value of what each row observed (its kind's unit), in row order; a row the
    model gives no positive finite value is one sentence naming it."""
    out = np.full(len(rows), np.nan)
    by_kind: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        by_kind.setdefault(row_kind(getattr(row, "kind", "throughput")).name, []).append(i)
    for name, members in by_kind.items():
        values = ROW_KINDS[name].predict([rows[i] for i in members], cats, efficiency, options)
        out[members] = values
    bad = ~(np.isfinite(out) & (out > 0))
    if bad.any():
        raise PaigridError(f"the model gives no {row_kind(getattr(rows[int(np.argmax(bad))], 'kind', '')).unit} "
                           f"for row {rows[int(np.argmax(bad))].id!r}; it cannot be fitted.")
    return out
