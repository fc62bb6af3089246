"""Placing threads while the program runs (issue 37): `pinwise run --adapt` against static placements.

1. A program of two phases whose pairs swap partners half way (tests/programs/phase_pairs.c):
   --runs interleaved runs each (order drawn per round) of the OS placement, the best static plan
   for phase 1 (pairs {0,1} {2,3} together), the static plan from a sampled trace of the whole run
   (its locality mapping), hand pinning that pins again at the phase change inside the program
   (the oracle), and --adapt. Targets: --adapt significantly faster than every static placement
   (one-sided Mann-Whitney, p < 0.05), and at least 0.9 of the oracle's speedup over the OS (by
   medians).
2. Programs with nothing to gain (private work for 0.35 s and for 3.5 s, all-to-all): --adapt
   against the OS, median ratio at most 1.02, threads moved at most once.
3. The blog's program (a creator and two contending pairs, benchmarks/programs/creator_pairs.c):
   --adapt reaches at least 0.9 of hand pinning's speedup over the OS, with no trace or mapping.
4. The same program making its four workers anew in 8 rounds (-r 8, each round as long as the
   one-round program: a thread per task), where each round's threads must start where the last
   move put the round before's (pinwise.adapt.newcomers): --adapt's share of hand pinning's
   speedup, printed for what it is (the issue names no target for it; the rounds after the first
   ran on one CPU of two before threads made after a move got their slot at creation). Rounds
   shorter than a judgment (about 0.05 s) end before any placement is made for them.

The time is what each program prints; --adapt's includes the sampler, which starts the program.

    python benchmarks/adapt.py [--runs 15] [--rounds 150000000] [--increments 30000000] [--interval 200ms]
                               [--parts 1,2,3,4]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import subprocess
import tempfile
from pathlib import Path

from common import PINWISE, compile_c, console, native_dir, table
from scipy.stats import mannwhitneyu

from pinwise.adapt import PLACED

PROGRAMS = Path(__file__).resolve().parent.parent / "tests" / "programs"


def program_time(command: list[str]) -> float:
    """The time the program prints; a run that fails ends the benchmark with its command and why,
    in one message (the rounds printed so far stay on the screen)."""
    result = subprocess.run(command, capture_output=True, text=True)
    found = re.search(r"Time in seconds = ([0-9.]+)", result.stdout)
    if result.returncode != 0 or found is None:
        why = (result.stderr.strip().splitlines() or ["no 'Time in seconds = T' in its output"])[-1]
        raise SystemExit(f"a run failed (exit status {result.returncode}): {' '.join(command)}: {why}")
    return float(found.group(1))


def interleaved(placements: dict[str, list[str]], runs: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {name: [] for name in placements}
    for round_ in range(runs):
        order = list(placements)
        random.shuffle(order)
        for name in order:
            times[name].append(program_time(placements[name]))
        # each round's times as they come: a run cut short still says what it measured
        measured = ", ".join(f"{name} {times[name][-1]:.3f} s" for name in order)
        console.print(f"[dim]round {round_ + 1}/{runs}: {measured}[/dim]")
    return times


def share_of_speedup(os_time: float, ours: float, best: float) -> float | None:
    """Our speedup over the OS as a share of the best one's (by medians); None when the best gains
    under 5% (a share of nothing says nothing)."""
    if os_time / best < 1.05:
        return None
    return (os_time / ours - 1) / (os_time / best - 1)


def moves_of(log: Path) -> int:
    return sum(1 for line in log.read_text().splitlines() if json.loads(line).get("decision") in PLACED)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--rounds", type=int, default=150000000, help="per phase of phase_pairs")
    parser.add_argument("--increments", type=int, default=30000000, help="per worker of creator_pairs")
    parser.add_argument("--interval", default=None, help="--adapt's --interval (default: pinwise's)")
    parser.add_argument("--parts", default="1,2,3,4", help="which of the four measurements above to run (default all)")
    args = parser.parse_args()
    words = [part.strip() for part in args.parts.split(",") if part.strip()]
    if not words or not set(words) <= {"1", "2", "3", "4"}:
        parser.error("--parts takes 1, 2, 3 and 4, separated by commas")
    parts = {int(word) for word in words}
    met = True
    adapt = [PINWISE, "run", "--adapt", *(["--interval", args.interval] if args.interval else [])]
    with tempfile.TemporaryDirectory() as tmp:
        if 1 in parts:
            phases = Path(tmp) / "phase_pairs"
            subprocess.run(["gcc", "-O2", "-pthread", "-o", str(phases), str(PROGRAMS / "phase_pairs.c")], check=True)
            program = [str(phases), "4", str(args.rounds)]
            subprocess.run([PINWISE, "trace", "--backend", "sample", "-o", f"{tmp}/whole.json", "--", *program],
                           check=True, capture_output=True)
            whole = subprocess.run([PINWISE, "map", f"{tmp}/whole.json", "--policy", "locality", "-f", "cpulist"],
                                   check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
            placements = {
                "os": program,
                "phase 1 best": [PINWISE, "run", "--no-verify", "--cpus", "0,0,1,1", "--", *program],
                f"whole-run trace ({whole})": [PINWISE, "run", "--no-verify", "--cpus", whole, "--", *program],
                "oracle (re-pins)": [str(phases), "-H", "4", str(args.rounds)],
                "adapt": [*adapt, "--", *program],
            }
            times = interleaved(placements, args.runs)
            base = statistics.median(times["os"])
            out = table(f"two phases, pairs swap partners: {args.runs} interleaved runs each",
                        ["placement", "median s", "speedup over os", "adapt faster? (p)"])
            for name, values in times.items():
                p = mannwhitneyu(times["adapt"], values, alternative="less").pvalue if name != "adapt" else None
                out.add_row(name, f"{statistics.median(values):.3f}", f"{base / statistics.median(values):.2f}",
                            "-" if p is None else f"{'yes' if p < 0.05 else 'no'} ({p:.2g})")
            console.print(out)
            static = [n for n in times if n not in ("adapt", "oracle (re-pins)")]
            beats = all(mannwhitneyu(times["adapt"], times[n], alternative="less").pvalue < 0.05 for n in static)
            reach = share_of_speedup(base, statistics.median(times["adapt"]), statistics.median(times["oracle (re-pins)"]))
            console.print(f"--adapt significantly faster than every static placement: {'yes' if beats else 'NO'}; "
                          + (f"it reaches {reach:.2f} of the oracle's speedup (target 0.9: "
                             f"{'met' if reach >= 0.9 else 'NOT met'})" if reach is not None else
                             "the oracle gains nothing over the OS here: no speedup to reach"))
            met &= beats and reach is not None and reach >= 0.9

        if 2 in parts:
            patterns = str(native_dir() / "bin" / "patterns")
            out = table("nothing to gain: --adapt against the OS", ["program", "os median s", "adapt median s", "ratio",
                                                                     "moves (most in a run)"])
            # private work at two lengths: pinwise's fixed costs (starting the sampler beside the
            # program, its first intervals' short windows) weigh on a 0.35 s run ten times what they
            # weigh on a 3.5 s one; both are judged
            for label, name, iterations in (("private", "private", "100000"), ("private, 10x longer", "private", "1000000"),
                                            ("all-to-all", "all-to-all", "40000")):
                command = [patterns, name, "-n", "4", "-i", iterations]
                log = Path(tmp, f"{name}-{iterations}.jsonl")
                most = 0
                both = {"os": [], "adapt": []}
                for round_ in range(args.runs):
                    order = ["os", "adapt"]
                    random.shuffle(order)
                    for kind in order:
                        if kind == "os":
                            both["os"].append(program_time(command))
                        else:
                            both["adapt"].append(program_time([*adapt, "--log", str(log), "--", *command]))
                            most = max(most, moves_of(log))
                    console.print(f"[dim]{label} round {round_ + 1}/{args.runs}: os {both['os'][-1]:.3f} s, adapt "
                                  f"{both['adapt'][-1]:.3f} s ({moves_of(log)} placement(s))[/dim]")
                ratio = statistics.median(both["adapt"]) / statistics.median(both["os"])
                met &= ratio <= 1.02 and most <= 1
                out.add_row(label, f"{statistics.median(both['os']):.3f}", f"{statistics.median(both['adapt']):.3f}",
                            f"{ratio:.3f}", str(most))
            console.print(out)

        if 3 in parts:
            creator = str(compile_c("creator_pairs.c", Path(tmp)))
            increments = str(args.increments)
            times = interleaved({"os": [creator, "-i", increments], "hand": [creator, "-i", increments, "--hand"],
                                 "adapt": [*adapt, "--", creator, "-i", increments]}, args.runs)
            base = statistics.median(times["os"])
            hand, adapt_speedup = base / statistics.median(times["hand"]), base / statistics.median(times["adapt"])
            reach = share_of_speedup(base, statistics.median(times["adapt"]), statistics.median(times["hand"]))
            console.print(f"the blog's program: hand pinning {hand:.2f}x the OS, --adapt {adapt_speedup:.2f}x: "
                          + (f"{reach:.2f} of hand pinning's speedup (target 0.9: {'met' if reach >= 0.9 else 'NOT met'})"
                             if reach is not None else "hand pinning gains nothing over the OS here: no speedup to reach"))
            met &= reach is not None and reach >= 0.9

        if 4 in parts:  # no target: what a thread per task gets (module docstring)
            creator = str(compile_c("creator_pairs.c", Path(tmp)))
            each = ["-r", "8", "-i", str(args.increments)]
            times = interleaved({"os": [creator, *each], "hand": [creator, *each, "--hand"],
                                 "adapt": [*adapt, "--", creator, *each]}, args.runs)
            base = statistics.median(times["os"])
            hand, adapt_speedup = base / statistics.median(times["hand"]), base / statistics.median(times["adapt"])
            reach = share_of_speedup(base, statistics.median(times["adapt"]), statistics.median(times["hand"]))
            console.print(f"the blog's program in 8 rounds: hand pinning {hand:.2f}x the OS, --adapt {adapt_speedup:.2f}x"
                          + (f": {reach:.2f} of hand pinning's speedup" if reach is not None else
                             " (hand pinning gains nothing over the OS here)"))
    if parts & {1, 2, 3}:
        console.print(f"targets: {'met' if met else 'NOT met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
