"""The command line's vocabulary: argument types that turn pinwise's parse errors into argparse's
one-line usage errors, the option groups several commands share, and the help formatter."""

from __future__ import annotations

import argparse
import os
import sys

from .. import policies
from ..errors import PinwiseError
from ..numbers import duration_seconds, real_number, whole_number
from ..plan import MAX_SLOTS
from ..policies import CREATOR_AUTO, CREATOR_MODES
from ..vocabulary import KIND_PREFERENCES

#: Bounds of the options' values: beyond them a value is a typing mistake, not a request.
MAX_THREADS = MAX_SLOTS
MAX_SEED = (1 << 32) - 1


def argument_type(read, *args, text: bool = False):
    """An argparse type: ``read(value, *args)`` (pinwise.numbers, or a path check of pinwise.files),
    its PinwiseError turned into argparse's one-line usage error; ``text`` keeps the string itself."""
    def convert(value: str):
        try:
            result = read(value, *args)
        except PinwiseError as err:
            raise argparse.ArgumentTypeError(str(err)) from None
        return value if text else result
    return convert


def whole(minimum: int = 0, maximum: int | None = None):
    return argument_type(whole_number, "value", minimum, maximum)


def real(minimum: float | None = None, maximum: float | None = None):
    return argument_type(real_number, "value", minimum, maximum)


def check_output(value: str, kind: str):
    """Output paths are checked when the command line is read, before any work starts."""
    from .. import files  # not at the top: pathlib and tempfile would slow every `pinwise run`

    return getattr(files, f"check_output_{kind}")(value, f"output {kind}")


OUTPUT_FILE = argument_type(check_output, "file", text=True)
OUTPUT_FOLDER = argument_type(check_output, "folder", text=True)

#: The confidence of the tests: a level, not a share of 100.
CONFIDENCE = real(0.5, 0.9999)

#: How ``pinwise map -f`` can print a mapping.
MAP_FORMATS = ("table", "picture", "cpulist", "omp-places", "gomp", "kmp", "likwid", "taskset", "json")


def placement_options(parser: argparse.ArgumentParser, live_only: bool = False) -> None:
    """The placement options of run and pin (``live_only``: pin, which plans for this machine only)."""
    group = parser.add_argument_group("placement (choose one)")
    group.add_argument("--cpus", "-c", metavar="LIST",
                       help="CPU per thread in creation order: 0,4,1-3, a likwid-pin expression as likwid-pin -c "
                            "takes it (S0:0-1), or an hwloc location as hwloc-calc reads it, its PUs in logical order "
                            "(core:0-1, pu:even, numa:0, package:1.core:2, 0x3, all, 'core:0-3 ~pu:1')")
    group.add_argument("--expr", "-e", metavar="EXPR",
                       help="likwid-pin expression: N:0-3, S0:0-3, C0, M0, E:N:8:1:2, S:scatter, joined with @")
    group.add_argument("--policy", "-p", metavar="NAME", help="a policy: " + policies.help_text()
                       + " (numactl's -p is --preferred here)")
    group.add_argument("--mapping", "-m", metavar="FILE", help="mapping file written by 'pinwise map -o' (numactl's -m "
                                                               "is --membind here)")
    parser.add_argument("--places", metavar="PLACES",
                        help="OpenMP places that --policy close, spread or primary distribute the threads over, as "
                             "libgomp builds them from OMP_PLACES: threads (default: a place per PU), cores, sockets, "
                             "ll_caches, numa_domains, cores(4), {0:4}:4:8; each thread gets all the PUs of its place "
                             "(--cpus PLACES gives one place per thread in order)")
    parser.add_argument("--near", metavar="DEVICE",
                        help="place the threads on the PUs local to a device, with the policy given (default compact; "
                             "with --comm, communicating threads close to each other and to the device): gpu:N or "
                             "nic:N (in PCI bus order, as pinwise topo numbers them), an OS device's name (mlx5_0, "
                             "cuda1, eth0) or a PCI bus id (0000:34:00.0); the machine must come with its devices "
                             "(hwloc XML written with I/O)")
    parser.add_argument("--any-machine", action="store_true",
                        help="run a mapping file made for a machine of another structure anyway")
    parser.add_argument("-n", "--threads", type=whole(1, MAX_THREADS), metavar="N",
                        help="number of threads to plan for (default: the CPU list's length, or every allowed CPU)")
    parser.add_argument("--skip", "-s", metavar="MASK",
                        help="hex mask of created threads that take no slot (likwid-pin -s), e.g. 0x1")
    parser.add_argument("--repeat-from", type=whole(0, MAX_THREADS), default=0, metavar="SLOT",
                        help="past the last slot, start again at this slot (default 0, as likwid-pin wraps); 1 for "
                             "programs that create their workers in rounds, so the main thread's slot is not reused")
    parser.add_argument("--seed", type=whole(0, MAX_SEED), help="seed of the random policy (default: a new one, printed)")
    parser.add_argument("--comm", metavar="FILE",
                        help="communication matrix for the communication-aware policies (locality, lp-compact, ...)")
    parser.add_argument("--creator", choices=CREATOR_MODES, default=CREATOR_AUTO,
                        help=CREATOR_HELP)
    add_kinds_option(parser)
    if live_only:
        parser.add_argument("--topology", "-t", metavar="T",
                            help="only 'live' (the default, this machine): pin moves the threads of a process here, "
                                 "so it plans for here (pinwise run --print -t T shows a plan for another machine)")
    else:
        add_topology_option(parser)


def mpi_placement_options(parser: argparse.ArgumentParser, comm_option: bool = False) -> None:
    if comm_option:  # before the job, which takes the rest of the line
        parser.add_argument("--comm", metavar="FILE",
                            help="communication matrix of the ranks (pinwise mpi trace, or any); not needed by the "
                                 "policies that read none (compact, scatter...), which count the ranks from the job's "
                                 "-np")
    else:
        parser.add_argument("comm", metavar="COMM_FILE", help="communication matrix (pinwise mpi trace, or any)")
    parser.add_argument("--cluster", metavar="SPEC", help="'node:N' then one node's levels, e.g. 'node:4 pack:2 core:8 "
                                                          "pu:2' (default: the Slurm allocation, else this machine "
                                                          "alone, named localhost)")
    parser.add_argument("--hostfile", metavar="FILE", help="an Open MPI or MPICH hostfile: its hosts are the nodes")
    parser.add_argument("--node-topology", metavar="T",
                        help="each host's topology with --hostfile or in a Slurm allocation (default: this machine's)")
    parser.add_argument("--policy", "-p", default=policies.LOCALITY, metavar="NAME",
                        help="a policy of pinwise map (default locality): "
                        + policies.help_text("--comm" if comm_option else "COMM_FILE"))


def adapt_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("adaptive placement (--adapt)")
    group.add_argument("--adapt", action="store_true",
                       help="place the threads while the program runs: sample who shares data with whom (the "
                            "sampling tracer), and whenever another placement would cost less than 4/5 of the "
                            "current one in two judgments in a row, or under half of it in one, move the threads "
                            "(--policy: the policy to place with; default: the one analyze recommends for each "
                            "phase); no trace step")
    group.add_argument("--interval", type=argument_type(duration_seconds, "--interval", 0.01, 600.0), default=None,
                       metavar="TIME", help="how often the placement is judged at least; the sampler's windows are a "
                            "quarter of it, and a phase change is judged as soon as they show it (default 200ms)")
    group.add_argument("--log", metavar="FILE", type=OUTPUT_FILE,
                       help="with --adapt: every judgment's decision and every move, as JSON lines, while it runs")
    group.add_argument("--duration", type=argument_type(duration_seconds, "--duration", 0.01, 1e9), metavar="TIME",
                       help="with pin --pid --adapt: adapt for this long, then detach (default: until the process "
                            "ends or Ctrl-C)")


def add_export_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("exports (as hyperfine's)")
    group.add_argument("--export-csv", metavar="FILE", type=OUTPUT_FILE,
                       help="one row per placement: times in seconds (mean, stddev, median, min, max), variance in "
                            "s^2, speedups with their intervals, decisions, migrations; with several programs the "
                            "overall table goes to FILE.overall.csv")
    group.add_argument("--export-json", metavar="FILE", type=OUTPUT_FILE,
                       help="the same with every run's time, the machine header and the overall table")
    group.add_argument("--export-markdown", metavar="FILE", type=OUTPUT_FILE, help="the tables in Markdown")
    group.add_argument("--export-latex", metavar="FILE", type=OUTPUT_FILE,
                       help="the papers' tables (per program, over all programs) for LaTeX with booktabs")


def add_kinds_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cpu-kinds", choices=KIND_PREFERENCES, default="performance",
                        help="on a hybrid machine (CPU kinds in the topology), which kind compact, scatter, close and "
                             "spread fill first: performance (default: P-cores, hwloc's highest efficiency rank), "
                             "efficiency (E-cores), or any (depth-first order, kinds ignored)")


def add_topology_option(parser: argparse.ArgumentParser, purpose: str = "machine to plan for: 'live' (default, "
                         "this machine),") -> None:
    parser.add_argument(
        "--topology", "-t", metavar="T",
        help=f"{purpose} a preset (pinwise topo --presets), an hwloc XML file (lstopo --of xml), a pinwise JSON "
             "file, or a synthetic string such as 'pack:2 l3:1 core:4 pu:2'",
    )


CREATOR_HELP = ("where a communication-aware policy puts thread 0, the creator: auto (default: beside the last "
                "thread it creates when the trace shows it idle), last, or policy (like any thread, as the papers do)")


class Formatter(argparse.HelpFormatter):
    """argparse's help formatter, told the terminal's width once: by default it asks shutil for
    every argument added, and importing shutil (with its compression modules) is a twentieth of
    the start-up of ``pinwise run`` (benchmarks/pin_overhead.py)."""

    columns: int | None = None

    def __init__(self, prog: str, **kwargs):
        if Formatter.columns is None:
            try:
                Formatter.columns = int(os.environ["COLUMNS"])
            except (KeyError, ValueError):
                try:
                    Formatter.columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
                except (AttributeError, ValueError, OSError):
                    Formatter.columns = 80
        kwargs.setdefault("width", max(Formatter.columns, 40) - 2)
        super().__init__(prog, **kwargs)


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (and a pointer to --help), like every other error."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", Formatter)
        super().__init__(*args, **kwargs)

    def parse_known_args(self, args=None, namespace=None):
        self.given = list(sys.argv[1:] if args is None else args)  # for error(): the words it read
        return super().parse_known_args(args, namespace)

    def error(self, message: str):
        print(f"pinwise: error: {message}{self._dash_value(message)} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(2)

    def _dash_value(self, message: str) -> str:
        """Why an option "expected one argument" when one followed it: argparse reads a value that
        starts with '-' (``--duration -1s``) as an option, and says only that the value is missing."""
        if ": expected one argument" not in message:
            return ""
        names = message.removeprefix("argument ").split(":")[0].split("/")
        given = getattr(self, "given", [])
        for k, word in enumerate(given[:-1]):
            value = given[k + 1]
            if word in names and value.startswith("-") and value not in self._option_string_actions:
                return f" ({value!r} starts with '-', so it was read as an option: write {word}={value})"
        return ""


def program_of(args: argparse.Namespace) -> list[str]:
    """The program and its arguments, as given after ``--``."""
    return args.program[1:] if args.program[:1] == ["--"] else args.program


def no_program(example: str, alternative: str = "") -> PinwiseError:
    """The one error for a command given no program: where to write it, with ``example``."""
    return PinwiseError(f"no program given: write it after --, e.g. pinwise {example} -- ./prog args{alternative}")
