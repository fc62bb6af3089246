"""The README's examples, run as a user pastes them: every `$ ` command in it, in order, in one
folder, with the environment's bin first on PATH (as after `source .venv/bin/activate`).

Each must exit 0 without a traceback, and its output must have the shape the README shows: the
first line the README prints for it appears in the real output once numbers, paths and table
borders are set aside. Timings and verdicts differ from run to run; the shape does not.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def examples(text: str) -> list[tuple[str, list[str]]]:
    """(command, the output lines the README shows for it), in the README's order."""
    found: list[tuple[str, list[str]]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.startswith("    $ "):
            i += 1
            continue
        command = line[6:]
        while command.endswith("\\"):
            i += 1
            command = command[:-1] + " " + lines[i].strip()
        i += 1
        output = []
        while i < len(lines) and (lines[i].startswith("    ") or not lines[i].strip()) \
                and not lines[i].startswith("    $ "):
            if lines[i].strip():
                output.append(lines[i][4:])
            i += 1
        found.append((command, output))
    return found


BORDERS = re.compile(r"[┃│┏┓┗┛┡┩└┘━─╇┳┻╋┠┨┯┷]")
NUMBER = re.compile(r"[-+]?\d[\d,.]*(e[-+]?\d+)?(x|%|s)?")
PATH = re.compile(r"(/[\w.+-]+)+/?")


def shape(line: str) -> str:
    line = PATH.sub("PATH", BORDERS.sub(" ", line))
    line = NUMBER.sub("#", line)
    return " ".join(line.replace("…", "").split())


README_EXAMPLES = examples(README.read_text())


def test_the_readme_has_examples_of_every_command():
    commands = {command.split("pinwise ", 1)[1].split()[0] for command, _ in README_EXAMPLES if "pinwise " in command}
    assert {"topo", "run", "trace", "analyze", "map", "bench", "report", "auto", "pin", "workload", "simulate",
            "mpi"} <= commands


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("readme")


@pytest.mark.skipif(sorted(os.sched_getaffinity(0))[:2] != [0, 1], reason="the examples pin to CPUs 0 and 1")
@pytest.mark.parametrize("number", range(len(README_EXAMPLES)),
                         ids=[command[:60] for command, _ in README_EXAMPLES])
def test_readme_example_runs_as_printed(folder, number):
    command, expected = README_EXAMPLES[number]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "COLUMNS": "200", "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}  # CI is root
    result = subprocess.run(["bash", "-c", command], cwd=folder, env=env, capture_output=True, text=True,
                            stdin=subprocess.DEVNULL, timeout=900)
    printed = result.stdout + result.stderr
    assert result.returncode == 0, f"$ {command}\n{printed}"
    assert "Traceback" not in printed, printed
    if expected:
        first = shape(expected[0])
        assert first in {shape(line) for line in printed.splitlines()}, \
            f"$ {command}\nthe README shows first: {expected[0]!r}\nprinted:\n{printed}"
