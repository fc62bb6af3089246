"""The decisions of an adaptive run (:mod:`pinwise.adapt`), one window at a time: the pattern
and phase of the last windows, the placement the policy gives for them, whether it beats where the
threads run now by enough to move them, the contending pairs that share a CPU, and the threads
that are their own."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

import numpy as np

from .. import policies
from ..comm import CommMatrix, TraceInfo
from ..errors import PinwiseError
from ..processes import stat_fields
from .limits import (ALONE_EVENTS, FEW_SHARE, HYSTERESIS, INTERVAL, MIN_EVENTS, MIN_WATCHED, PLACED, RELEASE_WINDOWS,
                     STALE_SHARE, STEADY_JUDGMENTS, STRONG, STRONG_EVENTS, STRONG_TRAPS, TICKS_PER_INTERVAL, WARM_UP)
from .newcomers import Newcomers
from .pairs import contending_pairs, idle_in_each, most_on_one_cpu, partnered
from .payoff import Payoff
from .scoring import Scorer, as_if_apart, live_targets, upper
from .windows import Window, merge_windows, split_window


@dataclass
class Move:
    at_s: float
    policy: str
    cpus: tuple[int, ...]               # per thread (creation order), where it was pinned
    moved: int                          # threads whose CPUs changed
    cost_before: float
    cost_after: float


def _current_cpu(tid: int) -> int | None:
    """The CPU thread ``tid`` (of any process, listed in /proc or not) ran on last; None once it has ended."""
    fields = stat_fields(f"/proc/{tid}/stat")
    return int(fields[36]) if len(fields) > 36 else None


class Adapter(Payoff):
    """The decisions of one adaptive run (pinwise.adapt's docstring), fed one window at a time."""

    def __init__(self, topology, policy: str | None, log, say=print, memory=None, interval: float = INTERVAL):
        self.topology, self.policy, self.log, self.say = topology, policy, log, say
        self.memory, self.interval = memory, interval
        self.allowed = set(topology.allowed)
        self.windows: list[Window] = []           # the spans judged, each the ticks since the one before
        self.fresh: list[Window] = []             # the ticks since the last judgment
        self.last_judged = self.judged = None     # the newest tick of the last judgment; the span it read
        self.ticks = 0                            # ticks fed
        self.placed_tick = -1                     # the tick at whose judgment threads were last pinned or released
        self.reference: tuple[tuple[int | None, ...], float, float] | None = None  # CPUs then, cost per event, per meeting
        self.score = Scorer(topology)
        self.paying: tuple[tuple[int | None, ...], float] | None = None  # the last move's CPUs, hops per event before it
        self.futile: tuple[tuple[int | None, ...], float] | None = None  # CPUs whose move did not pay, hops per event
        self.stale_in_a_row = 0                   # judgments since in which they looked stale
        self.paid_by: np.ndarray | None = None    # the events seen since the last placement (directed)
        self.rng = np.random.default_rng(0)      # the held-out halves (:meth:`_held_out`)
        self.plan = None                          # the last plan applied (None: the OS places)
        self.pinned: dict[int, set[int]] = {}     # thread -> CPUs pinwise set
        self.left_alone: dict[int, str] = {}
        self.newcomers = Newcomers(self.allowed)  # where threads made from now on start (run.feed_window)
        self.streak = 0                           # judgments in a row that favour a move
        self.pending_since, self.pending_monotonic = None, 0  # when the change a move waits for began (s, ns)
        self.moves, self.phases = [], []          # Moves made; phases seen, (since s, pattern)
        self.ran_on: dict[int, set[int]] = {}
        self.now_cpus: list[int | None] = []     # where the threads ran at the last judgment
        self.last_pattern, self.own_pins = None, None  # the last judgment's pattern; tids found pinning themselves
        self.gave_up: tuple[float, int] | None = None  # (s, threads made): too many were (run.feed_window)
        self.pattern_since = (0.0, 0)             # when the span that first showed it began (s, monotonic ns)
        self.sharing: list[tuple[int, int]] = []  # contending pairs pinwise put on one CPU (the plan had not)
        self.unshare_streak, self.unshare_since = 0, 0.0  # judgments in a row with no pair contending; the first's end
        self.steer = None                         # callable(steady: bool): the sampler's watchpoint budget
        self.calm = 0                             # due judgments in a row that changed nothing
        self.steady = False                       # whether the sampler was told the placement holds

    def _record(self, **event) -> None:
        if self.log is not None:
            self.log.write(json.dumps(event) + "\n")
            self.log.flush()

    def _where_now(self, tids: list[int]) -> list[int | None]:
        cpus = [_current_cpu(tid) if tid > 0 else None for tid in tids]
        for k, cpu in enumerate(cpus):
            if cpu is not None:
                self.ran_on.setdefault(k, set()).add(cpu)
        return cpus

    def _stacked(self, cpus: list[int | None], alive: list[int]) -> bool:
        """More threads on one CPU than an even spread over the allowed CPUs puts there."""
        on = [cpus[k] for k in alive if cpus[k] is not None]
        return bool(on) and most_on_one_cpu(cpus, alive) > -(-len(on) // max(1, len(self.allowed)))

    def _core(self, cpu: int | None):
        if cpu is None or not self.topology.has_pu(cpu):
            return None
        node = self.topology.pu(cpu)
        return next((id(a) for a in node.ancestors() if str(a.type) == "core"), id(node))

    def _share_cpus(self, targets: list[int], pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """With the recommended policy, contending ``pairs`` (:func:`contending_pairs`) the plan
        puts on different cores each take the CPU of its first thread; the pairs so placed, whose
        threads are given back to the OS when they stop contending (RELEASE_WINDOWS)."""
        if self.policy is not None:
            return []
        # those the plan puts on one CPU already (more threads than CPUs), or on two of one core
        # (SMT siblings share its L1), stay as the plan has them
        apart = [(i, j) for i, j in pairs if self._core(targets[i]) != self._core(targets[j])]
        for i, j in apart:
            targets[j] = targets[i]
        return apart

    def _release(self, tids: list[int]) -> int:
        """The threads of the contending pairs pinwise put on one CPU each, given back to the OS
        (every allowed CPU): they no longer contend."""
        released = 0
        for k in sorted({t for pair in self.sharing for t in pair}):
            if k < len(tids) and tids[k] > 0 and self._own_pinning(k, tids[k]) is not None:
                try:
                    os.sched_setaffinity(tids[k], self.allowed)
                except OSError:
                    continue
                self.pinned.pop(k, None)
                released += 1
        self.sharing = []
        self.plan = None
        return released

    def feed(self, tick: Window) -> None:
        """One window of the sampler's stream (a tick). The ticks since the last judgment are
        judged together once an interval has passed; before, the newest of them that hold
        ALONE_EVENTS weighted events are judged alone as soon as the placement looks stale on
        them (a phase change seen in a quarter of the interval, not a whole one later), when a
        move waits for a second judgment to agree, or in the first WARM_UP intervals before any
        move (from STRONG_EVENTS then). Threads pinwise pinned on one CPU since before the tick
        are seen as if apart (:func:`~pinwise.adapt.scoring.as_if_apart`). The sampler's watchpoint
        budget: a quarter while the placement holds (STEADY_JUDGMENTS), whole once it may be stale."""
        if self.ticks > self.placed_tick:  # not the tick in which they moved: part of it ran before
            tick = as_if_apart(tick, {k: next(iter(c)) for k, c in self.pinned.items() if len(c) == 1})
        self.fresh.append(tick)
        self.ticks += 1
        since = self.windows[-1].end_s if self.windows else 0.0
        due = tick.end_s - since >= self.interval * (1 - 0.5 / TICKS_PER_INTERVAL)
        # a pending move is confirmed on fresh events; in the first intervals, before any move, the
        # first placement is wanted early (a thread that creates the others is busy in the first
        # tick, and no pair looks contended yet): any fresh events judged
        warming = not self.moves and tick.end_s < WARM_UP * self.interval and self.own_pins != tuple(tick.tids)
        stale = not (self.streak or warming)
        # the watchpoint budget back, in a burst (the sampler's BURST_SHARE), as soon as the newest
        # tick's meetings (at the clock's rate: Window.met), or the newest ticks' events (not those
        # of a phase that ended since the last judgment), look stale: the new partners' traps that
        # the next judgment rests on come within a tick or two
        met = tick.met() if self.steady else None
        if met is not None and ((met.sum() >= STRONG_EVENTS and self._stale(met, meets=True)) or
                                self._newest_ticks(stale=True, need=MIN_EVENTS) is not None):
            self.calm = 0
            self._steady(False, tick.end_s, burst=True)
        # the newest tick alone first, from STRONG_EVENTS, when it looks stale: the ticks before it
        # may be of the phase that ended (two far pairs' 77 events at the whole budget were summed
        # with the tick the change began in, read master/reduction, and the move waited a tick more)
        newest = self._newest_ticks(stale=True, need=STRONG_EVENTS, most=1) if stale and not warming else None
        newest = newest or self._newest_ticks(stale=stale, need=STRONG_EVENTS if warming else ALONE_EVENTS,
                                              traps=STRONG_TRAPS if warming else None)
        if newest is None and not due:
            return
        ticks = newest or self.fresh
        first = len(self.fresh) - len(ticks)
        before = self.fresh[first - 1] if first > 0 else self.last_judged or ticks[0]
        span = merge_windows(ticks)
        self.fresh = []
        self.last_judged = tick
        moves, placed_at = len(self.moves), self.placed_tick
        self._judge(span, (before.end_s, before.monotonic_ns), stale=stale and newest is not None)
        # STEADY_JUDGMENTS due judgments in a row that changed nothing: the sampler arms at a share
        # of its budget until a judgment comes early (the placement looks stale) or moves threads
        calm = due and newest is None and not self.streak and len(self.moves) == moves and self.placed_tick == placed_at
        self.calm = self.calm + 1 if calm else 0
        self._steady(self.calm >= STEADY_JUDGMENTS, tick.end_s)
        placed = tuple(self._placement_now(self.now_cpus))  # pinwise's moves: pinned where they went
        # an early judgment that left the threads where they were keeps the reference: the ticks
        # after it are judged early too while the placement looks stale, until the next due one;
        # it is what the judgment read (ticks of few events read with the span before them)
        if due or newest is None or self.reference is None or placed != self.reference[0]:
            self.reference = (placed, self.score.per_event(self.judged.directed(), placed)[0],
                              self.score.per_event(self.judged.met(), placed)[0])

    def _steady(self, steady: bool, at: float, burst: bool = False) -> None:
        """Tell the sampler (``steer``: "steady", "whole" or, with ``burst``, "burst") whether the
        placement holds, when that changes (no sampler to steer: nothing to tell, and the budget
        stays whole)."""
        if steady != self.steady and self.steer is not None:
            budget = "steady" if steady else "burst" if burst else "whole"
            self.steer(budget)
            self._record(t=round(at, 3), event="watchpoints", budget=budget)
            self.steady = steady

    def _newest_ticks(self, stale: bool, need: float, most: int | None = None, traps: int | None = None):
        """The newest fresh ticks (``most`` of them at most) that hold ``need`` weighted events (or
        ``traps`` watchpoint traps), with ``stale`` only when the placement looks stale on them
        (:meth:`_stale`); None otherwise. The span grows from the newest back, a tick at a time."""
        if not any(pair[4] for tick in self.fresh for pair in tick.pairs):  # no hit: no events, no traps
            return None
        for first in range(len(self.fresh) - 1, max(-1, len(self.fresh) - 1 - (most or len(self.fresh))), -1):
            span = merge_windows([self.fresh[first], span]) if first < len(self.fresh) - 1 else self.fresh[first]
            directed = span.directed()  # each pair's share over the span
            if directed.sum() - np.trace(directed) >= need or (traps is not None and span.traps() >= traps):
                return self.fresh[first:] if not stale or self._stale(directed) else None
        return None

    def _placement_now(self, now_cpus: list[int | None]) -> list[int | None]:
        """Per thread, the CPU pinwise pinned it to, else the one it ran on last."""
        return [next(iter(self.pinned[k])) if k in self.pinned and len(self.pinned[k]) == 1 else now_cpus[k]
                for k in range(len(now_cpus))]

    def _stale(self, directed: np.ndarray, meets: bool = False) -> bool:
        """Whether the fresh ticks' communication (or with ``meets``, their meetings: Window.met)
        covers more distance per event under the CPUs of the last judgment than that judgment's
        did, by STALE_SHARE of a random dealing's (True before any judgment: the first placement
        is wanted early)."""
        if self.reference is None:
            return True
        cpus, before = self.reference[0], self.reference[2 if meets else 1]
        now, chance = self.score.per_event(directed, cpus)
        if np.isnan(now) or np.isnan(chance):
            return False
        return bool(now > (0.0 if np.isnan(before) else before) + STALE_SHARE * chance)

    def _judge(self, window: Window, began: tuple[float, int], stale: bool = False) -> None:
        """Judge the span ``window`` (ticks merged), which ``began`` (s, CLOCK_MONOTONIC ns);
        ``stale``: the placement looked stale on it, and it is judged alone whatever it holds (the
        span before it is of the phase that ended: the two together read as neither, and the
        two-phase program on 2 CPUs waited a judgment more, 0.1-0.15 s, for a span of its own)."""
        from ..patterns import analyze, weak_reading

        self.windows.append(window)
        alone = window.directed()
        recent = [window] if stale or (alone.sum() - np.trace(alone) >= ALONE_EVENTS and
                                       window.watched() >= MIN_WATCHED) else self.windows[-2:]
        t = len(window.tids)
        merged = self.judged = merge_windows(recent)
        directed = alone if merged is window else merged.directed()
        matrix = directed + directed.T
        accesses = merged.accesses
        alive = [k for k, tid in enumerate(window.tids) if tid > 0]
        now_cpus = self.now_cpus = self._where_now(window.tids)
        for k in alive:
            self._own_pinning(k, window.tids[k])
        events = matrix[upper(t)].sum()
        record = {"t": round(window.end_s, 3), "threads": len(alive), "events": round(float(events), 1),
                  "watched": round(merged.watched())}
        # pairs that changed partners are moved to them as any phase change, not released first
        if self.sharing and not contending_pairs(directed, accesses, alive):
            self.unshare_since = self.unshare_since if self.unshare_streak else window.end_s
            self.unshare_streak += 1
        else:
            self.unshare_streak = 0
        # judgments in a row that span RELEASE_WINDOWS - 1 intervals at least (early ones come closer)
        lasted = window.end_s - self.unshare_since >= \
            (RELEASE_WINDOWS - 1) * self.interval * (1 - 0.5 / TICKS_PER_INTERVAL)
        if self.unshare_streak >= RELEASE_WINDOWS and lasted:
            # the pairs pinwise put on one CPU each no longer contend (a phase of private work): two threads
            # on one CPU would take turns at it, so they go back to the OS, and the policy places them
            # from here on as any threads (pairs that change partners move to them as any phase change)
            self.unshare_streak = 0
            released = self._release(window.tids)
            self.placed_tick = self.ticks
            self.streak = 0
            self._record(t=record["t"], decision="released", released=released,
                         why="the pairs that shared a CPU no longer contend")
            self.say(f"pinwise: {window.end_s:.1f} s: the pairs sharing a CPU no longer contend: "
                     f"{released} thread(s) given back to the OS")
            now_cpus = self.now_cpus = self._where_now(window.tids)
        if len(alive) < 2 or events <= 0 or sum(len(w.pairs) for w in recent) == 0:
            self._record(**record, decision="nothing to judge")
            return
        # read as the sampled estimate it is: BComm and the heterogeneity corrected for the noise of
        # the traps it rests on (two far pairs' 8-16 traps at the phase change read BComm 44 % as
        # often as not, and balanced-locality's plans from their halves split a pair: the move
        # waited 0.1-0.3 s)
        info = TraceInfo(backend="sample", sampling={"events": merged.traps()})
        live = np.array(alive)  # the pattern of the threads running, not of every one made (live_targets)
        found = analyze(CommMatrix(matrix[np.ix_(live, live)], accesses[live], info=info), weak=False)
        pattern = found.pattern
        # a phase: a pattern in two judgments in a row (one alone may straddle two phases), which
        # began when the newest window of the first began, or before
        if pattern != self.last_pattern:
            self.pattern_since = began
        elif not self.phases or self.phases[-1][1] != pattern:
            since_s, since_ns = self.pattern_since
            self.phases.append((since_s, pattern))
            self._record(t=round(window.end_s, 3), event="phase", pattern=pattern, since=round(since_s, 3),
                         since_monotonic_ns=since_ns)
        self.last_pattern = pattern
        policy = self.policy or found.policy
        current = self._placement_now(now_cpus)
        contending = contending_pairs(directed, accesses, [k for k in alive if k not in self.left_alone]) or []
        # a thread idle in this span and the last (a creator in join), the second of a contending pair on one
        # CPU (pinwise put it there, or its slot at creation did: a round's last pair) and a thread on its
        # slot since less than an interval (its pair not yet seen contending) crowd no CPU
        seconds = {j for i, j in self.sharing + contending if current[i] is not None and current[i] == current[j]}
        idle = idle_in_each(self.windows[-2:], alive) if len(self.windows) > 1 else set()
        idle |= self.newcomers.young(window.end_s - self.interval)
        crowding = self._stacked(current, [k for k in alive if k not in seconds and k not in idle])
        by_os = [k for k in alive if k not in self.left_alone and k not in self.pinned]
        if not crowding and events >= MIN_EVENTS and not matrix[[k for k in alive if k not in self.left_alone]].any():
            # the threads that share data pin themselves, the others share nothing: no plan is made
            # (hand-pinned: a plan each judgment, CPU time); until threads come or go, none early in the warm-up
            self.streak, self.own_pins = 0, tuple(window.tids)
            self._record(**record, pattern=pattern, policy=policy, decision="stay",
                         why="the threads that share data pin themselves")
            return
        if not by_os and not crowding and events >= MIN_EVENTS and policies.lookup(policy).pins and \
                self.score.cost(matrix, current) == 0:
            # the threads placed cost no hops where they are: no plan can beat that, none is made
            # (a steady program's judgment in a third of the CPU time: pinwise's CPU is the program's)
            record.update(pattern=pattern, policy=policy, cost_new=0.0, cost_now=0.0)
            self._check_paid(directed, current, events, record)
            self.streak = 0
            self._record(**record, decision="stay")
            return
        if not policies.lookup(policy).pins:
            self._record(**record, pattern=pattern, decision=f"{policy}: nothing to place")
            return
        targets = live_targets(policy, matrix, accesses, alive, self.topology, info)[0]
        sharing = self._share_cpus(targets, contending)
        candidate = [targets[k] if k in alive and k not in self.left_alone else current[k] for k in range(t)]
        cost_now, cost_new = self.score.cost(matrix, current), self.score.cost(matrix, candidate)
        if cost_now is not None and crowding:
            # threads crowded on fewer CPUs than the plan would use cost no hops, and take turns:
            # any placement the policy gives (one that spreads them as it must) is better. Pairs
            # pinwise put on one CPU each are costed as they are: when they change partners, the
            # new partners apart cost hops, and a strong gain moves them at once
            cost_now = float("inf")
        now = {"cost_now": None, "crowded": True} if cost_now == float("inf") else {"cost_now": cost_now}
        record.update(pattern=pattern, policy=policy, cost_new=cost_new, **now)  # JSON has no inf: null, flagged
        if sharing:
            record["pairs_sharing_a_cpu"] = [list(pair) for pair in sharing]
        if cost_now is None or cost_new is None or events < MIN_EVENTS:
            self.streak = 0
            self._record(**record, decision="too few events or threads to judge")
            return
        self._check_paid(directed, current, events, record)
        # once placed, threads that are not crowded move again only on MIN_WATCHED watched samples,
        # or on fewer for a plan that costs under FEW_SHARE of the placement (on held-out events too)
        few = bool(self.moves) and cost_now != float("inf") and record["watched"] < MIN_WATCHED
        better = cost_new < (FEW_SHARE if few else 1 - HYSTERESIS) * cost_now and candidate != current
        if better and self._futile(current, record):
            better = False
        if not better and not few and by_os and policy in policies.LOCALITY_POLICIES and cost_new <= cost_now:
            # the OS has these threads where it does by chance (module docstring)
            by_chance = self.score.by_chance(matrix, candidate)
            better = by_chance is not None and cost_new < (1 - HYSTERESIS) * by_chance
            if better:
                record["cost_by_chance"] = by_chance
                if cost_now <= cost_new:  # as good as the plan: pinned where they are, none moved
                    candidate, cost_new = list(current), cost_now
                    record["cost_new"] = cost_new
        crowded = cost_now == float("inf")
        if better and crowded and most_on_one_cpu(candidate, alive, contending) >= \
                most_on_one_cpu(current, alive, contending):
            better = False  # a plan that crowds them as much cures nothing (a pair whose others ended)
        enough = events >= STRONG_EVENTS or (not self.moves and merged.traps() >= STRONG_TRAPS)
        if better and crowded and enough:
            # crowded threads have no cost to beat; a plan under STRONG of its CPUs dealt at random,
            # on held-out events too, is a gain noise does not make
            by_chance = self.score.by_chance(matrix, candidate)
            if by_chance is not None and cost_new < STRONG * by_chance:
                record["cost_by_chance"] = by_chance
        if better and (not crowded or "cost_by_chance" in record):
            # a plan made on half the events must beat the placement on the other half: a plan fitted
            # to noise (six pairs that talk alike, 150 events) looks cheaper on the events it was
            # made from, never on others; threads pinwise placed already move again on a plan that
            # halves the cost there (all-to-all re-placed on 0.63-0.78 in 2 runs of 40)
            held_out = self._held_out(recent, policy, current, alive, "cost_by_chance" in record, sharing)
            record["held_out"] = round(held_out, 3)
            better = crowded or held_out < (FEW_SHARE if few else STRONG if self.moves else 1 - HYSTERESIS)
        if better and self.moves and not crowded:
            better = self._meetings_agree(merged, current, candidate, record) and \
                (not few or self._not_by_chance(recent, merged, current, candidate, record))
        # a gain noise does not make (under STRONG of the cost now, or of chance's) moves at once
        strong = better and enough and \
            cost_new < STRONG * min(cost_now, record.get("cost_by_chance", cost_now)) and \
            (not crowded or record.get("held_out", 1.0) < STRONG)
        self.streak = self.streak + 1 if better else 0
        if better and self.streak == 1:  # the change began in the newest window at the latest
            self.pending_since, self.pending_monotonic = began
        if self.streak < (1 if strong else 2):
            self._record(**record, decision="moving if the next judgment agrees" if better else "stay")
            return
        moved, pinned = self._apply(window.tids, candidate)
        self.placed_tick = self.ticks
        self.streak = 0
        self.sharing = sharing
        if moved == 0 and pinned == 0:  # every thread was already pinned there, or is its own
            self._record(**record, decision="nothing to move")
            return
        # for the log only: the thresholds moved both ways are a dozen readings, CPU time the program loses
        doubt = weak_reading(found.comm, found.metrics, pattern, found.policy)[0] if self.log is not None else ""
        if doubt:
            record["doubt"] = doubt
        # did it pay? (_check_paid, at the next judgment; threads pinned where they ran did not
        # move, and after it too a move waits for a phase change)
        self.paying = (tuple(candidate), self.score.per_event(directed, current)[0])
        self.moves.append(Move(window.end_s, policy, tuple(c if c is not None else -1 for c in candidate), moved,
                               cost_now, cost_new))
        self._record(**record, decision=PLACED[0] if moved else PLACED[1], moved=moved, pinned=pinned,
                     cpus=[c if c is not None else -1 for c in candidate], tids=window.tids,
                     change_seen_at=round(self.pending_since, 3), change_seen_at_monotonic_ns=self.pending_monotonic)
        before = "threads crowded on a CPU" if cost_now == float("inf") else f"cost {cost_now:,.0f}"
        shared = f", {len(sharing)} contending pair(s) sharing a CPU each" if sharing else ""
        in_place = pinned - moved
        stayed = f", {in_place} pinned where the OS had them" if in_place else ""
        self.say(f"pinwise: {window.end_s:.1f} s: {pattern} -> {policy}{shared}: {moved} thread(s) moved{stayed} "
                 f"({before} -> {cost_new:,.0f})")

    def rehearse(self) -> None:
        """The judging stages run once on a planted window (pairs 0-1 and 2-3), nothing moved,
        before the program starts: their first call (lazy imports, the first paths through scipy
        and numpy) took 12 ms of CPU at the first real judgment, while the program ran and waited
        for its placement."""
        from ..patterns import analyze

        pairs = [(a, b, 10.0, 10.0, 10.0) for a, b in ((0, 1), (1, 0), (2, 3), (3, 2))]
        window = Window(0.0, [-1] * 4, np.full(4, 100.0), np.full(4, 100.0), pairs)
        directed = window.directed()
        policy = self.policy or analyze(CommMatrix(directed + directed.T, window.accesses)).policy
        try:
            if policies.lookup(policy).pins:
                self._held_out([window], policy, [min(self.allowed)] * 4, [0, 1, 2, 3], True, [(0, 1), (2, 3)])
        except PinwiseError:
            pass  # a policy that cannot place this planted window: the program's windows say why
        self.rng = np.random.default_rng(0)  # the run's halves drawn as without the rehearsal

    def _held_out(self, recent: list[Window], policy: str, current: list[int | None], alive: list[int],
                  by_chance: bool, sharing: list[tuple[int, int]]) -> float:
        """The events of ``recent`` dealt to two halves at random: the placement made on one half
        (the policy's plan, and those of the span's contending pairs ``sharing`` that the half bears
        out sharing a CPU), scored on the other against where the threads are now (``by_chance``:
        against its CPUs dealt at random), both ways; the larger ratio. Where one L3 is all the
        threads share (a 16-core Xeon), a pair on one CPU is the placement's only gain: a half that
        found no contending pairs of its own on its few watchpoints planned the threads as far
        apart as the OS had them, and read 1.0 (moves 0.1-0.17 s late in 3 runs of 3)."""
        halves = split_window(merge_windows(recent), self.rng)
        ratios = []
        for made, scored in ((halves[0], halves[1]), (halves[1], halves[0])):
            directed = made.directed()
            t = directed.shape[0]
            targets = live_targets(policy, directed + directed.T, made.accesses, alive, self.topology)[0]
            self._share_cpus(targets, partnered(directed, sharing))
            candidate = [targets[k] if k in alive and k not in self.left_alone else current[k] for k in range(t)]
            matrix = scored.matrix()
            reference = self.score.by_chance(matrix, candidate) if by_chance else self.score.cost(matrix, current)
            cost = self.score.cost(matrix, candidate)
            if reference is None or cost is None:
                return float("inf")
            ratios.append(cost / reference if reference > 0 else (1.0 if cost <= 0 else float("inf")))
        return max(ratios)

    def _own_pinning(self, k: int, tid: int) -> set[int] | None:
        """Thread k's affinity now, or None when it is gone or its own (the program, or its user,
        set it: neither every allowed CPU nor what pinwise set), in which case it is left alone
        for the rest of the run, and the log says so once."""
        if k in self.left_alone:
            return None
        try:
            now = os.sched_getaffinity(tid)
        except OSError:
            return None  # the thread ended meanwhile
        if k not in self.pinned and frozenset(now) in self.newcomers.given(k):  # its slot at creation
            self.newcomers.adopt(k, now, self.pinned)
        elif k not in self.pinned and self.newcomers.starting(k) and frozenset(now) in self.newcomers.handed:
            return None  # still starting with its creator's pin of pinwise's, before the library moves it
        expected = self.pinned.get(k)
        if (expected is None and not now >= self.allowed) or (expected is not None and now != expected):
            self.left_alone[k] = (f"its affinity {sorted(now)} was narrowed before --adapt placed it (by the program, "
                                  "taskset or an earlier pinwise pin): left alone" if expected is None else
                                  f"its affinity {sorted(now)} was set by the program or taskset after --adapt placed "
                                  "it: left alone")
            self._record(thread=k, decision="left alone", affinity=sorted(now))
            return None
        return now

    def _apply(self, tids: list[int], cpus: list[int | None]) -> tuple[int, int]:
        """Each thread pinned to its CPU: how many changed CPU, and how many pinwise pinned now
        (those moved, and those it pins where they ran)."""
        moved = pinned = 0
        for k, (tid, cpu) in enumerate(zip(tids, cpus)):
            if tid <= 0 or cpu is None:
                continue
            now = self._own_pinning(k, tid)
            if now is None or now == {cpu}:
                if now is not None:
                    self.pinned[k] = {cpu}
                continue
            ran_there = _current_cpu(tid) == cpu
            try:
                os.sched_setaffinity(tid, {cpu})
            except OSError:
                continue
            self.pinned[k] = {cpu}
            pinned += 1
            moved += not ran_there
        return moved, pinned
