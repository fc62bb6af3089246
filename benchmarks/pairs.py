"""The blog's contending pairs under pinwise run: no pinning vs pairs together vs pairs apart.

Two pairs of threads hammer two atomics on separate cache lines (100k increments per thread).
Pinning each pair to one CPU lets a pair share its cache line instead of bouncing it between
cores. Prints median, variance and speedup over no pinning for each placement, next to the
blog's own hand pinning (pthread_setaffinity_np in the program), from one interleaved run.
Target (issue: pinning): pinwise's pairs-together speedup >= 0.95 x the hand-pinned speedup.

    python benchmarks/pairs.py [--runs 25]
"""

from __future__ import annotations

import argparse
import statistics

from common import PINWISE, console, cpu_model, interleaved, median, native_dir, table


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=25, help="processes per placement (default 25)")
    parser.add_argument("--increments", type=int, default=100000)
    parser.add_argument("--reps", type=int, default=10, help="create/hammer/join rounds per process")
    args = parser.parse_args()
    pairs = str(native_dir() / "bin" / "pairs")
    work = [pairs, "-i", str(args.increments), "-r", str(args.reps)]
    run = [PINWISE, "run", "--no-verify"]
    # Thread k of the plan is created thread k (main = 0). Each round creates 4 threads, so a
    # 4-slot plan lines up every round: slots 1,2,3,0 are the pair threads t0..t3. The plan
    # pinwise makes from a trace holds main and one round, and repeats from slot 1 (main beside
    # the last pair it creates).
    configs = {
        "os (pinwise run --policy os)": run + ["--policy", "os", "--"] + work,
        "os (program alone)": work,
        "pairs together (pinwise --cpus 1,0,0,1)": run + ["--cpus", "1,0,0,1", "--"] + work,
        "pairs together, by role (--cpus 1,0,0,1,1 --repeat-from 1)": run + ["--cpus", "1,0,0,1,1", "--repeat-from", "1",
                                                                          "--"] + work,
        "pairs apart (pinwise --cpus 1,0,1,0)": run + ["--cpus", "1,0,1,0", "--"] + work,
        "pairs together (by hand, in the program)": work + ["--hand", "together"],
    }
    samples = interleaved(configs, args.runs, "Time in seconds =")
    base = median(samples["os (pinwise run --policy os)"])
    base_var = statistics.variance(samples["os (pinwise run --policy os)"])
    out = table(f"contending pairs, {args.runs} interleaved runs each ({args.increments} increments x {args.reps} rounds; "
                f"{cpu_model()})",
                ["placement", "median ms", "variance ms^2", "speedup vs os", "variance / os's"])
    for name, values in samples.items():
        var = statistics.variance(values)
        out.add_row(name, f"{median(values) * 1e3:.2f}", f"{var * 1e6:.3f}", f"{base / median(values):.2f}x",
                    f"{var / base_var:.3f}")
    console.print(out)
    # Both speedups over the same baseline (the program alone), so the ratio is hand's time / ours.
    alone = median(samples["os (program alone)"])
    hand = alone / median(samples["pairs together (by hand, in the program)"])
    for name in ("pairs together (pinwise --cpus 1,0,0,1)", "pairs together, by role (--cpus 1,0,0,1,1 --repeat-from 1)"):
        ours = alone / median(samples[name])
        ratio = ours / hand
        lower = statistics.variance(samples[name]) < base_var
        console.print(f"{name}: {ours:.2f}x vs hand-pinned {hand:.2f}x, ratio {ratio:.3f} "
                      f"(target >= 0.95: {'met' if ratio >= 0.95 else 'NOT met'}); variance lower than the OS's: "
                      f"{'yes' if lower else 'NO'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
