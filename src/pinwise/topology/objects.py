"""The objects a topology is made of: their types (hwloc's, in the order of the CPU tree), the
tree's nodes, and the flat descriptions the builder (:func:`pinwise.topology.model.build_topology`)
takes, with the CPU kinds and distance matrices a source may add; and the walks over a tree.
The drawing (:mod:`pinwise.topology.render`) needs only these, not the whole model.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property

#: The source name of the topology read from this machine (sysfs): its allowed PUs are this process's.
LIVE_SOURCE = "this machine (sysfs)"


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
    #: Memory-side caches never enter the CPU tree; last, so that the ranks above (which plans'
    #: machine fingerprints hash) stay what they were before pinwise knew them.
    MEMCACHE = "memcache"

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

    @property
    def is_memory(self) -> bool:
        """NUMA nodes and memory-side caches: memory children, never part of the CPU tree."""
        return self in MEMORY_TYPES


LEVEL_ORDER: tuple[ObjType, ...] = tuple(ObjType)
_RANK = {t: rank for rank, t in enumerate(LEVEL_ORDER)}
LEVEL_RANK = {str(t): rank for t, rank in _RANK.items()}
CACHE_TYPES = (ObjType.L3, ObjType.L2, ObjType.L1)
#: hwloc 1's subtype of an L3Cache that is a memory-side cache (KNL's MCDRAM in cache mode): in
#: front of memory, not beside the cores; hwloc 2 reads it as such an L3 too, and makes MemCache
#: objects of the caches its own discovery finds.
MEMORY_SIDE_CACHE = "MemorySideCache"
MEMORY_TYPES = (ObjType.NUMA, ObjType.MEMCACHE)
_LABEL = {ObjType.MACHINE: "Machine", ObjType.GROUP: "Group", ObjType.PACKAGE: "Package", ObjType.DIE: "Die",
          ObjType.NUMA: "NUMA", ObjType.MEMCACHE: "MemCache", ObjType.L3: "L3", ObjType.L2: "L2", ObjType.L1: "L1d", ObjType.CORE: "Core",
          ObjType.PU: "PU"}
_SHORT = {ObjType.MACHINE: "machine", ObjType.GROUP: "group", ObjType.PACKAGE: "pack", ObjType.DIE: "die",
          ObjType.NUMA: "numa", ObjType.MEMCACHE: "memcache", ObjType.L3: "l3", ObjType.L2: "l2", ObjType.L1: "l1", ObjType.CORE: "core",
          ObjType.PU: "pu"}
#: How each type is named on screen (kept for the renderers that index it by name).
TYPE_LABEL = {str(t): t.label for t in LEVEL_ORDER}


@dataclass(eq=False)
class TopoObject:
    """One node of the tree. Built once by :func:`build_topology`, then treated as read-only.

    ``children`` is the CPU tree (every child has PUs); ``memory_children`` the NUMA nodes and
    memory-side caches attached here; ``cpuless_children`` objects without PUs."""

    type: ObjType
    cpuset: frozenset[int]
    os_index: int | None = None
    cache_size: int | None = None
    logical_index: int = 0
    depth: int = 0
    sibling_index: int = 0
    parent: TopoObject | None = field(default=None, repr=False)
    children: list[TopoObject] = field(default_factory=list, repr=False)
    local_memory: int | None = None
    subtype: str | None = None
    memory_children: list[TopoObject] = field(default_factory=list, repr=False)
    cpuless_children: list[TopoObject] = field(default_factory=list, repr=False)
    order: float | None = field(default=None, repr=False)
    #: The PUs below it offline ones included (hwloc's complete_cpuset), where the source says.
    complete: frozenset[int] | None = field(default=None, repr=False)
    #: A cache's (associativity, line size) where the source says (an hwloc XML file does);
    #: associativity -1 is fully associative.
    cache_geometry: tuple[int, int] | None = field(default=None, repr=False)

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
        if self.subtype:
            text += f" {self.subtype}"
        if self.cache_size:
            text += f" ({format_size(self.cache_size)})"
        elif self.local_memory:
            text += f" ({format_size(self.local_memory)})"
        return text


def format_size(size: int) -> str:
    for unit, factor in (("PiB", 1 << 50), ("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= factor and size % (factor // 1024 or 1) == 0:
            value = size / factor
            return f"{value:g}{unit}" if value == int(value) else f"{value:.1f}{unit}"
    return f"{size}B"


def walk(root: TopoObject, children=None) -> Iterator[TopoObject]:
    """Every object of the CPU tree below ``root`` (itself first), depth-first in child order:
    logical order. ``children(node)`` narrows the walk (e.g. to objects with allowed PUs)."""
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(node.children if children is None else children(node)))


def all_children(node: TopoObject) -> list[TopoObject]:
    """Memory children first (as lstopo lists them), then the CPU tree, then CPU-less objects."""
    return [*node.memory_children, *node.children, *node.cpuless_children]


def walk_all(root: TopoObject) -> Iterator[TopoObject]:
    """Every object below ``root``, memory and CPU-less ones included, in hwloc's depth-first order."""
    return walk(root, all_children)


def local_numa(node: TopoObject) -> list[TopoObject]:
    """The NUMA nodes local to an object, hwloc's nodeset: the object itself for a NUMA node,
    else those at or below it and those attached to its ancestors."""
    if node.type == ObjType.NUMA:
        return [node]
    near = [m for m in walk_all(node) if m.type == ObjType.NUMA]
    for ancestor in node.ancestors():
        near += [m for top in ancestor.memory_children for m in walk_all(top) if m.type == ObjType.NUMA]
    return near


@dataclass(frozen=True)
class ObjectSpec:
    """A flat description of one object, before it has a place in the tree.

    ``parent`` (the position of another spec in the same list) says where a memory or CPU-less
    object hangs when the source knows it (an XML file does); without it a NUMA node goes to the
    highest object with its cpuset and a CPU-less object to the machine. ``order`` sorts siblings
    (a file's order); without it siblings go by their first PU."""

    type: ObjType
    cpuset: frozenset[int]
    os_index: int | None = None
    cache_size: int | None = None
    local_memory: int | None = None
    subtype: str | None = None
    parent: int | None = None
    order: float | None = None
    complete: frozenset[int] | None = None
    cache_geometry: tuple[int, int] | None = None


@dataclass(frozen=True)
class CpuKind:
    """PUs of one kind on a hybrid processor (hwloc's cpukinds): ``efficiency`` ranks the kinds
    from 0, the least performant (e.g. E-cores), upward; ``info`` holds what the source says
    (FrequencyMaxMHz, CoreType...)."""

    cpuset: frozenset[int]
    efficiency: int
    info: tuple[tuple[str, str], ...] = ()

    @property
    def name(self) -> str | None:
        """What the source calls the kind (Intel's CoreType, or the vendor), if it does."""
        info = dict(self.info)
        return info.get("CoreType") or info.get("CPUVendor")


@dataclass(frozen=True)
class Distances:
    """A distance matrix between objects of one type (NUMA nodes, in the sources pinwise reads),
    named by OS index: ``values[i][j]`` from ``os_indexes[i]`` to ``os_indexes[j]``. ``kind`` is
    hwloc's kind bits (1 from the OS, 2 user-given, 4 latency, 8 bandwidth...)."""

    type: ObjType
    os_indexes: tuple[int, ...]
    values: tuple[tuple[int, ...], ...]
    kind: int = 5
    name: str | None = None
