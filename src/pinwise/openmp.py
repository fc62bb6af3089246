"""OpenMP places (OMP_PLACES) on a pinwise Topology, as libgomp builds them.

Abstract names, case-insensitive, with an optional count of places (``cores(4)``): ``threads`` (a
place per PU), ``cores``, ``sockets``, ``ll_caches`` (a place per last-level cache) and
``numa_domains``. Like libgomp, places hold only the PUs this process may use and come in the order
of their lowest PU (NUMA domains in node order), a core's PUs together; ``threads`` lists each
core's PUs one after the other. Explicit lists as the OpenMP specification writes them and libgomp
reads them: places in braces (``{0,8}``, ``{0:4}`` four PUs from 0, ``{0:4:2}`` every other one,
``{0:4,!2}`` without PU 2) or bare numbers (``0,8``), each followed by an optional interval
(``{0:4}:4:8``: four places of four PUs, each 8 PUs after the one before), and ``!{...}`` to remove
an earlier place. PUs this process may not use leave their places; places left empty
go.

libgomp 12's ``ll_caches`` makes only the first cache's place (it reads the first CPU's
shared_cpu_list again for every other CPU); pinwise makes one place per last-level cache, as the
OpenMP specification says, and a test shows the two agree on a machine with one such cache.
"""

from __future__ import annotations

import re

from .errors import PinwiseError
from .topology import ObjType, Topology, TopoObject

ABSTRACT = ("threads", "cores", "sockets", "ll_caches", "numa_domains")
_ABSTRACT = re.compile(r"\s*(" + "|".join(ABSTRACT) + r")\s*(?:\(\s*([0-9]+)\s*\))?\s*\Z", re.IGNORECASE)
_NUMBER = re.compile(r"\s*(-?[0-9]+)\s*")
#: libgomp's bound on an interval's length and on a place list's size.
MAX_PLACES = 65536


def is_places(text: str) -> bool:
    """Whether ``text`` reads as an OMP_PLACES value rather than a CPU list or likwid expression:
    an abstract name, or a list with a place in braces."""
    return bool(_ABSTRACT.match(text)) or "{" in text


def places(text: str, topology: Topology) -> list[tuple[int, ...]]:
    """The places OMP_PLACES=``text`` gives on ``topology``, each a tuple of PU OS indices."""
    abstract = _ABSTRACT.match(text)
    if abstract:
        if abstract[2] is not None and int(abstract[2]) == 0:  # libgomp refuses it too
            raise PinwiseError(f"OMP_PLACES {text!r}: a count of 0 places (give at least 1, e.g. "
                               f"{abstract[1].lower()}(2), or the name alone for all of them)")
        found = _abstract(abstract[1].lower(), topology)
        return found[:int(abstract[2])] if abstract[2] is not None else found
    listed = _Parser(text).place_list()
    allowed = topology.allowed
    kept = [tuple(sorted(cpu for cpu in place if cpu in allowed)) for place in listed]
    kept = [place for place in kept if place]
    if not kept:
        raise PinwiseError(f"OMP_PLACES {text!r}: no place holds a CPU this process may use on {topology.source} "
                           f"({topology.cpulist_text(allowed)})")
    return kept


def _abstract(name: str, topology: Topology) -> list[tuple[int, ...]]:
    allowed = topology.allowed
    if name == "numa_domains":
        nodes = sorted(topology.numa_nodes, key=lambda n: n.os_index)
        found = [tuple(sorted(n.cpuset & allowed)) for n in nodes]
        return [place for place in found if place]

    def group(pu: TopoObject) -> TopoObject:
        if name in ("threads", "cores"):
            return pu.enclosing(ObjType.CORE) or pu
        if name == "sockets":
            return pu.enclosing(ObjType.PACKAGE) or topology.root
        caches = [a for a in pu.ancestors() if a.is_cache]  # ll_caches: the outermost cache
        return caches[-1] if caches else pu

    found: list[tuple[int, ...]] = []
    used: set[int] = set()
    for cpu in sorted(allowed):
        if cpu in used:
            continue
        members = tuple(sorted(group(topology.pu(cpu)).cpuset & allowed))
        used.update(members)
        found.extend([(member,) for member in members] if name == "threads" else [members])
    return found


class _Parser:
    """OMP_PLACES as libgomp's parse_places_var reads a list: places (in braces or bare numbers)
    with optional intervals, and ``!`` removals."""

    def __init__(self, text: str):
        self.text, self.at = text, 0

    def fail(self, why: str):
        raise PinwiseError(f"OMP_PLACES {self.text!r}: {why} (e.g. cores, {{0:4}}:4:8, {{0,8}},{{1,9}})")

    def peek(self) -> str:
        while self.at < len(self.text) and self.text[self.at].isspace():
            self.at += 1
        return self.text[self.at] if self.at < len(self.text) else ""

    def number(self, what: str, signed: bool = False) -> int:
        self.peek()
        match = _NUMBER.match(self.text, self.at)
        if not match or (match[1].startswith("-") and not signed):
            self.fail(f"expected {what} at {self.text[self.at:self.at + 10]!r}")
        self.at = match.end()
        return int(match[1])

    def place_list(self) -> list[frozenset[int]]:
        found: list[frozenset[int]] = []
        while True:
            negate = self.peek() == "!"
            if negate:
                self.at += 1
            place = self.place()
            length, stride = 1, 1
            if self.peek() == ":":
                self.at += 1
                length = self.number("the number of places")
                if not 0 < length < MAX_PLACES:
                    self.fail(f"an interval of {length} places")
                if self.peek() == ":":
                    self.at += 1
                    stride = self.number("the stride", signed=True)
            if negate:
                if length != 1:
                    self.fail("a removed place takes no interval")
                if place not in found:
                    self.fail(f"{{{','.join(map(str, sorted(place)))}}} is removed but not listed before")
                found.remove(place)
            else:
                for k in range(length):
                    moved = frozenset(cpu + k * stride for cpu in place)
                    if min(moved) < 0:
                        self.fail("an interval runs below CPU 0")
                    found.append(moved)
            if len(found) > MAX_PLACES:
                self.fail(f"more than {MAX_PLACES} places")
            following = self.peek()
            if not following:
                return found
            if following != ",":
                self.fail(f"unexpected {following!r}")
            self.at += 1

    def place(self) -> frozenset[int]:
        if self.peek() != "{":
            return frozenset([self.number("a CPU number or a place in braces")])
        self.at += 1
        cpus: set[int] = set()
        removed: list[int] = []
        while True:
            negate = self.peek() == "!"
            if negate:
                self.at += 1
            first, length, stride = self.number("a CPU number"), 1, 1
            if self.peek() == ":":
                self.at += 1
                length = self.number("the number of CPUs")
                if self.peek() == ":":
                    self.at += 1
                    stride = self.number("the stride", signed=True)
            run = [first + k * stride for k in range(length)]
            if not 0 < length < MAX_PLACES or min(run) < 0:
                self.fail(f"the CPUs {first}:{length}:{stride} run outside 0 to {MAX_PLACES - 1}")
            if negate:
                removed.extend(run)
            else:
                cpus.update(run)
            following = self.peek()
            self.at += 1
            if following == "}":
                break
            if following != ",":
                self.fail(f"expected , or }} in a place, not {following!r}")
        if any(cpu not in cpus for cpu in removed):
            self.fail("a place removes a CPU it does not hold")
        place = frozenset(cpus) - frozenset(removed)
        if not place:
            self.fail("a place holds no CPU")
        return place
