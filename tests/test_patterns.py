"""Patterns of the papers, the recommended policy, and ``pinwise analyze``."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import assert_clean_failure, run_pinwise

from pinwise.comm import CommMatrix
from pinwise.patterns import analyze


def comm_of(matrix, accesses=None, instructions=None):
    return CommMatrix(np.array(matrix, dtype=float), None if accesses is None else np.array(accesses, dtype=float),
                      None if instructions is None else np.array(instructions, dtype=float))


def band(t, offset):
    m = np.zeros((t, t))
    for i in range(t - offset):
        m[i, i + offset] = m[i + offset, i] = 100
    return m


@pytest.mark.parametrize("matrix, pattern", [
    (band(8, 1), "neighbour"),
    (band(8, 4), "far pairs"),
    (np.ones((8, 8)) - np.eye(8), "all-to-all"),
    (np.zeros((4, 4)), "none"),
])
def test_patterns(matrix, pattern):
    assert analyze(comm_of(matrix)).pattern == pattern


def test_master_pairs_and_pipeline_patterns():
    master = np.zeros((6, 6))
    master[0, 1:] = master[1:, 0] = 50
    assert analyze(comm_of(master)).pattern == "master/reduction"
    pairs = np.zeros((8, 8))
    for a, b in [(0, 3), (1, 6), (2, 5), (4, 7)]:
        pairs[a, b] = pairs[b, a] = 90
    result = analyze(comm_of(pairs))
    assert result.pattern == "pairs" and result.policy == "locality"
    pipeline = band(8, 1)
    pipeline[3, 4] = pipeline[4, 3] = 400
    result = analyze(comm_of(pipeline, instructions=[1, 1, 1, 1, 3, 1, 1, 1]))
    assert result.pattern == "pipeline" and result.policy == "balanced-locality"


def test_recommendations_follow_the_metrics():
    assert analyze(comm_of(np.ones((8, 8)) - np.eye(8))).policy == "scatter"          # flat
    private = comm_of(band(4, 1) * 0.001, accesses=[1e6] * 4)
    assert analyze(private).pattern == "none" and analyze(private).policy == "scatter"
    master = np.zeros((6, 6))
    master[0, 1:] = master[1:, 0] = 50
    assert analyze(comm_of(master)).policy == "balance"                               # imbalanced, no groups


def test_analyze_cli_and_map_auto(tmp_path):
    path = tmp_path / "pairs.json"
    m = np.zeros((8, 8), dtype=int)
    for a, b in [(0, 5), (1, 6), (2, 7), (3, 4)]:
        m[a, b] = m[b, a] = 100
    path.write_text(json.dumps({"format": "pinwise-comm", "version": 1, "threads": 8, "matrix": m.tolist(),
                                "accesses": [1000] * 8}))
    png = tmp_path / "heat.png"
    out = run_pinwise("analyze", str(path), "--png", str(png), check=True).stdout
    assert "HComm" in out and "pattern: pairs" in out and "recommended policy: locality" in out
    assert png.read_bytes()[:4] == b"\x89PNG"
    result = run_pinwise("map", str(path), "-t", "core2", "--policy", "auto", "-f", "cpulist", check=True)
    assert "auto: pairs pattern -> locality" in result.stderr


def test_corrupt_matrix_file(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{"format": "pinwise-comm", "matrix": [[0, 1], [1')
    assert_clean_failure(run_pinwise("analyze", str(path)), "not valid JSON")
