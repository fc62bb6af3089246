"""Test program: numpy multiplies two N x N matrices (argv[1], default 200) with the OpenBLAS it
loads on import (OPENBLAS_NUM_THREADS threads, at most as many as the CPUs of the affinity mask
then), and prints one line "task TID CPUS" per thread of the process, each thread's allowed CPUs
as /proc/self/task shows them."""
import os
import sys

import numpy as np

n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
a = np.arange(n * n, dtype=float).reshape(n, n) % 7
assert (a @ a).sum() > 0
for tid in sorted(os.listdir("/proc/self/task"), key=int):
    with open(f"/proc/self/task/{tid}/status") as status:
        cpus = next(line.split(":", 1)[1].strip() for line in status if line.startswith("Cpus_allowed_list:"))
    print(f"task {tid} {cpus}")
