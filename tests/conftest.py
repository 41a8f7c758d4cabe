"""Shared test set-up: make tests/ importable (kernel_tables) and keep numba's cache per session."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
