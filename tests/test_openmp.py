"""OpenMP places (pinwise.openmp) and proc_bind over them, against the real libgomp told the
machine through a fake sysfs and a fake affinity (tests/gomp_fake.py)."""

from __future__ import annotations

import shutil

import pytest
from conftest import assert_clean_failure, run_pinwise

from pinwise import PinwiseError
from pinwise.openmp import is_places, places
from pinwise.placement import Placement, resolve
from pinwise.topology import load_topology

#: SMT siblings numbered apart (0 and 8) and two L3s per package; SMT siblings together; and one
#: package with one L3, where libgomp 12's ll_caches is right.
MACHINES = ["pack:2 [numa] l3:2 core:2 pu:2(indexes=2*8:1*2)", "pack:2 [numa] l3:1 core:4 pu:2",
            "pack:1 l3:1 core:6 pu:1"]
PLACE_LISTS = ["threads", "cores", "sockets", "numa_domains", "CORES", "cores(2)", "Threads(3)", "numa_domains(1)",
               "{0,8}", "0,8", "{0:2}", "{0:2:8}", "{0:4,!2}", "{0:2},{4:2},!{0:2}", "{0}:4:2", "{3}:4:-1",
               "{0:2}:3", "0:4", " {1} , {2} ", "{0,20}", "{15}:3:1", "{0:4}:4:8", "{0:4}:2:4"]
#: What libgomp refuses (it then falls back to its default places): pinwise refuses in one line.
BAD_PLACE_LISTS = ["{0,!8}", "{0}:4:-1", "{0}:70000", "{20}", "{1},!{2}", "{0", "cores(x)", "{}"]


@pytest.fixture(scope="module")
def gomps(tmp_path_factory):
    from gomp_fake import FakeGomp

    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    return {text: FakeGomp(load_topology(text), tmp_path_factory.mktemp("gomp")) for text in MACHINES}


@pytest.mark.parametrize("machine", MACHINES)
def test_places_are_the_ones_libgomp_builds(gomps, machine):
    topology = load_topology(machine)
    for text in PLACE_LISTS + ["ll_caches"] * (machine == MACHINES[-1]):
        libgomp, _ = gomps[machine].run(OMP_PLACES=text)
        try:
            assert places(text, topology) == libgomp, text
        except PinwiseError:  # a list with no CPU of this machine: libgomp refuses it too (no places)
            assert libgomp == [], text
    for text in BAD_PLACE_LISTS:
        assert gomps[machine].run(OMP_PLACES=text)[0] == [], text  # libgomp refused it
        with pytest.raises(PinwiseError, match="OMP_PLACES"):
            places(text, topology)


def test_ll_caches_are_one_place_per_last_level_cache():
    """Where libgomp 12 makes only the first cache's place, the OpenMP specification's one place
    per last-level cache (two L3s per package here: 0,1 with their siblings 8,9, ...)."""
    topology = load_topology(MACHINES[0])
    assert places("ll_caches", topology) == [(0, 1, 8, 9), (2, 3, 10, 11), (4, 5, 12, 13), (6, 7, 14, 15)]


@pytest.mark.parametrize("machine", MACHINES[:2])
def test_close_and_spread_over_threads_and_cores_places_are_libgomps_for_1_to_32_threads(gomps, machine):
    """Each thread's place, and so its PUs, as libgomp binds it under OMP_PROC_BIND close and
    spread over OMP_PLACES threads and cores, for every team of 1 to 32 threads."""
    topology = load_topology(machine)
    differences = []
    for text in ("threads", "cores"):
        for bind in ("close", "spread"):
            for threads in range(1, 33):
                libgomp_places, team = gomps[machine].run(OMP_PLACES=text, OMP_PROC_BIND=bind,
                                                          OMP_NUM_THREADS=str(threads))
                plan = resolve(Placement(policy=bind, places=text, threads=threads), topology)
                if list(plan.slots) != [libgomp_places[p] for p in team]:
                    differences.append((text, bind, threads))
    assert not differences, differences[:5]


def test_places_in_the_cli():
    topology = "pack:2 [numa] l3:2 core:2 pu:2(indexes=2*8:1*2)"
    printed = run_pinwise("run", "-t", topology, "--policy", "spread", "--places", "cores", "-n", "3", "--print",
                          check=True).stdout
    assert 'OMP_PLACES="{0,8},{3,11},{6,14}"' in printed and 'pinwise run --cpus "{0,8},{3,11},{6,14}"' in printed
    assert "likwid-pin    (withheld: it gives each thread one CPU" in printed
    again = run_pinwise("run", "-t", topology, "--cpus", "{0,8},{3,11},{6,14}", "--print", check=True).stdout
    assert again.split("plan:")[1].splitlines()[1:] == printed.split("plan:")[1].splitlines()[1:]
    assert "(0,8)" not in run_pinwise("run", "-t", topology, "--cpus", "cores", "--print", check=True).stdout
    assert_clean_failure(run_pinwise("run", "-t", topology, "--policy", "compact", "--places", "cores", "--print"),
                         "--places goes with")
    assert_clean_failure(run_pinwise("run", "-t", topology, "--cpus", "{0:4}:70000", "--print"), "OMP_PLACES")
    for counted in ("cores(0)", "threads(0)", "sockets( 0 )"):  # no places to put a thread on: refused, as libgomp does
        assert_clean_failure(run_pinwise("run", "-t", topology, "--policy", "close", "--places", counted, "--print"),
                             "a count of 0 places")


@pytest.mark.parametrize("text, answer", [("cores", True), ("numa_domains(2)", True), ("{0,8}", True),
                                          ("0,8", False), ("S0:0-1", False), ("core:0", False)])
def test_places_are_told_from_cpu_lists_and_other_dialects(text, answer):
    assert is_places(text) is answer
