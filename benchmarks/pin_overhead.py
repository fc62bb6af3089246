"""Cost of creating and joining threads under pinwise's preload vs the same CPUs without it.

A program creates and joins 4 threads many times and prints the time per thread. Every
configuration keeps all threads on CPU 0, so the only difference is the launcher's own work:
`taskset -c 0` (no preload), `pinwise run --cpus 0` (the preload pins each new thread, without
and with the per-thread log that --verify reads), and `likwid-pin -c 0` (likwid's preload).
Pinning threads to alternating CPUs instead would measure where threads run, not the preload.
Target (issue: pinning): < 10 us added per thread creation.

Then the start-up of each launcher, `LAUNCHER -- true` wall time, median of --startup-runs
interleaved runs: pinwise run --no-verify --cpus 0 beside hwloc-bind core:0, taskset -c 0,
numactl --physcpubind=0 and likwid-pin -c 0. Target (issue #12): at most 2.5x hwloc-bind.

    python benchmarks/pin_overhead.py [--runs 7] [--startup-runs 21]
"""

from __future__ import annotations

import argparse
import random
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from common import PINWISE, compile_c, console, cpu_model, interleaved, median, table


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="processes per configuration (default 7)")
    parser.add_argument("--iterations", type=int, default=2000, help="rounds of 4 threads per process")
    parser.add_argument("--startup-runs", type=int, default=21, help="runs per launcher for the start-up (default 21)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        exe = str(compile_c("create_join.c", Path(tmp)))
        configs = {
            "no preload (taskset -c 0)": ["taskset", "-c", "0", exe, str(args.iterations)],
            "pinwise run --no-verify": [PINWISE, "run", "--no-verify", "--cpus", "0", "--", exe, str(args.iterations)],
            "pinwise run --verify": [PINWISE, "run", "--verify", "--cpus", "0", "--", exe, str(args.iterations)],
        }
        likwid = shutil.which("likwid-pin")
        if likwid:
            configs["likwid-pin -c 0"] = [likwid, "-q", "-c", "0", exe, str(args.iterations)]
        samples = interleaved(configs, args.runs, "ns_per_thread")
    base = median(samples["no preload (taskset -c 0)"])
    out = table(f"thread create+join cost on CPU 0, median of {args.runs} processes ({cpu_model()})",
                ["launcher", "us per thread", "added us per thread"])
    for name, values in samples.items():
        out.add_row(name, f"{median(values) / 1e3:.2f}", f"{(median(values) - base) / 1e3:+.2f}")
    console.print(out)
    added = (median(samples["pinwise run --no-verify"]) - base) / 1e3
    logged = (median(samples["pinwise run --verify"]) - base) / 1e3
    line = (f"pinwise adds {added:.2f} us per thread creation, {logged:.2f} us with the --verify log "
            f"(target < 10 us: {'met' if max(added, logged) < 10 else 'NOT met'})")
    if likwid:
        theirs = (median(samples["likwid-pin -c 0"]) - base) / 1e3
        line += f"; likwid-pin adds {theirs:.2f} us"
    else:
        line += "; likwid-pin not installed (apt-get install likwid) so no comparison"
    console.print(line)
    startup(args.startup_runs)
    return 0


def startup(runs: int) -> None:
    """Wall time of `LAUNCHER -- true`, interleaved in shuffled blocks, median per launcher."""
    launchers = {
        "pinwise run --no-verify --cpus 0": [PINWISE, "run", "--no-verify", "--cpus", "0", "--"],
        "hwloc-bind core:0": ["hwloc-bind", "core:0", "--"],
        "taskset -c 0": ["taskset", "-c", "0"],
        "numactl --physcpubind=0": ["numactl", "--physcpubind=0"],
        "likwid-pin -c 0": ["likwid-pin", "-q", "-c", "0"],
    }
    launchers = {name: argv for name, argv in launchers.items() if shutil.which(argv[0])}
    true = shutil.which("true")
    seconds: dict[str, list[float]] = {name: [] for name in launchers}
    order = list(launchers)
    rng = random.Random(1)
    for _ in range(runs):
        rng.shuffle(order)
        for name in order:
            start = time.perf_counter()
            subprocess.run([*launchers[name], true], check=True, stdin=subprocess.DEVNULL)
            seconds[name].append(time.perf_counter() - start)
    reference = median(seconds["hwloc-bind core:0"]) if "hwloc-bind core:0" in seconds else None
    out = table(f"start-up: LAUNCHER -- true, median of {runs} interleaved runs ({cpu_model()})",
                ["launcher", "ms", "x hwloc-bind"])
    for name, values in seconds.items():
        out.add_row(name, f"{median(values) * 1e3:.1f}", f"{median(values) / reference:.2f}" if reference else "-")
    console.print(out)
    if reference:
        ratio = median(seconds["pinwise run --no-verify --cpus 0"]) / reference
        console.print(f"pinwise run starts in {ratio:.2f}x the time of hwloc-bind "
                      f"(target <= 2.5x: {'met' if ratio <= 2.5 else 'NOT met'})")


if __name__ == "__main__":
    raise SystemExit(main())
