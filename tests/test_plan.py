"""The Plan: one type for "thread -> CPUs", its vocabularies, its file, and the machine it is for."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from conftest import assert_clean_failure, need, run_pinwise

from pinwise.errors import PinwiseError
from pinwise.placement import Placement, resolve
from pinwise.plan import Machine, Plan, Rounds, read_plan
from pinwise.topology import parse_synthetic, preset


def test_a_plan_for_another_machine_is_flagged():
    two_packages, one_package = parse_synthetic("pack:2 core:1 pu:1"), parse_synthetic("pack:1 core:2 pu:1")
    plan = resolve("compact", two_packages)
    assert plan.cpulist() == "0,1" and plan.machine == Machine.of(two_packages)
    assert plan.check_machine(two_packages) is None
    with pytest.raises(PinwiseError) as refused:
        plan.check_machine(one_package)
    message = str(refused.value)
    assert "made for another machine (pack:2 core:1 pu:1)" in message
    assert "this one is pack:1 core:2 pu:1" in message and "--any-machine" in message
    assert plan.check_machine(one_package, any_machine=True).endswith("running it anyway (--any-machine)")
    assert Plan.from_cpus([0, 1]).check_machine(one_package) is None  # a bare CPU list is for any machine


def test_the_machine_check_reaches_the_command_line(tmp_path):
    path = tmp_path / "plan.json"
    path.write_text(resolve("compact", parse_synthetic("pack:2 core:1 pu:1")).to_json())
    assert_clean_failure(run_pinwise("run", "-t", "pack:1 core:2 pu:1", "--mapping", str(path), "--print"),
                         "made for another machine")
    allowed = run_pinwise("run", "-t", "pack:1 core:2 pu:1", "--mapping", str(path), "--print", "--any-machine")
    assert allowed.returncode == 0 and "pinwise run --cpus 0,1" in allowed.stdout
    assert allowed.stderr.startswith("pinwise: warning: this plan was made for another machine")


def test_json_round_trip_keeps_every_field():
    plan = Plan(((3,), (1, 2), (0,)), skip_mask=0x2, source="by hand", repeat_from=1, policy="locality", seed=9,
                creator="beside the last thread it creates", rounds=Rounds(2, 3, 7), machine=Machine("abc", "pack:1"))
    again = Plan.from_json(plan.to_json(), "f.json")
    assert again.slots == plan.slots and again.skip_mask == 2 and again.repeat_from == 1
    assert (again.policy, again.seed, again.creator, again.rounds, again.machine) == \
        ("locality", 9, "beside the last thread it creates", Rounds(2, 3, 7), Machine("abc", "pack:1"))
    assert again.source == "mapping f.json (by hand)"


def test_version_1_mapping_files_still_run(tmp_path):
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"format": "pinwise-mapping", "version": 1, "policy": "locality", "threads": 5,
                                "topology": "x", "pus": [1, 0, 0, 1, 1], "rounds": {"size": 4, "count": 3,
                                                                                   "threads": 13}}))
    plan = read_plan(path)
    assert plan.pus == (1, 0, 0, 1, 1) and plan.repeat_from == 1 and plan.machine is None
    assert plan.traced_threads == 13


@pytest.mark.parametrize("document, words", [
    ("{", "not valid JSON"),
    ('{"format": "pinwise-topology"}', "not a pinwise mapping file"),
    ('{"format": "pinwise-mapping", "pus": []}', "non-empty list"),
    ('{"format": "pinwise-mapping", "pus": [0, -1]}', "not a CPU number"),
    ('{"format": "pinwise-mapping", "pus": [0], "repeat_from": "1"}', "wrong type"),
    ('{"format": "pinwise-mapping", "pus": [0, 1], "repeat_from": 5}', "repeats from slot 5"),
    ('{"format": "pinwise-mapping", "pus": [0], "machine": {"shape": "x"}}', "incomplete"),
])
def test_damaged_mapping_files_give_one_clear_line(tmp_path, document, words):
    path = tmp_path / "bad.json"
    path.write_text(document)
    assert_clean_failure(run_pinwise("run", "--mapping", str(path), "--", "true"), words)


def test_vocabularies_of_one_plan():
    plan = resolve(Placement(policy="scatter", threads=4), preset("nehalem"))
    assert plan.cpulist() == "0,4,1,5"
    assert plan.omp_places() == "{0},{4},{1},{5}"
    assert plan.gomp_cpu_affinity() == "0 4 1 5"
    assert plan.kmp_affinity() == "granularity=fine,explicit,proclist=[0,4,1,5]"
    assert plan.likwid_pin() == "likwid-pin -c 0,4,1,5"
    assert plan.taskset() == "taskset -c 0,1,4,5"
    assert plan.environment() == {"PINWISE_PLAN": "0;4;1;5"}


def test_a_plan_is_frozen():
    plan = Plan.from_cpus([0])
    with pytest.raises(AttributeError):
        plan.slots = ((1,),)
    topology = preset("nehalem")
    with pytest.raises(AttributeError):
        topology.allowed = frozenset([0])
    assert topology.restricted([0, 1]).allowed == {0, 1} and topology.allowed == set(range(8))


def test_mapping_files_of_the_previous_release_still_run_on_their_machine():
    """Plans remember their machine's fingerprint. NUMA nodes became memory children (hwloc 2's
    model); a machine whose structure did not change keeps its fingerprint, so mapping files written
    before still run. These documents are what pinwise wrote before that change."""
    for name, fingerprint, shape in (("nehalem", "b5f64df3b4de63ac", "pack:2 numa:1 l3:1 l2:4 l1:1 core:1 pu:1"),
                                     ("x7550", "e76c14c11746abb8", "pack:4 numa:1 l3:1 l2:8 l1:1 core:1 pu:2"),
                                     ("core2", "89a7a31fc6d0bea7", "numa:1 pack:2 l2:2 l1:2 core:1 pu:1")):
        document = json.dumps({"format": "pinwise-mapping", "version": 2, "policy": "compact", "source": "policy compact",
                               "threads": 2, "pus": [0, 1], "skip_mask": 0, "repeat_from": 0,
                               "machine": {"fingerprint": fingerprint, "shape": shape}})
        assert Plan.from_json(document).check_machine(preset(name)) is None, name


def test_a_likwid_line_that_wraps_round_starts_the_plans_openmp_threads(tmp_path):
    """likwid-pin sets an unset OMP_NUM_THREADS to its list's length: a plan of 4 threads on one
    CPU, written `likwid-pin -c 0`, started one OpenMP thread. The line is run as printed."""
    plan = resolve(Placement(policy="primary", threads=4), preset("nehalem"))
    line = plan.likwid_pin()
    assert line == "OMP_NUM_THREADS=4 likwid-pin -c 0"
    assert resolve(Placement(policy="scatter", threads=4), preset("nehalem")).likwid_pin().startswith("likwid-pin")
    source = tmp_path / "team.c"
    source.write_text('#include <omp.h>\n#include <stdio.h>\n'
                      'int main(void) { printf("%d\\n", omp_get_max_threads()); return 0; }\n')
    exe = tmp_path / "team"
    subprocess.run(["gcc", "-fopenmp", "-o", str(exe), str(source)], check=True)
    need("likwid-pin")
    environment = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    done = subprocess.run(f"{line} -q {exe}", shell=True, env=environment, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.split()[-1] == "4", (done.stdout, done.stderr)
