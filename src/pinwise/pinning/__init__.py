"""Capability 2: run programs with their threads pinned, and prove where they ran."""

from .launcher import (
           API_HEADER,
           API_LIBRARY,
           PRELOAD_LIBRARY,
           RunResult,
           ThreadRecord,
           run_program,
)
from .likwid import domains as likwid_domains
from .likwid import evaluate as likwid_evaluate
from .live import current_placement, pin_self, pin_threads, pinned
from ..plan import Plan

__all__ = ["API_HEADER", "API_LIBRARY", "PRELOAD_LIBRARY", "Plan", "RunResult", "ThreadRecord",
           "current_placement", "likwid_domains", "likwid_evaluate", "pin_self", "pin_threads", "pinned", "run_program"]
