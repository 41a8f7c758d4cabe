"""Commands of the PAI study: population, trace import, study-spec, report (composed into ``paigrid.cli.app``).

The study pipeline (README):

    paigrid population --jobs 10000 --seed 1 --out pop.csv
    paigrid study-spec --out study.toml
    paigrid sweep study.toml --workloads pop.csv --out study.h5
    paigrid report study.h5 --out report/
"""

from __future__ import annotations

from pathlib import Path

import typer

from paigrid.cli.arguments import guarded
from paigrid.errors import PaigridError
from paigrid.files import check_output_is_no_input, check_writable_file, write_text_atomically

app = typer.Typer()
trace_app = typer.Typer(no_args_is_help=True, help="Import cluster traces as job populations.")
app.add_typer(trace_app, name="trace")

STUDY_SPEC = "pai_study.toml"


def _summary_text(summary: dict) -> str:
    parts = [
        f"{a} {summary['job_share'][a]:.1%} of jobs / {summary['gpu_share'][a]:.1%} of GPUs"
        for a in summary["job_share"]
        if summary["job_share"][a] or summary["gpu_share"][a]
    ]
    return f"{summary['n_jobs']:,} jobs, {summary['n_gpus']:,} GPUs: " + "; ".join(parts)


@app.command()
@guarded
def population(
    jobs: int = typer.Option(10000, "--jobs", min=1, help="Number of jobs to draw."),
    seed: int = typer.Option(1, "--seed", min=0, help="Random seed (the same seed gives the same jobs)."),
    out: Path = typer.Option(..., "--out", "-o", help="Population CSV to write."),
    llm_share: float = typer.Option(
        0.0,
        "--llm-share",
        min=0.0,
        max=1.0,
        help="Share of the jobs that are 2026 LLM training jobs (0 to 1; an assumption, see docs/populations.md).",
    ),
    llm_pretrain_share: float = typer.Option(
        0.2, "--llm-pretrain-share", min=0.0, max=1.0, help="Share of the LLM jobs that pre-train; the rest fine-tune."
    ),
):
    """Draw a synthetic PAI-like job population (a valid --workloads input of paigrid sweep), with LLM jobs beside
    the PAI-era ones when --llm-share is above 0."""
    from paigrid.study.population import population_summary, synthetic_population
    from paigrid.study.trace import write_population

    check_writable_file(out)
    check_population_size(jobs)
    rows = synthetic_population(jobs, seed, llm_share, llm_pretrain_share)
    write_population(rows, out)
    typer.echo(f"wrote {out}: {_summary_text(population_summary(rows))}", err=True)


#: memory one drawn job takes while the population is built [bytes] (about 0.9 kB measured, with a margin)
BYTES_PER_JOB = 1500


def check_population_size(jobs: int) -> None:
    """Refuse up front a population too large to build in this machine's available memory."""
    from paigrid.cli.arguments import available_memory
    from paigrid.files import megabytes

    need, have = jobs * BYTES_PER_JOB, available_memory()
    if have and need > have:
        raise PaigridError(
            f"--jobs {jobs:,} would need about {megabytes(need)} of memory to build and this machine "
            f"has {megabytes(have)} available; draw fewer jobs."
        )


@trace_app.command("import")
@guarded
def trace_import(
    directory: Path = typer.Argument(..., help="Folder with the PAI GPU trace 2020 tables (pai_job_table.csv, ...)."),
    out: Path = typer.Option(..., "--out", "-o", help="Population CSV to write."),
    default_family: str = typer.Option(
        "resnet",
        "--default-family",
        help="Zoo family (or catalogue workload) of the jobs whose workload tag maps "
        "to none; their rows say so in the source column.",
    ),
):
    """Import the Alibaba PAI GPU trace 2020 (cluster-trace-gpu-v2020) as a job population."""
    from paigrid.study.trace import format_counts, import_pai_trace, write_population

    if not directory.is_dir():
        raise PaigridError(f"the trace folder {directory} does not exist.")
    check_writable_file(out)
    check_output_is_no_input(out, [(f"the trace table {table.name}", table) for table in directory.glob("*.csv")])
    try:
        rows, counts = import_pai_trace(directory, default_family)
    except ValueError as exc:
        raise PaigridError(str(exc).rstrip(".") + ".") from None
    if not rows:
        raise PaigridError(
            f"no job of {directory} could be imported ({counts['jobs_read']:,} read; "
            f"{_skips(counts)}), so nothing was written to {out}."
        )
    write_population(rows, out)
    typer.echo(format_counts(counts), err=True)
    typer.echo(f"wrote {out}: {len(rows):,} jobs", err=True)


def _skips(counts: dict) -> str:
    """The non-zero skip counts of a trace import as "failed 3, cpu_only 2" (or "the tables are empty")."""
    skips = [
        f"{key.removeprefix('skipped_').replace('_', ' ')} {value:,}"
        for key, value in counts.items()
        if key.startswith("skipped_") and value
    ]
    return "skipped: " + ", ".join(skips) if skips else "the tables hold no job"


def study_spec_text() -> str:
    """The built-in sweep spec of the PAI study (``datasets/pai_study.toml``), as TOML text."""
    from importlib import resources

    return resources.files("paigrid.datasets").joinpath(STUDY_SPEC).read_text(encoding="utf-8")


@app.command("study-spec")
@guarded
def study_spec(
    out: Path | None = typer.Option(None, "--out", "-o", help="TOML file to write (default: print it)."),
):
    """Write the built-in sweep spec of the PAI study (n_gpu = "current", every arch, the study's GPUs and links)."""
    text = study_spec_text()
    if out is None:
        typer.echo(text, nl=False)
        return
    check_writable_file(out)
    write_text_atomically(out, text)
    typer.echo(f"wrote {out}", err=True)


SWEEP_COMMAND = (
    "paigrid population --jobs 10000 --seed 1 --out pop.csv && "
    "paigrid study-spec --out study.toml && "
    "paigrid sweep study.toml --workloads pop.csv --out study.h5 && "
    "paigrid report study.h5 --out report/"
)
"""The study pipeline (the same text as ``paigrid.study.constants.SWEEP_COMMAND``, kept here so that
``paigrid --help`` does not import numpy)."""

REPORT_HELP = f"""The PAI-study report of a cube: report.md with PNG figures in DIR.

The cube must come from a population swept with the study spec (n_gpu = "current"); the whole pipeline:

{SWEEP_COMMAND}

The report holds the mean time breakdown, communication-share CDF and bottleneck counts per
architecture, the projections PS/Worker -> AllReduce-NVLink, Ethernet 25 -> 100 Gb/s, GPU
generations P100 -> V100 -> A100 -> H100 and fp32 -> mixed precision, and paigrid's headline
numbers next to the paper's with their prediction bands; the paper's figures under model
variants (per job and by GPU, the placement bracket, the PS/Worker projections one change at a
time, the sensitivity table, memory- against FLOP-bound time with the fusion factor), predicted
for the jobs the cube records; and the cluster designs of the cube ranked for the population
(cost, GPU-hours, energy, time, the Pareto front: designs_pareto.png, designs.csv), with the
jobs whose best architecture or design is a tie within the band."""


@app.command(help=REPORT_HELP)
@guarded
def report(
    path: Path = typer.Argument(..., help="Cube file from paigrid sweep with the study spec."),
    out: Path = typer.Option(..., "--out", "-o", help="Folder to write report.md and the PNG figures into."),
    block_jobs: int = typer.Option(1024, "--block-jobs", min=1, help="Jobs read from the cube at a time."),
):
    from paigrid.cube import reading
    from paigrid.study.report import write_report

    with reading(path):
        written = write_report(path, out, block_jobs)
    typer.echo(f"wrote {written} and its figures", err=True)
