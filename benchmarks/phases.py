"""How often analyze names a phase change (pinwise.phases) in sampled traces of the planted programs.

Each of the seven one-phase planted programs (pinwise-patterns: pairs, neighbour, far-pairs, master,
pipeline, all-to-all, private) and the two-phase one (pinwise-patterns swap: pairs i^1, then i^2
after a barrier half way) is traced --runs times with `pinwise trace --backend sample` at the
default rate. Printed per program: the traces in which a phase change was named (none is right for
the one-phase programs, every one for swap), and for swap where the change was found against the
moment the program's barrier released its threads: half the sampled run (its two halves do the
same work).

    python benchmarks/phases.py [--runs 10] [--threads 4] [--iterations 200000]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from common import console, cpu_model, native_dir, table

from pinwise.phases import phase_change
from pinwise.sample import sample

ONE_PHASE = ("pairs", "neighbour", "far-pairs", "master", "pipeline", "all-to-all", "private")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--threads", type=int, default=8, help="of the one-phase programs (swap: --swap-threads)")
    parser.add_argument("--iterations", type=int, default=60000, help="of the one-phase programs")
    parser.add_argument("--swap-threads", type=int, default=4)
    parser.add_argument("--swap-iterations", type=int, default=200000)
    args = parser.parse_args()
    patterns = str(native_dir() / "bin" / "patterns")
    out = table(f"phase changes named in {args.runs} sampled traces each ({cpu_model()})",
                ["program", "named", "right", "found at, against half the run (s): median (range)"])
    wrong = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name in (*ONE_PHASE, "swap"):
            threads, iterations = ((args.swap_threads, args.swap_iterations) if name == "swap" else
                                   (args.threads, args.iterations))
            named, errors = 0, []
            for run in range(args.runs):
                console.print(f"[dim]{name}: sampled trace {run + 1}/{args.runs}[/dim]")
                comm = sample([patterns, name, "-n", str(threads), "-i", str(iterations)], Path(tmp, "s.json"),
                              quiet=True, progress=False, seed=run + 1)
                change = phase_change(comm)
                named += change is not None
                if change is not None and name == "swap":  # its two halves do the same work
                    errors.append(change.at_s - comm.info.seconds / 2)
            right = named if name == "swap" else args.runs - named
            wrong += args.runs - right
            where = (f"{statistics.median(errors):+.3f} (from {min(errors):+.3f} to {max(errors):+.3f})"
                     if errors else "-")
            out.add_row(name, f"{named}/{args.runs}", f"{right}/{args.runs}", where)
    console.print(out)
    console.print(f"wrong readings: {wrong} of {args.runs * (len(ONE_PHASE) + 1)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
