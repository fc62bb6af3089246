"""Commands that measure: trace, analyze, bench, report, workload, demo, auto."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from .. import topology as topo_mod
from ..errors import PinwiseError, interrupted_status
from ..topology.model import format_size
from .placing import reads_matrix, read_comm_file


def cmd_bench(args: argparse.Namespace) -> int:
    from ..bench import BenchOptions, build_candidates, interrupted_message, open_db, run_bench
    from ..policies import REGISTRY
    from ..report import print_report, summarize

    argv = args.program[1:] if args.program[:1] == ["--"] else args.program
    if not argv:
        raise PinwiseError("no program given: write it after --, e.g. pinwise bench -r 35 -- ./prog args")
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
_VALGRIND_ONLY = {"window": "--window", "model": "--model", "omp_wait": "--omp-wait", "max_lines": "--max-lines"}
_SAMPLE_ONLY = {"pid": "--pid", "duration": "--duration", "period": "--period", "watch_rate": "--watch-rate",
                "seed": "--seed"}


def cmd_trace(args: argparse.Namespace) -> int:
    argv = args.program[1:] if args.program[:1] == ["--"] else args.program
    backend = args.backend or ("sample" if args.pid is not None else "valgrind")
    if args.pid is not None and argv:
        raise PinwiseError("--pid attaches to a running process: give no program after --")
    if args.pid is None and not argv:
        raise PinwiseError("no program given: write it after --, e.g. pinwise trace -o comm.json -- ./prog args "
                           "(or --pid PID to sample a running process)")
    if args.pid is not None and backend == "valgrind":
        raise PinwiseError("--pid samples a running process, which Valgrind cannot attach to: drop --backend valgrind")
    wrong = _VALGRIND_ONLY if backend == "sample" else _SAMPLE_ONLY
    given = [flag for key, flag in wrong.items() if getattr(args, key) is not None]
    if given:
        raise PinwiseError(f"{', '.join(given)} {'is' if len(given) == 1 else 'are'} for the "
                           f"{'valgrind' if backend == 'sample' else 'sample'} backend, not --backend {backend}")
    if backend == "sample":
        return _sample_trace(args, argv)
    from ..trace import trace

    comm = trace(argv, args.output, window=args.window or 1_000_000, window_ms=args.window_ms,
                 model=args.model or "diener", sharing=args.sharing, omp_wait=args.omp_wait or "passive",
                 readonly=args.readonly, stack=args.stack, max_lines=args.max_lines or 1 << 24,
                 native_run=args.native_run)
    info = comm.info
    print(f"wrote {args.output}: {comm.threads} threads, {info.total_accesses:,} accesses, "
          f"{info.lines_tracked:,} lines tracked ({format_size(_whole_kib(info.memory_bytes))} of tracer memory, "
          f"{format_size(_whole_kib(info.cache_bytes))} line cache)"
          + (f", {info.lines_dropped:,} accesses to lines past --max-lines not counted" if info.lines_dropped else "")
          + (" [partial]" if info.partial else ""), file=sys.stderr)
    print(f"next: pinwise analyze {args.output}", file=sys.stderr)
    return 0 if not info.partial else 1


def _sample_trace(args: argparse.Namespace, argv: list[str]) -> int:
    from ..sample import ARMS_PER_S, PERIOD_US, RATIONED_ABOVE, SWITCH_LIMIT, WINDOW_MS, sample, unwatched_threads

    comm = sample(argv or None, args.output, pid=args.pid, duration=args.duration,
                  period_us=max(10, round(args.period * 1e6)) if args.period else PERIOD_US,
                  window_ms=args.window_ms or WINDOW_MS, arms_per_s=args.watch_rate or ARMS_PER_S,
                  sharing=args.sharing, readonly=args.readonly, stack=args.stack, seed=args.seed)
    s = comm.info.sampling
    skipped = {k: v for k, v in s["skipped"].items() if v}
    print(f"wrote {args.output}: {comm.threads} threads, {s['samples']:,} samples in {comm.info.seconds:.1f} s "
          f"({s['address_samples']:,} with an address), {s['events']:,} events from {s['arms']:,} watchpoints "
          f"[sampled: a statistical estimate]" + (" [partial]" if comm.info.partial else ""), file=sys.stderr)
    if skipped:
        print("  samples without a shared address: " + ", ".join(f"{v:,} {k}" for k, v in skipped.items()),
              file=sys.stderr)
    if s["child_samples"]:
        print(f"  warning: {s['child_samples']:,} samples ({s['child_samples'] / max(1, s['samples']):.0%}) were in "
              f"{s['child_processes']} child process(es), whose threads this matrix does not hold", file=sys.stderr)
    if s["lost"]:
        print(f"  warning: the kernel dropped {s['lost']:,} samples (the sampler fell behind)", file=sys.stderr)
    unwatched = unwatched_threads(comm)
    if unwatched:
        rationed = s.get("mode") == "system-wide"
        print(f"  warning: {_thread_list(unwatched)} switched more than "
              f"{RATIONED_ABOVE if rationed else SWITCH_LIMIT:,} times a second (a yielding spin-wait): a watchpoint "
              "slows every switch of the thread it is armed on, so "
              + ("they were watched only a few times a second" if rationed else "none was armed on them")
              + "; their sharing rests on few events", file=sys.stderr)
    print(f"next: pinwise analyze {args.output}", file=sys.stderr)
    return 0 if not comm.info.partial else 1


def _whole_kib(size: int) -> int:
    """Rounded up to whole KiB, which format_size shows to one decimal in the largest unit."""
    return -(-size // 1024) * 1024


def cmd_analyze(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from ..patterns import analyze
    from ..report.plots import save_heat_map
    from ..report.terminal import heat_map_text

    comm = read_comm_file(args.comm_file)
    topology = topo_mod.load_topology(args.topology) if args.topology else None
    result = analyze(comm, topology)
    from ..confidence import SURE, pattern_confidence

    sureness = pattern_confidence(comm, result)
    if args.png:
        save_heat_map(result.comm.matrix, args.png, f"{Path(args.comm_file).name}: communication")
        print(f"wrote {args.png}", file=sys.stderr)
    if args.json:
        import json

        document = result.to_document()
        document["backend"] = comm.info.backend or "valgrind"
        document["confidence"] = sureness.to_document() if sureness is not None else None
        print(json.dumps(document, indent=1))
        return 0
    m = result.metrics
    console = Console(highlight=False, width=max(110, Console().width))
    why_spins = ("threads waiting on it spin, and are sampled while they spin" if comm.info.backend == "sample" else
                 "threads waiting on it, which Valgrind runs one at a time, spin through whole time slices")
    for line in result.spin_lines:
        console.print(Text(f"spin-wait: {_hot_line_name(line)} carries {line.events / _events(comm):.1%} of all events, "
                           f"{_reads_and_writes(line)}: {why_spins}; what follows is of the matrix without its events"))
    table = Table(title=Text(f"{args.comm_file}: {m.threads} threads"), title_justify="left")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("meaning")
    rows = [
        ("HComm", f"{m.hcomm:.1f}", "heterogeneity, eq. 1: mean row variance of M/max(M)*100 (diagonal included; the "
                                    "paper's)"),
        ("  off-diagonal", f"{m.heterogeneity:.1f}", "the same without the diagonal: the one to trust (eq. 1's zero "
                                                     "diagonal makes a flat matrix score highest); used to recommend"),
        ("BComm", f"{m.bcomm:.1f} %", "communication imbalance, eq. 2: max(CommV)/avg(CommV) - 1"),
        ("AComm", f"{m.acomm:.4g}", "amount, eq. 3: sum of M / T^2"),
        ("RComm", "-" if m.rcomm is None else f"{m.rcomm:.3g}", "ratio, eq. 4: AComm / total memory accesses"),
        ("load balance", "-" if m.load_balance is None else f"{m.load_balance:.1f} %",
         "max/avg - 1 of the instructions per thread"),
    ]
    if m.comm_share is not None:
        rows.append(("communicating", f"{m.comm_share:.3g}", "communication events per memory access"))
    for row in rows:
        table.add_row(*row)
    console.print(table)
    matrix = result.comm.matrix
    if args.heat_map != "none":
        console.print(Text(heat_map_text(matrix)))
    if args.hot and result.hot_lines:
        _print_hot_lines(console, comm, result, args.hot)
    console.print(Text(f"pattern{' of what was traced' if result.withheld else ''}: {result.pattern} "
                       f"({result.pattern_reason})"))
    if result.withheld:
        console.print(Text(f"no recommendation: {result.withheld}; trace the program that does the work (not its "
                           "launcher), or choose a policy that needs no matrix (compact, scatter) and bench it"))
        return 0
    unsure = ""
    if sureness is not None:
        if sureness.pattern_agreement is None:
            console.print(Text(f"how sure: cannot say: {sureness.reason}"))
            unsure = " (uncertain: a sampled matrix whose sureness cannot be measured)"
        else:
            console.print(Text(f"how sure: {sureness.reason}" + ("" if sureness.sure else
                               f"; below {SURE:.0%}: the pattern rests on the luck of the draw, sample longer or at a "
                               "higher --watch-rate")))
            if not sureness.sure:
                unsure = f" (uncertain: {sureness.policy_agreement:.0%} of redraws give this policy)"
    weak = " (a weak reading)" if result.doubt else ""
    console.print(Text(f"recommended policy: {result.policy}{unsure or weak}: {result.reason}"))
    if result.costs is not None:
        compact = result.costs["compact"]
        console.print(Text(f"cost on {result.costs['topology']}: {result.policy} "
                           f"{result.costs[result.policy]:,.0f}, compact {compact:,.0f} (sum of M[i][j] x tree "
                           "distance; pinwise map --compare shows every policy)"))
    other = result.other_sharing
    if other is not None:
        mine = comm.info.sharing
        if not other["compared"]:
            console.print(Text(f"sharing models: not compared ({other['why']})"))
        elif other["agrees"]:
            console.print(Text(f"sharing models: --sharing {other['sharing']} reads it the same ({other['pattern']} -> "
                               f"{other['policy']})"))
        else:
            console.print(Text(f"sharing models disagree: with --sharing {other['sharing']} this trace reads "
                               f"{other['pattern']} -> {other['policy']} ({other['pattern_reason']}), with "
                               f"{mine} {result.pattern} -> {result.policy}. They differ by read sharing (a halo "
                               "its owner and a neighbour both read, a table every thread reads): any counts it, "
                               "write only where a write moved the line; bench both (pinwise auto does)"))
    console.print(Text(f"next: pinwise map {args.comm_file} --policy {result.policy} -o mapping.json"))
    if comm.info.partial:
        console.print(Text("note: this matrix is partial (the traced program did not end normally)"))
    return 0


def _events(comm) -> float:
    from ..patterns import event_count

    return max(event_count(comm), 1.0)


def _thread_list(threads) -> str:
    from ..cpulist import format_cpulist

    if not threads:
        return "no thread"
    return f"threads {format_cpulist(threads)}" if len(threads) != 1 else f"thread {threads[0]}"


def _reads_and_writes(line) -> str:
    """What the tracer counted on a hot line since it became hot, and only that: "read 40 times
    per write (threads 1,2 read it, thread 0 writes it)", or, with no write counted, "read 567,413
    times, no write since it became hot (threads 1,2 read it)"."""
    reads, writes = sum(line.reads), sum(line.writes)
    if writes == 0:
        return f"read {reads:,} times, no write since it became hot ({_thread_list(line.readers)} read it)"
    return (f"read {reads / writes:,.0f} times per write ({_thread_list(line.readers)} read it, "
            f"{_thread_list(line.writers)} write{'s' if len(line.writers) == 1 else ''} it)")


def _hot_line_name(line) -> str:
    return f"line 0x{line.address & ~63:x} (an access {_where(line)})"


def _where(line) -> str:
    """Where the address the tracer described in a hot line lies: "at progress+0" (the variable
    at that address, not everything the line's 64 bytes hold), or "in anonymous memory ..."."""
    if line.where.startswith("variable "):
        return f"at {line.where[len('variable '):]}"
    return f"in {line.where}"


#: "(in /usr/lib/x86_64-linux-gnu/libgomp.so.1)" in Valgrind's descriptions of code: the file's name is enough.
OBJECT_PATH = re.compile(r"[(]in /[^)]*/([^/)]+)[)]")


def _print_hot_lines(console, comm, result, count: int) -> None:
    """The lines carrying the most communication, one per line: what they are, who shares them, the
    code that touches them."""
    from rich.text import Text

    total = _events(comm)
    console.print(Text("hot shared lines (the cache lines that carry the most communication; fix false sharing here; "
                       "one address seen in each, code seen anywhere in its 64 bytes, counts since it became hot):"))
    for line in result.hot_lines[:count]:
        pairs = sorted(line.pairs, key=lambda p: -p[2])[:3]
        counted = sum(n for _, _, n in line.pairs) or 1
        read, written = (OBJECT_PATH.sub(r"(in \1)", text) if text else None
                         for text in (line.read_code, line.write_code))
        code = (f"read and written at {read}" if read == written and read else
                ", ".join(f"{kind} at {text}" for kind, text in (("read", read), ("written", written)) if text))
        who = (f"{_thread_list(line.readers)} read, {_thread_list(line.writers)} write" if line.writers
               else f"{_thread_list(line.readers)} read, no write")
        top = ", ".join(f"{i}-{j} {n / counted:.0%}" for i, j, n in pairs)
        console.print(Text(f"  {line.events / total:6.1%}{' spin-wait' if line in result.spin_lines else ''}  "
                           f"0x{line.address & ~63:x}  {_where(line)}: {who}"
                           + (f"; pairs {top}" if top else "") + (f"; in the line: {code}" if code else "")))


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

    argv = args.program[1:] if args.program[:1] == ["--"] else args.program
    if not argv:
        raise PinwiseError("no program given: write it after --, e.g. pinwise auto -- ./prog args")
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
    from ..simulate import parse_latencies, save_png, simulate, write_json

    argv = args.program[1:] if args.program[:1] == ["--"] else args.program
    if not argv:
        raise PinwiseError("no program given: write it after --, e.g. pinwise simulate -t x7550 -- ./prog args")
    topology = topo_mod.load_topology(args.topology)
    latency = parse_latencies(args.latency)
    comm = read_comm_file(args.comm) if args.comm else None
    names = [p for p in args.policies.split(",") if p.strip()]
    if any(p.strip().lower() == "os" for p in names):
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
        save_png(result, args.png)
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
        table.add_row(p.policy, _short_list(p.cpus), *[f"{p.levels[name]['misses']:,}" for name in levels],
                      f"{p.invalidations:,}", f"{transfers:,}", f"{p.dram['local']:,}", f"{p.dram['remote']:,}",
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


def cmd_mpi_help(args: argparse.Namespace) -> int:
    args.mpi_parser.print_help()
    return 0


def cmd_mpi_trace(args: argparse.Namespace) -> int:
    from ..mpi import mpi_trace

    job = args.job[1:] if args.job[:1] == ["--"] else args.job
    comm = mpi_trace(job, args.output)
    extra = comm.info.extra
    sent = int(sum(sum(row) for row in extra["bytes_sent"]))
    messages = int(sum(sum(row) for row in extra["messages"])) // 2
    collectives = ", ".join(f"{name} {v['calls']} x" for name, v in extra["collectives"].items())
    print(f"wrote {args.output}: {comm.threads} ranks, {sent:,} bytes in {messages:,} messages"
          + (f"; collectives: {collectives}" if collectives else "") + (" [partial]" if comm.info.partial else ""),
          file=sys.stderr)
    print(f"next: pinwise analyze {args.output}", file=sys.stderr)
    return 0 if not comm.info.partial else 1


def cmd_mpi_map(args: argparse.Namespace) -> int:
    import numpy as np

    from ..files import write_text_atomic
    from ..mapping import mapping_cost
    from ..mpi import find_cluster, format_placement, rank_places, rank_plans

    comm = read_comm_file(args.comm)
    cluster = find_cluster(args.cluster, args.hostfile, args.node_topology)
    if args.gpus_per_node:
        from dataclasses import replace

        from ..mpi import gpu_rank_plans

        per_rank, gpus = gpu_rank_plans(comm, cluster, args.policy, args.threads_per_rank, args.gpus_per_node, args.seed)
        places = [replace(place, gpu=gpu) for place, gpu in zip(rank_places(per_rank, cluster), gpus)]
    else:
        per_rank = rank_plans(comm, cluster, args.policy, args.threads_per_rank, args.seed)
        places = rank_places(per_rank, cluster)
    matrix = np.asarray(comm.matrix)
    node_of = np.array([cluster.hosts.index(p.host) for p in places])
    rows, cols = np.nonzero(np.triu(matrix, 1))
    same = node_of[rows] == node_of[cols]
    total = float(matrix[rows, cols].sum())
    inside = float(matrix[rows, cols][same].sum())
    cost = mapping_cost(matrix, cluster.topology, [pus[0] for pus in per_rank]).hops
    summary = (f"{comm.threads} ranks on {len(set(node_of.tolist()))} of {len(cluster.hosts)} nodes ({cluster.node.shape} "
               f"each), policy {args.policy}: {inside / total:.0%} of the bytes and {int(same.sum())} of {len(rows)} "
               f"communicating pairs inside a node; cost {cost:,.0f}" if total else f"{comm.threads} ranks, no communication")
    text = None if args.format == "table" else format_placement(places, args.format)
    if args.output:
        write_text_atomic(args.output, text if text is not None else format_placement(places, "openmpi"))
        print(f"wrote {args.output}", file=sys.stderr)
    if text is not None:
        sys.stdout.write(text)
        print(summary, file=sys.stderr)
        return 0
    from rich.table import Table
    from rich.text import Text

    from ..report.wide import wide_console

    console = wide_console()
    console.print(Text(summary), soft_wrap=True)
    table = Table()
    columns = ("rank", "host", "CPUs", "socket:core") + (("GPU",) if args.gpus_per_node else ())
    for column in columns:
        table.add_column(column, justify="right" if column not in ("host", "GPU") else "left")
    for p in places:
        table.add_row(str(p.rank), p.host, ",".join(map(str, p.cpus)), p.slot, *((p.gpu,) if args.gpus_per_node else ()))
    console.print(table)
    return 0


def cmd_mpi_run(args: argparse.Namespace) -> int:
    from rich.table import Table

    from ..mpi import find_cluster, rank_plans, ranks_matrix, run_placed
    from ..report.wide import wide_console

    job = args.job[1:] if args.job[:1] == ["--"] else args.job
    comm = ranks_matrix(args.comm, args.policy, job)
    cluster = find_cluster(args.cluster, args.hostfile, args.node_topology, job)
    per_rank = rank_plans(comm, cluster, args.policy, args.threads_per_rank)
    status, rankfile, found = run_placed(job, cluster, per_rank, args.verify)
    print("placement: " + "; ".join(rankfile), file=sys.stderr)
    if not args.verify:
        return status
    console = wide_console(stderr=True)
    console.print("where every thread of every rank ran (read back from the ranks):")
    table = Table()
    for column in ("rank", "pid", "thread", "asked", "ran on", "where asked?"):
        table.add_column(column, justify="right" if column != "where asked?" else "left")
    wrong = missing = 0
    for rank, records in found.items():
        if not records:
            missing += 1
            table.add_row(str(rank), "-", "-", "-", "-", "no record (did the rank start?)")
        for t in records:
            ok = t.ran_where_asked
            wrong += not ok
            table.add_row(str(rank), str(t.pid), str(t.index), ",".join(map(str, t.requested)), str(t.start_cpu),
                          "yes" if ok else "NO")
    console.print(table)
    threads = sum(len(r) for r in found.values())
    print(f"pinwise: {threads} threads in {len(found)} ranks, " + ("all where asked" if not wrong and not missing else
          f"{wrong} off their CPUs, {missing} ranks without a record"), file=sys.stderr)
    return status or (1 if wrong or missing else 0)
