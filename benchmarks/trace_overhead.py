"""Cost of tracing: native time, Valgrind's own floor (--tool=none) and pinwise trace, side by side.

Each program runs natively, under `valgrind --tool=none --fair-sched=yes` (what any Valgrind tool
costs at least) and under `pinwise trace` (the whole command: setup, tracing, writing the matrix),
interleaved, median of --runs. Target (issue: tracer): pinwise trace <= 1.5 x the none floor.

    python benchmarks/trace_overhead.py [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time

from common import PINWISE, console, native_dir, table


def timed(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    patterns = str(native_dir() / "bin" / "patterns")
    programs = {
        "pairs, 4 threads": [patterns, "pairs", "-t", "4", "-i", "20000"],
        "all-to-all, 4 threads": [patterns, "all-to-all", "-t", "4", "-i", "20000"],
        "private, 4 threads": [patterns, "private", "-t", "4", "-i", "20000"],
        "neighbour, 8 threads": [patterns, "neighbour", "-t", "8", "-i", "10000"],
    }
    out = table(f"tracing cost, median of {args.runs} runs", ["program", "native s", "valgrind none s",
                                                                "pinwise trace s", "x native", "x none floor"])
    ratios = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, command in programs.items():
            samples: dict[str, list[float]] = {"native": [], "none": [], "pinwise": []}
            for _ in range(args.runs):
                samples["native"].append(timed(command))
                samples["none"].append(timed(["valgrind", "-q", "--tool=none", "--fair-sched=yes", *command]))
                samples["pinwise"].append(timed([PINWISE, "trace", "-o", f"{tmp}/c.json", "--", *command]))
            native, none, ours = (statistics.median(samples[k]) for k in ("native", "none", "pinwise"))
            ratios.append(ours / none)
            out.add_row(name, f"{native:.3f}", f"{none:.3f}", f"{ours:.3f}", f"{ours / native:.0f}", f"{ours / none:.2f}")
    console.print(out)
    worst = max(ratios)
    console.print(f"pinwise trace costs {min(ratios):.2f}-{worst:.2f} x Valgrind's none floor "
                  f"(target <= 1.5: {'met' if worst <= 1.5 else 'NOT met'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
