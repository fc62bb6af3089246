"""The preload library's log: where each thread of a pinned program was asked to run and ran.

The library (native/preload/preload.c) appends one line per event, written with one write(2) so
that lines of concurrent threads never interleave:

- ``process PID PPID HOW FOLLOWED NAME``: a process loaded the library, as a new program (HOW
  ``exec``: the plan from slot 0) or as a forked copy of its parent's program (``fork``: the next
  slot, as a thread); FOLLOWED 1 when the plan is for it (the program pinwise started, or one it
  follows), 0 when it is only observed (``--no-follow``); NAME its command name, to the end of
  the line;
- ``start PID TID INDEX SLOT ERRNO CPU CPUS NS``: a thread began; INDEX is its creation order in
  its program (main = 0; a forked copy counts as a thread), SLOT its slot of the plan (-1: a
  skipped helper; -2: the main thread of a program that started no thread or fork, which the
  library leaves on the whole plan so that its runtimes see every CPU of it), ERRNO what
  sched_setaffinity returned (0: pinned), CPU where it ran right after, CPUS the CPUs it was given,
  NS CLOCK_MONOTONIC in nanoseconds (absent in logs of older libraries);
- ``end PID TID CPU NS [MEMPOLICY]``: the thread ended on CPU (-1: unknown); with a memory policy
  asked for, the policy the kernel reported for the thread then (numa_maps' word: ``bind:0``,
  ``interleave:0-1``, ``prefer:0``, ``local``, ``default``; ``-`` when unreadable);
- ``create|join PID TID INDEX NS``: thread TID created or joined the thread of creation order INDEX;
- ``exec PID NAME`` before process PID execs program NAME (its file name), ``noexec PID NAME`` when
  that failed: an exec with no ``process`` record of PID after it started a program that did not
  load the library (statically linked, set-user-ID, or started without LD_PRELOAD).

A program killed mid-line leaves a cut line, which is skipped.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..cpulist import parse_cpulist
from ..errors import PinwiseError


@dataclass(frozen=True)
class ThreadRecord:
    """One thread of the program: its slot, where it was asked to run, where it ran."""

    pid: int
    tid: int
    index: int                # creation order, main thread = 0
    slot: int                 # -1 for a skipped helper thread
    requested: tuple[int, ...]
    start_cpu: int            # the CPU it ran on right after pinning
    end_cpu: int | None = None  # the CPU it last ran on (None if it never reported, e.g. killed)
    error: int = 0            # errno of sched_setaffinity, 0 when pinning worked
    started_ns: int | None = None  # CLOCK_MONOTONIC when it started and ended (None in older logs)
    ended_ns: int | None = None
    mempolicy: str | None = None  # the kernel's word for its memory policy (None: none was asked)
    image: int = -1           # which ``process`` record of the log it ran under (-1: none)

    @property
    def ran_where_asked(self) -> bool:
        cpus = [self.start_cpu] + ([self.end_cpu] if self.end_cpu is not None else [])
        return self.error == 0 and all(cpu in self.requested for cpu in cpus if cpu >= 0)


#: The slot of a main thread left on the whole plan: its program started no thread and no fork.
WHOLE_PLAN = -2


@dataclass(frozen=True)
class ProcessRecord:
    """A process that loaded the preload library: a new program (``exec``), or a forked copy of
    its parent's program (``fork``), followed (the plan is for it) or only observed."""

    pid: int
    ppid: int
    how: str                  # "exec" or "fork"
    followed: bool
    name: str
    #: The threads the library saw start in this image of the process, in creation order
    threads: tuple[ThreadRecord, ...] = ()


@dataclass(frozen=True)
class RunResult:
    """A program run under the preload library: its exit, and every thread's record."""

    returncode: int
    threads: tuple[ThreadRecord, ...] = ()
    signal_name: str | None = None         # the signal that killed it, if one did
    pid: int | None = None                 # the process pinwise started
    #: pthread_create/pthread_join calls as the log holds them: (kind, pid, calling TID, index)
    spawns: tuple[tuple[str, int, int, int], ...] = ()
    #: Why the preload library left no record of the process (it did not load), or None
    unobserved: str | None = None
    #: Every process (program image) that loaded the library, in the order they did
    processes: tuple[ProcessRecord, ...] = ()
    #: Programs exec'd along the way that did not load the library: (pid, name)
    unloaded: tuple[tuple[int, str], ...] = ()

    @property
    def misplaced(self) -> list[ThreadRecord]:
        return [t for t in self.threads if not t.ran_where_asked]


def parse_log(text: str) -> tuple[ThreadRecord, ...]:
    """One record per thread, ordered by process and creation (lines cut short by a crash are skipped)."""
    return read_log(text)[1]


def read_log(text: str) -> tuple[tuple[ProcessRecord, ...], tuple[ThreadRecord, ...]]:
    """The log's ``process`` records in file order, each with the threads that started in it, and
    every thread's record (as :func:`parse_log`). A record belongs to the latest ``process`` record of its PID before
    it: a process that execs another program logs a new one under the same PID, and the records of
    one process are in its program order."""
    processes: list[ProcessRecord] = []
    image: dict[int, int] = {}
    starts: dict[tuple[int, int, int], tuple] = {}
    ends: dict[tuple[int, int, int], tuple[int | None, int | None, str | None]] = {}
    for line in text.splitlines():
        fields = line.split(" ")
        try:
            if fields[0] == "process" and len(fields) >= 6 and fields[3] in ("exec", "fork"):
                record = ProcessRecord(int(fields[1]), int(fields[2]), fields[3], fields[4] == "1",
                                       " ".join(fields[5:]))
                image[record.pid] = len(processes)
                processes.append(record)
            elif fields[0] == "start" and len(fields) in (8, 9):
                pid, tid, index, slot, error, cpu = (int(f) for f in fields[1:7])
                started = int(fields[8]) if len(fields) == 9 else None
                starts[(pid, image.get(pid, -1), tid)] = (index, slot, tuple(parse_cpulist(fields[7])), cpu, error,
                                                          started)
            elif fields[0] == "end" and len(fields) in (4, 5, 6):
                pid, tid, cpu = (int(f) for f in fields[1:4])
                ends[(pid, image.get(pid, -1), tid)] = (
                    cpu if cpu >= 0 else None, int(fields[4]) if len(fields) >= 5 else None,
                    fields[5] if len(fields) == 6 and fields[5] != "-" else None)
        except (ValueError, PinwiseError):
            continue  # a line cut short by a crash: the rest of the log still counts
    records = []
    for (pid, number, tid), (index, slot, requested, cpu, error, started) in starts.items():
        end_cpu, ended, mempolicy = ends.get((pid, number, tid), (None, None, None))
        records.append(ThreadRecord(pid, tid, index, slot, requested, cpu, end_cpu, error, started, ended, mempolicy,
                                    number))
    records.sort(key=lambda t: (t.pid, t.image, t.index))
    own: list[list[ThreadRecord]] = [[] for _ in processes]
    for record in records:
        if record.image >= 0:
            own[record.image].append(record)
    return tuple(replace(p, threads=tuple(own[i])) for i, p in enumerate(processes)), tuple(records)


def parse_spawns(text: str) -> tuple[tuple[str, int, int, int], ...]:
    """The log's ``create``/``join`` records in file order: (kind, pid, calling TID, thread index).
    One thread's records are in its program order."""
    events = []
    for line in text.splitlines():
        fields = line.split(" ")
        if fields[0] in ("create", "join") and len(fields) == 5:
            try:
                events.append((fields[0], int(fields[1]), int(fields[2]), int(fields[3])))
            except ValueError:
                continue
    return tuple(events)


def unloaded_programs(text: str) -> tuple[tuple[int, str], ...]:
    """(pid, name) of each program exec'd that logged no ``process`` record after its ``exec``
    record: it did not load the library, so its threads were neither pinned nor seen."""
    pending: dict[int, str] = {}
    missing = []
    for line in text.splitlines():
        fields = line.split(" ")
        if len(fields) < 3 or fields[0] not in ("exec", "noexec", "process") or not fields[1].isdigit():
            continue
        pid = int(fields[1])
        if fields[0] == "exec":
            if pid in pending:  # an exec that replaced the image with one that logged nothing
                missing.append((pid, pending[pid]))
            pending[pid] = fields[2]
        else:  # the program loaded the library, or the exec failed
            pending.pop(pid, None)
    return tuple(missing + list(pending.items()))
