"""Phases in a sampled run (pinwise.phases): planted changes of partners are found, when and
between which pairs; the start and end of a run, a change of amounts and patterns without pairs
are not called phases; analyze says so, and auto benches adapt for it. (A real program whose pairs
swap half way: test_sample.)"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from types import MappingProxyType

import numpy as np
import pytest
from conftest import run_pinwise

from pinwise.comm import CommMatrix, write_comm
from pinwise.phases import phase_change

BLOCK_NS = 50_000_000


def sampled(blocks: list[dict[tuple[int, int], float]], threads: int = 4, from_ns: int = 0) -> CommMatrix:
    """A sampled trace whose time blocks hold ``blocks`` (pair -> events), each armed watchpoint
    standing for one event (so the blocks are the events as counted)."""
    matrix = np.zeros((threads, threads))
    flat = []
    for block in blocks:
        triples = []
        for (a, b), events in block.items():
            matrix[a, b] += events
            matrix[b, a] += events
            triples += [a, b, events]
        flat.append(triples)
    pairs = [[a, b, 100.0, 100.0, 0.0] for a in range(threads) for b in range(threads) if a != b]
    sampling = {"events": int(sum(sum(b.values()) for b in blocks)), "pairs": pairs, "blocks": flat,
                "block_ns": BLOCK_NS, "blocks_from_ns": from_ns}
    plain = CommMatrix(matrix, np.full(threads, 100.0))
    return replace(plain, info=replace(plain.info, backend="sample", seconds=0.05 * len(blocks),
                                       sampling=MappingProxyType(sampling)))


def noisy(pairs: dict[tuple[int, int], float], rng: np.random.Generator) -> dict[tuple[int, int], float]:
    """A block of Poisson counts around ``pairs``' means."""
    return {pair: float(rng.poisson(mean)) for pair, mean in pairs.items() if mean > 0}


FIRST = {(0, 1): 10.0, (2, 3): 10.0}
SECOND = {(0, 2): 10.0, (1, 3): 10.0}


@pytest.mark.parametrize("seed", range(5))
def test_pairs_that_swap_partners_are_a_phase_change_found_when_and_between_whom(seed):
    rng = np.random.default_rng(seed)
    comm = sampled([noisy(FIRST, rng) for _ in range(12)] + [noisy(SECOND, rng) for _ in range(8)], from_ns=7_000_000)
    change = phase_change(comm)
    assert change is not None
    assert change.at_s == pytest.approx(0.007 + 12 * 0.05) and change.block_s == 0.05 and change.blocks == 20
    assert change.before == ((0, 1), (2, 3)) and change.after == ((0, 2), (1, 3))
    assert change.kept == (1.0, 1.0) and change.crossed == (0.0, 0.0) and change.pvalue <= 0.05
    # each half's pattern read alone: four threads' pairs 0-2 1-3 are i with i + T/2
    assert change.kind == "pairs" and change.patterns == ("pairs", "far pairs")
    assert change.text().startswith("the threads change partners 0.61 s in (to a block of 0.05 s) (pairs before, far "
                                    "pairs after): pairs 0-1 2-3 carry 100% of the communication before (0% inside "
                                    "the later pairs), pairs 0-2 1-3 100% after (0% inside the earlier); permutation "
                                    "test over 20 time blocks p=")


CHAIN = {(k, k + 1): 6.0 for k in range(7)}     # 8 threads, neighbours: a matching carries 4 links of 7
FAR = {(k, k + 4): 10.0 for k in range(4)}      # then far pairs


@pytest.mark.parametrize("seed", range(3))
def test_a_neighbour_chain_that_turns_into_far_pairs_is_a_phase_change_between_partners(seed):
    """A thread of a chain has two partners: each half's matching carries about half of its
    communication, and says nothing; each half's core (its heaviest links, to 80%) does."""
    rng = np.random.default_rng(seed)
    comm = sampled([noisy(CHAIN, rng) for _ in range(10)] + [noisy(FAR, rng) for _ in range(10)], threads=8)
    change = phase_change(comm)
    assert change is not None and change.at_s == pytest.approx(0.5) and change.kind == "partners"
    assert change.patterns == ("neighbour", "far pairs") and change.after == tuple(FAR)
    assert set(change.before) <= set(CHAIN) and change.kept[0] >= 0.8 and max(change.crossed) == 0.0
    assert "(neighbour before, far pairs after): partners " in change.text()
    # the same chain throughout, its last blocks with half the threads (the others ended): no phase
    tail = {pair: events for pair, events in CHAIN.items() if pair[1] < 4}
    assert phase_change(sampled([noisy(CHAIN, rng) for _ in range(14)] + [noisy(tail, rng) for _ in range(6)],
                                threads=8)) is None


@pytest.mark.parametrize("seed", range(5))
def test_the_same_pairs_throughout_are_no_phase_even_where_a_run_ends_with_fewer_threads(seed):
    """The last blocks hold one pair, the other having ended (a real run's tail): its distance is
    as large as a phase's and not chance, but the partners are the same: no phase."""
    rng = np.random.default_rng(seed)
    comm = sampled([noisy(FIRST, rng) for _ in range(14)] + [noisy({(0, 1): 10.0}, rng) for _ in range(6)])
    assert phase_change(comm) is None


def test_a_change_of_amounts_between_the_same_pairs_is_no_phase():
    rng = np.random.default_rng(1)
    comm = sampled([noisy({(0, 1): 18.0, (2, 3): 2.0}, rng) for _ in range(10)]
                   + [noisy({(0, 1): 2.0, (2, 3): 18.0}, rng) for _ in range(10)])
    assert phase_change(comm) is None


def test_patterns_without_pairs_that_change_are_no_phase():
    """All-to-all, then master: the order matters (not chance), but neither half is held by pairs."""
    rng = np.random.default_rng(2)
    flat = {(a, b): 4.0 for a in range(4) for b in range(a + 1, 4)}
    master = {(0, b): 8.0 for b in range(1, 4)}
    blocks = [noisy(flat, rng) for _ in range(10)] + [noisy(master, rng) for _ in range(10)]
    assert phase_change(sampled(blocks)) is None


def test_blocks_in_random_order_are_no_phase():
    """The same blocks as a phase change, shuffled: pairs on both sides, but the order is chance."""
    rng = np.random.default_rng(3)
    blocks = [noisy(FIRST, rng) for _ in range(10)] + [noisy(SECOND, rng) for _ in range(10)]
    order = rng.permutation(len(blocks))
    assert phase_change(sampled([blocks[k] for k in order])) is None


def test_too_few_blocks_or_events_and_traces_without_blocks_say_nothing():
    rng = np.random.default_rng(4)
    assert phase_change(sampled([noisy(FIRST, rng) for _ in range(4)] + [noisy(SECOND, rng) for _ in range(3)])) is None
    assert phase_change(sampled([{(0, 1): 3.0, (2, 3): 3.0}] * 8 + [{(0, 2): 3.0, (1, 3): 3.0}] * 8)) is None  # 96
    traced = sampled([noisy(FIRST, rng) for _ in range(10)] + [noisy(SECOND, rng) for _ in range(10)])
    assert phase_change(replace(traced, info=replace(traced.info, backend=None, sampling=None))) is None
    for damage in ({"block_ns": "x"}, {"blocks_from_ns": None}, {"events": []}):  # a hand-edited file: no verdict
        record = MappingProxyType({**traced.info.sampling, **damage})
        assert phase_change(replace(traced, info=replace(traced.info, sampling=record))) is None


def test_analyze_names_the_phases_and_says_its_recommendation_sums_them(tmp_path):
    rng = np.random.default_rng(5)
    path = tmp_path / "phased.json"
    write_comm(sampled([noisy(FIRST, rng) for _ in range(10)] + [noisy(SECOND, rng) for _ in range(10)]), path)
    text = run_pinwise("analyze", str(path), check=True).stdout
    flat = " ".join(text.split())  # as printed, wrapped at the terminal's width
    assert re.search(r"phases: the threads change partners 0\.50 s in \(to a block of 0\.05 s\) \(pairs before, far "
                     r"pairs after\): pairs 0-1 2-3 ", flat), text
    assert re.search(r"recommended policy: \S+ .*\(for the whole run, its phases summed\): ", flat), text
    # the sum of two phases reads weak (its pairs' spread near flat): the phases say why, not the
    # trace's length; and a policy every redraw gives is not called uncertain for its pattern's sake
    assert "weak: " in flat and "Its two phases summed read as neither" in flat and "bench both" not in flat, text
    assert "(100% of redraws give this policy, whichever pattern they read)" in flat, text
    document = json.loads(run_pinwise("analyze", "--json", str(path), check=True).stdout)
    assert document["phases"]["at_s"] == 0.5 and document["phases"]["before"] == [[0, 1], [2, 3]]
    steady = tmp_path / "steady.json"
    write_comm(sampled([noisy(FIRST, rng) for _ in range(20)]), steady)
    assert "phases:" not in run_pinwise("analyze", str(steady), check=True).stdout
    assert json.loads(run_pinwise("analyze", "--json", str(steady), check=True).stdout)["phases"] is None


def test_auto_benches_adapt_where_the_trace_shows_phases(tmp_path):
    from conftest import FakeProgram

    from pinwise.auto import run_auto
    from pinwise.topology import load_topology

    rng = np.random.default_rng(6)
    phased = sampled([noisy(FIRST, rng) for _ in range(10)] + [noisy(SECOND, rng) for _ in range(10)])
    steady = sampled([noisy(FIRST, rng) for _ in range(20)])
    topology = load_topology("pack:1 core:2 pu:1")
    for comm, policies, expect in ((phased, None, True), (steady, None, False), (phased, ["compact"], False)):
        said = []
        result = run_auto(["/bin/true"], topology, progress=False, say=said.append, tracer=lambda argv, path: comm,
                          runner=FakeProgram({"os": 1.0, "other": 1.0}, 0.05), policies=policies)
        assert ("adapt" in result.candidates) == expect, said
        assert any(line.startswith("    phases: the threads change partners") for line in said) == (comm is phased)
        if policies:
            assert any(line.endswith("(add adapt to --policies to bench it)") for line in said), said


def test_a_sample_unsure_only_because_it_mixes_phases_is_kept_not_traced_again(monkeypatch):
    """auto traces a thin sample again under Valgrind; a sample whose bootstrap is unsure because
    its redraws mix two phases is kept (Valgrind's matrix, with no time blocks, would sum them);
    an unsure sample of one phase still goes to Valgrind."""
    import pinwise.confidence
    import pinwise.sample
    import pinwise.trace
    from pinwise.auto import measure_sharing
    from pinwise.confidence import PatternConfidence

    rng = np.random.default_rng(7)
    phased = sampled([noisy(FIRST, rng) for _ in range(10)] + [noisy(SECOND, rng) for _ in range(10)])
    steady = sampled([noisy(FIRST, rng) for _ in range(20)])
    unsure = PatternConfidence(0.6, 0.6, 200, 20, 400, "60% of 200 redraws of the 20 time blocks give clustered")
    traced = CommMatrix(np.ones((4, 4)) - np.eye(4))
    monkeypatch.setattr(pinwise.sample, "sampling_permitted", lambda: (True, "permitted here"))
    monkeypatch.setattr(pinwise.confidence, "pattern_confidence", lambda comm, analysis: unsure)
    monkeypatch.setattr(pinwise.trace, "trace", lambda argv, path, **options: traced)
    for comm, kept in ((phased, True), (steady, False)):
        monkeypatch.setattr(pinwise.sample, "sample", lambda argv, path, **options: comm)
        said = []
        found = measure_sharing(["/bin/true"], "unused.json", say=said.append)
        assert (found is comm) == kept and (found is traced) != kept, said
        assert any("kept, since the sample's time blocks show the phases" in line for line in said) == kept, said


def test_a_plan_made_from_a_phased_trace_says_it_serves_one_phase_at_best(tmp_path):
    rng = np.random.default_rng(8)
    phased, steady = tmp_path / "phased.json", tmp_path / "steady.json"
    write_comm(sampled([noisy(FIRST, rng) for _ in range(10)] + [noisy(SECOND, rng) for _ in range(10)]), phased)
    write_comm(sampled([noisy(FIRST, rng) for _ in range(20)]), steady)
    note = "the threads change partners 0.50 s in (pinwise analyze {} shows it): one plan for the whole trace"
    for command in (("map", "{}", "-p", "locality", "-t", "pack:1 core:2 pu:1"),
                    ("run", "--comm", "{}", "-p", "locality", "--print", "--", "true")):
        said = run_pinwise(*(part.format(phased) for part in command), check=True).stderr
        assert note.format(phased) in said, said
        assert "change partners" not in run_pinwise(*(part.format(steady) for part in command), check=True).stderr
