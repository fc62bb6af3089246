"""The results database under damage and contention: a file that is read-only, locked by another
bench or held by another process's transaction, from a newer pinwise, of something else, with
damaged rows or flipped bits, on a disk that fills, under a name that is not UTF-8. Every case is
one message and a clean exit, never a traceback; damaged rows are named and skipped."""

from __future__ import annotations

import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import PINWISE, FakeProgram, assert_clean_failure, eventually, need, run_pinwise

from pinwise.bench import BenchOptions, build_candidates, db, run_bench
from pinwise.bench.noise import BUSY_SHARE, CpuTimes, run_noise, summarize_noise
from pinwise.bench.runner import TIMEOUT_FACTOR, TIMEOUT_FLOOR, default_timeout
from pinwise.cli import main
from pinwise.errors import PinwiseError
from pinwise.topology import load_topology

TOPOLOGY = load_topology("pack:1 core:2 pu:1")


def make_db(path, runs: int = 6, seed: int = 0) -> str:
    """A real database: os against a planted 10% faster placement, generated timings."""
    candidates = build_candidates(["os"], ["fast=0"], TOPOLOGY, None)
    program = FakeProgram({"os": 1.0, "0": 0.9, "other": 0.9}, 0.01, seed=seed)
    run_bench(["/bin/true"], candidates, TOPOLOGY, str(path), BenchOptions(runs, progress=False), runner=program)
    return str(path)


def report(path, capsys, *options: str) -> tuple[int, str, str]:
    status = main(["report", str(path), *options])
    out = capsys.readouterr()
    return status, out.out, out.err


def test_a_fresh_database_carries_its_schema_version(tmp_path):
    path = make_db(tmp_path / "r.db")
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == db.SCHEMA_VERSION


def test_a_bench_leaves_one_file_that_another_user_can_only_read_and_still_report(tmp_path):
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv is None:
        pytest.skip("needs root and setpriv to read the file as another user")
    # the environment's Python itself: the pinwise command is a launcher that starts it, and this
    # environment's interpreter lies under root's home, which nobody may enter once started
    nobody = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-m", "pinwise.cli", "report"]
    folder = Path(tempfile.mkdtemp(prefix="pinwise-test-shared-", dir="/tmp"))
    try:
        path = make_db(folder / "r.db")
        assert sorted(p.name for p in folder.iterdir()) == ["r.db"]  # no -wal or -shm left beside it
        folder.chmod(0o755)  # nobody may enter the folder and read the file, but write neither
        before = (folder / "r.db").read_bytes()
        result = subprocess.run([*nobody, path], capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr
        assert "fast" in result.stdout and "Traceback" not in result.stderr
        assert (folder / "r.db").read_bytes() == before
        writer = db.open_db(path)  # while a bench writes it (WAL mode, its -shm present), as well
        try:
            result = subprocess.run([*nobody, path], capture_output=True, text=True, timeout=120)
            assert result.returncode == 0, result.stderr
        finally:
            writer.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    # One who cannot even reach the file gets one line.
    tmp_path.chmod(0o700)
    result = subprocess.run([*nobody, make_db(tmp_path / "hidden.db")], capture_output=True, text=True, timeout=120)
    assert_clean_failure(result, "cannot reach", "permission denied")


def test_a_second_writer_is_refused_before_it_runs_anything(tmp_path, threads_exe_marker):
    path = str(tmp_path / "r.db")
    holder = db.open_db(path)  # a bench in progress holds the lock
    try:
        result = run_pinwise("bench", "--db", path, "-r", "2", "--policies", "os", "--", *threads_exe_marker)
        assert_clean_failure(result, "another pinwise is writing", "another --db")
        assert not (tmp_path / "ran").exists()
    finally:
        holder.close()
    result = run_pinwise("bench", "--db", path, "-r", "2", "--policies", "os", "--", *threads_exe_marker)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "ran").exists()


@pytest.fixture
def threads_exe_marker(tmp_path):
    """A program that leaves a file behind when it runs."""
    return [need("sh"), "-c", f"touch {tmp_path / 'ran'}"]


def test_damaged_rows_are_named_and_skipped(tmp_path, capsys):
    path = make_db(tmp_path / "r.db")
    with sqlite3.connect(path) as raw:
        ids = [row[0] for row in raw.execute("SELECT id FROM runs WHERE warmup = 0 ORDER BY id")]
        raw.execute("UPDATE runs SET wall = 'abc' WHERE id = ?", (ids[0],))
        raw.execute("UPDATE runs SET user = -1 WHERE id = ?", (ids[1],))
        raw.execute("UPDATE runs SET block = 'x' WHERE id = ?", (ids[2],))
    status, out, err = report(path, capsys)
    assert status == 0, err
    for run_id, damage in zip(ids, ("wall is 'abc'", "user is -1.0", "block is 'x'")):
        assert f"run {run_id} of experiment 1 is damaged ({damage}): skipped" in err
    connection = db.open_db(path, create=False)
    try:
        assert len(db.runs(connection, 1)) == len(ids) - 3
    finally:
        connection.close()


def test_what_others_used_is_kept_as_the_ticks_round_it_and_summed_unbiased(tmp_path):
    """/proc/stat counts 10 ms ticks: a 5 ms run's remainder (busy time less the program's and
    pinwise's) is rounding, either way. It is kept signed, read back as a good run, and the bench's
    sum cancels it out; clipped at zero run by run, it only added, and an idle machine read busy."""

    rounded = [run_noise(CpuTimes(1.0, 0.0, 10.0), CpuTimes(1.0 + busy, 0.0, 10.02), 0.005)
               for busy in (0.0, 0.01, 0.0, 0.01, 0.0, 0.01, 0.01, 0.0)]
    assert min(r["others_cpu"] for r in rounded) == pytest.approx(-0.005)
    path = make_db(tmp_path / "r.db")
    with sqlite3.connect(path) as raw:
        raw.execute("UPDATE runs SET others_cpu = ?", (rounded[0]["others_cpu"],))
    connection = db.open_db(path, create=False)
    try:
        rows = db.runs(connection, 1)
    finally:
        connection.close()
    assert rows and not connection.problems and all(r.others_cpu == pytest.approx(-0.005) for r in rows)
    runs = [db.Run("2026-01-01T00:00:00", 0.005, None, 0.005, 0.0, 1, 0, 1, None, 0, None, 0, "os", 0.1, **r)
            for r in rounded]
    noise = summarize_noise(runs, [[0.005] * len(runs)])
    assert noise.others == pytest.approx(0.0) and not noise.busy  # as much rounded up as down: nothing
    clipped = sum(max(0.0, r["others_cpu"]) for r in rounded) / sum(r["all_cpu"] for r in rounded)
    assert clipped > BUSY_SHARE / 2  # what the old clipping read from nothing: an eighth of the machine

    def noise_of(count: int, others: float) -> object:  # ``count`` runs of 10 ms on 2 CPUs, a share to others
        run = db.Run("2026-01-01T00:00:00", 0.01, None, 0.01, 0.0, 1, 0, 1, None, 0, None, 0, "os", 0.1,
                     others_cpu=0.02 * others, steal_cpu=0.0, all_cpu=0.02)
        return summarize_noise([run] * count, [[0.01] * count])

    # 30 % of 4 short runs is a tick or so, within their rounding; of 200 runs, it is not
    assert not noise_of(4, 0.3).busy and noise_of(200, 0.3).busy and noise_of(4, 0.99).busy


def test_a_baseline_some_experiments_lack_is_theirs_where_they_have_it(tmp_path, capsys):
    """report --baseline over a database of several programs: the experiments that have the
    placement compare against it, the others against their own baseline, each named; a name no
    experiment has is refused, naming what there is."""
    path = make_db(tmp_path / "r.db")  # os and fast
    candidates = build_candidates(["os"], ["slow=1"], TOPOLOGY, None)
    run_bench(["/bin/echo", "hi"], candidates, TOPOLOGY, path, BenchOptions(6, progress=False),
              runner=FakeProgram({"os": 1.0, "1": 1.1, "other": 1.0}, 0.01))
    status, out, err = report(path, capsys, "--baseline", "fast")
    assert status == 0, err
    assert "[wall time, baseline fast," in out and "[wall time, baseline os," in out
    assert "experiment 2 (echo hi) has no placement 'fast': its table compares against its own baseline" in err
    status, out, err = report(path, capsys, "--baseline", "nowhere")
    assert status == 2 and "baseline 'nowhere' is not a placement of experiment 1 (it has os, fast)" in err


@pytest.mark.parametrize("column, value, words", [
    ("config", "{not json", "config is not a JSON dict"),
    ("command", '"ls"', "command is not a JSON list"),
    ("config", '{"candidates": 5}', "config's candidates is not a list"),
    ("seed", "'seven'", "seed is 'seven'"),
])
def test_a_damaged_experiment_is_named(tmp_path, capsys, column, value, words):
    path = make_db(tmp_path / "r.db")
    make_db(path)  # resumes: still one experiment
    with sqlite3.connect(path) as raw:
        raw.execute("INSERT INTO experiments (created, command, config, seed) SELECT created, command, config, seed "
                    "FROM experiments WHERE id = 1")
        if column == "seed":
            raw.execute(f"UPDATE experiments SET seed = {value} WHERE id = 1")
        else:
            raw.execute(f"UPDATE experiments SET {column} = ? WHERE id = 1", (value,))
    status, out, err = report(path, capsys)
    # Experiment 2 has no runs: no finished run is left, and the damage is named.
    assert status == 2
    assert f"experiment 1 is damaged ({words}" in err and "no finished run yet" in err
    assert "Traceback" not in err
    # A bench beside damaged experiments names them, leaves them as they are and starts its own.
    with sqlite3.connect(path) as raw:
        raw.execute("UPDATE experiments SET config = '[' WHERE id = 2")
    make_db(path)
    assert "experiment 2 is damaged (config is not a JSON dict): skipped" in capsys.readouterr().err
    with sqlite3.connect(path) as raw:
        assert raw.execute("SELECT config FROM experiments WHERE id = 2").fetchone()[0] == "["
        assert raw.execute("SELECT COUNT(*) FROM runs WHERE experiment = 3").fetchone()[0] == 12


def test_foreign_newer_and_incomplete_files_are_refused(tmp_path, capsys):
    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as raw:
        raw.execute("CREATE TABLE songs (title TEXT)")
    for create in (True, False):
        with pytest.raises(PinwiseError, match="not a pinwise results database"):
            db.open_db(foreign, create=create)
    with sqlite3.connect(foreign) as raw:
        assert [r[0] for r in raw.execute("SELECT name FROM sqlite_master")] == ["songs"]  # left as it was

    newer = make_db(tmp_path / "newer.db")
    with sqlite3.connect(newer) as raw:
        raw.execute(f"PRAGMA user_version = {db.SCHEMA_VERSION + 1}")
    status, _, err = report(newer, capsys)
    assert status == 2 and "newer pinwise" in err

    lacking = make_db(tmp_path / "lacking.db")
    with sqlite3.connect(lacking) as raw:
        raw.execute("ALTER TABLE runs DROP COLUMN wall")
    status, _, err = report(lacking, capsys)
    assert status == 2 and "runs table has no column wall" in err

    text = tmp_path / "text.db"
    text.write_text("policy,time\nos,1.0\n")
    status, _, err = report(text, capsys)
    assert status == 2 and "not a results database: it is no SQLite file" in err


def test_an_older_database_gains_its_columns_and_version_when_written(tmp_path, capsys):
    path = make_db(tmp_path / "old.db")
    with sqlite3.connect(path) as raw:
        for name, _ in db.ADDED_COLUMNS:
            raw.execute(f"ALTER TABLE runs DROP COLUMN {name}")
        raw.execute("PRAGMA user_version = 0")
    status, out, err = report(path, capsys)  # read as it is: the missing columns read as empty
    assert status == 0, err
    make_db(path, runs=8)  # resumes the same experiment with two more runs each
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == db.SCHEMA_VERSION
        columns = {row[1] for row in raw.execute("PRAGMA table_info(runs)")}
    assert {name for name, _ in db.ADDED_COLUMNS} <= columns


def test_flipped_bits_give_a_report_or_one_message_never_a_traceback(tmp_path, capsys):
    """Random single-byte damage anywhere in a real file, 150 times. ``main`` lets anything but
    PinwiseError through, so a traceback here is an exception that fails the test."""
    original = (tmp_path / "clean.db")
    make_db(original, runs=10)
    with sqlite3.connect(original) as raw:
        raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = original.read_bytes()
    rng = random.Random(16)
    outcomes = {0: 0, 2: 0}
    for case in range(150):
        damaged = bytearray(data)
        for _ in range(rng.choice((1, 1, 4))):
            damaged[rng.randrange(len(damaged))] ^= 1 << rng.randrange(8)
        path = tmp_path / f"flip{case}.db"
        path.write_bytes(bytes(damaged))
        status, _, err = report(path, capsys)
        assert status in (0, 2), err
        assert "Traceback" not in err
        if status == 2:
            assert err.count("pinwise: error:") == 1, err
        outcomes[status] += 1
        path.unlink()
    assert outcomes[2] > 0  # some damage is found, not all of it is harmless


def test_the_default_timeout_comes_from_the_first_block():
    def run(wall, failure=None):
        return db.Run(started="", wall=wall, program_time=None, user=0, sys=0, max_rss_kb=0, migrations=None,
                      context_switches=None, energy_j=None, exit_status=0, failure=failure, misplaced=0,
                      placement="os")

    assert default_timeout([run(0.01), run(0.02)]) == TIMEOUT_FLOOR
    assert default_timeout([run(2.0), run(3.0), run(100.0, "exit status 1")]) == TIMEOUT_FACTOR * 3.0
    assert default_timeout([run(1.0, "killed by SIGSEGV")]) is None


def test_a_hanging_program_without_timeout_is_stopped_after_the_derived_one(tmp_path):
    """The first run of each placement ends; the later ones hang: they are stopped and recorded."""
    counter = tmp_path / "count"
    script = tmp_path / "hang-later.sh"
    script.write_text(f"#!/bin/sh\nif [ -e {counter} ]; then exec sleep 600; fi\ntouch {counter}\n")
    script.chmod(0o755)
    path = tmp_path / "r.db"
    result = run_pinwise("bench", "--db", str(path), "-r", "2", "--policies", "os", "--", str(script), timeout=60)
    assert result.returncode == 0, result.stderr
    assert f"runs longer than {TIMEOUT_FLOOR:g} s are stopped" in result.stderr
    connection = db.open_db(path, create=False)
    try:
        failures = [r.failure for r in db.runs(connection, 1)]
    finally:
        connection.close()
    assert failures == [None, f"timeout after {TIMEOUT_FLOOR:g} s"]


def _runs_of(report_text: str, policy: str) -> int:
    row = next(line for line in report_text.splitlines() if line.strip("│┃ ").startswith(policy + " "))
    return int(row.split("│")[2])


def test_a_report_never_shows_rows_another_process_has_not_committed(tmp_path):
    """Another process writes 500 runs in one transaction, spilled into the file (a cache of one
    page), and holds it: the report waits for its lock instead of reading around it (it read the
    file as it stood, uncommitted rows included), and once the rows are rolled back it shows the
    committed ones only."""
    path = make_db(tmp_path / "r.db")
    writer = sqlite3.connect(path, isolation_level=None)
    try:
        writer.execute("PRAGMA cache_size=1")
        writer.execute("BEGIN EXCLUSIVE")
        for block in range(1000, 1500):
            writer.execute("INSERT INTO runs (experiment, block, policy, warmup, started, wall, user, sys, max_rss_kb, "
                           "exit_status, misplaced, placement) VALUES (1, ?, 'os', 0, 'x', 9.0, 0, 0, 0, 0, 0, 'os')",
                           (block,))
        reader = subprocess.Popen([PINWISE, "report", path], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # The report has opened the file and waits on its lock; the writer gives up.
        assert eventually(lambda: any(os.path.realpath(f"/proc/{reader.pid}/fd/{fd}") == os.path.realpath(path)
                                      for fd in _descriptors(reader.pid)), timeout=60)
        writer.execute("ROLLBACK")
    finally:
        writer.close()
    out, err = reader.communicate(timeout=120)
    assert reader.returncode == 0, err
    assert _runs_of(out, "os") == 6 and "9.00 s" not in out


def _descriptors(pid: int) -> list[str]:
    try:
        return os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return []


def test_a_database_locked_past_the_wait_is_named(tmp_path, capsys, monkeypatch):
    path = make_db(tmp_path / "r.db")
    capsys.readouterr()
    monkeypatch.setattr(db, "BUSY_SECONDS", 0.2)
    writer = sqlite3.connect(path, isolation_level=None)
    try:
        writer.execute("BEGIN EXCLUSIVE")
        status, out, err = report(path, capsys)
    finally:
        writer.close()
    assert status == 2 and out == ""
    assert err.startswith(f"pinwise: error: {path!r} is locked by another process") and len(err.splitlines()) == 1


def test_a_disk_filling_mid_bench_stops_it_with_one_line_and_the_same_command_resumes(tmp_path):
    """The database may grow no more (a file size limit stands for the full disk): the bench stops
    with one message and the runs before it saved; with room again, the same command resumes,
    ending with the runs of a bench that was never stopped."""
    import resource

    command = [PINWISE, "bench", "--db", str(tmp_path / "r.db"), "-r", "40", "--policies", "os,compact", "--seed",
               "3", "--timeout", "60", "-n", "1", "--quiet", "--", "true"]  # one slot: true runs one thread
    reference = [PINWISE, *command[1:3], str(tmp_path / "reference.db"), *command[4:]]
    subprocess.run(reference, capture_output=True, check=True, timeout=300)
    full = subprocess.run(command, capture_output=True, text=True, timeout=300,
                          preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (48 << 10, 48 << 10)))
    assert_clean_failure(full, "cannot record the run", "the runs before it are saved")
    with sqlite3.connect(tmp_path / "r.db") as raw:
        saved = raw.execute("SELECT count(*) FROM runs").fetchone()[0]
    assert 0 < saved < 80
    resumed = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr

    def schedule(name):
        with sqlite3.connect(tmp_path / name) as raw:
            return sorted(raw.execute("SELECT block, policy, position FROM runs"))
    assert schedule("r.db") == schedule("reference.db")


def test_names_that_are_not_utf8_are_opened_as_they_are(tmp_path):
    path = os.fsdecode(bytes(tmp_path) + b"/r\xff.db")
    result = run_pinwise("bench", "--db", path, "-r", "2", "--policies", "os", "--quiet", "--", "true",
                         errors="surrogateescape")
    assert result.returncode == 0, result.stderr
    assert os.path.exists(bytes(tmp_path) + b"/r\xff.db")
    assert f"results: {path} " in result.stderr  # the name's own bytes, as the user typed it
    result = run_pinwise("report", path, errors="surrogateescape")
    assert result.returncode == 0 and _runs_of(result.stdout, "os") == 2, result.stderr
