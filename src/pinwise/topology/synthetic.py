"""Synthetic topologies in hwloc's syntax, and the named presets of the papers' machines.

``"pack:2 l3:1 l2:4 core:1 pu:2"`` reads as: 2 packages, each with 1 L3, each with 4 L2, each with
1 core of 2 PUs. Types are hwloc's names and abbreviations, case-insensitive; a level may carry
``(size=8MiB)`` for caches; ``[NUMANode]`` in brackets (as ``lstopo --of synthetic`` writes it)
attaches one NUMA node to each object of the level before it (to the machine at the start), and
several in a row attach several (DRAM and MCDRAM), with ``(memory=BYTES)`` and, on the first, the
OS indices of all NUMA nodes in logical order (``indexes=0,7,1,4``). ``numa:2`` as a level
of its own is read as hwloc reads it: each node attached to a Group of its PUs. PUs are numbered 0..N-1 in
depth-first order, as hwloc numbers them, unless the level says otherwise with hwloc's
``indexes=`` attribute: an explicit list (``pu:2(indexes=0,4,1,5,2,6,3,7)``: the OS index of each
object in depth-first order) or nested interleaving loops (``indexes=2*16:1*2``: STEP*COUNT, the
first loop the fastest, giving object ``o`` the depth-first position sum(STEP_j * digit_j(o)),
which numbers a Skylake's hyperthreads 0,16,1,17,...). Attributes are separated by spaces, as
hwloc writes them: ``(size=32KB indexes=...)``. Like hwloc, a description without a NUMA level gets one
NUMA node for the whole machine, and caches without a size get hwloc's default sizes, so that
``lstopo --input STRING`` and :func:`parse_synthetic` describe the same machine.
"""

from __future__ import annotations

import re

from ..errors import PinwiseError
from ..numbers import whole_number
from .model import LEVEL_RANK, MAX_OS_INDEX, MAX_PUS, ObjType, Topology, TopoObject, walk, walk_all

#: Accepted spellings (lower case) -> our type. hwloc's own names, its short forms, and "socket".
TYPE_ALIASES = {
    **{name: "package" for name in ("package", "pack", "socket", "sock")},
    **{name: "numa" for name in ("numa", "numanode", "node")},
    **{name: "group" for name in ("group", "group0", "group1", "group2", "group3")},
    "die": "die",
    **{name: "l3" for name in ("l3", "l3cache", "l3d", "l3dcache", "l3u", "l3ucache")},
    **{name: "l2" for name in ("l2", "l2cache", "l2d", "l2dcache", "l2u", "l2ucache")},
    **{name: "l1" for name in ("l1", "l1cache", "l1d", "l1dcache", "l1u", "l1ucache")},
    **{name: None for name in ("l1i", "l1icache", "l2i", "l2icache", "l3i", "l3icache")},
    "core": "core",
    **{name: "pu" for name in ("pu", "thread", "hwthread")},
}

#: hwloc's sizes for caches a synthetic description leaves unsized.
DEFAULT_CACHE_SIZE = {"l1": 32 << 10, "l2": 4 << 20, "l3": 16 << 20}
HWLOC_TYPE_NAME = {"group": "Group", "package": "Package", "die": "Die", "numa": "NUMANode",
                   "l3": "L3Cache", "l2": "L2Cache", "l1": "L1dCache", "core": "Core", "pu": "PU"}

_TOKEN = re.compile(r"^(?P<type>[A-Za-z][A-Za-z0-9]*)(?::(?P<arity>[^()]*))?(?:\((?P<attrs>[^()]*)\))?$")
#: A level's words: spaces inside parentheses belong to the attributes.
_WORD = re.compile(r"\S*?\([^()]*\)\]?|\S+")
_ATTRIBUTE = re.compile(r"([A-Za-z_]+)=(\S*)")
_LOOP = re.compile(r"([0-9]+)\*([0-9]+)\Z")
_SIZE = re.compile(r"^([0-9]{1,15})\s*([kmgt]?i?b?)?$", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "kb": 1000, "mb": 1000**2, "gb": 1000**3, "tb": 1000**4,
          "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40,
          "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}


def _parse_size(text: str, description: str) -> int:
    match = _SIZE.match(text.strip())
    if not match or match.group(2).lower() not in _UNITS:
        raise PinwiseError(f"synthetic topology {description!r}: cannot read size {text!r} (e.g. 8MiB, 32KB, 1048576)")
    return int(match.group(1)) * _UNITS[match.group(2).lower()]


def _indexes(text: str, count: int, description: str, name: str) -> list[int]:
    """hwloc's ``indexes=``: the OS index of each of the level's ``count`` objects, in depth-first order."""
    where = f"synthetic topology {description!r}: indexes of {name}"
    if "*" in text:
        loops = []
        for loop in text.split(":"):
            match = _LOOP.match(loop)
            if not match:
                raise PinwiseError(f"{where}: {loop!r} is not STEP*COUNT, e.g. indexes=2*16:1*2")
            loops.append((int(match[1]), int(match[2])))
        total = 1
        for _, times in loops:
            total *= times
        if total != count:
            raise PinwiseError(f"{where}: the loops {text!r} make {total} objects, the level has {count}")
        position = []
        for os_index in range(count):
            rest, place = os_index, 0
            for step, times in loops:  # the first loop is the fastest
                place += step * (rest % times)
                rest //= times
            position.append(place)
        if sorted(position) != list(range(count)):
            raise PinwiseError(f"{where}: the loops {text!r} do not number {count} objects once each")
        order = [0] * count
        for os_index, place in enumerate(position):
            order[place] = os_index
        return order
    order = [whole_number(word, where, 0, MAX_OS_INDEX) for word in text.split(",")]
    if len(order) != count or len(set(order)) != count:
        raise PinwiseError(f"{where}: give {count} different OS indices, not {len(order)}"
                           + (" with repeats" if len(set(order)) != len(order) else ""))
    return order


def parse_synthetic_levels(description: str, numbering: dict[int, list[int]] | None = None,
                           memory: dict[int, list[int | None]] | None = None) -> list[tuple[str, int, int | None]]:
    """Read a synthetic string into levels (type, arity, cache size), top to bottom. ``numbering``
    receives, per level position, the OS indices its ``indexes=`` attribute gives (key ``-1``: the
    NUMA nodes'); ``memory``, per level position (``-1`` the machine), the memory sizes of the NUMA
    nodes attached to each object of that level."""
    if not description.strip():
        raise PinwiseError("empty synthetic topology: give levels such as 'pack:2 core:4 pu:2'")
    levels: list[tuple[str, int, int | None]] = []
    attached_memory: dict[int, list[int | None]] = {}
    pending: dict[int, str] = {}
    for raw in _WORD.findall(description):
        attached = raw.startswith("[") and raw.endswith("]")
        token = raw[1:-1] if attached else raw
        match = _TOKEN.match(token)
        if not match:
            raise PinwiseError(f"synthetic topology {description!r}: cannot read {raw!r} (expected TYPE:COUNT, e.g. core:4)")
        name = match.group("type").lower()
        if name not in TYPE_ALIASES:
            raise PinwiseError(
                f"synthetic topology {description!r}: unknown type {match.group('type')!r} "
                "(use package/pack/socket, numa/numanode, group, die, l3, l2, l1/l1d, core, pu)"
            )
        type_ = TYPE_ALIASES[name]
        arity_text = match.group("arity")
        if attached:
            if type_ != ObjType.NUMA:
                raise PinwiseError(f"synthetic topology {description!r}: only NUMA nodes are attached in brackets, "
                                   f"not {raw!r}")
            if arity_text is not None:
                raise PinwiseError(f"synthetic topology {description!r}: an attached {raw!r} has no count")
            arity = 1
        elif arity_text is None or not arity_text.strip():
            raise PinwiseError(f"synthetic topology {description!r}: {raw!r} needs a count, e.g. {name}:2")
        else:
            arity = whole_number(arity_text, f"synthetic topology {description!r}: count of {name}", 1)
        size = None
        attrs = match.group("attrs") or ""
        for key, value in _ATTRIBUTE.findall(attrs):
            if key.lower() in ("size", "memory"):
                size = _parse_size(value, description)
            elif key.lower() == "indexes":
                pending[-1 if type_ == ObjType.NUMA else len(levels)] = value
        if attrs.strip() and not _ATTRIBUTE.findall(attrs):
            raise PinwiseError(f"synthetic topology {description!r}: cannot read the attributes {attrs!r} of {raw!r} "
                               "(write them as name=value, e.g. size=8MiB or indexes=0,2,1,3)")
        if type_ is None:  # instruction caches: hwloc describes them, placement ignores them
            if arity != 1:
                raise PinwiseError(f"synthetic topology {description!r}: instruction cache level {raw!r} must have count 1 here")
            continue
        if type_ in DEFAULT_CACHE_SIZE and size is None:
            size = DEFAULT_CACHE_SIZE[type_]
        if attached:
            attached_memory.setdefault(len(levels) - 1, []).append(size)
            continue
        levels.append((type_, arity, size))
    if not levels or levels[-1][0] != ObjType.PU:
        raise PinwiseError(f"synthetic topology {description!r}: the last level must be pu, e.g. '... core:4 pu:1'")
    if levels[-1][0] == ObjType.PU and len(levels) - 1 in attached_memory:
        raise PinwiseError(f"synthetic topology {description!r}: a NUMA node cannot be attached to a PU")
    # NUMA nodes and groups may sit above or below packages (hwloc allows both); everything else
    # keeps the hardware's order, each type once.
    ordered = [t for t, _, _ in levels if t not in (ObjType.NUMA, ObjType.GROUP)]
    for upper, lower in zip(ordered, ordered[1:]):
        if LEVEL_RANK[lower] <= LEVEL_RANK[upper]:
            raise PinwiseError(
                f"synthetic topology {description!r}: {lower} cannot be below {upper} "
                "(order: package, die, l3, l2, l1, core, pu; numa and group anywhere above core)"
            )
    types = [t for t, _, _ in levels]
    if types.count("numa") > 1 or ("numa" in types and attached_memory):
        raise PinwiseError(f"synthetic topology {description!r}: give NUMA nodes either as one numa:N level or "
                           "attached in brackets ([NUMANode] after a level), not both")
    for special in (ObjType.NUMA, ObjType.GROUP):
        if special in types and "core" in types and types.index(special) > types.index("core"):
            raise PinwiseError(f"synthetic topology {description!r}: {special} must be above core")
    total = 1
    counts = []
    for _, arity, _ in levels:
        total *= arity
        counts.append(total)
        if total > MAX_PUS:
            raise PinwiseError(f"synthetic topology {description!r} has more than {MAX_PUS:,} PUs, more than pinwise "
                               "places threads on")
    numa_count = sum(len(sizes) * (counts[at] if at >= 0 else 1) for at, sizes in attached_memory.items())
    if "numa" in types:
        numa_count = counts[types.index("numa")]
    for position, text in pending.items():
        if position == -1:
            order = _indexes(text, numa_count, description, "numa")
        else:
            order = _indexes(text, counts[position], description, levels[position][0])
        if numbering is not None:
            numbering[position] = order
    if memory is not None:
        memory.update(attached_memory)
    return levels


def parse_synthetic(description: str, source: str | None = None) -> Topology:
    """Build the topology a synthetic string describes."""
    numbering: dict[int, list[int]] = {}
    memory: dict[int, list[int | None]] = {}
    levels = parse_synthetic_levels(description, numbering, memory)
    if not memory and not any(t == ObjType.NUMA for t, _, _ in levels):
        memory[-1] = [None]  # as hwloc, one NUMA node for the whole machine
    return topology_from_levels(levels, source or description, numbering, memory)


def topology_from_levels(levels: list[tuple[str, int, int | None]], source: str,
                         numbering: dict[int, list[int]] | None = None,
                         memory: dict[int, list[int | None]] | None = None) -> Topology:
    """Build a symmetric tree level by level (no inclusion search: fast for 16k+ PUs).
    ``numbering``: OS indices, in depth-first order, of the levels that do not count 0, 1, 2...
    (key -1: the NUMA nodes); ``memory``: sizes of the NUMA nodes attached to each object of a
    level (key -1: the machine)."""
    numbering = numbering or {}
    root = TopoObject(ObjType.MACHINE, frozenset())
    frontier = [root]
    given: dict[int, int] = {}  # id(object) -> OS index from the numbering
    at_level: dict[int, list[TopoObject]] = {-1: [root]}
    for position, (type_, arity, size) in enumerate(levels):
        next_frontier = []
        for parent in frontier:
            for _ in range(arity):
                child = TopoObject(type_, frozenset(), cache_size=size, parent=parent)
                if type_ == ObjType.NUMA:
                    child.cache_size, child.local_memory = None, size
                parent.children.append(child)
                next_frontier.append(child)
        frontier = next_frontier
        at_level[position] = frontier
        for place, os_index in enumerate(numbering.get(position, ())):
            given[id(frontier[place])] = os_index
    for place, pu in enumerate(frontier):
        pu.os_index = given.get(id(pu), place)
    for position, sizes in (memory or {}).items():
        for holder in at_level[position]:
            holder.memory_children.extend(TopoObject(ObjType.NUMA, frozenset(), local_memory=size, parent=holder)
                                          for size in sizes)
    # Give every object its cpuset bottom-up, and OS indices to NUMA nodes and packages.
    counters: dict[str, int] = {}
    _fill_cpusets(root, counters, given)  # children stay in the description's order: hwloc's logical order
    _numa_to_memory(root)
    for place, node in enumerate(n for n in walk_all(root) if n.type == ObjType.NUMA):
        node.cpuset = node.parent.cpuset
        node.os_index = numbering[-1][place] if -1 in numbering else place
    return Topology(root, None, source)


def _numa_to_memory(root: TopoObject) -> None:
    """Turn a ``numa:N`` level into memory children, as hwloc 2 does: a node attaches to the
    object above it when they have the same PUs (``pack:2 numa:1``), else to the one object below
    it with its PUs, else to a Group that takes its place (``numa:2 pack:2``)."""
    for node in [n for n in walk(root) if n.type == ObjType.NUMA]:
        parent = node.parent
        at = parent.children.index(node)
        below = node.children
        if parent.cpuset == node.cpuset or (len(below) == 1 and below[0].type != ObjType.PU):
            parent.children[at:at + 1] = below
            for child in below:
                child.parent = parent
            holder = parent if parent.cpuset == node.cpuset else below[0]
        else:
            holder = TopoObject(ObjType.GROUP, node.cpuset, parent=parent, children=below)
            parent.children[at] = holder
            for child in below:
                child.parent = holder
        node.children = []
        node.parent = holder
        holder.memory_children.append(node)


def _fill_cpusets(root: TopoObject, counters: dict[str, int], given: dict[int, int] | None = None) -> None:
    given = given or {}
    order = list(walk(root))
    for node in order:  # pre-order: OS indices in depth-first order
        if node.type in (ObjType.NUMA, ObjType.PACKAGE, ObjType.DIE, ObjType.CORE):
            node.os_index = given.get(id(node), counters.get(node.type, 0))
            counters[node.type] = counters.get(node.type, 0) + 1
    for node in reversed(order):
        if node.type == ObjType.PU:
            node.cpuset = frozenset([node.os_index])
        else:
            cpus: set[int] = set()
            for child in node.children:
                cpus |= child.cpuset
            node.cpuset = frozenset(cpus)


def to_synthetic(topology: Topology) -> str:
    """Write a symmetric topology in hwloc's synthetic syntax (readable by ``lstopo --input``),
    NUMA nodes attached in brackets after the level that holds them, as hwloc writes them."""
    levels = topology.synthetic_levels()
    memory = _memory_levels(topology) if levels is not None else None
    if levels is None or memory is None:
        raise PinwiseError(
            f"topology {topology.source!r} is not symmetric (objects of one level differ), so it has no "
            "synthetic description: use --of xml or json instead"
        )
    order = topology.compact_order(allowed_only=False)
    numa_order = [n.os_index for n in topology.numa_nodes]
    numa_indexes = f"indexes={','.join(map(str, numa_order))}" if numa_order != list(range(len(numa_order))) else ""
    parts: list[str] = []

    def attach(sizes: list[int | None]) -> None:
        nonlocal numa_indexes
        for size in sizes:
            attrs = " ".join(a for a in (f"memory={size}" if size else "", numa_indexes) if a)
            numa_indexes = ""
            parts.append(f"[NUMANode({attrs})]" if attrs else "[NUMANode]")

    attach(memory[0])
    for (type_, arity, size), sizes in zip(levels, memory[1:]):
        name = HWLOC_TYPE_NAME[type_]
        text = f"{name}:{arity}"
        if size:
            text += f"(size={size})"
        if type_ == ObjType.PU and order != list(range(len(order))):  # PUs not numbered 0..N-1 depth-first
            text += f"(indexes={','.join(map(str, order))})"
        parts.append(text)
        attach(sizes)
    return " ".join(parts)


def _memory_levels(topology: Topology) -> list[list[int | None]] | None:
    """The sizes of the NUMA nodes attached to each object of each level (the machine first), or
    None when objects of one level differ or hold other memory objects."""
    found = []
    frontier = [topology.root]
    while frontier:
        shapes = {tuple((m.type, m.local_memory, bool(m.memory_children)) for m in node.memory_children)
                  for node in frontier}
        if len(shapes) != 1:
            return None
        shape = shapes.pop()
        if any(kind != ObjType.NUMA or nested for kind, _, nested in shape):
            return None
        found.append([size for _, size, _ in shape])
        frontier = [child for node in frontier for child in node.children]
    return found


#: The machines of the papers in seeds/, as synthetic strings (see each paper's machine section).
PRESETS: dict[str, tuple[str, str]] = {
    "core2": (
        "pack:2 l2:2(size=4MiB) l1:2(size=32KiB) core:1 pu:1",
        "Mazouz et al. 'Core2': 2 x Xeon E5345 (Clovertown), each pair of cores shares a 4 MB L2; 8 cores",
    ),
    "nehalem": (
        "pack:2 numa:1 l3:1(size=8MiB) l2:4(size=256KiB) l1:1(size=32KiB) core:1 pu:1",
        "Mazouz et al. 'Nehalem': 2 x Xeon X5570, 4 cores sharing an 8 MB L3 per socket, SMT off; 8 cores",
    ),
    "ccnuma96": (
        "numa:4 pack:4 l3:1(size=16MiB) l2:3(size=3MiB) l1:2(size=32KiB) core:1 pu:1",
        "Mazouz et al. 'ccNUMA': IBM x3950 M2, 4 nodes x 4 Xeon X7460, 16 MB L3 per socket, "
        "3 MB L2 per pair of cores; 96 cores",
    ),
    "x7550": (
        "pack:4 numa:1 l3:1(size=18MiB) l2:8(size=256KiB) l1:1(size=32KiB) core:1 pu:2",
        "Diener et al.: 4 x Xeon X7550 (Nehalem-EX), 8 cores with 2 hardware threads sharing an "
        "18 MB L3 per socket; 64 PUs",
    ),
    "e5620": (
        "pack:2 numa:1 l3:1(size=12MiB) l2:4(size=256KiB) l1:1(size=32KiB) core:1 pu:1",
        "NPB affinity study: 2 x Xeon E5620, 4 cores sharing a 12 MB L3 per socket, hyper-threading "
        "unused; 8 cores",
    ),
}


def preset(name: str) -> Topology:
    try:
        description, _ = PRESETS[name.lower()]
    except KeyError:
        raise PinwiseError(f"unknown preset {name!r}: choose one of {', '.join(PRESETS)} (pinwise topo --presets)") from None
    return parse_synthetic(description, source=name.lower())
