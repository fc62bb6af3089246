"""The topology as mapping policies see it: allowed PUs, slots, and distances in the tree.

A *slot* is a place for one thread. With T threads on P allowed PUs, each PU offers
c = ceil(T / P) slots (c = 1 unless there are more threads than PUs, which wrap round).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ..errors import PinwiseError
from ..topology import ObjType, Topology, TopoObject


@dataclass
class SlotTree:
    topology: Topology
    threads: int

    def __post_init__(self):
        if self.threads < 1:
            raise PinwiseError("a mapping needs at least one thread")
        self.pus: list[int] = self.topology.logical_order()
        self.per_pu = max(1, math.ceil(self.threads / len(self.pus)))

    @property
    def nb_slots(self) -> int:
        return len(self.pus) * self.per_pu

    def slot_pu(self, slot: int) -> int:
        return self.pus[slot // self.per_pu]

    @cached_property
    def ancestors(self) -> np.ndarray:
        """For each allowed PU (compact order): the ids of its ancestors from the root down, itself
        last; rows of shallower PUs are padded with unique negative ids."""
        ids: dict[int, int] = {}
        rows = []
        for pu in self.pus:
            chain = [self.topology.pu(pu), *self.topology.pu(pu).ancestors()][::-1]
            rows.append([ids.setdefault(id(node), len(ids)) for node in chain])
        depth = max(len(r) for r in rows)
        out = np.empty((len(rows), depth), dtype=np.int64)
        for i, row in enumerate(rows):
            out[i, : len(row)] = row
            out[i, len(row):] = -1 - np.arange(depth - len(row)) - i * depth
        return out

    def pu_index(self, pus) -> np.ndarray:
        position = {pu: i for i, pu in enumerate(self.pus)}
        try:
            return np.array([position[p] for p in pus], dtype=np.int64)
        except KeyError as err:
            raise PinwiseError(f"CPU {err.args[0]} is not an allowed PU of {self.topology.source}") from None

    @cached_property
    def lengths(self) -> np.ndarray:
        """For each allowed PU (compact order): how many objects lead from the root to it, itself
        included (unlike the rows of :attr:`ancestors`, not padded)."""
        return (self.ancestors >= 0).sum(axis=1)

    def distance(self, a_index: np.ndarray, b_index: np.ndarray) -> np.ndarray:
        """Tree distance between PUs given by index: the levels climbed from the deeper of the two
        to their lowest common ancestor, as :meth:`Topology.distance` counts them (where PUs sit
        at different depths, the padding of :attr:`ancestors` is not a level to climb)."""
        anc = self.ancestors
        equal = anc[a_index] == anc[b_index]
        lengths = self.lengths
        shorter = np.minimum(lengths[a_index], lengths[b_index])  # a PU's own padding matches itself
        common = np.minimum(np.cumprod(equal, axis=1).sum(axis=1), shorter)
        return np.maximum(lengths[a_index], lengths[b_index]) - common

    def lca_depth(self, a_index: np.ndarray, b_index: np.ndarray) -> np.ndarray:
        anc = self.ancestors
        return np.cumprod(anc[a_index] == anc[b_index], axis=1).sum(axis=1) - 1

    def slot_distance_matrix(self) -> np.ndarray:
        """S x S distances between slots (0 between two slots of one PU)."""
        index = np.repeat(np.arange(len(self.pus)), self.per_pu)
        a, b = np.meshgrid(index, index, indexing="ij")
        return self.distance(a.ravel(), b.ravel()).reshape(a.shape).astype(np.int32)

    def children(self, node: TopoObject) -> list[TopoObject]:
        """Children holding at least one allowed PU."""
        allowed = self.topology.allowed
        return [c for c in node.children if not c.cpuset.isdisjoint(allowed)]

    def capacity(self, node: TopoObject) -> int:
        return len(node.cpuset & self.topology.allowed) * self.per_pu

    def level_arities(self) -> list[int]:
        """Bottom-up: how many elements one object of each level gathers (max over its objects),
        starting with the slots of a PU; levels that gather one element are left out."""
        arities = [self.per_pu] if self.per_pu > 1 else []
        frontier = [self.topology.root]
        levels = []
        while frontier:
            counts = [len(self.children(n)) for n in frontier if n.type != ObjType.PU]
            if not counts:
                break
            levels.append(max(counts))
            frontier = [c for n in frontier for c in self.children(n)]
        arities += [a for a in reversed(levels) if a > 1]
        return arities

    def domain_objects(self, type_: str) -> list[TopoObject]:
        """Objects of a type holding allowed PUs (the root if the type is absent)."""
        objects = [o for o in self.topology.objects(type_) if not o.cpuset.isdisjoint(self.topology.allowed)]
        return objects or [self.topology.root]
