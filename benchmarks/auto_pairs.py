"""pinwise auto on the contending-pairs workload vs pinning by hand, from one run.

`pinwise auto` traces `patterns pairs -t 4`, analyzes it, benchmarks its candidates against the OS
placement and names a winner; then the same program pinned by hand inside itself (-H: each pair on
one CPU, as the blog does with pthread_setaffinity_np) is measured against the program alone,
interleaved. Target (issue: auto): auto's speedup >= 0.95 x the hand-pinned speedup, and auto's
winner keeps each pair on one CPU.

    python benchmarks/auto_pairs.py [--runs 25]
"""

from __future__ import annotations

import argparse
import statistics

from common import PINWISE, console, interleaved

from pinwise.auto import run_auto
from pinwise.topology import live_topology
from pinwise.workloads import TIME_REGEX, workload_command


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=25, help="runs of the hand-pinned comparison (default 25)")
    args = parser.parse_args()
    command = workload_command("pairs", threads=4, iterations=3000, shared_ratio=1.0)
    result = run_auto(command, live_topology(), time_regex=TIME_REGEX, progress=False,
                      say=lambda text: console.print(text))
    for line in result.lines:
        console.print(line)
    if result.winner is None:
        console.print("auto found no significant winner: target NOT met")
        return 0
    cpus = [int(c) for c in result.winner.placement.split(",")]
    together = cpus[0] == cpus[1] and cpus[2] == cpus[3] and cpus[0] != cpus[2]
    reported = result.winner.median.speedup
    # The winner, the hand pinning and the program alone, side by side in one interleaved run.
    pinned = [PINWISE, "run", "--no-verify", "--cpus", result.winner.placement, "--", *command]
    samples = interleaved({"alone": command, "hand": command + ["-H"], "auto": pinned}, args.runs, "Time in seconds =")
    alone = statistics.median(samples["alone"])
    hand_speedup = alone / statistics.median(samples["hand"])
    auto_speedup = alone / statistics.median(samples["auto"])
    ratio = auto_speedup / hand_speedup
    console.print(f"auto's winner {result.winner.name} (CPUs {result.winner.placement}) keeps each pair on one CPU: "
                  f"{'yes' if together else 'NO'}; auto reported {reported:.2f}x over the OS")
    console.print(f"side by side, {args.runs} interleaved runs: auto's placement {auto_speedup:.2f}x vs hand-pinned "
                  f"{hand_speedup:.2f}x over the program alone: ratio {ratio:.3f} "
                  f"(target >= 0.95: {'met' if ratio >= 0.95 else 'NOT met'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
