"""The one machine model every capability takes: a tree of typed objects, as hwloc 2 holds it.

machine > [group] > package > [die] > L3 > L2 > L1 > core > PU is the *CPU tree*: every object in it
has PUs, and placement policies walk only it. Each object has a type, a logical index (its rank
among objects of that type in depth-first order), an OS index where the OS names it, a cache size
for caches, and the set of PU OS indices below it (its cpuset). As in hwloc 2, NUMA nodes (and the
memory-side caches in front of them) are *memory children* attached to the CPU-tree object whose
PUs are local to them, several per object where the machine has several kinds of memory (DRAM and
MCDRAM/HBM/CXL); a node without CPUs hangs off the object the source says, the machine by default.
Where no object has a NUMA node's cpuset, a Group is inserted to carry it, as hwloc does. Objects
without PUs (a Group holding only memory, a package whose CPUs are all offline) are *CPU-less
children*, shown and exported but never walked by placement.

The topology also knows which PUs this process may use (``allowed``); forbidden PUs stay in the
tree so that a user sees what is there and what is withheld; the CPU kinds of hybrid processors
(hwloc's cpukinds, with their efficiency rank) and NUMA distance matrices where the source has them.

Trees are built from a flat list of objects by cpuset inclusion (the way hwloc inserts objects), so
every source (sysfs, XML, synthetic strings, presets) shares one builder and one set of invariants.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from functools import cached_property

from ..cpulist import format_cpulist
from ..errors import PinwiseError
from ..vocabulary import KIND_PREFERENCES
from .objects import (CACHE_TYPES, LEVEL_ORDER, LEVEL_RANK, MEMORY_SIDE_CACHE, MEMORY_TYPES, TYPE_LABEL, CpuKind,
                      Distances, ObjectSpec, ObjType, TopoObject, all_children, format_size, local_numa, walk, walk_all)
from .render import render

#: The objects' names, which callers have always imported from here (pinwise.topology.objects).
__all__ = ["CACHE_TYPES", "LEVEL_ORDER", "LEVEL_RANK", "MEMORY_SIDE_CACHE", "MEMORY_TYPES", "TYPE_LABEL", "CpuKind",
           "Distances", "ObjectSpec", "ObjType", "TopoObject", "Topology", "all_children", "build_topology", "format_size",
           "local_numa", "walk", "walk_all"]


class Topology:
    """A machine: the object tree, the PUs in depth-first order, and the PUs this process may use.

    Read-only once built (:meth:`restricted` gives the same machine with other allowed PUs);
    policies only read it, and nothing in here touches the live machine.
    """

    def __init__(self, root: TopoObject, allowed: Iterable[int] | None = None, source: str = "",
                 restriction: str | None = None, cpukinds: Sequence[CpuKind] = (),
                 distances: Sequence[Distances] = (), kind_preference: str = "performance",
                 allowed_nodes: Iterable[int] | None = None, devices: Sequence = ()):
        set_ = object.__setattr__
        if kind_preference not in KIND_PREFERENCES:
            raise PinwiseError(f"unknown CPU kind preference {kind_preference!r}: choose {', '.join(KIND_PREFERENCES)}")
        set_(self, "root", root)
        set_(self, "source", source)
        every = _finalize(root)
        #: Objects of each type, memory and CPU-less ones included, in logical order.
        set_(self, "all_levels", every)
        #: The CPU tree's objects of each type present, in logical order, top type first.
        levels = {t: [o for o in objs if o.cpuset and not t.is_memory] for t, objs in every.items()}
        set_(self, "levels", {t: objs for t, objs in levels.items() if objs})
        set_(self, "pus", tuple(self.levels.get(ObjType.PU, ())))
        set_(self, "cpukinds", tuple(sorted(cpukinds, key=lambda k: k.efficiency)))
        set_(self, "distances", tuple(distances))
        #: PCI and OS devices with the PUs local to each (pinwise.topology.devices.Device), in the
        #: source's order.
        set_(self, "devices", tuple(devices))
        #: Which CPU kind compact, scatter and the OpenMP policies fill first on a hybrid machine.
        set_(self, "kind_preference", kind_preference)
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
        #: The NUMA nodes (OS indices) this process may allocate from (hwloc's allowed nodeset, where
        #: the source says; every node otherwise).
        every_node = frozenset(n.os_index for n in every.get(ObjType.NUMA, ()))
        set_(self, "allowed_nodes", every_node if allowed_nodes is None else frozenset(allowed_nodes) & every_node)

    def __setattr__(self, name, value):
        raise AttributeError(f"a Topology is read-only ({name}): use restricted() for other allowed PUs")

    def restricted(self, allowed: Iterable[int], restriction: str | None = None) -> Topology:
        """The same machine with only ``allowed`` PUs usable."""
        return Topology(self.root, allowed, self.source, restriction or "a restriction", self.cpukinds,
                        self.distances, self.kind_preference, self.allowed_nodes, self.devices)

    def preferring(self, kinds: str) -> Topology:
        """The same machine whose orders fill the CPU kinds as ``kinds`` says: ``performance``
        (hwloc's highest efficiency rank first: P-cores), ``efficiency`` (E-cores first) or ``any``
        (depth-first order, kinds ignored)."""
        if kinds == self.kind_preference:
            return self
        return Topology(self.root, self.allowed, self.source, self.restriction, self.cpukinds, self.distances, kinds,
                        self.allowed_nodes, self.devices)

    def _by_kind(self, order: list[int]) -> list[int]:
        if not self.cpukinds or self.kind_preference == "any":
            return order
        sign = -1 if self.kind_preference == "performance" else 1
        rank = {cpu: sign * kind.efficiency for kind in self.cpukinds for cpu in kind.cpuset}
        return sorted(order, key=lambda cpu: rank.get(cpu, 0))  # stable: depth-first within a kind

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
        """All objects of one type, in depth-first (logical) order, memory and CPU-less ones
        included (``numa`` gives every NUMA node, with or without CPUs)."""
        return list(self.all_levels.get(type_, ()))

    @property
    def numa_nodes(self) -> list[TopoObject]:
        return self.objects(ObjType.NUMA)

    @property
    def level_types(self) -> tuple[ObjType, ...]:
        """Types present in the CPU tree, top to bottom."""
        return tuple(self.levels)

    def kind_of(self, os_index: int) -> CpuKind | None:
        """The CPU kind of a PU (None on a machine without kinds)."""
        return next((kind for kind in self.cpukinds if os_index in kind.cpuset), None)

    def numa_node_of(self, os_index: int) -> TopoObject | None:
        """The NUMA node local to a PU: the first attached to its nearest ancestor with memory."""
        node: TopoObject | None = self.pu(os_index)
        while node is not None:
            for memory in node.memory_children:
                numa = next((m for m in walk_all(memory) if m.type == ObjType.NUMA), None)
                if numa is not None:
                    return numa
            node = node.parent
        return None

    def synthetic_levels(self) -> list[tuple[ObjType, int, int | None]] | None:
        """The tree as (type, arity, cache size) per level, or None if it is not symmetric: every
        object of a level with the same number and types of children (hwloc's symmetric subtree;
        a level's cache size is its first object's, as hwloc writes it)."""
        levels = []
        frontier = [self.root]
        if any(node.cpuless_children for node in walk(self.root)):
            return None
        while frontier[0].children:
            shapes = {(len(n.children), tuple(c.type for c in n.children)) for n in frontier}
            if len(shapes) != 1:
                return None
            (arity, types), = shapes
            if len(set(types)) != 1:
                return None
            frontier = [c for n in frontier for c in n.children]
            levels.append((types[0], arity, frontier[0].cache_size))  # as hwloc, the first object's size
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

        items = sorted((node.type.rank, tuple(sorted(node.cpuset))) for node in walk_all(self.root))
        return hashlib.sha256(repr(items).encode()).hexdigest()[:16]

    @property
    def allowed_pus(self) -> list[TopoObject]:
        """Allowed PUs in depth-first order."""
        return [pu for pu in self.pus if pu.os_index in self.allowed]

    def coordinates(self, pu: TopoObject) -> tuple[int, ...]:
        """Per-level coordinates: the index of each ancestor among its siblings, top to bottom."""
        return tuple(node.sibling_index for node in reversed([pu, *pu.ancestors()[:-1]]))

    def logical_order(self, allowed_only: bool = True) -> list[int]:
        """PU OS indices in depth-first order, hwloc's logical numbering."""
        pus = self.allowed_pus if allowed_only else list(self.pus)
        return [pu.os_index for pu in pus]

    def compact_order(self, allowed_only: bool = True) -> list[int]:
        """PU OS indices in depth-first order: fill a core, then its cache, then its package
        (Intel's KMP_AFFINITY=compact, OpenMP ``close`` over PU places); on a hybrid machine the
        preferred CPU kind first (see :meth:`preferring`). ``allowed_only=False``: every PU in
        logical order."""
        return self._by_kind(self.logical_order()) if allowed_only else self.logical_order(False)

    def scatter_order(self, allowed_only: bool = True) -> list[int]:
        """PU OS indices dealt round the tree: one PU per package first, then per cache within
        packages, ..., hardware threads of a core last (Intel's KMP_AFFINITY=scatter). Each object
        deals its children's own orders, next to the child it has dealt the smallest share of its
        PUs (the first of those that tie), so a symmetric tree is dealt one PU of each child a
        round, and PUs at different depths (a package beside a group of two) or a cpuset that
        leaves one package fewer are spread by their number, as hwloc-distrib spreads them
        (sorting by reversed coordinates compared positions of different levels there: two of 4
        threads in one group, two packages empty)."""
        wanted = {id(pu) for pu in (self.allowed_pus if allowed_only else self.pus)}

        def dealt(node: TopoObject) -> list[int]:
            if node.type == ObjType.PU:
                return [node.os_index] if id(node) in wanted else []
            orders = [order for child in node.children if (order := dealt(child))]
            turns = [(0.0, k) for k in range(len(orders))]  # (share dealt, child): equal shares divide alike
            taken, out = [0] * len(orders), []
            while turns:
                _, k = heapq.heappop(turns)
                out.append(orders[k][taken[k]])
                taken[k] += 1
                if taken[k] < len(orders[k]):
                    heapq.heappush(turns, (taken[k] / len(orders[k]), k))
            return out

        return self._by_kind(dealt(self.root))

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
        return format_cpulist(sorted(cpus))

    def signature(self) -> tuple:
        """A canonical form for comparing topologies: every object as (type, cpuset, os index of
        PUs, cache size), sorted. Two topologies with equal signatures are the same machine."""
        return tuple(sorted((node.type.rank, tuple(sorted(node.cpuset)),
                             node.os_index if node.type in (ObjType.PU, ObjType.NUMA) else None, node.cache_size)
                            for node in walk_all(self.root)))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Topology) and self.signature() == other.signature()

    def __hash__(self) -> int:
        return hash(self.signature())

    def __repr__(self) -> str:
        return f"Topology({self.source!r}, {self.nb_pus} PUs, {len(self.allowed)} allowed)"

    def summary(self) -> str:
        """One line: where it comes from, its shape and its PUs."""
        restricted = f", {len(self.allowed)} allowed" if len(self.allowed) != self.nb_pus else ""
        return f"{self.source or 'topology'}: {self.shape} ({self.nb_pus} PUs{restricted})"

    def __str__(self) -> str:
        """The machine drawn as ``pinwise topo`` draws it, under its one-line summary."""
        return f"{self.summary()}\n{render(self)}"


def _finalize(root: TopoObject) -> dict[ObjType, list[TopoObject]]:
    """Number the tree (depth, logical and sibling indices) and return every object by type."""
    levels: dict[ObjType, list[TopoObject]] = {}
    root.depth = 0
    for node in walk_all(root):
        node.logical_index = len(levels.setdefault(node.type, []))
        levels[node.type].append(node)
        for group in (node.children, node.memory_children, node.cpuless_children):
            for rank, child in enumerate(group):
                child.sibling_index = rank
                child.depth = node.depth + 1
                child.parent = node
    return {t: levels[t] for t in LEVEL_ORDER if t in levels}


#: What a topology may claim: PUs at most (the machines of the spec have 2 to 512; a cluster of
#: pinwise mpi, 64 nodes of 128, is 8192), and OS indices below MAX_OS_INDEX (Linux numbers CPUs
#: below its NR_CPUS, at most 8192 today). A file claiming more is refused before it is built.
MAX_PUS = 1 << 16
MAX_OS_INDEX = (1 << 20) - 1


def build_topology(specs: Sequence[ObjectSpec], allowed: Iterable[int] | None = None, source: str = "",
                   restriction: str | None = None, cpukinds: Sequence[CpuKind] = (),
                   distances: Sequence[Distances] = (), keep_groups: bool = False,
                   allowed_nodes: Iterable[int] | None = None, devices: Sequence = ()) -> Topology:
    """Build the tree from flat objects by cpuset inclusion, as hwloc inserts objects.

    Objects with the same type and cpuset are merged; an object whose cpuset partly overlaps
    another's (neither contains the other) is an error, as the machine would not be a tree.
    A Group with the PUs of its parent or of its only child is dropped, as hwloc's default
    filter drops it, unless ``keep_groups`` (an hwloc 2 XML file: hwloc filtered it already and
    keeps what it wrote). Memory objects and objects without PUs are attached afterwards (see
    :class:`ObjectSpec`); a machine without a NUMA node gets one, as in hwloc.
    """
    pus = [s for s in specs if s.type == ObjType.PU]
    if not pus:
        raise PinwiseError(f"topology {source!r} has no PU (processing unit)")
    if len(pus) > MAX_PUS:
        raise PinwiseError(f"topology {source!r} has {len(pus):,} PUs, more than the {MAX_PUS:,} pinwise places "
                           "threads on")
    all_cpus = frozenset(s.os_index for s in pus)
    if len(all_cpus) != len(pus) or any(s.os_index is None or s.os_index < 0 for s in pus):
        raise PinwiseError(f"topology {source!r} has PUs with missing or duplicate OS indices")
    if max(all_cpus) > MAX_OS_INDEX:
        raise PinwiseError(f"topology {source!r} has a PU numbered {max(all_cpus):,}, past {MAX_OS_INDEX:,}: no "
                           "machine numbers its CPUs so high")
    unique: dict[tuple[ObjType, frozenset[int]], ObjectSpec] = {}
    key_of: dict[int, tuple[ObjType, frozenset[int]]] = {}
    later: list[tuple[int, ObjectSpec]] = []  # memory and CPU-less objects, in the source's order
    machine_at: set[int] = set()
    complete = None
    for position, spec in enumerate(specs):
        if spec.type not in LEVEL_RANK:
            raise PinwiseError(f"topology {source!r}: unknown object type {spec.type!r}")
        spec = ObjectSpec(ObjType(spec.type), spec.cpuset, spec.os_index, spec.cache_size, spec.local_memory,
                          spec.subtype, spec.parent, spec.order, spec.complete, spec.cache_geometry)
        if spec.type == ObjType.PU and spec.cpuset != frozenset([spec.os_index]):
            raise PinwiseError(f"topology {source!r}: PU {spec.os_index} has cpuset {sorted(spec.cpuset)}, "
                               f"not [{spec.os_index}]")
        if spec.cpuset and not spec.cpuset <= all_cpus:
            raise PinwiseError(
                f"topology {source!r}: a {spec.type.label} names CPUs "
                f"{sorted(spec.cpuset - all_cpus)} that have no PU"
            )
        if spec.type == ObjType.MACHINE:
            machine_at.add(position)
            complete = spec.complete
        elif spec.type.is_memory or not spec.cpuset:
            later.append((position, spec))
        else:
            key = (spec.type, spec.cpuset)
            unique.setdefault(key, spec)
            key_of[position] = key

    root = TopoObject(ObjType.MACHINE, all_cpus, complete=complete)
    node_of_key: dict[tuple[ObjType, frozenset[int]], TopoObject] = {}
    ordered = sorted(unique.values(), key=lambda s: (-len(s.cpuset), s.type.rank, min(s.cpuset)))
    deepest = dict.fromkeys(all_cpus, root)  # each PU's deepest object so far: an insertion costs its cpuset
    for spec in ordered:
        parent = _deepest_holding(deepest, spec.cpuset, spec.type, source)
        if parent.type == ObjType.PU:
            raise PinwiseError(f"topology {source!r}: {spec.type.label} below a PU")
        node = TopoObject(spec.type, spec.cpuset, spec.os_index, spec.cache_size, parent=parent,
                          subtype=spec.subtype, order=spec.order, complete=spec.complete,
                          cache_geometry=spec.cache_geometry)
        parent.children.append(node)
        node_of_key[(spec.type, spec.cpuset)] = node
        for cpu in spec.cpuset:
            deepest[cpu] = node

    _sort_children(root)
    for group in [n for n in walk(root) if n.type == ObjType.GROUP and not keep_groups]:
        if group.parent.cpuset == group.cpuset or (len(group.children) == 1 and group.children[0].cpuset == group.cpuset):
            # a Group that adds no structure goes, as hwloc's default filter removes it
            at = group.parent.children.index(group)
            group.parent.children[at:at + 1] = group.children
            for child in group.children:
                child.parent = group.parent
            # what stands in its place holds what the source hung from it
            node_of_key[(ObjType.GROUP, group.cpuset)] = (group.parent if group.parent.cpuset == group.cpuset
                                                          else group.children[0])
    node_at: dict[int, TopoObject] = {position: node_of_key.get(key) or memory_parent(root, key[1], source)
                                      for position, key in key_of.items()}
    node_at.update({position: root for position in machine_at})
    if not any(spec.type == ObjType.NUMA for _, spec in later):  # hwloc always has a NUMA node, with the machine's memory
        memory = next((spec.local_memory for spec in specs if spec.type == ObjType.MACHINE and spec.local_memory), None)
        later.append((-1, ObjectSpec(ObjType.NUMA, all_cpus, 0, local_memory=memory)))
    for position, spec in later:
        node = TopoObject(spec.type, spec.cpuset, spec.os_index, spec.cache_size, local_memory=spec.local_memory,
                          subtype=spec.subtype, order=spec.order, complete=spec.complete)
        node_at[position] = node
        if spec.parent is not None and spec.parent in node_at:
            parent = node_at[spec.parent]
        elif spec.type.is_memory and spec.cpuset:
            parent = memory_parent(root, spec.cpuset, source)
        else:
            parent = root
        if spec.type.is_memory and not parent.type.is_memory and parent.cpuset != spec.cpuset and spec.cpuset:
            parent = memory_parent(root, spec.cpuset, source)
        if spec.type.is_memory:
            node.cpuset = parent.cpuset  # memory is local to the PUs of what it hangs from
        node.parent = parent
        (parent.memory_children if spec.type.is_memory else
         parent.cpuless_children if not spec.cpuset else parent.children).append(node)
    _sort_children(root)
    return Topology(root, allowed, source, restriction, cpukinds, distances, allowed_nodes=allowed_nodes,
                    devices=devices)


def _deepest_holding(deepest: dict[int, TopoObject], cpuset: frozenset[int], type_: ObjType,
                     source: str) -> TopoObject:
    """The deepest object of the CPU tree so far whose cpuset contains ``cpuset``, from each PU's
    deepest object (objects come largest first); a partial overlap is an error (the machine would
    not be a tree). Its PUs' deepest objects are all the same one, or some object below the
    holder holds a part of ``cpuset`` only."""
    holders = {id(deepest[cpu]): deepest[cpu] for cpu in cpuset}
    if len(holders) == 1:
        return next(iter(holders.values()))
    below = next(iter(holders.values()))
    while not cpuset <= below.parent.cpuset:
        below = below.parent
    if cpuset <= below.cpuset:  # the first PU's object holds it all: another one sits beside it
        below = next(h for h in holders.values() if not cpuset <= h.cpuset)
        while not cpuset <= below.parent.cpuset:
            below = below.parent
    raise PinwiseError(f"topology {source!r}: {type_.label} with CPUs {sorted(cpuset)} partly overlaps "
                       f"{below.label()} with CPUs {sorted(below.cpuset)}: not a tree")


def memory_parent(root: TopoObject, cpuset: frozenset[int], source: str) -> TopoObject:
    """Where hwloc 2 attaches a NUMA node with these PUs: the highest object below the machine
    with the same cpuset (the machine only when no object below has them all), never a PU;
    where no object has that cpuset, a Group inserted around the objects it covers."""
    if cpuset == root.cpuset:
        only = root.children[0] if len(root.children) == 1 else None
        return only if only is not None and only.type != ObjType.PU else root
    node = root
    while True:
        child = next((c for c in node.children if cpuset <= c.cpuset), None)
        if child is None or (child.cpuset == cpuset and child.type == ObjType.PU):
            break
        if child.cpuset == cpuset:
            return child
        node = child
    inside = [c for c in node.children if c.cpuset <= cpuset]
    crossing = [c for c in node.children if c.cpuset & cpuset and not c.cpuset <= cpuset]
    if crossing:
        raise PinwiseError(f"topology {source!r}: a NUMA node with CPUs {sorted(cpuset)} partly overlaps "
                           f"{crossing[0].label()} with CPUs {sorted(crossing[0].cpuset)}: not a tree")
    group = TopoObject(ObjType.GROUP, cpuset, parent=node, children=inside,
                       order=min((c.order for c in inside if c.order is not None), default=None))
    for child in inside:
        child.parent = group
    node.children = [c for c in node.children if c not in inside] + [group]
    _sort_siblings(node.children)
    return group


def _sort_siblings(children: list[TopoObject]) -> None:
    if all(c.order is not None for c in children):
        children.sort(key=lambda c: c.order)
    else:
        children.sort(key=lambda c: c.first_pu)


def _first_node(memory: TopoObject) -> int:
    """The lowest OS index of the NUMA nodes at or below a memory object (its nodeset's first
    bit), by which hwloc orders the memory children of an object the source does not order."""
    return min((m.os_index or 0 for m in walk_all(memory) if m.type == ObjType.NUMA), default=0)


def _sort_children(root: TopoObject) -> None:
    for node in walk(root):
        _sort_siblings(node.children)
        node.memory_children.sort(key=lambda c: (c.order is None, c.order or 0, _first_node(c)))
        node.cpuless_children.sort(key=lambda c: (c.order is None, c.order or 0))
