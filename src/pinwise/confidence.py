"""How sure a sampled matrix's pattern is: a bootstrap over its time blocks.

A matrix from ``pinwise trace --backend sample`` (:mod:`pinwise.sample`) is an estimate from a few
hundred or thousand watchpoint traps. The sampler keeps the traps of each time block apart
(``TraceInfo.sampling["blocks"]``: weighted hits per ordered pair of threads), so the estimate can
be redrawn: resample the blocks with replacement (Efron's bootstrap; blocks rather than single
traps, because traps close in time are not independent), rebuild the matrix, classify it again.
The share of redraws that give the pattern (and the policy) of the whole matrix says how much the
verdict rests on the luck of the draw. With fewer than MIN_BLOCKS blocks, or fewer than
MIN_EVENTS traps in all, it cannot say: a few dozen traps spread over few blocks redraw into the
same handful of pairs every time, and agree on whatever those pairs look like (a 4-thread stencil
on 2 CPUs, 8 traps on two of its three boundaries: "pairs" in 94 % of redraws). The same holds for
the traps left once the analysis sets spin-waits aside: a redraw scales each pair by the share the
spin-waits left it, so it is only as sure as what is left (an OpenMP stencil spinning at its
barrier: 9 traps in 10 on the barrier's lines, a "master/reduction" in the rest that 97 % of the
redraws agreed on).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .comm import CommMatrix
from .metrics import block_matrices
from .sample import unwatched_threads

RESAMPLES = 200
MIN_BLOCKS = 4
#: Fewer traps than this in the whole sample: too few to be sure of any pattern.
MIN_EVENTS = 100
#: Below this share of redraws agreeing, a pattern is called uncertain.
SURE = 0.9


#: A sampled matrix whose samples fell at least this share in code with no function table (decoded
#: at the instruction pointer only, which misses the slow access the clock samples behind it) did
#: not see what the threads share: nothing is said about its pattern.
BLIND_SHARE = 0.5
#: Fewer decoded samples than this say nothing of the program's code (a run of a few milliseconds
#: is sampled in the dynamic loader's start-up, if at all): no blind verdict stands on them.
BLIND_MIN_SAMPLES = 20


def blind(sampling: dict, remedy: str = "trace it with --backend valgrind") -> str | None:
    """Why a sampled matrix says nothing when BLIND_SHARE of the samples it decoded (at least
    BLIND_MIN_SAMPLES; ``sampling``:
    a comm file's record, or the facts of an adaptive run) fell in code with no function table, in
    words with ``remedy`` (the trace's warning, the analysis's reason, --adapt's summary); else None."""
    decoded, untabled = int(sampling.get("decoded_samples", 0)), int(sampling.get("untabled", 0))
    if decoded < BLIND_MIN_SAMPLES or untabled < BLIND_SHARE * decoded:
        return None
    return (f"{untabled:,} of {decoded:,} samples decoded ({untabled / decoded:.0%}) fell in code with no function "
            "table (a stripped, statically linked program, or code made at run time), decoded at the instruction "
            f"pointer only, which misses the slow access behind it: what the threads share is not measured; {remedy}")


@dataclass(frozen=True)
class PatternConfidence:
    """The bootstrap's verdict on a sampled matrix: the share of ``resamples`` redraws of its
    ``blocks`` time blocks that gave the same pattern (and policy) as the whole matrix, or None
    with ``reason`` when it cannot say."""

    pattern_agreement: float | None
    policy_agreement: float | None
    resamples: int
    blocks: int
    events: int
    reason: str

    @property
    def sure(self) -> bool:
        return self.pattern_agreement is not None and self.pattern_agreement >= SURE

    def to_document(self) -> dict:
        return {"pattern_agreement": self.pattern_agreement, "policy_agreement": self.policy_agreement,
                "resamples": self.resamples, "blocks": self.blocks, "events": self.events, "reason": self.reason}


def pattern_confidence(comm: CommMatrix, analysis, resamples: int = RESAMPLES, seed: int = 0) -> PatternConfidence | None:
    """The bootstrap of a sampled matrix (module docstring); None for a traced (exact) one.
    ``analysis`` is the :class:`pinwise.patterns.Analysis` of ``comm``."""
    if comm.info.backend != "sample":
        return None
    from .metrics import metrics
    from .patterns import classify, recommend

    events = int((comm.info.sampling or {}).get("events", 0))
    unseen = blind(comm.info.sampling or {})
    if unseen:
        return PatternConfidence(None, None, 0, 0, events, unseen)
    blocks = block_matrices(comm)
    if blocks is None:
        return PatternConfidence(None, None, 0, 0, events, "the file holds no time blocks of the sample")
    used = [m for m in blocks if m.any()]
    busy = unwatched_threads(comm)
    if busy and len(used) < MIN_BLOCKS:
        return PatternConfidence(None, None, 0, len(used), events,
                                 f"threads {', '.join(map(str, busy))} switch so often (a yielding spin-wait) that "
                                 "watchpoints on them were refused or rationed: what they share is not measured")
    if len(used) < MIN_BLOCKS:
        return PatternConfidence(None, None, 0, len(used), events,
                                 f"only {len(used)} time block(s) saw events (at least {MIN_BLOCKS} needed): sample "
                                 "longer or at a higher --watch-rate")
    if events < MIN_EVENTS:
        return PatternConfidence(None, None, 0, len(used), events,
                                 f"only {events:,} event(s) sampled (at least {MIN_EVENTS} needed to be sure of a "
                                 "pattern): sample longer or at a higher --watch-rate")
    whole = sum(used)
    # the analysis took spin-waits out: each redraw loses the same share of each pair
    with np.errstate(divide="ignore", invalid="ignore"):
        kept = np.where(whole > 0, np.asarray(analysis.comm.matrix) / whole, 0.0) if analysis.comm is not None else 1.0
    kept = np.clip(np.nan_to_num(kept, nan=0.0, posinf=0.0), 0.0, 1.0) if not np.isscalar(kept) else kept
    left = events * float((whole * kept).sum() / whole.sum()) if whole.sum() > 0 else 0.0
    if left < MIN_EVENTS:
        # the pattern rests on what the spin-waits leave, which the redraws below would treat as
        # precise as the whole sample (a stencil's barrier: 9 traps in 10, a master in the rest)
        spins = len(analysis.spin_lines)
        return PatternConfidence(None, None, 0, len(used), events,
                                 f"about {left:,.0f} of the {events:,} event(s) sampled are left once the "
                                 f"spin-wait{'s are' if spins > 1 else ' is'} set aside (at least {MIN_EVENTS} needed "
                                 "to be sure of a pattern): sample longer or at a higher --watch-rate")
    base_policy, _ = recommend(analysis.metrics, analysis.pattern)  # before a topology's cost check
    rng = np.random.default_rng(seed)
    stack = np.stack(used)
    same_pattern = same_policy = 0
    for _ in range(resamples):
        counts = np.bincount(rng.integers(0, len(used), len(used)), minlength=len(used))
        matrix = np.tensordot(counts.astype(float), stack, axes=1) * kept
        redrawn = replace(analysis.comm if analysis.comm is not None else comm, matrix=matrix)
        found = metrics(redrawn)
        pattern, _ = classify(redrawn, found)
        policy, _ = recommend(found, pattern)
        same_pattern += pattern == analysis.pattern
        same_policy += policy == base_policy
    return PatternConfidence(same_pattern / resamples, same_policy / resamples, resamples, len(used), events,
                             f"{same_pattern / resamples:.0%} of {resamples} redraws of the {len(used)} time blocks "
                             f"give {analysis.pattern} ({events:,} events sampled)")
