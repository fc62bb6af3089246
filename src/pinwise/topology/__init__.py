"""Capability 1: the machine as one tree, from sysfs, hwloc XML, synthetic strings or presets.

Every other capability takes a :class:`Topology`; :func:`load_topology` turns what a user passes
to ``--topology`` into one.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from ..errors import PinwiseError
from ..files import read_document, read_input
from ..vocabulary import THIS_MACHINE
from .model import (LEVEL_ORDER, CpuKind, Distances, ObjectSpec, ObjType, Topology, TopoObject, build_topology,
                    walk, walk_all)
from .render import render
from .synthetic import PRESETS, parse_synthetic, preset, to_synthetic
from .sysfs import LIVE_SOURCE, read_sysfs
from .._stage import make_callable

__all__ = [
    "LEVEL_ORDER", "PRESETS", "CpuKind", "Distances", "ObjType", "ObjectSpec", "Topology", "TopoObject",
    "build_topology", "from_json", "is_this_machine", "walk_all",
    "live_topology", "load_topology", "parse_synthetic", "parse_xml", "preset", "read_sysfs",
    "read_xml", "render", "to_json", "to_synthetic", "to_xml", "walk",
]

JSON_FORMAT = "pinwise-topology"


def __getattr__(name: str):
    """hwloc XML support loads on first use (xml.etree is the slowest import of a plain pinwise run)."""
    if name in ("parse_xml", "read_xml", "to_xml"):
        from . import hwloc_xml

        return getattr(hwloc_xml, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def live_topology() -> Topology:
    """This machine, restricted to the CPUs the calling process may use."""
    return read_sysfs()


def is_this_machine(spec: str | None) -> bool:
    """Whether a ``--topology`` value names this machine (nothing, or live/this/sysfs in any case)."""
    return spec is None or spec.strip().lower() in THIS_MACHINE


def load_topology(spec: str | None = None) -> Topology:
    """Resolve a ``--topology`` value: nothing or ``live`` (this machine), a path ending in .xml
    (hwloc XML) or .json (pinwise JSON), a preset name, or a synthetic string."""
    if is_this_machine(spec):
        return live_topology()
    if not spec.strip():  # most often an unset variable in a script: not "this machine" in silence
        raise PinwiseError("the topology is empty: give live (this machine), a preset, an .xml or .json file, "
                           "or a synthetic string such as 'pack:2 core:4 pu:2'")
    spec = spec.strip()
    if spec.lower() in PRESETS:
        return preset(spec)
    if spec.lower().endswith(".xml"):
        from .hwloc_xml import read_xml

        return read_xml(spec)
    if spec.lower().endswith(".json"):
        return read_json(spec)
    if ":" in spec or "[" in spec or re.fullmatch(r"[0-9]+(\s+[0-9]+)*", spec):  # "2 4 2": counts, as hwloc reads them
        return parse_synthetic(spec)
    if Path(spec).exists():  # a file of another name, or a pipe (-t <(lstopo --of xml)): read once, told by its content
        return read_unnamed(spec)
    raise PinwiseError(
        f"unknown topology {spec!r}: not a preset ({', '.join(PRESETS)}), not a file ending in .xml "
        "or .json, and not a synthetic string such as 'pack:2 l3:1 core:4 pu:2'"
    )


def to_json(topology: Topology) -> str:
    """The documented JSON form (version 2): nested objects with type, os_index, cache_size; a
    NUMA node or memory-side cache sits in its holder's ``memory`` list with ``local_memory`` and
    ``subtype``; cpusets are implied by the PUs below each object (a memory object has its
    holder's); ``allowed`` lists the PUs this process may use (``allowed_nodes`` the NUMA nodes,
    where not all); ``devices`` the PCI and OS devices with the PUs local to each; ``cpukinds`` and ``distances``
    (NUMA nodes by OS index) follow hwloc's."""

    def node_json(node: TopoObject) -> dict:
        out: dict = {"type": node.type}
        if node.os_index is not None:
            out["os_index"] = node.os_index
        for key in ("cache_size", "local_memory", "subtype"):
            if getattr(node, key):
                out[key] = getattr(node, key)
        if node.memory_children:
            out["memory"] = [node_json(m) for m in node.memory_children]
        if node.children or node.cpuless_children:
            out["children"] = [node_json(c) for c in (*node.children, *node.cpuless_children)]
        return out

    document = {
        "format": JSON_FORMAT, "version": 2, "source": topology.source,
        "allowed": sorted(topology.allowed), "restriction": topology.restriction,
        "root": node_json(topology.root),
    }
    if topology.allowed_nodes != frozenset(n.os_index for n in topology.numa_nodes):
        document["allowed_nodes"] = sorted(topology.allowed_nodes)
    if topology.devices:
        document["devices"] = [{"cpus": sorted(d.cpuset), "busid": d.busid, "class": d.pci_class, "id": d.pci_id,
                                "os": [[name, list(kinds)] for name, kinds in d.os_devices],
                                "info": [list(pair) for pair in d.info]}
                               for d in topology.devices]
    if topology.cpukinds:
        document["cpukinds"] = [{"cpus": sorted(k.cpuset), "efficiency": k.efficiency, "info": dict(k.info)}
                                for k in topology.cpukinds]
    if topology.distances:
        document["distances"] = [{"type": d.type, "os_indexes": list(d.os_indexes), "values": [list(r) for r in d.values],
                                  "kind": d.kind, "name": d.name} for d in topology.distances]
    return json.dumps(document, indent=1)


def read_unnamed(path: str) -> Topology:
    """A topology file whose name does not say its format: hwloc XML if it starts with ``<``,
    pinwise JSON if with ``{``."""
    data = read_input(path, "topology file", binary=True)
    start = data.lstrip(b"\xef\xbb\xbf \t\r\n")[:1]
    if start == b"<" or data.startswith((b"\xff\xfe", b"\xfe\xff")):  # UTF-16 XML starts with its byte-order mark
        from .hwloc_xml import parse_xml

        return parse_xml(data, source=path)
    if start == b"{":
        return from_json(data.decode("utf-8-sig", errors="replace"), source=path)
    raise PinwiseError(f"topology file {path!r} is neither hwloc XML (lstopo --of xml) nor pinwise JSON (pinwise topo "
                       "--of json)")


def read_json(path: str | Path) -> Topology:
    return from_json(read_input(path, "topology file"), source=str(path))


def _whole(value: object, name: str, source: str) -> int | None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
        raise PinwiseError(f"{source}: {name} {value!r} must be a non-negative whole number")
    return value


def from_json(text: str, source: str = "<json>") -> Topology:
    document = read_document(text, source, JSON_FORMAT, "a pinwise topology", newest=2)
    specs: list[ObjectSpec] = []

    def walk(node: object, parent: int | None, memory: bool = False) -> frozenset[int]:
        if not isinstance(node, dict) or not isinstance(node.get("type"), str):
            raise PinwiseError(f"{source}: every object needs a \"type\"")
        type_ = node["type"]
        if type_ not in LEVEL_ORDER:
            raise PinwiseError(f"{source}: unknown object type {type_!r}")
        type_ = ObjType(type_)
        if type_.is_memory != memory and memory:
            raise PinwiseError(f"{source}: a {type_} cannot be in a \"memory\" list (NUMA nodes and memcaches only)")
        os_index = _whole(node.get("os_index"), "os_index", source)
        cache_size = _whole(node.get("cache_size"), "cache_size", source)
        local_memory = _whole(node.get("local_memory"), "local_memory", source)
        subtype = node.get("subtype")
        if subtype is not None and not isinstance(subtype, str):
            raise PinwiseError(f"{source}: subtype {subtype!r} must be a string")
        position = len(specs)
        specs.append(ObjectSpec(type_, frozenset(), os_index, cache_size, local_memory, subtype, parent, position))
        for key in ("memory", "children"):
            if not isinstance(node.get(key, []), list):
                raise PinwiseError(f"{source}: \"{key}\" must be a list")
        if type_ == ObjType.PU:
            if os_index is None:
                raise PinwiseError(f"{source}: a pu has no os_index")
            cpus = frozenset([os_index])
        else:
            cpus = frozenset().union(*(walk(child, position) for child in node.get("children", [])))
        for child in node.get("memory", []):
            walk(child, position, memory=True)
        # memory objects take their holder's PUs; in a version 1 file, NUMA nodes sit in the tree
        attach = parent if (memory or not cpus) else None
        specs[position] = ObjectSpec(type_, cpus, os_index, cache_size, local_memory, subtype, attach, position)
        return cpus

    walk(document.get("root"), None)
    allowed, allowed_nodes = document.get("allowed"), document.get("allowed_nodes")
    for key, value in (("allowed", allowed), ("allowed_nodes", allowed_nodes)):
        if value is not None and (not isinstance(value, list) or not all(isinstance(c, int) for c in value)):
            raise PinwiseError(f"{source}: \"{key}\" must be a list of {'CPU' if key == 'allowed' else 'NUMA node'} "
                               "numbers")
    label = document.get("source") or source
    if label == LIVE_SOURCE and source != label:  # read back (on this host or another): not the live machine
        label = f"{source}, exported from {LIVE_SOURCE}"
    return build_topology(specs, allowed=allowed, source=label,
                          restriction=document.get("restriction"), cpukinds=_json_kinds(document, source),
                          distances=_json_distances(document, source), keep_groups=True, allowed_nodes=allowed_nodes,
                          devices=_json_devices(document, source))


def _json_kinds(document: dict, source: str) -> list[CpuKind]:
    kinds = document.get("cpukinds", [])
    if not isinstance(kinds, list) or not all(isinstance(k, dict) for k in kinds):
        raise PinwiseError(f"{source}: \"cpukinds\" must be a list of objects")
    found = []
    for kind in kinds:
        cpus, efficiency, info = kind.get("cpus"), kind.get("efficiency"), kind.get("info", {})
        if not isinstance(cpus, list) or not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in cpus):
            raise PinwiseError(f"{source}: a CPU kind's \"cpus\" must be a list of CPU numbers")
        if not isinstance(efficiency, int) or isinstance(efficiency, bool):
            raise PinwiseError(f"{source}: a CPU kind's \"efficiency\" must be a whole number")
        if not isinstance(info, dict) or not all(isinstance(v, str) for v in info.values()):
            raise PinwiseError(f"{source}: a CPU kind's \"info\" must map names to strings")
        found.append(CpuKind(frozenset(cpus), efficiency, tuple(info.items())))
    return found


def _json_devices(document: dict, source: str) -> list:
    from .devices import Device

    devices = document.get("devices", [])
    if not isinstance(devices, list) or not all(isinstance(d, dict) for d in devices):
        raise PinwiseError(f"{source}: \"devices\" must be a list of objects")
    found = []
    for device in devices:
        cpus, os_devices, info = device.get("cpus"), device.get("os", []), device.get("info", [])
        busid, pci_class, pci_id = device.get("busid"), device.get("class"), device.get("id")
        if (not isinstance(cpus, list) or not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in cpus)
                or not isinstance(os_devices, list)
                or not all(isinstance(o, list) and len(o) == 2 and isinstance(o[0], str) and isinstance(o[1], list)
                           and all(isinstance(k, str) for k in o[1]) for o in os_devices)
                or not isinstance(info, list)
                or not all(isinstance(p, list) and len(p) == 2 and all(isinstance(v, str) for v in p) for p in info)
                or not all(v is None or isinstance(v, str) for v in (busid, pci_id))
                or not (pci_class is None or isinstance(pci_class, int) and not isinstance(pci_class, bool))):
            raise PinwiseError(f"{source}: a device needs \"cpus\" (CPU numbers), \"os\" ([name, [kinds]] pairs), "
                               "and optional \"busid\", \"class\", \"id\" and \"info\" ([name, value] pairs)")
        found.append(Device(frozenset(cpus), busid, pci_class, pci_id,
                            tuple((name, tuple(kinds)) for name, kinds in os_devices), tuple(map(tuple, info))))
    return found


def _json_distances(document: dict, source: str) -> list[Distances]:
    matrices = document.get("distances", [])
    if not isinstance(matrices, list) or not all(isinstance(m, dict) for m in matrices):
        raise PinwiseError(f"{source}: \"distances\" must be a list of objects")
    found = []
    for matrix in matrices:
        indexes, values = matrix.get("os_indexes"), matrix.get("values")
        count = len(indexes) if isinstance(indexes, list) else -1
        if (count < 1 or not all(isinstance(i, int) and not isinstance(i, bool) for i in indexes)
                or not isinstance(values, list) or len(values) != count
                or not all(isinstance(row, list) and len(row) == count
                           and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in row)
                           for row in values)):
            raise PinwiseError(f"{source}: a distance matrix needs \"os_indexes\" and a square \"values\" of "
                               "whole numbers, one row per index")
        kind, name = matrix.get("kind", 5), matrix.get("name")
        if not isinstance(kind, int) or isinstance(kind, bool) or (name is not None and not isinstance(name, str)):
            raise PinwiseError(f"{source}: a distance matrix's \"kind\" is a number and its \"name\" a string")
        found.append(Distances(ObjType.NUMA, tuple(indexes), tuple(tuple(r) for r in values), kind, name))
    return found


make_callable(__name__, 'load_topology')  # pinwise.topology(...) runs load_topology()
