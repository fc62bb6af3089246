"""Capability 3: the communication matrix of an unmodified program, measured with pinwise's
Valgrind tool (native/valgrind/pw_main.c).

The tool is built against the system's Valgrind by the package's CMake; it runs with VALGRIND_LIB
pointing at a private folder that holds it next to links to the system's Valgrind files. Traces
run with --fair-sched=yes (otherwise one thread keeps Valgrind's big lock for long stretches and
the windows see almost no sharing) and with glibc's rep-movsb memcpy disabled (Valgrind splits
`rep movsb` into one access per byte, which would count one copy as thousands of events).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import PinwiseError
from .processes import GroupGuard, die_with_parent, how_it_ended, kill_session, signals_held, user_environment
from .temporary import temporary_folder
from .pinning.launcher import NATIVE_DIR, find_program, is_static_executable, lifetimes_and_spawns, observe_natively
from ._stage import make_callable

if TYPE_CHECKING:
    from .comm import CommMatrix

TOOL = NATIVE_DIR / "valgrind" / "pinwise-amd64-linux"
SIM_TOOL = NATIVE_DIR / "valgrind" / "pwsim-amd64-linux"
TOOL_VERSION = "pinwise-valgrind 1"
SYSTEM_TOOL_DIRS = ("/usr/libexec/valgrind", "/usr/lib/x86_64-linux-gnu/valgrind", "/usr/lib64/valgrind",
                    "/usr/lib/valgrind", "/usr/local/libexec/valgrind", "/usr/local/lib/valgrind")
#: Above glibc's largest copy size: memcpy never switches to `rep movsb` under the tracer.
REP_MOVSB_TUNABLE = "glibc.cpu.x86_rep_movsb_threshold=2147483647"
#: OpenMP runtimes' passive waiting (GNU libgomp, LLVM/Intel libomp): under Valgrind, which runs one
#: thread at a time, a thread spinning at a barrier spins through whole time slices, and its reads
#: of the barrier's line swamp the matrix. Set for tracing unless the environment sets them.
PASSIVE_WAIT = {"OMP_WAIT_POLICY": "passive", "GOMP_SPINCOUNT": "0", "KMP_BLOCKTIME": "0"}
SHARING_MODELS = ("write", "any")


def uses_openmp(program: str) -> bool:
    """Whether the program names an OpenMP runtime among the libraries it needs (the dynamic
    string table sits in the file's first megabytes)."""
    try:
        with open(program, "rb") as binary:
            head = binary.read(8 << 20)
    except OSError:
        return False
    return any(name in head for name in (b"libgomp.so", b"libomp.so", b"libiomp5.so"))


def passive_wait(environment: dict[str, str]) -> dict[str, str]:
    """The passive-waiting variables that ``environment`` does not set already."""
    return {k: v for k, v in PASSIVE_WAIT.items() if k not in environment}


def _system_tool_dir() -> Path:
    for directory in SYSTEM_TOOL_DIRS:
        if Path(directory, "none-amd64-linux").exists():
            return Path(directory)
    raise PinwiseError("Valgrind's tools were not found (looked for none-amd64-linux in "
                       f"{', '.join(SYSTEM_TOOL_DIRS)}); install Valgrind: apt-get install valgrind")


def check_tracer() -> str:
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        raise PinwiseError("Valgrind is not installed, and pinwise trace runs on it: apt-get install valgrind "
                           "(Debian/Ubuntu) or dnf install valgrind valgrind-devel (Fedora), then reinstall pinwise")
    if not TOOL.exists():
        raise PinwiseError("pinwise was built without its Valgrind tool (Valgrind's tool-building files were missing): "
                           "install them (Debian/Ubuntu: valgrind; Fedora: valgrind-devel) and reinstall pinwise")
    return valgrind


def tool_environment(folder: Path) -> dict[str, str]:
    """The environment that runs ``valgrind --tool=pinwise``: VALGRIND_LIB at a new folder inside
    ``folder`` holding the tool next to links to the system's Valgrind files, and glibc's
    rep-movsb memcpy turned off."""
    lib = folder / "valgrind-lib"
    lib.mkdir()
    for item in _system_tool_dir().iterdir():
        (lib / item.name).symlink_to(item)
    for tool in (TOOL, SIM_TOOL):  # the tracer and the cache simulator (pinwise simulate)
        if tool.exists():
            (lib / tool.name).symlink_to(tool)
    env = user_environment()
    env["VALGRIND_LIB"] = str(lib)
    env["GLIBC_TUNABLES"] = ":".join(filter(None, [env.get("GLIBC_TUNABLES"), REP_MOVSB_TUNABLE]))
    unusable = env.get("TMPDIR")
    if unusable is not None and not (os.path.isdir(unusable) and os.access(unusable, os.W_OK | os.X_OK)):
        # Valgrind writes its own temporary files there (the program's command line, as the
        # program reads it from /proc) and cannot start without them.
        env["TMPDIR"] = str(folder)
        print(f"pinwise: warning: TMPDIR={unusable} is not a writable folder; Valgrind and the program get "
              f"TMPDIR={folder}, which pinwise removes afterwards", file=sys.stderr)
    return env


def split_dump(text: str, sparse: bool = False):
    """A tracer's dump (pw_main.c's format, which pw_sample.c shares): the ``key values...`` lines
    before the matrix as a dict, the matrix, and the lines after it. The Valgrind tool writes the
    T x T matrix after a line ``matrix``; the sampler (``sparse``) writes ``matrix-sparse N`` and
    N lines ``a b value``, returned as an N x 3 array. Raises IndexError, KeyError or ValueError
    on a damaged dump (the callers say which file)."""
    lines = text.splitlines()
    header: dict[str, list[str]] = {}
    index = 0
    while lines[index] != "matrix" and not lines[index].startswith("matrix-sparse "):
        key, *values = lines[index].split()
        header[key] = values
        index += 1
    if sparse != (lines[index] != "matrix"):
        raise ValueError(f"'{lines[index]}' where the {'sparse' if sparse else 'whole'} matrix belongs")
    if sparse:
        count = int(lines[index].split()[1])
        return header, number_rows(lines[index + 1:index + 1 + count], count, 3), lines[index + 1 + count:]
    threads = int(header["threads"][0])
    return header, number_rows(lines[index + 1:index + 1 + threads], threads, threads), lines[index + 1 + threads:]


def number_rows(lines: list[str], rows: int, columns: int):
    """``rows`` lines of ``columns`` numbers as a rows x columns array, parsed by numpy in one pass
    (as Python floats first, the 64 million entries of a matrix of 8,001 threads took 3 GB).
    ValueError if the lines are not that."""
    import numpy as np

    values = np.fromstring("\n".join(lines), sep=" ") if lines else np.zeros(0)
    if len(lines) != rows or values.size != rows * columns:
        raise ValueError(f"the matrix is not {rows} rows of {columns} numbers")
    return values.reshape(rows, columns)


def parse_trace(text: str, source: str) -> CommMatrix:
    """Read the tool's plain-text output (format in pw_main.c) into a CommMatrix."""
    import numpy as np

    from .comm import CommMatrix, TraceInfo

    try:
        header, matrix, rest = split_dump(text)
        threads = matrix.shape[0]
        other = None
        if rest and rest[0].startswith("other-sharing "):  # the other model's matrix
            other = number_rows(rest[1:1 + threads], threads, threads)
            rest = rest[1 + threads:]
        accesses = np.array([float(v) for v in header["accv"]])
        instructions = np.array([float(v) for v in header["load"]])
        info = _header_info(header)
        info["hot_lines"] = _hot_lines(rest, threads)
        info["time_blocks"] = _time_blocks(rest[1 + 7 * len(info["hot_lines"]):] if info["hot_lines"] is not None else
                                           rest, threads)
    except (IndexError, KeyError, ValueError) as err:
        raise PinwiseError(f"the tracer's output {source} is damaged ({err}); run the trace again") from None
    return CommMatrix(matrix, accesses, instructions, TraceInfo(**info), other)


def _hot_lines(lines: list[str], threads: int):
    """The hot-line records after the matrix (format in pw_main.c); None in older dumps."""
    from .comm import HotLine

    if not lines or not lines[0].startswith("hot-lines "):
        return None
    count = int(lines[0].split()[1])
    found = []
    for k in range(count):
        record = {}
        for line in lines[1 + 7 * k:8 + 7 * k]:
            key, _, value = line.partition(" ")
            record[key] = value
        address, events, *before = record["hot"].split()  # older tools wrote no count before
        pairs = [int(v) for v in record["hot-pairs"].split()]
        code = {key: None if record[key] in ("", "-") else record[key] for key in ("hot-read", "hot-write")}
        found.append(HotLine(int(address, 16), int(events), record["hot-where"], code["hot-read"], code["hot-write"],
                             tuple(int(v) for v in record["hot-reads"].split()),
                             tuple(int(v) for v in record["hot-writes"].split()),
                             tuple((pairs[i], pairs[i + 1], pairs[i + 2]) for i in range(0, len(pairs), 3)),
                             int(before[0]) if before else 0))
        if len(found[-1].reads) != threads:
            raise ValueError(f"hot line {address} has {len(found[-1].reads)} threads, not {threads}")
    return tuple(found)


def _time_blocks(lines: list[str], threads: int):
    """The time-block record after the hot lines (format in pw_main.c): TraceInfo.time_blocks, or
    None where the tool kept none (more threads than it keeps blocks for, the mazouz model, older
    tools)."""
    from types import MappingProxyType

    if not lines or not lines[0].startswith("blocks "):
        return None
    count, length = (int(v) for v in lines[0].split()[1:3])
    blocks = []
    for line in lines[1:1 + count]:
        words = line.split()
        if words[:1] != ["block"] or len(words) % 3 != 1:
            raise ValueError(f"'{line[:40]}' where a time block belongs")
        block = [int(v) if i % 3 < 2 else float(v) for i, v in enumerate(words[1:])]
        if any(not 0 <= v < threads for v in block[0::3] + block[1::3]):
            raise ValueError("a time block names a thread the header does not have")
        blocks.append(block)
    if len(blocks) != count or length <= 0:
        raise ValueError(f"{len(blocks)} time blocks where the record says {count}")
    return MappingProxyType({"accesses": length, "blocks": blocks})


def _header_info(header: dict[str, list[str]]) -> dict:
    """TraceInfo's fields from the header lines of the tool's output."""
    lines_tracked, lines_dropped = (int(v) for v in header.get("lines", ["0", "0"])[:2])
    info = {
        "model": header.get("model", ["diener"])[0],
        "partial": header.get("partial", ["0"])[0] == "1",
        "total_accesses": int(header.get("accesses", ["0"])[0]),
        "lines_tracked": lines_tracked, "lines_dropped": lines_dropped,
        "memory_bytes": int(header.get("table-bytes", ["0"])[0]),
        "cache_bytes": int(header.get("cache-bytes", ["0"])[0]),
        "sharing": header.get("sharing", ["any"])[0],
    }
    if "load-together" in header:  # dumps of tools older than these lines have none of them
        info["instructions_together"] = tuple(int(v) for v in header["load-together"])
    if "creator" in header:
        info["creators"] = (None, *(int(v) for v in header["creator"][1:]))
    if "lifetime" in header:
        ends = [int(v) for v in header["lifetime"]]
        info["lifetimes_traced"] = tuple((ends[i], ends[i + 1]) for i in range(0, len(ends) - 1, 2))
    if "window" in header:
        info["window"] = {"accesses": int(header["window"][0])}
    if "window-ms" in header:
        info["window"] = {"milliseconds": int(header["window-ms"][0])}
    return info


def trace(argv: list[str], output: str | Path, *, window: int = 1_000_000, window_ms: int | None = None,
          model: str = "diener", sharing: str = "write", readonly: bool = False, stack: bool = False,
          max_lines: int = 1 << 24, progress: bool | None = None, extra_env: dict[str, str] | None = None,
          quiet: bool = False, native_run: bool = True, omp_wait: str = "passive") -> CommMatrix:
    """Trace ``argv`` and write its communication matrix to ``output`` (JSON, see pinwise.comm).
    ``sharing``: "write" counts an event only when one of the two accesses writes (the default),
    "any" every access to a line another thread touched (the paper's definition). ``omp_wait``:
    "passive" sets OpenMP's passive waiting (PASSIVE_WAIT) where the environment does not set it,
    "keep" leaves the environment alone. With ``quiet`` the program's standard output is
    discarded. With ``native_run`` the program then runs once natively, its output discarded,
    which shows what the trace did not see (threads it did not start under Valgrind, work in the
    processes it forks or execs: ``info.unseen``), and, when the traced run leaves room for rounds
    (:func:`rounds_possible`), the main thread's create/join calls, which show workers created in
    rounds (pinwise.rounds.find_rounds), and the threads' real lifetimes (under Valgrind they take
    turns)."""
    if model not in ("diener", "mazouz"):
        raise PinwiseError(f"unknown model {model!r}: use diener (events in time windows) or mazouz (alpha)")
    if sharing not in SHARING_MODELS:
        raise PinwiseError(f"unknown sharing {sharing!r}: use write (an event needs a write) or any (every access)")
    if omp_wait not in ("passive", "keep"):
        raise PinwiseError(f"unknown omp_wait {omp_wait!r}: use passive or keep")
    if window < 1 or (window_ms is not None and window_ms < 1):
        raise PinwiseError("the window must be at least 1 access (or 1 ms)")
    if not 1024 <= max_lines <= 1 << 34:
        raise PinwiseError(f"max_lines must be between 1024 and {1 << 34} cache lines, not {max_lines}")
    valgrind = check_tracer()
    program = find_program(argv)
    show = sys.stderr.isatty() if progress is None else progress
    with temporary_folder("trace") as tmp, contextlib.ExitStack() as cleanup:
        result_path = Path(tmp, "trace.txt")
        env = tool_environment(Path(tmp))
        env.update(extra_env or {})
        waiting = passive_wait(env) if omp_wait == "passive" else {}
        env.update(waiting)
        if waiting and not quiet and uses_openmp(program):
            print("tracing with " + " ".join(f"{k}={v}" for k, v in waiting.items())
                  + " (OpenMP threads sleep at barriers instead of spinning; set them yourself, or --omp-wait keep, "
                  "to trace another way)", file=sys.stderr)
        # --vgdb=no: no gdbserver FIFOs (vgdb-pipe-*) in the temporary folder, which a killed Valgrind leaves
        command = [valgrind, "--tool=pinwise", "-q", "--vgdb=no", "--fair-sched=yes", "--max-threads=4096",
                   f"--pw-out={result_path}", f"--pw-model={model}", f"--pw-sharing={sharing}", f"--pw-readonly={'yes' if readonly else 'no'}", f"--pw-stack={'yes' if stack else 'no'}",
                   f"--pw-max-lines={max_lines}", f"--pw-window={window}",
                   *([f"--pw-window-ms={window_ms}"] if window_ms else []),
                   *argv]  # as the user named it: Valgrind finds it on PATH as a shell does, and argv[0] is the program's
        start = time.perf_counter()

        # Valgrind and the program's children in a session of their own, which the guard kills if
        # pinwise dies (kill -9 included); Ctrl-C reaches them through pinwise, below.
        guard = cleanup.enter_context(GroupGuard())
        with signals_held():  # a stop signal lands after the kill below is registered
            relay = _Relay() if show and not quiet else None  # the program's lines above the progress line
            try:
                process = subprocess.Popen(command, env=env,
                                           stdout=subprocess.DEVNULL if quiet else relay and subprocess.PIPE,
                                           stderr=relay and subprocess.PIPE,
                                           start_new_session=True, preexec_fn=die_with_parent())
            except OSError as err:
                raise PinwiseError(f"cannot start Valgrind: {err.strerror}") from None
            guard.watch(process.pid, session=True)
            cleanup.callback(kill_session, process.pid)  # first of the clean-ups: what the program left running
        # numpy loads while the program runs under Valgrind, not before it starts.
        from .comm import write_comm
        from .rounds import FOLD_ABOVE, find_rounds, fold_rounds, rounds_to_write

        interrupted: KeyboardInterrupt | None = None
        status = relay or _Relay()
        if relay is not None:
            relay.start(process)  # daemon threads: they end with the program's pipes
        if show:
            status.show(_progress_text(result_path, 0.0))
        while True:
            try:
                returncode = process.wait(timeout=1.0 if show else None)  # polling only to show progress
                break
            except subprocess.TimeoutExpired:
                if show:
                    status.show(_progress_text(result_path, time.perf_counter() - start))
            except KeyboardInterrupt as interrupt:  # Ctrl-C, SIGTERM, SIGHUP: the program ends, the matrix stays
                interrupted = interrupt
                try:
                    os.killpg(process.pid, getattr(interrupt, "signum", signal.SIGINT))
                except ProcessLookupError:
                    pass
        if relay is not None:
            relay.join()
        if show:
            status.show(_progress_text(result_path, time.perf_counter() - start))
            status.done()
        if not result_path.exists():
            if interrupted is not None:  # stopped at start-up: nothing to keep
                raise interrupted
            raise PinwiseError(f"{argv[0]} ended with status {returncode} before the tracer wrote anything; "
                               "nothing saved")
        comm = parse_trace(result_path.read_text(encoding="utf-8", errors="replace"), str(result_path))
    partial = comm.info.partial or returncode != 0 or interrupted is not None
    observed = {}
    if native_run and not partial:
        if show:
            print("tracing done; one native run to compare its threads and see its rounds ...", file=sys.stderr)
        from .pinning.readback import work_the_trace_missed

        native = None
        if is_static_executable(program):
            print(f"pinwise: note: {argv[0]} is statically linked, which the preload library cannot observe: no "
                  "native run, so what the trace may have missed (threads, forked processes) is not checked",
                  file=sys.stderr)
        else:
            native = observe_natively(argv, {**(extra_env or {}), **waiting})
        if native is not None:
            found = lifetimes_and_spawns(native) if rounds_possible(comm) else None
            rounds = None
            if found is not None:
                observed["spawns"] = tuple(map(tuple, found["spawns"]))
                if len(found["lifetimes"]) == comm.threads:
                    observed["lifetimes"] = tuple(map(tuple, found["lifetimes"]))
                rounds = _rounds_seen(replace(comm, info=replace(comm.info, **observed)), argv[0], quiet)
            # more rounds of the same workers natively (a harness that times its loop) are not work
            # the trace missed; other threads are
            observed["unseen"] = work_the_trace_missed(native, comm.threads, rounds.size if rounds else None)
    from types import MappingProxyType

    info = replace(comm.info, **observed, command=(program, *argv[1:]), tool=TOOL_VERSION, partial=partial,
                   environment=MappingProxyType(waiting) if waiting else None,
                   exit_status=returncode, seconds=round(time.perf_counter() - start, 3))
    comm = replace(comm, info=info)
    folded = rounds_to_write(comm.threads, find_rounds(comm) if comm.threads > FOLD_ABOVE else None, argv[0],
                             "Trace a shorter run of it, or sample it (--backend sample), which also attaches to a "
                             "running program for a few seconds (--pid, --duration)")
    if folded is not None:
        comm = fold_rounds(comm, folded)
    write_comm(comm, output)
    if info.unseen:
        print(f"pinwise: warning: {info.unseen}; no placement will be recommended from this matrix", file=sys.stderr)
    if partial:
        reason = "was interrupted" if interrupted is not None else how_it_ended(returncode)
        print(f"pinwise: warning: {argv[0]} {reason}: the matrix gathered so far is in {output}, marked partial",
              file=sys.stderr)
    if interrupted is not None:  # kept, and the stop goes on: a demo or an auto does not run on
        raise interrupted
    return comm


def _rounds_seen(comm: CommMatrix, name: str, quiet: bool):
    """The rounds of ``comm`` (pinwise.rounds.find_rounds); when the native run created its workers
    in rounds that the traced threads do not make, it says so, and why, and returns None."""
    from .rounds import creation_rounds, find_rounds

    rounds = find_rounds(comm)
    native = creation_rounds(comm.info.spawns)
    if rounds is None and native is not None and not quiet:
        creators = comm.info.creators
        why = ("the traced threads are not all created by the main thread"
               if creators is not None and any(c != 0 for c in creators[1:]) else
               f"{comm.threads - 1} traced workers are not whole rounds of {native.size} (two at least)"
               if (comm.threads - 1) % native.size or comm.threads - 1 < 2 * native.size else
               f"the traced workers did not live {native.size} at a time, one round after another")
        print(f"pinwise: note: natively {name} created its workers in {native.count} rounds of {native.size}, "
              f"but {why}: the matrix is kept per thread, each thread its own slot of a plan", file=sys.stderr)
    return rounds


def rounds_possible(comm: CommMatrix) -> bool:
    """Whether the traced run leaves room for workers created in rounds, which only the native
    run's record of the main thread's create and join calls can tell (pinwise.rounds.find_rounds).
    A round's workers are all joined before the next round is created, so in every execution, the
    traced one included, some worker is born after another ended; when none is (one pool of
    workers), there are no rounds and the native run is skipped. Without the tracer's lifetimes,
    it may be."""
    lives, creators = comm.info.lifetimes_traced, comm.info.creators
    if lives is None or creators is None or len(lives) != comm.threads or comm.threads < 3:
        return lives is None or creators is None
    workers = [lives[t] for t in range(1, comm.threads) if creators[t] == 0]
    first_end = min((end for _, end in workers), default=None)
    return first_end is not None and any(born >= first_end for born, _ in workers)


class _Relay:
    """The traced program's output, line by line, above pinwise's progress line on standard error:
    the line is erased, the program's line written to the stream it came from, the progress line
    drawn again, so the two never share a line."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.status = ""
        self.threads: list[threading.Thread] = []

    def start(self, process: subprocess.Popen) -> None:
        for source, target in ((process.stdout, sys.stdout), (process.stderr, sys.stderr)):
            thread = threading.Thread(target=self._forward, args=(source, target), daemon=True)
            thread.start()
            self.threads.append(thread)

    def _forward(self, source, target) -> None:
        with source:
            for line in iter(source.readline, b""):
                with self.lock:
                    if self.status:
                        sys.stderr.write("\r\033[K")
                        sys.stderr.flush()
                    target.buffer.write(line if line.endswith(b"\n") else line + b"\n")
                    target.flush()
                    if self.status:
                        sys.stderr.write(self.status)
                        sys.stderr.flush()

    def join(self) -> None:
        for thread in self.threads:
            thread.join()
        self.threads = []

    def show(self, text: str) -> None:
        with self.lock:
            self.status = text
            sys.stderr.write("\r\033[K" + text)
            sys.stderr.flush()

    def done(self) -> None:
        with self.lock:
            if self.status:
                sys.stderr.write("\n")
                sys.stderr.flush()
            self.status = ""


def _progress_text(result_path: Path, elapsed: float) -> str:
    """From the tool's latest dump: its header only, not the T x T matrix behind it."""
    done = ""
    try:
        fields = {}
        with open(result_path) as dump:
            for line in dump:
                key, _, value = line.partition(" ")
                if key in ("accv", "matrix\n"):
                    break
                fields[key] = value.strip()
        done = f", {fields.get('threads', '?')} threads, {int(fields.get('accesses', 0)) / 1e6:.0f}M accesses"
    except (OSError, ValueError):
        pass
    return f"tracing: {elapsed:.0f} s{done}"


make_callable(__name__, 'trace')  # pinwise.trace(...) runs trace()
