"""Running a program (or following a running process) with its threads placed as it runs
(:mod:`pinwise.adapt`): the sampler started beside it, its windows fed to an
:class:`~pinwise.adapt.decide.Adapter` as they come, and what happened, for the summary."""

from __future__ import annotations

import os
import select
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from .. import policies
from ..confidence import blind
from ..errors import PinwiseError
from ..pinning.launcher import find_program, program_environment
from ..processes import GroupGuard, kill_session, signals_held
from ..temporary import temporary_folder
from ..sample import (ARMS_PER_S, PERIOD_US, QUIET_PERIOD_US, SAMPLER, TRAPS_PER_CPU, WINDOW_MS, check_pid, fewer,
                      check_sampler, main_thread_gone, pass_stop, program_part, sampler_failure, start_sampler,
                      traps_per_s)
from .decide import Adapter, Move
from .limits import INTERVAL, MAX_THREADS_FOLLOWED, TICKS_PER_INTERVAL
from .windows import read_windows


@dataclass
class AdaptResult:
    returncode: int                     # as a shell gives it: 128 + N for a program killed by signal N
    exit_signal: int = 0                # N, the signal that killed the program (0: it exited)
    moves: list[Move] = field(default_factory=list)
    phases: list[tuple[float, str]] = field(default_factory=list)   # (start s, pattern)
    left_alone: dict[int, str] = field(default_factory=dict)         # thread -> why
    sampler_cpu_s: float = 0.0
    seconds: float = 0.0
    windows: int = 0                    # spans judged
    threads: int = 0
    ran_on: dict[int, set[int]] = field(default_factory=dict)        # thread -> CPUs seen running it
    ticks: int = 0                      # the sampler's windows read
    quiet_s: float = 0.0                # how long the sampler sampled at the quiet period (or slower)
    quiet_deepest: int = QUIET_PERIOD_US // PERIOD_US  # the slowest it sampled, in base periods
    rationed_s: float = 0.0             # how long it sampled at the quiet period because the traps were rationed
    steady_s: float = 0.0               # how long it armed at a share of its budget, the placement holding
    pinwise_cpu_s: float = 0.0          # CPU seconds pinwise's own process used while the program ran
    child_share: float = 0.0            # share of the samples in the program's child processes (not placed)
    child_processes: int = 0
    gave_up: tuple[float, int] | None = None  # (s, threads made) when the program made more than MAX_THREADS_FOLLOWED
    started_on_slots: int = 0           # threads made after a move that started on their slots (newcomers)
    decoded_samples: int = 0            # the sampler's samples it decoded
    untabled: int = 0                   # ... in code with no function table: blind to accesses (confidence.blind)


class JsonLinesLog:
    """--log's file, written a line at a time (each flushed as it comes). A write that fails
    (a full disk, a file that takes no writes) is said once and ends the log, never the run: the
    program goes on being placed, and the lines before stay."""

    def __init__(self, path: str, say):
        try:
            self.file = open(path, "w")  # noqa: SIM115 - closed by close(), whatever happens
        except OSError as err:
            raise PinwiseError(f"--log {path!r}: {err.strerror}") from None
        self.path, self.say = path, say

    def _do(self, step) -> None:
        if self.file is None:
            return
        try:
            step()
        except OSError as err:
            self.say(f"pinwise: warning: --log {self.path}: {err.strerror}; the log stops here, the placing goes on")
            self.close()

    def write(self, text: str) -> None:
        self._do(lambda: self.file.write(text))

    def flush(self) -> None:
        self._do(lambda: self.file.flush())

    def close(self) -> None:
        file, self.file = self.file, None
        if file is not None:
            try:
                file.close()
            except OSError:  # what it could not write was said when it failed
                pass


def run_adaptive(argv: list[str] | None, topology, *, pid: int | None = None, policy: str | None = None,
                 interval: float = INTERVAL, log_path: str | None = None, duration: float | None = None,
                 memory=None, extra_env: dict[str, str] | None = None, say=print) -> AdaptResult:
    """Run ``argv`` (or attach to process ``pid``) and place its threads while it runs (module
    docstring of pinwise.adapt); returns what happened. ``policy`` None: what analyze recommends for each phase."""
    if (argv is None) == (pid is None):
        raise PinwiseError("adapt a program (argv) or a running process (pid), not both")
    if not 0.01 <= interval <= 600:
        raise PinwiseError(f"the interval must be between 10 ms and 10 min, not {interval:g} s")
    if policy is not None:
        policy = policies.lookup(policy).name
    check_sampler()
    if pid is not None and check_pid(pid):
        say(f"pinwise: note: {main_thread_gone(pid)}")
    program = find_program(argv) if argv is not None else None
    log = JsonLinesLog(log_path, say) if log_path else None
    adapter = Adapter(topology, policy, log, say, memory, interval)
    adapter.rehearse()  # the deciding stages loaded and run once now, not while the program waits
    started, cpu_started = time.perf_counter(), time.process_time()
    try:
        with temporary_folder("adapt") as tmp:
            stream_path, out_path, error_path = (Path(tmp, n) for n in ("windows.txt", "result.txt", "error.txt"))
            stream_path.touch()
            if program is not None:  # the preload library reads it (pinwise.adapt.newcomers); an attach has none
                adapter.newcomers.path = Path(tmp, "slots")
            command = [str(SAMPLER), "--out", str(out_path), "--error-file", str(error_path),
                       *_sampling(stream_path, interval, len(topology.allowed)),
                       *(["--duration-ms", str(round(duration * 1000))] if duration else [])]
            command += program_part(argv if program is not None else None, pid,
                                    program_environment(None, None, memory=memory, extra_env=extra_env,
                                                        adapt=adapter.newcomers.path)
                                    if program is not None else {})
            returncode = _drive(command, stream_path, adapter, interval, attached=pid is not None)
            if returncode != 0:
                raise sampler_failure(returncode, error_path)
            facts = _result_facts(out_path)
    finally:
        if log is not None:
            log.close()
    return AdaptResult(moves=adapter.moves, phases=adapter.phases, left_alone=adapter.left_alone,
                       seconds=round(time.perf_counter() - started, 3), windows=len(adapter.windows),
                       threads=max([len(w.tids) for w in adapter.windows + adapter.fresh] +
                                   [adapter.gave_up[1] if adapter.gave_up else 0]),
                       ran_on=adapter.ran_on, ticks=adapter.ticks, gave_up=adapter.gave_up,
                       started_on_slots=adapter.newcomers.started,
                       pinwise_cpu_s=round(time.process_time() - cpu_started, 3), **facts)


def tick_ms(interval: float) -> int:
    """The sampler's window, in ms, for an adaptive run of ``interval`` seconds (its floor: 10 ms)."""
    return max(10, round(interval * 1000 / TICKS_PER_INTERVAL))


def _sampling(stream_path: Path, interval: float, cpus: int) -> list[str]:
    """The sampler's options for an adaptive run on ``cpus`` CPUs: its stream of windows, a quarter
    interval each, the quiet period while no thread shares data, the traps rationed."""
    return ["--stream", str(stream_path), "--interval-ms", str(tick_ms(interval)), "--period-us", str(PERIOD_US),
            "--quiet-period-us", str(QUIET_PERIOD_US), "--window-ms", str(WINDOW_MS), "--arms-per-s", str(ARMS_PER_S),
            "--traps-per-s", str(traps_per_s(cpus)), "--traps-per-thread", str(TRAPS_PER_CPU)]


def _drive(command: list[str], stream_path: Path, adapter: Adapter, interval: float, attached: bool) -> int:
    """Start the sampler, feed its windows to the adapter as they come (the sampler writes a byte
    to a pipe after each that holds watchpoint hits or new threads, and an interval after the last
    byte: pinwise wakes then, not at a poll, and not for windows with nothing to judge), stop it
    cleanly. The adapter steers the sampler's watchpoint budget through a second pipe (its
    ``steer``: 's' while the placement holds, 'w' when it may not, 'b' when it looks stale)."""
    wake, told = os.pipe()
    steer, steering = os.pipe()
    os.set_blocking(steering, False)
    try:
        with GroupGuard() as guard, open(stream_path, encoding="utf-8", errors="replace") as stream:
            try:
                notify = ["--notify-fd", str(told), "--notify-idle-ms", str(round(interval * 1000)),
                          "--control-fd", str(steer)]
                process = start_sampler([*command[:1], *notify, *command[1:]], guard, attached,
                                        pass_fds=(told, steer))
            finally:
                os.close(told)
                os.close(steer)
            adapter.steer = lambda budget: _tell(steering, {"steady": b"s", "whole": b"w", "burst": b"b",
                                                            "quit": b"q"}[budget])
            return _feed(process, stream, wake, adapter, interval, attached)
    finally:
        adapter.steer = None
        os.close(wake)
        os.close(steering)


def _tell(fd: int, byte: bytes) -> None:
    """One byte to the sampler's control pipe; a sampler that has ended reads none, and needs none."""
    try:
        os.write(fd, byte)
    except OSError:
        pass


def _feed(process, stream, wake: int, adapter: Adapter, interval: float, attached: bool) -> int:
    """The sampler's windows to the adapter as they come, until the sampler ends; its exit status."""
    pending = ""  # what the sampler wrote that is not yet a whole window record
    returncode = None
    try:
        while True:
            try:
                # a stop lands between windows: never in one half judged, nor among threads half moved
                with signals_held():
                    pending += stream.read()  # only what was appended since the last read
                    windows, used = read_windows(pending)
                    pending = pending[used:]
                    for window in windows:
                        feed_window(adapter, window)
                if returncode is not None:
                    return returncode
                # woken by the sampler after a window with news, each interval, and when it ends (the
                # pipe closes)
                ready, _, _ = select.select([wake], [], [], interval)
                if ready and not os.read(wake, 4096):  # closed: the sampler is ending
                    time.sleep(_poll_step(interval) / 4)
                returncode = process.poll()
            except KeyboardInterrupt as interrupt:  # the program ends with Ctrl-C as it would alone
                pass_stop(process, interrupt, attached)
    finally:
        kill_session(process.pid)


def feed_window(adapter: Adapter, window) -> None:
    """One window to the adapter, unless the program has made more threads than an adaptive run
    follows (limits.MAX_THREADS_FOLLOWED): then it stops, says so once, and tells the sampler to
    stop sampling (the program runs on, its threads where they are)."""
    if adapter.gave_up is not None:
        return
    if len(window.tids) > MAX_THREADS_FOLLOWED:
        adapter.gave_up = (window.end_s, len(window.tids))
        why = (f"the program has made {len(window.tids):,} threads, more than --adapt follows "
               f"({MAX_THREADS_FOLLOWED:,}: its windows are read as matrices of every thread made, their cost the "
               "square)")
        adapter._record(t=round(window.end_s, 3), event="stopped", threads=len(window.tids), why=why)
        adapter.say(f"pinwise: {window.end_s:.1f} s: {why}: adapting stopped, the threads stay where they are")
        if adapter.steer is not None:
            adapter.steer("quit")
        return
    placed = adapter.newcomers.settle(window.tids, adapter.pinned, window.end_s)  # made since the last window
    if placed:
        adapter._record(t=round(window.end_s, 3), event="new threads", threads=list(placed), cpus=list(placed.values()))
    placed_at = adapter.placed_tick
    try:
        adapter.feed(window)
    except PinwiseError as err:  # a plan the policy cannot make for this window
        adapter._record(t=window.end_s, decision=f"no plan: {err}")
    adapter.newcomers.publish(window.tids, adapter.pinned, adapter.left_alone, remake=adapter.placed_tick != placed_at)


def _poll_step(interval: float) -> float:
    """The longest pinwise waits for the sampler's next window before it looks whether the
    sampler has ended (a bench run's adapter, which reads the file without a pipe, reads it this
    often: a window is judged within this of its end)."""
    return min(interval / 4, 0.02)


def _result_facts(out_path: Path) -> dict:
    """From the sampler's result, the AdaptResult fields it holds: the program's exit status, the
    seconds sampled at the quiet period or slower and the slowest period (in base periods), the
    CPU seconds the sampler used, the seconds it sampled at the quiet period because the
    watchpoints were rationed, those it armed at a share of its budget because the placement
    held, the share of the samples in the program's child processes, and the signal that killed
    the program (0: none)."""
    facts = {"returncode": 0, "exit_signal": 0, "quiet_s": 0.0, "quiet_deepest": QUIET_PERIOD_US // PERIOD_US,
             "sampler_cpu_s": 0.0, "rationed_s": 0.0, "steady_s": 0.0, "child_share": 0.0, "child_processes": 0}
    samples = children = 0
    try:
        for line in out_path.read_text().splitlines():
            words = line.split()
            if words[:1] == ["exit-status"]:
                facts["returncode"] = max(int(words[1]), 0)
            elif words[:1] == ["exit-signal"]:
                facts["exit_signal"] = max(int(words[1]), 0)
            elif words[:1] == ["quiet"] and "seconds" in words:
                facts["quiet_s"] = float(words[words.index("seconds") + 1])
                if "deepest-ns" in words:
                    facts["quiet_deepest"] = max(facts["quiet_deepest"],
                                                 int(words[words.index("deepest-ns") + 1]) // (PERIOD_US * 1000))
            elif words[:1] == ["cpu-seconds"]:
                facts["sampler_cpu_s"] = float(words[1])
            elif words[:1] == ["rationed"] and "seconds" in words:
                facts["rationed_s"] = float(words[words.index("seconds") + 1])
            elif words[:1] == ["steady"] and "seconds" in words:
                facts["steady_s"] = float(words[words.index("seconds") + 1])
            elif words[:1] == ["samples"]:
                samples = int(words[1])
            elif words[:1] == ["samples-child"]:
                children = int(words[1])
            elif words[:1] == ["child-processes"]:
                facts["child_processes"] = int(words[1])
            elif words[:1] == ["decoded"] and "untabled" in words:
                facts["decoded_samples"] = int(words[words.index("samples") + 1])
                facts["untabled"] = int(words[words.index("untabled") + 1])
    except (OSError, ValueError, IndexError):
        pass
    facts["child_share"] = children / samples if samples else 0.0
    return facts


def shortcomings(result: AdaptResult) -> list[str]:
    """What kept an adaptive run from placing the program's threads by what they share, in words:
    code it could not decode, work in child processes it does not follow, more threads than it
    follows (empty when nothing did). Said after the run, and kept with a bench's adapt runs: a
    run that saw nothing reads as "nothing to gain" otherwise."""
    found = []
    unseen = blind({"decoded_samples": result.decoded_samples, "untabled": result.untabled},
                   "--adapt cannot place its threads by it")
    if unseen:
        found.append(unseen)
    if result.child_share >= 0.5:
        found.append(f"{result.child_share:.0%} of the samples were in {result.child_processes} child process(es), "
                     "whose threads --adapt does not place: run it on the program that creates the threads (not a "
                     "shell or launcher around it)")
    if result.gave_up is not None:
        found.append(f"adapting stopped at {result.gave_up[0]:.1f} s: the program had made {result.gave_up[1]:,} "
                     f"threads, more than --adapt follows ({MAX_THREADS_FOLLOWED:,}); from then on the threads ran "
                     "where they were, and new ones started on the last move's slots (or where the OS put them)")
    return found


def summary_lines(result: AdaptResult, memory=None) -> list[str]:
    """What ``pinwise run --adapt`` prints at the end."""
    judged = (f"{result.windows} judgment{'' if result.windows == 1 else 's'} of {result.ticks} "
              f"window{'' if result.ticks == 1 else 's'}")
    lines = [f"adapted: {judged} in {result.seconds:.1f} s, "
             f"{result.threads} thread{'' if result.threads == 1 else 's'}, {len(result.moves)} placement(s) applied, "
             f"{sum(m.moved for m in result.moves)} thread move(s); "
             f"the sampler used {result.sampler_cpu_s:.2f} s of CPU, pinwise {result.pinwise_cpu_s:.2f} s"]
    lines += [f"warning: {why}" for why in shortcomings(result)]
    slower = fewer(QUIET_PERIOD_US // PERIOD_US, result.quiet_deepest)
    saved = [f"sampling {slower} less often for {result.quiet_s:.1f} s, while no watchpoint "
             "saw a thread touch another's data"] if result.quiet_s >= 0.05 else []
    if result.rationed_s >= 0.05:
        saved.append(f"sampling {QUIET_PERIOD_US // PERIOD_US}x less often for {result.rationed_s:.1f} s, "
                     "while a quarter of the samples offered more than the watchpoints' budget")
    if result.steady_s >= 0.05:
        held = "the placement held" if result.moves else "the OS's placement held (no move would gain)"
        saved.append(f"watchpoints at a quarter of their budget for {result.steady_s:.1f} s, while {held}")
    if saved:
        lines.append("the sampler spared the program: " + "; ".join(saved))
    if result.phases:
        lines.append("phases seen: " + ", ".join(f"{pattern} from {at:.1f} s" for at, pattern in result.phases))
    for move in result.moves:
        cpus = ",".join("-" if cpu < 0 else str(cpu) for cpu in move.cpus)  # -: a thread not placed (ended, left alone)
        lines.append(f"  {move.at_s:.1f} s: {move.policy}, CPUs {cpus} ({move.moved} moved; "
                     + ("threads crowded on a CPU" if move.cost_before == float("inf") else f"cost {move.cost_before:,.0f}")
                     + f" -> {move.cost_after:,.0f})")
    if result.started_on_slots:
        lines.append(f"  {result.started_on_slots} thread(s) made after a move started on their slots")
    for thread, why in sorted(result.left_alone.items()):
        lines.append(f"  thread {thread}: {why}")
    if result.ran_on:
        lines.append("ran on: " + "; ".join(f"thread {k} CPU {','.join(map(str, sorted(cpus)))}"
                                          for k, cpus in sorted(result.ran_on.items())))
    if memory is not None and result.moves:
        lines.append("note: memory stays where it was placed; threads moved to another NUMA node may now reach "
                     "their pages remotely")
    return lines


class BackgroundAdapter:
    """An adaptive run inside a bench run (pinwise.bench.runner.run_once): the sampler starts the
    program (``command`` replaces the program's argv; ``env`` is given to the program only), and a
    thread of pinwise's feeds its windows to an :class:`Adapter` until :meth:`stop`."""

    def __init__(self, argv: list[str], topology, folder: Path, env: dict[str, str] | None,
                 interval: float = INTERVAL, policy: str | None = None):
        check_sampler()
        self.stream = folder / "windows.txt"
        self.stream.touch()
        self.out = folder / "sampled.txt"
        self.command = [str(SAMPLER), "--out", str(self.out),
                        *_sampling(self.stream, interval, len(topology.allowed))]
        find_program(argv)  # it can start: said now, not by the sampler
        self.adapter = Adapter(topology, policy, None, say=lambda text: None, interval=interval)
        self.adapter.newcomers.path = folder / "slots"
        self.command += program_part(argv, None, {**(env or {}), "PINWISE_ADAPT": str(folder / "slots")})
        self.adapter.rehearse()  # before the program starts, as run_adaptive does
        self.interval = interval
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._follow, daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _follow(self) -> None:
        pending = ""
        try:
            stream = open(self.stream, encoding="utf-8", errors="replace")  # noqa: SIM115 - closed below
        except OSError:
            return
        with stream:
            while True:
                finished = self.done.wait(_poll_step(self.interval))
                try:
                    pending += stream.read()  # only what was appended since the last read
                except OSError:
                    return
                windows, used = read_windows(pending)
                pending = pending[used:]
                for window in windows:
                    feed_window(self.adapter, window)  # no plan for a window: the threads stay where they are
                if finished:
                    return

    def stop(self) -> None:
        self.done.set()
        if self.thread.is_alive():
            self.thread.join(timeout=10)

    def outcome(self) -> tuple[int, str | None]:
        """After :meth:`stop`: the placements the run applied, and its :func:`shortcomings` in one
        line (None when there were none)."""
        adapter = self.adapter
        result = AdaptResult(gave_up=adapter.gave_up, **_result_facts(self.out))
        return len(adapter.moves), "; ".join(shortcomings(result)) or None
