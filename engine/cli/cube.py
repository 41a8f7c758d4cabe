"""Commands of the design space: sweep, query, predict, info, catalogues."""

from __future__ import annotations

from pathlib import Path

import typer

from paigrid.cli.arguments import (
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
        None, metavar="[SPEC.toml]", help="Sweep spec; default: built-in workloads x the full catalogue."
    ),
    out: Path = typer.Option(..., "--out", "-o", help="Cube file to write (netCDF-4/HDF5)."),
    workloads: str | None = typer.Option(
        None,
        help="Job names, comma-separated: workloads and LLM models (of datasets/llm_models.csv), or a "
        "workloads, population or LLM models CSV.",
    ),
    compression: Compression = typer.Option(
        Compression.lz4, help="Chunk compression (lz4 and zstd are blosc filters from hdf5plugin)."
    ),
    reduce_only: bool = typer.Option(False, "--reduce-only", help="Keep only the per-job reductions, not the cube."),
    resume: bool = typer.Option(False, "--resume", help="Continue an interrupted sweep of the same spec."),
    scheduler: str | None = typer.Option(
        None, help="Dask scheduler to run blocks on: tcp://HOST:PORT, or a scheduler file (dask-mpi, dask scheduler)."
    ),
    workers: int | None = typer.Option(None, min=1, help="Start a local Dask cluster of this many worker processes."),
    threads: int | None = typer.Option(
        None,
        min=1,
        help="numba threads for the kernels and compression (per worker with --workers or --scheduler); "
        "default: every core, shared out among --workers.",
    ),
    device: str | None = typer.Option(
        None, help="Where the kernels run: cpu, or cuda (an NVIDIA GPU, numba.cuda); default: the spec's, else cpu."
    ),
    calibration: Path | None = typer.Option(None, help="Calibration TOML from paigrid calibrate."),
    option: list[str] | None = typer.Option(None, "--option", help=OPTION_HELP),
    model: str | None = typer.Option(None, "--model", help=MODEL_HELP),
    catalogue: list[str] | None = typer.Option(None, "--catalogue", help=CATALOGUE_HELP),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
    no_space_check: bool = typer.Option(
        False, "--no-space-check", help="Start even if the cube's estimated size exceeds the free disk space."
    ),
):
    """Evaluate every configuration of the spec's grid and store the cube (and per-job bests)."""
    from paigrid.inputs.spec import DEVICES, load_spec
    from paigrid.orchestration import run_sweep

    spec = load_spec(spec_file)
    if workloads is not None:
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
    result = run_sweep(
        spec,
        out,
        calibration=calibration,
        compression=compression.value,
        reduce_only=reduce_only,
        resume=resume,
        scheduler=scheduler,
        workers=workers,
        progress=not quiet,
        space_check=not no_space_check,
        device=device,
        threads=threads,
    )
    typer.echo(
        f"wrote {result.path}: {result.configs:,} configurations in {result.blocks} blocks, "
        f"{result.seconds:.1f} s ({result.configs / max(result.seconds, 1e-9) / 1e6:,.1f} M configs/s)",
        err=True,
    )


@app.command()
@guarded
def query(
    path: Path = typer.Argument(..., help="Cube file."),
    best_arch: bool = typer.Option(False, "--best-arch", help="Best architecture and interconnect per job."),
    pareto: bool = typer.Option(False, "--pareto", help="Every configuration on each job's time/cost Pareto front."),
    by: By = typer.Option(By.time, help="Rank by time, cost or energy per sample."),
    where: list[str] | None = typer.Option(
        None,
        help="Filter DIM=VALUE[,VALUE...] (repeatable); DIM of either family: arch, gpu, n_gpu, intra, network, "
        "precision; LLM jobs also layout, domain, tp, pp, cp, ep, vpp, micro_batch, zero, recompute, sp.",
    ),
    job: list[str] | None = typer.Option(None, help="Only this job (repeatable)."),
    top: int = typer.Option(1, help="Best K configurations per job."),
    tokens: float | None = typer.Option(
        None, "--tokens", min=1.0, help="Token budget: add the days, cost and energy to train it."
    ),
    per: str | None = typer.Option(
        None,
        "--per",
        help="Answer once per value of n_gpu, network, gpu or precision (each job's best at each GPU count, ...), "
        "or per design: each job's best at each cluster design (gpu, n_gpu, intra or domain, network).",
    ),
    calibration: Path | None = typer.Option(None, help="Check that the cube was computed with this calibration TOML."),
    json_out: bool = typer.Option(False, "--json", help="JSON on stdout."),
    csv_out: bool = typer.Option(False, "--csv", help="CSV on stdout."),
):
    """Answer a question from a cube: --best-arch gives one row per job (K with --top), --pareto
    each job's fastest-to-cheapest front."""
    from paigrid.cube import check_calibration, open_cube, reading
    from paigrid.query import QUERY_UNITS, best_configurations, parse_where, result_columns
    from paigrid.render import emit

    fmt = output_format(json_out, csv_out)
    if best_arch == pareto:
        raise PaigridError("say what to query: --best-arch or --pareto.")
    from paigrid.cube import families_of

    if tokens or per or "llm" in families_of(path):  # one row per job of every family, in the same columns
        from paigrid.llm.query import FAMILY_COLUMNS, FAMILY_UNITS, TRAIN_COLUMNS, query_every_family

        if top < 1:
            raise PaigridError(f"--top must be at least 1, not {top}.")
        if pareto and top > 1:
            raise PaigridError("--top and --pareto do not go together: the front has as many rows as it has.")
        rows, notes = query_every_family(path, by.value, where or [], job, top, pareto, tokens, calibration, per)
        emit(rows, FAMILY_COLUMNS + (TRAIN_COLUMNS if tokens else []), fmt, FAMILY_UNITS)
        for note in notes:
            typer.echo(f"note: {note}", err=True)
        _note_empty(rows)
        return
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
    _note_empty(rows)


def _note_empty(rows: list[dict]) -> None:
    """The note on stderr naming the jobs without a valid configuration under the filters."""
    empty = [r["job"] for r in rows if r["arch"] is None]
    if empty:
        from paigrid.errors import listing

        shown = listing(empty, 5)
        typer.echo(f"note: no valid configuration that fits in GPU memory under these filters for {shown}.", err=True)


@app.command()
@guarded
def predict(
    workload: str = typer.Option(
        ..., help="Job: a workload of the catalogue (or alias), or an LLM model of datasets/llm_models.csv."
    ),
    arch: str | None = typer.Option(
        None, help="Data-parallel job: 1w1g, 1wng, allreduce-local, ps-worker or allreduce-cluster."
    ),
    gpu: str = typer.Option(..., help="GPU catalogue name or alias."),
    n_gpu: int = typer.Option(..., "--n-gpu", min=1, max=2**31 - 1, help="GPUs in the job."),
    intra: str | None = typer.Option(None, help="Data-parallel job: intra-server link (pcie3, nvlink2-hcm, ...)."),
    network: str | None = typer.Option(
        None,
        help="Network (eth-25g, ib-hdr-200g, none, ...; an LLM job also takes "
        "fabrics of llm_fabrics.csv; default for it: ib-ndr-400g).",
    ),
    precision: str | None = typer.Option(
        None,
        help="A precision of precisions.csv: fp32, tf32, amp-fp16, amp-bf16, "
        "amp-fp16-autocast, amp-bf16-autocast, amp-fp16-fp16wire, fp8, fp8-current, "
        "fp8-blockwise, mxfp8 or nvfp4 (LLM default: amp-bf16).",
    ),
    batch: float | None = typer.Option(None, help="Per-GPU batch (default: the workload's)."),
    layout: str | None = typer.Option(
        None,
        help="LLM job: a layout label (tp8-pp4-v2-cp1-ep1-mb1-zero1-selective-"
        "sp, dp from --n-gpu) instead of the degree flags, or 'best': the fastest "
        "layout of the wide space (docs/llm.md).",
    ),
    tp: int = typer.Option(1, "--tp", min=1, help="LLM job: tensor-parallel degree."),
    pp: int = typer.Option(1, "--pp", min=1, help="LLM job: pipeline-parallel degree."),
    cp: int = typer.Option(1, "--cp", min=1, help="LLM job: context-parallel degree."),
    ep: int = typer.Option(1, "--ep", min=1, help="LLM job: expert-parallel degree."),
    vpp: int = typer.Option(1, "--vpp", min=1, help="LLM job: virtual stages per pipeline rank."),
    micro_batch: int = typer.Option(1, "--micro-batch", min=1, help="LLM job: micro-batch [sequences]."),
    zero: int = typer.Option(1, "--zero", min=0, max=3, help="LLM job: ZeRO stage (3 = FSDP)."),
    recompute: str = typer.Option("selective", help="LLM job: none, selective or full."),
    sp: bool = typer.Option(True, "--sp/--no-sp", help="LLM job: sequence parallelism in the tensor group."),
    domain: int | None = typer.Option(
        None, "--domain", min=1, help="LLM job: NVLink domain [GPUs] (default: the GPU's catalogue server, else 8)."
    ),
    nics_per_gpu: float = typer.Option(1.0, "--nics-per-gpu", min=0.0, help="LLM job: NICs per GPU."),
    tokens: float | None = typer.Option(None, "--tokens", min=1.0, help="LLM job: token budget to train."),
    calibration: Path | None = typer.Option(None, help="Calibration TOML from paigrid calibrate."),
    option: list[str] | None = typer.Option(None, "--option", help=OPTION_HELP),
    model: str | None = typer.Option(None, "--model", help=MODEL_HELP),
    catalogue: list[str] | None = typer.Option(None, "--catalogue", help=CATALOGUE_HELP),
    json_out: bool = typer.Option(False, "--json", help="JSON on stdout."),
):
    """The full time breakdown of one configuration: a data-parallel job at --arch, --intra,
    --network and --precision, or an LLM job at a layout (--layout or the degree flags)."""
    import json

    from paigrid.errors import printable
    from paigrid.inputs.catalog import Catalogues
    from paigrid.inputs.jobs import job_family
    from paigrid.predict import predict_one

    family, name = job_family(workload, Catalogues.load(parse_catalogue_items(catalogue)))
    if family == "llm":
        from paigrid.cli.llm import emit_llm_prediction

        for flag, value in (
            ("--arch", arch),
            ("--intra", intra),
            ("--batch", batch),
            ("--calibration", calibration),
            ("--model", model),
        ):
            if value is not None:
                raise PaigridError(f"{flag} is for data-parallel workloads; {name} is an LLM model (give its layout).")
        degrees = (
            {"label": layout}
            if layout
            else dict(
                tp=tp, pp=pp, cp=cp, ep=ep, vpp=vpp, micro_batch=micro_batch, zero=zero, recompute=recompute, sp=sp
            )
        )
        emit_llm_prediction(
            name,
            n_gpu,
            "amp-bf16" if precision is None else precision,
            degrees,
            gpu,
            domain,
            "ib-ndr-400g" if network is None else network,
            nics_per_gpu,
            parse_option_items(option),
            None,
            None,
            tokens,
            json_out,
        )
        return
    if arch is None or intra is None or network is None or precision is None:
        missing = [
            flag
            for flag, value in (
                ("--arch", arch),
                ("--intra", intra),
                ("--network", network),
                ("--precision", precision),
            )
            if value is None
        ]
        raise PaigridError(f"a data-parallel workload needs {', '.join(missing)}.")

    result = predict_one(
        workload,
        arch,
        gpu,
        n_gpu,
        intra,
        network,
        precision,
        batch,
        calibration,
        {**parse_option_items(option), **({"model": model} if model is not None else {})},
        parse_catalogue_items(catalogue),
    )
    if json_out:
        from paigrid.render import json_safe

        typer.echo(json.dumps(json_safe(result), indent=1))
        return
    units = {
        "step_time": "s",
        "t_data": "s",
        "t_flop": "s",
        "t_mem": "s",
        "t_comm": "s",
        "throughput": "samples/s",
        "throughput_tokens": "tokens/s",
        "cost": "USD/1e6 samples",
        "energy": "J/sample",
        "batch": "samples",
        "band": "+- fraction",
    }
    for key, value in result.items():
        label = f"{key} [{units[key]}]" if key in units else key
        if key == "band" and value != value:  # NaN: no measurement of this group was held out
            value = "unknown (no held-out measurement of this group)"
        typer.echo(f"{label:<28} {value:.6g}" if isinstance(value, float) else f"{label:<28} {printable(str(value))}")


@app.command()
@guarded
def info(path: Path = typer.Argument(..., help="Cube file (or an unfinished PATH.partial).")):
    """Dimensions, sizes, provenance and completeness of a cube."""
    from paigrid.cube import reading
    from paigrid.describe import describe
    from paigrid.errors import printable
    from paigrid.llm.sweep import describe_llm_file

    with reading(path):
        text = describe_llm_file(path) or describe(path)  # an LLM file of before the one cube, or a cube
    typer.echo("\n".join(printable(line) for line in text.split("\n")))  # names from the user's files, escaped


_CATALOGUE_NAME = typer.Argument(None, help="gpus, links, workloads, optimizers or precisions: print that catalogue.")
_CATALOGUE_CSV = typer.Option(False, "--csv", help="CSV on stdout.")


@app.command()
@guarded
def catalogues(name: str | None = _CATALOGUE_NAME, csv_out: bool = _CATALOGUE_CSV):
    """The built-in catalogues (with their sources)."""
    _print_catalogues(name, csv_out)


@app.command("datasets", hidden=True)
@guarded
def datasets(name: str | None = _CATALOGUE_NAME, csv_out: bool = _CATALOGUE_CSV):
    """The old name of ``paigrid catalogues`` (hidden; kept for users' scripts, with a note)."""
    typer.echo("paigrid: note: `paigrid datasets` is now `paigrid catalogues`; the old name will go.", err=True)
    _print_catalogues(name, csv_out)


def _print_catalogues(name: str | None, csv_out: bool) -> None:
    from paigrid.describe import describe_catalogues

    typer.echo(describe_catalogues(name, csv_out), nl=False)
