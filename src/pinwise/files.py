"""Reading users' input files with one clear error per way they fail, and writing output files so
that a failure never leaves a half-written one behind."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from .errors import PinwiseError


def write_bytes_atomic(path: str | Path, data: bytes) -> None:
    """Write to a temporary file beside ``path`` and rename it into place."""
    _write_atomic(path, data, "wb")


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write to a temporary file beside ``path`` and rename it into place."""
    _write_atomic(path, text, "w")


def check_output_file(path: str | Path, what: str = "output file") -> Path:
    """Refuse, before any work is done, a path that cannot become a file: empty, a directory, or
    in a folder that does not exist or cannot be written."""
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


def _write_atomic(path: str | Path, content, mode: str) -> None:
    path = check_output_file(path)
    try:
        special = not stat.S_ISREG(os.stat(path).st_mode)  # through links: /dev/stdout is one
    except OSError:
        special = False  # nothing there yet
    if not special and path.is_symlink():  # the file it names gets the content; the link stays a link
        path = Path(os.path.realpath(path))
    if special:  # a device or a pipe (/dev/stdout, a FIFO): written in place, never replaced by a file
        try:
            with open(path, mode) as handle:
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
        with os.fdopen(fd, mode) as handle:
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


def read_input(path: str | Path, what: str, binary: bool = False) -> str | bytes:
    """Read a user's input file, turning every way it can fail into one clear PinwiseError."""
    path = Path(path)
    try:
        return path.read_bytes() if binary else path.read_text()
    except FileNotFoundError:
        raise PinwiseError(f"{what} {str(path)!r} does not exist") from None
    except IsADirectoryError:
        raise PinwiseError(f"{what} {str(path)!r} is a directory, not a file") from None
    except OSError as err:
        raise PinwiseError(f"cannot read {what} {str(path)!r}: {err.strerror}") from None
    except UnicodeDecodeError:
        raise PinwiseError(f"{what} {str(path)!r} is not text") from None


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
