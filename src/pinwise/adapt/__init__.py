"""Capability 14: placing the threads while the program runs (``pinwise run --adapt``,
``pinwise pin --pid PID --adapt``), with no trace step and no user input.

The sampling tracer (:mod:`pinwise.sample`) runs beside the program and appends a window record
(a tick) every 1/TICKS_PER_INTERVAL of the ``interval`` (its ``--stream``): per thread its id and
address samples, per ordered pair of threads the draws, arms and weighted watchpoint hits since
the last record, and the samples that met the other's on a line (:mod:`pinwise.adapt.windows`;
while the placement holds, the sampler arms at a quarter of its budget, and meetings that look
stale give it back at once). Windows become a matrix by the sampler's own estimate (``estimate()`` in
pw_sample.c, here :meth:`Window.directed`). The ticks since the last judgment are judged together
once an interval has passed; before, the newest ticks that hold ALONE_EVENTS weighted events are
judged alone when the placement looks stale on them (STALE_SHARE: the threads that talk now are
further apart under it than those that talked at the last judgment), or when a move waits for a
second judgment, or, before the first move, in the first WARM_UP intervals (from STRONG_EVENTS): a phase change is
seen within a tick or two, and a steady program costs one judgment an interval.

Deciding is the cost model's (:func:`pinwise.mapping.cost.mapping_cost`, the sum over pairs of
M[i][j] times their PUs' tree distance), on the span judged, or on it and the one before together
when it holds fewer than ALONE_EVENTS weighted events: the placement the policy gives for them
(``--policy``, by default the one :func:`pinwise.patterns.analyze` recommends for them) against
where the threads run now (the plan pinwise applied, or, before any, the CPUs the OS has them on,
read from /proc). The threads move only when the new placement costs less than (1 - HYSTERESIS)
of the current one in two judgments in a row, so sampling noise never moves them back and forth,
or at once when it costs less than STRONG of it (a gain noise does not make: half the cost, in
at least STRONG_EVENTS events; threads the OS crowded on a CPU, which have no cost to beat, when
the plan costs less than STRONG of its CPUs with the threads dealt at random, on held-out events
too), and only when the placement made on a random half of the events beats the current one on
the other half (:meth:`Adapter._held_out`) and the last move paid (:meth:`Adapter._check_paid`:
what the sampler sees follows the placement, whose pairs on one CPU are counted as if apart,
:func:`~pinwise.adapt.scoring.as_if_apart`); a phase change is named at the first judgment that
saw it. Threads
the OS places have no placement made for any pattern: where it has them is chance, and it may move
them apart at any time, so a locality placement that costs less than (1 - HYSTERESIS) of what its
CPUs would cost with the threads dealt to them at random is applied to them too (where the OS has
them costs as little, they are pinned where they run). They move from outside, with
``sched_setaffinity`` on their thread ids. Contending pairs (:func:`contending_pairs`: most of
each thread's accesses on a line its partner touches) take one CPU per pair under the recommended
policy, and go back to the OS when they stop contending (RELEASE_WINDOWS): no policy of the papers stacks threads, and where every pair of cores is as far
apart as any other, the cost model alone never moves them (docs/run.md).

What it respects: the cpuset (the plan is made for the PUs this process may use); the memory
policy the program was started with (pages stay where they are: a moved thread may leave its
pages remote, and the summary says so when a memory policy was given); and a thread's own pinning:
a thread whose affinity is neither what pinwise set nor every allowed CPU was pinned by the
program or its user, and is left alone for the rest of the run. Threads made while it runs get
their slot at creation (:mod:`pinwise.adapt.newcomers`): they would otherwise inherit the one CPU
pinwise pinned their creator to, and look pinned by the program.
"""

from __future__ import annotations

from .decide import Adapter, Move
from .limits import (ALONE_EVENTS, HYSTERESIS, INTERVAL, MIN_EVENTS, PAID_EVENTS, PLACED, RELEASE_WINDOWS,
                     STALE_SHARE, STRONG, STRONG_EVENTS, TICKS_PER_INTERVAL)
from .pairs import CONTENDED_SHARE, IDLE_SHARE, PARTNER_SHARE, contending_pairs
from .run import AdaptResult, BackgroundAdapter, run_adaptive, summary_lines
from .windows import Window, read_windows

__all__ = ["ALONE_EVENTS", "CONTENDED_SHARE", "HYSTERESIS", "IDLE_SHARE", "INTERVAL", "MIN_EVENTS", "PAID_EVENTS",
           "PARTNER_SHARE", "PLACED", "RELEASE_WINDOWS", "STALE_SHARE", "STRONG", "STRONG_EVENTS",
           "TICKS_PER_INTERVAL", "AdaptResult", "Adapter",
           "BackgroundAdapter", "Move", "Window", "contending_pairs", "read_windows", "run_adaptive",
           "summary_lines"]
