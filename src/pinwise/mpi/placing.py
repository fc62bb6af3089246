"""`pinwise mpi place` and `mpi run`: the matrix the ranks are placed by, each rank's CPUs on the
cluster (by rank, or by GPU), and the job run with its placement, each rank checked where it ran."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .. import policies
from ..comm import CommMatrix, read_comm
from ..errors import PinwiseError
from ..pinning.launcher import PRELOAD_LIBRARY, RUNTIME_SETTINGS
from ..pinning.log import parse_log
from ..placement import matrix_plan
from ..processes import run_in_group, user_environment
from ..temporary import temporary_folder
from ..topology import ObjectSpec, build_topology
from ..topology.devices import numbered
from ..topology.model import ObjType
from .cluster import Cluster
from .formats import rank_places
from .launchers import (job_hosts, job_mpi, job_ranks, launcher_environment, launcher_failed, launcher_kind,
                        warn_mismatch)


def ranks_matrix(comm_file: str | None, policy: str, job: list[str] | None) -> CommMatrix:
    """The matrix a placement of ranks is computed from: the ranks' own (``comm_file``), or, for a
    policy that reads none (compact, scatter...), an empty one with as many ranks as the job
    starts (its -np)."""
    name = policy.strip().lower()
    if comm_file is not None:
        return read_comm(comm_file)
    if name == policies.AUTO or policies.lookup(name).needs_matrix:
        raise PinwiseError(f"policy {policy} places the ranks by their communication: give --comm FILE (pinwise mpi "
                           "trace writes it), or a policy that needs no matrix (compact, scatter, ...)")
    ranks = job_ranks(job) if job else None
    if ranks is None:
        raise PinwiseError(f"how many ranks? policy {policy} needs no matrix, but the job's command does not say "
                           "(give -np N after the launcher), and there is no --comm to count them")
    if ranks < 1:
        raise PinwiseError(f"the job starts {ranks} ranks: give -np 1 or more")
    return CommMatrix(np.zeros((ranks, ranks)))


def rank_plans(comm: CommMatrix, cluster: Cluster, policy: str, threads_per_rank: int, seed: int | None = None):
    """Per rank, the cluster PUs its threads get (``threads_per_rank`` each, thread k of the rank
    on the k-th), chosen by ``policy`` on the ranks' matrix. With several threads per rank the
    matrix is expanded, thread by thread, with a rank's threads bound together by more than all
    the traffic, so the policy keeps them under one object."""
    ranks, k = comm.threads, threads_per_rank
    topology = slots_topology(cluster, k)
    if ranks * k > len(topology.allowed):
        slots = f" (the hostfile's slots leave {len(topology.allowed)})" if cluster.slots else ""
        raise PinwiseError(f"{ranks} ranks x {k} thread{'s' if k > 1 else ''} and {cluster.topology.nb_pus} PUs on {len(cluster.hosts)} "
                           f"nodes{slots}: give a larger cluster{', more slots' if slots else ''} or fewer threads "
                           "per rank")
    matrix = comm.matrix
    if k > 1:  # sparse: a dense expansion takes k^2 times the ranks' matrix (2 GiB for 4,096 ranks x 4)
        import scipy.sparse as sp

        between = sp.csr_matrix(np.asarray(matrix, dtype=float))
        together = max(1.0, float(between.sum())) * 10
        between.setdiag(0)
        between.eliminate_zeros()
        spread = sp.kron(between, np.full((k, k), 1.0 / (k * k)), format="csr")  # a rank's traffic, thread by thread
        bound = sp.kron(sp.identity(ranks, format="csr"), together * (np.ones((k, k)) - np.eye(k)), format="csr")
        matrix = (spread + bound).tocsr()
    plan = matrix_plan(policy, matrix, topology, seed=seed, creator="policy")
    if plan is None:
        raise PinwiseError("policy os places nothing: choose a policy that places the ranks")
    pus = list(plan.pus)
    return [pus[r * k:(r + 1) * k] for r in range(ranks)]


def slots_topology(cluster: Cluster, threads_per_rank: int):
    """The cluster's topology with each host that a hostfile gives N slots holding N ranks at
    most: N x threads_per_rank PUs of it, one a core on its first cores in logical order (then the
    cores' second PUs), as Open MPI's own mapping by core fills a node. mpirun does not hold a
    rankfile to the slots, so pinwise holds the placement to them."""
    if not cluster.slots:
        return cluster.topology
    per_node, node = cluster.pus_per_node, cluster.node
    order = node.logical_order(allowed_only=False)
    sibling = {}  # a PU's rank among the PUs of its core
    for core in node.objects(ObjType.CORE):
        for k, cpu in enumerate(sorted(core.cpuset, key=order.index)):
            sibling[cpu] = k
    fill = sorted(range(per_node), key=lambda i: (sibling.get(order[i], 0), i))  # positions in the node
    allowed = []
    for n, host in enumerate(cluster.hosts):
        usable = min(per_node, cluster.slots.get(host, per_node) * threads_per_rank)
        allowed.extend(n * per_node + i for i in fill[:usable])
    if len(allowed) == cluster.topology.nb_pus:
        return cluster.topology
    return cluster.topology.restricted(allowed, "the hostfile's slots")


def gpu_rank_plans(comm: CommMatrix, cluster: Cluster, policy: str, threads_per_rank: int, gpus_per_node: int,
                   seed: int | None = None) -> tuple[list[list[int]], list[str]]:
    """Per rank, the cluster PUs its threads get and the GPU it drives: the ranks are mapped by
    ``policy`` onto the nodes' first ``gpus_per_node`` GPUs (in PCI bus order), seen as a tree of
    nodes > GPUs with the same local PUs > GPU, so that communicating ranks share a node and a
    package as the policy wants, one rank per GPU; each rank's threads then take PUs local to its
    GPU (the GPUs that share local PUs split them in turn, in logical order)."""
    node = cluster.node
    gpus = numbered(node.devices, "gpu")
    if len(gpus) < gpus_per_node:
        raise PinwiseError(f"--gpus-per-node {gpus_per_node}: a node ({node.source}) has {len(gpus)} GPU"
                           f"{'s' if len(gpus) != 1 else ''}; give its hwloc XML written with I/O (lstopo --of xml)")
    gpus = gpus[:gpus_per_node]
    ranks, slots = comm.threads, len(cluster.hosts) * gpus_per_node
    if ranks > slots:
        raise PinwiseError(f"{ranks} ranks and {gpus_per_node} GPUs on each of {len(cluster.hosts)} nodes: one rank "
                           f"per GPU needs {ranks - slots} more GPUs")
    order = node.logical_order(allowed_only=False)
    groups: dict[frozenset[int], list[int]] = {}  # local PUs -> the GPUs (indexes) local to them
    for index, gpu in enumerate(gpus):
        groups.setdefault(frozenset(gpu.cpuset & node.allowed), []).append(index)
    chunk_of: dict[int, list[int]] = {}
    for local, members in groups.items():
        pus = [cpu for cpu in order if cpu in local]
        size = len(pus) // len(members)
        if size < threads_per_rank:
            raise PinwiseError(f"GPUs {', '.join(f'gpu:{m}' for m in members)} share {len(pus)} local PUs: not "
                               f"{threads_per_rank} for each of their ranks; fewer threads per rank")
        for k, member in enumerate(members):
            chunk_of[member] = pus[k * size:(k + 1) * size]
    specs = []
    for n in range(len(cluster.hosts)):
        base = n * gpus_per_node
        specs.append(ObjectSpec(ObjType.GROUP, frozenset(range(base, base + gpus_per_node))))
        for members in groups.values():
            specs.append(ObjectSpec(ObjType.PACKAGE, frozenset(base + m for m in members)))
        specs.extend(ObjectSpec(ObjType.PU, frozenset([base + g]), base + g) for g in range(gpus_per_node))
    slot_tree = build_topology(specs, source=f"{len(cluster.hosts)} nodes x {gpus_per_node} GPUs")
    plan = matrix_plan(policy, comm.matrix, slot_tree, seed=seed, creator="policy")
    if plan is None:
        raise PinwiseError("policy os places nothing: choose a policy that places the ranks")
    per_node, per_rank, labels = cluster.pus_per_node, [], []
    for slot in plan.pus[:ranks]:
        n, g = divmod(slot, gpus_per_node)
        per_rank.append([n * per_node + order.index(cpu) for cpu in chunk_of[g][:threads_per_rank]])
        names = " ".join(gpus[g].names)
        labels.append(f"gpu:{g}" + (f" ({names})" if names else ""))
    return per_rank, labels


def check_rank_count(job: list[str], ranks: int) -> None:
    """Refuse a job that starts another number of ranks than the matrix has (when its command says)."""
    count = job_ranks(job)
    if count is not None and count != ranks:
        raise PinwiseError(f"the job starts {count} ranks but the matrix has {ranks}: the placement is made "
                           "for the ranks of the matrix, so run the job with as many (or trace it again with this "
                           "count)")


def run_placed(argv: list[str], cluster: Cluster, per_rank: list[list[int]], verify: bool):
    """Launch ``argv`` with each rank on its node and pinwise's preload library pinning each
    rank's threads to its PUs: Open MPI's mpirun with a rankfile (which binds each rank to its
    cores), MPICH's mpiexec with a machinefile of one ``host:1`` line per rank (Hydra starts rank
    i on line i's host), or Slurm's srun with SLURM_HOSTFILE and --distribution=arbitrary. Returns
    the exit status, the placement's lines (rankfile form) and, with ``verify``, per rank the
    threads' records (where each ran)."""
    kind = launcher_kind(argv)
    if kind is None:
        raise PinwiseError("pinwise mpi run drives Open MPI's mpirun, MPICH's mpiexec or Slurm's srun: write it "
                           "after --, e.g. pinwise mpi run ... -- mpirun -np 4 ./app")
    if kind != "slurm":
        warn_mismatch(kind, job_mpi(argv, kind))
    check_rank_count(argv, len(per_rank))
    places = rank_places(per_rank, cluster)
    lines = [f"rank {p.rank}={p.host} slot={p.slot}" for p in places]
    plans = [";".join(map(str, p.cpus)) for p in places]
    said = bytearray()
    with temporary_folder("mpirun") as tmp:
        log = Path(tmp, "threads.log")
        variables = {"LD_PRELOAD": str(PRELOAD_LIBRARY), "PINWISE_PLAN_BY_RANK": "|".join(plans),
                     "PINWISE_LOG": str(log), **RUNTIME_SETTINGS}
        clean = launcher_environment(user_environment(), tmp)
        if kind == "slurm":  # each task on its host (SLURM_HOSTFILE), each thread pinned by pinwise (srun binds none)
            hostfile = Path(tmp, "hostfile")
            hostfile.write_text("".join(f"{p.host}\n" for p in places), encoding="utf-8", errors="surrogateescape")
            command = [argv[0], "--distribution=arbitrary", "--cpu-bind=none", *argv[1:]]
            status = run_in_group(command, argv[0], env={**clean, **variables, "SLURM_HOSTFILE": str(hostfile)},
                                  stderr_tail=said)
        elif kind == "mpich":  # Hydra: rank i on line i's host; each thread pinned by pinwise
            taken = [word for word in argv[1:] if word in ("-f", "-hostfile", "-machinefile", "-hosts", "-host")]
            if taken:
                raise PinwiseError(f"mpiexec {taken[0]} names the hosts, and so does pinwise's machinefile (one line "
                                   "per rank, from the map): leave it out after --")
            machinefile = Path(tmp, "machinefile")
            machinefile.write_text("".join(f"{p.host}:1\n" for p in places), encoding="utf-8", errors="surrogateescape")
            command = [argv[0], "-f", str(machinefile),
                       *[part for name, value in variables.items() for part in ("-genv", name, value)], *argv[1:]]
            status = run_in_group(command, argv[0], env=clean, stderr_tail=said)
        else:
            rankfile = Path(tmp, "rankfile")
            rankfile.write_text("\n".join(lines) + "\n", encoding="utf-8", errors="surrogateescape")
            command = [argv[0], "--rankfile", str(rankfile),
                       *[part for name, value in variables.items() for part in ("-x", f"{name}={value}")], *argv[1:]]
            status = run_in_group(command, argv[0], env=clean, stderr_tail=said)
        started = [rank for rank in range(len(per_rank)) if Path(f"{log}.rank{rank}").exists()]
        if status != 0 and not started:
            named = job_hosts(argv) if kind == "openmpi" else None
            raise PinwiseError(launcher_failed(argv[0], status, said, "before any rank started") + (
                f"; the job names hosts of its own ({named}) beside pinwise's rankfile, which places ranks on "
                f"{', '.join(sorted({p.host for p in places}))}: mpirun starts them only on hosts the job's list "
                "has, so leave the job's hosts out after -- (pinwise gives mpirun its own)" if named else ""))
        found = {}
        if verify:
            for rank in range(len(per_rank)):
                path = Path(f"{log}.rank{rank}")
                found[rank] = parse_log(path.read_text(encoding="utf-8", errors="replace")) if path.exists() else ()
    return status, lines, found
