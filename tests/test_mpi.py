"""`pinwise mpi trace` on the real engine: Debian's Open MPI (`mpirun --oversubscribe` on this
machine) runs a ring program of our own whose traffic is known to the byte, with the PMPI recorder
preloaded into every rank."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import numpy as np
import pytest
from conftest import PINWISE, PROGRAMS, assert_clean_failure, run_pinwise

from pinwise.errors import PinwiseError
from pinwise.mpi import RECORDER, job_ranks, parse_cluster, program_mpi, rank_plans
from pinwise.pinning.launcher import NATIVE_DIR

pytestmark = pytest.mark.skipif(shutil.which("mpicc") is None or shutil.which("mpirun") is None
                                or not RECORDER.exists(),
                                reason="Open MPI (make deps installs openmpi-bin and libopenmpi-dev) and pinwise's "
                                       "recorder are needed")
#: mpirun refuses root unless told; these say it is meant (CI runs as root).
ROOT_OK = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


@pytest.fixture(scope="module")
def ring():
    exe = NATIVE_DIR / "bin" / "mpi_ring"  # built with the package where MPI is (pinwise-mpi-ring on PATH)
    if not exe.exists():
        pytest.skip("pinwise was built without MPI")
    return exe


def traced(tmp_path, *job: str) -> dict:
    out = tmp_path / "comm.json"
    result = run_pinwise("mpi", "trace", "-o", str(out), "--", "mpirun", "--oversubscribe", *job,
                         env={**os.environ, **ROOT_OK}, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "next: pinwise analyze" in result.stderr
    return json.loads(out.read_text())


@pytest.mark.parametrize("ranks", [3, 4])
def test_a_ring_is_recorded_to_the_byte(tmp_path, ring, ranks):
    """Each rank sends 8 messages of 1000 bytes to the next, two through each of Send, Isend,
    Sendrecv and a persistent request: M[i][i+1] = 8000 bytes (plus the reverse, 0), 0 elsewhere."""
    document = traced(tmp_path, "-np", str(ranks), str(ring), "1000", "8")
    assert document["kind"] == "mpi" and document["threads"] == document["ranks"] == ranks
    expected = np.zeros((ranks, ranks))
    for i in range(ranks):
        expected[i, (i + 1) % ranks] += 8000
        expected[(i + 1) % ranks, i] += 8000
    assert np.array_equal(np.array(document["matrix"]), expected)
    sent = np.array(document["bytes_sent"])
    assert all(sent[i, (i + 1) % ranks] == 8000 for i in range(ranks)) and sent.sum() == 8000 * ranks
    assert np.array_equal(np.array(document["messages"]), (expected > 0) * 8)
    assert document["collectives"] == {} and not document.get("partial")


def test_collectives_are_kept_as_totals_and_decomposed_as_stated(tmp_path, ring):
    """One Bcast of 1024 bytes from rank 0 and one Allreduce of 8 doubles, on 4 ranks, beside a
    ring of 2 x 1024: binomial trees (0 sends to 2 then 1, 2 to 3; the reduction goes up the same
    tree), as the file says."""
    document = traced(tmp_path, "-np", "4", str(ring), "1024", "2", "collectives")
    assert document["collectives"] == {"bcast": {"calls": 1, "bytes": 1024}, "allreduce": {"calls": 1, "bytes": 64}}
    assert document["collective_algorithms"]["bcast"] == "binomial tree"
    sent = np.zeros((4, 4))
    for i in range(4):
        sent[i, (i + 1) % 4] += 2048  # the ring
    for parent, child in ((0, 2), (0, 1), (2, 3)):
        sent[parent, child] += 1024 + 64  # bcast and allreduce's broadcast down the tree
        sent[child, parent] += 64  # allreduce's reduction up the tree
    assert np.array_equal(np.array(document["bytes_sent"]), sent)
    assert np.array_equal(np.array(document["matrix"]), sent + sent.T)


def test_the_matrix_feeds_analyze_and_map(tmp_path, ring):
    traced(tmp_path, "-np", "4", str(ring), "4096", "4")
    analysis = run_pinwise("analyze", str(tmp_path / "comm.json"), "--json", check=True)
    assert json.loads(analysis.stdout)["pattern"] == "neighbour"
    mapped = run_pinwise("map", str(tmp_path / "comm.json"), "-t", "pack:2 core:2 pu:1", "-p", "locality", "-f",
                         "cpulist", check=True).stdout.strip().split(",")
    assert len(mapped) == 4


def test_bad_jobs(tmp_path):
    assert_clean_failure(run_pinwise("mpi", "trace", "-o", str(tmp_path / "x.json")), "no job given")
    assert_clean_failure(run_pinwise("mpi", "trace", "-o", str(tmp_path / "x.json"), "--", "no-such-launcher-xyz"),
                         "not found")
    not_mpi = run_pinwise("mpi", "trace", "-o", str(tmp_path / "x.json"), "--", "mpirun", "--oversubscribe", "-np",
                          "2", "true", env={**os.environ, **ROOT_OK}, timeout=300)
    # the launcher's own lines may come first (Open MPI warns on some machines); pinwise's is one line, last
    assert not_mpi.returncode != 0 and "Traceback" not in not_mpi.stderr
    last = not_mpi.stderr.strip().splitlines()[-1]
    assert last.startswith("pinwise: error: no rank wrote its row") and "MPI_Finalize" in last
    assert not (tmp_path / "x.json").exists()


def ring_matrix(ranks: int, path) -> str:
    matrix = np.zeros((ranks, ranks))
    for i in range(ranks):
        matrix[i, (i + 1) % ranks] = matrix[(i + 1) % ranks, i] = 8192
    np.savetxt(path, matrix, fmt="%d", delimiter=",")
    return str(path)


def test_ring_neighbours_share_nodes_on_a_cluster(tmp_path):
    ring8 = ring_matrix(8, tmp_path / "ring8.csv")
    result = run_pinwise("mpi", "map", ring8, "--cluster", "node:4 pack:1 core:2 pu:1", "-f", "json", check=True)
    places = json.loads(result.stdout)["ranks"]
    host = [p["host"] for p in places]
    inside = sum(host[i] == host[(i + 1) % 8] for i in range(8))
    assert inside == 4 and "4 of 8 communicating pairs inside a node" in result.stderr
    assert sorted(set(host)) == ["node0", "node1", "node2", "node3"]
    rankfile = run_pinwise("mpi", "map", ring8, "--cluster", "node:4 pack:1 core:2 pu:1", "-f", "openmpi",
                           check=True).stdout.splitlines()
    assert rankfile[0].startswith("rank 0=node") and all(" slot=0:" in line for line in rankfile)
    # no packages: the node's logical cores, each once a node (every rank was slot=0:0)
    socketless = run_pinwise("mpi", "map", ring8, "--cluster", "node:2 numa:2 core:2 pu:1", "-f", "openmpi",
                             check=True).stdout.splitlines()
    slots = sorted((line.split()[1].split("=")[1], line.split("slot=")[1]) for line in socketless)
    assert slots == [(f"node{n}", str(c)) for n in range(2) for c in range(4)], socketless
    slurm = run_pinwise("mpi", "map", ring8, "--cluster", "node:4 pack:1 core:2 pu:1", "-f", "slurm",
                        check=True).stdout.splitlines()
    assert slurm[1:9] == host and slurm[-1].startswith("# srun --distribution=arbitrary --cpu-bind=map_cpu:")
    mpich = run_pinwise("mpi", "map", ring8, "--cluster", "node:4 pack:1 core:2 pu:1", "-f", "mpich",
                        check=True).stdout.splitlines()
    assert mpich[1:9] == [f"{h}:1" for h in host] and "-bind-to user:" in mpich[-1]


def test_uneven_rank_counts_take_one_list_where_each_node_s_begins_the_longest():
    """srun --cpu-bind=map_cpu: and mpiexec -bind-to user: give a node's k-th rank the list's k-th
    entry on every node: 3 ranks on 2 nodes (0,1 and 0) take 0,1; lists that differ otherwise
    (0,1 and 1) are refused, since one list would put a rank elsewhere than the plan."""
    from pinwise.mpi import RankPlace, format_placement

    def place(rank, host, cpu):
        return RankPlace(rank, host, cpu, 0, cpu, (cpu,), cpu)

    uneven = [place(0, "a", 0), place(1, "a", 1), place(2, "b", 0)]
    assert format_placement(uneven, "slurm").splitlines() == [
        "# SLURM_HOSTFILE (one host per rank):", "a", "a", "b", "# srun --distribution=arbitrary --cpu-bind=map_cpu:0,1"]
    assert format_placement(uneven, "mpich").splitlines()[-1] == "# mpiexec -f machinefile -bind-to user:0,1"
    for fmt in ("slurm", "mpich"):
        with pytest.raises(PinwiseError, match="the nodes' CPU lists differ"):
            format_placement([place(0, "a", 0), place(1, "a", 1), place(2, "b", 1)], fmt)


@pytest.mark.parametrize("node", [[], ["--node-topology", "core:2 pu:1"]], ids=["this-machine", "no-packages"])
def test_a_rankfile_is_accepted_by_mpirun_and_each_rank_runs_where_it_says(tmp_path, ring, node):
    """On a node without packages the slots name the node's logical cores (``slot=1``): a S:C
    slot there names no CPU, and every rank was written slot=0:0."""
    where = tmp_path / "where"
    subprocess.run(["mpicc", "-O2", "-o", str(where), str(PROGRAMS / "mpi_where.c")], check=True, capture_output=True)
    hostfile = tmp_path / "hosts"
    hostfile.write_text("localhost slots=2\n")
    rankfile = tmp_path / "rankfile"
    run_pinwise("mpi", "map", ring_matrix(2, tmp_path / "ring2.csv"), "--hostfile", str(hostfile), *node,
                "-f", "openmpi", "-o", str(rankfile), check=True)
    wanted = {}
    for line in rankfile.read_text().splitlines():
        rank, slot = line.split()[1].split("=")[0], line.split("slot=")[1]
        assert (":" in slot) == (not node), line
        wanted[int(rank)] = int(slot.split(":")[-1])
    assert sorted(wanted.values()) == [0, 1]
    ran = subprocess.run(["mpirun", "--rankfile", str(rankfile), "-np", "2", str(where)], capture_output=True,
                         text=True, env={**os.environ, **ROOT_OK}, timeout=300)
    assert ran.returncode == 0, ran.stderr
    found = {int(line.split()[1]): line.split()[3] for line in ran.stdout.splitlines() if line.startswith("rank ")}
    from pinwise.topology import load_topology

    cores = load_topology(None).logical_order(allowed_only=False)
    assert found == {rank: str(cores[core]) for rank, core in wanted.items()}  # one core each, one PU per core here


def test_hostfiles_and_slurm_allocations_name_the_nodes(tmp_path):
    from pinwise.mpi import expand_hostlist

    assert expand_hostlist("node[1-3,7],gpu01") == ["node1", "node2", "node3", "node7", "gpu01"]
    assert expand_hostlist("n[08-10]") == ["n08", "n09", "n10"]
    two = "rack[1-2]-node[01-02,7],login1"  # two brackets in one name: every pair, the first bracket outermost
    assert expand_hostlist(two) == ["rack1-node01", "rack1-node02", "rack1-node7", "rack2-node01", "rack2-node02",
                                    "rack2-node7", "login1"]
    scontrol = shutil.which("scontrol")
    if scontrol:  # Slurm's own expansion, where it reads a configuration without a controller
        conf = tmp_path / "slurm.conf"
        conf.write_text("ClusterName=x\nSlurmctldHost=localhost\nNodeName=localhost CPUs=1\n")
        shown = subprocess.run([scontrol, "show", "hostnames", two], capture_output=True, text=True, timeout=60,
                               env={**os.environ, "SLURM_CONF": str(conf)})
        if shown.returncode == 0:
            assert shown.stdout.split() == expand_hostlist(two)
    with pytest.raises(PinwiseError, match=r"a '\[' in 'r\[1-2\]-n\[1-2' is never closed"):
        expand_hostlist("r[1-2]-n[1-2")
    ring8 = ring_matrix(8, tmp_path / "ring8.csv")
    inside = run_pinwise("mpi", "map", ring8, "--node-topology", "pack:1 core:2 pu:1", "-f", "json", check=True,
                         env={**os.environ, "SLURM_JOB_NODELIST": "n[1-4]"})
    assert sorted({p["host"] for p in json.loads(inside.stdout)["ranks"]}) == ["n1", "n2", "n3", "n4"]
    hostfile = tmp_path / "hosts"
    hostfile.write_text("# two nodes\nalpha slots=4\nbeta:4\n")
    mapped = run_pinwise("mpi", "map", ring8, "--hostfile", str(hostfile), "--node-topology", "pack:2 core:2 pu:1",
                         "-f", "json", check=True)
    assert sorted({p["host"] for p in json.loads(mapped.stdout)["ranks"]}) == ["alpha", "beta"]


@pytest.mark.parametrize("policy", ["locality", "compact", "scatter"])
def test_a_hostfile_s_slots_hold_the_ranks_of_each_host(tmp_path, policy):
    """mpirun does not hold a rankfile to the hostfile's slots: pinwise holds the placement to
    them, one rank a core on a host's first cores, as Open MPI's mapping by core fills a node."""
    from pinwise.mpi import read_hostfile

    hostfile = tmp_path / "hosts"
    hostfile.write_text("alpha slots = 2  # spaces, as Open MPI reads them\nbeta:3\nbeta slots=3\ngamma\n")
    assert read_hostfile(str(hostfile)) == {"alpha": 2, "beta": 6, "gamma": None}
    hostfile.write_text("alpha slots = 2\nbeta:6\n")
    mapped = run_pinwise("mpi", "map", ring_matrix(8, tmp_path / "ring8.csv"), "--hostfile", str(hostfile),
                         "--node-topology", "pack:2 core:2 pu:2", "-p", policy, "-f", "json", check=True)
    places = json.loads(mapped.stdout)["ranks"]
    on = {host: sorted(cpu for p in places if p["host"] == host for cpu in p["cpus"]) for host in ("alpha", "beta")}
    assert len(on["alpha"]) == 2 and set(on["alpha"]) <= {0, 2, 4, 6} and len(set(on["alpha"])) == 2
    assert on["beta"] == [0, 1, 2, 3, 4, 6]  # one PU on each of its 4 cores, then the first cores' second PUs
    assert "held to the hostfile's slots (alpha 2, beta 6)" in mapped.stderr
    hostfile.write_text("alpha slots=2\nbeta slots=4\n")
    assert_clean_failure(run_pinwise("mpi", "map", ring_matrix(8, tmp_path / "ring8.csv"), "--hostfile",
                                     str(hostfile), "--node-topology", "pack:2 core:2 pu:2"),
                         "the hostfile's slots leave 6", "more slots")


def test_bad_maps(tmp_path):
    ring8 = ring_matrix(8, tmp_path / "ring8.csv")
    assert_clean_failure(run_pinwise("mpi", "map", ring8, "--cluster", "node:2 pack:1 core:2 pu:1"), "larger cluster")
    assert_clean_failure(run_pinwise("mpi", "map", ring8, "--cluster", "pack:2"), "start with node:N")
    assert_clean_failure(run_pinwise("mpi", "map", ring8, "--cluster", "node:x pack:2"), "whole number")
    # no cluster, no hostfile, no Slurm: this machine alone, as a single-node job runs
    no_slurm = {k: v for k, v in os.environ.items() if k != "SLURM_JOB_NODELIST"}
    here = run_pinwise("mpi", "map", ring_matrix(2, tmp_path / "ring2.csv"), "-f", "json", env=no_slurm, check=True)
    assert [p["host"] for p in json.loads(here.stdout)["ranks"]] == ["localhost", "localhost"]
    # ... whose topology is read: another node shape alone would place ranks on slots it has not
    assert_clean_failure(run_pinwise("mpi", "map", ring8, "--node-topology", "nehalem", env=no_slurm),
                         "--node-topology 'nehalem' shapes the nodes of --hostfile or of a Slurm allocation")
    empty = tmp_path / "empty-hosts"
    empty.write_text("# nothing\n")
    assert_clean_failure(run_pinwise("mpi", "map", ring8, "--hostfile", str(empty)), "names no host",
                         "pinwise mpi map --help")


def no_aslr(*command: str) -> list[str]:
    """Without address-space randomisation, inherited by mpirun and its daemons: Open MPI 4.1's
    orted maps hwloc's shared topology at a fixed address, which a randomised layout sometimes
    takes (a segfault in hwloc_shmem_topology_write, about one launch in four here)."""
    return ["setarch", os.uname().machine, "-R", *command]


def ran(result: subprocess.CompletedProcess) -> list[list[str]]:
    return [[c.strip() for c in line.strip("│").split("│")] for line in result.stderr.splitlines()
            if line.startswith("│")]


def test_mpi_run_places_every_rank_and_reads_back_where_it_ran(tmp_path):
    threads = tmp_path / "threads"
    subprocess.run(["gcc", "-O2", "-pthread", "-o", str(threads), str(PROGRAMS / "threads.c")], check=True)
    hostfile = tmp_path / "hosts"
    hostfile.write_text("localhost slots=2\n")
    comm = ring_matrix(2, tmp_path / "ring2.csv")
    result = subprocess.run(no_aslr(PINWISE, "mpi", "run", "--comm", comm, "--hostfile", str(hostfile), "--verify",
                                    "--", "mpirun", "-np", "2", str(threads), "0"),
                            capture_output=True, text=True, input="", env={**os.environ, **ROOT_OK}, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "placement: rank 0=localhost slot=0:" in result.stderr
    rows = ran(result)
    assert len(rows) == 2 and all(row[3] == row[4] and row[5] == "yes" for row in rows)
    assert {row[4] for row in rows} == {"0", "1"}  # the two ranks of the ring on the two cores
    assert "2 threads in 2 ranks, all where asked" in result.stderr


def test_a_hybrid_job_on_two_nodes_has_every_thread_where_asked(tmp_path):
    """Two "nodes" (host aliases of this machine, launched by Open MPI's rsh agent set to a local
    command, so mpirun's multi-node path runs: a rankfile naming both hosts, a daemon per host),
    2 ranks x 2 threads: each rank on a node of its own, its threads on the node's two CPUs."""
    threads = tmp_path / "threads"
    subprocess.run(["gcc", "-O2", "-pthread", "-o", str(threads), str(PROGRAMS / "threads.c")], check=True)
    hostfile = tmp_path / "hosts"
    hostfile.write_text("nodea slots=2\nnodeb slots=2\n")
    comm = ring_matrix(2, tmp_path / "ring2.csv")
    command = no_aslr(PINWISE, "mpi", "run", "--comm", comm, "--hostfile", str(hostfile), "--threads-per-rank", "2",
                      "--verify", "--", "mpirun", "--hostfile", str(hostfile), "--mca", "plm_rsh_agent",
                      str(PROGRAMS / "local_rsh.sh"), "--mca", "btl", "self,tcp", "-np", "2", str(threads), "1")
    for _ in range(3):  # Open MPI's own daemons on one machine now and then fail to start: its message, not ours
        result = subprocess.run(command, capture_output=True, text=True, input="", env={**os.environ, **ROOT_OK},
                                timeout=300)
        if "ORTE was unable to reliably start one or more daemons" not in result.stderr:
            break
    assert result.returncode == 0, result.stderr
    assert "placement: rank 0=node" in result.stderr and "rank 1=node" in result.stderr
    hosts = {part.split("=")[1].split()[0] for part in result.stderr.split("placement: ")[1].splitlines()[0].split("; ")}
    assert hosts == {"nodea", "nodeb"}
    rows = ran(result)
    assert len(rows) == 4 and all(row[3] == row[4] and row[5] == "yes" for row in rows)
    for rank in ("0", "1"):
        assert sorted(row[4] for row in rows if row[0] == rank) == ["0", "1"]  # its threads on its node's 2 CPUs
    assert "4 threads in 2 ranks, all where asked" in result.stderr


def test_hybrid_maps_give_each_rank_k_pus_under_one_package(tmp_path):
    ring4 = ring_matrix(4, tmp_path / "ring4.csv")
    cluster = ("--cluster", "node:2 pack:2 core:4 pu:1", "--threads-per-rank", "2")
    places = json.loads(run_pinwise("mpi", "map", ring4, *cluster, "-f", "json", check=True).stdout)["ranks"]
    assert all(len(p["cpus"]) == 2 for p in places)
    assert len({(p["host"], c) for p in places for c in p["cpus"]}) == 8  # no PU given twice
    rankfile = run_pinwise("mpi", "map", ring4, *cluster, "-f", "openmpi", check=True).stdout.splitlines()
    assert all(line.split("slot=")[1].count("-") == 1 for line in rankfile)  # a range of two cores
    slurm = run_pinwise("mpi", "map", ring4, *cluster, "-f", "slurm", check=True).stdout.splitlines()
    assert "--cpu-bind=mask_cpu:0x" in slurm[-1]
    assert_clean_failure(run_pinwise("mpi", "map", ring4, "--cluster", "node:2 pack:2 core:4 pu:1",
                                     "--threads-per-rank", "5"), "larger cluster")


def test_hybrid_plans_expand_the_ranks_matrix_sparsely_and_as_the_dense_expansion_would():
    """--threads-per-rank K: each rank becomes K threads bound together by more than all the traffic,
    the rank's traffic spread over its threads' pairs. The expansion is sparse (a dense one takes K^2
    times the ranks' matrix); the plans must be those of the dense expansion, for every policy."""
    import tracemalloc

    from pinwise.comm import CommMatrix
    from pinwise.mapping import compute_mapping

    def dense_plans(matrix, cluster, policy, k):
        ranks = len(matrix)
        expanded = np.kron(matrix, np.ones((k, k)) / (k * k))
        for r in range(ranks):
            expanded[r * k:(r + 1) * k, r * k:(r + 1) * k] = max(1.0, matrix.sum()) * 10
        np.fill_diagonal(expanded, 0)
        pus = list(compute_mapping(policy, expanded, cluster.topology, seed=3, creator="policy").pus)
        return [pus[r * k:(r + 1) * k] for r in range(ranks)]

    rng = np.random.default_rng(1)
    cluster = parse_cluster("node:2 pack:2 core:4 pu:2")
    for ranks, k in ((4, 2), (6, 2), (4, 4), (8, 2)):
        ring = np.roll(np.eye(ranks), 1, axis=1) * 100
        noisy = rng.integers(0, 50, (ranks, ranks)).astype(float)
        for matrix in (ring + ring.T, noisy + noisy.T - 2 * np.diag(np.diag(noisy))):
            comm = CommMatrix.from_array(matrix)
            for policy in ("compact", "scatter", "random", "lp-compact", "gp", "lpgp", "locality", "distance",
                           "balance", "balanced-locality"):
                assert rank_plans(comm, cluster, policy, k, seed=3) == dense_plans(matrix, cluster, policy, k), policy
    ranks, k = 2048, 4  # dense, the expansion alone would take 512 MiB
    ring = np.roll(np.eye(ranks), 1, axis=1) * 100
    comm = CommMatrix.from_array(ring + ring.T)
    tracemalloc.start()
    try:
        plans = rank_plans(comm, parse_cluster("node:64 pack:2 core:32 pu:2"), "locality", k)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(plans) == ranks and len({pu for plan in plans for pu in plan}) == ranks * k
    assert peak < 128 * 2**20, f"{peak / 2**20:.0f} MiB"


@pytest.mark.parametrize("argv, count", [
    (["mpirun", "-np", "4", "./app"], 4), (["mpiexec", "-n", "2", "ls", "-n", "9"], 2), (["srun", "-n4", "x"], 4),
    (["srun", "--ntasks=3", "x"], 3), (["mpirun", "--hostfile", "h", "-x", "A", "-c", "2", "a"], 2),
    (["mpirun", "ls", "-n", "5"], None), (["mpirun", "-np", "2", "a", ":", "-np", "2", "b"], None),
    (["srun", "ls"], None),
    # srun's -c is --cpus-per-task; Open MPI's is -np
    (["srun", "-c", "4", "-n", "2", "x"], 2), (["srun", "-c", "4", "x"], None), (["srun", "--cpus-per-task", "4", "x"], None),
    # an option's value that is a command on PATH is not the program
    (["mpirun", "--mca", "plm_rsh_agent", "ssh", "-np", "3", "./app"], 3),
    (["mpirun", "--launch-agent", "rsh", "-np", "5", "./app"], 5),
    (["mpiexec", "-genv", "X", "ls", "-n", "6", "./app"], 6),
    (["mpirun", "-np", "2", "ls", "-np", "7"], 2), (["mpirun", "--", "ls", "-n", "4"], None)])
def test_the_rank_count_of_a_job_command(argv, count):
    assert job_ranks(argv) == count


@pytest.mark.parametrize("argv, hosts, mpi", [
    (["mpirun", "--mca", "plm_rsh_agent", "ssh", "-H", "a,b", "ls"], "-H", None),
    (["mpirun", "-np", "2", "ls", "--hostfile", "h"], None, None),  # the program's own option
    (["mpirun", "-x", "PATH", "--host=a", "ls"], "--host", None),
])
def test_the_hosts_of_a_job_command_and_its_program(argv, hosts, mpi):
    from pinwise.mpi.launchers import job_hosts, program_index

    assert job_hosts(argv) == hosts
    assert argv[program_index(argv)] == "ls" and program_mpi(argv) == mpi


def test_mpi_run_refuses_a_job_of_another_size_than_the_matrix(tmp_path):
    hostfile = tmp_path / "hosts"
    hostfile.write_text("localhost slots=4\n")
    result = run_pinwise("mpi", "run", "--comm", ring_matrix(2, tmp_path / "ring2.csv"), "--hostfile", str(hostfile),
                         "--", "mpirun", "-np", "4", "true", env={**os.environ, **ROOT_OK}, input="")
    assert_clean_failure(result, "the job starts 4 ranks but the matrix has 2")
    # said before the cluster is sized: 8 ranks on this machine's 2 CPUs is the count's fault, not the cluster's
    no_slurm = {k: v for k, v in os.environ.items() if k != "SLURM_JOB_NODELIST"}
    result = run_pinwise("mpi", "run", "--comm", ring_matrix(8, tmp_path / "ring8.csv"), "--", "mpirun", "-np", "2",
                         "true", env={**no_slurm, **ROOT_OK}, input="")
    assert_clean_failure(result, "the job starts 2 ranks but the matrix has 8")
    assert_clean_failure(run_pinwise("mpi", "run", "--policy", "compact", "--", "mpirun", "-np", "abc", "true",
                                     input=""), "the job's -np 'abc' is not a number of ranks")
    assert_clean_failure(run_pinwise("mpi", "run", input=""), "no job given")


def test_a_single_node_job_of_a_matrix_free_policy_needs_no_comm_and_no_cluster(tmp_path):
    """The issue's command: compact reads no matrix, so the ranks are counted from -np, and with
    no cluster, hostfile or Slurm allocation the job runs on this machine, each rank where asked."""
    threads = tmp_path / "threads"
    subprocess.run(["gcc", "-O2", "-pthread", "-o", str(threads), str(PROGRAMS / "threads.c")], check=True)
    env = {**{k: v for k, v in os.environ.items() if k != "SLURM_JOB_NODELIST"}, **ROOT_OK}
    result = subprocess.run(no_aslr(PINWISE, "mpi", "run", "--verify", "--policy", "compact", "--", "mpirun", "-np",
                                    "2", str(threads), "0"),
                            capture_output=True, text=True, input="", env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "placement: rank 0=localhost slot=0:0; rank 1=localhost slot=0:1" in result.stderr
    rows = ran(result)
    assert len(rows) == 2 and all(row[3] == row[4] and row[5] == "yes" for row in rows)
    assert "2 threads in 2 ranks, all where asked" in result.stderr


def test_mpi_run_says_what_it_lacks(tmp_path):
    job = ["--", "mpirun", "-np", "2", "true"]
    assert_clean_failure(run_pinwise("mpi", "run", "--policy", "locality", *job), "places the ranks by their "
                         "communication", "--comm")
    assert_clean_failure(run_pinwise("mpi", "run", "--policy", "compact", "--", "mpirun", "true"), "how many ranks",
                         "-np")
    assert_clean_failure(run_pinwise("mpi", "run", "--policy", "compact", "--", "mpirun", "-H", "a,b", "-np", "2",
                                     "true", env={k: v for k, v in os.environ.items() if k != "SLURM_JOB_NODELIST"}),
                         "the job names its hosts (-H)", "--hostfile")


def test_a_job_whose_own_hosts_leave_out_the_rankfile_s_is_told_why_mpirun_refused(tmp_path):
    """The job names hosts of its own after -- (-H other) beside pinwise's --hostfile: mpirun
    refuses the rankfile's host in its own words, and pinwise says which of the job's options
    caused it; the same hostfile repeated after -- runs."""
    hostfile = tmp_path / "hosts"
    hostfile.write_text("localhost slots=2\n")
    env = {**{k: v for k, v in os.environ.items() if k != "SLURM_JOB_NODELIST"}, **ROOT_OK}
    result = run_pinwise("mpi", "run", "--policy", "compact", "--hostfile", str(hostfile), "--", "mpirun", "-H",
                         "otherhost", "-np", "2", "true", env=env, timeout=300)
    assert result.returncode != 0 and "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]  # below mpirun's own message
    for words in ("mpirun failed", "before any rank started", "the job names hosts of its own (-H)",
                  "places ranks on localhost", "leave the job's hosts out after --"):
        assert words in last, last
    result = run_pinwise("mpi", "run", "--policy", "compact", "--hostfile", str(hostfile), "--", "mpirun",
                         "--hostfile", str(hostfile), "-np", "2", "true", env=env, timeout=300)
    assert result.returncode == 0, result.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="Open MPI refuses root only to root")
def test_the_launchers_refusal_is_passed_on_not_guessed_at(tmp_path, ring):
    """Open MPI refuses to run as root unless told: pinwise says so in the launcher's words, not
    "no rank wrote its row: did the program call MPI_Finalize?", and writes no matrix."""
    env = {k: v for k, v in os.environ.items() if k not in ROOT_OK and k != "SLURM_JOB_NODELIST"}
    out = tmp_path / "comm.json"
    for command in (["mpi", "trace", "-o", str(out), "--", "mpirun", "-np", "2", str(ring), "100", "1"],
                    ["mpi", "run", "--policy", "compact", "--", "mpirun", "-np", "2", str(ring), "100", "1"]):
        result = run_pinwise(*command, env=env, timeout=300)
        assert result.returncode != 0 and "Traceback" not in result.stderr
        last = result.stderr.strip().splitlines()[-1]
        assert last.startswith("pinwise: error: mpirun failed (exit status 1) before any rank ") and \
            "it said 'mpirun has detected an attempt to run as root.'" in last, last
        assert "MPI_Finalize" not in result.stderr and "attempt to run as root" in result.stderr.split(last)[0]
    assert not out.exists()
