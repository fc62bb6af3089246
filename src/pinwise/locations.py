"""hwloc's locations (hwloc-calc, hwloc-bind): ``core:0-1``, ``pu:even``, ``numa:1``,
``package:1.core:2``, ``0x3``, ``all``, with hwloc-calc's meaning, on a pinwise Topology.

A location is one or more words, each adding its set to the result (or, with a prefix, ``~``
removing it, ``x`` keeping only what the two share, ``^`` keeping what one of them has),
evaluated left to right from nothing, as hwloc-calc does (utils/hwloc/hwloc-calc.h):

- ``all`` or ``root``: every allowed PU (every NUMA node);
- ``TYPE:RANGE``: objects of a type by *logical* index (hwloc-calc's default), counted among
  the objects that hold allowed PUs or memory, as hwloc counts them once disallowed PUs are
  removed. TYPE as hwloc reads it (``core``, ``pu``, ``numa`` or ``node``, ``package`` or
  ``socket``, ``die``, ``l3``/``l2``/``l1d`` or ``l2cache``, ``group``, ``machine``, and any
  prefix of two letters or more: ``co``, ``pa``); ``hbm`` or ``mcdram`` for MCDRAM NUMA nodes.
  RANGE: ``N``, ``N-M``, ``N-`` (to the last), ``N:W`` (W objects from N, wrapping round to 0),
  ``all``, ``odd``, ``even``;
- ``TYPE:RANGE.TYPE:RANGE...``: objects counted inside each object of the level before
  (``package:1.core:2`` is the third core of the second package);
- a CPU mask: ``0x3``, or hwloc's comma-separated 32-bit words (``0xff,0xffffffff``);
- a device (pinwise.topology.devices): ``os=mlx5_0``, ``pci=0000:3b:00.0``, the N-th OS or PCI device
  in hwloc's order (``os:0``, ``pci:1-2``), among those of a type or a vendor and device
  (``os[gpu]:0``, ``os[network]:1``, ``pci[10de:]:0``): the object it hangs from, as hwloc-calc
  climbs out of I/O objects.

As CPUs, a location is the allowed PUs of its objects (a mask: the PUs it names, allowed or not,
which the plan then checks); as NUMA nodes (``--membind node:1``), the nodes local to its objects
(hwloc's nodesets; a mask: the nodes whose PUs it touches). Objects a range names that the machine
does not have are left out with a warning, as hwloc-calc leaves them out; a location that ends up
empty is an error. pinwise's own syntax comes first: ``0,2`` is a list of CPUs (hwloc-calc would
read it as a mask of two words) and ``S0:0-3`` a likwid-pin expression.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass

from .cpulist import format_cpulist
from .errors import PinwiseError
from .topology import ObjType, Topology, TopoObject
from .topology.model import local_numa
from .topology.synthetic import hwloc_type

_PREFIXES = {"~": "remove", "x": "intersect", "^": "xor"}
_TYPED = re.compile(r"([A-Za-z][A-Za-z0-9]*)([:=\[])(.*)\Z", re.DOTALL)
_MASK = re.compile(r"0[xX][0-9a-fA-F]+\Z")
_MASK_WORDS = re.compile(r"(?:0[xX]f\.\.\.f,)?(?:0[xX])?[0-9a-fA-F]+(?:,(?:0[xX])?[0-9a-fA-F]+)*\Z")
_RANGE = re.compile(r"([0-9]+)(?:(-)([0-9]*)|(:)([0-9]+))?\Z")


#: hwloc's OS device types as hwloc-calc's ``os[TYPE]`` reads them (prefixes this long), and pinwise's word.
_OS_TYPES = (("block", 4, "storage"), ("network", 3, "network"), ("openfabrics", 7, "openfabrics"), ("dma", 3, "dma"),
             ("gpu", 3, "gpu"), ("coproc", 5, "coproc"), ("co-processor", 6, "coproc"))


class LocationWarning(UserWarning):
    """A location names objects the machine does not have (hwloc-calc leaves them out too)."""


@dataclass(frozen=True)
class _Found:
    """An object as hwloc-calc sees it: its allowed PUs and its NUMA nodes."""

    cpus: frozenset[int]
    nodes: frozenset[int]
    obj: TopoObject


def _words(text: str) -> list[tuple[str, str]]:
    found = []
    for word in text.split():
        mode = "add"
        if word[:1] in _PREFIXES and len(word) > 1 and (word[:1] != "x" or _is_word(word[1:])):
            mode, word = _PREFIXES[word[0]], word[1:]
        found.append((mode, word))
    return found


def _is_word(word: str) -> bool:
    if word in ("all", "root") or _MASK.match(word) or (word.lower().startswith("0x") and _MASK_WORDS.match(word)):
        return True
    typed = _TYPED.match(word)
    return typed is not None and (hwloc_type(typed[1]) is not None or typed[1].lower() in ("hbm", "mcdram"))


def is_location(text: str) -> bool:
    """Whether every word of ``text`` is an hwloc location (and so not a likwid-pin expression)."""
    words = _words(text)
    return bool(words) and all(_is_word(word) for _, word in words)


def cpus_of(text: str, topology: Topology) -> list[int]:
    """The PUs a location names, in hwloc's logical order (the slots of a placement)."""
    cpus = _evaluate(text, topology, 0, "CPU this process may use")
    return [pu for pu in topology.logical_order(allowed_only=False) if pu in cpus]


def nodes_of(text: str, topology: Topology) -> list[int]:
    """The NUMA nodes (OS indices) a location names, as ``hwloc-calc --nodeset-output`` gives them."""
    return sorted(_evaluate(text, topology, 1, "NUMA node"))


def _evaluate(text: str, topology: Topology, which: int, what: str) -> frozenset[int]:
    """The CPUs (``which`` 0) or NUMA nodes (1) of a location; the warnings about objects left
    out are given only when something is left, else they are the error's reason."""
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always", LocationWarning)
        found = _sets(text, topology)[which]
    if not found:
        reason = f" ({said[0].message})" if said else ""
        raise PinwiseError(f"hwloc location {text!r} holds no {what} on {topology.source}{reason}")
    for warning in said:
        warnings.warn(warning.message, LocationWarning, stacklevel=3)
    return found


def _sets(text: str, topology: Topology) -> tuple[frozenset[int], frozenset[int]]:
    words = _words(text)
    if not words:
        raise PinwiseError("empty hwloc location: try core:0-1, pu:even, numa:0, package:1.core:2 or 0x3")
    cpus: frozenset[int] = frozenset()
    nodes: frozenset[int] = frozenset()
    for mode, word in words:
        if not _is_word(word):
            raise PinwiseError(f"hwloc location {text!r}: cannot read {word!r} (try core:0-1, pu:even, numa:0, "
                               "package:1.core:2, 0x3 or all)")
        new_cpus, new_nodes = _word(word, text, topology)
        combine = {"add": frozenset.union, "remove": frozenset.difference, "intersect": frozenset.intersection,
                   "xor": frozenset.symmetric_difference}[mode]
        cpus, nodes = combine(cpus, new_cpus), combine(nodes, new_nodes)
    return cpus, nodes


def _word(word: str, text: str, topology: Topology) -> tuple[frozenset[int], frozenset[int]]:
    present = _present_nodes(topology)
    if word in ("all", "root"):
        return frozenset(topology.allowed), frozenset(present)
    if word.lower().startswith("0x"):
        mask = _mask(word, text, topology)
        outside = mask - topology.allowed
        if outside:
            warnings.warn(f"hwloc location {text!r}: CPU {format_cpulist(sorted(outside))} of {word!r} is not a PU this "
                          f"process may use on {topology.source}, so it is left out", LocationWarning, stacklevel=4)
        touched = {n.os_index for n in topology.numa_nodes if n.os_index in present and n.cpuset & mask}
        return mask & topology.allowed, frozenset(touched)
    if hwloc_type(_TYPED.match(word)[1]) in ("osdev", "pcidev"):
        holders = [_device_holder(device, topology) for device in _devices_at(word, text, topology)]
        return (frozenset().union(*(h.cpuset & topology.allowed for h in holders)),
                frozenset(n.os_index for h in holders for n in local_numa(h) if n.os_index in present))
    found = _objects_at(word, text, topology, None)
    cpus = frozenset().union(*(f.cpus for f in found))
    return cpus, frozenset().union(*(f.nodes for f in found))


def _device_holder(device, topology: Topology) -> TopoObject:
    """The object a device hangs from: what hwloc-calc climbs to from an I/O object."""
    from .topology import walk
    from .topology.devices import devices_by_holder

    holder_of = {id(d): holder for holder, devices in devices_by_holder(topology).items() for d in devices}
    return next((node for node in walk(topology.root) if id(node) == holder_of.get(id(device))), topology.root)


def _devices_at(word: str, text: str, topology: Topology) -> list:
    """The devices an I/O word names, as hwloc-calc reads them: ``os=NAME``, ``pci=BUSID``, or the
    N-th OS device or PCI device in hwloc's order (``os:0``, ``pci:1-2``), among those of a kind
    (``os[gpu]:0``, ``os[network]:1``) or of a vendor and device (``pci[10de:]:0``, ``pci[15b3:101b]:0``)."""
    from .topology.devices import find_device

    typed = _TYPED.match(word)
    kind, separator, rest = hwloc_type(typed[1]), typed[2], typed[3]
    if separator == "=":
        if kind == "osdev" and any(rest in d.names for d in topology.devices):
            return [next(d for d in topology.devices if rest in d.names)]
        if kind == "pcidev" and rest:
            found = find_device(topology, rest)
            if found.busid is not None:
                return [found]
        raise PinwiseError(f"hwloc location {text!r}: no {'OS' if kind == 'osdev' else 'PCI'} device {rest!r} on "
                           f"{topology.source}")
    wanted = None
    if separator == "[":
        inside, closing, rest = rest.partition("]")
        if not closing:
            raise PinwiseError(f"hwloc location {text!r}: no ] in {word!r}")
        wanted = inside.lower()
        rest = rest[1:] if rest.startswith(":") else rest
        if rest and not rest[0].isdigit() and rest[:3] not in ("all", "odd") and rest[:4] != "even":
            raise PinwiseError(f"hwloc location {text!r}: cannot read {word!r}")
    if kind == "osdev":
        entries = [(d, kinds) for d in topology.devices for _, kinds in d.os_devices]
        if wanted is not None:
            kind_word = next((ours for name, shortest, ours in _OS_TYPES
                              if len(wanted) >= shortest and name.startswith(wanted)), None)
            if kind_word is None:
                raise PinwiseError(f"hwloc location {text!r}: {wanted!r} is not an OS device type (block, network, "
                                   "openfabrics, dma, gpu, coproc)")
            entries = [(d, kinds) for d, kinds in entries if kind_word in kinds]
    else:
        entries = [(d, ()) for d in topology.devices if d.busid is not None]
        if wanted is not None:
            vendor, _, product = wanted.partition(":")
            entries = [(d, ()) for d, _ in entries if d.pci_id and (not vendor or d.pci_id.split(":")[0] == vendor)
                       and (not product or d.pci_id.split(":")[1] == product)]
    picked = _indexes(rest or "0", len(entries), word, text, "OS device" if kind == "osdev" else "PCI device")
    return [entries[i][0] for i in picked]


def _mask(word: str, text: str, topology: Topology) -> frozenset[int]:
    """A CPU mask: one hexadecimal number (as taskset writes it) or hwloc's 32-bit words, whose
    infinite prefix ``0xf...f,`` sets every CPU above the words."""
    from .topology.hwloc_xml import parse_cpuset

    if "," not in word:
        value = int(word, 16)
        return frozenset(bit for bit in range(value.bit_length()) if value >> bit & 1)
    words = word.split(",")
    infinite = words[0].lower() == "0xf...f"
    # the infinite part starts at the next 64-bit word boundary (hwloc's bitmaps are of longs)
    above = 32 * (len(words) - 1 + (len(words) - 1) % 2)
    named = parse_cpuset(word, f"hwloc location {text!r}")
    return named | (frozenset(cpu for cpu in topology.root.cpuset if cpu >= above) if infinite else frozenset())


def _present_nodes(topology: Topology) -> set[int]:
    """The NUMA nodes hwloc keeps once disallowed objects are removed: the allowed ones (with or
    without allowed CPUs)."""
    return set(topology.allowed_nodes)


def _candidates(topology: Topology, type_: ObjType, only_hbm: bool) -> list[_Found]:
    present = _present_nodes(topology)
    found = []
    for obj in topology.objects(type_):
        if type_ == ObjType.NUMA and (obj.os_index not in present or (only_hbm and obj.subtype != "MCDRAM")):
            continue
        cpus = frozenset(obj.cpuset & topology.allowed)
        nodes = frozenset(n.os_index for n in local_numa(obj) if n.os_index in present)
        if cpus or (nodes and (type_.is_memory or not obj.cpuset)):
            found.append(_Found(cpus, nodes, obj))
    return found


def _objects_at(word: str, text: str, topology: Topology, inside: _Found | None) -> list[_Found]:
    """The objects a ``TYPE:RANGE[.TYPE:RANGE...]`` word names, inside ``inside`` (None: the machine)."""
    typed = _TYPED.match(word)
    name, separator, rest = typed[1], typed[2], typed[3]
    only_hbm = name.lower() in ("hbm", "mcdram")
    type_ = ObjType.NUMA if only_hbm else hwloc_type(name)
    if not isinstance(type_, ObjType):
        raise PinwiseError(f"hwloc location {text!r}: {name!r} names {type_ or 'no type'}, not objects with CPUs "
                           "or memory that pinwise's machine holds")
    if separator != ":":
        raise PinwiseError(f"hwloc location {text!r}: write {name}:INDEX, e.g. {name}:0 or {name}:0-1")
    index_text, dot, below = rest.partition(".")
    if not topology.objects(type_):
        raise PinwiseError(f"hwloc location {text!r}: {topology.source} has no {type_.label} objects")
    candidates = [f for f in _candidates(topology, type_, only_hbm) if inside is None or _within(f, inside)]
    if type_ == ObjType.GROUP:
        candidates = _group_level(candidates, name, text)
    chosen = [candidates[i] for i in _indexes(index_text, len(candidates), word, text, f"{type_.label} object")]
    if not dot:
        return chosen
    if not _TYPED.match(below):
        raise PinwiseError(f"hwloc location {text!r}: after the dot in {word!r} comes TYPE:INDEX, e.g. core:0")
    return [found for parent in chosen for found in _objects_at(below, text, topology, parent)]


def _group_level(candidates: list[_Found], name: str, text: str) -> list[_Found]:
    """Groups of one level, as hwloc counts them: where the machine has one level of Groups,
    ``group`` (and any ``groupN``) is that level; else ``group0`` is the top level, ``group1`` the
    one below..."""
    def level(found: _Found) -> int:
        return sum(a.type == ObjType.GROUP for a in found.obj.ancestors())

    levels = sorted({level(f) for f in candidates})
    digits = re.search(r"[0-9]+\Z", name)
    if digits is None or len(levels) <= 1:
        if len(levels) > 1:
            raise PinwiseError(f"hwloc location {text!r}: the machine has {len(levels)} levels of Groups: name one, "
                               f"group0 to group{len(levels) - 1} (hwloc-calc refuses {name!r} too)")
        return candidates
    wanted = int(digits[0])
    if wanted >= len(levels):
        raise PinwiseError(f"hwloc location {text!r}: the machine has {len(levels)} level"
                           f"{'s' if len(levels) != 1 else ''} of Groups, so no {name}")
    return [f for f in candidates if level(f) == levels[wanted]]


def _within(found: _Found, inside: _Found) -> bool:
    """hwloc-calc 2.9.0's test for an object inside another: its PUs and its NUMA nodes are among
    the other's, and it has one or the other (a core local to two NUMA nodes is inside neither)."""
    return found.cpus <= inside.cpus and found.nodes <= inside.nodes and bool(found.cpus or found.nodes)


def _indexes(text: str, width: int, word: str, where: str, noun: str) -> list[int]:
    """hwloc_calc_parse_range: the logical indexes a range picks among ``width`` objects."""
    keyword = next((k for k in ("all", "odd", "even") if text.startswith(k)), None)
    if keyword:
        return list(range(1 if keyword == "odd" else 0, width, 1 if keyword == "all" else 2))
    match = _RANGE.match(text)
    if not match:
        raise PinwiseError(f"hwloc location {where!r}: cannot read the range {text!r} of {word!r} (N, N-M, N-, N:W, "
                           "all, odd or even)")
    first = int(match[1])
    if match[4]:  # N:W: W objects from N, wrapping round to the first
        picked, index = [], first
        for _ in range(int(match[5])):
            index = 0 if index >= width else index
            picked.append(index)
            index += 1
    elif match[2]:
        picked = list(range(first, int(match[3]) + 1 if match[3] else width))
    else:
        picked = [first]
    missing = [i for i in picked if i >= width]
    if missing:
        warnings.warn(f"hwloc location {where!r}: there {'is' if width == 1 else 'are'} {width} {noun}"
                      f"{'s' if width != 1 else ''}, so {word!r} leaves out "
                      f"{len(missing)} (as hwloc-calc leaves them out)", LocationWarning, stacklevel=3)
    return [i for i in picked if i < width]
