"""Capability 4: Diener et al.'s metrics by hand, their invariances, patterns and recommendations."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import assert_clean_failure, run_pinwise

from pinwise.analyze import analyze, heat_map_text, metrics
from pinwise.comm import CommMatrix


def comm_of(matrix, accesses=None, instructions=None):
    return CommMatrix(np.array(matrix, dtype=float), None if accesses is None else np.array(accesses, dtype=float),
                      None if instructions is None else np.array(instructions, dtype=float))


def test_metrics_by_hand_two_threads():
    found = metrics(comm_of([[0, 2], [2, 0]], accesses=[10, 10], instructions=[100, 300]))
    assert found.hcomm == pytest.approx(2500)         # each row [0, 100]: population variance 2500
    assert found.bcomm == pytest.approx(0)
    assert found.acomm == pytest.approx(4 / 4)
    assert found.rcomm == pytest.approx(1 / 20)
    assert found.load_balance == pytest.approx((300 / 200 - 1) * 100)


def test_metrics_by_hand_three_threads():
    found = metrics(comm_of([[0, 4, 0], [4, 0, 2], [0, 2, 0]]))
    rows = [np.var([0, 100, 0]), np.var([100, 0, 50]), np.var([0, 50, 0])]  # diagonal included
    assert found.hcomm == pytest.approx(sum(rows) / 3)
    assert found.hcomm == pytest.approx((2222.222 + 1666.667 + 555.556) / 3, rel=1e-5)
    assert found.bcomm == pytest.approx((6 / 4 - 1) * 100)
    assert found.acomm == pytest.approx(12 / 9)


def test_scaling_and_permuting_change_nothing():
    rng = np.random.default_rng(1)
    m = rng.integers(0, 50, (6, 6)).astype(float)
    m = m + m.T
    np.fill_diagonal(m, 0)
    accesses = rng.integers(1000, 2000, 6).astype(float)
    base = metrics(comm_of(m, accesses))
    scaled = metrics(comm_of(m * 7.5, accesses))
    assert (scaled.hcomm, scaled.bcomm) == (pytest.approx(base.hcomm), pytest.approx(base.bcomm))
    order = rng.permutation(6)
    permuted = metrics(comm_of(m[np.ix_(order, order)], accesses[order]))
    for name in ("hcomm", "bcomm", "acomm", "rcomm", "heterogeneity"):
        assert getattr(permuted, name) == pytest.approx(getattr(base, name))


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


def test_heat_map_text():
    text = heat_map_text(band(4, 1))
    lines = text.splitlines()
    assert len(lines) == 5 and lines[0].startswith("  @@") and "darker" in lines[-1]
    assert "cell" in heat_map_text(np.ones((200, 200))).splitlines()[-1]


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
