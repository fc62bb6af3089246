"""Devices threads drive: hwloc's PCI devices and the OS devices on them (GPUs, NICs, disks), with
the PUs local to each, read from hwloc XML into the one Topology.

A :class:`Device` is one PCI device (``0000:34:00.0``) with the names the OS gives it (``eth0``,
``mlx5_0``, ``cuda0``, ``nvml0``, ``card1``), or one OS device that hangs from no PCI device (a
DAX region). Its locality is the PUs of the object hwloc hangs it from, as lstopo shows it. Only
what lstopo keeps by default is kept (hwloc's "important" filter): PCI devices of the display,
network, storage, processor, accelerator and InfiniBand/fibre classes, and every OS device but
DMA engines.

A placement names a device as ``gpu:N`` or ``nic:N`` (the N-th GPU or NIC in PCI bus order, the
order nvidia-smi and CUDA_DEVICE_ORDER=PCI_BUS_ID number GPUs), by an OS device's name, or by its
PCI bus id (``0000:34:00.0`` or ``34:00.0``); :func:`find_device` resolves it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import PinwiseError
from .objects import walk

#: hwloc 2's OS device types (osdev_type) and hwloc 3's bits, as words.
_V2_KINDS = {0: "storage", 1: "gpu", 2: "network", 3: "openfabrics", 4: "dma", 5: "coproc", 6: "memory"}
_V3_BITS = {1: "storage", 2: "memory", 4: "gpu", 8: "coproc", 16: "network", 32: "openfabrics", 64: "dma"}
#: lstopo's names for PCI classes (hwloc's pci class strings, shortened as lstopo prints them).
PCI_CLASS_NAMES = {0x0100: "SCSI", 0x0101: "IDE", 0x0104: "RAID", 0x0106: "SATA", 0x0107: "SAS", 0x0108: "NVMExp",
                   0x0180: "Storage", 0x0200: "Ethernet", 0x0207: "InfiniBand", 0x0280: "Network", 0x0300: "VGA",
                   0x0302: "3D", 0x0380: "Display", 0x0b40: "Co-Processor", 0x0c04: "Fibre", 0x0c06: "InfiniBand",
                   0x0502: "CXL", 0x1200: "Accelerator"}
GPU_WORDS = ("gpu", "coproc")
NIC_WORDS = ("network", "openfabrics")


def os_device_kinds(element_type: str | None, version: int) -> tuple[str, ...]:
    """The kinds of an OS device from its ``osdev_type`` attribute (a number in hwloc 1 and 2,
    a set of bits in hwloc 3)."""
    if element_type is None or not element_type.strip().isdigit():
        return ()
    value = int(element_type)
    if version >= 3:
        return tuple(word for bit, word in _V3_BITS.items() if value & bit)
    return (_V2_KINDS[value],) if value in _V2_KINDS else ()


def important_pci_class(pci_class: int) -> bool:
    """hwloc's default filter for PCI devices (hwloc_filter_check_pcidev_subtype_important)."""
    base = pci_class >> 8
    return base in (0x00, 0x01, 0x02, 0x03, 0x06, 0x0b, 0x12) or pci_class in (0x0c04, 0x0c06, 0x0502)


@dataclass(frozen=True)
class Device:
    """A PCI device, or an OS device that hangs from none, and the PUs local to it."""

    cpuset: frozenset[int]
    busid: str | None = None
    pci_class: int | None = None
    #: "vendor:device" in hex, as hwloc's pci_type gives them.
    pci_id: str | None = None
    #: The OS devices on it: (name, kinds) in the file's order.
    os_devices: tuple[tuple[str, tuple[str, ...]], ...] = ()
    #: What the source says about it (GPUModel, Address...).
    info: tuple[tuple[str, str], ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.os_devices)

    @property
    def kinds(self) -> frozenset[str]:
        return frozenset(kind for _, kinds in self.os_devices for kind in kinds)

    @property
    def kind(self) -> str:
        """``gpu``, ``nic`` or ``other``: a GPU or accelerator by its OS devices or PCI class (3D
        controller, processing accelerator, co-processor; a VGA controller only with a GPU's OS
        devices, since a server's board graphics is one too), a NIC by its OS devices or class
        (network, InfiniBand, fibre)."""
        base = (self.pci_class or 0) >> 8
        if (self.kinds & set(GPU_WORDS) or self.pci_class in (0x0302, 0x0380, 0x0b40) or base == 0x12):
            return "gpu"
        if self.kinds & set(NIC_WORDS) or base == 0x02 or self.pci_class in (0x0c04, 0x0c06):
            return "nic"
        return "other"

    def label(self) -> str:
        """As lstopo names it: ``PCI 04:00.0 (Ethernet) eth0 eth1``."""
        if self.busid is None:
            return " ".join(self.names) or "device"
        short = self.busid[5:] if self.busid.startswith("0000:") else self.busid
        kind = PCI_CLASS_NAMES.get(self.pci_class or -1) or ("Bridge" if (self.pci_class or 0) >> 8 == 0x06
                                                              else f"{self.pci_class or 0:04x}")
        return " ".join([f"PCI {short} ({kind})", *self.names])

    def sort_key(self) -> tuple:
        return (self.busid is None, self.busid or "", self.names)


def devices_by_holder(topology) -> dict[int, list[Device]]:
    """Each device under the highest object of the CPU tree with its PUs (where lstopo hangs it),
    by the object's id (the machine's where none has them)."""
    holders: dict[frozenset[int], object] = {}
    for node in walk(topology.root):
        holders.setdefault(node.cpuset, node)
    found: dict[int, list[Device]] = {}
    for device in topology.devices:
        found.setdefault(id(holders.get(device.cpuset, topology.root)), []).append(device)
    return found


def hwloc2_osdev_type(kinds: tuple[str, ...]) -> int:
    """hwloc 2's osdev_type for an OS device's kinds (a CUDA device is a co-processor there)."""
    for kind, number in (("coproc", 5), ("gpu", 1), ("openfabrics", 3), ("network", 2), ("dma", 4)):
        if kind in kinds:
            return number
    return 0


def numbered(devices, kind: str) -> list[Device]:
    """The devices of a kind in PCI bus order: ``gpu:N`` is the N-th."""
    return sorted((d for d in devices if d.kind == kind), key=Device.sort_key)


_INDEXED = re.compile(r"(gpu|nic):([0-9]+)\Z", re.IGNORECASE)
_BUSID = re.compile(r"(?:([0-9a-fA-F]{4}):)?([0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-9a-fA-F])\Z")


def find_device(topology, name: str) -> Device:
    """The device ``name`` names on ``topology``: ``gpu:N``, ``nic:N``, an OS device's name
    (``mlx5_0``, ``cuda1``) or a PCI bus id; one clear error listing what there is otherwise."""
    text = name.strip()
    devices = topology.devices
    indexed = _INDEXED.match(text)
    if indexed:
        kind, index = indexed[1].lower(), int(indexed[2])
        found = numbered(devices, kind)
        if index < len(found):
            return found[index]
        raise PinwiseError(f"device {text!r}: {topology.source} has {len(found)} {kind.upper()}"
                           f"{'s' if len(found) != 1 else ''}{_listing(topology)}")
    by_name = [d for d in devices if text in d.names]
    if by_name:
        return by_name[0]
    bus = _BUSID.match(text)
    if bus:
        wanted = f"{(bus[1] or '0000').lower()}:{bus[2].lower()}"
        match = next((d for d in devices if d.busid and d.busid.lower() == wanted), None)
        if match is not None:
            return match
    raise PinwiseError(f"no device {text!r} on {topology.source}{_listing(topology)}")


def _listing(topology) -> str:
    if not topology.devices:
        return (" (it has no devices: read the machine from hwloc XML written with I/O, e.g. "
                "'lstopo --of xml FILE' on it)")
    names = [f"gpu:{i} ({d.label()})" for i, d in enumerate(numbered(topology.devices, "gpu"))]
    names += [f"nic:{i} ({d.label()})" for i, d in enumerate(numbered(topology.devices, "nic"))]
    if not names:
        return "; it has no GPU or NIC"
    more = f" and {len(names) - 8} more" if len(names) > 8 else ""
    return "; it has " + ", ".join(names[:8]) + more
