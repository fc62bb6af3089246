"""`pinwise mpi trace`: who sends how much to whom in an MPI job, measured with a PMPI library.

The job runs through its real launcher (mpirun/mpiexec of Open MPI or MPICH, srun) with the
recorder preloaded into every rank (native/mpi/pmpi_recorder.c: what it counts and how collectives
are decomposed), built once per MPI since their ABIs differ: libpinwise_pmpi.so for Open MPI,
libpinwise_pmpi_mpich.so for MPICH, chosen by the library the program is linked against. Each rank
writes its row at MPI_Finalize (or MPI_Abort); pinwise merges the rows into the comm file format of
`pinwise trace`: the symmetric matrix M[i][j] = bytes sent i->j plus j->i, with ``"kind": "mpi"``,
the messages matrix (same rule), the directed bytes and the collectives' totals beside it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

import numpy as np

from .comm import CommMatrix, TraceInfo, write_comm
from .errors import PinwiseError
from .numbers import whole_number
from .pinning.launcher import NATIVE_DIR
from .topology import Topology

RECORDER = NATIVE_DIR / "libpinwise_pmpi.so"
#: The recorder built for each MPI (their ABIs differ: one build per MPI, see native/CMakeLists.txt).
RECORDERS = MappingProxyType({"openmpi": RECORDER, "mpich": NATIVE_DIR / "libpinwise_pmpi_mpich.so"})
MPI_NAMES = MappingProxyType({"openmpi": "Open MPI", "mpich": "MPICH", "slurm": "Slurm"})
#: Where a rank finds its number; a launcher started from inside a rank (srun in a job step) must
#: not pass its own on, or it would take the plan of that rank.
RANK_VARIABLES = ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID")
#: The names Open MPI's and MPICH's launchers go by (Debian: the plain names are alternatives).
MPI_LAUNCHERS = ("mpirun", "mpiexec", "orterun", "oshrun", "mpirun.openmpi", "mpiexec.openmpi", "mpirun.mpich",
                 "mpiexec.mpich", "mpiexec.hydra")


def launcher_kind(argv: list[str]) -> str | None:
    """Which launcher starts the job: ``openmpi`` (Open MPI's mpirun/mpiexec), ``mpich`` (MPICH's
    Hydra mpiexec), ``slurm`` (srun), or None for anything else. Asked of the launcher itself
    (``--version``), since Debian's mpirun is whichever MPI the alternatives point to."""
    if not argv or shutil.which(argv[0]) is None:
        return None
    name = Path(argv[0]).name
    if name == "srun":
        return "slurm"
    if name not in MPI_LAUNCHERS:
        return None
    try:
        text = subprocess.run([shutil.which(argv[0]), "--version"], capture_output=True, text=True, timeout=30,
                              stdin=subprocess.DEVNULL).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    if "Open MPI" in text or "OpenRTE" in text:
        return "openmpi"
    return "mpich" if "HYDRA" in text else None


def program_mpi(argv: list[str]) -> str | None:
    """The MPI the job's program is linked against (``openmpi`` or ``mpich``), read from the first
    argument after the launcher that names an executable file; None when that is not known (a
    script, a wrapper, no such file)."""
    for word in argv[1:]:
        if word.startswith("-"):
            continue
        path = word if "/" in word else shutil.which(word)
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            with open(path, "rb") as handle:
                head = handle.read(4 << 20)  # the dynamic section sits near the start of an ELF file
            if not head.startswith(b"\x7fELF"):
                return None
            if b"libmpich.so" in head:
                return "mpich"
            return "openmpi" if b"libmpi.so" in head else None
    return None


def job_mpi(argv: list[str], kind: str | None) -> str:
    """The MPI whose recorder the ranks need: the program's, else the launcher's, else Open MPI
    (Debian's default MPI, which srun jobs here use)."""
    return program_mpi(argv) or (kind if kind in RECORDERS else "openmpi")


#: The options that say how many ranks a launcher starts (mpirun/mpiexec of both MPIs, srun).
RANK_COUNT_OPTIONS = ("-n", "-np", "--np", "-c", "--n", "--ntasks")


def job_ranks(argv: list[str]) -> int | None:
    """How many ranks the job's command starts, when it says (``-n 4``, ``-np 4``, ``--ntasks=4``,
    srun's ``-n4``); None when it leaves the count to the launcher, or starts several programs
    (MPMD, ``a : b``), whose counts add up."""
    words = argv[1:]
    if ":" in words:
        return None
    for i, word in enumerate(words):
        if word == "--":
            break
        name, _, value = word.partition("=")
        if name in RANK_COUNT_OPTIONS and value:
            text = value
        elif word in RANK_COUNT_OPTIONS and i + 1 < len(words):
            text = words[i + 1]
        elif word.startswith("-n") and word[2:].isdigit():
            text = word[2:]
        else:
            if not word.startswith("-") and shutil.which(word) is not None:
                break  # the program: what follows is its own
            continue
        return int(text) if text.isdigit() else None
    return None


def warn_mismatch(kind: str | None, mpi: str) -> None:
    """A program of one MPI started by the other's launcher runs as separate one-rank worlds."""
    if kind in RECORDERS and kind != mpi:
        print(f"pinwise: warning: the program is linked against {MPI_NAMES[mpi]} but the launcher is "
              f"{MPI_NAMES[kind]}'s: each rank will start a world of its own (use {MPI_NAMES[mpi]}'s launcher, "
              f"e.g. {'mpirun.openmpi' if mpi == 'openmpi' else 'mpiexec.mpich'})", file=sys.stderr)


def launch_command(argv: list[str], kind: str | None, env: dict[str, str], variables: list[str]) -> list[str]:
    """The command of launcher ``kind`` (:func:`launcher_kind`) with what makes ``variables`` (set
    in ``env``) reach every rank: Open MPI's mpirun forwards to remote daemons only what ``-x
    NAME`` names; MPICH's Hydra forwards the whole environment, and ``-genv`` says it explicitly."""
    if shutil.which(argv[0]) is None:
        raise PinwiseError(f"launcher {argv[0]!r} not found on PATH (Debian: apt-get install openmpi-bin)")
    if kind == "openmpi":
        return [argv[0], *[part for variable in variables for part in ("-x", variable)], *argv[1:]]
    if kind == "mpich":
        return [argv[0], *[part for variable in variables for part in ("-genv", variable, env[variable])], *argv[1:]]
    return list(argv)


def read_rows(folder: Path) -> tuple[int, dict[int, dict]]:
    """Every rank's row file: world size and, per rank, bytes, messages, collectives, complete."""
    rows: dict[int, dict] = {}
    size = None
    for path in sorted(folder.glob("rank-*.txt")):
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        try:
            if lines[0] != "pinwise-mpi 1":
                raise ValueError("not a pinwise-mpi row")
            _, rank, _, ranks = lines[1].split()
            rank, ranks = int(rank), int(ranks)
            row = {"bytes": [int(v) for v in lines[2].split()[1:]], "messages": [int(v) for v in lines[3].split()[1:]],
                   "collectives": {}, "complete": False}
            for line in lines[4:]:
                words = line.split()
                if words[0] == "collective":
                    row["collectives"][words[1]] = (int(words[2]), int(words[3]))
                elif words[0] == "complete":
                    row["complete"] = words[1] == "1"
            if len(row["bytes"]) != ranks or len(row["messages"]) != ranks:
                raise ValueError("a row of the wrong length")
        except (IndexError, ValueError) as err:
            raise PinwiseError(f"the recorder's row {path.name} cannot be read ({err})") from None
        if rank in rows:
            raise PinwiseError(f"several processes each wrote the row of rank {rank} in a world of {ranks}: the ranks "
                               "did not join one world (a program of one MPI under the other's launcher, or srun "
                               "without the PMI its MPI speaks: --mpi=pmix for Open MPI, --mpi=pmi2 for MPICH)")
        if size is not None and ranks != size:
            raise PinwiseError(f"the recorder's rows disagree on the number of ranks ({size} and {ranks})")
        size = ranks
        rows[rank] = row
    if size is None:
        raise PinwiseError("no rank wrote its row: did the program call MPI_Finalize? (is it an MPI program linked "
                           "against the MPI the launcher runs?)")
    return size, rows


def launcher_message(text: str) -> str:
    """The line of a launcher's standard error that says what went wrong: the first line of the
    last boxed message (Open MPI frames each between rules of dashes), else the last line."""
    lines = [line.strip() for line in text.splitlines()]

    def rule(line: str) -> bool:
        return len(line) >= 10 and set(line) <= set("-=*")

    rules = [i for i, line in enumerate(lines) if rule(line)]
    if len(rules) >= 2:
        boxed = [line for line in lines[rules[-2] + 1:rules[-1]] if line]
        if boxed:
            return boxed[0]
    said = [line for line in lines if line and not rule(line)]
    return said[-1] if said else ""


def launcher_failed(launcher: str, status: int, stderr: bytes, when: str) -> str:
    """The error of a job whose launcher failed before the ranks did anything pinwise can read:
    the launcher's own words, not a guess about the program."""
    message = launcher_message(bytes(stderr).decode(errors="replace"))
    name = Path(launcher).name
    how = f"exit status {status}" if status > 0 else f"killed by signal {-status}"
    if not message:
        return f"{name} failed ({how}) {when}, and said nothing on standard error"
    return f"{name} failed ({how}) {when}: it said {message!r} (its whole message is above)"


def merge(size: int, rows: dict[int, dict], command: list[str], exit_status: int, seconds: float) -> CommMatrix:
    directed = np.zeros((size, size))
    messages = np.zeros((size, size))
    collectives: dict[str, dict[str, int]] = {}
    for rank, row in rows.items():
        directed[rank] = row["bytes"]
        messages[rank] = row["messages"]
        for name, (calls, payload) in row["collectives"].items():
            total = collectives.setdefault(name, {"calls": 0, "bytes": 0})
            total["calls"] += calls
            total["bytes"] += payload
    missing = sorted(set(range(size)) - set(rows))
    aborted = sorted(rank for rank, row in rows.items() if not row["complete"])
    symmetric = directed + directed.T
    np.fill_diagonal(symmetric, 0)
    both = messages + messages.T
    np.fill_diagonal(both, 0)
    extra = {"kind": "mpi", "ranks": size, "messages": both.astype(int).tolist(),
             "bytes_sent": directed.astype(int).tolist(), "collectives": collectives,
             "collective_algorithms": {"bcast": "binomial tree", "reduce": "binomial tree",
                                       "allreduce": "reduce to 0 then bcast (binomial trees)", "gather": "linear",
                                       "scatter": "linear", "allgather": "ring", "alltoall": "linear",
                                       "barrier": "none (no payload)"}}
    if missing:
        extra["ranks_without_a_row"] = missing
    if aborted:
        extra["ranks_aborted"] = aborted
    info = TraceInfo(command=tuple(command), tool="pinwise-pmpi 1", partial=bool(missing or aborted or exit_status),
                     exit_status=exit_status, seconds=round(seconds, 3),
                     extra=MappingProxyType(extra))
    return CommMatrix(symmetric, info=info)  # no memory accesses or instructions: bytes are not those


#: Where Open MPI's launcher (ORTE in 4.x, PRRTE in 5.x) makes its session folders, ompi.HOST.UID/...
SESSION_FOLDER_VARIABLES = ("OMPI_MCA_orte_tmpdir_base", "PRTE_MCA_prte_tmpdir_base")


def launcher_environment(environment: dict[str, str], folder: str) -> dict[str, str]:
    """What a launcher pinwise starts gets: the user's environment without the variables of a
    rank (RANK_VARIABLES), and Open MPI's session folders inside pinwise's temporary ``folder``
    (unless the user placed them): a launcher that a signal ends leaves them there, and they go
    with the folder, or at the next start of pinwise if it was killed too."""
    env = {k: v for k, v in environment.items() if k not in RANK_VARIABLES}
    for name in SESSION_FOLDER_VARIABLES:
        env.setdefault(name, str(folder))
    return env


def mpi_trace(argv: list[str], output: str) -> CommMatrix:
    """Run the job through its launcher with the recorder in every rank; write and return the matrix."""
    from .processes import run_in_group, temporary_folder, user_environment

    if not argv:
        raise PinwiseError("no job given: write the launcher and the program after --, e.g. "
                           "pinwise mpi trace -o comm.json -- mpirun -np 4 ./app")
    kind = launcher_kind(argv)
    mpi = job_mpi(argv, kind)
    warn_mismatch(kind, mpi)
    recorder = RECORDERS[mpi]
    if not recorder.exists():
        package = "libopenmpi-dev" if mpi == "openmpi" else "libmpich-dev"
        raise PinwiseError(f"pinwise was built without its {MPI_NAMES[mpi]} recorder (no {MPI_NAMES[mpi]} development "
                           f"files were found): apt-get install {package}, then reinstall pinwise")
    with temporary_folder("mpi") as tmp:
        rows = Path(tmp, "rows")
        rows.mkdir()
        env = launcher_environment(user_environment(), tmp)
        env["PINWISE_MPI_DIR"] = str(rows)
        env["LD_PRELOAD"] = ":".join(filter(None, [str(recorder), env.get("LD_PRELOAD")]))
        command = launch_command(argv, kind, env, ["LD_PRELOAD", "PINWISE_MPI_DIR"])
        start = time.perf_counter()
        said = bytearray()
        status = run_in_group(command, argv[0], env=env, stderr_tail=said)
        seconds = time.perf_counter() - start
        if status != 0 and not any(rows.glob("rank-*.txt")):
            raise PinwiseError(launcher_failed(argv[0], status, said, "before any rank wrote its row"))
        size, found = read_rows(rows)
    comm = merge(size, found, list(argv), status, seconds)
    write_comm(comm, output)
    extra = comm.info.extra
    if comm.info.partial:
        why = [f"exit status {status}"] if status else []
        if "ranks_without_a_row" in extra:
            why.append(f"ranks {extra['ranks_without_a_row']} wrote no row")
        if "ranks_aborted" in extra:
            why.append(f"ranks {extra['ranks_aborted']} aborted")
        print(f"pinwise: warning: the job did not end cleanly ({'; '.join(why)}): {output} holds what was "
              "recorded, marked partial", file=sys.stderr)
    return comm


# ---- the cluster and the mapping of ranks ------------------------------------------------------

@dataclass(frozen=True)
class Cluster:
    """Identical nodes under a network level: ``topology`` is the whole cluster (one Group per
    node above the node's own tree, so the network is the top level of the cost model),
    ``node`` one node's topology, ``hosts`` their names."""

    hosts: tuple[str, ...]
    node: Topology
    topology: Topology

    @property
    def pus_per_node(self) -> int:
        return self.node.nb_pus


def cluster_of(hosts: list[str], node: Topology) -> Cluster:
    from .topology import load_topology

    if not hosts:
        raise PinwiseError("a cluster needs at least one node")
    if len(set(hosts)) != len(hosts):
        raise PinwiseError(f"hosts named twice: {', '.join(sorted({h for h in hosts if hosts.count(h) > 1}))}")
    whole = load_topology(f"group:{len(hosts)} {node.shape}") if len(hosts) > 1 else load_topology(node.shape)
    return Cluster(tuple(hosts), node, whole)


def parse_cluster(text: str) -> Cluster:
    """``node:4 pack:2 core:8 pu:2``: N nodes (named node0, node1, ...) of the topology after it."""
    from .topology import load_topology

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


def read_hostfile(path: str) -> list[str]:
    """Host names of an Open MPI or MPICH hostfile (``host slots=N``, ``host:N``, ``# comments``)."""
    from .files import read_input

    hosts = []
    for number, line in enumerate(read_input(path, "hostfile").splitlines(), start=1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        first, *options = line.split()
        host, colon, count = first.partition(":")
        if not host or any(c in host for c in "=,"):
            raise PinwiseError(f"hostfile {path!r}, line {number}: {line!r} does not start with a host name")
        counts = [("host:N", count)] if colon else []
        counts += [(key, value) for key, _, value in (option.partition("=") for option in options)
                   if key in ("slots", "max_slots", "max-slots", "cpus", "cpu")]
        for key, value in counts:  # a host with no slot takes no rank: a typing mistake, not a plan
            whole_number(value, f"hostfile {path!r}, line {number}: {key}", 1)
        if host not in hosts:
            hosts.append(host)
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
        if "[" not in part:
            hosts.append(part)
            continue
        prefix, _, rest = part.partition("[")
        ranges, _, suffix = rest.partition("]")
        for item in ranges.split(","):
            low, _, high = item.partition("-")
            width = len(low)
            try:
                for n in range(int(low), int(high or low) + 1):
                    hosts.append(f"{prefix}{n:0{width}d}{suffix}")
            except ValueError:
                raise PinwiseError(f"SLURM_JOB_NODELIST {text!r}: cannot read {item!r}") from None
    return hosts


#: The options of mpirun/mpiexec (Open MPI's and MPICH's) that name the hosts of a job.
HOST_OPTIONS = ("-H", "-host", "--host", "-hosts", "-hostfile", "--hostfile", "-machinefile", "--machinefile",
                "--default-hostfile", "-f")

#: The name of this machine in the rankfile or machinefile of a job on this machine alone: what
#: Open MPI's and MPICH's launchers take as the local node whatever the host is called.
THIS_MACHINE = "localhost"


def job_hosts(argv: list[str]) -> str | None:
    """The option by which a job's command names its hosts (``-H a,b``, ``--hostfile F``), if any,
    before the program (whose own options are its own)."""
    for word in argv[1:]:
        name = word.split("=", 1)[0]
        if name in HOST_OPTIONS:
            return name
        if not word.startswith("-") and shutil.which(word) is not None:
            return None
    return None


def find_cluster(cluster: str | None, hostfile: str | None, node_topology: str | None,
                 job: list[str] | None = None) -> Cluster:
    """The cluster from --cluster, or --hostfile (each node like --node-topology, default this
    machine), or Slurm's allocation (SLURM_JOB_NODELIST) when running inside one; else this machine
    alone (a single-node job), unless the ``job``'s command names hosts of its own."""
    from .topology import load_topology

    if cluster is not None and hostfile is not None:
        raise PinwiseError("give --cluster or --hostfile, not both")
    if cluster is not None:
        if node_topology is not None:
            raise PinwiseError("--node-topology goes with --hostfile or Slurm; --cluster names the node's levels itself")
        return parse_cluster(cluster)
    node = load_topology(node_topology)
    if hostfile is not None:
        return cluster_of(read_hostfile(hostfile), node)
    if os.environ.get("SLURM_JOB_NODELIST"):
        return cluster_of(expand_hostlist(os.environ["SLURM_JOB_NODELIST"]), node)
    named = job_hosts(job) if job else None
    if named is not None:
        raise PinwiseError(f"the job names its hosts ({named}), and pinwise places the ranks on them: give pinwise the "
                           "same hosts with --hostfile FILE (or --cluster), and leave them out after --")
    return cluster_of([THIS_MACHINE], node)


@dataclass(frozen=True)
class RankPlace:
    rank: int
    host: str
    cpu: int          # the node's OS CPU number (the first, with several threads per rank)
    socket: int       # logical package index in the node
    core: int         # logical core index within its package
    cpus: tuple[int, ...] = ()    # every CPU of the rank, one per thread (with --threads-per-rank)
    last_core: int | None = None  # the last core of a rank's range in its package
    gpu: str | None = None        # the node's GPU the rank drives (with --gpus-per-node): gpu:N (OS names)

    @property
    def slot(self) -> str:
        """The rankfile slot: SOCKET:CORE, or SOCKET:FIRST-LAST for several cores."""
        last = self.core if self.last_core is None else self.last_core
        return f"{self.socket}:{self.core}" if last == self.core else f"{self.socket}:{self.core}-{last}"


def socket_and_core(node: Topology, cpu: int) -> tuple[int, int]:
    """A node CPU's package (logical index) and core within that package, as a rankfile names them."""
    from .topology.model import ObjType

    obj = node.pu(cpu)
    package, core = obj.enclosing(ObjType.PACKAGE), obj.enclosing(ObjType.CORE)
    if package is None or core is None:
        return (package.logical_index if package is not None else 0), 0
    cores = [c.logical_index for c in node.objects(ObjType.CORE) if c.cpuset <= package.cpuset]
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
        sockets: dict[int, set[int]] = {}
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
                               "(S:A-B): fewer threads per rank, or another policy")
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
    if fmt in ("slurm", "mpich") and len(lists) > 1:
        raise PinwiseError(f"the nodes' CPU lists differ, and {'srun --cpu-bind' if fmt == 'slurm' else 'mpiexec -bind-to'}"
                           " applies one list to every node: use --format openmpi (mpirun --rankfile) or json")
    sets = next(iter(lists)) if lists else ()
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


# ---- running a job with its placement ----------------------------------------------------------

def ranks_matrix(comm_file: str | None, policy: str, job: list[str] | None) -> CommMatrix:
    """The matrix a placement of ranks is computed from: the ranks' own (``comm_file``), or, for a
    policy that reads none (compact, scatter...), an empty one with as many ranks as the job
    starts (its -np)."""
    from . import policies
    from .comm import read_comm

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
    from .mapping import compute_mapping

    ranks, k = comm.threads, threads_per_rank
    if ranks * k > cluster.topology.nb_pus:
        raise PinwiseError(f"{ranks} ranks x {k} threads and {cluster.topology.nb_pus} PUs on {len(cluster.hosts)} "
                           "nodes: give a larger cluster or fewer threads per rank")
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
    plan = compute_mapping(policy, matrix, cluster.topology, seed=seed, creator="policy")
    if plan is None:
        raise PinwiseError("policy os places nothing: choose a policy that places the ranks")
    pus = list(plan.pus)
    return [pus[r * k:(r + 1) * k] for r in range(ranks)]


def gpu_rank_plans(comm: CommMatrix, cluster: Cluster, policy: str, threads_per_rank: int, gpus_per_node: int,
                   seed: int | None = None) -> tuple[list[list[int]], list[str]]:
    """Per rank, the cluster PUs its threads get and the GPU it drives: the ranks are mapped by
    ``policy`` onto the nodes' first ``gpus_per_node`` GPUs (in PCI bus order), seen as a tree of
    nodes > GPUs with the same local PUs > GPU, so that communicating ranks share a node and a
    package as the policy wants, one rank per GPU; each rank's threads then take PUs local to its
    GPU (the GPUs that share local PUs split them in turn, in logical order)."""
    from .mapping import compute_mapping
    from .topology import ObjectSpec, build_topology
    from .topology.devices import numbered
    from .topology.model import ObjType

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
    plan = compute_mapping(policy, comm.matrix, slot_tree, seed=seed, creator="policy")
    if plan is None:
        raise PinwiseError("policy os places nothing: choose a policy that places the ranks")
    per_node, per_rank, labels = cluster.pus_per_node, [], []
    for slot in plan.pus[:ranks]:
        n, g = divmod(slot, gpus_per_node)
        per_rank.append([n * per_node + order.index(cpu) for cpu in chunk_of[g][:threads_per_rank]])
        names = " ".join(gpus[g].names)
        labels.append(f"gpu:{g}" + (f" ({names})" if names else ""))
    return per_rank, labels


def run_placed(argv: list[str], cluster: Cluster, per_rank: list[list[int]], verify: bool):
    """Launch ``argv`` with each rank on its node and pinwise's preload library pinning each
    rank's threads to its PUs: Open MPI's mpirun with a rankfile (which binds each rank to its
    cores), MPICH's mpiexec with a machinefile of one ``host:1`` line per rank (Hydra starts rank
    i on line i's host), or Slurm's srun with SLURM_HOSTFILE and --distribution=arbitrary. Returns
    the exit status, the placement's lines (rankfile form) and, with ``verify``, per rank the
    threads' records (where each ran)."""
    from .pinning.launcher import PRELOAD_LIBRARY, RUNTIME_SETTINGS
    from .pinning.log import parse_log
    from .processes import run_in_group, temporary_folder, user_environment

    kind = launcher_kind(argv)
    if kind is None:
        raise PinwiseError("pinwise mpi run drives Open MPI's mpirun, MPICH's mpiexec or Slurm's srun: write it "
                           "after --, e.g. pinwise mpi run ... -- mpirun -np 4 ./app")
    if kind != "slurm":
        warn_mismatch(kind, job_mpi(argv, kind))
    count = job_ranks(argv)
    if count is not None and count != len(per_rank):
        raise PinwiseError(f"the job starts {count} ranks but the matrix has {len(per_rank)}: the placement is made "
                           "for the ranks of the matrix, so run the job with as many (or trace it again with this "
                           "count)")
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
            raise PinwiseError(launcher_failed(argv[0], status, said, "before any rank started"))
        found = {}
        if verify:
            for rank in range(len(per_rank)):
                path = Path(f"{log}.rank{rank}")
                found[rank] = parse_log(path.read_text(encoding="utf-8", errors="replace")) if path.exists() else ()
    return status, lines, found
