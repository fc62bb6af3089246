"""Workers created in rounds: a creator that starts a few workers, joins them and starts a few more,
again and again (a thread per task or request). Found from the creator's create and join calls in
a native run (the preload library's log), checked against the traced threads, and folded to one
thread per role, the creator and one round, which is what analyze, map and run read; a trace of
more than FOLD_ABOVE threads is written folded (its counts per thread and per pair with it)."""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

import numpy as np

from .comm import MAX_MATRIX_THREADS, CommMatrix
from .errors import PinwiseError
from .plan import Rounds


def creation_rounds(spawns) -> Rounds | None:
    """The rounds of a creator's pthread_create and pthread_join calls, in its program order
    (:attr:`TraceInfo.spawns`): it creates ``size`` workers, joins every one of them, creates
    ``size`` more, at least twice, the workers numbered 1, 2, ... in creation order. ``threads``
    counts them and the creator. None for one pool that lives through the run, a round that starts
    before the last one's workers are all joined, or rounds of different sizes."""
    rounds: list[list[int]] = []
    alive: set[int] = set()
    joined_since_create = True
    for kind, thread in spawns:
        if kind == "create":
            if joined_since_create:
                if alive:  # a round starts while workers of the last one still live: no rounds
                    return None
                rounds.append([])
            rounds[-1].append(thread)
            alive.add(thread)
            joined_since_create = False
        else:
            alive.discard(thread)
            joined_since_create = True
    created = [t for r in rounds for t in r]
    sizes = {len(r) for r in rounds}
    if created != list(range(1, len(created) + 1)) or len(rounds) < 2 or len(sizes) != 1:
        return None
    return Rounds(sizes.pop(), len(rounds), len(created) + 1)


def lifetimes_in_rounds(lifetimes, size: int) -> bool:
    """Whether threads 1, 2, ... taken ``size`` at a time lived round after round: each round's
    first birth after the last end of the round before (on the tracer's clock of accesses). A
    creator that joins a round before it creates the next makes it so in every run, traced or not;
    so a trace whose lifetimes break it did not run the rounds the native run showed."""
    workers = lifetimes[1:]
    if len(workers) % size:
        return False
    rounds = [workers[k:k + size] for k in range(0, len(workers), size)]
    return all(min(born for born, _ in later) >= max(end for _, end in earlier)
               for earlier, later in zip(rounds, rounds[1:]))


def find_rounds(comm: CommMatrix) -> Rounds | None:
    """Rounds of workers that the creator (thread 0) starts and joins again and again, from the
    creation structure: the creator's pthread_create and pthread_join calls in a native run
    (:func:`creation_rounds` of :attr:`TraceInfo.spawns`, which ``pinwise trace`` records) give
    the round's size; every other thread must be the creator's own (:attr:`TraceInfo.creators`,
    where the trace has them).

    The number of rounds may differ between the native run and the trace: a benchmark harness
    that times its loop (Google Benchmark) runs far fewer under Valgrind (measured: 2,537 threads
    natively, 445 traced). Then the traced threads must make whole rounds of that size (at least
    two) that lived one after another (:func:`lifetimes_in_rounds`: joins order them in any run).

    This is the program's structure, not its timing: lifetimes alone cannot show the rounds
    (under Valgrind threads take turns, and a round's worker may end before the next is created;
    natively, a creator starved by its first workers creates the rest late). None for one pool
    that lives through the run, workers that create workers, or a matrix without the calls."""
    return rounds_in(comm.info.spawns, comm.info.creators, comm.threads, comm.info.lifetimes_traced)


def rounds_in(spawns, creators, threads: int, lives=None) -> Rounds | None:
    """:func:`find_rounds` from the parts of a trace: the creator's calls, each thread's creator,
    the threads counted and their lifetimes in the trace (None: not known)."""
    if spawns is None or threads < 3:
        return None
    if creators is not None and (len(creators) != threads or any(c != 0 for c in creators[1:])):
        return None
    native = creation_rounds(spawns)
    if native is None:
        return None
    if native.threads == threads:
        return native
    if (threads - 1) % native.size or (threads - 1) // native.size < 2 or lives is None or len(lives) != threads:
        return None
    if not lifetimes_in_rounds(lives, native.size):
        return None
    return Rounds(native.size, (threads - 1) // native.size, threads)


#: Above this many threads, a trace whose workers came in rounds is written folded to one thread
#: per role (:func:`fold_rounds`, what analyze, map and run read anyway): a program that made
#: 8,000 threads in rounds of four would otherwise write 64 million entries, nearly all of them 0.
FOLD_ABOVE = 1024


def rounds_to_write(threads: int, rounds: Rounds | None, name: str, shorter: str) -> Rounds | None:
    """The rounds a trace of ``threads`` threads is written folded by: its ``rounds`` above
    FOLD_ABOVE threads, None up to it (written per thread). More than MAX_MATRIX_THREADS threads
    that are not in rounds are refused: pinwise could not read the file (``name``: the program;
    ``shorter``: how to trace fewer of its threads)."""
    if threads <= FOLD_ABOVE:
        return None
    if rounds is None and threads > MAX_MATRIX_THREADS:
        raise PinwiseError(f"{name} made {threads:,} threads, and not in rounds of the main thread's that pinwise "
                           f"folds to one per role: a matrix of more than {MAX_MATRIX_THREADS} threads is more than "
                           f"pinwise reads; nothing written. {shorter}")
    return rounds


def fold_rounds(comm: CommMatrix, rounds: Rounds) -> CommMatrix:
    """One thread per role: the creator and one round's workers, each summing what its role did in
    every round (communication, accesses, instructions, and a sampled trace's counts per thread
    and per pair). Workers of different rounds never run together, so what they share lands on the
    diagonal, which mapping ignores."""
    roles = np.array([rounds.role(t) for t in range(comm.threads)])
    size = rounds.size + 1
    fold = np.zeros((size, comm.threads))
    fold[roles, np.arange(comm.threads)] = 1
    matrix = fold @ comm.matrix @ fold.T
    together = comm.info.instructions_together
    info = replace(comm.info, creators=None, spawns=None, lifetimes=None, lifetimes_traced=None,
                   rounds=Rounds(rounds.size, rounds.count, comm.threads),
                   instructions_together=None if together is None else tuple(summed_by(together, roles, size)),
                   hot_lines=fold_hot_lines(comm.info.hot_lines, roles, size),
                   sampling=fold_sampling(comm.info.sampling, roles, size),
                   time_blocks=fold_time_blocks(comm.info.time_blocks, roles))
    return CommMatrix(matrix, None if comm.accesses is None else fold @ comm.accesses,
                      None if comm.instructions is None else fold @ comm.instructions, info,
                      None if comm.other is None else fold @ comm.other @ fold.T)


def summed_by(values, index: np.ndarray, size: int) -> list:
    """Per-thread counts summed into ``size`` new threads, thread k into ``index[k]``."""
    total = np.bincount(index, weights=np.asarray(values, dtype=np.float64), minlength=size)
    return [int(round(v)) for v in total]


def _pairs_summed(records, index: np.ndarray, columns: int) -> dict:
    """Records (a, b, value...) with a and b renumbered by ``index``, the values of the records that
    become the same pair added up."""
    summed: dict[tuple[int, int], list[float]] = {}
    for a, b, *values in records:
        key = (int(index[int(a)]), int(index[int(b)]))
        found = summed.setdefault(key, [0.0] * columns)
        for k, v in enumerate(values):
            found[k] += float(v)
    return summed


def fold_hot_lines(lines, index: np.ndarray, size: int):
    """Hot lines with thread k counted as thread ``index[k]`` (of ``size``): reads and writes
    summed, pairs renumbered (a pair that becomes one thread is dropped: it is on the diagonal)."""
    if not lines:
        return lines
    folded = []
    for line in lines:
        pairs: dict[tuple[int, int], int] = {}
        for a, b, n in line.pairs:
            i, j = sorted((int(index[a]), int(index[b])))
            if i != j:
                pairs[(i, j)] = pairs.get((i, j), 0) + n
        folded.append(replace(line, reads=tuple(summed_by(line.reads, index, size)),
                              writes=tuple(summed_by(line.writes, index, size)),
                              pairs=tuple((i, j, n) for (i, j), n in sorted(pairs.items()))))
    return tuple(folded)


def _blocks_summed(blocks, index: np.ndarray) -> list[list]:
    """Time blocks of flat (a, b, events) triples with the threads renumbered by ``index``, the
    events of the triples that become one pair added up (a pair that becomes one thread is on the
    diagonal, which mapping and pinwise.phases ignore)."""
    return [[v for (a, b), (events,) in sorted(_pairs_summed((block[k:k + 3] for k in range(0, len(block) - 2, 3)),
                                                              index, 1).items()) for v in (a, b, events)]
            for block in blocks]


def fold_time_blocks(time_blocks, index: np.ndarray):
    """The Valgrind tracer's time blocks (:attr:`TraceInfo.time_blocks`) with thread k counted as
    thread ``index[k]``."""
    if time_blocks is None:
        return None
    return MappingProxyType({**time_blocks, "blocks": _blocks_summed(time_blocks["blocks"], index)})


def fold_sampling(sampling, index: np.ndarray, size: int):
    """A sampled trace's own fields (:attr:`TraceInfo.sampling`) with thread k counted as thread
    ``index[k]`` of ``size``: a permutation renumbers them, a folding sums them (samples, reads,
    writes per thread; draws, arms and hits per pair; hits per pair in each time block). A folded
    thread keeps the first thread id it stands for and the highest switching rate (the one that
    decides whether its watchpoints were rationed)."""
    if sampling is None:
        return None
    folded = dict(sampling)
    for key in ("samples_per_thread", "reads", "writes"):
        if key in sampling:
            folded[key] = summed_by(sampling[key], index, size)
    first = {}
    for k, tid in enumerate(sampling.get("tids", ())):
        first.setdefault(int(index[k]), tid)
    if "tids" in sampling:
        folded["tids"] = [first.get(k, -1) for k in range(size)]
    if sampling.get("switch_rates"):
        rates = [-1.0] * size
        for k, rate in enumerate(sampling["switch_rates"]):
            rates[int(index[k])] = max(rates[int(index[k])], float(rate))
        folded["switch_rates"] = rates
    pairs = _pairs_summed(sampling.get("pairs", ()), index, 3)
    folded["pairs"] = [[a, b, int(round(o)), int(round(m)), h] for (a, b), (o, m, h) in sorted(pairs.items())]
    folded["blocks"] = _blocks_summed(sampling.get("blocks", ()), index)  # flat (a, b, hits) triples
    return MappingProxyType(folded)