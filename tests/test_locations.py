"""hwloc locations (pinwise.locations) wherever CPUs or NUMA nodes are asked, against the real
hwloc-calc on the same topologies; and numactl's ways of naming nodes (all, +0, !1), against the
real numactl where this machine lets them differ."""

from __future__ import annotations

import subprocess
import warnings
from pathlib import Path

import pytest
from conftest import assert_clean_failure, compile_program, need, run_pinwise
from test_memory import policy_word

from pinwise import PinwiseError, locations
from pinwise.pinning.memory import parse_nodes
from pinwise.placement import Placement, resolve
from pinwise.topology import load_topology
from pinwise.topology.hwloc_xml import parse_cpuset

HWLOC_TESTS = Path(__file__).resolve().parents[2] / "shared" / "topologies" / "hwloc-tests"

#: Machines with disallowed PUs and NUMA nodes, Groups at two levels, NUMA nodes without CPUs or
#: two on one object (KNL), offline CPUs, 192 PUs; and synthetic ones with SMT numbered apart.
TOPOLOGIES = [*(str(HWLOC_TESTS / name) for name in (
    "16amd64-8n2c-cpusets.xml", "64intel64-3g2n+2n-irregulargroups+pci.xml", "fakeheterodistances.xml",
    "64intel64-fakeKNL-SNC4-hybrid.xml", "16em64t-4s2c2t-offlines.xml", "192em64t-12gr2n8c2t.xml",
    "doc__images__hagrid.xml", "28intel64-2p2g7c-CoD.nogroups.v1tov2.xml")),
    "pack:2 numa:2 l3:1 core:4 pu:2", "pack:2 l3:2 core:4 pu:2(indexes=2*16:1*2)"]

#: Every form hwloc-calc reads: types and their abbreviations, every kind of range, hierarchies,
#: masks (with hwloc's infinite prefix), and the ~ x ^ prefixes between words.
LOCATIONS = [
    "core:0", "core:0-3", "core:all", "pu:even", "pu:odd", "numa:0", "numa:all", "node:1", "package:1.core:0",
    "0x3", "all", "root", "core:0-3 ~pu:1", "numa:0 numa:1", "pu:2:3", "pu:3-", "core:odd", "L2:0-2", "l1d:1",
    "machine:0", "pack:1", "socket:1.pu:1", "mcdram:0", "hbm:0-1", "0xf...f,0x3", "core:1:4", "numa:1.core:1-2.pu:0",
    "pu:0-100", "co:2", "package:0.l3:0.core:odd", "core:0-5 xpackage:0", "core:0-5 ^package:0", "xcore:0", "~core:0",
    "group0:0", "group1:all", "die:0", "l3:1", "0xff,0x0", "node:0-1.pu:1", "numa:1-", "l3cache:0.pu:0",
]


def hwloc_calc(topology: str, location: str, *options: str) -> str | None:
    """hwloc-calc's answer, or None where it names nothing or refuses the location."""
    done = subprocess.run(["timeout", "20", need("hwloc-calc"), "-i", topology, *options, *location.split()],
                          capture_output=True, text=True)
    if done.returncode != 0 or "ignored unrecognized argument" in done.stderr or "could not find level" in done.stderr:
        return None
    return done.stdout.strip()


@pytest.mark.parametrize("topology", TOPOLOGIES, ids=lambda t: Path(t).name)
def test_every_location_names_the_cpus_and_nodes_hwloc_calc_names(topology):
    """pinwise's PUs (in hwloc's logical order) and NUMA nodes are hwloc-calc's, location by
    location; where hwloc-calc names nothing or refuses the location, pinwise refuses it in one
    clear error."""
    if topology.endswith(".xml") and not Path(topology).exists():
        pytest.skip("../shared/topologies is not beside the repository")
    machine = load_topology(topology)
    for location in LOCATIONS:
        pus = hwloc_calc(topology, location, "--intersect", "pu", "--physical-output")
        nodeset = hwloc_calc(topology, location, "--nodeset-output")
        expected_cpus = [int(cpu) for cpu in pus.split(",")] if pus else None
        expected_nodes = sorted(parse_cpuset(nodeset, "hwloc-calc")) if nodeset else None
        for found, expected in ((locations.cpus_of, expected_cpus), (locations.nodes_of, expected_nodes)):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", locations.LocationWarning)
                if expected:
                    assert found(location, machine) == expected, (location, found.__name__)
                else:
                    with pytest.raises(PinwiseError):
                        found(location, machine)


#: hwloc-calc's I/O forms: an OS device or PCI device by name or bus id, by index in hwloc's order,
#: among those of a type or of a vendor and device.
IO_LOCATIONS = ["os=eth0", "os=cuda2", "os=mlx4_0", "pci=0002:01:00.0", "pci=14:00.0", "pci:0", "pci:4", "pci:0-3",
                "os:2", "os:5", "os[block]:0", "os[gpu]:0", "os[coproc]:1", "os[coproc]:all", "os[network]:0-1",
                "os[openfabrics]:0", "pci[10de:]:0", "pci[10de:06d2]:all", "pci[15b3:]:0", "os=eth0 ~pu:0"]


@pytest.mark.parametrize("topology", [str(HWLOC_TESTS / name) for name in (
    "24em64t-2n6c2t-pci.xml", "power8gpudistances.xml", "96em64t-4n4d3ca2co-pci.xml", "16intel64-manyVFs.xml")],
    ids=lambda t: Path(t).name)
def test_io_locations_name_the_cpus_and_nodes_hwloc_calc_names(topology):
    """A device's location is the object it hangs from, as hwloc-calc climbs out of I/O objects."""
    if not Path(topology).exists():
        pytest.skip("../shared/topologies is not beside the repository")
    machine = load_topology(topology)
    for location in IO_LOCATIONS:
        pus = hwloc_calc(topology, location, "--intersect", "pu", "--physical-output")
        nodeset = hwloc_calc(topology, location, "--nodeset-output")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", locations.LocationWarning)
            for found, expected in ((locations.cpus_of, [int(c) for c in pus.split(",")] if pus else None),
                                    (locations.nodes_of, sorted(parse_cpuset(nodeset, "hwloc-calc")) if nodeset else None)):
                if expected:
                    assert found(location, machine) == expected, (location, found.__name__)
                else:
                    with pytest.raises(PinwiseError):
                        found(location, machine)


def test_a_range_beyond_the_machine_keeps_what_exists_and_says_so():
    machine = load_topology("pack:2 core:2 pu:2")
    with pytest.warns(locations.LocationWarning, match="there are 4 Core objects"):
        assert locations.cpus_of("core:2-9", machine) == [4, 5, 6, 7]


@pytest.mark.parametrize("text", ["core:0-1", "pu:even", "numa:0", "package:1.core:2", "0x3", "all", "co:1 ~pu:2",
                                  "L2:0", "node:0-1.pu:1"])
def test_hwloc_locations_are_not_likwid_expressions_and_back(text):
    assert locations.is_location(text)


@pytest.mark.parametrize("text", ["S0:0-3", "N:0-1", "E:N:4:1:2", "M1", "C0", "S:scatter", "0,1", "0-3:2", "L:0-1",
                                  "D0:1"])
def test_likwid_expressions_and_cpu_lists_stay_what_they_were(text):
    assert not locations.is_location(text)


def test_run_takes_a_location_for_its_cpus_and_its_nodes():
    """The plan and the job-script lines of --cpus core:... and --membind node:... on a machine of
    two packages, SMT siblings numbered apart (0 and 8)."""
    topology = "pack:2 [numa] core:4 pu:2(indexes=2*8:1*2)"
    printed = run_pinwise("run", "-t", topology, "--cpus", "package:1.core:0-1", "--membind", "node:1", "--print",
                          check=True).stdout
    assert "pinwise run --cpus 4,12,5,13" in printed and "numactl --membind=1" in printed
    plan = resolve(Placement(cpus="core:0 core:7"), load_topology(topology))
    assert plan.cpulist() == "0,8,7,15"
    assert_clean_failure(run_pinwise("run", "-t", topology, "--cpus", "core:9", "--print"), "holds no CPU")
    assert_clean_failure(run_pinwise("run", "-t", topology, "--cpus", "core:0-1 nosuch:0", "--print"), "nosuch:0")
    assert_clean_failure(run_pinwise("run", "-t", topology, "--membind", "numa:7", "--print"), "holds no NUMA node")


# -- numactl's node lists -------------------------------------------------------------------------

def test_numactl_node_forms_on_a_machine_of_four_nodes():
    machine = load_topology("pack:4 [numa] core:2 pu:1")
    assert parse_nodes("all", machine) == [0, 1, 2, 3]
    assert parse_nodes("!1", machine) == [0, 2, 3]
    assert parse_nodes("!1-2", machine) == [0, 3]
    assert parse_nodes("+1", machine) == [1]
    assert parse_nodes("!+0-1", machine) == [2, 3]
    assert parse_nodes("package:2", machine) == [2]


def test_relative_nodes_count_the_nodes_this_process_may_use():
    """numactl's +N is the N-th node of the cpuset's nodes: an XML file whose allowed_nodeset
    leaves out nodes shifts them (hwloc's 16amd64-8n2c-cpusets.xml allows nodes 1-5)."""
    path = HWLOC_TESTS / "16amd64-8n2c-cpusets.xml"
    if not path.exists():
        pytest.skip("../shared/topologies is not beside the repository")
    machine = load_topology(str(path))
    assert parse_nodes("+0", machine) == [1] and parse_nodes("all", machine) == [1, 2, 3, 4, 5]
    with pytest.raises(PinwiseError, match="beyond the 5 nodes"):
        parse_nodes("+5", machine)


@pytest.mark.parametrize("nodes", ["all", "+0", "0"])
def test_numactl_and_pinwise_read_node_lists_alike_here(nodes):
    """The real numactl with the same list shows the same nodes (this machine's node 0)."""
    shown = subprocess.run([need("numactl"), f"--membind={nodes}", "--show"], capture_output=True, text=True,
                           check=True).stdout
    membind = next(line for line in shown.splitlines() if line.startswith("membind:"))
    assert [int(n) for n in membind.split()[1:]] == parse_nodes(nodes, load_topology(None))


def test_both_refuse_a_list_that_leaves_no_node():
    assert subprocess.run([need("numactl"), "--membind=!0-1023", "true"], capture_output=True).returncode != 0
    assert_clean_failure(run_pinwise("run", "--membind", "!0", "--", "true"), "leaves no NUMA node")


def test_a_memory_policy_alone_runs_the_program_unpinned_with_it(build_dir):
    """`pinwise run --membind 0 -- app`, as numactl --membind=0 app: every thread's memory policy,
    read back from the kernel, and no thread pinned."""
    numa_exe = compile_program("numa_maps.c", build_dir)
    done = run_pinwise("run", "--membind", "+0", "--verify", "--", str(numa_exe), "2", check=True)
    assert policy_word(done.stdout) == "bind:0"
    rows = [line.strip("│ ").split("│") for line in done.stderr.splitlines() if line.startswith("│")]
    assert len(rows) == 3 and all(row[5].strip() == "bind:0" and "not pinned" in row[6] for row in rows), done.stderr
    assert "memory policy as asked in every thread" in done.stderr


def test_the_help_says_what_numactls_short_options_are_here():
    text = run_pinwise("run", "--help", check=True).stdout
    assert "numactl's -m is --membind here" in " ".join(text.split())
    assert "numactl's -p is --preferred here" in " ".join(text.split())
