"""Run sweep blocks on a Dask cluster: an existing one (``--scheduler``) or a local one (``--workers``).

Workers run the same numba kernel on blocks of jobs; the caller (one writer) streams the
finished blocks into the file as they arrive.  A worker that dies takes its running and
finished-but-unfetched blocks with it; the scheduler reruns them elsewhere, so the cube comes
out the same, value for value.  At most a few blocks per worker are in flight at once, so a
slow disk never lets results pile up in worker memory.
"""

from __future__ import annotations

from contextlib import ExitStack

from paigrid.errors import PaigridError
from paigrid.evaluate import evaluate_block
from paigrid.inputs.tables import Grid

IN_FLIGHT_PER_WORKER = 2


def _client(stack: ExitStack, scheduler: str | None, workers: int | None):
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError:
        raise PaigridError("Dask is not installed; install paigrid with the dask extra: pip install 'paigrid[dask]'.") from None
    if scheduler:
        try:
            return stack.enter_context(Client(scheduler, timeout="20s"))
        except (OSError, TimeoutError) as exc:
            raise PaigridError(f"cannot reach the Dask scheduler at {scheduler} ({exc}).") from None
    import os

    # each worker process runs the parallel kernel: share the cores out instead of oversubscribing
    threads = str(max(1, (os.cpu_count() or 1) // workers))
    cluster = stack.enter_context(LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                               dashboard_address=":0", host="127.0.0.1",
                                               env={"NUMBA_NUM_THREADS": threads}))
    return stack.enter_context(Client(cluster))


def run_on_dask(grid: Grid, blocks: list[tuple[int, int]], todo: list[int], write_cube: bool,
                scheduler: str | None, workers: int | None, compression: str, jobs_per_chunk: int):
    """Yield evaluated blocks (in completion order) computed on Dask workers; the workers also
    compress the cube chunks, so the writer only copies bytes."""
    from dask.distributed import as_completed

    with ExitStack() as stack:
        client = _client(stack, scheduler, workers)
        n_workers = max(1, len(client.scheduler_info()["workers"]))
        shared = client.scatter(grid, broadcast=True)
        queue = list(todo)

        def submit(i):
            start, stop = blocks[i]
            return client.submit(evaluate_block, shared, i, start, stop, write_cube, None, compression,
                                 jobs_per_chunk, key=f"paigrid-block-{i}-{id(grid)}", retries=3, pure=False)

        running = as_completed([submit(queue.pop(0)) for _ in range(min(len(queue), IN_FLIGHT_PER_WORKER * n_workers))])
        for future in running:
            block = future.result()
            future.release()
            if queue:
                running.add(submit(queue.pop(0)))
            yield block
