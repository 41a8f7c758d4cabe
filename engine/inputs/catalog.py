"""Catalogue loading: one loader for every CSV in ``datasets/`` and for user CSVs of the same schema.

A catalogue is a table of rows keyed by a canonical ``name`` with optional ``;``-separated
``aliases``.  Numeric columns are read as float64, an empty cell as NaN.  Unknown names are
errors that list the closest known names.

Every column the model reads has a rule (``COLUMN_RULES``, one table per catalogue kind): whether
the header must have it, whether a cell may be empty, and the range of its numbers (its sign or
kind here, its physical bounds with their sources in ``inputs.options.COLUMN_BOUNDS``).  Every row
of a catalogue, built-in or user, is checked against it when the file is read, so a bad cell is
one sentence naming the file, line and column, never a wrong number later.
"""

from __future__ import annotations

import csv
import difflib
import hashlib
import io
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import numpy as np

from paigrid.errors import PaigridError
from paigrid.files import read_text
from paigrid.inputs.options import check_column

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
    _numbers: dict[tuple[int, str], float] = field(default_factory=dict, repr=False)
    _seen: dict[str, int] = field(default_factory=dict, repr=False)  # names as given, already found

    def __post_init__(self) -> None:
        for i, row in enumerate(self.rows):
            for key in [row["name"], *_split(row.get("aliases", ""))]:
                folded = key.casefold()
                if folded in self._index and self._index[folded] != i:
                    raise PaigridError(
                        f"{self.origin}: the name {key!r} is used by two rows of the {self.kind} catalogue."
                    )
                self._index[folded] = i

    @property
    def names(self) -> list[str]:
        """Canonical names in file order."""
        return [row["name"] for row in self.rows]

    @property
    def default_names(self) -> list[str]:
        """Canonical names a sweep takes when its spec names none: the rows whose ``default_grid``
        is ``yes``, all rows when the file has no such column (a user catalogue)."""
        if "default_grid" not in self.columns:
            return self.names
        return [row["name"] for row in self.rows if row["default_grid"].strip() != "no"]

    def resolve(self, name: str) -> str:
        """Canonical name for ``name`` or an alias of it (case-insensitive)."""
        return self.rows[self._position(name)]["name"]

    def row(self, name: str) -> dict[str, str]:
        """The row of ``name`` (canonical or alias)."""
        return self.rows[self._position(name)]

    def _position(self, name: str) -> int:
        """Index of ``name``'s row; an unknown name is an error that lists the close matches."""
        i = self._seen.get(name)
        if i is not None:
            return i
        i = self._index.get(str(name).strip().casefold())
        if i is None:
            close = difflib.get_close_matches(str(name), self.names + list(self._aliases()), n=4, cutoff=0.5)
            hint = f"; did you mean {', '.join(close)}?" if close else f"; known: {', '.join(self.names)}."
            raise PaigridError(
                f"unknown {self.kind[:-1] if self.kind.endswith('s') else self.kind} {name!r} in {self.origin}{hint}"
            )
        if isinstance(name, str):
            self._seen[name] = i
        return i

    def number(self, name: str, column: str) -> float:
        """Numeric cell of ``name``'s row; NaN when empty, or when the column is an optional one
        (``COLUMN_RULES``) that this catalogue's file does not have."""
        key = (self._position(name), column)
        if key not in self._numbers:  # parsed once: predictions read the same cells again and again
            row = self.rows[key[0]]
            if column not in row and not COLUMN_RULES.get(self.kind, {}).get(column, Rule()).required:
                self._numbers[key] = float("nan")
            else:
                self._numbers[key] = to_float(row[column], self.origin, column)
        return self._numbers[key]

    def column(self, column: str, names: list[str] | None = None) -> np.ndarray:
        """Numeric column as float64 over ``names`` (default: all rows in file order)."""
        return np.array([self.number(n, column) for n in (names or self.names)], dtype=np.float64)

    def _aliases(self):
        for row in self.rows:
            yield from _split(row.get("aliases", ""))


def server_shape(gpus: Catalogue, name: str) -> tuple[int, int]:
    """(GPUs per server, GPUs per NVLink domain) of GPU ``name``: the ``gpus_per_server`` and
    ``nvlink_domain_GPUs`` columns (the GPU's usual server: 8 for HGX/DGX, 4 per GB200/GB300 tray
    in a 72-GPU NVL72 domain, 2 for bridged pairs, 1 without NVLink); a catalogue without them
    gives ``DEFAULT_SERVER_GPUS`` and 1."""
    per_server, domain = gpus.number(name, "gpus_per_server"), gpus.number(name, "nvlink_domain_GPUs")
    return (int(per_server) if per_server > 0 else DEFAULT_SERVER_GPUS, int(domain) if domain > 0 else 1)


def memory_bytes(gpus: Catalogue, name: str) -> float:
    """Device memory of GPU ``name`` [bytes] as the GPU reports it: ``memory_GiB`` x 2**30; a
    catalogue without that column gives the datasheet's ``memory_GB`` x 1e9."""
    gib = gpus.number(name, "memory_GiB")
    return gib * 2.0**30 if gib > 0 else gpus.number(name, "memory_GB") * 1e9


def _split(cell: str | None) -> list[str]:
    """The ``;``-separated names of an aliases cell; a ``;`` inside brackets or parentheses is part of
    a name (the measurement files spell GPUs as ``H200 NVL (141GB) [sys: ...; label says SXM]``)."""
    parts, depth, current = [], 0, []
    for char in cell or "":
        if char in "([":
            depth += 1
        elif char in ")]":
            depth = max(0, depth - 1)
        if char == ";" and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [part.strip() for part in parts if part.strip()]


def to_float(text: str, origin: str, column: str) -> float:
    """Parse a numeric cell; empty means NaN; anything else unparsable is an error."""
    text = (text or "").strip()
    if text == "":
        return float("nan")
    try:
        return float(text)
    except ValueError:
        raise PaigridError(f"{origin}: column {column!r} holds {text!r}, which is not a number.") from None


def csv_table(
    text: str, origin: str, what: str, required: tuple[str, ...] = ()
) -> tuple[list[str], list[tuple[int, dict[str, str]]]]:
    """Header and ``(line number, row)`` pairs of CSV text, cells stripped, blank lines skipped.

    One sentence (naming ``origin`` and, for a row, its line) for an empty text, a missing
    ``required`` column, a row whose field count differs from the header's, no rows, and text the
    csv module cannot parse (a bare carriage return in an unquoted cell);
    ``what`` names the kind of file in them ("a gpus catalogue").
    """
    try:
        return _csv_table(text, origin, what, required)
    except csv.Error as exc:
        message = str(exc.args[0]) if exc.args else str(exc)
        if "new-line character" in message:  # csv's hint about the open mode means nothing to a user
            message = "a line break (a carriage return) inside a cell that is not quoted"
        raise PaigridError(f"{origin} is not CSV that paigrid can read: {message.rstrip('.?')}.") from None


def _csv_table(
    text: str, origin: str, what: str, required: tuple[str, ...]
) -> tuple[list[str], list[tuple[int, dict[str, str]]]]:
    reader = csv.reader(io.StringIO(text))
    header = [h.strip() for h in next(reader, [])]
    if not header:
        raise PaigridError(f"{origin} is empty; {what} needs a header row.")
    repeated = sorted({h for h in header if h and header.count(h) > 1})
    if repeated:  # a row's cells would be read by name, and the last of the twins would win silently
        raise PaigridError(f"{origin} has the column(s) {', '.join(repeated)} twice or more in its header.")
    missing = [c for c in required if c not in header]
    if missing:
        raise PaigridError(
            f"{origin} lacks the column(s) {', '.join(missing)} of {what} (required: {', '.join(required)})."
        )
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


@dataclass(frozen=True)
class Rule:
    """What a cell of one column may hold.

    ``number``: a finite decimal number (else text); ``required``: the header must have the
    column; ``empty``: a cell may be empty (NaN, "not available"); ``low`` / ``high``: the
    inclusive range, ``low_open``: the low bound itself is excluded (``> low``); ``whole``: a
    whole number; ``choices``: the text values allowed.
    """

    number: bool = True
    required: bool = True
    empty: bool = False
    low: float = -math.inf
    low_open: bool = False
    high: float = math.inf
    whole: bool = False
    choices: tuple[str, ...] = ()

    def describe(self) -> str:
        """The rule in words, to complete "must be ..."."""
        if not self.number:
            return f"one of {', '.join(self.choices)}" if self.choices else "non-empty text"
        kind = "a whole number" if self.whole else "a number"
        if self.low > -math.inf and self.high < math.inf:
            start = f"above {self.low:g} up" if self.low_open else f"from {self.low:g}"
            bound = f" {start} to {self.high:g}"
        elif self.low > -math.inf:
            bound = f" above {self.low:g}" if self.low_open else f" of {self.low:g} or more"
        else:
            bound = ""
        return kind + bound + (" (or empty)" if self.empty else "")

    def check(self, text: str, origin: str, column: str) -> float | str:
        """The cell's value (a float, NaN for an allowed empty cell, or the text); one sentence
        naming ``origin`` ("FILE line N") and the column for a cell that breaks the rule."""
        text = (text or "").strip()
        if text == "":
            if self.empty:
                return math.nan if self.number else ""
            raise PaigridError(f"{origin}: column {column} is empty; it must be {self.describe()}.")
        if not self.number:
            if self.choices and text not in self.choices:
                close = difflib.get_close_matches(text, self.choices, n=1, cutoff=0.5)
                hint = f" (did you mean {close[0]}?)" if close else ""
                raise PaigridError(f"{origin}: column {column} holds {text!r}; it must be {self.describe()}{hint}.")
            return text
        try:
            value = float(text)
        except ValueError:
            raise PaigridError(
                f"{origin}: column {column} holds {text!r}, which is not a number; it must be {self.describe()}."
            ) from None
        below = value <= self.low if self.low_open else value < self.low
        if not math.isfinite(value) or below or value > self.high or (self.whole and value != int(value)):
            raise PaigridError(f"{origin}: column {column} holds {text}; it must be {self.describe()}.")
        return check_column(column, value, origin)  # the column's declared physical bounds


_TEXT = Rule(number=False)
_NOTE = Rule(number=False, required=False, empty=True)
_POSITIVE = Rule(low=0.0, low_open=True)
_NON_NEGATIVE = Rule(low=0.0)
_PEAK = Rule(low=0.0, empty=True)  # 0 or empty: the GPU lacks that math
_FRACTION = Rule(low=0.0, low_open=True, high=1.0)  # an achievable fraction of a peak
_BYTES = Rule(low=0.0, low_open=True, high=64.0)  # bytes per element or parameter
INTRA_KINDS = ("pcie", "nvlink-hcm", "nvswitch", "nvlink")
#: the market a GPU is sold into (``segment`` of gpus.csv): GeForce/TITAN, Quadro/RTX professional, data centre
SEGMENTS = ("consumer", "workstation", "datacenter")
#: the GPUs of a catalogue without a ``gpus_per_server`` / ``nvlink_domain_GPUs`` column are taken as
#: 8-GPU servers without NVLink between them (``server_shape``)
DEFAULT_SERVER_GPUS = 8
NETWORK_KINDS = ("none", "ethernet", "rdma", "infiniband")

#: the rule of every column of each built-in catalogue kind (other columns are free text)
COLUMN_RULES: dict[str, dict[str, Rule]] = {
    "gpus": {
        "name": _TEXT,
        "aliases": _NOTE,
        "fp32_TFLOP_per_s": _PEAK,
        "tf32_TFLOP_per_s": _PEAK,
        "fp16_TFLOP_per_s": _PEAK,
        "bf16_TFLOP_per_s": _PEAK,
        "fp8_TFLOP_per_s": _PEAK,
        "fp4_TFLOP_per_s": Rule(low=0.0, empty=True, required=False),  # optional: absent = no FP4 anywhere
        "hbm_GB_per_s": _POSITIVE,
        "memory_GB": _POSITIVE,
        "memory_GiB": Rule(low=0.0, low_open=True, required=False),  # the capacity the GPU reports, 2**30 bytes
        "nvlink_gen": Rule(low=0.0, whole=True, required=False, empty=True),
        "nvlink_GB_per_s": Rule(low=0.0, required=False, empty=True),
        "pcie_gen": Rule(low=1.0, high=99.0, whole=True),
        "tdp_W": _POSITIVE,
        "price_USD_per_gpu_hour": _POSITIVE,
        "gpus_per_server": Rule(low=1.0, high=1024.0, whole=True, required=False),
        "nvlink_domain_GPUs": Rule(low=1.0, high=100000.0, whole=True, required=False),
        "segment": Rule(number=False, required=False, choices=SEGMENTS),
        "default_grid": Rule(number=False, required=False, choices=("yes", "no")),
        "generation": _NOTE,
    },
    "links": {
        "name": _TEXT,
        "aliases": _NOTE,
        "scope": Rule(number=False, choices=("intra", "network")),
        "kind": Rule(number=False, choices=INTRA_KINDS + NETWORK_KINDS),
        "nominal_GB_per_s": _NON_NEGATIVE,
        "efficiency": _FRACTION,
        "latency_us": _NON_NEGATIVE,
        "pcie_gen": Rule(low=0.0, high=99.0, whole=True, required=False, empty=True),
        "fits_gpus": Rule(number=False, empty=True),
        "default_grid": Rule(number=False, required=False, choices=("yes", "no")),
    },
    "workloads": {
        "name": _TEXT,
        "aliases": _NOTE,
        "params_M": _POSITIVE,
        "fwd_GFLOP_per_sample": _POSITIVE,
        "membound_MB_per_sample": _NON_NEGATIVE,
        "input_MB_per_sample": _NON_NEGATIVE,
        "activation_MB_per_sample": _NON_NEGATIVE,
        "default_batch": Rule(low=1.0),
        "optimizer": _TEXT,
        "tokens_per_sample": Rule(low=0.0, low_open=True, required=False, empty=True),
        "embedding_params_M": Rule(low=0.0, required=False, empty=True),
        "embedding_params_per_sample": Rule(low=0.0, required=False, empty=True),
    },
    "optimizers": {"name": _TEXT, "state_bytes_per_param": Rule(low=0.0, high=64.0)},
    "precisions": {
        "name": _TEXT,
        "aliases": _NOTE,
        "default_grid": Rule(number=False, required=False, choices=("yes", "no")),
        "peak_column": _TEXT,
        "generations": _NOTE,
        "activation_bytes": _BYTES,
        "weight_bytes_per_param": _BYTES,
        "grad_bytes_per_param": _BYTES,
        "comm_bytes_per_param": _BYTES,
    },
}


def check_rows(kind: str, header: list[str], rows, origin: str) -> None:
    """Check a catalogue's header and every ``(line, row)`` against ``COLUMN_RULES[kind]``."""
    rules = COLUMN_RULES.get(kind, {})
    missing = [c for c, rule in rules.items() if rule.required and c not in header]
    if missing:
        raise PaigridError(f"{origin} lacks the column(s) {', '.join(missing)} that the {kind} catalogue needs.")
    for line_no, row in rows:
        where = f"{origin} line {line_no}"
        for column, rule in rules.items():
            if column in row:
                rule.check(row[column], where, column)
        if kind == "links":
            _check_link(row, where)
        if kind == "workloads":
            _check_embedding(row, where)
        if kind == "gpus":
            _check_gpu(row, where)


def _check_gpu(row: dict[str, str], where: str) -> None:
    """Cross-column units checks of a GPU row: ``memory_GiB`` (2**30 bytes, what the GPU reports) is
    within 15% of ``memory_GB`` (1e9 bytes, the datasheet's) once both are bytes, which a value in
    GB, MiB or TiB would not be; an NVLink domain of several GPUs needs NVLink."""
    gib, gb = (row.get("memory_GiB") or "").strip(), (row.get("memory_GB") or "").strip()
    if gib and gb:
        ratio = float(gib) * 2**30 / (float(gb) * 1e9)
        if not 0.85 <= ratio <= 1.15:
            raise PaigridError(
                f"{where}: memory_GiB {gib} is {float(gib) * 2**30 / 1e9:.4g}e9 bytes, not about "
                f"memory_GB {gb} x 1e9; memory_GiB is the capacity in GiB (2**30 bytes) the GPU "
                "reports."
            )
    domain, nvlink = (row.get("nvlink_domain_GPUs") or "").strip(), (row.get("nvlink_gen") or "").strip()
    if domain and float(domain) > 1 and nvlink and float(nvlink) == 0:
        raise PaigridError(
            f"{where}: nvlink_domain_GPUs is {domain} but nvlink_gen is 0; GPUs without NVLink form domains of 1."
        )


def _check_embedding(row: dict[str, str], where: str) -> None:
    """Embedding tables are part of the parameters, and rows touched need tables."""
    emb = (row.get("embedding_params_M") or "").strip()
    touched = (row.get("embedding_params_per_sample") or "").strip()
    if emb and float(emb) > float(row["params_M"]):
        raise PaigridError(
            f"{where}: embedding_params_M ({emb}) is more than params_M ({row['params_M']}); "
            "the embedding tables are part of the parameters."
        )
    if bool(emb) != bool(touched):
        raise PaigridError(
            f"{where}: embedding_params_M and embedding_params_per_sample are given together or not at all."
        )


def _check_link(row: dict[str, str], where: str) -> None:
    kinds = INTRA_KINDS if row["scope"] == "intra" else NETWORK_KINDS
    if row["kind"] not in kinds:
        raise PaigridError(
            f"{where}: a link of scope {row['scope']} has kind {row['kind']!r}; it must be one of {', '.join(kinds)}."
        )
    if row["kind"] != "none" and not float(row["nominal_GB_per_s"]) > 0:
        raise PaigridError(
            f"{where}: column nominal_GB_per_s holds {row['nominal_GB_per_s']}; a link of kind "
            f"{row['kind']} needs a bandwidth above 0."
        )
    rule = (row.get("fits_gpus") or "").strip()
    if row["scope"] == "intra" and not rule:
        raise PaigridError(
            f"{where}: column fits_gpus is empty; an intra-server link must name the GPUs it "
            "connects (names separated by ;, or pcie>=N)."
        )
    if rule.startswith("pcie>="):
        Rule(low=1.0, high=99.0, whole=True).check(rule[len("pcie>=") :], where, "fits_gpus (pcie>=N)")


def parse_csv(text: str, kind: str, origin: str, required: tuple[str, ...] = ("name",)) -> Catalogue:
    """Parse CSV text into a catalogue (checked by ``csv_table`` and ``check_rows``)."""
    header, rows = csv_table(text, origin, f"a {kind} catalogue", required)
    check_rows(kind, header, rows, origin)
    digest = hashlib.sha256(text.encode()).hexdigest()
    return Catalogue(kind, origin, header, [row for _, row in rows], digest)


def builtin_text(kind: str) -> str:
    """Text of a built-in catalogue CSV shipped in ``paigrid.datasets``."""
    return resources.files("paigrid.datasets").joinpath(f"{kind}.csv").read_text(encoding="utf-8")


def load(kind: str, path: str | Path | None = None) -> Catalogue:
    """Load a built-in catalogue (``path`` None) or a user CSV of the same schema."""
    if path is None:
        return fresh_copy(parsed_once(kind, builtin_text(kind), parse_csv))
    text = read_text(path, f"the {kind} file")
    return parse_csv(text, kind, str(path))


#: built-in catalogues parsed and checked in this process, by (kind, SHA-256 of their text)
_PARSED: dict[tuple[str, str], Catalogue] = {}


def parsed_once(kind: str, text: str, parse) -> Catalogue:
    """``parse(text, kind, origin)`` of a built-in catalogue, done once per process and content
    (a command loads the catalogues more than once: the job's family, then its prediction)."""
    key = (kind, hashlib.sha256(text.encode()).hexdigest())
    if key not in _PARSED:
        _PARSED[key] = parse(text, kind, f"the built-in {kind}.csv")
    return _PARSED[key]


def fresh_copy(catalogue: Catalogue) -> Catalogue:
    """A catalogue of the same rows that shares no list or row with ``catalogue``."""
    return Catalogue(
        catalogue.kind, catalogue.origin, list(catalogue.columns), [dict(r) for r in catalogue.rows], catalogue.sha256
    )


@dataclass
class Catalogues:
    """The five catalogues a sweep needs."""

    gpus: Catalogue
    links: Catalogue
    workloads: Catalogue
    optimizers: Catalogue
    precisions: Catalogue

    @classmethod
    def load(cls, overrides: Mapping[str, str | Path] | None = None) -> Catalogues:
        """Built-in catalogues, with any of them replaced by a user file."""
        overrides = overrides or {}
        unknown = set(overrides) - set(BUILTIN)
        if unknown:
            raise PaigridError(f"unknown catalogue(s) {', '.join(sorted(unknown))}; known: {', '.join(BUILTIN)}.")
        for kind, path in overrides.items():
            if not isinstance(path, (str, Path)) or not str(path).strip():
                raise PaigridError(f"the {kind} catalogue must be given as the path of a CSV file, not {path!r}.")
        cats = cls(**{kind: load(kind, overrides.get(kind)) for kind in BUILTIN})
        cats.check_references()
        return cats

    def check_references(self) -> None:
        """Each precision's peak column must be a column of the GPU catalogue, with a peak (a
        number of 0 or more, or empty) in every row."""
        for row in self.precisions.rows:
            column = row["peak_column"]
            optional = not COLUMN_RULES["gpus"].get(column, Rule()).required
            if column not in self.gpus.columns and optional:
                continue  # an optional peak column the file lacks: no GPU of it has that math
            if column not in self.gpus.columns:
                raise PaigridError(
                    f"precision {row['name']!r} in {self.precisions.origin} runs at the peak column "
                    f"{column!r}, which {self.gpus.origin} lacks."
                )
            for gpu in self.gpus.rows:
                _PEAK.check(gpu[column], f"{self.gpus.origin} row {gpu['name']!r}", column)

    def peak_TFLOP_per_s(self, gpu: str, precision: str) -> float:
        """Dense datasheet peak [TFLOP/s] of ``gpu`` at ``precision`` (the precision's
        ``peak_column``); NaN where the GPU lacks that math: the cell is empty or 0, or the
        precision names the GPU generations with the hardware for it (``generations``, e.g. MXFP8
        on Blackwell only, though Hopper has an FP8 peak) and the GPU's is not among them."""
        return (
            self.gpus.number(gpu, self.precisions.row(precision)["peak_column"])
            if not self.lacks_precision(gpu, precision)
            else math.nan
        )

    def lacks_precision(self, gpu: str, precision: str) -> str:
        """Why ``gpu`` cannot run ``precision``, completing "the GPU has no PRECISION support (...)";
        empty when it can."""
        row = self.precisions.row(precision)
        column = row["peak_column"]
        if not self.gpus.number(gpu, column) > 0:
            return f"{column} is empty in the GPU catalogue"
        generations = _split(row.get("generations", ""))
        own = (self.gpus.row(gpu).get("generation") or "").strip()
        if generations and own not in generations:
            return (
                f"{row['name']} needs hardware of the generation(s) {', '.join(generations)}; the "
                f"{self.gpus.resolve(gpu)} is {own or 'of no stated generation'}"
            )
        return ""

    def checksums(self) -> dict[str, str]:
        """sha256 of each catalogue's text, for the cube's provenance."""
        return {kind: getattr(self, kind).sha256 for kind in BUILTIN}

    def links_of_scope(self, scope: str, default_only: bool = False) -> list[str]:
        """Names of the intra-server links (``intra``) or networks (``network``), in file order; with
        ``default_only``, those of the default grid only (``Catalogue.default_names``)."""
        names = self.links.default_names if default_only else self.links.names
        return [row["name"] for row in self.links.rows if row["scope"] == scope and row["name"] in names]
