"""Shared helpers of the command-line tests: run a command, and check a clean one-sentence error."""

from typer.testing import CliRunner

from paigrid.cli import app

runner = CliRunner()


def run(*args):
    """Invoke ``paigrid ARGS`` in process; arguments are turned into strings."""
    return runner.invoke(app, [str(a) for a in args])


def assert_clean_error(result, *fragments):
    """A non-zero exit with one line starting 'paigrid: error:', holding every fragment, no traceback."""
    assert result.exit_code != 0, result.output
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    text = result.output.strip()
    assert text.startswith("paigrid: error:"), text
    assert len(text.splitlines()) == 1, text
    for fragment in fragments:
        assert fragment in text, text


def local_dask_workers():
    """The live worker processes of a local Dask cluster started by this test process (a zombie
    that an earlier test's cluster left behind has no command line, and is not one)."""
    import psutil

    workers = []
    for process in psutil.Process().children(recursive=True):
        try:
            if any("multiprocessing-fork" in part for part in process.cmdline()):
                workers.append(process)
        except (psutil.ZombieProcess, psutil.NoSuchProcess):
            continue
    return workers
