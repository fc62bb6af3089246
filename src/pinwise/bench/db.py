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
import os
import sqlite3
import stat
import time
import urllib.parse
from pathlib import Path

from ..errors import PinwiseError
from ..files import check_output_file
from .config import BenchConfig
from .records import (ADDED_COLUMNS, ADDED_EXPERIMENT_COLUMNS, EXPERIMENT_COLUMNS, REQUIRED_RUN_COLUMNS,
                      RUN_FIELDS, Experiment, HostFacts, Run, experiment_of, machine_shape, run_damage)

__all__ = ["Database", "Experiment", "HostFacts", "Run", "RUN_FIELDS", "SCHEMA_VERSION", "UNREADABLE", "check_target",
           "create_experiment", "damaged", "done_runs", "experiments", "latest_experiment", "locked", "open_db",
           "record_run", "runs"]

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


def experiments(connection: Database) -> list[Experiment]:
    """Every readable experiment in order; damaged ones are named in ``connection.problems``."""
    found = []
    for row in connection.execute("SELECT * FROM experiments ORDER BY id"):
        try:
            found.append(experiment_of(row))
        except ValueError as err:
            connection.problems.append(f"experiment {row['id']} is damaged ({err}): skipped")
    return found


def latest_experiment(connection: Database) -> Experiment | None:
    row = connection.execute("SELECT * FROM experiments ORDER BY id DESC LIMIT 1").fetchone()
    if row is None:
        return None
    try:
        return experiment_of(row)
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
                      host or HostFacts(), machine_shape(machine))


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
        damage = run_damage(row[1:])
        if damage is None:
            found.append(Run(*row[1:]))
        else:
            connection.problems.append(f"run {row[0]} of experiment {experiment} is damaged ({damage}): skipped")
    return found
