"""Result output: an aligned text table, JSON or CSV on stdout (progress and errors go to stderr).

Text that came from the user's files (job names, model names) is neutralised on the way out:
in a table, control characters are shown escaped (``printable``), so a name cannot split a row
or steer the terminal; in CSV, a cell that a spreadsheet would run as a formula (it begins with
``=``, ``+``, ``-``, ``@``, a tab or a carriage return and is not a number) gets a leading single
quote (``csv_cell``; the OWASP advice against CSV injection).  JSON escapes by itself.
"""

from __future__ import annotations

import csv
import json
import math
import sys

#: first characters that make a spreadsheet read a cell as a formula
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value):
    """A value as a CSV cell may hold it: text beginning with one of ``FORMULA_STARTS`` that is
    not a number gets a leading single quote, so no spreadsheet runs it; numbers are unchanged."""
    if not isinstance(value, str) or not value.startswith(FORMULA_STARTS):
        return value
    try:
        float(value)
        return value
    except ValueError:
        return "'" + value


def csv_row(values) -> list:
    """``csv_cell`` of every value of a row."""
    return [csv_cell(v) for v in values]


class CsvWriter:
    """A CSV writer (lines end in ``\n``) whose rows are neutralised (``csv_row``) and whose
    cells holding a carriage return are quoted (Python 3.11's writer leaves a lone ``\r``
    unquoted when lines end in ``\n``, and a reader then splits the row there)."""

    def __init__(self, stream):
        self.plain = csv.writer(stream, lineterminator="\n")
        self.quoted = csv.writer(stream, lineterminator="\n", quoting=csv.QUOTE_ALL)

    def writerow(self, values) -> None:
        row = csv_row(values)
        carriage = any(isinstance(v, str) and "\r" in v for v in row)
        (self.quoted if carriage else self.plain).writerow(row)


def _cell(value) -> str:
    from paigrid.errors import printable

    if value is None:
        return "-"
    if isinstance(value, float):
        if math.isnan(value):
            return "-"
        if value == 0 or 1e-3 <= abs(value) < 1e6:
            return f"{value:.4g}"
        return f"{value:.3e}"
    return printable(str(value))


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


def emit(
    rows: list[dict], columns: list[str], fmt: str = "table", units: dict[str, str] | None = None, stream=None
) -> None:
    """Write ``rows`` (only ``columns``) as ``table``, ``json`` or ``csv``; units go in the table header."""
    stream = stream or sys.stdout
    if fmt == "json":
        json.dump([{c: json_safe(r.get(c)) for c in columns} for r in rows], stream, indent=1)
        stream.write("\n")
        return
    if fmt == "csv":
        writer = CsvWriter(stream)
        writer.writerow(columns)
        for r in rows:
            writer.writerow(
                "" if r.get(c) is None or (isinstance(r.get(c), float) and math.isnan(r[c])) else r[c] for c in columns
            )
        return
    units = units or {}
    header = [_cell(f"{c} [{units[c]}]" if c in units else c) for c in columns]
    cells = [[_cell(r.get(c)) for c in columns] for r in rows]
    widths = [max(len(h), *(len(row[i]) for row in cells)) if cells else len(h) for i, h in enumerate(header)]
    stream.write("  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip() + "\n")
    for row in cells:
        stream.write("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() + "\n")
