"""Capability 8: reports of experiments — terminal tables, plots, one self-contained HTML file."""

from importlib import import_module

#: Loaded when first asked for (PEP 562): the plots need numpy and matplotlib, which the commands
#: that only print a table (simulate, run) would otherwise load for nothing.
_WHERE = {"ExperimentSummary": ".summary", "summarize": ".summary", "hyperfine_lines": ".terminal",
          "print_report": ".terminal", "save_plots": ".plots", "write_html": ".html"}

__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(_WHERE[name], __name__), name)
