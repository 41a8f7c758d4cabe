"""mkdocs hook (mkdocs.yml's ``hooks``): lets mkdocstrings find the package ``paigrid``.

When mkdocs runs as ``.venv/bin/mkdocs``, Python puts ``.venv/bin/`` first on ``sys.path``, and
griffe (mkdocstrings' loader) takes the console script ``.venv/bin/paigrid`` found there for the
package and finds nothing in it.  Once the configuration is read, before mkdocstrings reads ``sys.path``,
the folders that hold such a ``paigrid`` file are taken off the search path; griffe then imports
the package and reads its source where the install maps it (``engine/`` is ``paigrid``).
"""

import sys
from pathlib import Path

from mkdocs.plugins import event_priority


@event_priority(100)  # before mkdocstrings' own on_config, which fixes its search path from sys.path
def on_config(config):
    """Drop the folders with a ``paigrid`` file (a console script) from ``sys.path``."""
    sys.path[:] = [entry for entry in sys.path if not (Path(entry or ".") / "paigrid").is_file()]
    return config
