"""Commands of trust: calibrate and validate (composed into ``paigrid.cli.app``)."""

from __future__ import annotations

import io
import math
from enum import StrEnum
from pathlib import Path

import typer

from paigrid.cli.arguments import MODEL_HELP, OPTION_HELP, guarded, parse_option_items

app = typer.Typer()

ROWS_WHERE_HELP = (
    "Use only rows where COLUMN=PATTERN[,PATTERN...] (shell wildcards, case-insensitive; "
    "COLUMN!=... excludes), e.g. gpu=A100-SXM4-80GB or gpu!=A100*. Repeatable: all must hold."
)
UNITS = {"predicted": "samples/s", "measured": "samples/s"}


class FlopPer(StrEnum):
    gpu_precision = "gpu-precision"
    precision = "precision"


def _percent(value) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{100 * value:+.1f}%"


def _plain_percent(value) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{100 * value:.1f}%"


def _rate(value: float) -> str:
    """A throughput [samples/s] without exponent notation."""
    return "-" if not math.isfinite(value) else f"{value:.1f}" if abs(value) < 1000 else f"{value:.0f}"


def _se(value: float) -> str:
    if math.isfinite(value):
        return f"{value:.3f}"
    return "undetermined (no degrees of freedom)" if math.isnan(value) else "inf"


def _table(rows: list[dict], columns: list[str], units: dict | None = None) -> str:
    from paigrid.render import emit

    stream = io.StringIO()
    emit(rows, columns, "table", units, stream)
    return stream.getvalue().rstrip("\n")


def _model(calibration: Path | None, option: list[str] | None, model: str | None = None):
    """Efficiency factors (defaults with a calibration on top) and model options (``--model``
    last)."""
    from paigrid.inputs.efficiency import with_calibration
    from paigrid.inputs.spec import Options

    efficiency, options = with_calibration(Options(), calibration)
    options = options.with_overrides(parse_option_items(option), "--option")
    return efficiency, options if model is None else options.with_overrides({"model": model}, "--model")


def _rows(measurements: Path, rows_where: list[str] | None, cats, include_doubtful: bool = False):
    """The selected rows of a measurements file and, for the public-as-published schema
    (``accuracy.publicrows``), its reading (refused rows, DOUBTFUL rows, assumptions; its ``cats``,
    the catalogues extended with the zoo's workloads, predict the rows); else None."""
    from paigrid.accuracy.measurements import load_measurements, select
    from paigrid.accuracy.publicrows import is_public_schema, public_header, read_public

    if not is_public_schema(public_header(measurements)):
        return select(load_measurements(measurements, cats), rows_where, cats), None
    reading = read_public(measurements, cats)
    rows = reading.rows + (reading.doubtful if include_doubtful else [])
    if not rows:
        raise_no_rows(reading)
    return select(rows, rows_where, reading.cats), reading


def raise_no_rows(reading) -> None:
    """One sentence when a public file has no row the model can express."""
    from paigrid.errors import PaigridError

    reasons = "; ".join(f"{n} {why}" for why, n in reading.counts().items())
    raise PaigridError(f"none of the {reading.total_rows} rows can be modelled ({reasons}).")


def _reading_lines(reading, include_doubtful: bool) -> list[str]:
    """How a public file was read: counts of modelled, DOUBTFUL and refused rows (by reason) and
    the assumptions and defaults used (rows per item)."""
    doubtful = len(reading.doubtful)
    lines = [
        f"read {reading.total_rows} rows: {len(reading.rows)} modelled, {doubtful} DOUBTFUL "
        + ("(included: --include-doubtful)" if include_doubtful else "(left out; --include-doubtful keeps them)")
        + f", {len(reading.refused)} not modelled"
    ]
    lines += [f"  not modelled, {why}: {n} row(s)" for why, n in reading.counts().items()]
    lines += [f"  assumed or defaulted, {what}: {n} row(s)" for what, n in reading.assumption_counts().items()]
    return lines


def _refused_lines(reading) -> list[str]:
    """Every row of a public file that is not modelled, with its reason."""
    return ["not modelled (id, line: reason)"] + [
        f"  {r.id or '(no id)'}, line {r.line}: {r.reason}" for r in reading.refused
    ]


@app.command()
@guarded
def calibrate(
    measurements: Path = typer.Argument(
        ...,
        metavar="MEASUREMENTS.csv",
        help="Measured throughputs (schema of datasets/measurements_public.csv), "
        "collective bus bandwidths (datasets/collectives_public.csv: fits "
        "the link efficiencies), scaling efficiencies "
        "(datasets/scaling_public.csv: fits the scaling-loss options) or LLM "
        "training runs (datasets/llm_public_v2.csv: fits the LLM model's "
        "factors, docs/llm.md).",
    ),
    out: Path = typer.Option(..., "--out", "-o", help="Calibration TOML to write."),
    rows_where: list[str] | None = typer.Option(None, "--rows-where", help=ROWS_WHERE_HELP),
    fit_groups: str | None = typer.Option(
        None,
        "--fit",
        help="Parameter groups to fit, comma-separated: flop, link, memory, overlap (pai-v1); "
        "class, hbm, launch, link, workload (pai-v2; workload: one correction per "
        "workload of the rows); scaling (overlap_efficiency, with bucket_overlap), "
        "coordination (coordination_us) on a scaling-efficiency file. Default: flop,link "
        "under pai-v1, class,hbm,launch,link under pai-v2, link on a collectives file, "
        "scaling on a scaling-efficiency file.",
    ),
    share: str = typer.Option(
        "generation",
        "--share",
        help="pai-v2: one parameter per GPU generation (generation) or one for all "
        "generations (all), which transfers to generations without rows.",
    ),
    allow_bounds: bool = typer.Option(
        False,
        "--allow-bounds",
        help="Keep a fit that puts a parameter on a bound of datasets/parameter_bounds.csv (otherwise an error).",
    ),
    flop_per: FlopPer = typer.Option(
        FlopPer.gpu_precision,
        "--flop-per",
        help="One FLOP efficiency per GPU and precision, or per precision for all GPUs.",
    ),
    shrinkage: str = typer.Option(
        "cv",
        "--shrinkage",
        help="Ridge shrinkage of the fit toward the sourced defaults in log-parameter space: "
        "cv (default: strength chosen by cross-validation on the rows, by workload), "
        "or a strength >= 0 (0: the plain fit; inf: the defaults).",
    ),
    include_doubtful: bool = typer.Option(
        False, "--include-doubtful", help="Fit the rows marked DOUBTFUL in a public file's notes too."
    ),
    option: list[str] | None = typer.Option(None, "--option", help=OPTION_HELP),
    model: str | None = typer.Option(None, "--model", help=MODEL_HELP),
):
    """Fit efficiency parameters to measurements by robust least squares on log throughput (on
    scaling-efficiency rows: the scaling-loss options, by least squares in efficiency points)."""
    from paigrid.accuracy.calibrate import fit, write_calibration
    from paigrid.errors import listing
    from paigrid.files import check_output_is_no_input, check_writable_file
    from paigrid.inputs.catalog import Catalogues

    check_writable_file(out)  # before the fit, which takes seconds
    check_output_is_no_input(out, [("the measurements file", measurements)])
    cats = Catalogues.load()
    efficiency, options = _model(None, option, model)
    rows, reading = _rows(measurements, rows_where, cats, include_doubtful)
    cats = reading.cats if reading is not None else cats
    if reading is not None:
        typer.echo("\n".join(_reading_lines(reading, include_doubtful)), err=True)
    groups = None if fit_groups is None else [g.strip() for g in fit_groups.split(",") if g.strip()]
    if rows[0].kind == "llm":
        from paigrid.accuracy.llmfit import calibrate_text

        typer.echo(calibrate_text(rows, cats, efficiency, out, str(measurements)))
        return
    if rows[0].kind == "scaling":
        unused = [
            name
            for name, given in (
                ("--share", share != "generation"),
                ("--allow-bounds", allow_bounds),
                ("--flop-per", flop_per != FlopPer.gpu_precision),
            )
            if given
        ]
        _calibrate_scaling(
            rows,
            efficiency,
            options,
            groups,
            cats,
            out,
            {"measurements": str(measurements), "rows_where": list(rows_where or [])},
            unused,
        )
        return
    result = fit(
        rows,
        efficiency,
        options,
        groups,
        flop_per.value,
        cats,
        allow_bounds=allow_bounds,
        share=share,
        shrinkage=_shrinkage_value(shrinkage),
    )
    write_calibration(result, out, {"measurements": str(measurements), "rows_where": list(rows_where or [])})
    params = [
        {
            "parameter": p.name,
            "start": f"{p.start:.3f}",
            "fitted ± s.e.": f"{p.value:.3f} ± {_se(p.stderr)}",
            "note": "; ".join(
                n
                for n, on in (("at a bound", p.at_bound), ("this workload only", p.section == "workload_efficiency"))
                if on
            ),
        }
        for p in result.parameters
    ]
    params += [
        {"parameter": name, "start": f"{value:.3f}", "fitted ± s.e.": "-", "note": "kept at its default"}
        for name, value in zip(result.notes.get("at_default", []), result.notes.get("default_values", []))
    ]
    params += [
        {
            "parameter": name,
            "start": f"{value:.3f}",
            "fitted ± s.e.": "-",
            "note": "fitted onto a bound, so kept at its default (--allow-bounds keeps the bound)",
        }
        for name, value in zip(
            result.notes.get("bound_to_default", []), result.notes.get("bound_to_default_values", [])
        )
    ]
    if result.notes.get("left_out"):
        typer.echo(
            f"left out (the model has no term for their algorithm): {listing(result.notes['left_out'])}", err=True
        )
    rows = result.rows
    typer.echo(
        f"fitted {len(result.parameters)} parameter(s) to {len(rows)} row(s) ({result.degrees_of_freedom} "
        f"degrees of freedom; model {options.model}; soft-l1 least squares on log throughput; ± is one "
        f"standard error; start = default)"
    )
    typer.echo(_shrinkage_line(result.notes))
    typer.echo(_table(params, ["parameter", "start", "fitted ± s.e.", "note"]))
    residual_rows = [
        {
            "id": r.id,
            "model": r.model,
            "gpu": r.gpu,
            "precision": r.precision,
            "n_gpu": r.n_gpu,
            "measured": _rate(r.measured),
            "predicted": _rate(p),
            "error": _percent(p / r.measured - 1.0),
            "log_residual": f"{math.log(p / r.measured):+.4f}",
            "error_before": _percent(s / r.measured - 1.0),
        }
        for r, p, s in zip(rows, result.predicted, result.start_predicted)
    ]
    typer.echo("\nresiduals (error = predicted / measured - 1; error_before: with the start values)")
    from paigrid.accuracy.rowkinds import row_kind

    unit = row_kind(rows[0].kind).unit
    typer.echo(
        _table(
            residual_rows,
            [
                "id",
                "model",
                "gpu",
                "precision",
                "n_gpu",
                "measured",
                "predicted",
                "error",
                "log_residual",
                "error_before",
            ],
            {"measured": unit, "predicted": unit},
        )
    )
    typer.echo(f"wrote {out}", err=True)


def _shrinkage_value(text: str):
    """``--shrinkage``: ``cv`` or a strength >= 0 (``inf`` allowed)."""
    from paigrid.errors import PaigridError

    if text.strip().casefold() == "cv":
        return "cv"
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not value >= 0:
        raise PaigridError(f"--shrinkage takes cv or a strength >= 0 (inf: the defaults), not {text!r}.")
    return value


def _shrinkage_line(notes: dict) -> str:
    """The sentence saying how strongly the fit was shrunk toward the defaults, and why."""
    strength = notes.get("shrinkage", 0.0)
    what = (
        "no shrinkage (the plain fit)"
        if strength == 0
        else "the defaults kept (infinite shrinkage)"
        if strength == "inf"
        else f"ridge strength {strength:g} toward the defaults in log p"
    )
    how = notes.get("shrinkage_chosen_by")
    scores = "; ".join(notes.get("shrinkage_scores", []))
    return f"shrinkage: {what}" + (f", chosen by {how} ({scores})" if how else "")


def _calibrate_scaling(rows, efficiency, options, groups, cats, out: Path, notes: dict, unused: list[str]) -> None:
    """Fit the scaling-loss options to scaling-efficiency rows, write the calibration and print the
    fitted values and each row's error in points; ``unused``: flags of efficiency fits that were
    given (an error)."""
    import statistics

    from paigrid.accuracy.scalingfit import FIT_OPTIONS, GRID_TEXT, fit_scaling, write_scaling_calibration
    from paigrid.errors import PaigridError

    if unused:
        raise PaigridError(
            f"{' and '.join(unused)} {'applies' if len(unused) == 1 else 'apply'} to fits of "
            f"efficiency parameters, not to a scaling fit on scaling-efficiency rows."
        )
    result = fit_scaling(rows, efficiency, options, groups, cats)
    write_scaling_calibration(result, out, notes)
    on = ", ".join(f"{k} = {str(v).lower()}" for k, v in FIT_OPTIONS.items())
    typer.echo(
        f"fitted {len(result.fitted)} option(s) to {len(result.rows)} scaling row(s) "
        f"({result.degrees_of_freedom} degrees of freedom; model {options.model}, {on}; least squares in "
        f"efficiency points on a grid; start = the option's value before the fit)"
    )
    table = [
        {
            "option": name,
            "start": f"{result.start[name]:g}",
            "fitted": f"{value:g}",
            "grid": GRID_TEXT[name],
            "note": "at the end of its grid" if name in result.at_grid_end else "",
        }
        for name, value in result.fitted.items()
    ]
    typer.echo(_table(table, ["option", "start", "fitted", "grid", "note"]))
    residuals = [
        {
            "id": r.id,
            "model": r.model,
            "gpu": r.gpu,
            "n_gpu": r.n_gpu,
            "nodes": r.nodes,
            "measured": _plain_percent(r.measured),
            "predicted": _plain_percent(r.measured + e),
            "error": f"{100 * e:+.1f} pt",
            "error_before": f"{100 * b:+.1f} pt",
        }
        for r, e, b in zip(result.rows, result.errors, result.start_errors)
    ]
    typer.echo(
        "\nresiduals (scaling efficiency; error = predicted - measured, in points; error_before: with the start values)"
    )
    typer.echo(
        _table(residuals, ["id", "model", "gpu", "n_gpu", "nodes", "measured", "predicted", "error", "error_before"])
    )
    median = 100 * statistics.median(abs(e) for e in result.errors)
    typer.echo(f"\nsummary: median |error| {median:.1f} pt over {len(result.rows)} row(s)")
    typer.echo(f"wrote {out}", err=True)


def _validate_observed(rows, efficiency, options, cats, json_out: bool) -> None:
    """Print (or write as JSON) the validation of scaling or collective rows."""
    import json

    from paigrid.accuracy.validate import validate_observed

    result = validate_observed(rows, efficiency, options, cats)
    if json_out:
        from paigrid.render import json_safe

        typer.echo(json.dumps(json_safe(result), indent=1))
        return
    points = result["error_kind"] == "points"

    def value(v: float) -> str:
        return _plain_percent(v) if points else f"{v:.1f}"

    def error(e: float) -> str:
        return f"{100 * e:+.1f} pt" if points else _percent(e)

    what = (
        "scaling efficiency = throughput(n) / (n x throughput(1)); error = predicted - measured, in points"
        if points
        else "all-reduce bus bandwidth [GB/s]; error = predicted / measured - 1"
    )
    model_name = f"model {options.model}"
    if result["kind"] == "llm":
        what = (
            "tokens/s of the whole job, TFLOP/s rows converted with the FLOPs per token; error = predicted / "
            "measured - 1"
        )
        model_name = "LLM step-time model, docs/llm.md"
    typer.echo(f"{result['kind']} rows ({what}; {model_name}: {efficiency.origin})")
    table = [
        {
            "id": r["id"],
            "model": r["model"],
            "gpu": r["gpu"],
            "n_gpu": r["n_gpu"],
            "nodes": r["nodes"],
            "intra": r["intra"],
            "network": r["network"],
            "predicted": value(r["predicted"]),
            "measured": value(r["measured"]),
            "error": error(r["error"]),
            "note": r["note"],
        }
        for r in result["rows"]
    ]
    typer.echo(
        _table(
            table,
            ["id", "model", "gpu", "n_gpu", "nodes", "intra", "network", "predicted", "measured", "error", "note"],
        )
    )
    s = result["summary"]["overall"]
    median = (
        "-"
        if s["median_abs_error"] is None
        else (f"{100 * s['median_abs_error']:.1f} pt" if points else _plain_percent(s["median_abs_error"]))
    )
    runs = " (twin rows of one run counted once)" if result["kind"] == "llm" else ""
    typer.echo(f"\nsummary: {s['count']} modelled {'run' if runs else 'row'}(s){runs}, median |error| {median}")
    if "refused" in result["summary"]:
        refused = result["summary"]["refused"]
        typer.echo(f"refused: {refused['count']} row(s) of {refused['runs']} run(s), each with its reason in the note")


@app.command()
@guarded
def validate(
    measurements: Path = typer.Argument(
        ...,
        metavar="MEASUREMENTS.csv",
        help="Measured throughputs (schema of datasets/measurements_public.csv), "
        "scaling efficiencies (datasets/scaling_public.csv), collective bus "
        "bandwidths (datasets/collectives_public.csv) or LLM training runs "
        "(datasets/llm_public.csv, llm_public_v2.csv); the columns say which.",
    ),
    calibration: Path | None = typer.Option(None, help="Calibration TOML from paigrid calibrate."),
    rows_where: list[str] | None = typer.Option(None, "--rows-where", help=ROWS_WHERE_HELP),
    option: list[str] | None = typer.Option(None, "--option", help=OPTION_HELP),
    model: str | None = typer.Option(None, "--model", help=MODEL_HELP),
    include_doubtful: bool = typer.Option(
        False, "--include-doubtful", help="Judge the rows marked DOUBTFUL in a public file's notes too."
    ),
    json_out: bool = typer.Option(
        False,
        "--json",
        help="JSON on stdout: {rows, series, summary} (a public file: also not_modelled, doubtful and assumptions).",
    ),
):
    """Predicted against measured throughput per row, scaling efficiency per series, and a summary
    (scaling and collective files: predicted against measured per row, in points or percent)."""
    import json

    from paigrid.accuracy.validate import validate as run_validation
    from paigrid.inputs.catalog import Catalogues

    cats = Catalogues.load()
    efficiency, options = _model(calibration, option, model)
    rows, reading = _rows(measurements, rows_where, cats, include_doubtful)
    cats = reading.cats if reading is not None else cats
    if rows[0].kind != "throughput":
        _validate_observed(rows, efficiency, options, cats, json_out)
        return
    result = run_validation(rows, efficiency, options, cats)
    if reading is not None:
        result["not_modelled"] = [{"id": r.id, "line": r.line, "reason": r.reason} for r in reading.refused]
        result["doubtful"] = [r.id for r in reading.doubtful]
        result["assumptions"] = {r["id"]: reading.assumptions.get(r["id"], []) for r in result["rows"]}
    if json_out:
        from paigrid.render import json_safe

        typer.echo(json.dumps(json_safe(result), indent=1))
        return
    if reading is not None:
        typer.echo("\n".join(_reading_lines(reading, include_doubtful)) + "\n")
    table = [
        {**r, "error": _percent(r["error"]), "predicted": _rate(r["predicted"]), "measured": _rate(r["measured"])}
        for r in result["rows"]
    ]
    typer.echo(f"rows (error = predicted / measured - 1; model: {efficiency.origin})")
    typer.echo(
        _table(
            table,
            ["id", "model", "gpu", "precision", "n_gpu", "nodes", "predicted", "measured", "error", "bottleneck"],
            UNITS,
        )
    )
    points = [
        {
            "model": s["model"],
            "gpu": s["gpu"],
            "precision": s["precision"],
            "framework": s["framework"],
            "n_gpu": f"{p['n_gpu']}/{s['base_n_gpu']}",
            "predicted": _plain_percent(p["predicted"]),
            "measured": _plain_percent(p["measured"]),
            "difference": f"{100 * p['error']:+.1f} pt",
        }
        for s in result["series"]
        for p in s["points"]
    ]
    if points:
        typer.echo("\nscaling efficiency (throughput(n) / (n/base x throughput(base)))")
        typer.echo(
            _table(points, ["model", "gpu", "precision", "framework", "n_gpu", "predicted", "measured", "difference"])
        )
    summary = [
        {
            "rows": group,
            "count": s["count"],
            "median |error|": _plain_percent(s["median_abs_error"]),
            "mean |error|": _plain_percent(s["mean_abs_error"]),
            "mean error": _percent(s["mean_error"]),
        }
        for group, s in result["summary"].items()
    ]
    typer.echo("\nsummary")
    typer.echo(_table(summary, ["rows", "count", "median |error|", "mean |error|", "mean error"]))
    if reading is not None and reading.refused:
        typer.echo("\n" + "\n".join(_refused_lines(reading)))
