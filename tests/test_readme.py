"""The documentation's examples, run as a user pastes them: every `$ ` command of README.md and of
the pages under docs/, in the order of PAGES (README.md first, then the pages, so that a page finds
the files an earlier one made: docs/analyze.md reads the trace docs/trace.md wrote), in one folder,
with the environment's bin first on PATH (as after `source .venv/bin/activate`).

Each must exit 0 without a traceback, and its output must have the shape the page shows: the
first line the page prints for it appears in the real output once numbers, paths and table
borders are set aside. Timings and verdicts differ from run to run; the shape does not. The
pages' outputs were captured on one host, and the host's CPU changes from one day to the next:
where a line names the machine (a report's ``machine:`` header), the page's
facts and the live output's are each replaced by a token, and the live output must name the
facts read from this machine itself (CPU model, host name, kernel, shape).

The pages themselves: README.md stays short (a newcomer reads it top to bottom), every page under
docs/ is linked from it or from docs/README.md, every relative link leads to a file that exists
(and, into a page, to one of its headings), and every benchmark figure names its machine and day.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"

#: Every page, in the order its examples run: a page may use the files any page before it made
#: (README.md first, then the commands as the pipeline meets them; docs/devices.md reads
#: docs/map.md's pairs8.json and docs/mpi.md's ring.json). A new page goes here too.
PAGES = ["README.md", "docs/README.md", "docs/install.md", "docs/topo.md", "docs/run.md", "docs/trace.md",
         "docs/analyze.md", "docs/map.md", "docs/bench.md", "docs/report.md", "docs/auto.md",
         "docs/simulate.md", "docs/mpi.md", "docs/devices.md", "docs/pin.md", "docs/python.md", "docs/files.md",
         "docs/benchmarks.md", "docs/development.md"]


def examples(text: str) -> list[tuple[str, list[str]]]:
    """(command, the output lines the page shows for it), in the page's order."""
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
    return {"model": facts.cpu_model, "host": facts.host, "kernel": facts.kernel,
            "shape": load_topology(None).shape}


def host_neutral(line: str, facts: dict[str, str] | None = None) -> str:
    """``line`` with the machine facts of its header replaced by tokens: those it names (the
    page's), or with ``facts`` only where they are exactly this machine's (the live output's)."""
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


#: (page, command, the output lines the page shows for it), every page's in the order of PAGES.
EXAMPLES = [(page, command, output) for page in PAGES for command, output in examples((ROOT / page).read_text())]


def test_every_page_has_its_place_in_the_order():
    assert len(set(PAGES)) == len(PAGES)
    assert {ROOT / page for page in PAGES} == {README, *DOCS.glob("*.md")}


def test_the_pages_have_examples_of_every_command():
    commands = {command.split("pinwise ", 1)[1].split()[0] for _, command, _ in EXAMPLES if "pinwise " in command}
    assert {"topo", "run", "trace", "analyze", "map", "bench", "report", "auto", "pin", "workload", "simulate",
            "mpi"} <= commands


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("readme")


@pytest.mark.skipif(sorted(os.sched_getaffinity(0))[:2] != [0, 1], reason="the examples pin to CPUs 0 and 1")
@pytest.mark.parametrize("number", range(len(EXAMPLES)),
                         ids=[f"{page} {command[:60]}" for page, command, _ in EXAMPLES])
def test_example_runs_as_printed(folder, number):
    page, command, expected = EXAMPLES[number]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "COLUMNS": "200", "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}  # CI is root
    result = subprocess.run(["bash", "-c", command], cwd=folder, env=env, capture_output=True, text=True,
                            stdin=subprocess.DEVNULL, timeout=900)
    printed = result.stdout + result.stderr
    assert result.returncode == 0, f"{page}: $ {command}\n{printed}"
    assert "Traceback" not in printed, printed
    if expected:
        first = shape(expected[0])
        facts = this_machine() if MACHINE_LINE.match(expected[0]) else None
        assert first in {shape(line, facts) for line in printed.splitlines()}, \
            f"{page}: $ {command}\nthe page shows first: {expected[0]!r}\nprinted:\n{printed}"


def test_a_machine_header_matches_only_this_machines_facts():
    """The pages' header, captured on another host, has the shape of this machine's header, and
    a header that names another CPU than this one does not."""
    facts = this_machine()
    shown = next(lines[0] for _, _, lines in EXAMPLES if lines and MACHINE_LINE.match(lines[0]))
    live = (f"machine: {facts['model']}, host {facts['host']}, {facts['kernel']}, 2 CPUs, allowed 0,1, "
            f"{facts['shape']}, pinwise 0.1.0")
    assert shape(shown) == shape(live, facts)
    wrong = live.replace(facts["model"], facts["model"] + " (another CPU)", 1)
    assert shape(shown) != shape(wrong, facts)


def test_the_python_apis_first_lines_run_as_printed():
    """The Python API page's block starts with the two lines a user pastes first: they run as
    printed and give this machine (pinwise.topology() once raised TypeError)."""
    api = (DOCS / "python.md").read_text()
    block = api.split("```python\n", 1)[1].split("```", 1)[0].splitlines()
    first = [line for line in block[:4] if line.startswith(("import pinwise", "machine = ", "print(machine)"))]
    assert [line.split()[0] for line in first] == ["import", "machine", "print(machine)"], block[:4]
    result = subprocess.run([sys.executable, "-c", "\n".join(first)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    from pinwise.topology import load_topology

    assert result.stdout.splitlines()[0] == load_topology(None).summary()


LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def prose(text: str) -> str:
    """``text`` without its code (fenced and indented blocks, code spans), where brackets are not links."""
    kept, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and not line.startswith("    "):
            kept.append(re.sub(r"`[^`]*`", "", line))
    return "\n".join(kept)


def links(page: Path) -> list[str]:
    return LINK.findall(prose(page.read_text()))


def anchors(page: Path) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces to
    hyphens, a repeated one numbered."""
    seen: dict[str, int] = {}
    found, fenced = set(), False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,6} ", line):
            slug = re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
            found.add(f"{slug}-{seen[slug]}" if slug in seen else slug)
            seen[slug] = seen.get(slug, 0) + 1
    return found


def test_the_readme_is_short():
    assert len(README.read_text().splitlines()) < 200


def test_every_docs_page_is_linked_from_the_readme_or_the_index():
    linked = {(page.parent / target.partition("#")[0]).resolve()
              for page in (README, DOCS / "README.md") for target in links(page)}
    assert set(DOCS.glob("*.md")) - linked == set()


@pytest.mark.parametrize("page", PAGES)
def test_every_relative_link_leads_to_a_file_and_heading(page):
    path = ROOT / page
    for target in links(path):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        destination = (path.parent / file).resolve() if file else path
        assert destination.exists(), f"{page}: {target} leads nowhere"
        if anchor and destination.suffix == ".md":
            assert anchor in anchors(destination), f"{page}: {target}: no such heading in {destination.name}"


def test_every_benchmark_figure_names_its_machine_and_day():
    """Benchmark figures are one host's and go stale when the host changes: each script's entry
    says the CPU it was measured on and the day."""
    text = (DOCS / "benchmarks.md").read_text()
    entries = [" ".join(entry.split()) for entry in re.split(r"^- ", text, flags=re.M)[1:]]
    assert entries
    for entry in entries:
        assert re.search(r"[Mm]easured on an? [^,:]*(Intel|AMD|Arm|Ampere|IBM)[^,:]*, \d{4}-\d{2}-\d{2}", entry), \
            entry[:100]
