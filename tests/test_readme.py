"""The README's examples, run as a user pastes them: every `$ ` command in it, in order, in one
folder, with the environment's bin first on PATH (as after `source .venv/bin/activate`).

Each must exit 0 without a traceback, and its output must have the shape the README shows: the
first line the README prints for it appears in the real output once numbers, paths and table
borders are set aside. Timings and verdicts differ from run to run; the shape does not. The
README's outputs were captured on one host, and the host changes (an Intel Xeon one day, an AMD
EPYC the next): where a line names the machine (a report's ``machine:`` header), the README's
facts and the live output's are each replaced by a token, and the live output must name the
facts read from this machine itself (CPU model, host name, kernel, shape).
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


#: A report's machine header: CPU model, host, kernel, CPUs, allowed CPUs, shape (pinwise.report.summary).
MACHINE_LINE = re.compile(r"^machine: (?P<model>.+?), host (?P<host>\S+), (?P<kernel>\S+ \S+), \d+ CPUs, "
                          r"allowed \S+, (?P<shape>.+?), pinwise ")


def this_machine() -> dict[str, str]:
    """The facts a machine header names, read from this machine as pinwise records them."""
    from pinwise.bench.runner import host_facts
    from pinwise.topology import load_topology

    facts = host_facts()
    return {"model": facts["cpu_model"], "host": facts["host"], "kernel": facts["kernel"],
            "shape": load_topology(None).shape}


def host_neutral(line: str, facts: dict[str, str] | None = None) -> str:
    """``line`` with the machine facts of its header replaced by tokens: those it names (the
    README's), or with ``facts`` only where they are exactly this machine's (the live output's)."""
    found = MACHINE_LINE.match(line)
    if not found:
        return line
    for key in ("shape", "kernel", "host", "model"):  # right to left, so the spans stay valid
        if facts is None or found.group(key) == facts[key]:
            line = line[:found.start(key)] + f"<{key}>" + line[found.end(key):]
    return line


def shape(line: str, facts: dict[str, str] | None = None) -> str:
    line = host_neutral(line, facts)
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
        facts = this_machine() if MACHINE_LINE.match(expected[0]) else None
        assert first in {shape(line, facts) for line in printed.splitlines()}, \
            f"$ {command}\nthe README shows first: {expected[0]!r}\nprinted:\n{printed}"


def test_a_machine_header_matches_only_this_machines_facts():
    """The README's header, captured on another host, has the shape of this machine's header, and
    a header that names another CPU than this one does not."""
    facts = this_machine()
    readme = next(lines[0] for _, lines in README_EXAMPLES if lines and MACHINE_LINE.match(lines[0]))
    live = (f"machine: {facts['model']}, host {facts['host']}, {facts['kernel']}, 2 CPUs, allowed 0,1, "
            f"{facts['shape']}, pinwise 0.1.0")
    assert shape(readme) == shape(live, facts)
    wrong = live.replace(facts["model"], facts["model"] + " (another CPU)", 1)
    assert shape(readme) != shape(wrong, facts)


def test_the_python_apis_first_lines_run_as_printed():
    """The README's Python block starts with the two lines a user pastes first: they run as
    printed and give this machine (pinwise.topology() once raised TypeError)."""
    api = README.read_text().split("## Python API", 1)[1]
    block = api.split("```python\n", 1)[1].split("```", 1)[0].splitlines()
    first = [line for line in block[:4] if line.startswith(("import pinwise", "machine = ", "print(machine)"))]
    assert [line.split()[0] for line in first] == ["import", "machine", "print(machine)"], block[:4]
    result = subprocess.run([sys.executable, "-c", "\n".join(first)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    from pinwise.topology import load_topology

    assert result.stdout.splitlines()[0] == load_topology(None).summary()
