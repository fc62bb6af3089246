"""Commands that measure placements: bench, report, workload, demo, auto, simulate."""

from __future__ import annotations

import argparse
import sys

from .. import policies
from .. import topology as topo_mod
from ..errors import PinwiseError, interrupted_status
from ..vocabulary import AUTO_COMMAND
from .options import no_program, program_of
from .placing import reads_matrix, read_comm_file


def cmd_bench(args: argparse.Namespace) -> int:
    from ..bench import BenchOptions, build_candidates, interrupted_message, open_db, run_bench
    from ..policies import REGISTRY
    from ..report import print_report, summarize

    argv = program_of(args)
    if not argv:
        raise no_program("bench -r 35")
    if not topo_mod.is_this_machine(args.topology):
        raise PinwiseError("bench runs the program here, so it plans on this machine: drop --topology")
    topology = topo_mod.load_topology(None)
    comm = read_comm_file(args.comm) if args.comm else None
    run_all = args.policies.strip().lower() == "all"
    if run_all:  # those that read a matrix when there is one
        policies = [p.name for p in REGISTRY.values() if comm is not None or not p.needs_matrix]
    else:
        policies = [p for p in args.policies.split(",") if p.strip()]
    if comm is not None and not run_all and not any(reads_matrix(p) for p in policies):
        raise PinwiseError("--comm is read only by the policies that need the matrix: add one to --policies "
                           "(e.g. locality), or drop --comm")
    candidates = build_candidates(policies, args.placement or [], topology, args.threads, comm)
    if args.baseline is not None and args.baseline not in [c.name for c in candidates]:
        raise PinwiseError(f"--baseline {args.baseline!r} is none of the placements benchmarked "
                           f"({', '.join(c.name for c in candidates)})")
    try:
        options = BenchOptions(args.runs, args.warmup, args.time_regex, args.timeout, args.new, args.seed,
                               progress=False if args.quiet else None,
                               extra_config={"threads": args.threads, "comm": args.comm})
        experiment = run_bench(argv, candidates, topology, args.db, options)
    except KeyboardInterrupt as interrupt:
        print(f"pinwise: {interrupted_message(args.db)}", file=sys.stderr)
        return interrupted_status(interrupt)
    connection = open_db(args.db, create=False)
    try:
        summary = summarize(connection, experiment, args.baseline, args.confidence)
    finally:
        connection.close()
    _warn_damaged(connection, args.db)
    empty = [p for p in summary.policies if not len(p.times)]
    if empty:  # the table says what ran; no verdict stands on a placement that never ran well
        from ..report.terminal import summary_table
        from ..report.wide import wide_console

        wide_console().print(summary_table(summary))
        print(f"results: {args.db} (pinwise report {args.db} --html report.html)", file=sys.stderr)
        reasons = "; ".join(f"{p.name}: " + ", ".join(f"{n} x {r}" for r, n in p.failures.items()) for p in empty)
        print(f"pinwise: error: no successful run of {', '.join(p.name for p in empty)} ({reasons})", file=sys.stderr)
        return 1
    print_report([summary])
    _export(args, [summary])
    print(f"results: {args.db} (pinwise report {args.db} --html report.html)", file=sys.stderr)
    return 0


def _export(args: argparse.Namespace, summaries: list) -> None:
    from ..report.export import write_exports

    targets = {kind: getattr(args, f"export_{kind}", None) for kind in ("csv", "json", "markdown", "latex")}
    for path in write_exports(summaries, targets):
        print(f"wrote {path}", file=sys.stderr)


def _warn_damaged(connection, path: str) -> None:
    """One line per damaged row that was skipped: the report stands on the others."""
    for problem in dict.fromkeys(connection.problems):
        print(f"pinwise: warning: {path}: {problem}", file=sys.stderr)


def _summaries(connection, args: argparse.Namespace) -> list:
    """The summaries of the experiments ``pinwise report`` shows, damaged rows named and skipped."""
    from ..bench import db
    from ..report import summarize

    experiments = db.experiments(connection)
    damaged = bool(connection.problems)
    _warn_damaged(connection, args.db)
    connection.problems.clear()
    if args.experiment is not None:
        experiments = [e for e in experiments if e.id == args.experiment]
        if not experiments:
            raise PinwiseError(f"{args.db} has no readable experiment {args.experiment}")
    if not experiments:
        if damaged:
            raise PinwiseError(f"{args.db} holds no readable experiment")
        raise PinwiseError(f"{args.db} holds no experiment yet: run pinwise bench --db {args.db} -- program")
    summaries = [summarize(connection, e, args.baseline, args.confidence) for e in experiments]
    summaries = [s for s in summaries if any(len(p.times) for p in s.policies) or sum(p.runs for p in s.policies)]
    _warn_damaged(connection, args.db)
    if not summaries:
        raise PinwiseError(f"{args.db} holds no finished run yet")
    return summaries


def cmd_report(args: argparse.Namespace) -> int:
    from ..bench import db
    from ..report import print_report, save_plots, write_html
    from ..report.html import simulation_section
    from ..simulate import read_simulation

    if args.db is None and not args.simulation:
        raise PinwiseError("nothing to report: give the results database (pinwise report results.db), "
                           "or --simulation FILE")
    if args.db is None and any(getattr(args, f"export_{kind}") for kind in ("csv", "json", "markdown", "latex")):
        raise PinwiseError("the exports are of a results database's experiments: give DB")
    if args.db is None and args.png:
        raise PinwiseError("--png plots a results database's experiments: give DB (--html shows a simulation)")
    simulations = [read_simulation(path) for path in args.simulation or []]
    summaries = []
    if args.db is not None:
        connection = db.open_db(args.db, create=False)
        try:
            summaries = _summaries(connection, args)
        except db.UNREADABLE as err:
            raise db.damaged(args.db, err) from None
        finally:
            connection.close()
        print_report(summaries)
    for simulation in simulations:
        print_simulation(simulation)
    if args.png:
        for summary in summaries:
            prefix = f"experiment{summary.experiment.id}-" if len(summaries) > 1 else ""
            for path in save_plots(summary, args.png, prefix):
                print(f"wrote {path}", file=sys.stderr)
    if args.html:
        write_html(summaries, args.html, [simulation_section(simulation) for simulation in simulations])
        print(f"wrote {args.html}", file=sys.stderr)
    _export(args, summaries)
    return 0


#: Options of one trace backend only, by the backend's name (``pinwise trace``).
def cmd_workload(args: argparse.Namespace) -> int:
    from ..workloads import WORKLOADS, on_path, workload_command

    if args.action == "list":
        if args.name:
            raise PinwiseError(f"list takes no name: pinwise workload list shows them all, pinwise workload run "
                               f"{args.name} runs one")
        for workload in WORKLOADS.values():
            print(f"{workload.name:<11} {workload.partners}  (like {workload.like})")
        print("run one: pinwise workload run NAME [-n THREADS] [-i ITERATIONS] [--shared-ratio R] [--imbalance F] "
              "[--size KIB]")
        return 0
    if not args.name:
        raise PinwiseError("which workload? pinwise workload run NAME (pinwise workload list shows them)")
    command = workload_command(args.name, args.threads, args.iterations, args.shared_ratio, args.imbalance, args.size)
    if args.print:
        print(" ".join([on_path(command[0]), *command[1:]]))
        return 0
    from ..processes import become

    become(command[0], command)  # nothing of pinwise stays to outlive: the workload is the process


def cmd_demo(args: argparse.Namespace) -> int:
    from ..demo import run_demo

    run_demo(args.out, quick=args.quick)
    return 0


def cmd_auto(args: argparse.Namespace) -> int:
    import shlex

    from ..auto import run_auto

    argv = program_of(args)
    if not argv:
        raise no_program(AUTO_COMMAND)
    try:
        trace_argv = [argv[0], *shlex.split(args.trace_args)] if args.trace_args is not None else None
    except ValueError as err:
        raise PinwiseError(f"--trace-args {args.trace_args!r} cannot be split into arguments ({err})") from None
    if args.simulate is None and args.topology is not None:
        raise PinwiseError(f"auto benchmarks on this machine; to judge placements on {args.topology!r} by cache "
                           "simulation add --simulate")
    if args.simulate is not None:
        from ..auto import simulated_auto

        if args.policies or args.db or args.time_regex:
            raise PinwiseError("--simulate ranks the analysis's candidates by simulation: --policies, --db and "
                               "--time-regex belong to the benchmark, drop them")
        if args.simulate and args.topology is not None and args.simulate != args.topology:
            raise PinwiseError(f"two machines to simulate: --simulate {args.simulate!r} and -t {args.topology!r}; "
                               "give one")
        if not args.simulate and args.topology is None:
            raise PinwiseError("--simulate needs the machine to simulate: --simulate T or -t T (a preset, XML file "
                               "or synthetic string)")
        target = topo_mod.load_topology(args.simulate or args.topology)
        result = simulated_auto(argv, target, trace_argv=trace_argv, placements=args.placement,
                                say=lambda text: print(text, file=sys.stderr), backend=args.backend)
        print_simulation(result, argv)
        best = min(result.placements, key=lambda p: p.critical_path)
        print(f"simulated best on {result.topology}: {best.policy} (CPUs {','.join(map(str, best.cpus))}); "
              "a simulation ranks placements, it does not measure them: bench on the machine to confirm")
        return 0
    topology = topo_mod.load_topology(None)
    candidates = [p.strip() for p in args.policies.split(",") if p.strip()] if args.policies else None
    result = run_auto(argv, topology, trace_argv=trace_argv, budget_minutes=args.budget, db_path=args.db,
                      time_regex=args.time_regex, progress=None, say=lambda text: print(text, file=sys.stderr),
                      policies=candidates, placements=args.placement, backend=args.backend)
    from rich.text import Text

    from ..report.terminal import summary_table
    from ..report.wide import wide_console

    console = wide_console()
    console.print(summary_table(result.summary))
    for line in result.lines:
        console.print(Text(line), soft_wrap=True)
    return 0


def cmd_simulate(args: argparse.Namespace) -> int:
    from ..bench import build_candidates
    from ..report.plots import save_simulation_png
    from ..simulate import parse_latencies, simulate, write_json

    argv = program_of(args)
    if not argv:
        raise no_program("simulate -t x7550")
    topology = topo_mod.load_topology(args.topology)
    latency = parse_latencies(args.latency)
    comm = read_comm_file(args.comm) if args.comm else None
    names = [p for p in args.policies.split(",") if p.strip()]
    if any(p.strip().lower() == policies.BASELINE for p in names):
        raise PinwiseError("policy os places nothing, so it cannot be simulated: name the placements to compare")
    candidates = build_candidates(names, args.placement or [], topology, args.threads, comm)
    placements = [(c.name, c.plan if not c.random_threads else c.plan_for_run(topology, 0)) for c in candidates]
    result = simulate(argv, topology, placements, quantum=args.quantum, inclusive=args.inclusive == "yes",
                      latency=latency, stdout=sys.stderr if args.json else None,  # JSON alone on stdout
                      workers=args.workers, bandwidth=args.bandwidth, prefetch=args.prefetch == "yes")
    if args.output:
        write_json(result, args.output)
        print(f"wrote {args.output} (pinwise report --simulation {args.output} shows it)", file=sys.stderr)
    if args.png:
        save_simulation_png(result, args.png)
        print(f"wrote {args.png}", file=sys.stderr)
    if args.json:
        write_json(result, None)
        return 0
    print_simulation(result, argv)
    return 0


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
