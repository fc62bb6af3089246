"""Where each rank goes, written as the launchers read it: Open MPI rankfiles, MPICH machinefiles,
Slurm hostfiles, or JSON."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import PinwiseError
from ..topology import Topology
from ..topology.model import ObjType
from .cluster import Cluster


@dataclass(frozen=True)
class RankPlace:
    rank: int
    host: str
    cpu: int          # the node's OS CPU number (the first, with several threads per rank)
    socket: int | None  # logical package index in the node; None on a node without packages
    core: int         # logical core index within its package (within the node without packages)
    cpus: tuple[int, ...] = ()    # every CPU of the rank, one per thread (with --threads-per-rank)
    last_core: int | None = None  # the last core of a rank's range in its package
    gpu: str | None = None        # the node's GPU the rank drives (with --gpus-per-node): gpu:N (OS names)

    @property
    def slot(self) -> str:
        """The rankfile slot: SOCKET:CORE, or SOCKET:FIRST-LAST for several cores; CORE or
        FIRST-LAST, the node's logical cores, on a node without packages (Open MPI reads a slot
        without a colon so, and a S:C slot there names no CPU)."""
        last = self.core if self.last_core is None else self.last_core
        cores = f"{self.core}" if last == self.core else f"{self.core}-{last}"
        return cores if self.socket is None else f"{self.socket}:{cores}"


def socket_and_core(node: Topology, cpu: int) -> tuple[int | None, int]:
    """A node CPU's package (logical index) and core within that package, as a rankfile names
    them; without packages, None and the core's logical index in the node. A node without cores
    counts its PUs as cores, as Open MPI does."""
    obj = node.pu(cpu)
    kind = ObjType.CORE if node.objects(ObjType.CORE) else ObjType.PU
    core = obj if kind is ObjType.PU else obj.enclosing(ObjType.CORE)
    if core is None:
        raise PinwiseError(f"CPU {cpu} of the node topology is in no core while others are: a rankfile slot cannot "
                           "name it (use --format json or slurm)")
    package = obj.enclosing(ObjType.PACKAGE)
    if package is None:
        return None, core.logical_index
    cores = [c.logical_index for c in node.objects(kind) if c.cpuset <= package.cpuset]
    return package.logical_index, cores.index(core.logical_index)


def rank_places(per_rank: list[list[int]], cluster: Cluster) -> list[RankPlace]:
    """Where each rank goes, from its cluster PUs (:func:`rank_plans`): its host, its CPUs on that
    host, and the rankfile's socket and core range. A rank must stay in one node, and in one
    package with contiguous cores (what a rankfile slot can name)."""
    per_node = cluster.pus_per_node
    order = cluster.node.logical_order(allowed_only=False)
    places = []
    for rank, pus in enumerate(per_rank):
        nodes = {pu // per_node for pu in pus}
        if len(nodes) != 1:
            raise PinwiseError(f"rank {rank}'s threads would span nodes: fewer threads per rank")
        cpus = tuple(order[pu % per_node] for pu in pus)
        sockets: dict[int | None, set[int]] = {}
        for cpu in cpus:
            socket, core = socket_and_core(cluster.node, cpu)
            sockets.setdefault(socket, set()).add(core)
        if len(sockets) != 1:
            raise PinwiseError(f"rank {rank}'s PUs span packages, which a rankfile slot cannot name: fewer threads "
                               "per rank")
        (socket, cores), = sockets.items()
        cores = sorted(cores)
        if cores != list(range(cores[0], cores[-1] + 1)):
            raise PinwiseError(f"rank {rank}'s cores {cores} are not contiguous, and a rankfile slot takes a range "
                               f"({'A-B' if socket is None else 'S:A-B'}): fewer threads per rank, or another policy")
        places.append(RankPlace(rank, cluster.hosts[nodes.pop()], cpus[0], socket, cores[0], cpus, cores[-1]))
    return places


def format_placement(places: list[RankPlace], fmt: str) -> str:
    """The placement as the launcher takes it: an Open MPI rankfile, Slurm's arbitrary
    distribution (a host per rank for SLURM_HOSTFILE, and the --cpu-bind list), MPICH's machinefile
    and -bind-to user: list, or JSON."""
    if fmt == "openmpi":
        return "".join(f"rank {p.rank}={p.host} slot={p.slot}\n" for p in places)
    if fmt == "json":
        import json

        return json.dumps({"ranks": [p.__dict__ for p in places]}, indent=2) + "\n"
    per_host: dict[str, list[tuple[int, ...]]] = {}
    for p in places:
        per_host.setdefault(p.host, []).append(p.cpus or (p.cpu,))
    lists = {tuple(sets) for sets in per_host.values()}
    hosts = "".join(f"{p.host}\n" for p in places)
    several = any(len(cpus) > 1 for cpus in (p.cpus for p in places))
    sets = max(lists, key=len) if lists else ()
    # one list serves every node: a node's k-th rank takes its k-th entry, so a node with fewer
    # ranks than another needs its list to begin the longest one (uneven counts, the same cores)
    if fmt in ("slurm", "mpich") and any(one != sets[:len(one)] for one in lists):
        raise PinwiseError(f"the nodes' CPU lists differ, and {'srun --cpu-bind' if fmt == 'slurm' else 'mpiexec -bind-to'}"
                           " applies one list to every node: use --format openmpi (mpirun --rankfile) or json")
    if fmt == "slurm":
        if several:
            masks = ",".join(hex(sum(1 << c for c in cpus)) for cpus in sets)
            binding = f"--cpu-bind=mask_cpu:{masks}"
        else:
            binding = "--cpu-bind=map_cpu:" + ",".join(str(cpus[0]) for cpus in sets)
        return f"# SLURM_HOSTFILE (one host per rank):\n{hosts}# srun --distribution=arbitrary {binding}\n"
    if fmt == "mpich":
        cpus = ",".join("+".join(map(str, cpus)) for cpus in sets)
        return "# machinefile (one line per rank):\n" + "".join(f"{p.host}:1\n" for p in places) + \
            f"# mpiexec -f machinefile -bind-to user:{cpus}\n"
    raise PinwiseError(f"unknown format {fmt!r}: openmpi, slurm, mpich or json")
