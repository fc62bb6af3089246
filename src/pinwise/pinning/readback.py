"""What a pinned run's log says, in words: which programs ran threads, how many of the plan's
slots they used, and what pinwise could not pin.

A run may involve several programs: a shell, ``time`` or a launcher script that starts the real
program (a *wrapper*), a program that forks its workers, two programs that each take the plan. The
preload library logs every process that loads it (:func:`pinwise.pinning.log.read_log`);
this module groups those records into programs and says, never more confidently than the log
allows, where their threads ran. ``pinwise run --verify`` prints these lines and ``bench`` keeps
the thread count of each run.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..cpulist import format_cpulist
from .log import WHOLE_PLAN, RunResult, ThreadRecord


@dataclass(frozen=True)
class Program:
    """A program image that ran to its end (not replaced by exec), with the copies it forked."""

    name: str
    pid: int
    followed: bool                     # the plan was for it (False: --no-follow left it alone)
    threads: tuple[ThreadRecord, ...]  # its own and its forked copies', in creation order
    forks: int = 0                     # forked copies among its processes

    @property
    def slotted(self) -> list[ThreadRecord]:
        """The threads that took a slot of the plan (not the skipped helpers)."""
        return [t for t in self.threads if t.slot >= 0]

    @property
    def main_left_on_plan(self) -> bool:
        return any(t.slot == WHOLE_PLAN for t in self.threads)

    def label(self) -> str:
        return f"{self.name} (pid {self.pid})"


def programs(result: RunResult) -> list[Program]:
    """The run's programs, in the order they started. Threads come from ``result.threads`` (which
    ``--omp`` adjusts to the places the runtime gives), matched to their process record."""
    records = list(result.processes)
    threads = {(t.pid, t.image, t.tid): t for t in result.threads}
    last = {record.pid: i for i, record in enumerate(records)}
    replaced = [last[record.pid] != i for i, record in enumerate(records)]  # it exec'd another program
    root = list(range(len(records)))  # a forked copy belongs to its parent's program
    current: dict[int, int] = {}      # each process's image when a record is written
    for i, record in enumerate(records):
        parent = current.get(record.ppid) if record.how == "fork" else None
        if parent is not None and not replaced[parent]:
            root[i] = root[parent]
        current[record.pid] = i
    found: dict[int, Program] = {}
    for i, record in enumerate(records):
        if replaced[i]:
            continue
        own = tuple(threads.get((t.pid, t.image, t.tid), t) for t in record.threads)
        top = root[i]
        if top not in found:
            found[top] = Program(records[top].name, records[top].pid, records[top].followed, own)
        else:
            program = found[top]
            found[top] = Program(program.name, program.pid, program.followed,
                                 tuple(sorted(program.threads + own, key=lambda t: t.index)), program.forks + 1)
    return [found[top] for top in sorted(found)]


def thread_count(result: RunResult) -> int:
    """Threads that took a slot in the principal program that ran the most (launchers aside): what
    a bench compares with the plan's slots."""
    main = principal(programs(result), result.pid)
    return max((len(p.slotted) + p.main_left_on_plan for p in main), default=0)


def _threads(n: int) -> str:
    return f"{n:,} thread{'s' if n != 1 else ''}"


def program_line(program: Program, slots: int, plan_cpus: list[int], traced: int | None = None) -> str:
    """How one pinned program's threads ran against a plan of ``slots`` slots (made from a trace
    that saw ``traced`` threads, for a program that creates its workers in rounds)."""
    count = len(program.slotted) + program.main_left_on_plan
    wrong = [t for t in program.slotted if not t.ran_where_asked]
    helpers = len(program.threads) - count
    if not program.threads:  # loaded, but it wrote no thread's record: never "0 threads, all where asked"
        return (f"no thread of {program.name} was read back: it ended before the preload library wrote where its "
                "threads ran (a process that leaves by _exit, as a shell's exit does, writes none)")
    if program.main_left_on_plan and count == 1:
        text = (f"{_threads(1)}, left on the plan's CPUs {format_cpulist(plan_cpus)}: the program started no thread, "
                "and pinwise narrows the main thread to slot 0 only when it starts its first (so that its runtimes "
                "see every CPU of the plan)")
    else:
        text = f"{_threads(count)}, " + (f"{len(wrong)} not where asked" if wrong else "all where asked")
    if helpers:
        text += f" (and {helpers} skipped helper{'s' if helpers != 1 else ''})"
    if count < slots:
        unused = f"slot {count}" if count == slots - 1 else f"slots {count}-{slots - 1}"
        text += f"; the plan has {slots} slots: the program ran fewer threads than the plan ({unused} unused)"
    elif traced is not None and count < traced:
        text += f"; its trace showed {traced} threads: the program ran fewer threads than its trace"
    return text


def principal(found: list[Program], launched: int | None) -> list[Program]:
    """The programs a user ran pinwise for, among those that followed the plan: every one that
    started threads of its own; else the largest that forked workers; else the launched one. The
    others are launchers and their helpers (a shell, time, a Python or pyenv script)."""
    followed = [p for p in found if p.followed]
    threaded = [p for p in followed if any(t.tid != t.pid for t in p.threads)]
    if threaded:
        return threaded
    forked = [p for p in followed if p.forks]
    if forked:
        return [max(forked, key=lambda p: len(p.threads))]
    return [p for p in followed if p.threads and p.pid == launched][-1:] or [p for p in followed if p.threads][-1:]


def summary_lines(result: RunResult, slots: int, plan_cpus: list[int], traced: int | None = None) -> list[str]:
    """What ``--verify`` says after its table, one line each (without the ``pinwise:`` prefix);
    ``traced``: the threads of the trace a plan for workers in rounds was made from."""
    found = programs(result)
    if len(found) == 1 and found[0].pid == result.pid and found[0].followed and not found[0].forks \
            and not result.unloaded:
        return [program_line(found[0], slots, plan_cpus, traced)]
    if not found:
        return ["no thread was read back"]  # with a process record in the log, never so
    main = principal(found, result.pid)
    launcher = next((p for p in found if p.pid == result.pid), None)
    lines = [] if main else ["no thread of a followed program was read back"]
    for program in main:
        under = f", under {launcher.name}" if launcher is not None and launcher is not program else ""
        forks = f" and its {program.forks} forked cop{'ies' if program.forks != 1 else 'y'}" if program.forks else ""
        lines.append(f"{program.name} (pid {program.pid}{under}){forks}: "
                     + program_line(program, slots, plan_cpus, traced))
    if len(main) > 1:
        lines.append(f"{len(main)} programs took the plan, each from slot 0: their threads share its CPUs")
    unfollowed = [p for p in found if not p.followed and p.threads]
    for program in unfollowed:
        if len(program.threads) > 1 or not main:
            lines.append(f"{program.label()} was not followed (--no-follow): its {_threads(len(program.threads))} "
                         "ran where the OS put them")
    for pid, name in result.unloaded:
        lines.append(f"{name} (pid {pid}) was started but did not load pinwise's preload library (statically "
                     "linked, set-user-ID, or started without LD_PRELOAD): its threads were neither pinned nor seen")
    others = [p for p in found if p.followed and p not in main]
    if others:
        names = {}
        for program in others:
            names[program.name] = names.get(program.name, 0) + 1
        most = max(len(p.threads) for p in others)
        listed = ", ".join(name + (f" x{count}" if count > 1 else "") for name, count in names.items())
        size = "no thread read back" if most == 0 else _threads(most) if len(others) == 1 else f"at most {_threads(most)} each"
        lines.append(f"{len(others)} more program{'s' if len(others) > 1 else ''} took the plan on the way, not in the "
                     f"table: {listed} ({size})")
    return lines


def shown_threads(result: RunResult) -> list[ThreadRecord]:
    """The threads ``--verify``'s table shows: the principal programs' and the unfollowed ones'
    that ran threads; all of them in a log without process records."""
    if not result.processes:
        return list(result.threads)
    found = programs(result)
    keep = principal(found, result.pid) + [p for p in found if not p.followed and len(p.threads) > 1]
    return [t for p in found if p in keep for t in p.threads]


def work_the_trace_missed(native: RunResult, traced_threads: int, round_size: int | None = None) -> str | None:
    """What a native run of a program shows that a trace of ``traced_threads`` threads did not see,
    as one sentence; None when the trace saw it all. The tracer follows the first process only: not
    the processes it forks (its matrix is the first process's), nor the programs it execs, in its
    own process or in a child; and a runtime may start fewer threads under it (an unhandled system
    call). Helper programs of one thread (a shell running mkdir) are not counted as work. With
    ``round_size``, both runs created their workers in rounds of that size (pinwise.rounds.find_rounds),
    and more threads natively are more rounds of the same workers, not missed work."""
    records = list(native.processes)
    first = next((i for i, r in enumerate(records) if r.pid == native.pid), None)
    if first is None:
        return None
    own = len(records[first].threads)
    name = records[first].name
    found = []
    if own > traced_threads and not (round_size and (own - 1) % round_size == 0):
        found.append(f"natively {name} ran {_threads(own)} in its own process, the trace saw {traced_threads}")
    outside = []
    forks = [r for r in records[first + 1:] if r.how == "fork" and r.threads]
    forked = {r.pid for r in forks}
    if forks:
        count = sum(len(r.threads) for r in forks)
        outside.append(f"{len(forks)} forked process{'es' if len(forks) != 1 else ''} ran {_threads(count)}")
    shown = {}
    for record in records[first + 1:]:
        if record.how != "exec" or not record.threads:
            continue
        successor = record.pid == native.pid  # the first process exec'd it: the trace stopped there
        if successor or record.pid in forked or len(record.threads) > 1:
            shown[record.pid] = f"{record.name} (pid {record.pid}) ran {_threads(len(record.threads))}"
    outside.extend(shown.values())
    outside.extend(f"{unloaded} (pid {pid}) ran, which pinwise cannot see into (statically linked?)"
                   for pid, unloaded in native.unloaded)
    if outside:
        found.append(f"the tracer follows {name}'s first process only, and natively " + "; ".join(outside))
    return "; ".join(found) + ": that work is not in the matrix" if found else None
