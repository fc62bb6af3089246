"""The sampler's stream of windows (``pinwise-sample --stream``, pw_sample.c's emit_window), read
while the program runs: one record per window, with per thread its address samples and those
that could be watched, per ordered pair with news its offers, arms and weighted hits, and its
meetings (samples on lines the other thread's samples fell on lately)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np


@dataclass
class Window:
    """One window record of the sampler's stream (pw_sample.c, emit_window)."""

    end_s: float                        # since the sampler started
    tids: list[int]                     # -1 for a thread that has ended
    accesses: np.ndarray
    eligible: np.ndarray
    pairs: list[tuple[int, int, float, float, float]]   # a, b, offered, armed, weighted hits
    monotonic_ns: int = 0               # its end on CLOCK_MONOTONIC (what programs log with)
    meets: list[tuple[int, int, float]] = field(default_factory=list)  # a, b, a's samples on b's lines

    def directed(self) -> np.ndarray:
        """D[a][b]: the estimated address samples of thread a whose line thread b touched within
        the window (the sampler's estimate, ``estimate()`` in pw_sample.c)."""
        t = len(self.tids)
        d = np.zeros((t, t))
        if not self.pairs:
            return d
        columns = np.array(self.pairs, dtype=float)
        a, b = columns[:, 0].astype(np.int64), columns[:, 1].astype(np.int64)
        offered, armed, hits = columns[:, 2], columns[:, 3], columns[:, 4]
        keep = (hits > 0) & (armed > 0) & (self.eligible[a] > 0)
        a, b = a[keep], b[keep]
        np.add.at(d, (a, b), hits[keep] * offered[keep] / armed[keep] * self.accesses[a] / self.eligible[a])
        return d

    def met(self) -> np.ndarray:
        """M[a][b]: thread a's address samples that fell on a line one of thread b's samples fell on
        within ten windows (the sampler's bulletin board): who touches the same lines as whom, at
        the clock's rate and with no watchpoint, but weighed by both threads' samples, so not the
        events' estimate :meth:`directed` is."""
        t = len(self.tids)
        m = np.zeros((t, t))
        if self.meets:
            columns = np.array(self.meets, dtype=float)
            a, b = columns[:, 0].astype(np.int64), columns[:, 1].astype(np.int64)
            keep = (a < t) & (b < t)
            np.add.at(m, (a[keep], b[keep]), columns[keep, 2])
        return m

    def watched(self) -> float:
        """The watchpoints armed in the window: how many samples its estimate rests on."""
        return float(sum(pair[3] for pair in self.pairs))

    def traps(self) -> int:
        """The watchpoint traps its estimate rests on (:func:`_traps` per pair): what the sampling
        noise of its matrix counts as (:func:`pinwise.metrics.sampling_noise`)."""
        return sum(_traps(armed, hits) for _, _, _, armed, hits in self.pairs)

    def matrix(self) -> np.ndarray:
        """The window's communication matrix, estimated as the sampler estimates the whole run's."""
        d = self.directed()
        return d + d.T


def merge_windows(windows: list[Window]) -> Window:
    """Windows in a row as one: their counts summed, each pair's offers, arms and hits too (a thread
    that appeared meanwhile has none in the earlier ones), the last one's end and threads.

    A pair's share of watched samples that trapped is estimated over the whole span, not window by
    window: where the token bucket arms a pair once in several windows, a window that offered it
    samples but armed none estimates 0 and one whose hit came from an arm of the window before
    cannot be weighed, so estimates summed window by window fall short by the chance that a pair is
    armed in a window (a third with 4 busy threads on 16 cores at 100 traps a second)."""
    if len(windows) == 1:
        return windows[0]
    last = windows[-1]
    accesses, eligible = np.zeros(len(last.tids)), np.zeros(len(last.tids))
    pairs: dict[tuple[int, int], list[float]] = {}
    meets: dict[tuple[int, int], float] = {}
    for w in windows:
        for a, b, n in w.meets:
            meets[a, b] = meets.get((a, b), 0.0) + n
        accesses[:len(w.accesses)] += w.accesses
        eligible[:len(w.eligible)] += w.eligible
        for a, b, offered, armed, hits in w.pairs:
            counts = pairs.setdefault((a, b), [0.0, 0.0, 0.0])
            counts[0] += offered
            counts[1] += armed
            counts[2] += hits
    return Window(last.end_s, list(last.tids), accesses, eligible,
                  [(a, b, *counts) for (a, b), counts in pairs.items()], last.monotonic_ns,
                  [(a, b, n) for (a, b), n in meets.items()])


def _traps(armed: float, hits: float) -> int:
    """A pair's traps from its arms and weighted hits (each hit weighs about one trap, and a pair
    traps at most as often as it was armed, once at least when it hit)."""
    return min(int(round(armed)), max(1 if hits > 0 else 0, int(round(hits))))


def traps_by_pair(window: Window) -> dict[tuple[int, int], int]:
    """The watchpoint traps of ``window`` (:func:`_traps`) per unordered pair of threads (a, b), a < b."""
    counts: dict[tuple[int, int], int] = {}
    for a, b, _, armed, hits in window.pairs:
        pair = (min(a, b), max(a, b))
        counts[pair] = counts.get(pair, 0) + _traps(armed, hits)
    return counts


def binomial_tail(n: int, k: int, p: float) -> float:
    """P(X >= k) for X of n draws that each succeed with chance p (in logarithms: n may be thousands)."""
    if k <= 0 or p >= 1:
        return 1.0
    if p <= 0 or k > n:
        return 0.0
    log_p, log_q = math.log(p), math.log1p(-p)
    terms = (math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * log_p + (n - i) * log_q
             for i in range(k, n + 1))
    return min(1.0, sum(math.exp(term) for term in terms))


def split_window(window: Window, rng: np.random.Generator) -> tuple[Window, Window]:
    """The window's watched samples dealt to two halves at random, as two windows, each watched
    sample with what became of it (a pair's arms split at random, its traps among them as they
    fall: a pair whose every watchpoint trapped shows that in both halves), its offers and each
    thread's address samples halved: what one half shows and the other does not is sampling
    noise. A pair's weighted hits are its traps times the weight of each, and it trapped at most
    as often as it was armed."""
    first, second = [], []
    for a, b, offered, armed, hits in window.pairs:
        arms = int(round(armed))
        if arms < 1:  # nothing watched here (a hit whose arm came before the span)
            kept = float(rng.binomial(1, 0.5)) * hits
            first.append((a, b, offered / 2, armed / 2, kept))
            second.append((a, b, offered / 2, armed / 2, hits - kept))
            continue
        traps = _traps(armed, hits)
        weight = hits / traps if traps else 0.0
        arms_kept = int(rng.binomial(arms, 0.5))
        traps_kept = int(rng.hypergeometric(traps, arms - traps, arms_kept)) if arms_kept else 0
        first.append((a, b, offered / 2, float(arms_kept), traps_kept * weight))
        second.append((a, b, offered / 2, float(arms - arms_kept), (traps - traps_kept) * weight))
    halves = tuple(Window(window.end_s, list(window.tids), window.accesses / 2, window.eligible / 2, pairs,
                          window.monotonic_ns) for pairs in (first, second))
    return halves[0], halves[1]


def read_windows(text: str) -> tuple[list[Window], int]:
    """The complete window records in ``text`` and how many characters they took (a record the
    sampler is still writing is left for the next read)."""
    windows, used, fields = [], 0, {}
    at = 0
    for line in text.splitlines(keepends=True):
        at += len(line)
        if not line.endswith("\n"):
            break
        key, _, rest = line.strip().partition(" ")
        if key == "end":
            try:
                tids = [int(v) for v in fields["tids"].split()]
                numbers = fields.get("pairs", "").split()
                pairs = [(int(numbers[i]), int(numbers[i + 1]), float(numbers[i + 2]), float(numbers[i + 3]),
                          float(numbers[i + 4])) for i in range(0, len(numbers) - 4, 5)]
                numbers = fields.get("meets", "").split()
                meets = [(int(numbers[i]), int(numbers[i + 1]), float(numbers[i + 2]))
                         for i in range(0, len(numbers) - 2, 3)]
                stamps = [int(v) for v in fields["window"].split()]
                windows.append(Window(stamps[0] / 1e9, tids, np.array(fields["accv"].split(), dtype=float),
                                      np.array(fields["eligible"].split(), dtype=float), pairs,
                                      stamps[2] if len(stamps) > 2 else 0, meets))
            except (KeyError, ValueError, IndexError):
                pass  # a damaged record: skipped, the next one counts
            fields = {}
            used = at
        else:
            fields[key] = rest
    return windows, used
