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

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property

from ..errors import PinwiseError


class ObjType(StrEnum):
    """Object types from the top of the tree to the bottom. When two objects have the same cpuset,
    the one earlier in this order is the parent (a NUMA node equal to its package sits below it).
    Members compare equal to their names ("pu", "l3", ...), which is what files and flags hold."""

    MACHINE = "machine"
    GROUP = "group"
    PACKAGE = "package"
    DIE = "die"
    NUMA = "numa"
    L3 = "l3"
    L2 = "l2"
    L1 = "l1"
    CORE = "core"
    PU = "pu"

    @property
    def rank(self) -> int:
        return _RANK[self]

    @property
    def label(self) -> str:
        """How the type is named on screen."""
        return _LABEL[self]

    @property
    def short(self) -> str:
        """The type's name in a synthetic string (``pack:2 core:4 pu:2``)."""
        return _SHORT[self]

    @property
    def is_cache(self) -> bool:
        return self in CACHE_TYPES


LEVEL_ORDER: tuple[ObjType, ...] = tuple(ObjType)
_RANK = {t: rank for rank, t in enumerate(LEVEL_ORDER)}
LEVEL_RANK = {str(t): rank for t, rank in _RANK.items()}
CACHE_TYPES = (ObjType.L3, ObjType.L2, ObjType.L1)
_LABEL = {ObjType.MACHINE: "Machine", ObjType.GROUP: "Group", ObjType.PACKAGE: "Package", ObjType.DIE: "Die",
          ObjType.NUMA: "NUMA", ObjType.L3: "L3", ObjType.L2: "L2", ObjType.L1: "L1d", ObjType.CORE: "Core",
          ObjType.PU: "PU"}
_SHORT = {ObjType.MACHINE: "machine", ObjType.GROUP: "group", ObjType.PACKAGE: "pack", ObjType.DIE: "die",
          ObjType.NUMA: "numa", ObjType.L3: "l3", ObjType.L2: "l2", ObjType.L1: "l1", ObjType.CORE: "core",
          ObjType.PU: "pu"}
#: How each type is named on screen (kept for the renderers that index it by name).
TYPE_LABEL = {str(t): t.label for t in LEVEL_ORDER}


@dataclass(eq=False)
class TopoObject:
    """One node of the tree. Built once by :func:`build_topology`, then treated as read-only."""

    type: ObjType
    cpuset: frozenset[int]
    os_index: int | None = None
    cache_size: int | None = None
    logical_index: int = 0
    depth: int = 0
    sibling_index: int = 0
    parent: TopoObject | None = field(default=None, repr=False)
    children: list[TopoObject] = field(default_factory=list, repr=False)

    def __post_init__(self):
        self.type = ObjType(self.type)  # parsers may hand over the type's name

    @property
    def is_cache(self) -> bool:
        return self.type.is_cache

    @cached_property
    def first_pu(self) -> int:
        return min(self.cpuset)

    def enclosing(self, type_: ObjType) -> TopoObject | None:
        """The nearest ancestor (or this object) of that type."""
        return next((node for node in (self, *self.ancestors()) if node.type == type_), None)

    def ancestors(self) -> list[TopoObject]:
        """Parent, grandparent, ... up to the machine."""
        chain = []
        node = self.parent
        while node is not None:
            chain.append(node)
            node = node.parent
        return chain

    def label(self) -> str:
        named_by_os = self.type in (ObjType.PU, ObjType.PACKAGE, ObjType.NUMA) and self.os_index is not None
        index = self.os_index if named_by_os else self.logical_index
        text = f"{self.type.label} {index}" if self.type != ObjType.MACHINE else "Machine"
        if self.cache_size:
            text += f" ({format_size(self.cache_size)})"
        return text


def format_size(size: int) -> str:
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= factor and size % (factor // 1024 or 1) == 0:
            value = size / factor
            return f"{value:g}{unit}" if value == int(value) else f"{value:.1f}{unit}"
    return f"{size}B"


def walk(root: TopoObject, children=None) -> Iterator[TopoObject]:
    """Every object below ``root`` (itself first), depth-first in child order: logical order.
    ``children(node)`` narrows the walk (e.g. to objects with allowed PUs)."""
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(node.children if children is None else children(node)))


@dataclass(frozen=True)
class ObjectSpec:
    """A flat description of one object, before it has a place in the tree."""

    type: ObjType
    cpuset: frozenset[int]
    os_index: int | None = None
    cache_size: int | None = None


class Topology:
    """A machine: the object tree, the PUs in depth-first order, and the PUs this process may use.

    Read-only once built (:meth:`restricted` gives the same machine with other allowed PUs);
    policies only read it, and nothing in here touches the live machine.
    """

    def __init__(self, root: TopoObject, allowed: Iterable[int] | None = None, source: str = "",
                 restriction: str | None = None):
        set_ = object.__setattr__
        set_(self, "root", root)
        set_(self, "source", source)
        levels = _finalize(root)
        #: Objects of each type present, in logical order, top type first: the levels table.
        set_(self, "levels", levels)
        set_(self, "pus", tuple(levels.get(ObjType.PU, ())))
        set_(self, "_by_os", {pu.os_index: pu for pu in self.pus})
        all_pus = frozenset(self._by_os)
        if allowed is None:
            chosen = all_pus
        else:
            chosen = frozenset(allowed) & all_pus
            if not chosen:
                raise PinwiseError(f"no PU of topology {source!r} is allowed to this process")
        set_(self, "allowed", chosen)
        #: Why some PUs are not allowed ("sched_getaffinity", "cgroup cpuset 0-3", ...), for display.
        set_(self, "restriction", restriction if chosen != all_pus else None)

    def __setattr__(self, name, value):
        raise AttributeError(f"a Topology is read-only ({name}): use restricted() for other allowed PUs")

    def restricted(self, allowed: Iterable[int], restriction: str | None = None) -> Topology:
        """The same machine with only ``allowed`` PUs usable."""
        return Topology(self.root, allowed, self.source, restriction or "a restriction")

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

    def objects(self, type_: ObjType | str) -> list[TopoObject]:
        """All objects of one type, in depth-first (logical) order."""
        return list(self.levels.get(type_, ()))

    @property
    def level_types(self) -> tuple[ObjType, ...]:
        """Types present in the tree, top to bottom."""
        return tuple(self.levels)

    def synthetic_levels(self) -> list[tuple[ObjType, int, int | None]] | None:
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

    @cached_property
    def shape(self) -> str:
        """The structure in a few words: ``pack:2 l3:1 core:4 pu:2`` when every object of a level
        has the same children, else the count of each type."""
        levels = self.synthetic_levels()
        if levels is not None:
            return " ".join(f"{t.short}:{arity}" for t, arity, _ in levels)
        return ", ".join(f"{len(objs)} x {t.short}" for t, objs in self.levels.items() if t != ObjType.MACHINE)

    @cached_property
    def fingerprint(self) -> str:
        """A hash of the structure: each object's type and PUs (cache sizes and the allowed PUs
        aside). Plans computed for one machine are meant for machines with the same fingerprint."""
        import hashlib

        items = sorted((node.type.rank, tuple(sorted(node.cpuset))) for node in walk(self.root))
        return hashlib.sha256(repr(items).encode()).hexdigest()[:16]

    @property
    def allowed_pus(self) -> list[TopoObject]:
        """Allowed PUs in depth-first order."""
        return [pu for pu in self.pus if pu.os_index in self.allowed]

    def coordinates(self, pu: TopoObject) -> tuple[int, ...]:
        """Per-level coordinates: the index of each ancestor among its siblings, top to bottom."""
        return tuple(node.sibling_index for node in reversed([pu, *pu.ancestors()[:-1]]))

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
        return next((node for node in pb.ancestors() if id(node) in seen), self.root)

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
        return tuple(sorted((node.type.rank, tuple(sorted(node.cpuset)),
                             node.os_index if node.type == ObjType.PU else None, node.cache_size)
                            for node in walk(self.root)))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Topology) and self.signature() == other.signature()

    def __hash__(self) -> int:
        return hash(self.signature())

    def __repr__(self) -> str:
        return f"Topology({self.source!r}, {self.nb_pus} PUs, {len(self.allowed)} allowed)"

    def __str__(self) -> str:
        restricted = f", {len(self.allowed)} allowed" if len(self.allowed) != self.nb_pus else ""
        return f"{self.source or 'topology'}: {self.shape} ({self.nb_pus} PUs{restricted})"


def _finalize(root: TopoObject) -> dict[ObjType, list[TopoObject]]:
    """Number the tree (depth, logical and sibling indices) and return its levels table."""
    levels: dict[ObjType, list[TopoObject]] = {}
    root.depth = 0
    for node in walk(root):
        node.logical_index = len(levels.setdefault(node.type, []))
        levels[node.type].append(node)
        for rank, child in enumerate(node.children):
            child.sibling_index = rank
            child.depth = node.depth + 1
    return {t: levels[t] for t in LEVEL_ORDER if t in levels}


def build_topology(specs: Sequence[ObjectSpec], allowed: Iterable[int] | None = None, source: str = "",
                   restriction: str | None = None) -> Topology:
    """Build the tree from flat objects by cpuset inclusion, as hwloc inserts objects.

    Objects with the same type and cpuset are merged; an object whose cpuset partly overlaps
    another's (neither contains the other) is an error, as the machine would not be a tree.
    """
    pus = [s for s in specs if s.type == ObjType.PU]
    if not pus:
        raise PinwiseError(f"topology {source!r} has no PU (processing unit)")
    all_cpus = frozenset(s.os_index for s in pus)
    if len(all_cpus) != len(pus) or any(s.os_index is None or s.os_index < 0 for s in pus):
        raise PinwiseError(f"topology {source!r} has PUs with missing or duplicate OS indices")
    unique: dict[tuple[ObjType, frozenset[int]], ObjectSpec] = {}
    for spec in specs:
        if spec.type not in LEVEL_RANK:
            raise PinwiseError(f"topology {source!r}: unknown object type {spec.type!r}")
        spec = ObjectSpec(ObjType(spec.type), spec.cpuset, spec.os_index, spec.cache_size)
        if spec.type == ObjType.PU and spec.cpuset != frozenset([spec.os_index]):
            raise PinwiseError(f"topology {source!r}: PU {spec.os_index} has cpuset {sorted(spec.cpuset)}, "
                               f"not [{spec.os_index}]")
        if spec.type == ObjType.MACHINE or not spec.cpuset:
            continue  # an object without CPUs (a memory-only NUMA node) takes no place in the tree
        if not spec.cpuset <= all_cpus:
            raise PinwiseError(
                f"topology {source!r}: a {spec.type.label} names CPUs "
                f"{sorted(spec.cpuset - all_cpus)} that have no PU"
            )
        unique.setdefault((spec.type, spec.cpuset), spec)

    root = TopoObject(ObjType.MACHINE, all_cpus)
    ordered = sorted(unique.values(), key=lambda s: (-len(s.cpuset), s.type.rank, min(s.cpuset)))
    for spec in ordered:
        parent = root
        while True:
            for child in parent.children:
                if spec.cpuset <= child.cpuset:
                    parent = child
                    break
                if spec.cpuset & child.cpuset:
                    raise PinwiseError(
                        f"topology {source!r}: {spec.type.label} with CPUs {sorted(spec.cpuset)} "
                        f"partly overlaps {child.label()} with CPUs {sorted(child.cpuset)}: not a tree"
                    )
            else:
                break
        if parent.type == ObjType.PU:
            raise PinwiseError(f"topology {source!r}: {spec.type.label} below a PU")
        node = TopoObject(spec.type, spec.cpuset, spec.os_index, spec.cache_size, parent=parent)
        parent.children.append(node)
    _sort_children(root)
    return Topology(root, allowed, source, restriction)


def _sort_children(root: TopoObject) -> None:
    for node in walk(root):
        node.children.sort(key=lambda c: c.first_pu)
