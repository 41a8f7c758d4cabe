"""What the command groups share: the error guard (one sentence and a non-zero exit, never a
traceback; set PAIGRID_DEBUG=1 to see one), option parsers and help texts."""

from __future__ import annotations

import functools
import os
import sys
from enum import Enum
from pathlib import Path
from typing import Optional

import typer

from paigrid.errors import PaigridError

EXIT_ERROR = 2


def guarded(command):
    """Turn a PaigridError (and any unexpected error) into one sentence on stderr and exit code 2."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except PaigridError as exc:
            typer.echo(f"paigrid: error: {exc}", err=True)
            raise typer.Exit(EXIT_ERROR) from None
        except (typer.Exit, typer.Abort):
            raise
        except Exception as exc:  # an unexpected failure still gets one sentence, not a traceback
            if os.environ.get("PAIGRID_DEBUG"):
                raise
            typer.echo(f"paigrid: unexpected error: {exc.__class__.__name__}: {exc} "
                       "(set PAIGRID_DEBUG=1 to see the traceback).", err=True)
            raise typer.Exit(EXIT_ERROR + 1) from None

    return wrapper


class Compression(str, Enum):
    lz4 = "lz4"
    zstd = "zstd"
    gzip = "gzip"
    none = "none"


class By(str, Enum):
    time = "time"
    cost = "cost"


def parse_option_items(items: list[str] | None) -> dict:
    """``KEY=VALUE`` option overrides, values read as TOML scalars (true, 0.5, inf, "tree") or bare words."""
    import tomllib

    values = {}
    for item in items or []:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise PaigridError(f"--option takes KEY=VALUE, not {item!r}.")
        try:
            values[key.strip()] = tomllib.loads(f"v = {text.strip()}")["v"]
        except tomllib.TOMLDecodeError:
            values[key.strip()] = text.strip()
    return values


def output_format(json_out: bool, csv_out: bool) -> str:
    if json_out and csv_out:
        raise PaigridError("choose one of --json and --csv.")
    return "json" if json_out else "csv" if csv_out else "table"


def workloads_arg(text: str):
    """A workloads argument: a CSV path, or comma-separated catalogue names."""
    if text.endswith(".csv") or Path(text).exists():
        return text
    return [t.strip() for t in text.split(",") if t.strip()]


CATALOGUE_HELP = "Replace a built-in catalogue by a CSV of the same schema: KIND=PATH with KIND one of gpus, " \
                 "links, workloads, optimizers, precisions (repeatable)."


def parse_catalogue_items(items: list[str] | None) -> dict[str, str]:
    """``KIND=PATH`` catalogue replacements."""
    from paigrid.inputs.catalog import BUILTIN

    out = {}
    for item in items or []:
        kind, sep, path = item.partition("=")
        if not sep or kind.strip() not in BUILTIN:
            raise PaigridError(f"--catalogue takes KIND=PATH with KIND one of {', '.join(BUILTIN)}, not {item!r}.")
        out[kind.strip()] = path.strip()
    return out


OPTION_HELP = "Model option KEY=VALUE (repeatable): collective, topology_aware, grad_accum_steps, overlap, " \
              "gpus_per_node, nics_per_node, pcie_roots, ps_count, input_rate_samples_per_s."


