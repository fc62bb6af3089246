"""Devices (pinwise.topology.devices): hwloc's PCI and OS devices read into the Topology as lstopo
keeps them, drawn by `pinwise topo`, named by placements (--near) and by `mpi map --gpus-per-node`."""

from __future__ import annotations

import json
from pathlib import Path

import lstopo_facts
import numpy as np
import pytest
from conftest import assert_clean_failure, need, run_pinwise

from pinwise import PinwiseError
from pinwise.comm import CommMatrix, write_comm
from pinwise.cpulist import format_cpulist
from pinwise.placement import Placement, resolve
from pinwise.topology import from_json, load_topology, read_sysfs, to_json, to_xml, walk
from pinwise.topology.devices import find_device, numbered

V2 = lstopo_facts.SHARED / "hwloc-tests"
V3 = lstopo_facts.SHARED / "hwloc-tests-v3"
V3_DEVICES = {name: facts["devices"] for name, facts in json.loads(lstopo_facts.V3_FACTS.read_text())["files"].items()}
#: hwloc's test machines with PCI devices (GPUs with CUDA/NVML, InfiniBand, Ethernet, disks, VFs).
WITH_DEVICES = sorted(p for p in V2.glob("*.xml") if b"PCIDev" in p.read_bytes()) if V2.is_dir() else []
POWER8 = V3 / "power8gpudistances.xml"
needs_shared = pytest.mark.skipif(not V2.is_dir(), reason="../shared/topologies is not beside the repository")


def pinwise_devices(machine) -> list[list]:
    return sorted(([d.busid, d.pci_class, sorted(d.names), format_cpulist(sorted(d.cpuset))] for d in machine.devices),
                  key=lambda d: (d[0] or "", d[2]))


@needs_shared
@pytest.mark.parametrize("path", WITH_DEVICES, ids=lambda p: p.name)
def test_devices_are_the_ones_lstopo_keeps(path):
    """Every PCI device lstopo shows (its class, its OS devices) with the PUs it hangs from, and no
    other (lstopo's default filter drops DMA engines and unimportant PCI classes)."""
    assert pinwise_devices(load_topology(str(path))) == lstopo_facts.device_facts(need("lstopo-no-graphics"), path)


def test_this_machines_devices_are_the_ones_lstopo_finds():
    """Read from sysfs (/sys/bus/pci, /sys/class): the PCI devices lstopo shows here, with their OS
    devices (through virtio too) and local PUs."""
    assert pinwise_devices(read_sysfs()) == lstopo_facts.device_facts(need("lstopo-no-graphics"), None)


@needs_shared
@pytest.mark.parametrize("name", sorted(n for n, devices in V3_DEVICES.items() if devices))
def test_devices_of_xml_version_3_are_the_ones_hwloc_3_keeps(name):
    """hwloc 3.0's OS device types are bits (nvml0 is a GPU and a co-processor): the devices its
    lstopo kept (tests/lstopo_facts.py)."""
    assert pinwise_devices(load_topology(str(V3 / name))) == V3_DEVICES[name]


@needs_shared
@pytest.mark.parametrize("path", WITH_DEVICES + [POWER8], ids=lambda p: p.name)
def test_topo_draws_every_gpu_and_nic_under_the_object_it_hangs_from(path):
    machine = load_topology(str(path))
    printed = run_pinwise("topo", "-t", str(path), check=True).stdout.splitlines()
    for kind in ("gpu", "nic"):
        for index, device in enumerate(numbered(machine.devices, kind)):
            line = next(i for i, text in enumerate(printed) if text.strip().startswith(device.label()))
            assert printed[line].endswith(f"= {kind}:{index}")
            owner = next(text for text in reversed(printed[:line]) if not text.strip().startswith("PCI "))
            holder = next(o for o in walk(machine.root) if o.cpuset == device.cpuset)  # the highest with its PUs
            assert holder.label() in owner or (holder is machine.root and owner.strip().startswith("Machine")), \
                (device.label(), owner)


@needs_shared
def test_json_keeps_the_devices():
    machine = load_topology(str(POWER8))
    again = from_json(to_json(machine))
    assert again.devices == machine.devices and len(numbered(again.devices, "gpu")) == 4


@needs_shared
@pytest.mark.parametrize("name, kind", [("gpu:1", "gpu"), ("cuda2", "gpu"), ("nvml3", "gpu"), ("000a:01:00.0", "gpu"),
                                        ("0003:01:00.0", "gpu")])
def test_a_device_is_named_as_users_name_it(name, kind):
    device = find_device(load_topology(str(POWER8)), name)
    assert device.kind == kind and (name in device.names or name.startswith("gpu") or name in device.busid)


def test_a_device_the_machine_lacks_is_refused_with_what_it_has():
    with pytest.raises(PinwiseError, match="has no devices"):
        find_device(load_topology("x7550"), "gpu:0")
    if POWER8.exists():
        with pytest.raises(PinwiseError, match="has 4 GPUs; it has gpu:0"):
            find_device(load_topology(str(POWER8)), "gpu:4")
        assert_clean_failure(run_pinwise("run", "-t", str(POWER8), "--near", "mlx5_0", "--print"), "no device 'mlx5_0'")


@needs_shared
def test_near_a_gpu_the_communicating_threads_share_cores_beside_it(tmp_path):
    """`run -t X.xml --near gpu:1 --policy locality --comm m.json --print`: every thread on a PU
    local to gpu:1 (as lstopo hangs it), and each communicating pair on one core."""
    matrix = np.zeros((4, 4))
    matrix[0, 1] = matrix[1, 0] = matrix[2, 3] = matrix[3, 2] = 1000
    matrix[0, 2] = matrix[2, 0] = 1
    comm = tmp_path / "m.json"
    write_comm(CommMatrix.from_array(matrix), comm)
    busid, _, _, local = next(d for d in lstopo_facts.device_facts(need("lstopo-no-graphics"), V2 / POWER8.name)
                              if "cuda1" in d[2])
    printed = run_pinwise("run", "-t", str(POWER8), "--near", "gpu:1", "--policy", "locality", "--comm", str(comm),
                          "--print", check=True).stdout
    cpus = [int(c) for c in printed.split("pinwise run --cpus ")[1].split()[0].split(",")]
    machine = load_topology(str(POWER8))
    assert find_device(machine, "gpu:1").busid == busid
    assert set(cpus) <= set(int(c) for c in local.replace("-", ",").split(",")) and len(set(cpus)) == 4
    core = lambda cpu: machine.pu(cpu).parent  # noqa: E731
    assert core(cpus[0]) is core(cpus[1]) and core(cpus[2]) is core(cpus[3]) and core(cpus[0]) is not core(cpus[2])
    mapped = run_pinwise("map", str(comm), "-t", str(POWER8), "--near", "cuda3", "--policy", "locality", "-f", "cpulist",
                         check=True).stdout.strip()
    assert {int(c) for c in mapped.split(",")} <= find_device(machine, "cuda3").cpuset
    plan = resolve(Placement(near="mlx4_0", threads=3), load_topology(str(V2 / "24em64t-2n6c2t-pci.xml")))
    assert set(plan.pus) <= {0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22}  # the InfiniBand card's package


@needs_shared
def test_mpi_map_puts_each_rank_beside_its_gpu(tmp_path):
    """8 ranks in pairs on 2 nodes of 4 GPUs: one rank per GPU, each rank's CPU local to its GPU,
    each pair on one node and beside one package's two GPUs."""
    matrix = np.zeros((8, 8))
    for a, b in ((0, 5), (1, 6), (2, 7), (3, 4)):
        matrix[a, b] = matrix[b, a] = 1000
    comm = tmp_path / "ranks.json"
    write_comm(CommMatrix.from_array(matrix), comm)
    printed = run_pinwise("mpi", "map", str(comm), "--cluster", f"node:2 {POWER8}", "--gpus-per-node", "4",
                          "--format", "json", check=True).stdout
    ranks = json.loads(printed)["ranks"]
    machine = load_topology(str(POWER8))
    used = set()
    for rank in ranks:
        gpu = find_device(machine, rank["gpu"].split()[0])
        assert set(rank["cpus"]) <= gpu.cpuset, rank
        used.add((rank["host"], rank["gpu"]))
    assert len(used) == 8  # one rank per GPU
    for a, b in ((0, 5), (1, 6), (2, 7), (3, 4)):
        assert ranks[a]["host"] == ranks[b]["host"] and ranks[a]["socket"] == ranks[b]["socket"]
    assert_clean_failure(run_pinwise("mpi", "map", str(comm), "--cluster", "node:2 pack:2 core:4 pu:1",
                                     "--gpus-per-node", "4"), "has 0 GPUs")


@needs_shared
@pytest.mark.parametrize("path", WITH_DEVICES + [POWER8], ids=lambda p: p.name)
def test_our_xml_export_keeps_the_devices_for_lstopo(path, tmp_path):
    machine = load_topology(str(path))
    exported = tmp_path / "again.xml"
    exported.write_text(to_xml(machine))
    assert lstopo_facts.device_facts(need("lstopo-no-graphics"), exported) == pinwise_devices(machine)
    assert pinwise_devices(load_topology(str(exported))) == pinwise_devices(machine)


def test_sysfs_devices_of_a_gpu_node(tmp_path):
    """A /sys tree as an H100 node's shows it (the GPU at 0000:00:06.0, class 0x030200, local to CPUs
    0-15, no drm entry in a container; nvidia-smi names it GPU0 with CPU affinity 0-15), a NIC and an
    NVMe disk behind their drivers, and what hwloc leaves out: bridges, a USB controller, partitions."""
    from pinwise.topology.sysfs import read_devices

    def pci(address: str, pci_class: str, cpus: str = "0-15") -> Path:
        folder = tmp_path / "devices" / "pci0000:00" / address
        folder.mkdir(parents=True)
        for name, value in (("class", pci_class), ("local_cpulist", cpus), ("vendor", "0x10de"), ("device", "0x2330")):
            (folder / name).write_text(value + "\n")
        link = tmp_path / "bus" / "pci" / "devices" / address
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(folder)
        return folder

    def os_device(kind: str, name: str, below: Path, partition: bool = False) -> None:
        folder = below / kind / name
        folder.mkdir(parents=True)
        if partition:
            (folder / "partition").write_text("1\n")
        link = tmp_path / "class" / kind / name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(folder)

    pci("0000:00:00.0", "0x060000")
    pci("0000:00:01.0", "0x0c0330")
    gpu = pci("0000:00:06.0", "0x030200")
    os_device("net", "eth0", pci("0000:00:03.0", "0x020000", "0-7") / "virtio2")
    disk = pci("0000:00:04.0", "0x010802", "8-15")
    os_device("block", "nvme0n1", disk / "nvme" / "nvme0")
    os_device("block", "nvme0n1p1", disk / "nvme" / "nvme0" / "block" / "nvme0n1", partition=True)
    found = read_devices(tmp_path, frozenset(range(16)))
    assert [(d.busid, d.kind, d.names, sorted(d.cpuset)) for d in found] == [
        ("0000:00:03.0", "nic", ("eth0",), list(range(8))),
        ("0000:00:04.0", "other", ("nvme0n1",), list(range(8, 16))),
        ("0000:00:06.0", "gpu", (), list(range(16)))]
    assert gpu.exists() and found[2].label() == "PCI 00:06.0 (3D)"
