"""What the benchmark scripts share: locating pinwise's parts, interleaved repeated runs, tables."""

from __future__ import annotations

import random
import re
import statistics
import subprocess
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent
PINWISE = str(Path(sys.executable).parent / "pinwise")
console = Console(highlight=False, width=120)


def native_dir() -> Path:
    from pinwise.pinning.launcher import NATIVE_DIR

    return NATIVE_DIR


def compile_c(name: str, out_dir: Path) -> Path:
    exe = out_dir / Path(name).stem
    subprocess.run(["gcc", "-O2", "-pthread", "-o", str(exe), str(HERE / "programs" / name)], check=True)
    return exe


def measure(command: list[str], pattern: str) -> float:
    """Run once; return the number the program prints after ``pattern``."""
    result = subprocess.run(command, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if result.returncode != 0:
        raise SystemExit(f"benchmark run failed: {' '.join(command)}\n{result.stderr}")
    match = re.search(pattern + r"\s*([0-9.eE+-]+)", result.stdout)
    if not match:
        raise SystemExit(f"no '{pattern}' in the output of {' '.join(command)}:\n{result.stdout}")
    return float(match.group(1))


def interleaved(configs: dict[str, list[str]], runs: int, pattern: str, seed: int = 1) -> dict[str, list[float]]:
    """Each block runs every configuration once in a new random order (never one config back to back)."""
    rng = random.Random(seed)
    samples: dict[str, list[float]] = {name: [] for name in configs}
    names = list(configs)
    with console.status("") as status:
        for block in range(runs):
            rng.shuffle(names)
            for name in names:
                status.update(f"block {block + 1}/{runs}: {name}")
                samples[name].append(measure(configs[name], pattern))
    return samples


def cpu_model() -> str:
    """The host CPU's name: every figure a benchmark prints depends on it."""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def table(title: str, columns: list[str]) -> Table:
    out = Table(title=title, title_justify="left")
    for i, column in enumerate(columns):
        out.add_column(column, justify="left" if i == 0 else "right")
    return out


def median(values: list[float]) -> float:
    return statistics.median(values)
