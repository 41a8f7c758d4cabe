"""Catalogue loading: one loader for every CSV in ``datasets/`` and for user CSVs of the same schema.

A catalogue is a table of rows keyed by a canonical ``name`` with optional ``;``-separated
``aliases``.  Numeric columns are read as float64, an empty cell as NaN.  Unknown names are
errors that list the closest known names.
"""

from __future__ import annotations

import csv
import difflib
import hashlib
import io
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import numpy as np

from paigrid.errors import PaigridError
from paigrid.userfiles import read_text

BUILTIN = ("gpus", "links", "workloads", "optimizers", "precisions")


@dataclass
class Catalogue:
    """Rows of one CSV catalogue, addressable by canonical name or alias."""

    kind: str
    origin: str
    columns: list[str]
    rows: list[dict[str, str]]
    sha256: str
    _index: dict[str, int] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        for i, row in enumerate(self.rows):
            for key in [row["name"], *_split(row.get("aliases", ""))]:
                folded = key.casefold()
                if folded in self._index and self._index[folded] != i:
                    raise PaigridError(
                        f"{self.origin}: the name {key!r} is used by two rows of the {self.kind} catalogue.")
                self._index[folded] = i

    @property
    def names(self) -> list[str]:
        """Canonical names in file order."""
        return [row["name"] for row in self.rows]

    def resolve(self, name: str) -> str:
        """Canonical name for ``name`` or an alias of it (case-insensitive)."""
        i = self._index.get(str(name).strip().casefold())
        if i is None:
            close = difflib.get_close_matches(str(name), self.names + list(self._aliases()), n=4, cutoff=0.5)
            hint = f"; did you mean {', '.join(close)}?" if close else f"; known: {', '.join(self.names)}."
            raise PaigridError(f"unknown {self.kind[:-1] if self.kind.endswith('s') else self.kind} "
                               f"{name!r} in {self.origin}{hint}")
        return self.rows[i]["name"]

    def row(self, name: str) -> dict[str, str]:
        """The row of ``name`` (canonical or alias)."""
        return self.rows[self._index[self.resolve(name).casefold()]]

    def number(self, name: str, column: str) -> float:
        """Numeric cell of ``name``'s row; NaN when empty."""
        return to_float(self.row(name)[column], self.origin, column)

    def column(self, column: str, names: list[str] | None = None) -> np.ndarray:
        """Numeric column as float64 over ``names`` (default: all rows in file order)."""
        return np.array([self.number(n, column) for n in (names or self.names)], dtype=np.float64)

    def _aliases(self):
        for row in self.rows:
            yield from _split(row.get("aliases", ""))


def _split(cell: str | None) -> list[str]:
    return [part.strip() for part in (cell or "").split(";") if part.strip()]


def to_float(text: str, origin: str, column: str) -> float:
    """Parse a numeric cell; empty means NaN; anything else unparsable is an error."""
    text = (text or "").strip()
    if text == "":
        return float("nan")
    try:
        return float(text)
    except ValueError:
        raise PaigridError(f"{origin}: column {column!r} holds {text!r}, which is not a number.") from None


def csv_table(text: str, origin: str, what: str,
              required: tuple[str, ...] = ()) -> tuple[list[str], list[tuple[int, dict[str, str]]]]:
    """Header and ``(line number, row)`` pairs of CSV text, cells stripped, blank lines skipped.

    One sentence (naming ``origin`` and, for a row, its line) for an empty text, a missing
    ``required`` column, a row whose field count differs from the header's, and no rows;
    ``what`` names the kind of file in them ("a gpus catalogue").
    """
    reader = csv.reader(io.StringIO(text))
    header = [h.strip() for h in next(reader, [])]
    if not header:
        raise PaigridError(f"{origin} is empty; {what} needs a header row.")
    missing = [c for c in required if c not in header]
    if missing:
        raise PaigridError(f"{origin} lacks the column(s) {', '.join(missing)} of {what} "
                           f"(required: {', '.join(required)}).")
    rows = []
    for line_no, cells in enumerate(reader, start=2):
        if not cells or all(not c.strip() for c in cells):
            continue
        if len(cells) != len(header):
            raise PaigridError(f"{origin} line {line_no} has {len(cells)} fields where the header has {len(header)}.")
        rows.append((line_no, {h: c.strip() for h, c in zip(header, cells)}))
    if not rows:
        raise PaigridError(f"{origin} has a header but no rows.")
    return header, rows


def parse_csv(text: str, kind: str, origin: str, required: tuple[str, ...] = ("name",)) -> Catalogue:
    """Parse CSV text into a catalogue (checked by ``csv_table``)."""
    header, rows = csv_table(text, origin, f"a {kind} catalogue", required)
    digest = hashlib.sha256(text.encode()).hexdigest()
    return Catalogue(kind, origin, header, [row for _, row in rows], digest)


def builtin_text(kind: str) -> str:
    """Text of a built-in catalogue CSV shipped in ``paigrid.datasets``."""
    return resources.files("paigrid.datasets").joinpath(f"{kind}.csv").read_text(encoding="utf-8")


def load(kind: str, path: str | Path | None = None) -> Catalogue:
    """Load a built-in catalogue (``path`` None) or a user CSV of the same schema."""
    if path is None:
        return parse_csv(builtin_text(kind), kind, f"the built-in {kind}.csv")
    text = read_text(path, f"the {kind} file")
    return parse_csv(text, kind, str(path))


@dataclass
class Catalogues:
    """The five catalogues a sweep needs."""

    gpus: Catalogue
    links: Catalogue
    workloads: Catalogue
    optimizers: Catalogue
    precisions: Catalogue

    @classmethod
    def load(cls, overrides: dict[str, str | Path] | None = None) -> "Catalogues":
        """Built-in catalogues, with any of them replaced by a user file."""
        overrides = overrides or {}
        unknown = set(overrides) - set(BUILTIN)
        if unknown:
            raise PaigridError(f"unknown catalogue(s) {', '.join(sorted(unknown))}; known: {', '.join(BUILTIN)}.")
        return cls(**{kind: load(kind, overrides.get(kind)) for kind in BUILTIN})

    def checksums(self) -> dict[str, str]:
        """sha256 of each catalogue's text, for the cube's provenance."""
        return {kind: getattr(self, kind).sha256 for kind in BUILTIN}

    def links_of_scope(self, scope: str) -> list[str]:
        """Names of the intra-server links (``intra``) or networks (``network``), in file order."""
        return [row["name"] for row in self.links.rows if row["scope"] == scope]
