"""Capability 8: reports of experiments — terminal tables, plots, one self-contained HTML file."""

from .html import write_html
from .plots import save_plots
from .summary import ExperimentSummary, summarize
from .terminal import hyperfine_lines, print_report

__all__ = ["ExperimentSummary", "hyperfine_lines", "print_report", "save_plots", "summarize", "write_html"]
