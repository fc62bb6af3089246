"""Characterising a communication matrix with Diener et al.'s metrics (section 2, equations 1-4).

M is the T x T matrix of communication events between threads (see :mod:`pinwise.comm`). The
paper's matrices have an empty diagonal: a thread does not communicate with itself. A matrix given
here may carry one (a CSV file, or workers of different rounds folded onto one role by
:func:`pinwise.rounds.fold_rounds`), so every metric below, and every policy, first sets the diagonal
to zero (:func:`communication`): one definition of CommV, the same in ``pinwise analyze``, the
cost model and the Balance policies.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

import numpy as np

from .comm import CommMatrix


@functools.lru_cache(maxsize=64)
def upper_pairs(n: int) -> tuple[np.ndarray, np.ndarray]:
    """The pairs i < j of n threads, as np.triu_indices(n, 1) gives them, kept (read-only): it
    builds a mask each call, and an adaptive judgment asks for it a dozen times."""
    rows, cols = np.triu_indices(n, 1)
    rows.flags.writeable = cols.flags.writeable = False
    return rows, cols


def communication(matrix) -> np.ndarray:
    """M as the paper defines it: a dense float copy with M[i][i] = 0."""
    dense = matrix.toarray() if hasattr(matrix, "toarray") else np.array(matrix, dtype=np.float64)
    dense = dense.astype(np.float64, copy=False)
    np.fill_diagonal(dense, 0)
    return dense


def comm_v(matrix) -> np.ndarray:
    """The communication vector, equation (2): CommV[i] = sum_j M[i][j], the communication events
    of thread i with the other threads. Works on dense and scipy sparse matrices."""
    row_sums = np.asarray(matrix.sum(axis=1)).ravel().astype(np.float64)
    return row_sums - np.asarray(matrix.diagonal()).ravel()


def hcomm(matrix) -> float:
    """Heterogeneity, equation (1): HComm = (1/T) sum_i var(Mnorm[i][1..T]), with
    Mnorm = M / max(M) * 100 and var the population variance over the whole row (the zero
    diagonal included). 0 for a matrix without communication."""
    m = communication(matrix)
    top = m.max()
    if top <= 0:
        return 0.0
    return float(np.mean(np.var(m / top * 100, axis=1)))


def bcomm(vector) -> float:
    """Balance, equation (2): BComm = (max(CommV) / (sum_i CommV[i] / T) - 1) * 100 %. Applied to
    CommV it is the communication imbalance; applied to the instructions per thread, the load
    imbalance. 0 when the vector sums to 0."""
    vector = np.asarray(vector, dtype=np.float64)
    average = vector.sum() / len(vector)
    return float((vector.max() / average - 1) * 100) if average > 0 else 0.0


def acomm(matrix) -> float:
    """Amount, equation (3): AComm = sum_i sum_j M[i][j] / T^2."""
    m = communication(matrix)
    return float(m.sum() / m.shape[0] ** 2)


def rcomm(matrix, accesses) -> float | None:
    """Ratio, equation (4): RComm = AComm / sum_i AccV[i], AccV[i] the memory accesses of thread
    i. None without accesses."""
    total = float(np.sum(accesses)) if accesses is not None else 0.0
    return acomm(matrix) / total if total > 0 else None


def heterogeneity(matrix) -> float:
    """HComm over the off-diagonal entries only (pinwise's addition, not the paper's): equation
    (1) counts the zero diagonal, so a flat matrix and a perfectly paired one get the same HComm;
    without it they differ, which the recommendation needs."""
    m = communication(matrix)
    t = m.shape[0]
    if t < 2 or m.max() <= 0:
        return 0.0
    off = m[~np.eye(t, dtype=bool)].reshape(t, t - 1)
    return float(np.mean(np.var(off / m.max() * 100, axis=1)))


def sampling_noise(comm: CommMatrix) -> np.ndarray | None:
    """The variance of each entry of a sampled matrix (``pinwise trace --backend sample``) that
    comes from the sampling alone; None for a traced one. An entry is w * n, n the watchpoint
    events of the pair and w the average weight of one (the estimate's scale): n counts like a
    Poisson variable, so the entry's variance is w^2 n = w * M[i][j]."""
    sampling = comm.info.sampling
    if comm.info.backend != "sample" or not sampling:
        return None
    m = communication(comm.matrix)
    events = float(sampling.get("events", 0) or 0)
    if events <= 0 or m.sum() <= 0:
        return None
    weight = m.sum() / 2 / events
    return weight * m


def block_matrices(comm: CommMatrix) -> list[np.ndarray] | None:
    """The sampled matrix's events per time block, each weighted as the whole matrix is (the
    sampler's estimate, pw_sample.c); None when the file has no usable blocks."""
    sampling = comm.info.sampling
    if sampling is None:
        return None
    t = comm.threads
    try:
        accesses = np.asarray(comm.accesses, dtype=float)
        offered = np.zeros((t, t))
        armed = np.zeros((t, t))
        for a, b, offers, arms, _hits in sampling["pairs"]:
            offered[int(a), int(b)] = float(offers)
            armed[int(a), int(b)] = float(arms)
        offered_by = offered.sum(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            factor = np.where(armed > 0, offered / armed, 0.0) * np.where(offered_by > 0, accesses / offered_by,
                                                                          0.0)[:, None]
        found = []
        for block in sampling["blocks"]:
            m = np.zeros((t, t))
            for k in range(0, len(block) - 2, 3):
                a, b, weight = int(block[k]), int(block[k + 1]), float(block[k + 2])
                m[a, b] += weight * factor[a, b]
            found.append(m + m.T)
    except (KeyError, TypeError, ValueError, IndexError):
        return None
    return found if all(np.all(np.isfinite(m)) for m in found) else None


def time_block_matrices(comm: CommMatrix) -> list[np.ndarray] | None:
    """The events per time block of a sampled trace (:func:`block_matrices`) or of a Valgrind
    trace (TraceInfo.time_blocks: exact counts, blocks of accesses); None without them."""
    if comm.info.sampling is not None:
        return block_matrices(comm)
    kept = comm.info.time_blocks
    if kept is None:
        return None
    t = comm.threads
    found = []
    try:
        for block in kept["blocks"]:
            m = np.zeros((t, t))
            for k in range(0, len(block) - 2, 3):
                m[int(block[k]), int(block[k + 1])] += float(block[k + 2])
            found.append(m + m.T)
    except (KeyError, TypeError, ValueError, IndexError):
        return None
    return found


#: Time blocks from which a sample's own spread is read (fewer: its variance is itself too noisy).
SPREAD_BLOCKS = 8


def _comm_v_noise(comm: CommMatrix, m: np.ndarray, noise: np.ndarray) -> np.ndarray:
    """The variance each thread's CommV owes to the sampling: the Poisson count's (``noise``
    summed), or, where the sample's time blocks spread more, B times their own variance, the
    larger. Traps come in bursts (a watchpoint on a busy line traps at once, and the next sample
    there is watched again), so the count understates the noise: on a neighbour program whose
    BComm is 25 %, ten sampled traces read 12-32 after the Poisson correction, 0-27 after this one."""
    poisson = comm_v(noise)
    blocks = block_matrices(comm)
    if blocks is None or len(blocks) < SPREAD_BLOCKS:
        return poisson
    per_block = np.array([comm_v(block) for block in blocks])
    total = float(per_block.sum())
    if total <= 0:
        return poisson
    scale = float(comm_v(m).sum()) / total  # the blocks' weights to the matrix's
    return np.maximum(poisson, len(blocks) * per_block.var(axis=0, ddof=1) * scale ** 2)


def _shrunk(vector: np.ndarray, noise: np.ndarray) -> np.ndarray:
    """``vector`` pulled towards its mean by the share of its spread that its noise explains
    (James-Stein / empirical Bayes): the largest of T noisy sums overstates the true largest."""
    spread = vector.var()
    if spread <= 0:
        return vector
    keep = max(0.0, 1.0 - float(noise.mean()) / spread)
    return vector.mean() + keep * (vector - vector.mean())


@dataclass(frozen=True)
class Metrics:
    """Diener et al.'s four metrics of one matrix, with the load balance and pinwise's additions.
    For a sampled matrix, ``heterogeneity`` and ``bcomm`` are corrected for the sampling noise
    (which only ever adds spread) and the values as observed are kept beside them."""

    threads: int
    hcomm: float
    bcomm: float
    acomm: float
    rcomm: float | None          # None without per-thread accesses
    load_balance: float | None   # BComm of the instructions; None without them
    heterogeneity: float         # HComm over off-diagonal entries
    comm_share: float | None     # communication events per memory access
    bcomm_observed: float | None = None          # before the noise correction (sampled matrices)
    heterogeneity_observed: float | None = None


def metrics(comm: CommMatrix) -> Metrics:
    """Every metric of ``comm``, each by its equation above; corrected for the sampling noise
    where ``comm`` is sampled (:func:`sampling_noise`)."""
    m = communication(comm.matrix)
    share = None
    if comm.accesses is not None and comm.accesses.sum() > 0:
        share = float(m.sum() / 2 / comm.accesses.sum())
    load = bcomm(comm.instructions) if comm.instructions is not None and comm.instructions.sum() > 0 else None
    found = Metrics(m.shape[0], hcomm(m), bcomm(comm_v(m)), acomm(m), rcomm(m, comm.accesses), load, heterogeneity(m),
                    share)
    noise = sampling_noise(comm)
    t = m.shape[0]
    if noise is None or t < 3 or m.max() <= 0:
        return found
    # each row's population variance over its T-1 entries gains the mean noise variance of the row
    off = ~np.eye(t, dtype=bool)
    scale = (100 / m.max()) ** 2
    extra = float(np.mean(noise[off].reshape(t, t - 1).mean(axis=1))) * scale * (t - 2) / (t - 1)
    corrected_heterogeneity = max(0.0, found.heterogeneity - extra)
    corrected_bcomm = max(0.0, bcomm(_shrunk(comm_v(m), _comm_v_noise(comm, m, noise))))
    return replace(found, heterogeneity=corrected_heterogeneity, bcomm=corrected_bcomm,
                   bcomm_observed=found.bcomm, heterogeneity_observed=found.heterogeneity)
