"""Drawing a topology on a terminal, compactly enough to read 96 PUs on one screen.

One line per object small enough to print inline (at most ``LINE_PUS`` PUs): its chain of
single-child ancestors as a header, then its PUs, with brackets around cache groups and ``+``
between the hardware threads of a core; the NUMA nodes attached to an object follow its name in
brackets, objects without PUs get a line of their own, and so do the devices local to an object
(as lstopo hangs them, with the name a placement gives a GPU or NIC: ``gpu:0``). A legend line gives each type's count and
size; CPU kinds and NUMA distances, where the source has them, get lines of their own.
PUs the process may not use are shown as ``(n)``; placed threads as ``n=t3``.
"""

from __future__ import annotations

from collections.abc import Mapping

from .devices import devices_by_holder, numbered
from .objects import LIVE_SOURCE, TYPE_LABEL, ObjType, TopoObject, format_size, walk

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing, as the launcher does
if TYPE_CHECKING:
    from .model import Topology  # the model draws itself with render(): the import runs one way

LINE_PUS = 16
MAX_LINES = 80


def legend(topology: Topology) -> str:
    parts = []
    for type_ in topology.all_levels:
        if type_ == ObjType.MACHINE:
            continue
        objects = topology.objects(type_)
        sizes = {o.cache_size or o.local_memory for o in objects}  # a size only when all have the same
        size = f" {format_size(sizes.pop())}" if len(sizes) == 1 and None not in sizes else ""
        parts.append(f"{TYPE_LABEL[type_]}{size} x{len(objects)}")
    return "  ".join(parts)


def memory_text(node: TopoObject, allowed_nodes: frozenset[int] | None = None) -> str:
    """The memory attached to an object, e.g. `` [NUMA 0 (16GiB), NUMA 4 MCDRAM (4GiB)]``; a NUMA
    node not in ``allowed_nodes`` in parentheses, as a PU that is not allowed is shown."""

    def chain(memory: TopoObject) -> str:
        below = ", ".join(chain(m) for m in memory.memory_children)
        label = memory.label()
        if allowed_nodes is not None and memory.type == ObjType.NUMA and memory.os_index not in allowed_nodes:
            label = f"({label})"
        return label + (f" > {below}" if below else "")

    return f" [{', '.join(chain(m) for m in node.memory_children)}]" if node.memory_children else ""


def extras(topology: Topology) -> list[str]:
    """Lines for what the tree does not show: CPU kinds and NUMA distances."""
    lines = []
    if topology.cpukinds:
        # hwloc's efficiency is the kind's rank, 0 the least efficient (lstopo --cpukinds), not the
        # forced_efficiency a file ranks them by (fakecpukinds.xml: 10, 7, 0 for ranks 2, 1, 0)
        rank = {value: k for k, value in enumerate(sorted({kind.efficiency for kind in topology.cpukinds}))}
        kinds = [f"{kind.name or f'kind #{rank[kind.efficiency]}'} (efficiency {rank[kind.efficiency]}): "
                 f"PU {topology.cpulist_text(kind.cpuset)}"
                 for kind in reversed(topology.cpukinds)]
        lines.append("  CPU kinds, most performant first: " + "; ".join(kinds))
    for matrix in topology.distances:
        if len(matrix.os_indexes) > 16:
            lines.append(f"  NUMA distances{f' ({matrix.name})' if matrix.name else ''}: {len(matrix.os_indexes)} nodes "
                         "(use --of xml or json to see them)")
            continue
        width = max(len(str(v)) for row in matrix.values for v in row) + 1
        width = max(width, max(len(str(i)) for i in matrix.os_indexes) + 1)
        lines.append(f"  NUMA distances{f' ({matrix.name})' if matrix.name else ''}, by OS index:")
        lines.append("    " + " " * width + "".join(f"{i:>{width}}" for i in matrix.os_indexes))
        for index, row in zip(matrix.os_indexes, matrix.values):
            lines.append(f"    {index:>{width}}" + "".join(f"{v:>{width}}" for v in row))
    return lines


_DOMAIN_TYPES = (ObjType.GROUP, ObjType.PACKAGE, ObjType.DIE, ObjType.NUMA)


def _spans_domains(node: TopoObject) -> bool:
    """Whether two or more packages/NUMA nodes/groups/dies lie below, or memory hangs from an object
    below (a NUMA node under each L3): those get a line each, where their memory is shown."""
    below = [child for child in walk(node) if child is not node]
    return sum(1 for child in below if child.type in _DOMAIN_TYPES) > 1 or any(child.memory_children for child in below)


def device_label(topology: Topology, device) -> str:
    """lstopo's name of a device, with the name a placement gives it (gpu:1, nic:0)."""
    if device.kind in ("gpu", "nic"):
        return f"{device.label()}  = {device.kind}:{numbered(topology.devices, device.kind).index(device)}"
    return device.label()


def render(topology: Topology, threads_on_pu: Mapping[int, list[int]] | None = None) -> str:
    """The picture as plain text. ``threads_on_pu`` maps a PU OS index to the threads placed there."""
    threads_on_pu = threads_on_pu or {}
    allowed = topology.allowed
    whose = " to this process" if topology.source == LIVE_SOURCE else ""  # a file's are what it allows
    lines = [f"Machine: {topology.nb_pus} PUs, {len(allowed)} allowed{whose}"
             f"  [{topology.source}]",
             "  " + legend(topology)]
    if topology.restriction:
        forbidden = topology.cpulist_text(set(topology.root.cpuset) - allowed)
        nodes = {node.os_index for node in topology.numa_nodes} - topology.allowed_nodes
        memory = f", NUMA {topology.cpulist_text(nodes)}" if nodes else ""
        lines.append(f"  not allowed ({topology.restriction}): PU {forbidden}{memory}, shown as (n)")
    lines.extend(extras(topology))

    def pu_text(pu: TopoObject) -> str:
        text = str(pu.os_index)
        if pu.os_index in threads_on_pu:
            text += "=t" + ",t".join(str(t) for t in threads_on_pu[pu.os_index])
        return text if pu.os_index in allowed else f"({text})"

    def inline(node: TopoObject) -> str:
        if node.type == ObjType.PU:
            return pu_text(node)
        parts = [inline(child) for child in node.children]
        if node.type == ObjType.CORE:
            return "+".join(parts)
        if len(parts) == 1:
            return parts[0]
        return "[" + " ".join(parts) + "]"

    body: list[str] = []
    devices_at = devices_by_holder(topology)

    def devices(node: TopoObject, indent: str) -> None:
        for device in devices_at.get(id(node), ()):
            body.append(f"{indent}{device_label(topology, device)}")

    def walk(node: TopoObject, indent: str) -> None:
        chain = [node]
        while len(chain[-1].children) == 1 and chain[-1].type not in (ObjType.CORE, ObjType.PU):
            chain.append(chain[-1].children[0])
        last = chain[-1]
        header = " > ".join(x.label() + memory_text(x, topology.allowed_nodes) for x in chain
                            if x.type != ObjType.MACHINE or x.memory_children) or "Machine"
        if (len(last.cpuset) <= LINE_PUS and not _spans_domains(last)) or last.type in (ObjType.CORE, ObjType.PU):
            content = inline(last) if last.type in (ObjType.CORE, ObjType.PU) else " ".join(inline(c) for c in last.children)
            body.append(f"{indent}{header}: {content}")
            children = []
        else:
            body.append(f"{indent}{header}")
            children = last.children
        for holder in chain:  # the devices right under the line of the object they hang from
            devices(holder, indent + "  ")
        for child in children:
            walk(child, indent + "  ")
        for holder in chain:
            cpuless(holder, indent + "  ")

    def cpuless(node: TopoObject, indent: str) -> None:
        for child in node.cpuless_children:
            body.append(f"{indent}{child.label()}{memory_text(child, topology.allowed_nodes)}: no PUs")
            cpuless(child, indent + "  ")

    walk(topology.root, "")
    if len(body) > MAX_LINES:
        body = body[:MAX_LINES] + [f"... {len(body) - MAX_LINES} more lines (use --of xml or --of json for all of it)"]
    return "\n".join(lines + body)
