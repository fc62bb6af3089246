"""Communication matrices: how much each pair of threads shares, the input of every mapping policy.

File formats (both read by :func:`read_comm`, JSON written by :func:`write_comm`):

- JSON, ``{"format": "pinwise-comm", "version": 1, "threads": T, "matrix": [[...], ...]}``, with
  optional ``"accesses"`` (AccV: memory accesses per thread), ``"instructions"`` (per thread) and
  the fields of :class:`TraceInfo` (how the tracer, ``pinwise trace``, measured it). Other keys
  are kept as they are.
- CSV as numalize-style tools write it: T lines of T numbers separated by commas (or semicolons or
  blanks); thread i's row is line i. Lines starting with ``#`` are comments.

A matrix must be square, finite and non-negative. An asymmetric one is symmetrised as
(M + Mᵀ)/2 with a warning (a communication event counts for both threads). The diagonal (a
thread with itself) is kept as given; mapping policies ignore it.
"""

from __future__ import annotations

import json
import re
import warnings
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from types import MappingProxyType

import numpy as np

from .errors import PinwiseError
from .files import read_document, read_input, write_text_atomic
from .plan import Rounds

COMM_FORMAT = "pinwise-comm"
#: Larger values overflow the sums of the metrics and costs; only ratios between entries matter.
MAX_VALUE = 1e100
#: Threads (or ranks) of the largest matrix read: 4096 is Valgrind's --max-threads in pinwise
#: trace; the matrix takes 128 MiB, its policies' work grows faster still.
MAX_MATRIX_THREADS = 4096
_CSV_NUMBER = re.compile(r"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]{1,3})?\Z")


class SymmetrisedWarning(UserWarning):
    """The matrix was not symmetric and was replaced by (M + Mᵀ)/2."""


def _ints(value) -> tuple[int, ...]:
    return tuple(int(v) for v in value)


def _pairs(value) -> tuple[tuple[int, int], ...]:
    return tuple((int(a), int(b)) for a, b in value)


def _spawns(value) -> tuple[tuple[str, int], ...]:
    events = tuple((str(kind), int(thread)) for kind, thread in value)
    if any(kind not in ("create", "join") for kind, _ in events):
        raise ValueError("events are create or join")
    return events


def _creators(value) -> tuple[int | None, ...]:
    return tuple(None if v is None else int(v) for v in value)


def _rounds(value) -> Rounds:
    return Rounds(int(value["size"]), int(value["count"]), int(value.get("threads", 0)))


def _window(value) -> dict:
    if len(value) != 1 or next(iter(value)) not in ("accesses", "milliseconds"):
        raise ValueError("one of accesses or milliseconds")
    return {k: int(v) for k, v in value.items()}


@dataclass(frozen=True)
class HotLine:
    """A cache line that carried much of the communication (the tracer's hot-line records): an
    address the program accessed in it, its events over the whole run, what the address is (a
    variable and offset, or the mapping), an instruction seen reading and one writing it (address,
    function, file:line when the program has debug info), and since it became hot: reads and
    writes per thread and events per pair of threads ``(i, j, events)``, i < j; ``before``: its
    accesses before it became hot, to 11 significant bits (a thread spinning on a flag alone, before
    another shares it, makes millions that carry no event)."""

    address: int
    events: int
    where: str
    read_code: str | None
    write_code: str | None
    reads: tuple[int, ...]
    writes: tuple[int, ...]
    pairs: tuple[tuple[int, int, int], ...]
    before: int = 0

    @property
    def accesses(self) -> int:
        return sum(self.reads) + sum(self.writes)

    @property
    def writers(self) -> tuple[int, ...]:
        return tuple(t for t, n in enumerate(self.writes) if n)

    @property
    def readers(self) -> tuple[int, ...]:
        return tuple(t for t, n in enumerate(self.reads) if n)

    def to_document(self) -> dict:
        return {"address": f"0x{self.address:x}", "events": self.events, "where": self.where,
                "read_code": self.read_code, "write_code": self.write_code, "reads": list(self.reads),
                "writes": list(self.writes), "pairs": [list(p) for p in self.pairs], "before": self.before}


def _hot_lines(value) -> tuple[HotLine, ...]:
    return tuple(HotLine(int(v["address"], 16) if isinstance(v["address"], str) else int(v["address"]),
                         int(v["events"]), str(v["where"]),
                         None if v.get("read_code") is None else str(v["read_code"]),
                         None if v.get("write_code") is None else str(v["write_code"]),
                         _ints(v["reads"]), _ints(v["writes"]),
                         tuple((int(i), int(j), int(n)) for i, j, n in v["pairs"]), int(v.get("before", 0)))
                 for v in value)


def _time_blocks(value) -> MappingProxyType:
    blocks = [[int(v) if i % 3 < 2 else float(v) for i, v in enumerate(block)] for block in value["blocks"]]
    if int(value["accesses"]) <= 0 or any(len(block) % 3 for block in blocks):
        raise ValueError("time blocks of (a, b, events) triples, a positive length")
    return MappingProxyType({"accesses": int(value["accesses"]), "blocks": blocks})


def _environment(value) -> MappingProxyType:
    return MappingProxyType({str(k): str(v) for k, v in value.items()})


#: TraceInfo field -> (JSON type accepted, conversion to the field's type).
_FIELD_READERS = {
    "model": (str, str), "tool": (str, str), "source": (str, str), "partial": (bool, bool),
    "command": (list, lambda v: tuple(str(a) for a in v)), "exit_status": (int, int), "seconds": ((int, float), float),
    "total_accesses": (int, int), "lines_tracked": (int, int), "lines_dropped": (int, int),
    "memory_bytes": (int, int), "cache_bytes": (int, int), "window": (dict, _window),
    "creators": (list, _creators), "spawns": (list, _spawns), "lifetimes": (list, _pairs),
    "lifetimes_traced": (list, _pairs), "instructions_together": (list, _ints), "rounds": (dict, _rounds),
    "sharing": (str, str), "hot_lines": (list, _hot_lines), "environment": (dict, _environment),
    "backend": (str, str), "sampling": (dict, lambda v: MappingProxyType(dict(v))),
    "time_blocks": (dict, _time_blocks), "unseen": (str, str),
}


@dataclass(frozen=True)
class TraceInfo:
    """How a matrix was measured and what the trace saw of the threads' structure: the fields
    ``pinwise trace`` writes beside the matrix (all optional; a CSV matrix has none of them)."""

    model: str = "diener"                    # "diener" (communication events) or "mazouz" (alpha)
    command: tuple[str, ...] | None = None   # the traced program and its arguments
    tool: str | None = None                  # the tracer's version
    source: str | None = None                # the file a CSV matrix came from
    partial: bool = False                    # the program did not end normally: what was seen so far
    exit_status: int | None = None
    seconds: float | None = None             # how long the trace took
    total_accesses: int = 0                  # memory accesses the tracer saw
    lines_tracked: int = 0                   # cache lines in its table
    lines_dropped: int = 0                   # accesses to lines past --max-lines, not counted
    memory_bytes: int = 0                    # the tracer's memory: table, matrix, line cache
    cache_bytes: int = 0
    window: dict | None = None               # {"accesses": N} or {"milliseconds": N}
    #: Per thread (creation order, main = 0): the thread that created it (None for main).
    creators: tuple[int | None, ...] | None = None
    #: The main thread's pthread_create/join calls in program order: ("create"|"join", thread), of a
    #: native run, which may create more rounds of workers than the trace saw (see pinwise.rounds.find_rounds).
    spawns: tuple[tuple[str, int], ...] | None = None
    #: Per thread, [start, end] in ns of one native run, and in traced accesses under Valgrind.
    lifetimes: tuple[tuple[int, int], ...] | None = None
    lifetimes_traced: tuple[tuple[int, int], ...] | None = None
    #: Per thread, instructions executed while another thread was alive.
    instructions_together: tuple[int, ...] | None = None
    #: Set on a matrix folded to one thread per role (pinwise.rounds.fold_rounds).
    rounds: Rounds | None = None
    #: "any": every access to a line another thread touched in the window is an event (the paper's
    #: definition); "write": only pairs of accesses of which one writes. None: older traces (any).
    sharing: str | None = None
    #: The lines that carried the most events, hottest first (see HotLine).
    hot_lines: tuple[HotLine, ...] | None = None
    #: Variables pinwise set in the traced program's environment (OpenMP's passive waiting).
    environment: MappingProxyType | None = None
    #: The tracer that measured it: None or "valgrind" (every access), "sample" (an estimate from
    #: clock samples and watchpoints, pinwise.sample).
    backend: str | None = None
    #: The sampling backend's own record: clock period, samples, events, skipped samples by
    #: reason, events per time block (for the bootstrap of pinwise.confidence).
    sampling: MappingProxyType | None = None
    #: The Valgrind tracer's time blocks: {"accesses": the accesses in each, "blocks": per block, flat
    #: (a, b, events) triples of the pairs a < b that had any}; the last block is cut short by the
    #: end. None: a sampled trace (its blocks are in ``sampling``), or more threads than the tracer
    #: keeps blocks for. pinwise.phases reads them.
    time_blocks: MappingProxyType | None = None
    #: What a native run showed that the trace did not see (fewer threads under Valgrind, work in
    #: forked copies or in programs it started), in words; None when it saw it all or was not compared.
    unseen: str | None = None
    #: Keys of the file that pinwise does not know, kept as they were.
    extra: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))

    @classmethod
    def from_document(cls, document: dict, source: str) -> TraceInfo:
        """The known keys of a comm document, each checked; one error names a key of the wrong type."""
        values, extra = {}, {}
        for key, value in document.items():
            if key in ("format", "version", "threads", "matrix", "accesses", "instructions", "other_matrix"):
                continue
            if key not in _FIELD_READERS:
                extra[key] = value
                continue
            kind, convert = _FIELD_READERS[key]
            if value is None:
                continue
            try:
                if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
                    raise TypeError
                values[key] = convert(value)
            except (TypeError, ValueError, KeyError, AttributeError, OverflowError):
                raise PinwiseError(f"{source}: \"{key}\" has an unexpected value ({str(value)[:60]})") from None
        return cls(**values, extra=MappingProxyType(extra))

    def to_document(self) -> dict:
        """The non-empty fields as JSON values (tuples as lists), unknown keys included."""
        document = dict(self.extra)
        for item in fields(self):
            value = getattr(self, item.name)
            if item.name == "extra" or value is None:
                continue
            if isinstance(value, Rounds):
                value = {"size": value.size, "count": value.count, "threads": value.threads}
            elif item.name == "hot_lines":
                value = [line.to_document() for line in value]
            elif isinstance(value, MappingProxyType):
                value = dict(value)
            elif isinstance(value, tuple):
                value = [list(v) if isinstance(v, tuple) else v for v in value]
            document[item.name] = value
        return document


@dataclass(frozen=True, eq=False)
class CommMatrix:
    """T x T communication between threads (thread ids in creation order, main = 0)."""

    matrix: np.ndarray
    accesses: np.ndarray | None = None
    instructions: np.ndarray | None = None
    info: TraceInfo = field(default_factory=TraceInfo)
    #: The same program's matrix under the other sharing model (:attr:`TraceInfo.sharing` names
    #: this one's), which the tracer counts beside it: analyze says where the two readings differ.
    other: np.ndarray | None = None

    @property
    def threads(self) -> int:
        return int(self.matrix.shape[0])

    @classmethod
    def from_array(cls, values, source: str = "matrix", **kwargs) -> CommMatrix:
        return cls(validate_matrix(values, source), **kwargs)

    def to_json(self) -> str:
        document = {"format": COMM_FORMAT, "version": 1, "threads": self.threads, **self.info.to_document(),
                    "matrix": _plain(self.matrix)}
        if self.accesses is not None:
            document["accesses"] = _plain(self.accesses)
        if self.instructions is not None:
            document["instructions"] = _plain(self.instructions)
        if self.other is not None:
            document["other_matrix"] = _plain(self.other)
        return json.dumps(document)


def _plain(array: np.ndarray):
    """Whole numbers as ints, so files stay small and exact."""
    if np.all(np.mod(array, 1) == 0):
        return array.astype(np.int64).tolist()
    return array.tolist()


def _only_numbers(values) -> bool:
    """Lists of lists of ints and floats (no booleans, no strings), as JSON gives them."""
    return isinstance(values, list) and all(
        isinstance(row, list) and all(type(v) in (int, float) for v in row) for row in values)


def validate_matrix(values, source: str = "matrix") -> np.ndarray:
    if isinstance(values, list) and not _only_numbers(values):
        raise PinwiseError(f"{source}: the matrix must be a list of rows of numbers (no strings, booleans or nulls)")
    try:
        with np.errstate(over="raise"):
            matrix = np.array(values, dtype=np.float64)
    except (TypeError, ValueError, OverflowError, FloatingPointError):
        raise PinwiseError(f"{source}: the matrix must hold numbers only (finite, below 1e308)") from None
    if matrix.ndim != 2 or matrix.size == 0:
        raise PinwiseError(f"{source}: the matrix must be a non-empty square table of numbers (got shape {matrix.shape})")
    if matrix.shape[0] != matrix.shape[1]:
        raise PinwiseError(f"{source}: the matrix is not square ({matrix.shape[0]} rows x {matrix.shape[1]} columns)")
    if matrix.shape[0] > MAX_MATRIX_THREADS:
        raise _too_large(source)
    if not np.all(np.isfinite(matrix)):
        raise PinwiseError(f"{source}: the matrix holds NaN or infinite values")
    if np.any(matrix < 0):
        i, j = np.argwhere(matrix < 0)[0]
        raise PinwiseError(f"{source}: the matrix holds a negative value ({matrix[i, j]:g} at row {i}, column {j})")
    if np.any(matrix > MAX_VALUE):
        raise PinwiseError(f"{source}: the matrix holds values above {MAX_VALUE:g}; scale it down (only ratios matter)")
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
    if (vector.shape != (threads,) or not np.all(np.isfinite(vector)) or np.any(vector < 0)
            or np.any(vector > MAX_VALUE) or not all(type(v) in (int, float) for v in document[name])):
        raise PinwiseError(f"{source}: \"{name}\" must hold {threads} non-negative numbers up to {MAX_VALUE:g}, "
                           "one per thread")
    return vector


def _too_large(source: str) -> PinwiseError:
    return PinwiseError(f"{source} holds a matrix of more than {MAX_MATRIX_THREADS} threads, the most pinwise reads")


def parse_comm(text: str, source: str = "<comm>") -> CommMatrix:
    """A matrix file's text (the formats in the module's docstring). A matrix past
    MAX_MATRIX_THREADS is refused before it is parsed: its rows would fill the memory first."""
    # A JSON matrix of T threads holds about T^2 commas: counted before json.loads builds the lists.
    if text.count(",") > MAX_MATRIX_THREADS * (MAX_MATRIX_THREADS + 64):
        raise _too_large(source)
    stripped = text.lstrip()
    if stripped.startswith("["):  # a bare JSON matrix: [[0, 5], [5, 0]]
        try:
            rows = json.loads(text)
        except (ValueError, RecursionError) as err:
            raise PinwiseError(f"{source} is not valid JSON ({str(err)[:80]})") from None
        return CommMatrix(validate_matrix(rows, source), info=TraceInfo(source=source))
    if stripped.startswith("{"):
        document = read_document(text, source, COMM_FORMAT, "a pinwise communication matrix", newest=1,
                                 format_optional=True)
        matrix = validate_matrix(document.get("matrix"), source)
        threads = document.get("threads", matrix.shape[0])
        if type(threads) is not int:  # "2", 2.0 or true is no count of threads (bool is an int)
            raise PinwiseError(f"{source}: \"threads\" is {json.dumps(threads)[:40]}, not a whole number")
        if threads != matrix.shape[0]:
            raise PinwiseError(f"{source}: \"threads\" says {threads} but the matrix has {matrix.shape[0]} rows")
        other = None
        if document.get("other_matrix") is not None:
            other = validate_matrix(document["other_matrix"], f"{source} (other_matrix)")
            if other.shape != matrix.shape:
                raise PinwiseError(f"{source}: \"other_matrix\" is {other.shape[0]} x {other.shape[1]}, the matrix "
                                   f"{matrix.shape[0]} x {matrix.shape[1]}")
        return CommMatrix(matrix, _vector(document, "accesses", matrix.shape[0], source),
                          _vector(document, "instructions", matrix.shape[0], source),
                          TraceInfo.from_document(document, source), other)
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        fields = [f for f in line.replace(";", ",").replace("\t", ",").replace(" ", ",").split(",") if f != ""]
        if len(fields) > MAX_MATRIX_THREADS or len(rows) >= MAX_MATRIX_THREADS:
            raise _too_large(source)
        if not all(_CSV_NUMBER.match(f) for f in fields):  # float() would read "1_0", "inf", other scripts' digits
            raise PinwiseError(f"{source}, line {number}: {line[:40]!r} is not a row of numbers")
        rows.append([float(f) for f in fields])
    if not rows:
        raise PinwiseError(f"{source} is empty: a matrix file needs T rows of T numbers")
    if len({len(r) for r in rows}) != 1:
        raise PinwiseError(f"{source}: rows have different lengths ({sorted({len(r) for r in rows})})")
    return CommMatrix(validate_matrix(rows, source), info=TraceInfo(source=source))


def read_comm(path: str | Path) -> CommMatrix:
    return parse_comm(read_input(path, "communication matrix file"), str(path))


def write_comm(comm: CommMatrix, path: str | Path) -> None:
    write_text_atomic(path, comm.to_json() + "\n")
