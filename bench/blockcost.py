"""What a block costs beside its kernel: the writer's time per block against the block's own
compute time, over a whole ``run_sweep`` in this process, and whether it grows as the file fills.

Used by ``bench/bench.py`` (the "per-block cost" lines); on its own:

    python bench/blockcost.py [--jobs 1800] [--jobs-per-block 8]

The sweep runs as ``run_sweep`` does for the CLI (reduce-only, the CLI's block sizes unless
``--jobs-per-block`` fixes them).  Two of its calls are wrapped with a timer, nothing else is
changed: ``evaluate.compute_block`` (the block's work in the kernel's thread: compute-model terms,
the block kernel and the overall bests) and ``CubeWriter.write_block`` (in the sweep's thread:
writing the block's reductions and, when due, the flush and the done marks).  The writer's share
is its time over the block's compute time, summed over the blocks, and compared between the
first and the last tenth of the blocks to see whether the per-block cost grows with the file.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from paigrid import evaluate, orchestration  # noqa: E402
from paigrid.inputs.spec import SweepSpec  # noqa: E402
from paigrid.store import CubeWriter  # noqa: E402

#: the issue's goal: the writer's cost per block below this share of the block's compute time
WRITER_SHARE_GOAL = 0.05


@contextmanager
def timing_hooks():
    """Wrap ``evaluate.compute_block`` and ``CubeWriter.write_block`` with timers; yields the two
    lists of per-call seconds (compute, write), in block order."""
    compute, write = [], []
    compute_block, write_block = evaluate.compute_block, CubeWriter.write_block

    def timed_compute(*args, **kwargs):
        start = time.perf_counter()
        try:
            return compute_block(*args, **kwargs)
        finally:
            compute.append(time.perf_counter() - start)

    def timed_write(self, block):
        start = time.perf_counter()
        try:
            return write_block(self, block)
        finally:
            write.append(time.perf_counter() - start)

    evaluate.compute_block, CubeWriter.write_block = timed_compute, timed_write
    try:
        yield compute, write
    finally:
        evaluate.compute_block, CubeWriter.write_block = compute_block, write_block


def block_costs(spec: SweepSpec, folder: Path, flush_seconds: float | None = None) -> dict:
    """Run ``spec`` reduce-only into ``folder`` (warm: a first, untimed run) and return the blocks,
    the per-block compute and writer times [s] and the writer's share, overall and in the first
    and last tenth of the blocks.  ``flush_seconds``: as ``run_sweep`` takes it (None: the CLI's)."""
    out = folder / "blockcost.h5"
    out.unlink(missing_ok=True)
    orchestration.run_sweep(spec, out, reduce_only=True, progress=False)  # compiled kernels loaded
    out.unlink()
    with timing_hooks() as (compute, write):
        result = orchestration.run_sweep(spec, out, reduce_only=True, progress=False, flush_seconds=flush_seconds)
    out.unlink(missing_ok=True)
    tenth = max(1, len(write) // 10)

    def share(lo, hi):
        return sum(write[lo:hi]) / sum(compute[lo:hi])

    return {
        "blocks": result.blocks,
        "configs": result.configs,
        "compute_s": statistics.median(compute),
        "write_s": statistics.median(write),
        "share": share(0, len(write)),
        "share_first": share(0, tenth),
        "share_last": share(len(write) - tenth, len(write)),
        "write_first_s": statistics.median(write[:tenth]),
        "write_last_s": statistics.median(write[-tenth:]),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1800)
    parser.add_argument("--jobs-per-block", type=int, default=None)
    parser.add_argument("--flush-seconds", type=float, default=None)
    args = parser.parse_args()
    from specs import population_spec  # bench/specs.py, beside this file

    with tempfile.TemporaryDirectory(prefix="paigrid-blockcost-") as folder:
        spec = population_spec(Path(folder), args.jobs, jobs_per_block=args.jobs_per_block)
        found = block_costs(spec, Path(folder), args.flush_seconds)
    print(found)


if __name__ == "__main__":
    main()
