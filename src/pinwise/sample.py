"""Capability 13: the communication matrix estimated outside the program, at its own speed.

``pinwise trace --backend sample -- prog`` and ``pinwise trace --pid PID`` run pinwise's sampler
(native/sampler/pw_sample.c, whose header explains the method: ComDetective's address samples and
watchpoints, with a software clock and Capstone instead of a PMU). Threads run side by side as
they do without pinwise, so a spinning thread is sampled as often as it runs, not through whole
time slices as under Valgrind.

The result is the same comm file as the Valgrind tracer's, so analyze, map, bench, auto, simulate
and report take it unchanged, with the backend's own fields in ``TraceInfo.sampling``: the clock
period, the samples and events taken, why samples gave no address, and the events per time block
(:func:`pinwise.confidence.pattern_confidence` resamples them). It is a statistical estimate: an
entry is the number of watchpoint traps weighted by how often the pair's samples were watched.

Started programs run with the preload library observing (PINWISE_OBSERVE, pins nothing): its log
numbers the threads as ``pinwise run`` pins them and records the main thread's create and join
calls, so workers created in rounds fold as they do after a Valgrind trace.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType

import numpy as np

from .comm import CommMatrix, TraceInfo, write_comm
from .plan import Rounds
from .rounds import FOLD_ABOVE, fold_hot_lines, fold_sampling, rounds_in, rounds_to_write, summed_by
from .errors import PinwiseError
from .pinning.launcher import NATIVE_DIR, find_program, preload_environment
from .pinning.live import ended
from .processes import GroupGuard, die_with_parent, how_it_ended, kill_session, not_a_program, signals_held, \
    stat_fields, user_environment
from .temporary import temporary_folder

SAMPLER = NATIVE_DIR / "bin" / "pinwise-sample"
TOOL_VERSION = "pinwise-sample 1"
#: Defaults of ``pinwise trace --backend sample`` (measured in benchmarks/trace_overhead.py).
PERIOD_US = 1000
WINDOW_MS = 20
ARMS_PER_S = 1000
#: The longest a watchpoint waits (the sampler's bound on --window-ms).
MAX_WINDOW_MS = 100_000
#: The sampling period, in periods, before the first trap and while none has trapped for a while
#: (quiet sampling in pw_sample.c, doubled after each further 100 ms without one, up to 4 times it):
#: a program whose threads share nothing pays for a quarter of the samples or fewer. ``pinwise trace
#: --backend sample`` and ``run --adapt`` both sample so (benchmarks/trace_overhead.py: a compute-bound
#: 2-thread program on an AMD EPYC guest ran 1.033x its native time at the base period throughout,
#: 1.008x so; private work 1.033x and 1.001x). The sample counts stay in base periods (each sample
#: taken slower weighs its periods), the matrix in the same units.
QUIET_FACTOR = 4
QUIET_PERIOD_US = QUIET_FACTOR * PERIOD_US
MAX_QUIET_US = 10_000_000  # the sampler's bound on --quiet-period-us: a slower --period is never quiet
#: ``pinwise run --adapt``'s watchpoints: armed no faster than gives about this many traps a second
#: for each CPU the program may use and each live thread of it, whichever are fewer
#: (--traps-per-s and --traps-per-thread in pw_sample.c, at the share that trapped lately, never
#: above ARMS_PER_S): each costs the thread it traps on interrupts, and once most trap, fewer tell
#: as much (on 2 CPUs the sampler cost a hand-pinned contending pair 5.6% unrationed, 4.3% at 250
#: a second; 100 ran two phases 1-1.7% faster than 250; 4 threads of all-to-all on 16 cores paid
#: 9% for 800 a second, before the cap per thread).
TRAPS_PER_CPU = 50
#: Context switches per second above which a thread gets no watchpoint when the sampler runs per
#: task (SWITCH_LIMIT in pw_sample.c), and above which its watchpoints are rationed to a few a
#: second when it runs system-wide (ARMED_COST_SHARE: 1% of 20 ms windows at 3.3 us a switch).
SWITCH_LIMIT = 2000
RATIONED_ABOVE = 10000
#: The sampler's exit statuses that are a refusal, with its one line as the message.
_REFUSALS = {2: "usage", 3: "refused", 4: "no process", 5: "failed"}


def traps_per_s(cpus: int) -> int:
    """``pinwise run --adapt``'s --traps-per-s for a program that may use ``cpus`` CPUs."""
    return min(ARMS_PER_S, TRAPS_PER_CPU * max(2, cpus))


def check_sampler() -> Path:
    if not SAMPLER.exists():
        raise PinwiseError("pinwise was built without its sampler (Capstone's headers were missing): install them "
                           "(Debian/Ubuntu: libcapstone-dev; Fedora: capstone-devel) and reinstall pinwise, or trace "
                           "with --backend valgrind")
    return SAMPLER


def sampling_permitted() -> tuple[bool, str]:
    """Whether this process may sample its own programs with perf_event_open, and why (or why not):
    what ``pinwise auto`` decides its backend by."""
    if not SAMPLER.exists():
        return False, "pinwise was built without its sampler (no Capstone)"
    try:
        paranoid = int(Path("/proc/sys/kernel/perf_event_paranoid").read_text())
    except (OSError, ValueError):
        return False, "this kernel has no perf events (/proc/sys/kernel/perf_event_paranoid is missing)"
    if paranoid > 2 and os.geteuid() != 0:
        return False, f"kernel.perf_event_paranoid is {paranoid} (2 or less lets a user sample their own programs)"
    return True, f"perf events are open to this user (kernel.perf_event_paranoid {paranoid})"


def check_pid(pid: int) -> bool:
    """One clear line for a process that is not there to attach to. True where its main thread has
    ended (pthread_exit) while others run: those are sampled, numbered from 0 in the order they
    started, as ``pin --pid`` numbers them (main_thread_gone says so)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        raise PinwiseError(f"no process {pid}") from None
    except PermissionError:
        owner = "someone else"
        try:
            owner = f"user {os.stat(f'/proc/{pid}').st_uid}"
        except OSError:
            pass
        raise PinwiseError(f"process {pid} belongs to {owner}: sample it as that user or as root") from None
    why = not_a_program(pid)
    if why:
        raise PinwiseError(why)
    state = stat_fields(f"/proc/{pid}/stat")[:1]
    if not state:
        raise PinwiseError(f"no process {pid}")
    if state[0] not in ("Z", "X"):
        return False
    try:
        others = [tid for tid in map(int, os.listdir(f"/proc/{pid}/task")) if tid != pid and not ended(pid, tid)]
    except OSError:
        others = []
    if not others:
        raise PinwiseError(f"process {pid} has exited (a zombie its parent has not reaped): nothing to sample")
    return True


def main_thread_gone(pid: int) -> str:
    """The note for a process attached to after its main thread ended (:func:`check_pid`)."""
    return (f"process {pid}'s main thread has ended (pthread_exit): its other threads are numbered from 0 in the "
            "order they started, as `pinwise pin --pid` numbers them")


def sample(argv: list[str] | None, output: str | Path, *, pid: int | None = None, duration: float | None = None,
           period_us: int = PERIOD_US, window_ms: int = WINDOW_MS, arms_per_s: int = ARMS_PER_S,
           sharing: str = "write", readonly: bool = False, stack: bool = False, quiet: bool = False,
           progress: bool | None = None, seed: int | None = None,
           extra_env: dict[str, str] | None = None, one_thread: bool = False,
           per_task: bool = False, quiet_sampling: bool = True) -> CommMatrix:
    """Sample ``argv`` (or attach to process ``pid`` for ``duration`` seconds, None: until it ends
    or Ctrl-C) and write its communication matrix to ``output``. ``sharing`` as in
    :func:`pinwise.trace.trace`; ``quiet`` discards the program's standard output. A program that
    ran one thread, or whose threads never ran while sampled, is refused (nothing to measure) unless
    ``one_thread`` (the caller judges such a sample itself, as auto does); its child processes'
    work is named either way. ``per_task`` samples the program's threads even where per-CPU events
    over every process are permitted (what an unprivileged user gets: for tests). ``quiet_sampling``:
    the clock samples QUIET_FACTOR times less often (and slower still) while no watchpoint traps,
    where the sampler can change its events' period (per-CPU events; the record says when not)."""
    if (argv is None) == (pid is None):
        raise PinwiseError("sample a program (argv) or a running process (pid), not both")
    if sharing not in ("write", "any"):
        raise PinwiseError(f"unknown sharing {sharing!r}: use write (an event needs a write) or any (every access)")
    if duration is not None and not 0 < duration <= 1e9:
        raise PinwiseError("the duration must be a positive number of seconds")
    if not 1 <= window_ms <= MAX_WINDOW_MS:
        raise PinwiseError(f"--window-ms for the sample backend is between 1 and {MAX_WINDOW_MS} (how long a watchpoint "
                           f"waits for another thread), not {window_ms}")
    sampler = check_sampler()
    main_gone = check_pid(pid) if pid is not None else False
    program = find_program(argv) if argv is not None else None
    show = sys.stderr.isatty() if progress is None else progress
    with temporary_folder("sample") as tmp:
        result_path, status_path, error_path = (Path(tmp, name) for name in ("result.txt", "status.txt", "error.txt"))
        log_path = Path(tmp, "threads.log")
        command = [str(sampler), "--out", str(result_path), "--status", str(status_path), "--error-file",
                   str(error_path), "--period-us", str(period_us), "--window-ms", str(window_ms), "--arms-per-s",
                   str(arms_per_s), "--sharing", sharing, *(["--readonly"] if readonly else []),
                   *(["--stack"] if stack else []), *(["--seed", str(seed)] if seed is not None else []),
                   *(["--per-task"] if per_task else []),
                   *(["--quiet-period-us", str(QUIET_FACTOR * period_us)]
                     if quiet_sampling and QUIET_FACTOR * period_us <= MAX_QUIET_US else []),
                   *(["--duration-ms", str(max(1, round(duration * 1000)))] if duration else [])]
        # the preload library observes (pins nothing) in the program only, not in the sampler: its
        # log gives the threads' numbering and the main thread's create and join calls
        command += program_part(argv if program is not None else None, pid,
                                {**preload_environment(None, str(log_path), False), **(extra_env or {})})
        start = time.perf_counter()
        interrupted: KeyboardInterrupt | None = None
        with GroupGuard() as guard:
            process = start_sampler(command, guard, attached=pid is not None, quiet=quiet)
            try:
                while True:
                    try:
                        returncode = process.wait(timeout=1.0 if show else None)
                        break
                    except subprocess.TimeoutExpired:
                        _show_progress(status_path, time.perf_counter() - start)
                    except KeyboardInterrupt as interrupt:  # the sampler writes what it has, then ends
                        interrupted = interrupt
                        pass_stop(process, interrupt, attached=pid is not None)
            finally:
                kill_session(process.pid)
        if show:
            sys.stderr.write("\r\033[K")
        if returncode != 0:
            raise sampler_failure(returncode, error_path)
        if not result_path.exists():
            if interrupted is not None:  # stopped at start-up: nothing to keep
                raise interrupted
            raise PinwiseError("the sampler wrote nothing; nothing saved")
        log_text = log_path.read_text(errors="replace") if log_path.exists() else ""
        comm = parse_sample(result_path.read_text(), str(result_path), log_text,
                            argv[0] if argv else f"process {pid}", attached=pid is not None)
    seconds = round(time.perf_counter() - start, 3)
    what = (program, *argv[1:]) if argv is not None else (f"pid {pid}",)
    stopped = interrupted is not None and pid is None  # a started program was stopped; an attach just ends
    info = replace(comm.info, command=what, seconds=seconds, partial=comm.info.partial or stopped,
                   unseen=_unseen(comm.info.sampling),
                   # attached threads are taken for the main thread's (thread 0's); with it gone, unknown
                   creators=None if main_gone else comm.info.creators)
    comm = replace(comm, info=info)
    failed = _failure(comm.info.exit_status) if argv is not None and not stopped else None
    if not stopped:
        _refuse_what_cannot_be_measured(comm, argv[0] if argv else f"process {pid}", one_thread,
                                        f" ({failed})" if failed else "")
    write_comm(comm, output)
    if main_gone:
        print(f"pinwise: note: {main_thread_gone(pid)}", file=sys.stderr)
    if failed:
        print(f"pinwise: warning: {argv[0]} {failed}: the matrix gathered so far is in {output}, marked partial",
              file=sys.stderr)
    if stopped:  # kept, and the stop goes on: a demo or an auto does not run on (as pinwise.trace)
        print(f"pinwise: warning: {argv[0]} was interrupted: the matrix gathered so far is in {output}, marked partial",
              file=sys.stderr)
        raise interrupted
    return comm


def start_sampler(command: list[str], guard: GroupGuard, attached: bool, quiet: bool = False,
                  pass_fds: tuple[int, ...] = ()) -> subprocess.Popen:
    """The sampler in a session of its own (the program it starts in it too, and whatever that
    starts, in whatever process groups they make), watched by ``guard`` so that it all ends with
    pinwise however pinwise ends (a stop signal held while it started and raised as it returns
    too: the guard's block kills what it watches); ``pass_fds`` stay open in it."""
    with signals_held():
        try:
            # the user's environment, not pinwise's own settings: the sampler hands it to the program
            process = subprocess.Popen(command, start_new_session=True, preexec_fn=die_with_parent(),
                                       stdout=subprocess.DEVNULL if quiet else None, env=user_environment(),
                                       stdin=subprocess.DEVNULL if attached else None, pass_fds=pass_fds)
        except OSError as err:
            raise PinwiseError(f"cannot start the sampler: {err.strerror}") from None
        guard.watch(process.pid, session=True)
    return process


def pass_stop(process: subprocess.Popen, interrupt: KeyboardInterrupt, attached: bool) -> None:
    """Ctrl-C or SIGTERM while sampling: the sampler writes what it has and ends; a program it
    started gets the signal too, once (the sampler passes on only what pinwise did not send), as a
    shell's Ctrl-C reaches its job's process group, and ends as it would alone; an attached
    process runs on."""
    signum = getattr(interrupt, "signum", signal.SIGINT)
    try:
        if attached:
            os.kill(process.pid, signum)
        else:
            os.killpg(process.pid, signum)
    except ProcessLookupError:
        pass


def program_part(argv: list[str] | None, pid: int | None, env: dict[str, str]) -> list[str]:
    """The end of a sampler command: the program as the user named it (the sampler finds it on PATH
    as a shell does, so that it sees its own argv[0]: ``xz: input: ...``, not ``/usr/bin/xz: ...``),
    with the variables only it gets (``--setenv``: the sampler itself must not load the preload
    library), or ``--pid``."""
    if argv is None:
        return ["--pid", str(pid)]
    part = [f"--setenv={name}={value}" for name, value in env.items() if os.environ.get(name) != value]
    return [*part, "--", *argv]


def sampler_failure(returncode: int, error_path: Path) -> PinwiseError:
    """The sampler's own one line (pw_sample.c's --error-file), as pinwise's error."""
    message = error_path.read_text(errors="replace").strip() if error_path.exists() else ""
    return PinwiseError(message.removeprefix("pinwise-sample: ") or f"the sampler ended with status {returncode}")


def _unseen(sampling) -> str | None:
    """What the samples show that the matrix does not hold: the work of child processes (as
    pinwise.trace words it for the Valgrind tracer; None when it is a tenth of the samples or
    less), or all of the sharing, when samples had addresses but no watchpoint was armed on any
    (a run too short for the sampler to look: its empty matrix is no finding of private work)."""
    children, total = sampling.get("child_samples", 0), sampling.get("samples", 0)
    if sampling.get("address_samples", 0) and not sampling.get("arms", 0) and not sampling.get("events", 0):
        return (f"no watchpoint was armed on any of the {sampling['address_samples']:,} sampled addresses, so what the "
                "threads share was never looked at (the run was too short for the sampler): sample a longer run, or "
                "trace with --backend valgrind")
    if not total or children <= 0.1 * total:
        return None
    return (f"{children / total:.0%} of the samples were in {sampling.get('child_processes', 0)} child process(es), "
            "whose threads the sampler does not follow: that work is not in the matrix")


def _show_progress(status_path: Path, elapsed: float) -> None:
    fields = {}
    try:
        for line in status_path.read_text().splitlines():
            key, _, value = line.partition(" ")
            fields[key] = value
    except OSError:
        pass
    done = ""
    if fields:
        done = (f", {fields.get('threads', '?')} threads, {int(fields.get('samples', 0)):,} samples, "
                f"{int(fields.get('traps', 0)):,} events")
    sys.stderr.write(f"\r\033[Ksampling: {elapsed:.0f} s{done}")
    sys.stderr.flush()


def _failure(exit_status: int | None) -> str | None:
    """How a started program ended badly (negative: killed by that signal), or None."""
    return how_it_ended(exit_status) if exit_status else None


def _refuse_what_cannot_be_measured(comm: CommMatrix, name: str, one_thread: bool = False, failed: str = "") -> None:
    """``failed``: how the program ended, when badly (" (exited with status 1)"), said beside why."""
    sampling = comm.info.sampling or {}
    total = sampling.get("samples", 0)
    if comm.threads >= 2 and not total and not one_thread:  # an empty matrix would read "no communication"
        raise PinwiseError(f"no samples of {name}{failed} in {comm.info.seconds:.1f} s: its threads did not run on a CPU "
                           "while sampled (idle, stopped or waiting), so nothing tells who shares data; nothing written")
    if comm.threads >= 2:
        return
    children = sampling.get("child_samples", 0)
    if children and children >= total / 2:
        raise PinwiseError(f"{name} ran one thread, and {children / max(1, total):.0%} of the samples were in "
                           f"{sampling.get('child_processes', 0)} child process(es), which pinwise does not trace: "
                           "trace the program that creates the threads (not a shell or launcher around it)")
    if not one_thread:
        raise PinwiseError(f"{name} ran one thread{failed}: there is no communication between threads to measure")


def parse_sample(text: str, source: str, log_text: str = "", name: str = "the program",
                 attached: bool = False) -> CommMatrix:
    """Read the sampler's output (format in pw_sample.c) into a CommMatrix: its threads numbered as
    ``pinwise run`` numbers them where the preload library's log (``log_text``) has every one,
    with the main thread's create and join calls, so that workers created in rounds fold as they
    do after a Valgrind trace; more threads than pinwise.rounds.FOLD_ABOVE are folded here, without a
    T x T table in between, or refused (pinwise.rounds.rounds_to_write; ``name``: the program,
    ``attached``: sampled by --pid)."""
    from .trace import _hot_lines, split_dump

    try:
        header, entries, rest = split_dump(text, sparse=True)
        threads = int(header["threads"][0])
        hot_count = int(rest[0].split()[1]) if rest and rest[0].startswith("hot-lines ") else 0
        hot = _hot_lines(rest, threads)
        block_lines = rest[1 + 7 * hot_count:]
        count, block_ns, *first = (int(v) for v in block_lines[0].split()[1:4])  # first: older samplers wrote none
        blocks = [[float(v) if i % 3 == 2 else int(v) for i, v in enumerate(line.split()[1:])]
                  for line in block_lines[1:1 + count]]
        ints = {key: [int(v) for v in header[key]] for key in ("accv", "load", "load-together", "samples-per-thread",
                                                                "reads", "writes", "tids")}
        skipped = dict(zip(header["skipped"][0::2], (int(v) for v in header["skipped"][1::2])))
        watch = dict(zip(header["watch"][0::2], (int(v) for v in header["watch"][1::2])))
        decoded = dict(zip(header.get("decoded", [])[0::2], header.get("decoded", [])[1::2]))
        pairs = [float(v) if i % 5 == 4 else int(v) for i, v in enumerate(header.get("pairs-offered", []))]
        ends = [int(v) for v in header["lifetime-ns"]]
        creators = (None, *(int(v) for v in header["creator"][1:])) if threads else ()
        lifetimes = tuple((ends[i], ends[i + 1]) for i in range(0, len(ends) - 1, 2))
        if entries.size and (entries[:, :2].min() < 0 or entries[:, :2].max() >= threads):
            raise ValueError("a matrix entry names a thread the header does not have")
        sampling = {
            "clock": header["clock"][0], "period_ns": int(header["period-ns"][0]),
            "mode": header.get("mode", ["per-task"])[0], "other_samples": int(header.get("samples-other", ["0"])[0]),
            "cpu_s": float(header.get("cpu-seconds", ["0"])[0]),
            "window_ns": int(header["window-ns"][0]), "arms_per_s": float(header["arms-per-s"][0]),
            "samples": int(header["samples"][0]), "address_samples": sum(ints["accv"]),
            "samples_per_thread": ints["samples-per-thread"], "reads": ints["reads"], "writes": ints["writes"],
            "events": watch["traps"], "arms": watch["arms"], "watch": watch, "skipped": skipped,
            "child_samples": int(header["samples-child"][0]), "child_processes": int(header["child-processes"][0]),
            "lost": int(header["lost"][0]), "execs": int(header["execs"][0]),
            "tids": ints["tids"],
            "switch_rates": [float(v) for v in header.get("switch-rates", [])],
            "pairs": [pairs[i:i + 5] for i in range(0, len(pairs), 5)],
            "block_ns": block_ns, "blocks": blocks, "blocks_from_ns": first[0] if first else 0,
            # samples decoded, and those in code with no function table, at the IP only (decode.c; confidence.blind)
            "decoded_samples": int(decoded.get("samples", 0)), "untabled": int(decoded.get("untabled", 0)),
            **_quiet_fields(header.get("quiet", [])),
        }
        # as subprocess and the Valgrind backend give it: negative for the signal that killed it (the
        # sampler writes the shell's 128 + N and the signal apart: a program may exit with 139 itself)
        exit_status, signum = int(header["exit-status"][0]), int(header.get("exit-signal", ["0"])[0])
        exit_status = -signum if signum > 0 else exit_status
        fields = dict(backend="sample", tool=TOOL_VERSION, sharing=header["sharing"][0],
                      partial=header["partial"][0] == "1", total_accesses=sum(ints["accv"]),
                      window={"milliseconds": max(1, round(int(header["window-ns"][0]) / 1e6))},
                      exit_status=None if exit_status == -1 and not signum else exit_status)
        if any(len(ints[key]) != threads for key in ints) or len(creators) != threads or len(lifetimes) != threads:
            raise ValueError(f"the header's per-thread lists do not number {threads}")
        if any(not 0 <= v < threads for record in sampling["pairs"] for v in record[:2]) or \
                any(not 0 <= v < threads for block in blocks for v in block[0::3] + block[1::3]):
            raise ValueError("a pair names a thread the header does not have")
        return _assembled(header, entries, ints, sampling, hot, creators, lifetimes, fields, log_text, name, attached)
    except (IndexError, KeyError, ValueError) as err:
        raise PinwiseError(f"the sampler's output {source} is damaged ({err}); sample again") from None


def _quiet_fields(words: list[str]) -> dict:
    """The sampler's "quiet" record (pw_sample.c, write_result): how long it sampled at the quiet
    period or slower (``quiet_s``) and its slowest period (``quiet_deepest_ns``); ``quiet_off`` where
    it was asked to and could not (a per-task launch's inherited events keep their period)."""
    if words[:1] == ["off"]:
        return {"quiet_off": True}
    fields = dict(zip(words[0::2], words[1::2]))
    if "seconds" not in fields:
        return {}
    return {"quiet_s": float(fields["seconds"]), "quiet_period_ns": int(fields.get("period-ns", 0)),
            "quiet_deepest_ns": int(fields.get("deepest-ns", 0))}


def fewer(first: int, deepest: int) -> str:
    """How much less often the sampler sampled while quiet, ``first`` and at most ``deepest`` times
    less: "4x", or "4x to 16x" when it went deeper (trace's summary, and run --adapt's)."""
    return f"{first}x" if deepest <= first else f"{first}x to {deepest}x"


def quiet_words(sampling) -> str | None:
    """How much less often the sampler sampled while no thread shared data, in words ("4x less
    often for 0.4 s", "4x to 16x ..."); None where it never did, or for under a tenth of a second."""
    seconds, period = sampling.get("quiet_s", 0.0), sampling.get("period_ns", 0)
    if seconds < 0.1 or not period:
        return None
    first, deepest = sampling.get("quiet_period_ns", 0) // period, sampling.get("quiet_deepest_ns", 0) // period
    return f"{fewer(first, deepest)} less often for {seconds:.1f} s"


def _assembled(header, entries, ints, sampling, hot, creators, lifetimes, fields, log_text, name,
               attached) -> CommMatrix:
    """The CommMatrix of a parsed output (:func:`parse_sample`): its threads renumbered by the
    preload log, or folded by role where more than FOLD_ABOVE came in rounds, in one index map."""
    threads = int(header["threads"][0])
    order, spawns = _creation_order(ints["tids"], log_text)
    new = np.empty(threads, dtype=np.int64)
    new[order] = np.arange(threads)  # the sampler's thread k is thread new[k]
    creators = tuple(None if c is None else int(new[c]) for c in (creators[k] for k in order)) if threads else None
    lifetimes = tuple(lifetimes[k] for k in order)
    rounds = rounds_to_write(threads, rounds_in(spawns, creators, threads) if threads > FOLD_ABOVE else None, name,
                             "Attach for a shorter --duration" if attached else
                             "Sample a shorter run of it, or attach to it for a few seconds (--pid, --duration)")
    if rounds is not None:
        index, size = np.array([rounds.role(int(t)) for t in new]), rounds.size + 1
        fields.update(rounds=Rounds(rounds.size, rounds.count, threads))
    else:
        index, size = new, threads
        fields.update(creators=creators, lifetimes=lifetimes, spawns=spawns)
    matrix = np.zeros((size, size))
    a, b = index[entries[:, 0].astype(np.int64)], index[entries[:, 1].astype(np.int64)]
    np.add.at(matrix, (a, b), entries[:, 2])
    np.add.at(matrix, (b, a), entries[:, 2])
    sampling = fold_sampling(sampling, index, size)
    info = TraceInfo(**fields, instructions_together=tuple(summed_by(ints["load-together"], index, size)),
                     hot_lines=_in_matrix_units(fold_hot_lines(hot, index, size), matrix, sampling["pairs"]),
                     sampling=sampling)
    return CommMatrix(matrix, np.bincount(index, weights=np.array(ints["accv"], dtype=np.float64), minlength=size),
                      np.bincount(index, weights=np.array(ints["load"], dtype=np.float64), minlength=size), info)


def _in_matrix_units(hot, matrix: np.ndarray, pairs: list) -> tuple | None:
    """The hot lines' events as the matrix counts them: the sampler counts a line's hits with
    their draw weights only, the matrix scales each pair's further (watched share, samples per
    offer: pw_sample.c's estimate), so that analyze can weigh a line against the matrix and take
    its events out of it (spin-waits)."""
    if not hot:
        return hot
    t = matrix.shape[0]
    weighted = np.zeros((t, t))
    for a, b, _offered, _armed, hits in pairs:
        weighted[int(a), int(b)] += float(hits)
    weighted = weighted + weighted.T
    upper = np.triu_indices(t, 1)
    overall = matrix[upper].sum() / weighted[upper].sum() if weighted[upper].sum() > 0 else 1.0
    with np.errstate(divide="ignore", invalid="ignore"):
        factor = np.where(weighted > 0, matrix / weighted, overall)
    lines = []
    for line in hot:
        scaled = tuple((i, j, int(round(n * factor[i, j]))) for i, j, n in line.pairs)
        events = sum(n for _, _, n in scaled) if scaled else int(round(line.events * overall))
        lines.append(replace(line, pairs=scaled, events=events))
    return tuple(lines)


def _creation_order(tids: list[int], log_text: str) -> tuple[list[int], tuple | None]:
    """The sampler's threads in the preload log's creation order (how ``pinwise run`` numbers
    them): new thread k is the sampler's thread order[k]; and the main thread's create and join
    calls. The sampler's own order and None where the log lacks any sampled thread."""
    from .pinning.log import parse_log, parse_spawns

    same = list(range(len(tids)))
    if not log_text or not tids:
        return same, None
    position = {tid: k for k, tid in enumerate(tids)}
    records = [t for t in parse_log(log_text) if t.tid in position and t.pid == tids[0]]
    if sorted(position[t.tid] for t in records) != same or \
            sorted(t.index for t in records) != same:
        return same, None
    order = [position[t.tid] for t in sorted(records, key=lambda t: t.index)]
    main = next(t for t in records if t.index == 0)
    spawns = tuple((kind, index) for kind, pid, tid, index in parse_spawns(log_text)
                   if pid == main.pid and tid == main.tid)
    return order, spawns


def unwatched_threads(comm: CommMatrix) -> list[int]:
    """The threads of a sampled matrix whose watchpoints were refused or rationed because they
    switch so often (pw_sample.c: SWITCH_LIMIT in per-task mode, ARMED_COST_SHARE system-wide):
    their sharing rests on few events, or only on their own samples."""
    sampling = comm.info.sampling or {}
    limit = SWITCH_LIMIT if sampling.get("mode") != "system-wide" else RATIONED_ABOVE
    return [t for t, rate in enumerate(sampling.get("switch_rates") or []) if rate > limit]
