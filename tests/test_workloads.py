"""Capabilities 9 and 10: the workloads show their patterns; auto and demo run end to end."""

from __future__ import annotations

import os
import shutil

import pytest
from conftest import assert_clean_failure, run_pinwise

from pinwise.patterns import analyze
from pinwise.comm import read_comm
from pinwise.trace import TOOL
from pinwise.workloads import WORKLOADS, workload_command

needs_tracer = pytest.mark.skipif(shutil.which("valgrind") is None or not TOOL.exists(),
                                  reason="Valgrind or pinwise's Valgrind tool is missing")
needs_two_cpus = pytest.mark.skipif(sorted(os.sched_getaffinity(0))[:2] != [0, 1], reason="needs CPUs 0 and 1")

EXPECTED = {"pairs": "pairs", "neighbour": "neighbour", "far-pairs": "far pairs", "master": "master/reduction",
            "pipeline": "pipeline", "all-to-all": "all-to-all", "private": "none"}


@needs_tracer
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_workload_shows_its_pattern(tmp_path, name):
    out = tmp_path / f"{name}.json"
    run_pinwise("trace", "-o", str(out), "--", *workload_command(name, threads=8, iterations=2000), check=True,
                timeout=300)
    assert analyze(read_comm(out)).pattern == EXPECTED[name]


def test_workload_cli():
    listing = run_pinwise("workload", "list", check=True).stdout
    assert all(name in listing for name in WORKLOADS)
    result = run_pinwise("workload", "run", "all-to-all", "-n", "3", "-i", "50", check=True)
    assert "Time in seconds =" in result.stdout
    printed = run_pinwise("workload", "run", "pairs", "--print", check=True).stdout.split()
    assert printed[1:3] == ["pairs", "-n"]
    assert_clean_failure(run_pinwise("workload", "run", "nosuch"), "unknown workload")
    # the blog's program: an idle main thread and pairs, none of patterns.c's knobs
    assert run_pinwise("workload", "run", "blog-pairs", "--print", check=True).stdout.split()[1:] == ["-p", "2", "-r",
                                                                                                     "20"]
    assert run_pinwise("workload", "run", "blog-pairs", "-n", "7", "--print", check=True).stdout.split()[1:3] == \
        ["-p", "3"]
    assert_clean_failure(run_pinwise("workload", "run", "blog-pairs", "-n", "4"), "1 + 2 per pair", "not 4")
    assert_clean_failure(run_pinwise("workload", "run", "blog-pairs", "--size", "8"), "--size does not apply")
    assert_clean_failure(run_pinwise("workload", "run", "pairs", "--shared-ratio", "2"), "--shared-ratio", "at most 1")
    assert_clean_failure(run_pinwise("workload", "run"), "which workload")


def test_auto_bad_input():
    assert_clean_failure(run_pinwise("auto"), "no program")
    assert_clean_failure(run_pinwise("auto", "--budget", "0", "--", "/bin/true"), "budget")


@needs_tracer
@needs_two_cpus
def test_demo_quick_writes_the_report(tmp_path):
    out = tmp_path / "demo"
    result = run_pinwise("demo", "--quick", "--out", str(out), timeout=600)
    assert result.returncode == 0, result.stderr
    assert (out / "report.html").exists() and (out / "results.db").exists()
    assert list((out / "plots").glob("*.png")) and list(out.glob("*.heatmap.png"))
    for step in ("1. the machine", "2. tracing", "3. analysis in plain words", "4. mapping", "5. benchmarking",
                 "in plain words:", "report:"):
        assert step in result.stdout


def test_the_old_thread_option_is_refused_with_the_new_one_named():
    assert_clean_failure(run_pinwise("workload", "run", "pairs", "-t", "4", "--print"), "-t 4", "thread count is -n")
