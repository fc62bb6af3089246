"""hwloc XML (``lstopo --of xml``): read the 2.x format (and 1.x), write 2.x that lstopo reads.

What is read is the tree lstopo builds from the same file (a test compares every file of hwloc's
own test suite): Groups, NUMA nodes as memory children (several per object, with or without CPUs,
with their memory size and subtype such as MCDRAM), memory-side caches, CPU-less objects, the
file's order of siblings, CPU kinds (``<cpukind>``) and NUMA distance matrices (``<distances2>``,
and 1.x ``<distances>`` between NUMA nodes). A 1.x file's NUMA nodes sit in the tree; they are
moved to memory children the way hwloc 2 imports them. PCI devices and the OS devices on them
become the topology's devices (pinwise.topology.devices), with the PUs they are local to, as lstopo
keeps them by default. Instruction caches, bridges and Misc objects are left out (the CPU tree is
the one ``lstopo --no-icaches --no-io --filter misc:none`` shows): they hold no PU a thread can be
placed on. The Machine's ``allowed_cpuset``, when present, becomes
the topology's allowed PUs.
"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from xml.parsers import expat
from pathlib import Path

from ..cpulist import format_cpulist
from ..errors import PinwiseError
from ..files import read_input
from ..numbers import whole_number
from .devices import Device, devices_by_holder, hwloc2_osdev_type, important_pci_class, os_device_kinds
from .model import (
    MAX_OS_INDEX, MEMORY_SIDE_CACHE, CpuKind, Distances, ObjectSpec, ObjType, Topology, TopoObject, build_topology,
    local_numa,
)

#: hwloc type names (2.x and 1.x) -> our types; None means "not part of the placement tree".
_HWLOC_TYPES = {
    "Machine": "machine", "System": "machine",
    "Package": "package", "Socket": "package",
    "Die": "die",
    "NUMANode": "numa", "Node": "numa", "MemCache": "memcache",
    "Group": "group",
    "L3Cache": "l3", "L2Cache": "l2", "L1Cache": "l1",
    "Core": "core", "PU": "pu",
}
_CACHE_BY_DEPTH = {"1": "l1", "2": "l2", "3": "l3"}
_HEX_WORD = re.compile(r"(?:0[xX])?[0-9a-fA-F]{1,8}\Z")  # one 32-bit word of an hwloc bitmap
_NON_EMPTY = re.compile(r"[^,]+")


def parse_cpuset(text: str, where: str) -> frozenset[int]:
    """hwloc bitmaps: comma-separated 32-bit hex words, most significant first ("0xff,0x00000001").
    An infinite prefix ("0xf...f,") is dropped: no real PU lives there. Empty words (zero words,
    as hwloc writes them) are skipped unread, so a high PU costs its one word, not all below it;
    a bitmap reaching past MAX_OS_INDEX is refused before it is read."""
    text = text.strip()
    words = text.count(",") + 1
    if words > MAX_OS_INDEX // 32 + 1 and not text.lower().startswith(("0xf...f", "f...f")):
        raise PinwiseError(f"{where}: cpuset {text[:40]!r}... names CPUs past {MAX_OS_INDEX}, more than any machine "
                           "has")
    cpus: set[int] = set()
    commas = scanned = 0
    for match in _NON_EMPTY.finditer(text):  # only the words that hold something
        commas += text.count(",", scanned, match.start())
        scanned = match.start()
        word = match.group().strip()
        position = words - 1 - commas
        if not word or word.lower() in ("0xf...f", "f...f"):
            continue
        if not _HEX_WORD.match(word):
            raise PinwiseError(f"{where}: cpuset {text[:80]!r} is not an hwloc bitmap such as 0x0000000f")
        value = int(word, 16)
        base = 32 * position
        if value and base > MAX_OS_INDEX:
            raise PinwiseError(f"{where}: cpuset {text[:40]!r}... names CPUs past {MAX_OS_INDEX}, more than any "
                               "machine has")
        bit = 0
        while value:
            if value & 1:
                cpus.add(base + bit)
            value >>= 1
            bit += 1
    return frozenset(cpus)


def format_cpuset(cpus: frozenset[int]) -> str:
    """An hwloc bitmap as hwloc writes it: 32-bit words, most significant first, zero words between
    the first and the last left empty (PU 127: ``0x80000000,,,0x0``; none: ``0x0``), so a high PU costs a comma
    per word, not eleven characters."""
    bits: dict[int, int] = {}
    for cpu in cpus:  # word by word: one big integer per object made a 64k-PU export take minutes
        bits[cpu >> 5] = bits.get(cpu >> 5, 0) | 1 << (cpu & 31)
    top = max(bits, default=0)
    return ",".join(f"0x{bits[w]:08x}" if w in bits else "" if w else "0x0" for w in range(top, -1, -1))


def read_xml(path: str | Path) -> Topology:
    return parse_xml(read_input(path, "topology file", binary=True), source=str(path))


class _EntityDeclared(Exception):
    pass


def _refuse_entities(text: bytes | str, source: str) -> None:
    """No entity declarations (the way to billion-laughs and external files), found by the XML
    parser itself, so that no encoding (UTF-16, UTF-32...) hides one from a text search."""
    parser = expat.ParserCreate()

    def declared(*_):
        raise _EntityDeclared

    parser.EntityDeclHandler = declared
    try:
        parser.Parse(text, True)
    except _EntityDeclared:
        raise PinwiseError(f"{source}: XML entity declarations are not accepted in topology files") from None
    except expat.ExpatError:
        pass  # not well-formed: said with its position by the parse that follows


def parse_xml(text: bytes | str, source: str = "<xml>") -> Topology:
    _refuse_entities(text, source)
    try:
        root = ET.fromstring(text)
    except ET.ParseError as err:
        raise PinwiseError(f"{source} is not well-formed XML ({err}); produce one with 'lstopo --of xml FILE'") from None
    if root.tag != "topology":
        raise PinwiseError(f"{source} is XML but not an hwloc topology (root element <{root.tag}>, expected <topology>)")
    top = root.find("object")
    if top is None:
        raise PinwiseError(f"{source}: the hwloc topology has no <object> inside <topology>")
    version = _format_version(root.get("version"), source)
    reader = _Reader(source, version1=version == 1, version=version)
    reader.read(top)
    specs = reader.specs
    pus = {s.os_index for s in specs if s.type == ObjType.PU}
    machine_cpuset = reader.machine_cpuset
    if machine_cpuset is not None and pus and not pus <= machine_cpuset:
        raise PinwiseError(f"{source}: the Machine's cpuset {format_cpuset(machine_cpuset)} leaves out PUs "
                           f"{format_cpulist(sorted(pus - machine_cpuset))}, which the file lists")
    distances = [*reader.v1_distances(), *(_distances2(e, reader, source) for e in root.findall("distances2"))]
    allowed = reader.allowed
    return build_topology(specs, allowed=allowed, source=source,
                          restriction="allowed_cpuset in the XML file" if allowed else None,
                          cpukinds=[_cpukind(e, source) for e in root.findall("cpukind")],
                          distances=[d for d in distances if d is not None], keep_groups=not reader.version1,
                          allowed_nodes=reader.allowed_nodes, devices=reader.devices())


def _format_version(text: str | None, source: str) -> int:
    """The file's major format version: 1 without the attribute (hwloc 1.x wrote none), 2 for
    hwloc 2.x, 3 for hwloc 3.0 (the tree as 2.x writes it, objects with an ``id`` and device
    types as bits); a later one is refused, as hwloc 3.0 refuses it."""
    if text is None:
        return 1
    major = re.match(r"\s*([0-9]+)(?:\.[0-9]+)?\s*\Z", text)
    if major is None:
        raise PinwiseError(f"{source}: <topology version={text[:20]!r}> is not an hwloc XML version such as 2.0")
    if int(major[1]) > 3:
        raise PinwiseError(f"{source}: hwloc XML version {text.strip()} is newer than pinwise reads (1.x, 2.x, 3.x): "
                           "export it again with an hwloc 2 or 3 lstopo")
    return max(int(major[1]), 1)


class _Reader:
    """One pass over the <object> elements, depth first, collecting specs with their parents."""

    def __init__(self, source: str, version1: bool, version: int = 2):
        self.source = source
        self.version1 = version1
        self.version = version
        #: I/O objects as they are read: (PCI device's attributes or None, its OS devices, locality).
        self.io: list[dict] = []
        self.specs: list[ObjectSpec] = []
        self.allowed: frozenset[int] | None = None
        self.allowed_nodes: frozenset[int] | None = None
        self.machine_cpuset: frozenset[int] | None = None
        self.numa_by_gp: dict[str, int] = {}
        self.v1_root_distances: list[ET.Element] = []

    def read(self, top: ET.Element) -> None:
        """Every object in document order (depth first, without recursion: a file may nest deeply)."""
        if self.version1:
            self.v1_root_distances = top.findall("distances")
        stack: list[tuple[ET.Element, int | None, dict | None]] = [(top, None, None)]
        while stack:
            element, parent, pci = stack.pop()
            kind = element.get("type", "")
            if kind in ("PCIDev", "OSDev"):
                pci = self._io(element, parent, pci)
                position = None
            else:
                position = self._spec(element, parent)
            below = position if position is not None else parent
            stack.extend((child, below, pci) for child in reversed(element.findall("object")))

    def _io(self, element: ET.Element, parent: int | None, pci: dict | None) -> dict | None:
        """A PCI device, or an OS device (on the PCI device it hangs from, if any): its locality is
        the PUs of the CPU-tree object above it."""
        locality = self.specs[parent].cpuset if parent is not None else frozenset()
        if element.get("type") == "PCIDev":
            words = (element.get("pci_type") or "").split()
            pci_class = int(words[0], 16) if words and re.fullmatch(r"[0-9a-fA-F]{4}", words[0]) else None
            ids = words[1].strip("[]") if len(words) > 1 else None
            device = {"busid": element.get("pci_busid"), "class": pci_class, "id": ids, "os": [],
                      "cpuset": locality, "info": [(i.get("name", ""), i.get("value", "")) for i in element.findall("info")]}
            self.io.append(device)
            return device
        kinds = os_device_kinds(element.get("osdev_type"), self.version)
        name = element.get("name") or ""
        if kinds == ("storage",) and name.startswith("dax"):
            kinds = ("memory",)
        if "dma" in kinds and len(kinds) == 1:
            return pci  # hwloc's default filter leaves DMA engines out
        holder = pci
        if holder is None:  # an OS device that hangs from no PCI device
            holder = {"busid": None, "class": None, "id": None, "os": [], "cpuset": locality, "info": []}
            self.io.append(holder)
        holder["os"].append((name, kinds))
        holder["info"].extend((i.get("name", ""), i.get("value", "")) for i in element.findall("info"))
        return pci

    def devices(self) -> list[Device]:
        """The I/O objects lstopo keeps by default, as :class:`Device`."""
        return [Device(frozenset(d["cpuset"]), d["busid"], d["class"], d["id"], tuple(d["os"]), tuple(d["info"]))
                for d in self.io if d["os"] or d["class"] is None or important_pci_class(d["class"])]

    def _spec(self, element: ET.Element, parent: int | None) -> int | None:
        source = self.source
        hwloc_type = element.get("type", "")
        type_ = _HWLOC_TYPES.get(hwloc_type)
        if hwloc_type == "Cache":  # hwloc 1.x: one type for all caches; instruction caches have type 2
            if element.get("cache_type") == "2":
                return None
            type_ = _CACHE_BY_DEPTH.get(element.get("depth", ""))
        if type_ is None:
            return None
        type_ = ObjType(type_)
        cpuset_text = element.get("cpuset")
        if cpuset_text is None:
            raise PinwiseError(f"{source}: a {hwloc_type} object has no cpuset attribute")
        cpuset = parse_cpuset(cpuset_text, source)
        if type_ == ObjType.MACHINE:
            if parent is None:
                self.machine_cpuset = cpuset
                if element.get("allowed_cpuset") is not None:
                    self.allowed = parse_cpuset(element.get("allowed_cpuset"), source)
                if element.get("allowed_nodeset") is not None:
                    self.allowed_nodes = parse_cpuset(element.get("allowed_nodeset"), source)
            # a 1.x file without NUMA nodes gives the machine's memory here (hwloc 2 hangs it on the NUMA node it makes)
            self.specs.append(ObjectSpec(ObjType.MACHINE, cpuset, local_memory=_int_attr(element, "local_memory", source),
                                         order=len(self.specs), complete=self._complete(element)))
            return len(self.specs) - 1
        os_index = _int_attr(element, "os_index", source)
        if type_ == ObjType.PU and os_index is None:
            raise PinwiseError(f"{source}: a PU has no os_index")
        memory = _int_attr(element, "local_memory", source) if type_ == ObjType.NUMA else None
        subtype = element.get("subtype") or _info(element, "Type")
        if type_ == ObjType.NUMA and self.version1 and parent is not None and self.specs[parent].cpuset != cpuset:
            # hwloc 2 reads a 1.x NUMA node as a memory child of its parent; where their PUs differ,
            # of a Group inserted with the node's PUs; except KNL's MCDRAM, kept beside its DDR node.
            beside = [s for s in self.specs if s.type == ObjType.NUMA and s.parent == parent]
            if not (len(beside) == 1 and not beside[0].subtype and subtype == "MCDRAM" and not cpuset):
                self.specs.append(ObjectSpec(ObjType.GROUP, cpuset, parent=parent, order=len(self.specs)))
                parent = len(self.specs) - 1
        self.specs.append(ObjectSpec(type_, cpuset, os_index, _int_attr(element, "cache_size", source), memory,
                                     subtype if type_ in (ObjType.NUMA, ObjType.GROUP, ObjType.MEMCACHE)
                                     or (type_.is_cache and subtype == MEMORY_SIDE_CACHE) else None,
                                     parent if (type_.is_memory or not cpuset) else None, len(self.specs),
                                     self._complete(element), _cache_geometry(element, type_, source)))
        if type_ == ObjType.NUMA and element.get("gp_index") is not None:
            self.numa_by_gp[element.get("gp_index")] = os_index
        return len(self.specs) - 1

    def _complete(self, element: ET.Element) -> frozenset[int] | None:
        text = element.get("complete_cpuset")
        return None if text is None else parse_cpuset(text, self.source)

    def v1_distances(self) -> list[Distances | None]:
        """1.x ``<distances nbobjs=N latency_base=B>`` held by the root: hwloc 2 reads a matrix as
        one between NUMA nodes (in the file's order) when N is their number, values times B."""
        numa = [s.os_index for s in self.specs if s.type == ObjType.NUMA]
        found = []
        for element in self.v1_root_distances:
            count = _int_attr(element, "nbobjs", self.source) or 0
            if count != len(numa) or count == 0:
                continue
            base = float(element.get("latency_base") or 1)
            values = [float(e.get("value", "nan")) * base for e in element.findall("latency")]
            if len(values) != count * count or any(not math.isfinite(v) or v < 0 for v in values):
                raise PinwiseError(f"{self.source}: a <distances> element has {len(values)} values for {count} objects")
            found.append(Distances(ObjType.NUMA, tuple(i or 0 for i in numa),
                                   tuple(tuple(round(v) for v in values[i * count:(i + 1) * count]) for i in range(count))))
        return found


def _info(element: ET.Element, name: str) -> str | None:
    return next((i.get("value") for i in element.findall("info") if i.get("name") == name), None)


def _cpukind(element: ET.Element, source: str) -> CpuKind:
    cpuset = parse_cpuset(element.get("cpuset", ""), source)
    text = (element.get("forced_efficiency") or "-1").strip()
    efficiency = -1 if text == "-1" else whole_number(text, f"{source}: attribute forced_efficiency", 0, 1 << 20)
    info = tuple((i.get("name", ""), i.get("value", "")) for i in element.findall("info"))
    return CpuKind(cpuset, efficiency, info)


def _distances2(element: ET.Element, reader: _Reader, source: str) -> Distances | None:
    """hwloc 2 ``<distances2 type=T nbobjs=N indexing=os|gp>``: N indexes, then N*N values over
    one or more ``<u64values>``. NUMA-node matrices are kept; others (PUs, packages) skipped."""
    if element.get("type") != "NUMANode":
        return None
    count = _int_attr(element, "nbobjs", source) or 0
    indexes = " ".join(i.text or "" for i in element.findall("indexes")).split()
    values = " ".join(v.text or "" for v in element.findall("u64values")).split()
    if len(indexes) != count or len(values) != count * count:
        raise PinwiseError(f"{source}: a <distances2> element has {len(indexes)} indexes and {len(values)} values "
                           f"for {count} objects")
    numbers = [whole_number(v, f"{source}: a distance", 0, 1 << 62) for v in values]
    if element.get("indexing") == "gp":
        if any(i not in reader.numa_by_gp for i in indexes):
            raise PinwiseError(f"{source}: a <distances2> element names an object that is not a NUMA node")
        os_indexes = tuple(reader.numa_by_gp[i] for i in indexes)
    else:
        os_indexes = tuple(whole_number(i, f"{source}: a distance index", 0, 1 << 31) for i in indexes)
    return Distances(ObjType.NUMA, os_indexes, tuple(tuple(numbers[i * count:(i + 1) * count]) for i in range(count)),
                     _int_attr(element, "kind", source) or 0, element.get("name"))


def _cache_geometry(element: ET.Element, type_: ObjType, source: str) -> tuple[int, int] | None:
    """(associativity, line size) of a cache whose file gives both (hwloc: -1 fully associative,
    0 unknown)."""
    if not type_.is_cache or element.get("cache_associativity") is None or element.get("cache_linesize") is None:
        return None
    assoc = element.get("cache_associativity").strip()
    ways = -1 if assoc == "-1" else whole_number(assoc, f"{source}: attribute cache_associativity", 0, 1 << 20)
    line = whole_number(element.get("cache_linesize"), f"{source}: attribute cache_linesize", 0, 1 << 20)
    return (ways, line) if ways and line else None


#: Sizes are hwloc's 64-bit numbers (a machine's memory passes 2^48 bytes); counts and indexes
#: stay far below.
_SIZE_ATTRIBUTES = ("local_memory", "cache_size")


def _int_attr(element: ET.Element, name: str, source: str) -> int | None:
    value = element.get(name)
    maximum = (1 << 64) - 1 if name in _SIZE_ATTRIBUTES else 1 << 48
    return None if value is None else whole_number(value, f"{source}: attribute {name}", 0, maximum)


_XML_TYPE = {"group": "Group", "package": "Package", "die": "Die", "l3": "L3Cache", "l2": "L2Cache",
             "l1": "L1Cache", "core": "Core", "pu": "PU", "numa": "NUMANode", "memcache": "MemCache", "machine": "Machine"}
_CACHE_DEPTH = {"l3": "3", "l2": "2", "l1": "1"}


def to_xml(topology: Topology) -> str:
    """Write hwloc 2.x XML that ``lstopo --input FILE`` accepts and :func:`parse_xml` reads back:
    the CPU tree, memory children, CPU-less objects, PCI and OS devices (under the object they
    hang from, without bridges), CPU kinds and NUMA distances."""
    numa_index = {id(n): n.os_index if n.os_index is not None else n.logical_index for n in topology.numa_nodes}
    gp_index = iter(range(1, 1 << 30))

    def nodeset(node: TopoObject) -> str:
        """hwloc's nodeset (a NUMA node's is itself alone: hwloc 3.0 refuses a file where it is not)."""
        return format_cpuset(frozenset(numa_index[id(m)] for m in local_numa(node)))

    def element(node: TopoObject) -> ET.Element:
        attrs = {"type": _XML_TYPE[node.type]}
        if node.type == ObjType.NUMA:
            attrs["os_index"] = str(numa_index[id(node)])
        elif node.os_index is not None and node.type in (ObjType.PACKAGE, ObjType.DIE, ObjType.CORE, ObjType.PU):
            attrs["os_index"] = str(node.os_index)
        cpus, nodes = format_cpuset(node.cpuset), nodeset(node)
        complete = format_cpuset(node.cpuset | node.complete) if node.complete else cpus
        attrs.update({"cpuset": cpus, "complete_cpuset": complete, "nodeset": nodes, "complete_nodeset": nodes,
                      "gp_index": str(next(gp_index))})
        if node.subtype:
            attrs["subtype"] = node.subtype
        if node.is_cache:
            ways, line = node.cache_geometry or (0, 64)
            attrs.update({"cache_size": str(node.cache_size or 0), "depth": _CACHE_DEPTH[node.type],
                          "cache_linesize": str(line), "cache_associativity": str(ways),
                          "cache_type": "1" if node.type == ObjType.L1 else "0"})  # pinwise's L1 is the data cache
        if node.type == ObjType.MEMCACHE:
            attrs.update({"cache_size": str(node.cache_size or 0), "depth": "1", "cache_linesize": "64",
                          "cache_associativity": "0", "cache_type": "0"})
        if node.type == ObjType.NUMA and node.local_memory is not None:  # unknown stays unknown (not 0 bytes)
            attrs["local_memory"] = str(node.local_memory)
        if node.type == ObjType.GROUP:
            attrs["kind"] = "1001" if node.memory_children else "0"
        out = ET.Element("object", attrs)
        for child in (*node.memory_children, *node.children, *node.cpuless_children):
            out.append(element(child))
        for device in devices_at.get(id(node), ()):
            out.append(device_element(device))
        return out

    def device_element(device: Device) -> ET.Element:
        """A PCI device with its OS devices (or an OS device alone), hung from its local object."""
        os_elements = [ET.Element("object", {"type": "OSDev", "gp_index": str(next(gp_index)), "name": name,
                                             "osdev_type": str(hwloc2_osdev_type(kinds))})
                       for name, kinds in device.os_devices]
        if device.busid is None:
            return os_elements[0]
        pci_type = f"{device.pci_class or 0:04x} [{device.pci_id or '0000:0000'}] [0000:0000] 00"
        out = ET.Element("object", {"type": "PCIDev", "gp_index": str(next(gp_index)), "pci_busid": device.busid,
                                    "pci_type": pci_type})
        out.extend(os_elements)
        return out

    devices_at = devices_by_holder(topology)

    root = ET.Element("topology", {"version": "2.0"})
    machine = element(topology.root)
    machine.attrib = {"type": "Machine", "os_index": "0", **{k: v for k, v in machine.attrib.items() if k != "type"}}
    machine.set("allowed_cpuset", format_cpuset(topology.allowed))
    machine.set("allowed_nodeset", format_cpuset(frozenset(numa_index[id(n)] for n in topology.numa_nodes
                                                           if n.os_index in topology.allowed_nodes)))
    root.append(machine)
    for kind in topology.cpukinds:
        kind_element = ET.SubElement(root, "cpukind", {"cpuset": format_cpuset(kind.cpuset),
                                                       "forced_efficiency": str(kind.efficiency)})
        for name, value in kind.info:
            ET.SubElement(kind_element, "info", {"name": name, "value": value})
    for matrix in topology.distances:
        count = len(matrix.os_indexes)
        attrs = {"type": "NUMANode", "nbobjs": str(count), "kind": str(matrix.kind or 5), "indexing": "os"}
        if matrix.name:
            attrs["name"] = matrix.name
        distances = ET.SubElement(root, "distances2", attrs)
        indexes = " ".join(map(str, matrix.os_indexes)) + " "
        ET.SubElement(distances, "indexes", {"length": str(len(indexes))}).text = indexes
        flat = [v for row in matrix.values for v in row]
        for start in range(0, len(flat), 10):  # hwloc writes ten values per element
            text = " ".join(map(str, flat[start:start + 10])) + " "
            ET.SubElement(distances, "u64values", {"length": str(len(text))}).text = text
    ET.indent(root)
    body = ET.tostring(root, encoding="unicode")
    return '<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE topology SYSTEM "hwloc2.dtd">\n' + body + "\n"
