"""Reading and writing the user's files, with one clear sentence for every way that can fail.

The files are specs, catalogues, workloads, calibrations, measurements and outputs; the free
space an output needs is checked here too.

Outputs: a path the user names as the output is the only file replaced.  A regular file is
written through a temporary file in its folder that is then renamed over it, so an interrupted
write never leaves a file that looks whole; a symbolic link to a file has its target replaced
that way (the link stays); a FIFO or a device (``/dev/stdout``, ``/dev/null``) receives text as
a stream and is never replaced.  ``paigrid.locking`` claims an output for one writer at a time.
"""

from __future__ import annotations

import codecs
import errno
import hashlib
import os
import shutil
import stat
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

from paigrid.errors import PaigridError
from paigrid.faults import fault_point

#: largest input text file read [bytes]; a larger one (or an endless device) is refused
MAX_INPUT_BYTES = 1 << 30
_READ_CHUNK = 1 << 20


def os_reason(exc: BaseException) -> str:
    """An OSError (or HDF5's, through h5py) as a few words on one line ("No space left on
    device"), never as an exception class name or HDF5's multi-line report."""
    import re

    number = getattr(exc, "errno", None)
    if not isinstance(number, int):
        found = re.search(r"errno = (\d+)", str(exc))
        number = int(found.group(1)) if found else None
    if number == errno.EISDIR:
        return "it is a folder"
    if number:
        return os.strerror(number).rstrip(".")
    text = (getattr(exc, "strerror", None) or str(exc) or "an input/output error").strip()
    return " ".join(text.split("(")[0].split()).rstrip(".") or "an input/output error"


_reason = os_reason


def read_text(path: str | Path, what: str) -> str:
    """The UTF-8 text of ``path`` (a leading byte-order mark is dropped); ``what`` names the file
    in errors ("the spec file").  Binary files, text that is not UTF-8 and files over
    ``MAX_INPUT_BYTES`` (an endless device among them) are refused, reading stops at the first
    sign of them."""
    path = Path(path)
    decoder = codecs.getincrementaldecoder("utf-8-sig")()
    parts, size = [], 0
    try:
        with open_input(path, what) as handle:
            while True:
                chunk = handle.read(_READ_CHUNK)
                size += len(chunk)
                if b"\0" in chunk:
                    raise PaigridError(f"{what} {path} is not a text file (it holds NUL bytes).")
                if size > MAX_INPUT_BYTES:
                    raise PaigridError(
                        f"{what} {path} is larger than {MAX_INPUT_BYTES >> 30} GB; that is not a paigrid input."
                    )
                parts.append(decoder.decode(chunk, final=not chunk))
                if not chunk:
                    break
    except FileNotFoundError:
        raise PaigridError(f"{what} {path} does not exist.") from None
    except UnicodeDecodeError:
        raise PaigridError(f"{what} {path} is not UTF-8 text.") from None
    except OSError as exc:
        raise PaigridError(f"{what} {path} cannot be read ({_reason(exc)}).") from None
    return "".join(parts)


def input_kind(mode: int) -> str | None:
    """What a file of ``mode`` (``st_mode``) is when it is not a regular file ("a folder", "a
    FIFO", ...), None for a regular file."""
    for test, name in (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO (a named pipe)"),
        (stat.S_ISCHR, "a device"),
        (stat.S_ISBLK, "a device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return None if stat.S_ISREG(mode) else "not a regular file"


def open_input(path: str | Path, what: str):
    """``path`` opened for reading in binary, refused in one sentence unless it is a regular file
    (a FIFO, a device, a socket or a folder never ends or never starts: they are refused before
    anything waits on them).  The file is opened without blocking and checked by its open
    descriptor, so a FIFO put in its place meanwhile cannot make the read hang."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise PaigridError(f"{what} {path} does not exist.") from None
    except IsADirectoryError:
        raise PaigridError(f"{what} {path} is a folder, not a file.") from None
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a socket
            raise PaigridError(f"{what} {path} is a socket, not a file.") from None
        raise PaigridError(f"{what} {path} cannot be read ({_reason(exc)}).") from None
    try:
        kind = input_kind(os.fstat(fd).st_mode)
        if kind is not None:
            raise PaigridError(f"{what} {path} is {kind}, not a file; paigrid reads its inputs from regular files.")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def input_problem(path: str | Path) -> str | None:
    """Why ``path`` cannot be read as an input file ("it does not exist", "it is a folder, not a
    file", ...), None when it is an existing regular file (a symbolic link to one is followed)."""
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return "it does not exist"
    except OSError as exc:
        return f"it cannot be read ({_reason(exc)})"
    kind = input_kind(mode)
    return None if kind is None else f"it is {kind}, not a file"


def check_input_file(path: str | Path, what: str) -> Path:
    """One sentence unless ``path`` is an existing regular file (``input_problem``): for readers
    that open the file themselves (HDF5)."""
    problem = input_problem(path)
    if problem:
        raise PaigridError(f"cannot read {what} {path}: {problem}.")
    return Path(path)


def read_bounded_bytes(path: str | Path, what: str, limit: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of the regular file ``path`` (``open_input``), at most ``limit`` of them (one
    sentence beyond)."""
    parts, size = [], 0
    try:
        with open_input(path, what) as handle:
            while chunk := handle.read(_READ_CHUNK):
                size += len(chunk)
                if size > limit:
                    raise PaigridError(f"{what} {path} is larger than {megabytes(limit)}; that is not a paigrid input.")
                parts.append(chunk)
    except OSError as exc:
        raise PaigridError(f"{what} {path} cannot be read ({_reason(exc)}).") from None
    return b"".join(parts)


def read_toml(path: str | Path, what: str) -> dict:
    """The parsed TOML of ``path`` (standard library ``tomllib``)."""
    text = read_text(path, what)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PaigridError(f"{what} {path} is not valid TOML ({exc}).") from None
    except RecursionError:
        raise PaigridError(f"{what} {path} is not valid TOML (it nests too deeply).") from None


@dataclass(frozen=True)
class OutputTarget:
    """Where an output named ``given`` goes: ``path`` (a symbolic link followed to its target),
    and whether it is a stream (a FIFO or a device, written into and never replaced)."""

    given: Path
    path: Path
    stream: bool
    kind: str  # "file" (existing or new), "FIFO" or "device"


def output_target(path: str | Path) -> OutputTarget:
    """Check an output path before any work is done and say where it goes (one sentence for a
    path that cannot be written)."""
    given = Path(path)
    if str(given) == "":
        raise PaigridError("the output path is empty.")
    real = Path(os.path.realpath(given)) if given.is_symlink() else given
    try:
        mode = os.stat(real).st_mode
    except (FileNotFoundError, NotADirectoryError):
        mode = None
    except OSError as exc:
        raise PaigridError(f"cannot write {given} ({_reason(exc)}).") from None
    if mode is not None and stat.S_ISDIR(mode):
        raise PaigridError(f"cannot write {given}: it is a folder.")
    if mode is not None and stat.S_ISSOCK(mode):
        raise PaigridError(f"cannot write {given}: it is a socket.")
    if mode is not None and (stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) or stat.S_ISBLK(mode)):
        if not os.access(real, os.W_OK):
            raise PaigridError(f"cannot write {given}: it is not writable.")
        return OutputTarget(given, real, True, "FIFO" if stat.S_ISFIFO(mode) else "device")
    parent = real.parent if str(real.parent) else Path(".")
    if not parent.is_dir():
        raise PaigridError(f"cannot write {given}: the folder {parent} does not exist.")
    if not os.access(parent, os.W_OK):
        raise PaigridError(f"cannot write {given}: the folder {parent} is not writable.")
    return OutputTarget(given, real, False, "file")


def check_output_is_no_input(out: str | Path, inputs) -> None:
    """One sentence when the output ``out`` is one of ``inputs`` (pairs of what the file is and its
    path, None for none): paigrid never writes its result over a file it reads (``sweep spec.toml
    -o spec.toml`` would replace the spec by the cube).  A link to an input counts as the input."""
    try:
        out_id = os.stat(out)
    except OSError:
        return  # a new file: no input can be it
    for what, path in inputs:
        if path is None or str(path) == "":
            continue
        try:
            same = os.path.samestat(out_id, os.stat(path))
        except OSError:
            continue
        if same:
            raise PaigridError(
                f"the output {out} is {what}; paigrid does not write over a file it reads: give another output path."
            )


def check_writable_file(path: str | Path) -> OutputTarget:
    """One sentence for an output file that cannot be written, before any work is done; returns
    where it goes (``output_target``)."""
    return output_target(path)


def write_text_atomically(path: str | Path, text: str) -> Path:
    """Write ``text`` to the output ``path`` (see ``output_target``).  A file is written through a
    temporary file in the same folder, synced and then renamed over it, so an interrupted write
    never leaves a file that looks whole; an existing file keeps its permissions, a new one gets
    the usual ones (0o666 less the umask).  A FIFO or device receives the text as a stream.
    Returns the path written (a link's target)."""
    target = output_target(path)
    if target.stream:
        write_stream(target, text)
        return target.path
    destination = target.path
    folder = destination.parent if str(destination.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{destination.name}.", suffix=".partial", dir=folder)
    except OSError as exc:
        raise PaigridError(f"cannot write {target.given} ({_reason(exc)}).") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            mode = stat.S_IMODE(os.stat(destination).st_mode)
        except OSError:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.chmod(tmp, mode)
        fault_point("text-before-rename")
        os.replace(tmp, destination)
        sync_folder(folder)
    except OSError as exc:
        raise PaigridError(f"cannot write {target.given} ({_reason(exc)}).") from None
    finally:
        Path(tmp).unlink(missing_ok=True)
    return destination


#: the longest a text output that is a FIFO or a device may take no text before paigrid gives up
#: on it [s] (a reader that stopped reading would otherwise hold the command forever)
STREAM_STALL_SECONDS = 30.0
_STREAM_PIECE = 1 << 16


def write_stream(target: OutputTarget, text: str) -> None:
    """Write ``text`` into the FIFO or device ``target`` without ever waiting unbounded: a FIFO
    that no process reads is refused at once (it would block the open forever), and a reader
    that takes no text for ``STREAM_STALL_SECONDS`` ends the write in one sentence."""
    import select

    data = memoryview(text.encode("utf-8"))
    try:
        fd = os.open(target.path, os.O_WRONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise PaigridError(
                f"cannot write {target.given}: it is a FIFO that no process is reading; start its reader first, "
                "or give a file."
            ) from None
        raise PaigridError(f"cannot write {target.given} ({_reason(exc)}).") from None
    try:
        done = 0
        while done < len(data):
            _, ready, _ = select.select([], [fd], [], STREAM_STALL_SECONDS)
            if not ready:
                raise PaigridError(
                    f"cannot write {target.given}: its reader took no text for {STREAM_STALL_SECONDS:g} s "
                    f"({done:,} of {len(data):,} bytes written); paigrid gave up on it."
                )
            try:
                done += os.write(fd, data[done : done + _STREAM_PIECE])
            except BlockingIOError:
                continue
    except BrokenPipeError:
        raise PaigridError(f"cannot write {target.given}: its reader closed it before the end.") from None
    except OSError as exc:
        raise PaigridError(f"cannot write {target.given} ({_reason(exc)}).") from None
    finally:
        os.close(fd)


def sync_folder(folder: str | Path) -> None:
    """fsync a folder, so a rename in it is on disk (best effort: some file systems refuse)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def file_sha256(path: str | Path | None) -> str:
    """sha256 of a file's bytes ("" for no file): how a cube records which inputs made it."""
    if path is None:
        return ""
    digest = hashlib.sha256()
    try:
        with open_input(path, "the input file") as handle:
            for chunk in iter(lambda: handle.read(_READ_CHUNK), b""):
                digest.update(chunk)
    except OSError as exc:
        raise PaigridError(f"{path} cannot be read ({_reason(exc)}).") from None
    return digest.hexdigest()


def megabytes(size: float) -> str:
    """A size in bytes for people: MB below 1 GB, GB above (1 MB = 1e6 bytes)."""
    if size < 1e9:
        return f"{size / 1e6:.1f} MB" if size < 10e6 else f"{size / 1e6:.0f} MB"
    if size < 1e12:
        return f"{size / 1e9:.1f} GB" if size < 10e9 else f"{size / 1e9:.0f} GB"
    return f"{size / 1e12:,.0f} TB"


def new_file_mode(path: str | Path) -> int:
    """The permission bits a replacement of ``path`` gets: those of the existing file, else the
    usual ones of a new file (0o666 less the umask)."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def glob_escape(name: str) -> str:
    """``name`` with glob's special characters quoted."""
    import glob

    return glob.escape(name)


def check_free_space(folder: str | Path, need: float, what: str, hint: str = "") -> None:
    """One sentence when ``folder`` has less than ``need`` bytes free for ``what``."""
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return
    if need > free:
        raise PaigridError(
            f"{what} needs about {megabytes(need)} and {folder} has {megabytes(free)} free"
            f"{'; ' + hint if hint else ''}."
        )
