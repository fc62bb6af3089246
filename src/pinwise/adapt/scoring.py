"""What a placement costs while the program runs (:mod:`pinwise.adapt`): the cost model on the
CPUs the threads are on, what those CPUs would cost with the threads dealt to them at random, and
the tree distance the communication covers per event, which tells a stale placement (a phase
change) and a move that did not pay from a good one."""

from __future__ import annotations

import dataclasses

import numpy as np

from ..mapping.tree import SlotTree
from ..metrics import upper_pairs as upper
from .windows import Window

#: Of two threads pinned on one CPU the sampler sees about this share of the events it sees of
#: them on two cores: its clock samples an instruction in proportion to the time it takes, and an
#: access to a line written last on the same CPU is cheap (all-to-all, 4 threads on 2 CPUs of an
#: AMD EPYC guest: 0.22-0.34). With 1/3, what was left of the bias still placed all-to-all threads
#: twice in 2-3 runs of 30; with 1/4, in none of 70.
SEEN_ON_ONE_CPU = 1 / 4


def as_if_apart(tick: Window, cpu_of: dict[int, int]) -> Window:
    """``tick`` with the events of each pair of threads pinned on one CPU throughout it (``cpu_of``:
    thread -> its CPU) divided by SEEN_ON_ONE_CPU: what the sampler would see of them apart."""
    together = {(a, b) for a in cpu_of for b in cpu_of if a != b and cpu_of[a] == cpu_of[b]}
    if not together:
        return tick
    pairs = [(a, b, offered, armed, hits / SEEN_ON_ONE_CPU if (a, b) in together else hits)
             for a, b, offered, armed, hits in tick.pairs]
    return dataclasses.replace(tick, pairs=pairs)


def live_targets(policy: str, matrix: np.ndarray, accesses: np.ndarray, alive: list[int], topology,
                 info=None) -> tuple[list[int | None], object]:
    """The CPU the policy's plan gives each thread alive (None for the others), the plan made for
    the threads alive only, and the plan: a program that makes a thread per task has made far more
    threads than run, and a plan (or a reading of the pattern) of every thread ever made costs
    their square and reads the ended ones' empty rows as threads that share nothing."""
    from ..comm import CommMatrix
    from ..mapping import compute_mapping

    live = np.array(alive, dtype=np.int64)
    comm = CommMatrix(matrix[np.ix_(live, live)], accesses[live], **({"info": info} if info is not None else {}))
    plan = compute_mapping(policy, comm, topology)
    targets: list[int | None] = [None] * len(matrix)
    for position, k in enumerate(alive):
        targets[k] = min(plan.cpus_for_slot(position))
    return targets, plan


class Scorer:
    """Costs of placements on one machine; the distances between a placement's CPUs are kept (a
    handful of placements a run)."""

    def __init__(self, topology):
        self.topology = topology
        self.allowed = set(topology.allowed)
        self.kept: dict[tuple[int, ...], np.ndarray] = {}

    def _placed(self, cpus, size: int | None = None) -> list[int]:
        size = len(cpus) if size is None else min(len(cpus), size)
        return [k for k in range(size) if cpus[k] is not None and cpus[k] in self.allowed]

    def cost(self, matrix: np.ndarray, cpus: list[int | None]) -> float | None:
        """The cost model's hops (:func:`~pinwise.mapping.cost.mapping_cost`) of ``matrix`` with
        thread k on ``cpus[k]`` (None: fewer than two placed), from the distances kept for these
        CPUs (the tree built anew at each call took most of a judgment's time)."""
        alive = self._placed(cpus)
        if len(alive) < 2:
            return None
        distances = self.distances(tuple(cpus[k] for k in alive))
        return float((matrix[np.ix_(alive, alive)][upper(len(alive))] * distances[upper(len(alive))]).sum())

    def by_chance(self, matrix: np.ndarray, cpus: list[int | None]) -> float | None:
        """What ``cpus`` would cost with the threads dealt to them at random: each pair's
        communication times the mean distance between two of these CPUs."""
        alive = self._placed(cpus)
        n = len(alive)
        if n < 2:
            return None
        mean = float(self.distances(tuple(cpus[k] for k in alive))[upper(n)].mean())
        return float(matrix[np.ix_(alive, alive)][upper(n)].sum()) * mean

    def per_event(self, directed: np.ndarray, cpus) -> tuple[float, float]:
        """Under ``cpus``, the tree distance the communication in ``directed`` covers per weighted
        event, and what dealing the threads to those CPUs at random would cover (nan: nothing to
        say: fewer than two threads placed, or no event)."""
        alive = self._placed(cpus, directed.shape[0])
        if len(alive) < 2:
            return float("nan"), float("nan")
        distances = self.distances(tuple(cpus[k] for k in alive))
        sub = directed[np.ix_(alive, alive)]
        pairs, apart = (sub + sub.T)[upper(len(alive))], distances[upper(len(alive))]
        events = pairs.sum()
        chance = float(apart.mean())
        return (float((pairs * apart).sum() / events) if events > 0 else float("nan")), chance

    def closer_pairs(self, current: list[int | None], candidate: list[int | None]) -> set[tuple[int, int]]:
        """The pairs of threads (a, b), a < b, placed in both that ``candidate`` puts closer in the
        tree than ``current`` does."""
        both = [k for k in self._placed(current) if k < len(candidate) and candidate[k] is not None and
                candidate[k] in self.allowed]
        if len(both) < 2:
            return set()
        now = self.distances(tuple(current[k] for k in both))
        new = self.distances(tuple(candidate[k] for k in both))
        return {(both[i], both[j]) for i in range(len(both)) for j in range(i + 1, len(both)) if new[i, j] < now[i, j]}

    def distances(self, cpus: tuple[int, ...]) -> np.ndarray:
        """The tree distances between threads on ``cpus``."""
        if cpus not in self.kept:
            if len(self.kept) > 64:
                self.kept.clear()
            tree = SlotTree(self.topology, len(cpus))
            index = tree.pu_index(cpus)
            a, b = np.meshgrid(index, index, indexing="ij")
            self.kept[cpus] = tree.distance(a.ravel(), b.ravel()).reshape(a.shape).astype(float)
        return self.kept[cpus]
