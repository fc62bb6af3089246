"""The console pinwise prints its tables on. Light on purpose (rich only): the commands that print
one table (simulate, run, mpi) should not load numpy through the reports' other modules."""

from __future__ import annotations

from rich.console import Console

#: The width tables are laid out for when the output is not a wider terminal (a pipe, a file).
WIDE = 200


def wide_console(**options) -> Console:
    """A console at least WIDE columns wide (``options`` as rich's, e.g. ``stderr=True``)."""
    return Console(highlight=False, width=max(WIDE, Console().width), **options)
