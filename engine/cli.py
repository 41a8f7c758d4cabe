"""The ``paigrid`` command line (typer).  Heavy modules are imported inside the commands so that
``paigrid --help`` starts fast.  Results go to stdout, progress and errors to stderr; an error is
one sentence and a non-zero exit, never a traceback (set PAIGRID_DEBUG=1 to see one)."""

from __future__ import annotations

import functools
import os
import sys
from enum import Enum
from pathlib import Path
from typing import Optional

import typer

from .errors import PaigridError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Which training architecture and interconnect make each deep-learning job fastest or cheapest.")
trace_app = typer.Typer(no_args_is_help=True, help="Import cluster traces as job populations.")
app.add_typer(trace_app, name="trace")

EXIT_ERROR = 2


def guarded(command):
    """Turn a PaigridError (and any unexpected error) into one sentence on stderr and exit code 2."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except PaigridError as exc:
            typer.echo(f"paigrid: error: {exc}", err=True)
            raise typer.Exit(EXIT_ERROR) from None
        except (typer.Exit, typer.Abort):
            raise
        except Exception as exc:  # an unexpected failure still gets one sentence, not a traceback
            if os.environ.get("PAIGRID_DEBUG"):
                raise
            typer.echo(f"paigrid: unexpected error: {exc.__class__.__name__}: {exc} "
                       "(set PAIGRID_DEBUG=1 to see the traceback).", err=True)
            raise typer.Exit(EXIT_ERROR + 1) from None

    return wrapper


class Compression(str, Enum):
    lz4 = "lz4"
    zstd = "zstd"
    gzip = "gzip"
    none = "none"


class By(str, Enum):
    time = "time"
    cost = "cost"


def parse_option_items(items: list[str] | None) -> dict:
    """``KEY=VALUE`` option overrides, values read as TOML scalars (true, 0.5, inf, "tree") or bare words."""
    import tomllib

    values = {}
    for item in items or []:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise PaigridError(f"--option takes KEY=VALUE, not {item!r}.")
        try:
            values[key.strip()] = tomllib.loads(f"v = {text.strip()}")["v"]
        except tomllib.TOMLDecodeError:
            values[key.strip()] = text.strip()
    return values


def _fmt(json_out: bool, csv_out: bool) -> str:
    if json_out and csv_out:
        raise PaigridError("choose one of --json and --csv.")
    return "json" if json_out else "csv" if csv_out else "table"


def _workloads_arg(text: str):
    """A workloads argument: a CSV path, or comma-separated catalogue names."""
    if text.endswith(".csv") or Path(text).exists():
        return text
    return [t.strip() for t in text.split(",") if t.strip()]


CATALOGUE_HELP = "Replace a built-in catalogue by a CSV of the same schema: KIND=PATH with KIND one of gpus, " \
                 "links, workloads, optimizers, precisions (repeatable)."


def parse_catalogue_items(items: list[str] | None) -> dict[str, str]:
    """``KIND=PATH`` catalogue replacements."""
    from .catalog import BUILTIN

    out = {}
    for item in items or []:
        kind, sep, path = item.partition("=")
        if not sep or kind.strip() not in BUILTIN:
            raise PaigridError(f"--catalogue takes KIND=PATH with KIND one of {', '.join(BUILTIN)}, not {item!r}.")
        out[kind.strip()] = path.strip()
    return out


OPTION_HELP = "Model option KEY=VALUE (repeatable): collective, topology_aware, grad_accum_steps, overlap, " \
              "gpus_per_node, nics_per_node, pcie_roots, ps_count, input_rate_samples_per_s."


@app.command()
@guarded
def sweep(
    spec_file: Optional[Path] = typer.Argument(None, metavar="[SPEC.toml]", help="Sweep spec; default: built-in workloads x the full catalogue."),
    out: Path = typer.Option(..., "--out", "-o", help="Cube file to write (netCDF-4/HDF5)."),
    workloads: Optional[str] = typer.Option(None, help="Workload names (comma-separated) or a workloads/population CSV."),
    compression: Compression = typer.Option(Compression.lz4, help="Chunk compression (lz4 and zstd are blosc filters from hdf5plugin)."),
    reduce_only: bool = typer.Option(False, "--reduce-only", help="Keep only the per-job reductions, not the cube."),
    resume: bool = typer.Option(False, "--resume", help="Continue an interrupted sweep of the same spec."),
    scheduler: Optional[str] = typer.Option(None, help="Dask scheduler address (tcp://HOST:PORT) to run blocks on."),
    workers: Optional[int] = typer.Option(None, min=1, help="Start a local Dask cluster of this many worker processes."),
    calibration: Optional[Path] = typer.Option(None, help="Calibration TOML from paigrid calibrate."),
    option: Optional[list[str]] = typer.Option(None, "--option", help=OPTION_HELP),
    catalogue: Optional[list[str]] = typer.Option(None, "--catalogue", help=CATALOGUE_HELP),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
):
    """Evaluate every configuration of the spec's grid and store the cube (and per-job bests)."""
    from .spec import load_spec
    from .sweep import run_sweep

    spec = load_spec(spec_file)
    if workloads:
        spec.workloads = _workloads_arg(workloads)
    if option:
        spec.options = spec.options.with_overrides(parse_option_items(option), "--option")
    spec.catalogues.update(parse_catalogue_items(catalogue))
    if scheduler and workers:
        raise PaigridError("choose one of --scheduler and --workers.")
    result = run_sweep(spec, out, calibration=calibration, compression=compression.value,
                       reduce_only=reduce_only, resume=resume, scheduler=scheduler, workers=workers,
                       progress=not quiet)
    typer.echo(f"wrote {result.path}: {result.configs:,} configurations in {result.blocks} blocks, "
               f"{result.seconds:.1f} s ({result.configs / max(result.seconds, 1e-9) / 1e6:,.1f} M configs/s)",
               err=True)


QUERY_UNITS = {"step_time": "s", "throughput": "samples/s", "throughput_tokens": "tokens/s",
               "cost": "USD/1e6 samples", "speedup": "x"}


@app.command()
@guarded
def query(
    path: Path = typer.Argument(..., help="Cube file."),
    best_arch: bool = typer.Option(False, "--best-arch", help="Best architecture and interconnect per job."),
    pareto: bool = typer.Option(False, "--pareto", help="Every configuration on each job's time/cost Pareto front."),
    by: By = typer.Option(By.time, help="Rank by time per sample (throughput) or by cost per sample."),
    where: Optional[list[str]] = typer.Option(None, help="Filter DIM=VALUE[,VALUE...] (repeatable)."),
    job: Optional[list[str]] = typer.Option(None, help="Only this job (repeatable)."),
    top: int = typer.Option(1, help="Best K configurations per job."),
    calibration: Optional[Path] = typer.Option(None, help="Check that the cube was computed with this calibration TOML."),
    json_out: bool = typer.Option(False, "--json", help="JSON on stdout."),
    csv_out: bool = typer.Option(False, "--csv", help="CSV on stdout."),
):
    """Answer a question from a cube: --best-arch gives one row per job (K with --top), --pareto
    each job's fastest-to-cheapest front."""
    from .output import emit
    from .query import best_configurations, check_calibration, open_cube, parse_where

    fmt = _fmt(json_out, csv_out)
    if best_arch == pareto:
        raise PaigridError("say what to query: --best-arch or --pareto.")
    cube = open_cube(path)
    try:
        check_calibration(cube, calibration)
        filters = parse_where(where or [], cube)
        rows = best_configurations(cube, by.value, filters, job, top, pareto)
        fixed = {d for d, idx in filters.items() if len(idx) == 1} | {
            d for d in ("gpu", "n_gpu", "precision") if len(cube.labels[d]) == 1}
        if cube.labels["n_gpu"] == [0]:  # "current": every job has its own GPU count
            fixed.discard("n_gpu")
    finally:
        cube.close()
    named_by_model = all(r["job"] == r["model"] for r in rows)
    columns = ["job"] + ([] if named_by_model and fmt == "table" else ["model"]) + ["arch", "intra", "network"]
    columns += [d for d in ("gpu", "n_gpu", "precision") if d not in fixed or fmt != "table"]
    columns += ["step_time", "throughput", "cost", "bottleneck", "speedup"]
    if fmt != "table" or any(r["throughput_tokens"] != r["throughput"] for r in rows if r["throughput"] == r["throughput"]):
        columns.insert(columns.index("cost"), "throughput_tokens")
    emit(rows, columns, fmt, QUERY_UNITS)
    empty = [r["job"] for r in rows if r["arch"] is None]
    if empty:
        shown = ", ".join(empty[:5]) + (f" and {len(empty) - 5} more" if len(empty) > 5 else "")
        typer.echo(f"note: no valid configuration that fits in GPU memory under these filters for {shown}.", err=True)


@app.command()
@guarded
def predict(
    workload: str = typer.Option(..., help="Workload catalogue name or alias."),
    arch: str = typer.Option(..., help="1w1g, 1wng, allreduce-local, ps-worker or allreduce-cluster."),
    gpu: str = typer.Option(..., help="GPU catalogue name or alias."),
    n_gpu: int = typer.Option(..., "--n-gpu", min=1, help="GPUs in the job."),
    intra: str = typer.Option(..., help="Intra-server link (pcie3, nvlink2-hcm, ...)."),
    network: str = typer.Option(..., help="Network (eth-25g, ib-hdr-200g, none, ...)."),
    precision: str = typer.Option(..., help="fp32, tf32, amp-fp16, amp-bf16 or fp8."),
    batch: Optional[float] = typer.Option(None, help="Per-GPU batch (default: the workload's)."),
    calibration: Optional[Path] = typer.Option(None, help="Calibration TOML from paigrid calibrate."),
    option: Optional[list[str]] = typer.Option(None, "--option", help=OPTION_HELP),
    catalogue: Optional[list[str]] = typer.Option(None, "--catalogue", help=CATALOGUE_HELP),
    json_out: bool = typer.Option(False, "--json", help="JSON on stdout."),
):
    """The full time breakdown of one configuration."""
    import json

    from .predict import predict_one

    result = predict_one(workload, arch, gpu, n_gpu, intra, network, precision, batch, calibration,
                         parse_option_items(option), parse_catalogue_items(catalogue))
    if json_out:
        from .output import json_safe

        typer.echo(json.dumps(json_safe(result), indent=1))
        return
    units = {"step_time": "s", "t_data": "s", "t_flop": "s", "t_mem": "s", "t_comm": "s", "throughput": "samples/s",
             "throughput_tokens": "tokens/s", "cost": "USD/1e6 samples", "energy": "J/sample", "batch": "samples"}
    for key, value in result.items():
        label = f"{key} [{units[key]}]" if key in units else key
        typer.echo(f"{label:<28} {value:.6g}" if isinstance(value, float) else f"{label:<28} {value}")


@app.command()
@guarded
def info(path: Path = typer.Argument(..., help="Cube file (or an unfinished PATH.partial).")):
    """Dimensions, sizes, provenance and completeness of a cube."""
    from .info import describe

    typer.echo(describe(path))


@app.command()
@guarded
def datasets(
    name: Optional[str] = typer.Argument(None, help="gpus, links, workloads, optimizers or precisions: print that catalogue."),
    csv_out: bool = typer.Option(False, "--csv", help="CSV on stdout."),
):
    """The built-in catalogues (with their sources)."""
    from .info import describe_catalogues

    typer.echo(describe_catalogues(name, csv_out), nl=False)


def main() -> None:
    """Console entry point."""
    try:
        app()
    except KeyboardInterrupt:
        typer.echo("paigrid: interrupted.", err=True)
        sys.exit(130)


# commands of the study (population, trace import, report) and of trust (calibrate, validate)
# live in their own modules and register themselves on ``app``
from . import cli_study, cli_trust  # noqa: E402,F401
