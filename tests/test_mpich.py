"""pinwise's MPI commands on MPICH (Debian's mpich + libmpich-dev, beside Open MPI): the recorder
built against MPICH, Hydra's mpiexec as the launcher, and the `-f mpich` lines run as printed."""

from __future__ import annotations

import json
import shutil
import subprocess

import numpy as np
import pytest
from conftest import PINWISE, PROGRAMS, assert_clean_failure, run_pinwise
from test_mpi import ran, ring_matrix

from pinwise.mpi import RECORDERS
from pinwise.pinning.launcher import NATIVE_DIR

MPIEXEC = "mpiexec.mpich"
pytestmark = pytest.mark.skipif(shutil.which(MPIEXEC) is None or shutil.which("mpicc.mpich") is None
                                or not RECORDERS["mpich"].exists(),
                                reason="MPICH (make deps installs mpich and libmpich-dev) and pinwise's MPICH "
                                       "recorder are needed")


@pytest.fixture(scope="module")
def ring():
    exe = NATIVE_DIR / "bin" / "mpi_ring_mpich"  # pinwise-mpi-ring-mpich on PATH
    if not exe.exists():
        pytest.skip("pinwise was built without MPICH")
    return exe


def traced(tmp_path, *job: str) -> subprocess.CompletedProcess:
    return run_pinwise("mpi", "trace", "-o", str(tmp_path / "comm.json"), "--", MPIEXEC, *job, input="", timeout=300)


def test_a_ring_under_mpich_is_recorded_to_the_byte(tmp_path, ring):
    """The ring of test_mpi, built against MPICH and started by Hydra: the MPICH recorder is
    chosen from the program's own library, and the bytes are exact."""
    result = traced(tmp_path, "-n", "4", str(ring), "1000", "8", "collectives")
    assert result.returncode == 0, result.stderr
    document = json.loads((tmp_path / "comm.json").read_text())
    assert document["kind"] == "mpi" and document["ranks"] == 4 and not document.get("partial")
    sent = np.zeros((4, 4))
    for i in range(4):
        sent[i, (i + 1) % 4] += 8000  # the ring
    for parent, child in ((0, 2), (0, 1), (2, 3)):  # the binomial trees of bcast and allreduce
        sent[parent, child] += 1000 + 64
        sent[child, parent] += 64
    assert np.array_equal(np.array(document["bytes_sent"]), sent)
    assert document["collectives"] == {"bcast": {"calls": 1, "bytes": 1000}, "allreduce": {"calls": 1, "bytes": 64}}


def test_a_program_of_the_other_mpi_is_named(tmp_path):
    """An Open MPI program under MPICH's launcher starts one-rank worlds: pinwise warns before the
    run, and after it refuses the rows that all claim rank 0, or, where all but one of the
    singletons failed in MPI_Init (they race for one session folder: a loaded machine), the one
    row of a world of 1 that a failed job left; it writes no matrix either way."""
    other = NATIVE_DIR / "bin" / "mpi_ring"
    if not other.exists():
        pytest.skip("pinwise was built without Open MPI")
    result = traced(tmp_path, "-n", "2", str(other), "64", "1")
    assert "linked against Open MPI but the launcher is MPICH's" in result.stderr
    assert result.returncode != 0 and "Traceback" not in result.stderr
    said = " ".join(result.stderr.split())
    assert ("several processes each wrote the row of rank 0 in a world of 1" in said
            or "its only row is of a world of 1: the ranks did not join one world" in said), said
    assert not (tmp_path / "comm.json").exists()


def test_the_mpich_lines_of_mpi_map_run_as_printed(tmp_path):
    """`mpi map -f mpich` prints a machinefile and `mpiexec -f machinefile -bind-to user:LIST`;
    run as printed, each rank may run only on the CPUs the map gave it."""
    where = tmp_path / "where"
    subprocess.run(["mpicc.mpich", "-O2", "-o", str(where), str(PROGRAMS / "mpi_where.c")], check=True,
                   capture_output=True)
    hostfile = tmp_path / "hosts"
    hostfile.write_text("localhost:2\n")
    mapped = run_pinwise("mpi", "map", ring_matrix(2, tmp_path / "ring2.csv"), "--hostfile", str(hostfile),
                         "-f", "mpich", check=True).stdout.splitlines()
    machinefile = tmp_path / "machinefile"
    machinefile.write_text("".join(line + "\n" for line in mapped if not line.startswith("#")))
    options = mapped[-1].removeprefix("# mpiexec ").replace("machinefile", str(machinefile)).split()
    assert options[-1].startswith("user:")
    result = subprocess.run([MPIEXEC, *options, "-n", "2", str(where)], capture_output=True, text=True, input="",
                            timeout=120)
    assert result.returncode == 0, result.stderr
    cpus = dict(line.split()[1::2] for line in result.stdout.splitlines() if line.startswith("rank "))
    asked = options[-1].removeprefix("user:").split(",")
    assert [cpus[rank] for rank in ("0", "1")] == [cpu.replace("+", ",") for cpu in asked]
    assert sorted(asked) == ["0", "1"]


def test_a_hybrid_job_on_two_mpich_nodes_has_every_rank_and_thread_where_asked(tmp_path):
    """Two "nodes" (host aliases, Hydra's ssh launcher replaced by a local command that logs which
    host each proxy was started for), 2 ranks x 2 threads: `mpi run` hands Hydra a machinefile
    of one host per rank; rank i runs under proxy i, started for the host the placement names, and
    every thread is on its PU."""
    threads = tmp_path / "threads"
    subprocess.run(["gcc", "-O2", "-pthread", "-o", str(threads), str(PROGRAMS / "threads.c")], check=True)
    log = tmp_path / "launches"
    agent = tmp_path / "agent.sh"
    agent.write_text(f'#!/bin/sh\necho "$*" >> {log}\nexec {PROGRAMS / "local_rsh.sh"} "$@"\n')
    agent.chmod(0o755)
    hostfile = tmp_path / "hosts"
    hostfile.write_text("nodea:2\nnodeb:2\n")
    comm = ring_matrix(2, tmp_path / "ring2.csv")
    # threads.c keeps its threads until its input closes; Hydra keeps the input of rank 1 open
    program = f"exec {threads} 1 < /dev/null"
    launcher = [MPIEXEC, "-launcher", "ssh", "-launcher-exec", str(agent), "-n", "2", "sh", "-c", program]
    result = subprocess.run([PINWISE, "mpi", "run", "--comm", comm, "--hostfile", str(hostfile), "--threads-per-rank",
                             "2", "--verify", "--", *launcher], capture_output=True, text=True, input="", timeout=300)
    assert result.returncode == 0, result.stderr
    placement = result.stderr.split("placement: ")[1].splitlines()[0].split("; ")
    host_of = {line.split("=")[0].split()[1]: line.split("=")[1].split()[0] for line in placement}
    assert sorted(host_of.values()) == ["nodea", "nodeb"]
    launched = {}
    for line in log.read_text().splitlines():
        words = line.split()
        launched[words[words.index("--proxy-id") + 1]] = words[1]  # "-x HOST proxy ... --proxy-id N"
    assert launched == host_of
    rows = ran(result)
    assert len(rows) == 4 and all(row[3] == row[4] and row[5] == "yes" for row in rows)
    for rank in ("0", "1"):
        assert sorted(row[4] for row in rows if row[0] == rank) == ["0", "1"]
    assert "4 threads in 2 ranks, all where asked" in result.stderr


def test_mpich_host_options_are_left_to_pinwise(tmp_path):
    hostfile = tmp_path / "hosts"
    hostfile.write_text("localhost:2\n")
    result = run_pinwise("mpi", "run", "--comm", ring_matrix(2, tmp_path / "ring2.csv"), "--hostfile", str(hostfile),
                         "--", MPIEXEC, "-hosts", "localhost", "-n", "2", "true", input="")
    assert_clean_failure(result, "mpiexec -hosts names the hosts")
