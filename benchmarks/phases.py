"""How often analyze names a phase change (pinwise.phases) in sampled traces of the planted programs.

Each of the seven one-phase planted programs (pinwise-patterns: pairs, neighbour, far-pairs, master,
pipeline, all-to-all, private) and the two-phase ones (pinwise-patterns swap: pairs i^1, then i^2
after a barrier half way; shift: neighbours i-1 and i+1, then far pairs i+T/2) is traced --runs
times with `pinwise trace --backend sample` at the default rate. Printed per program: the traces in
which a phase change was named (none is right for the one-phase programs, every one for swap and
shift), and for those two where the change was found against half the sampled run (swap's halves
do the same work; shift's first half makes twice the accesses to shared lines per thread that its
second does, as many in all, so its barrier comes near half way too).

With --backend valgrind each is traced under Valgrind instead (its time blocks are of the run's
memory accesses: where the change was found is then a share of them, against half).

    python benchmarks/phases.py [--runs 10] [--threads 8] [--iterations 60000] [--backend sample|valgrind]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from common import console, cpu_model, native_dir, table

from pinwise.phases import phase_change
from pinwise.sample import sample
from pinwise.trace import trace

ONE_PHASE = ("pairs", "neighbour", "far-pairs", "master", "pipeline", "all-to-all", "private")
TWO_PHASES = ("swap", "shift")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--threads", type=int, default=8, help="of the one-phase programs (swap: --swap-threads)")
    parser.add_argument("--iterations", type=int, default=60000, help="of the one-phase programs")
    parser.add_argument("--swap-threads", type=int, default=4)
    parser.add_argument("--swap-iterations", type=int, default=200000)
    parser.add_argument("--shift-threads", type=int, default=8)
    parser.add_argument("--shift-iterations", type=int, default=200000)
    parser.add_argument("--backend", choices=("sample", "valgrind"), default="sample")
    args = parser.parse_args()
    valgrind = args.backend == "valgrind"
    patterns = str(native_dir() / "bin" / "patterns")
    out = table(f"phase changes named in {args.runs} {'Valgrind' if valgrind else 'sampled'} traces each ({cpu_model()})",
                ["program", "named", "right", f"found at, against half the run ({'share of its accesses' if valgrind else 's'}):"
                                              " median (range)"])
    wrong = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name in (*ONE_PHASE, *TWO_PHASES):
            threads, iterations = {"swap": (args.swap_threads, args.swap_iterations),
                                   "shift": (args.shift_threads, args.shift_iterations)}.get(
                                       name, (args.threads, args.iterations))
            named, errors = 0, []
            for run in range(args.runs):
                console.print(f"[dim]{name}: {args.backend} trace {run + 1}/{args.runs}[/dim]")
                command = [patterns, name, "-n", str(threads), "-i", str(iterations)]
                comm = (trace(command, Path(tmp, "v.json"), quiet=True, progress=False) if valgrind else
                        sample(command, Path(tmp, "s.json"), quiet=True, progress=False, seed=run + 1))
                change = phase_change(comm)
                named += change is not None
                if change is not None and name in TWO_PHASES:
                    errors.append(change.at_s - (0.5 if valgrind else comm.info.seconds / 2))
                if change is not None:
                    console.print(f"[dim]  {change.text()}[/dim]")
            right = named if name in TWO_PHASES else args.runs - named
            wrong += args.runs - right
            where = (f"{statistics.median(errors):+.3f} (from {min(errors):+.3f} to {max(errors):+.3f})"
                     if errors else "-")
            out.add_row(name, f"{named}/{args.runs}", f"{right}/{args.runs}", where)
    console.print(out)
    console.print(f"wrong readings: {wrong} of {args.runs * (len(ONE_PHASE) + len(TWO_PHASES))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
