"""Reading and writing the rows of a CSV file as dicts, for tests that edit measurement files."""

import csv


def read_rows(path) -> list[dict]:
    """The rows of a CSV file, one dict per row keyed by the header."""
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def write_rows(path, rows: list[dict]):
    """Write ``rows`` (dicts with the same keys) as a CSV file with a header; returns ``path``."""
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path
