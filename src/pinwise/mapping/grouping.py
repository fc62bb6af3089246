"""Diener et al.'s communication-aware policies (section 4): Locality, Distance, Balance and
Balanced Locality.

Locality follows EagerMap (Cruz et al.): bottom-up over the levels of the tree, threads are
grouped greedily into groups of the level's arity (seed: the heaviest free element; then the
element with the most communication to the group), groups become the elements of the next level
with their communication summed; then the groups are placed top-down on the topology. Small
problems (T <= REFINE_LIMIT) are then improved by a swap local search on the cost model. Large
problems on a wide top level (a cluster's nodes) are cut at that level by a balanced partition first
(METIS), and grouped inside each part: greedy grouping alone only sees each thread's neighbourhood,
and on a 3D halo of 65,536 ranks over 512 nodes it cut 1.7x more links between nodes than METIS.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections import Counter

import numpy as np
import scipy.sparse as sp

from .. import _kernels
from ..metrics import comm_v
from ..topology.model import ObjType, TopoObject, walk
from .tree import SlotTree

REFINE_LIMIT = 256
#: from this many threads, a top level of more than two objects is cut by a partition first, when
#: the graph is sparse (at most this many neighbours per thread on average: METIS on a dense graph,
#: such as distance's inverted matrix, costs more than it saves)
PARTITION_FROM = 8192
PARTITION_DEGREE = 64


#: Up to this many threads the grouping works on dense arrays: scipy.sparse's set-up costs more
#: than the work on a handful of threads (an adaptive run plans three times a judgment, while the
#: program waits for the CPU it takes: 5 threads on 2 CPUs, 1.15 ms a locality plan with sparse
#: matrices, 0.58 ms dense); from a few hundred, the dense products cost more (1,024 threads on a
#: chain: 11 ms sparse, 37 ms dense).
DENSE_UP_TO = 64


def _csr(matrix) -> sp.csr_matrix:
    csr = sp.csr_matrix(matrix, dtype=np.float64)
    csr.setdiag(0)
    csr.eliminate_zeros()
    return csr


def _without_diagonal(matrix):
    """``matrix`` as the grouping works on it, its diagonal zero: a dense copy when small
    (DENSE_UP_TO), else sparse (CSR)."""
    if sp.issparse(matrix) or matrix.shape[0] > DENSE_UP_TO:
        return _csr(matrix)
    dense = np.array(matrix, dtype=np.float64)
    np.fill_diagonal(dense, 0)
    return dense


def _adjacency(current) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(indptr, indices, data) of ``current`` (_without_diagonal's): its nonzero entries row by
    row, columns ascending, as CSR holds them."""
    if sp.issparse(current):
        return current.indptr.astype(np.int64), current.indices.astype(np.int64), current.data
    rows, cols = np.nonzero(current)
    indptr = np.zeros(current.shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=current.shape[0]), out=indptr[1:])
    return indptr, cols.astype(np.int64), current[rows, cols]


def _merged(current, labels: np.ndarray, count: int):
    """``current`` with the elements of each label summed into one (its diagonal zero)."""
    if sp.issparse(current):
        aggregate = sp.csr_matrix((np.ones(len(labels)), (np.arange(len(labels)), labels)),
                                  shape=(len(labels), count))
        return _csr(aggregate.T @ current @ aggregate)
    aggregate = np.zeros((len(labels), count))
    aggregate[np.arange(len(labels)), labels] = 1.0
    merged = aggregate.T @ current @ aggregate
    np.fill_diagonal(merged, 0)
    return merged


def group_hierarchy(matrix, arities: list[int], part: np.ndarray | None = None, first: list | None = None):
    """EagerMap's bottom-up grouping. Returns the top elements; an element is a thread (int) or a
    list of elements. With ``part`` (a label per thread) no group mixes two parts; with ``first``
    (groups of threads, as many as the first level's arity each) the first level is those groups."""
    elements: list = list(range(matrix.shape[0]))
    current = _without_diagonal(matrix)
    labels_part = np.empty(0, dtype=np.int64) if part is None else np.asarray(part, dtype=np.int64)
    for level, arity in enumerate(arities):
        if len(elements) <= 1:
            break
        if level == 0 and first is not None:
            labels = np.empty(len(elements), dtype=np.int64)
            for label, group in enumerate(first):
                labels[list(group)] = label
        else:
            labels = _kernels.greedy_groups(*_adjacency(current), current.shape[0], arity, labels_part)
        count = int(labels.max()) + 1
        groups: list[list] = [[] for _ in range(count)]
        for element, label in zip(elements, labels):
            groups[label].append(element)
        if part is not None:
            group_part = np.empty(count, dtype=np.int64)
            group_part[labels] = labels_part
            labels_part = group_part
        current = _merged(current, labels, count)
        elements = groups
    return elements


def _sizes(elements: list) -> dict[int, int]:
    """Thread count of every list element, by id (an int element is one thread)."""
    sizes: dict[int, int] = {}

    def size(element) -> int:
        if isinstance(element, (int, np.integer)):
            return 1
        total = sum(size(e) for e in element)
        sizes[id(element)] = total
        return total

    for element in elements:
        size(element)
    return sizes


def place_hierarchy(tree: SlotTree, elements: list) -> list[int]:
    """Top-down: each element, largest first, goes whole into the child object with the most free
    slots (the first such child on ties) if it fits there; an element too big for every child is
    opened into its parts, which queue behind the elements of their size."""
    placement: dict[int, int] = {}
    sizes = _sizes(elements)
    counter = itertools.count()

    def size(element) -> int:
        return 1 if isinstance(element, (int, np.integer)) else sizes[id(element)]

    def place(node: TopoObject, items: list) -> None:
        if node.type == ObjType.PU:
            for item in items:
                for thread in _threads(item):
                    placement[thread] = node.os_index
            return
        children = tree.children(node)
        free = [tree.capacity(c) for c in children]
        roomiest = [(-f, c) for c, f in enumerate(free)]  # a heap: most free slots, then child order
        heapq.heapify(roomiest)
        assigned: list[list] = [[] for _ in children]
        queue = [(-size(item), next(counter), item) for item in items]
        heapq.heapify(queue)
        while queue:
            negative, _, item = heapq.heappop(queue)
            target = roomiest[0][1]
            if free[target] < -negative and not isinstance(item, (int, np.integer)):
                for part in item:
                    heapq.heappush(queue, (-size(part), next(counter), part))
                continue
            assigned[target].append(item)
            free[target] += negative
            heapq.heapreplace(roomiest, (-free[target], target))
        for child, mine in zip(children, assigned):
            if mine:
                place(child, mine)

    place(tree.topology.root, elements)
    return [placement[t] for t in range(tree.threads)]


def _threads(element):
    if isinstance(element, (int, np.integer)):
        yield int(element)
    else:
        for part in element:
            yield from _threads(part)


def refine(matrix, tree: SlotTree, pus: list[int], restarts: int | None = None) -> list[int]:
    """Swap local search for small problems: each swap or move lowers the cost model. Small
    problems also restart from random placements (seeded, so results are reproducible) and keep
    the best local optimum: local search alone stops short of the optimum on flat matrices."""
    if tree.threads > REFINE_LIMIT or tree.threads < 2:
        return pus
    dense = matrix.toarray() if sp.issparse(matrix) else np.array(matrix, dtype=np.float64)
    np.fill_diagonal(dense, 0)
    position = {pu: i for i, pu in enumerate(tree.pus)}
    taken: dict[int, int] = {}
    slots = []
    for pu in pus:  # give each thread a distinct slot of its PU
        slots.append(position[pu] * tree.per_pu + taken.get(pu, 0))
        taken[pu] = taken.get(pu, 0) + 1
    distances = tree.slot_distance_matrix()
    rows, cols = np.triu_indices(tree.threads, k=1)
    weights = dense[rows, cols]

    def cost(assignment: np.ndarray) -> float:
        return float(np.sum(weights * distances[assignment[rows], assignment[cols]]))

    if restarts is None:
        restarts = 64 if tree.threads <= 16 else 8 if tree.threads <= 64 else 0
    rng = np.random.default_rng(0)
    best = _kernels.refine_swaps(dense, distances, np.array(slots, dtype=np.int32))
    best_cost = cost(best)
    # the search sees slots by their PU only (two slots of one PU are as far from any other), so a
    # start that deals the threads to the PUs as one before did ends where that one did: skipped
    # where the ways to deal them are few (4 threads on 2 PUs: 6 ways, 64 restarts, most of a
    # judgment's CPU time), and once every way was tried, no start can be new
    seen, few = {(np.array(slots) // tree.per_pu).tobytes()}, 0
    if tree.threads <= 8 and (ways := _dealings(tree.threads, len(tree.pus), tree.per_pu)) <= 4 * restarts:
        few = ways
    for _ in range(restarts):
        if len(seen) >= few > 0:
            break
        start = rng.permutation(tree.nb_slots)[: tree.threads].astype(np.int32)
        if few and (dealt := (start // tree.per_pu).tobytes()) in seen:
            continue
        if few:
            seen.add(dealt)
        candidate = _kernels.refine_swaps(dense, distances, start)
        candidate_cost = cost(candidate)
        if candidate_cost < best_cost - 1e-9:
            best, best_cost = candidate, candidate_cost
    return [tree.slot_pu(int(s)) for s in best]


def _dealings(threads: int, pus: int, per_pu: int) -> int:
    """The ways to deal ``threads`` threads to ``pus`` PUs, at most ``per_pu`` on each."""
    ways = [1] + [0] * threads  # ways[t]: t of the threads dealt to the PUs so far
    for _ in range(pus):
        ways = [sum(math.comb(t, k) * ways[t - k] for k in range(min(per_pu, t) + 1)) for t in range(threads + 1)]
    return ways[threads]


def locality(matrix, tree: SlotTree) -> list[int]:
    arities = tree.level_arities()
    top = tree.children(tree.topology.root)
    if tree.threads >= PARTITION_FROM and len(top) > 2 and _nonzeros(matrix) <= PARTITION_DEGREE * tree.threads:
        return place_hierarchy(tree, partitioned_groups(matrix, tree, top, arities))
    elements = group_hierarchy(matrix, arities)
    pus = refine(matrix, tree, place_hierarchy(tree, elements))
    if arities[:1] == [2] and 2 < tree.threads <= REFINE_LIMIT:
        # pairs at the first level (a core's two PUs): EagerMap's greedy pairs start from the
        # heaviest link, and on a chain whose middle link is heaviest keep a fifth less
        # communication inside pairs than the exact matching (a sampled neighbour trace on x7550:
        # 1.13x the matching's cost, which the swap search does not leave); where the matching
        # keeps more inside pairs, the grouping on it is placed too, and the cheaper of the two kept
        from .pairing import max_weight_matching

        matched = max_weight_matching(matrix)
        if _inside(matrix, matched) > _inside(matrix, group_hierarchy(matrix, arities[:1])) * (1 + 1e-9):
            paired = refine(matrix, tree, place_hierarchy(tree, group_hierarchy(matrix, arities, first=matched)))
            if _hops(matrix, tree, paired) < _hops(matrix, tree, pus):
                pus = paired
    return pus


def _inside(matrix, groups) -> float:
    """The communication inside ``groups`` (lists or tuples of threads)."""
    dense = matrix.toarray() if sp.issparse(matrix) else np.asarray(matrix, dtype=np.float64)
    return float(sum(dense[a, b] for group in groups for a, b in itertools.combinations(list(group), 2)))


def _hops(matrix, tree: SlotTree, pus: list[int]) -> float:
    """The cost model's hops (pinwise.mapping.cost) of ``pus``."""
    dense = matrix.toarray() if sp.issparse(matrix) else np.asarray(matrix, dtype=np.float64)
    index = tree.pu_index(pus)
    rows, cols = np.triu_indices(len(pus), k=1)
    return float(np.sum(dense[rows, cols] * tree.distance(index[rows], index[cols])))


def _nonzeros(matrix) -> int:
    return int(matrix.nnz) if sp.issparse(matrix) else int(np.count_nonzero(matrix))


def partitioned_groups(matrix, tree: SlotTree, top: list[TopoObject], arities: list[int]) -> list:
    """For large problems on a wide top level (the nodes of a cluster): greedy grouping sees only
    its neighbourhood, so the top level is cut by a balanced partition (METIS, recursive bisection,
    exact sizes: one part per top object) and EagerMap groups each part below it."""
    from .pairing import balanced_partition, integer_weights, part_sizes

    part = balanced_partition(integer_weights(matrix, sparse=True), part_sizes(tree, top, tree.threads))
    elements = group_hierarchy(matrix, arities[:-1], part)
    items: list[list] = [[] for _ in top]
    for element in elements:
        items[part[next(_threads(element))]].append(element)
    return [item for item in items if item]


def inverted(matrix) -> np.ndarray:
    """Diener et al.'s inversion for Distance: every cell becomes max(M) - M (diagonal kept 0)."""
    dense = matrix.toarray() if sp.issparse(matrix) else np.array(matrix, dtype=np.float64)
    np.fill_diagonal(dense, 0)
    out = dense.max() - dense
    np.fill_diagonal(out, 0)
    return out


def distance(matrix, tree: SlotTree) -> list[int]:
    return locality(inverted(matrix), tree)


class _Loads:
    """Communication load carried by every object so far, and free slots per object."""

    def __init__(self, tree: SlotTree):
        self.tree = tree
        self.load: dict[int, float] = {}
        self.free: dict[int, int] = {}
        for node in walk(tree.topology.root, tree.children):
            self.free[id(node)] = tree.capacity(node)

    def add(self, pu: int, amount: float) -> None:
        node = self.tree.topology.pu(pu)
        for obj in [node, *node.ancestors()]:
            self.load[id(obj)] = self.load.get(id(obj), 0.0) + amount
            self.free[id(obj)] -= 1


def balance(matrix, tree: SlotTree) -> list[int]:
    """Threads in decreasing CommV order; each goes down the tree into the child with free slots
    that carries the least communication so far (ties: topology order)."""
    vector = comm_v(matrix)
    loads = _Loads(tree)
    placement = [0] * tree.threads
    for thread in sorted(range(tree.threads), key=lambda t: (-vector[t], t)):
        node = tree.topology.root
        while node.type != ObjType.PU:
            node = min((c for c in tree.children(node) if loads.free[id(c)] > 0),
                       key=lambda c: loads.load.get(id(c), 0.0))
        placement[thread] = node.os_index
        loads.add(node.os_index, vector[thread])
    return placement


def balanced_locality(matrix, tree: SlotTree) -> list[int]:
    """Locality's placement, but no object of any level takes more than the average
    communication per object of its level: threads, in the order Locality lays them out, go down
    the tree towards Locality's PU, turning to the least loaded child with free slots wherever the
    preferred child has already reached its level's average."""
    vector = comm_v(matrix)
    preferred = locality(matrix, tree)
    total = float(vector.sum())
    depth_count = Counter(node.depth for node in walk(tree.topology.root, tree.children))
    loads = _Loads(tree)
    position = {pu: i for i, pu in enumerate(tree.pus)}
    order = sorted(range(tree.threads), key=lambda t: (position[preferred[t]], t))
    placement = [0] * tree.threads
    for thread in order:
        target = tree.topology.pu(preferred[thread])
        on_path = {id(o) for o in [target, *target.ancestors()]}
        node, depth = tree.topology.root, 0
        while node.type != ObjType.PU:
            options = [c for c in tree.children(node) if loads.free[id(c)] > 0]
            average = total / depth_count[depth + 1]

            def within_average(child: TopoObject) -> bool:
                # "We add threads to the leaves until the amount of communication is higher than
                # the average" (Diener et al.): an object takes threads while it is below average.
                # An object that holds one thread cannot be balanced: only shared ones are capped.
                return tree.capacity(child) < 2 or loads.load.get(id(child), 0.0) < average * (1 - 1e-9)

            wanted = [c for c in options if id(c) in on_path]
            if wanted and within_average(wanted[0]):
                node = wanted[0]
            else:
                fitting = [c for c in options if within_average(c)]
                node = min(fitting or options, key=lambda c: loads.load.get(id(c), 0.0))
            depth += 1
        placement[thread] = node.os_index
        loads.add(node.os_index, vector[thread])
    return placement
