"""hwloc XML (``lstopo --of xml``): read the 2.x format (and 1.x), write 2.x that lstopo reads.

In hwloc 2.x, NUMA nodes are *memory children* attached beside the normal children of the object
whose locality they share (a Package, or a Group when a node spans several packages); pinwise keeps
them as an ordinary tree level, which is what placement policies need. Instruction caches, I/O
objects and Misc objects are left out. The Machine's ``allowed_cpuset``, when present, becomes the
topology's allowed PUs.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from xml.parsers import expat
from pathlib import Path

from ..cpulist import format_cpulist
from ..errors import PinwiseError
from ..files import read_input
from ..numbers import whole_number
from .model import ObjectSpec, ObjType, Topology, TopoObject, build_topology

#: hwloc type names (2.x and 1.x) -> our types; None means "not part of the placement tree".
_HWLOC_TYPES = {
    "Machine": "machine", "System": "machine",
    "Package": "package", "Socket": "package",
    "Die": "die",
    "NUMANode": "numa", "Node": "numa",
    "Group": "group",
    "L3Cache": "l3", "L2Cache": "l2", "L1Cache": "l1",
    "Core": "core", "PU": "pu",
}
_CACHE_BY_DEPTH = {"1": "l1", "2": "l2", "3": "l3"}
_HEX_WORD = re.compile(r"(?:0[xX])?[0-9a-fA-F]{1,8}\Z")  # one 32-bit word of an hwloc bitmap


def parse_cpuset(text: str, where: str) -> frozenset[int]:
    """hwloc bitmaps: comma-separated 32-bit hex words, most significant first ("0xff,0x00000001").
    An infinite prefix ("0xf...f,") is dropped: no real PU lives there."""
    cpus: set[int] = set()
    # An empty word is a zero word: hwloc writes bit 64 as "0x00000001,,0x0".
    words = [w.strip() or "0x0" for w in text.strip().split(",")]
    for position, word in enumerate(reversed(words)):
        if word.lower() in ("0xf...f", "f...f"):
            continue
        if not _HEX_WORD.match(word):
            raise PinwiseError(f"{where}: cpuset {text[:80]!r} is not an hwloc bitmap such as 0x0000000f")
        value = int(word, 16)
        base = 32 * position
        bit = 0
        while value:
            if value & 1:
                cpus.add(base + bit)
            value >>= 1
            bit += 1
    return frozenset(cpus)


def format_cpuset(cpus: frozenset[int]) -> str:
    value = 0
    for cpu in cpus:
        value |= 1 << cpu
    words = []
    while True:
        words.append(f"0x{value & 0xFFFFFFFF:08x}")
        value >>= 32
        if not value:
            break
    return ",".join(reversed(words))


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
    specs: list[ObjectSpec] = []
    allowed = machine_cpuset = None
    for element in top.iter("object"):
        hwloc_type = element.get("type", "")
        type_ = _HWLOC_TYPES.get(hwloc_type)
        if hwloc_type == "Cache":  # hwloc 1.x: one type for all caches; instruction caches have type 2
            if element.get("cache_type") == "2":
                continue
            type_ = _CACHE_BY_DEPTH.get(element.get("depth", ""))
        if type_ is None:
            continue
        cpuset_text = element.get("cpuset")
        if cpuset_text is None:
            raise PinwiseError(f"{source}: a {hwloc_type} object has no cpuset attribute")
        cpuset = parse_cpuset(cpuset_text, source)
        if type_ == ObjType.MACHINE:
            machine_cpuset = cpuset
            if element.get("allowed_cpuset") is not None:
                allowed = parse_cpuset(element.get("allowed_cpuset"), source)
            continue
        os_index = _int_attr(element, "os_index", source)
        if type_ == ObjType.PU:
            if os_index is None:
                raise PinwiseError(f"{source}: a PU has no os_index")
            cpuset = frozenset([os_index]) if cpuset == frozenset([os_index]) else cpuset
        specs.append(ObjectSpec(type_, cpuset, os_index, _int_attr(element, "cache_size", source)))
    pus = {s.os_index for s in specs if s.type == ObjType.PU}
    if machine_cpuset is not None and pus and not pus <= machine_cpuset:
        raise PinwiseError(f"{source}: the Machine's cpuset {format_cpuset(machine_cpuset)} leaves out PUs "
                           f"{format_cpulist(sorted(pus - machine_cpuset))}, which the file lists")
    # A Group that only carries a NUMA node (hwloc's way of placing one above packages) is that node.
    numa_sets = {s.cpuset for s in specs if s.type == ObjType.NUMA}
    specs = [s for s in specs if not (s.type == ObjType.GROUP and s.cpuset in numa_sets)]
    topology = build_topology(specs, allowed=allowed, source=source,
                              restriction="allowed_cpuset in the XML file" if allowed else None)
    return topology


def _int_attr(element: ET.Element, name: str, source: str) -> int | None:
    value = element.get(name)
    return None if value is None else whole_number(value, f"{source}: attribute {name}", 0, 1 << 48)


_XML_TYPE = {"group": "Group", "package": "Package", "die": "Die", "l3": "L3Cache", "l2": "L2Cache",
             "l1": "L1Cache", "core": "Core", "pu": "PU"}
_CACHE_DEPTH = {"l3": "3", "l2": "2", "l1": "1"}


def to_xml(topology: Topology) -> str:
    """Write hwloc 2.x XML that ``lstopo --input FILE`` accepts and :func:`parse_xml` reads back."""
    numa_nodes = topology.objects(ObjType.NUMA)
    node_of_cpu = {cpu: node.os_index if node.os_index is not None else node.logical_index
                   for node in numa_nodes for cpu in node.cpuset}
    gp_index = iter(range(1, 1 << 30))

    def nodeset(cpus: frozenset[int]) -> str:
        return format_cpuset(frozenset(node_of_cpu[c] for c in cpus if c in node_of_cpu) or frozenset([0]))

    def common(cpus: frozenset[int]) -> dict[str, str]:
        return {"cpuset": format_cpuset(cpus), "complete_cpuset": format_cpuset(cpus),
                "nodeset": nodeset(cpus), "complete_nodeset": nodeset(cpus), "gp_index": str(next(gp_index))}

    def numa_element(node: TopoObject) -> ET.Element:
        index = node.os_index if node.os_index is not None else node.logical_index
        return ET.Element("object", {"type": "NUMANode", "os_index": str(index), **common(node.cpuset),
                                     "local_memory": "0"})

    def add_children(element: ET.Element, node: TopoObject) -> None:
        for child in node.children:
            if child.type == ObjType.NUMA:
                if child.cpuset == node.cpuset:  # memory child of this object
                    element.append(numa_element(child))
                    add_children(element, child)
                else:  # spans several children: hwloc places it under a Group
                    group = ET.SubElement(element, "object", {"type": "Group", **common(child.cpuset)})
                    group.append(numa_element(child))
                    add_children(group, child)
                continue
            attrs = {"type": _XML_TYPE[child.type]}
            if child.os_index is not None and child.type in (ObjType.PACKAGE, ObjType.DIE, ObjType.CORE, ObjType.PU):
                attrs["os_index"] = str(child.os_index)
            attrs.update(common(child.cpuset))
            if child.is_cache:
                attrs.update({"cache_size": str(child.cache_size or 0), "depth": _CACHE_DEPTH[child.type],
                              "cache_linesize": "64", "cache_associativity": "0", "cache_type": "0"})
            sub = ET.SubElement(element, "object", attrs)
            add_children(sub, child)

    root = ET.Element("topology", {"version": "2.0"})
    all_cpus = topology.root.cpuset
    machine = ET.SubElement(root, "object", {"type": "Machine", "os_index": "0", **common(all_cpus)})
    machine.set("allowed_cpuset", format_cpuset(topology.allowed))
    machine.set("allowed_nodeset", nodeset(all_cpus))
    add_children(machine, topology.root)
    ET.indent(root)
    body = ET.tostring(root, encoding="unicode")
    return '<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE topology SYSTEM "hwloc2.dtd">\n' + body + "\n"
