"""The MPI launchers pinwise drives (mpirun/mpiexec of Open MPI and MPICH, Slurm's srun): which
one a command line uses, which MPI a program is linked against, how many ranks and which hosts a
job names, the command that passes pinwise's variables to every rank, and what a launcher's
failure says."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import MappingProxyType

from ..errors import PinwiseError
from ..pinning.launcher import NATIVE_DIR


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


#: Options of the launchers whose value is the next word (or the next two): a value can be a
#: command on PATH (``--mca plm_rsh_agent ssh``, ``--launch-agent rsh``), not the program.
OPTION_VALUES = MappingProxyType({
    **dict.fromkeys(("--mca", "-mca", "--gmca", "-gmca", "--omca", "--prtemca", "--pmixmca", "-genv", "-env"), 2),
    **dict.fromkeys((
        # Open MPI's mpirun
        "-n", "-np", "--np", "-c", "--n", "-H", "-host", "--host", "-hostfile", "--hostfile", "-machinefile",
        "--machinefile", "--default-hostfile", "-rf", "--rankfile", "-x", "--map-by", "-map-by", "--rank-by",
        "-rank-by", "--bind-to", "-bind-to", "-wdir", "--wdir", "-wd", "--prefix", "-prefix", "--launch-agent",
        "-launch-agent", "--output-filename", "-output-filename", "--npernode", "-npernode", "--npersocket",
        "-npersocket", "-N", "--cpus-per-proc", "-cpus-per-proc", "--cpus-per-rank", "-cpus-per-rank", "--stdin",
        "-stdin", "--tune", "--path", "-path", "--preload-files", "--app", "--am", "--timeout", "--cpu-set",
        "-cpu-set", "--hetero-nodes", "--personality", "--report-pid", "--report-uri", "--xml-file",
        # MPICH's Hydra
        "-f", "-hosts", "-ppn", "-genvlist", "-envlist", "-launcher", "-launcher-exec", "-rmk", "-iface",
        "-errfile-pattern", "-outfile-pattern", "-configfile", "-profile", "-demux", "-bootstrap",
        "-bootstrap-exec", "-gpus-per-proc",
        # Slurm's srun (its long options mostly take =VALUE)
        "--ntasks", "--cpus-per-task", "--nodes", "-p", "--partition", "-t", "--time", "-J", "--job-name", "-o",
        "--output", "-e", "--error", "-w", "--nodelist", "-x", "--exclude", "-A", "--account", "-m",
        "--distribution", "-D", "--chdir", "--mem", "--mem-per-cpu", "--cpu-bind", "--gres", "--gpus", "-G",
        "--ntasks-per-node", "--export", "-i", "--input", "-C", "--constraint", "-q", "--qos", "--mpi", "-d",
        "--dependency", "-r", "--relative", "--het-group", "-T", "--threads", "-W", "--wait"), 1)})


def program_index(argv: list[str]) -> int | None:
    """Where the program starts in a launcher's command: the first word after ``argv[0]`` that is
    neither an option nor a known option's value (:data:`OPTION_VALUES`) and names a command
    (another word is the value of an option pinwise does not know); None when there is none."""
    i = 1
    while i < len(argv):
        word = argv[i]
        if word == "--":
            return i + 1 if i + 1 < len(argv) else None
        if not word.startswith("-") and shutil.which(word) is not None:
            return i
        i += 1 + (OPTION_VALUES.get(word, 0) if word.startswith("-") and "=" not in word else 0)
    return None


def program_mpi(argv: list[str]) -> str | None:
    """The MPI the job's program is linked against (``openmpi`` or ``mpich``), read from the
    program after the launcher's options when it is an executable file; None when that is not
    known (a script, a wrapper, no such file)."""
    start = program_index(argv)
    if start is None:
        return None
    word = argv[start]
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


#: The options that say how many ranks a launcher starts (mpirun/mpiexec of both MPIs, srun);
#: Open MPI's ``-c`` is its ``-np``, srun's is --cpus-per-task.
RANK_COUNT_OPTIONS = ("-n", "-np", "--np", "-c", "--n", "--ntasks")


def job_ranks(argv: list[str]) -> int | None:
    """How many ranks the job's command starts, when it says (``-n 4``, ``-np 4``, ``--ntasks=4``,
    srun's ``-n4``) before its program; None when it leaves the count to the launcher, or starts
    several programs (MPMD, ``a : b``), whose counts add up."""
    if ":" in argv[1:]:
        return None
    counts = RANK_COUNT_OPTIONS if Path(argv[0]).name != "srun" else tuple(o for o in RANK_COUNT_OPTIONS if o != "-c")
    end = program_index(argv)
    words = argv[1:end] if end is not None else argv[1:]
    for i, word in enumerate(words):
        name, _, value = word.partition("=")
        if name in counts and value:
            text = value
        elif word in counts and i + 1 < len(words):
            text = words[i + 1]
        elif word.startswith("-n") and word[2:].isdigit():
            text = word[2:]
        else:
            continue
        if not text.isdigit():  # the launcher would refuse it too
            raise PinwiseError(f"the job's {name if value else word} {text!r} is not a number of ranks")
        return int(text)
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


#: The options of mpirun/mpiexec (Open MPI's and MPICH's) that name the hosts of a job.
HOST_OPTIONS = ("-H", "-host", "--host", "-hosts", "-hostfile", "--hostfile", "-machinefile", "--machinefile",
                "--default-hostfile", "-f")

#: The name of this machine in the rankfile or machinefile of a job on this machine alone: what
#: Open MPI's and MPICH's launchers take as the local node whatever the host is called.
THIS_MACHINE = "localhost"


def job_hosts(argv: list[str]) -> str | None:
    """The option by which a job's command names its hosts (``-H a,b``, ``--hostfile F``), if any,
    before the program (whose own options are its own)."""
    end = program_index(argv)
    for word in argv[1:end]:
        name = word.split("=", 1)[0]
        if name in HOST_OPTIONS:
            return name
    return None
