"""Standard output and error that cannot take pinwise down.

Whatever stands behind them, a command ends with one line and a status, never a traceback:

- standard output on a full device (``>/dev/full``), a closed one (``>&-``) or one that fails
  otherwise: the first write that fails raises :class:`OutputLost` (a PinwiseError: one line on
  standard error, exit status 1); what was buffered is dropped, so nothing fails again as Python
  exits. A reader that went away (``| head``) is a BrokenPipeError, which ends the command quietly;
  standard error's reader going away ends nothing: what follows is dropped, and the status stays
  the command's (``run``'s: the program's);
- a closed standard input, output or error gets /dev/null in its place before pinwise opens a
  file, so that no file it opens (a database, a log) takes the number 1 and receives its output;
- text the terminal's encoding cannot show (the C locale is ASCII) is written in plain ASCII
  (``±`` as ``+/-``), and a file name that is not UTF-8 gets its own bytes back, instead of a
  UnicodeEncodeError.

:func:`guarded` puts them in place for the length of a command, only where they are the
process's own streams (not a test's captured ones).
"""

from __future__ import annotations

import codecs
import io
import os
import sys

from .errors import PinwiseError

#: How characters of pinwise's output read in ASCII.
PLAIN = {"±": "+/-", "²": "^2", "…": "...", "σ": "sd", "—": "--", "–": "-", "−": "-", "ᵀ": "^T", "×": "x",
         "→": "->", "←": "<-", "≥": ">=", "≤": "<=", "µ": "u", "·": ".", "✓": "ok", "✗": "x", "█": "#",
         "▓": "#", "▒": "+", "░": "."}


def _plain(error: UnicodeEncodeError):
    """A codec error handler: a byte a non-UTF-8 file name held (surrogateescape) is written back
    as that byte; another character as its ASCII reading, or ``?``."""
    text = error.object[error.start:error.end]
    if all(0xDC80 <= ord(c) <= 0xDCFF for c in text):
        return bytes(ord(c) - 0xDC00 for c in text), error.end
    out = []
    for char in text:
        if 0xD800 <= ord(char) <= 0xDFFF:
            out.append("?")
            continue
        import unicodedata

        plain = PLAIN.get(char) or unicodedata.normalize("NFKD", char).encode("ascii", "ignore").decode()
        out.append(plain or "?")
    return "".join(out), error.end


codecs.register_error("pinwise-plain", _plain)


def plain(text: str) -> str:
    """``text`` as standard output can show it: itself, or where its encoding cannot (the C
    locale's ASCII) its plain reading, for a table to measure before it draws (the writes above
    would keep its columns from lining up)."""
    encoding = getattr(sys.stdout, "encoding", None) or "utf-8"
    try:
        text.encode(encoding)
        return text
    except (UnicodeEncodeError, LookupError):
        return text.encode(encoding, "pinwise-plain").decode(encoding, "replace")


class OutputLost(PinwiseError):
    """Standard output could not be written (full device, closed, I/O error)."""

    exit_status = 1


class _Descriptor(io.RawIOBase):
    """File descriptor 1 or 2 as a raw stream whose failures say what happened. ``closed_before``:
    the descriptor was closed when pinwise started (now /dev/null holds its place)."""

    def __init__(self, fd: int, name: str, closed_before: bool, strict: bool):
        super().__init__()
        self._fd, self._name, self._closed_before, self._strict = fd, name, closed_before, strict
        self.lost = False  # set once a write failed: the rest is dropped

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        return not self._closed_before and os.isatty(self._fd)

    def write(self, data) -> int:
        if self.lost:
            return len(data)
        if self._closed_before:
            if self._strict:
                raise OutputLost(f"{self._name} is closed, so nothing could be written: redirect it to a file or to "
                                 "/dev/null")
            return len(data)
        try:
            return os.write(self._fd, data)
        except BrokenPipeError:
            if not self._strict:  # standard error's reader went away (2>&1 | head): the command goes on,
                self.lost = True  # and its status (a program's under run) is still the one it ends with
                return len(data)
            raise
        except OSError as err:
            if not self._strict:  # standard error: nowhere left to say it; the exit status still tells
                return len(data)
            raise OutputLost(f"cannot write {self._name}: {err.strerror}") from None


def _fill_closed(fd: int) -> bool:
    """Put /dev/null in the place of a closed descriptor; whether it was closed."""
    try:
        os.fstat(fd)
        return False
    except OSError:
        pass
    null = os.open(os.devnull, os.O_RDWR)
    if null != fd:
        os.dup2(null, fd)
        os.close(null)
    return True


def _stream(fd: int, name: str, before, closed: bool, strict: bool) -> io.TextIOWrapper:
    raw = _Descriptor(fd, name, closed, strict)
    encoding = getattr(before, "encoding", None) or "utf-8"
    line_buffering = getattr(before, "line_buffering", False) or raw.isatty() or fd == 2  # stderr: as Python's
    return io.TextIOWrapper(io.BufferedWriter(raw), encoding=encoding, errors="pinwise-plain",
                            line_buffering=line_buffering, write_through=fd == 2)


class guarded:
    """For the length of a ``with`` block, the process's standard streams as described above."""

    def __enter__(self):
        self._saved = None
        own = sys.stdout is sys.__stdout__ and sys.stderr is sys.__stderr__
        if not own:
            return self  # a caller's streams (a test capturing them): left as they are
        closed = [_fill_closed(fd) for fd in (0, 1, 2)]
        if closed[0]:
            sys.stdin = open(0, closefd=False)  # /dev/null: reading it gives end-of-file at once
        self._saved = (sys.stdout, sys.stderr)
        sys.stdout = _stream(1, "standard output", sys.stdout, closed[1], strict=True)
        sys.stderr = _stream(2, "standard error", sys.stderr, closed[2], strict=False)
        return self

    def __exit__(self, *exc):
        if self._saved is not None:
            flush()
            sys.stderr.flush()  # never fails: standard error drops what it cannot write
            sys.stdout, sys.stderr = self._saved
        return False


def flush() -> None:
    """Flush standard output, raising :class:`OutputLost` (or BrokenPipeError) if it fails."""
    try:
        sys.stdout.flush()
    except (OutputLost, BrokenPipeError):
        drop_output()
        raise


def drop_output() -> None:
    """Drop what standard output still holds, and whatever comes later: the command has already
    failed to write it, and Python's own flush as it exits must not fail a second time."""
    raw = getattr(getattr(sys.stdout, "buffer", None), "raw", None)
    if isinstance(raw, _Descriptor):
        raw.lost = True
