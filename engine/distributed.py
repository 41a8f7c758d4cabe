"""Run sweep blocks on a Dask cluster: an existing one (``--scheduler``) or a local one (``--workers``).

Workers run the same numba kernel on blocks of jobs; the caller (one writer) streams the
finished blocks into the file as they arrive.  A worker that dies takes its running and
finished-but-unfetched blocks with it; the scheduler reruns them elsewhere, so the cube comes
out the same, value for value.  At most a few blocks per worker are in flight at once, so a
slow disk never lets results pile up in worker memory.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from contextlib import ExitStack, contextmanager

from paigrid.errors import PaigridError
from paigrid.evaluate import compute_llm_block, evaluate_block
from paigrid.inputs.kernel_tables import Grid

IN_FLIGHT_PER_WORKER = 2


def dask_client(stack: ExitStack, scheduler: str | None, workers: int | None, threads: int | None = None):
    """A Dask client (entered into ``stack``, which closes it): connected to ``scheduler`` (an
    address tcp://HOST:PORT, or the path of a scheduler file as ``dask scheduler
    --scheduler-file`` and dask-mpi write), or to a local cluster of ``workers`` processes
    started here, each with one task thread and ``threads`` numba threads (default: the cores
    shared out, ``worker_threads``).  The local workers ignore SIGINT (Ctrl-C in a terminal
    reaches the whole process group): this process handles it and closes them, so an
    interrupted sweep prints one sentence, not the workers' tracebacks."""
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError:
        raise PaigridError(
            "Dask is not installed; install paigrid with the dask extra: pip install 'paigrid[dask]'."
        ) from None
    if scheduler:
        target = {"address": scheduler}
        if "://" not in scheduler and os.path.lexists(scheduler):
            target = {"address": scheduler_file_address(scheduler)}
        try:
            return stack.enter_context(Client(**target, timeout="20s"))
        except (OSError, TimeoutError) as exc:
            raise PaigridError(f"cannot reach the Dask scheduler at {scheduler} ({exc}).") from None
        except (ValueError, TypeError, KeyError, AssertionError) as exc:
            raise PaigridError(
                f"{scheduler!r} is not a Dask scheduler address or scheduler file "
                f"({str(exc).rstrip('.')}); give tcp://HOST:PORT or a scheduler file."
            ) from None
    threads = str(threads or worker_threads(workers))
    # the cluster is this command's own: its log lines (a cancelled task, or a worker's heartbeat
    # failing while the cluster closes at Ctrl-C) are not for the user; a task's error still
    # reaches this process through its future
    import logging

    logging.getLogger("distributed").setLevel(logging.CRITICAL)
    with _sigint_ignored(), _environment(DASK_LOGGING__DISTRIBUTED="critical"):  # the workers inherit both
        cluster = stack.enter_context(
            LocalCluster(
                n_workers=workers,
                threads_per_worker=1,
                processes=True,
                dashboard_address=":0",
                host="127.0.0.1",
                env={"NUMBA_NUM_THREADS": threads},
            )
        )
    return stack.enter_context(Client(cluster))


def check_workers(workers, scheduler=None) -> None:
    """One sentence for a local cluster size that is not a whole number of at least 1, a
    scheduler that is not text, or both given (the Python API gets the CLI's checks of
    --workers and --scheduler)."""
    if scheduler is not None and not isinstance(scheduler, str):
        raise PaigridError(
            f"--scheduler (scheduler=) takes tcp://HOST:PORT or a scheduler file's path, not "
            f"{type(scheduler).__name__}."
        )
    if workers is None:
        return
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise PaigridError(f"--workers (workers=) must be a whole number of at least 1, not {workers!r}.")
    if scheduler:
        raise PaigridError("choose one of --scheduler and --workers (scheduler= and workers=).")


def scheduler_file_address(path: str) -> str:
    """The scheduler address of a Dask scheduler file (the JSON that ``dask scheduler
    --scheduler-file`` and dask-mpi write, with an ``address``), one sentence for a file that is
    not one."""
    import json

    from paigrid.files import read_text

    text = read_text(path, "the scheduler file")
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    address = data.get("address") if isinstance(data, dict) else None
    if not isinstance(address, str) or "://" not in address:
        raise PaigridError(
            f"{path} is not a Dask scheduler file (JSON with the scheduler's address, as dask "
            "scheduler --scheduler-file writes); give it, or tcp://HOST:PORT."
        )
    return address


def worker_threads(workers: int, cores: int | None = None) -> int:
    """numba threads per worker process when ``workers`` processes share ``cores`` (default: the
    cores this process may use): each worker runs the parallel kernel, so the cores are shared
    out instead of oversubscribed; at least 1."""
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cores // workers)


@contextmanager
def _environment(**values: str):
    """Environment variables set while worker processes are started (they read them at start)."""
    before = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@contextmanager
def _sigint_ignored():
    """SIGINT ignored while worker processes are started, so that they inherit the ignored
    disposition (a Python handler would not survive their exec); only from the main thread,
    where Python handles signals."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous if previous is not None else signal.default_int_handler)


def run_on_dask(
    grid: Grid,
    blocks: list[tuple[int, int]],
    todo: list[int],
    write_cube: bool,
    scheduler: str | None,
    workers: int | None,
    compression: str,
    chunks: tuple[int, ...],
    client=None,
    threads: int | None = None,
):
    """Yield evaluated blocks (in completion order) computed on Dask workers; the workers also
    compress the cube chunks, so the writer only copies bytes.  ``client``: one from
    ``dask_client`` (else one is made from ``scheduler`` / ``workers``).  ``threads``: numba
    threads per task (None: each worker's ``NUMBA_NUM_THREADS``; more is capped at it)."""
    with ExitStack() as stack:
        if client is None:
            client = dask_client(stack, scheduler, workers, threads)
        n_workers = max(1, len(client.scheduler_info()["workers"]))
        yield from _poll_blocks(
            client, grid, blocks, list(todo), write_cube, compression, chunks, threads, IN_FLIGHT_PER_WORKER * n_workers
        )


#: how often a block whose future the scheduler dropped (its worker died, its data was lost) is
#: submitted again before the sweep stops with a sentence
RESUBMITS = 5
#: how long one wait for a finished block lasts before every future's state is looked at again [s]
POLL_SECONDS = 1.0


def _poll_blocks(
    client, grid: Grid, blocks, queue: list[int], write_cube: bool, compression: str, chunks, threads, in_flight: int
):
    """Yield evaluated data-parallel blocks as their futures finish, at most ``in_flight`` at a
    time (``_poll_tasks`` of ``evaluate_block``)."""

    def arguments(i):
        start, stop = blocks[i]
        return (i, start, stop, write_cube, None, compression, chunks, threads)

    yield from _poll_tasks(client, grid, evaluate_block, arguments, queue, in_flight, "paigrid-block")


def run_llm_on_dask(client, llm, todo: list[int], write_cube: bool, threads: int | None = None):
    """Yield the LLM blocks ``todo`` (``evaluate.LlmBlock``, in completion order) computed on the
    Dask workers of ``client`` (``evaluate.compute_llm_block``): the LLM grid is scattered once,
    a worker lost with its blocks has them submitted again, as for the data-parallel blocks."""
    n_workers = max(1, len(client.scheduler_info()["workers"]))
    yield from _poll_tasks(
        client,
        llm,
        compute_llm_block,
        lambda i: (i, write_cube, threads),
        list(todo),
        IN_FLIGHT_PER_WORKER * n_workers,
        "paigrid-llm-block",
    )


def _poll_tasks(client, payload, task, arguments, queue: list[int], in_flight: int, prefix: str):
    """Yield ``task(payload, *arguments(i))`` for each block ``i`` of ``queue`` as their futures
    finish, at most ``in_flight`` at a time (``payload`` scattered to every worker once).  Each
    future's own state is polled (``Future.status``) instead of trusting ``as_completed``: a
    future the scheduler cancelled or forgot (a worker killed while this client was paused,
    the scattered payload lost with it) is submitted again, under a new key, up to ``RESUBMITS``
    times, instead of ending the sweep in ``FutureCancelledError``."""
    from concurrent.futures import CancelledError

    from dask.distributed import Future, wait

    shared = client.scatter(payload, broadcast=True)
    attempts: dict[int, int] = {}

    def submit(i):
        nonlocal shared
        if getattr(shared, "status", "finished") != "finished":  # the scattered payload was lost: scatter again
            shared = client.scatter(payload, broadcast=True)
        attempt = attempts.get(i, 0)
        return client.submit(
            task,
            shared,
            *arguments(i),
            key=f"{prefix}-{i}-{id(payload)}-{attempt}",
            retries=3,
            pure=False,
        )

    running: dict[int, Future] = {}
    while queue or running:
        while queue and len(running) < in_flight:
            i = queue.pop(0)
            running[i] = submit(i)
        # wait() raises for a cancelled future as as_completed does: each future's state is read below instead
        with contextlib.suppress(TimeoutError, CancelledError):
            wait(list(running.values()), timeout=POLL_SECONDS, return_when="FIRST_COMPLETED")
        for i, future in list(running.items()):
            state = future.status
            if state in ("finished", "error"):
                try:
                    block = future.result()
                except Exception as exc:  # the task's own error, or the future dropped meanwhile
                    if not _lost(exc):
                        raise
                    state = "lost"
                else:
                    del running[i]
                    future.release()
                    yield block
                    continue
            if state in ("cancelled", "lost"):
                attempts[i] = attempts.get(i, 0) + 1
                if attempts[i] > RESUBMITS:
                    raise PaigridError(
                        f"the Dask cluster lost block {i} of the sweep {RESUBMITS + 1} times (its "
                        "workers keep dying); the blocks already written are kept, rerun with "
                        "--resume."
                    )
                future.release()
                running[i] = submit(i)


def _lost(exc: BaseException) -> bool:
    """Whether ``exc`` says a future was cancelled or forgotten by the scheduler (not a task's error)."""
    from concurrent.futures import CancelledError

    return isinstance(exc, CancelledError) or "forgotten" in str(exc)
