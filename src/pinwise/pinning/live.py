"""Pinning threads that already run: another process (``pinwise pin --pid``) or our own."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import PinwiseError
from ..plan import Plan


def thread_ids(pid: int) -> list[int]:
    """The threads of a process in TID order, which on Linux is creation order until TIDs wrap."""
    try:
        return sorted(int(name) for name in os.listdir(f"/proc/{pid}/task"))
    except FileNotFoundError:
        raise PinwiseError(f"no process with PID {pid}") from None
    except PermissionError:
        raise PinwiseError(f"not allowed to look at process {pid}") from None


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


def last_cpu(pid: int, tid: int) -> int | None:
    """The CPU a thread last ran on (field 39 of /proc/PID/task/TID/stat)."""
    try:
        stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[36])


def pin_threads(plan: Plan, pid: int | None = None) -> dict[int, tuple[int, ...]]:
    """Pin the threads of a running process (default: this one) in TID order to the plan's slots;
    threads named by the skip mask may run on every CPU of the plan. Returns TID -> CPUs."""
    pid = os.getpid() if pid is None else pid
    done: dict[int, tuple[int, ...]] = {}
    slot = 0
    for index, tid in enumerate(thread_ids(pid)):
        skipped = index > 0 and index - 1 < 64 and (plan.skip_mask >> (index - 1)) & 1
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


def pin_self(cpus: list[int] | tuple[int, ...]) -> None:
    """Pin the calling thread."""
    try:
        os.sched_setaffinity(0, cpus)
    except OSError as err:
        raise PinwiseError(f"cannot pin this thread to CPUs {list(cpus)}: {err.strerror}") from None
