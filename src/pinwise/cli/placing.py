"""Commands that place threads: topo, run, pin, map."""

from __future__ import annotations

import argparse
import sys

from .. import topology as topo_mod
from ..cpulist import format_cpulist
from ..errors import PinwiseError
from ..files import write_text_atomic
from ..topology.model import ObjType


def _resolve_plan(args: argparse.Namespace, topology):
    """The plan the placement options describe (None: policy os), through the one resolver."""
    from ..placement import Placement, resolve

    if getattr(args, "repeat_from", 0) and getattr(args, "omp", False):
        raise PinwiseError("--repeat-from cannot be handed to the OpenMP runtime (OMP_PLACES starts again from its "
                           "first place): drop --omp, and the preload library applies it")
    spec = Placement(cpus=args.cpus, expr=args.expr, policy=args.policy, mapping=args.mapping, threads=args.threads,
                     skip=args.skip, seed=args.seed, creator=args.creator, repeat_from=getattr(args, "repeat_from", 0),
                     any_machine=getattr(args, "any_machine", False))
    return resolve(spec, topology, read_comm_file(args.comm) if args.comm else None)


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


def read_comm_file(path: str):
    from ..comm import read_comm

    return read_comm(path)


def _mapping_table(plan, topology, cost) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(title=f"policy {plan.policy}: {plan.nb_slots} threads on {topology.source}", title_justify="left")
    for column in ("thread", "PU", "core", "shared caches", "package"):
        table.add_column(column, justify="right" if column in ("thread", "PU") else "left")
    for thread, pu in enumerate(plan.pus):
        node = topology.pu(pu)
        core, package = node.enclosing(ObjType.CORE), node.enclosing(ObjType.PACKAGE)
        caches = " ".join(a.label() for a in node.ancestors() if a.is_cache)
        table.add_row(str(thread), str(pu), "-" if core is None else str(core.logical_index), caches,
                      "-" if package is None else str(package.os_index if package.os_index is not None
                                                      else package.logical_index))
    console = Console(highlight=False, width=max(120, Console().width))
    console.print(table)
    console.print(Text(f"cost: {cost.hops:,.0f} (sum of M[i][j] x tree distance); communication max/avg per level: "
                       + ", ".join(f"{k} {v:.2f}" for k, v in cost.imbalance.items() if k in _shared_levels(topology))))


def _shared_levels(topology) -> set:
    """Levels whose objects hold several allowed PUs: elsewhere max/avg says nothing."""
    return {t for t in topology.level_types if any(len(o.cpuset & topology.allowed) >= 2 for o in topology.objects(t))}


def cmd_map(args: argparse.Namespace) -> int:
    from ..mapping import by_role, compare, mapping_cost
    from ..placement import Placement, resolve

    comm = by_role(read_comm_file(args.comm_file))  # workers created in rounds: one thread per role
    topology = topo_mod.load_topology(args.topology)
    if args.compare:
        return _print_comparison(compare(comm, topology, seed=args.seed if args.seed is not None else 1,
                                         creator=args.creator), topology)
    if args.policy is None:
        raise PinwiseError("choose a policy with --policy NAME (pinwise map --help lists them), or use --compare")
    policy = args.policy
    if policy.strip().lower() == "auto":
        from ..patterns import analyze

        found = analyze(comm)
        policy = found.policy
        print(f"auto: {found.pattern} pattern -> {policy} ({found.reason})", file=sys.stderr)
    plan = resolve(Placement(policy=policy, threads=args.threads, seed=args.seed, creator=args.creator), topology, comm)
    if plan is None:
        print("policy os: no pinning; the OS places the threads")
        return 0
    if args.output:
        write_text_atomic(args.output, plan.to_json() + "\n")
        print(f"wrote {args.output} (use it with: pinwise run --mapping {args.output} -- program)", file=sys.stderr)
    traced = plan.traced_threads
    if plan.rounds is not None:
        print(f"pinwise: the program creates its workers in {plan.rounds.count} rounds of {plan.rounds.size}: the plan "
              f"holds the creator and one round and starts again at slot {plan.repeat_from} past its end "
              f"(pinwise run --repeat-from {plan.repeat_from}); other tools' lists are written out for the {traced} "
              "threads traced", file=sys.stderr)
    if args.format == "table":
        _mapping_table(plan, topology, mapping_cost(comm.matrix, topology, plan.pus))
    elif args.format == "picture":
        _print_plan(plan, topology, traced)
    elif args.format == "json":
        print(plan.to_json())
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
    from rich.text import Text

    from ..policies import REGISTRY

    # A policy that stacks threads on a PU while others stay free (primary) has the lowest cost of
    # all, and no other policy is measured against it.
    stacked = {r.policy for r in rows if r.plan is not None and _stacks(r.plan, topology)}
    costs = [r.cost.hops for r in rows if r.cost is not None and r.policy not in stacked]
    best = min(costs) if costs else 0
    shared = _shared_levels(topology)
    levels = [t for t in topology.level_types if t in shared and t != ObjType.MACHINE
              and any(r.cost and abs(r.cost.imbalance.get(t, 1.0) - 1.0) > 1e-9 for r in rows)]
    table = Table(title=Text(f"every policy on {topology.source}: cost = sum of M[i][j] x tree distance (lower is better)"),
                  title_justify="left")
    for column in ["policy", "family", "cost", "vs best"] + [f"{t} max/avg" for t in levels] + ["ms", "CPU list"]:
        table.add_column(column, justify="left" if column in ("policy", "family", "CPU list") else "right")
    for row in rows:
        family = REGISTRY[row.policy].family
        if row.cost is None:
            table.add_row(row.policy, family, "-", "-", *["-"] * len(levels), f"{row.seconds * 1e3:.1f}", "(not pinned)")
            continue
        ratio = "stacked" if row.policy in stacked else f"{row.cost.hops / best if best else 1.0:.2f}"
        cpus = format_cpulist(row.plan.pus)
        table.add_row(row.policy, family, f"{row.cost.hops:,.0f}", ratio,
                      *[f"{row.cost.imbalance.get(t, 0):.2f}" for t in levels], f"{row.seconds * 1e3:.1f}",
                      cpus if len(cpus) <= 40 else cpus[:37] + "...")
    Console(highlight=False, width=max(160, Console().width)).print(table)
    return 0


def _stacks(plan, topology) -> bool:
    """More threads on one PU than an even spread over the allowed PUs needs."""
    from collections import Counter

    return max(Counter(plan.pus).values()) > -(-plan.nb_slots // len(topology.allowed))


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
