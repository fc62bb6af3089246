"""Synthetic topologies in hwloc's syntax, and the named presets of the papers' machines.

``"pack:2 l3:1 l2:4 core:1 pu:2"`` reads as: 2 packages, each with 1 L3, each with 4 L2, each with
1 core of 2 PUs. A synthetic string is read the way hwloc 2's synthetic backend reads it (so that
``lstopo --input STRING`` and :func:`parse_synthetic` describe the same machine; a test compares
them): type names as hwloc reads them (any prefix of ``package``, ``socket``, ``numanode``,
``node``, ``core``, ``die``, ``group`` of two letters or more, ``pu``, ``l2``, ``l2cache``,
``l1d``, ``l1icache``, ...), in any order hwloc accepts (caches below cores, as lstopo writes
Hygon and CPUID-leaf-0x1F machines: ``Core:8 L2Cache:4 PU:1``), or bare counts (``2 4 2``: the
types hwloc gives them). Objects are made depth first, children before their parent, and placed
by their PUs, as hwloc inserts them: an object with the PUs of the one above it goes above it when
its type is higher (``core:2 l2:1 pu:2`` has the L2 above the core), a Group that adds no
structure goes, and siblings are ordered by their first PU.

Attributes in parentheses, separated by spaces as hwloc writes them: ``size=8MiB`` for caches
(hwloc's default sizes otherwise), ``memory=BYTES`` and ``memorysidecachesize=BYTES`` (a
memory-side cache in front of the node, as hwloc 3.0 reads it) for NUMA nodes, and ``indexes=``,
the OS index of each object of the level in depth-first order: an explicit list
(``pu:2(indexes=0,4,1,5,2,6,3,7)``) or nested interleaving loops (``indexes=2*16:1*2``: STEP*COUNT,
the first loop the fastest, giving object ``o`` the depth-first position sum(STEP_j * digit_j(o)),
which numbers a Skylake's hyperthreads 0,16,1,17,...). ``[NUMANode]`` in brackets attaches one NUMA
node to each object of the level before it (to the machine at the start); several in a row attach
several (DRAM and MCDRAM), at one level or several. Attached NUMA nodes are numbered as hwloc makes
them, children before their parent, by one counter over all of them; an ``indexes=`` on any of the
brackets (the last one given wins, as in hwloc) lists their OS indices in that order. ``numa:2`` as
a level of its own gives each node to the object with its PUs, or to a Group made for it. A string
without NUMA nodes gets one for the whole machine.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..errors import PinwiseError
from ..numbers import whole_number
from .model import MAX_OS_INDEX, MAX_PUS, ObjectSpec, ObjType, Topology, TopoObject, build_topology, walk_all

#: hwloc's type names (hwloc_type_sscanf): a word names a type when it is a prefix of the name at
#: least this long, tried in this order ("co" is a core, "no" a NUMA node). A string stands for a
#: kind of object hwloc has and pinwise's tree of CPUs and memory does not.
_NAMED_TYPES: tuple[tuple[str, int, ObjType | str], ...] = (
    ("osdev", 2, "osdev"), ("block", 4, "osdev"), ("network", 3, "osdev"), ("openfabrics", 7, "osdev"),
    ("dma", 3, "osdev"), ("gpu", 3, "osdev"), ("coproc", 5, "osdev"), ("co-processor", 6, "osdev"),
    ("machine", 2, ObjType.MACHINE), ("numanode", 2, ObjType.NUMA), ("node", 2, ObjType.NUMA),
    ("memcache", 5, ObjType.MEMCACHE), ("memory-side", 8, ObjType.MEMCACHE), ("package", 2, ObjType.PACKAGE),
    ("socket", 2, ObjType.PACKAGE), ("die", 2, ObjType.DIE), ("core", 2, ObjType.CORE), ("pu", 2, ObjType.PU),
    ("misc", 4, "misc"), ("bridge", 4, "bridge"), ("hostbridge", 6, "bridge"), ("pcibridge", 5, "bridge"),
    ("pcidev", 3, "pcidev"),
)
_CACHE_NAME = re.compile(r"l([0-9]+)([iud]?)(c|ca|cac|cach|cache)?\Z")
_GROUP_NAME = re.compile(r"(gr|gro|grou|group)([0-9]*)\Z")
_CACHE_LEVEL = {1: ObjType.L1, 2: ObjType.L2, 3: ObjType.L3}


def hwloc_type(word: str) -> ObjType | str | None:
    """The type a word names as hwloc reads it (hwloc_type_sscanf), or None for no type. A plain string
    for the kinds pinwise's tree does not hold: "icache" (instruction caches), "cache" (L4, L5),
    "osdev", "pcidev", "bridge", "misc"."""
    name = word.lower()
    for full, shortest, type_ in _NAMED_TYPES:
        if len(name) >= shortest and full.startswith(name):
            return type_
    cache = _CACHE_NAME.match(name)
    if cache:
        depth = int(cache[1])
        if cache[2] == "i":
            return "icache" if 1 <= depth <= 3 else None
        return _CACHE_LEVEL.get(depth) or ("cache" if depth in (4, 5) else None)
    if _GROUP_NAME.match(name) or name in ("tile", "module"):
        return ObjType.GROUP
    return None


#: hwloc's sizes for caches a synthetic description leaves unsized.
DEFAULT_CACHE_SIZE = {ObjType.L1: 32 << 10, ObjType.L2: 4 << 20, ObjType.L3: 16 << 20}
HWLOC_TYPE_NAME = {"group": "Group", "package": "Package", "die": "Die", "numa": "NUMANode",
                   "l3": "L3Cache", "l2": "L2Cache", "l1": "L1dCache", "core": "Core", "pu": "PU"}

_TOKEN = re.compile(r"^(?P<type>[A-Za-z][A-Za-z0-9-]*)(?::(?P<arity>[^()]*))?(?:\((?P<attrs>[^()]*)\))?$")
_COUNT = re.compile(r"^(?P<arity>[0-9]+)(?:\((?P<attrs>[^()]*)\))?$")
#: A level's words: spaces inside parentheses belong to the attributes.
_WORD = re.compile(r"\S*?\([^()]*\)\]?|\S+")
_ATTRIBUTE = re.compile(r"([A-Za-z_]+)=(\S*)")
_LOOP = re.compile(r"([0-9]+)\*([0-9]+)\Z")
_SIZE = re.compile(r"^([0-9]{1,20})\s*([kmgt]?i?b?)?$", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "kb": 1000, "mb": 1000**2, "gb": 1000**3, "tb": 1000**4,
          "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40,
          "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}
#: hwloc's memory sizes are 64-bit.
MAX_SIZE = (1 << 64) - 1


def _parse_size(text: str, description: str) -> int:
    match = _SIZE.match(text.strip())
    if not match or match.group(2).lower() not in _UNITS:
        raise PinwiseError(f"synthetic topology {description!r}: cannot read size {text!r} (e.g. 8MiB, 32KB, 1048576)")
    size = int(match.group(1)) * _UNITS[match.group(2).lower()]
    if size > MAX_SIZE:
        raise PinwiseError(f"synthetic topology {description!r}: size {text!r} does not fit in 64 bits")
    return size


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


def _level_type(word: str, description: str) -> ObjType | None:
    """The type of a synthetic level; None for an instruction cache (a level hwloc makes, whose
    objects placement ignores)."""
    type_ = hwloc_type(word)
    if type_ is None:
        raise PinwiseError(f"synthetic topology {description!r}: unknown type {word!r} "
                           "(use package/pack/socket, numa/numanode, group, die, l3, l2, l1/l1d, core, pu)")
    if type_ == "icache":
        return None
    if type_ == "cache":
        raise PinwiseError(f"synthetic topology {description!r}: {word!r} is not a cache pinwise models (L1 to L3)")
    if not isinstance(type_, ObjType) or type_ in (ObjType.MACHINE, ObjType.MEMCACHE):
        raise PinwiseError(f"synthetic topology {description!r}: {word!r} cannot be a level of a synthetic machine")
    return type_


@dataclass
class _Memory:
    """The NUMA nodes a level makes or attaches: their size and memory-side cache."""

    size: int | None = None
    side_cache: int | None = None


@dataclass
class _Level:
    type: ObjType | None  # None: an instruction cache, which hwloc makes and placement ignores
    arity: int
    cache_size: int | None = None
    memory: _Memory = field(default_factory=_Memory)
    indexes: str | None = None
    #: NUMA nodes attached in brackets to each object of the level.
    attached: list[_Memory] = field(default_factory=list)


def _attributes(text: str, raw: str, description: str, type_: ObjType | None) -> tuple[int | None, _Memory, str | None]:
    """A level's (size=, memory=, memorysidecachesize=, indexes=): its cache size, its memory, its indexes."""
    found = _ATTRIBUTE.findall(text)
    if text.strip() and (not found or len(found) != len(text.split())):
        raise PinwiseError(f"synthetic topology {description!r}: cannot read the attributes {text!r} of {raw!r} "
                           "(write them as name=value, e.g. size=8MiB or indexes=0,2,1,3)")
    size, memory, indexes = None, _Memory(), None
    for key, value in found:
        key = key.lower()
        if key in ("size", "memory"):
            size = _parse_size(value, description)
        elif key == "memorysidecachesize" and type_ == ObjType.NUMA:
            memory.side_cache = _parse_size(value, description)
        elif key == "indexes":
            indexes = value
        else:
            raise PinwiseError(f"synthetic topology {description!r}: unknown attribute {key!r} in {raw!r} (size=, "
                               "memory=, memorysidecachesize= on NUMA nodes, indexes=)")
    if type_ == ObjType.NUMA:
        memory.size = size
    return (size if type_ is not None and type_.is_cache else None), memory, indexes


#: What hwloc names the types that cannot have two levels, and the types hwloc gives bare counts.
_ONE_LEVEL = {ObjType.PU: "PU", ObjType.PACKAGE: "package", ObjType.DIE: "die", ObjType.NUMA: "NUMA node",
              ObjType.CORE: "core"}


def _bare_types(count: int, numa_attached: bool) -> list[ObjType | None]:
    """The types hwloc gives a string of bare counts (``2 4 2``), PUs last: a NUMA level if none is
    attached, a package, a core, up to four caches (L2, L1d, L3, L1i by priority), then Groups at
    the top (hwloc_backend_synthetic_init)."""
    left = count - 1
    numa = int(left >= 1 and not numa_attached)
    left -= numa
    package = int(left >= 1)
    left -= package
    core = int(left >= 1)
    left -= core
    caches = min(left, 4)
    groups = left - caches
    cache_types: list[ObjType | None] = ([ObjType.L3] if caches >= 3 else []) + [ObjType.L2] * (caches >= 1) \
        + [ObjType.L1] * (caches >= 2) + [None] * (caches >= 4)
    return ([ObjType.GROUP] * groups + [ObjType.PACKAGE] * package + [ObjType.NUMA] * numa + cache_types
            + [ObjType.CORE] * core + [ObjType.PU])


def _parse_levels(description: str) -> tuple[list[_Level], list[_Memory], str | None]:
    """The levels of a synthetic string, top to bottom; the NUMA nodes attached to the machine;
    the attached NUMA nodes' ``indexes=`` (the last given)."""
    if not description.strip():
        raise PinwiseError("empty synthetic topology: give levels such as 'pack:2 core:4 pu:2'")
    levels: list[_Level] = []
    machine_memory: list[_Memory] = []
    numa_indexes = None
    bare = 0
    for raw in _WORD.findall(description):
        attached = raw.startswith("[") and raw.endswith("]")
        token = raw[1:-1] if attached else raw
        match = _TOKEN.match(token) or (None if attached else _COUNT.match(token))
        if not match:
            raise PinwiseError(f"synthetic topology {description!r}: cannot read {raw!r} (expected TYPE:COUNT, e.g. core:4)")
        type_ = _level_type(match.group("type"), description) if "type" in match.groupdict() else None
        bare += "type" not in match.groupdict()
        arity_text = match.group("arity")
        if attached:
            if type_ != ObjType.NUMA:
                raise PinwiseError(f"synthetic topology {description!r}: only NUMA nodes are attached in brackets, "
                                   f"not {raw!r}")
            if arity_text is not None:
                raise PinwiseError(f"synthetic topology {description!r}: an attached {raw!r} has no count")
            _, memory, indexes = _attributes(match.group("attrs") or "", raw, description, ObjType.NUMA)
            numa_indexes = indexes if indexes is not None else numa_indexes
            (levels[-1].attached if levels else machine_memory).append(memory)
            continue
        if arity_text is None or not arity_text.strip():
            raise PinwiseError(f"synthetic topology {description!r}: {raw!r} needs a count, e.g. {token}:2")
        arity = whole_number(arity_text, f"synthetic topology {description!r}: count of {match.group(1)}", 1)
        cache_size, memory, indexes = _attributes(match.group("attrs") or "", raw, description, type_)
        levels.append(_Level(type_, arity, cache_size, memory, indexes))
    if bare:
        if bare != len(levels):
            raise PinwiseError(f"synthetic topology {description!r}: give a type to every level or to none "
                               "(hwloc refuses a mix too)")
        numa_attached = bool(machine_memory) or any(level.attached for level in levels)
        for level, type_ in zip(levels, _bare_types(len(levels), numa_attached)):
            level.type = type_
    if not levels or levels[-1].type != ObjType.PU:
        raise PinwiseError(f"synthetic topology {description!r}: the last level must be pu, e.g. '... core:4 pu:1'")
    for type_, name in _ONE_LEVEL.items():
        if sum(level.type == type_ for level in levels) > 1:
            raise PinwiseError(f"synthetic topology {description!r} has several {name} levels (hwloc refuses it too)")
    if any(level.type == ObjType.NUMA for level in levels) and (machine_memory or any(l.attached for l in levels)):
        raise PinwiseError(f"synthetic topology {description!r}: give NUMA nodes either as one numa:N level or "
                           "attached in brackets ([NUMANode] after a level), not both")
    total = 1
    for level in levels:
        total *= level.arity
        if total > MAX_PUS:
            raise PinwiseError(f"synthetic topology {description!r} has more than {MAX_PUS:,} PUs, more than pinwise "
                               "places threads on")
    return levels, machine_memory, numa_indexes


def parse_synthetic(description: str, source: str | None = None) -> Topology:
    """Build the topology a synthetic string describes, as hwloc's synthetic backend builds it."""
    levels, machine_memory, numa_indexes = _parse_levels(description)
    widths, total = [], 1
    for level in levels:
        total *= level.arity
        widths.append(total)
    numbering = [_indexes(level.indexes, width, description, str(level.type or "l1i")) if level.indexes else None
                 for level, width in zip(levels, widths)]
    attached_count = len(machine_memory) + sum(len(level.attached) * width for level, width in zip(levels, widths))
    numa_numbering = _indexes(numa_indexes, attached_count, description, "numa") if numa_indexes else None
    specs: list[ObjectSpec] = []
    made = [0] * len(levels)
    numa_made = 0

    def memory(kind: _Memory, cpus: frozenset[int], os_index: int) -> None:
        """A NUMA node (behind its memory-side cache, if it has one) with these PUs."""
        parent = None
        if kind.side_cache:
            specs.append(ObjectSpec(ObjType.MEMCACHE, cpus, cache_size=kind.side_cache))
            parent = len(specs) - 1
        specs.append(ObjectSpec(ObjType.NUMA, cpus, os_index, local_memory=kind.size, parent=parent))

    def attach(kinds: list[_Memory], cpus: frozenset[int]) -> None:
        nonlocal numa_made
        for kind in kinds:
            memory(kind, cpus, numa_numbering[numa_made] if numa_numbering else numa_made)
            numa_made += 1

    def make(depth: int) -> frozenset[int]:
        """One object of level ``depth``, its children first (hwloc__look_synthetic)."""
        level = levels[depth]
        os_index = numbering[depth][made[depth]] if numbering[depth] else made[depth]
        made[depth] += 1
        if depth == len(levels) - 1:
            cpus = frozenset([os_index])
        else:
            cpus = frozenset().union(*(make(depth + 1) for _ in range(levels[depth + 1].arity)))
        if level.type == ObjType.NUMA:
            memory(level.memory, cpus, os_index)
        elif level.type is not None:
            size = (level.cache_size or DEFAULT_CACHE_SIZE[level.type]) if level.type.is_cache else None
            named = level.type in (ObjType.PACKAGE, ObjType.DIE, ObjType.CORE, ObjType.PU)
            specs.append(ObjectSpec(level.type, cpus, os_index if named else None, size))
        attach(level.attached, cpus)
        return cpus

    everything = frozenset().union(*(make(0) for _ in range(levels[0].arity)))
    attach(machine_memory, everything)
    return build_topology(specs, source=source or description)


def to_synthetic(topology: Topology) -> str:
    """Write a symmetric topology in hwloc's synthetic syntax (readable by ``lstopo --input``),
    NUMA nodes attached in brackets after the level that holds them, as hwloc writes them (a
    memory-side cache as hwloc 3.0 writes it: ``memorysidecachesize=``, which hwloc 2 does not read)."""
    levels = topology.synthetic_levels()
    memory = _memory_levels(topology) if levels is not None else None
    if levels is None or memory is None:
        raise PinwiseError(
            f"topology {topology.source!r} is not symmetric (objects of one level differ), so it has no "
            "synthetic description: use --of xml or json instead"
        )
    order = topology.compact_order(allowed_only=False)
    numa_order = _numa_creation_order(topology.root)
    numa_indexes = f"indexes={','.join(map(str, numa_order))}" if numa_order != list(range(len(numa_order))) else ""
    parts: list[str] = []

    def attach(nodes: list[tuple[int | None, int | None]]) -> None:
        nonlocal numa_indexes
        for size, side_cache in nodes:
            attrs = " ".join(a for a in (f"memory={size}" if size else "", numa_indexes,
                                         f"memorysidecachesize={side_cache}" if side_cache else "") if a)
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


def _numa_creation_order(root: TopoObject) -> list[int | None]:
    """The OS index of every NUMA node in the order hwloc's synthetic backend makes them, which an
    ``indexes=`` on attached NUMA nodes follows: an object's children before its own nodes."""
    found: list[int | None] = []
    stack: list[tuple[TopoObject, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if children_done:
            found.extend(m.os_index for top in node.memory_children for m in walk_all(top) if m.type == ObjType.NUMA)
            continue
        stack.append((node, True))
        stack.extend((child, False) for child in reversed(node.children))
    return found


def _memory_levels(topology: Topology) -> list[list[tuple[int | None, int | None]]] | None:
    """The (memory size, memory-side cache size) of the NUMA nodes attached to each object of each
    level (the machine first; the level's first object's sizes, as hwloc writes them), or None when
    objects of one level hold different NUMA nodes or other memory objects than NUMA nodes, each
    behind at most one memory-side cache."""
    def node(memory: TopoObject) -> tuple[int | None, int | None] | None:
        if memory.type == ObjType.NUMA and not memory.memory_children:
            return memory.local_memory, None
        inside = memory.memory_children
        if memory.type == ObjType.MEMCACHE and len(inside) == 1 and inside[0].type == ObjType.NUMA:
            return inside[0].local_memory, memory.cache_size
        return None

    found = []
    frontier = [topology.root]
    while frontier:
        memories = [[node(m) for m in holder.memory_children] for holder in frontier]
        shapes = {tuple(None if m is None else m[1] is None for m in memory) for memory in memories}
        if len(shapes) != 1 or None in next(iter(shapes)):
            return None
        found.append(memories[0])  # as hwloc writes it, the first object's sizes
        frontier = [child for holder in frontier for child in holder.children]
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
