"""Nothing outlives pinwise: the programs it starts die with it, and its temporary folders go.

- SIGTERM (a batch system's time limit) and SIGHUP (a dropped ssh session) stop pinwise as Ctrl-C
  does (:class:`pinwise.errors.Terminated`): the run in flight is killed, nothing half-done is
  recorded, and the command says what is saved.
- ``kill -9`` cannot be caught, so every program pinwise waits for is started with
  ``PR_SET_PDEATHSIG`` (:func:`die_with_parent`): the kernel kills it when pinwise dies.
- Temporary folders carry the owner's PID (``pinwise-KIND-PID-xxxx``); a folder whose owner is
  dead (killed with -9) is removed the next time pinwise makes one (:func:`temporary_folder`).
"""

from __future__ import annotations

import os
import signal

from .errors import Terminated

_PR_SET_PDEATHSIG = 1


def _terminated(signum, frame):
    raise Terminated(signum)


def stop_on_termination() -> None:
    """SIGTERM and SIGHUP raise :class:`Terminated` (a KeyboardInterrupt) in the main thread."""
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _terminated)
    signal.signal(signal.SIGINT, signal.default_int_handler)


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
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # pinwise died before the line above: do not run orphaned
            os._exit(137)
    return arm


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
