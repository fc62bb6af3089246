"""Running an unmodified program with its threads pinned, and reading back where they ran.

The preload library (native/preload) does the pinning inside the program; this module prepares
its environment, starts the program with the user's terminal, passes signals on, and parses the
library's log (:mod:`pinwise.pinning.log`) into one record per thread.
"""

from __future__ import annotations

import os
import signal
from contextlib import contextmanager

from ..cpulist import format_cpulist
from ..errors import PinwiseError
from ..processes import GroupGuard, become, controlling_terminal, die_with_parent, foreground_job, kill_group, \
    signals_held, user_environment
from ..temporary import temporary_folder

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing, a tenth of `pinwise run`'s start-up
if TYPE_CHECKING:
    from ..plan import Plan
    from .log import RunResult

#: Where the native part is installed, as a string: pathlib is the slowest import of a plain
#: ``pinwise run`` (the Path forms below load it on first use).
_NATIVE = os.environ.get("PINWISE_NATIVE_DIR",
                         os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "_native"))
#: The preload library's file name (a process that loaded it maps it under this name).
PRELOAD_NAME = "libpinwise_preload.so"
_PRELOAD = os.path.join(_NATIVE, PRELOAD_NAME)
_PATHS = {"NATIVE_DIR": "", "PRELOAD_LIBRARY": PRELOAD_NAME, "API_LIBRARY": "libpinwise.so",
          "API_HEADER": "include/pinwise.h"}


def __getattr__(name: str):
    """NATIVE_DIR, PRELOAD_LIBRARY, API_LIBRARY, API_HEADER as Paths."""
    if name in _PATHS:
        from pathlib import Path

        return Path(_NATIVE, _PATHS[name]) if _PATHS[name] else Path(_NATIVE)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def find_program(argv: list[str]) -> str:
    """The path of the program ``argv`` names, once it is known that it can start: found (on PATH
    for a bare name), executable, and, for a script, with an interpreter that exists."""
    if not argv:
        raise PinwiseError("no program given: write it after --, e.g. pinwise run --cpus 0,1 -- ./prog args")
    program = argv[0]
    if os.sep in program:
        if not os.path.exists(program):
            raise PinwiseError(f"program {program!r} not found")
        if os.path.isdir(program) or not os.access(program, os.X_OK):
            raise PinwiseError(f"program {program!r} is not executable")
        found = os.path.abspath(program)  # "./prog" must not turn into "prog", a PATH lookup
    else:
        # shutil.which would do, but it imports the compression modules: a tenth of `pinwise run`'s start-up.
        found = next((candidate for folder in os.environ.get("PATH", os.defpath).split(os.pathsep)
                      if os.path.isfile(candidate := os.path.join(folder or ".", program))
                      and os.access(candidate, os.X_OK)), None)
        if found is None:
            raise PinwiseError(f"program {program!r} not found on PATH")
    _check_interpreter(found, program)
    return found


def _check_interpreter(path: str, name: str) -> None:
    """A script whose ``#!`` line names an interpreter that does not exist cannot start; under
    Valgrind or the bench that would be a run of nothing. The kernel reads the name up to a blank
    or the line's end, so a Windows line ending (``\r``) is part of it."""
    try:
        with open(path, "rb") as script:
            head = script.read(256)
    except OSError:
        return
    if not head.startswith(b"#!"):
        return
    interpreter = head[2:].split(b"\n", 1)[0].lstrip(b" \t").replace(b"\t", b" ").split(b" ", 1)[0]
    if not interpreter or os.path.isfile(interpreter) and os.access(interpreter, os.X_OK):
        return
    shown = os.fsdecode(interpreter)
    if interpreter.endswith(b"\r"):
        raise PinwiseError(f"{name} cannot start: its first line names the interpreter {shown!r}, with the carriage "
                           "return of Windows line endings; convert the script (dos2unix, or sed -i 's/\\r$//')")
    raise PinwiseError(f"{name} cannot start: its first line names the interpreter {shown!r}, which "
                       + ("does not exist" if not os.path.exists(interpreter) else "is not an executable file"))


def is_static_executable(path: str) -> bool:
    """An ELF file without a program interpreter: LD_PRELOAD cannot reach it."""
    try:
        with open(path, "rb") as handle:
            header = handle.read(64)
            if header[:4] != b"\x7fELF" or header[4] != 2:  # not ELF64: a script, or something else
                return False
            phoff = int.from_bytes(header[32:40], "little")
            phentsize = int.from_bytes(header[54:56], "little")
            phnum = int.from_bytes(header[56:58], "little")
            handle.seek(phoff)
            table = handle.read(phentsize * phnum)
    except OSError:
        return False
    types = [int.from_bytes(table[i * phentsize:i * phentsize + 4], "little") for i in range(phnum)]
    return 3 not in types  # PT_INTERP


def launchable_program(argv: list[str], omp: bool = False) -> str:
    """The program's path, once it is known that its threads can be pinned: by the preload
    library, or with ``omp`` by the OpenMP runtime (the only way into a static program)."""
    program = find_program(argv)
    if not omp and is_static_executable(program):
        raise PinwiseError(
            f"{argv[0]} is statically linked, so the preload library cannot reach its threads: if it is an OpenMP "
            "program, add --omp (its runtime pins the threads; pinwise cannot read back where they ran), or use "
            "'pinwise pin --pid' once it runs"
        )
    return program


def why_not_loaded(program: str) -> str:
    """Why the preload library left no record in ``program``, as far as its file tells."""
    import stat

    try:
        mode = os.stat(program).st_mode
    except OSError:
        mode = 0
    if is_static_executable(program):
        return "it is statically linked, and LD_PRELOAD reaches only dynamically linked programs"
    if mode & (stat.S_ISUID | stat.S_ISGID):
        return "it is set-user-ID or set-group-ID, and the loader ignores LD_PRELOAD for such programs"
    return "the program removed LD_PRELOAD from its environment or replaced itself before the loader ran"


#: What the OpenMP runtimes of LLVM and Intel (libomp, libiomp5) are told when the preload library
#: pins: keep away from the threads' affinity. Otherwise each worker, once started (and pinned),
#: sets itself to the mask the runtime read at start-up, the whole plan; likwid-pin sets the same.
RUNTIME_SETTINGS = {"KMP_AFFINITY": "disabled"}


def preload_environment(plan: Plan | None, log_path: str | None, follow: bool = True,
                        base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment that makes the preload library pin (or, without a plan, only observe).
    ``follow``: the programs the program starts take the plan too (see the library's
    PINWISE_FOLLOW); otherwise they get back the affinity pinwise was started with."""
    if not os.path.exists(_PRELOAD):
        raise PinwiseError(f"the preload library is missing ({_PRELOAD}); reinstall pinwise with its native part")
    env = user_environment(base)
    for name in ("PINWISE_PLAN", "PINWISE_SKIP", "PINWISE_REPEAT_FROM", "PINWISE_LOG", "PINWISE_FOLLOW",
                 "PINWISE_OWNER", "PINWISE_ORIGINAL", "PINWISE_OBSERVE", "PINWISE_MEMPOLICY", "PINWISE_ADAPT"):
        env.pop(name, None)
    preload = env.get("LD_PRELOAD", "")
    env["LD_PRELOAD"] = f"{_PRELOAD} {preload}".strip()
    env["PINWISE_ORIGINAL"] = format_cpulist(sorted(os.sched_getaffinity(0)))
    if plan is None:
        env["PINWISE_OBSERVE"] = "1"
    else:
        env.update(plan.environment())
        env.update(RUNTIME_SETTINGS)
        env.setdefault("OMP_NUM_THREADS", str(plan.nb_slots))  # as likwid-pin does
    if log_path:
        env["PINWISE_LOG"] = log_path
    if follow:
        env["PINWISE_FOLLOW"] = "1"
    return env


@contextmanager
def whole_plan_mask(plan: Plan | None):
    """The calling thread's affinity narrowed to the plan's CPUs while the program is started: it
    inherits them, so every runtime that sizes itself from the mask while the program loads (also
    in a library constructor that runs before the preload library's) sees the whole plan, as
    under likwid-pin. The preload library narrows each thread to its slot later."""
    if plan is None:
        yield
        return
    before = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, plan.all_cpus)
    except OSError:
        before = None  # the plan was checked against the CPUs allowed; the library says what fails
    try:
        yield
    finally:
        if before is not None:
            os.sched_setaffinity(0, before)


def program_environment(plan: Plan | None, log_path: str | None, follow: bool = True,
                        omp: bool = False, extra_env: dict[str, str] | None = None, memory=None,
                        adapt: os.PathLike | None = None) -> dict[str, str]:
    """The environment a pinned program starts with: the preload library's variables, or with
    ``omp`` the OpenMP runtime's (OMP_PLACES, OMP_PROC_BIND) while the library only observes;
    ``memory`` (a :class:`pinwise.pinning.memory.MemoryPolicy`) is applied by the library either way;
    ``adapt``: the file that says where new threads start under ``run --adapt`` (pinwise.adapt.newcomers)."""
    env = preload_environment(None if omp else plan, log_path, follow)
    if adapt is not None:
        env["PINWISE_ADAPT"] = os.fspath(adapt)
    if memory is not None:
        env.update(memory.environment())
    if omp and plan is not None:
        env.update(plan.omp_environment())
        env.setdefault("OMP_NUM_THREADS", str(plan.nb_slots))
    env.update(extra_env or {})
    return env


def exec_program(argv: list[str], plan: Plan | None, *, follow: bool = True, omp: bool = False, memory=None):
    """Become the program, pinned, as taskset and hwloc-bind do: nothing to wait for and no log,
    so its exit status and signals reach the caller unchanged. Returns only if it cannot start."""
    program = launchable_program(argv, omp)
    env = program_environment(plan, None, follow, omp, memory=memory)  # before the mask: PINWISE_ORIGINAL
    with whole_plan_mask(None if omp else plan):
        become(program, argv, env)


def run_program(argv: list[str], plan: Plan | None, *, follow: bool = True, omp: bool = False,
                extra_env: dict[str, str] | None = None, observe: bool = True, output=None, memory=None) -> RunResult:
    """Run ``argv`` with ``plan`` (None: unpinned, only observed) and report where its threads ran.

    ``follow``: the programs it starts take the plan too (see :func:`preload_environment`).
    With ``omp``, the plan is given to the OpenMP runtime (OMP_PLACES, OMP_PROC_BIND) instead of
    the preload library, which then only observes. ``output``: where the program's standard output
    and error go (default: ours; ``subprocess.DEVNULL`` to discard them).
    """
    import subprocess

    from .log import RunResult, parse_spawns, read_log, unloaded_programs

    program = launchable_program(argv, omp)
    # The log in a folder named after pinwise's PID: one that kill -9 leaves goes at the next start.
    with temporary_folder("run") as folder, GroupGuard() as guard:
        log_path = os.path.join(folder, "threads.log")
        env = program_environment(plan, log_path if observe else None, follow, omp, extra_env, memory)
        terminal = controlling_terminal() if output is None else None
        with signals_held():  # a stop signal lands once the guard watches the program's group
            try:
                with whole_plan_mask(None if omp else plan):
                    # the path found, with the argv[0] the user gave (as a shell starts it)
                    process = subprocess.Popen(argv, executable=program, env=env, stdout=output, stderr=output,
                                               stdin=subprocess.DEVNULL if output is not None else None,
                                               process_group=0, preexec_fn=die_with_parent(terminal))
            except OSError as err:
                raise PinwiseError(f"cannot start {argv[0]}: {err.strerror}") from None
            guard.watch(process.pid)
        try:
            with foreground_job(process.pid, terminal) as job:
                returncode = process.returncode = job.wait(process.pid)
        except BaseException:
            kill_group(process.pid)
            raise
        if job.stopped_by is not None:  # pinwise was stopped: what the program left running goes too
            kill_group(process.pid)
        guard.release()  # else what it started in the background is its own business, as without pinwise
        try:
            with open(log_path, encoding="utf-8", errors="replace") as log:
                text = log.read()
        except FileNotFoundError:
            text = ""
    processes, threads = read_log(text)
    unobserved = None
    if observe and not any(p.pid == process.pid for p in processes):
        unobserved = why_not_loaded(program)
    return RunResult(returncode, threads, signal.Signals(-returncode).name if returncode < 0 else None,
                     process.pid, parse_spawns(text), unobserved, processes, unloaded_programs(text))


def observe_natively(argv: list[str], extra_env: dict[str, str] | None = None) -> RunResult:
    """Run the program once natively, its output discarded, the preload library only observing:
    its threads, and those of every process it starts (children are followed)."""
    import subprocess

    return run_program(argv, None, extra_env=extra_env, output=subprocess.DEVNULL)


def lifetimes_and_spawns(result: RunResult) -> dict | None:
    """From a native run (:func:`observe_natively`) of the program:
    ``{"lifetimes": [[start, end], ...], "spawns": [["create"|"join", index], ...]}``, when each
    thread of its first process lived (CLOCK_MONOTONIC ns from the first, creation order), and the
    main thread's pthread_create and pthread_join calls in its program order, which show workers
    created in rounds whatever the scheduler did. None if the run failed or the log is incomplete."""
    first = next((p for p in result.processes if p.pid == result.pid), None)
    records = list(first.threads) if first is not None else []  # not children, which number their own
    if result.returncode != 0 or not records:
        return None
    if [t.index for t in records] != list(range(len(records))):
        return None
    if any(t.started_ns is None or t.ended_ns is None for t in records):
        return None
    start = records[0].started_ns
    main_tid = records[0].tid
    spawns = [[kind, index] for kind, pid, tid, index in result.spawns if pid == result.pid and tid == main_tid]
    return {"lifetimes": [[t.started_ns - start, t.ended_ns - start] for t in records], "spawns": spawns}
