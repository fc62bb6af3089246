"""Capability 1: the topology tree from sysfs, hwloc XML, synthetic strings and presets."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import lstopo_facts
from conftest import PINWISE, assert_clean_failure, need, run_pinwise
from hypothesis import given, settings
from hypothesis import strategies as st

from pinwise import PinwiseError
from pinwise.topology import (
    PRESETS,
    ObjType,
    from_json,
    load_topology,
    parse_synthetic,
    parse_xml,
    preset,
    read_sysfs,
    render,
    to_json,
    to_synthetic,
    to_xml,
    walk_all,
)

SYNTHETIC_STRINGS = [
    "pack:2 l3:1 l2:4 core:1 pu:2",
    "numa:4 pack:4 l3:1 l2:3 core:2 pu:1",
    "pack:2 numa:1 l3:1 core:4 pu:1",
    "socket:2 l1d:2 core:1 pu:1",
    "group:2 pack:2 core:2 pu:1",
    "pack:2 numa:2 core:2 pu:2",
    "Package:2 [NUMANode] L3Cache:1(size=16777216) L2Cache:4(size=262144) Core:1 PU:2",
    "pack:4 l3:1(size=18MiB) l2:8(size=256KiB) l1:1 core:1 pu:2",
]


#: What hwloc 3.0 builds from its version 3 test files and a few synthetic strings (tests/lstopo_facts.py).
_V3 = json.loads(lstopo_facts.V3_FACTS.read_text())


def lstopo_xml(*args: str) -> bytes:
    lstopo = need("lstopo-no-graphics")
    return subprocess.run([lstopo, "--no-io", *args, "--of", "xml"], check=True, capture_output=True).stdout


def shapes(topology, type_):
    return sorted(tuple(sorted(o.cpuset)) for o in topology.objects(type_))


# -- agreement with hwloc ---------------------------------------------------------------------

def test_live_topology_equals_hwloc():
    ours = read_sysfs()
    theirs = parse_xml(lstopo_xml("--whole-system"), source="lstopo")
    for type_ in ("package", "numa", "l3", "l2", "l1", "core", "pu"):
        assert shapes(ours, type_) == shapes(theirs, type_), type_
    for type_ in ("l3", "l2", "l1"):
        assert sorted(o.cache_size for o in ours.objects(type_)) == sorted(o.cache_size for o in theirs.objects(type_))
    assert ours == theirs


@pytest.mark.parametrize("description", SYNTHETIC_STRINGS)
def test_synthetic_builder_equals_hwloc(description):
    theirs = parse_xml(lstopo_xml("--input", description), source="lstopo")
    ours = parse_synthetic(description)
    assert ours == theirs
    assert ours.nb_pus == theirs.nb_pus


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_our_xml_reads_in_hwloc_and_back(name, tmp_path):
    machine = preset(name)
    path = tmp_path / f"{name}.xml"
    path.write_text(to_xml(machine))
    lstopo = need("lstopo-no-graphics")
    synthetic = subprocess.run([lstopo, "--input", str(path), "--of", "synthetic"], check=True,
                               capture_output=True, text=True).stdout.strip()
    assert parse_synthetic(synthetic) == machine
    assert parse_xml(path.read_bytes()) == machine
    console = subprocess.run([lstopo, "--input", str(path), "--of", "console"], check=True, capture_output=True,
                             text=True).stdout
    assert ("L1d L#0" in console) == any(node.type == ObjType.L1 for node in walk_all(machine.root)), console[:400]
    assert "L1 L#" not in console  # hwloc read pinwise's L1 as unified (cache_type 0)


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_round_trips(name):
    machine = preset(name)
    assert parse_synthetic(to_synthetic(machine)) == machine
    assert from_json(to_json(machine)) == machine
    assert parse_xml(to_xml(machine)) == machine


def test_a_file_exported_from_this_machine_is_not_read_back_as_the_live_machine(tmp_path):
    """A JSON export of the live machine keeps where it came from, but read back (here or on
    another host) it is that file, not "this machine (sysfs)"."""
    from pinwise.topology import read_json

    path = tmp_path / "here.json"
    path.write_text(to_json(load_topology(None)))
    assert read_json(path).source == f"{path}, exported from this machine (sysfs)"
    assert from_json(to_json(preset("nehalem"))).source == "nehalem"  # a preset's name stays its name


# -- presets match the papers -------------------------------------------------------------------

def _sharing(machine, type_):
    """How many PUs share each object of a type."""
    return {len(o.cpuset) for o in machine.objects(type_)}


def test_presets_match_papers():
    core2 = preset("core2")  # Mazouz 2.1: 2 sockets x 4 cores, each pair of cores shares an L2
    assert (core2.nb_pus, len(core2.objects("package")), len(core2.objects("l2"))) == (8, 2, 4)
    assert _sharing(core2, "l2") == {2} and not core2.objects("l3")
    nehalem = preset("nehalem")  # 2 sockets x 4 cores sharing one L3, private L2, no SMT
    assert (nehalem.nb_pus, len(nehalem.objects("package")), len(nehalem.objects("core"))) == (8, 2, 8)
    assert _sharing(nehalem, "l3") == {4} and _sharing(nehalem, "l2") == {1}
    ccnuma = preset("ccnuma96")  # 4 nodes x 4 sockets x 6 cores, L3 per socket, L2 per core pair
    assert (ccnuma.nb_pus, len(ccnuma.objects("numa")), len(ccnuma.objects("package"))) == (96, 4, 16)
    assert _sharing(ccnuma, "numa") == {24} and _sharing(ccnuma, "l3") == {6} and _sharing(ccnuma, "l2") == {2}
    x7550 = preset("x7550")  # 4 sockets x 8 cores x 2 hardware threads, L3 per socket
    assert (x7550.nb_pus, len(x7550.objects("package")), len(x7550.objects("core"))) == (64, 4, 32)
    assert _sharing(x7550, "l3") == {16} and _sharing(x7550, "core") == {2}
    e5620 = preset("e5620")  # 2 sockets x 4 cores sharing a 12 MB L3
    assert (e5620.nb_pus, len(e5620.objects("package"))) == (8, 2)
    assert {o.cache_size for o in e5620.objects("l3")} == {12 << 20}


# -- the ordering API the policies use --------------------------------------------------------

def test_compact_and_scatter_orders():
    nehalem = preset("nehalem")
    assert nehalem.compact_order() == list(range(8))
    assert nehalem.scatter_order() == [0, 4, 1, 5, 2, 6, 3, 7]
    x7550 = preset("x7550")
    compact = x7550.compact_order()
    assert compact[:2] == [0, 1] and x7550.pu(0).parent is x7550.pu(1).parent  # both threads of a core
    scatter = x7550.scatter_order()
    packages = [next(a for a in x7550.pu(p).ancestors() if a.type == "package").logical_index for p in scatter[:4]]
    assert packages == [0, 1, 2, 3]
    assert len({x7550.pu(p).parent.logical_index for p in scatter[:32]}) == 32  # every core before any SMT sibling


def test_distance_and_common_ancestor():
    x7550 = preset("x7550")
    assert x7550.distance(0, 0) == 0
    assert x7550.distance(0, 1) == 1  # SMT siblings: the core
    assert x7550.lowest_common_ancestor(0, 2).type == "l3"
    assert x7550.lowest_common_ancestor(0, 16).type == "machine"
    assert x7550.distance(0, 2) < x7550.distance(0, 16)
    assert [c.type for c in x7550.shared_caches(0, 2)] == ["l3"]
    assert x7550.coordinates(x7550.pu(17))[0] == 1  # second package
    assert len(x7550.objects("l3")) == 4


# -- the live machine's restrictions --------------------------------------------------------------

def _fake_sysfs(root: Path, online: str, cpus: dict[int, tuple[int, int]]):
    """A sysfs tree: cpu -> (package, core); one L2 per core, one L3 per package."""
    (root / "cpu").mkdir(parents=True)
    (root / "cpu" / "online").write_text(online + "\n")
    for cpu, (package, core) in cpus.items():
        siblings = ",".join(str(c) for c, (p, k) in cpus.items() if (p, k) == (package, core))
        package_cpus = ",".join(str(c) for c, (p, _) in cpus.items() if p == package)
        topo = root / "cpu" / f"cpu{cpu}" / "topology"
        topo.mkdir(parents=True)
        for name, value in (("physical_package_id", package), ("core_id", core), ("core_cpus_list", siblings),
                            ("package_cpus_list", package_cpus), ("die_cpus_list", package_cpus), ("die_id", 0)):
            (topo / name).write_text(f"{value}\n")
        for index, (level, type_, size, shared) in enumerate(
                [(1, "Data", "32K", siblings), (1, "Instruction", "32K", siblings),
                 (2, "Unified", "1024K", siblings), (3, "Unified", "16384K", package_cpus)]):
            cache = root / "cpu" / f"cpu{cpu}" / "cache" / f"index{index}"
            cache.mkdir(parents=True)
            for name, value in (("level", level), ("type", type_), ("size", size), ("shared_cpu_list", shared)):
                (cache / name).write_text(f"{value}\n")


def test_sysfs_leaves_out_offline_cpus_and_shows_restriction(tmp_path):
    cpus = {0: (0, 0), 1: (0, 0), 2: (0, 1), 3: (0, 1), 4: (1, 0), 5: (1, 0), 6: (1, 1), 7: (1, 1)}
    _fake_sysfs(tmp_path, "0-6", cpus)
    machine = read_sysfs(tmp_path, affinity={0, 1, 2, 3, 4, 5, 6, 7}, cgroup_cpus=[0, 1, 2, 3, 4])
    assert machine.nb_pus == 7  # CPU 7 offline
    assert sorted(machine.allowed) == [0, 1, 2, 3, 4]
    assert machine.restriction == "cgroup cpuset"
    assert len(machine.objects("package")) == 2 and len(machine.objects("core")) == 4
    assert {o.cache_size for o in machine.objects("l3")} == {16 << 20}
    assert not machine.objects("die")  # a die equal to its package is hidden, as hwloc does
    picture = render(machine)
    assert "(5)" in picture and "(6)" in picture and "cgroup cpuset" in picture


def test_taskset_restriction_visible_in_cli():
    if 1 not in os.sched_getaffinity(0) or 0 not in os.sched_getaffinity(0):
        pytest.skip("needs CPUs 0 and 1")
    taskset = need("taskset")
    document = json.loads(subprocess.run([taskset, "-c", "1", run_pinwise.__globals__["PINWISE"], "topo", "--of", "json"],
                                         check=True, capture_output=True, text=True).stdout)
    assert document["allowed"] == [1]
    assert document["restriction"] == "sched_getaffinity"
    text = subprocess.run([taskset, "-c", "1", run_pinwise.__globals__["PINWISE"], "topo"], check=True,
                          capture_output=True, text=True).stdout
    assert "1 allowed" in text
    assert "(0)" in text and "(1)" not in text


# -- the CLI --------------------------------------------------------------------------------------

def test_topo_cli_outputs(tmp_path):
    assert "Package" in run_pinwise("topo", check=True).stdout
    text = run_pinwise("topo", "-t", "ccnuma96", check=True).stdout
    assert len(text.splitlines()) <= 30 and "95" in text  # 96 PUs on one screen
    assert run_pinwise("topo", "-t", "nehalem", "--of", "synthetic", check=True).stdout.startswith("Package:2")
    out = tmp_path / "m.xml"
    run_pinwise("topo", "-t", "x7550", "--of", "xml", "-o", str(out), check=True)
    assert load_topology(str(out)) == preset("x7550")
    out_json = tmp_path / "m.json"
    run_pinwise("topo", "-t", "x7550", "--of", "json", "-o", str(out_json), check=True)
    assert load_topology(str(out_json)) == preset("x7550")
    presets = run_pinwise("topo", "--presets", check=True).stdout
    assert all(name in presets for name in PRESETS)


@pytest.mark.parametrize("topology, words", [
    ("pack:2 foo:2 pu:1", ["unknown type", "foo"]),
    ("pack:0 pu:1", ["at least 1"]),
    ("pack:-2 pu:1", ["count of pack", "must be at least 1, not -2"]),
    ("pack:2 core:2", ["last level must be pu"]),
    ("pack:2 core:2 core:2 pu:1", ["several core levels"]),
    ("nosuchpreset", ["unknown topology"]),
    ("/nonexistent/machine.xml", ["does not exist"]),
    ("pack:2 pu:2(indexes=0,1,2)", ["give 4 different OS indices, not 3"]),
    ("pack:2 pu:2(indexes=0,0,1,2)", ["with repeats"]),
    ("pack:2 pu:2(indexes=2*3:1*2)", ["make 6 objects, the level has 4"]),
    ("pack:2 pu:2(indexes=2*2:2*2)", ["do not number 4 objects once each"]),
    ("pack:2 pu:2(indexes=x*2)", ["not STEP*COUNT"]),
    ("pack:2 pu:2(foo)", ["cannot read the attributes"]),
])
def test_bad_topology_gives_one_clear_line(topology, words):
    assert_clean_failure(run_pinwise("topo", "-t", topology), *words)


def test_malformed_xml_gives_one_clear_line(tmp_path):
    bad = tmp_path / "bad.xml"
    bad.write_text("<topology><object type='Machine' cpuset='0x1'><object type='PU'")
    assert_clean_failure(run_pinwise("topo", "-t", str(bad)), "not well-formed")
    other = tmp_path / "other.xml"
    other.write_text("<html/>")
    assert_clean_failure(run_pinwise("topo", "-t", str(other)), "not an hwloc topology")


SMALL_XML = """<?xml version="1.0" encoding="{encoding}"?>
{doctype}<topology version="2.0">
<object type="Machine" os_index="0" cpuset="{machine}">
<object type="PU" os_index="0" cpuset="0x1"/>
<object type="PU" os_index="1" cpuset="{pu1}"/>
</object>
</topology>
"""


def small_xml(encoding="UTF-8", doctype="", machine="0x3", pu1="0x2") -> bytes:
    text = SMALL_XML.format(encoding=encoding, doctype=doctype, machine=machine, pu1=pu1)
    return text.encode("utf-16" if encoding == "UTF-16" else "utf-8")


@pytest.mark.parametrize("damage, words", [
    ({"pu1": ""}, ["PU 1 has cpuset []"]),
    ({"pu1": "0x0"}, ["PU 1 has cpuset []"]),
    ({"pu1": "0x3"}, ["PU 1 has cpuset [0, 1]"]),
    ({"machine": ""}, ["Machine's cpuset", "leaves out PUs 0,1"]),
    ({"machine": "0x1"}, ["leaves out PUs 1"]),
    ({"doctype": '<!DOCTYPE topology [<!ENTITY a "x">]>\n'}, ["entity declarations"]),
    ({"doctype": '<!DOCTYPE topology [<!ENTITY a "x">]>\n', "encoding": "UTF-16"}, ["entity declarations"]),
])
def test_xml_whose_pus_do_not_add_up_is_refused(tmp_path, damage, words):
    """Found by the fuzz corpus: an empty PU cpuset dropped the PU in silence ("0 PUs", exit 0),
    and an entity declaration in UTF-16 passed a search for the text "<!ENTITY"."""
    path = tmp_path / "bad.xml"
    path.write_bytes(small_xml(**damage))
    assert_clean_failure(run_pinwise("topo", "-t", str(path)), *words)


def test_utf16_xml_is_read_like_utf8():
    assert parse_xml(small_xml("UTF-16")) == parse_xml(small_xml())
    assert parse_xml(small_xml()).nb_pus == 2


def test_asymmetric_topology_has_no_synthetic_form(tmp_path):
    xml = lstopo_xml("--input", "pack:2 core:2 pu:1", "--restrict", "0x7")
    path = tmp_path / "asym.xml"
    path.write_bytes(xml)
    assert_clean_failure(run_pinwise("topo", "-t", str(path), "--of", "synthetic"), "not symmetric")


# -- property tests: no input ever produces a traceback -----------------------------------------

TYPE_WORDS = ["pack", "package", "socket", "numa", "numanode", "group", "die", "l3", "l2", "l1", "l1d",
              "l1i", "core", "pu", "foo", "L3Cache", "PU", ""]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(TYPE_WORDS), st.integers(-3, 5) | st.just(None),
                          st.sampled_from(["", "(size=4MiB)", "(size=x)", "("])), max_size=6))
def test_random_synthetic_strings_never_traceback(levels):
    description = " ".join(f"{t}{'' if n is None else ':' + str(n)}{a}" for t, n, a in levels)
    try:
        machine = parse_synthetic(description)
    except PinwiseError:
        return
    assert machine.nb_pus >= 1
    assert parse_synthetic(to_synthetic(machine)) == machine


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300) | st.text(max_size=300))
def test_random_bytes_never_traceback(blob):
    for parser in (lambda b: parse_xml(b), lambda b: from_json(b if isinstance(b, str) else b.decode("latin-1")),
                   lambda b: parse_synthetic(b if isinstance(b, str) else b.decode("latin-1"))):
        try:
            parser(blob)
        except PinwiseError:
            pass


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet="<>/=\"' objectypePUMachinecpuset0x1f,", max_size=200))
def test_random_xml_like_text_never_traceback(text):
    try:
        parse_xml("<topology>" + text)
    except PinwiseError:
        pass


def test_instruction_caches_alone_are_no_machine():
    """Found by the property test above on one of its random draws: a string of instruction
    caches only (which placement ignores) left no level and raised IndexError."""
    with pytest.raises(PinwiseError, match="the last level must be pu"):
        parse_synthetic("l1i:1")


# -- hwloc's indexes= numbering ---------------------------------------------------------------------

def lstopo_pu_order(description: str) -> list[int]:
    """The OS index of every PU in hwloc's logical order, as lstopo builds the machine."""
    printed = subprocess.run([need("lstopo-no-graphics"), "-i", description, "--of", "console", "-p"],
                             capture_output=True, text=True, check=True).stdout
    return [int(found) for found in re.findall(r"PU P#([0-9]+)", printed)]


@pytest.mark.parametrize("description", [
    "pack:2 core:8 pu:2(indexes=2*16:1*2)",          # Skylake: 16 is 0's hyperthread
    "pack:2 core:2 pu:2(indexes=0,4,1,5,2,6,3,7)",
    "pack:2 core:2 pu:2(indexes=4*2:1*4)",
    "pack:2 core:2 pu:2(indexes=2*2:1*2:4*2)",
    "Package:2 L3Cache:1(size=32MB) Core:2(indexes=3,2,1,0) PU:2(indexes=1*4:4*2)",
    "Package:2 [NUMANode(memory=1073741824)] L2Cache:2(size=1048576) Core:1 PU:2(indexes=0,4,1,5,2,6,3,7)",
])
def test_synthetic_indexes_number_pus_as_lstopo_does(description):
    """indexes= used to be ignored: 'pu:2(indexes=0,4,...)' put cores at 0+1 where lstopo has 0+4."""
    machine = load_topology(description)
    assert machine.compact_order(allowed_only=False) == lstopo_pu_order(description)
    written = to_synthetic(machine)  # and written back with the numbering, which lstopo reads the same
    assert lstopo_pu_order(written) == lstopo_pu_order(description)
    assert load_topology(written).compact_order(allowed_only=False) == lstopo_pu_order(description)


#: Strings lstopo 2.9 reads that pinwise refused or built otherwise: caches below cores (lstopo's
#: export of Hygon and CPUID-leaf-0x1F machines), any order of levels hwloc accepts, NUMA nodes
#: attached at several levels with one indexes= for all, bare counts, hwloc's abbreviations,
#: instruction caches that split a level, Groups that add no structure.
ANY_ORDER_STRINGS = [
    "Package:1 Core:8 L2Cache:4 PU:1", "pack:2 core:4 l1:2 pu:1", "Package:1 Core:2 L2Cache:2 L1dCache:1 PU:2",
    "pack:1 core:2 l3:1 pu:2", "pack:2 core:2 l3:2 l2:1 pu:1", "pack:2 core:2 l2:2 l3:1 pu:1", "core:2 pack:2 pu:1",
    "pack:2 core:2 numa:2 pu:1", "pack:2 core:2 group:2 pu:1", "pack:2 core:2 die:2 pu:1", "l1:2 l2:2 pu:1",
    "pack:2 l2:2 core:2 l1:2 pu:1", "pack:2 core:2 l2:1 l1:1 pu:2", "pack:2 l2:2 l2:2 pu:1", "pack:2 l2:2 l2:1 pu:1",
    "pack:2 core:2 l3:2 pu:1(indexes=3,2,1,0,7,6,5,4)", "group:2 group:2 pu:1", "pack:1 core:2 l1i:2 pu:1",
    "pack:2 [numa] core:2 [numa] pu:1", "pack:2 core:2 [numa] pu:2", "pack:2 [numa] [numa] core:2 [numa] pu:1",
    "pack:2 [numa(memory=300000000000000 indexes=10,11,12,13,14,15)] core:2 [numa] pu:1",
    "pack:2 [numa] core:2 [numa(indexes=10,11,12,13,14,15)] pu:1",
    "[numa(indexes=6,5,4,3,2,1,0)] pack:2 [numa] core:2 [numa] pu:1",
    "2 2 2", "4 2", "2 2 2 2 2", "2 2 2 2 2 2 2 2", "Tile:2 pu:2", "pack:2 node:2 pu:1", "so:2 co:2 pu:2",
    "NUMA:2 pa:2 pu:1", "pack:2 numa:2(indexes=3,1,2,0) core:2 pu:1",
    "numa:2 pack:2 core:2 pu:1(indexes=7,6,5,4,3,2,1,0)", "Group0:2 Group1:2 Package:1 Core:2 PU:1",
    "Package:2 Core:4(indexes=3,2,1,0,7,6,5,4) PU:2(indexes=2*8:1*2)", "pack:4 l3:2 core:4 l2:1 l1:1 pu:2",
]


@pytest.mark.parametrize("description", ANY_ORDER_STRINGS)
def test_synthetic_strings_in_any_order_lstopo_reads_are_read_as_it_reads_them(description):
    """The objects, the PU numbering and the NUMA numbering of lstopo's machine; and where the
    machine has a synthetic form, pinwise's is read by lstopo into that machine again."""
    expected = lstopo_view(description)
    machine = load_topology(description)
    ours = pinwise_view(machine)
    assert (ours["objects"], ours["pus"], ours["numa"]) == (expected["objects"], expected["pus"], expected["numa"])
    written = to_synthetic(machine)
    assert lstopo_view(written)["objects"] == expected["objects"], written
    assert lstopo_view(written)["numa"] == expected["numa"], written


@pytest.mark.parametrize("description, words", [
    ("pack:2 core:2 core:2 pu:1", ["several core levels"]),
    ("pack:2 pu:2 core:1", ["last level must be pu"]),
    ("pack:2 numa:2 core:2 numa:1 pu:1", ["several NUMA node levels"]),
    ("numa:2 [numa] pu:1", ["either as one numa:N level or attached"]),
    ("2 pack:2 pu:1", ["to every level or to none"]),
    ("pack:2 core:0 pu:1", ["at least 1"]),
    ("pack:2 core:2 misc:2 pu:1", ["cannot be a level"]),
    ("pack:2 core:2 pu:1 pu:1", ["several PU levels"]),
])
def test_synthetic_strings_lstopo_refuses_are_refused_in_one_line(description, words):
    assert subprocess.run([need("lstopo-no-graphics"), "-i", description], capture_output=True).returncode != 0
    assert_clean_failure(run_pinwise("topo", "-t", description), *words)


@pytest.mark.parametrize("description", sorted(_V3["synthetic"]))
def test_synthetic_strings_of_hwloc_3_are_read_as_it_reads_them(description):
    """hwloc 3.0's synthetic strings (tests/lstopo_facts.py made their facts with its lstopo):
    the strings it writes for its test machines, and memory-side caches in front of NUMA nodes
    (``memorysidecachesize=``), which hwloc 2.9 does not read; pinwise writes them back."""
    expected = lstopo_facts.from_document(_V3["synthetic"][description])
    machine = load_topology(description)
    ours = pinwise_view(machine)
    assert (ours["objects"], ours["pus"], ours["numa"]) == (expected["objects"], expected["pus"], expected["numa"])
    assert pinwise_view(load_topology(to_synthetic(machine))) == ours


def test_memory_beyond_2_to_the_48_is_read_as_lstopo_writes_it(tmp_path):
    """A NUMA node of 1 PiB (a 2^48+ local_memory was refused): the size lstopo writes for a
    synthetic string's node, read from its XML, and pinwise's own string and XML the same."""
    description = "pack:2 [numa(memory=1125899906842624)] core:2 pu:1"
    exported = lstopo_facts.lstopo_export(need("lstopo-no-graphics"), description)
    import xml.etree.ElementTree as ET

    sizes = [int(e.get("local_memory")) for e in ET.fromstring(exported).iter("object") if e.get("type") == "NUMANode"]
    assert sizes == [1 << 50, 1 << 50]
    for machine in (parse_xml(exported), load_topology(description), parse_xml(to_xml(load_topology(description)))):
        assert [n.local_memory for n in machine.numa_nodes] == sizes
    assert "NUMA 0 (1PiB)" in render(load_topology(description))


def test_every_synthetic_string_hwloc_writes_for_its_test_machines_is_read_as_lstopo_reads_it():
    """lstopo --of synthetic over hwloc's own test topologies: every string is accepted and gives
    the machine lstopo builds from it (objects, PU and NUMA numbering), two NUMA nodes on one
    object (DRAM beside MCDRAM) and NUMA indexes= included."""
    lstopo = need("lstopo-no-graphics")
    files = sorted(Path(__file__).resolve().parents[2].joinpath("shared", "topologies").rglob("*.xml"))
    if not files:
        pytest.skip("../shared/topologies is not beside the repository")
    accepted = 0
    for path in files:
        written = subprocess.run([lstopo, "-i", str(path), "--of", "synthetic"], capture_output=True, text=True)
        if written.returncode != 0 or not written.stdout.strip():
            continue  # an asymmetric machine has no synthetic form
        description = written.stdout.strip()
        machine = load_topology(description)
        assert machine.compact_order(allowed_only=False) == lstopo_pu_order(description), path.name
        ours, expected = pinwise_view(machine), lstopo_view(description)
        assert (ours["objects"], ours["numa"]) == (expected["objects"], expected["numa"]), path.name
        assert lstopo_view(to_synthetic(machine))["objects"] == expected["objects"], path.name
        accepted += 1
    assert accepted >= 35


# -- every machine of hwloc's own test suite, as lstopo builds it -------------------------------------

def _xml_version(path: Path) -> str:
    found = re.search(rb'<topology[^>]*\bversion="([0-9.]+)"', path.read_bytes()[:4096])
    return found.group(1).decode() if found else "1"


def _lstopo_reads_v3() -> bool:
    """hwloc 2.x's lstopo refuses XML version 3 ("cannot import XML version 3.0 > 2")."""
    lstopo = shutil.which("lstopo-no-graphics")
    if lstopo is None:
        return False
    version = subprocess.run([lstopo, "--version"], capture_output=True, text=True).stdout.split()
    return bool(version) and not version[-1].startswith(("1.", "2."))


_ALL_XML = sorted(Path(__file__).resolve().parents[2].joinpath("shared", "topologies").rglob("*.xml"))
#: The files the installed lstopo reads (version 3 files need hwloc 3: see test_hwloc_v3_*).
HWLOC_TESTS = [p for p in _ALL_XML if not _xml_version(p).startswith("3") or _lstopo_reads_v3()]
_LSTOPO_NAME = {"machine": "Machine", "group": "Group", "package": "Package", "die": "Die", "numa": "NUMANode",
                "memcache": "MemCache", "l3": "L3Cache", "l2": "L2Cache", "l1": "L1Cache", "core": "Core", "pu": "PU"}


def lstopo_view(source: str | Path) -> dict:
    """What the installed lstopo builds from a file or string (see tests/lstopo_facts.py)."""
    return lstopo_facts.facts(lstopo_facts.lstopo_export(need("lstopo-no-graphics"), source))


def pinwise_view(machine) -> dict:
    from collections import Counter

    from pinwise.topology import walk_all

    objects = Counter()
    for node in walk_all(machine.root):
        kind = _LSTOPO_NAME[str(node.type)]
        objects[(kind, tuple(sorted(node.cpuset)), str(node.os_index) if kind in ("PU", "NUMANode") else None)] += 1
    distances = {frozenset((str(a), str(b), str(matrix.values[i][j])) for i, a in enumerate(matrix.os_indexes)
                           for j, b in enumerate(matrix.os_indexes)) for matrix in machine.distances}
    return {"objects": objects, "pus": machine.compact_order(allowed_only=False),
            "numa": [n.os_index for n in machine.numa_nodes], "allowed": machine.allowed, "distances": distances}


@pytest.mark.skipif(not HWLOC_TESTS, reason="../shared/topologies is not beside the repository")
@pytest.mark.parametrize("path", HWLOC_TESTS, ids=lambda p: p.name)
def test_every_hwloc_test_machine_reads_into_the_tree_lstopo_builds(path, tmp_path):
    """Groups, NUMA nodes with and without CPUs (two per object on KNL), memory-side caches,
    CPU-less objects, 1.x files converted as hwloc 2 converts them, PU and NUMA numbering, allowed
    PUs and NUMA distances: the same as lstopo's, for every file; and pinwise's XML export of the
    machine, read by lstopo, is that machine again."""
    expected = lstopo_view(path)
    machine = load_topology(str(path))
    ours = pinwise_view(machine)
    assert ours["objects"] == expected["objects"]
    assert ours["pus"] == expected["pus"] and ours["numa"] == expected["numa"]
    assert ours["allowed"] == (expected["allowed"] or frozenset(ours["pus"]))
    assert ours["distances"] == expected["distances"]
    exported = tmp_path / "again.xml"
    exported.write_text(to_xml(machine))
    again = lstopo_view(exported)
    assert again["objects"] == expected["objects"] and again["pus"] == expected["pus"]
    assert again["numa"] == expected["numa"] and again["distances"] == expected["distances"]
    assert pinwise_view(parse_xml(exported.read_bytes()))["objects"] == expected["objects"]
    # read back by pinwise, the same tree as drawn (a NUMA node of unknown memory came back with 0 bytes)
    assert render(parse_xml(exported.read_bytes(), source=str(path))) == render(machine)
    again = from_json(to_json(machine))  # and pinwise's own JSON keeps all of it
    assert pinwise_view(again) == ours and again.cpukinds == machine.cpukinds


_V3_FACTS = _V3["files"]


@pytest.mark.skipif(not (lstopo_facts.SHARED / "hwloc-tests-v3").is_dir(),
                    reason="../shared/topologies is not beside the repository")
@pytest.mark.parametrize("name", sorted(_V3_FACTS))
def test_hwloc_v3_machine_reads_into_the_tree_hwloc_3_builds(name):
    """XML version 3 files (hwloc 3.0's own test inputs), which hwloc 2.9's lstopo refuses,
    against the facts hwloc 3.0's lstopo produced for them (tests/lstopo_facts.py, which says how
    to make them again): the same objects, PU and NUMA numbering, allowed PUs and distances
    (16amd64-8n2c-cpusets.xml: 8 Groups, not the 2 of a file read as version 1); and pinwise's
    export of the machine is that machine again."""
    expected = lstopo_facts.from_document(_V3_FACTS[name])
    machine = load_topology(str(lstopo_facts.SHARED / "hwloc-tests-v3" / name))
    ours = pinwise_view(machine)
    assert ours["objects"] == expected["objects"]
    assert ours["pus"] == expected["pus"] and ours["numa"] == expected["numa"]
    assert ours["allowed"] == (expected["allowed"] or frozenset(ours["pus"]))
    assert ours["distances"] == expected["distances"]
    assert pinwise_view(parse_xml(to_xml(machine).encode())) == ours
    assert render(parse_xml(to_xml(machine).encode(), source=str(lstopo_facts.SHARED / "hwloc-tests-v3" / name))) \
        == render(machine)


def test_an_xml_version_beyond_3_is_refused_in_one_line(tmp_path):
    path = tmp_path / "v4.xml"
    path.write_bytes(small_xml().replace(b'version="2.0"', b'version="4.0"'))
    assert_clean_failure(run_pinwise("topo", "-t", str(path)), "version 4.0", "newer than pinwise reads")


def test_cpusets_are_written_as_hwloc_writes_them():
    """Zero words between the first and the last are empty (PU 127: 0x80000000,,,0x0): the same
    strings as lstopo's export, and a 64k-PU machine's XML stays a comma per word, not 11 bytes."""
    import xml.etree.ElementTree as ET

    description = "pack:2 core:64 pu:1"
    theirs = ET.fromstring(subprocess.run([need("lstopo-no-graphics"), "-i", description, "--of", "xml", "-"],
                                          capture_output=True, check=True).stdout)
    ours = ET.fromstring(to_xml(load_topology(description)))
    cpusets = lambda root, kind: [e.get("cpuset") for e in root.iter("object") if e.get("type") == kind]  # noqa: E731
    for kind in ("PU", "Core", "Package"):
        assert cpusets(ours, kind) == cpusets(theirs, kind), kind


# -- what a topology may claim --------------------------------------------------------------------

def _json_with_pu(os_index: int) -> str:
    document = json.loads(to_json(parse_synthetic("pack:1 core:2 pu:1")))
    document["root"]["children"][0]["children"][1]["children"][0]["os_index"] = os_index
    document["allowed"] = [0, os_index]
    return json.dumps(document)


@pytest.mark.parametrize("build, words", [
    (lambda: parse_synthetic("pu:65537"), ["more than 65,536 PUs"]),
    (lambda: parse_synthetic("pack:256 core:256 pu:2"), ["more than 65,536 PUs"]),
    (lambda: parse_synthetic("pack:2 pu:1(indexes=0,1048576)"), ["must be at most 1048575"]),
    (lambda: from_json(_json_with_pu(10 ** 15)), ["PU numbered 1,000,000,000,000,000", "past 1,048,575"]),
    (lambda: from_json(_json_with_pu(1 << 20)), ["past 1,048,575"]),
    (lambda: parse_xml(small_xml(pu1="0x1" + ",0x0" * (1 << 15))), ["names CPUs past 1048575"]),
    (lambda: parse_xml(small_xml(pu1="0x1" + "," * (1 << 20))), ["names CPUs past 1048575"]),
])
def test_a_topology_claims_no_more_than_pinwise_places_threads_on(build, words):
    """Found by the held-out corpus: a PU numbered 10^15 grew memory without bound (a bitmap word
    for every 32 CPUs below it) and pu:1048576 took 91 s; every source is bounded before it is
    built."""
    with pytest.raises(PinwiseError) as refused:
        build()
    for word in words:
        assert word in str(refused.value), str(refused.value)


def test_the_largest_topologies_still_read_and_write():
    flat = parse_synthetic("pu:65536")
    assert flat.nb_pus == 65536 and to_synthetic(from_json(to_json(flat))) == to_synthetic(flat)
    high = from_json(_json_with_pu((1 << 20) - 1))
    assert sorted(high.allowed) == [0, (1 << 20) - 1]
    assert parse_xml(to_xml(high).encode()) == high


@pytest.mark.parametrize("objects, overlapping", [
    ([("package", {0, 1}), ("package", {2, 3}), ("l3", {1, 2})], "L3 with CPUs [1, 2] partly overlaps Package 0"),
    ([("package", {0, 1, 2, 3}), ("core", {0, 1}), ("l2", {1, 2})], "Core with CPUs [0, 1] partly overlaps L2 0"),
    ([("package", {0, 1, 2, 3}), ("core", {2, 3}), ("l1", {1, 2})], "Core with CPUs [2, 3] partly overlaps L1d 0"),
    ([("group", {0, 1, 2}), ("group", {1, 2, 3})], "Group with CPUs [1, 2, 3] partly overlaps Group"),
])
def test_an_object_that_partly_overlaps_another_is_no_tree(objects, overlapping):
    """Objects are placed largest first, each below the deepest object so far that holds its
    PUs; one whose PUs are split between objects is refused, naming both."""
    from pinwise.topology import ObjectSpec, ObjType, build_topology

    specs = [ObjectSpec(ObjType.MACHINE, frozenset(range(4)))]
    specs += [ObjectSpec(ObjType(type_), frozenset(cpus)) for type_, cpus in objects]
    specs += [ObjectSpec(ObjType.PU, frozenset([cpu]), cpu) for cpu in range(4)]
    with pytest.raises(PinwiseError) as refused:
        build_topology(specs, source="test")
    assert overlapping in str(refused.value) and str(refused.value).endswith("not a tree"), str(refused.value)


def test_a_topology_from_a_pipe_or_a_file_of_another_name(tmp_path):
    """-t <(lstopo --of xml) names /dev/fd/63, a pipe that can be read once: read by its content."""
    bash = need("bash")
    xml = tmp_path / "machine"  # no .xml: told by its content too
    xml.write_bytes(to_xml(preset("x7550")).encode())
    for source in (f"<(cat {xml})", str(xml), f"<({PINWISE} topo -t x7550 --of json)"):
        result = subprocess.run([bash, "-c", f"{PINWISE} topo -t {source} --of synthetic"],
                                capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == to_synthetic(preset("x7550"))
    assert_clean_failure(run_pinwise("topo", "-t", "/dev/zero"), "a device, not a file")


def test_cpu_kinds_are_told_by_hwlocs_efficiency_rank(tmp_path):
    """hwloc's efficiency is a kind's rank, 0 the least efficient (lstopo --cpukinds); the file's
    forced_efficiency only orders them (fakecpukinds.xml: 10, 7, 0 read 2, 1, 0 there), and a
    machine of one unnamed kind is kind #0, efficiency 0 (it was "kind -1 (efficiency -1)")."""
    names = {"fakecpukinds.xml": "IntelCore (efficiency 2): PU 3; YouBigcore (efficiency 1): PU 2; MySmallCore "
                                 "(efficiency 0): PU 0,1",
             "power8gpudistances.xml": "kind #0 (efficiency 0): PU "}
    for name, said in names.items():
        path = lstopo_facts.SHARED / "hwloc-tests" / name
        if not path.exists():
            pytest.skip("../shared/topologies is not beside the repository")
        text = run_pinwise("topo", "-t", str(path), check=True).stdout
        assert f"CPU kinds, most performant first: {said}" in text, text
        ranks = subprocess.run([need("lstopo-no-graphics"), "-i", str(path), "--cpukinds"], capture_output=True,
                               text=True, check=True).stdout
        assert sorted(re.findall(r"CPU kind #\d+ efficiency (\d+)", ranks)) == sorted(
            re.findall(r"\(efficiency (\d+)\)", text))


def test_numa_nodes_below_a_package_are_drawn_where_they_hang():
    """fakeheterodistances.xml hangs a NUMA node under each L3: the package lines inlined their
    PUs and dropped the nodes (the legend said NUMA x8, the tree showed none). Each is drawn now,
    on its L3's line, as lstopo draws it there."""
    path = lstopo_facts.SHARED / "hwloc-tests" / "fakeheterodistances.xml"
    if not path.exists():
        pytest.skip("../shared/topologies is not beside the repository")
    tree = render(load_topology(str(path))).split("\nMachine\n", 1)[1]
    assert [int(n) for n in re.findall(r"\[NUMA (\d+) ", tree)] == list(range(8)), tree
    assert re.search(r"^        L3 0 \(5\.0MiB\) \[NUMA 0 \([^)]*\)\] > PU 0: 0$", tree, re.M), tree


def test_a_1x_file_without_numa_nodes_keeps_the_machines_memory():
    """hwloc 1.x wrote a machine without NUMA nodes with its memory on the Machine object; hwloc 2
    makes one NUMA node and hangs that memory on it (lstopo: NUMANode P#0 31GB). The node pinwise
    made had none."""
    path = lstopo_facts.SHARED / "hwloc-tests" / "8em64t-2p2ca2co-nonodesets.v1.xml"
    if not path.exists():
        pytest.skip("../shared/topologies is not beside the repository")
    memory = int(re.search(r'type="Machine"[^>]*local_memory="(\d+)"', path.read_text()).group(1))
    (node,) = load_topology(str(path)).numa_nodes
    assert node.local_memory == memory == 33738452992
    shown = subprocess.run([need("lstopo-no-graphics"), "-i", str(path), "--of", "console"], capture_output=True,
                           text=True, check=True).stdout
    assert "NUMANode L#0 (P#0 31GB)" in shown and "[NUMA 0 (32175.5MiB)]" in render(load_topology(str(path)))


def test_numa_nodes_that_are_not_allowed_are_shown_as_pus_that_are_not():
    """A file whose allowed_nodeset leaves NUMA 2-7 out: the picture named PU 16-63 as not allowed
    and drew NUMA 2-7 as if they were; they are in parentheses now, and named on that line."""
    path = lstopo_facts.SHARED / "hwloc-tests-v3" / "irregulargroups-disallowed.xml"
    if not path.exists():
        pytest.skip("../shared/topologies is not beside the repository")
    text = render(load_topology(str(path)))
    assert "  not allowed (allowed_cpuset in the XML file): PU 16-63, NUMA 2-7, shown as (n)" in text, text
    assert "[NUMA 1 (31.0GiB)]" in text and all(f"[(NUMA {n} (31.0GiB))]" in text for n in range(2, 8)), text


def test_only_the_live_machines_allowed_pus_are_said_to_be_this_processs():
    """A file or preset's allowed PUs are what it allows, not this process's CPUs."""
    assert render(preset("x7550")).splitlines()[0] == "Machine: 64 PUs, 64 allowed  [x7550]"
    live = render(load_topology(None)).splitlines()[0]
    assert re.fullmatch(rf"Machine: \d+ PUs, {len(os.sched_getaffinity(0))} allowed to this process  "
                        r"\[this machine \(sysfs\)\]", live), live
