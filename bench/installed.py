"""Commands timed as an installed paigrid runs them: with its modules' bytecode compiled.

pip compiles a package's bytecode when it installs it; an editable install leaves that to the
first import, and an environment that sets ``PYTHONDONTWRITEBYTECODE`` (as some CI images and
containers do) never writes it, so every command would compile paigrid's imported modules from
source again (about 0.07 s of a 0.4 s command on the 2-core box).  The bench's commands inherit
that environment; ``compile_paigrid`` writes the bytecode first, as pip would have.
"""

from __future__ import annotations

import compileall
import os
from pathlib import Path


def compile_paigrid() -> str:
    """Compile the bytecode of every paigrid module (``compileall``, which writes it whatever
    ``PYTHONDONTWRITEBYTECODE`` says) and return one line saying so."""
    import paigrid
    import paigrid.kernels

    # an editable install maps paigrid's subpackages to folders of their own (engine/, kernels/)
    folders = sorted({Path(path).resolve() for path in [*paigrid.__path__, *paigrid.kernels.__path__]})
    for folder in folders:
        if not compileall.compile_dir(folder, quiet=1, workers=1):
            raise SystemExit(f"could not compile the bytecode of {folder}")
    unset = "" if os.environ.get("PYTHONDONTWRITEBYTECODE") else " (PYTHONDONTWRITEBYTECODE is not set here)"
    return f"bytecode of paigrid's modules compiled, as pip compiles an install's{unset}"
