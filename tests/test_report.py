"""Capability 7-8: what the report says agrees with itself. Generated samples near the boundary of
significance, where the one-sided test and the bootstrap interval can disagree, must never
produce "significant" beside an interval that contains 1."""

from __future__ import annotations

import io
import re

import numpy as np

from conftest import FakeProgram
from rich.console import Console

from pinwise import stats
from pinwise.bench import BenchOptions, build_candidates, db, run_bench
from pinwise.report import summarize
from pinwise.report.terminal import heat_map_text, hyperfine_lines, summary_table
from pinwise.topology import load_topology

TOPOLOGY = load_topology("pack:1 core:2 pu:1")


def boundary_summary(tmp_path, seed: int):
    """os against a placement 3% faster under 3% noise, 12 runs each: close to the edge."""
    candidates = build_candidates(["os"], ["near=0"], TOPOLOGY, None)
    path = str(tmp_path / f"boundary{seed}.db")
    program = FakeProgram({"os": 1.0, "0": 0.97, "other": 1.0}, 0.03, seed=seed)
    experiment = run_bench(["/bin/true"], candidates, TOPOLOGY, path, BenchOptions(12, progress=False), runner=program)
    connection = db.open_db(path, create=False)
    try:
        return summarize(connection, experiment)
    finally:
        connection.close()


def test_significant_never_stands_beside_an_interval_containing_one(tmp_path):
    disagreements = 0
    for seed in range(40):
        summary = boundary_summary(tmp_path, seed)
        base, near = summary.result("os"), summary.result("near")
        raw = stats.median_test(base.times, near.times, summary.confidence)
        if raw.significant and near.median_ci.low <= 1:
            disagreements += 1  # the test alone would have said "significant"
        assert not near.median.significant or near.median_ci.low > 1
        assert not near.mean.significant or near.mean_ci.low > 1
        text = "\n".join(hyperfine_lines(summary))
        if ": significantly faster" in text:
            assert near.median_ci.low > 1, text
        assert ("best: near" in text) == near.median.significant
        console = Console(width=250, record=True, file=io.StringIO())
        console.print(summary_table(summary))
        row = next(line for line in console.export_text().splitlines() if line.strip("│ ").startswith("near"))
        decision = re.search(r"(yes|no|\?)/(yes|no)", row)
        assert decision.group(2) == ("yes" if near.median.significant else "no")
        if decision.group(2) == "yes":
            assert near.median_ci.low > 1, row
    # The samples do reach the boundary, so the rule above was exercised, not passed by luck.
    assert disagreements >= 1


def test_one_level_is_printed_with_its_correction(tmp_path):
    summary = boundary_summary(tmp_path, 0)
    assert summary.level_text() == "one-sided tests and intervals at 95%"
    summary.correction = "95% overall, Bonferroni over 3 looks x 2 candidates"
    summary.confidence = 1 - 0.05 / 6
    assert summary.level_text() == ("one-sided tests and intervals at 99.17% "
                                    "(95% overall, Bonferroni over 3 looks x 2 candidates)")


def test_heat_map_text():
    text = heat_map_text(neighbours(4))
    lines = text.splitlines()
    assert len(lines) == 5 and lines[0].startswith("  @@") and "darker" in lines[-1]
    assert "cell" in heat_map_text(np.ones((200, 200))).splitlines()[-1]


def neighbours(threads: int) -> np.ndarray:
    """Thread i talks to i + 1."""
    m = np.zeros((threads, threads))
    for i in range(threads - 1):
        m[i, i + 1] = m[i + 1, i] = 100
    return m
