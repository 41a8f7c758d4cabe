"""Fault injection for the fault tests (``fault_point``); it does nothing unless the test
environment asks for it.

``PAIGRID_TEST_KILL_AT=POINT`` makes the process kill itself at the named point of a write, with
SIGKILL or the signal named by ``PAIGRID_TEST_SIGNAL`` (to the whole process group when
``PAIGRID_TEST_SIGNAL_GROUP`` is set); the fault tests use it to interrupt writes at exact places.
"""

from __future__ import annotations

import os
import signal


def fault_point(point: str) -> None:
    """The test hook: signal this process at ``point`` when ``PAIGRID_TEST_KILL_AT`` names it
    (SIGKILL, or ``PAIGRID_TEST_SIGNAL``: SIGINT, SIGTERM, SIGSTOP, ...; to the whole process
    group, as Ctrl-C in a terminal does, when ``PAIGRID_TEST_SIGNAL_GROUP`` is set).  Points:
    ``lock-taken``, ``creating``, ``skeleton-written``, ``after-create``, ``block-written-N`` (the
    N-th block this process wrote, flushed or not), ``after-block-N`` (N blocks flushed and marked
    done), ``before-finish`` (sweep) and ``text-before-rename`` (text outputs)."""
    if os.environ.get("PAIGRID_TEST_KILL_AT") == point:
        number = getattr(signal, os.environ.get("PAIGRID_TEST_SIGNAL", "SIGKILL"), signal.SIGKILL)
        if os.environ.get("PAIGRID_TEST_SIGNAL_GROUP"):
            os.killpg(os.getpgrp(), number)
        else:
            os.kill(os.getpid(), number)
