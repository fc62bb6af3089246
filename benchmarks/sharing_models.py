"""The two sharing models on programs with a planted structure (issue 39): which reads each one
right, the evidence for pinwise trace's default.

`--sharing write` counts an event only when one of the two accesses writes the line; `--sharing
any` (Diener et al.'s definition) every access to a line another thread touched in the window. The
tracer counts both in one run (the other one as the comm file's "other_matrix"), so each program is
traced once. Per program: its planted structure, and per model the pattern analyze reads (spin-waits
set aside by the hot lines of a trace under that model), whether that is the planted one, and the
planted pairs' mean over the other pairs' (the band a placement can use).

    python benchmarks/sharing_models.py
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from common import PINWISE, console, cpu_model, native_dir, table

from pinwise.comm import read_comm
from pinwise.mapping import by_role
from pinwise.patterns import analyze

TESTS = Path(__file__).resolve().parent.parent / "tests" / "programs"


def neighbours(t):
    return {(i, i + 1) for i in range(t - 1)}


def pairs(t):
    return {(i, i + 1) for i in range(1, t - 1, 2)}


#: name, argv (program, compiled from tests/programs when it ends in .c), the planted pattern(s),
#: the planted pairs (of the folded matrix for programs in rounds).
CASES = [
    ("ADI, halo + all-to-all sweep", ["adi_halo.c", "8", "64", "200"], ("neighbour", "clustered"), neighbours),
    ("ADI, larger grid", ["adi_halo.c", "8", "128", "60"], ("neighbour", "clustered"), neighbours),
    ("LU pipeline, spin flags", ["spin_flags.c", "-n", "6", "-s", "8"], ("neighbour", "pipeline"), neighbours),
    ("Jacobi, spin barrier", ["spin_stencil.c", "8", "40", "16"], ("neighbour",), neighbours),
    ("the blog's pairs, in rounds", ["timed_rounds.c"], ("pairs",), pairs),
    ("workload neighbour", [str(native_dir() / "bin" / "patterns"), "neighbour", "-n", "8", "-i", "2000"],
     ("neighbour",), neighbours),
    ("workload pairs", [str(native_dir() / "bin" / "patterns"), "pairs", "-n", "8", "-i", "2000"], ("pairs",),
     lambda t: {(i, i + 1) for i in range(0, t - 1, 2)}),
    ("private work, libm calls", ["libm_private.c", "4", "20000"], ("none",), lambda t: set()),
]


def band(matrix: np.ndarray, planted: set) -> float | None:
    t = matrix.shape[0]
    inside = [matrix[i, j] for i, j in planted]
    outside = [matrix[i, j] for i in range(t) for j in range(i + 1, t) if (i, j) not in planted]
    if not inside or not outside or np.mean(outside) <= 0:
        return None
    return float(np.mean(inside) / np.mean(outside))


def main() -> int:
    rows = []
    right = {"write": 0, "any": 0}
    with tempfile.TemporaryDirectory() as tmp:
        for name, argv, planted, planted_pairs in CASES:
            if argv[0].endswith(".c"):
                exe = Path(tmp, Path(argv[0]).stem)
                if not exe.exists():
                    subprocess.run(["gcc", "-O2", "-pthread", "-o", str(exe), str(TESTS / argv[0]), "-lm"], check=True)
                argv = [str(exe), *argv[1:]]
            readings = {}
            for model in ("write", "any"):  # traced under each: spin-waits are set aside by its own hot lines
                out = Path(tmp, f"{model}.json")
                console.print(f"tracing {name} with --sharing {model} ...")
                subprocess.run([PINWISE, "trace", "--backend", "valgrind", "--sharing", model, "-o", str(out), "--",
                                *argv], check=True, capture_output=True)
                folded = by_role(read_comm(out))
                found = analyze(folded)
                cells = planted_pairs(folded.threads)
                ratio = band(found.comm.matrix, cells)
                ok = found.pattern in planted
                right[model] += ok
                readings[model] = (f"{found.pattern} -> {found.policy}{'' if ok else ' (wrong)'}",
                                   "-" if ratio is None else f"{ratio:.2f}")
            rows.append([name, " or ".join(planted), *readings["write"], *readings["any"]])
    out = table(f"the sharing models on planted programs ({cpu_model()})",
                ["program", "planted", "write reads", "band", "any reads", "band"])
    for row in rows:
        out.add_row(*row)
    console.print(out)
    console.print(f"right: write {right['write']} of {len(CASES)}, any {right['any']} of {len(CASES)} "
                  "(band: the planted pairs' mean over the other pairs', after spin-waits are set aside)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
