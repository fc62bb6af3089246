"""Nothing outlives pinwise: the programs it starts die with it, and its temporary folders go.

- SIGTERM (a batch system's time limit) and SIGHUP (a dropped ssh session) stop pinwise as Ctrl-C
  does (:class:`pinwise.errors.Terminated`): the run in flight is killed, nothing half-done is
  recorded, and the command says what is saved.
- ``kill -9`` cannot be caught, so every program pinwise waits for is started with
  ``PR_SET_PDEATHSIG`` (:func:`die_with_parent`): the kernel kills it when pinwise dies. The
  program's own children do not inherit that; they run in the program's process group, which a
  :class:`GroupGuard` kills when pinwise dies.
- Temporary folders carry the owner's PID (``pinwise-KIND-PID-xxxx``); a folder whose owner is
  dead (killed with -9) is removed the next time pinwise makes one (:func:`temporary_folder`).

And pinwise stays quiet beside what it measures (:func:`own_settings`): OpenBLAS's idle threads in
its own process sleep at once instead of spinning, while the programs it starts get the user's
environment unchanged (:func:`user_environment`).
"""

from __future__ import annotations

import os
import signal

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


def _terminated(signum, frame):
    raise Terminated(signum)


def stop_on_termination() -> None:
    """SIGTERM and SIGHUP raise :class:`Terminated` (a KeyboardInterrupt) in the main thread."""
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _terminated)
    signal.signal(signal.SIGINT, signal.default_int_handler)


#: The signals that stop pinwise as Ctrl-C does; held while a program starts (:func:`signals_held`).
STOPPING = frozenset({signal.SIGINT, signal.SIGTERM, signal.SIGHUP})


class signals_held:
    """Hold SIGINT, SIGTERM and SIGHUP for the length of a ``with`` block, delivered as it ends.

    Around the start of a program and the lines that record it (its group watched, its kill
    registered): a signal between the fork and those lines would leave a program nobody kills.
    Use it inside the ``try`` whose handler kills the program. Children get the signals back in
    :func:`die_with_parent`'s ``preexec_fn``."""

    def __enter__(self):
        self._before = signal.pthread_sigmask(signal.SIG_BLOCK, STOPPING)

    def __exit__(self, *exc):
        signal.pthread_sigmask(signal.SIG_SETMASK, self._before)


_prctl = None


def die_with_parent():
    """A ``preexec_fn`` for subprocess.Popen: the child gets SIGKILL when pinwise dies, however
    it dies (set between fork and exec, so it holds for the program itself)."""
    global _prctl
    if _prctl is None:  # looked up once, in pinwise, not in every forked child
        import ctypes

        _prctl = ctypes.CDLL(None, use_errno=True).prctl
    prctl, parent = _prctl, os.getpid()

    def arm():
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOPPING)  # held by signals_held while it started
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # pinwise died before the line above: do not run orphaned
            os._exit(137)
    return arm


class GroupGuard:
    """Kills the process group of the run in flight if pinwise dies, even by ``kill -9``.

    One small shell per bench or trace reads the group IDs pinwise writes into a pipe (``watch``
    when a run starts, ``release`` when it has ended and been cleaned up). A pipe closes when its
    writer dies however it dies: the shell then reads end-of-file and kills the last group it was
    given, unless it was released. The pipe is close-on-exec, so no program inherits its end.
    """

    _SCRIPT = ('g=-; while read -r line; do g=$line; done; '
               'if [ "$g" != - ]; then kill -s KILL -- "-$g" 2>/dev/null; fi')

    def __init__(self):
        import subprocess

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

    def watch(self, pgid: int) -> None:
        self._say(str(pgid))

    def release(self) -> None:
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

    def __exit__(self, *exc) -> None:
        self.close()


def kill_group(pgid: int) -> None:
    """SIGKILL to a whole process group; nothing if it is already gone."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_in_group(command: list[str], what: str, stderr_tail: bytearray | None = None, **popen_options) -> int:
    """Run ``command`` in a process group of its own and wait for it; whatever ends pinwise (a
    signal, kill -9 through the GroupGuard) ends the group too, and what it left running is killed
    when it ends. Returns its exit status; ``what`` names it in the error if it cannot start.
    With ``stderr_tail``, what the command writes on standard error still reaches pinwise's as it
    comes, and its last STDERR_KEPT bytes are kept there (a launcher's own message, to pass on)."""
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
            guard.watch(process.pid)
        if stderr_tail is not None:
            import threading

            copier = threading.Thread(target=_copy_stderr, args=(process.stderr, stderr_tail), daemon=True)
            copier.start()
        try:
            return process.wait()
        except KeyboardInterrupt:
            kill_group(process.pid)
            process.wait()
            raise
        finally:
            kill_group(process.pid)
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


def _owner_alive(name: str) -> bool:
    parts = name.split("-")
    try:
        pid = int(parts[2])
    except (IndexError, ValueError):
        return True  # not one of ours in the PID form: leave it alone
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_dead_folders(directory: str | None = None) -> list[str]:
    """Remove ``pinwise-*-PID-*`` folders of processes that no longer exist; returns their paths."""
    import shutil
    import tempfile

    directory = directory or tempfile.gettempdir()
    removed = []
    try:
        names = os.listdir(directory)
    except OSError:
        return removed
    for name in names:
        path = os.path.join(directory, name)
        if name.startswith("pinwise-") and not _owner_alive(name) and os.path.isdir(path) \
                and os.stat(path).st_uid == os.getuid():
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def temporary_folder(kind: str):
    """``tempfile.TemporaryDirectory`` named after this process, once dead owners' are gone."""
    import tempfile

    clean_dead_folders()
    return tempfile.TemporaryDirectory(prefix=f"pinwise-{kind}-{os.getpid()}-")
