"""More threads than PUs: every allowed PU takes floor(T/P) or ceil(T/P) of them.

A policy's kernel sees ceil(T/P) slots on each PU (:class:`pinwise.mapping.tree.SlotTree`), and two
threads on one PU cost nothing in the cost model, so the tree policies filled the slots of the
first PUs and left the others idle: 17 threads of pairs on ``pack:2 core:4 pu:2`` went to PUs 0-8,
two each, while PUs 9-15 had none, and ``map --compare`` ranked that best. Threads that share a PU
take turns on it; an idle PU beside them helps nobody.

So a kernel's mapping that is uneven is kept as groups (the threads it put on one PU), evened to
the sizes an even spread gives (the groups that communicate most inside keep the larger size; a
group too big gives up the members least attached to it; one too small, or a PU left empty, takes
those most attached to it); the kernel maps the groups, one a PU, by the communication between
them; and a swap search over the threads (swaps keep every PU's count) lowers the cost from there,
restarted from other even dealings on small problems as :func:`pinwise.mapping.grouping.refine`
is. An even mapping from the kernel is kept as it is.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .. import _kernels
from .grouping import REFINE_LIMIT
from .tree import SlotTree

#: Restarts of the swap search from random even dealings (grouping.refine's count for 16 threads
#: or fewer; an eighth of it up to 64).
RESTARTS = 64


def evenly(kernel, matrix, topology, threads: int) -> list[int]:
    """The PU of each of ``threads`` threads by ``kernel`` (a policy's, as
    :meth:`pinwise.policies.Policy.load_kernel` gives it), no PU holding more than one thread
    above another."""
    tree = SlotTree(topology, threads)
    pus = [int(p) for p in kernel(matrix, tree)]
    count = len(tree.pus)
    loads = np.bincount(tree.pu_index(pus), minlength=count)
    if loads.max() - loads.min() <= 1 or threads <= count:
        return pus
    weights = sp.csr_matrix(matrix, dtype=np.float64)
    weights = weights + weights.T  # who talks with whom, either way
    groups = _evened(_groups_of(pus, tree.pus), weights, threads, count)
    member = np.zeros((threads, count))
    for g, group in enumerate(groups):
        member[group, g] = 1.0
    between = np.asarray((sp.csr_matrix(member).T @ weights @ sp.csr_matrix(member)).todense()) / 2
    np.fill_diagonal(between, 0.0)
    group_pus = kernel(between, SlotTree(topology, count))
    placed = [0] * threads
    for g, group in enumerate(groups):
        for thread in group:
            placed[thread] = int(group_pus[g])
    return _swapped(weights / 2, tree, placed)


def _swapped(weights, tree: SlotTree, placed: list[int]) -> list[int]:
    """``placed`` after the swap search (grouping.refine's kernel) on slots that are exactly the
    threads each PU holds, so that no thread can move to a PU with room: only swaps, which keep the
    spread even; small problems restart from random even dealings and keep the best."""
    threads = len(placed)
    if threads > REFINE_LIMIT:
        return placed
    dense = weights.toarray()
    np.fill_diagonal(dense, 0)
    order = sorted(range(threads), key=lambda t: (tree.pu_index([placed[t]])[0], t))
    slot_pus = [placed[t] for t in order]  # slot k is a place on this PU
    index = tree.pu_index(slot_pus)
    a, b = np.meshgrid(index, index, indexing="ij")
    distances = tree.distance(a.ravel(), b.ravel()).reshape(a.shape).astype(np.int32)
    start = np.empty(threads, dtype=np.int32)
    start[order] = np.arange(threads, dtype=np.int32)
    rows, cols = np.triu_indices(threads, k=1)

    def cost(slots: np.ndarray) -> float:
        return float(np.sum(dense[rows, cols] * distances[slots[rows], slots[cols]]))

    best = _kernels.refine_swaps(dense, distances, start)
    best_cost = cost(best)
    rng = np.random.default_rng(0)
    for _ in range(RESTARTS if threads <= 16 else RESTARTS // 8 if threads <= 64 else 0):
        candidate = _kernels.refine_swaps(dense, distances, rng.permutation(threads).astype(np.int32))
        if (candidate_cost := cost(candidate)) < best_cost - 1e-9:
            best, best_cost = candidate, candidate_cost
    return [slot_pus[int(slot)] for slot in best]


def _groups_of(pus: list[int], order: list[int]) -> list[list[int]]:
    """The threads on each PU, in the tree's order of PUs (empty lists for PUs with none)."""
    at = {pu: [] for pu in order}
    for thread, pu in enumerate(pus):
        at[pu].append(thread)
    return [at[pu] for pu in order]


def _evened(groups: list[list[int]], weights, threads: int, count: int) -> list[list[int]]:
    """``groups`` (one per PU) resized so that ``extra`` of them hold ``low + 1`` threads and the
    others ``low``, where ``threads = low * count + extra``; as few threads moved as the kernel's
    groups allow, each to where it is most attached."""
    low, extra = divmod(threads, count)

    def attached(thread: int, group: list[int]) -> float:
        return float(weights[thread, group].sum()) if group else 0.0

    def inside(group: list[int]) -> float:
        return float(weights[group][:, group].sum()) if group else 0.0

    ranked = sorted(range(count), key=lambda g: (-len(groups[g]), -inside(groups[g]), g))
    target = {g: low + (rank < extra) for rank, g in enumerate(ranked)}
    groups = [list(group) for group in groups]
    pool: list[int] = []
    for g, group in enumerate(groups):
        while len(group) > target[g]:
            leaving = min(group, key=lambda t: (attached(t, [o for o in group if o != t]), -t))
            group.remove(leaving)
            pool.append(leaving)
    for g in sorted(range(count), key=lambda g: (not groups[g], g)):  # groups first, then empty PUs
        group = groups[g]
        while len(group) < target[g]:
            if group:
                joining = max(pool, key=lambda t: (attached(t, group), -t))
            else:  # the one most attached to the others left
                joining = max(pool, key=lambda t: (attached(t, [o for o in pool if o != t]), -t))
            pool.remove(joining)
            group.append(joining)
    return groups
