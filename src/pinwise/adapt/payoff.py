"""Whether a placement paid (:class:`Payoff`, a part of :class:`~pinwise.adapt.decide.Adapter`):
on fewer CPUs than threads, what the sampler sees follows the placement, so a move is checked
against the events seen after it before another may follow."""

from __future__ import annotations

import numpy as np

from .limits import ALONE_EVENTS, HYSTERESIS, PAID_EVENTS, STALE_SHARE


class Payoff:
    """The Adapter's checks of its last move: its attributes ``paying``, ``paid_by``, ``futile``,
    ``stale_in_a_row`` and its scorer ``score`` (set in Adapter.__init__)."""

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
