"""Cost of creating and joining threads under pinwise's preload vs the same CPUs without it.

A program creates and joins 4 threads many times and prints the time per thread. Every
configuration keeps all threads on CPU 0, so the only difference is the launcher's own work:
`taskset -c 0` (no preload), `pinwise run --cpus 0` (the preload pins each new thread, without
and with the per-thread log that --verify reads), and `likwid-pin -c 0` (likwid's preload).
Pinning threads to alternating CPUs instead would measure where threads run, not the preload.
Target (issue: pinning): < 10 us added per thread creation.

    python benchmarks/pin_overhead.py [--runs 7]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from common import PINWISE, compile_c, console, cpu_model, interleaved, median, table


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="processes per configuration (default 7)")
    parser.add_argument("--iterations", type=int, default=2000, help="rounds of 4 threads per process")
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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
