"""The ``paigrid`` command line (typer): one app per command group (``cube``: sweep, query,
predict, info, catalogues; ``study``: population, trace import, study-spec, report; ``trust``:
calibrate, validate; ``llm``: models, sweep, query, predict of LLM-scale layouts), composed
here.  Heavy modules are imported inside the commands so that
``paigrid --help`` starts fast.  Results go to stdout, progress and errors to stderr."""

from __future__ import annotations

import signal
import sys

import typer

from paigrid.cli import cube, llm, study, trust
from paigrid.cli.arguments import OneSentenceGroup

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    cls=OneSentenceGroup,
    help="Which training architecture and interconnect make each deep-learning job fastest or cheapest.",
)
for group in (cube, study, trust):
    app.add_typer(group.app)
app.add_typer(llm.app)


def _print_version(value: bool) -> None:
    """``--version``: print paigrid's version (the one stored in every cube it writes) and exit."""
    if value:
        from paigrid import __version__

        typer.echo(f"paigrid {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: bool = typer.Option(
        False, "--version", callback=_print_version, is_eager=True, help="Print paigrid's version and exit."
    ),
) -> None:
    """The options of ``paigrid`` itself, before a command."""


def main() -> None:
    """Console entry point."""
    from paigrid.cli import arguments

    _default_numba_cache()
    _numba_without_blas()
    arguments.guard_closed_streams()
    arguments.HARD_EXIT_ALLOWED = True
    signal.signal(signal.SIGTERM, _terminated)  # a polite kill stops like Ctrl-C: partial files stay resumable
    try:
        app()
    except KeyboardInterrupt:
        typer.echo("paigrid: interrupted.", err=True)
        sys.exit(130)


def _default_numba_cache() -> None:
    """Cache the command's compiled kernels in ~/.cache/paigrid/numba (``$XDG_CACHE_HOME``
    honoured) unless ``NUMBA_CACHE_DIR`` is set.  Only the command does this, before numba is
    imported; a library import leaves numba's own choice (``__pycache__`` beside the kernels,
    or ~/.cache/numba where that is not writable) alone."""
    import os
    from pathlib import Path

    if "NUMBA_CACHE_DIR" not in os.environ:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        os.environ["NUMBA_CACHE_DIR"] = str(base / "paigrid" / "numba")


class _NoBlasForNumba:
    """A meta-path finder that refuses scipy to numba's BLAS probe only: when numba's CPU target
    starts (the first kernel call, cached or not) ``numba.np.linalg.ensure_blas`` imports
    scipy.linalg to learn whether ``np.dot`` may call BLAS, which costs 0.4-1 s of a command's
    start on the 2-core box; paigrid's kernels call no BLAS or LAPACK, and numba's ``np.dot``
    falls back to its own loop without it.  Any other import of scipy is left alone."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".")[0] != "scipy":
            return None
        frame = sys._getframe(1)
        while frame is not None:
            code = frame.f_code
            if code.co_name in ("ensure_blas", "ensure_lapack") and code.co_filename.endswith(
                ("numba/np/linalg.py", "numba\\np\\linalg.py")
            ):
                raise ImportError("paigrid's kernels use no BLAS")
            frame = frame.f_back
        return None


def _numba_without_blas() -> None:
    """Install ``_NoBlasForNumba`` (the command only; a library import leaves numba as it is)."""
    if not any(isinstance(f, _NoBlasForNumba) for f in sys.meta_path):
        sys.meta_path.insert(0, _NoBlasForNumba())


def _terminated(signum, frame):
    raise KeyboardInterrupt
