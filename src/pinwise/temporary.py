"""pinwise's temporary folders, and what dead processes left in the temporary directory.

Temporary folders carry the owner's PID (``pinwise-KIND-PID-xxxx``) and a marker file
(:data:`MARKER`), and what Valgrind and Open MPI write goes inside them; a folder whose owner is
dead (a pinwise killed with -9) is removed when the next pinwise command starts
(:func:`clean_leftovers`), with the vgdb FIFOs of a dead Valgrind. A folder without the marker is
never removed, whatever its name: a user's ``pinwise-demo-2024-results`` is theirs.
"""

from __future__ import annotations

import os
import stat
import sys


def temporary_root() -> str:
    """The folder tempfile.gettempdir() chooses (TMPDIR, TEMP, TMP, then /tmp, /var/tmp, /usr/tmp:
    the first writable one), found without importing tempfile, a tenth of ``pinwise run``'s
    start-up, where it is not loaded yet."""
    if "tempfile" in sys.modules:
        return sys.modules["tempfile"].gettempdir()
    for candidate in (os.environ.get("TMPDIR"), os.environ.get("TEMP"), os.environ.get("TMP"), "/tmp", "/var/tmp",
                      "/usr/tmp"):
        if candidate and os.path.isdir(candidate) and os.access(candidate, os.W_OK | os.X_OK):
            return candidate
    return os.getcwd()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _owner(name: str) -> int | None:
    """The PID a leftover's name carries: ``pinwise-KIND-PID-xxxx`` (pinwise's temporary folders)
    or ``vgdb-pipe-...-PID-by-USER-on-HOST`` (the gdbserver FIFOs and shared memory of a Valgrind
    that ran without --vgdb=no, which a Valgrind killed with -9 leaves); None for anything else."""
    if name.startswith("pinwise-"):
        parts = name.split("-")
        return int(parts[2]) if len(parts) > 3 and parts[2].isdigit() else None
    for prefix in ("vgdb-pipe-from-vgdb-to-", "vgdb-pipe-to-vgdb-from-", "vgdb-pipe-shared-mem-vgdb-"):
        if name.startswith(prefix):
            pid, _, rest = name[len(prefix):].partition("-by-")
            host = rest.rpartition("-on-")[2]
            if pid.isdigit() and host in ("???", os.uname().nodename):  # a PID of this machine
                return int(pid)
    return None


def clean_leftovers(directory: str | None = None) -> list[str]:
    """Remove what processes that no longer exist left in the temporary folder: pinwise's
    ``pinwise-KIND-PID-*`` folders (a pinwise killed with -9 left them, with what Valgrind, Open
    MPI or the preload library wrote inside) and Valgrind's ``vgdb-pipe-*`` files; only those of
    this user. Returns their paths. Every command starts with it, so the next pinwise cleans what
    a killed one left."""
    directory = directory or temporary_root()
    removed = []
    try:
        names = [name for name in os.listdir(directory) if name.startswith(("pinwise-", "vgdb-pipe-"))]
    except OSError:
        return removed
    for name in names:
        pid = _owner(name)
        path = os.path.join(directory, name)
        try:
            found = os.lstat(path)
        except OSError:
            continue
        if pid is None or found.st_uid != os.getuid() or _alive(pid):
            continue
        if stat.S_ISDIR(found.st_mode) and name.startswith("pinwise-"):
            import shutil

            if not os.path.isfile(os.path.join(path, MARKER)):
                continue  # a folder of that name that pinwise did not make

            shutil.rmtree(path, ignore_errors=True)
        elif (stat.S_ISFIFO(found.st_mode) or stat.S_ISREG(found.st_mode)) and name.startswith("vgdb-pipe-"):
            try:
                os.unlink(path)
            except OSError:
                continue
        else:
            continue
        removed.append(path)
    return removed


#: The file in each of pinwise's temporary folders that says it made it (clean_leftovers removes
#: only folders that hold it). A pinwise killed between making a folder and this file leaves an
#: empty folder behind, never removes a folder it did not make.
MARKER = ".made-by-pinwise"


def temporary_folder(kind: str):
    """``tempfile.TemporaryDirectory`` named after this process and marked as pinwise's
    (:data:`MARKER`), once dead owners' are gone."""
    import tempfile

    clean_leftovers()
    folder = tempfile.TemporaryDirectory(prefix=f"pinwise-{kind}-{os.getpid()}-")
    try:
        with open(os.path.join(folder.name, MARKER), "x"):
            pass
    except OSError:
        folder.cleanup()
        raise
    return folder
