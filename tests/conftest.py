"""Shared test fixtures: run the installed `pinwise` command, compile small C programs, and a
fake program whose bench timings have a known answer."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import settings

from pinwise.bench.db import Run
from pinwise.comm import CommMatrix, TraceInfo

# Property tests: in CI the same examples every run (derandomized), so a latent bug cannot turn
# one landing red and the next green; on a developer's machine they keep drawing new ones, which
# is how they find bugs (the instruction-cache IndexError of test_topology was found that way).
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

PINWISE = str(Path(sys.executable).parent / "pinwise")

#: The tiers (docs/development.md, "Tests"): a module here runs Valgrind, MPI, Slurm, the sampler, real benches
#: or whole pipelines (the full suite, `make test`); every other test is of the unit tier
#: (`pytest -m unit`, under 2 minutes), marked so by pytest_collection_modifyitems below.
SYSTEM_MODULES = {"test_auto", "test_bench", "test_database", "test_faults", "test_memory", "test_mpi", "test_mpich",
                  "test_pinning", "test_readback", "test_readme", "test_sample", "test_simulate", "test_slurm",
                  "test_trace", "test_workloads", "test_fuzz", "test_cli", "test_report", "test_adapt"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        tier = "system" if item.module.__name__.rsplit(".", 1)[-1] in SYSTEM_MODULES else "unit"
        item.add_marker(getattr(pytest.mark, tier))
PROGRAMS = Path(__file__).parent / "programs"


def run_pinwise(*args: str, check: bool = False, timeout: float = 120, **kwargs) -> subprocess.CompletedProcess:
    """Run the installed command-line tool as a user would."""
    result = subprocess.run([PINWISE, *args], capture_output=True, text=True, timeout=timeout, **kwargs)
    if check and result.returncode != 0:
        raise AssertionError(f"pinwise {' '.join(args)} failed ({result.returncode}):\n{result.stderr}")
    return result


def assert_clean_failure(result: subprocess.CompletedProcess, *words: str) -> None:
    """Bad input: non-zero exit, one line on stderr naming the problem, never a traceback."""
    assert result.returncode != 0, result
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("pinwise: error:"), lines[0]
    for word in words:
        assert word.lower() in lines[0].lower(), (word, lines[0])


def eventually(condition, timeout: float = 20, interval: float = 0.05) -> bool:
    """Whether ``condition()`` becomes true within ``timeout`` seconds, polled: what the kernel
    does after a process ends (parent-death signals, reaping) takes longer on a loaded machine, so
    a test waits for it instead of sleeping a fixed time."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        if condition():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(interval)


def need(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        pytest.skip(f"{tool} is not installed (make deps installs it as root)")
    return path


@pytest.fixture(scope="session")
def build_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("programs")


def compile_program(source: str, out_dir: Path, *flags: str, cxx: bool = False, name: str | None = None) -> Path:
    """Compile tests/programs/<source> once per session into out_dir (as ``name``, by default the
    source's stem)."""
    src = PROGRAMS / source
    exe = out_dir / (name or src.stem)
    if not exe.exists():
        compiler = need("g++" if cxx else "gcc")
        subprocess.run([compiler, "-O2", "-Wall", "-o", str(exe), str(src), "-pthread", *flags],
                       check=True, capture_output=True, text=True)
    return exe


@pytest.fixture(autouse=True)
def _no_terminal_colours(monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "120")
    os.environ.pop("PINWISE_PLAN", None)


class FakeProgram:
    """A bench runner whose run times are drawn around a median per placement (lognormal noise
    ``sigma``). Each placement draws from its own seeded generator, so its sample does not depend
    on the shuffled order of the runs. ``busy`` is the share of the CPUs other processes take."""

    def __init__(self, medians: dict[str, float], sigma: float, busy: float = 0.0, seed: int = 0):
        self.medians, self.sigma, self.busy, self.seed = medians, sigma, busy, seed
        self.generators: dict[str, np.random.Generator] = {}
        self.calls: list[str] = []

    def __call__(self, argv, plan, pattern, timeout, counters) -> Run:
        placement = "os" if plan is None else plan.cpulist()
        rng = self.generators.setdefault(placement, np.random.default_rng(zlib.crc32(placement.encode()) + self.seed))
        wall = self.medians.get(placement, self.medians["other"]) * float(np.exp(rng.normal(0, self.sigma)))
        self.calls.append(placement)
        return Run(started="2026-01-01T00:00:00", wall=wall, program_time=None, user=wall, sys=0.0, max_rss_kb=1000,
                   migrations=0, context_switches=2, energy_j=None, exit_status=0, failure=None, misplaced=0,
                   placement=placement, load1=2 + 2 * self.busy, others_cpu=self.busy * 2 * wall, steal_cpu=0.0,
                   all_cpu=2 * wall)


def in_rounds(size: int, count: int, overlap: bool = False) -> CommMatrix:
    """Main creates ``count`` rounds of ``size`` workers, joining each round before the next;
    worker j of each round talks to worker j ^ 1 (pairs). With ``overlap`` main joins only a
    round's first worker before creating the next round (the rest at the end): no rounds."""
    threads = 1 + size * count
    matrix = np.zeros((threads, threads))
    spawns, late = [], []
    for r in range(count):
        first = 1 + r * size
        spawns += [("create", first + j) for j in range(size)]
        joins = [("join", first + j) for j in range(size)]
        if overlap:
            joins, rest = joins[:1], joins[1:]
            late += rest
        spawns += joins
        for j in range(size):
            if j < (j ^ 1) < size:
                matrix[first + j, first + (j ^ 1)] = 1000 + r
    matrix = matrix + matrix.T
    instructions = np.array([50.0] + [1e4] * (threads - 1))
    return CommMatrix(matrix, np.ones(threads), instructions,
                      TraceInfo(creators=(None,) + (0,) * (threads - 1), spawns=tuple(spawns + late)))
