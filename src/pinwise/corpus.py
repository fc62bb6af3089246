"""The labelled corpus the pattern classifier (:func:`pinwise.patterns.classify`) is measured
on: matrices of the workloads' patterns (native/workloads/patterns.c) at several thread counts,
with noise and a busy creator thread, each with the label it must get."""

from __future__ import annotations

import numpy as np

from .comm import CommMatrix, TraceInfo
from .metrics import metrics
from .patterns import classify
from .vocabulary import Pattern
from .workloads import WORKLOADS

#: The workloads of native/workloads/patterns.c and the label each must get (the workloads registry).
CORPUS_PATTERNS = {name: w.pattern for name, w in WORKLOADS.items() if not w.verbatim}


def _template(label: Pattern, t: int) -> np.ndarray:
    m = np.zeros((t, t))

    def link(i, j, weight=1.0):
        if i != j and 0 <= j < t:
            m[i, j] = m[j, i] = weight

    for i in range(t):
        if label == Pattern.PAIRS:
            link(i, i ^ 1)
        elif label in (Pattern.NEIGHBOUR, Pattern.PIPELINE):
            link(i, i + 1)
        elif label == Pattern.FAR_PAIRS and i < t // 2:
            link(i, i + t // 2)
        elif label == Pattern.MASTER and i > 0:
            link(0, i)
        elif label in (Pattern.ALL_TO_ALL, Pattern.NONE):
            for j in range(i + 1, t):
                link(i, j)
    if label == Pattern.PIPELINE:  # the busy middle stage makes more accesses on both its lines
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
        for workload, label in CORPUS_PATTERNS.items():
            for k in range(samples):
                busy = k % 2 == 1
                m = _template(label, t) * rng.lognormal(0.0, 0.3, (t, t))
                m = np.triu(m, 1)
                noise = rng.uniform(0, 0.5)
                background = np.triu(rng.uniform(0, 1, (t, t)), 1)
                m += background / background.sum() * m.sum() * noise
                if busy:
                    m[0, 1:] += m.sum() * rng.uniform(0.10, 0.20) / (t - 1)
                m = m + m.T
                events = m.sum() / 2
                share = rng.uniform(0.0005, 0.005) if label == Pattern.NONE else rng.uniform(0.03, 0.5)
                accesses = np.full(t, events / share / t)
                work = np.full(t, 1e6) * rng.lognormal(0.0, 0.05, t)
                if label == Pattern.PIPELINE:
                    work[t // 2] *= 2.0
                together = work.copy()
                instructions = work.copy()
                if busy:
                    instructions[0] += work[0] * rng.uniform(1.0, 3.0)
                info = {"instructions_together": tuple(int(v) for v in together)} if k % 4 < 2 else {}
                comm = CommMatrix(m, accesses, instructions, TraceInfo(**info))
                description = f"{workload} T={t} noise={noise:.2f}{' busy thread 0' if busy else ''}"
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
