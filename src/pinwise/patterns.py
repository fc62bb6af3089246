"""Naming the pattern of the papers a communication matrix resembles, and recommending a mapping
policy from its metrics (Diener et al., section 4). The metrics themselves: :mod:`pinwise.metrics`.

The classifier compares the matrix with the structures of the papers' patterns, each a set of
thread pairs: a matching (pairs), i with i+T/2 (far pairs), i with i+1 and the ring's wrap
(neighbour), one thread with all (master). A structure of k of the P = T(T-1)/2 pairs carries the
share k/P of a flat matrix's communication; its *lift* is how far the matrix's share s on it goes
from that towards all of it, (s - k/P) / (1 - k/P): 0 on a flat matrix, 1 when the structure holds
everything. The structure with the highest lift names the pattern when the lift is at least
STRUCTURE_LIFT; within LIFT_TIE of the best, the structure with fewer pairs wins (a pairs matrix
also lies on the neighbour band). A chain whose busiest inner stage (by instructions executed
while other threads ran) works at least BCOMM_HIGH % more than the median thread is a pipeline
(a busy end is not: thread 0's serial set-up, say). Without a structure, a matrix whose pairs all
communicate about as much is all-to-all. Validated on :func:`labelled_corpus`
(``benchmarks/classifier.py`` prints the accuracy).

Spin-waits: under Valgrind one thread runs at a time, so a thread waiting on a flag reads it
through whole time slices, and the flag's line can carry most of the events. A hot line (the
tracer's records, :class:`pinwise.comm.HotLine`) carrying at least SPIN_SHARE of all events and
read at least SPIN_READS_PER_WRITE times per write is a spin-wait: :func:`analyze` names it and
characterises the matrix without its events.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .comm import CommMatrix, HotLine
from .errors import PinwiseError
from .metrics import Metrics, communication, metrics

#: Thresholds of the recommendation (documented in the README).
HETEROGENEITY_HIGH = 300.0   # off-diagonal HComm on the 0..100 scale (max 2500)
BCOMM_HIGH = 30.0            # percent
COMM_SHARE_LOW = 0.01        # communication events per memory access
#: Thresholds of the classifier (module docstring).
STRUCTURE_LIFT = 0.5
LIFT_TIE = 0.1
FLAT_CV = 0.5                # coefficient of variation of the pairs below which communication is flat
#: A spin-wait line (module docstring).
SPIN_SHARE = 0.25
SPIN_READS_PER_WRITE = 20
#: Policies that aim at locality: the cost model judges them.
LOCALITY_POLICIES = ("locality", "balanced-locality", "compact")
#: How much above compact's cost a recommendation may be before it is replaced (rounding).
COST_TOLERANCE = 1.02

PATTERNS = ("none", "pairs", "far pairs", "neighbour", "pipeline", "master/reduction", "all-to-all", "clustered",
            "irregular")


@dataclass(frozen=True)
class Analysis:
    metrics: Metrics
    pattern: str
    pattern_reason: str
    policy: str
    reason: str
    #: The matrix the metrics and the pattern are of: the traced one without its spin-waits.
    comm: CommMatrix | None = None
    #: Hot lines found to be spin-waits, and every hot line, hottest first.
    spin_lines: tuple[HotLine, ...] = ()
    hot_lines: tuple[HotLine, ...] = ()
    #: With a topology: (policy, cost) of the recommended policy and of compact, and the topology's name.
    costs: dict | None = None
    #: Why no placement may be recommended from this matrix: the trace missed part of the program's
    #: work (TraceInfo.unseen). ``policy`` is then only what the metrics would point at.
    withheld: str | None = None

    def recommended(self) -> str:
        """The recommended policy, for ``--policy auto``; refused when the trace missed work."""
        if self.withheld:
            raise PinwiseError(f"auto cannot choose a policy from this matrix: {self.withheld}; name a policy "
                               "(compact and scatter need no matrix)")
        return self.policy

    def to_document(self) -> dict:
        """``pinwise analyze --json``."""
        m = self.metrics
        total = event_count(self.comm) if self.comm is not None else 0.0
        document = {
            "threads": m.threads, "pattern": self.pattern, "pattern_reason": self.pattern_reason,
            "policy": self.policy, "reason": self.reason, "hcomm": m.hcomm, "hcomm_offdiagonal": m.heterogeneity,
            "bcomm": m.bcomm, "acomm": m.acomm, "rcomm": m.rcomm, "load_balance": m.load_balance,
            "events_per_access": m.comm_share,
            "spin_waits": [f"0x{line.address:x}" for line in self.spin_lines],
            "hot_lines": [{**line.to_document(), "share": line.events / total if total else None,
                           "spin_wait": line in self.spin_lines} for line in self.hot_lines],
        }
        if self.costs is not None:
            document["costs"] = self.costs
        if self.withheld is not None:
            document["withheld"] = self.withheld
        return document


def event_count(comm: CommMatrix) -> float:
    """Communication events of a traced matrix: M = C + C^T counts each event twice."""
    return float(communication(comm.matrix).sum() / 2)


def spin_waits(comm: CommMatrix) -> tuple[HotLine, ...]:
    """The hot lines of ``comm`` that are spin-waits (module docstring)."""
    lines = comm.info.hot_lines or ()
    total = event_count(comm)
    if total <= 0:
        return ()
    return tuple(line for line in lines if len(line.reads) == comm.threads and line.events >= SPIN_SHARE * total
                 and sum(line.reads) >= SPIN_READS_PER_WRITE * max(1, sum(line.writes)))


def without_lines(comm: CommMatrix, lines: tuple[HotLine, ...]) -> CommMatrix:
    """``comm`` without the events and the accesses the tracer recorded on ``lines`` (since each
    became hot; the few before stay)."""
    if not lines:
        return comm
    matrix = np.array(comm.matrix, dtype=np.float64)
    accesses = None if comm.accesses is None else np.array(comm.accesses, dtype=np.float64)
    for line in lines:
        for i, j, n in line.pairs:
            matrix[i, j] = max(0.0, matrix[i, j] - n)
            matrix[j, i] = max(0.0, matrix[j, i] - n)
        if accesses is not None:
            accesses = np.maximum(0.0, accesses - np.add(line.reads, line.writes))
    return replace(comm, matrix=matrix, accesses=accesses)


def _structures(t: int, m: np.ndarray) -> list[tuple[str, list[tuple[int, int]]]]:
    """The papers' structures as pair lists, most specific first (ties keep the first)."""
    from .mapping.pairing import max_weight_matching

    found = []
    if t >= 4 and t % 2 == 0:
        found.append(("far pairs", [(i, i + t // 2) for i in range(t // 2)]))
    matching = [(min(g), max(g)) for g in max_weight_matching(m) if len(g) == 2]
    if matching:
        found.append(("pairs", matching))
    found.append(("neighbour", [(i, i + 1) for i in range(t - 1)] + ([(0, t - 1)] if t >= 4 else [])))
    for centre in range(t):
        found.append(("master/reduction", [(min(centre, j), max(centre, j)) for j in range(t) if j != centre]))
    return found


def _lift(m: np.ndarray, pairs: list[tuple[int, int]], total: float) -> float:
    t = m.shape[0]
    expected = len(set(pairs)) / (t * (t - 1) / 2)
    share = sum(m[i, j] for i, j in set(pairs)) / total
    return (share - expected) / (1 - expected) if expected < 1 else 0.0


def _working(comm: CommMatrix) -> np.ndarray | None:
    """Instructions per thread while other threads ran (set-up done alone is not imbalance)."""
    together = comm.info.instructions_together
    if together is not None and len(together) == comm.threads and sum(together) > 0:
        return np.array(together, dtype=np.float64)
    if comm.instructions is not None and comm.instructions.sum() > 0:
        return np.asarray(comm.instructions, dtype=np.float64)
    return None


def classify(comm: CommMatrix, found: Metrics) -> tuple[str, str]:
    """The pattern of the papers the matrix looks like, with the evidence."""
    m = communication(comm.matrix)
    t = m.shape[0]
    total = m.sum() / 2  # over pairs i < j
    if total <= 0 or (found.comm_share is not None and found.comm_share < COMM_SHARE_LOW):
        share = "no communication" if total <= 0 else f"{found.comm_share:.2%} of accesses communicate"
        return "none", f"{share} (like EP: private data only)"
    if t == 2:
        return "pairs", "two threads: one pair"
    scored = [(name, pairs, _lift(m, pairs, total)) for name, pairs in _structures(t, m)]
    best = max(lift for _, _, lift in scored)
    if best >= STRUCTURE_LIFT:
        close = [s for s in scored if s[2] >= best - LIFT_TIE]
        name, pairs, lift = min(close, key=lambda s: len(set(s[1])))
        share = sum(m[i, j] for i, j in set(pairs)) / total
        if name == "neighbour":
            # A busy inner stage; not a busy end (thread 0's serial set-up, say).
            work = _working(comm)
            busiest = 1 + int(np.argmax(work[1:-1])) if work is not None else 0
            imbalance = (work[busiest] / np.median(work[1:]) - 1) * 100 if work is not None else 0.0
            if work is not None and imbalance >= BCOMM_HIGH:
                return "pipeline", (f"{share:.0%} between neighbours and stage {busiest} works harder (load imbalance "
                                    f"{imbalance:.0f} %): stages handing data on (like ferret)")
            return "neighbour", f"{share:.0%} of communication is between i and i+1 (like NPB UA)"
        if name == "far pairs":
            return "far pairs", f"{share:.0%} of communication is between i and i+{t // 2} (like NPB LU)"
        if name == "pairs":
            return "pairs", f"each thread has one partner: a matching carries {share:.0%} of communication"
        centre = max(range(t), key=lambda i: sum(i in pair for pair in pairs))
        return "master/reduction", f"thread {centre} takes part in {share:.0%} of all communication"
    # Flat among the threads other than the busiest communicator (thread 0's serial set-up, say).
    busiest = int(np.argmax(m.sum(axis=1)))
    rest = np.delete(np.delete(m, busiest, 0), busiest, 1)
    off = rest[np.triu_indices(t - 1, 1)]
    cv = off.std() / off.mean() if off.mean() > 0 else 0.0
    if off.mean() > 0 and cv < FLAT_CV:
        whole = m[np.triu_indices(t, 1)]
        but = f" without thread {busiest}" if whole.std() / whole.mean() >= FLAT_CV else ""
        return "all-to-all", f"every pair communicates about as much (CV {cv:.2f}{but}, like swaptions)"
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


def checked_on(comm: CommMatrix, policy: str, reason: str, topology) -> tuple[str, str, dict]:
    """The recommendation judged by the cost model on ``topology``: a locality policy that costs
    more than compact is replaced by the cheapest locality policy; any other policy that costs
    more keeps its place, and the reason says why. Returns (policy, reason, costs)."""
    from .mapping import compare

    names = sorted({policy, *LOCALITY_POLICIES})
    rows = {r.policy: r.cost.hops for r in compare(comm, topology, names) if r.cost is not None}
    compact = rows["compact"]
    costs = {"topology": topology.source, "compact": compact, policy: rows.get(policy)}
    cost = rows.get(policy)
    if cost is None or compact <= 0 or cost <= compact * COST_TOLERANCE:
        return policy, reason, costs
    ratio = cost / compact
    if policy in LOCALITY_POLICIES:
        cheapest = min(LOCALITY_POLICIES, key=lambda name: (rows[name], LOCALITY_POLICIES.index(name)))
        costs[cheapest] = rows[cheapest]
        return cheapest, (f"{reason}; but on {topology.source} {policy} would cost {ratio:.2f}x compact's, and "
                          f"{cheapest} costs {rows[cheapest] / compact:.2f}x: {cheapest} instead"), costs
    why = {"scatter": "it trades locality for cache and bandwidth, which is what this matrix needs",
           "balance": "it trades locality for an even load on the caches"}.get(policy, "it does not aim at locality")
    return policy, f"{reason} (it costs {ratio:.2f}x compact's on {topology.source}: {why})", costs


def analyze(comm: CommMatrix, topology=None) -> Analysis:
    """The metrics, the pattern and the recommended policy of ``comm``, characterised without
    its spin-waits; with ``topology`` (a Topology) the recommendation is checked against the
    cost model there (:func:`checked_on`). A trace that missed part of the program's work gives
    no recommendation: ``withheld`` says why."""
    spins = spin_waits(comm)
    used = without_lines(comm, spins)
    found = metrics(used)
    pattern, evidence = classify(used, found)
    if spins:
        evidence += (f"; without the spin-wait{'s' if len(spins) > 1 else ''} on "
                     + ", ".join(line.where for line in spins))
    policy, reason = recommend(found, pattern)
    costs = None
    if topology is not None and comm.threads >= 2:
        policy, reason, costs = checked_on(used, policy, reason, topology)
    return Analysis(found, pattern, evidence, policy, reason, used, spins, tuple(comm.info.hot_lines or ()), costs,
                    comm.info.unseen)


# -- the labelled corpus ------------------------------------------------------------------------

#: The patterns of the workloads (native/workloads/patterns.c) and the label each must get.
CORPUS_PATTERNS = {"pairs": "pairs", "neighbour": "neighbour", "far-pairs": "far pairs", "master": "master/reduction",
                   "pipeline": "pipeline", "all-to-all": "all-to-all", "private": "none"}


def _template(pattern: str, t: int) -> np.ndarray:
    m = np.zeros((t, t))

    def link(i, j, weight=1.0):
        if i != j and 0 <= j < t:
            m[i, j] = m[j, i] = weight

    for i in range(t):
        if pattern == "pairs":
            link(i, i ^ 1)
        elif pattern in ("neighbour", "pipeline"):
            link(i, i + 1)
        elif pattern == "far-pairs" and i < t // 2:
            link(i, i + t // 2)
        elif pattern == "master" and i > 0:
            link(0, i)
        elif pattern in ("all-to-all", "private"):
            for j in range(i + 1, t):
                link(i, j)
    if pattern == "pipeline":  # the busy middle stage makes more accesses on both its lines
        m[t // 2, :] *= 2
        m[:, t // 2] *= 2
    return m


def labelled_corpus(seed: int = 13, samples: int = 10, threads=(4, 8, 16, 64)) -> list[tuple[str, CommMatrix, str]]:
    """Generated matrices with known labels: every pattern of the workloads at each thread count,
    with ``samples`` draws each of noise (each pair's weight jittered by a log-normal factor, and
    background communication among all pairs of 0-50 % of the pattern's), half of them with a busy
    thread 0 (serial set-up: 2-4x the instructions, done alone, and 10-20 % more communication
    with every thread). Returns (description, matrix, expected label)."""
    rng = np.random.default_rng(seed)
    corpus = []
    for t in threads:
        for pattern, label in CORPUS_PATTERNS.items():
            for k in range(samples):
                busy = k % 2 == 1
                m = _template(pattern, t) * rng.lognormal(0.0, 0.3, (t, t))
                m = np.triu(m, 1)
                noise = rng.uniform(0, 0.5)
                background = np.triu(rng.uniform(0, 1, (t, t)), 1)
                m += background / background.sum() * m.sum() * noise
                if busy:
                    m[0, 1:] += m.sum() * rng.uniform(0.10, 0.20) / (t - 1)
                m = m + m.T
                events = m.sum() / 2
                share = rng.uniform(0.0005, 0.005) if pattern == "private" else rng.uniform(0.03, 0.5)
                accesses = np.full(t, events / share / t)
                work = np.full(t, 1e6) * rng.lognormal(0.0, 0.05, t)
                if pattern == "pipeline":
                    work[t // 2] *= 2.0
                together = work.copy()
                instructions = work.copy()
                if busy:
                    instructions[0] += work[0] * rng.uniform(1.0, 3.0)
                info = {"instructions_together": tuple(int(v) for v in together)} if k % 4 < 2 else {}
                from .comm import TraceInfo

                comm = CommMatrix(m, accesses, instructions, TraceInfo(**info))
                description = f"{pattern} T={t} noise={noise:.2f}{' busy thread 0' if busy else ''}"
                corpus.append((description, comm, label))
    return corpus


def accuracy(corpus) -> tuple[float, list[tuple[str, str, str]]]:
    """The share of the corpus classified as labelled, and the misses (description, expected, got)."""
    misses = []
    for description, comm, label in corpus:
        got = classify(comm, metrics(comm))[0]
        if got != label:
            misses.append((description, label, got))
    return 1 - len(misses) / len(corpus), misses
