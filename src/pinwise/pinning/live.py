"""Pinning threads that already run: another process (``pinwise pin --pid``) or our own."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager

from ..errors import PinwiseError
from ..plan import Plan
from ..processes import not_a_program, stat_fields


def thread_ids(pid: int) -> list[int]:
    """The threads of a process in TID order, which on Linux is creation order until TIDs wrap.
    A process that has ended and waits for its parent to collect it (a zombie) is refused."""
    try:
        tids = sorted(int(name) for name in os.listdir(f"/proc/{pid}/task"))
    except FileNotFoundError:
        raise PinwiseError(f"no process with PID {pid}") from None
    except PermissionError:
        raise PinwiseError(f"not allowed to look at process {pid}") from None
    why = not_a_program(pid) if pid != os.getpid() else None
    if why:
        raise PinwiseError(why)
    # A main thread that ended (Z) may leave others running; every thread ended or gone: a zombie.
    if all(stat_fields(f"/proc/{pid}/task/{tid}/stat")[:1] in (["Z"], []) for tid in tids):
        raise PinwiseError(f"process {pid} has ended (a zombie, waiting for its parent to collect it): it has no "
                           "threads left to pin")
    return tids


def current_placement(pid: int | None = None) -> dict[int, list[int]]:
    """Each thread of ``pid`` (default: this process) with the CPUs it may run on."""
    pid = os.getpid() if pid is None else pid
    placement = {}
    for tid in thread_ids(pid):
        try:
            placement[tid] = sorted(os.sched_getaffinity(tid))
        except ProcessLookupError:
            continue  # the thread ended meanwhile
    return placement


def pin_threads(plan: Plan | Sequence[int], pid: int | None = None) -> dict[int, tuple[int, ...]]:
    """Pin the threads of a running process (default: this one) in TID order to the plan's slots
    (a CPU list: thread k on its k-th CPU, wrapping round); threads named by the skip mask may run
    on every CPU of the plan. A thread that has ended (a main thread gone by pthread_exit, a
    zombie until the process ends) takes no slot. Returns TID -> CPUs."""
    if not isinstance(plan, Plan):
        plan = Plan.from_cpus(plan, source="a CPU list")
    pid = os.getpid() if pid is None else pid
    done: dict[int, tuple[int, ...]] = {}
    slot = 0
    for index, tid in enumerate(tid for tid in thread_ids(pid) if not ended(pid, tid)):
        skipped = plan.skips(index)
        cpus = tuple(plan.all_cpus) if skipped else plan.cpus_for_slot(slot)
        if not skipped:
            slot += 1
        try:
            os.sched_setaffinity(tid, cpus)
        except ProcessLookupError:
            continue
        except PermissionError:
            raise PinwiseError(f"not allowed to pin the threads of process {pid} (run as its owner or root)") from None
        except OSError as err:
            raise PinwiseError(f"cannot pin thread {tid} to CPUs {list(cpus)}: {err.strerror}") from None
        done[tid] = cpus
    return done


def ended(pid: int, tid: int) -> bool:
    """Whether thread ``tid`` of process ``pid`` has ended while the process runs on (state Z or X)."""
    state = stat_fields(f"/proc/{pid}/task/{tid}/stat")[:1]
    return bool(state) and state[0] in ("Z", "X")


@contextmanager
def pinned(cpus: Iterable[int]) -> Iterator[list[int]]:
    """``with pinwise.pinned([0, 1]):`` runs the block with every thread of this process allowed
    only ``cpus``, and gives each thread back the CPUs it had before, even if the block raises.
    Threads started inside the block inherit the restriction (the OS copies it at creation)."""
    cpus = sorted(set(cpus))
    if not cpus:
        raise PinwiseError("pinned() needs at least one CPU")
    before = current_placement()
    try:
        for tid in before:
            try:
                os.sched_setaffinity(tid, cpus)
            except ProcessLookupError:
                continue
            except OSError as err:
                raise PinwiseError(f"cannot pin this process to CPUs {cpus}: {err.strerror}") from None
        yield cpus
    finally:
        for tid, previous in before.items():
            try:
                os.sched_setaffinity(tid, previous)
            except OSError:
                continue  # the thread ended inside the block


def pin_self(cpus: list[int] | tuple[int, ...]) -> None:
    """Pin the calling thread."""
    try:
        os.sched_setaffinity(0, cpus)
    except OSError as err:
        raise PinwiseError(f"cannot pin this thread to CPUs {list(cpus)}: {err.strerror}") from None
