"""`pinwise mpi trace`: the job runs through its launcher with the recorder in every rank; each
rank writes its row at MPI_Finalize (or MPI_Abort), and the rows are merged into one comm file."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from types import MappingProxyType

import numpy as np

from ..comm import CommMatrix, TraceInfo, write_comm
from ..errors import PinwiseError
from ..processes import run_in_group, user_environment
from ..temporary import temporary_folder
from .launchers import (MPI_NAMES, RECORDERS, job_mpi, launch_command, launcher_environment, launcher_failed, launcher_kind,
                        warn_mismatch)


def read_rows(folder: Path) -> tuple[int, dict[int, dict]]:
    """Every rank's row file: world size and, per rank, bytes, messages, collectives, complete."""
    rows: dict[int, dict] = {}
    size = None
    for path in sorted(folder.glob("rank-*.txt")):
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        try:
            if lines[0] != "pinwise-mpi 1":
                raise ValueError("not a pinwise-mpi row")
            _, rank, _, ranks = lines[1].split()
            rank, ranks = int(rank), int(ranks)
            row = {"bytes": [int(v) for v in lines[2].split()[1:]], "messages": [int(v) for v in lines[3].split()[1:]],
                   "collectives": {}, "complete": False}
            for line in lines[4:]:
                words = line.split()
                if words[0] == "collective":
                    row["collectives"][words[1]] = (int(words[2]), int(words[3]))
                elif words[0] == "complete":
                    row["complete"] = words[1] == "1"
            if len(row["bytes"]) != ranks or len(row["messages"]) != ranks:
                raise ValueError("a row of the wrong length")
        except (IndexError, ValueError) as err:
            raise PinwiseError(f"the recorder's row {path.name} cannot be read ({err})") from None
        if rank in rows:
            raise PinwiseError(f"several processes each wrote the row of rank {rank} in a world of {ranks}: the ranks "
                               "did not join one world (a program of one MPI under the other's launcher, or srun "
                               "without the PMI its MPI speaks: --mpi=pmix for Open MPI, --mpi=pmi2 for MPICH)")
        if size is not None and ranks != size:
            raise PinwiseError(f"the recorder's rows disagree on the number of ranks ({size} and {ranks})")
        size = ranks
        rows[rank] = row
    if size is None:
        raise PinwiseError("no rank wrote its row: did the program call MPI_Finalize? (is it an MPI program linked "
                           "against the MPI the launcher runs?)")
    return size, rows


def merge(size: int, rows: dict[int, dict], command: list[str], exit_status: int, seconds: float) -> CommMatrix:
    directed = np.zeros((size, size))
    messages = np.zeros((size, size))
    collectives: dict[str, dict[str, int]] = {}
    for rank, row in rows.items():
        directed[rank] = row["bytes"]
        messages[rank] = row["messages"]
        for name, (calls, payload) in row["collectives"].items():
            total = collectives.setdefault(name, {"calls": 0, "bytes": 0})
            total["calls"] += calls
            total["bytes"] += payload
    missing = sorted(set(range(size)) - set(rows))
    aborted = sorted(rank for rank, row in rows.items() if not row["complete"])
    symmetric = directed + directed.T
    np.fill_diagonal(symmetric, 0)
    both = messages + messages.T
    np.fill_diagonal(both, 0)
    extra = {"kind": "mpi", "ranks": size, "messages": both.astype(int).tolist(),
             "bytes_sent": directed.astype(int).tolist(), "collectives": collectives,
             "collective_algorithms": {"bcast": "binomial tree", "reduce": "binomial tree",
                                       "allreduce": "reduce to 0 then bcast (binomial trees)", "gather": "linear",
                                       "scatter": "linear", "allgather": "ring", "alltoall": "linear",
                                       "barrier": "none (no payload)"}}
    if missing:
        extra["ranks_without_a_row"] = missing
    if aborted:
        extra["ranks_aborted"] = aborted
    info = TraceInfo(command=tuple(command), tool="pinwise-pmpi 1", partial=bool(missing or aborted or exit_status),
                     exit_status=exit_status, seconds=round(seconds, 3),
                     extra=MappingProxyType(extra))
    return CommMatrix(symmetric, info=info)  # no memory accesses or instructions: bytes are not those


def mpi_trace(argv: list[str], output: str) -> CommMatrix:
    """Run the job through its launcher with the recorder in every rank; write and return the matrix."""
    if not argv:
        raise PinwiseError("no job given: write the launcher and the program after --, e.g. "
                           "pinwise mpi trace -o comm.json -- mpirun -np 4 ./app")
    kind = launcher_kind(argv)
    mpi = job_mpi(argv, kind)
    warn_mismatch(kind, mpi)
    recorder = RECORDERS[mpi]
    if not recorder.exists():
        package = "libopenmpi-dev" if mpi == "openmpi" else "libmpich-dev"
        raise PinwiseError(f"pinwise was built without its {MPI_NAMES[mpi]} recorder (no {MPI_NAMES[mpi]} development "
                           f"files were found): apt-get install {package}, then reinstall pinwise")
    with temporary_folder("mpi") as tmp:
        rows = Path(tmp, "rows")
        rows.mkdir()
        env = launcher_environment(user_environment(), tmp)
        env["PINWISE_MPI_DIR"] = str(rows)
        env["LD_PRELOAD"] = ":".join(filter(None, [str(recorder), env.get("LD_PRELOAD")]))
        command = launch_command(argv, kind, env, ["LD_PRELOAD", "PINWISE_MPI_DIR"])
        start = time.perf_counter()
        said = bytearray()
        status = run_in_group(command, argv[0], env=env, stderr_tail=said)
        seconds = time.perf_counter() - start
        if status != 0 and not any(rows.glob("rank-*.txt")):
            raise PinwiseError(launcher_failed(argv[0], status, said, "before any rank wrote its row"))
        size, found = read_rows(rows)
    if size == 1 and status != 0 and kind in RECORDERS and kind != mpi:
        # one-rank worlds of the other MPI: the singletons race for one session folder, and those
        # that lose fail in MPI_Init without a row (seen on a loaded 2-CPU guest, 2 runs of 40)
        raise PinwiseError(f"the job failed (exit status {status}) and its only row is of a world of 1: the ranks "
                           f"did not join one world (a program of {MPI_NAMES[mpi]} under {MPI_NAMES[kind]}'s "
                           "launcher; nothing was written)")
    comm = merge(size, found, list(argv), status, seconds)
    write_comm(comm, output)
    extra = comm.info.extra
    if comm.info.partial:
        why = [f"exit status {status}"] if status else []
        if "ranks_without_a_row" in extra:
            why.append(f"ranks {extra['ranks_without_a_row']} wrote no row")
        if "ranks_aborted" in extra:
            why.append(f"ranks {extra['ranks_aborted']} aborted")
        print(f"pinwise: warning: the job did not end cleanly ({'; '.join(why)}): {output} holds what was "
              "recorded, marked partial", file=sys.stderr)
    return comm
