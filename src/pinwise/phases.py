"""Whether the threads of a sampled run change partners part way: a change-point test over its time
blocks.

One matrix for a whole run describes a program that keeps its partners. A program whose pairs swap
half way (tests/programs/phase_pairs.c) sums into a matrix in which every thread has two partners
of equal weight: its pattern is read with confidence (the bootstrap of pinwise.confidence redraws
the time blocks as if their order did not matter), and no one placement serves both halves. The
sampler keeps the traps of each time block apart (``TraceInfo.sampling["blocks"]``), so the order
can be tested:

- **When.** For each split of the blocks into a before and an after (each with at least MIN_SHARE
  of the events), the total variation distance between the two halves' shares of communication per
  pair of threads; the split with the largest is the candidate change.
- **Not chance.** A permutation test: the same largest distance over PERMUTATIONS shuffles of the
  blocks' order (under no change, any order is as likely); p-value (1 + shuffles at least as
  far) / (1 + shuffles), a change when at most ALPHA.
- **That placement cares.** The threads ran in a real program, which starts and ends its threads
  one by one, so the blocks are rarely exchangeable: 25 of 30 sampled traces of the six one-phase
  planted programs that communicate read p <= 0.05 on 2 vCPUs, most splitting off their last
  blocks, where fewer threads are left. What a placement keeps
  together is a matching of partners, so a change is called only where each half's own exact
  matching carries at least PAIRED of its communication and the other half's matching at most
  CROSSED of that: the partners changed, not the amounts (benchmarks/phases.py, an Intel Xeon guest
  of 2 vCPUs: none in 70 sampled traces of the seven planted programs, one in each of 10 of swap).
  A thread may have more partners than one (a neighbour chain: its matching carries about half of
  it), so each half's core is tried first: its heaviest pairs, taken until they carry CORE of its
  communication, no more of them than there are threads (a chain, a star, pairs: a structure a
  placement can follow; a flat all-to-all's core holds most pairs, and says nothing), most of their
  threads in both cores (one pair busy, then another, changed amounts, not partners), and the other
  half's communication inside it at most CROSSED of its own (a neighbour chain that turns into far
  pairs: `pinwise-patterns shift`); the matchings where the cores fail.

The Valgrind tracer keeps its events in blocks of the run's memory accesses (pw_main.c, up to 64
threads): the same test reads them, the change placed in the run's accesses rather than its
seconds (Valgrind runs the threads one at a time, at its own pace). A run of a few blocks cannot
be split: nothing is said.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .comm import CommMatrix
from .mapping.pairing import max_weight_matching
from .metrics import time_block_matrices

PERMUTATIONS = 199
ALPHA = 0.05
#: Each side of a split holds at least this share of the events (the start and end of a run, with
#: threads coming and going, are not a phase).
MIN_SHARE = 0.2
#: Fewer blocks with events, or fewer events, than these: no split is tested.
MIN_BLOCKS = 8
MIN_EVENTS = 100
#: Each half's own matching carries at least this share of its communication ...
PAIRED = 0.6
#: ... and the other half's matching at most this fraction of what its own carries.
CROSSED = 0.25
#: A half's core: its heaviest pairs, taken until they carry this share of its communication.
CORE = 0.8


@dataclass(frozen=True)
class PhaseChange:
    """A change of partners found in a run: ``at_s`` seconds after sampling began (the start of
    the first time block after the change, to within ``block_s``; a Valgrind trace's blocks are of
    accesses: ``at_s`` and ``block_s`` are then shares of the run's accesses, ``unit`` "accesses"), the
    pairs before and after, the share of each half's communication inside its own pairs and inside
    the other half's, and the permutation test's p-value over ``blocks`` time blocks."""

    at_s: float
    block_s: float                  # the length of a time block: the change is found to within one
    blocks: int
    pvalue: float
    before: tuple[tuple[int, int], ...]
    after: tuple[tuple[int, int], ...]
    kept: tuple[float, float]       # before, after: inside their own pairs
    crossed: tuple[float, float]    # before, after: inside the other half's pairs
    kind: str = "pairs"             # pairs (no thread in two of them, before or after) or partners
    patterns: tuple[str, str] = ("", "")  # each half's pattern read alone (pinwise.patterns.classify)
    unit: str = "s"                 # "s" (a sampled run) or "accesses" (a Valgrind trace: shares of them)

    def when(self, block: bool = True) -> str:
        """Where the change came, in words: "1.12 s in", or "48% of the way through the run's
        accesses", with ``block`` to within what."""
        if self.unit == "s":
            return f"{self.at_s:.2f} s in" + (f" (to a block of {self.block_s:g} s)" if block else "")
        return f"{self.at_s:.0%} of the way through the run's accesses" + \
            (f" (to a block of {self.block_s:.0%})" if block else "")

    def text(self) -> str:
        def pairs(found) -> str:
            return " ".join(f"{a}-{b}" for a, b in found)

        read = (f" ({self.patterns[0]} before, {self.patterns[1]} after)" if all(self.patterns) and
                self.patterns[0] != self.patterns[1] else "")
        word = self.kind  # "pairs 0-1 2-3", or "partners 0-1 1-2 2-3" (a core)
        return (f"the threads change partners {self.when()}{read}: {word} "
                f"{pairs(self.before)} carry {self.kept[0]:.0%} of the communication before "
                f"({self.crossed[0]:.0%} inside the later {word}), "
                f"{word} {pairs(self.after)} {self.kept[1]:.0%} after ({self.crossed[1]:.0%} inside the earlier); "
                f"permutation test over {self.blocks} time blocks p={self.pvalue:.3f}: one placement serves one phase "
                "at best, `pinwise run --adapt` places each")

    def to_document(self) -> dict:
        return {"at_s": self.at_s, "block_s": self.block_s, "blocks": self.blocks, "pvalue": self.pvalue,
                "before": [list(p) for p in self.before], "after": [list(p) for p in self.after],
                "kept": list(self.kept), "crossed": list(self.crossed), "kind": self.kind,
                "patterns": list(self.patterns), "unit": self.unit}


def phase_change(comm: CommMatrix, permutations: int = PERMUTATIONS, seed: int = 0) -> PhaseChange | None:
    """The change of partners in ``comm``'s run (module docstring), or None: no change found, or a
    trace without time blocks or with too few to split."""
    if comm.threads < 4:
        return None  # two or three threads have one matching of pairs at most: nothing to change to
    blocks = time_block_matrices(comm)
    if blocks is None:
        return None
    sampling = comm.info.sampling
    try:  # a hand-edited or damaged record says nothing of phases, rather than fail the analysis
        if sampling is not None:
            events, block, start, scale = (int(sampling.get("events", 0)), int(sampling["block_ns"]),
                                           int(sampling.get("blocks_from_ns", 0)), 1e9)
        else:  # exact counts, in blocks of accesses: where in the run, as a share of its accesses
            block, start = int(comm.info.time_blocks["accesses"]), 0
            events, scale = int(sum(np.triu(m, 1).sum() for m in blocks)), max(comm.info.total_accesses, 1)
    except (KeyError, TypeError, ValueError):
        return None
    index = [k for k, found in enumerate(blocks) if found.any()]
    if len(index) < MIN_BLOCKS or events < MIN_EVENTS or block <= 0:
        return None
    upper = np.triu_indices(comm.threads, 1)
    shares = np.array([blocks[k][upper] for k in index])
    shares = shares[:, shares.sum(axis=0) > 0]  # the pairs that met: at most the events, whatever the threads
    distance, split = _largest_distance(shares)
    if split is None:
        return None
    rng = np.random.default_rng(seed)
    # a shuffle as far apart as the run, to rounding (two perfect separations differ in the last bits)
    beyond = sum(_largest_distance(shares[rng.permutation(len(shares))])[0] >= distance - 1e-9
                 for _ in range(permutations))
    pvalue = (1 + beyond) / (1 + permutations)
    if pvalue > ALPHA:
        return None
    before, after = sum(blocks[k] for k in index[:split]), sum(blocks[k] for k in index[split:])
    for found in (_core, _pairs):  # the cores say more (a chain's every link); the matchings where they fail
        pairs_before, pairs_after = found(before), found(after)
        kept = (_inside(before, pairs_before), _inside(after, pairs_after))
        crossed = (_inside(before, pairs_after), _inside(after, pairs_before))
        # a core carries CORE of its own half by construction, and is a structure where it has a pair
        # for each thread at most and where most of its threads are the other core's too (not one pair
        # busy, then another: their amounts changed, not their partners); a matching is one where it
        # carries PAIRED
        if found is _core:
            threads = [{t for pair in pairs for t in pair} for pairs in (pairs_before, pairs_after)]
            enough = max(len(pairs_before), len(pairs_after)) <= comm.threads and \
                len(threads[0] & threads[1]) >= 0.5 * len(threads[0] | threads[1])
        else:
            enough = min(kept) >= PAIRED
        if enough and crossed[0] <= CROSSED * kept[0] and crossed[1] <= CROSSED * kept[1]:
            disjoint = all(len({t for pair in pairs for t in pair}) == 2 * len(pairs)
                           for pairs in (pairs_before, pairs_after))
            return PhaseChange(round((start + index[split] * block) / scale, 3), round(block / scale, 3),
                               len(index), pvalue, pairs_before, pairs_after, kept, crossed,
                               "pairs" if disjoint else "partners", (_pattern(before), _pattern(after)),
                               "s" if sampling is not None else "accesses")
    return None


def _largest_distance(shares: np.ndarray) -> tuple[float, int | None]:
    """The largest total variation distance between the blocks before and after a split, over the
    splits that leave MIN_SHARE of the events on each side, and the first block after it."""
    running = np.cumsum(shares, axis=0)[:-1]
    events = running.sum(axis=1)
    total = float(shares.sum())
    allowed = (events >= MIN_SHARE * total) & (total - events >= MIN_SHARE * total)
    if not allowed.any():
        return 0.0, None
    first, rest = running[allowed], shares.sum(axis=0) - running[allowed]
    distance = 0.5 * np.abs(first / events[allowed, None] - rest / (total - events[allowed])[:, None]).sum(axis=1)
    best = int(np.argmax(distance))
    return float(distance[best]), int(np.flatnonzero(allowed)[best]) + 1


def _pairs(matrix: np.ndarray) -> tuple[tuple[int, int], ...]:
    """The exact maximum-weight matching's pairs that communicate."""
    return tuple(sorted((int(g[0]), int(g[1])) for g in max_weight_matching(matrix)
                        if len(g) == 2 and matrix[g[0], g[1]] > 0))


def _core(matrix: np.ndarray) -> tuple[tuple[int, int], ...]:
    """The heaviest pairs of ``matrix``, taken until they carry CORE of its communication."""
    a, b = np.triu_indices(matrix.shape[0], 1)
    weights = matrix[a, b]
    order = np.argsort(-weights, kind="stable")
    total = float(weights.sum())
    taken = int(np.searchsorted(np.cumsum(weights[order]), CORE * total - 1e-9 * total)) + 1
    return tuple(sorted((int(a[k]), int(b[k])) for k in order[:taken] if weights[k] > 0))


def _pattern(matrix: np.ndarray) -> str:
    """The pattern of one half read alone, as an exact matrix (its shares, not its noise)."""
    from .metrics import metrics
    from .patterns import classify

    half = CommMatrix(matrix)
    return classify(half, metrics(half))[0]


def _inside(matrix: np.ndarray, pairs) -> float:
    """The share of ``matrix``'s communication between the threads of ``pairs``."""
    total = float(np.triu(matrix, 1).sum())
    return sum(float(matrix[a, b]) for a, b in pairs) / total if total > 0 else 0.0
