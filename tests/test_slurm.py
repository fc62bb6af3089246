"""pinwise on a real Slurm: a single-node cluster (munged, slurmctld and slurmd of Debian's
slurm-wlm, on this machine, in a folder of the test's own) runs `pinwise mpi trace -- srun`, and
`pinwise mpi map` inside an allocation, whose placement srun then applies. Skipped, with the
reason, where Slurm cannot start."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import PINWISE, PROGRAMS

from pinwise.pinning.launcher import NATIVE_DIR

RING = NATIVE_DIR / "bin" / "mpi_ring"


def alive(pid: int) -> bool:
    """Running, not a zombie (a daemon's parent may never reap it)."""
    try:
        return "zombie" not in Path(f"/proc/{pid}/status").read_text(errors="replace").lower()
    except OSError:
        return False


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """The environment of a running one-node Slurm (SLURM_CONF set); its daemons die after."""
    missing = [tool for tool in ("munged", "mungekey", "slurmctld", "slurmd", "srun", "sinfo") if not shutil.which(tool)]
    if missing:
        pytest.skip(f"Slurm is not installed ({', '.join(missing)} missing; make deps installs slurm-wlm and munge)")
    if not RING.exists():
        pytest.skip("pinwise was built without MPI")
    root = tmp_path_factory.mktemp("slurm")
    for folder in ("state", "spool", "log", "run", "munge"):
        (root / folder).mkdir()
    key, sock = root / "munge" / "munge.key", root / "munge" / "munge.socket"
    subprocess.run(["mungekey", "-c", "-k", str(key)], check=True, capture_output=True)
    key.chmod(0o600)
    host = socket.gethostname().split(".")[0]
    cpus = len(os.sched_getaffinity(0))
    conf = root / "slurm.conf"
    conf.write_text("\n".join([
        "ClusterName=pinwise", f"SlurmctldHost={host}", "SlurmUser=root", "SlurmdUser=root", "AuthType=auth/munge",
        f"AuthInfo=socket={sock}", "CredType=cred/munge", f"StateSaveLocation={root}/state",
        f"SlurmdSpoolDir={root}/spool", f"SlurmctldPidFile={root}/run/slurmctld.pid",
        f"SlurmdPidFile={root}/run/slurmd.pid", f"SlurmctldPort={free_port()}", f"SlurmdPort={free_port()}",
        "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/affinity", "SchedulerType=sched/builtin",
        "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core", "ReturnToService=2",
        f"SlurmctldLogFile={root}/log/slurmctld.log", f"SlurmdLogFile={root}/log/slurmd.log", "MpiDefault=none",
        f"NodeName={host} CPUs={cpus} Sockets=1 CoresPerSocket={cpus} ThreadsPerCore=1 RealMemory=500 State=UNKNOWN",
        f"PartitionName=test Nodes={host} Default=YES MaxTime=INFINITE State=UP", ""]))
    env = {**os.environ, "SLURM_CONF": str(conf), "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    pid_files = [root / "munge" / "munged.pid", root / "run" / "slurmctld.pid", root / "run" / "slurmd.pid"]
    try:
        subprocess.run(["munged", "--force", f"--socket={sock}", f"--key-file={key}",
                        f"--log-file={root}/munge/munged.log", f"--pid-file={pid_files[0]}",
                        f"--seed-file={root}/munge/seed"], check=True, capture_output=True, timeout=30)
        subprocess.run(["slurmctld"], check=True, capture_output=True, env=env, timeout=30)
        subprocess.run(["slurmd"], check=True, capture_output=True, env=env, timeout=30)
        deadline = time.time() + 30
        while time.time() < deadline:
            state = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, env=env).stdout.strip()
            if state == "idle":
                break
            time.sleep(0.5)
        else:
            logs = " | ".join((root / "log" / f).read_text()[-300:] for f in ("slurmctld.log", "slurmd.log")
                              if (root / "log" / f).exists())
            pytest.skip(f"Slurm did not come up (node state {state!r}): {logs}")
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as err:
        pytest.skip(f"Slurm could not start here: {err}")
    yield env
    subprocess.run(["scancel", "--full", "--user", "root"], capture_output=True, env=env, timeout=30)
    for pid_file in reversed(pid_files):  # SIGTERM, then SIGKILL: no daemon of the test outlives it
        try:
            pid = int(pid_file.read_text().split()[0])
        except (OSError, ValueError):
            continue
        for signum in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.kill(pid, signum)
            except OSError:
                break
            deadline = time.time() + 5
            while time.time() < deadline and alive(pid):
                time.sleep(0.1)


def test_srun_jobs_are_traced_and_placed_by_slurm(tmp_path, slurm):
    out = tmp_path / "comm.json"
    traced = subprocess.run([PINWISE, "mpi", "trace", "-o", str(out), "--", "srun", "-n", "2", "--mpi=pmix",
                             str(RING), "1000", "8"], capture_output=True, text=True, env=slurm, timeout=300)
    assert traced.returncode == 0, traced.stderr
    assert np.array_equal(np.array(json.loads(out.read_text())["matrix"]), [[0, 16000], [16000, 0]])
    # Inside an allocation pinwise reads the nodes from SLURM_JOB_NODELIST ...
    mapped = subprocess.run(["srun", "-N1", "-n1", PINWISE, "mpi", "map", str(out), "-f", "slurm"],
                            capture_output=True, text=True, env=slurm, timeout=300)
    assert mapped.returncode == 0, mapped.stderr
    lines = mapped.stdout.splitlines()
    hosts = [line for line in lines if not line.startswith("#")]
    assert hosts == [socket.gethostname().split(".")[0]] * 2
    cpus = lines[-1].split("map_cpu:")[1].split(",")
    # ... and srun places the tasks as it says.
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("\n".join(hosts) + "\n")
    where = tmp_path / "where"
    subprocess.run(["mpicc", "-O2", "-o", str(where), str(PROGRAMS / "mpi_where.c")], check=True, capture_output=True)
    placed = subprocess.run(["srun", "-n", "2", "--mpi=pmix", "--distribution=arbitrary",
                             f"--cpu-bind=map_cpu:{','.join(cpus)}", str(where)], capture_output=True, text=True,
                            env={**slurm, "SLURM_HOSTFILE": str(hostfile)}, timeout=300)
    assert placed.returncode == 0, placed.stderr
    found = {int(line.split()[1]): line.split()[3] for line in placed.stdout.splitlines() if line.startswith("rank ")}
    assert found == {rank: cpu for rank, cpu in enumerate(cpus)}


def test_mpi_run_through_srun_has_every_thread_where_asked(tmp_path, slurm):
    """Inside an allocation (salloc: the nodes from SLURM_JOB_NODELIST), 2 ranks of the ring run
    through srun: each task on its host by SLURM_HOSTFILE, each thread pinned by pinwise."""
    comm = tmp_path / "ring.csv"
    np.savetxt(comm, [[0, 1000], [1000, 0]], fmt="%d", delimiter=",")
    job = subprocess.run(["salloc", "-n", "2", PINWISE, "mpi", "run", "--comm", str(comm), "--verify", "--", "srun",
                          "-n", "2", "--mpi=pmix", str(RING)], capture_output=True, text=True, env=slurm, timeout=120)
    assert job.returncode == 0, job.stderr + job.stdout
    rows = [[c.strip() for c in line.strip("│").split("│")] for line in job.stderr.splitlines() if line.startswith("│")]
    assert {row[0] for row in rows} == {"0", "1"} and all(row[3] == row[4] and row[5] == "yes" for row in rows)
    assert "all where asked" in job.stderr


def test_an_mpich_job_through_srun_is_traced_with_the_mpich_recorder(tmp_path, slurm):
    """The ring built against MPICH, under srun with the PMI MPICH speaks (pmi2): the MPICH recorder
    is chosen from the program and the matrix is exact. Without a PMI (--mpi=none) each task is
    a world of one rank 0: pinwise says so instead of keeping one of their rows."""
    ring = NATIVE_DIR / "bin" / "mpi_ring_mpich"
    if not ring.exists():
        pytest.skip("pinwise was built without MPICH")
    out = tmp_path / "comm.json"
    traced = subprocess.run([PINWISE, "mpi", "trace", "-o", str(out), "--", "srun", "-n", "2", "--mpi=pmi2", str(ring),
                             "1000", "2"], capture_output=True, text=True, env=slurm, timeout=300)
    assert traced.returncode == 0, traced.stderr
    assert np.array_equal(np.array(json.loads(out.read_text())["bytes_sent"]), [[0, 2000], [2000, 0]])
    alone = subprocess.run([PINWISE, "mpi", "trace", "-o", str(tmp_path / "alone.json"), "--", "srun", "-n", "2",
                            "--mpi=none", str(ring), "1000", "2"], capture_output=True, text=True, env=slurm, timeout=300)
    assert alone.returncode != 0 and "Traceback" not in alone.stderr
    assert "did not join one world" in alone.stderr and "--mpi=pmi2 for MPICH" in alone.stderr
    assert not (tmp_path / "alone.json").exists()
