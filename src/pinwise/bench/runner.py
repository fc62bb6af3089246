"""Capability 6: run a program under several placements many times, in shuffled blocks, and
record every run in the results database as soon as it ends.

Each block runs every placement once, in a new random order derived from the experiment's seed,
so the schedule of a re-run is the same and only the missing runs are done. Never are all runs
of one placement back to back (Mazouz et al. ran them back to back; interleaving spreads the
machine's drift over all placements instead of charging it to one).
"""

from __future__ import annotations

import json
import math
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

from .. import __version__, policies
from ..cpulist import format_cpulist
from ..errors import PinwiseError
from ..processes import GroupGuard, die_with_parent, kill_session, signals_held
from ..temporary import temporary_folder
from ..pinning.launcher import launchable_program, preload_environment, whole_plan_mask, why_not_loaded
from ..pinning.log import RunResult, read_log
from ..pinning.readback import thread_count
from ..plan import Plan
from ..topology import Topology
from ..topology import to_json as topology_json
from ..vocabulary import ADAPT
from . import db
from .candidates import Candidate, unique_candidates
from .config import BenchConfig
from .counters import SoftwareCounters, rapl_energy_uj
from .noise import cpu_times, load_average, own_cpu, run_noise

#: Environment variables that change how a program runs, kept with the experiment.
RELEVANT_ENV = ("OMP_NUM_THREADS", "OMP_PLACES", "OMP_PROC_BIND", "GOMP_CPU_AFFINITY", "KMP_AFFINITY",
                "LD_PRELOAD", "MALLOC_ARENA_MAX", "GLIBC_TUNABLES")
STDERR_TAIL = 400


def run_once(argv: list[str], plan: Plan | None, time_regex: re.Pattern | None, timeout: float | None,
             counters: SoftwareCounters, guard: GroupGuard | None = None, adapt: Topology | None = None) -> db.Run:
    """Run the program once under ``plan`` and measure it. Ctrl-C kills the program and propagates.

    The program runs in a session of its own, killed when the run ends: children it leaves behind
    would disturb the next run. ``guard`` kills that session if pinwise dies meanwhile. With
    ``adapt`` (the machine), the program runs under the sampler and is placed while it runs
    (:mod:`pinwise.adapt`): the sampler, a C program, starts it, so the wall time is the program's."""
    with temporary_folder("bench") as tmp:
        log_path = str(Path(tmp) / "threads.log")
        env = preload_environment(plan, log_path)
        adapter = moves = adapt_note = None
        if adapt is not None:
            from ..adapt import BackgroundAdapter

            adapter = BackgroundAdapter(argv, adapt, Path(tmp), env)
            argv, env = adapter.command, None
        out_path, err_path = Path(tmp) / "stdout", Path(tmp) / "stderr"
        timed_out = threading.Event()
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            before, energy_before = counters.read(), rapl_energy_uj()
            load, cpu_before, mine_before = load_average(), cpu_times(), own_cpu()
            started = time.strftime("%Y-%m-%dT%H:%M:%S")
            start = time.perf_counter()
            process = watchdog = None
            try:
                with signals_held():  # a stop signal lands in this try, with the program known
                    try:
                        with whole_plan_mask(plan):
                            process = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                                       stderr=err, start_new_session=True,
                                                       preexec_fn=die_with_parent())
                    except OSError as error:
                        raise PinwiseError(f"cannot start {argv[0]}: {error.strerror}") from None
                    if guard is not None:
                        guard.watch(process.pid, session=True)
                    if adapter is not None:
                        adapter.start()
                if timeout:
                    def expire():
                        timed_out.set()
                        kill_session(process.pid)
                    watchdog = threading.Timer(timeout, expire)
                    watchdog.start()
                _, status, usage = os.wait4(process.pid, 0)
                wall = time.perf_counter() - start  # before the clean-up below, which is not the program's time
            except BaseException:
                if process is not None:
                    kill_session(process.pid)
                    process.wait()
                raise
            finally:
                if watchdog:
                    watchdog.cancel()
                if adapter is not None:
                    adapter.stop()
                    moves, adapt_note = adapter.outcome()
                if process is not None:
                    kill_session(process.pid)  # what the program left running, whatever process groups it made
                    if guard is not None:
                        guard.release()
            cpu_after, mine_after = cpu_times(), own_cpu()
            process.returncode = os.waitstatus_to_exitcode(status)
            after, energy_after = counters.read(), rapl_energy_uj()
        stdout = out_path.read_text(encoding="utf-8", errors="replace")
        stderr_tail = err_path.read_text(encoding="utf-8", errors="replace")[-STDERR_TAIL:]
        log = Path(log_path).read_text(encoding="utf-8", errors="replace") if Path(log_path).exists() else ""
        processes, threads = read_log(log)
        read_back = RunResult(process.returncode, threads, pid=process.pid, processes=processes)
    code = process.returncode
    failure = None
    if timed_out.is_set():
        failure = f"timeout after {timeout:g} s"
    elif code < 0:
        failure = f"killed by {signal.Signals(-code).name}"
    elif code > 0:
        failure = f"exit status {code}" + (f": {stderr_tail.strip().splitlines()[-1][:200]}" if stderr_tail.strip() else "")
    elif plan is not None and adapt is None and not any(p.pid == process.pid for p in processes):
        # Never a run counted under a placement it did not have (a set-user-ID program, say).
        failure = f"not pinned: the preload library did not load ({why_not_loaded(argv[0])})"
    program_time = None
    if time_regex is not None and failure is None:
        match = time_regex.search(stdout)
        if match is None:
            failure = f"time regex {time_regex.pattern!r} found nothing in the output"
        else:
            program_time, failure = read_time(match)

    def delta(name):
        return after[name] - before[name] if after[name] is not None and before[name] is not None else None

    context_switches = delta("context_switches")
    if context_switches is None:
        context_switches = usage.ru_nvcsw + usage.ru_nivcsw
    energy = None
    if energy_before is not None and energy_after is not None:
        energy = (energy_after - energy_before) / 1e6
    return db.Run(
        started=started, wall=wall, program_time=program_time, user=usage.ru_utime, sys=usage.ru_stime,
        max_rss_kb=usage.ru_maxrss, migrations=delta("migrations"), context_switches=context_switches,
        energy_j=energy, exit_status=code, failure=failure,
        misplaced=sum(1 for t in threads if plan is not None and t.slot >= 0 and not t.ran_where_asked),
        placement=(ADAPT if adapt is not None else policies.BASELINE) if plan is None else plan.cpulist(), load1=load,
        output_tail=stdout[-STDERR_TAIL:],
        threads=thread_count(read_back) if read_back.processes else None,
        slots=None if plan is None else plan.nb_slots, moves=moves, adapt_note=adapt_note,
        **run_noise(cpu_before, cpu_after, usage.ru_utime + usage.ru_stime + mine_after - mine_before))


#: The units a program may print with its time, in seconds (Google Benchmark prints ns, us, ms, s).
TIME_UNITS = {"ns": 1e-9, "nsec": 1e-9, "nanosecond": 1e-9, "nanoseconds": 1e-9,
              "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "usec": 1e-6, "microsecond": 1e-6, "microseconds": 1e-6,
              "ms": 1e-3, "msec": 1e-3, "millisecond": 1e-3, "milliseconds": 1e-3,
              "s": 1.0, "sec": 1.0, "secs": 1.0, "second": 1.0, "seconds": 1.0,
              "min": 60.0, "mins": 60.0, "minute": 60.0, "minutes": 60.0}
_NUMBER = re.compile(r"[ \t]*([-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?)")
_UNIT = re.compile(r"[ \t]*(" + "|".join(sorted(map(re.escape, TIME_UNITS), key=len, reverse=True)) + r")(?![A-Za-z])")


def read_time(match: re.Match) -> tuple[float | None, str | None]:
    """The seconds a --time-regex match says, or why it says none: its group (the whole match
    without one) is a number, with its unit inside the group ("2.27 ms") or right after it on the
    same line ("([0-9.]+)" before " ms"); no unit is seconds. "nan", "inf" and numbers too large
    for a float, and negative ones, are refused: a run's time must be a time."""
    text = match.group(1) if match.groups() else match.group(0)
    end = match.end(1) if match.groups() else match.end()
    number = _NUMBER.match(text or "")
    rest = text[number.end():] if number else ""
    unit = _UNIT.match(rest) if rest.strip() else _UNIT.match(match.string, end)
    if number is None or (rest.strip() and (unit is None or rest[unit.end():].strip())):
        return None, f"time regex matched {text!r}, which is not a number of seconds"
    value = float(number.group(1)) * TIME_UNITS[unit.group(1) if unit else "s"]
    if not math.isfinite(value):
        return None, f"time regex matched {text!r}, which is too large to be a time"
    if value < 0:
        return None, f"time regex matched {text!r}, which is negative: not a time"
    return value, None


def block_order(names: list[str], seed: int, block: int, warmup: bool) -> list[str]:
    order = list(names)
    random.Random(seed * 1_000_003 + block * 2 + int(warmup)).shuffle(order)
    return order


def open_experiment(connection, argv: list[str], config: BenchConfig, topology: Topology, new: bool, db_path: str,
                    seed: int | None) -> db.Experiment:
    """The database's experiment of this command and configuration, resumed (the number of runs
    may change); else a new one beside the others (a database holds the experiments of several
    programs). ``new`` starts a new one even when a matching one exists."""
    if not new:
        for found in reversed(db.experiments(connection)):
            if found.command == argv and found.config.same_experiment(config):
                if found.config.runs != config.runs:
                    connection.execute("UPDATE experiments SET config = ? WHERE id = ?",
                                       (json.dumps(config.to_json(), sort_keys=True), found.id))
                    found = replace(found, config=config)
                return found
    environment = {name: os.environ[name] for name in RELEVANT_ENV if name in os.environ}
    return db.create_experiment(connection, argv, config, topology_json(topology),
                                format_cpulist(sorted(topology.allowed)), environment, __version__,
                                seed if seed is not None else random.SystemRandom().randrange(1 << 31),
                                host_facts())


def host_facts() -> db.HostFacts:
    """What a report's machine header shows beside the topology: CPU model, host, kernel, CPUs."""
    import platform

    model = ""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            model = next((line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")), "")
    except OSError:
        pass
    uname = platform.uname()
    return db.HostFacts(model or uname.machine, uname.node, f"{uname.system} {uname.release}", os.cpu_count(),
                        platform.python_version())


@dataclass(frozen=True)
class BenchOptions:
    """How an experiment runs: ``runs`` measured runs per placement after ``warmup`` warm-up
    blocks; the time the program prints (``time_regex``) or wall time; runs killed after
    ``timeout`` seconds (None: after :func:`default_timeout` of the first block); ``new`` starts
    a new experiment in a database holding another; ``seed`` fixes the run order and random
    placements; ``progress`` shows a bar (None: on a terminal); ``extra_config`` is kept with the
    experiment (and must match to resume it)."""

    runs: int = 35
    warmup: int = 0
    time_regex: str | None = None
    timeout: float | None = None
    new: bool = False
    seed: int | None = None
    progress: bool | None = None
    extra_config: dict = field(default_factory=dict)
    say: object = None  # say(text): where the bench's own lines go (default: standard error)
    #: Stop, with the runs' reasons, when every run of the first block failed (auto: no verdict without data).
    stop_if_all_fail: bool = False
    #: Extending an experiment this caller made (auto's next look): no "runs already recorded" line.
    continuing: bool = False
    #: A time.monotonic() by which to stop (auto's --budget): no block starts that the last block's
    #: length says would end past it, once ``fewest`` measured blocks are done. The runs left out
    #: are not recorded (auto starts a new experiment each time it runs).
    deadline: float | None = None
    fewest: int = 0


def run_bench(argv: list[str], candidates: list[Candidate], topology: Topology, db_path: str,
              options: BenchOptions = BenchOptions(), runner=None) -> db.Experiment:
    """Run every missing run of the experiment and record each as it ends.

    ``runner`` measures one run (default :func:`run_once`, which starts the real program); tests
    give it a function with the same signature that returns generated timings with a known answer.
    """
    runs, warmup, time_regex, timeout = options.runs, options.warmup, options.time_regex, options.timeout
    say = options.say or (lambda text: print(text, file=sys.stderr))
    if runs < 1:
        raise PinwiseError(f"-r/--runs must be at least 1, not {runs}")
    if warmup < 0:
        raise PinwiseError(f"--warmup must be 0 or more, not {warmup}")
    if timeout is not None and timeout <= 0:
        raise PinwiseError(f"--timeout must be positive, not {timeout}")
    program = launchable_program(argv)
    pattern = None
    if time_regex is not None:
        try:
            pattern = re.compile(time_regex)
        except re.error as err:
            raise PinwiseError(f"--time-regex {time_regex!r} is not a regular expression ({err})") from None
    argv = [program, *argv[1:]]
    candidates, aliases, merged = _one_run_per_placement(candidates, options.extra_config.get("aliases"))
    names = [c.name for c in candidates]
    # The caller's extra_config (the command line's -n and --comm, auto's aliases, demo's
    # recommendation) is read as the database reads it.
    document = {"candidates": names, "plans": {c.name: (c.plan.cpulist() if c.plan else None) for c in candidates},
                "runs": runs, "warmup": warmup, "time_regex": time_regex, "timeout": timeout, **options.extra_config}
    if aliases:  # only then: the configuration of a bench without them stays what it was, and resumes
        document["aliases"] = aliases
    config = BenchConfig.from_json(document)
    connection = db.open_db(db_path)
    try:
        before = {e.id for e in db.experiments(connection)}
        experiment = open_experiment(connection, argv, config, topology, options.new, db_path, options.seed)
        for problem in dict.fromkeys(connection.problems):  # damaged experiments are left as they are
            say(f"pinwise: warning: {db_path}: {problem}")
        for line in merged:
            say(line)
        done = db.done_runs(connection, experiment.id)
        # (block, placement, warm-up?, position in its block)
        schedule = [(b, name, warm, position) for warm, blocks in ((1, warmup), (0, runs)) for b in range(blocks)
                    for position, name in enumerate(block_order(names, experiment.seed, b, bool(warm)))]
        todo = [item for item in schedule if item[:3] not in done]
        recorded = len(schedule) - len(todo)
        if experiment.id in before:
            if not options.continuing:
                say(f"pinwise: experiment {experiment.id} of {db_path}: {recorded}/{len(schedule)} runs already recorded"
                    + (f", {len(todo)} to run" if todo else "; nothing to run (--new measures again)"))
        elif before:
            say(f"pinwise: new experiment {experiment.id} in {db_path}, beside {len(before)} other"
                f"{'s' if len(before) > 1 else ''} (pinwise report shows them all)")
        _execute(connection, experiment, argv, candidates, topology, todo, len(schedule), pattern, timeout,
                 options.progress, runner or run_once, options.say, options.stop_if_all_fail,
                 stop_by=options.deadline, fewest=options.fewest)
        return experiment
    finally:
        connection.close()


def _one_run_per_placement(candidates: list[Candidate], known: dict | None):
    """The candidates whose CPUs differ (:func:`unique_candidates`); per kept name every name that
    stands for it: ``known`` (a caller that merged them already: auto merges mirror images too)
    and those merged here; and the lines that say the latter. Mirror images are not merged here: a
    user who names CPU 0 and CPU 1 of two identical cores may be measuring what the tree does not
    show (which CPU takes the interrupts)."""
    unique, found = unique_candidates(candidates)
    said = [f"pinwise: {', '.join(same)} and {name} place the threads on the same CPUs here: one placement, run "
            f"once and reported under {'both names' if len(same) == 1 else 'every name'}" for name, same in found.items()]
    aliases = {name: list(same) for name, same in (known or {}).items()}
    for name, same in found.items():
        aliases.setdefault(name, []).extend(n for n in same if n not in aliases[name])
    return unique, aliases, said


#: Without --timeout, a run is stopped after this many times the slowest run of the first block
#: (the first warm-up block, or the first measured block with --warmup 0), and never before
#: TIMEOUT_FLOOR seconds: a hanging program costs one bounded run per placement, not the night.
TIMEOUT_FACTOR = 10
TIMEOUT_FLOOR = 5.0


def default_timeout(first_block: list[db.Run]) -> float | None:
    """The timeout derived from the first block's good runs (None if none of them ended well)."""
    walls = [run.wall for run in first_block if run.failure is None]
    return max(TIMEOUT_FLOOR, TIMEOUT_FACTOR * max(walls)) if walls else None


def _execute(connection, experiment, argv, candidates, topology, todo, total, pattern, timeout, progress,
             runner, say, stop_if_all_fail=False, *, stop_by: float | None = None, fewest: int = 0) -> None:
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    by_name = {c.name: c for c in candidates}
    console = Console(stderr=True)

    def tell(text: str) -> None:  # above the progress bar, unless the caller takes the bench's lines
        if say is not None:
            say(text)
        else:
            console.print(text, highlight=False, markup=False, soft_wrap=True)

    show = console.is_terminal if progress is None else progress
    medians: dict[str, list[float]] = {}
    warned: set[str] = set()  # placements whose runs were said to run fewer threads than their plan
    counters = SoftwareCounters()
    guard = GroupGuard() if runner is run_once else None
    measure = partial(run_once, guard=guard) if guard is not None else runner
    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                   TextColumn("{task.fields[medians]}"), console=console, disable=not show, transient=False)
    # Without --timeout: the first block runs unbounded, then the derived timeout applies (and is said).
    first_warm = int(experiment.config.warmup > 0)
    first_block = [r for r in db.runs(connection, experiment.id, include_warmup=True)
                   if r.block == 0 and r.warmup == first_warm]
    derive = timeout is None
    # Until a run of this experiment has read its time, a time regex that misses stops the bench at once.
    any_good = any(r.failure is None for r in db.runs(connection, experiment.id, include_warmup=True))
    block_began, block_seconds = None, None  # the last whole block's length: what the next one will take
    try:
        with bar:
            task = bar.add_task("bench", total=total, completed=total - len(todo), medians="")
            for block, name, warm, position in todo:
                if position == 0:
                    now = time.monotonic()
                    if block_began is not None:
                        block_seconds = now - block_began
                    block_began = now
                    if stop_by is not None and not warm and block >= fewest and block_seconds is not None and \
                            now + block_seconds > stop_by:
                        # the bar ends full at the runs made, not stuck part way
                        made = next(t.completed for t in bar.tasks if t.id == task)
                        bar.update(task, total=made, description="stopped: the budget is spent")
                        break
                if derive and len(first_block) >= len(candidates):
                    derive = False
                    timeout = default_timeout(first_block)
                    if timeout is not None:
                        tell(f"pinwise: runs longer than {timeout:.3g} s are stopped and recorded as failed "
                             f"({TIMEOUT_FACTOR}x the slowest of the first block, at least {TIMEOUT_FLOOR:g} s; "
                             "--timeout sets it)")
                candidate = by_name[name]
                run_seed = experiment.seed * 7919 + block * 2 + warm
                plan = candidate.plan_for_run(topology, run_seed)
                bar.update(task, description=f"{'warm-up' if warm else 'block'} {block + 1} {name}")
                once = partial(measure, adapt=topology) if candidate.adapt and guard is not None else measure
                try:
                    measured = once(argv, plan, pattern, timeout, counters)
                except OSError as err:  # the temporary folder's disk is full, or its files went away
                    raise PinwiseError(f"cannot run {name}: {err.strerror}"
                                       + (f" ({err.filename})" if err.filename else "")
                                       + "; the runs before it are saved: make room and run the same command again "
                                         "to resume") from None
                result = replace(measured, block=block, policy=name, warmup=warm,
                                 seed=run_seed if candidate.random_threads else None, position=position)
                if pattern is not None and not any_good and result.failure and result.failure.startswith("time regex"):
                    _remove_if_empty(connection, experiment.id)
                    raise PinwiseError(_regex_missed(pattern, name, result))
                any_good = any_good or result.failure is None
                _record(connection, experiment.id, result)
                if fewer_threads(result) and name not in warned:
                    warned.add(name)
                    tell(f"pinwise: warning: {name}: the program ran {result.threads} thread"
                         f"{'s' if result.threads != 1 else ''}, the plan has {result.slots} slots: the program ran "
                         "fewer threads than the plan, so part of the placement places nothing (check "
                         "OMP_NUM_THREADS and the program's own thread count)")
                if block == 0 and warm == first_warm:
                    first_block.append(result)
                if stop_if_all_fail and not any_good and len(first_block) >= len(candidates):
                    raise PinwiseError(all_failed_message(first_block))
                if not warm and result.failure is None:
                    medians.setdefault(name, []).append(result.time)
                text = "  ".join(f"{n} {sorted(v)[len(v) // 2] * 1e3:.1f}ms" for n, v in medians.items())
                bar.update(task, advance=1, medians=text)
    finally:
        counters.close()
        if guard is not None:
            guard.close()


def all_failed_message(failed: list[db.Run]) -> str:
    """Why there is no verdict when every run of a block failed: each placement's reason (the
    program's exit status and its last line on standard error), said once when they agree."""
    reasons = {run.policy: run.failure for run in failed}
    if len(set(reasons.values())) == 1:
        why = f"{'every placement' if len(reasons) > 1 else next(iter(reasons))}: {next(iter(reasons.values()))}"
    else:
        why = "; ".join(f"{name}: {reason}" for name, reason in reasons.items())
    return (f"no verdict: every run of the first block failed ({why}); a placement can only be judged on runs "
            "that end well: check the command (pinwise run -- PROGRAM ARGS shows its output)")


def fewer_threads(run: db.Run) -> bool:
    """A good run whose program ran fewer threads than its plan has slots."""
    return run.failure is None and run.threads is not None and run.slots is not None and run.threads < run.slots


def _record(connection, experiment: int, run: db.Run) -> None:
    """Record a run, or stop the bench with one message if the file cannot take it (the disk is
    full, another process holds the file's lock): the runs recorded before it stay, and the same
    command resumes at this one."""
    import sqlite3

    try:
        db.record_run(connection, experiment, run)
    except sqlite3.Error as err:
        reason = (f"another process has held its lock for more than {db.BUSY_SECONDS:g} s" if db.locked(err)
                  else str(err))
        raise PinwiseError(f"cannot record the run that just ended ({reason}): the runs before it are saved; "
                           "make room (or end the other process) and run the same command again to resume") from None


def _regex_missed(pattern: re.Pattern, name: str, run: db.Run) -> str:
    tail = " | ".join(line.strip() for line in run.output_tail.strip().splitlines()[-3:])
    printed = f"its output ends with: {tail[-200:]!r}" if tail else "it printed nothing on standard output"
    if run.failure.startswith("time regex matched"):  # it found something, which is no time
        found = run.failure[len("time regex "):]
        return (f"--time-regex {pattern.pattern!r} {found}, in the output of the first run ({name}); {printed}. "
                "Fix the expression (one group around the number, its unit after it) or drop it to measure wall "
                "time; nothing was recorded")
    return (f"--time-regex {pattern.pattern!r} found nothing in the output of the first run ({name}); {printed}. "
            "Fix the expression (one group around the number) or drop it to measure wall time; nothing was recorded")


def _remove_if_empty(connection, experiment: int) -> None:
    """A new experiment stopped before its first run leaves nothing behind."""
    if not connection.execute("SELECT 1 FROM runs WHERE experiment = ? LIMIT 1", (experiment,)).fetchone():
        connection.execute("DELETE FROM experiments WHERE id = ?", (experiment,))


def interrupted_message(db_path: str) -> str:
    return (f"interrupted: every finished run is saved in {db_path}; run the same command again to resume "
            "(only the missing runs are done)")
