"""pinwise auto on a creator/worker contending-pairs program vs pinning the workers by hand.

benchmarks/programs/creator_pairs.c: the main thread creates four spinning workers in two pairs
and joins them, doing nothing else (a user's program, not one of pinwise's workloads).
`pinwise auto` traces it (with fewer increments), analyzes it, benchmarks its candidates against
the OS placement and names a winner. Then, side by side in one interleaved run: the program
alone, the program pinning its workers by hand (--hand: pair k on CPU k, main left to the OS),
and the program under auto's plan.
Targets (issue: placements that reach hand pinning): auto's speedup over the program alone
>= 0.9 x the hand-pinned speedup, and auto calls its winner significant.

    python benchmarks/auto_pairs.py [--runs 25]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from common import PINWISE, compile_c, console, cpu_model, interleaved

from pinwise.auto import run_auto
from pinwise.topology import live_topology
from pinwise.workloads import TIME_REGEX


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=25, help="runs of the side-by-side comparison (default 25)")
    parser.add_argument("--increments", type=int, default=2000000, help="increments per worker (default 2000000)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        exe = str(compile_c("creator_pairs.c", Path(tmp)))
        command = [exe, "-i", str(args.increments)]
        console.print(f"CPU: {cpu_model()}")
        result = run_auto(command, live_topology(), trace_argv=[exe, "-i", "50000"], time_regex=TIME_REGEX,
                          progress=False, say=lambda text: console.print(text, soft_wrap=True))
        for line in result.lines:
            console.print(line, soft_wrap=True)
        if result.winner is None:
            console.print("auto named no significant winner: targets NOT met")
            return 0
        plan = result.plans[result.winner.name]
        options = ["--cpus", plan.cpulist()] + (["--repeat-from", str(plan.repeat_from)] if plan.repeat_from else [])
        configs = {"alone": command, "hand": command + ["--hand"],
                   "auto": [PINWISE, "run", "--no-verify", *options, "--", *command]}
        samples = interleaved(configs, args.runs, "Time in seconds =")
    alone = statistics.median(samples["alone"])
    hand = alone / statistics.median(samples["hand"])
    auto = alone / statistics.median(samples["auto"])
    ratio = auto / hand
    console.print(f"auto's winner {result.winner.name} (CPUs {plan.cpulist()}), reported "
                  f"{result.winner.median.speedup:.2f}x over the OS and significant")
    console.print(f"side by side, {args.runs} interleaved runs (medians): program alone {alone * 1e3:.1f} ms; "
                  f"hand-pinned {hand:.2f}x; auto's placement {auto:.2f}x; ratio {ratio:.3f} "
                  f"(target >= 0.9: {'met' if ratio >= 0.9 else 'NOT met'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
