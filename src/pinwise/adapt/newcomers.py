"""Where the threads a program makes while it is placed start (:mod:`pinwise.adapt`).

A new thread inherits its creator's affinity: once pinwise has pinned a thread to one CPU, every
thread that thread creates would start on that CPU too, and look pinned by the program (its
affinity neither every allowed CPU nor what pinwise set), so it would be left alone there for the
rest of the run (a program that makes its workers in rounds ran every round after the first on one
CPU of two, twice as long as alone). So pinwise says where new threads start, as ``pinwise run``
gives each thread its slot at creation:

- **At creation**, under ``pinwise run --adapt``: the preload library reads the file
  :meth:`Newcomers.publish` rewrites after every change of pins (``PINWISE_ADAPT`` names it;
  preload.c, ``adapt_start``). Its lines::

      pinned TID...               the threads pinwise pinned: their affinity is pinwise's
      slots FIRST COUNT LIST      thread FIRST + j starts on the j-th CPU list of LIST ("0;1;-")

  and a thread of creation order k >= FIRST + COUNT on the list of (k - FIRST) % COUNT, as a
  static plan wraps round past its last slot (PINWISE_REPEAT_FROM): the workers alive at the last
  move are the template, so the workers of a program that makes them in rounds take their
  predecessors' CPUs; "-" is every allowed CPU (where the OS places it). With no slot for it, a
  thread whose creator pinwise pinned starts on every allowed CPU. A creator the program or its
  user pinned keeps its threads (they stay its own), and a thread the program gives an affinity
  when it creates it (pthread_attr_setaffinity_np) keeps that one; a process the program forks
  from a thread pinwise pinned gets every allowed CPU back (--adapt places threads, not processes).
- **At the next window** (:meth:`Newcomers.settle`): a thread on its slot is pinwise's and joins
  the adaptation. With the library, at the window after the one that first shows it (or up to
  WAIT_WINDOWS later): a new thread waits for a CPU before the library moves it, and until then it
  has its creator's affinity, which a judgment must neither take for its slot nor for the
  program's own pinning; the crowding rule also gives it an interval before its pair has to look
  contended. In a process pinwise attached to (``pin --pid --adapt``) or one that did not load the
  preload library (statically linked), a new thread whose affinity is one pinwise handed out (a pin
  or a slot: it inherited its creator's) is moved to its slot, or back to every allowed CPU; a
  thread the program pins by itself to a CPU pinwise pinned another thread to looks the same from
  outside, and is placed with the others.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..cpulist import format_cpulist
from ..pinning.launcher import PRELOAD_NAME


#: Windows a new thread may stay on a pin of pinwise's (its creator's) under the library, which has
#: not run it yet, before a judgment may call its affinity the program's own.
WAIT_WINDOWS = 2


class Newcomers:
    """The slots of threads not made yet, for the preload library (``path``) and for
    :meth:`settle`, from the pins of the threads alive at the last change."""

    def __init__(self, allowed, path: Path | None = None):
        self.allowed = frozenset(allowed)
        self.path = path
        self.handed: set[frozenset[int]] = set()   # every affinity pinwise gave a thread
        self.first, self.slots = 0, []             # the template: thread first + j's CPUs (None: the OS's)
        self.before: tuple[int, list] = (0, [])    # the template before it: a thread made as it changed had it
        self.placed_at: dict[int, float] = {}      # thread -> when it was found on its slot (s)
        self.now = 0.0                             # the end of the last window settled (s)
        self.unreported: dict[int, list[int]] = {}  # found on their slots by a judgment, for the next log record
        self.seen = 0                              # threads seen in a window (creation order)
        self.ready = 0                             # ... and settled (below it: past their start)
        self.waiting: dict[int, int] = {}          # past it, still on a creator's pin: windows waited
        self.published = ""                        # the file's text
        self.started = 0                           # threads made after a move that started on their slot
        self.library: bool | None = None           # the program loaded the preload library (None: not looked yet)

    def slot(self, k: int) -> frozenset[int] | None:
        """Where thread k (creation order), made after the last change, starts: None for every allowed CPU."""
        return _slot(self.first, self.slots, k)

    def given(self, k: int) -> set[frozenset[int]]:
        """The slots thread k may have been given at creation: the template's, or, made while it
        changed (the library read the file before the move), the one's before."""
        return {slot for slot in (_slot(self.first, self.slots, k), _slot(*self.before, k)) if slot is not None}

    def young(self, since: float) -> set[int]:
        """The threads found on their slots since ``since`` (s): the template put them there, and a
        pair it put on one CPU has not had a judgment yet to show whether it contends."""
        self.placed_at = {k: at for k, at in self.placed_at.items() if at >= since}
        return set(self.placed_at)

    def publish(self, tids: list[int], pinned: dict[int, set[int]], own: dict, remake: bool) -> None:
        """The file, when it changed: the threads pinned among those alive (``tids``, -1 for those
        that ended; ``pinned``: thread -> the CPUs pinwise set), and with ``remake`` (pinwise has
        just moved threads) the template from the threads alive now but those left alone (``own``).
        Between moves the template stays: threads that ended, or took their slots, change nothing
        (a round's end, its first workers gone, would otherwise leave a template of its last ones)."""
        if remake:
            self.before = (self.first, self.slots)
            workers = [k for k, tid in enumerate(tids) if k > 0 and tid > 0 and k not in own]
            self.first = workers[0] if workers else 0
            self.slots = [frozenset(pinned[k]) if k in pinned and tids[k] > 0 else None
                          for k in range(self.first, workers[-1] + 1)] if workers else []
        self.handed.update(frozenset(c) for c in pinned.values())
        self.handed.update(s for s in self.slots if s is not None)
        # a thread the program pinned again after pinwise is its own, and so are the threads it makes
        mine = [tids[k] for k in sorted(pinned) if k < len(tids) and tids[k] > 0 and k not in own]
        lines = ["pinned " + " ".join(map(str, mine))]
        if self.slots:
            listed = ";".join(format_cpulist(sorted(s)) if s is not None else "-" for s in self.slots)
            lines.append(f"slots {self.first} {len(self.slots)} {listed}")
        text = "\n".join(lines) + "\n"
        if self.path is None or text == self.published:
            return
        self.published = text
        temporary = self.path.with_name(self.path.name + ".tmp")
        try:  # whole or not at all: the library reads it while the program makes threads
            temporary.write_text(text)
            os.replace(temporary, self.path)
        except OSError:
            pass  # (the folder is pinwise's own) new threads then start as the last file says

    def settle(self, tids: list[int], pinned: dict[int, set[int]], at: float = 0.0) -> dict[int, list[int]]:
        """The threads made since the last call: one on its slot (the preload library put it there)
        is pinwise's (recorded in ``pinned``); in a process pinwise attached to (no ``path``), or
        one that did not load the library (statically linked), one whose affinity pinwise handed
        out (inherited from a creator pinwise pinned) is moved to its slot, or back to every
        allowed CPU, and is pinwise's too. Returns those placed so (and those a judgment found on
        their slots since the last call), thread -> its CPUs, for the log; ``at``: the window's end (s)."""
        self.now = at
        if self.library is None and tids and tids[0] > 0:
            self.library = self.path is not None and _has_library(tids[0])
        # the library moves a new thread when it first runs, which on a busy machine may come after
        # the window that shows it: one seen for the first time has its creator's affinity still,
        # which may be a slot too, so with the library a thread is settled at its second window
        first, upto = self.ready, (self.seen if self.library else len(tids))
        self.ready, self.seen = upto, len(tids)
        waited, self.waiting = self.waiting, {}
        for k in [*waited, *range(first, upto)]:
            tid = tids[k]
            if tid <= 0 or k in pinned:
                continue
            try:
                now = frozenset(os.sched_getaffinity(tid))
            except OSError:
                continue  # it ended meanwhile
            target = self.slot(k)
            if now in self.given(k):
                self.adopt(k, now, pinned)
                continue
            if self.library is not False or now >= self.allowed or now not in self.handed:
                # with the library, a thread still on a pin of pinwise's has not run yet, most likely
                # (two windows at most more; then a judgment finds it the program's own)
                pinned_like = not now >= self.allowed and now in self.handed
                if self.library and pinned_like and waited.get(k, 0) < WAIT_WINDOWS:
                    self.waiting[k] = waited.get(k, 0) + 1
                continue  # the library places it (a thread still starting), or the OS, or the program
            try:
                os.sched_setaffinity(tid, target or self.allowed)
            except OSError:
                continue
            if target is not None:
                self.adopt(k, target, pinned)
            else:
                self.unreported[k] = sorted(self.allowed)
        placed, self.unreported = self.unreported, {}
        return placed

    def adopt(self, k: int, cpus, pinned: dict[int, set[int]]) -> None:
        """Thread k found on ``cpus``, its slot (by :meth:`settle`, or by a judgment that read it
        first): pinwise's from now on, counted and reported."""
        pinned[k] = set(cpus)
        self.started += 1
        self.placed_at[k] = self.now
        self.unreported[k] = sorted(cpus)

    def starting(self, k: int) -> bool:
        """Whether thread k has not been settled yet (the library may not have moved it yet)."""
        return k >= self.ready or k in self.waiting


def _slot(first: int, slots: list, k: int) -> frozenset[int] | None:
    """Thread k's slot in the template (first, slots): None for every allowed CPU, or none."""
    return slots[(k - first) % len(slots)] if slots and k >= first else None


def _has_library(pid: int) -> bool:
    """Whether process ``pid`` loaded the preload library (a statically linked program cannot):
    without it, its new threads are placed from outside, as in a process pinwise attached to."""
    try:
        with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as maps:
            return any(line.rstrip().endswith("/" + PRELOAD_NAME) for line in maps)
    except OSError:
        return True  # gone, or not ours to read: nothing to place from outside either
