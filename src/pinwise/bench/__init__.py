"""Capability 6: experiments — many interleaved runs per placement, saved run by run."""

from .db import open_db
from .runner import (
    Candidate,
    build_candidates,
    interrupted_message,
    run_bench,
    run_once,
)

__all__ = ["Candidate", "build_candidates", "interrupted_message", "open_db", "run_bench", "run_once"]
