"""The sweep specs the bench scripts share (``bench.py``, ``blockcost.py``, ``gpu.py``).

A module of its own so that those scripts import it, and never each other: no import circle.
"""

from __future__ import annotations

from pathlib import Path

from paigrid.inputs.spec import SweepSpec


def population_spec(folder: Path, jobs: int, **kw) -> SweepSpec:
    """The default grid over ``jobs`` synthetic population jobs (about 0.58 M configurations per
    job), with the CLI's defaults (blocks sized by work) unless ``kw`` says otherwise; the
    population CSV is written once into ``folder`` and reused."""
    from paigrid.study.population import synthetic_population
    from paigrid.study.trace import write_population

    csv_path = folder / f"population-{jobs}.csv"
    if not csv_path.exists():
        write_population(synthetic_population(jobs, seed=7), csv_path)
    return SweepSpec(workloads=str(csv_path), **kw)
