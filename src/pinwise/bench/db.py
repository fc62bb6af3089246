"""The results database: one SQLite file, every run committed the moment it ends.

Tables:
  experiments(id, created, command, config, machine, cpuset, environment, version, seed, host)
      command: JSON list (the program and its arguments); config: JSON (candidates, plans, runs,
      warmup, time regex, timeout...: pinwise.bench.config); machine: the topology as pinwise JSON; host: JSON
      (cpu_model, host, kernel, cpus, python), what a report's machine header shows. Experiments of
      several programs live side by side; a bench resumes the one of its command and configuration.
  runs(id, experiment, block, policy, warmup, position, placement, seed, started, wall, program_time,
       user, sys, max_rss_kb, migrations, context_switches, energy_j, exit_status, failure, misplaced,
       load1, others_cpu, steal_cpu, all_cpu, threads, slots, moves, adapt_note)
      one row per run; (experiment, block, policy, warmup) is unique, which is what makes a
      re-run resume instead of repeating. Times in seconds; failure is NULL for a good run. load1 to
      all_cpu say how busy the machine was (bench/noise.py): the load average at the start of the
      run, and the CPU seconds other processes used (a little below zero where the kernel's ticks
      rounded that way), the hypervisor stole, and that passed on all CPUs during it. threads: how
      many threads the program ran, each taking a slot of the plan (its main program's, launchers
      aside), against the plan's slots. moves and adapt_note: an adapt run's placements applied and
      what kept it from placing the threads by what they share (bench.runner). Databases written before
      these columns existed get them (empty) when opened to write.

A crash, kill -9 or Ctrl-C of the bench loses at most the run in flight.

The file carries its format in ``PRAGMA user_version`` (SCHEMA_VERSION; 0 before it was set). One
bench writes it at a time (an flock on the file; a second is refused before it runs anything),
in WAL mode so that reports can read meanwhile, and leaves it in rollback mode, one file alone.
Reports open it read-only and never change it. Every opening runs SQLite's quick integrity check;
a row whose fields do not hold what they should is named and skipped, never half-read.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import sqlite3
import stat
import time
import urllib.parse
from dataclasses import dataclass, field, fields
from pathlib import Path

from ..errors import PinwiseError
from ..files import check_output_file
from .config import BenchConfig

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
    seed INTEGER NOT NULL,
    host TEXT
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
    threads INTEGER,
    slots INTEGER,
    moves INTEGER,
    adapt_note TEXT,
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


#: ``PRAGMA user_version`` of the files this pinwise writes; 0 is a file from before it was set.
SCHEMA_VERSION = 1
#: What to do with a database SQLite cannot read back.
_RESCUE = "copy out what is readable with: sqlite3 {path} .recover | sqlite3 rescued.db"
#: What every SQLite file starts with.
SQLITE_MAGIC = b"SQLite format 3\x00"


def _rescue(path: str, writing: bool) -> str:
    """How to rescue a damaged database, and (for a bench, which takes --db) to go on without it."""
    return _RESCUE.format(path=path) + ("; or give another --db" if writing else "")


class Database(sqlite3.Connection):
    """A connection to a results database. ``problems`` names the rows that were read damaged
    and skipped; a writer also holds the file's lock until it is closed."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.problems: list[str] = []
        self.lock_fd: int | None = None

    def close(self) -> None:
        if self.lock_fd is not None:
            # A writer leaves one file behind, with no -wal and -shm beside it: it can be copied or
            # reported read-only as it stands. Readers still open keep it in WAL mode, which is fine.
            try:
                self.execute("PRAGMA journal_mode=DELETE")
            except sqlite3.Error:
                pass
        super().close()
        if self.lock_fd is not None:  # after SQLite's own descriptors: closing ours earlier would drop their locks
            os.close(self.lock_fd)
            self.lock_fd = None


#: Seconds to wait for another process's lock on the file (a bench committing a run takes
#: milliseconds; a writer holding it longer is named in the error).
BUSY_SECONDS = 30.0


def open_db(path: str | Path, create: bool = True) -> Database:
    """Open the results database: to write (``create``: made if missing, locked against a second
    writer) or only to read (the file is never changed, so a read-only file can be reported).
    A reader sees one snapshot of the file until it is closed: rows another process has written
    but not committed never show, however long it holds them.

    Refused with one message: a folder or a device, a file that is not SQLite or is damaged
    (integrity check), an SQLite file of something else, one written by a newer pinwise, one
    another bench writes, or one another process keeps locked."""
    path = Path(path)
    name = str(path)
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        if not create:
            raise PinwiseError(f"results database {name!r} does not exist (pinwise bench --db {path} creates it)") from None
        mode = stat.S_IFREG
    except OSError as err:
        raise PinwiseError(f"cannot reach results database {name!r}: {err.strerror}") from None
    if stat.S_ISDIR(mode):
        raise PinwiseError(f"{name!r} is a directory, not a results database")
    if not stat.S_ISREG(mode):
        raise PinwiseError(f"{name!r} is not a file (a device or a pipe), so it cannot be a results database")
    lock_fd = _lock(path) if create else None
    connection = None
    try:
        if create:
            # autocommit: each run lands at once; the name as bytes, so that one not in UTF-8 opens too
            connection = sqlite3.connect(os.fsencode(name), isolation_level=None, factory=Database,
                                         timeout=BUSY_SECONDS)
        else:
            connection = _open_read_only(path)
        connection.lock_fd, lock_fd = lock_fd, None
        _check(connection, name, create)
        if create:
            _prepare_to_write(connection)
    except UNREADABLE as err:
        if connection is not None:
            connection.close()
        raise damaged(name, err, create) from None
    except BaseException:
        if connection is not None:
            connection.close()
        raise
    finally:
        if lock_fd is not None:
            os.close(lock_fd)
    connection.row_factory = sqlite3.Row
    connection.text_factory = _text_of  # damaged text reads as text, and the row is judged by its fields
    return connection


def check_target(path: str | Path) -> None:
    """Refuse, before any work, what :func:`open_db` would refuse to write (a folder, a device, a
    file that is no results database, a folder that cannot be written), without making the file:
    auto traces and analyses before it benches, and a file made then would outlive a failure."""
    path = Path(path)
    if path.is_dir():
        raise PinwiseError(f"{str(path)!r} is a directory, not a results database")
    if not path.exists():
        check_output_file(path, "results database")
        return
    open_db(path, create=False).close()  # read-only: the same checks, nothing changed
    if not os.access(path, os.R_OK | os.W_OK):
        raise PinwiseError(f"cannot open results database {str(path)!r} to write: permission denied")


def _text_of(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")


#: What SQLite raises on a file it cannot read (a message with bytes that are not UTF-8 is the second).
UNREADABLE = (sqlite3.DatabaseError, UnicodeDecodeError)
#: SQLite's result codes for a file another connection holds (SQLITE_BUSY, SQLITE_LOCKED).
_BUSY = (5, 6)


def locked(err: Exception) -> bool:
    """Whether SQLite refused because another process holds the file's lock."""
    return getattr(err, "sqlite_errorcode", None) in _BUSY or "database is locked" in str(err)


def damaged(path: str, err: Exception, writing: bool = False) -> PinwiseError:
    """The message for a file SQLite cannot read: on open, or past the integrity check. A file that
    is no SQLite file at all is not offered SQLite's rescue; one that holds JSON is told which
    command reads what pinwise writes as JSON."""
    if locked(err):
        return PinwiseError(f"{path!r} is locked by another process, which has held it for more than "
                            f"{BUSY_SECONDS:g} s: wait for it to end, or give another database")
    try:
        with open(path, "rb") as file:
            start = file.read(len(SQLITE_MAGIC))
    except OSError:
        start = SQLITE_MAGIC  # unreadable now: judged by SQLite's message alone
    if not start.startswith(SQLITE_MAGIC):
        json_text = start.lstrip()[:1] in (b"{", b"[")
        return PinwiseError(f"{path!r} is not a results database: it is no SQLite file"
                            + ("; it holds JSON (a simulation is shown by pinwise report --simulation FILE, a comm "
                               "matrix read by pinwise analyze FILE)" if json_text else "")
                            + ("; give another --db" if writing else ""))
    reason = "SQLite's message is not text" if isinstance(err, UnicodeDecodeError) else str(err)
    return PinwiseError(f"{path!r} is not a readable results database ({reason}): " + _rescue(path, writing))


def _lock(path: Path) -> int:
    """An exclusive lock on the file for one writer (flock: independent of SQLite's own locks)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as err:
        raise PinwiseError(f"cannot open results database {str(path)!r} to write: {err.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise PinwiseError(f"another pinwise is writing to {str(path)!r} now: wait for it to end (pinwise report "
                           f"{path} shows its finished runs meanwhile), or give another --db") from None
    return fd


def _open_read_only(path: Path) -> Database:
    uri = "file:" + urllib.parse.quote(os.fsencode(path.absolute())) + "?mode=ro"
    connection = sqlite3.connect(uri, uri=True, isolation_level=None, factory=Database, timeout=BUSY_SECONDS)
    try:
        connection.execute("BEGIN")  # one snapshot for every read until the connection closes
        connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return connection
    except sqlite3.OperationalError as err:
        connection.close()
        if locked(err):  # never read around a writer's lock: its uncommitted rows may be in the file
            raise
        # A WAL file in a folder we cannot write, without its -shm file: read it as it stands.
        connection = sqlite3.connect(uri + "&immutable=1", uri=True, isolation_level=None, factory=Database)
        connection.execute("BEGIN")
        return connection


def _check(connection: Database, name: str, writing: bool) -> None:
    """Refuse a damaged file, a newer pinwise's file, and an SQLite file of something else."""
    verdict = [row[0] for row in connection.execute("PRAGMA quick_check(5)")]
    if verdict != ["ok"]:
        found = "; ".join(" ".join(str(line).split()) for line in verdict)  # SQLite's report spans lines
        raise PinwiseError(f"{name!r} is damaged ({found}): " + _rescue(name, writing))
    version = connection.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise PinwiseError(f"{name!r} was written by a newer pinwise (results format {version}, this one reads up "
                           f"to {SCHEMA_VERSION}): upgrade pinwise to read it, or give another --db")
    tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if not tables and writing:
        return
    if not {"experiments", "runs"} <= tables:
        raise PinwiseError(f"{name!r} is an SQLite file but not a pinwise results database"
                           + (": give another --db" if writing else ""))
    for table, required in (("experiments", EXPERIMENT_COLUMNS), ("runs", REQUIRED_RUN_COLUMNS)):
        present = {row[1] for row in connection.execute(f"PRAGMA table_info({table})")}
        missing = [c for c in required if c not in present]
        if missing:
            raise PinwiseError(f"{name!r} is not a pinwise results database this version reads: its {table} table "
                               f"has no column {', '.join(missing)}")


def _prepare_to_write(connection: Database) -> None:
    connection.execute("PRAGMA journal_mode=WAL")
    connection.executescript(SCHEMA)
    for table, added in (("runs", ADDED_COLUMNS), ("experiments", ADDED_EXPERIMENT_COLUMNS)):
        present = {row[1] for row in connection.execute(f"PRAGMA table_info({table})")}
        for name, kind in added:
            if name not in present:
                connection.execute(f"ALTER TABLE {table} ADD COLUMN {name} {kind}")
    connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def _json(text, kind: type, what: str):
    try:
        value = json.loads(text) if isinstance(text, str) else None
    except (ValueError, RecursionError):
        value = None
    if not isinstance(value, kind):
        raise ValueError(f"{what} is not a JSON {kind.__name__}")
    return value


def _experiment(row: sqlite3.Row) -> Experiment:
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
                      row["seed"], host, _shape(row["machine"] if "machine" in keys else None))


def _shape(machine) -> str:
    """The synthetic description of the topology kept as pinwise JSON ("" if it cannot be read)."""
    if not isinstance(machine, str):
        return ""
    try:
        from ..topology import from_json

        return from_json(machine).shape
    except Exception:  # noqa: BLE001 - a header fact: a damaged topology only leaves it out
        return ""


def experiments(connection: Database) -> list[Experiment]:
    """Every readable experiment in order; damaged ones are named in ``connection.problems``."""
    found = []
    for row in connection.execute("SELECT * FROM experiments ORDER BY id"):
        try:
            found.append(_experiment(row))
        except ValueError as err:
            connection.problems.append(f"experiment {row['id']} is damaged ({err}): skipped")
    return found


def latest_experiment(connection: Database) -> Experiment | None:
    row = connection.execute("SELECT * FROM experiments ORDER BY id DESC LIMIT 1").fetchone()
    if row is None:
        return None
    try:
        return _experiment(row)
    except ValueError as err:
        raise PinwiseError(f"the latest experiment in the database ({row['id']}) is damaged ({err}): add --new to "
                           "start another in it, or give another --db") from None


def create_experiment(connection: Database, command: list[str], config: BenchConfig, machine: str, cpuset: str,
                      environment: dict, version: str, seed: int, host: HostFacts | None = None) -> Experiment:
    created = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    cursor = connection.execute(
        "INSERT INTO experiments (created, command, config, machine, cpuset, environment, version, seed, host) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (created, json.dumps(command), json.dumps(config.to_json(), sort_keys=True), machine, cpuset, json.dumps(environment),
         version, seed, json.dumps((host or HostFacts()).to_document())))
    return Experiment(cursor.lastrowid, created, command, config, cpuset, environment, version, seed,
                      host or HostFacts(), _shape(machine))


def done_runs(connection: Database, experiment: int) -> set[tuple[int, str, int]]:
    return {(row["block"], row["policy"], row["warmup"]) for row in
            connection.execute("SELECT block, policy, warmup FROM runs WHERE experiment = ?", (experiment,))}


def record_run(connection: Database, experiment: int, run: Run) -> None:
    names = ", ".join(("experiment",) + RUN_FIELDS)
    marks = ", ".join("?" for _ in range(len(RUN_FIELDS) + 1))
    connection.execute(f"INSERT INTO runs ({names}) VALUES ({marks})", (experiment, *(getattr(run, name) for name in RUN_FIELDS)))


def runs(connection: Database, experiment: int, include_warmup: bool = False) -> list[Run]:
    """The experiment's runs in the order they ended (warm-up runs only if asked). A damaged row
    (text where a number belongs, a negative time...) is named in ``connection.problems`` and
    skipped; columns an older file lacks read as empty."""
    present = {row[1] for row in connection.execute("PRAGMA table_info(runs)")}
    columns = ", ".join(name if name in present else f"NULL AS {name}" for name in RUN_FIELDS)
    query = (f"SELECT id, {columns} FROM runs WHERE experiment = ?"
             + ("" if include_warmup else " AND warmup = 0") + " ORDER BY id")
    found = []
    for row in connection.execute(query, (experiment,)):
        damage = next((f"{name} is {value!r}" for name, value in zip(RUN_FIELDS, row[1:])
                       if not _RUN_CHECKS[name](value)), None)
        if damage is None:
            found.append(Run(*row[1:]))
        else:
            connection.problems.append(f"run {row[0]} of experiment {experiment} is damaged ({damage}): skipped")
    return found


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
