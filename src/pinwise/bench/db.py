"""The results database: one SQLite file, every run committed the moment it ends.

Tables:
  experiments(id, created, command, config, machine, cpuset, environment, version, seed)
      command: JSON list (the program and its arguments); config: JSON (policies, runs, warmup,
      threads, time regex, timeout, comm file); machine: the topology as pinwise JSON.
  runs(id, experiment, block, policy, warmup, position, placement, seed, started, wall, program_time,
       user, sys, max_rss_kb, migrations, context_switches, energy_j, exit_status, failure, misplaced,
       load1, others_cpu, steal_cpu, all_cpu)
      one row per run; (experiment, block, policy, warmup) is unique, which is what makes a
      re-run resume instead of repeating. Times in seconds; failure is NULL for a good run. The last
      four say how busy the machine was (bench/noise.py): the load average at the start of the
      run, and the CPU seconds other processes used, the hypervisor stole, and that passed on all
      CPUs during it. Databases written before they existed get them (empty) when opened to write.

A crash, kill -9 or Ctrl-C of the bench loses at most the run in flight.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import astuple, dataclass, fields
from pathlib import Path

from ..errors import PinwiseError

SCHEMA = """
CREATE TABLE IF NOT EXISTS experiments (
    id INTEGER PRIMARY KEY,
    created TEXT NOT NULL,
    command TEXT NOT NULL,
    config TEXT NOT NULL,
    machine TEXT,
    cpuset TEXT,
    environment TEXT,
    version TEXT,
    seed INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY,
    experiment INTEGER NOT NULL REFERENCES experiments(id),
    block INTEGER NOT NULL,
    policy TEXT NOT NULL,
    warmup INTEGER NOT NULL DEFAULT 0,
    position INTEGER,
    placement TEXT,
    seed INTEGER,
    started TEXT,
    wall REAL,
    program_time REAL,
    user REAL,
    sys REAL,
    max_rss_kb INTEGER,
    migrations INTEGER,
    context_switches INTEGER,
    energy_j REAL,
    exit_status INTEGER,
    failure TEXT,
    misplaced INTEGER,
    load1 REAL,
    others_cpu REAL,
    steal_cpu REAL,
    all_cpu REAL,
    UNIQUE (experiment, block, policy, warmup)
);
"""



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
    block: int = 0
    policy: str = ""
    warmup: int = 0
    position: int | None = None
    seed: int | None = None

    @property
    def time(self) -> float:
        """The run's time: what the program printed if it was read, else wall time."""
        return self.program_time if self.program_time is not None else self.wall


RUN_FIELDS = tuple(f.name for f in fields(Run))
#: Columns added after the first release: (name, SQL type), added to older databases on open.
ADDED_COLUMNS = (("load1", "REAL"), ("others_cpu", "REAL"), ("steal_cpu", "REAL"), ("all_cpu", "REAL"))


@dataclass(frozen=True)
class Experiment:
    """One bench of one command: its configuration and the machine it ran on (a row of
    ``experiments``)."""

    id: int
    created: str
    command: list[str]
    config: dict
    cpuset: str | None
    environment: dict
    version: str | None
    seed: int

    @property
    def label(self) -> str:
        return " ".join([Path(self.command[0]).name, *self.command[1:]]) if self.command else "?"


def open_db(path: str | Path, create: bool = True) -> sqlite3.Connection:
    path = Path(path)
    if not create and not path.exists():
        raise PinwiseError(f"results database {str(path)!r} does not exist (pinwise bench --db {path} creates it)")
    if path.is_dir():
        raise PinwiseError(f"{str(path)!r} is a directory, not a results database")
    try:
        connection = sqlite3.connect(str(path), isolation_level=None)  # autocommit: every run lands at once
        connection.execute("PRAGMA journal_mode=WAL")
        if create:
            connection.executescript(SCHEMA)
            present = {row[1] for row in connection.execute("PRAGMA table_info(runs)")}
            for name, kind in ADDED_COLUMNS:
                if name not in present:
                    connection.execute(f"ALTER TABLE runs ADD COLUMN {name} {kind}")
        else:
            tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if not {"experiments", "runs"} <= tables:
                raise PinwiseError(f"{str(path)!r} is an SQLite file but not a pinwise results database")
    except sqlite3.DatabaseError as err:
        raise PinwiseError(f"{str(path)!r} is not a readable results database ({err})") from None
    connection.row_factory = sqlite3.Row
    return connection


def _experiment(row: sqlite3.Row) -> Experiment:
    return Experiment(row["id"], row["created"], json.loads(row["command"]), json.loads(row["config"]),
                      row["cpuset"], json.loads(row["environment"] or "{}"), row["version"], row["seed"])


def experiments(connection: sqlite3.Connection) -> list[Experiment]:
    return [_experiment(row) for row in connection.execute("SELECT * FROM experiments ORDER BY id")]


def latest_experiment(connection: sqlite3.Connection) -> Experiment | None:
    row = connection.execute("SELECT * FROM experiments ORDER BY id DESC LIMIT 1").fetchone()
    return _experiment(row) if row else None


def create_experiment(connection: sqlite3.Connection, command: list[str], config: dict, machine: str, cpuset: str,
                      environment: dict, version: str, seed: int) -> Experiment:
    created = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    cursor = connection.execute(
        "INSERT INTO experiments (created, command, config, machine, cpuset, environment, version, seed) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (created, json.dumps(command), json.dumps(config, sort_keys=True), machine, cpuset, json.dumps(environment),
         version, seed))
    return Experiment(cursor.lastrowid, created, command, config, cpuset, environment, version, seed)


def done_runs(connection: sqlite3.Connection, experiment: int) -> set[tuple[int, str, int]]:
    return {(row["block"], row["policy"], row["warmup"]) for row in
            connection.execute("SELECT block, policy, warmup FROM runs WHERE experiment = ?", (experiment,))}


def record_run(connection: sqlite3.Connection, experiment: int, run: Run) -> None:
    names = ", ".join(("experiment",) + RUN_FIELDS)
    marks = ", ".join("?" for _ in range(len(RUN_FIELDS) + 1))
    connection.execute(f"INSERT INTO runs ({names}) VALUES ({marks})", (experiment, *astuple(run)))


def runs(connection: sqlite3.Connection, experiment: int, include_warmup: bool = False) -> list[Run]:
    """The experiment's runs in the order they ended (warm-up runs only if asked)."""
    query = (f"SELECT {', '.join(RUN_FIELDS)} FROM runs WHERE experiment = ?"
             + ("" if include_warmup else " AND warmup = 0") + " ORDER BY id")
    return [Run(*row) for row in connection.execute(query, (experiment,))]
