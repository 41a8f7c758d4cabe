"""Scale-out network fabrics of LLM clusters (``datasets/llm_fabrics.csv``): rail-optimised or
top-of-rack, tiers, oversubscription per tier, per-hop latency and in-network reduction
(SHARP on the fabric, NVLS inside the NVLink domain).

A network of an LLM design is either a fabric row of that catalogue or a plain network link of
``links.csv`` (``ib-ndr-400g``): a plain link is an ideal fabric, one non-blocking tier of any
size, without in-network reduction, so the designs of earlier sweeps keep their numbers.
"""

from __future__ import annotations

import functools
import hashlib
import math
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from paigrid.errors import PaigridError
from paigrid.files import read_text
from paigrid.inputs.catalog import Catalogue, Catalogues, csv_table
from paigrid.inputs.options import check_column

REQUIRED = (
    "name",
    "topology",
    "kind",
    "nic_GB_per_s",
    "efficiency",
    "latency_us",
    "tiers",
    "tier1_GPUs",
    "tier2_GPUs",
    "oversubscription_tier1_ratio",
    "oversubscription_tier2_ratio",
    "hop_latency_us",
    "sharp",
    "nvls",
    "source",
)
TOPOLOGIES = ("rail", "tor", "ideal")


@dataclass(frozen=True)
class Fabric:
    """One scale-out fabric.  ``topology``: rail (a leaf per rail: the same-index NICs of many
    servers), tor (a top-of-rack leaf: every NIC of a few servers) or ideal (a plain link);
    ``nic_GB_per_s`` per NIC one direction [1e9 bytes/s] at ``efficiency`` (fraction),
    ``latency_us`` per message through one switch [us], ``tiers`` switch tiers (1-3),
    ``tier1_GPUs`` / ``tier2_GPUs`` GPUs whose rail-aligned traffic stays below one tier-1 /
    tier-2 switch group [GPUs], oversubscription of the tier-1 and tier-2 uplinks (down:up
    ratio, >= 1), ``hop_latency_us`` per extra switch hop [us], ``sharp`` (in-network
    all-reduce on the fabric), ``nvls`` (NVLink SHARP in the domain)."""

    name: str
    topology: str
    kind: str
    nic_GB_per_s: float
    efficiency: float
    latency_us: float
    tiers: int
    tier1_GPUs: float
    tier2_GPUs: float
    oversubscription_tier1: float
    oversubscription_tier2: float
    hop_latency_us: float
    sharp: bool
    nvls: bool

    def capacity(self) -> float:
        """The most GPUs the fabric connects [GPUs] (inf with three tiers)."""
        return (self.tier1_GPUs, self.tier2_GPUs, math.inf)[self.tiers - 1]


def _number(row: dict, column: str, origin: str, low: float, high: float = math.inf) -> float:
    try:
        value = float(row[column])
    except ValueError:
        value = math.nan
    if not (low <= value <= high):
        raise PaigridError(f"{origin}: {column} must be a number in [{low:g}, {high:g}], not {row[column]!r}.")
    return check_column(column, value, origin)


def _flag(row: dict, column: str, origin: str) -> bool:
    text = row[column].strip().casefold()
    if text not in ("true", "false"):
        raise PaigridError(f"{origin}: {column} must be true or false, not {row[column]!r}.")
    return text == "true"


def fabric_from_cells(row: dict, origin: str) -> Fabric:
    """The fabric of one catalogue row (one sentence for a bad cell)."""
    topology = row["topology"].strip().casefold()
    if topology not in ("rail", "tor"):
        raise PaigridError(f"{origin}: topology must be rail or tor, not {row['topology']!r}.")
    tiers = _number(row, "tiers", origin, 1, 3)
    if tiers != int(tiers):
        raise PaigridError(f"{origin}: tiers must be 1, 2 or 3, not {row['tiers']!r}.")
    tier1 = _number(row, "tier1_GPUs", origin, 1)
    tier2 = _number(row, "tier2_GPUs", origin, tier1)
    if not row["source"].strip():
        raise PaigridError(f"{origin}: the source column is empty.")
    return Fabric(
        row["name"],
        topology,
        row["kind"].strip(),
        _number(row, "nic_GB_per_s", origin, 1e-9),
        _number(row, "efficiency", origin, 1e-9, 1),
        _number(row, "latency_us", origin, 0),
        int(tiers),
        tier1,
        tier2,
        _number(row, "oversubscription_tier1_ratio", origin, 1),
        _number(row, "oversubscription_tier2_ratio", origin, 1),
        _number(row, "hop_latency_us", origin, 0),
        _flag(row, "sharp", origin),
        _flag(row, "nvls", origin),
    )


@functools.cache
def _builtin() -> Catalogue:
    text = resources.files("paigrid.datasets").joinpath("llm_fabrics.csv").read_text(encoding="utf-8")
    return _catalogue(text, "the built-in llm_fabrics.csv")


def _catalogue(text: str, origin: str) -> Catalogue:
    header, rows = csv_table(text, origin, "an LLM fabric catalogue", REQUIRED)
    for line_no, row in rows:
        fabric_from_cells(row, f"{origin} line {line_no}")
    return Catalogue("llm fabrics", origin, header, [row for _, row in rows], hashlib.sha256(text.encode()).hexdigest())


def load_fabrics(path: str | Path | None = None) -> Catalogue:
    """The fabric catalogue (built-in ``llm_fabrics.csv`` unless ``path``)."""
    return _builtin() if path is None else _catalogue(read_text(path, "the LLM fabric catalogue"), str(path))


def is_fabric(name: str, catalogue: Catalogue | None = None) -> bool:
    """True when ``name`` is a row of the fabric catalogue."""
    catalogue = catalogue or load_fabrics()
    return str(name).strip().casefold() in {n.casefold() for n in catalogue.names}


def resolve_network(name: str, cats: Catalogues, catalogue: Catalogue | None = None) -> str:
    """The canonical name of a fabric row, else of a network link of links.csv (one sentence
    for neither)."""
    catalogue = catalogue or load_fabrics()
    if is_fabric(name, catalogue):
        return catalogue.resolve(name)
    try:
        link = cats.links.resolve(name)
    except PaigridError:
        raise PaigridError(
            f"unknown network {name!r}: neither a fabric of llm_fabrics.csv "
            f"({', '.join(catalogue.names)}) nor a network of {cats.links.origin}."
        ) from None
    if cats.links.row(link)["scope"] != "network":
        raise PaigridError(f"{link!r} is not a network in {cats.links.origin}.")
    return link


def fabric(name: str, cats: Catalogues, eff=None, catalogue: Catalogue | None = None) -> Fabric:
    """The fabric called ``name``: a catalogue row, or a plain network link as an ideal fabric
    (one non-blocking tier of unlimited size, no in-network reduction); ``eff`` (an
    ``Efficiency``) may override the link efficiency by name or kind."""
    catalogue = catalogue or load_fabrics()
    if is_fabric(name, catalogue):
        row = catalogue.row(name)
        out = fabric_from_cells(row, catalogue.origin)
    else:
        link = cats.links.row(resolve_network(name, cats, catalogue))
        out = Fabric(
            link["name"],
            "ideal",
            link["kind"],
            float(link["nominal_GB_per_s"]),
            float(link["efficiency"]),
            float(link["latency_us"]),
            1,
            math.inf,
            math.inf,
            1.0,
            1.0,
            0.0,
            False,
            False,
        )
    if eff is not None:
        from dataclasses import replace

        out = replace(out, efficiency=eff.link_for(out.name, out.kind, out.efficiency))
    return out
