"""Cost of pinwise's PMPI recorder: a ping-pong of 1 KiB messages between two ranks under
`mpirun`, with and without the recorder preloaded (as `pinwise mpi trace` runs it), interleaved,
medians of --runs; the time is what rank 0 measures around its round trips (MPI_Wtime), so the
launcher's start-up is not in it. Target (issue 19): < 5 % more time with the recorder.

    python benchmarks/mpi_overhead.py [--runs 15] [--trips 20000]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
from pathlib import Path

from common import HERE, console, cpu_model, interleaved, median, table

from pinwise.mpi import RECORDER


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--trips", type=int, default=20000)
    args = parser.parse_args()
    if not RECORDER.exists():
        raise SystemExit("pinwise was built without its MPI recorder (apt-get install libopenmpi-dev, reinstall)")
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")  # the benchmark machine runs as root
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    with tempfile.TemporaryDirectory() as tmp:
        exe = Path(tmp, "pingpong")
        subprocess.run(["mpicc", "-O2", "-o", str(exe), str(HERE / "programs" / "mpi_pingpong.c")], check=True)
        rows = Path(tmp, "rows")
        rows.mkdir()
        job = ["-np", "2", str(exe), "1024", str(args.trips)]
        configs = {
            "without the recorder": ["mpirun", *job],
            "with the recorder (as pinwise mpi trace)": ["mpirun", "-x", f"LD_PRELOAD={RECORDER}", "-x",
                                                         f"PINWISE_MPI_DIR={rows}", *job],
        }
        samples = interleaved(configs, args.runs, "Time in seconds =")
    base = median(samples["without the recorder"])
    out = table(f"ping-pong of 1 KiB, {args.trips} round trips, 2 ranks, medians of {args.runs} interleaved runs "
                f"({cpu_model()})", ["configuration", "median s", "us per round trip", "vs without"])
    for name, values in samples.items():
        out.add_row(name, f"{median(values):.4f}", f"{median(values) / args.trips * 1e6:.2f}",
                    f"{median(values) / base:.3f}x")
    console.print(out)
    cost = median(samples["with the recorder (as pinwise mpi trace)"]) / base - 1
    console.print(f"recorder overhead: {cost:+.1%} (target < 5%: {'met' if cost < 0.05 else 'NOT met'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
