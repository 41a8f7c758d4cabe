"""The ``paigrid`` command line (typer): one app per command group (``cube``: sweep, query,
predict, info, datasets; ``study``: population, trace import, study-spec, report; ``trust``:
calibrate, validate), composed here.  Heavy modules are imported inside the commands so that
``paigrid --help`` starts fast.  Results go to stdout, progress and errors to stderr."""

from __future__ import annotations

import sys

import typer

from paigrid.cli import cube, study, trust

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Which training architecture and interconnect make each deep-learning job fastest or cheapest.")
for group in (cube, study, trust):
    app.add_typer(group.app)


def main() -> None:
    """Console entry point."""
    try:
        app()
    except KeyboardInterrupt:
        typer.echo("paigrid: interrupted.", err=True)
        sys.exit(130)
