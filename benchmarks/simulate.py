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
   cachegrind) so that both figures are side by side. Beside them a program of a real program's
   size (issue 39: seconds natively, 8 threads): an ADI solver's steps, tests/programs/adi_halo.c
   on a 1024 x 1024 grid; and on it, 4 placements that share one grouping of L1s (a thread per
   core), simulated with the groups split so that every worker helps, and without (one worker
   did everything: 9-12x cachegrind).
2. Ranking: the contending pairs (the blog's program) with the pairs together and apart, simulated
   on this machine's own topology and measured natively (pinwise run, medians of --pair-runs
   interleaved runs), side by side.

    python benchmarks/simulate.py [--runs 3] [--pair-runs 15]
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import subprocess
import time

import tempfile
from pathlib import Path

from common import HERE, PINWISE, console, cpu_model, interleaved, median, native_dir, table

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
    tmp = tempfile.mkdtemp(prefix="pinwise-bench-")
    atexit.register(shutil.rmtree, tmp, True)
    adi = str(Path(tmp, "adi_halo"))
    subprocess.run(["gcc", "-O2", "-pthread", "-o", adi, str(HERE.parent / "tests" / "programs" / "adi_halo.c")],
                   check=True)
    real = [adi, "8", "1024", "40"]
    programs = {
        "neighbour, 8 threads": [patterns, "neighbour", "-n", "8", "-i", "5000"],
        "private 64 KiB, 8 threads": [patterns, "private", "-n", "8", "-i", "5000", "-z", "64"],
        "private 16 KiB, 8 threads": [patterns, "private", "-n", "8", "-i", "5000", "-z", "16"],
        "ADI solver, 8 threads (real size)": real,
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
    one_grouping(real, args.runs)

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


def one_grouping(program: list[str], runs: int) -> None:
    """4 placements with a thread per core on x7550 share one grouping of L1s: simulated with the
    groups split over the workers (the default) and as one group (split 0), against cachegrind."""
    from pinwise.plan import Plan
    from pinwise.simulate import simulate
    from pinwise.topology import load_topology

    topology = load_topology("x7550")
    lists = ["0,2,4,6,8,10,12,14", "16,18,20,22,24,26,28,30", "0,16,32,48,2,18,34,50", "32,34,36,38,40,42,44,46"]
    placements = [(f"cores {k}", Plan(slots=tuple((int(c),) for c in cpus.split(",")))) for k, cpus in enumerate(lists)]

    def simulated(split):
        start = time.perf_counter()
        result = simulate(program, topology, placements, progress=False, stdout=subprocess.DEVNULL, split=split)
        return time.perf_counter() - start, result.cache_groups

    cachegrind = min(timed(["valgrind", "--tool=cachegrind", "--cache-sim=yes", "--cachegrind-out-file=/dev/null",
                            *program]) for _ in range(runs))
    split = [simulated(None) for _ in range(runs)]
    whole = [simulated(0) for _ in range(runs)]
    out = table(f"4 placements sharing one grouping of L1s (a thread per core on x7550), best of {runs} "
                f"({cpu_model()})", ["program", "cachegrind s", "split s", "groups", "split / cachegrind",
                                    "one group s", "one group / cachegrind"])
    best_split, best_whole = min(t for t, _ in split), min(t for t, _ in whole)
    out.add_row(" ".join(Path(program[0]).name.split() + program[1:]), f"{cachegrind:.2f}", f"{best_split:.2f}",
                str(split[0][1]), f"{best_split / cachegrind:.1f}x", f"{best_whole:.2f}",
                f"{best_whole / cachegrind:.1f}x")
    console.print(out)


if __name__ == "__main__":
    raise SystemExit(main())
