"""Result output: an aligned text table, JSON or CSV on stdout (progress and errors go to stderr)."""

from __future__ import annotations

import csv
import json
import math
import sys


def _cell(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if math.isnan(value):
            return "-"
        if value == 0 or 1e-3 <= abs(value) < 1e6:
            return f"{value:.4g}"
        return f"{value:.3e}"
    return str(value)


def json_safe(value):
    """``value`` with every non-finite float (NaN, inf) replaced by None, through dicts and lists:
    JSON has no NaN."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def emit(rows: list[dict], columns: list[str], fmt: str = "table", units: dict[str, str] | None = None,
         stream=None) -> None:
    """Write ``rows`` (only ``columns``) as ``table``, ``json`` or ``csv``; units go in the table header."""
    stream = stream or sys.stdout
    if fmt == "json":
        json.dump([{c: json_safe(r.get(c)) for c in columns} for r in rows], stream, indent=1)
        stream.write("\n")
        return
    if fmt == "csv":
        writer = csv.writer(stream, lineterminator="\n")
        writer.writerow(columns)
        for r in rows:
            writer.writerow(["" if r.get(c) is None or (isinstance(r.get(c), float) and math.isnan(r[c]))
                             else r[c] for c in columns])
        return
    units = units or {}
    header = [f"{c} [{units[c]}]" if c in units else c for c in columns]
    cells = [[_cell(r.get(c)) for c in columns] for r in rows]
    widths = [max(len(h), *(len(row[i]) for row in cells)) if cells else len(h) for i, h in enumerate(header)]
    stream.write("  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip() + "\n")
    for row in cells:
        stream.write("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() + "\n")
