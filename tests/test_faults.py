"""Nothing outlives pinwise, whatever signal ends it (pinwise.processes): bench and trace are killed
with SIGTERM, SIGHUP, SIGINT and SIGKILL at points drawn from a fixed seed; afterwards no process
of the run is left, no temporary folder survives the next start, and a resumed bench holds exactly
the runs of an uninterrupted one, in the same order."""

from __future__ import annotations

import random
import signal
import sqlite3
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from conftest import PINWISE, eventually, need

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


def folders_of(pid: int) -> list[Path]:
    return sorted(Path(tempfile.gettempdir()).glob(f"pinwise-*-{pid}-*"))


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
def test_a_killed_bench_leaves_nothing_and_resumes_exactly(tmp_path, signum):
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


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGKILL])
def test_a_killed_trace_leaves_no_valgrind(tmp_path, signum):
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
    assert not folders_of(process.pid) or signum == signal.SIGKILL  # kill -9's: gone at the next start (above)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL])
def test_a_killed_simulation_leaves_no_valgrind(signum):
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
