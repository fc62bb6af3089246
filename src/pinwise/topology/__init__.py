"""Capability 1: the machine as one tree, from sysfs, hwloc XML, synthetic strings or presets.

Every other capability takes a :class:`Topology`; :func:`load_topology` turns what a user passes
to ``--topology`` into one.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import PinwiseError
from ..files import read_document, read_input
from .model import LEVEL_ORDER, ObjectSpec, ObjType, Topology, TopoObject, build_topology, walk
from .render import render
from .synthetic import PRESETS, parse_synthetic, preset, to_synthetic
from .sysfs import read_sysfs
from .._stage import make_callable

__all__ = [
    "LEVEL_ORDER", "PRESETS", "ObjType", "ObjectSpec", "Topology", "TopoObject", "build_topology", "from_json",
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


def load_topology(spec: str | None) -> Topology:
    """Resolve a ``--topology`` value: nothing or ``live`` (this machine), a path ending in .xml
    (hwloc XML) or .json (pinwise JSON), a preset name, or a synthetic string."""
    if spec is None or spec.strip().lower() in ("live", "this", "sysfs"):
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
    if ":" in spec or "[" in spec:
        return parse_synthetic(spec)
    if Path(spec).exists():
        raise PinwiseError(f"topology file {spec!r} must end in .xml (hwloc XML) or .json (pinwise JSON)")
    raise PinwiseError(
        f"unknown topology {spec!r}: not a preset ({', '.join(PRESETS)}), not a file ending in .xml "
        "or .json, and not a synthetic string such as 'pack:2 l3:1 core:4 pu:2'"
    )


def to_json(topology: Topology) -> str:
    """The documented JSON form: nested objects with type, os_index and cache_size; cpusets are
    implied by the PUs below each object; ``allowed`` lists the PUs this process may use."""

    def node_json(node: TopoObject) -> dict:
        out: dict = {"type": node.type}
        if node.os_index is not None:
            out["os_index"] = node.os_index
        if node.cache_size:
            out["cache_size"] = node.cache_size
        if node.children:
            out["children"] = [node_json(c) for c in node.children]
        return out

    return json.dumps({
        "format": JSON_FORMAT, "version": 1, "source": topology.source,
        "allowed": sorted(topology.allowed), "restriction": topology.restriction,
        "root": node_json(topology.root),
    }, indent=1)


def read_json(path: str | Path) -> Topology:
    return from_json(read_input(path, "topology file"), source=str(path))


def from_json(text: str, source: str = "<json>") -> Topology:
    document = read_document(text, source, JSON_FORMAT, "a pinwise topology")
    specs: list[ObjectSpec] = []

    def walk(node: object) -> frozenset[int]:
        if not isinstance(node, dict) or not isinstance(node.get("type"), str):
            raise PinwiseError(f"{source}: every object needs a \"type\"")
        type_ = node["type"]
        if type_ not in LEVEL_ORDER:
            raise PinwiseError(f"{source}: unknown object type {type_!r}")
        os_index = node.get("os_index")
        cache_size = node.get("cache_size")
        for name, value in (("os_index", os_index), ("cache_size", cache_size)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
                raise PinwiseError(f"{source}: {name} {value!r} must be a non-negative whole number")
        if type_ == ObjType.PU:
            if os_index is None:
                raise PinwiseError(f"{source}: a pu has no os_index")
            cpus = frozenset([os_index])
        else:
            children = node.get("children", [])
            if not isinstance(children, list):
                raise PinwiseError(f"{source}: \"children\" must be a list")
            cpus = frozenset().union(*(walk(child) for child in children))
        specs.append(ObjectSpec(type_, cpus, os_index, cache_size))
        return cpus

    walk(document.get("root"))
    allowed = document.get("allowed")
    if allowed is not None and (not isinstance(allowed, list) or not all(isinstance(c, int) for c in allowed)):
        raise PinwiseError(f"{source}: \"allowed\" must be a list of CPU numbers")
    return build_topology(specs, allowed=allowed, source=document.get("source") or source,
                          restriction=document.get("restriction"))


make_callable(__name__, 'load_topology')  # pinwise.topology(...) runs load_topology()
