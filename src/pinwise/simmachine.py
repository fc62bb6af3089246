"""The target machine as pinwise's cache simulator sees it (pinwise.simulate): its PUs, its cache
levels with their sizes, geometry and instances, the distance class of every pair of PUs, and the
default bandwidth of each level; what it assumes where the topology is silent, and what it leaves
out (a memory-side cache), said in notes.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import PinwiseError
from .topology import Topology
from .topology.model import MEMORY_SIDE_CACHE, ObjType, format_size

#: Caches a topology does not describe: (size, associativity) by level, 64-byte lines (Intel
#: Skylake-SP's L1d and L2, and a 2 MiB/16-way slice of L3 per core).
DEFAULT_CACHE = {ObjType.L1: (32 * 1024, 8), ObjType.L2: (1024 * 1024, 16), ObjType.L3: (8 * 1024 * 1024, 16)}
DEFAULT_LINE = 64
LEVEL_NAME = {ObjType.L1: "L1d", ObjType.L2: "L2", ObjType.L3: "L3"}
#: Bytes per cycle: an L2 instance moves (Skylake-SP's sustained L2 bandwidth, half its 64-byte
#: peak), a shared L3 per core below it (one slice per core, 16 bytes a cycle each), a NUMA
#: node's memory controller (Skylake-SP: 6 channels of DDR4-2666, 128 GB/s, at 2.5 GHz). L1d: no
#: limit (a core's own loads). 0 means no limit.
DEFAULT_BANDWIDTH = {"L1d": 0.0, "L2": 32.0, "L3": 16.0, "dram": 51.0}
#: The memory controllers of the papers' machines, from their datasheets (channels x transfer
#: rate x 8 bytes, at the base clock): the NPB study's Xeon E5620 (3 x DDR3-1066, 25.6 GB/s per
#: socket, 2.40 GHz) and Mazouz's X5570 (3 x DDR3-1333, 32 GB/s, 2.93 GHz).
PRESET_DRAM_BANDWIDTH = {"e5620": 10.7, "nehalem": 10.9}


@dataclass(frozen=True)
class Level:
    name: str
    size: int
    line: int
    ways: int
    instance_of_pu: tuple[int, ...]       # per PU (by logical position), its instance
    instances: int
    note: str = ""                        # what was assumed or adjusted


@dataclass(frozen=True)
class MachineModel:
    """The target machine as the simulator sees it: PUs by logical position, cache levels from
    L1 up, NUMA node per PU, and the distance class of every pair of PUs."""

    pus: tuple[int, ...]                  # OS indexes, by logical position
    levels: tuple[Level, ...]
    node_of_pu: tuple[int, ...]
    classes: tuple[str, ...]
    class_of_pair: tuple[tuple[int, ...], ...]


def machine_model(topology: Topology) -> MachineModel:
    """Cache levels of the topology (L1 per core added where it has none, as SPEC says: a
    private L1d per core shared by its SMT siblings), sizes and geometry from the topology or the
    stated defaults; any number of sets (12 MiB of 16 ways is 12,288), a size that is not whole
    sets rounded down to whole sets."""
    pus = tuple(topology.logical_order(allowed_only=False))
    position = {pu: i for i, pu in enumerate(pus)}
    levels = []
    for kind in (ObjType.L1, ObjType.L2, ObjType.L3):
        objects = [o for o in topology.objects(kind) if o.cpuset and o.subtype != MEMORY_SIDE_CACHE]
        if not objects:
            if kind != ObjType.L1:
                continue
            objects = [o for o in topology.objects(ObjType.CORE) if o.cpuset] or [topology.pu(p) for p in pus]
            size, ways = DEFAULT_CACHE[kind]
            line, note = DEFAULT_LINE, f"none in the topology: {format_size(size)} {ways}-way per core assumed"
        else:
            sizes = {o.cache_size for o in objects}
            geometry = {o.cache_geometry for o in objects}
            size = objects[0].cache_size or DEFAULT_CACHE[kind][0]
            ways, line = objects[0].cache_geometry or (DEFAULT_CACHE[kind][1], DEFAULT_LINE)
            note = "" if objects[0].cache_geometry else f"{ways}-way, {line}-byte lines assumed"
            if len(sizes) > 1 or len(geometry) > 1:
                note = (note + "; " if note else "") + "caches of different sizes: the first one's for all"
            if not objects[0].cache_size:
                note = (note + "; " if note else "") + f"size unknown: {format_size(size)} assumed"
        if ways == -1:
            ways = size // line
        sets = size // (line * ways)
        if sets < 1:
            raise PinwiseError(f"{LEVEL_NAME[kind]}: {size} bytes cannot hold {ways} ways of {line}-byte lines")
        if sets * ways * line != size:
            note = (note + "; " if note else "") + (f"{format_size(size)} is not a whole number of {ways}-way sets: "
                                                    f"{sets} sets ({format_size(sets * ways * line)}) modelled")
        instance = [-1] * len(pus)
        for index, obj in enumerate(objects):
            for pu in obj.cpuset:
                if pu in position:
                    instance[position[pu]] = index
        if -1 in instance:
            raise PinwiseError(f"the topology's {LEVEL_NAME[kind]} caches do not cover every PU: cannot simulate it")
        levels.append(Level(LEVEL_NAME[kind], sets * ways * line, line, ways, tuple(instance), len(objects), note))
    lines = {level.line for level in levels}
    if len(lines) > 1:
        raise PinwiseError(f"the caches have different line sizes ({sorted(lines)}): the simulator needs one")
    nodes = []
    node_ids: dict[int, int] = {}
    for pu in pus:
        numa = topology.numa_node_of(pu)
        key = -1 if numa is None else (numa.os_index if numa.os_index is not None else id(numa))
        nodes.append(node_ids.setdefault(key, len(node_ids)))
    classes = tuple([f"{level.name}" for level in levels[1:]] + ["package", "machine"])
    package = {}  # PU -> its package; without Package objects, its NUMA node (a transfer between nodes is remote)
    for obj in topology.objects(ObjType.PACKAGE):
        for pu in obj.cpuset:
            package[pu] = id(obj)
    if not package:
        package = {pu: nodes[i] for i, pu in enumerate(pus)}
    matrix = []
    for i, p in enumerate(pus):
        row = []
        for j, q in enumerate(pus):
            shared = next((k for k, level in enumerate(levels[1:]) if level.instance_of_pu[i] == level.instance_of_pu[j]),
                          None)
            if shared is not None:
                row.append(shared)
            else:
                row.append(len(levels) - 1 if package.get(p, 0) == package.get(q, 0) else len(levels))
        matrix.append(tuple(row))
    return MachineModel(pus, tuple(levels), tuple(nodes), classes, tuple(matrix))


def memory_side_notes(topology: Topology) -> list[str]:
    """What the simulator leaves out of a topology's caches: an L3 that is a memory-side cache
    (hwloc 1's MemorySideCache: KNL's MCDRAM in cache mode) sits in front of memory, not beside
    the cores, so it is not simulated as a CPU cache (machine_model)."""
    side = [o for o in topology.objects(ObjType.L3) if o.subtype == MEMORY_SIDE_CACHE]
    if not side:
        return []
    return [f"L3: {len(side)} memory-side cache(s) of {format_size(side[0].cache_size or 0)} (hwloc's "
            f"{MEMORY_SIDE_CACHE}, as KNL's MCDRAM in cache mode) sit in front of memory, not beside the cores: not "
            "simulated, an access that misses the caches above costs memory's latency"]


def default_bandwidth(topology: Topology, machine: MachineModel) -> dict[str, float]:
    """Bytes per cycle per instance of each level (an L3's grows with the cores below it) and per
    memory controller, for ``topology``: DEFAULT_BANDWIDTH, the preset's memory figure where
    PRESET_DRAM_BANDWIDTH has one."""
    bandwidth = {level.name: DEFAULT_BANDWIDTH.get(level.name, 0.0) * (_cores(machine, level)[0] if level.name == "L3"
                                                                       else 1)
                 for level in machine.levels}
    bandwidth["dram"] = PRESET_DRAM_BANDWIDTH.get((topology.source or "").lower(), DEFAULT_BANDWIDTH["dram"])
    return bandwidth


def _cores(machine: MachineModel, level: Level) -> list[int]:
    """The cores below each instance of ``level``: the L1d's (one per core) of its PUs."""
    cores: list[set[int]] = [set() for _ in range(level.instances)]
    for instance, core in zip(level.instance_of_pu, machine.levels[0].instance_of_pu):
        cores[instance].add(core)
    return [max(1, len(found)) for found in cores]


def uneven_bandwidth_notes(machine: MachineModel, bandwidth: dict[str, float]) -> list[str]:
    """Where the L3s hold different numbers of cores, the one default per level (an L3's grows with
    its cores) was read from the first: said, with how to give another."""
    level = next((level for level in machine.levels if level.name == "L3"), None)
    if level is None:
        return []
    cores = _cores(machine, level)
    if len(set(cores)) < 2:
        return []
    return [f"L3: its instances hold {', '.join(map(str, sorted(set(cores))))} cores; each is given the first's "
            f"bandwidth ({cores[0]} cores, {bandwidth.get('L3', 0):g} bytes a cycle): --bandwidth L3=N sets another"]
