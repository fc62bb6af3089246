"""Commands that measure placements: bench, report, workload, demo, auto, simulate."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .. import policies
from .. import topology as topo_mod
from ..errors import PinwiseError, interrupted_status
from ..vocabulary import AUTO_COMMAND
from .options import no_program, program_of
from .placing import reads_matrix, read_comm_file

if TYPE_CHECKING:
    from ..bench import BenchOptions, Candidate
    from ..plan import Plan
    from ..topology import Topology


#: The formats of the exports (--export-csv ...), as hyperfine names them.
EXPORT_KINDS = ("csv", "json", "markdown", "latex")


def _exports(args: argparse.Namespace) -> dict[str, str | None]:
    """The file each export format goes to (None: not written)."""
    return {kind: getattr(args, f"export_{kind}", None) for kind in EXPORT_KINDS}


@dataclass(frozen=True)
class BenchCommand:
    """``pinwise bench``'s options, checked against each other: the program, the placements it
    compares (resolved on this machine), how the experiment runs, and what the report shows."""

    argv: list[str]
    topology: Topology
    candidates: list[Candidate]
    db: str
    options: BenchOptions
    baseline: str | None
    confidence: float
    exports: dict[str, str | None]

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> BenchCommand:
        from ..bench import BenchOptions, build_candidates
        from ..policies import REGISTRY

        argv = program_of(args)
        if not argv:
            raise no_program("bench -r 35")
        if not topo_mod.is_this_machine(args.topology):
            raise PinwiseError("bench runs the program here, so it plans on this machine: drop --topology")
        topology = topo_mod.load_topology(None)
        comm = read_comm_file(args.comm, planned=True) if args.comm else None
        run_all = args.policies.strip().lower() == "all"
        if run_all:  # those that read a matrix when there is one
            names = [p.name for p in REGISTRY.values() if comm is not None or not p.needs_matrix]
        else:
            names = [p for p in args.policies.split(",") if p.strip()]
        if comm is not None and not run_all and not any(reads_matrix(p) for p in names):
            raise PinwiseError("--comm is read only by the policies that need the matrix: add one to --policies "
                               "(e.g. locality), or drop --comm")
        candidates = build_candidates(names, args.placement or [], topology, args.threads, comm)
        if args.baseline is not None and args.baseline not in [c.name for c in candidates]:
            raise PinwiseError(f"--baseline {args.baseline!r} is none of the placements benchmarked "
                               f"({', '.join(c.name for c in candidates)})")
        options = BenchOptions(args.runs, args.warmup, args.time_regex, args.timeout, args.new, args.seed,
                               progress=False if args.quiet else None,
                               extra_config={"threads": args.threads, "comm": args.comm})
        return cls(argv, topology, candidates, args.db, options, args.baseline, args.confidence, _exports(args))


def cmd_bench(args: argparse.Namespace) -> int:
    from ..bench import interrupted_message, open_db, run_bench
    from ..report import print_report, summarize

    command = BenchCommand.from_args(args)
    try:
        experiment = run_bench(command.argv, command.candidates, command.topology, command.db, command.options)
    except KeyboardInterrupt as interrupt:
        print(f"pinwise: {interrupted_message(command.db)}", file=sys.stderr)
        return interrupted_status(interrupt)
    connection = open_db(command.db, create=False)
    try:
        summary = summarize(connection, experiment, command.baseline, command.confidence)
    finally:
        connection.close()
    _warn_damaged(connection, command.db)
    empty = [p for p in summary.policies if not len(p.times)]
    if empty:  # the table says what ran; no verdict stands on a placement that never ran well
        from ..report.terminal import summary_table
        from ..report.wide import wide_console

        wide_console().print(summary_table(summary))
        print(f"results: {command.db} (pinwise report {command.db} --html report.html)", file=sys.stderr)
        reasons = "; ".join(f"{p.name}: " + ", ".join(f"{n} x {r}" for r, n in p.failures.items()) for p in empty)
        print(f"pinwise: error: no successful run of {', '.join(p.name for p in empty)} ({reasons})", file=sys.stderr)
        return 1
    print_report([summary])
    _export(command.exports, [summary])
    print(f"results: {command.db} (pinwise report {command.db} --html report.html)", file=sys.stderr)
    return 0


def _export(targets: dict[str, str | None], summaries: list) -> None:
    from ..report.export import write_exports

    for path in write_exports(summaries, targets):
        print(f"wrote {path}", file=sys.stderr)


def _warn_damaged(connection, path: str) -> None:
    """One line per damaged row that was skipped: the report stands on the others."""
    for problem in dict.fromkeys(connection.problems):
        print(f"pinwise: warning: {path}: {problem}", file=sys.stderr)


def _summaries(connection, command: ReportCommand) -> list:
    """The summaries of the experiments ``pinwise report`` shows, damaged rows named and skipped."""
    from ..bench import db
    from ..report import summarize
    from ..report.summary import has_placement

    experiments = db.experiments(connection)
    damaged = bool(connection.problems)
    _warn_damaged(connection, command.db)
    connection.problems.clear()
    if command.experiment is not None:
        experiments = [e for e in experiments if e.id == command.experiment]
        if not experiments:
            raise PinwiseError(f"{command.db} has no readable experiment {command.experiment}")
    if not experiments:
        if damaged:
            raise PinwiseError(f"{command.db} holds no readable experiment")
        raise PinwiseError(f"{command.db} holds no experiment yet: run pinwise bench --db {command.db} -- program")
    baselines = {e.id: command.baseline for e in experiments}
    if command.baseline is not None and len(experiments) > 1:
        lacking = [e for e in experiments if not has_placement(connection, e, command.baseline)]
        if len(lacking) < len(experiments):  # (in none of them: summarize refuses it, naming what there is)
            for e in lacking:
                baselines[e.id] = None
                print(f"pinwise: warning: experiment {e.id} ({e.label}) has no placement {command.baseline!r}: its "
                      "table compares against its own baseline (os, else its first placement)", file=sys.stderr)
    summaries = [summarize(connection, e, baselines[e.id], command.confidence) for e in experiments]
    summaries = [s for s in summaries if any(len(p.times) for p in s.policies) or sum(p.runs for p in s.policies)]
    _warn_damaged(connection, command.db)
    if not summaries:
        raise PinwiseError(f"{command.db} holds no finished run yet")
    return summaries


@dataclass(frozen=True)
class ReportCommand:
    """``pinwise report``'s options, checked against each other: the results database and the
    simulations it shows (read), and what it writes."""

    db: str | None
    simulations: list              # pinwise.simulate's Simulation records, read from --simulation
    html: str | None
    png: str | None
    baseline: str | None
    confidence: float
    experiment: int | None
    exports: dict[str, str | None]

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ReportCommand:
        from ..simulate import read_simulation

        exports = _exports(args)
        if args.db is None and not args.simulation:
            raise PinwiseError("nothing to report: give the results database (pinwise report results.db), "
                               "or --simulation FILE")
        if args.db is None and any(exports.values()):
            raise PinwiseError("the exports are of a results database's experiments: give DB")
        if args.db is None and args.png:
            raise PinwiseError("--png plots a results database's experiments: give DB (--html shows a simulation)")
        simulations = [read_simulation(path) for path in args.simulation or []]
        return cls(args.db, simulations, args.html, args.png, args.baseline, args.confidence, args.experiment, exports)


def cmd_report(args: argparse.Namespace) -> int:
    from ..bench import db
    from ..report import print_report, save_plots, write_html
    from ..report.html import simulation_section

    command = ReportCommand.from_args(args)
    summaries = []
    if command.db is not None:
        connection = db.open_db(command.db, create=False)
        try:
            summaries = _summaries(connection, command)
        except db.UNREADABLE as err:
            raise db.damaged(command.db, err) from None
        finally:
            connection.close()
        print_report(summaries)
    for simulation in command.simulations:
        print_simulation(simulation)
    if command.png:
        for summary in summaries:
            prefix = f"experiment{summary.experiment.id}-" if len(summaries) > 1 else ""
            for path in save_plots(summary, command.png, prefix):
                print(f"wrote {path}", file=sys.stderr)
    if command.html:
        write_html(summaries, command.html, [simulation_section(simulation) for simulation in command.simulations])
        print(f"wrote {command.html}", file=sys.stderr)
    _export(command.exports, summaries)
    return 0


@dataclass(frozen=True)
class WorkloadCommand:
    """``pinwise workload``'s options, checked against each other: the list, or the command line
    of the workload to run."""

    command: list[str] | None        # None: list them
    print_only: bool = False

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> WorkloadCommand:
        from ..workloads import workload_command

        if args.action == "list":
            if args.name:
                raise PinwiseError(f"list takes no name: pinwise workload list shows them all, pinwise workload run "
                                   f"{args.name} runs one")
            return cls(None)
        if not args.name:
            raise PinwiseError("which workload? pinwise workload run NAME (pinwise workload list shows them)")
        return cls(workload_command(args.name, args.threads, args.iterations, args.shared_ratio, args.imbalance,
                                    args.size), args.print)


def cmd_workload(args: argparse.Namespace) -> int:
    from ..workloads import WORKLOADS, on_path

    workload = WorkloadCommand.from_args(args)
    command = workload.command
    if command is None:
        for known in WORKLOADS.values():
            print(f"{known.name:<11} {known.partners}  (like {known.like})")
        print("run one: pinwise workload run NAME [-n THREADS] [-i ITERATIONS] [--shared-ratio R] [--imbalance F] "
              "[--size KIB]")
        return 0
    if workload.print_only:
        print(" ".join([on_path(command[0]), *command[1:]]))
        return 0
    from ..processes import become

    become(command[0], command)  # nothing of pinwise stays to outlive: the workload is the process


def cmd_demo(args: argparse.Namespace) -> int:
    from ..demo import run_demo

    run_demo(args.out, quick=args.quick)
    return 0


@dataclass(frozen=True)
class AutoCommand:
    """``pinwise auto``'s options, checked against each other: the program (and its smaller input
    to trace), and either the benchmark on this machine or the simulation of another."""

    argv: list[str]
    trace_argv: list[str] | None
    topology: Topology               # this machine, or with ``simulate`` the machine simulated
    simulate: bool = False
    policy_names: list[str] | None = None   # --policies: the candidates instead of the analysis's
    placements: list[str] | None = None
    db: str | None = None
    time_regex: str | None = None
    budget: float = 5.0
    backend: str | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> AutoCommand:
        import shlex

        argv = program_of(args)
        if not argv:
            raise no_program(AUTO_COMMAND)
        if args.trace_args is not None and not args.trace_args.strip():
            raise PinwiseError("--trace-args is empty: give the arguments of a smaller input to trace with, or leave "
                               "it out to trace the program as it is given")
        try:
            trace_argv = [argv[0], *shlex.split(args.trace_args)] if args.trace_args is not None else None
        except ValueError as err:
            raise PinwiseError(f"--trace-args {args.trace_args!r} cannot be split into arguments ({err})") from None
        if args.simulate is None and args.topology is not None:
            raise PinwiseError(f"auto benchmarks on this machine; to judge placements on {args.topology!r} by cache "
                               "simulation add --simulate")
        if args.simulate is not None:
            if args.policies or args.db or args.time_regex:
                raise PinwiseError("--simulate ranks the analysis's candidates by simulation: --policies, --db and "
                                   "--time-regex belong to the benchmark, drop them")
            if args.simulate and args.topology is not None and args.simulate != args.topology:
                raise PinwiseError(f"two machines to simulate: --simulate {args.simulate!r} and -t {args.topology!r}; "
                                   "give one")
            if not args.simulate and args.topology is None:
                raise PinwiseError("--simulate needs the machine to simulate: --simulate T or -t T (a preset, XML "
                                   "file or synthetic string)")
            return cls(argv, trace_argv, topo_mod.load_topology(args.simulate or args.topology), simulate=True,
                       placements=args.placement, backend=args.backend)
        topology = topo_mod.load_topology(None)
        if args.policies is not None and not args.policies.strip(" ,"):
            raise PinwiseError("--policies is empty: name the policies to bench, or leave it out for the analysis's "
                               "candidates")
        candidates = [p.strip() for p in args.policies.split(",") if p.strip()] if args.policies else None
        if args.db is not None:
            from ..bench import db

            db.check_target(args.db)  # before the trace and the analysis, not after them
        return cls(argv, trace_argv, topology, False, candidates, args.placement, args.db, args.time_regex,
                   args.budget, args.backend)


def cmd_auto(args: argparse.Namespace) -> int:
    from ..auto import run_auto, simulated_auto

    command = AutoCommand.from_args(args)
    if command.simulate:
        result = simulated_auto(command.argv, command.topology, trace_argv=command.trace_argv,
                                placements=command.placements, say=lambda text: print(text, file=sys.stderr),
                                backend=command.backend)
        print_simulation(result, command.argv)
        best = min(result.placements, key=lambda p: p.critical_path)
        print(f"simulated best on {result.topology}: {best.policy} (CPUs {','.join(map(str, best.cpus))}); "
              "a simulation ranks placements, it does not measure them: bench on the machine to confirm")
        return 0
    result = run_auto(command.argv, command.topology, trace_argv=command.trace_argv,
                      budget_minutes=command.budget, db_path=command.db, time_regex=command.time_regex,
                      progress=None, say=lambda text: print(text, file=sys.stderr), policies=command.policy_names,
                      placements=command.placements, backend=command.backend)
    from rich.text import Text

    from ..report.terminal import summary_table
    from ..report.wide import wide_console

    console = wide_console()
    console.print(summary_table(result.summary))
    for line in result.lines:
        console.print(Text(line), soft_wrap=True)
    return 0


@dataclass(frozen=True)
class SimulateCommand:
    """``pinwise simulate``'s options, checked against each other: the program, the machine
    simulated, the placements (resolved on it), the simulator's settings and the outputs."""

    argv: list[str]
    topology: Topology
    placements: list[tuple[str, Plan]]
    latency: dict[str, int]
    quantum: int = 1
    inclusive: bool = True
    workers: int | None = None
    bandwidth: str | None = None
    prefetch: bool = True
    json: bool = False
    output: str | None = None
    png: str | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> SimulateCommand:
        from ..bench import build_candidates
        from ..simulate import parse_latencies

        argv = program_of(args)
        if not argv:
            raise no_program("simulate -t x7550")
        topology = topo_mod.load_topology(args.topology)
        latency = parse_latencies(args.latency)
        comm = read_comm_file(args.comm, planned=True) if args.comm else None
        names = [p for p in args.policies.split(",") if p.strip()]
        if any(p.strip().lower() == policies.BASELINE for p in names):
            raise PinwiseError("policy os places nothing, so it cannot be simulated: name the placements to compare")
        candidates = build_candidates(names, args.placement or [], topology, args.threads, comm)
        placements = [(c.name, c.plan if not c.random_threads else c.plan_for_run(topology, 0)) for c in candidates]
        return cls(argv, topology, placements, latency, args.quantum, args.inclusive == "yes", args.workers,
                   args.bandwidth, args.prefetch == "yes", args.json, args.output, args.png)


def cmd_simulate(args: argparse.Namespace) -> int:
    from ..report.plots import save_simulation_png
    from ..simulate import simulate, write_json

    command = SimulateCommand.from_args(args)
    result = simulate(command.argv, command.topology, command.placements, quantum=command.quantum,
                      inclusive=command.inclusive, latency=command.latency,
                      stdout=sys.stderr if command.json else None,  # JSON alone on stdout
                      workers=command.workers, bandwidth=command.bandwidth, prefetch=command.prefetch)
    if command.output:
        write_json(result, command.output)
        print(f"wrote {command.output} (pinwise report --simulation {command.output} shows it)", file=sys.stderr)
    if command.png:
        save_simulation_png(result, command.png)
        print(f"wrote {command.png}", file=sys.stderr)
    if command.json:
        write_json(result, None)
    else:
        print_simulation(result, command.argv)
    return _program_failed(result, command.argv)


def _program_failed(result, argv: list[str]) -> int:
    """0 for a program that ran to a clean end; else its failure said, and its status passed on
    (128 + N for a signal, as a shell gives it): counts that stop at a crash rank only the part of
    the run before it."""
    if result.exit_status == 0:
        return 0
    from ..processes import how_it_ended

    print(f"pinwise: error: {argv[0]} {how_it_ended(result.exit_status)} under the simulator: the counts and the "
          "ranking cover only its run up to there", file=sys.stderr)
    return result.exit_status if result.exit_status > 0 else 128 - result.exit_status


def print_simulation(result, argv: list[str] | None = None) -> None:
    """The table of a simulation, its ranking and where the transfers went."""
    from rich.table import Table
    from rich.text import Text

    from ..report.wide import wide_console

    console = wide_console()
    for note in result.notes:
        console.print(Text(f"note: {note}"), soft_wrap=True)
    first = result.placements[0]
    program = " ".join(argv) if argv else result.program or "the program"
    console.print(Text(f"{program} simulated on {result.topology}: {result.threads} threads, "
                       f"{sum(result.accesses_per_thread):,} accesses, quantum {result.quantum}, "
                       f"{'inclusive' if result.inclusive else 'independent levels'}"), soft_wrap=True)
    table = Table()
    levels = list(first.levels)
    for column in ["placement", "CPUs", *[f"{name} misses" for name in levels], "invalidations", "transfers",
                   "DRAM local", "DRAM remote", "waited", "cycles (busiest PU)", "vs first"]:
        table.add_column(column, justify="left" if column in ("placement", "CPUs") else "right")
    for p in result.placements:
        transfers = sum(p.transfers.values())
        table.add_row(p.policy, _short_list(p.cpus), *[f"{p.levels[name].misses:,}" for name in levels],
                      f"{p.invalidations:,}", f"{transfers:,}", f"{p.dram.local:,}", f"{p.dram.remote:,}",
                      f"{sum(p.queue_per_thread):,}", f"{p.critical_path:,}",
                      f"{p.critical_path / first.critical_path:.2f}" if first.critical_path else "-")
    console.print(table)
    if result.bandwidth:
        limits = ", ".join(f"{name} {value:g}" for name, value in result.bandwidth.items() if value)
        console.print(Text(f"waited: cycles the threads waited on bandwidth (included in the cycles; bytes per "
                           f"cycle: {limits}; streams {'prefetched' if result.prefetch else 'not prefetched'}); "
                           "busiest resource over a chunk: " + ", ".join(f"{p.policy} {p.busiest:.0%}"
                                                                      for p in result.placements)), soft_wrap=True)
    console.print(Text("ranking (busiest PU's cycles): " + ranking_text(result)), soft_wrap=True)
    for p in result.placements:
        moved = ", ".join(f"{n:,} via {name}" for name, n in p.transfers.items() if n)
        if moved:
            console.print(Text(f"  {p.policy}: transfers {moved}"), soft_wrap=True)


def ranking_text(result) -> str:
    first = result.placements[0]
    ranked = sorted(result.placements, key=lambda p: p.critical_path)
    return ", ".join(f"{p.policy} {p.critical_path / first.critical_path:.2f}" if first.critical_path else p.policy
                     for p in ranked) + f" (ratios to {first.policy})"


def _short_list(cpus: list[int]) -> str:
    text = ",".join(map(str, cpus))
    return text if len(text) <= 40 else text[:39] + "…"
