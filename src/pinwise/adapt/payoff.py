"""Whether a placement paid, and whether threads placed before may move again (:class:`Payoff`, a
part of :class:`~pinwise.adapt.decide.Adapter`): on fewer CPUs than threads, what the sampler sees
follows the placement, so a move is checked against the events seen after it before another may
follow, and a further move against other samples (the meetings) and against chance (the traps
seen since under the same placement)."""

from __future__ import annotations

import numpy as np

from .limits import ALONE_EVENTS, CHANCE, HISTORY_SPANS, HISTORY_TRAPS, HYSTERESIS, PAID_EVENTS, STALE_SHARE, \
    STRONG_EVENTS
from .windows import Window, binomial_tail, traps_by_pair


class Payoff:
    """The Adapter's checks of its last move and of a further one: its attributes ``paying``,
    ``paid_by``, ``futile``, ``stale_in_a_row``, ``windows`` (the spans judged), ``moves`` and its
    scorer ``score`` (set in Adapter.__init__)."""

    def _check_paid(self, directed: np.ndarray, current: list[int | None], events: float, record: dict) -> None:
        """Once PAID_EVENTS events are seen after a placement (the threads still where it put
        them): whether it lowered the distance the communication covers per event. On fewer
        CPUs than threads, threads that share a CPU run in turns and are seen to talk less than
        those that run side by side, so what the sampler sees follows the placement: a move fitted
        to it finds the threads now apart talking most, and another move would follow. A move
        that did not pay makes the next ones wait for a phase change (:meth:`_futile`): until two
        judgments in a row find the placement stale (STALE_SHARE) against what it left."""
        if self.futile is not None and tuple(current) == self.futile[0] and events >= ALONE_EVENTS:
            now, chance = self.score.per_event(directed, current)
            if now > self.futile[1] + STALE_SHARE * chance:
                self.stale_in_a_row += 1
            elif not np.isnan(now):  # what is seen drifts towards the threads apart: the reference follows
                self.futile, self.stale_in_a_row = (self.futile[0], max(self.futile[1], now)), 0
            if self.stale_in_a_row >= 2:
                self.futile, self.stale_in_a_row = None, 0
        if self.paying is None:
            return
        if tuple(current) != self.paying[0]:  # the threads are elsewhere now: nothing to measure it by
            self.paying = self.paid_by = None
            return
        if self.paid_by is None:
            self.paid_by = directed.copy()
        else:
            seen = np.zeros((max(len(directed), len(self.paid_by)),) * 2)
            for part in (self.paid_by, directed):
                seen[:len(part), :len(part)] += part
            self.paid_by = seen
        if self.paid_by.sum() - np.trace(self.paid_by) < PAID_EVENTS:
            return
        before, after = self.paying[1], self.score.per_event(self.paid_by, current)[0]
        self.paying = self.paid_by = None
        if not np.isnan(before) and not np.isnan(after) and after > (1 - HYSTERESIS) * before:
            self.futile, self.stale_in_a_row = (tuple(current), after), 0
            record["futile"] = f"the last placement left {after:.2f} hops per event (before it {before:.2f})"

    def _futile(self, current: list[int | None], record: dict) -> bool:
        """Whether a move is to wait: whether the last one paid is not known yet (PAID_EVENTS), or
        it did not pay (:meth:`_check_paid`), the threads are where it put them, and the placement
        has not looked stale since (STALE_SHARE, in two judgments in a row: a phase change, not one
        judgment's noise)."""
        if self.paying is not None and tuple(current) == self.paying[0]:
            record.setdefault("futile", "whether the last placement lowered the hops per event is not known yet")
            return True
        if self.futile is None or tuple(current) != self.futile[0]:
            self.futile = None
            return False
        record.setdefault("futile", "the last placement did not lower the hops per event: moves wait for a phase change")
        return True

    def _meetings_agree(self, span: Window, current: list[int | None], candidate: list[int | None],
                        record: dict) -> bool:
        """Whether threads placed before may move again as the watchpoints say: the move must also
        cost the span's meetings (Window.met) a fifth less (HYSTERESIS). Meetings rest on other
        samples than the watched ones (every clock sample of both threads), so a plan fitted to
        the watched samples' noise finds no support there (all-to-all, 4 threads on 2 CPUs, 4.4 s
        runs: placed three times in 1 of 3 runs; a re-placement on a held-out 0.47 refused at
        0.81). They share the clock's bias, though (samples fall on slow accesses, and a line
        another CPU wrote last is slow), so threads whose placement shapes what is sampled can
        still move again (one run of 6: meetings at 0.375). Under STRONG_EVENTS: no say."""
        met = span.met()
        met = met + met.T
        now, new = self.score.cost(met, current), self.score.cost(met, candidate)
        if met.sum() / 2 < STRONG_EVENTS or now is None or new is None:
            return True
        record["meetings"] = round(new / now, 3) if now > 0 else "none apart"
        return new < (1 - HYSTERESIS) * now

    def _not_by_chance(self, recent: list[Window], span: Window, current: list[int | None],
                       candidate: list[int | None], record: dict) -> bool:
        """Whether a further move on fewer than MIN_WATCHED watched samples (the FEW_SHARE rule,
        made for pairs that swap partners) rests on a change: the spans judged since the last move
        (the same placement, so the same sampling bias: threads on one CPU are seen together less)
        give each pair's share of the traps, and the chance that at least as many of the span's
        traps fall on the pairs the move brings closer must be under CHANCE. Pairs that swap
        partners send every trap to pairs seen with few before; all-to-all threads' traps land on
        the two pairs of one matching by chance now and then (4 threads on 2 CPUs: 11 watched
        samples, re-placed at 0.0 of the cost on both halves and 0.4 of the meetings, in 1 run of
        15-40). Under HISTORY_TRAPS seen before: no say."""
        since = self.moves[-1].at_s
        history = [w for w in self.windows[:len(self.windows) - len(recent)] if w.end_s > since][-HISTORY_SPANS:]
        before = {}
        for w in history:
            for pair, traps in traps_by_pair(w).items():
                before[pair] = before.get(pair, 0) + traps
        total = sum(before.values())
        if total < HISTORY_TRAPS:
            return True
        closer = self.score.closer_pairs(current, candidate)
        share = sum(traps for pair, traps in before.items() if pair in closer) / total
        now = traps_by_pair(span)
        chance = binomial_tail(sum(now.values()), sum(traps for pair, traps in now.items() if pair in closer), share)
        record["chance"] = float(f"{chance:.2g}")
        return chance < CHANCE
