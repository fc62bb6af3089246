"""The policy registry: every command accepts exactly its names, and each entry does what it says."""

from __future__ import annotations

import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from conftest import FakeProgram, assert_clean_failure, compile_program, need, run_pinwise

from pinwise import policies
from pinwise.auto import run_auto
from pinwise.bench import db
from pinwise.bench.candidates import build_candidates, unique_candidates
from pinwise.cli.placing import reads_matrix
from pinwise.comm import CommMatrix
from pinwise.errors import PinwiseError
from pinwise.topology import load_topology, preset

NAMES = policies.names(with_auto=True)


@pytest.fixture(scope="module")
def pairs_csv(tmp_path_factory):
    """Four threads in two pairs, (0, 1) and (2, 3)."""
    path = tmp_path_factory.mktemp("registry") / "pairs.csv"
    matrix = np.zeros((4, 4), dtype=int)
    matrix[0, 1] = matrix[1, 0] = matrix[2, 3] = matrix[3, 2] = 100
    np.savetxt(path, matrix, fmt="%d", delimiter=",")
    return path


def test_map_and_run_accept_every_name_of_the_registry(pairs_csv):
    threads = len(pairs_csv.read_text().splitlines())

    def both(name: str):
        mapped = run_pinwise("map", str(pairs_csv), "-t", "nehalem", "--policy", name, "-f", "cpulist", "--seed", "3")
        # the others refuse --comm: they are told the matrix's thread count instead
        comm = ["--comm", str(pairs_csv)] if reads_matrix(name) else ["-n", str(threads)]
        return mapped, run_pinwise("run", "-t", "nehalem", "--policy", name, *comm, "--seed", "3", "--print")

    names = [*NAMES, *(alias for p in policies.REGISTRY.values() for alias in p.aliases)]
    with ThreadPoolExecutor(max_workers=4) as pool:  # 38 commands that each start pinwise: 14 s one by one
        results = dict(zip(names, pool.map(both, names)))
    for name, (mapped, printed) in results.items():
        assert printed.returncode == 0, (name, printed.stderr)
        if name == "os":  # no mapping: a CPU list of it is refused in one line (issue 41), --print says so
            assert mapped.returncode != 0 and "pins nothing" in mapped.stderr and "no pinning" in printed.stdout
        else:  # the same plan through both commands
            assert mapped.returncode == 0, (name, mapped.stderr)
            assert f"pinwise run --cpus {mapped.stdout.strip()}" in printed.stdout, name


def test_bench_accepts_every_name_of_the_registry(tmp_path, pairs_csv):
    database = tmp_path / "all.db"
    result = run_pinwise("bench", "--policies", ",".join(NAMES), "--comm", str(pairs_csv), "-r", "1", "-q",
                         "--db", str(database), "--", "true", timeout=300)
    assert result.returncode == 0, result.stderr
    connection = db.open_db(database, create=False)
    try:
        experiment = db.latest_experiment(connection)
        recorded = [row.policy for row in db.runs(connection, experiment.id)]
    finally:
        connection.close()
    # one run of each placement, none dropped or renamed; names of one placement run once, as its first
    aliases = experiment.config.aliases or {}
    assert len(recorded) == len(set(recorded))
    assert sorted(recorded + [n for same in aliases.values() for n in same]) == sorted(NAMES)
    assert set(aliases) <= set(recorded)


def test_auto_accepts_every_name_of_the_registry(tmp_path):
    matrix = np.zeros((4, 4))
    matrix[0, 1] = matrix[1, 0] = matrix[2, 3] = matrix[3, 2] = 100
    program = FakeProgram({"os": 1.0, "other": 1.0}, 0.01)
    result = run_auto(["/bin/true"], load_topology(None), db_path=str(tmp_path / "auto.db"), progress=False,
                      say=lambda text: None, tracer=lambda argv, path: CommMatrix.from_array(matrix),
                      runner=program, policies=NAMES, budget_minutes=0.01)
    assert set(result.candidates) | {a for same in result.aliases.values() for a in same} == set(NAMES)


def test_every_command_refuses_an_unknown_name_in_the_same_words(tmp_path, pairs_csv):
    expected = "unknown policy 'fastest': choose one of " + ", ".join(NAMES)
    for args in (["map", str(pairs_csv), "--policy", "fastest"], ["run", "--policy", "fastest", "--", "true"],
                 ["bench", "--policies", "fastest", "--db", str(tmp_path / "x.db"), "--", "true"],
                 ["auto", "--policies", "fastest", "--", "true"]):
        result = run_pinwise(*args)
        assert_clean_failure(result, expected)
        # then what else the command takes, and only that: run's --mapping, bench's adapt and --placement
        offers = {"map": (), "run": ("--mapping",), "bench": ("or adapt", "--placement"), "auto": ()}[args[0]]
        assert all(word in result.stderr for word in offers), result.stderr
        assert ("--mapping" in result.stderr) == (args[0] == "run"), result.stderr
    assert not (tmp_path / "x.db").exists()
    with pytest.raises(PinwiseError, match=expected):
        policies.lookup("fastest")


def test_bench_all_keeps_every_placement_whose_cpus_differ():
    x7550 = preset("x7550")
    candidates = build_candidates([p.name for p in policies.REGISTRY.values() if not p.needs_matrix], [],
                                  x7550, 8)
    kept, aliases = unique_candidates(candidates)
    plans = {c.name: c.plan.cpulist() for c in kept if c.plan is not None}
    assert plans["spread"] == "0,8,16,24,32,40,48,56"
    assert plans["scatter"] == "0,16,32,48,2,18,34,50"
    assert plans["primary"] == "0,0,0,0,0,0,0,0"
    assert {c.name for c in kept} == {"os", "random", "compact", "scatter", "spread", "primary"}
    # close is compact's order while threads fit the PUs; hwloc-distrib shares 8 threads as spread does
    assert aliases == {"compact": ["close"], "spread": ["distrib"]}


@pytest.mark.parametrize("name, threads, expected", [
    ("compact", 5, [0, 1, 2, 3, 4]),
    ("scatter", 4, [0, 4, 1, 5]),
    ("close", 16, [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7]),
    ("spread", 2, [0, 4]),
    ("primary", 3, [0, 0, 0]),
])
def test_application_independent_orders_on_nehalem(name, threads, expected):
    assert policies.lookup(name).order(preset("nehalem"), threads) == expected


def test_random_is_a_permutation_fixed_by_its_seed():
    x7550 = preset("x7550")
    order = policies.REGISTRY["random"].order
    assert order(x7550, 64, 5) == order(x7550, 64, 5) != order(x7550, 64, 6)
    assert sorted(order(x7550, 64, 5)) == list(range(64))
    assert order(x7550, 64, 5) not in (x7550.compact_order(), x7550.scatter_order())


def test_registry_entries_are_consistent():
    for policy in policies.REGISTRY.values():
        assert policy.family in ("independent", "OpenMP", "Mazouz", "Diener")
        assert policy.needs_matrix == (policy.family in ("Mazouz", "Diener"))
        if policy.needs_matrix:
            assert callable(policy.load_kernel())
    assert policies.lookup(" MASTER ").name == "primary"


def test_close_and_spread_are_libgomps_for_1_to_16_threads_on_2_to_16_places(build_dir):
    """Real libgomp, on places that repeat this machine's two CPUs ({0},{1},{0},...), so that any
    place count runs here: the place of every thread number is what pinwise plans."""
    program = compile_program("omp_places.c", build_dir, "-fopenmp")
    differences = []
    for places in range(2, 17):
        place_list = ",".join(f"{{{p % 2}}}" for p in range(places))
        for bind, ours in (("close", policies.omp_close_places), ("spread", policies.omp_spread_places)):
            for threads in range(1, 17):
                env = {**os.environ, "OMP_PLACES": place_list, "OMP_PROC_BIND": bind, "OMP_NUM_THREADS": str(threads),
                       "OMP_DYNAMIC": "false"}
                printed = subprocess.run([str(program)], env=env, capture_output=True, text=True, check=True).stdout
                libgomp = [int(p) for p in printed.split()]
                if libgomp != ours(places, threads):
                    differences.append((bind, places, threads, libgomp, ours(places, threads)))
    assert not differences, differences[:5]
    # and through the policies, on a machine of 16 PUs
    machine = load_topology("pack:1 core:16 pu:1")
    assert policies.spread(machine, 3) == [0, 6, 11]
    assert policies.close(machine, 20)[15:] == [15, 0, 1, 2, 3] and policies.close(machine, 32)[:4] == [0, 0, 1, 1]


DISTRIB_MACHINES = [*(str(Path(__file__).resolve().parents[2] / "shared" / "topologies" / "hwloc-tests" / name)
                      for name in ("16amd64-8n2c-cpusets.xml", "64intel64-3g2n+2n-irregulargroups+pci.xml",
                                   "fakeheterodistances.xml", "192em64t-12gr2n8c2t.xml", "16em64t-4s2c2t-offlines.xml",
                                   "64intel64-fakeKNL-SNC4-hybrid.xml")),
                    "pack:2 l3:2 core:3 pu:2", "pack:3 core:5 pu:3", "numa:2 pack:2 core:3 pu:2(indexes=2*12:1*2)"]


@pytest.mark.parametrize("machine", DISTRIB_MACHINES, ids=lambda m: Path(m).name)
def test_distrib_is_hwloc_distribs_answer(machine):
    """The real hwloc-distrib --single N on machines of uneven shares (disallowed PUs, irregular
    Groups, 3 x 5 x 3), for every count that splits them differently and more threads than PUs."""
    if machine.endswith(".xml") and not Path(machine).exists():
        pytest.skip("../shared/topologies is not beside the repository")
    from pinwise.topology.hwloc_xml import parse_cpuset

    topology = load_topology(machine)
    for threads in [*range(1, 20), 31, 64, 100]:
        printed = subprocess.run([need("hwloc-distrib"), "-i", machine, "--single", str(threads)], capture_output=True,
                                 text=True, check=True).stdout.split()
        assert policies.distrib(topology, threads) == [min(parse_cpuset(line, "hwloc-distrib")) for line in printed], \
            threads


def test_scatter_spreads_packages_that_sit_at_different_depths():
    """A machine whose children are groups of two packages and bare packages (PUs at two depths):
    scatter sorted PUs by their reversed coordinates, which compared positions of different levels,
    and put two of 4 threads in one group while two packages had none. Dealt by each object's share,
    4 threads take one child of the machine each, and 8 take the packages hwloc-distrib gives 8."""
    machine = DISTRIB_MACHINES[1]
    if not Path(machine).exists():
        pytest.skip("../shared/topologies is not beside the repository")
    from pinwise.topology.hwloc_xml import parse_cpuset

    order = load_topology(machine).scatter_order(allowed_only=False)  # the file allows one group only
    assert order[:4] == [0, 16, 32, 40], order
    printed = subprocess.run([need("hwloc-distrib"), "-i", machine, "--disallowed", "--single", "8"],
                             capture_output=True, text=True, check=True).stdout.split()
    assert sorted(order[:8]) == sorted(min(parse_cpuset(line, "hwloc-distrib")) for line in printed)
    assert sorted(order) == list(range(64))
