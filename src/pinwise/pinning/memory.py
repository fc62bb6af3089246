"""Memory placement: where the pages of a pinned program's threads come from.

A :class:`MemoryPolicy` is one of Linux's policies (set_mempolicy(2)) applied to every thread by
the preload library, or a binding of each thread to the NUMA node of the CPU it runs on
(``local-to-thread``), which no process-wide tool can express. The kernel's own report of each
thread's policy (``/proc/self/task/TID/numa_maps``, second word of the first line) is what the
library logs and ``pinwise run --verify`` compares with what was asked; the words are the kernel's:

============  ========================  =========================
pinwise       numactl                   numa_maps
============  ========================  =========================
--membind 0   --membind=0               bind:0
--interleave  --interleave=0,1          interleave:0-1
--preferred   --preferred=0             prefer:0
local         --localalloc              local
============  ========================  =========================
"""

from __future__ import annotations

from ..cpulist import format_cpulist, parse_cpulist
from ..errors import PinwiseError
from ..frozen import Frozen

#: What a user may ask for, as ``pinwise run`` spells it.
MODES = ("bind", "interleave", "preferred", "local", "local-to-thread")
_NUMA_MAPS_WORD = {"bind": "bind", "interleave": "interleave", "preferred": "prefer"}


def _runs(nodes) -> list[tuple[int, int]]:
    runs: list[tuple[int, int]] = []
    for node in sorted(nodes):
        if runs and node == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], node)
        else:
            runs.append((node, node))
    return runs


def kernel_list(nodes) -> str:
    """A node list as the kernel writes it in numa_maps: every run of two or more as a range (0-1,3)."""
    return ",".join(f"{a}-{b}" if b > a else str(a) for a, b in _runs(nodes))


def hwloc_locations(nodes) -> str:
    """hwloc-bind's locations for these NUMA nodes (it takes ranges, not lists: node:0-1 node:3)."""
    return " ".join(f"node:{a}-{b}" if b > a else f"node:{a}" for a, b in _runs(nodes))


def parse_nodes(text: str, topology, what: str = "NUMA nodes") -> list[int]:
    """NUMA nodes (OS indices) as numactl writes them (``0``, ``0-2,5``, ``all``, ``+0`` relative
    to the nodes this process may use, ``!1`` every node but these, ``!+0``) or as hwloc does
    (``numa:1``, ``node:0-1``, ``package:0``: the nodes local to those objects; see
    :mod:`pinwise.locations`), checked against ``topology``'s nodes."""
    from .. import locations

    numa = sorted(n.os_index for n in topology.numa_nodes)
    allowed = sorted(topology.allowed_nodes)
    stripped = text.strip()
    if not stripped:
        raise PinwiseError(f"empty {what}: give node numbers such as 0 or 0-1, all, or a location such as numa:1")
    if locations.is_location(stripped) and stripped != "all":
        return locations.nodes_of(stripped, topology)
    invert = stripped.startswith("!")
    body = stripped[1:].strip() if invert else stripped
    relative = body.startswith("+")
    body = body[1:] if relative else body
    if body == "all":
        nodes = list(allowed)
    else:
        nodes = parse_cpulist(body, what)
        if relative:  # numactl: the k-th of the nodes this process may use
            beyond = [k for k in nodes if k >= len(allowed)]
            if beyond:
                raise PinwiseError(f"{what} {text!r}: relative node +{beyond[0]} is beyond the {len(allowed)} "
                                   f"node{'s' if len(allowed) != 1 else ''} this process may use "
                                   f"({format_cpulist(allowed)})")
            nodes = [allowed[k] for k in nodes]
    missing = [n for n in nodes if n not in numa]
    if missing:
        raise PinwiseError(f"NUMA node {format_cpulist(missing)} does not exist on {topology.source} "
                           f"(its nodes: {format_cpulist(numa)})")
    if invert:
        nodes = [n for n in allowed if n not in nodes]
        if not nodes:
            raise PinwiseError(f"{what} {text!r} leaves no NUMA node (this process may use {format_cpulist(allowed)})")
    return nodes


class MemoryPolicy(Frozen):
    """A memory policy for every thread of a program. ``nodes``: the NUMA nodes (OS indices) of
    bind/interleave/preferred; ``node_cpus``: for local-to-thread, each node with its CPUs."""

    mode: str
    nodes: tuple[int, ...] = ()
    node_cpus: tuple[tuple[int, tuple[int, ...]], ...] = ()

    def __post_init__(self):
        if self.mode not in MODES:
            raise PinwiseError(f"unknown memory policy {self.mode!r}: choose one of {', '.join(MODES)}")
        if self.mode in ("bind", "interleave", "preferred") and not self.nodes:
            raise PinwiseError(f"memory policy {self.mode} needs NUMA nodes")
        if self.mode == "preferred" and len(self.nodes) != 1:
            raise PinwiseError(f"--preferred takes one NUMA node, not {format_cpulist(self.nodes)}")

    @classmethod
    def for_machine(cls, mode: str, nodes_text: str | None, topology) -> MemoryPolicy:
        """The policy a user asked for, its nodes checked against ``topology``'s NUMA nodes."""
        numa = {node.os_index: node for node in topology.numa_nodes}
        if mode == "local-to-thread":
            return cls(mode, node_cpus=tuple((index, tuple(sorted(node.cpuset & topology.allowed)))
                                             for index, node in sorted(numa.items()) if node.cpuset & topology.allowed))
        if mode == "local":
            return cls(mode)
        nodes = parse_nodes(nodes_text or "", topology, f"NUMA nodes of --{'membind' if mode == 'bind' else mode}")
        return cls(mode, tuple(sorted(set(nodes))))

    def environment(self) -> dict[str, str]:
        """PINWISE_MEMPOLICY for the preload library."""
        if self.mode == "local-to-thread":
            return {"PINWISE_MEMPOLICY": "per-thread:" + "/".join(f"{node}={format_cpulist(cpus)}"
                                                                  for node, cpus in self.node_cpus)}
        if self.mode == "local":
            return {"PINWISE_MEMPOLICY": "local"}
        return {"PINWISE_MEMPOLICY": f"{self.mode}:{kernel_list(self.nodes)}"}

    def expected(self, cpu: int | None) -> str:
        """What numa_maps reports for a thread that runs on ``cpu`` under this policy."""
        if self.mode == "local":
            return "local"
        if self.mode == "local-to-thread":
            node = next((n for n, cpus in self.node_cpus if cpu in cpus), None)
            return f"bind:{node}" if node is not None else "default"
        return f"{_NUMA_MAPS_WORD[self.mode]}:{kernel_list(self.nodes)}"

    def describe(self) -> str:
        if self.mode == "local-to-thread":
            return "each thread's memory bound to the NUMA node of its CPU"
        if self.mode == "local":
            return "memory from the node of the CPU that touches it (local allocation)"
        return f"memory policy {self.mode} on NUMA node {kernel_list(self.nodes)}"

    def tool_lines(self, plan_nodes: frozenset[int] | None = None, likwid_line: str | None = None) -> list[tuple[str, str]]:
        """The same policy in numactl's, hwloc-bind's and likwid-pin's words, or why not.
        ``plan_nodes``: the NUMA nodes of the plan's CPUs (likwid-pin -i interleaves over those);
        ``likwid_line``: the plan's likwid-pin command, which gets the -i."""
        nodes, locations = kernel_list(self.nodes), hwloc_locations(self.nodes)
        if self.mode == "local-to-thread":
            why = "(withheld: a node per thread is beyond a process-wide tool; use the pinwise line)"
            return [("numactl", why), ("hwloc-bind", why), ("likwid-pin", why)]
        numactl = {"bind": f"numactl --membind={nodes}", "interleave": f"numactl --interleave={nodes}",
                   "preferred": f"numactl --preferred={nodes}", "local": "numactl --localalloc"}[self.mode]
        hwloc = {"bind": f"hwloc-bind --strict -p --membind {locations}",
                 "interleave": f"hwloc-bind --strict -p --mempolicy interleave --membind {locations}",
                 "preferred": "(withheld: hwloc-bind has no single preferred node; without --strict it asks for "
                              "preferred-many, which numa_maps shows as 'prefer (many)')",
                 "local": "hwloc-bind --mempolicy firsttouch --membind machine:0"}[self.mode]
        if (self.mode == "interleave" and plan_nodes is not None and likwid_line and likwid_line.startswith("likwid-pin ")
                and set(self.nodes) == set(plan_nodes)):
            likwid = "likwid-pin -i " + likwid_line[len("likwid-pin "):]
        else:
            likwid = ("(withheld: likwid-pin's only memory option, -i, interleaves over the NUMA nodes of its CPU "
                      "list" + (f" ({format_cpulist(sorted(plan_nodes))})" if plan_nodes else "") + ")")
        return [("numactl", numactl), ("hwloc-bind", hwloc), ("likwid-pin", likwid)]
