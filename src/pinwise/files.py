"""Writing output files so that a failure never leaves a half-written one behind."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from .errors import PinwiseError


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write to a temporary file beside ``path`` and rename it into place."""
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=directory)
    except OSError as err:
        raise PinwiseError(f"cannot write {str(path)!r}: {err.strerror}") from None
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
