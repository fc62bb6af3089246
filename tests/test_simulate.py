"""`pinwise simulate`: the cache simulator against cachegrind (the exact reference for one core),
and placements whose effect the papers and the blog name: locality against distance on a
neighbour pattern, contending pairs together against apart, and compact against scatter for
private streams on two packages. Every run is a real Valgrind run of a real program."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import numpy as np
import pytest
from conftest import assert_clean_failure, compile_program, eventually, run_pinwise
from lstopo_facts import SHARED as TOPOLOGIES

from pinwise.bench import build_candidates
from pinwise.errors import PinwiseError
from pinwise.pinning.launcher import NATIVE_DIR
from pinwise.simmachine import machine_model
from pinwise.topology import load_topology
from pinwise.trace import REP_MOVSB_TUNABLE, SIM_TOOL, tool_environment

PATTERNS = str(NATIVE_DIR / "bin" / "patterns")
PAIRS = str(NATIVE_DIR / "bin" / "pairs")
pytestmark = pytest.mark.skipif(shutil.which("valgrind") is None or not SIM_TOOL.exists(),
                                reason="Valgrind and pinwise's simulator are needed")

#: One core under an L2 of 2 MiB, 16 ways, and an L1d of 32 KiB, 8 ways, 64-byte lines: the
#: geometry of cachegrind's --D1=32768,8,64 --LL=2097152,16,64.
CACHEGRIND_XML = """<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE topology SYSTEM "hwloc2.dtd">
<topology version="2.0">
 <object type="Machine" os_index="0" cpuset="0x00000001" complete_cpuset="0x00000001" gp_index="1">
  <object type="Package" os_index="0" cpuset="0x00000001" complete_cpuset="0x00000001" gp_index="2">
   <object type="L2Cache" cpuset="0x00000001" complete_cpuset="0x00000001" gp_index="3" cache_size="2097152"
           depth="2" cache_linesize="64" cache_associativity="16" cache_type="0">
    <object type="L1Cache" cpuset="0x00000001" complete_cpuset="0x00000001" gp_index="4" cache_size="32768"
            depth="1" cache_linesize="64" cache_associativity="8" cache_type="1">
     <object type="Core" os_index="0" cpuset="0x00000001" complete_cpuset="0x00000001" gp_index="5">
      <object type="PU" os_index="0" cpuset="0x00000001" complete_cpuset="0x00000001" gp_index="6"/>
     </object>
    </object>
   </object>
  </object>
 </object>
</topology>
"""


def simulated(*arguments: str) -> dict:
    result = run_pinwise("simulate", "--json", *arguments, check=True, timeout=600)
    return json.loads(result.stdout)


def cachegrind(tmp_path, argv: list[str]) -> dict[str, int]:
    out = tmp_path / "cachegrind.out"
    env = {**os.environ, "GLIBC_TUNABLES": REP_MOVSB_TUNABLE}  # the memcpy pinwise's tools run with
    subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=yes", "--D1=32768,8,64", "--LL=2097152,16,64",
                    f"--cachegrind-out-file={out}", *argv], check=True, capture_output=True, env=env, timeout=600)
    lines = out.read_text().splitlines()
    events = next(line for line in lines if line.startswith("events:")).split()[1:]
    totals = dict(zip(events, map(int, next(line for line in lines if line.startswith("summary:")).split()[1:])))
    return {"D1": totals["D1mr"] + totals["D1mw"], "LL": totals["DLmr"] + totals["DLmw"]}


@pytest.mark.parametrize("walk", ["stream", "stride", "random", "modify"])
def test_one_core_misses_match_cachegrind_within_two_percent(tmp_path, build_dir, walk):
    walker = compile_program("memwalk.c", build_dir)
    xml = tmp_path / "one-core.xml"
    xml.write_text(CACHEGRIND_XML)
    argv = [str(walker), walk, "8", "2"]
    ours = simulated("-t", str(xml), "--policies", "compact", "--inclusive", "no", "--", *argv)
    level = ours["placements"][0]["levels"]
    assert list(level) == ["L1d", "L2"]  # named as the topology names its caches
    reference = cachegrind(tmp_path, argv)
    assert reference["D1"] > 100_000 and reference["LL"] > 100_000  # the walks do miss
    assert level["L1d"]["misses"] == pytest.approx(reference["D1"], rel=0.02)
    assert level["L2"]["misses"] == pytest.approx(reference["LL"], rel=0.02)
    assert level["L2"]["accesses"] == level["L1d"]["misses"]  # the last level sees the first's misses


def test_an_instruction_that_reads_and_writes_a_word_is_one_access(tmp_path, build_dir):
    """memwalk's modify walk changes each word with one instruction (`lock add`, and a plain `add`
    to memory on every 8th word) where the stream walk reads each word and writes every 8th: the
    same number of accesses when a read-modify-write is one (as a core's read-for-ownership makes
    it; cachegrind counts a plain modify once too, and `lock add`'s load apart). Counted as a read
    and a write each, the modify walk would make 1.7 times as many."""
    walker = compile_program("memwalk.c", build_dir)
    xml = tmp_path / "one-core.xml"
    xml.write_text(CACHEGRIND_XML)
    accesses = {}
    for walk in ("stream", "modify"):
        found = simulated("-t", str(xml), "--policies", "compact", "--", str(walker), walk, "8", "2")
        accesses[walk] = found["placements"][0]["levels"]["L1d"]["accesses"]
    assert accesses["stream"] > 3_000_000
    assert accesses["modify"] == pytest.approx(accesses["stream"], rel=0.01)


def neighbour_matrix(threads: int) -> np.ndarray:
    matrix = np.zeros((threads, threads))
    for i in range(threads - 1):
        matrix[i, i + 1] = matrix[i + 1, i] = 1000
    return matrix


def test_locality_beats_distance_on_a_neighbour_pattern(tmp_path):
    """Diener et al. section 6's machine shape: 2 packages x 2 L2 x 2 cores, 8 threads."""
    comm = tmp_path / "neighbour.csv"
    np.savetxt(comm, neighbour_matrix(8), fmt="%d", delimiter=",")
    found = simulated("-t", "pack:2 l2:2 core:2 pu:1", "--comm", str(comm), "--policies", "locality,distance",
                      "--", PATTERNS, "neighbour", "-n", "8", "-i", "300")
    by = {p["policy"]: p for p in found["placements"]}
    assert by["locality"]["levels"]["L2"]["misses"] <= 0.8 * by["distance"]["levels"]["L2"]["misses"]
    dram = {name: p["dram"]["local"] + p["dram"]["remote"] for name, p in by.items()}
    assert dram["locality"] < dram["distance"]
    assert set(by["locality"]) >= {"policy", "cpus", "levels", "invalidations", "transfers", "dram", "cycles",
                                   "cycles_per_thread"}
    assert len(by["locality"]["cycles_per_thread"]) == found["threads"] == 8
    assert by["locality"]["cycles"] == sum(by["locality"]["cycles_per_thread"])


def test_contending_pairs_together_transfer_far_less_than_apart(tmp_path):
    """On this machine's own topology: the blog's pairs together move their lines between
    caches a hundredth as often as pairs apart, and the simulated ranking is the one
    benchmarks/pairs.py measures (together faster; the benchmark prints both side by side)."""
    found = simulated("--policies", "", "--placement", "together=1,0,0,1", "--placement", "apart=1,0,1,0",
                      "--", PAIRS, "-r", "1", "-i", "100000")
    by = {p["policy"]: p for p in found["placements"]}
    moved = {name: sum(p["transfers"].values()) for name, p in by.items()}
    assert moved["apart"] > 1000 and moved["together"] * 20 < moved["apart"]
    assert by["together"]["invalidations"] * 20 < by["apart"]["invalidations"]
    assert by["together"]["critical_path"] < by["apart"]["critical_path"]


def test_threads_on_one_pu_take_turns_in_the_critical_path(tmp_path):
    """The critical path is the busiest PU's cycles: threads a placement stacks on one PU run in
    turns there (primary: the sum of all), threads with a PU each in parallel (the slowest one);
    a saved simulation reads back the same."""
    from pinwise.simulate import DramCounts, PlacementResult, read_simulation

    result = PlacementResult("x", [0, 1], {}, 0, {}, DramCounts(0, 0), [5, 7, 3], [0, 0, 1])
    assert result.critical_path == 12 and result.cycles == 15
    assert PlacementResult("y", [0, 1], {}, 0, {}, DramCounts(0, 0), [5, 7, 3]).critical_path == 7
    saved = tmp_path / "sim.json"
    found = simulated("-t", "pack:1 core:4 pu:1", "-n", "4", "--policies", "compact,primary", "-o", str(saved), "--",
                      PATTERNS, "private", "-n", "4", "-i", "50")
    by = {p["policy"]: p for p in found["placements"]}
    assert by["primary"]["thread_pus"] == [0, 0, 0, 0] and len(set(by["compact"]["thread_pus"])) == 4
    assert by["primary"]["critical_path"] == sum(by["primary"]["cycles_per_thread"])
    assert by["compact"]["critical_path"] == max(by["compact"]["cycles_per_thread"])
    assert by["primary"]["critical_path"] > 2 * by["compact"]["critical_path"]  # four threads' work on one PU
    assert [p.critical_path for p in read_simulation(str(saved)).placements] == \
        [p["critical_path"] for p in found["placements"]]


@pytest.mark.parametrize("threads", [2, 4])
def test_scatter_has_fewer_last_level_misses_than_compact_for_private_streams(threads):
    """A fixed problem (12 MiB) split over the threads, on two packages of one 8 MiB L3 each:
    compact puts it all under one L3, scatter halves it (the NPB paper: compact hurts 2 and 4
    threads)."""
    found = simulated("-t", "pack:2 l3:1(size=8MiB) core:4 pu:1", "-n", str(threads), "--policies", "compact,scatter",
                      "--", PATTERNS, "private", "-n", str(threads), "-i", str(2400 // threads),
                      "-z", str(12288 // threads))
    by = {p["policy"]: p for p in found["placements"]}
    assert by["scatter"]["levels"]["L3"]["misses"] < 0.5 * by["compact"]["levels"]["L3"]["misses"]


def test_a_twelve_mib_l3_is_simulated_at_its_size(build_dir):
    """tests/programs/socket_sets.c: four threads of 2,304 KiB each, 9 MiB under one E5620 socket's
    12 MiB, 16-way L3 (12,288 sets) with compact. Simulated at its size (no rounding down to 8
    MiB, the old model's), every placement misses only the first touch of each line; an 8 MiB
    L3 misses every line of every pass under compact (the NPB paper's per-socket capacity)."""
    exe = str(compile_program("socket_sets.c", build_dir))
    first_touch = 4 * 2304 * 1024 // 64
    found = simulated("-t", "e5620", "-n", "4", "--policies", "compact,scatter", "--", exe)
    assert not any("rounded" in note or "L3: 12MiB" in note for note in found["notes"]), found["notes"]
    for placement in found["placements"]:
        assert first_touch <= placement["levels"]["L3"]["misses"] < 1.05 * first_touch, placement
    smaller = simulated("-t", "pack:2 l3:1(size=8MiB) l2:4(size=256KiB) l1:1(size=32KiB) core:1 pu:1", "-n", "4",
                        "--policies", "compact", "--", exe)
    assert smaller["placements"][0]["levels"]["L3"]["misses"] > 3.5 * first_touch  # 4 passes + first touch


def test_machine_models_take_any_number_of_sets():
    model = machine_model(load_topology("e5620"))
    l3 = next(level for level in model.levels if level.name == "L3")
    assert l3.size == 12 * 1024 * 1024 and l3.size // (l3.line * l3.ways) == 12288 and not l3.note.count("sets")
    odd = machine_model(load_topology("pack:1 l3:1(size=100000) core:2 pu:1"))  # not whole 16-way sets
    assert [level.size for level in odd.levels if level.name == "L3"] == [97 * 16 * 64]
    assert "97 sets" in next(level.note for level in odd.levels if level.name == "L3")


def test_a_memory_side_l3_is_named_and_not_simulated_as_a_cpu_cache():
    """hwloc 1's KNL XML writes its MCDRAM cache as an L3Cache of subtype MemorySideCache (2 GiB a
    quadrant): topo names it so, and the simulator leaves it out, saying why (it was simulated as a
    2 GiB L3 at an L3's latency); a machine whose L3 is an ordinary one keeps it, with no note."""
    from pinwise.simmachine import memory_side_notes
    from pinwise.topology import render

    knl = load_topology(str(TOPOLOGIES / "hwloc-tests" / "64intel64-fakeKNL-SNC4-hybrid.xml"))
    assert "L3 0 MemorySideCache (2GiB)" in render(knl)
    assert [level.name for level in machine_model(knl).levels] == ["L1d", "L2"]
    assert memory_side_notes(knl) == [
        "L3: 4 memory-side cache(s) of 2GiB (hwloc's MemorySideCache, as KNL's MCDRAM in cache mode) sit in front "
        "of memory, not beside the cores: not simulated, an access that misses the caches above costs memory's "
        "latency"]
    again = load_topology(str(TOPOLOGIES / "hwloc-tests" / "64intel64-fakeKNL-SNC4-hybrid.v1tov2.xml"))
    assert [level.name for level in machine_model(again).levels] == ["L1d", "L2"]
    e5620 = load_topology("e5620")
    assert [level.name for level in machine_model(e5620).levels] == ["L1d", "L2", "L3"]
    assert memory_side_notes(e5620) == []


def test_l3s_of_unlike_core_counts_are_given_the_first_ones_bandwidth_and_told_so():
    """An L3's default bandwidth grows with its cores, and the tool takes one figure per level:
    on a machine whose sockets lost cores (4 sockets of 2 cores, some offline) the first L3's is
    given to all, said in a note, unless --bandwidth L3=N was given; cores are counted by their L1d,
    whatever their online SMT siblings (the first core's once counted for all)."""
    from pinwise.simmachine import default_bandwidth, uneven_bandwidth_notes

    machine = load_topology(str(TOPOLOGIES / "hwloc-tests" / "16em64t-4s2c2t-offlines.xml"))
    model = machine_model(machine)
    bandwidth = default_bandwidth(machine, model)
    assert bandwidth["L3"] == 32.0  # 16 a core, the first L3's 2 cores
    assert uneven_bandwidth_notes(model, bandwidth) == [
        "L3: its instances hold 1, 2 cores; each is given the first's bandwidth (2 cores, 32 bytes a cycle): "
        "--bandwidth L3=N sets another"]
    regular = load_topology("pack:2 l3:1 core:4 pu:2")
    assert default_bandwidth(regular, machine_model(regular))["L3"] == 64.0
    assert uneven_bandwidth_notes(machine_model(regular), default_bandwidth(regular, machine_model(regular))) == []


def test_compact_waits_on_one_sockets_memory_where_scatter_uses_both(build_dir):
    """tests/programs/stream_triad.c, four threads streaming 9 MiB each from memory they first
    touched, on the NPB study's two E5620s (10.7 bytes a cycle per socket's memory controller):
    compact puts all four on one controller and waits on it; scatter spreads them over both and
    is faster in the simulated cycles, as the paper measured. The same program on arrays that fit
    the L1 waits on nothing worth a difference."""
    exe = str(compile_program("stream_triad.c", build_dir))
    found = simulated("-t", "e5620", "-n", "4", "--policies", "compact,scatter", "--", exe)
    by = {p["policy"]: p for p in found["placements"]}
    assert found["bandwidth"]["dram"] == 10.7 and found["prefetch"]
    compact, scatter = by["compact"], by["scatter"]
    assert compact["memory_bytes"][0] > 0 and compact["memory_bytes"][1] == 0  # one controller moved it all
    assert min(scatter["memory_bytes"]) > 0.4 * sum(scatter["memory_bytes"])
    assert sum(compact["queue_per_thread"]) > 2 * sum(scatter["queue_per_thread"])
    assert compact["busiest"] > scatter["busiest"]
    assert compact["critical_path"] > 1.03 * scatter["critical_path"]
    assert all(cycles >= queue for cycles, queue in zip(compact["cycles_per_thread"], compact["queue_per_thread"]))
    resident = simulated("-t", "e5620", "-n", "4", "--policies", "compact,scatter", "--", exe, "4", "1024", "400")
    paths = [p["critical_path"] for p in resident["placements"]]
    assert abs(paths[0] / paths[1] - 1) < 0.02, paths
    unlimited = simulated("-t", "e5620", "-n", "4", "--policies", "compact", "--bandwidth", "dram=0,L2=0,L3=0",
                          "--", exe, "4", "1024", "400")
    assert sum(unlimited["placements"][0]["queue_per_thread"]) == 0


def test_bad_bandwidth_is_refused():
    assert_clean_failure(run_pinwise("simulate", "--bandwidth", "L9=3", "--", "true"), "--bandwidth", "L9=3")
    assert_clean_failure(run_pinwise("simulate", "--bandwidth", "dram=-1", "--", "true"), "bytes per cycle")
    # the simulator counts bytes per thousand cycles: less than 0.001 would be read as 0, no limit at all
    assert_clean_failure(run_pinwise("simulate", "--bandwidth", "dram=1e-9", "--", "true"), "from 0.001")
    assert_clean_failure(run_pinwise("simulate", "--bandwidth", "dram=nan", "--", "true"), "bytes per cycle")
    assert_clean_failure(run_pinwise("simulate", "--bandwidth", "", "--", "true"), "--bandwidth is empty")
    assert_clean_failure(run_pinwise("simulate", "--latency", " ", "--", "true"), "--latency is empty")
    assert_clean_failure(run_pinwise("simulate", "--latency", "L1d=4,L1d=5", "--", "true"), "sets L1d twice")


def test_a_program_that_crashes_under_the_simulator_is_said_so_and_fails(build_dir, tmp_path):
    """Counts that stop at a crash rank the run up to there, not a whole run: the table still
    shows them, and pinwise says the program failed and passes its status on, as run does."""
    crash = compile_program("crash.c", build_dir)
    saved = tmp_path / "sim.json"
    result = run_pinwise("simulate", "-t", "pack:1 core:2 pu:1", "--policies", "compact,scatter", "-o", str(saved),
                         "--", str(crash), timeout=600)
    assert result.returncode == 128 + 11, result.stderr
    assert f"pinwise: error: {crash} was killed by SIGSEGV under the simulator" in result.stderr, result.stderr
    assert "note: the program was killed by SIGSEGV: the counts cover its run up to there" in result.stdout
    assert "ranking (busiest PU's cycles): " in result.stdout
    assert json.loads(saved.read_text())["exit_status"] == -11
    quiet = run_pinwise("simulate", "--json", "-t", "pack:1 core:2 pu:1", "--policies", "compact", "--", "sh", "-c",
                        "exit 3", timeout=600)
    assert quiet.returncode == 3 and json.loads(quiet.stdout)["exit_status"] == 3
    assert "pinwise: error: sh exited with status 3 under the simulator" in quiet.stderr


def test_the_table_ranks_the_placements_and_the_png_is_written(tmp_path):
    png = tmp_path / "sim.png"
    result = run_pinwise("simulate", "-t", "pack:2 core:2 pu:1", "--policies", "compact,scatter", "--png", str(png),
                         "--", PATTERNS, "pairs", "-n", "4", "-i", "50", check=True, timeout=600)
    assert "ranking (busiest PU's cycles): " in result.stdout and "(ratios to compact)" in result.stdout
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "L1d: none in the topology: 32KiB 8-way per core assumed" in result.stdout


@pytest.mark.parametrize("topology, inclusive, split", [
    # one thread per core in every placement but primary: one group for their L1s and L2s, one for
    # primary (all threads on one PU: one path, no directory); no inclusive eviction, no split
    ("pack:2 l3:1(size=4MiB) l2:2 core:2 pu:1", False, False),
    # an L3 of 16 KiB under 4 x 16 KiB of private data, inclusive: its evictions take lines out of
    # the L1s and L2s below differently per placement, so members split off the group
    ("pack:2 l3:1(size=16KiB) l2:2(size=4KiB) core:2 pu:1", True, True),
    # SMT: placements that put the same threads together in cores group apart from the others
    ("pack:2 l3:1(size=64KiB) l2:1(size=8KiB) core:2 pu:2", True, None),
])
def test_placements_simulated_together_count_exactly_as_each_alone(topology, inclusive, split):
    """Placements whose threads share the L1s alike simulate those caches once (ps_main.c,
    groups): the tool also simulates each placement alone in the same run (so on the same
    accesses), without the shortcut for placements on one core, and every count must agree,
    including after members split off."""
    from pinwise.simulate import simulate

    machine = load_topology(topology)
    candidates = build_candidates(["compact", "scatter", "close", "spread", "primary"],
                                  ["a=0,2,4,6", "b=2,0,6,4", "c=0,1,2,3"], machine, 4, None)
    placements = [(c.name, c.plan) for c in candidates]
    for program in (["private", "-n", "4", "-i", "20", "-z", "16"], ["neighbour", "-n", "4", "-i", "200"]):
        # raises if any placement counted differently grouped and alone
        result = simulate([PATTERNS, *program], machine, placements, inclusive=inclusive, progress=False,
                          stdout=subprocess.DEVNULL, check_groups=True)
        distinct = len({tuple(p.cpus) for p in result.placements})
        assert result.cache_groups >= 1 + len(placements)  # the alone ones, and at least one group
        grouped = result.cache_groups - len(placements)
        if split is False:
            assert grouped == 2 < distinct  # shared by all but primary, and nothing split
        elif split is True and program[0] == "private":
            assert grouped > 1  # split off the first group


def test_workers_take_every_access_and_end_with_the_run():
    """--workers (ps_main.c, Workers): processes forked from Valgrind's simulate the groups while
    the program runs. In the same run Valgrind's process also simulates them all and the counts
    must be the same (check_workers), every placement counts every access in its L1, the grouped
    and alone copies agree, and no worker is left once the run is over."""
    from pinwise.simulate import simulate

    machine = load_topology("pack:2 l3:1(size=64KiB) l2:1(size=8KiB) core:2 pu:2")
    candidates = build_candidates(["compact", "scatter", "close", "primary"], ["a=0,2,4,6", "b=0,1,4,5"], machine, 4,
                                  None)
    placements = [(c.name, c.plan) for c in candidates]
    program = [PATTERNS, "neighbour", "-n", "4", "-i", "343"]
    for workers in (4, 1, 0):  # 0: Valgrind's own process simulates
        result = simulate(program, machine, placements, progress=False, stdout=subprocess.DEVNULL, check_groups=True,
                          workers=workers, check_workers=True)  # raises if any count differs
        l1 = {p.levels["L1d"].accesses for p in result.placements}
        assert len(l1) == 1 and l1.pop() >= sum(result.accesses_per_thread) > 0
        assert result.cache_groups > len(placements) + 1  # several groups, so several workers had work
    assert eventually(lambda: not subprocess.run(["pgrep", "-f", "neighbour -n 4 -i 343"], capture_output=True,
                                                 text=True).stdout.split()), "a simulation worker outlived the run"


def test_placements_sharing_one_grouping_are_split_over_the_workers_and_count_the_same():
    """Four placements with a thread per core share one grouping of L1s: one group, which one
    worker alone simulated. Split (ps_main.c's split_groups) they are two or four groups, each
    simulating the L1s again, on as many workers; in the same run every placement is simulated
    alone too (check_groups) and every group in Valgrind's process (check_workers): same counts."""
    from pinwise.plan import Plan
    from pinwise.simulate import simulate

    machine = load_topology("pack:2 l3:1(size=64KiB) l2:2(size=8KiB) core:2 pu:1")
    lists = ["0,1,2,3", "2,3,0,1", "0,2,1,3", "1,0,3,2"]
    placements = [(cpus, Plan(slots=tuple((int(c),) for c in cpus.split(",")))) for cpus in lists]
    program = [PATTERNS, "neighbour", "-n", "4", "-i", "300"]
    groups = []
    for split in (0, 2, 4):  # each raises if a count differs alone, or in Valgrind's process
        groups.append(simulate(program, machine, placements, progress=False, stdout=subprocess.DEVNULL, workers=4,
                               split=split, check_groups=True, check_workers=True, inclusive=False).cache_groups)
    assert groups == [1 + 4, 2 + 4, 4 + 4]  # (and a group per placement alone; not inclusive: no split-offs)


def test_the_bare_tool_takes_fewer_workers_where_valgrind_keeps_too_few_descriptors(tmp_path):
    """Run as `valgrind --tool=pwsim` directly, without pinwise's --fair-sched=yes --vgdb=no,
    Valgrind later takes four more of the ten or so descriptors it keeps for itself (its pipe lock,
    vgdb's): four workers' pipes would leave it none (it used to stop on an assertion). The tool
    starts fewer workers, says so, and the counts are those of a run with all four."""
    from pinwise.simulate import config_text, DEFAULT_LATENCY

    machine = load_topology("pack:2 l3:1(size=64KiB) l2:1(size=8KiB) core:2 pu:2")
    plans = [c.plan for c in build_candidates(["compact", "scatter", "primary"], ["a=0,2,4,6", "b=0,1,4,5"],
                                              machine, 4, None)]  # three groups: three workers
    config = tmp_path / "machine.txt"
    config.write_text(config_text(machine_model(machine), plans, dict(DEFAULT_LATENCY)))
    env = tool_environment(tmp_path)
    program = [PATTERNS, "pairs", "-n", "4", "-i", "50"]
    counts = {}
    for options in (["--fair-sched=yes", "--vgdb=no"], []):
        out = tmp_path / f"out{len(options)}.txt"
        run = subprocess.run(["valgrind", "--tool=pwsim", "-q", *options, f"--ps-config={config}", f"--ps-out={out}",
                              "--ps-workers=4", "--ps-check-workers=yes", *program],
                             env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
        assert run.returncode == 0 and "Assertion" not in run.stderr, run.stderr
        fewer = "instead of" in run.stderr and "Valgrind keeps too few file descriptors" in run.stderr
        assert fewer == (not options), run.stderr
        counts[len(options)] = [line for line in out.read_text().splitlines() if line.startswith("model")]
    assert counts[0] and counts[0] == counts[2]


def test_a_forked_child_is_not_simulated_and_workers_are_not_the_programs_children(tmp_path):
    from pinwise.simulate import simulate

    program = compile_program("fork_wait.c", tmp_path)
    machine = load_topology("pack:2 core:2 pu:1")
    placements = [(c.name, c.plan) for c in build_candidates(["compact", "scatter"], [], machine, 1, None)]
    result = simulate([str(program)], machine, placements, progress=False, stdout=subprocess.DEVNULL, workers=2)
    assert result.exit_status == 0 and not any("the program " in note for note in result.notes)  # its second wait() found no child
    assert result.threads == 1 and sum(result.accesses_per_thread) > 0


def test_the_machine_model_follows_the_topology():
    model = machine_model(load_topology("pack:2 l3:1(size=8MiB) l2:2 core:2 pu:2"))
    assert [level.name for level in model.levels] == ["L1d", "L2", "L3"]
    assert [level.instances for level in model.levels] == [8, 4, 2]  # L1 per core, shared by its 2 PUs
    assert model.levels[0].instance_of_pu[:4] == (0, 0, 1, 1)
    assert model.classes == ("L2", "L3", "package", "machine")
    assert model.class_of_pair[0][2] == 0 and model.class_of_pair[0][4] == 1 and model.class_of_pair[0][8] == 3

    # without Package objects a transfer between NUMA nodes is remote, not within one package
    bare = machine_model(load_topology("numa:2 l3:1(size=8MiB) core:2 pu:1"))
    assert bare.classes == ("L3", "package", "machine") and bare.node_of_pu == (0, 0, 1, 1)
    assert bare.class_of_pair[0][1] == 0 and bare.class_of_pair[0][2] == 2 and bare.class_of_pair[3][1] == 2
    assert {c for row in machine_model(load_topology("core:4 pu:1")).class_of_pair for c in row} == {0}


def test_a_placement_the_simulator_cannot_take_as_given_is_said_or_refused():
    """The simulator runs a thread on one PU: a slot of several CPUs runs on its lowest, and the
    simulation says so; a skip mask (threads on any CPU of the plan) is refused before the run."""
    from pinwise.plan import Plan
    from pinwise.simulate import placement_notes

    wide = Plan(slots=((0, 1), (2,), (4, 5, 6, 7)), source="test")
    assert placement_notes([("one", Plan.from_cpus([0, 1])), ("wide", wide)]) == [
        "wide: the simulator runs a thread on one PU, so a slot of several CPUs ran on its lowest (slot 0 0,1 as 0, "
        "slot 2 4-7 as 4)"]
    with pytest.raises(PinwiseError, match=r"placement skipping has a skip mask \(0x1\)"):
        placement_notes([("skipping", wide.replace(skip_mask=1))])


@pytest.mark.parametrize("arguments, words", [
    ([], ["no program"]),
    (["--latency", "L9=3", "--", "true"], ["--latency", "L9=3"]),
    (["--latency", "L1d=-3", "--", "true"], ["cycles must be a whole number"]),
    (["--policies", "os,compact", "--", "true"], ["policy os places nothing"]),
    (["-t", "nosuchmachine", "--", "true"], ["nosuchmachine"]),
    (["--quantum", "-1", "--", "true"], ["--quantum"]),
    (["--workers", "5", "--", "true"], ["--workers"]),
    (["--policies", "locality", "--", "true"], ["--comm"]),
    (["--", "no-such-program-xyz"], ["not found"]),
])
def test_bad_simulate_input(arguments, words):
    assert_clean_failure(run_pinwise("simulate", *arguments), *words)


def test_a_simulation_is_kept_and_reported_with_the_bench_or_alone(tmp_path):
    saved, html = tmp_path / "sim.json", tmp_path / "report.html"
    run_pinwise("simulate", "-t", "pack:2 core:2 pu:1", "--policies", "compact,scatter", "-o", str(saved),
                "--", PATTERNS, "pairs", "-n", "4", "-i", "50", check=True, timeout=600)
    document = json.loads(saved.read_text())
    assert document["program"].endswith("pairs -n 4 -i 50") and len(document["placements"]) == 2
    result = run_pinwise("report", "--simulation", str(saved), "--html", str(html), check=True)
    assert "simulated on pack:2 core:2 pu:1" in result.stdout and "ranking (busiest PU's cycles)" in result.stdout
    text = html.read_text()
    assert "<h2>simulated on pack:2 core:2 pu:1" in text and text.count("<img") == 1
    assert_clean_failure(run_pinwise("report"), "nothing to report")
    broken = tmp_path / "broken.json"
    broken.write_text('{"placements": []}')
    assert_clean_failure(run_pinwise("report", "--simulation", str(broken)), "not a simulation")
    # edited by hand: one placement lost a cache level (the table read it for every placement)
    document["placements"][1]["levels"].pop("L1d")
    broken.write_text(json.dumps(document))
    assert_clean_failure(run_pinwise("report", "--simulation", str(broken)), "not a simulation",
                         "its placements count different cache levels")


def test_auto_ranks_its_candidates_on_a_machine_by_simulation():
    result = run_pinwise("auto", "--simulate", "pack:2 l2:2 core:2 pu:1", "--", PATTERNS, "neighbour", "-n", "8",
                         "-i", "200", check=True, timeout=600)
    assert "recommended on pack:2 l2:2 core:2 pu:1:" in result.stderr
    assert "2/2 simulating on pack:2 l2:2 core:2 pu:1: compact" in result.stderr
    rows = {line.split("│")[1].strip(): line for line in result.stdout.splitlines() if line.startswith("│")}
    # the locality policies' placements are simulated: as rows of their own, or, being compact's
    # mirror image on this symmetric machine, in compact's row under every name
    names = [name for row in rows for name in row.split(" = ")]
    assert {"compact", "scatter"} <= set(names) and any(name.startswith(("locality", "balanced")) for name in names)
    assert "simulated best on pack:2 l2:2 core:2 pu:1:" in result.stdout
    assert_clean_failure(run_pinwise("auto", "--simulate", "x7550", "--db", "r.db", "--", "true"), "--simulate")


def test_auto_takes_the_machine_to_simulate_from_t_as_simulate_does():
    result = run_pinwise("auto", "--simulate", "-t", "pack:2 core:2 pu:1", "--", PATTERNS, "pairs", "-n", "4", "-i",
                         "50", check=True, timeout=600)
    assert "simulated best on pack:2 core:2 pu:1:" in result.stdout
    assert_clean_failure(run_pinwise("auto", "--simulate", "--", "true"), "--simulate T or -t T")
    assert_clean_failure(run_pinwise("auto", "-t", "x7550", "--", "true"), "add --simulate")
    assert_clean_failure(run_pinwise("auto", "--simulate", "x7550", "-t", "core2", "--", "true"), "two machines")
