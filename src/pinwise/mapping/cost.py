"""The cost model every mapping is scored with, so that mappings compare on any topology.

cost = sum over thread pairs i < j of M[i][j] x dist(pu_i, pu_j), where dist is the number of tree
levels from a PU up to the lowest common ancestor of the two PUs (0 on one PU, 1 for SMT siblings,
...), or, with ``level_weights``, the weight of the LCA's type (a latency per level). Beside it, the
communication load of every object, per level: the sum of CommV[i] = sum_j M[i][j] over the threads
placed below it, reported as max/avg per level (1.0 is perfect balance; Diener et al.'s BComm
applied to topology objects).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from ..metrics import comm_v
from ..topology import LEVEL_ORDER, Topology
from .tree import SlotTree


@dataclass
class CostReport:
    hops: float
    #: level type -> max load / average load over that level's objects that hold threads
    imbalance: dict[str, float] = field(default_factory=dict)


def _upper_pairs(matrix):
    if sp.issparse(matrix):
        coo = sp.triu(matrix, k=1).tocoo()
        return coo.row, coo.col, coo.data
    rows, cols = np.triu_indices(matrix.shape[0], k=1)
    values = matrix[rows, cols]
    keep = values != 0
    return rows[keep], cols[keep], values[keep]


def mapping_cost(matrix, topology: Topology, pus, level_weights: dict[str, float] | None = None) -> CostReport:
    pus = list(pus)
    tree = SlotTree(topology, len(pus))
    index = tree.pu_index(pus)
    rows, cols, values = _upper_pairs(matrix)
    if level_weights:
        depth_type = _depth_types(tree)
        lca = tree.lca_depth(index[rows], index[cols])
        weights = np.array([level_weights.get(depth_type.get(d, ""), 0.0) for d in range(tree.ancestors.shape[1])])
        same = index[rows] == index[cols]
        hops = float(np.sum(values * np.where(same, 0.0, weights[lca])))
    else:
        hops = float(np.sum(values * tree.distance(index[rows], index[cols])))
    return CostReport(hops, load_imbalance(tree, index, comm_v(matrix)))


def vs_best(cost: float, best: float) -> str:
    """A cost against the lowest of its comparison, as tables print it: "1.37"; where the lowest is 0
    (pairs sharing a PU when threads outnumber PUs, or a matrix with no communication), "1.00" for
    another 0 and "inf" for any cost above it, never a ratio made up."""
    if best > 0:
        return f"{cost / best:.2f}"
    return "1.00" if cost <= 0 else "inf"


def _depth_types(tree: SlotTree) -> dict[int, str]:
    node = tree.topology.pu(tree.pus[0])
    chain = [node, *node.ancestors()][::-1]
    return {depth: n.type for depth, n in enumerate(chain)}


def load_imbalance(tree: SlotTree, index: np.ndarray, vector: np.ndarray) -> dict[str, float]:
    out = {}
    anc = tree.ancestors
    types = _depth_types(tree)
    for depth in range(1, anc.shape[1]):
        ids = anc[index, depth]
        unique, inverse = np.unique(ids, return_inverse=True)
        loads = np.bincount(inverse, weights=vector, minlength=len(unique))
        average = loads.mean()
        name = types.get(depth, f"depth{depth}")
        if name in LEVEL_ORDER and average > 0:
            out[name] = float(loads.max() / average)
    return out
