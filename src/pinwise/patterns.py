"""Naming the pattern of the papers a communication matrix resembles, and recommending a mapping
policy from its metrics (Diener et al., section 4). The metrics themselves: :mod:`pinwise.metrics`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .comm import CommMatrix
from .metrics import Metrics, communication, metrics

#: Thresholds of the recommendation (documented in the README).
HETEROGENEITY_HIGH = 300.0   # off-diagonal HComm on the 0..100 scale (max 2500)
BCOMM_HIGH = 30.0            # percent
COMM_SHARE_LOW = 0.01        # communication events per memory access


@dataclass(frozen=True)
class Analysis:
    metrics: Metrics
    pattern: str
    pattern_reason: str
    policy: str
    reason: str


def _band(m: np.ndarray, offset: int) -> float:
    t = m.shape[0]
    return float(sum(m[i, j] for i in range(t) for j in range(t) if abs(i - j) == offset))


def classify(comm: CommMatrix, found: Metrics) -> tuple[str, str]:
    """The pattern of the papers the matrix looks like, with the evidence."""
    m = communication(comm.matrix)
    t = m.shape[0]
    total = m.sum()
    if total <= 0 or (found.comm_share is not None and found.comm_share < COMM_SHARE_LOW):
        share = "no communication" if total <= 0 else f"{found.comm_share:.2%} of accesses communicate"
        return "none", f"{share} (like EP: private data only)"
    row = m.sum(axis=1)
    master = int(np.argmax(row))
    if t >= 3 and row[master] / total >= 0.4:
        return "master/reduction", f"thread {master} takes part in {row[master] / total:.0%} of all communication"
    off = m[~np.eye(t, dtype=bool)]
    if t >= 3 and off.mean() > 0 and off.std() / off.mean() < 0.5:
        return "all-to-all", f"every pair communicates about as much (CV {off.std() / off.mean():.2f}, like swaptions)"
    if t >= 4 and t % 2 == 0 and _band(m, t // 2) / total >= 0.5:
        return "far pairs", f"{_band(m, t // 2) / total:.0%} of communication is between i and i+{t // 2} (like NPB LU)"
    if t >= 2:
        from .mapping.pairing import max_weight_matching

        paired = sum(m[g[0], g[1]] for g in max_weight_matching(m) if len(g) == 2) * 2
        if t <= 3 or paired / total >= 0.7:
            return "pairs", f"each thread has one partner: a matching carries {paired / total:.0%} of communication"
    if t >= 3 and _band(m, 1) / total >= 0.5:
        # A pipeline is a chain with one busy stage: the work (instructions) is imbalanced, not only
        # the communication, which the ends of any chain make uneven.
        busy = found.load_balance >= BCOMM_HIGH if found.load_balance is not None else found.bcomm >= 2 * BCOMM_HIGH
        if busy:
            return "pipeline", (f"{_band(m, 1) / total:.0%} between neighbours and one stage works harder (load "
                                f"imbalance {found.load_balance or 0:.0f} %): stages handing data on (like ferret)")
        return "neighbour", f"{_band(m, 1) / total:.0%} of communication is between i and i+1 (like NPB UA)"
    if found.heterogeneity >= HETEROGENEITY_HIGH:
        return "clustered", "groups of threads communicate mostly among themselves"
    return "irregular", "no pattern of the papers"


def recommend(found: Metrics, pattern: str) -> tuple[str, str]:
    """High heterogeneity -> locality; high BComm -> balance; both -> balanced-locality;
    little communication -> scatter (Diener et al., section 4)."""
    if pattern == "none":
        return "scatter", "threads hardly communicate: spread them so each gets more cache and bandwidth"
    hetero = found.heterogeneity >= HETEROGENEITY_HIGH and pattern not in ("all-to-all", "master/reduction")
    imbalanced = found.bcomm >= BCOMM_HIGH
    if hetero and imbalanced:
        return "balanced-locality", (f"groups communicate (heterogeneity {found.heterogeneity:.0f}) but unevenly "
                                     f"(BComm {found.bcomm:.0f}): keep groups close without piling load on one cache")
    if hetero:
        return "locality", f"threads communicate in groups (heterogeneity {found.heterogeneity:.0f}): place them close"
    if imbalanced:
        return "balance", (f"communication is imbalanced (BComm {found.bcomm:.0f}) with no groups to exploit: "
                           "spread the heavy communicators")
    return "scatter", "communication is flat: no placement improves locality, so spread threads for cache capacity"


def analyze(comm: CommMatrix) -> Analysis:
    """The metrics, the pattern and the recommended policy of ``comm``."""
    found = metrics(comm)
    pattern, evidence = classify(comm, found)
    policy, reason = recommend(found, pattern)
    return Analysis(found, pattern, evidence, policy, reason)
