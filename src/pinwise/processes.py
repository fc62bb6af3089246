"""Nothing outlives pinwise: the programs it starts die with it, and its temporary folders go.

- SIGTERM (a batch system's time limit) and SIGHUP (a dropped ssh session) stop pinwise as Ctrl-C
  does (:class:`pinwise.errors.Terminated`): the run in flight is killed, nothing half-done is
  recorded, and the command says what is saved.
- ``kill -9`` cannot be caught, so every program pinwise waits for is started with
  ``PR_SET_PDEATHSIG`` (:func:`die_with_parent`): the kernel kills it when pinwise dies. The
  program's own children do not inherit that; they run in the program's session (or, for
  ``pinwise run``, its process group), which a :class:`GroupGuard` kills when pinwise dies.
- The program of ``pinwise run`` keeps the terminal in its own process group, handed over as a
  shell hands it to a job (:class:`foreground_job`); ``workload run`` and ``run --no-verify``
  become the program (:func:`become`), so nothing of pinwise is left to outlive.
- Temporary folders (:mod:`pinwise.temporary`) go with the command that made them, and the next
  command removes those of a pinwise killed with -9.

And pinwise stays quiet beside what it measures (:func:`own_settings`): OpenBLAS's idle threads in
its own process sleep at once instead of spinning, while the programs it starts get the user's
environment unchanged (:func:`user_environment`).
"""

from __future__ import annotations

import _thread
import os
import signal
import sys
import threading
import time

from .errors import PinwiseError, Terminated

_PR_SET_PDEATHSIG = 1

#: What pinwise sets in its own environment (own_settings). OpenBLAS (numpy's and scipy's) leaves
#: its idle threads spinning for 2^28 cycles after each call before they sleep: measured, 10% of
#: the CPU time of a `pinwise bench` of a 2-thread program on 2 CPUs went to those threads in
#: pinwise's process, beside the program being timed. OpenBLAS reads OPENBLAS_THREAD_TIMEOUT once,
#: as it loads (numpy and scipy load lazily, after this is set): 2^4 cycles, so they sleep at once
#: and pinwise's own linear algebra keeps its threads.
OWN_SETTINGS = {"OPENBLAS_THREAD_TIMEOUT": "4"}
_users_values: dict[str, str | None] = {}


class own_settings:
    """For the length of a ``with`` block (a command), :data:`OWN_SETTINGS` in pinwise's own
    environment; the user's values come back at the end and in :func:`user_environment`."""

    def __enter__(self):
        for name, value in OWN_SETTINGS.items():
            if name not in _users_values:
                _users_values[name] = os.environ.get(name)
            os.environ[name] = value
        return self

    def __exit__(self, *exc):
        for name, value in _users_values.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        _users_values.clear()
        return False


def user_environment(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a program pinwise starts gets: ``base`` (default: pinwise's own) with the
    user's values of what :class:`own_settings` changed."""
    env = dict(os.environ if base is None else base)
    for name, value in _users_values.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


#: The signals that stop pinwise as Ctrl-C does; held while a program starts (:func:`signals_held`).
STOPPING = frozenset({signal.SIGINT, signal.SIGTERM, signal.SIGHUP})
#: The stop signals received since :func:`stop_on_termination`, in order: a module interrupted as
#: it loads may turn the KeyboardInterrupt into another error (numpy raises ImportError), and this
#: still tells that the command was stopped.
received: list[int] = []


def _stopped(signum, frame):
    received.append(signum)
    if _within_redelivery(frame):  # raised here, it would be lost in the hook: once more, later
        _deliver_again()
        return
    if signum == signal.SIGINT:
        raise KeyboardInterrupt  # as Python's own handler does
    raise Terminated(signum)


def stop_on_termination() -> None:
    """SIGINT raises KeyboardInterrupt, SIGTERM and SIGHUP :class:`Terminated` (a
    KeyboardInterrupt), in the main thread; each is noted in :data:`received`. One that lands in
    a callback Python cannot raise from (a weakref's, as importlib's module locks have while a
    module loads: Python printed "Exception ignored in" with a traceback, and the command went on)
    is delivered again, to be raised where the command can end by it. A SIGHUP that pinwise was
    started ignoring (``nohup pinwise ...``) stays ignored, by pinwise and by the programs it
    starts, which inherit that: a dropped session must not end what nohup keeps."""
    for signum in STOPPING:
        if signum == signal.SIGHUP and signal.getsignal(signum) == signal.SIG_IGN:
            continue
        signal.signal(signum, _stopped)
    if not getattr(sys.unraisablehook, "redelivers_stops", False):
        sys.unraisablehook = _redelivering(sys.unraisablehook)


def _redelivering(hook):
    def redeliver(unraisable) -> None:
        if isinstance(unraisable.exc_value, KeyboardInterrupt) and received:
            _deliver_again()
            return
        hook(unraisable)

    redeliver.redelivers_stops = True
    return redeliver


_REDELIVERY = _redelivering(None).__code__


def _within_redelivery(frame) -> bool:
    """Whether the handler runs inside the hook that delivers a stop again: a signal sent again
    can land there before the hook returns (CI under load, 15 runs in 200 of a loaded 2-CPU
    guest), and a KeyboardInterrupt raised in an unraisablehook is printed and dropped."""
    while frame is not None and frame.f_code is not _REDELIVERY:
        frame = frame.f_back
    return frame is not None


def _deliver_again() -> None:
    """The last stop signal received, sent to the main thread again a moment later from another
    thread (it is noted in :data:`received` again as it is handled). A bare thread: the handler
    may run inside threading's own locked code, where starting a Timer could deadlock."""
    main, signum = threading.main_thread().ident, received.pop()
    _thread.start_new_thread(lambda: (time.sleep(0.001), signal.pthread_kill(main, signum)), ())


class signals_held:
    """Hold SIGINT, SIGTERM and SIGHUP for the length of a ``with`` block, delivered as it ends.

    Around the start of a program and the lines that record it (its group watched, its kill
    registered): a signal between the fork and those lines would leave a program nobody kills;
    and around work that must not stop half-done (a window half judged, threads half moved).
    Use it inside the ``try`` whose handler kills the program. Children get the signals back in
    :func:`die_with_parent`'s ``preexec_fn``.

    Blocking them in this thread is not enough where pinwise has other threads (OpenBLAS's): the
    kernel then hands the signal to one of those, and Python runs its handler in the main thread
    at once, inside the block. So in the main thread the Python handlers are swapped too, for one
    that notes the signal; it is sent again as the block ends."""

    def __enter__(self):
        self._before = signal.pthread_sigmask(signal.SIG_BLOCK, STOPPING)
        self._handlers: dict[int, object] = {}
        self._noted: list[int] = []
        if threading.current_thread() is threading.main_thread():
            for signum in STOPPING:
                handler = signal.getsignal(signum)
                if callable(handler):  # a Python handler; the default and "ignore" act in the kernel
                    self._handlers[signum] = handler
                    signal.signal(signum, self._note)

    def _note(self, signum, frame) -> None:
        if signum not in self._noted:
            self._noted.append(signum)

    def __exit__(self, *exc):
        for signum, handler in self._handlers.items():
            signal.signal(signum, handler)
        signal.pthread_sigmask(signal.SIG_SETMASK, self._before)  # those held are delivered now
        for signum in self._noted:  # to this thread, raised here (or held, in an outer block)
            signal.raise_signal(signum)


_prctl = None


def die_with_parent(terminal: int | None = None):
    """A ``preexec_fn`` for subprocess.Popen: the child gets SIGKILL when pinwise dies, however
    it dies (set between fork and exec, so it holds for the program itself). ``terminal``: a
    descriptor of the controlling terminal, which the child's new process group takes as its
    foreground (:class:`foreground_job`)."""
    global _prctl
    if _prctl is None:  # looked up once, in pinwise, not in every forked child
        import ctypes

        _prctl = ctypes.CDLL(None, use_errno=True).prctl
    prctl, parent = _prctl, os.getpid()

    def arm():
        if terminal is not None:
            _give_terminal(terminal, os.getpgrp())
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOPPING)  # held by signals_held while it started
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # pinwise died before the line above: do not run orphaned
            os._exit(137)
    return arm


def _give_terminal(terminal: int, pgid: int) -> None:
    """Make ``pgid`` the terminal's foreground group. A process of a background group that does
    this gets SIGTTOU (and stops) unless it holds the signal, so it is held meanwhile."""
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTTOU})
    try:
        os.tcsetpgrp(terminal, pgid)
    except OSError:
        pass  # the terminal went away: nothing to hand over
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def controlling_terminal() -> int | None:
    """The descriptor among 0, 1, 2 of the terminal whose foreground group pinwise is in (None
    when pinwise runs in the background, in a pipeline's reader, or without a terminal)."""
    for fd in (0, 1, 2):
        try:
            if os.isatty(fd) and os.tcgetpgrp(fd) == os.getpgrp():
                return fd
        except OSError:
            continue
    return None


class foreground_job:
    """A program in a process group of its own (so that whatever ends pinwise can end all of it,
    :class:`GroupGuard`) that still has the terminal as if pinwise had exec'd it: its group is the
    terminal's foreground for the length of the ``with`` block, as a shell hands the terminal to
    a job; Ctrl-C and Ctrl-Z reach the program, and pinwise takes the terminal back after.
    ``terminal`` is :func:`controlling_terminal`'s; None: there is no terminal to hand over."""

    def __init__(self, pgid: int, terminal: int | None):
        self.pgid, self.terminal = pgid, terminal
        self.stopped_by: int | None = None  # the stop signal pinwise received and passed on, if any

    def __enter__(self) -> foreground_job:
        if self.terminal is not None:  # the child does it too, whichever runs first (then pinwise is in the background)
            _give_terminal(self.terminal, self.pgid)
        return self

    def __exit__(self, *exc) -> None:
        if self.terminal is not None:
            _give_terminal(self.terminal, os.getpgrp())

    def wait(self, pid: int) -> int:
        """Wait for ``pid`` to end; its exit status as subprocess gives it. A stop of the program
        (Ctrl-Z) stops pinwise too, so that the shell sees its job stopped, and ``fg`` continues
        both; SIGTERM and SIGHUP to pinwise (a KeyboardInterrupt) go on to the program's group."""
        while True:
            try:
                _, status = os.waitpid(pid, os.WUNTRACED)
            except KeyboardInterrupt as interrupt:  # the program decides what the signal means
                self.stopped_by = getattr(interrupt, "signum", signal.SIGINT)
                try:
                    os.killpg(self.pgid, self.stopped_by)
                except ProcessLookupError:
                    pass
                continue
            if not os.WIFSTOPPED(status):
                return os.waitstatus_to_exitcode(status)
            if self.terminal is not None:
                _give_terminal(self.terminal, os.getpgrp())
            os.kill(os.getpid(), signal.SIGSTOP)  # as the program stopped; a shell's fg continues here
            if self.terminal is not None and controlling_terminal() is not None:  # continued in the foreground
                _give_terminal(self.terminal, self.pgid)
            try:
                os.killpg(self.pgid, signal.SIGCONT)
            except ProcessLookupError:
                pass


class GroupGuard:
    """Kills the processes of the run in flight if pinwise dies, even by ``kill -9``.

    One small shell per bench or trace reads what pinwise writes into a pipe (``watch`` when a
    run starts, ``release`` when it has ended and been cleaned up). A pipe closes when its writer
    dies however it dies: the shell then reads end-of-file and kills the last process group it was
    given, or with ``session`` every process of that session, whatever groups they made (Open
    MPI's mpirun puts each rank in a group of its own); unless it was released. The pipe is
    close-on-exec, so no program inherits its end.
    """

    _SCRIPT = """
g=-; while read -r line; do g=$line; done
case $g in
-) ;;
s*) s=${g#s}; kill -s KILL -- "-$s" 2>/dev/null
    for round in 1 2 3; do
        for d in /proc/[0-9]*; do
            read -r line 2>/dev/null < "$d/stat" || continue
            set -- ${line##*") "}
            [ "$4" = "$s" ] && kill -s KILL "${d#/proc/}" 2>/dev/null
        done
    done ;;
*) kill -s KILL -- "-$g" 2>/dev/null ;;
esac
"""

    def __init__(self):
        import subprocess

        self._watched: tuple[int, bool] | None = None  # what the shell kills if pinwise dies
        read_end, self._fd = os.pipe()
        try:
            # Its own session: the terminal's Ctrl-C, meant for pinwise, must not end the guard first.
            self._shell = subprocess.Popen(["/bin/sh", "-c", self._SCRIPT], stdin=read_end,
                                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                           start_new_session=True)
        except OSError:
            os.close(self._fd)
            raise
        finally:
            os.close(read_end)

    def _say(self, text: str) -> None:
        try:
            os.write(self._fd, text.encode() + b"\n")
        except OSError:
            pass  # the guard is gone (killed by hand): the run goes on unguarded

    def watch(self, pgid: int, session: bool = False) -> None:
        """Kill process group ``pgid`` if pinwise dies; with ``session``, every process of the
        session it leads (a program started with start_new_session)."""
        self._watched = (pgid, session)
        self._say(f"s{pgid}" if session else str(pgid))

    def release(self) -> None:
        self._watched = None
        self._say("-")

    def close(self) -> None:
        """Release the last group and let the shell end."""
        if self._fd >= 0:
            self.release()
            os.close(self._fd)
            self._fd = -1
            self._shell.wait()

    def __enter__(self) -> GroupGuard:
        return self

    def __exit__(self, exc_type, *exc) -> None:
        """A block left by an exception (a stop signal raised as the program started, before the
        code that kills it on one was reached) kills what it still watches, as if pinwise had died."""
        if exc_type is not None and self._watched is not None:
            pgid, session = self._watched
            (kill_session if session else kill_group)(pgid)
        self.close()


def become(program: str, argv: list[str], env: dict[str, str] | None = None):
    """Replace pinwise by ``program`` (exec, as taskset does): nothing is left to outlive, and the
    program's exit status and signals reach the caller unchanged. The signals Python ignores
    (SIGPIPE, SIGXFSZ) get their default back, as subprocess gives them to its children. Returns
    only by raising PinwiseError, if the program cannot start."""
    import sys

    sys.stdout.flush()
    sys.stderr.flush()
    for signum in (signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(signum, signal.SIG_DFL)
    try:
        os.execve(program, argv, os.environ if env is None else env)
    except OSError as err:
        raise PinwiseError(f"cannot start {argv[0]}: {err.strerror}") from None


def kill_group(pgid: int) -> None:
    """SIGKILL to a whole process group; nothing if it is already gone."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def kill_session(sid: int) -> None:
    """SIGKILL to every process of session ``sid``: a program started with start_new_session and
    all it started, whatever process groups they made (Open MPI puts each rank in its own)."""
    kill_group(sid)
    for _ in range(3):  # a process that forked as the first pass went by is found by the next
        members = _session_members(sid)
        if not members:
            return
        for pid in members:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def stat_fields(path: str) -> list[str]:
    """The fields of a /proc stat file after the command's name (state, ppid, pgrp, session, ...),
    which may hold blanks and brackets; [] if the process or thread is gone."""
    try:
        with open(path, "rb") as stat_file:
            return stat_file.read().rpartition(b") ")[2].decode().split()
    except OSError:
        return []


def how_it_ended(returncode: int) -> str:
    """A program's end as subprocess reports it (negative: killed by that signal), in words:
    "exited with status 7", "was killed by SIGABRT"."""
    if returncode >= 0:
        return f"exited with status {returncode}"
    try:
        return f"was killed by {signal.Signals(-returncode).name}"
    except ValueError:  # a real-time signal: no name
        return f"was killed by signal {-returncode}"


def not_a_program(pid: int) -> str | None:
    """Why ``pid`` names no program's process to attach to or pin (a thread of another process,
    a kernel thread), as a sentence; None when it is one, or when /proc cannot say."""
    try:
        with open(f"/proc/{pid}/status") as status_file:
            status = dict(line.split(":\t", 1) for line in status_file.read().splitlines() if ":\t" in line)
        tgid, kernel = int(status["Tgid"]), status.get("Kthread", "0").strip() == "1"
    except (OSError, KeyError, ValueError):
        return None
    if tgid != pid:  # /proc shows a thread's id too, though no listing names it
        return f"{pid} is a thread of process {tgid}, not a process: give --pid {tgid}"
    if kernel:
        return f"process {pid} ({status.get('Name', '?').strip()}) is a kernel thread: it runs no program"
    return None


def _session_members(sid: int) -> list[int]:
    """The live (not zombie) processes of session ``sid``, from /proc."""
    members = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            fields = stat_fields(f"/proc/{name}/stat")
            if len(fields) > 3 and fields[3] == str(sid) and fields[0] != "Z":
                members.append(int(name))
    return members


def run_in_group(command: list[str], what: str, stderr_tail: bytearray | None = None, **popen_options) -> int:
    """Run ``command`` in a session of its own and wait for it; whatever ends pinwise (a signal,
    kill -9 through the GroupGuard) ends every process of the session too, and what it left
    running is killed when it ends. Returns its exit status; ``what`` names it in the error if it
    cannot start. With ``stderr_tail``, what the command writes on standard error still reaches
    pinwise's as it comes, and its last STDERR_KEPT bytes are kept there (a launcher's own
    message, to pass on)."""
    import subprocess

    if stderr_tail is not None:
        popen_options["stderr"] = subprocess.PIPE
    copier = None
    with GroupGuard() as guard:
        with signals_held():
            try:
                process = subprocess.Popen(command, start_new_session=True, preexec_fn=die_with_parent(),
                                           **popen_options)
            except OSError as err:
                raise PinwiseError(f"cannot start {what}: {err.strerror}") from None
            guard.watch(process.pid, session=True)
        if stderr_tail is not None:
            import threading

            copier = threading.Thread(target=_copy_stderr, args=(process.stderr, stderr_tail), daemon=True)
            copier.start()
        try:
            return process.wait()
        except KeyboardInterrupt:
            kill_session(process.pid)
            process.wait()
            raise
        finally:
            kill_session(process.pid)
            if copier is not None:
                copier.join(timeout=5)  # the pipe ends when the last process holding it has gone
                process.stderr.close()


#: How much of a command's standard error run_in_group keeps when asked.
STDERR_KEPT = 16384


def _copy_stderr(pipe, tail: bytearray) -> None:
    while chunk := pipe.read1(65536):
        try:
            os.write(2, chunk)
        except OSError:
            pass
        tail += chunk
        del tail[:-STDERR_KEPT]
