"""Communication matrices: workers created in rounds found from planted lifetimes, and folded to
one thread per role; the mapping of a folded matrix repeats from the first worker's slot."""

from __future__ import annotations

import json
from dataclasses import replace
from types import MappingProxyType

import pytest
from conftest import in_rounds

from pinwise.errors import PinwiseError
from pinwise.comm import CommMatrix, HotLine, Rounds, parse_comm
from pinwise.rounds import find_rounds, fold_rounds
from pinwise.metrics import block_matrices
from pinwise.mapping import compute_mapping, idle_creator
from pinwise.topology import load_topology


def test_rounds_are_found_from_the_creators_calls():
    assert find_rounds(in_rounds(4, 5)) == Rounds(4, 5, 21)
    assert find_rounds(in_rounds(2, 3)) == Rounds(2, 3, 7)
    assert find_rounds(in_rounds(1, 4)) == Rounds(1, 4, 5)           # one worker at a time
    assert find_rounds(in_rounds(4, 5, overlap=True)) is None       # a round began while workers lived
    assert find_rounds(in_rounds(4, 1)) is None                     # one pool for the whole run


def test_no_rounds_without_the_calls_or_with_other_creators():
    plain = in_rounds(4, 3)
    assert find_rounds(CommMatrix(plain.matrix)) is None
    comm = in_rounds(4, 3)
    creators = list(comm.info.creators)
    creators[5] = 2                                                 # a worker created a worker
    assert find_rounds(replace(comm, info=replace(comm.info, creators=tuple(creators)))) is None
    spawns = list(comm.info.spawns)                                 # round 1 is 3 + 5 threads
    spawns.insert(spawns.index(("create", 5)) + 1, spawns.pop(spawns.index(("join", 4))))
    assert find_rounds(replace(comm, info=replace(comm.info, spawns=tuple(spawns)))) is None


def _traced_lives(comm, ends_late=()):
    """``comm``'s threads as Valgrind runs a round at a time: round r's workers live over
    [100 r + 1, 100 r + 50] on the access clock; a worker in ``ends_late`` ends in the next round."""
    lives = [(0, 10_000)] + [(100 * ((t - 1) // 4) + 1, 100 * ((t - 1) // 4) + (150 if t in ends_late else 50))
                             for t in range(1, comm.threads)]
    return replace(comm, info=replace(comm.info, lifetimes_traced=tuple(lives)))


def test_rounds_are_found_when_the_native_run_made_more_of_them():
    """A harness that times its loop runs more rounds natively (whose calls the spawns hold) than
    under the tracer: the traced threads are rounds of the native round's size if they make whole
    rounds that lived one after another; otherwise no rounds (and pinwise trace says why)."""
    native = in_rounds(4, 9)                                        # 37 threads natively
    traced = in_rounds(4, 3)
    comm = _traced_lives(replace(traced, info=replace(traced.info, spawns=native.info.spawns)))
    assert find_rounds(comm) == Rounds(4, 3, 13)
    assert fold_rounds(comm, find_rounds(comm)).matrix[1, 2] == 3003
    assert find_rounds(_traced_lives(comm, ends_late=(6,))) is None  # round 2 began before 6 ended
    no_lives = replace(comm, info=replace(comm.info, lifetimes_traced=None))
    assert find_rounds(no_lives) is None                            # nothing to check the trace by
    odd = in_rounds(2, 6)                                           # 13 threads, rounds of 2 natively ...
    mixed = _traced_lives(replace(odd, info=replace(odd.info, spawns=in_rounds(3, 5).info.spawns)))
    assert find_rounds(mixed) is None                               # ... 12 workers are 4 rounds of 3? not in these lives
    one = in_rounds(4, 1)
    assert find_rounds(_traced_lives(replace(one, info=replace(one.info, spawns=native.info.spawns)))) is None


def test_trace_info_survives_a_file_and_refuses_damaged_fields():
    comm = in_rounds(4, 3)
    again = parse_comm(comm.to_json())
    assert again.info == comm.info and find_rounds(again) == Rounds(4, 3, 13)
    document = json.loads(comm.to_json())
    document["site"] = {"cluster": "x"}                             # unknown keys are kept as they are
    assert parse_comm(json.dumps(document)).info.extra == {"site": {"cluster": "x"}}
    assert json.loads(parse_comm(json.dumps(document)).to_json())["site"] == {"cluster": "x"}
    for key, value in (("spawns", [["fork", 1]]), ("creators", ["main"]), ("partial", "yes"),
                       ("total_accesses", True), ("rounds", {"size": 4}), ("window", {"lines": 3})):
        damaged = dict(document, **{key: value})
        with pytest.raises(PinwiseError, match=f'"{key}" has an unexpected value'):
            parse_comm(json.dumps(damaged), "c.json")
    for threads in ("5", 5.0, True):  # the count of threads is a whole number, or it is named as wrong
        with pytest.raises(PinwiseError, match=f'c.json: "threads" is {json.dumps(threads)}, not a whole number'):
            parse_comm(json.dumps(dict(document, threads=threads)), "c.json")


def test_folding_sums_each_role_over_the_rounds():
    comm = in_rounds(4, 3)
    folded = fold_rounds(comm, find_rounds(comm))
    assert folded.threads == 5
    # pairs (1,2) and (3,4) in every round: 1000 + 1001 + 1002
    assert folded.matrix[1, 2] == folded.matrix[3, 4] == 3003
    assert folded.matrix[1, 3] == 0 and folded.matrix.sum() == 4 * 3003
    assert folded.instructions.tolist() == [50, 3e4, 3e4, 3e4, 3e4]
    assert folded.info.rounds == Rounds(4, 3, 13)
    assert folded.info.spawns is None and folded.info.creators is None
    assert parse_comm(folded.to_json()).info.rounds == Rounds(4, 3, 13)


def _sampled_in_rounds(size: int, count: int) -> CommMatrix:
    """in_rounds(size, count) as the sampler measures it: 10 events of each pair in each round,
    a round a time block, each watchpoint an event; a hot line carries round r's pair (1, 2)."""
    comm = in_rounds(size, count)
    pairs, blocks = [], []
    for r in range(count):
        first = 1 + r * size
        block = []
        for j in range(0, size - 1, 2):
            a, b = first + j, first + j + 1
            pairs += [[a, b, 20, 10, 10.0], [b, a, 20, 10, 10.0]]
            block += [a, b, 10.0, b, a, 10.0]
        blocks.append(block)
    threads = comm.threads
    reads = [0] * threads
    reads[1] = reads[1 + size] = 7
    hot = HotLine(0x1000, 20, "counter", None, None, tuple(reads), (0,) * threads, ((1, 2, 10), (1 + size, 2 + size, 10)))
    sampling = {"events": 10 * size * count, "pairs": pairs, "blocks": blocks, "block_ns": 50_000_000,
                "samples_per_thread": [3] + [20] * (threads - 1), "reads": reads, "writes": [0] * threads,
                "tids": list(range(100, 100 + threads)), "switch_rates": [5.0] * threads}
    return replace(comm, info=replace(comm.info, backend="sample", hot_lines=(hot,),
                                      sampling=MappingProxyType(sampling)))


def test_folding_a_sampled_trace_folds_its_own_counts_with_its_matrix():
    """The sampler's counts per thread, per pair and per time block, and the hot lines' threads,
    fold by role as the matrix does: the time blocks still read the noise of the folded matrix
    (the same thread numbers), where before they named threads it no longer had."""
    comm = _sampled_in_rounds(4, 3)
    folded = fold_rounds(comm, find_rounds(comm))
    sampling = folded.info.sampling
    assert sampling["samples_per_thread"] == [3, 60, 60, 60, 60] and sampling["reads"] == [0, 14, 0, 0, 0]
    assert sampling["tids"] == [100, 101, 102, 103, 104] and len(sampling["switch_rates"]) == 5
    assert sorted(map(tuple, sampling["pairs"])) == [(1, 2, 60, 30, 30.0), (2, 1, 60, 30, 30.0),
                                                      (3, 4, 60, 30, 30.0), (4, 3, 60, 30, 30.0)]
    assert all(len(block) == 12 and max(block[0::3] + block[1::3]) <= 4 for block in sampling["blocks"])
    blocks = block_matrices(folded)
    assert blocks is not None and len(blocks) == 3 and all(m.shape == (5, 5) for m in blocks)
    assert folded.info.hot_lines[0].reads == (0, 14, 0, 0, 0) and folded.info.hot_lines[0].pairs == ((1, 2, 20),)
    assert block_matrices(comm) is not None and block_matrices(comm)[0].shape == (13, 13)


def test_mapping_a_matrix_in_rounds_plans_one_round_and_repeats_from_slot_1():
    comm = in_rounds(4, 3)
    mapping = compute_mapping("locality", comm, load_topology("pack:1 core:2 pu:1"))
    assert mapping.nb_slots == 5 and mapping.rounds.threads == 13
    pus = mapping.pus
    assert pus[1] == pus[2] and pus[3] == pus[4] and pus[1] != pus[3]  # each pair on one PU
    assert pus[0] == pus[4]                                          # the idle creator beside the last pair
    plan = mapping
    assert plan.repeat_from == 1
    assert [plan.cpus_for_slot(k)[0] for k in range(13)] == [pus[0]] + list(pus[1:]) * 3


@pytest.mark.parametrize("main_work, idle", [(50.0, True), (9e2, True), (2e3, False), (1e4, False)])
def test_creator_is_idle_below_a_tenth_of_a_worker(main_work, idle):
    comm = in_rounds(4, 1)
    comm.instructions[0] = main_work
    assert idle_creator(comm) is idle
    # What it executed while its workers lived counts, not the program's start-up.
    comm = replace(comm, info=replace(comm.info, instructions_together=(10,) + (10_000,) * 4))
    assert idle_creator(comm)


def test_the_samplers_quiet_record_is_read_and_said_in_words():
    """pw_sample.c's "quiet" line: how long the clock sampled slower while nothing trapped, read
    into the sampling record; said only from a tenth of a second, in periods of the base one."""
    from pinwise.sample import _quiet_fields, quiet_words

    fields = _quiet_fields("period-ns 4000000 deepest-ns 16000000 seconds 0.487 spells 1".split())
    assert fields == {"quiet_s": 0.487, "quiet_period_ns": 4_000_000, "quiet_deepest_ns": 16_000_000}
    assert quiet_words({"period_ns": 1_000_000, **fields}) == "4x to 16x less often for 0.5 s"
    assert quiet_words({"period_ns": 1_000_000, **fields, "quiet_deepest_ns": 4_000_000}) == "4x less often for 0.5 s"
    assert quiet_words({"period_ns": 1_000_000, **fields, "quiet_s": 0.05}) is None
    assert _quiet_fields("off (per-task: the threads' inherited events keep the period they were made with)".split()) \
        == {"quiet_off": True}
    assert _quiet_fields([]) == {} and quiet_words({"period_ns": 1_000_000}) is None


def test_the_valgrind_tracers_time_blocks_are_read_kept_in_the_file_and_folded(tmp_path):
    """pw_main.c's "blocks N LEN" record: each block's events per pair a < b, read into
    TraceInfo.time_blocks, written and read back with the matrix, summed where rounds fold threads
    into roles; a damaged record is refused."""
    import numpy as np

    from pinwise.comm import TraceInfo, read_comm, write_comm
    from pinwise.metrics import time_block_matrices
    from pinwise.rounds import fold_time_blocks
    from pinwise.trace import _time_blocks

    blocks = _time_blocks(["blocks 2 1048576", "block 0 1 5 2 3 7", "block 0 2 4"], 4)
    assert blocks["accesses"] == 1048576 and blocks["blocks"] == [[0, 1, 5.0, 2, 3, 7.0], [0, 2, 4.0]]
    for damaged in (["blocks 2 1048576", "block 0 1 5"], ["blocks 1 1048576", "block 0 9 5"], ["blocks 1 0", "block"],
                    ["blocks 1 10", "block 0 1"], ["blocks 1 10", "hot 0 1 2"]):
        with pytest.raises(ValueError):
            _time_blocks(damaged, 4)
    assert _time_blocks([], 4) is None and _time_blocks(["something else"], 4) is None
    matrix = np.zeros((4, 4))
    for a, b, events in ((0, 1, 5.0), (2, 3, 7.0), (0, 2, 4.0)):
        matrix[a, b] = matrix[b, a] = events
    comm = CommMatrix(matrix, np.full(4, 100.0), info=TraceInfo(time_blocks=blocks))
    assert np.array_equal(sum(time_block_matrices(comm)), matrix)
    write_comm(comm, tmp_path / "c.json")
    again = read_comm(tmp_path / "c.json")
    assert dict(again.info.time_blocks) == dict(blocks)
    assert fold_time_blocks(blocks, np.array([0, 1, 1, 2]))["blocks"] == [[0, 1, 5.0, 1, 2, 7.0], [0, 1, 4.0]]
    document = json.loads((tmp_path / "c.json").read_text())
    document["time_blocks"]["accesses"] = 0
    with pytest.raises(PinwiseError, match='"time_blocks" has an unexpected value'):
        parse_comm(json.dumps(document), "c.json")
