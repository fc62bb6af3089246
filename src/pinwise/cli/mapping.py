"""The command that computes placements from a communication matrix: map."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .. import policies
from ..cpulist import format_cpulist
from ..errors import PinwiseError
from ..files import write_text_atomic
from ..policies import CREATOR_AUTO
from ..topology import ObjType, load_topology
from .placing import print_plan, read_comm_file

if TYPE_CHECKING:
    from ..comm import CommMatrix
    from ..topology import Topology


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


@dataclass(frozen=True)
class MapCommand:
    """``pinwise map``'s options, checked against each other: the matrix (one thread per role),
    the machine (the device's local PUs with --near), and either every policy compared or one
    policy and how its mapping is written."""

    comm: CommMatrix
    topology: Topology
    compare: bool
    policy: str | None               # None with --compare
    threads: int | None = None
    seed: int | None = None
    creator: str = CREATOR_AUTO
    cpu_kinds: str = "performance"
    format: str = "table"
    output: str | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> MapCommand:
        from ..mapping import by_role, check_threads
        from ..placement import near

        comm = by_role(read_comm_file(args.comm_file, planned=True))  # rounds: one thread per role
        topology = load_topology(args.topology)
        if args.near:  # every policy, compared or not, on the device's local PUs
            topology = near(args.near, topology)
        if args.compare:
            ignored = [option for option, given in (("--policy", args.policy), ("--output", args.output),
                                                    ("--format", args.format != "table"), ("--threads", args.threads),
                                                    ("--cpu-kinds", args.cpu_kinds != "performance"))
                       if given]
            if ignored:  # never an option taken without a word
                raise PinwiseError(f"--compare shows every policy's cost as a table: drop {', '.join(ignored)}, or "
                                   "drop --compare to map with one policy")
        elif args.policy is None:
            raise PinwiseError("choose a policy with --policy NAME (pinwise map --help lists them), or use --compare")
        check_threads(args.threads, comm.threads)  # before auto's analysis says anything
        return cls(comm, topology, args.compare, args.policy, args.threads, args.seed, args.creator, args.cpu_kinds,
                   args.format, args.output)


def cmd_map(args: argparse.Namespace) -> int:
    from ..mapping import compare, mapping_cost
    from ..placement import Placement, resolve

    command = MapCommand.from_args(args)
    comm, topology = command.comm, command.topology
    if command.compare:
        from ..patterns import analyze

        return _print_comparison(compare(comm, topology, seed=command.seed if command.seed is not None else 1,
                                         creator=command.creator), topology, analyze(comm, topology))
    policy = command.policy
    if policy.strip().lower() == policies.AUTO:
        from ..patterns import analyze

        found = analyze(comm, topology)
        policy = found.recommended()
        print(f"auto: {found.pattern} pattern -> {policy} ({found.reason})", file=sys.stderr)
    plan = resolve(Placement(policy=policy, threads=command.threads, seed=command.seed, creator=command.creator,
                             cpu_kinds=command.cpu_kinds), topology, comm)
    # Judged on the plan (None: policy os), after the resolver's own checks (-n against the matrix).
    if plan is None:
        if command.output or command.format not in ("table", "picture"):
            raise PinwiseError("policy os pins nothing, so there is no mapping to "
                               + (f"write to {command.output}" if command.output else f"print as {command.format}")
                               + ": run the program without a placement (or choose another policy)")
        print("policy os: no pinning; the OS places the threads")
        return 0
    traced = plan.traced_threads
    if command.format == "likwid":
        truncated = (plan.expanded(traced) if traced else plan).likwid_truncation(topology.nb_pus)
        if truncated:
            raise PinwiseError(f"likwid-pin cannot apply this plan: {truncated}; use pinwise run with the mapping "
                               "file (-o)")
    if command.output:
        write_text_atomic(command.output, plan.to_json() + "\n")
        print(f"wrote {command.output} (use it with: pinwise run --mapping {command.output} -- program)", file=sys.stderr)
    if plan.rounds is not None:
        print(f"pinwise: the program creates its workers in {plan.rounds.count} rounds of {plan.rounds.size}: the plan "
              f"holds the creator and one round and starts again at slot {plan.repeat_from} past its end "
              f"(pinwise run --repeat-from {plan.repeat_from}); other tools' lists are written out for the {traced} "
              "threads traced", file=sys.stderr)
    if command.format == "table":
        _mapping_table(plan, topology, mapping_cost(comm.matrix, topology, plan.pus))
    elif command.format == "picture":
        print_plan(plan, topology, traced)
    elif command.format == "json":
        print(plan.to_json())
    elif command.format == "cpulist":
        print(plan.cpulist())
    else:
        written = plan.expanded(traced) if traced else plan
        # Each as written in front of the program, as `pinwise run --print` shows them.
        print({"omp-places": written.omp_line, "gomp": written.gomp_line, "kmp": written.kmp_line,
               "likwid": written.likwid_pin, "taskset": written.taskset}[command.format]())
    return 0


def _print_comparison(rows, topology, recommended) -> int:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from ..mapping.cost import vs_best
    from ..policies import REGISTRY

    # A policy that stacks threads on a PU while others stay free (primary) has the lowest cost of
    # all, and no other policy is measured against it.
    stacked = {r.policy for r in rows if r.plan is not None and _stacks(r.plan, topology)}
    costs = [r.cost.hops for r in rows if r.cost is not None and r.policy not in stacked]
    best = min(costs) if costs else 0
    shared = _shared_levels(topology)
    levels = [t for t in topology.level_types if t in shared and t != ObjType.MACHINE
              and any(r.cost and abs(r.cost.imbalance.get(t, 1.0) - 1.0) > 1e-9 for r in rows)]

    def mark(row) -> str:
        return "*" if row.policy == recommended.policy and not recommended.withheld else ""

    table = Table(title=Text(f"every policy on {topology.source}: cost = sum of M[i][j] x tree distance (lower is better)"),
                  title_justify="left")
    for column in ["policy", "rec.", "family", "cost", "vs best"] + [f"{t} max/avg" for t in levels] + ["ms", "CPU list"]:
        table.add_column(column, justify="left" if column in ("policy", "rec.", "family", "CPU list") else "right")
    for row in rows:
        family = REGISTRY[row.policy].family
        if row.cost is None:
            table.add_row(row.policy, mark(row), family, "-", "-", *["-"] * len(levels), f"{row.seconds * 1e3:.1f}",
                          "(not pinned)")
            continue
        ratio = "stacked" if row.policy in stacked else vs_best(row.cost.hops, best)
        cpus = format_cpulist(row.plan.pus)
        table.add_row(row.policy, mark(row), family, f"{row.cost.hops:,.0f}", ratio,
                      *[f"{row.cost.imbalance.get(t, 0):.2f}" for t in levels], f"{row.seconds * 1e3:.1f}",
                      cpus if len(cpus) <= 40 else cpus[:37] + "...")
    console = Console(highlight=False, width=max(160, Console().width))
    console.print(table)
    if recommended.withheld:
        console.print(Text(f"rec.: none, {recommended.withheld}"))
        return 0
    console.print(Text(f"rec. *: recommended (pinwise analyze -t): {recommended.policy}, for the {recommended.pattern} "
                       f"pattern: {recommended.reason}"))
    return 0


def _stacks(plan, topology) -> bool:
    """Threads spread unevenly over the allowed PUs: one PU holds two more than another (an idle
    one included), where an even spread gives each PU floor or ceil of threads / PUs."""
    from collections import Counter

    loads = Counter(pu for pu in plan.pus if pu in topology.allowed)
    return bool(loads) and max(loads.values()) - min(loads.get(pu, 0) for pu in topology.allowed) > 1
