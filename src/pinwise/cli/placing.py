"""Commands that show the machine and pin programs: topo, run, pin."""

from __future__ import annotations

import argparse
import sys
import warnings

from .. import policies
from ..cpulist import format_cpulist
from ..errors import PinwiseError
from ..frozen import Frozen
from ..topology import is_this_machine
from .options import no_program, program_of

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing, as the launcher does
if TYPE_CHECKING:
    from ..pinning.memory import MemoryPolicy
    from ..plan import Plan
    from ..topology import Topology


def read_comm_file(path: str, planned: bool = False):
    """The matrix of a comm file; ``planned``: one plan is made from it, so a trace whose threads
    change partners part way (pinwise.phases) is noted: the plan serves one phase at best."""
    from ..comm import read_comm

    comm = read_comm(path)
    if planned and (comm.info.backend == "sample" or comm.info.time_blocks is not None):
        from ..phases import phase_change

        change = phase_change(comm)
        if change is not None:
            print(f"pinwise: note: in {path} the threads change partners {change.when(block=False)} (pinwise analyze "
                  f"{path} shows it): one plan for the whole trace serves one phase at best; --adapt places each",
                  file=sys.stderr)
    return comm


def _load_topology(spec):
    from ..topology import load_topology  # not at the top: pinning to a CPU list never reads the machine

    return load_topology(spec)


def _render(topology, threads_on_pu=None) -> str:
    from ..topology import render

    return render(topology, threads_on_pu)


def reads_matrix(policy: str | None) -> bool:
    """Whether ``policy`` (a name the user typed, or None) reads the communication matrix."""
    if policy is None:
        return False
    name = policy.strip().lower()
    return name == policies.AUTO or policies.lookup(name).needs_matrix


def _resolve_plan(args: argparse.Namespace, topology):
    """The plan the placement options describe (None: policy os), through the one resolver."""
    from ..placement import Placement, resolve

    if getattr(args, "repeat_from", 0) and getattr(args, "omp", False):
        raise PinwiseError("--repeat-from cannot be handed to the OpenMP runtime (OMP_PLACES starts again from its "
                           "first place): drop --omp, and the preload library applies it")
    if args.skip and getattr(args, "omp", False):
        raise PinwiseError("--skip cannot be handed to the OpenMP runtime (OMP_PLACES gives every thread it makes a "
                           "place): drop --omp, and the preload library applies it")
    if args.policy is not None and args.policy.strip().lower() != policies.AUTO:
        policies.lookup(args.policy, "or pass a mapping file from 'pinwise map' with --mapping")
    if args.comm and not reads_matrix(args.policy):
        raise PinwiseError("--comm is read only by the policies that need the matrix ("
                           + ", ".join(p.name for p in policies.REGISTRY.values() if p.needs_matrix)
                           + ", auto): drop it, or choose one of them")
    spec = Placement(cpus=args.cpus, expr=args.expr, policy=args.policy, mapping=args.mapping, threads=args.threads,
                     skip=args.skip, seed=args.seed, creator=args.creator, repeat_from=getattr(args, "repeat_from", 0),
                     any_machine=getattr(args, "any_machine", False), cpu_kinds=args.cpu_kinds,
                     places=getattr(args, "places", None), near=getattr(args, "near", None))
    return resolve(spec, topology, read_comm_file(args.comm, planned=True) if args.comm else None)


def _memory_policy(args, topology):
    """The memory policy the options ask for (None: the program's own), checked against the
    machine's NUMA nodes."""
    mode, nodes = next(((mode, value) for mode, value in (
        ("bind", args.membind), ("interleave", args.interleave), ("preferred", args.preferred),
        (args.mempolicy, args.mempolicy), (args.mem, args.mem)) if value is not None), (None, None))
    if mode is None:
        return None
    from ..pinning.memory import MemoryPolicy

    return MemoryPolicy.for_machine(mode, nodes, topology if topology is not None else _load_topology(None))


class Adaptation(Frozen):
    """--adapt's options (run and pin): the placement is decided while the program runs, so only
    --policy says how (and a placement given in full is a contradiction)."""

    policy: str | None         # the policy to place with; None: the one analyze recommends for each phase
    interval: float            # seconds between judgments at most (the sampler's windows: a quarter)
    log: str | None            # every window's decision and every move, as JSON lines
    duration: float | None     # pin --pid: adapt for this long, then detach

    @classmethod
    def from_args(cls, args: argparse.Namespace, attached: bool) -> Adaptation:
        given = [flag for flag, value in (("--cpus", args.cpus), ("--expr", args.expr), ("--mapping", args.mapping),
                                          ("--comm", args.comm), ("--topology", args.topology)) if value]
        if not attached:
            given += [flag for flag, value in (("--omp", args.omp), ("--print", args.print)) if value]
        if given:
            raise PinwiseError(f"--adapt decides the placement while the program runs on this machine: drop "
                               f"{', '.join(given)} (--policy chooses the policy it places with)")
        if args.duration is not None and not attached:
            raise PinwiseError("--duration is for pin --pid --adapt; run --adapt lasts as long as the program")
        if getattr(args, "verify", None) is not None:  # taken without a word before
            raise PinwiseError("--adapt says where each thread ran at its end (its 'ran on' line), and never becomes "
                               "the program: drop --verify/--no-verify")
        from ..adapt import INTERVAL

        policy = args.policy if args.policy and args.policy.strip().lower() != policies.AUTO else None
        return cls(policy, args.interval or INTERVAL, args.log, args.duration)


class RunCommand(Frozen):
    """``pinwise run``'s options, checked against each other: the program, the plan they resolve
    to (None: the OS places the threads), the memory policy, and how to run and show it."""

    argv: list[str]
    plan: Plan | None
    memory: MemoryPolicy | None
    topology: Topology | None    # the machine planned for (--print, --adapt); None: read only if the plan needs it
    print_only: bool = False     # --print: show the plan, run nothing
    memory_only: bool = False    # a memory policy alone: the threads are left to the OS, as numactl leaves them
    verify: bool | None = None   # None: when stderr is a terminal; False: become the program
    follow: bool = True
    omp: bool = False
    adapt: Adaptation | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> RunCommand:
        argv = program_of(args)
        if args.adapt:
            adapt = Adaptation.from_args(args, attached=False)
            if not argv:
                raise no_program("run --adapt")
            topology = _load_topology(None)
            return cls(argv, None, _memory_policy(args, topology), topology, adapt=adapt)
        if args.log or args.interval:
            raise PinwiseError("--log and --interval belong to --adapt")
        here = is_this_machine(args.topology)
        if not args.print and not here:
            raise PinwiseError(f"a plan for {args.topology} can only be printed here: add --print, or drop --topology "
                               "to run")
        # Running here: the resolver reads this machine only if the placement needs it.
        topology = _load_topology(args.topology) if args.print else None
        memory_only = (all(value is None for value in (args.cpus, args.expr, args.policy, args.mapping, args.near))
                       and any(value is not None for value in (args.membind, args.interleave, args.preferred,
                                                               args.mempolicy, args.mem)))
        try:
            # numactl's habit: a memory policy alone leaves the threads where the OS puts them
            plan = None if memory_only else _resolve_plan(args, topology)
        except PinwiseError as err:
            if not args.allow_unpinned or args.print:
                raise
            # said at once, as the plan is dropped: a later check of the options may still refuse the command
            warnings.warn(f"{err}; running unpinned (--allow-unpinned)", stacklevel=2)
            plan = None
        memory = _memory_policy(args, topology)
        if not args.print and not argv:
            raise no_program("run --cpus 0,1")
        return cls(argv, plan, memory, topology, args.print, memory_only, args.verify, args.follow, args.omp)


class PinCommand(Frozen):
    """``pinwise pin``'s options, checked against each other: the process and the plan for its
    threads on this machine, or how to adapt them."""

    pid: int
    plan: Plan | None           # None with --adapt
    topology: Topology
    adapt: Adaptation | None = None
    traced: bool = False        # the plan maps the threads of a trace (--comm, --mapping), one slot a thread

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> PinCommand:
        if args.adapt:
            adapt = Adaptation.from_args(args, attached=True)
            return cls(args.pid, None, _load_topology(None), adapt)
        if args.log or args.interval or args.duration:
            raise PinwiseError("--log, --interval and --duration belong to --adapt")
        if not is_this_machine(args.topology):
            raise PinwiseError(f"pin moves the threads of a process on this machine, so it plans for this machine, "
                               f"not {args.topology!r}: drop --topology (pinwise run --print -t T shows a plan for T)")
        topology = _load_topology(None)
        plan = _resolve_plan(args, topology)
        if plan is None:
            raise PinwiseError("policy os means no pinning: nothing to do")
        return cls(args.pid, plan, topology, traced=bool(args.comm or args.mapping))


class TopoCommand(Frozen):
    """``pinwise topo``'s options: the presets listed, or one machine shown in a format."""

    topology: Topology | None   # None: --presets
    of: str = "text"
    output: str | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> TopoCommand:
        if args.presets:
            ignored = [option for option, given in (("--topology", args.topology is not None),
                                                    ("--of", args.of != "text"), ("--output", args.output)) if given]
            if ignored:  # never an option taken without a word
                raise PinwiseError(f"--presets lists the presets and nothing else: drop {', '.join(ignored)} (pinwise "
                                   "topo -t NAME shows one of them)")
            return cls(None)
        return cls(_load_topology(args.topology), args.of, args.output)


def print_plan(plan, topology, traced: int | None = None) -> None:
    threads_on_pu: dict[int, list[int]] = {}
    for slot, cpus in enumerate(plan.slots):
        for cpu in cpus:
            threads_on_pu.setdefault(cpu, []).append(slot)
    print(_render(topology, threads_on_pu))
    print(f"\nplan: {plan.nb_slots} threads ({plan.source}); thread k runs on the k-th CPU, "
          + (f"starting again at slot {plan.repeat_from} past the last" if plan.repeat_from else "wrapping round past the last")
          + (f"; skip mask {plan.skip_mask:#x}" if plan.skip_mask else ""))
    lines = plan.job_script_lines(traced, topology.nb_pus)
    width = max(len(name) for name, _ in lines)
    for name, line in lines:
        print(f"  {name:<{width}}  {line}")


def _print_memory(memory, plan, topology) -> None:
    cpus = sorted(set(plan.all_cpus)) if plan is not None else sorted(topology.allowed)
    nodes = frozenset(n.os_index for cpu in cpus if (n := topology.numa_node_of(cpu)) is not None)
    print(f"\nmemory: {memory.describe()}")
    lines = [("pinwise", f"pinwise run {_memory_option(memory)}"),
             *memory.tool_lines(nodes, plan.likwid_pin() if plan is not None else None)]
    width = max(len(name) for name, _ in lines)
    for name, line in lines:
        print(f"  {name:<{width}}  {line}")


def _memory_option(memory) -> str:
    from ..pinning.memory import kernel_list

    nodes = kernel_list(memory.nodes)
    return {"bind": f"--membind {nodes}", "interleave": f"--interleave {nodes}", "preferred": f"--preferred {nodes}",
            "local": "--mempolicy local", "local-to-thread": "--mem local-to-thread"}[memory.mode]


#: --verify's table shows the first and last threads of a program that ran very many.
TABLE_HEAD, TABLE_TAIL = 24, 8


def _verify_table(result, plan, memory=None) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from ..pinning.log import WHOLE_PLAN
    from ..pinning.readback import programs, shown_threads, summary_lines

    console = Console(stderr=True, highlight=False)
    table = Table(title="where each thread ran", title_justify="left")
    found = programs(result)
    shown = shown_threads(result)
    several = len({t.pid for t in shown}) > 1
    columns = (("process",) if several else ()) + ("thread", "slot", "TID", "asked", "ran on") \
        + (("memory (numa_maps)",) if memory is not None else ()) + ("",)
    for column in columns:
        table.add_column(column, justify="right" if column in ("thread", "slot", "TID") else "left")
    wrong_memory = 0
    names = {t.pid: p.name for p in found for t in p.threads}
    followed_by = {(t.pid, t.image, t.tid): p.followed for p in found for t in p.threads}
    for row, record in enumerate(shown):
        ran = str(record.start_cpu) if record.end_cpu in (None, record.start_cpu) else f"{record.start_cpu} -> {record.end_cpu}"
        followed = followed_by.get((record.pid, record.image, record.tid), True)
        if plan is None:
            status = "not pinned (os)"
        elif record.slot == WHOLE_PLAN:
            status = "whole plan (no thread started)"
        elif record.slot < 0:
            status = "skipped helper"
        elif not followed:
            status = "not followed"
        elif record.ran_where_asked:
            status = "ok"
        else:
            status = "[bold red]NOT WHERE ASKED[/]" + (f" (error {record.error})" if record.error else "")
        cells = ([f"{names.get(record.pid, '?')} {record.pid}"] if several else []) + [
            str(record.index), "-" if record.slot < 0 or plan is None or not followed else str(record.slot),
            str(record.tid),
            format_cpulist(record.requested), ran]
        if memory is not None:
            expected = memory.expected(record.end_cpu if record.end_cpu is not None else record.start_cpu)
            seen = record.mempolicy or "unknown"
            if seen != expected:
                wrong_memory += 1
                seen = f"[bold red]{seen} (asked {expected})[/]"
            cells.append(seen)
        if row < TABLE_HEAD or row >= len(shown) - TABLE_TAIL:
            table.add_row(*cells, status)
        elif row == TABLE_HEAD:
            table.add_row(*([""] * (len(columns) - 1)), f"... {len(shown) - TABLE_HEAD - TABLE_TAIL:,} more threads")
    if shown:
        console.print(table)
    memory_note = "" if memory is None else ("; memory policy as asked in every thread" if not wrong_memory
                                             else f"; [bold red]{wrong_memory} with another memory policy[/]")
    if plan is not None:
        lines = [escape(line) for line in summary_lines(result, plan.nb_slots, plan.all_cpus, plan.traced_threads)]
        lines[-1] += memory_note
        for line in lines:
            console.print(f"pinwise: {line}", soft_wrap=True)
    elif memory is not None:
        console.print(f"pinwise: {len(shown)} threads{memory_note}")


def as_openmp_places_them(result, plan):
    """Under ``--omp`` the library only observes; thread k of a program (creation order, which is
    the OpenMP thread number of its first team) was asked for the place proc_bind(close) gives it
    among the plan's places: one each while there are places enough, then libgomp's distribution,
    not the preload library's wrap-around. Every program that inherits the environment (one a
    shell starts, too) has its OpenMP runtime place its threads so."""
    from dataclasses import replace

    from ..policies import omp_close_places

    images = [p.threads for p in result.processes if p.how == "exec" and p.followed] \
        or [tuple(r for r in result.threads if r.pid == result.pid)]  # a log without process records
    asked = {}
    for threads in images:
        places = omp_close_places(plan.nb_slots, len(threads))
        for r in threads:
            if r.index < len(places):
                asked[(r.pid, r.image, r.tid)] = places[r.index]
    threads = tuple(replace(r, slot=asked[key], requested=tuple(plan.slots[asked[key]]))
                    if (key := (r.pid, r.image, r.tid)) in asked else r for r in result.threads)
    return replace(result, threads=threads)


def _adapt(adapt: Adaptation, topology, argv: list[str] | None, pid: int | None, memory=None) -> int:
    from ..adapt import run_adaptive, summary_lines

    result = run_adaptive(argv, topology, pid=pid, policy=adapt.policy, interval=adapt.interval, log_path=adapt.log,
                          duration=adapt.duration, memory=memory, say=lambda text: print(text, file=sys.stderr))
    for line in summary_lines(result, memory):
        print(line, file=sys.stderr)
    if pid is not None and any("before --adapt placed it" in why for why in result.left_alone.values()):
        print(f"pinwise: note: threads pinned before the attach are left alone; to hand them to --adapt, give them "
              f"every CPU first: taskset -a -p -c {format_cpulist(sorted(topology.allowed))} {pid}", file=sys.stderr)
    if result.exit_signal:  # as run says it
        from ..processes import how_it_ended

        print(f"pinwise: error: {argv[0]} {how_it_ended(-result.exit_signal)}", file=sys.stderr)
    return result.returncode


def cmd_run(args: argparse.Namespace) -> int:
    from ..pinning.launcher import find_program, run_program
    from ..trace import uses_openmp

    command = RunCommand.from_args(args)
    argv, plan, memory, topology = command.argv, command.plan, command.memory, command.topology
    if command.adapt is not None:
        return _adapt(command.adapt, topology, argv, None, memory)
    if command.print_only:
        if plan is None:
            print("no CPU placement given: the OS places the threads" if command.memory_only
                  else "policy os: no pinning; the OS places the threads")
        else:
            print_plan(plan, topology)
        if memory is not None:
            _print_memory(memory, plan, topology)
        return 0
    if command.verify is False:  # asked for nothing back: become the program, as taskset does
        from ..pinning.launcher import exec_program

        exec_program(argv, plan, follow=command.follow, omp=command.omp, memory=memory)
    verify = command.verify if command.verify is not None else sys.stderr.isatty()
    result = run_program(argv, plan, follow=command.follow, omp=command.omp, memory=memory)
    judged = plan  # what --verify judges the threads against (None: where they ran, no verdict)
    if command.omp and plan is not None:
        result = as_openmp_places_them(result, plan)
        execs = [p for p in result.processes if p.how == "exec"]
        # the program alone, naming no runtime (a program it starts may name one: then it is judged)
        if verify and len(execs) <= 1 and not uses_openmp(find_program(argv)):
            judged = None
            print(f"pinwise: warning: {argv[0]} names no OpenMP runtime (libgomp, libomp, libiomp5) among the "
                  "libraries it needs: unless one loaded later, nothing placed its threads, so where they ran is shown "
                  "without a verdict", file=sys.stderr)
    if result.unobserved:
        # Never "0 threads, all where asked": say that nothing could be read back, and why.
        if plan is not None and not command.omp:
            print(f"pinwise: warning: the preload library did not load in {argv[0]} ({result.unobserved}): its "
                  "threads were not pinned", file=sys.stderr)
        elif verify:
            who = "the OpenMP runtime was asked to place them" if plan is not None else "the OS placed them"
            print(f"pinwise: cannot show where {argv[0]}'s threads ran ({result.unobserved}); {who}", file=sys.stderr)
    elif verify:
        _verify_table(result, judged, memory)
    if result.signal_name:
        print(f"pinwise: error: {argv[0]} was killed by signal {result.signal_name}", file=sys.stderr)
        return 128 - result.returncode
    return result.returncode


def cmd_pin(args: argparse.Namespace) -> int:
    from ..pinning.live import ended, pin_threads, thread_ids

    command = PinCommand.from_args(args)
    if command.adapt is not None:
        return _adapt(command.adapt, command.topology, None, command.pid)
    done = pin_threads(command.plan, command.pid)
    for tid, cpus in done.items():
        print(f"TID {tid}: CPU {format_cpulist(sorted(cpus))}")
    try:
        late = [tid for tid in thread_ids(command.pid) if tid not in done and not ended(command.pid, tid)]
    except PinwiseError:
        late = []  # it ended meanwhile
    if late:
        print(f"pinwise: warning: {len(late)} thread(s) started while the others were pinned and run where the OS "
              f"put them (TID {', '.join(map(str, late[:8]))}{', ...' if len(late) > 8 else ''}): pin again",
              file=sys.stderr)
    if command.traced and not command.plan.repeat_from:
        _say_unlike_the_trace(command.pid, command.plan, len(done))
    if command.pid == 1:  # init: every service it starts from now on inherits the affinity
        print("pinwise: warning: PID 1 is the init process: every process it starts from now on inherits these "
              f"CPUs (undo with: taskset -a -p -c {format_cpulist(sorted(command.topology.allowed))} 1)",
              file=sys.stderr)
    if ended(command.pid, command.pid):
        print(f"pinwise: note: process {command.pid}'s main thread has ended (pthread_exit): it took no slot, and "
              "the threads took the slots in turn from slot 0", file=sys.stderr)
    elif len(set(done.values())) > 1:  # each thread on its own CPUs: what a thread made later inherits matters
        print(f"pinwise: note: a thread the process makes from now on starts on the CPUs of the thread that makes "
              f"it (the OS copies them): `pinwise pin --pid {command.pid} --adapt`, in place of this pin, places new "
              "threads as they come (threads pinned before it are left alone)",
              file=sys.stderr)
    return 0


def _say_unlike_the_trace(pid: int, plan: Plan, pinned: int) -> None:
    """Say so when a process has not as many threads as the trace its plan maps: the k-th thread
    in TID order took the slot of the trace's thread k, which is only right when they match."""
    taken = sum(1 for index in range(pinned) if not plan.skips(index))
    slots = plan.nb_slots
    if taken == slots:
        return
    if taken > slots:
        what = (f"thread{'s' if taken - slots > 1 else ''} {slots}{f'-{taken - 1}' if taken - slots > 1 else ''} "
                "wrapped round onto the plan's first CPUs, beside threads they may not talk to")
    else:
        what = f"slot{'s' if slots - taken > 1 else ''} {taken}{f'-{slots - 1}' if slots - taken > 1 else ''} went unused"
    print(f"pinwise: warning: process {pid} has {taken} thread{'s' if taken != 1 else ''} and the plan maps the "
          f"{slots} of its trace: {what}. The k-th thread in TID order took the place of the trace's thread k, "
          f"which holds only for the same threads: trace this process (pinwise trace --pid {pid}) for a plan of "
          "its own threads", file=sys.stderr)


def cmd_topo(args: argparse.Namespace) -> int:
    from .. import topology as topo_mod
    from ..files import write_text_atomic

    command = TopoCommand.from_args(args)
    topology = command.topology
    if topology is None:
        for name, (description, note) in topo_mod.PRESETS.items():
            machine = topo_mod.preset(name)
            print(f"{name:9} {machine.nb_pus:3} PUs  {description}\n          {note}")
        return 0
    if command.of == "text":
        text = _render(topology)
    elif command.of == "json":
        text = topo_mod.to_json(topology)
    elif command.of == "xml":
        text = topo_mod.to_xml(topology)
    else:
        text = topo_mod.to_synthetic(topology)
    if command.output:
        write_text_atomic(command.output, text if text.endswith("\n") else text + "\n")
        print(f"wrote {command.output}", file=sys.stderr)
    else:
        print(text)
    return 0
