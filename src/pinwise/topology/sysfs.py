"""The live Linux machine, read from sysfs, restricted to the CPUs this process may use.

Sources (all under ``/sys/devices/system``): ``cpu/online`` (offline CPUs are left out, as hwloc
does), ``cpu/cpuN/topology/`` (package, die, core siblings), ``cpu/cpuN/cache/indexM/`` (data and
unified caches and the CPUs sharing each), ``node/nodeN/cpulist`` (NUMA nodes). What the process may
use is ``sched_getaffinity`` intersected with the cgroup's cpuset (v2 ``cpuset.cpus.effective``,
v1 ``cpuset.effective_cpus``); both are reported so a user sees why a CPU is withheld. PCI devices
(``/sys/bus/pci/devices``: class, ``local_cpulist``) with the OS devices on them are read as hwloc
keeps them (pinwise.topology.devices).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ..cpulist import parse_cpulist
from ..errors import PinwiseError
from .devices import Device, important_pci_class
from .model import CpuKind, ObjectSpec, ObjType, Topology, build_topology
from .objects import LIVE_SOURCE


_CACHE_TYPES = {1: "l1", 2: "l2", 3: "l3"}


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _size(text: str | None) -> int | None:
    if not text:
        return None
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    if text[-1].upper() in units:
        return int(text[:-1]) * units[text[-1].upper()]
    return int(text)


def cgroup_cpuset(proc_root: Path = Path("/proc"), cgroup_root: Path = Path("/sys/fs/cgroup")) -> list[int] | None:
    """CPUs the process's cgroup allows, or None when no cpuset controller restricts it."""
    lines = _read(proc_root / "self" / "cgroup") or ""
    for line in lines.splitlines():
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if hierarchy == "0" and controllers == "":  # cgroup v2
            text = _read(cgroup_root / path.lstrip("/") / "cpuset.cpus.effective")
        elif "cpuset" in controllers.split(","):  # cgroup v1
            text = _read(cgroup_root / "cpuset" / path.lstrip("/") / "cpuset.effective_cpus")
            text = text if text is not None else _read(cgroup_root / "cpuset" / path.lstrip("/") / "cpuset.cpus")
        else:
            continue
        if text:
            return parse_cpulist(text, "cgroup cpuset")
    return None


def read_sysfs(root: Path | str = "/sys/devices/system", affinity: set[int] | None = None,
               cgroup_cpus: list[int] | None = None) -> Topology:
    """Read the machine. ``affinity`` and ``cgroup_cpus`` default to the calling process's own."""
    root = Path(root)
    cpu_dir = root / "cpu"
    online_text = _read(cpu_dir / "online")
    if online_text is None:
        raise PinwiseError(f"cannot read {cpu_dir / 'online'}: is this Linux with sysfs mounted? "
                           "Use --topology with an XML file, a preset or a synthetic string instead")
    online = parse_cpulist(online_text, "online CPUs")
    specs: list[ObjectSpec] = []
    for cpu in online:
        topo_dir = cpu_dir / f"cpu{cpu}" / "topology"
        specs.append(ObjectSpec(ObjType.PU, frozenset([cpu]), cpu))
        package_id = _read(topo_dir / "physical_package_id")
        for type_, names in (("package", ("package_cpus_list", "core_siblings_list")),
                             ("die", ("die_cpus_list",)),
                             ("core", ("core_cpus_list", "thread_siblings_list"))):
            for name in names:
                text = _read(topo_dir / name)
                if text:
                    cpus = frozenset(parse_cpulist(text)) & frozenset(online)
                    os_index = None
                    if type_ == ObjType.PACKAGE and package_id not in (None, "-1"):
                        os_index = int(package_id)
                    elif type_ == ObjType.CORE:
                        core_id = _read(topo_dir / "core_id")
                        os_index = int(core_id) if core_id and core_id.lstrip("-").isdigit() and int(core_id) >= 0 else None
                    elif type_ == ObjType.DIE:
                        die_id = _read(topo_dir / "die_id")
                        os_index = int(die_id) if die_id and die_id.isdigit() else None
                    specs.append(ObjectSpec(type_, cpus, os_index))
                    break
        cache_dir = cpu_dir / f"cpu{cpu}" / "cache"
        if cache_dir.is_dir():
            for index in sorted(cache_dir.glob("index*")):
                if _read(index / "type") == "Instruction":
                    continue
                level = _read(index / "level")
                shared = _read(index / "shared_cpu_list")
                if not level or not level.isdigit() or int(level) not in _CACHE_TYPES or not shared:
                    continue
                cpus = frozenset(parse_cpulist(shared)) & frozenset(online)
                specs.append(ObjectSpec(_CACHE_TYPES[int(level)], cpus, None, _size(_read(index / "size"))))
    node_dir = root / "node"
    for node in sorted(node_dir.glob("node[0-9]*"), key=lambda n: int(n.name[4:])) if node_dir.is_dir() else []:
        text = _read(node / "cpulist")
        cpus = frozenset(parse_cpulist(text)) & frozenset(online) if text else frozenset()
        # a node without CPUs (HBM, CXL memory) hangs off the machine, as hwloc puts it without HMAT
        specs.append(ObjectSpec(ObjType.NUMA, cpus, int(node.name[4:]), local_memory=_node_memory(node)))
    if not any(s.type == ObjType.NUMA for s in specs):  # no NUMA support compiled in: one node, as hwloc
        specs.append(ObjectSpec(ObjType.NUMA, frozenset(online), 0))
    # A die equal to its package says nothing new; hwloc hides it too.
    package_sets = {s.cpuset for s in specs if s.type == ObjType.PACKAGE}
    specs = [s for s in specs if not (s.type == ObjType.DIE and s.cpuset in package_sets)]
    affinity = set(os.sched_getaffinity(0)) if affinity is None else set(affinity)
    if cgroup_cpus is None and root == Path("/sys/devices/system"):
        cgroup_cpus = cgroup_cpuset()
    allowed = affinity & set(online)
    reasons = []
    if allowed != set(online):
        reasons.append("sched_getaffinity")
    if cgroup_cpus is not None and not set(online) <= set(cgroup_cpus):
        allowed &= set(cgroup_cpus)
        reasons.append("cgroup cpuset")
    devices = read_devices(root.parent.parent, frozenset(online)) if root == Path("/sys/devices/system") else []
    return build_topology(specs, allowed=allowed, source=LIVE_SOURCE,
                          restriction=" and ".join(reasons) or None, cpukinds=_cpu_kinds(root, online),
                          devices=devices)


_PCI_ADDRESS = re.compile(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-9a-f]\Z")
#: The classes of /sys/class whose entries are OS devices, as hwloc names their kinds.
_OS_CLASSES = (("net", "network"), ("infiniband", "openfabrics"), ("drm", "gpu"), ("block", "storage"),
               ("dax", "memory"))


def read_devices(sys_root: Path, online: frozenset[int]) -> list[Device]:
    """The PCI devices of ``/sys/bus/pci/devices`` that hwloc keeps by default (its important
    classes, and any with an OS device), their OS devices (``/sys/class/{net,infiniband,drm,block,dax}``
    entries below them, through virtio too) and their ``local_cpulist``."""
    os_devices: dict[str, list[tuple[str, tuple[str, ...]]]] = {}
    for folder, kind in _OS_CLASSES:
        for entry in sorted((sys_root / "class" / folder).glob("*")) if (sys_root / "class" / folder).is_dir() else []:
            if (entry / "partition").exists() or (folder == "drm" and not entry.name.startswith(("card", "renderD"))) \
                    or (folder == "drm" and "-" in entry.name):
                continue  # a disk's partitions, a GPU's connectors are no devices of their own
            try:
                parts = entry.resolve().parts
            except OSError:
                continue
            address = next((part for part in reversed(parts) if _PCI_ADDRESS.match(part)), None)
            if address is not None:
                os_devices.setdefault(address, []).append((entry.name, (kind,)))
    devices = []
    pci_root = sys_root / "bus" / "pci" / "devices"
    for folder in sorted(pci_root.glob("*")) if pci_root.is_dir() else []:
        class_text = _read(folder / "class")
        try:
            pci_class = int(class_text, 16) >> 8 if class_text else None
        except ValueError:
            pci_class = None
        if pci_class is None:
            continue
        names = os_devices.get(folder.name, [])
        bridge = pci_class in (0x0600, 0x0604)  # host and PCI bridges are no PCI devices in hwloc's tree
        if not names and (bridge or not important_pci_class(pci_class)):
            continue
        local = _read(folder / "local_cpulist")
        cpus = frozenset(parse_cpulist(local)) & online if local else online
        vendor, device = _read(folder / "vendor"), _read(folder / "device")
        pci_id = f"{vendor[2:]}:{device[2:]}" if vendor and device else None
        devices.append(Device(cpus or online, folder.name, pci_class, pci_id, tuple(names)))
    return devices


def _node_memory(node: Path) -> int | None:
    """MemTotal of a NUMA node in bytes (``Node 0 MemTotal:  24609876 kB``)."""
    for line in (_read(node / "meminfo") or "").splitlines():
        words = line.split()
        if len(words) >= 4 and words[2] == "MemTotal:" and words[3].isdigit():
            return int(words[3]) * 1024
    return None


def _cpu_kinds(root: Path, online: list[int]) -> list[CpuKind]:
    """Intel hybrid processors: the kernel's ``cpu_atom`` (E-cores) and ``cpu_core`` (P-cores)
    PMUs list their CPUs; ranked as hwloc ranks them, E-cores 0 and P-cores 1."""
    kinds = []
    for rank, (name, core_type) in enumerate((("cpu_atom", "IntelAtom"), ("cpu_core", "IntelCore"))):
        text = _read(root.parent / name / "cpus") if root.name == "system" else None
        if text:
            cpus = frozenset(parse_cpulist(text)) & frozenset(online)
            if cpus:
                kinds.append(CpuKind(cpus, rank, (("CoreType", core_type),)))
    return kinds if len(kinds) > 1 else []
