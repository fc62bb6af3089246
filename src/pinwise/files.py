"""Reading users' input files with one clear error per way they fail, and writing output files so
that a failure never leaves a half-written one behind."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from .errors import PinwiseError


def write_text_atomic(path: str | Path, text: str) -> None:
    """:func:`write_bytes_atomic` of ``text`` in UTF-8, whatever the locale (a file name that is
    not UTF-8, held in ``text`` as Python holds it, gets its own bytes back)."""
    write_bytes_atomic(path, text.encode("utf-8", "surrogateescape"))


def is_special(path: str | Path) -> bool:
    """Whether ``path`` is a device or a pipe, through links (/dev/stdout is one): written in place,
    never replaced by a file, and with no file beside it. False where nothing is there yet."""
    try:
        return not stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def check_output_file(path: str | Path, what: str = "output file", probe: bool = True) -> Path:
    """Refuse, before any work is done, a path that cannot become a file: empty, a directory, or
    in a folder that does not exist or cannot be written (with ``probe``, a file is made there
    and removed: the writer that makes one anyway need not)."""
    text = str(path)
    if not text.strip():
        raise PinwiseError(f"{what}: the name is empty")
    path = Path(text)
    try:
        if path.is_dir():
            raise PinwiseError(f"{what} {text!r} is a directory; give a file name (e.g. {text.rstrip('/')}/out)")
        folder = path.parent
        if not folder.is_dir():
            raise PinwiseError(f"{what} {text!r}: the folder {str(folder)!r} does not exist")
    except OSError as err:  # a name too long, a loop of links
        raise PinwiseError(f"{what} {text[:80]!r}: {err.strerror}") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise PinwiseError(f"{what} {text!r}: the folder {str(folder)!r} is not writable")
    special = is_special(path)
    if probe and not special:  # what access() cannot tell (/proc, a read-only mount for root): the file beside it is made
        try:
            fd, probe = tempfile.mkstemp(prefix=".pinwise-probe-", dir=folder)
        except OSError as err:
            raise PinwiseError(f"{what} {text!r}: no file can be made in {str(folder)!r} ({err.strerror})") from None
        os.close(fd)
        os.unlink(probe)
    return path


def check_output_folder(path: str | Path, what: str = "output folder") -> Path:
    """A folder to write into: it may not exist yet (it is created), but must not be a file."""
    text = str(path)
    if not text.strip():
        raise PinwiseError(f"{what}: the name is empty")
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise PinwiseError(f"{what} {text!r} is a file, not a folder")
    existing = next((p for p in (path, *path.parents) if p.exists()), Path("."))
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise PinwiseError(f"{what} {text!r}: {str(existing)!r} is not a writable folder")
    return path


def write_bytes_atomic(path: str | Path, content: bytes) -> None:
    """Write to a temporary file beside ``path`` and rename it into place (a device or a pipe is
    written in place)."""
    path = check_output_file(path, probe=False)  # its own temporary file is the test
    special = is_special(path)
    if not special and path.is_symlink():  # the file it names gets the content; the link stays a link
        path = Path(os.path.realpath(path))
    if special:  # a device or a pipe (/dev/stdout, a FIFO): written in place, never replaced by a file
        try:
            with open(path, "wb") as handle:
                handle.write(content)
        except OSError as err:
            raise PinwiseError(f"cannot write {str(path)!r}: {err.strerror}") from None
        return
    directory = path.parent if str(path.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=directory)
    except OSError as err:
        raise PinwiseError(f"cannot write {str(path)!r}: {err.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(content)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp's 0600 is for the temporary file only
        os.replace(tmp, path)
    except OSError as err:
        Path(tmp).unlink(missing_ok=True)
        raise PinwiseError(f"cannot write {str(path)!r}: {err.strerror}") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


#: The largest input file pinwise reads: a communication matrix of 4096 threads written as text
#: (MAX_MATRIX_THREADS in pinwise.comm) takes about 130 MiB; anything larger is not one of its files.
MAX_INPUT_BYTES = 256 << 20


def read_input(path: str | Path, what: str, binary: bool = False, limit: int = MAX_INPUT_BYTES) -> str | bytes:
    """Read a user's input file, turning every way it can fail into one clear PinwiseError.

    Only a file, a pipe (``<(...)``, ``/dev/stdin``) or a terminal is read, and at most ``limit``
    bytes of it: a device such as /dev/zero, or a file past the limit, is refused before it fills
    the memory. Text is UTF-8 (whatever the locale), a byte-order mark left out."""
    name = str(path)
    try:
        before = os.stat(path)
        if stat.S_ISDIR(before.st_mode):
            raise PinwiseError(f"{what} {name!r} is a directory, not a file")
        if not (stat.S_ISREG(before.st_mode) or stat.S_ISFIFO(before.st_mode) or stat.S_ISCHR(before.st_mode)):
            raise PinwiseError(f"{what} {name!r} is not a file (a socket or a block device)")
        if stat.S_ISREG(before.st_mode) and before.st_size > limit:
            raise PinwiseError(f"{what} {name!r} holds {before.st_size / (1 << 20):,.0f} MiB, more than the "
                               f"{limit >> 20} MiB of any {what} pinwise reads")
        with open(path, "rb") as handle:
            if stat.S_ISCHR(os.fstat(handle.fileno()).st_mode) and not handle.isatty():
                raise PinwiseError(f"{what} {name!r} is a device, not a file")
            data = handle.read(limit + 1)
    except FileNotFoundError:
        raise PinwiseError(f"{what} {name!r} does not exist") from None
    except IsADirectoryError:
        raise PinwiseError(f"{what} {name!r} is a directory, not a file") from None
    except OSError as err:
        raise PinwiseError(f"cannot read {what} {name!r}: {err.strerror}") from None
    if len(data) > limit:  # a pipe that goes on and on
        raise PinwiseError(f"{what} {name!r} goes on past {limit >> 20} MiB, more than any {what} pinwise reads")
    if binary:
        return data
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise PinwiseError(f"{what} {name!r} is not text (UTF-8)") from None


def read_document(text: str | bytes, source: str, format_name: str, what: str, newest: int | None = None,
                  format_optional: bool = False) -> dict:
    """A JSON document of one of pinwise's file formats (``{"format": format_name, ...}``), or one
    clear error naming ``source`` and what it should have been (``what``, e.g. "a pinwise topology").
    ``newest``: the highest ``"version"`` this pinwise reads; ``format_optional``: a document
    written by hand may leave "format" out (another value is still refused)."""
    import json

    try:
        document = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise PinwiseError(f"{source} is not valid JSON ({err})") from None
    except ValueError as err:  # an integer of thousands of digits
        raise PinwiseError(f"{source} holds a number pinwise cannot read ({str(err).split(';')[0]})") from None
    except RecursionError:
        raise PinwiseError(f"{source} is nested too deeply to be {what}") from None
    left_out = format_optional and isinstance(document, dict) and "format" not in document
    if not isinstance(document, dict) or (document.get("format") != format_name and not left_out):
        raise PinwiseError(f"{source} is not {what} (expected \"format\": \"{format_name}\")")
    version = document.get("version")
    if newest is not None and version is not None:
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise PinwiseError(f"{source}: \"version\" is {version!r}, not a version number")
        if version > newest:
            raise PinwiseError(f"{source} was written by a newer pinwise (version {version}; this one reads up to "
                               f"{newest}): upgrade pinwise to read it")
    return document


def refuse_same_files(outputs: list[tuple[str, str]], inputs: list[tuple[str, str]]) -> None:
    """Refuse, before any work, an output that is one of the command's inputs: the same file by
    device and inode, so also through a symbolic or a hard link (``--html r.db`` of the database
    r.db would replace it by the report). Two outputs that name one file are refused too. Each is
    (the option as the user typed it, the path); devices and pipes (/dev/null, /dev/stdout) are
    left alone."""
    seen: dict[object, tuple[str, str, bool]] = {}
    for label, path, is_input in [*((k, v, True) for k, v in inputs), *((k, v, False) for k, v in outputs)]:
        key = _file_identity(path, must_exist=is_input)
        if key is None:
            continue
        if key in seen and not is_input:
            other, other_path, other_is_input = seen[key]
            what = "one of its inputs" if other_is_input else "another output"
            raise PinwiseError(f"{label} {path!r} is the same file as {other} {other_path!r}, {what}: writing it "
                               "would destroy it; give another name")
        seen.setdefault(key, (label, path, is_input))


def _file_identity(path: str, must_exist: bool):
    """(device, inode) of a regular file; the resolved name of a file not made yet (an output);
    None for anything else."""
    try:
        found = os.stat(path)
    except FileNotFoundError:
        if must_exist:
            return None
        try:
            return os.path.join(os.path.realpath(os.path.dirname(path) or "."), os.path.basename(path))
        except (OSError, ValueError):
            return None
    except (OSError, ValueError):
        return None
    return (found.st_dev, found.st_ino) if stat.S_ISREG(found.st_mode) else None
