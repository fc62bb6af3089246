"""Nothing outlives pinwise, whatever signal ends it (pinwise.processes): bench, trace, run --verify,
workload run, mpi trace, demo and auto are killed with SIGTERM, SIGHUP, SIGINT and SIGKILL (bench at
points drawn from a fixed seed); afterwards no process of the run is left, the temporary folder
(one of the test's own) is empty once the next pinwise command has started, and a resumed bench
holds exactly the runs of an uninterrupted one, in the same order."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import PINWISE, eventually, need, run_pinwise

from pinwise.temporary import MARKER

#: A program no other test runs, so that what is left of it can be found by its command line: a
#: shell that starts a long sleep in the background, naps, and kills the sleep. Only a kill that
#: misses the shell's children leaves the long sleep running: a grandchild of pinwise, out of
#: reach of the parent-death signal.
NAP = "0.377"
ORPHAN = "sleep 30.377"


def in_a_shell(command: str) -> list[str]:
    return [need("sh"), "-c", command]


def wait_until_running(pattern: str, timeout: float = 60) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline and not left_running(pattern):
        time.sleep(0.05)
    assert left_running(pattern), f"{pattern} never started"


def left_running(pattern: str) -> list[str]:
    found = subprocess.run(["pgrep", "-fa", pattern], capture_output=True, text=True).stdout.splitlines()
    return [line for line in found if "pgrep" not in line]


@pytest.fixture
def temporary(tmp_path, monkeypatch) -> Path:
    """A temporary folder of the test's own (TMPDIR) for every pinwise it starts: what is left in
    it is this test's."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setenv("TMPDIR", str(folder))
    return folder


def left_in(folder: Path) -> list[str]:
    """What is in the temporary folder once the next pinwise command has started (it removes what
    a pinwise killed with -9 left)."""
    run_pinwise("topo", "-t", "pu:1", check=True)
    return sorted(p.name for p in folder.iterdir())


def folders_of(pid: int) -> list[Path]:
    return sorted(Path(os.environ["TMPDIR"]).glob(f"pinwise-*-{pid}-*"))


def schedule(db_path) -> list[tuple]:
    connection = sqlite3.connect(db_path)
    try:
        return sorted(connection.execute("SELECT block, policy, warmup, position FROM runs"))
    finally:
        connection.close()


def bench_command(db_path) -> list[str]:
    return [PINWISE, "bench", "--db", str(db_path), "-r", "4", "--policies", "os,compact", "--seed", "11", "--quiet",
            "--", *in_a_shell(f"{ORPHAN} & sleep {NAP}; kill $!")]


def wait_for_runs(db_path, count: int, process: subprocess.Popen) -> None:
    deadline = time.time() + 60
    while time.time() < deadline and process.poll() is None:
        try:
            if len(schedule(db_path)) >= count:
                return
        except sqlite3.Error:
            pass
        time.sleep(0.05)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGKILL])
def test_a_killed_bench_leaves_nothing_and_resumes_exactly(tmp_path, temporary, signum):
    rng = random.Random(signum)
    reference = tmp_path / "reference.db"
    subprocess.run(bench_command(reference), capture_output=True, check=True, timeout=120)
    db_path = tmp_path / "killed.db"
    process = subprocess.Popen(bench_command(db_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for_runs(db_path, rng.randrange(1, 6), process)
    time.sleep(rng.uniform(0, 0.35))  # somewhere inside a run, or between two
    process.send_signal(signum)
    _, err = process.communicate(timeout=30)
    # the kernel delivers the parent-death signal as pinwise's exit completes
    assert eventually(lambda: not left_running(f"sleep {NAP}")), "the program under test outlived pinwise"
    assert eventually(lambda: not left_running(ORPHAN)), "the program's child outlived pinwise"
    if signum == signal.SIGKILL:
        assert process.returncode == -signal.SIGKILL
    else:
        assert process.returncode == 128 + signum, err
        assert err.strip().splitlines()[-1].startswith("pinwise: interrupted: every finished run is saved"), err
        assert "Traceback" not in err
        assert not folders_of(process.pid)
    resumed = subprocess.run(bench_command(db_path), capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    assert not folders_of(process.pid)  # a folder a kill -9 left is gone after the next start
    assert schedule(db_path) == schedule(reference)  # same runs, same positions: none lost or doubled
    assert left_in(temporary) == []


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGKILL])
def test_a_killed_trace_leaves_no_valgrind(tmp_path, temporary, signum):
    need("valgrind")
    output = tmp_path / "comm.json"
    process = subprocess.Popen([PINWISE, "trace", "-o", str(output), "--", *in_a_shell("sleep 31.7; :")],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_until_running("^sleep 31.7")  # Valgrind runs the shell, whose child runs the sleep natively
    process.send_signal(signum)
    _, err = process.communicate(timeout=60)
    assert eventually(lambda: not left_running("sleep 31.7")), "Valgrind (or the program it runs) outlived pinwise"
    if signum != signal.SIGKILL:
        assert "Traceback" not in err
        assert "marked partial" in err and output.exists()  # what was gathered is kept, and says so
        assert process.returncode == 128 + signum and err.strip().endswith("pinwise: interrupted"), err
    assert not folders_of(process.pid) or signum == signal.SIGKILL  # kill -9's: gone at the next start (below)
    assert left_in(temporary) == []  # Valgrind's vgdb-pipe-* FIFOs included


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL])
def test_a_trace_stopped_as_valgrind_starts_leaves_nothing(temporary, signum):
    """Valgrind killed before the program runs leaves no FIFO nor file in the temporary folder."""
    need("valgrind")
    process = subprocess.Popen([PINWISE, "trace", "-o", str(temporary.parent / "comm.json"), "--",
                                *in_a_shell("sleep 31.9; :")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    wait_until_running("tool=pinwise.*sleep 31.9")
    process.send_signal(signum)
    _, err = process.communicate(timeout=60)
    assert "Traceback" not in err
    assert eventually(lambda: not left_running("sleep 31.9")), "Valgrind outlived pinwise"
    assert left_in(temporary) == []


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGKILL])
def test_a_killed_run_leaves_nothing(temporary, signum):
    """run --verify waits for its program to read back where its threads ran: whatever ends
    pinwise ends the program and what it started (here a background sleep, a grandchild out of
    reach of the parent-death signal), and its log goes with pinwise's folder."""
    process = subprocess.Popen([PINWISE, "run", "--verify", "-p", "os", "--", *in_a_shell("sleep 34.1 & sleep 34.2")],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_until_running("^sleep 34.2")
    wait_until_running("^sleep 34.1")
    process.send_signal(signum)
    _, err = process.communicate(timeout=60)
    assert eventually(lambda: not left_running("sleep 34.1")), "the program's child outlived pinwise"
    assert eventually(lambda: not left_running("sleep 34.2")), "the program outlived pinwise"
    if signum != signal.SIGKILL:  # passed on to the program, which it killed
        assert process.returncode == 128 + signum and "Traceback" not in err, err
    assert left_in(temporary) == []


def test_a_killed_workload_leaves_nothing(temporary):
    """pinwise workload run becomes the workload: killing it with -9 kills the workload."""
    process = subprocess.Popen([PINWISE, "workload", "run", "pairs", "-n", "2", "-i", "987654321"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wait_until_running("patterns pairs -n 2 -i 987654321")
    process.kill()
    process.communicate(timeout=60)
    assert eventually(lambda: not left_running("-i 987654321")), "the workload outlived pinwise"
    assert left_in(temporary) == []


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL])
def test_a_killed_mpi_trace_leaves_no_rank_nor_session_folder(tmp_path, temporary, monkeypatch, signum):
    """Open MPI's mpirun puts each rank in a process group of its own: they are found by their
    session and killed with it; its session folders (ompi.HOST.UID) lie in pinwise's own folder."""
    from pinwise.mpi import RECORDER

    need("mpirun")
    if not RECORDER.exists():
        pytest.skip("pinwise was built without its Open MPI recorder (make deps installs libopenmpi-dev)")
    monkeypatch.setenv("OMPI_ALLOW_RUN_AS_ROOT", "1")  # CI runs as root
    monkeypatch.setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    process = subprocess.Popen([PINWISE, "mpi", "trace", "-o", str(tmp_path / "comm.json"), "--", "mpirun",
                                "--oversubscribe", "-np", "2", *in_a_shell("sleep 35.3; :")],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert eventually(lambda: len(left_running("^sleep 35.3")) == 2, timeout=60), "the ranks never started"
    assert any(temporary.glob("pinwise-mpi-*/ompi.*"))  # Open MPI's session folder, inside pinwise's
    process.send_signal(signum)
    _, err = process.communicate(timeout=60)
    assert eventually(lambda: not left_running("sleep 35.3")), "a rank outlived pinwise"
    assert eventually(lambda: not left_running("mpirun --oversubscribe")), "mpirun outlived pinwise"
    if signum != signal.SIGKILL:
        assert process.returncode == 128 + signum and "Traceback" not in err, err
    assert left_in(temporary) == []


def test_a_stop_held_while_a_program_starts_waits_for_the_block_even_where_another_thread_takes_it():
    """signals_held blocks the stop signals in the main thread; with other threads in pinwise
    (OpenBLAS's) the kernel hands the signal to one of them, and Python raised the
    KeyboardInterrupt in the main thread at once, inside the block. It is raised as the block ends."""
    code = """
import os, signal, sys, threading, time
from pinwise.processes import signals_held, stop_on_termination
stop_on_termination()
threading.Thread(target=threading.Event().wait, daemon=True).start()  # a thread that takes the signal
reached = []
try:
    with signals_held():
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(100):
            time.sleep(0.001)
        reached.append('end of the block')
    reached.append('after it')
except KeyboardInterrupt:
    print(reached)
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "['end of the block']" and result.stderr == "", result


def test_a_guard_left_by_an_exception_kills_what_it_watches():
    """A stop signal held while a program started is raised as the holding block ends, before the
    code that kills the program on a stop: the guard's block, left by it, kills the session it
    watches (the program ran on with init as its parent). One released is left alone."""
    code = """
import subprocess
from pinwise.processes import GroupGuard
with GroupGuard() as guard:
    kept = subprocess.Popen(["sleep", "36.61"], start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    guard.watch(kept.pid, session=True)
    guard.release()
try:
    with GroupGuard() as guard:
        started = subprocess.Popen(["sleep", "36.62"], start_new_session=True, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
        guard.watch(started.pid, session=True)
        raise KeyboardInterrupt
except KeyboardInterrupt:
    started.wait()
    print(started.returncode, kept.pid)
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    killed, kept = result.stdout.split()
    try:
        assert killed == str(-signal.SIGKILL), result
        assert left_running("^sleep 36.61"), "a released program was killed"
    finally:
        os.kill(int(kept), signal.SIGKILL)


def test_the_next_command_cleans_what_dead_processes_left(temporary):
    """Folders of pinwise processes that are gone, and the FIFOs and shared memory of a Valgrind
    that is gone, are removed when a pinwise command starts; a live process's are kept, and so
    is everything else in the folder: a user's folder whose name looks like pinwise's (no PID
    alive by that number) but that pinwise did not make, too."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    alive = os.getpid()
    for pid in (dead.pid, alive):
        (temporary / f"pinwise-trace-{pid}-abc123").mkdir()
        (temporary / f"pinwise-trace-{pid}-abc123" / MARKER).write_text("")
        (temporary / f"pinwise-trace-{pid}-abc123" / "trace.txt").write_text("partial")
        for name in (f"vgdb-pipe-from-vgdb-to-{pid}-by-root-on-{os.uname().nodename}",
                     f"vgdb-pipe-to-vgdb-from-{pid}-by-root-on-???"):
            os.mkfifo(temporary / name)
        (temporary / f"vgdb-pipe-shared-mem-vgdb-{pid}-by-root-on-???").write_bytes(b"\0" * 48)
    (temporary / "pinwise-notes").mkdir()  # not the PID form: not pinwise's to remove
    for name in ("pinwise-demo-2024-results", f"pinwise-results-{dead.pid}-keep"):  # no marker: the user's
        (temporary / name).mkdir()
        (temporary / name / "report.txt").write_text("the user's")
    (temporary / f"vgdb-pipe-from-vgdb-to-{dead.pid}-by-root-on-another-host").write_bytes(b"")
    left = left_in(temporary)
    assert not [name for name in left if str(dead.pid) in name and not name.endswith(("another-host", "keep"))], left
    assert len([name for name in left if str(alive) in name]) == 4
    assert "pinwise-notes" in left and f"vgdb-pipe-from-vgdb-to-{dead.pid}-by-root-on-another-host" in left
    assert "pinwise-demo-2024-results" in left and f"pinwise-results-{dead.pid}-keep" in left


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_demo_stops_in_its_trace_stage(tmp_path, temporary, signum):
    """A stop during the demo's traces ends the demo (it used to trace on and end "demo finished")."""
    need("valgrind")
    process = subprocess.Popen([PINWISE, "demo", "--quick", "--out", str(tmp_path / "demo")],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_until_running(f"tool=pinwise.*{temporary}")  # the first trace's Valgrind, writing into our folder
    process.send_signal(signum)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 128 + signum, out + err
    assert "demo finished" not in out and "Traceback" not in err
    assert err.strip().endswith("pinwise: interrupted"), err
    assert eventually(lambda: not left_running(f"tool=pinwise.*{temporary}"))
    assert left_in(temporary) == []


def test_auto_stops_in_its_trace_stage(tmp_path, temporary):
    """SIGTERM while auto traces ends it there, instead of a bench of minutes on a partial matrix."""
    need("valgrind")
    process = subprocess.Popen([PINWISE, "auto", "--db", str(tmp_path / "auto.db"), "--",
                                *in_a_shell("sleep 36.7; :")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    wait_until_running("^sleep 36.7")
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 128 + signal.SIGTERM, out + err
    assert "Traceback" not in err and err.strip().endswith("pinwise: interrupted"), err
    assert not (tmp_path / "auto.db").exists() or not schedule(tmp_path / "auto.db")  # no bench ran
    assert left_in(temporary) == []


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL])
def test_a_killed_simulation_leaves_no_valgrind(temporary, signum):
    need("valgrind")
    process = subprocess.Popen([PINWISE, "simulate", "-t", "pack:1 core:2 pu:1", "--",
                                *in_a_shell("sleep 32.3; :")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    wait_until_running("^sleep 32.3")
    process.send_signal(signum)
    _, err = process.communicate(timeout=60)
    assert eventually(lambda: not left_running("sleep 32.3")), \
        "Valgrind (or the program it runs) outlived pinwise simulate"
    assert process.returncode != 0
    if signum != signal.SIGKILL:
        assert "Traceback" not in err and "interrupted" in err
        assert not folders_of(process.pid)
    assert left_in(temporary) == []
