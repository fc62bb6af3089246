"""The records of the results database (:mod:`pinwise.bench.db`): a run and an experiment as
Python reads them, and what each field must hold to be read (a damaged row is named and skipped,
never half-read)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, fields
from pathlib import Path

from .config import BenchConfig


@dataclass(frozen=True)
class Run:
    """One run of the program under one placement: a row of the ``runs`` table.

    The runner fills in what it measured; the bench adds where the run sits in the experiment
    (``block``, ``policy``, ``warmup``, ``position``, and ``seed`` for a random placement)."""

    started: str                       # local time at the start, ISO 8601
    wall: float                        # seconds from fork to the end of the wait
    program_time: float | None         # seconds the program printed (--time-regex), if read
    user: float                        # CPU seconds (rusage of the whole process tree)
    sys: float
    max_rss_kb: int
    migrations: int | None             # software perf events; None where unavailable
    context_switches: int | None
    energy_j: float | None             # RAPL, where readable
    exit_status: int                   # negative: killed by that signal
    failure: str | None                # None for a good run, else why it does not count
    misplaced: int                     # threads read back off the CPU their slot names
    placement: str                     # the CPU list the run used, or "os"
    load1: float | None = None         # busy-ness of the machine (bench/noise.py)
    others_cpu: float | None = None
    steal_cpu: float | None = None
    all_cpu: float | None = None
    threads: int | None = None         # threads read back, each in a slot (None: nothing read back)
    slots: int | None = None           # the plan's slots (None: the OS placed the threads)
    block: int = 0
    policy: str = ""
    warmup: int = 0
    position: int | None = None
    seed: int | None = None
    #: An ``adapt`` run (pinwise.adapt): the placements it applied, and what kept it from placing the
    #: threads as asked, in words (None: it saw the whole program; both None for a static placement).
    moves: int | None = None
    adapt_note: str | None = None
    #: The end of what the program printed: not stored, for the messages of the run that just ended.
    output_tail: str = field(default="", compare=False, metadata={"stored": False})

    @property
    def time(self) -> float:
        """The run's time: what the program printed if it was read, else wall time."""
        return self.program_time if self.program_time is not None else self.wall


RUN_FIELDS = tuple(f.name for f in fields(Run) if f.metadata.get("stored", True))
#: Columns added after the first release: (name, SQL type), added to older databases on open.
ADDED_COLUMNS = (("load1", "REAL"), ("others_cpu", "REAL"), ("steal_cpu", "REAL"), ("all_cpu", "REAL"),
                 ("threads", "INTEGER"), ("slots", "INTEGER"), ("moves", "INTEGER"), ("adapt_note", "TEXT"))
#: The same for the experiments table.
ADDED_EXPERIMENT_COLUMNS = (("host", "TEXT"),)
REQUIRED_RUN_COLUMNS = ("experiment",) + tuple(f for f in RUN_FIELDS if f not in dict(ADDED_COLUMNS))
EXPERIMENT_COLUMNS = ("id", "created", "command", "config", "cpuset", "environment", "version", "seed")


@dataclass(frozen=True)
class HostFacts:
    """The machine a bench ran on, as a report's header names it: CPU model, host name, kernel,
    CPU count, Python (empty, or None, where a file from before they were kept has none)."""

    cpu_model: str = ""
    host: str = ""
    kernel: str = ""
    cpus: int | None = None
    python: str = ""

    @classmethod
    def from_document(cls, document: dict) -> HostFacts:
        """The facts of the ``host`` column; one of the wrong kind is left out (they are for the
        header only)."""
        def text(key: str) -> str:
            value = document.get(key)
            return value if isinstance(value, str) else ""

        cpus = document.get("cpus")
        return cls(text("cpu_model"), text("host"), text("kernel"),
                   cpus if isinstance(cpus, int) and not isinstance(cpus, bool) else None, text("python"))

    def to_document(self) -> dict:
        return {"cpu_model": self.cpu_model, "host": self.host, "kernel": self.kernel, "cpus": self.cpus,
                "python": self.python}


@dataclass(frozen=True)
class Experiment:
    """One bench of one command: its configuration and the machine it ran on (a row of
    ``experiments``)."""

    id: int
    created: str
    command: list[str]
    config: BenchConfig
    cpuset: str | None
    environment: dict
    version: str | None
    seed: int
    host: HostFacts = field(default_factory=HostFacts)  # the machine's facts (empty before they were kept)
    shape: str = ""                            # the machine's synthetic description, as pinwise topo shows it

    @property
    def label(self) -> str:
        return " ".join([Path(self.command[0]).name, *self.command[1:]]) if self.command else "?"


def _json(text, kind: type, what: str):
    try:
        value = json.loads(text) if isinstance(text, str) else None
    except (ValueError, RecursionError):
        value = None
    if not isinstance(value, kind):
        raise ValueError(f"{what} is not a JSON {kind.__name__}")
    return value


def experiment_of(row) -> Experiment:
    """The row as an Experiment; ValueError naming the field if it is damaged."""
    command = _json(row["command"], list, "command")
    config = _json(row["config"], dict, "config")
    environment = _json(row["environment"] or "{}", dict, "environment")
    if not command or not all(isinstance(a, str) for a in command):
        raise ValueError("command is not a list of words")
    config = BenchConfig.from_json(config)
    if not isinstance(row["seed"], int):
        raise ValueError(f"seed is {row['seed']!r}, not a whole number")
    keys = row.keys()
    host = HostFacts()
    if "host" in keys and row["host"] is not None:  # facts for the header only: unreadable ones are left out
        try:
            host = HostFacts.from_document(_json(row["host"], dict, "host"))
        except ValueError:
            pass
    return Experiment(row["id"], str(row["created"]), command, config, row["cpuset"], environment, row["version"],
                      row["seed"], host, machine_shape(row["machine"] if "machine" in keys else None))


def machine_shape(machine) -> str:
    """The synthetic description of the topology kept as pinwise JSON ("" if it cannot be read)."""
    if not isinstance(machine, str):
        return ""
    try:
        from ..topology import from_json

        return from_json(machine).shape
    except Exception:  # noqa: BLE001 - a header fact: a damaged topology only leaves it out
        return ""


def _number(value, optional: bool = False, whole: bool = False, positive: bool = False) -> bool:
    if value is None:
        return optional
    if isinstance(value, bool) or not isinstance(value, int if whole else (int, float)):
        return False
    return math.isfinite(value) and (whole or (value > 0 if positive else value >= 0))


def _text(value, optional: bool = False) -> bool:
    return isinstance(value, str) or (optional and value is None)


#: What each column of a run must hold to be read.
_RUN_CHECKS = {
    # a wall time of 0 (or -0.0) measured nothing, and no speedup can be taken against it; a printed
    # time of 0 is the program's clock too coarse, which the summary says (it compares wall times then)
    "started": _text, "wall": lambda v: _number(v, positive=True),
    "program_time": lambda v: _number(v, optional=True),
    "user": _number, "sys": _number, "max_rss_kb": lambda v: _number(v, whole=True),
    "migrations": lambda v: _number(v, optional=True, whole=True),
    "context_switches": lambda v: _number(v, optional=True, whole=True),
    "energy_j": lambda v: _number(v, optional=True), "exit_status": lambda v: _number(v, whole=True),
    "failure": lambda v: _text(v, optional=True), "misplaced": lambda v: _number(v, whole=True),
    "placement": _text, "load1": lambda v: _number(v, optional=True),
    # negative where the kernel's ticks rounded the other way (bench/noise.py)
    "others_cpu": lambda v: v is None or _number(abs(v) if isinstance(v, (int, float)) else v),
    "steal_cpu": lambda v: _number(v, optional=True),
    "all_cpu": lambda v: _number(v, optional=True), "block": lambda v: _number(v, whole=True),
    "threads": lambda v: _number(v, optional=True, whole=True), "slots": lambda v: _number(v, optional=True, whole=True),
    "policy": _text, "warmup": lambda v: v in (0, 1), "position": lambda v: _number(v, optional=True, whole=True),
    "seed": lambda v: _number(v, optional=True, whole=True),
    "moves": lambda v: _number(v, optional=True, whole=True), "adapt_note": lambda v: _text(v, optional=True),
}


def run_damage(values) -> str | None:
    """What is wrong with a ``runs`` row's fields (in RUN_FIELDS order), or None if nothing is."""
    return next((f"{name} is {value!r}" for name, value in zip(RUN_FIELDS, values) if not _RUN_CHECKS[name](value)),
                None)
