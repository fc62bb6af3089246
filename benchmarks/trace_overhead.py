"""Cost of tracing: native time, Valgrind's own floor (--tool=none) and pinwise trace, side by side.

Each program runs natively, under `valgrind --tool=none --fair-sched=yes` (what any Valgrind tool
costs at least), under pinwise's Valgrind tool alone (same options as `pinwise trace` uses) and
under the whole `pinwise trace` command (Python start-up, setup, writing the matrix: ~0.1-0.2 s
more), interleaved, best of --runs: on a shared VM, interference only ever adds time, so the
fastest run is the least disturbed measure of each (the advice of Python's timeit). Targets (issue
13): the tool <= 1.3 x and the whole command <= 1.4 x the none floor on the tests' programs, and
the hard case <= 1.6 x: every access a new line of an 8 MiB working set per thread, touched again
in every window, past the CPU's caches (the tool watches that loop's pages rather than its lines).

    python benchmarks/trace_overhead.py [--runs 5]
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
import time
from pathlib import Path

from common import PINWISE, console, native_dir, table

from pinwise.trace import tool_environment


def timed(command: list[str], env: dict | None = None) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    patterns = str(native_dir() / "bin" / "patterns")
    programs = {  # the tests' patterns, long enough (2-4 s under Valgrind) that start-up does not dominate
        "pairs, 4 threads": [patterns, "pairs", "-n", "4", "-i", "60000"],
        "neighbour, 8 threads": [patterns, "neighbour", "-n", "8", "-i", "30000"],
        "master, 6 threads": [patterns, "master", "-n", "6", "-i", "40000"],
        "all-to-all, 4 threads": [patterns, "all-to-all", "-n", "4", "-i", "60000"],
        "private, 4 threads": [patterns, "private", "-n", "4", "-i", "60000"],
        # the hard case: every access to a line of an 8 MiB working set, a new line each time
        "private 8 MiB each, 4 threads": [patterns, "private", "-n", "4", "-i", "30000", "-z", "8192"],
    }
    hard_case = "private 8 MiB each, 4 threads"
    out = table(f"tracing cost, best of {args.runs} runs",
                ["program", "native s", "valgrind none s", "pinwise tool s", "pinwise trace s", "tool x floor",
                 "command x floor"])
    tool_ratios, command_ratios = [], []
    with tempfile.TemporaryDirectory() as tmp:
        env = tool_environment(Path(tmp))
        for name, command in programs.items():
            console.print(f"[dim]{name}: {args.runs} x (native, none, tool, pinwise trace)[/dim]")
            samples: dict[str, list[float]] = {"native": [], "none": [], "tool": [], "command": []}
            for _ in range(args.runs):
                samples["native"].append(timed(command))
                samples["none"].append(timed(["valgrind", "-q", "--tool=none", "--fair-sched=yes", *command]))
                samples["tool"].append(timed(["valgrind", "-q", "--tool=pinwise", "--fair-sched=yes",
                                              f"--pw-out={tmp}/t.txt", *command], env))
                samples["command"].append(timed([PINWISE, "trace", "-o", f"{tmp}/c.json", "--", *command]))
            native, none, tool, whole = (min(samples[k]) for k in ("native", "none", "tool", "command"))
            if name != hard_case:
                tool_ratios.append(tool / none)
                command_ratios.append(whole / none)
            else:
                hard_tool = tool / none
            out.add_row(name, f"{native:.3f}", f"{none:.3f}", f"{tool:.3f}", f"{whole:.3f}", f"{tool / none:.2f}",
                        f"{whole / none:.2f}")
    console.print(out)
    def verdict(value: float, target: float) -> str:
        return f"target <= {target}: {'met' if value <= target else 'NOT met'}"

    console.print(f"On the tests' programs pinwise's tool costs {min(tool_ratios):.2f}-{max(tool_ratios):.2f} x "
                  f"Valgrind's none floor ({verdict(max(tool_ratios), 1.3)}) and the whole pinwise trace command "
                  f"{min(command_ratios):.2f}-{max(command_ratios):.2f} x ({verdict(max(command_ratios), 1.4)}); "
                  f"the hard case (last row) {hard_tool:.2f} x ({verdict(hard_tool, 1.6)}).")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
