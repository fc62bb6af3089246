"""Naming the pattern of the papers a communication matrix resembles, and recommending a mapping
policy from its metrics (Diener et al., section 4). The metrics themselves: :mod:`pinwise.metrics`.

The classifier compares the matrix with the structures of the papers' patterns, each a set of
thread pairs: a matching (pairs), i with i+T/2 (far pairs), i with i+1 and the ring's wrap
(neighbour), one thread with all (master). A structure of k of the P = T(T-1)/2 pairs carries the
share k/P of a flat matrix's communication; its *lift* is how far the matrix's share s on it goes
from that towards all of it, (s - k/P) / (1 - k/P): 0 on a flat matrix, 1 when the structure holds
everything. The structure with the highest lift names the pattern when the lift is at least
STRUCTURE_LIFT; within LIFT_TIE of the best, the structure with fewer pairs wins (a pairs matrix
also lies on the neighbour band). Without one, structures are looked for above the matrix's
floor, the level that at least three quarters of the pairs reach (FLOOR_PERCENTILE): what every
pair shares alike, a barrier or a counter every thread updates, raises no placement above
another, and would otherwise hide a stencil's neighbour band (measured: a spin-barrier stencil's
band is 13 against a floor of 4, lift 0.33 on the whole matrix, 1.0 above the floor). A structure
found there must carry FLOOR_STRUCTURE_SHARE of all events with a lift of FLOOR_LIFT, so that a
busy thread's 10-20 % more with everyone does not make a noisy all-to-all matrix a master/reduction. A chain whose busiest inner stage (by instructions executed
while other threads ran) works at least BCOMM_HIGH % more than the median thread is a pipeline
(a busy end is not: thread 0's serial set-up, say). Without a structure, a matrix whose pairs all
communicate about as much is all-to-all. Validated on :func:`labelled_corpus`
(``benchmarks/classifier.py`` prints the accuracy).

Spin-waits: under Valgrind one thread runs at a time, so a thread waiting on a flag reads it
through whole time slices, and the flag's line can carry most of the events. Hot lines (the
tracer's records, :class:`pinwise.comm.HotLine`) are judged by the array they belong to: the
lines of one variable (a symbol the program names), or of one mapping a few lines apart
(ARRAY_GAP), as a solver's flags padded to a line each are. The lines of an array that are each
read at least SPIN_READS_PER_WRITE times per write, and together carry at least SPIN_SHARE of all
events, are spin-waits (an LU solver's pipeline spins on T flags, each with a T-th of the events:
measured, a per-line rule caught 2 of 5): :func:`analyze` names them and characterises the matrix
without their events.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

import numpy as np

from .comm import CommMatrix, HotLine
from .errors import PinwiseError
from .metrics import Metrics, communication, metrics, sampling_noise, upper_pairs
from .policies import BALANCE, BALANCED_LOCALITY, COMPACT, LOCALITY, LOCALITY_POLICIES, SCATTER
from .vocabulary import Pattern

#: Thresholds of the recommendation (documented in docs/analyze.md).
HETEROGENEITY_HIGH = 300.0   # off-diagonal HComm on the 0..100 scale (max 2500)
BCOMM_HIGH = 30.0            # percent
COMM_SHARE_LOW = 0.01        # communication events per memory access
#: Thresholds of the classifier (module docstring).
STRUCTURE_LIFT = 0.5
LIFT_TIE = 0.1
FLAT_CV = 0.5                # coefficient of variation of the pairs below which communication is flat
FLOOR_PERCENTILE = 25        # the level of communication every pair shares alike (module docstring)
FLOOR_STRUCTURE_SHARE = 0.3  # share of all events a structure above the floor must carry
FLOOR_LIFT = 0.8             # and the lift it must have there (clear: the floor's noise is not a structure)
#: A spin-wait line (module docstring).
SPIN_SHARE = 0.25
SPIN_READS_PER_WRITE = 20
ARRAY_GAP = 256              # bytes between two lines of one array, without a symbol (padding to 128 is usual)


@dataclass(frozen=True)
class Limits:
    """The thresholds the pattern and the recommendation are read with (the constants above)."""

    comm_share_low: float = COMM_SHARE_LOW
    structure_lift: float = STRUCTURE_LIFT
    flat_cv: float = FLAT_CV
    heterogeneity_high: float = HETEROGENEITY_HIGH
    bcomm_high: float = BCOMM_HIGH


LIMITS = Limits()
#: How far each threshold is moved, both ways, to see whether the reading holds (a factor, or for the lift an
#: amount): a matrix whose quantity lies within that of a threshold reads the other way in a trace of another length
#: or input (sysbench's share of communicating accesses crossed 1% with its events), so its recommendation is weak.
MARGINS = {"comm_share_low": ("factor", 2.0), "structure_lift": ("amount", 0.1), "flat_cv": ("factor", 1.5),
           "heterogeneity_high": ("factor", 1.5), "bcomm_high": ("factor", 1.5)}
#: A weak reading's advice (analyze words it otherwise where the trace's phases explain the mixture: pinwise.phases).
WEAK_ADVICE = "A trace of another length or input (more or fewer events) can read either way: bench both (pinwise auto does)"
#: How much above compact's cost a recommendation may be before it is replaced (rounding).
COST_TOLERANCE = 1.02

PATTERNS = tuple(Pattern)


@dataclass(frozen=True)
class Costs:
    """The recommendation's check by the cost model (:func:`checked_on`): on the topology named,
    each policy compared (compact, the recommended one, and the one chosen instead if any) and
    its cost, the sum of M[i][j] times the tree distance of the threads' PUs."""

    topology: str
    hops: dict[str, float]

    def __getitem__(self, policy: str) -> float:
        return self.hops[policy]

    def to_document(self) -> dict:
        """As ``analyze --json`` writes it: the topology's name, then each policy's cost."""
        return {"topology": self.topology, **self.hops}


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
    #: With a topology: the recommendation's check by the cost model there.
    costs: Costs | None = None
    #: Why the reading is weak (empty when it holds with every threshold moved within MARGINS),
    #: and the (pattern, policy) it gives with a threshold so moved.
    doubt: str = ""
    alternatives: tuple[tuple[str, str], ...] = ()
    #: Why no placement may be recommended from this matrix: the trace missed part of the program's
    #: work (TraceInfo.unseen). ``policy`` is then only what the metrics would point at.
    withheld: str | None = None
    #: The reading of the same trace under the other sharing model (CommMatrix.other):
    #: {"sharing", "compared", and "pattern", "pattern_reason", "policy", "agrees" or "why" not}.
    other_sharing: dict | None = None

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
            "policy": self.policy, "reason": self.reason, "doubt": self.doubt or None,
            "alternatives": [{"pattern": p, "policy": q} for p, q in self.alternatives],
            "hcomm": m.hcomm, "hcomm_offdiagonal": m.heterogeneity,
            "bcomm": m.bcomm, "acomm": m.acomm, "rcomm": m.rcomm, "load_balance": m.load_balance,
            "events_per_access": m.comm_share,
            # a sampled matrix's two above are less its own noise; these are as counted (else null)
            "hcomm_offdiagonal_counted": m.heterogeneity_observed, "bcomm_counted": m.bcomm_observed,
            "spin_waits": [f"0x{line.address:x}" for line in self.spin_lines],
            "hot_lines": [{**line.to_document(), "share": line.events / total if total else None,
                           "spin_wait": line in self.spin_lines} for line in self.hot_lines],
        }
        if self.costs is not None:
            document["costs"] = self.costs.to_document()
        if self.withheld is not None:
            document["withheld"] = self.withheld
        if self.other_sharing is not None:
            document["other_sharing"] = self.other_sharing
        return document


def percent(share: float) -> str:
    """A share as a percentage with two significant digits, never rounded to a false 0.00%."""
    return "0%" if share == 0 else f"{share * 100:.2g}%"


def event_count(comm: CommMatrix) -> float:
    """Communication events of a traced matrix: M = C + C^T counts each event twice."""
    return float(communication(comm.matrix).sum() / 2)


def line_arrays(lines) -> list[tuple[HotLine, ...]]:
    """Hot lines grouped by the array they belong to (module docstring): one variable's lines,
    else runs of lines of one mapping at most ARRAY_GAP bytes apart; each line in one group."""
    groups: dict[str, list[HotLine]] = {}
    for line in lines:
        variable = re.match(r"variable (.+)\+-?\d+$", line.where)
        groups.setdefault(f"variable {variable.group(1)}" if variable else line.where, []).append(line)
    found = []
    for key, members in groups.items():
        if key.startswith("variable "):
            found.append(tuple(members))
            continue
        members.sort(key=lambda line: line.address)
        run = [members[0]]
        for line in members[1:]:
            if (line.address >> 6) - (run[-1].address >> 6) <= ARRAY_GAP // 64:
                run.append(line)
            else:
                found.append(tuple(run))
                run = [line]
        found.append(tuple(run))
    return found


def spin_waits(comm: CommMatrix) -> tuple[HotLine, ...]:
    """The hot lines of ``comm`` that are spin-waits (module docstring), hottest first."""
    lines = comm.info.hot_lines or ()
    total = event_count(comm)
    if total <= 0:
        return ()
    spun = set()
    for array in line_arrays(line for line in lines if len(line.reads) == comm.threads):
        read_mostly = [line for line in array if sum(line.reads) >= SPIN_READS_PER_WRITE * max(1, sum(line.writes))]
        if sum(line.events for line in read_mostly) >= SPIN_SHARE * total:
            spun.update(id(line) for line in read_mostly)
    found = tuple(line for line in lines if id(line) in spun)
    if comm.info.backend != "sample" or comm.threads < 3:
        return found
    # Sampled, a spinning thread's samples fall mostly behind its pause instruction, not on its
    # load, so reads are undercounted; a barrier's line shows instead as events of every thread.
    # A barrier spans lines (a generation, a counter): each is judged against what the lines set
    # aside before it leave, hottest first.
    left = total - sum(line.events for line in found)
    more = []
    for line in sorted(lines, key=lambda line: -line.events):
        if line not in found and line.events >= SPIN_SHARE * left \
                and len({t for i, j, _ in line.pairs for t in (i, j)}) == comm.threads:
            more.append(line)
            left -= line.events
    return found + tuple(more)


def without_lines(comm: CommMatrix, lines: tuple[HotLine, ...]) -> CommMatrix:
    """``comm`` without the events and the accesses the tracer recorded on ``lines``. A line's
    pairs are counted since it became hot; the events it carried before (its whole run's events
    less those) are taken from its pairs in the same proportions: a flag array's last line to
    become hot had a fifth of its events before; its accesses before (HotLine.before) from its
    threads in the proportions of their accesses since, none past what it has left. The sampler
    counts a line's pairs from its first event (its events beyond the pairs are threads born after
    the line was first seen), so a sampled line's pairs are taken as they are."""
    if not lines:
        return comm
    sampled = comm.info.backend == "sample"
    matrix = np.array(comm.matrix, dtype=np.float64)
    accesses = None if comm.accesses is None else np.array(comm.accesses, dtype=np.float64)
    for line in lines:
        since_hot = sum(n for _, _, n in line.pairs)
        scale = max(1.0, line.events / since_hot) if since_hot and not sampled else 1.0
        for i, j, n in line.pairs:
            matrix[i, j] = max(0.0, matrix[i, j] - n * scale)
            matrix[j, i] = max(0.0, matrix[j, i] - n * scale)
        if accesses is not None:
            since = np.add(line.reads, line.writes).astype(np.float64)
            accesses = np.maximum(0.0, accesses - since)
            accesses -= _shared_out(line.before, since, accesses)
    return replace(comm, matrix=matrix, accesses=accesses)


def _shared_out(amount: float, weights: np.ndarray, room: np.ndarray) -> np.ndarray:
    """``amount`` split over the threads in proportion to ``weights``, none past its ``room``: what
    one cannot take goes to the others in the same proportions (the tracer counts a hot line's
    accesses before it became hot for the line, not per thread)."""
    taken = np.zeros_like(room)
    left = min(float(amount), float(room.sum()))
    open_ = (room > 0) & (weights > 0)
    while left > 1e-9 and open_.any():
        share = np.where(open_, weights, 0.0) / weights[open_].sum() * left
        step = np.minimum(share, room - taken)
        taken += step
        left -= step.sum()
        open_ &= room - taken > 1e-9
    return taken


def _structures(t: int, m: np.ndarray) -> list[tuple[str, list[tuple[int, int]]]]:
    """The papers' structures as pair lists, most specific first (ties keep the first)."""
    from .mapping.pairing import max_weight_matching

    found = []
    if t >= 4 and t % 2 == 0:
        found.append((Pattern.FAR_PAIRS, [(i, i + t // 2) for i in range(t // 2)]))
    matching = [(min(g), max(g)) for g in max_weight_matching(m) if len(g) == 2]
    if matching:
        found.append((Pattern.PAIRS, matching))
    found.append((Pattern.NEIGHBOUR, [(i, i + 1) for i in range(t - 1)] + ([(0, t - 1)] if t >= 4 else [])))
    for centre in range(t):
        found.append((Pattern.MASTER, [(min(centre, j), max(centre, j)) for j in range(t) if j != centre]))
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


def classify(comm: CommMatrix, found: Metrics, limits: Limits = LIMITS) -> tuple[str, str]:
    """The pattern of the papers the matrix looks like, with the evidence."""
    m = communication(comm.matrix)
    t = m.shape[0]
    total = m.sum() / 2  # over pairs i < j
    if total <= 0 or (found.comm_share is not None and found.comm_share < limits.comm_share_low):
        share = "no communication" if total <= 0 else f"{percent(found.comm_share)} of accesses communicate"
        return Pattern.NONE, f"{share} (like EP: private data only)"
    if t == 2:
        return Pattern.PAIRS, "two threads: one pair"
    # What every pair shares alike (a barrier, a lock, a counter all threads update) says nothing
    # about who should sit beside whom: structures are also looked for above that floor, and the
    # reading above it wins when it finds a structure that carries a real share of all events.
    floor = float(np.percentile(m[upper_pairs(t)], FLOOR_PERCENTILE)) if t >= 4 else 0.0
    above = np.clip(m - floor, 0.0, None)
    np.fill_diagonal(above, 0.0)
    above_total = above.sum() / 2
    beside = ""
    scored = [(name, pairs, _lift(m, pairs, total)) for name, pairs in _structures(t, m)]
    best = max(lift for _, _, lift in scored)
    if best < limits.structure_lift and floor > 0 and above_total > 0:
        lifted = [(name, pairs, _lift(above, pairs, above_total)) for name, pairs in _structures(t, above)]
        top = max(lift for _, _, lift in lifted)
        name, pairs, _ = min([s for s in lifted if s[2] >= top - LIFT_TIE], key=lambda s: len(set(s[1])))
        if top >= FLOOR_LIFT and sum(above[i, j] for i, j in set(pairs)) >= FLOOR_STRUCTURE_SHARE * total:
            scored, best, m, total = lifted, top, above, above_total
            beside = (f"; above what every pair shares alike ({1 - above_total / (communication(comm.matrix).sum() / 2):.0%}"
                      " of events: a barrier or a counter every thread touches)")
    if best >= limits.structure_lift:
        close = [s for s in scored if s[2] >= best - LIFT_TIE]
        name, pairs, lift = min(close, key=lambda s: len(set(s[1])))
        share = sum(m[i, j] for i, j in set(pairs)) / total
        if name == Pattern.NEIGHBOUR:
            # A busy inner stage; not a busy end (thread 0's serial set-up, say).
            work = _working(comm)
            busiest = 1 + int(np.argmax(work[1:-1])) if work is not None else 0
            imbalance = (work[busiest] / np.median(work[1:]) - 1) * 100 if work is not None else 0.0
            if work is not None and imbalance >= limits.bcomm_high:
                return Pattern.PIPELINE, (f"{share:.0%} between neighbours and stage {busiest} works harder (load imbalance "
                                    f"{imbalance:.0f} %): stages handing data on (like ferret){beside}")
            return Pattern.NEIGHBOUR, f"{share:.0%} of communication is between i and i+1 (like NPB UA){beside}"
        if name == Pattern.FAR_PAIRS:
            return Pattern.FAR_PAIRS, f"{share:.0%} of communication is between i and i+{t // 2} (like NPB LU){beside}"
        if name == Pattern.PAIRS:
            partnered = len({k for i, j in set(pairs) if m[i, j] > 0 for k in (i, j)})
            who = "each thread has" if partnered == t else f"{partnered} of the {t} threads have"
            return Pattern.PAIRS, f"{who} one partner: a matching carries {share:.0%} of communication{beside}"
        centre = max(range(t), key=lambda i: sum(i in pair for pair in pairs))
        return Pattern.MASTER, f"thread {centre} takes part in {share:.0%} of all communication{beside}"
    # Flat among the threads other than the busiest communicator (thread 0's serial set-up, say),
    # when that leaves pairs to compare (three threads leave one: then all of them).
    busiest = int(np.argmax(m.sum(axis=1))) if t >= 4 else t
    rest = np.delete(np.delete(m, busiest, 0), busiest, 1) if t >= 4 else m
    off = rest[upper_pairs(rest.shape[0])]
    scale = float(np.max(off)) if off.size and np.max(off) > 0 else 1.0  # only ratios matter: 1e-200s square to 0
    cv = (off / scale).std() / (off / scale).mean() if off.mean() > 0 else 0.0
    noise = sampling_noise(comm)
    if noise is not None and off.mean() > 0:  # a sample's own noise is spread too: only the rest counts
        rest_noise = (np.delete(np.delete(noise, busiest, 0), busiest, 1) if t >= 4 else noise)[
            upper_pairs(rest.shape[0])]
        cv = float(np.sqrt(max(0.0, cv ** 2 - rest_noise.mean() / off.mean() ** 2)))
    if off.mean() > 0 and cv < limits.flat_cv:
        whole = m[upper_pairs(t)]
        but = f" without thread {busiest}" if t >= 4 and whole.std() / whole.mean() >= limits.flat_cv else ""
        return Pattern.ALL_TO_ALL, f"every pair communicates about as much (CV {cv:.2f}{but}, like swaptions)"
    if found.heterogeneity >= limits.heterogeneity_high:
        return Pattern.CLUSTERED, "groups of threads communicate mostly among themselves"
    return Pattern.IRREGULAR, "no pattern of the papers"


def recommend(found: Metrics, pattern: str, limits: Limits = LIMITS) -> tuple[str, str]:
    """High heterogeneity -> locality; high BComm -> balance; both -> balanced-locality;
    little communication -> scatter (Diener et al., section 4)."""
    if pattern == Pattern.NONE:
        return SCATTER, "threads hardly communicate: spread them so each gets more cache and bandwidth"
    if found.threads == 2:  # one pair: every matrix is "flat" (heterogeneity and BComm are 0)
        share = f" ({percent(found.comm_share)} of accesses)" if found.comm_share is not None else ""
        return LOCALITY, f"the two threads communicate{share}: place them close"
    hetero = found.heterogeneity >= limits.heterogeneity_high and pattern not in (Pattern.ALL_TO_ALL, Pattern.MASTER)
    imbalanced = found.bcomm >= limits.bcomm_high
    if hetero and imbalanced:
        return BALANCED_LOCALITY, (f"groups communicate (heterogeneity {found.heterogeneity:.0f}) but unevenly "
                                     f"(BComm {found.bcomm:.0f}): keep groups close without piling load on one cache")
    if hetero:
        return LOCALITY, f"threads communicate in groups (heterogeneity {found.heterogeneity:.0f}): place them close"
    if imbalanced:
        return BALANCE, (f"communication is imbalanced (BComm {found.bcomm:.0f}) with no groups to exploit: "
                           "spread the heavy communicators")
    return SCATTER, "communication is flat: no placement improves locality, so spread threads for cache capacity"


def weak_reading(comm: CommMatrix, found: Metrics, pattern: str, policy: str) -> tuple[str, tuple]:
    """Whether the reading (pattern, policy) holds with each threshold moved within MARGINS: the
    sentence that says why not (empty if it holds) and the (pattern, policy) pairs read instead,
    those that name another pattern or a policy with another aim (locality or spreading)."""
    readings: dict[tuple[str, str], list[str]] = {}
    for name, (kind, margin) in MARGINS.items():
        nominal = getattr(LIMITS, name)
        for moved in ((nominal * margin, nominal / margin) if kind == "factor" else (nominal + margin, nominal - margin)):
            limits = replace(LIMITS, **{name: moved})
            other = classify(comm, found, limits)[0]
            reading = (other, recommend(found, other, limits)[0])
            if other != pattern or _aims_at_locality(reading[1]) != _aims_at_locality(policy):
                readings.setdefault(reading, []).append(name)
    if not readings:
        return "", ()
    why = "; ".join(f"{_near(name, comm, found)}: read across it, {other} -> {chosen}"
                    for (other, chosen), names in readings.items() for name in dict.fromkeys(names))
    return f"weak: {why}. {WEAK_ADVICE}", tuple(readings)


def _aims_at_locality(policy: str) -> bool:
    """Locality and balanced-locality differ in a nuance (how much load one cache may take), not
    in what they aim at: a reading that only swaps one for the other is not called weak."""
    return policy in LOCALITY_POLICIES


def _near(name: str, comm: CommMatrix, found: Metrics) -> str:
    """The quantity a threshold judges, its value and the threshold, in words."""
    if name == "comm_share_low":
        return (f"{percent(found.comm_share)} of accesses communicate, within a factor {MARGINS[name][1]:g} of the "
                f"{COMM_SHARE_LOW:.0%} below which no pattern is read")
    if name == "heterogeneity_high":
        return (f"heterogeneity {found.heterogeneity:.0f}, within a factor {MARGINS[name][1]:g} of the "
                f"{HETEROGENEITY_HIGH:.0f} above which threads are read as groups")
    if name == "bcomm_high":
        return (f"BComm {found.bcomm:.0f} %, within a factor {MARGINS[name][1]:g} of the {BCOMM_HIGH:.0f} % above "
                "which communication is read as imbalanced")
    m = communication(comm.matrix)
    total = m.sum() / 2
    if name == "structure_lift" and total > 0 and m.shape[0] > 2:
        best, lift = max(((n, _lift(m, pairs, total)) for n, pairs in _structures(m.shape[0], m)), key=lambda x: x[1])
        return (f"the strongest structure ({best}) has a lift of {lift:.2f}, within {MARGINS[name][1]:g} of the "
                f"{STRUCTURE_LIFT:g} that names a pattern")
    return f"the pairs' spread (CV) lies within a factor {MARGINS['flat_cv'][1]:g} of the {FLAT_CV:g} below which " \
           "communication is read as flat"


def checked_on(comm: CommMatrix, policy: str, reason: str, topology, found: Metrics | None = None,
               weak: bool = False) -> tuple[str, str, Costs]:
    """The recommendation judged by the cost model on ``topology``: a locality policy that costs
    more than the cheapest locality policy is replaced by it; any other policy that costs
    more keeps its place, and the reason says why, in the cost's terms: how little communication
    it gives up, or, for a ``weak`` reading (:func:`weak_reading`), that the cost model favours
    compact and only a bench can say whether the trade pays. Returns (policy, reason, costs)."""
    from .mapping import compare

    names = sorted({policy, *LOCALITY_POLICIES})
    rows = {r.policy: r.cost.hops for r in compare(comm, topology, names) if r.cost is not None}
    compact = rows[COMPACT]
    hops = {COMPACT: compact, policy: rows.get(policy)}
    costs = Costs(topology.source, hops)
    cost = rows.get(policy)
    if policy in LOCALITY_POLICIES and cost is not None:
        # judged against the cheapest of them, not compact alone: compact can split the one pair
        # that communicates as balanced-locality does (both 2x locality's), and then nothing
        # replaced balanced-locality
        cheapest = min(LOCALITY_POLICIES, key=lambda name: (rows[name], LOCALITY_POLICIES.index(name)))
        if rows[cheapest] <= 0 or cost <= rows[cheapest] * COST_TOLERANCE:
            return policy, reason, costs
        hops[cheapest] = rows[cheapest]
        than = (f"{cost / compact:.2f}x compact's, and {cheapest} costs {rows[cheapest] / compact:.2f}x" if compact > 0
                else f"{cost / rows[cheapest]:.2f}x {cheapest}'s")
        return cheapest, f"{reason}; but on {topology.source} {policy} would cost {than}: {cheapest} instead", costs
    if cost is None or compact <= 0 or cost <= compact * COST_TOLERANCE:
        return policy, reason, costs
    ratio = cost / compact
    why = {SCATTER: "it trades locality for cache and bandwidth, which is what this matrix needs",
           BALANCE: "it trades locality for an even load on the caches"}.get(policy, "it does not aim at locality")
    share = found.comm_share if found is not None else None
    if weak:
        why = (f"by the cost model compact places these threads better; whether {policy}'s trade pays, a reading "
               "this weak cannot say")
    elif share is not None and share < COMM_SHARE_LOW:
        why = (f"the communication it spreads out is {percent(share)} of the accesses, so the locality it gives up "
               "weighs less than the cache and bandwidth it gains")
    return policy, f"{reason} (it costs {ratio:.2f}x compact's on {topology.source}: {why})", costs


def analyze(comm: CommMatrix, topology=None, weak: bool = True) -> Analysis:
    """The metrics, the pattern and the recommended policy of ``comm``, characterised without
    its spin-waits; with ``topology`` (a Topology) the recommendation is checked against the
    cost model there (:func:`checked_on`). A trace that missed part of the program's work gives
    no recommendation: ``withheld`` says why. ``weak`` False: whether the reading is weak is not
    asked (:func:`weak_reading`, half the time of a small matrix's analysis; --adapt asks it only
    for the readings it moves threads on)."""
    spins = spin_waits(comm)
    used = without_lines(comm, spins)
    found = metrics(used)
    pattern, evidence = classify(used, found)
    if spins:
        evidence += (f"; without the spin-wait{'s' if len(spins) > 1 else ''} on "
                     + ", ".join(line.where for line in spins))
    policy, reason = recommend(found, pattern)
    doubt, alternatives = weak_reading(used, found, pattern, policy) if weak else ("", ())
    costs = None
    if topology is not None and comm.threads >= 2:
        policy, reason, costs = checked_on(used, policy, reason, topology, found, bool(doubt))
    if doubt:
        reason = f"{reason}; {doubt}"
    return Analysis(found, pattern, evidence, policy, reason, used, spins, tuple(comm.info.hot_lines or ()), costs,
                    doubt, alternatives, comm.info.unseen, other_reading(comm, pattern, policy, spins, topology))


def other_reading(comm: CommMatrix, pattern: str, policy: str, spins, topology=None) -> dict | None:
    """How the trace reads under the other sharing model (the matrix the tracer counts beside
    the one asked for): ``write`` counts an event only when one of the two accesses writes, ``any``
    every access to a line another thread touched (the paper's). They differ by read sharing: a
    stencil's halo, which the neighbour reads while its owner reads it too, or a table every thread
    reads. None when the trace has no other matrix."""
    if comm.other is None or comm.info.sharing not in ("write", "any"):
        return None
    model = "any" if comm.info.sharing == "write" else "write"
    if spins:
        return {"sharing": model, "compared": False,
                "why": "spin-waits were set aside, and the other model's matrix holds their events apart from no pair"}
    again = analyze(replace(comm, matrix=comm.other, other=None,
                            info=replace(comm.info, sharing=model, hot_lines=None)), topology)
    return {"sharing": model, "compared": True, "pattern": again.pattern, "pattern_reason": again.pattern_reason,
            "policy": again.policy, "agrees": (again.pattern, again.policy) == (pattern, policy)}
