"""Commands that place threads: topo, run, pin, map."""

from __future__ import annotations

import argparse
import sys

from .. import topology as topo_mod
from ..cpulist import format_cpulist
from ..errors import PinwiseError
from ..files import write_text_atomic


def _resolve_plan(args: argparse.Namespace, topology):
    plan = _resolve_placement(args, topology)
    repeat_from = getattr(args, "repeat_from", 0)
    if repeat_from:
        from dataclasses import replace

        if plan is None:
            raise PinwiseError("--repeat-from goes with a placement; policy os places nothing")
        if getattr(args, "omp", False):
            raise PinwiseError("--repeat-from cannot be handed to the OpenMP runtime (OMP_PLACES starts again from its "
                               "first place): drop --omp, and the preload library applies it")
        plan = replace(plan, repeat_from=repeat_from)
    return plan


def _resolve_placement(args: argparse.Namespace, topology):
    from ..mapping import POLICIES, compute_mapping
    from ..pinning import SIMPLE_POLICIES, resolve_plan

    name = (args.policy or "").strip().lower()
    if name in POLICIES and name not in SIMPLE_POLICIES:
        if any(value is not None for value in (args.cpus, args.expr, args.mapping)):
            raise PinwiseError("give only one placement: --policy, --cpus, --expr or --mapping")
        if args.comm is None:
            raise PinwiseError(f"policy {name} needs the program's communication matrix: add --comm FILE "
                               "(from 'pinwise trace'), or compute a mapping file with 'pinwise map'")
        mapping = compute_mapping(name, _read_comm_with_warnings(args.comm), topology, seed=args.seed,
                                  threads=args.threads, creator=args.creator)
        plan = mapping.to_plan()
        if args.skip:
            from ..pinning.plan import Plan, parse_skip_mask

            plan = Plan(plan.slots, parse_skip_mask(args.skip), plan.source, plan.details)
        plan.validate(topology)
        return plan
    if args.comm is not None and name not in POLICIES:
        raise PinwiseError("--comm goes with a communication-aware --policy (locality, lp-compact, gp, ...)")
    return resolve_plan(topology, cpus=args.cpus, expr=args.expr, policy=args.policy, mapping=args.mapping,
                        threads=args.threads, skip=args.skip, seed=args.seed)


def _print_plan(plan, topology, traced: int | None = None) -> None:
    threads_on_pu: dict[int, list[int]] = {}
    for slot, cpus in enumerate(plan.slots):
        for cpu in cpus:
            threads_on_pu.setdefault(cpu, []).append(slot)
    print(topo_mod.render(topology, threads_on_pu))
    print(f"\nplan: {plan.nb_slots} threads ({plan.source}); thread k runs on the k-th CPU, "
          + (f"starting again at slot {plan.repeat_from} past the last" if plan.repeat_from else "wrapping round past the last")
          + (f"; skip mask {plan.skip_mask:#x}" if plan.skip_mask else ""))
    lines = plan.job_script_lines(traced)
    width = max(len(name) for name, _ in lines)
    for name, line in lines:
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
    from ..pinning import run_program

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

    from ..comm import read_comm

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
    console.print(Text(f"cost: {cost.hops:,.0f} (sum of M[i][j] x tree distance); communication max/avg per level: {imbalance}"))


def cmd_map(args: argparse.Namespace) -> int:
    from ..mapping import by_role, compare, compute_mapping, mapping_cost, write_mapping

    comm = by_role(_read_comm_with_warnings(args.comm_file))  # workers created in rounds: one thread per role
    topology = topo_mod.load_topology(args.topology)
    if args.compare:
        return _print_comparison(compare(comm, topology, seed=args.seed if args.seed is not None else 1,
                                         creator=args.creator), topology)
    if args.policy is None:
        raise PinwiseError("choose a policy with --policy NAME (pinwise map --help lists them), or use --compare")
    policy = args.policy
    if policy.strip().lower() == "auto":
        from ..analyze import analyze

        result = analyze(comm)
        policy = result.policy
        print(f"auto: {result.pattern} pattern -> {policy} ({result.reason})", file=sys.stderr)
    mapping = compute_mapping(policy, comm, topology, seed=args.seed, threads=args.threads, creator=args.creator)
    if args.output:
        write_mapping(mapping, args.output)
        print(f"wrote {args.output} (use it with: pinwise run --mapping {args.output} -- program)", file=sys.stderr)
    plan = mapping.to_plan()
    if plan is None:
        print("policy os: no pinning; the OS places the threads")
        return 0
    traced = mapping.details.get("rounds", {}).get("threads")
    if traced:
        rounds = mapping.details["rounds"]
        print(f"pinwise: the program creates its workers in {rounds['count']} rounds of {rounds['size']}: the plan holds "
              f"the creator and one round and starts again at slot {plan.repeat_from} past its end "
              f"(pinwise run --repeat-from {plan.repeat_from}); other tools' lists are written out for the {traced} "
              "threads traced", file=sys.stderr)
    if args.format == "table":
        _mapping_table(mapping, topology, mapping_cost(comm.matrix, topology, mapping.pus))
    elif args.format == "picture":
        _print_plan(plan, topology, traced)
    elif args.format == "json":
        print(mapping.to_json())
    elif args.format == "cpulist":
        print(plan.cpulist())
    else:
        written = plan.expanded(traced) if traced else plan
        print({"omp-places": written.omp_places, "gomp": written.gomp_cpu_affinity, "kmp": written.kmp_affinity,
               "likwid": written.likwid_pin, "taskset": written.taskset}[args.format]())
    return 0


def _print_comparison(rows, topology) -> int:
    from rich.console import Console
    from rich.table import Table

    from ..policies import POLICIES

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
        table.add_row(row.mapping.policy, family, f"{row.cost.hops:,.0f}", f"{ratio:.2f}",
                      *[f"{row.cost.imbalance.get(t, 0):.2f}" for t in levels], f"{row.seconds * 1e3:.1f}",
                      cpus if len(cpus) <= 40 else cpus[:37] + "...")
    Console(highlight=False, width=max(160, Console().width)).print(table)
    return 0


def cmd_pin(args: argparse.Namespace) -> int:
    from ..pinning import pin_threads

    topology = topo_mod.load_topology(None)
    plan = _resolve_plan(args, topology)
    if plan is None:
        raise PinwiseError("policy os means no pinning: nothing to do")
    done = pin_threads(plan, args.pid)
    for tid, cpus in done.items():
        print(f"TID {tid}: CPU {format_cpulist(sorted(cpus))}")
    return 0


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
