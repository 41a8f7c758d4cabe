"""The README is true: its commands run, print what it shows, and its set-up lines are what CI runs.

    python tests/test_readme.py --update    # rewrite the README's shown outputs from a run (then review the diff)

- Every command of a ```sh or ```console block of the README written with a ``$ `` prompt runs,
  in order, in one temporary folder, with the installed ``paigrid`` first on PATH, and exits 0.
  The lines that follow a command in its block, up to the next prompt, are its output: they must
  be exactly what the command prints on stdout (trailing spaces aside). stderr (progress, notes)
  is not compared.
- The README opens with exactly two set-up commands (one block, right under the title), and
  ``.ci/run`` runs them: the second verbatim, and the paigrid commands of the first verbatim but
  for the virtual environment, which in CI is a second one holding the built wheel (with the
  first line's extras). ``.ci/run`` writes them out instead of reading them from the README so
  that it reads as what it runs; this test is what keeps the two the same.
"""

from __future__ import annotations

import difflib
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
CI = ROOT / ".ci" / "run"
WHEEL_VENV = '"$WHEEL_VENV"/bin/'  # how .ci/run names the wheel's virtual environment


@dataclass
class Snippet:
    line: int  # 1-based line of the README where the command starts
    command: str
    output: list[str] = field(default_factory=list)
    after: int = 0  # 0-based index of the README line after the command's last line (where the output starts)


def setup_lines(text: str) -> list[str]:
    """The two set-up commands: the lines of the first fenced block, which must follow the title."""
    lines = text.splitlines()
    assert lines[0].startswith("# ") and lines[1] == "" and lines[2] == "```sh", (
        "the README must open with its title and then the ```sh block of the two set-up commands"
    )
    end = lines.index("```", 3)
    return lines[3:end]


def snippets(text: str) -> list[Snippet]:
    """Every ``$ `` command of the README's sh / console blocks, with the output shown after it."""
    found: list[Snippet] = []
    block = None
    current = None
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if block is None:
            if line.startswith("```"):
                block = line[3:].strip()
            i += 1
            continue
        if line.startswith("```"):
            block, current = None, None
            i += 1
            continue
        if block in ("sh", "console", "shell", "bash"):
            if line.startswith("$ "):
                start, command = i + 1, line[2:]
                while command.endswith("\\"):
                    i += 1
                    command = command[:-1] + " " + lines[i].strip()
                current = Snippet(start, command, after=i + 1)
                found.append(current)
            elif current is not None:
                current.output.append(line)
        i += 1
    return found


def test_readme_opens_with_exactly_two_setup_commands():
    setup = setup_lines(README.read_text(encoding="utf-8"))
    assert len(setup) == 2, setup
    install, test = setup
    assert install.startswith("python3 -m venv .venv && .venv/bin/pip install '.[")
    assert ".venv/bin/paigrid sweep" in install and ".venv/bin/paigrid query" in install
    assert test.startswith("python3 -m venv .venv && .venv/bin/pip install -e '.[") and "pytest" in test


def test_every_shell_block_but_the_setup_one_has_prompts():
    """A block of commands without prompts would be skipped silently: only the set-up block may."""
    text = README.read_text(encoding="utf-8")
    blocks = re.findall(r"^```(sh|console|shell|bash)\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL)
    assert blocks, "no shell block in the README"
    for k, (_, body) in enumerate(blocks):
        if k == 0:
            assert "$ " not in body
        else:
            assert body.startswith("$ "), f"a shell block of the README without `$ ` prompts:\n{body}"


def ci_commands(setup: list[str]) -> tuple[str, str, str]:
    """What .ci/run must contain: README line 2 verbatim, line 1's paigrid commands in the wheel's
    environment, and the install of the wheel with line 1's extras."""
    install, test = setup
    paigrid = " && ".join(part for part in install.split(" && ") if part.startswith(".venv/bin/paigrid "))
    extras = re.search(r"pip install '\.(\[[^\]]*\])'", install)
    assert extras, install
    return test, paigrid.replace(".venv/bin/", WHEEL_VENV), f'"$WHEEL{extras.group(1)}"'


def test_ci_runs_the_setup_lines():
    test, paigrid, wheel_install = ci_commands(setup_lines(README.read_text(encoding="utf-8")))
    ci = CI.read_text(encoding="utf-8")
    lines = [line.strip() for line in ci.splitlines()]
    assert test in lines, f".ci/run must run the README's second line as it is:\n{test}"
    assert paigrid in lines, f".ci/run must run the paigrid commands of the README's first line:\n{paigrid}"
    assert wheel_install in ci, f".ci/run must install the wheel with the README's first line's extras: {wheel_install}"


def test_docs_index_shows_the_same_setup_lines():
    setup = setup_lines(README.read_text(encoding="utf-8"))
    index = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    for line in setup:
        assert line in index.splitlines(), f"docs/index.md must show the README's set-up line:\n{line}"


SNIPPETS = snippets(README.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[int, subprocess.CompletedProcess]:
    """Run every README command in order in one folder (later ones use earlier ones' files)."""
    folder = tmp_path_factory.mktemp("readme")
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    results = {}
    for snippet in SNIPPETS:
        results[snippet.line] = subprocess.run(
            ["bash", "-c", snippet.command], cwd=folder, env=env, capture_output=True, text=True, timeout=600
        )
    return results


def test_readme_has_commands():
    assert len(SNIPPETS) >= 2


@pytest.mark.slow
@pytest.mark.parametrize("snippet", SNIPPETS, ids=[f"line{s.line}-{shlex.split(s.command)[1]}" for s in SNIPPETS])
def test_readme_command(snippet: Snippet, runs):
    result = runs[snippet.line]
    assert result.returncode == 0, (
        f"README line {snippet.line}: `{snippet.command}` exited {result.returncode}:\n{result.stderr}"
    )
    shown = [line.rstrip() for line in snippet.output]
    printed = [line.rstrip() for line in result.stdout.splitlines()]
    assert printed == shown, (
        f"README line {snippet.line}: `{snippet.command}` prints something else than the "
        "README shows (- README, + now):\n" + "\n".join(difflib.unified_diff(shown, printed, lineterm=""))
    )


def update_readme() -> None:
    """Run the README's commands as the test does and write what they print into the README."""
    import tempfile

    text = README.read_text(encoding="utf-8")
    lines = text.splitlines()
    found = snippets(text)
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    with tempfile.TemporaryDirectory() as folder:
        printed = [
            subprocess.run(
                ["bash", "-c", s.command], cwd=folder, env=env, capture_output=True, text=True, check=True
            ).stdout.splitlines()
            for s in found
        ]
    for snippet, output in reversed(list(zip(found, printed))):
        lines[snippet.after : snippet.after + len(snippet.output)] = [line.rstrip() for line in output]
    README.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"updated the output of {len(found)} commands in {README}")


if __name__ == "__main__":
    if sys.argv[1:] != ["--update"]:
        sys.exit("usage: python tests/test_readme.py --update")
    update_readme()
