"""Cost of creating and joining threads under pinwise's preload vs no preload vs likwid-pin.

A program creates and joins 4 threads many times and prints the time per thread. The same
program runs alone, under `pinwise run --cpus 0,1` (preload pins every thread and logs it), and
under `likwid-pin -c N:0-1`; the added cost per thread creation is the difference of medians.
Target (issue: pinning): < 10 us added per thread creation.

    python benchmarks/pin_overhead.py [--runs 7]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from common import PINWISE, compile_c, console, interleaved, median, table


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="processes per configuration (default 7)")
    parser.add_argument("--iterations", type=int, default=2000, help="rounds of 4 threads per process")
    parser.add_argument("--likwid-iterations", type=int, default=3,
                        help="rounds under likwid-pin, which is slow per thread (default 3)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        exe = str(compile_c("create_join.c", Path(tmp)))
        configs = {
            "no preload": [exe, str(args.iterations)],
            "pinwise run": [PINWISE, "run", "--no-verify", "--cpus", "0,1", "--", exe, str(args.iterations)],
        }
        likwid = shutil.which("likwid-pin")
        if likwid:
            configs["likwid-pin"] = [likwid, "-q", "-c", "N:0-1", exe, str(args.likwid_iterations)]
        samples = interleaved(configs, args.runs, "ns_per_thread")
    base = median(samples["no preload"])
    out = table(f"thread create+join cost, median of {args.runs} processes", ["launcher", "us per thread", "added us per thread"])
    for name, values in samples.items():
        out.add_row(name, f"{median(values) / 1e3:.2f}", f"{(median(values) - base) / 1e3:+.2f}")
    console.print(out)
    added = (median(samples["pinwise run"]) - base) / 1e3
    line = f"pinwise adds {added:.2f} us per thread creation (target < 10 us: {'met' if added < 10 else 'NOT met'})"
    if likwid:
        theirs = (median(samples["likwid-pin"]) - base) / 1e3
        line += f"; likwid-pin adds {theirs:.0f} us, {theirs / max(added, 0.01):.0f}x more"
    else:
        line += "; likwid-pin not installed (apt-get install likwid) so no comparison"
    console.print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
