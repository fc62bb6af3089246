"""Communication matrices: how much each pair of threads shares, the input of every mapping policy.

File formats (both read by :func:`read_comm`, JSON written by :func:`write_comm`):

- JSON, ``{"format": "pinwise-comm", "version": 1, "threads": T, "matrix": [[...], ...]}``, with
  optional ``"accesses"`` (AccV: memory accesses per thread), ``"instructions"`` (per thread),
  ``"model"`` (``"diener"`` communication events or ``"mazouz"`` alpha), ``"command"``,
  ``"window"``, ``"partial"`` and ``"tool"``: what the tracer (``pinwise trace``) writes.
- CSV as numalize-style tools write it: T lines of T numbers separated by commas (or semicolons or
  blanks); thread i's row is line i. Lines starting with ``#`` are comments.

A matrix must be square, finite and non-negative. An asymmetric one is symmetrised as
(M + Mᵀ)/2 with a warning (a communication event counts for both threads). The diagonal (a
thread with itself) is kept as given; mapping policies ignore it.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .errors import PinwiseError
from .files import read_document, read_input, write_text_atomic
from .plan import Rounds

COMM_FORMAT = "pinwise-comm"


class SymmetrisedWarning(UserWarning):
    """The matrix was not symmetric and was replaced by (M + Mᵀ)/2."""


@dataclass
class CommMatrix:
    """T x T communication between threads (thread ids in creation order, main = 0)."""

    matrix: np.ndarray
    accesses: np.ndarray | None = None
    instructions: np.ndarray | None = None
    metadata: dict = field(default_factory=dict)

    @property
    def threads(self) -> int:
        return int(self.matrix.shape[0])

    @classmethod
    def from_array(cls, values, source: str = "matrix", **kwargs) -> CommMatrix:
        return cls(validate_matrix(values, source), **kwargs)

    def to_json(self) -> str:
        document = {"format": COMM_FORMAT, "version": 1, "threads": self.threads,
                    **{k: v for k, v in self.metadata.items() if k not in ("format", "version", "threads")},
                    "matrix": _plain(self.matrix)}
        if self.accesses is not None:
            document["accesses"] = _plain(self.accesses)
        if self.instructions is not None:
            document["instructions"] = _plain(self.instructions)
        return json.dumps(document)


def _plain(array: np.ndarray):
    """Whole numbers as ints, so files stay small and exact."""
    if np.all(np.mod(array, 1) == 0):
        return array.astype(np.int64).tolist()
    return array.tolist()


def validate_matrix(values, source: str = "matrix") -> np.ndarray:
    try:
        matrix = np.array(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise PinwiseError(f"{source}: the matrix must hold numbers only") from None
    if matrix.ndim != 2 or matrix.size == 0:
        raise PinwiseError(f"{source}: the matrix must be a non-empty square table of numbers (got shape {matrix.shape})")
    if matrix.shape[0] != matrix.shape[1]:
        raise PinwiseError(f"{source}: the matrix is not square ({matrix.shape[0]} rows x {matrix.shape[1]} columns)")
    if not np.all(np.isfinite(matrix)):
        raise PinwiseError(f"{source}: the matrix holds NaN or infinite values")
    if np.any(matrix < 0):
        i, j = np.argwhere(matrix < 0)[0]
        raise PinwiseError(f"{source}: the matrix holds a negative value ({matrix[i, j]:g} at row {i}, column {j})")
    if not np.allclose(matrix, matrix.T, rtol=1e-9, atol=0):
        warnings.warn(f"{source}: the matrix is not symmetric; using (M + M^T) / 2", SymmetrisedWarning, stacklevel=2)
        matrix = (matrix + matrix.T) / 2
    return matrix


def _vector(document: dict, name: str, threads: int, source: str) -> np.ndarray | None:
    if document.get(name) is None:
        return None
    try:
        vector = np.array(document[name], dtype=np.float64)
    except (TypeError, ValueError):
        raise PinwiseError(f"{source}: \"{name}\" must be a list of numbers") from None
    if vector.shape != (threads,) or not np.all(np.isfinite(vector)) or np.any(vector < 0):
        raise PinwiseError(f"{source}: \"{name}\" must hold {threads} non-negative numbers, one per thread")
    return vector


def parse_comm(text: str, source: str = "<comm>") -> CommMatrix:
    stripped = text.lstrip()
    if stripped.startswith("{"):
        document = read_document(text, source, COMM_FORMAT, "a pinwise communication matrix")
        matrix = validate_matrix(document.get("matrix"), source)
        threads = document.get("threads", matrix.shape[0])
        if threads != matrix.shape[0]:
            raise PinwiseError(f"{source}: \"threads\" says {threads} but the matrix has {matrix.shape[0]} rows")
        metadata = {k: v for k, v in document.items() if k not in ("matrix", "accesses", "instructions")}
        return CommMatrix(matrix, _vector(document, "accesses", matrix.shape[0], source),
                          _vector(document, "instructions", matrix.shape[0], source), metadata)
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        fields = [f for f in line.replace(";", ",").replace("\t", ",").replace(" ", ",").split(",") if f != ""]
        try:
            rows.append([float(f) for f in fields])
        except ValueError:
            raise PinwiseError(f"{source}, line {number}: {line[:40]!r} is not a row of numbers") from None
    if not rows:
        raise PinwiseError(f"{source} is empty: a matrix file needs T rows of T numbers")
    if len({len(r) for r in rows}) != 1:
        raise PinwiseError(f"{source}: rows have different lengths ({sorted({len(r) for r in rows})})")
    return CommMatrix(validate_matrix(rows, source), metadata={"source": source})


def read_comm(path: str | Path) -> CommMatrix:
    return parse_comm(read_input(path, "communication matrix file"), str(path))


def write_comm(comm: CommMatrix, path: str | Path) -> None:
    write_text_atomic(path, comm.to_json() + "\n")


def find_rounds(comm: CommMatrix) -> Rounds | None:
    """Rounds from the main thread's pthread_create and pthread_join calls, in its program order
    (``"spawns"`` in the metadata: what ``pinwise trace`` records in its native run): it creates
    ``size`` workers, joins every one of them, creates ``size`` more, at least twice, and creates
    every other thread itself (``"creators"``, where the trace has them).

    This is the program's structure, not its timing: lifetimes cannot show it reliably (under
    Valgrind threads take turns; natively, on a busy or small machine, a creator starved by its
    first workers creates the rest late). None for one pool that lives through the run, workers
    that create workers, or a matrix without the calls."""
    spawns, creators = comm.metadata.get("spawns"), comm.metadata.get("creators")
    threads = comm.threads
    if not isinstance(spawns, list) or threads < 3:
        return None
    if isinstance(creators, list) and (len(creators) != threads or any(c != 0 for c in creators[1:])):
        return None
    rounds: list[list[int]] = []
    alive: set[int] = set()
    joined_since_create = True
    for event in spawns:
        if not (isinstance(event, list) and len(event) == 2 and event[0] in ("create", "join")):
            return None
        kind, thread = event
        if kind == "create":
            if joined_since_create:
                if alive:  # a round starts while workers of the last one still live: no rounds
                    return None
                rounds.append([])
            rounds[-1].append(thread)
            alive.add(thread)
            joined_since_create = False
        else:
            alive.discard(thread)
            joined_since_create = True
    created = [t for r in rounds for t in r]
    sizes = {len(r) for r in rounds}
    if created != list(range(1, threads)) or len(rounds) < 2 or len(sizes) != 1:
        return None
    return Rounds(sizes.pop(), len(rounds), threads)


def fold_rounds(comm: CommMatrix, rounds: Rounds) -> CommMatrix:
    """One thread per role: the creator and one round's workers, each summing what its role did in
    every round (communication, accesses, instructions). Workers of different rounds never run
    together, so what they share lands on the diagonal, which mapping ignores."""
    roles = np.array([rounds.role(t) for t in range(comm.threads)])
    size = rounds.size + 1
    fold = np.zeros((size, comm.threads))
    fold[roles, np.arange(comm.threads)] = 1
    matrix = fold @ comm.matrix @ fold.T
    per_thread = ("creators", "lifetimes", "lifetimes_traced", "spawns", "instructions_together")
    metadata = {k: v for k, v in comm.metadata.items() if k not in per_thread}
    if "instructions_together" in comm.metadata:
        metadata["instructions_together"] = (fold @ np.array(comm.metadata["instructions_together"], float)).tolist()
    metadata["rounds"] = {"size": rounds.size, "count": rounds.count, "threads": comm.threads}
    return CommMatrix(matrix, None if comm.accesses is None else fold @ comm.accesses,
                      None if comm.instructions is None else fold @ comm.instructions, metadata)
