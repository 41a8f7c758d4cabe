"""Write tests/slow_tests.txt, the tests that the fast subset leaves out by their measured time.

    python -m pytest -q -p no:cacheprovider --durations=0 > durations.txt   # the whole suite, once
    python tools/slow_tests.py durations.txt [--seconds 0.5]

A test whose setup, call and teardown took at least ``--seconds`` on that run is listed (its node
id, then its seconds); ``tests/conftest.py`` gives every listed test the ``slow`` marker, so the
fast subset (``-m "not slow and ..."``, docs/development.md) is chosen by a time budget rather
than by hand.  Rerun it when the suite changes shape; a listed test that no longer exists is
dropped.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIST = ROOT / "tests" / "slow_tests.txt"
LINE = re.compile(r"\s*([\d.]+)s (setup|call|teardown)\s+(\S+)")
HEADER = (
    "# tests the fast subset leaves out: each took at least {seconds} s (setup + call + teardown) on\n"
    "# the run tools/slow_tests.py read; tests/conftest.py marks them slow.  Written by\n"
    "# `python tools/slow_tests.py DURATIONS`; do not edit by hand.\n"
)


def seconds_per_test(report: str) -> Counter:
    """Seconds per test node id [s] from a pytest ``--durations=0`` report."""
    total: Counter = Counter()
    for line in report.splitlines():
        match = LINE.match(line)
        if match:
            total[match.group(3)] += float(match.group(1))
    return total


def main(argv: list[str] | None = None) -> None:
    """Read the durations report, write tests/slow_tests.txt."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("durations", type=Path, help="a pytest --durations=0 report of the whole suite")
    parser.add_argument("--seconds", type=float, default=0.5, help="the budget of one fast test [s]")
    args = parser.parse_args(argv)
    total = seconds_per_test(args.durations.read_text(encoding="utf-8"))
    slow = sorted(test for test, seconds in total.items() if seconds >= args.seconds)
    lines = [f"{test}  # {total[test]:.1f} s" for test in slow]
    LIST.write_text(HEADER.format(seconds=args.seconds) + "\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {LIST.relative_to(ROOT)}: {len(slow)} of {len(total)} timed tests at or above {args.seconds} s")


if __name__ == "__main__":
    main()
