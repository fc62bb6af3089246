"""The one machine model every capability takes: a tree of typed objects, like hwloc's.

machine > [group] > package > [die] > NUMA node > L3 > L2 > L1 > core > PU. Each object has a type,
a logical index (its rank among objects of that type in depth-first order), an OS index where the
OS names it (PUs, packages, NUMA nodes), a cache size for caches, and the set of PU OS indices below
it (its cpuset). The topology also knows which PUs this process may use (``allowed``); forbidden
PUs stay in the tree so that a user sees what is there and what is withheld.

Trees are built from a flat list of objects by cpuset inclusion (the way hwloc inserts objects), so
every source (sysfs, XML, synthetic strings, presets) shares one builder and one set of invariants.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from ..errors import PinwiseError

#: Object types from the top of the tree to the bottom. When two objects have the same cpuset,
#: the one earlier in this order is the parent (a NUMA node equal to its package sits below it).
LEVEL_ORDER: tuple[str, ...] = ("machine", "group", "package", "die", "numa", "l3", "l2", "l1", "core", "pu")
LEVEL_RANK = {name: rank for rank, name in enumerate(LEVEL_ORDER)}
CACHE_TYPES = ("l3", "l2", "l1")

#: How each type is named on screen.
TYPE_LABEL = {
    "machine": "Machine",
    "group": "Group",
    "package": "Package",
    "die": "Die",
    "numa": "NUMA",
    "l3": "L3",
    "l2": "L2",
    "l1": "L1d",
    "core": "Core",
    "pu": "PU",
}


@dataclass(eq=False)
class TopoObject:
    """One node of the tree. Built once by :func:`build_topology`, then treated as read-only."""

    type: str
    cpuset: frozenset[int]
    os_index: int | None = None
    cache_size: int | None = None
    logical_index: int = 0
    depth: int = 0
    sibling_index: int = 0
    parent: TopoObject | None = field(default=None, repr=False)
    children: list[TopoObject] = field(default_factory=list, repr=False)

    @property
    def is_cache(self) -> bool:
        return self.type in CACHE_TYPES

    @cached_property
    def first_pu(self) -> int:
        return min(self.cpuset)

    def ancestors(self) -> list[TopoObject]:
        """Parent, grandparent, ... up to the machine."""
        chain = []
        node = self.parent
        while node is not None:
            chain.append(node)
            node = node.parent
        return chain

    def label(self) -> str:
        index = self.os_index if self.type in ("pu", "package", "numa") and self.os_index is not None else self.logical_index
        text = f"{TYPE_LABEL[self.type]} {index}" if self.type != "machine" else "Machine"
        if self.cache_size:
            text += f" ({format_size(self.cache_size)})"
        return text


def format_size(size: int) -> str:
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= factor and size % (factor // 1024 or 1) == 0:
            value = size / factor
            return f"{value:g}{unit}" if value == int(value) else f"{value:.1f}{unit}"
    return f"{size}B"


@dataclass(frozen=True)
class ObjectSpec:
    """A flat description of one object, before it has a place in the tree."""

    type: str
    cpuset: frozenset[int]
    os_index: int | None = None
    cache_size: int | None = None


class Topology:
    """A machine: the object tree, the PUs in depth-first order, and the PUs this process may use.

    Policies only read it; nothing in here touches the live machine.
    """

    def __init__(self, root: TopoObject, allowed: Iterable[int] | None = None, source: str = "",
                 restriction: str | None = None):
        self.root = root
        self.source = source
        self._finalize()
        all_pus = frozenset(pu.os_index for pu in self.pus)
        if allowed is None:
            self.allowed = all_pus
        else:
            self.allowed = frozenset(allowed) & all_pus
            if not self.allowed:
                raise PinwiseError(f"no PU of topology {source!r} is allowed to this process")
        #: Why some PUs are not allowed ("sched_getaffinity", "cgroup cpuset 0-3", ...), for display.
        self.restriction = restriction if self.allowed != all_pus else None

    # -- construction -------------------------------------------------------------------------

    def _finalize(self) -> None:
        counters: dict[str, int] = {}
        pus: list[TopoObject] = []
        stack = [(self.root, 0)]
        while stack:
            node, depth = stack.pop()
            node.depth = depth
            node.logical_index = counters.get(node.type, 0)
            counters[node.type] = node.logical_index + 1
            if node.type == "pu":
                pus.append(node)
            for rank in range(len(node.children) - 1, -1, -1):
                node.children[rank].sibling_index = rank
                stack.append((node.children[rank], depth + 1))
        self.pus: tuple[TopoObject, ...] = tuple(pus)
        self._by_os = {pu.os_index: pu for pu in pus}

    # -- queries ------------------------------------------------------------------------------

    @property
    def nb_pus(self) -> int:
        return len(self.pus)

    def pu(self, os_index: int) -> TopoObject:
        try:
            return self._by_os[os_index]
        except KeyError:
            raise PinwiseError(
                f"CPU {os_index} does not exist on this topology (PUs: {self.cpulist_text(self._by_os)})"
            ) from None

    def has_pu(self, os_index: int) -> bool:
        return os_index in self._by_os

    def objects(self, type_: str) -> list[TopoObject]:
        """All objects of one type, in depth-first (logical) order."""
        found = []
        stack = [self.root]
        while stack:
            node = stack.pop()
            if node.type == type_:
                found.append(node)
            stack.extend(reversed(node.children))
        return found

    @cached_property
    def level_types(self) -> tuple[str, ...]:
        """Types present in the tree, top to bottom."""
        present = set()
        stack = [self.root]
        while stack:
            node = stack.pop()
            present.add(node.type)
            stack.extend(node.children)
        return tuple(t for t in LEVEL_ORDER if t in present)

    @cached_property
    def is_symmetric(self) -> bool:
        """Whether every object of a level has the same number and types of children (hwloc's
        synthetic strings and our presets are; a machine with offline CPUs may not be)."""
        return self.synthetic_levels() is not None

    def synthetic_levels(self) -> list[tuple[str, int, int | None]] | None:
        """The tree as (type, arity, cache size) per level, or None if it is not symmetric."""
        levels = []
        frontier = [self.root]
        while frontier[0].children:
            shapes = {(len(n.children), tuple(c.type for c in n.children)) for n in frontier}
            if len(shapes) != 1:
                return None
            (arity, types), = shapes
            if len(set(types)) != 1:
                return None
            frontier = [c for n in frontier for c in n.children]
            sizes = {n.cache_size for n in frontier}
            if len(sizes) != 1:
                return None
            levels.append((types[0], arity, sizes.pop()))
        return levels

    @property
    def allowed_pus(self) -> list[TopoObject]:
        """Allowed PUs in depth-first order."""
        return [pu for pu in self.pus if pu.os_index in self.allowed]

    def coordinates(self, pu: TopoObject) -> tuple[int, ...]:
        """Per-level coordinates: the index of each ancestor among its siblings, top to bottom."""
        coords = []
        node = pu
        while node.parent is not None:
            coords.append(node.sibling_index)
            node = node.parent
        return tuple(reversed(coords))

    def compact_order(self, allowed_only: bool = True) -> list[int]:
        """PU OS indices in depth-first order: fill a core, then its cache, then its package
        (Intel's KMP_AFFINITY=compact, OpenMP ``close`` over PU places)."""
        pus = self.allowed_pus if allowed_only else list(self.pus)
        return [pu.os_index for pu in pus]

    def scatter_order(self, allowed_only: bool = True) -> list[int]:
        """PU OS indices ordered by reversed coordinates: one PU per package first, then per cache
        within packages, ..., hardware threads of a core last (Intel's KMP_AFFINITY=scatter)."""
        pus = self.allowed_pus if allowed_only else list(self.pus)
        return [pu.os_index for pu in sorted(pus, key=lambda p: tuple(reversed(self.coordinates(p))))]

    def lowest_common_ancestor(self, a: int, b: int) -> TopoObject:
        pa, pb = self.pu(a), self.pu(b)
        if pa is pb:
            return pa
        seen = {id(x) for x in pa.ancestors()}
        for node in pb.ancestors():
            if id(node) in seen:
                return node
        return self.root  # unreachable: the root is everyone's ancestor

    def distance(self, a: int, b: int) -> int:
        """Levels climbed from PU ``a`` (or ``b``, whichever is deeper) to their lowest common
        ancestor: 0 for the same PU, 1 for SMT siblings, up to the tree depth across the machine."""
        lca = self.lowest_common_ancestor(a, b)
        return max(self.pu(a).depth, self.pu(b).depth) - lca.depth

    def shared_caches(self, a: int, b: int) -> list[TopoObject]:
        """The caches two PUs share, innermost first."""
        lca = self.lowest_common_ancestor(a, b)
        return [n for n in [lca, *lca.ancestors()] if n.is_cache]

    @staticmethod
    def cpulist_text(cpus: Iterable[int]) -> str:
        from ..cpulist import format_cpulist

        return format_cpulist(sorted(cpus))

    def signature(self) -> tuple:
        """A canonical form for comparing topologies: every object as (type, cpuset, os index of
        PUs, cache size), sorted. Two topologies with equal signatures are the same machine."""
        items = []
        stack = [self.root]
        while stack:
            node = stack.pop()
            items.append((LEVEL_RANK[node.type], tuple(sorted(node.cpuset)),
                          node.os_index if node.type == "pu" else None, node.cache_size))
            stack.extend(node.children)
        return tuple(sorted(items))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Topology) and self.signature() == other.signature()

    def __hash__(self) -> int:
        return hash(self.signature())

    def __repr__(self) -> str:
        return f"Topology({self.source!r}, {self.nb_pus} PUs, {len(self.allowed)} allowed)"

    def summary(self) -> str:
        counts = [f"{len(self.objects(t))} {TYPE_LABEL[t]}" for t in self.level_types if t not in ("machine",)]
        return ", ".join(counts)


def build_topology(specs: Sequence[ObjectSpec], allowed: Iterable[int] | None = None, source: str = "",
                   restriction: str | None = None) -> Topology:
    """Build the tree from flat objects by cpuset inclusion, as hwloc inserts objects.

    Objects with the same type and cpuset are merged; an object whose cpuset partly overlaps
    another's (neither contains the other) is an error, as the machine would not be a tree.
    """
    pus = [s for s in specs if s.type == "pu"]
    if not pus:
        raise PinwiseError(f"topology {source!r} has no PU (processing unit)")
    all_cpus = frozenset(s.os_index for s in pus)
    if len(all_cpus) != len(pus) or any(s.os_index is None or s.os_index < 0 for s in pus):
        raise PinwiseError(f"topology {source!r} has PUs with missing or duplicate OS indices")
    unique: dict[tuple[str, frozenset[int]], ObjectSpec] = {}
    for spec in specs:
        if spec.type not in LEVEL_RANK:
            raise PinwiseError(f"topology {source!r}: unknown object type {spec.type!r}")
        if spec.type == "machine" or not spec.cpuset:
            continue
        if spec.type == "pu" and spec.cpuset != frozenset([spec.os_index]):
            raise PinwiseError(f"topology {source!r}: PU {spec.os_index} has cpuset {sorted(spec.cpuset)}")
        if not spec.cpuset <= all_cpus:
            raise PinwiseError(
                f"topology {source!r}: a {TYPE_LABEL[spec.type]} names CPUs "
                f"{sorted(spec.cpuset - all_cpus)} that have no PU"
            )
        unique.setdefault((spec.type, spec.cpuset), spec)

    root = TopoObject("machine", all_cpus)
    ordered = sorted(unique.values(), key=lambda s: (-len(s.cpuset), LEVEL_RANK[s.type], min(s.cpuset)))
    for spec in ordered:
        parent = root
        while True:
            for child in parent.children:
                if spec.cpuset <= child.cpuset:
                    parent = child
                    break
                if spec.cpuset & child.cpuset:
                    raise PinwiseError(
                        f"topology {source!r}: {TYPE_LABEL[spec.type]} with CPUs {sorted(spec.cpuset)} "
                        f"partly overlaps {child.label()} with CPUs {sorted(child.cpuset)}: not a tree"
                    )
            else:
                break
        if parent.type == "pu":
            raise PinwiseError(f"topology {source!r}: {TYPE_LABEL[spec.type]} below a PU")
        node = TopoObject(spec.type, spec.cpuset, spec.os_index, spec.cache_size, parent=parent)
        parent.children.append(node)
    _sort_children(root)
    return Topology(root, allowed, source, restriction)


def _sort_children(root: TopoObject) -> None:
    stack = [root]
    while stack:
        node = stack.pop()
        node.children.sort(key=lambda c: c.first_pu)
        stack.extend(node.children)
