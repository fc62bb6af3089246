"""The ``pinwise`` command: one sub-command per capability, each a thin shell over the Python API."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import __version__
from . import topology as topo_mod
from .cpulist import format_cpulist
from .errors import PinwiseError
from .files import write_text_atomic


def _placement_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("placement (choose one)")
    group.add_argument("--cpus", "-c", metavar="LIST", help="explicit CPU per thread in creation order: 0,4,1-3")
    group.add_argument("--expr", "-e", metavar="EXPR",
                       help="likwid-pin expression: N:0-3, S0:0-3, C0:, M0:, E:N:8:1:2, S:scatter, joined with @")
    group.add_argument("--policy", "-p", metavar="NAME",
                       help="os (no pinning), compact, scatter, random, OpenMP's close, spread, primary, or a "
                            "communication-aware policy of 'pinwise map' with --comm")
    group.add_argument("--mapping", "-m", metavar="FILE", help="mapping file written by 'pinwise map'")
    parser.add_argument("-n", "--threads", type=int, metavar="N",
                        help="number of threads to plan for (default: the CPU list's length, or every allowed CPU)")
    parser.add_argument("--skip", "-s", metavar="MASK",
                        help="hex mask of created threads that take no slot (likwid-pin -s), e.g. 0x1")
    parser.add_argument("--seed", type=int, help="seed of the random policy (default: a new one, printed)")
    parser.add_argument("--comm", metavar="FILE",
                        help="communication matrix for the communication-aware policies (locality, lp-compact, ...)")
    _add_topology_option(parser)


def _resolve_plan(args: argparse.Namespace, topology):
    from .mapping import POLICIES, compute_mapping
    from .pinning import SIMPLE_POLICIES, resolve_plan

    name = (args.policy or "").strip().lower()
    if name in POLICIES and name not in SIMPLE_POLICIES:
        if any(value is not None for value in (args.cpus, args.expr, args.mapping)):
            raise PinwiseError("give only one placement: --policy, --cpus, --expr or --mapping")
        if args.comm is None:
            raise PinwiseError(f"policy {name} needs the program's communication matrix: add --comm FILE "
                               "(from 'pinwise trace'), or compute a mapping file with 'pinwise map'")
        mapping = compute_mapping(name, _read_comm_with_warnings(args.comm), topology, seed=args.seed,
                                  threads=args.threads)
        plan = mapping.to_plan()
        if args.skip:
            from .pinning.plan import Plan, parse_skip_mask

            plan = Plan(plan.slots, parse_skip_mask(args.skip), plan.source, plan.details)
        plan.validate(topology)
        return plan
    if args.comm is not None and name not in POLICIES:
        raise PinwiseError("--comm goes with a communication-aware --policy (locality, lp-compact, gp, ...)")
    return resolve_plan(topology, cpus=args.cpus, expr=args.expr, policy=args.policy, mapping=args.mapping,
                        threads=args.threads, skip=args.skip, seed=args.seed)


def _print_plan(plan, topology) -> None:
    threads_on_pu: dict[int, list[int]] = {}
    for slot, cpus in enumerate(plan.slots):
        for cpu in cpus:
            threads_on_pu.setdefault(cpu, []).append(slot)
    print(topo_mod.render(topology, threads_on_pu))
    print(f"\nplan: {plan.nb_slots} threads ({plan.source}); thread k runs on the k-th CPU, "
          "wrapping round past the last" + (f"; skip mask {plan.skip_mask:#x}" if plan.skip_mask else ""))
    width = max(len(name) for name, _ in plan.job_script_lines())
    for name, line in plan.job_script_lines():
        print(f"  {name:<{width}}  {line}")


def _verify_table(result, plan) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(stderr=True, highlight=False)
    table = Table(title="where each thread ran", title_justify="left")
    for column in ("thread", "slot", "TID", "asked", "ran on", ""):
        table.add_column(column, justify="right" if column in ("thread", "slot", "TID") else "left")
    for record in result.threads:
        ran = str(record.start_cpu) if record.end_cpu in (None, record.start_cpu) else f"{record.start_cpu} -> {record.end_cpu}"
        if plan is None:
            status = "not pinned (os)"
        elif record.slot < 0:
            status = "skipped helper"
        elif record.ran_where_asked:
            status = "ok"
        else:
            status = "[bold red]NOT WHERE ASKED[/]" + (f" (error {record.error})" if record.error else "")
        table.add_row(str(record.index), "-" if record.slot < 0 or plan is None else str(record.slot), str(record.tid),
                      format_cpulist(record.requested), ran, status)
    console.print(table)
    if plan is not None:
        wrong = [r for r in result.misplaced if r.slot >= 0]
        console.print(f"pinwise: {len(result.threads)} threads, "
                      + (f"{len(wrong)} not where asked" if wrong else "all where asked"))


def cmd_run(args: argparse.Namespace) -> int:
    from .pinning import run_program
    from .pinning.launcher import find_program

    argv = args.program[1:] if args.program[:1] == ["--"] else args.program
    topology = topo_mod.load_topology(args.topology)
    if not args.print and args.topology not in (None, "live", "this", "sysfs"):
        raise PinwiseError(f"a plan for {topology.source} can only be printed here: add --print, or drop --topology to run")
    try:
        plan = _resolve_plan(args, topology)
    except PinwiseError as err:
        if not args.allow_unpinned or args.print:
            raise
        print(f"pinwise: warning: {err}; running unpinned (--allow-unpinned)", file=sys.stderr)
        plan = None
    if args.print:
        if plan is None:
            print("policy os: no pinning; the OS places the threads")
        else:
            _print_plan(plan, topology)
        return 0
    if not argv:
        raise PinwiseError("no program given: write it after --, e.g. pinwise run --cpus 0,1 -- ./prog args")
    find_program(argv)
    verify = args.verify if args.verify is not None else sys.stderr.isatty()
    result = run_program(argv, plan, follow_children=args.follow_children, omp=args.omp)
    if verify:
        _verify_table(result, plan)
    if result.signal_name:
        print(f"pinwise: error: {argv[0]} was killed by signal {result.signal_name}", file=sys.stderr)
        return 128 - result.returncode
    return result.returncode


MAP_FORMATS = ("table", "picture", "cpulist", "omp-places", "gomp", "kmp", "likwid", "taskset", "json")


def _read_comm_with_warnings(path: str):
    import warnings

    from .comm import read_comm

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        comm = read_comm(path)
    for warning in caught:
        print(f"pinwise: warning: {warning.message}", file=sys.stderr)
    return comm


def _mapping_table(mapping, topology, cost) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"policy {mapping.policy}: {mapping.threads} threads on {topology.source}", title_justify="left")
    for column in ("thread", "PU", "core", "shared caches", "package"):
        table.add_column(column, justify="right" if column in ("thread", "PU") else "left")
    for thread, pu in enumerate(mapping.pus):
        node = topology.pu(pu)
        chain = node.ancestors()
        core = next((a.logical_index for a in chain if a.type == "core"), "-")
        caches = " ".join(f"{a.label()}" for a in chain if a.is_cache)
        package = next((a.os_index if a.os_index is not None else a.logical_index for a in chain if a.type == "package"), "-")
        table.add_row(str(thread), str(pu), str(core), caches, str(package))
    from rich.text import Text

    console = Console(highlight=False, width=max(120, Console().width))
    console.print(table)
    imbalance = ", ".join(f"{k} {v:.2f}" for k, v in cost.imbalance.items()
                          if any(len(o.cpuset & topology.allowed) >= 2 for o in topology.objects(k)))
    console.print(Text(f"cost: {cost.hops:g} (sum of M[i][j] x tree distance); communication max/avg per level: {imbalance}"))


def cmd_map(args: argparse.Namespace) -> int:
    from .mapping import compare, compute_mapping, mapping_cost, write_mapping

    comm = _read_comm_with_warnings(args.comm_file)
    topology = topo_mod.load_topology(args.topology)
    if args.compare:
        return _print_comparison(compare(comm, topology, seed=args.seed if args.seed is not None else 1), topology)
    if args.policy is None:
        raise PinwiseError("choose a policy with --policy NAME (pinwise map --help lists them), or use --compare")
    policy = args.policy
    if policy.strip().lower() == "auto":
        from .analyze import analyze

        result = analyze(comm)
        policy = result.policy
        print(f"auto: {result.pattern} pattern -> {policy} ({result.reason})", file=sys.stderr)
    mapping = compute_mapping(policy, comm, topology, seed=args.seed, threads=args.threads)
    if args.output:
        write_mapping(mapping, args.output)
        print(f"wrote {args.output} (use it with: pinwise run --mapping {args.output} -- program)", file=sys.stderr)
    plan = mapping.to_plan()
    if plan is None:
        print("policy os: no pinning; the OS places the threads")
        return 0
    if args.format == "table":
        _mapping_table(mapping, topology, mapping_cost(comm.matrix, topology, mapping.pus))
    elif args.format == "picture":
        _print_plan(plan, topology)
    elif args.format == "json":
        print(mapping.to_json())
    else:
        print({"cpulist": plan.cpulist, "omp-places": plan.omp_places, "gomp": plan.gomp_cpu_affinity,
               "kmp": plan.kmp_affinity, "likwid": plan.likwid_pin, "taskset": plan.taskset}[args.format]())
    return 0


def _print_comparison(rows, topology) -> int:
    from rich.console import Console
    from rich.table import Table

    from .mapping import POLICIES

    costs = [r.cost.hops for r in rows if r.cost is not None]
    best = min(costs) if costs else 0
    # Levels whose objects hold several threads: elsewhere max/avg says nothing.
    shared = {t for t in topo_mod.LEVEL_ORDER
              if any(len(o.cpuset & topology.allowed) >= 2 for o in topology.objects(t))}
    levels = [t for t in topo_mod.LEVEL_ORDER if t in shared and t != "machine"
              and any(r.cost and abs(r.cost.imbalance.get(t, 1.0) - 1.0) > 1e-9 for r in rows)]
    from rich.text import Text

    table = Table(title=Text(f"every policy on {topology.source}: cost = sum of M[i][j] x tree distance (lower is better)"),
                  title_justify="left")
    for column in ["policy", "family", "cost", "vs best"] + [f"{t} max/avg" for t in levels] + ["ms", "CPU list"]:
        table.add_column(column, justify="left" if column in ("policy", "family", "CPU list") else "right")
    for row in rows:
        family = POLICIES[row.mapping.policy][0]
        if row.cost is None:
            table.add_row(row.mapping.policy, family, "-", "-", *["-"] * len(levels), f"{row.seconds * 1e3:.1f}", "(not pinned)")
            continue
        ratio = row.cost.hops / best if best else 1.0
        cpus = format_cpulist(row.mapping.pus)
        table.add_row(row.mapping.policy, family, f"{row.cost.hops:g}", f"{ratio:.2f}",
                      *[f"{row.cost.imbalance.get(t, 0):.2f}" for t in levels], f"{row.seconds * 1e3:.1f}",
                      cpus if len(cpus) <= 40 else cpus[:37] + "...")
    Console(highlight=False, width=max(160, Console().width)).print(table)
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from .bench import build_candidates, interrupted_message, open_db, run_bench
    from .mapping import POLICIES
    from .pinning import SIMPLE_POLICIES
    from .report import print_report, summarize

    argv = args.program[1:] if args.program[:1] == ["--"] else args.program
    if not argv:
        raise PinwiseError("no program given: write it after --, e.g. pinwise bench -r 35 -- ./prog args")
    if args.topology not in (None, "live", "this", "sysfs"):
        raise PinwiseError("bench runs the program here, so it plans on this machine: drop --topology")
    topology = topo_mod.load_topology(None)
    comm = _read_comm_with_warnings(args.comm) if args.comm else None
    if args.policies.strip().lower() == "all":
        policies = [p for p in POLICIES if p in SIMPLE_POLICIES or comm is not None]
        policies = [p for p in policies if p not in ("close", "spread")]  # same as compact/scatter here
    else:
        policies = [p for p in args.policies.split(",") if p.strip()]
    candidates = build_candidates(policies, args.placement or [], topology, args.threads, comm)
    try:
        experiment = run_bench(argv, candidates, topology, args.runs, args.db, warmup=args.warmup,
                               time_regex=args.time_regex, timeout=args.timeout, new=args.new, seed=args.seed,
                               progress=False if args.quiet else None,
                               extra_config={"threads": args.threads, "comm": args.comm})
    except KeyboardInterrupt:
        print(f"pinwise: {interrupted_message(args.db)}", file=sys.stderr)
        return 130
    connection = open_db(args.db, create=False)
    try:
        summary = summarize(connection, experiment, args.baseline, args.confidence)
    finally:
        connection.close()
    print_report([summary])
    print(f"results: {args.db} (pinwise report {args.db} --html report.html)", file=sys.stderr)
    empty = [p for p in summary.policies if not len(p.times)]
    if empty:
        reasons = "; ".join(f"{p.name}: " + ", ".join(f"{n} x {r}" for r, n in p.failures.items()) for p in empty)
        print(f"pinwise: error: no successful run of {', '.join(p.name for p in empty)} ({reasons})", file=sys.stderr)
        return 1
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from .bench import db
    from .report import print_report, save_plots, summarize, write_html

    if not 0.5 <= args.confidence < 1:
        raise PinwiseError(f"--confidence must be between 0.5 and 1, e.g. 0.95, not {args.confidence}")
    connection = db.open_db(args.db, create=False)
    try:
        experiments = db.experiments(connection)
        if args.experiment is not None:
            experiments = [e for e in experiments if e.id == args.experiment]
            if not experiments:
                raise PinwiseError(f"{args.db} has no experiment {args.experiment}")
        if not experiments:
            raise PinwiseError(f"{args.db} holds no experiment yet: run pinwise bench --db {args.db} -- program")
        summaries = [summarize(connection, e, args.baseline, args.confidence) for e in experiments]
        summaries = [s for s in summaries if any(len(p.times) for p in s.policies) or sum(p.runs for p in s.policies)]
        if not summaries:
            raise PinwiseError(f"{args.db} holds no finished run yet")
    finally:
        connection.close()
    print_report(summaries)
    if args.png:
        for summary in summaries:
            prefix = f"experiment{summary.experiment.id}-" if len(summaries) > 1 else ""
            for path in save_plots(summary, args.png, prefix):
                print(f"wrote {path}", file=sys.stderr)
    if args.html:
        write_html(summaries, args.html)
        print(f"wrote {args.html}", file=sys.stderr)
    return 0


def cmd_trace(args: argparse.Namespace) -> int:
    from .trace import trace

    argv = args.program[1:] if args.program[:1] == ["--"] else args.program
    if not argv:
        raise PinwiseError("no program given: write it after --, e.g. pinwise trace -o comm.json -- ./prog args")
    comm = trace(argv, args.output, window=args.window, window_ms=args.window_ms, model=args.model,
                 readonly=args.readonly, stack=args.stack, max_lines=args.max_lines)
    meta = comm.metadata
    print(f"wrote {args.output}: {comm.threads} threads, {meta['total_accesses']:,} accesses, "
          f"{meta['lines_tracked']:,} lines tracked ({meta['memory_bytes'] / 2**20:.0f} MiB)"
          + (f", {meta['lines_dropped']:,} accesses to lines past --max-lines not counted" if meta["lines_dropped"] else "")
          + (" [partial]" if meta["partial"] else ""), file=sys.stderr)
    print(f"next: pinwise analyze {args.output}", file=sys.stderr)
    return 0 if not meta["partial"] else 1


def cmd_analyze(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from .analyze import analyze, heat_map_text, save_heat_map

    comm = _read_comm_with_warnings(args.comm_file)
    result = analyze(comm)
    m = result.metrics
    console = Console(highlight=False, width=max(110, Console().width))
    table = Table(title=Text(f"{args.comm_file}: {m.threads} threads"), title_justify="left")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("meaning")
    rows = [
        ("HComm", f"{m.hcomm:.1f}", "heterogeneity, eq. 1: mean row variance of M/max(M)*100 (diagonal included)"),
        ("  off-diagonal", f"{m.heterogeneity:.1f}", "the same without the diagonal (used to recommend)"),
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
    if args.heat_map != "none":
        console.print(Text(heat_map_text(comm.matrix)))
    if args.png:
        save_heat_map(comm.matrix, args.png, f"{Path(args.comm_file).name}: communication")
        print(f"wrote {args.png}", file=sys.stderr)
    console.print(Text(f"pattern: {result.pattern} ({result.pattern_reason})"))
    console.print(Text(f"recommended policy: {result.policy}: {result.reason}"))
    console.print(Text(f"next: pinwise map {args.comm_file} --policy {result.policy} -o mapping.json"))
    if comm.metadata.get("partial"):
        console.print(Text("note: this matrix is partial (the traced program did not end normally)"))
    return 0


def cmd_workload(args: argparse.Namespace) -> int:
    from .workloads import WORKLOADS, workload_command

    if args.action == "list":
        for workload in WORKLOADS.values():
            print(f"{workload.name:<11} {workload.partners}  (like {workload.like})")
        print("run one: pinwise workload run NAME [-t THREADS] [-i ITERATIONS] [--shared-ratio R] [--imbalance F] "
              "[--size KIB]")
        return 0
    if not args.name:
        raise PinwiseError("which workload? pinwise workload run NAME (pinwise workload list shows them)")
    command = workload_command(args.name, args.threads, args.iterations, args.shared_ratio, args.imbalance, args.size)
    if args.print:
        print(" ".join(command))
        return 0
    import subprocess

    return subprocess.run(command).returncode


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    run_demo(args.out, quick=args.quick)
    return 0


def cmd_auto(args: argparse.Namespace) -> int:
    import shlex

    from .auto import run_auto

    argv = args.program[1:] if args.program[:1] == ["--"] else args.program
    if not argv:
        raise PinwiseError("no program given: write it after --, e.g. pinwise auto -- ./prog args")
    trace_argv = [argv[0], *shlex.split(args.trace_args)] if args.trace_args is not None else None
    topology = topo_mod.load_topology(None)
    result = run_auto(argv, topology, trace_argv=trace_argv, budget_minutes=args.budget, db_path=args.db,
                      time_regex=args.time_regex, progress=None, say=lambda text: print(text, file=sys.stderr))
    from rich.console import Console
    from rich.text import Text

    from .report.terminal import summary_table

    console = Console(highlight=False, width=max(150, Console().width))
    console.print(summary_table(result.summary))
    for line in result.lines:
        console.print(Text(line))
    return 0


def cmd_pin(args: argparse.Namespace) -> int:
    from .pinning import pin_threads

    topology = topo_mod.load_topology(None)
    plan = _resolve_plan(args, topology)
    if plan is None:
        raise PinwiseError("policy os means no pinning: nothing to do")
    done = pin_threads(plan, args.pid)
    for tid, cpus in done.items():
        print(f"TID {tid}: CPU {format_cpulist(sorted(cpus))}")
    return 0


def _add_topology_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--topology", "-t", metavar="T",
        help="machine to plan for: 'live' (default, this machine), a preset (pinwise topo --presets), "
             "an hwloc XML file (lstopo --of xml), a pinwise JSON file, or a synthetic string such as "
             "'pack:2 l3:1 core:4 pu:2'",
    )


def cmd_topo(args: argparse.Namespace) -> int:
    if args.presets:
        for name, (description, note) in topo_mod.PRESETS.items():
            machine = topo_mod.preset(name)
            print(f"{name:9} {machine.nb_pus:3} PUs  {description}\n          {note}")
        return 0
    topology = topo_mod.load_topology(args.topology)
    if args.of == "text":
        text = topo_mod.render(topology)
    elif args.of == "json":
        text = topo_mod.to_json(topology)
    elif args.of == "xml":
        text = topo_mod.to_xml(topology)
    else:
        text = topo_mod.to_synthetic(topology)
    if args.output:
        write_text_atomic(args.output, text if text.endswith("\n") else text + "\n")
        print(f"wrote {args.output}", file=sys.stderr)
    else:
        print(text)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pinwise",
        description="Place the threads of parallel programs on the cores of multicore machines, "
                    "and prove with statistics that it helped.",
    )
    parser.add_argument("--version", action="version", version=f"pinwise {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True

    topo = commands.add_parser("topo", help="show the machine: packages, NUMA nodes, caches, cores, PUs",
                               description="Show a machine as a tree (what this process may use is marked).")
    _add_topology_option(topo)
    topo.add_argument("--of", choices=("text", "json", "xml", "synthetic"), default="text",
                      help="output format (default: text picture)")
    topo.add_argument("--output", "-o", metavar="FILE", help="write to FILE instead of standard output")
    topo.add_argument("--presets", action="store_true", help="list the named presets of the papers' machines")
    topo.set_defaults(handler=cmd_topo)

    run = commands.add_parser(
        "run", help="run a program with its threads pinned and show where they ran",
        description="Run an unmodified program with thread k (main thread = 0, then in creation order) "
                    "pinned to the k-th CPU of the placement. Example: pinwise run --expr S0:0-3 -- ./app",
    )
    _placement_options(run)
    run.add_argument("--omp", action="store_true",
                     help="give the placement to the OpenMP runtime (OMP_PLACES, OMP_PROC_BIND) instead of preloading")
    run.add_argument("--print", action="store_true", help="show the plan and the job-script lines, do not run")
    run.add_argument("--verify", action=argparse.BooleanOptionalAction, default=None,
                     help="after the run, print where each thread ran (default: on when stderr is a terminal)")
    run.add_argument("--allow-unpinned", action="store_true", help="run unpinned instead of refusing an unusable plan")
    run.add_argument("--follow-children", action="store_true", help="also pin programs that the program execs")
    run.add_argument("program", nargs=argparse.REMAINDER, help="-- program and its arguments")
    run.set_defaults(handler=cmd_run)

    tracer = commands.add_parser(
        "trace", help="measure which threads share data (Valgrind), writing a communication matrix",
        description="Run an unmodified program under pinwise's Valgrind tool and write its communication matrix "
                    "(threads numbered in creation order, main = 0, as pinwise run pins them).",
    )
    tracer.add_argument("-o", "--output", default="comm.json", help="matrix file to write (default comm.json)")
    tracer.add_argument("--window", type=int, default=1_000_000,
                        help="accesses per thread per time window (default 1000000); sharing counts only within a "
                             "window, which spans a time slice of every thread")
    tracer.add_argument("--window-ms", type=int, help="windows of this many milliseconds instead")
    tracer.add_argument("--model", choices=("diener", "mazouz"), default="diener",
                        help="diener: events in windows (default); mazouz: alpha, accesses to lines both threads touch")
    tracer.add_argument("--readonly", action="store_true", help="also count lines of read-only mappings (constants)")
    tracer.add_argument("--stack", action="store_true",
                        help="also trace accesses addressed from the stack pointer (thread-private in practice)")
    tracer.add_argument("--max-lines", type=int, default=1 << 24, help="cache lines tracked at most (bounds memory)")
    tracer.add_argument("program", nargs=argparse.REMAINDER, help="-- program and its arguments")
    tracer.set_defaults(handler=cmd_trace)

    analyzer = commands.add_parser("analyze", help="metrics, pattern and recommended policy of a communication matrix",
                                   description="Diener et al.'s HComm, BComm, AComm, RComm, the load balance, a heat "
                                               "map, the pattern and the recommended mapping policy.")
    analyzer.add_argument("comm_file", metavar="COMM_FILE", help="communication matrix (.json or .csv)")
    analyzer.add_argument("--png", metavar="FILE", help="write the heat map as a PNG")
    analyzer.add_argument("--heat-map", choices=("text", "none"), default="text", help="terminal heat map (default text)")
    analyzer.set_defaults(handler=cmd_analyze)

    from .mapping import POLICIES

    mapper = commands.add_parser(
        "map", help="compute a placement from a communication matrix with a policy of the papers",
        description="Map threads to PUs from a communication matrix (JSON from 'pinwise trace', or CSV). "
                    "Policies: " + ", ".join(POLICIES) + ".",
    )
    mapper.add_argument("comm_file", metavar="COMM_FILE", help="communication matrix (.json or .csv)")
    mapper.add_argument("--policy", "-p", metavar="NAME",
                        help="mapping policy (see the list above), or auto: the one 'pinwise analyze' recommends")
    mapper.add_argument("--compare", action="store_true", help="run every policy and compare their costs")
    mapper.add_argument("--format", "-f", choices=MAP_FORMATS, default="table", help="how to print the mapping")
    mapper.add_argument("--output", "-o", metavar="FILE", help="write the mapping file that 'pinwise run --mapping' reads")
    mapper.add_argument("--threads", "-n", type=int, help="expected thread count (checked against the matrix)")
    mapper.add_argument("--seed", type=int, help="seed of the random policy")
    _add_topology_option(mapper)
    mapper.set_defaults(handler=cmd_map)

    bench = commands.add_parser(
        "bench", help="run a program many times under several placements and test the speedups",
        description="Run the program under each placement, -r times, in shuffled blocks; every run is saved "
                    "in the SQLite database at once, and the same command resumes an interrupted experiment.",
    )
    bench.add_argument("--policies", default="os,compact,scatter",
                       help="comma-separated policies, or 'all' (default: os,compact,scatter)")
    bench.add_argument("--placement", action="append", metavar="NAME=CPUS",
                       help="your own placement, a CPU list or likwid expression (repeatable), e.g. together=1,0,0,1")
    bench.add_argument("-r", "--runs", type=int, default=35, help="measured runs per placement (default 35, as the papers)")
    bench.add_argument("--warmup", type=int, default=0, help="warm-up blocks before measuring (default 0)")
    bench.add_argument("-n", "--threads", type=int, help="threads to plan for (default: every allowed CPU)")
    bench.add_argument("--comm", metavar="FILE", help="communication matrix for the communication-aware policies")
    bench.add_argument("--time-regex", metavar="RE",
                       help="take the time the program prints, e.g. 'Time in seconds = *([0-9.]+)' (default: wall time)")
    bench.add_argument("--timeout", type=float, metavar="S", help="kill a run after S seconds and record it as failed")
    bench.add_argument("--db", default="pinwise-results.db", help="results database (default pinwise-results.db)")
    bench.add_argument("--new", action="store_true", help="start a new experiment even if the database holds another")
    bench.add_argument("--seed", type=int, help="seed of the run order and of random placements")
    bench.add_argument("--baseline", default="os", help="placement the speedups are measured against (default os)")
    bench.add_argument("--confidence", type=float, default=0.95, help="confidence of the tests (default 0.95)")
    bench.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    _add_topology_option(bench)
    bench.add_argument("program", nargs=argparse.REMAINDER, help="-- program and its arguments")
    bench.set_defaults(handler=cmd_bench)

    report = commands.add_parser("report", help="tables, plots and an HTML report of a results database",
                                 description="Report the experiments of a results database with the Speedup-Test.")
    report.add_argument("db", metavar="DB", help="results database written by pinwise bench")
    report.add_argument("--html", metavar="FILE", help="write one self-contained HTML file")
    report.add_argument("--png", metavar="DIR", help="write PNG and SVG plots into DIR")
    report.add_argument("--baseline", default="os", help="placement to compare against (default os)")
    report.add_argument("--confidence", type=float, default=0.95, help="confidence of the tests (default 0.95)")
    report.add_argument("--experiment", type=int, help="only this experiment of the database")
    report.set_defaults(handler=cmd_report)

    workload = commands.add_parser("workload", help="built-in programs that make the papers' patterns",
                                   description="Workload programs with the communication patterns of the papers.")
    workload.add_argument("action", choices=("list", "run"))
    workload.add_argument("name", nargs="?", help="workload to run (pinwise workload list)")
    workload.add_argument("-t", "--threads", type=int, default=4, help="threads, the main thread included (default 4)")
    workload.add_argument("-i", "--iterations", type=int, default=2000, help="iterations of 1000 accesses (default 2000)")
    workload.add_argument("--shared-ratio", type=float, default=0.5, help="share of accesses to shared lines (default 0.5)")
    workload.add_argument("--imbalance", type=float, help="extra work of the busiest thread, e.g. 1 = twice as much")
    workload.add_argument("--size", type=int, default=4, help="private working set per thread in KiB (default 4)")
    workload.add_argument("--print", action="store_true", help="print the command line instead of running it")
    workload.set_defaults(handler=cmd_workload)

    demo = commands.add_parser("demo", help="the whole pipeline on the built-in workloads",
                               description="Topology, trace, analyze, map, bench and report on the built-in workloads.")
    demo.add_argument("--quick", action="store_true", help="fewer workloads and runs (under 2 minutes)")
    demo.add_argument("--out", default="pinwise-demo", help="folder for the report, plots and matrices (default pinwise-demo)")
    demo.set_defaults(handler=cmd_demo)

    auto = commands.add_parser("auto", help="trace, analyze, bench candidate placements and name the winner",
                               description="Find the best placement for a program by experiment, with statistics.")
    auto.add_argument("--budget", type=float, default=5.0, help="minutes to spend benchmarking at most (default 5)")
    auto.add_argument("--trace-args", metavar="ARGS", help="arguments for a smaller input to trace with (quoted)")
    auto.add_argument("--time-regex", metavar="RE", help="take the time the program prints (default: wall time)")
    auto.add_argument("--db", help="keep the runs in this results database (default: a temporary one)")
    auto.add_argument("program", nargs=argparse.REMAINDER, help="-- program and its arguments")
    auto.set_defaults(handler=cmd_auto)

    pin = commands.add_parser("pin", help="pin the threads of a running process",
                              description="Pin the threads of a running process, in TID order, to the placement.")
    pin.add_argument("--pid", type=int, required=True, help="process to pin")
    _placement_options(pin)
    pin.set_defaults(handler=cmd_pin)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except PinwiseError as err:
        print(f"pinwise: error: {err}", file=sys.stderr)
        return err.exit_status
    except KeyboardInterrupt:
        print("pinwise: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
