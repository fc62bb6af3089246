"""The cluster a job runs on: its hosts (a --cluster string, a hostfile, a Slurm hostlist or the
launcher's own options) and the topology of one node, which every node is taken to share."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..errors import PinwiseError
from ..numbers import whole_number
from ..files import read_input
from ..topology import Topology, is_this_machine, load_topology
from .launchers import THIS_MACHINE, job_hosts


@dataclass(frozen=True)
class Cluster:
    """Identical nodes under a network level: ``topology`` is the whole cluster (one Group per
    node above the node's own tree, so the network is the top level of the cost model),
    ``node`` one node's topology, ``hosts`` their names."""

    hosts: tuple[str, ...]
    node: Topology
    topology: Topology
    slots: Mapping[str, int] = field(default_factory=dict)  # a hostfile's slots, by host, where it gives them

    @property
    def pus_per_node(self) -> int:
        return self.node.nb_pus


def cluster_of(hosts: list[str], node: Topology, slots: Mapping[str, int] | None = None) -> Cluster:
    if not hosts:
        raise PinwiseError("a cluster needs at least one node")
    if len(set(hosts)) != len(hosts):
        raise PinwiseError(f"hosts named twice: {', '.join(sorted({h for h in hosts if hosts.count(h) > 1}))}")
    whole = load_topology(f"group:{len(hosts)} {node.shape}") if len(hosts) > 1 else load_topology(node.shape)
    return Cluster(tuple(hosts), node, whole, dict(slots or {}))


def parse_cluster(text: str) -> Cluster:
    """``node:4 pack:2 core:8 pu:2``: N nodes (named node0, node1, ...) of the topology after it."""
    words = text.split()
    if not words or not words[0].lower().startswith("node:"):
        raise PinwiseError(f"--cluster {text!r}: start with node:N, then one node's levels, e.g. 'node:4 pack:2 "
                           "core:8 pu:2'")
    try:
        count = int(words[0].split(":", 1)[1])
    except ValueError:
        count = 0
    if not 1 <= count <= 100_000:
        raise PinwiseError(f"--cluster {text!r}: node:N needs a whole number of nodes from 1 to 100000")
    if len(words) < 2:
        raise PinwiseError(f"--cluster {text!r}: give one node's levels after node:{count}, e.g. pack:2 core:8 pu:2")
    return cluster_of([f"node{i}" for i in range(count)], load_topology(" ".join(words[1:])))


def read_hostfile(path: str) -> dict[str, int | None]:
    """Host names of an Open MPI or MPICH hostfile (``host slots=N``, ``host slots = N``,
    ``host:N``, ``# comments``), in order, each with its slots (None where a line of it gives
    none; a host named twice adds its slots, as Open MPI counts them)."""
    hosts: dict[str, int | None] = {}
    for number, line in enumerate(read_input(path, "hostfile").splitlines(), start=1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        first, *options = " ".join(line.replace("=", " = ").split()).replace(" = ", "=").split()
        host, colon, count = first.partition(":")
        if not host or any(c in host for c in "=,"):
            raise PinwiseError(f"hostfile {path!r}, line {number}: {line!r} does not start with a host name")
        counts = [("host:N", count)] if colon else []
        counts += [(key, value) for key, _, value in (option.partition("=") for option in options)
                   if key in ("slots", "cpus", "cpu")]
        slots = None
        for key, value in counts:  # a host with no slot takes no rank: a typing mistake, not a plan
            slots = whole_number(value, f"hostfile {path!r}, line {number}: {key}", 1)
        for key, _, value in (option.partition("=") for option in options):
            if key in ("max_slots", "max-slots"):
                whole_number(value, f"hostfile {path!r}, line {number}: {key}", 1)
        if host in hosts:  # lines of one host add up; one without slots leaves the count to the node
            slots = None if slots is None or hosts[host] is None else hosts[host] + slots
        hosts[host] = slots
    if not hosts:
        raise PinwiseError(f"hostfile {path!r} names no host")
    return hosts


def expand_hostlist(text: str) -> list[str]:
    """Slurm's compressed host list: ``node[1-3,7],gpu01`` -> node1 node2 node3 node7 gpu01."""
    hosts, depth, part = [], 0, ""
    parts = []
    for char in text:
        if char == "," and depth == 0:
            parts.append(part)
            part = ""
            continue
        depth += char == "["
        depth -= char == "]"
        part += char
    parts.append(part)
    for part in filter(None, (p.strip() for p in parts)):
        hosts.extend(_expand_brackets(part, text, part))
    return hosts


def _expand_brackets(part: str, text: str, name: str) -> list[str]:
    """One host pattern of a Slurm host list, every bracket expanded, the first one outermost as
    Slurm does (``rack[1-2]-n[1-2]`` -> rack1-n1 rack1-n2 rack2-n1 rack2-n2)."""
    if "[" not in part:
        return [part]
    prefix, _, rest = part.partition("[")
    ranges, closed, suffix = rest.partition("]")
    if not closed:
        raise PinwiseError(f"SLURM_JOB_NODELIST {text!r}: a '[' in {name!r} is never closed")
    tails = _expand_brackets(suffix, text, name)
    hosts = []
    for item in ranges.split(","):
        low, _, high = item.partition("-")
        width = len(low)
        try:
            numbers = range(int(low), int(high or low) + 1)
        except ValueError:
            raise PinwiseError(f"SLURM_JOB_NODELIST {text!r}: cannot read {item!r}") from None
        hosts.extend(f"{prefix}{n:0{width}d}{tail}" for n in numbers for tail in tails)
    return hosts


def find_cluster(cluster: str | None, hostfile: str | None, node_topology: str | None,
                 job: list[str] | None = None) -> Cluster:
    """The cluster from --cluster, or --hostfile (each node like --node-topology, default this
    machine), or Slurm's allocation (SLURM_JOB_NODELIST) when running inside one; else this machine
    alone (a single-node job), unless the ``job``'s command names hosts of its own."""
    if cluster is not None and hostfile is not None:
        raise PinwiseError("give --cluster or --hostfile, not both")
    if cluster is not None:
        if node_topology is not None:
            raise PinwiseError("--node-topology goes with --hostfile or Slurm; --cluster names the node's levels itself")
        return parse_cluster(cluster)
    node = load_topology(node_topology)
    if hostfile is not None:
        hosts = read_hostfile(hostfile)
        return cluster_of(list(hosts), node, {host: n for host, n in hosts.items() if n is not None})
    if os.environ.get("SLURM_JOB_NODELIST"):
        return cluster_of(expand_hostlist(os.environ["SLURM_JOB_NODELIST"]), node)
    named = job_hosts(job) if job else None
    if named is not None:
        raise PinwiseError(f"the job names its hosts ({named}), and pinwise places the ranks on them: give pinwise the "
                           "same hosts with --hostfile FILE (or --cluster), and leave them out after --")
    if not is_this_machine(node_topology):  # a plan for this machine on slots it does not have
        raise PinwiseError(f"--node-topology {node_topology!r} shapes the nodes of --hostfile or of a Slurm allocation; "
                           "without them the job runs on this machine, whose topology pinwise reads: drop it, or give "
                           "--hostfile (or --cluster to plan for machines you do not have)")
    return cluster_of([THIS_MACHINE], node)
