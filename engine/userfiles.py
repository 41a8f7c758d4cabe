"""Reading the user's files (specs, catalogues, workloads, calibrations, measurements) with one
clear sentence for every way that can fail."""

from __future__ import annotations

import hashlib
import os
import tempfile
import tomllib
from pathlib import Path

from paigrid.errors import PaigridError


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


def check_writable_file(path: str | Path) -> None:
    """One sentence for an output file that cannot be written, before any work is done."""
    path = Path(path)
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise PaigridError(f"cannot write {path}: the folder {parent} does not exist.")
    if path.is_dir():
        raise PaigridError(f"cannot write {path}: it is a folder.")
    if not os.access(parent, os.W_OK):
        raise PaigridError(f"cannot write {path}: the folder {parent} is not writable.")


def write_text_atomically(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` through a temporary file in the same folder, synced and then
    renamed over ``path``, so an interrupted write never leaves a file that looks whole.  The
    file gets the usual permissions (0o666 less the umask).  Returns the path."""
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=folder)
    except OSError as exc:
        raise PaigridError(f"cannot write {path} ({exc.strerror or exc.__class__.__name__}).") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except OSError as exc:
        raise PaigridError(f"cannot write {path} ({exc.strerror or exc.__class__.__name__}).") from None
    finally:
        Path(tmp).unlink(missing_ok=True)
    return path


def file_sha256(path: str | Path | None) -> str:
    """sha256 of a file's bytes ("" for no file): how a cube records which calibration made it."""
    if path is None:
        return ""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()
