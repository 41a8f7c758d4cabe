"""Reproduce the accuracy table of the README with one command:

    python bench/accuracy.py [MEASUREMENTS.csv]

Default input: the shipped ``datasets/measurements_public.csv``.  Every experiment runs the real
command line (``paigrid calibrate`` / ``paigrid validate --json``, in process) and never
validates on the rows it calibrated on.  Prints a markdown table on stdout, then the commands.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import tempfile
from importlib import resources
from pathlib import Path

from typer.testing import CliRunner

from paigrid.cli import app

# (label, calibrate on, calibrate flags, validate on); None: the uncalibrated defaults
EXPERIMENTS = [
    ("defaults (no calibration)", None, [], []),
    ("defaults, A100 rows only", None, [], ["--rows-where", "gpu=A100*"]),
    ("defaults, V100 rows only", None, [], ["--rows-where", "gpu=V100*"]),
    ("defaults, multi-GPU rows only", None, [], ["--rows-where", "n_gpu!=1"]),
    ("held out: fit A100, validate V100", ["--rows-where", "gpu=A100*"], [], ["--rows-where", "gpu!=A100*"]),
    ("held out: fit A100, validate V100", ["--rows-where", "gpu=A100*"], ["--flop-per", "precision"],
     ["--rows-where", "gpu!=A100*"]),
    ("held out: fit V100, validate A100", ["--rows-where", "gpu=V100*"], ["--flop-per", "precision"],
     ["--rows-where", "gpu!=V100*"]),
    ("held out: fit 1-GPU rows, validate multi-GPU", ["--rows-where", "n_gpu=1"], [],
     ["--rows-where", "n_gpu!=1"]),
]
GROUPS = (("single_gpu", "1 GPU"), ("multi_gpu_one_server", "1 server, >1 GPU"), ("multi_server", ">1 server"))


def _run(args: list[str]) -> str:
    result = CliRunner().invoke(app, args)
    if result.exit_code != 0:
        raise SystemExit(f"paigrid {shlex.join(args)} failed: {result.output.strip()}")
    return result.stdout


def _pct(value) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _where(args: list[str]) -> str:
    return " ".join(args[1::2]) if args else "all rows"


def series_table(result: dict) -> str:
    """Markdown table of predicted vs measured scaling efficiency of every series in ``result``."""
    lines = ["| model | GPU | precision | framework | input pipeline | GPUs | predicted | measured |",
             "|---" * 8 + "|"]
    for s in result["series"]:
        for p in s["points"]:
            lines.append(f"| {s['model']} | {s['gpu']} | {s['precision']} | {s['framework']} | {s['data_pipeline']} "
                         f"| {p['n_gpu']} vs {s['base_n_gpu']} | {_pct(p['predicted'])} | {_pct(p['measured'])} |")
    return "\n".join(lines)


def table(measurements: str) -> tuple[str, list[str], dict]:
    """The markdown accuracy table, the shell commands that produced it and the uncalibrated result."""
    lines = ["| experiment | calibrated on | validated on | rows | median abs. error | mean abs. error | "
             + " | ".join(f"{label} (median, n)" for _, label in GROUPS) + " |",
             "|---" * (6 + len(GROUPS)) + "|"]
    commands = []
    with tempfile.TemporaryDirectory() as folder:
        for i, (label, fit_rows, fit_flags, validate_rows) in enumerate(EXPERIMENTS):
            validate_args = ["validate", measurements, *validate_rows, "--json"]
            if fit_rows is not None:
                calib = str(Path(folder) / f"calib{i}.toml")
                fit_args = ["calibrate", measurements, "--out", calib, *fit_rows, *fit_flags]
                _run(fit_args)
                commands.append("paigrid " + shlex.join(fit_args).replace(calib, f"calib{i}.toml"))
                validate_args[2:2] = ["--calibration", calib]
            result = json.loads(_run(validate_args))
            if i == 0:
                uncalibrated = result
            commands.append("paigrid " + shlex.join(validate_args).replace(folder + "/", ""))
            s = result["summary"]
            fitted = "-" if fit_rows is None else _where(fit_rows) + (f" ({' '.join(fit_flags)})" if fit_flags else "")
            cells = [label, fitted, _where(validate_rows), str(s["overall"]["count"]),
                     _pct(s["overall"]["median_abs_error"]), _pct(s["overall"]["mean_abs_error"])]
            cells += [f"{_pct(s[g]['median_abs_error'])}, {s[g]['count']}" for g, _ in GROUPS]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines), commands, uncalibrated


def main(argv: list[str]) -> None:
    """Print the table for ``argv[0]`` (default: the shipped public measurements)."""
    if argv:
        path = argv[0]
    else:
        path = str(resources.files("paigrid.datasets").joinpath("measurements_public.csv"))
        if Path(path).resolve().is_relative_to(Path.cwd()):
            path = os.path.relpath(path)
    text, commands, uncalibrated = table(path)
    print(f"Accuracy of paigrid on {path} (error = predicted / measured - 1; absolute values summarised)\n")
    print(text)
    print("\nScaling efficiency, uncalibrated (throughput(n) / (n x throughput(1))):\n")
    print(series_table(uncalibrated))
    print("\nCommands (calibration files in a temporary folder):\n")
    print("\n".join(f"    {c}" for c in commands))


if __name__ == "__main__":
    main(sys.argv[1:])
