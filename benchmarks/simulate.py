"""Cost of `pinwise simulate` against cachegrind, and its ranking against a measured one.

1. Speed: one pass of the simulator with 1, 4 and 8 placements of 8 threads on the 64-PU x7550
   preset (4 packages, L3 24 MiB each, L2 256 KiB and L1d 32 KiB per core), against
   `valgrind --tool=cachegrind --cache-sim=yes` (one core's D1/LL, and instruction caches) on the
   same program, interleaved, best of --runs (interference only adds time). Two programs: the
   neighbour pattern (half of its accesses are atomic increments on lines two threads share: the
   simulator's coherence path), private work of 64 KiB per thread (L1 misses that hit L2) and of
   16 KiB (L1 hits, the simulator's fast path). Target
   (issue 18): 8 placements in <= 3x cachegrind's time. pinwise simulates the groups of placements
   in worker processes while the program runs (--workers, default 4 where it may use 2 CPUs or more);
   the 8 placements are also timed with --workers 0 (all in Valgrind's process, one CPU, as
   cachegrind) so that both figures are side by side.
2. Ranking: the contending pairs (the blog's program) with the pairs together and apart, simulated
   on this machine's own topology and measured natively (pinwise run, medians of --pair-runs
   interleaved runs), side by side.

    python benchmarks/simulate.py [--runs 3] [--pair-runs 15]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time

from common import PINWISE, console, cpu_model, interleaved, median, native_dir, table

PLACEMENTS = ["compact", "scatter", "close", "spread", "primary", "random"]
OWN = ["--placement", "first8=0-7", "--placement", "packages=0,16,32,48,1,17,33,49"]


def timed(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def simulate_command(count: int, program: list[str], workers: list[str] = ()) -> list[str]:
    policies = PLACEMENTS[:min(count, len(PLACEMENTS))]
    extra = OWN[:2 * max(0, count - len(PLACEMENTS))]
    return [PINWISE, "simulate", "-t", "x7550", "-n", "8", *workers, "--policies", ",".join(policies), *extra, "--",
            *program]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--pair-runs", type=int, default=15)
    args = parser.parse_args()
    patterns = str(native_dir() / "bin" / "patterns")
    programs = {
        "neighbour, 8 threads": [patterns, "neighbour", "-n", "8", "-i", "5000"],
        "private 64 KiB, 8 threads": [patterns, "private", "-n", "8", "-i", "5000", "-z", "64"],
        "private 16 KiB, 8 threads": [patterns, "private", "-n", "8", "-i", "5000", "-z", "16"],
    }
    cpus = len(os.sched_getaffinity(0))
    out = table(f"one pass of pinwise simulate vs cachegrind, best of {args.runs} ({cpu_model()}, {cpus} CPUs: "
                f"{4 if cpus > 1 else 0} simulation workers)",
                ["program", "cachegrind s", "1 placement s", "4 placements s", "8 placements s", "8 / cachegrind",
                 "target", "8, one process s", "one process / cachegrind"])
    worst = 0.0
    for name, program in programs.items():
        commands = {"cachegrind": ["valgrind", "--tool=cachegrind", "--cache-sim=yes",
                                   "--cachegrind-out-file=/dev/null", *program]}
        commands.update({f"sim {k}": simulate_command(k, program) for k in (1, 4, 8)})
        commands["sim 8 alone"] = simulate_command(8, program, ["--workers", "0"])
        console.print(f"[dim]{name}: {args.runs} x (cachegrind, simulate 1/4/8, 8 in one process)[/dim]")
        best = {key: min(timed(command) for _ in range(args.runs)) for key, command in commands.items()}
        ratio = best["sim 8"] / best["cachegrind"]
        worst = max(worst, ratio)
        out.add_row(name, f"{best['cachegrind']:.2f}", f"{best['sim 1']:.2f}", f"{best['sim 4']:.2f}",
                    f"{best['sim 8']:.2f}", f"{ratio:.1f}x", "met" if ratio <= 3 else "NOT met (<= 3x)",
                    f"{best['sim 8 alone']:.2f}", f"{best['sim 8 alone'] / best['cachegrind']:.1f}x")
    console.print(out)

    pairs = str(native_dir() / "bin" / "pairs")
    work = [pairs, "-i", "100000", "-r", "10"]  # as benchmarks/pairs.py runs it
    found = json.loads(subprocess.run(
        [PINWISE, "simulate", "--json", "--policies", "", "--placement", "together=1,0,0,1", "--placement",
         "apart=1,0,1,0", "--", *work], check=True, capture_output=True, text=True).stdout)
    simulated = {p["policy"]: p for p in found["placements"]}
    run = [PINWISE, "run", "--no-verify"]
    samples = interleaved({"together": run + ["--cpus", "1,0,0,1", "--"] + work,
                           "apart": run + ["--cpus", "1,0,1,0", "--"] + work}, args.pair_runs, "Time in seconds =")
    ranking = table(f"contending pairs on this machine: simulated vs measured ({args.pair_runs} interleaved runs)",
                    ["placement", "simulated cycles (busiest PU)", "transfers", "measured median ms"])
    for name in ("together", "apart"):
        ranking.add_row(name, f"{simulated[name]['critical_path']:,}", f"{sum(simulated[name]['transfers'].values()):,}",
                        f"{median(samples[name]) * 1e3:.2f}")
    console.print(ranking)
    simulated_order = sorted(simulated, key=lambda n: simulated[n]["critical_path"])
    measured_order = sorted(samples, key=lambda n: median(samples[n]))
    agree = simulated_order == measured_order
    console.print(f"simulated ranking {simulated_order}, measured {measured_order}: "
                  f"{'they agree' if agree else 'they DISAGREE'}")
    console.print(f"speed: worst 8-placement pass {worst:.1f}x cachegrind (target 3x: {'met' if worst <= 3 else 'NOT met'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
