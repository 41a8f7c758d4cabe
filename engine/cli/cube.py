"""Commands of the design space: sweep, query, predict, info, datasets."""

from __future__ import annotations

from pathlib import Path

import typer

from paigrid.cli.common import (
    CATALOGUE_HELP,
    MODEL_HELP,
    OPTION_HELP,
    By,
    Compression,
    guarded,
    output_format,
    parse_catalogue_items,
    parse_option_items,
    workloads_arg,
)
from paigrid.errors import PaigridError

app = typer.Typer()




@app.command()
@guarded
def sweep(
    spec_file: Path | None = typer.Argument(
        None, metavar="[SPEC.toml]", help="Sweep spec; default: built-in workloads x the full catalogue."),
    out: Path = typer.Option(..., "--out", "-o", help="Cube file to write (netCDF-4/HDF5)."),
    workloads: str | None = typer.Option(None, help="Workload names (comma-separated) or a workloads/population CSV."),
    compression: Compression = typer.Option(
        Compression.lz4, help="Chunk compression (lz4 and zstd are blosc filters from hdf5plugin)."),
    reduce_only: bool = typer.Option(False, "--reduce-only", help="Keep only the per-job reductions, not the cube."),
    resume: bool = typer.Option(False, "--resume", help="Continue an interrupted sweep of the same spec."),
    scheduler: str | None = typer.Option(
        None, help="Dask scheduler to run blocks on: tcp://HOST:PORT, or a scheduler file (dask-mpi, dask scheduler)."),
    workers: int | None = typer.Option(None, min=1, help="Start a local Dask cluster of this many worker processes."),
    threads: int | None = typer.Option(
        None, min=1, help="numba threads for the kernels and compression (per worker with --workers or --scheduler); "
        "default: every core, shared out among --workers."),
    device: str | None = typer.Option(
        None, help="Where the kernels run: cpu, or cuda (an NVIDIA GPU, numba.cuda); default: the spec's, else cpu."),
    calibration: Path | None = typer.Option(None, help="Calibration TOML from paigrid calibrate."),
    option: list[str] | None = typer.Option(None, "--option", help=OPTION_HELP),
    model: str | None = typer.Option(None, "--model", help=MODEL_HELP),
    catalogue: list[str] | None = typer.Option(None, "--catalogue", help=CATALOGUE_HELP),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
    no_space_check: bool = typer.Option(False, "--no-space-check",
                                        help="Start even if the cube's estimated size exceeds the free disk space."),
):
    """Evaluate every configuration of the spec's grid and store the cube (and per-job bests)."""
    from paigrid.inputs.spec import DEVICES, load_spec
    from paigrid.sweeping import run_sweep

    spec = load_spec(spec_file)
    if workloads:
        spec.workloads = workloads_arg(workloads)
    if option:
        spec.options = spec.options.with_overrides(parse_option_items(option), "--option")
    if model is not None:
        spec.options = spec.options.with_overrides({"model": model}, "--model")
    spec.catalogues.update(parse_catalogue_items(catalogue))
    if scheduler and workers:
        raise PaigridError("choose one of --scheduler and --workers.")
    if device is not None and device not in DEVICES:
        raise PaigridError(f"--device must be one of {', '.join(DEVICES)}, not {device!r}.")
    result = run_sweep(spec, out, calibration=calibration, compression=compression.value,
                       reduce_only=reduce_only, resume=resume, scheduler=scheduler, workers=workers,
                       progress=not quiet, space_check=not no_space_check, device=device, threads=threads)
    typer.echo(f"wrote {result.path}: {result.configs:,} configurations in {result.blocks} blocks, "
               f"{result.seconds:.1f} s ({result.configs / max(result.seconds, 1e-9) / 1e6:,.1f} M configs/s)",
               err=True)


@app.command()
@guarded
def query(
    path: Path = typer.Argument(..., help="Cube file."),
    best_arch: bool = typer.Option(False, "--best-arch", help="Best architecture and interconnect per job."),
    pareto: bool = typer.Option(False, "--pareto", help="Every configuration on each job's time/cost Pareto front."),
    by: By = typer.Option(By.time, help="Rank by time per sample (throughput) or by cost per sample."),
    where: list[str] | None = typer.Option(None, help="Filter DIM=VALUE[,VALUE...] (repeatable)."),
    job: list[str] | None = typer.Option(None, help="Only this job (repeatable)."),
    top: int = typer.Option(1, help="Best K configurations per job."),
    calibration: Path | None = typer.Option(None, help="Check that the cube was computed with this calibration TOML."),
    json_out: bool = typer.Option(False, "--json", help="JSON on stdout."),
    csv_out: bool = typer.Option(False, "--csv", help="CSV on stdout."),
):
    """Answer a question from a cube: --best-arch gives one row per job (K with --top), --pareto
    each job's fastest-to-cheapest front."""
    from paigrid.cube import check_calibration, open_cube, reading
    from paigrid.output import emit
    from paigrid.query import QUERY_UNITS, best_configurations, parse_where, result_columns

    fmt = output_format(json_out, csv_out)
    if best_arch == pareto:
        raise PaigridError("say what to query: --best-arch or --pareto.")
    cube = open_cube(path)
    try:
        check_calibration(cube, calibration)
        filters = parse_where(where or [], cube)
        with reading(cube.path):
            rows = best_configurations(cube, by.value, filters, job, top, pareto)
            columns = result_columns(rows, cube, filters, compact=fmt == "table")
    finally:
        cube.close()
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
    n_gpu: int = typer.Option(..., "--n-gpu", min=1, max=2**31 - 1, help="GPUs in the job."),
    intra: str = typer.Option(..., help="Intra-server link (pcie3, nvlink2-hcm, ...)."),
    network: str = typer.Option(..., help="Network (eth-25g, ib-hdr-200g, none, ...)."),
    precision: str = typer.Option(..., help="A precision of precisions.csv: fp32, tf32, amp-fp16, amp-bf16, fp8, "
                                  "fp8-current, fp8-blockwise, mxfp8 or nvfp4."),
    batch: float | None = typer.Option(None, help="Per-GPU batch (default: the workload's)."),
    calibration: Path | None = typer.Option(None, help="Calibration TOML from paigrid calibrate."),
    option: list[str] | None = typer.Option(None, "--option", help=OPTION_HELP),
    model: str | None = typer.Option(None, "--model", help=MODEL_HELP),
    catalogue: list[str] | None = typer.Option(None, "--catalogue", help=CATALOGUE_HELP),
    json_out: bool = typer.Option(False, "--json", help="JSON on stdout."),
):
    """The full time breakdown of one configuration."""
    import json

    from paigrid.predict import predict_one

    result = predict_one(workload, arch, gpu, n_gpu, intra, network, precision, batch, calibration,
                         {**parse_option_items(option), **({"model": model} if model is not None else {})},
                         parse_catalogue_items(catalogue))
    if json_out:
        from paigrid.output import json_safe

        typer.echo(json.dumps(json_safe(result), indent=1))
        return
    units = {"step_time": "s", "t_data": "s", "t_flop": "s", "t_mem": "s", "t_comm": "s", "throughput": "samples/s",
             "throughput_tokens": "tokens/s", "cost": "USD/1e6 samples", "energy": "J/sample", "batch": "samples",
             "band": "+- fraction"}
    for key, value in result.items():
        label = f"{key} [{units[key]}]" if key in units else key
        if key == "band" and value != value:  # NaN: no measurement of this group was held out
            value = "unknown (no held-out measurement of this group)"
        typer.echo(f"{label:<28} {value:.6g}" if isinstance(value, float) else f"{label:<28} {value}")


@app.command()
@guarded
def info(path: Path = typer.Argument(..., help="Cube file (or an unfinished PATH.partial).")):
    """Dimensions, sizes, provenance and completeness of a cube."""
    from paigrid.cube import reading
    from paigrid.info import describe

    with reading(path):
        text = describe(path)
    typer.echo(text)


@app.command()
@guarded
def datasets(
    name: str | None = typer.Argument(
        None, help="gpus, links, workloads, optimizers or precisions: print that catalogue."),
    csv_out: bool = typer.Option(False, "--csv", help="CSV on stdout."),
):
    """The built-in catalogues (with their sources)."""
    from paigrid.info import describe_catalogues

    typer.echo(describe_catalogues(name, csv_out), nl=False)
