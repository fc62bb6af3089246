"""Capability 2: run programs with their threads pinned, and prove where they ran.

The names below load on first use: ``pinwise run --cpus 0 -- prog`` imports only the launcher.
"""

from __future__ import annotations

_NAMES = {
    "API_HEADER": "launcher", "API_LIBRARY": "launcher", "PRELOAD_LIBRARY": "launcher", "RunResult": "log",
    "ThreadRecord": "log", "run_program": "launcher", "exec_program": "launcher",
    "likwid_domains": ("likwid", "domains"), "likwid_evaluate": ("likwid", "evaluate"),
    "current_placement": "live", "pin_self": "live", "pin_threads": "live", "pinned": "live",
    "Plan": ("..plan", "Plan"),
}
__all__ = sorted(_NAMES)


def __getattr__(name: str):
    if name not in _NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    module, attribute = _NAMES[name] if isinstance(_NAMES[name], tuple) else (_NAMES[name], name)
    value = getattr(importlib.import_module(f".{module}" if not module.startswith(".") else module, __name__), attribute)
    globals()[name] = value
    return value
