"""Diener et al.'s metrics, by hand on small matrices, and one CommV everywhere."""

from __future__ import annotations

import numpy as np
import pytest

from pinwise import metrics as eq
from pinwise.comm import CommMatrix
from pinwise.mapping import mapping_cost
from pinwise.metrics import metrics
from pinwise.topology import parse_synthetic


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


def test_one_commv_for_the_metrics_and_the_policies():
    """A value on the diagonal (a thread with itself) is no communication: BComm, the cost
    model's per-object load and the Balance policy read the same CommV."""
    flat = np.ones((4, 4)) - np.eye(4)
    with_diagonal = flat.copy()
    with_diagonal[0, 0] = 50
    assert eq.comm_v(with_diagonal).tolist() == eq.comm_v(flat).tolist() == [3, 3, 3, 3]
    assert metrics(comm_of(with_diagonal)).bcomm == metrics(comm_of(flat)).bcomm == 0
    assert metrics(comm_of(with_diagonal)).hcomm == metrics(comm_of(flat)).hcomm
    machine = parse_synthetic("pack:2 core:2 pu:1")
    assert mapping_cost(with_diagonal, machine, [0, 1, 2, 3]).imbalance == mapping_cost(flat, machine, [0, 1, 2, 3]).imbalance


def test_each_equation_by_hand():
    m = np.array([[0, 6, 0], [6, 0, 3], [0, 3, 0]], dtype=float)
    assert eq.acomm(m) == pytest.approx(18 / 9)                         # (3)
    assert eq.rcomm(m, [10, 20, 30]) == pytest.approx(2 / 60)           # (4)
    assert eq.rcomm(m, None) is None
    assert eq.bcomm([6, 9, 3]) == pytest.approx((9 / 6 - 1) * 100)      # (2)
    assert eq.bcomm([0, 0]) == 0
    assert eq.hcomm(m) == pytest.approx(np.mean([np.var([0, 100, 0]), np.var([100, 0, 50]),
                                                 np.var([0, 50, 0])]))  # (1), Mnorm = M / 6 * 100
    assert eq.hcomm(np.zeros((3, 3))) == 0
    assert eq.heterogeneity(m) == pytest.approx(np.mean([np.var([100, 0]), np.var([100, 50]), np.var([0, 50])]))


def _sampled(blocks: list[list[float]]):
    """A sampled 4-thread chain 0-1-2-3 (BComm 33 % as counted) of 120 events, each armed watchpoint
    standing for one event, whose time blocks are ``blocks`` ([a, b, hits, ...] each)."""
    from dataclasses import replace
    from types import MappingProxyType

    matrix = np.zeros((4, 4))
    for a in range(3):
        matrix[a, a + 1] = matrix[a + 1, a] = 40.0
    pairs = [[a, b, 100.0, 100.0, 0.0] for a in range(4) for b in range(4) if a != b]
    comm = comm_of(matrix, accesses=[100.0] * 4)
    sampling = {"events": 120, "pairs": pairs, "blocks": blocks, "block_ns": 50_000_000}
    return replace(comm, info=replace(comm.info, backend="sample", sampling=MappingProxyType(sampling)))


def test_a_samples_bursty_time_blocks_count_as_its_noise():
    """The traps of a sample come in bursts, so the Poisson count understates its noise: where the
    time blocks spread more than it (each block's 12 events all on one edge, drawn in turn), their
    spread shrinks BComm further; blocks that agree (each a tenth of every edge) leave the Poisson
    correction as it is, as do too few blocks to read a spread from."""
    even = metrics(_sampled([[0, 1, 4.0, 1, 2, 4.0, 2, 3, 4.0]] * 10))
    bursty = metrics(_sampled([[edge, edge + 1, 12.0] for edge in (0, 1, 2, 0, 1, 2, 0, 1, 2, 1)]))
    few = metrics(_sampled([[edge, edge + 1, 30.0] for edge in (0, 1, 2, 1)]))
    assert even.bcomm_observed == bursty.bcomm_observed == pytest.approx(100 * (80 / 60 - 1))
    assert few.bcomm == even.bcomm and 0 < even.bcomm < even.bcomm_observed
    assert bursty.bcomm < even.bcomm


def test_a_pattern_in_what_the_spin_waits_leave_is_only_as_sure_as_what_they_leave():
    """A sampled barrier line that every thread shares carries 540 of 570 events (an OpenMP
    stencil spinning at its barrier, OMP_WAIT_POLICY=active); thread 0 has the 30 left. The
    analysis sets the line aside, so its pattern rests on about a twentieth of the 200 traps: the
    redraws, which scale each pair by the share the line left it, agreed on "master/reduction" in
    97 % of them in a real trace of the stencil. Now the confidence says how few are left; the same
    matrix without the hot line is judged."""
    from dataclasses import replace
    from types import MappingProxyType

    from pinwise.comm import HotLine
    from pinwise.confidence import pattern_confidence
    from pinwise.patterns import analyze

    matrix = np.full((4, 4), 90.0)
    matrix[0, 1:] = matrix[1:, 0] = 100.0
    np.fill_diagonal(matrix, 0.0)
    block = []
    for a in range(4):
        for b in range(a + 1, 4):
            block += [a, b, 10.0 if a == 0 else 9.0]
    pairs = [[a, b, 100 / 3, 100 / 3, 0.0] for a in range(4) for b in range(4) if a != b]
    sampling = {"events": 200, "pairs": pairs, "blocks": [block] * 10, "block_ns": 50_000_000}
    barrier = HotLine(0x1000, 540, "[heap]+0x1000", None, None, (30,) * 4, (2,) * 4,
                      tuple((a, b, 90) for a in range(4) for b in range(a + 1, 4)))
    plain = CommMatrix(matrix, np.full(4, 100.0))
    comm = replace(plain, info=replace(plain.info, backend="sample", hot_lines=(barrier,),
                                       sampling=MappingProxyType(sampling)))
    found = analyze(comm)
    assert found.spin_lines == (barrier,)
    sure = pattern_confidence(comm, found)
    assert sure.pattern_agreement is None and sure.events == 200, sure
    assert sure.reason.startswith("about 11 of the 200 event(s) sampled are left once the spin-wait is set aside"), sure
    unspun = replace(comm, info=replace(comm.info, hot_lines=()))
    assert pattern_confidence(unspun, analyze(unspun)).pattern_agreement is not None


def test_a_sampled_matrixs_metrics_are_told_as_corrected_beside_their_counted_values():
    """analyze --json gives a sampled matrix's heterogeneity and BComm less its own noise, and as
    counted beside them (the table says the same); a traced matrix has no counted values apart."""
    from pinwise.patterns import analyze

    sampled = analyze(_sampled([[0, 1, 4.0, 1, 2, 4.0, 2, 3, 4.0]] * 10)).to_document()
    assert sampled["bcomm_counted"] == pytest.approx(100 * (80 / 60 - 1)) and sampled["bcomm"] < sampled["bcomm_counted"]
    assert sampled["hcomm_offdiagonal_counted"] >= sampled["hcomm_offdiagonal"]
    traced = analyze(CommMatrix(np.array([[0, 5.0], [5.0, 0]]), np.array([10.0, 10.0]))).to_document()
    assert traced["bcomm_counted"] is None and traced["hcomm_offdiagonal_counted"] is None
