"""Contending pairs (:mod:`pinwise.adapt`): two threads that spend most of their accesses on a line
the other touches, which run faster taking turns on one CPU than bouncing the line between two."""

from __future__ import annotations

import numpy as np

#: Contending pairs (:func:`contending_pairs`): the share of each thread's address samples on
#: lines its partner touched, and the share of its communication that goes to that partner.
CONTENDED_SHARE = 0.5
PARTNER_SHARE = 0.8
#: A thread with fewer address samples than this share of the busiest thread's is idle (a creator
#: waiting in join) and has no say in whether the others contend.
IDLE_SHARE = 0.1


def contending_pairs(directed: np.ndarray, accesses: np.ndarray, alive: list[int]) -> list[tuple[int, int]] | None:
    """The pairs of threads that spend most of their accesses on lines the other touches (two
    threads hammering one counter, a ping-pong), when every busy thread is in one: each thread's
    partner is the one it communicates with most, mutually, with at least PARTNER_SHARE of its
    communication and CONTENDED_SHARE of its address samples. Such a pair runs faster taking turns
    on one CPU than bouncing the line between two: the thread-affinity blog's hand pinning
    (benchmarks/programs/creator_pairs.c; on a 16-core Xeon 2.2x the OS's speed, where spreading
    the pairs over cores that share only an L3 gains nothing). None otherwise; idle threads
    (IDLE_SHARE) are not counted."""
    alive = [k for k in alive if k < len(accesses)]
    if len(alive) < 2:
        return None
    busiest = max(accesses[k] for k in alive)
    busy = [k for k in alive if busiest > 0 and accesses[k] >= IDLE_SHARE * busiest]
    if len(busy) < 2 or len(busy) % 2:
        return None
    comm = directed + directed.T
    partner = {}
    for i in busy:
        others = [j for j in busy if j != i]
        j = max(others, key=lambda j: comm[i, j])
        total = sum(comm[i, o] for o in others)
        if total <= 0 or comm[i, j] < PARTNER_SHARE * total or directed[i, j] < CONTENDED_SHARE * accesses[i]:
            return None
        partner[i] = j
    if any(partner[partner[i]] != i for i in busy):
        return None
    return sorted({(min(i, j), max(i, j)) for i, j in partner.items()})


def idle_in_each(spans, alive: list[int]) -> set[int]:
    """Those of ``alive`` that are idle (under IDLE_SHARE of the busiest thread's address samples)
    in each of ``spans`` (windows): a creator waiting in join, not a thread just made, whose first
    span holds a few of its samples."""
    idle = set(alive)
    for span in spans:
        busiest = float(span.accesses.max()) if len(span.accesses) else 0.0
        idle &= {k for k in alive if k < len(span.accesses) and span.accesses[k] < IDLE_SHARE * busiest}
    return idle


def partnered(directed: np.ndarray, pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Those of ``pairs`` whose threads are each other's strongest partner in ``directed``: the
    contending pairs of a whole span that one of its held-out halves bears out. The half is not
    asked whether they contend (a share of accesses read on a few watchpoints, half of them, misses
    CONTENDED_SHARE by chance; the span showed it), only which threads go together."""
    comm = directed + directed.T
    return [(i, j) for i, j in pairs if comm[i, j] > 0 and comm[i, j] >= comm[i].max() and comm[i, j] >= comm[j].max()]


def most_on_one_cpu(cpus: list[int | None], threads: list[int], pairs=()) -> int:
    """The most of ``threads`` that ``cpus`` puts on one CPU, each of ``pairs`` it puts on one
    counted once (a contending pair takes turns there by design)."""
    seconds = {j for i, j in pairs if cpus[i] is not None and cpus[i] == cpus[j]}
    on = [cpus[k] for k in threads if cpus[k] is not None and k not in seconds]
    return max((on.count(cpu) for cpu in set(on)), default=0)
