"""Capability 4: characterising a communication matrix with Diener et al.'s metrics (section 2),
naming the pattern it resembles, and recommending a mapping policy.

Metrics, exactly as equations (1)-(4) of the paper (and SPEC.md):
  Mnorm = M / max(M) * 100
  HComm = (1/T) * sum_i var(Mnorm[i][1..T])      population variance over the whole row, diagonal included
  CommV[i] = sum_j M[i][j]
  BComm = (max(CommV) / (sum_i CommV[i] / T) - 1) * 100
  AComm = sum_i sum_j M[i][j] / T^2
  RComm = AComm / sum_i AccV[i]
and the load balance, the same formula as BComm on the instructions each thread executed.

Because equation (1) includes the zero diagonal, a flat matrix and a perfectly paired one get the
same HComm (both rows are Bernoulli-like). The recommendation therefore also looks at HComm over
the off-diagonal entries ("heterogeneity" below), and at the pattern itself.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .comm import CommMatrix

#: Thresholds of the recommendation (documented in the README).
HETEROGENEITY_HIGH = 300.0   # off-diagonal HComm on the 0..100 scale (max 2500)
BCOMM_HIGH = 30.0            # percent
COMM_SHARE_LOW = 0.01        # communication events per memory access


@dataclass(frozen=True)
class Metrics:
    threads: int
    hcomm: float
    bcomm: float
    acomm: float
    rcomm: float | None          # None without per-thread accesses
    load_balance: float | None   # None without per-thread instructions
    heterogeneity: float         # HComm over off-diagonal entries
    comm_share: float | None     # events / accesses


@dataclass(frozen=True)
class Analysis:
    metrics: Metrics
    pattern: str
    pattern_reason: str
    policy: str
    reason: str


def hcomm(matrix: np.ndarray) -> float:
    top = matrix.max()
    if top <= 0:
        return 0.0
    normalised = matrix / top * 100
    return float(np.mean(np.var(normalised, axis=1)))  # np.var is the population variance


def bcomm(comm_v: np.ndarray) -> float:
    average = comm_v.sum() / len(comm_v)
    return float((comm_v.max() / average - 1) * 100) if average > 0 else 0.0


def metrics(comm: CommMatrix) -> Metrics:
    m = comm.matrix
    t = m.shape[0]
    comm_v = m.sum(axis=1)
    acomm = float(m.sum() / t**2)
    rcomm = share = None
    if comm.accesses is not None and comm.accesses.sum() > 0:
        rcomm = acomm / float(comm.accesses.sum())
        share = float(m.sum() / 2 / comm.accesses.sum())
    load = None
    if comm.instructions is not None and comm.instructions.sum() > 0:
        load = bcomm(comm.instructions)
    off = m[~np.eye(t, dtype=bool)].reshape(t, t - 1) if t > 1 else m
    heterogeneity = float(np.mean(np.var(off / m.max() * 100, axis=1))) if m.max() > 0 and t > 1 else 0.0
    return Metrics(t, hcomm(m), bcomm(comm_v), acomm, rcomm, load, heterogeneity, share)


def _band(m: np.ndarray, offset: int) -> float:
    t = m.shape[0]
    return float(sum(m[i, j] for i in range(t) for j in range(t) if abs(i - j) == offset))


def classify(comm: CommMatrix, found: Metrics) -> tuple[str, str]:
    """The pattern of the papers the matrix looks like, with the evidence."""
    m = comm.matrix.copy()
    np.fill_diagonal(m, 0)
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
    found = metrics(comm)
    pattern, evidence = classify(comm, found)
    policy, reason = recommend(found, pattern)
    return Analysis(found, pattern, evidence, policy, reason)


SHADES = " .:-=+*#%@"


def heat_map_text(matrix: np.ndarray, size: int = 48) -> str:
    """The matrix in characters, darker for more communication (blocks averaged past `size`)."""
    t = matrix.shape[0]
    step = max(1, -(-t // size))
    cells = matrix[: t // step * step or t, : t // step * step or t]
    if step > 1:
        n = cells.shape[0] // step
        cells = cells[: n * step, : n * step].reshape(n, step, n, step).mean(axis=(1, 3))
    top = cells.max()
    rows = []
    for row in cells:
        shades = [min(len(SHADES) - 1, int(v / top * (len(SHADES) - 1) + 0.5)) if top > 0 else 0 for v in row]
        rows.append("".join(SHADES[k] * 2 for k in shades))
    legend = f"(each cell {step}x{step} threads)" if step > 1 else "(thread i is row i, column j; darker = more)"
    return "\n".join(rows) + "\n" + legend


def save_heat_map(matrix: np.ndarray, path: str, title: str = "communication matrix") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 4.4))
    image = ax.imshow(matrix, cmap="Greys", interpolation="nearest")
    fig.colorbar(image, ax=ax, label="communication events")
    ax.set_xlabel("thread")
    ax.set_ylabel("thread")
    ax.set_title(title)
    fig.tight_layout()
    import io

    from .files import write_bytes_atomic

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    write_bytes_atomic(path, buffer.getvalue())
