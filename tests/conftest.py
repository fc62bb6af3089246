"""Shared test fixtures: run the installed `pinwise` command, compile small C programs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PINWISE = str(Path(sys.executable).parent / "pinwise")
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


def need(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        pytest.skip(f"{tool} is not installed (make deps installs it as root)")
    return path


@pytest.fixture(scope="session")
def build_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("programs")


def compile_program(source: str, out_dir: Path, *flags: str, cxx: bool = False) -> Path:
    """Compile tests/programs/<source> once per session into out_dir."""
    src = PROGRAMS / source
    exe = out_dir / src.stem
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
