"""Reading the user's files (specs, catalogues, workloads, calibrations, measurements) with one
clear sentence for every way that can fail."""

from __future__ import annotations

import tomllib
from pathlib import Path

from .errors import PaigridError


def read_text(path: str | Path, what: str) -> str:
    """The UTF-8 text of ``path`` (a leading byte-order mark is dropped); ``what`` names the file
    in errors ("the spec file")."""
    path = Path(path)
    try:
        return path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise PaigridError(f"{what} {path} does not exist.") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PaigridError(f"{what} {path} cannot be read ({exc.__class__.__name__}).") from None


def read_toml(path: str | Path, what: str) -> dict:
    """The parsed TOML of ``path`` (standard library ``tomllib``)."""
    try:
        return tomllib.loads(read_text(path, what))
    except tomllib.TOMLDecodeError as exc:
        raise PaigridError(f"{what} {path} is not valid TOML ({exc}).") from None
