"""Capabilities 6 and 8: real benches saved run by run, resumed after kill -9, and reported."""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
from conftest import PINWISE, assert_clean_failure, compile_program, run_pinwise

from pinwise.bench import open_db
from pinwise.bench.db import experiments, runs
from pinwise.pinning.launcher import NATIVE_DIR
from pinwise.report import summarize

PAIRS = str(NATIVE_DIR / "bin" / "pairs")
TIME_REGEX = r"Time in seconds = *([0-9.]+)"
pytestmark = pytest.mark.skipif(sorted(os.sched_getaffinity(0))[:2] != [0, 1], reason="needs CPUs 0 and 1")


def policy_counts(db_path) -> dict[str, int]:
    connection = sqlite3.connect(db_path)
    try:
        return dict(connection.execute("SELECT policy, COUNT(*) FROM runs WHERE warmup = 0 GROUP BY policy"))
    finally:
        connection.close()


def test_every_run_is_recorded_under_its_placement_and_read_back(tmp_path):
    """What pinwise controls, not whether the pairs got faster on this CPU (benchmarks/pairs.py
    measures that): each run recorded with its placement, every thread found where its plan put it."""
    db_path = str(tmp_path / "pairs.db")
    # A 4-slot plan lines up with every round of 4 threads: slots 1,2,3,0 are the two pairs.
    result = run_pinwise("bench", "--db", db_path, "-r", "6", "--policies", "os", "--placement", "together=1,0,0,1",
                         "--placement", "apart=1,0,1,0", "--time-regex", TIME_REGEX, "--quiet", "--",
                         PAIRS, "-r", "2", timeout=600)
    assert result.returncode == 0, result.stderr
    assert "together ran" in result.stdout and "apart ran" in result.stdout
    assert policy_counts(db_path) == {"os": 6, "together": 6, "apart": 6}
    rows = runs(open_db(db_path, create=False), 1)
    assert {r.policy: r.placement for r in rows} == {"os": "os", "together": "1,0,0,1", "apart": "1,0,1,0"}
    assert all(r.failure is None and r.misplaced == 0 and r.program_time > 0 for r in rows)
    assert all(r.migrations is not None and r.user >= 0 and r.max_rss_kb > 0 for r in rows)
    # /proc/stat counts 10 ms ticks: a short run may see none, the bench's sum does; what others used
    # is kept as the ticks round it, either way (bench/noise.py), never past what passed
    assert all(r.others_cpu <= r.all_cpu for r in rows) and sum(r.all_cpu for r in rows) > 0
    connection = open_db(db_path, create=False)
    summary = summarize(connection, experiments(connection)[0])
    connection.close()
    assert [p.name for p in summary.policies] == ["os", "together", "apart"]
    assert all(len(p.times) == 6 for p in summary.policies)


def test_the_adaptive_placement_is_benched_beside_the_static_ones(tmp_path):
    """``adapt`` among the placements: each of its runs starts the program under the sampler,
    which places the threads while it runs, and is recorded and judged like any other; nothing
    of the sampler's is left behind."""
    db_path = str(tmp_path / "adapt.db")
    patterns = str(NATIVE_DIR / "bin" / "patterns")
    result = run_pinwise("bench", "--db", db_path, "-r", "2", "--policies", "os,adapt", "--time-regex", TIME_REGEX,
                         "--quiet", "--", patterns, "pairs", "-n", "4", "-i", "60000", timeout=600)
    assert result.returncode == 0, result.stderr
    assert policy_counts(db_path) == {"os": 2, "adapt": 2}
    rows = runs(open_db(db_path, create=False), 1)
    adapted = [r for r in rows if r.policy == "adapt"]
    assert all(r.placement == "adapt" and r.failure is None and r.program_time > 0 for r in adapted), adapted
    # what it did is kept with each run (the placements it applied) and said under the table
    assert all(r.moves is not None and r.moves >= 0 for r in adapted), adapted
    assert all(r.moves is None and r.adapt_note is None for r in rows if r.policy == "os"), rows
    assert "adapt ran" in result.stdout and re.search(r"^adapt applied \d+", result.stdout, re.M), result.stdout
    leftover = subprocess.run(["pgrep", "-f", "pinwise-sample"], capture_output=True, text=True)
    assert leftover.stdout == "", leftover.stdout


def test_an_adaptive_run_that_sees_nothing_is_said_not_judged_silently(tmp_path):
    """A shell around the program: the threads are in a child process, which --adapt does not
    place. Each adapt run keeps why, and the bench says so under its verdict, so that "no
    difference" is not read as "nothing to gain"."""
    db_path = str(tmp_path / "shell.db")
    patterns = str(NATIVE_DIR / "bin" / "patterns")
    result = run_pinwise("bench", "--db", db_path, "-r", "2", "--policies", "os,adapt", "--quiet", "--", "sh", "-c",
                         f"{patterns} pairs -n 4 -i 60000; true", timeout=600)
    assert result.returncode == 0, result.stderr
    adapted = [r for r in runs(open_db(db_path, create=False), 1) if r.policy == "adapt"]
    assert len(adapted) == 2 and all(r.moves == 0 and "child process" in (r.adapt_note or "") for r in adapted), adapted
    assert "warning: adapt could not place the threads by what they share in 2 of its 2 runs" in result.stdout, \
        result.stdout


def test_runs_are_interleaved_in_shuffled_blocks(tmp_path):
    db_path = str(tmp_path / "order.db")
    run_pinwise("bench", "--db", db_path, "-r", "4", "--policies", "os,compact", "--placement", "one=1", "--quiet",
                "--seed", "5", "--", "/bin/true", check=True)
    rows = runs(open_db(db_path, create=False), 1)
    blocks = [[r.policy for r in rows if r.block == b] for b in range(4)]
    assert all(sorted(b) == ["compact", "one", "os"] for b in blocks)  # each block runs every placement once
    assert len({tuple(b) for b in blocks}) > 1  # in a new order


def test_kill_9_then_resume_gives_exactly_r_runs(tmp_path):
    db_path = str(tmp_path / "resume.db")
    command = [PINWISE, "bench", "--db", db_path, "-r", "6", "--policies", "os,compact", "--quiet", "--",
               "/bin/sleep", "0.15"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while time.time() < deadline:
        time.sleep(0.1)
        try:  # the file exists a moment before the bench has made its tables
            if os.path.exists(db_path) and sum(policy_counts(db_path).values()) >= 4:
                break
        except sqlite3.OperationalError:
            continue
    process.send_signal(signal.SIGKILL)
    process.wait()
    done_before = sum(policy_counts(db_path).values())
    assert 4 <= done_before < 12
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert policy_counts(db_path) == {"os": 6, "compact": 6}
    connection = sqlite3.connect(db_path)
    assert connection.execute("SELECT COUNT(*) FROM experiments").fetchone()[0] == 1
    pairs = connection.execute("SELECT COUNT(DISTINCT block || policy) FROM runs").fetchone()[0]
    assert pairs == 12  # none duplicated


def test_a_run_the_preload_library_could_not_reach_is_not_counted_under_its_placement(tmp_path):
    """A set-user-ID program of another user: the loader ignores LD_PRELOAD, so its compact runs
    were not pinned at all. They are failures that say why, never times of compact; the OS
    placement, which pins nothing, is measured as usual."""
    import shutil

    if os.geteuid() != 0:
        pytest.skip("needs root to make a program set-user-ID of another user")
    program = tmp_path / "setuid-true"
    shutil.copy("/bin/true", program)
    os.chown(program, 65534, 65534)
    program.chmod(0o4755)
    db_path = tmp_path / "r.db"
    result = run_pinwise("bench", "--db", str(db_path), "-r", "2", "--policies", "os,compact", "--quiet", "--",
                         str(program))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.splitlines()[-1].startswith("pinwise: error: no successful run of compact (compact: 2 x not "
                                                     "pinned: the preload library did not load (it is set-user-ID")
    connection = open_db(str(db_path), create=False)
    try:
        recorded = runs(connection, experiments(connection)[0].id)
    finally:
        connection.close()
    assert sorted((r.policy, r.failure is None) for r in recorded) == [("compact", False)] * 2 + [("os", True)] * 2


def test_failures_are_recorded_and_the_bench_goes_on(tmp_path, build_dir):
    crash = compile_program("crash.c", build_dir)
    db_path = str(tmp_path / "crash.db")
    result = run_pinwise("bench", "--db", db_path, "-r", "2", "--policies", "os,compact", "--quiet", "--", str(crash))
    assert result.returncode == 1
    error = result.stderr.strip().splitlines()[-1]
    assert error.startswith("pinwise: error: no successful run of os, compact") and "killed by SIGSEGV" in error
    assert "keep the OS placement" not in result.stdout  # no verdict stands on placements that never ran
    assert policy_counts(db_path) == {"os": 2, "compact": 2}


def test_timeout_kills_a_hanging_program(tmp_path):
    """The watchdog kills the program: recorded as a timeout and a SIGKILL (had it not fired,
    `sleep 30` would have ended normally, with status 0)."""
    db_path = str(tmp_path / "hang.db")
    result = run_pinwise("bench", "--db", db_path, "-r", "1", "--policies", "os", "--timeout", "0.5", "--quiet",
                         "--", "/bin/sleep", "30")
    assert result.returncode == 1 and "timeout after 0.5 s" in result.stdout + result.stderr
    row = runs(open_db(db_path, create=False), 1)[0]
    assert row.failure == "timeout after 0.5 s" and row.exit_status == -signal.SIGKILL


def test_two_programs_in_one_database_resume_and_report_with_exports(tmp_path):
    """Experiments of several programs live side by side: each bench resumes its own (saying how
    many runs it already has), --new starts another, and the report shows them all, with the
    overall table and every export read back."""
    db_path = str(tmp_path / "two.db")

    def bench(*program, runs="2", new=()):
        return run_pinwise("bench", "--db", db_path, "-r", runs, "--policies", "os", "--placement", "one=0",
                           "--quiet", *new, "--", *program, check=True)

    bench("/bin/true")
    second = bench("/bin/echo", "hi")
    assert "new experiment 2" in second.stderr and "beside 1 other" in second.stderr
    again = bench("/bin/true", runs="3")  # the first program's experiment, one more block
    assert "experiment 1 of" in again.stderr and "4/6 runs already recorded, 2 to run" in again.stderr
    done = bench("/bin/true", runs="3")
    assert "6/6 runs already recorded; nothing to run" in done.stderr
    bench("/bin/echo", "hi", new=("--new",))
    connection = open_db(db_path, create=False)
    found = experiments(connection)
    assert [e.label for e in found] == ["true", "echo hi", "echo hi"]
    assert [len(runs(connection, e.id)) for e in found] == [6, 4, 4]
    assert found[0].host.cpus == os.cpu_count() and found[0].shape  # the machine header's facts
    connection.close()

    out = {kind: tmp_path / f"r.{kind}" for kind in ("csv", "json", "md", "tex")}
    result = run_pinwise("report", db_path, "--export-csv", str(out["csv"]), "--export-json", str(out["json"]),
                         "--export-markdown", str(out["md"]), "--export-latex", str(out["tex"]), check=True)
    assert result.stdout.count("[wall time, baseline os") == 3 and "over 3 programs" in result.stdout
    assert result.stdout.startswith("machine: ")
    import csv
    import json

    rows = list(csv.DictReader(out["csv"].open()))
    assert [(r["experiment"], r["policy"]) for r in rows] == [(str(e), p) for e in (1, 2, 3) for p in ("os", "one")]
    assert all(float(r["min_s"]) <= float(r["median_s"]) <= float(r["max_s"]) for r in rows)
    assert all(abs(float(r["stddev_s"]) ** 2 - float(r["variance_s2"])) < 1e-12 for r in rows)
    assert {r["speedup_median"] for r in rows if r["policy"] == "os"} == {"1.0"}
    overall = list(csv.DictReader((tmp_path / "r.overall.csv").open()))
    assert [r["policy"] for r in overall] == ["os", "one"] and overall[1]["programs"] == "3"
    # to a pipe, which has no file beside it: both tables in the stream, nothing made in /dev
    piped = run_pinwise("report", db_path, "--export-csv", "/dev/stdout", check=True)
    assert "\n\npolicy,programs,geometric_mean_median_speedup," in piped.stdout, piped.stdout
    assert "wrote /dev/stdout (the overall table after" in piped.stderr and not Path("/dev/stdout.overall.csv").exists()
    document = json.loads(out["json"].read_text())
    assert [len(e["results"]) for e in document["experiments"]] == [2, 2, 2]
    assert len(document["experiments"][0]["results"][0]["times_s"]) == 3
    assert document["experiments"][0]["machine"]["cpus"] == os.cpu_count()
    assert document["overall"][1]["programs"] == 3
    markdown = out["md"].read_text()
    assert markdown.count("| `one` |") == 4 and "### over 3 programs" in markdown  # 3 programs and the overall row
    for line in (line for line in markdown.splitlines() if line.startswith("|")):
        assert line.count("|") in (9, 6), line  # every row has its table's columns
    latex = out["tex"].read_text()
    assert latex.count(r"\begin{tabular}") == latex.count(r"\end{tabular}") == 4
    for line in latex.splitlines():
        if line.endswith(r"\\") and "&" in line:
            assert line.count("&") in (7, 4), line


def test_a_time_regex_that_misses_stops_at_the_first_run(tmp_path):
    db_path = tmp_path / "regex.db"
    result = run_pinwise("bench", "--db", str(db_path), "-r", "5", "--policies", "os,compact", "--time-regex",
                         r"Elapsed: ([0-9.]+)", "--quiet", "--", PAIRS, "-r", "1")
    assert_clean_failure(result, "found nothing in the output of the first run", "Time in seconds",
                         "nothing was recorded", "pinwise bench --help")
    assert "best:" not in result.stdout and "keep the OS" not in result.stdout  # no verdict before the error
    connection = sqlite3.connect(db_path)
    assert connection.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0
    assert connection.execute("SELECT COUNT(*) FROM experiments").fetchone()[0] == 0


def test_a_time_regex_reads_the_unit_printed_with_the_number(tmp_path):
    """Google Benchmark prints "2.27 ms": that is 0.00227 s, not 2.27 s; the unit is read inside
    the group or right after it. A printed "nan" is no time: refused at the first run."""
    program = tmp_path / "gbench.sh"
    program.write_text("#!/bin/sh\necho 'Benchmark   Time   CPU   Iterations'\n"
                       "echo 'BM_fill     2.27 ms   2.26 ms   310'\necho 'BM_sum      450 ns   449 ns   1000'\n")
    program.chmod(0o755)
    for regex, seconds in ((r"BM_fill\s+([0-9.]+)", 0.00227), (r"BM_sum\s+([0-9.]+ \w+)", 450e-9),
                           (r"BM_fill\s+([0-9.]+)\s*ms", 0.00227)):
        db_path = tmp_path / f"units{seconds}.db"
        result = run_pinwise("bench", "--db", str(db_path), "-r", "2", "--policies", "os", "--time-regex", regex,
                             "--quiet", "--", str(program))
        assert result.returncode == 0, result.stderr
        connection = open_db(db_path, create=False)
        try:  # closed: an open reader would hold the file's snapshot for the next bench
            times = [r.program_time for r in runs(connection, 1)]
        finally:
            connection.close()
        assert times == [pytest.approx(seconds)] * 2, (regex, times)
    program.write_text("#!/bin/sh\necho 'BM_fill     nan ms'\n")
    result = run_pinwise("bench", "--db", str(tmp_path / "nan.db"), "-r", "2", "--policies", "os", "--time-regex",
                         r"BM_fill\s+(\S+)", "--quiet", "--", str(program))
    assert_clean_failure(result, "matched 'nan', which is not a number of seconds", "first run", "nothing was recorded")


@pytest.mark.parametrize("arguments, words", [
    (["--policies", "fastest"], ["unknown policy", "or adapt", "--placement NAME=SPEC"]),
    (["-r", "0"], ["at least 1"]),
    (["--policies", "locality"], ["--comm"]),
    (["--placement", "broken"], ["NAME=CPUS"]),
    (["--placement", "x=0,7"], ["CPU 7 does not exist"]),
    (["--time-regex", "(unclosed"], ["not a regular expression"]),
    (["--timeout", "-1"], ["--timeout", "at least 0.001"]),
    (["--timeout", "inf"], ["--timeout", "'inf' is not a number"]),
    (["-r", "1_0"], ["--runs", "not a whole number"]),
    (["-r", "\u0661"], ["--runs", "not a whole number"]),
    (["-r", "10" * 7], ["--runs", "at most 100000"]),
    (["-n", "0"], ["--threads", "at least 1"]),
    (["--confidence", "2"], ["--confidence", "at most 0.9999"]),
    (["--confidence", "nan"], ["--confidence", "not a number"]),
    (["--baseline", "nope"], ["--baseline 'nope' is none of the placements"]),
    (["--policies", "os,compact", "--comm", "COMM"], ["--comm is read only by the policies that need the matrix"]),
])
def test_bad_bench_input(tmp_path, arguments, words):
    comm = tmp_path / "m.csv"
    comm.write_text("0,1\n1,0\n")
    arguments = [str(comm) if a == "COMM" else a for a in arguments]
    result = run_pinwise("bench", "--db", str(tmp_path / "x.db"), "--quiet", *arguments, "--", "/bin/true")
    assert_clean_failure(result, *words)
    assert not (tmp_path / "x.db").exists()  # refused before anything was written


def test_unreadable_databases(tmp_path):
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not sqlite at all" * 100)
    assert_clean_failure(run_pinwise("bench", "--db", str(garbage), "-r", "1", "--quiet", "--", "/bin/true"),
                         "not a results database: it is no SQLite file; give another --db")
    refused = run_pinwise("report", str(garbage))
    assert_clean_failure(refused, "not a results database: it is no SQLite file")
    assert "--db" not in refused.stderr and ".recover" not in refused.stderr  # report takes no --db
    simulation = tmp_path / "sim.json"
    simulation.write_text('{"pinwise-simulation": 1}')
    assert_clean_failure(run_pinwise("report", str(simulation)), "it holds JSON", "--simulation FILE")
    assert_clean_failure(run_pinwise("report", str(tmp_path / "missing.db")), "does not exist")
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE t (x)")
    assert_clean_failure(run_pinwise("report", str(other)), "not a pinwise results database")


def test_report_html_renders_in_chromium(tmp_path):
    db_path = str(tmp_path / "r.db")
    run_pinwise("bench", "--db", db_path, "-r", "6", "--policies", "os,compact", "--placement", "together=1,0,0,1",
                "--time-regex", TIME_REGEX, "--quiet", "--", PAIRS, "-r", "2", check=True, timeout=300)
    html, png = tmp_path / "report.html", tmp_path / "plots"
    result = run_pinwise("report", db_path, "--html", str(html), "--png", str(png), check=True)
    assert "ran" in result.stdout and "times" in result.stdout
    assert {p.name for p in png.iterdir()} == {"times.png", "times.svg", "speedups.png", "speedups.svg"}
    text = html.read_text()
    assert "http://" not in text and "https://" not in text  # self-contained
    chromium = next((c for c in ("chromium", "chromium-browser", "google-chrome") if _which(c)), None)
    if chromium is None:
        pytest.skip("chromium is not installed (make deps installs it as root)")
    dom = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", f"file://{html}"],
                         capture_output=True, text=True, timeout=120).stdout
    assert "<title>pinwise report: rendered 2/2 images, 1 tables</title>" in dom


def _which(name):
    import shutil

    return shutil.which(name)


def test_a_busy_machine_is_named_and_the_verdict_is_inconclusive(tmp_path):
    """Two busy loops take both CPUs while the bench sleeps: the bench must see them. With 3 runs
    a placement Mann-Whitney's smallest one-sided p is 1/20, so nothing can be significant at 95%
    and the verdict must say why it cannot conclude."""
    db_path = str(tmp_path / "busy.db")
    loops = [subprocess.Popen(["yes"], stdout=subprocess.DEVNULL) for _ in range(2)]
    try:
        result = run_pinwise("bench", "--db", db_path, "-r", "3", "--policies", "os", "--placement", "one=0",
                             "--quiet", "--", "/bin/sleep", "0.2")
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    assert any(line.startswith("warning: the machine was busy during the bench (other processes used ")
               for line in lines), result.stdout
    assert lines[-1].startswith("inconclusive: the machine was busy (") and "keep the OS" not in result.stdout
    report = run_pinwise("report", db_path, check=True).stdout
    assert "inconclusive: the machine was busy" in report


def test_all_policies_keep_every_placement_whose_cpus_differ():
    """On x7550 with 8 threads spread is 0,8,16,... and scatter 0,16,32,48,2,...: both run. On one
    package of two cores, policies that give the same CPUs run once, under the first name."""
    from pinwise.bench import build_candidates
    from pinwise.bench.candidates import unique_candidates
    from pinwise.topology import load_topology, preset

    names = ["os", "compact", "scatter", "close", "spread", "random"]
    kept, aliases = unique_candidates(build_candidates(names, [], preset("x7550"), 8))
    plans = {c.name: c.plan.cpulist() for c in kept if c.plan}
    assert plans["spread"] == "0,8,16,24,32,40,48,56" and plans["scatter"] == "0,16,32,48,2,18,34,50"
    assert [c.name for c in kept] == ["os", "compact", "scatter", "spread", "random"] and aliases == {"compact": ["close"]}
    candidates = build_candidates(names, [], load_topology("pack:1 core:2 pu:1"), 4)
    kept, aliases = unique_candidates(candidates)
    by_name = {c.name: c.plan.slots for c in candidates if c.plan}
    assert aliases == {"compact": ["scatter"], "close": ["spread"]} and len(kept) == 4
    assert all(by_name[alias] == by_name[name] for name, same in aliases.items() for alias in same)
    assert len({by_name[c.name] for c in kept if c.plan}) == len([c for c in kept if c.plan])
