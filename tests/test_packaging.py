"""Packaging (issue 35): one version, a Python floor that is true, extras for what a plain
`pinwise run` never needs."""

from __future__ import annotations

import importlib.metadata
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_the_version_is_written_once():
    import pinwise

    assert "version" not in PROJECT and "version" in PROJECT["dynamic"]
    assert importlib.metadata.version("pinwise") == pinwise.__version__


def _floor() -> tuple[int, int]:
    found = re.fullmatch(r">=\s*3\.(\d+)", PROJECT["requires-python"])
    assert found, PROJECT["requires-python"]
    return 3, int(found.group(1))


def _python(minor: int) -> str | None:
    """An interpreter of Python 3.minor that runs (pyenv's versions, or one on PATH; not a shim)."""
    found = [str(p) for p in sorted(Path("/root/.pyenv/versions").glob(f"3.{minor}.*/bin/python3"))]
    found.append(shutil.which(f"python3.{minor}") or "")
    for path in found:
        if path and "/shims/" not in path and subprocess.run([path, "-c", "pass"], capture_output=True).returncode == 0:
            return path
    return None


def test_the_python_floor_is_the_oldest_python_that_imports_pinwise():
    """The floor's interpreter imports the topology model (standard library only: it needs no
    third-party package to be tried), the one before it cannot (enum.StrEnum is 3.11's)."""
    major, minor = _floor()
    assert sys.version_info[:2] >= (major, minor)
    code = f"import sys; sys.path.insert(0, {str(ROOT / 'src')!r}); import pinwise.topology.model"
    at_floor = _python(minor) or (sys.executable if sys.version_info[:2] == (major, minor) else None)
    if at_floor is None:
        pytest.skip(f"no Python 3.{minor} here")
    assert subprocess.run([at_floor, "-c", code], capture_output=True).returncode == 0
    below = _python(minor - 1)
    if below is None:
        pytest.skip(f"no Python 3.{minor - 1} here to show that the floor cannot be lower")
    result = subprocess.run([below, "-c", code], capture_output=True, text=True)
    assert result.returncode != 0 and "StrEnum" in result.stderr


def test_a_plain_install_needs_no_plotting_or_graph_library():
    required = {re.split(r"[<>=\[ ]", d)[0] for d in PROJECT["dependencies"]}
    assert not required & {"matplotlib", "networkx", "pymetis"}
    extras = PROJECT["optional-dependencies"]
    assert any("matplotlib" in d for d in extras["plots"]) and any("pymetis" in d for d in extras["graphs"])


def test_a_missing_extra_is_one_clear_error(monkeypatch):
    from pinwise.errors import PinwiseError
    from pinwise.optional import require

    monkeypatch.setitem(sys.modules, "pymetis", None)  # as if not installed
    with pytest.raises(PinwiseError, match=r"pip install 'pinwise\[graphs\]'"):
        require("pymetis")
