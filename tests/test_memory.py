"""Memory placement (run --membind/--interleave/--preferred/--mempolicy/--mem), CPU kinds, and
what likwid-pin does with CPUs that do not exist: the rest of speaking numactl, hwloc and likwid."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest
from conftest import compile_program, need, run_pinwise

from pinwise import PinwiseError
from pinwise.pinning import run_program
from pinwise.pinning.memory import MemoryPolicy
from pinwise.plan import Plan
from pinwise.topology import load_topology, read_sysfs

HWLOC_TESTS = Path(__file__).resolve().parents[2] / "shared" / "topologies" / "hwloc-tests"


@pytest.fixture(scope="module")
def numa_exe(build_dir):
    return compile_program("numa_maps.c", build_dir)


def policy_word(numa_maps_line: str) -> str:
    """numa_maps' second word: the policy (``bind:0``, ``prefer (many):0`` keeps its space)."""
    return re.match(r"\S+ (prefer \(many\):\S+|\S+)", numa_maps_line).group(1)


MODES = [("--membind", "0", "bind:0"), ("--interleave", "0", "interleave:0"), ("--preferred", "0", "prefer:0"),
         ("--mempolicy", "local", "local"), ("--mem", "local-to-thread", "bind:0")]


@pytest.mark.parametrize("option,value,word", MODES, ids=[m[0] + "=" + m[1] for m in MODES])
def test_every_thread_gets_the_memory_policy_and_verify_reads_it_back(numa_exe, option, value, word):
    """The program's own numa_maps shows the policy, and --verify reads every thread's from the
    kernel (this machine has node 0 only: each mode is checked by the word the kernel uses)."""
    done = run_pinwise("run", "--cpus", "1,0", option, value, "--verify", "--", str(numa_exe), "3", check=True)
    assert policy_word(done.stdout) == word
    rows = [line.strip("│ ").split("│") for line in done.stderr.splitlines() if line.startswith("│")]
    assert len(rows) == 4 and all(row[5].strip() == word for row in rows), done.stderr
    assert "memory policy as asked in every thread" in done.stderr


def test_the_python_api_logs_each_threads_policy(numa_exe):
    result = run_program([str(numa_exe), "2"], Plan.from_cpus([0, 1]), memory=MemoryPolicy("interleave", (0,)),
                         output=subprocess.DEVNULL)
    assert [t.mempolicy for t in result.threads] == ["interleave:0"] * 3
    unasked = run_program([str(numa_exe), "2"], Plan.from_cpus([0, 1]), output=subprocess.DEVNULL)
    assert all(t.mempolicy is None for t in unasked.threads)


def test_memory_policy_also_with_omp_and_without_a_plan(numa_exe):
    assert policy_word(run_pinwise("run", "--cpus", "0", "--omp", "--membind", "0", "--no-verify", "--",
                                   str(numa_exe), "1", check=True).stdout) == "bind:0"
    assert policy_word(run_pinwise("run", "--policy", "os", "--interleave", "0", "--no-verify", "--",
                                   str(numa_exe), "1", check=True).stdout) == "interleave:0"


@pytest.mark.parametrize("args,message", [
    (["--membind", "5"], "NUMA node 5 does not exist"),
    (["--preferred", "0-1"], "NUMA node 1 does not exist"),
    (["--membind", "0", "--interleave", "0"], "not allowed with argument"),
    (["--membind", "x"], "NUMA nodes of --membind"),
    (["--interleave", " "], "empty NUMA nodes of --interleave: give node numbers"),
])
def test_bad_memory_options_are_one_clear_error(numa_exe, args, message):
    done = run_pinwise("run", "--cpus", "0", *args, "--", str(numa_exe))
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr


def test_a_preferred_node_is_one_node():
    with pytest.raises(PinwiseError, match="one NUMA node"):
        MemoryPolicy("preferred", (0, 1))


def test_local_to_thread_binds_each_thread_to_its_cpus_node_on_a_bigger_machine():
    x7550 = load_topology("x7550")
    memory = MemoryPolicy.for_machine("local-to-thread", None, x7550)
    assert memory.expected(0) == "bind:0" and memory.expected(17) == "bind:1" and memory.expected(63) == "bind:3"
    assert memory.environment()["PINWISE_MEMPOLICY"] == "per-thread:0=0-15/1=16-31/2=32-47/3=48-63"


def _printed_memory_lines(*args: str) -> dict[str, str]:
    printed = run_pinwise("run", *args, "--print", check=True).stdout
    block = printed.split("\nmemory: ", 1)[1].splitlines()[1:]
    return {line.split()[0]: line.split(None, 1)[1] for line in block}


@pytest.mark.parametrize("option,value", [m[:2] for m in MODES[:4]], ids=[m[0] for m in MODES[:4]])
def test_every_printed_memory_line_gives_the_policy_pinwise_gives(numa_exe, option, value):
    """numactl and hwloc-bind run as printed give the program the policy pinwise gives it.
    likwid-pin's -i interleaves over its CPUs' nodes; on a one-node machine it says so and skips."""
    lines = _printed_memory_lines("--cpus", "0", option, value)
    ours = policy_word(run_pinwise("run", "--cpus", "0", option, value, "--no-verify", "--", str(numa_exe), "1",
                                   check=True).stdout)
    for tool in ("numactl", "hwloc-bind"):
        if lines[tool].startswith("(withheld"):
            assert option == "--preferred" and tool == "hwloc-bind"
            continue
        command = shlex.split(lines[tool])
        need(command[0])
        theirs = subprocess.run(command + ["--", str(numa_exe), "1"] if tool == "hwloc-bind" else command + [str(numa_exe), "1"],
                                capture_output=True, text=True, check=True).stdout
        assert policy_word(theirs) == ours, (lines[tool], theirs)
    if option == "--interleave":
        command = shlex.split(lines["likwid-pin"])
        done = subprocess.run([need("likwid-pin"), *command[1:], str(numa_exe), "1"], capture_output=True, text=True)
        if len(read_sysfs().numa_nodes) == 1:
            assert "only one NUMA node available" in done.stdout + done.stderr
        else:
            assert policy_word(done.stdout.splitlines()[-1]) == ours
    else:
        assert lines["likwid-pin"].startswith("(withheld")


def test_likwid_interleave_line_only_when_its_nodes_are_the_plans():
    assert _printed_memory_lines("-t", "x7550", "--expr", "S0:0@S1:0", "--interleave", "0-1")["likwid-pin"] \
        == "likwid-pin -i -c 0,16"
    assert _printed_memory_lines("-t", "x7550", "--expr", "S0:0@S1:0", "--interleave", "0-3")["likwid-pin"] \
        .startswith("(withheld")


# -- CPU kinds ----------------------------------------------------------------------------------------

@pytest.mark.skipif(not (HWLOC_TESTS / "fakecpukinds.xml").exists(), reason="../shared/topologies is not beside")
@pytest.mark.parametrize("kinds,compact,scatter", [
    ("performance", "3,2,0,1", "3,2,0,1"),   # IntelCore (10) on PU 3, YouBigcore (7) on 2, small cores 0,1
    ("efficiency", "0,1,2,3", "0,1,2,3"),
    ("any", "0,2,1,3", "0,1,2,3"),
])
def test_compact_and_scatter_fill_the_preferred_cpu_kind_first(kinds, compact, scatter):
    xml = str(HWLOC_TESTS / "fakecpukinds.xml")
    for policy, expected in (("compact", compact), ("scatter", scatter)):
        printed = run_pinwise("run", "-t", xml, "--policy", policy, "--cpu-kinds", kinds, "--print", check=True).stdout
        assert f"pinwise run --cpus {expected}" in printed, printed


def test_cpu_kinds_of_a_hybrid_intel_from_sysfs(tmp_path):
    """The kernel lists P-cores under /sys/devices/cpu_core and E-cores under cpu_atom."""
    system = tmp_path / "devices" / "system"
    for cpu in range(4):
        topo = system / "cpu" / f"cpu{cpu}" / "topology"
        topo.mkdir(parents=True)
        (topo / "physical_package_id").write_text("0\n")
        (topo / "core_cpus_list").write_text(f"{cpu}\n")
        (topo / "core_id").write_text(f"{cpu}\n")
        (topo / "package_cpus_list").write_text("0-3\n")
    (system / "cpu" / "online").write_text("0-3\n")
    for name, cpus in (("cpu_core", "0-1"), ("cpu_atom", "2-3")):
        (tmp_path / "devices" / name).mkdir()
        (tmp_path / "devices" / name / "cpus").write_text(cpus + "\n")
    machine = read_sysfs(system, affinity={0, 1, 2, 3}, cgroup_cpus=None)
    assert [(k.name, sorted(k.cpuset), k.efficiency) for k in machine.cpukinds] == \
        [("IntelAtom", [2, 3], 0), ("IntelCore", [0, 1], 1)]
    assert machine.preferring("efficiency").compact_order() == [2, 3, 0, 1]
    assert machine.compact_order() == [0, 1, 2, 3]


# -- likwid-pin and CPUs that do not exist ----------------------------------------------------------------

@pytest.mark.parametrize("expression", ["0,7", "0-5", "9", "N:0-5"])
def test_pinwise_refuses_cpus_that_do_not_exist_and_says_what_likwid_pin_does(expression):
    likwid = subprocess.run([need("likwid-pin"), "-c", expression, "-p"], capture_output=True, text=True)
    said = run_pinwise("run", "--expr", expression, "--print")
    assert said.returncode == 2
    kept = re.search(r"likwid-pin would drop \w+ and pin to ([0-9,]+) only", said.stderr)
    if kept:
        assert likwid.stdout.strip().splitlines()[-1] == kept.group(1), likwid.stdout
    else:
        assert "Failed to parse cpulist" in likwid.stdout + likwid.stderr
        assert "likwid-pin would fail" in said.stderr or "likwid-pin 5.2 refuses it too" in said.stderr


@pytest.mark.parametrize("nodes", [(0,), (0, 1), (0, 1, 3), (0, 2), (1, 2, 3)])
def test_node_lists_as_the_kernel_and_hwloc_write_them(nodes):
    """numa_maps writes every run of two nodes or more as a range; hwloc-bind takes ranges but no
    lists, so several runs are several locations (checked with hwloc-calc on a 4-node machine)."""
    from pinwise.pinning.memory import hwloc_locations, kernel_list

    expected = {(0,): "0", (0, 1): "0-1", (0, 1, 3): "0-1,3", (0, 2): "0,2", (1, 2, 3): "1-3"}[nodes]
    assert kernel_list(nodes) == expected
    done = subprocess.run([need("hwloc-calc"), "-i", "numa:4 pack:1 core:1 pu:1", "-p",
                           *hwloc_locations(nodes).split(), "--nodeset-output"], capture_output=True, text=True, check=True)
    assert int(done.stdout.strip(), 16) == sum(1 << n for n in nodes), done
