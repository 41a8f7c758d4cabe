"""One writer per output: the output's lock and the removal of stale partial files.

``OutputLock`` claims an output for one process at a time, and what an interrupted writer left
is removed under it (``remove_stale_partials``).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
import tempfile
import time
from pathlib import Path

from paigrid.errors import PaigridError
from paigrid.files import (
    glob_escape,
    os_reason,
)


def _start_time(pid: int) -> str:
    """When process ``pid`` started (clock ticks since boot, from /proc), "" where unknown: with
    the pid it tells a live writer from a new process that reuses a dead writer's pid."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
        return text.rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def _alive(pid: int, started: str) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's live process
    except OSError:
        return True
    now = _start_time(pid)
    return not (started and now and now != started)


class OutputLock:
    """An exclusive claim on an output ``PATH``: the file ``PATH.lock``, created atomically (a
    hard link of a finished temporary file, or ``O_EXCL`` where links are not supported) and
    holding the writer's pid, host and start time.  It does not depend on HDF5's or the file
    system's locks (often off on parallel file systems).  A lock left by a dead process of this
    host (SIGKILL, a crash) is taken over; one from another host is reported, since its
    process cannot be checked from here."""

    def __init__(self, path: str | Path):
        self.path = Path(f"{path}.lock")
        self.held = False
        self.owner = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started": _start_time(os.getpid()),
            "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }

    def acquire(self, what: str) -> OutputLock:
        """Take the lock, or raise one sentence naming the other writer (``what`` names the output)."""
        text = json.dumps(self.owner) + "\n"
        for _ in range(5):
            if self._create(text):
                self.held = True
                return self
            other = self._read()
            if other is None:  # vanished, or still being written by its creator: look again
                time.sleep(0.05)
                continue
            if other.get("host") == self.owner["host"] and not _alive(other["pid"], str(other.get("started", ""))):
                self._break(other)
                continue
            pid, host = other.get("pid", "?"), other.get("host", "?")
            hint = (
                "wait for it to finish"
                if host == self.owner["host"]
                else f"wait for it to finish, or delete {self.path} if that process is no longer running"
            )
            raise PaigridError(f"another paigrid process (pid {pid} on {host}) is writing {what}; {hint}.")
        raise PaigridError(f"cannot claim {what}: its lock file {self.path} keeps changing; try again.")

    def _create(self, text: str) -> bool:
        folder = self.path.parent if str(self.path.parent) else Path(".")
        try:
            fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", dir=folder)
        except OSError as exc:
            raise PaigridError(f"cannot create the lock file {self.path} ({os_reason(exc)}).") from None
        try:
            with os.fdopen(fd, "w") as handle:
                handle.write(text)
            try:
                os.link(tmp, self.path)
                return True
            except FileExistsError:
                return False
            except OSError as exc:
                if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK, errno.ENOSYS):
                    raise
            try:  # no hard links here: O_EXCL (a writer killed between create and write leaves it empty)
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
            except FileExistsError:
                return False
            with os.fdopen(fd, "w") as handle:
                handle.write(text)
            return True
        except OSError as exc:
            raise PaigridError(f"cannot create the lock file {self.path} ({os_reason(exc)}).") from None
        finally:
            Path(tmp).unlink(missing_ok=True)

    def _read(self) -> dict | None:
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise PaigridError(f"cannot read the lock file {self.path} ({os_reason(exc)}).") from None
        try:
            data = json.loads(text)
            if isinstance(data, dict) and isinstance(data.get("pid"), int) and not isinstance(data["pid"], bool):
                return data
        except ValueError:
            pass
        if text.strip():
            raise PaigridError(f"{self.path} exists and is not a paigrid lock file; move it away.")
        # empty: a writer killed between creating it and writing it (the O_EXCL fallback)
        try:
            age = time.time() - self.path.stat().st_mtime
        except OSError:
            return None
        return {"pid": -1, "host": self.owner["host"], "started": ""} if age > 2 else None

    def _break(self, stale: dict) -> None:
        """Remove a stale lock, unless another process replaced it meanwhile."""
        moved = self.path.with_name(f".{self.path.name}.stale.{os.getpid()}")
        try:
            os.replace(self.path, moved)
        except FileNotFoundError:
            return
        try:
            data = json.loads(moved.read_text() or "null")
        except (OSError, ValueError):
            data = None
        if isinstance(data, dict) and data.get("pid") != stale.get("pid") and data.get("pid") not in (None, -1):
            with contextlib.suppress(OSError):  # it was a new writer's lock: put it back (unless another exists now)
                os.link(moved, self.path)
        moved.unlink(missing_ok=True)

    def release(self) -> None:
        """Give the lock up (only if it is still this process's)."""
        if not self.held:
            return
        self.held = False
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return
        if data.get("pid") == self.owner["pid"] and data.get("host") == self.owner["host"]:
            self.path.unlink(missing_ok=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()
        return False


# --- what an interrupted writer left ------------------------------------------------------------


def writing_path(path: str | Path) -> Path:
    """The hidden name ``.NAME.writing`` that the writer of earlier versions gave a file until it was whole."""
    path = Path(path)
    return path.with_name(f".{path.name}.writing")


def remove_stale_partials(path: str | Path) -> list[Path]:
    """Remove what an interrupted writer of ``path`` left (``.NAME.writing``, and the
    ``.NAME.*.partial`` temporary files of earlier versions); call it only with the output's
    lock held, when no other writer can be using them.  Returns the paths removed."""
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    removed = []
    for stale in [writing_path(path), *folder.glob(f".{glob_escape(path.name)}.*.partial")]:
        with contextlib.suppress(FileNotFoundError):
            if stale.is_file() and not stale.is_symlink():
                stale.unlink()
                removed.append(stale)
    return removed
