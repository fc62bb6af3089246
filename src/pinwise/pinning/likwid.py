"""likwid-pin's CPU expressions, evaluated on a pinwise Topology.

Affinity domains (only CPUs this process may use count): ``N`` the node, ``S<i>`` sockets,
``D<i>`` dies (sockets when the machine has no dies), ``C<i>`` last-level caches, ``M<i>`` NUMA
memory domains. A domain's CPU list is in topology order (hardware threads of a core together);
its *logical* numbering puts physical cores first, then the second hardware threads, and so on.

Forms, joined with ``@``:
  ``0,2,4-6``             physical CPU numbers;
  ``S0:0-3``, ``L:S0:0-3``, ``N:0-3``, ``L:0-3``   logical indices inside a domain (``N`` if none);
  ``C0``                 the whole domain, in its own (topology) order, as likwid-pin gives it:
                         hardware threads of a core together (``C0:``, an empty index list, is
                         refused, as likwid-pin refuses it);
  A range may run downwards: ``S0:3-1`` is logical 3, 2, 1, as in likwid-pin.
  ``E:N:8`` / ``E:N:8:1:2``   8 CPUs from the domain's list, in chunks of 1 with a stride of 2
                         (starting again at the list's start past its end, as likwid-pin does);
  ``S:scatter``, ``M:scatter:4``   physical-cores-first lists of every socket (NUMA domain), dealt
                         round-robin; ``S:balanced:4``, ``S:cbalanced:4``: likwid 5.2's even
                         shares of every domain (see :func:`_method`).
(likwid-pin(1), "CPU EXPRESSION"; likwid 5.2's src/cpustring.c.) A test compares every form with
the real likwid-pin on machines described to it (tests/likwid_fake.py).
"""

from __future__ import annotations

import re

from ..cpulist import format_cpulist
from ..errors import PinwiseError
from ..topology import ObjType, Topology, TopoObject

_DOMAIN = re.compile(r"^([NSDCM])(\d*)$")


def _domain_objects(topology: Topology, letter: str) -> list[TopoObject]:
    if letter == "N":
        return [topology.root]
    if letter == "S":
        return topology.objects(ObjType.PACKAGE) or [topology.root]
    if letter == "D":
        return topology.objects(ObjType.DIE) or topology.objects(ObjType.PACKAGE) or [topology.root]
    if letter == "M":
        return topology.objects(ObjType.NUMA) or [topology.root]
    for cache in (ObjType.L3, ObjType.L2, ObjType.L1):  # C: the last-level cache; none without caches
        if topology.objects(cache):
            return topology.objects(cache)
    return []


def domains(topology: Topology) -> dict[str, list[int]]:
    """Every affinity domain's CPU list, like ``likwid-pin -p``; empty ones left out. A domain of
    the CPU tree lists its CPUs in topology order (a core's hardware threads together); a NUMA
    domain in ascending order, as likwid reads a node's CPUs from its topology file or the
    kernel's node cpulist."""
    found: dict[str, list[int]] = {}
    for letter in "NSDCM":
        index = 0
        for obj in _domain_objects(topology, letter):
            cpus = [pu for pu in topology.logical_order() if pu in obj.cpuset]
            if cpus:
                found[letter if letter == "N" else f"{letter}{index}"] = sorted(cpus) if letter == "M" else cpus
                index += 1
    return found


def physical_first(topology: Topology, cpus: list[int]) -> list[int]:
    """Reorder a domain's CPUs: the first hardware thread of every core, then the second, ..."""
    def rank(cpu: int) -> tuple[int, int]:
        pu = topology.pu(cpu)
        siblings = [c.os_index for c in pu.parent.children] if pu.parent is not None and pu.parent.type == ObjType.CORE else [cpu]
        return (siblings.index(cpu), cpus.index(cpu))
    return sorted(cpus, key=rank)


def _domain(topology: Topology, name: str, expression: str) -> list[int]:
    table = domains(topology)
    if name not in table:
        letter = name[:1]
        known = [d for d in table if d.startswith(letter)] if letter in "NSDCM" else []
        hint = f"this machine has {', '.join(known)}" if known else "domains are N, S<i>, D<i>, C<i>, M<i>"
        raise PinwiseError(f"likwid expression {expression!r}: affinity domain {name!r} does not exist ({hint}); "
                           "likwid-pin leaves that part out and pins to the rest, pinwise refuses")
    return table[name]


_ITEM = re.compile(r"([0-9]+)(?:-([0-9]+))?\Z")
#: The longest range one item may span: more than any machine's CPUs, less than a memory blow-up.
MAX_RANGE = 1 << 16


def index_list(text: str, what: str) -> list[int]:
    """likwid-pin's lists: numbers and ranges, comma-separated; a range may run downwards (3-1)."""
    values: list[int] = []
    for item in text.split(","):
        match = _ITEM.match(item.strip())
        if not match:
            raise PinwiseError(f"malformed {what} {text!r}: {item!r} is not a number or a range like 0-3 or 3-0")
        first = int(match[1])
        last = int(match[2]) if match[2] is not None else first
        if abs(last - first) > MAX_RANGE:
            raise PinwiseError(f"malformed {what} {text!r}: the range {item!r} is longer than any machine")
        step = 1 if last >= first else -1
        values.extend(range(first, last + step, step))
    return values


def _logical(topology: Topology, domain_name: str, indices: str, expression: str) -> list[int]:
    if not indices:  # the bare domain: likwid-pin gives its list as it stands, not physical cores first
        return list(_domain(topology, domain_name, expression))
    cpus = physical_first(topology, _domain(topology, domain_name, expression))
    selected = []
    for index in index_list(indices, f"index list of {expression!r}"):
        if index >= len(cpus):
            raise PinwiseError(
                f"likwid expression {expression!r}: index {index} is out of range, domain {domain_name} "
                f"has {len(cpus)} CPUs (0-{len(cpus) - 1}); likwid-pin 5.2 refuses it too (\"Failed to parse cpulist\")"
            )
        selected.append(cpus[index])
    return selected


def _select(topology: Topology, fields: list[str], expression: str) -> list[int]:
    """E:<domain>[:<count>[:<chunk>:<stride>[:<offset>]]]: ``count`` CPUs of the domain's list,
    ``chunk`` at a time every ``stride``, starting again at the list's start past its end, at most
    as many as the machine has hardware threads (likwid's cpustr_to_cpulist_expression)."""
    if len(fields) not in (2, 3, 5, 6):
        raise PinwiseError(f"likwid expression {expression!r}: use E:<domain>:<count> or "
                           "E:<domain>:<count>:<chunk>:<stride>[:<offset>]")
    try:
        numbers = [int(f) for f in fields[2:]]
    except ValueError:
        raise PinwiseError(f"likwid expression {expression!r}: count, chunk and stride must be whole numbers") from None
    cpus = _domain(topology, fields[1], expression)
    # without a count, likwid takes as many as the machine's hardware threads this process may use
    count, chunk, stride, offset = (*numbers, *(len(topology.allowed), 1, 1, 0)[len(numbers):])
    if count < 1 or chunk < 1 or min(numbers, default=0) < 0:  # a stride of 0 repeats the first chunk
        raise PinwiseError(f"likwid expression {expression!r}: need a count and a chunk of at least 1")
    selected: list[int] = []
    start = 0
    wanted = min(count, topology.nb_pus)  # likwid's list is as long as the machine's hardware threads
    for _ in range(count):
        for j in range(chunk):
            if start + j >= len(cpus):
                break
            if offset + start + j >= len(cpus):
                raise PinwiseError(f"likwid expression {expression!r}: the offset {offset} runs past domain "
                                   f"{fields[1]}'s {len(cpus)} CPUs (likwid-pin reads beyond its list there)")
            selected.append(cpus[offset + start + j])
            if len(selected) == wanted:
                return selected
        start += stride
        if offset + start >= len(cpus):
            start = 0
    raise PinwiseError(f"likwid expression {expression!r}: {count} chunks of {chunk} every {stride} do not give "
                       f"{count} CPUs from domain {fields[1]} ({len(cpus)} CPUs); likwid-pin refuses it too")


#: likwid 5.2's ways of spreading threads over every domain of a kind (cpustr_to_cpulist_method).
METHODS = ("scatter", "balanced", "cbalanced")


def _method(topology: Topology, fields: list[str], expression: str) -> list[int]:
    """<domains>:scatter|balanced|cbalanced[:<count>] over the domains whose name contains
    <domains> (``S``: every socket, ``M``: every NUMA domain, ``N``, ``S1``...), as likwid 5.2's
    cpustr_to_cpulist_method spreads them:

    - scatter: the domains' physical-cores-first lists dealt round-robin;
    - balanced: ``count`` split evenly, the first domains one more, each domain's share from the
      start of its list (hardware threads of a core together);
    - cbalanced: the same, from the physical-cores-first lists while each domain's share fits its
      cores; beyond that the share's overflow takes whole cores (all their hardware threads)
      first, then physical cores.

    Without a count, as many CPUs as the domains hold (scatter: at most the machine's hardware
    threads, as likwid's list is that long)."""
    if len(fields) not in (2, 3):
        raise PinwiseError(f"likwid expression {expression!r}: write {fields[0]}:{fields[1]} or "
                           f"{fields[0]}:{fields[1]}:<count>")
    name, method = fields[0], fields[1]
    given = None
    if len(fields) == 3:
        if not fields[2].isdigit() or int(fields[2]) < 1:
            raise PinwiseError(f"likwid expression {expression!r}: the count {fields[2]!r} must be a whole number of "
                               "at least 1")
        given = int(fields[2])
    lists = [cpus for domain, cpus in domains(topology).items() if name in domain]  # likwid matches a substring
    if not lists:
        raise PinwiseError(f"likwid expression {expression!r}: no {name} domain on this machine")
    longest = max(len(cpus) for cpus in lists)
    if any(len(cpus) != longest for cpus in lists) and (method != "balanced" or given is None):
        raise PinwiseError(f"likwid expression {expression!r}: the {name} domains hold different numbers of CPUs "
                           f"({', '.join(str(len(c)) for c in lists)}), where likwid-pin reads past the shorter "
                           "lists: give the CPUs another way")
    physical = [physical_first(topology, cpus) for cpus in lists]
    if method == "scatter":
        length = given or topology.nb_pus
        dealt = [cpus[depth] for depth in range(longest) for cpus in physical]
        return dealt[:length]
    length = given or longest * len(lists)
    per_domain, remain = divmod(length, len(lists))
    out: list[int] = []
    if method == "balanced":
        for cpus in lists:
            share = per_domain + (1 if remain > 0 else 0)
            remain -= 1 if remain > 0 else 0
            if share > len(cpus):
                raise PinwiseError(f"likwid expression {expression!r}: {share} CPUs from a domain of {len(cpus)}, "
                                   "where likwid-pin reads past the domain's list")
            out.extend(cpus[:share])
        return out[:length]
    threads_per_core = max((len(core.children) for core in topology.objects(ObjType.CORE)), default=1)
    cores_per_domain = (longest * len(lists) // threads_per_core) // len(lists)
    if per_domain + remain <= cores_per_domain:
        for cpus in physical:
            share = per_domain + (1 if remain > 0 else 0)
            remain -= 1 if remain > 0 else 0
            out.extend(cpus[:share])
        return out[:length]
    for cpus, ordered in zip(lists, physical):
        # the domain's share as likwid computes it, with what is left of the remainder
        with_ht = (per_domain + remain - cores_per_domain) * threads_per_core
        left = list(ordered)
        for cpu in cpus[:max(with_ht, 0)]:
            out.append(cpu)
            left[left.index(cpu)] = -1
        wanted, j = per_domain + remain - with_ht, 0
        while j < wanted:
            if j >= len(left):
                raise PinwiseError(f"likwid expression {expression!r}: likwid-pin reads past the domain's list for "
                                   "this count: give fewer CPUs")
            if left[j] >= 0:
                remain -= 1 if remain > 0 else 0
                out.append(left[j])
            else:
                wanted += 1
            j += 1
    return out


def evaluate(expression: str, topology: Topology) -> list[int]:
    """The CPU list a likwid-pin expression selects, in order."""
    text = expression.strip()
    if not text:
        raise PinwiseError("empty likwid expression: try N:0-3, S0:0-3, E:N:4:1:2 or S:scatter")
    cpus: list[int] = []
    for part in text.split("@"):
        part = part.strip()
        fields = part.split(":")
        if len(fields) >= 2 and fields[-1] == "" and fields[0] in ("L", *domains(topology)):
            whole = ":".join(fields[:-1]).removeprefix("L:") or "N"
            raise PinwiseError(f"likwid expression {expression!r}: no index after the colon in {part!r} (likwid-pin "
                               f"refuses it too): write {whole} for the whole domain, or {whole}:0-1")
        if re.fullmatch(r"[0-9,\-]+", part):
            listed = index_list(part, "CPU list")
            missing = sorted({cpu for cpu in listed if not topology.has_pu(cpu)})
            if missing:
                kept = [cpu for cpu in listed if topology.has_pu(cpu)]
                likwid = (f"likwid-pin would drop {'them' if len(missing) > 1 else 'it'} and pin to "
                          f"{','.join(map(str, kept))} only" if kept else "likwid-pin would fail")
                raise PinwiseError(f"likwid expression {expression!r}: CPU {format_cpulist(missing)} does not exist on "
                                   f"{topology.source} (its PUs are {format_cpulist(sorted(topology.root.cpuset))}); "
                                   f"{likwid}, pinwise refuses: list only CPUs that exist")
            cpus.extend(listed)
            continue
        head = fields[0]
        if head == "E":
            cpus.extend(_select(topology, fields, expression))
        elif head == "L":
            if len(fields) == 2:
                cpus.extend(_logical(topology, "N", fields[1], expression))
            elif len(fields) == 3:
                cpus.extend(_logical(topology, fields[1], fields[2], expression))
            else:
                raise PinwiseError(f"likwid expression {expression!r}: use L:<indices> or L:<domain>:<indices>")
        elif len(fields) >= 2 and fields[1] in METHODS:
            cpus.extend(_method(topology, fields, expression))
        elif _DOMAIN.match(head) and len(fields) <= 2:
            if head != "N" and not head[1:]:
                raise PinwiseError(f"likwid expression {expression!r}: domain {head!r} needs a number, e.g. {head}0")
            cpus.extend(_logical(topology, head, fields[1] if len(fields) == 2 else "", expression))
        else:
            raise PinwiseError(
                f"cannot read likwid expression {expression!r} at {part!r}: try 0,2,4-6, N:0-3, S0:0-3, "
                "C0, M0, E:N:8:1:2 or S:scatter, joined with @"
            )
    return cpus
