"""Mazouz et al.'s application-sensitive strategies (section 3.2): LP compact, LP scatter, GP,
LPGP and GPLP.

LP: an exact maximum-weight matching of the affinity graph pairs the threads (Edmonds' algorithm,
in the native kernel); pairs go to *pair sites*, two PUs sharing the lowest shared level (a core's
hardware threads, else the lowest shared cache), sites taken in compact (depth-first) or scatter
(one per package first) order, heaviest pair first. GP: a balanced k-way partition (METIS,
recursive bisection) puts one part on each package, with exact part sizes enforced by a repair
step; inside a package threads are placed compactly. LPGP pairs first and partitions the pairs;
GPLP partitions first and pairs inside each package.
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.sparse as sp

from .. import _kernels
from ..optional import require
from ..topology import ObjType, TopoObject
from .tree import SlotTree

INTEGER_SCALE = float(1 << 40)


def integer_weights(matrix, sparse: bool = False):
    """Matching and METIS want integers: counts stay as they are, other values are scaled. With
    ``sparse`` a scipy sparse matrix stays sparse (CSR, no diagonal); otherwise the result is dense."""
    if sparse and sp.issparse(matrix):
        weights = sp.csr_matrix(matrix, dtype=np.float64)
        weights.setdiag(0)
        weights.eliminate_zeros()
        values = weights.data
    else:
        weights = matrix.toarray() if sp.issparse(matrix) else np.array(matrix, dtype=np.float64)
        np.fill_diagonal(weights, 0)
        values = weights
    top = values.max() if values.size else 0
    if top <= 0:
        return weights.astype(np.int64) * 0
    if not (np.all(np.mod(values, 1) == 0) and top < INTEGER_SCALE):
        values[...] = np.rint(values / top * 1e9)
    return weights.astype(np.int64)


def max_weight_matching(matrix) -> list[tuple[int, ...]]:
    """Exact maximum-weight matching; returns pairs and, for an odd count, one single thread.
    Uses the native kernel (LEMON's blossom algorithm) or, if it was built without LEMON, networkx."""
    weights = integer_weights(matrix)
    n = weights.shape[0]
    if _kernels.have_exact_matching():
        mate = _kernels.max_weight_matching(weights)
    else:
        nx = require("networkx")

        warnings.warn("exact matching through networkx (slow): install liblemon-dev and rebuild pinwise", stacklevel=2)
        graph = nx.Graph()
        graph.add_nodes_from(range(n))
        rows, cols = np.nonzero(np.triu(weights, 1))
        graph.add_weighted_edges_from((int(i), int(j), int(weights[i, j])) for i, j in zip(rows, cols))
        mate = np.full(n, -1)
        for i, j in nx.max_weight_matching(graph):
            mate[i], mate[j] = j, i
        free = [i for i in range(n) if mate[i] < 0]
        for i, j in zip(free[0::2], free[1::2]):
            mate[i], mate[j] = j, i
    groups = []
    seen = set()
    for i in range(n):
        if i in seen:
            continue
        j = int(mate[i])
        if j >= 0 and j not in seen:
            groups.append((i, j))
            seen.update((i, j))
        else:
            groups.append((i,))
            seen.add(i)
    groups.sort(key=lambda g: (-(weights[g[0], g[1]] if len(g) == 2 else -1), g))
    return groups


def pair_level(tree: SlotTree, within: TopoObject | None = None) -> list[TopoObject]:
    """Objects of the lowest level whose objects hold two or more slots: where pairs go."""
    frontier = [within or tree.topology.root]
    while True:
        below = [c for n in frontier for c in tree.children(n)]
        if not below or all(tree.capacity(c) < 2 for c in below):
            return frontier
        frontier = below


def pair_sites(tree: SlotTree, scatter: bool, within: TopoObject | None = None) -> list[list[int]]:
    """Lists of slots (as PU numbers, repeated for wrap-round) that pairs fill, in order."""
    objects = pair_level(tree, within)
    sites: list[tuple[tuple, list[int]]] = []
    for obj in objects:
        slots = [pu for pu in tree.pus if pu in obj.cpuset for _ in range(tree.per_pu)]
        for k in range(0, len(slots), 2):
            chunk = slots[k:k + 2]
            coords = tree.topology.coordinates(tree.topology.pu(chunk[0]))
            sites.append(((tuple(reversed(coords)) if scatter else coords) + (k,), chunk))
    sites.sort(key=lambda s: s[0])
    return [chunk for _, chunk in sites]


def place_groups(groups: list[tuple[int, ...]], sites: list[list[int]], placement: dict[int, int]) -> None:
    """Pairs into whole sites in order; singles into the first free slots left."""
    free_sites = [list(s) for s in sites]
    singles = []
    for group in groups:
        if len(group) == 2:
            site = next((s for s in free_sites if len(s) == 2), None)
            if site is None:
                singles.extend(group)
                continue
            free_sites.remove(site)
            placement[group[0]], placement[group[1]] = site
        else:
            singles.extend(group)
    leftover = [slot for site in free_sites for slot in site]
    for thread, slot in zip(singles, leftover):
        placement[thread] = slot


def _complete(tree: SlotTree, placement: dict[int, int]) -> list[int]:
    """Threads that found no slot in their package (odd sizes) take the free slots left."""
    free = [pu for pu in tree.pus for _ in range(tree.per_pu)]
    for pu in placement.values():
        free.remove(pu)
    for thread in range(tree.threads):
        if thread not in placement:
            placement[thread] = free.pop(0)
    return [placement[t] for t in range(tree.threads)]


def lp(matrix, tree: SlotTree, scatter: bool) -> list[int]:
    placement: dict[int, int] = {}
    place_groups(max_weight_matching(matrix), pair_sites(tree, scatter), placement)
    return [placement[t] for t in range(tree.threads)]


def lp_compact(matrix, tree: SlotTree) -> list[int]:
    """LP compact: pairs from the exact matching, pair sites in depth-first order."""
    return lp(matrix, tree, scatter=False)


def lp_scatter(matrix, tree: SlotTree) -> list[int]:
    """LP scatter: pairs from the exact matching, pair sites one per package first."""
    return lp(matrix, tree, scatter=True)


def part_sizes(tree: SlotTree, parts: list[TopoObject], count: int) -> list[int]:
    """Exact sizes: every slot of every part when count fills them; otherwise the count shared in
    proportion to each part's slots (largest remainders)."""
    capacity = np.array([tree.capacity(p) for p in parts], dtype=np.float64)
    share = capacity / capacity.sum() * count
    sizes = np.floor(share).astype(int)
    for index in np.argsort(-(share - sizes), kind="stable")[: count - sizes.sum()]:
        sizes[index] += 1
    return sizes.tolist()


def balanced_partition(weights, sizes: list[int], vertex_weights: np.ndarray | None = None) -> np.ndarray:
    """k-way partition with METIS (recursive bisection), then a repair step that moves the vertex
    losing least until every part has exactly its size (METIS only bounds the imbalance).
    ``weights``: integer weights, dense or scipy sparse."""
    n, k = weights.shape[0], len(sizes)
    vw = np.ones(n, dtype=np.int64) if vertex_weights is None else vertex_weights.astype(np.int64)
    used = [p for p, size in enumerate(sizes) if size > 0]
    if len(used) < k:  # fewer threads than parts: METIS refuses empty parts, so they take no part
        return np.array(used, dtype=np.int64)[balanced_partition(weights, [sizes[p] for p in used], vertex_weights)]
    if k == 1:
        return np.zeros(n, dtype=np.int64)
    pymetis = require("pymetis")

    graph = sp.csr_matrix(weights)  # both triangles: METIS wants every edge from both ends
    graph.eliminate_zeros()
    if graph.nnz == 0:
        part = np.repeat(np.arange(k), sizes)[:n]
    else:
        options = pymetis.Options(seed=1)
        fractions = np.array(sizes, dtype=np.float64) / max(1, sum(sizes))
        _, membership = pymetis.part_graph(
            k, pymetis.CSRAdjacency(graph.indptr, graph.indices), eweights=graph.data.astype(np.int64),
            vweights=vw, recursive=True, options=options, tpwgts=fractions.tolist())
        part = np.array(membership, dtype=np.int64)
    return _repair(graph.astype(np.float64), part, np.array(sizes), vw)


def _repair(graph: sp.csr_matrix, part: np.ndarray, sizes: np.ndarray, vw: np.ndarray) -> np.ndarray:
    """Move vertices out of over-full parts into parts with room until every part has its size.
    Each round, every over-full part gives up the member that loses least (the most connection to
    the target minus the connection it leaves; a target without a neighbour is the part with the
    most room). Every move lowers the total overflow, so this ends; with vertex weights (pairs)
    odd sizes may be out of reach, and the closest partition is returned. Sparse throughout: the
    connections are computed only for the members of over-full parts."""
    k = len(sizes)
    load = np.bincount(part, weights=vw, minlength=k)
    while True:
        over = load > sizes
        if not over.any():
            return part
        room = sizes - load
        members = np.nonzero(over[part])[0]
        adjacent = graph[members]
        connection = sp.csr_matrix((adjacent.data, part[adjacent.indices], adjacent.indptr), shape=(len(members), k))
        connection.sum_duplicates()
        own = np.asarray(connection[np.arange(len(members)), part[members]]).ravel()
        # default target: the part with most room (no connection there)
        widest = int(np.argmax(room))
        target = np.full(len(members), widest)
        gain = np.where(vw[members] <= room[widest], -own, -np.inf)
        # better: a neighbouring part with room, the one this member has the most connection to
        coo = connection.tocoo()
        fits = (vw[members][coo.row] <= room[coo.col]) & (coo.col != part[members][coo.row])
        rows, cols, better = coo.row[fits], coo.col[fits], coo.data[fits] - own[coo.row[fits]]
        order = np.lexsort((-better, rows))
        first = np.r_[True, rows[order][1:] != rows[order][:-1]] if order.size else np.zeros(0, bool)
        best_rows, best_cols, best_gain = rows[order][first], cols[order][first], better[order][first]
        improve = best_gain > gain[best_rows]
        target[best_rows[improve]] = best_cols[improve]
        gain[best_rows[improve]] = best_gain[improve]
        # one candidate per over-full part: its member losing least; applied best first
        owners = part[members]
        order = np.lexsort((-gain, owners))
        first = np.r_[True, owners[order][1:] != owners[order][:-1]]
        moved = False
        for index in sorted(order[first], key=lambda i: -gain[i]):
            v, source, t = members[index], owners[index], target[index]
            if not np.isfinite(gain[index]) or vw[v] > sizes[t] - load[t] or load[source] <= sizes[source]:
                continue
            part[v] = t
            load[source] -= vw[v]
            load[t] += vw[v]
            moved = True
        if not moved:
            return part


def gp(matrix, tree: SlotTree) -> list[int]:
    packages = tree.domain_objects(ObjType.PACKAGE)
    part = balanced_partition(integer_weights(matrix, sparse=True), part_sizes(tree, packages, tree.threads))
    placement = [0] * tree.threads
    for p, package in enumerate(packages):
        slots = [pu for pu in tree.pus if pu in package.cpuset for _ in range(tree.per_pu)]
        for thread, slot in zip(np.nonzero(part == p)[0], slots):
            placement[int(thread)] = slot
    return placement


def lpgp(matrix, tree: SlotTree) -> list[int]:
    """Pairs first (exact matching), then the pairs partitioned onto packages."""
    groups = max_weight_matching(matrix)
    weights = integer_weights(matrix)
    member = np.zeros((len(groups), tree.threads))
    for g, group in enumerate(groups):
        member[g, list(group)] = 1
    group_weights = (member @ weights @ member.T).astype(np.int64)
    np.fill_diagonal(group_weights, 0)
    packages = tree.domain_objects(ObjType.PACKAGE)
    sizes = part_sizes(tree, packages, tree.threads)
    part = balanced_partition(group_weights, sizes, np.array([len(g) for g in groups]))
    placement: dict[int, int] = {}
    for p, package in enumerate(packages):
        mine = [groups[g] for g in np.nonzero(part == p)[0]]
        place_groups(mine, pair_sites(tree, False, within=package), placement)
    return _complete(tree, placement)


def gplp(matrix, tree: SlotTree) -> list[int]:
    """Packages first (partition), then exact matching inside each package."""
    packages = tree.domain_objects(ObjType.PACKAGE)
    weights = integer_weights(matrix)
    part = balanced_partition(weights, part_sizes(tree, packages, tree.threads))
    placement: dict[int, int] = {}
    for p, package in enumerate(packages):
        threads = np.nonzero(part == p)[0]
        local = max_weight_matching(weights[np.ix_(threads, threads)])
        groups = [tuple(int(threads[i]) for i in g) for g in local]
        place_groups(groups, pair_sites(tree, False, within=package), placement)
    return _complete(tree, placement)
