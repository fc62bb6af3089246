"""Plots of an experiment (matplotlib, no display needed): time distributions and speedups."""

from __future__ import annotations

from ..optional import require

from pathlib import Path

import numpy as np

from ..errors import PinwiseError
from ..stats import format_level
from .summary import ExperimentSummary


def _pyplot():
    matplotlib = require("matplotlib")

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


#: Plots keep this width whatever the number of placements: four placements do not make a thumbnail.
FIGURE_SIZE = (8.0, 4.2)


def _short(label: str, width: int = 60) -> str:
    return label if len(label) <= width else label[: width - 1] + "…"


def distribution_figure(summary: ExperimentSummary):
    plt = _pyplot()
    results = [p for p in summary.policies if len(p.times)]
    fig, ax = plt.subplots(figsize=FIGURE_SIZE)
    data = [p.times * 1e3 for p in results]
    ax.boxplot(data, showfliers=False, widths=0.5)
    rng = np.random.default_rng(0)
    for i, values in enumerate(data, start=1):
        ax.scatter(i + rng.uniform(-0.15, 0.15, len(values)), values, s=10, alpha=0.6)
    ax.set_xticks(range(1, len(results) + 1), [p.label for p in results], rotation=20 if len(results) > 5 else 0,
                  ha="right" if len(results) > 5 else "center")
    ax.set_ylabel(f"{summary.metric.split(' (')[0]} (ms)")
    counts = sorted({len(d) for d in data})
    if not counts:
        ax.text(0.5, 0.5, "no successful run", ha="center", va="center", transform=ax.transAxes)
    runs = "no run" if not counts else f"{counts[0]} runs each" if len(counts) == 1 else f"{counts[0]}-{counts[-1]} runs"
    ax.set_title(f"{_short(summary.experiment.label)}\n{summary.metric.split(' (')[0]} per placement ({runs})",
                 fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


#: The speedup plot's bar colour for each verdict kind (pinwise.report.summary.Verdict), and its legend's words.
VERDICT_COLOURS = {"faster": ("tab:green", "faster"), "slower": ("tab:red", "slower"),
                   "one test": ("tab:olive", "one test only (not established)"),
                   "failed runs": ("tab:orange", "faster, but runs failed (not established)")}
NEUTRAL = ("tab:grey", "no significant difference")


def speedup_figure(summary: ExperimentSummary):
    """Mean and median speedups side by side, each with its bootstrap interval, both bars of a
    placement in the colour of its one verdict (green faster, red and hatched slower, olive one
    test only, grey no significant difference); the legend is drawn from those same colours."""
    from matplotlib.patches import Patch

    plt = _pyplot()
    results = [p for p in summary.policies if p.median_ci is not None]
    fig, ax = plt.subplots(figsize=FIGURE_SIZE)
    x = np.arange(len(results))
    width = 0.38
    colour = {p.name: VERDICT_COLOURS.get(p.verdict.kind, NEUTRAL) for p in results}
    for offset, which, interval in ((-width / 2, "mean", "mean_ci"), (width / 2, "median", "median_ci")):
        values = [getattr(p, which).speedup for p in results]
        cis = [getattr(p, interval) for p in results]
        errors = [[v - c.low for v, c in zip(values, cis)], [c.high - v for v, c in zip(values, cis)]]
        bars = ax.bar(x + offset, values, width, yerr=errors, capsize=3, color=[colour[p.name][0] for p in results],
                      alpha=MEAN_ALPHA if which == "mean" else MEDIAN_ALPHA, edgecolor="black", linewidth=0.5)
        for bar, p in zip(bars, results):
            if p.slower:
                bar.set_hatch("//")
    for i, p in enumerate(results):
        if p.slower:
            ax.annotate("slower", (i, 0.0), xycoords=("data", "axes fraction"), xytext=(0, 4),
                        textcoords="offset points", ha="center", color="tab:red", fontsize=8, fontweight="bold")
    if not results:
        ax.text(0.5, 0.5, "no comparison: fewer than 2 good runs of a placement or of the baseline", ha="center",
                va="center", transform=ax.transAxes)
    ax.axhline(1.0, color="black", linewidth=1)
    ax.set_xticks(x, [p.label for p in results], rotation=20 if len(results) > 5 else 0,
                  ha="right" if len(results) > 5 else "center")
    ax.set_ylabel(f"speedup vs {summary.baseline}")
    ax.set_title(f"{_short(summary.experiment.label)}\nspeedup of the mean (left, light) and the median (right, "
                 f"dark), {format_level(summary.confidence)} bootstrap CI; colour: the verdict", fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    if results:
        shown = list(dict.fromkeys(colour[p.name] for p in results))
        handles = [Patch(facecolor=c, edgecolor="black", linewidth=0.5, hatch="//" if c == VERDICT_COLOURS["slower"][0]
                         else None, label=words) for c, words in shown]
        ax.legend(handles=handles, loc="best", fontsize=8)
    fig.tight_layout()
    return fig


#: The mean's bars are lighter than the median's.
MEAN_ALPHA, MEDIAN_ALPHA = 0.55, 0.95


def save_plots(summary: ExperimentSummary, directory: str | Path, prefix: str = "") -> list[Path]:
    """PNG and SVG of each plot; returns the paths written."""
    import io

    from ..files import check_output_folder, write_bytes_atomic

    plt = _pyplot()
    directory = check_output_folder(directory, "plot folder")
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise PinwiseError(f"cannot create the plot folder {str(directory)!r}: {err.strerror}") from None
    written = []
    for name, make in (("times", distribution_figure), ("speedups", speedup_figure)):
        figure = make(summary)
        for ext in ("png", "svg"):
            path = directory / f"{prefix}{name}.{ext}"
            buffer = io.BytesIO()
            figure.savefig(buffer, format=ext, dpi=110)
            write_bytes_atomic(path, buffer.getvalue())
            written.append(path)
        plt.close(figure)
    return written


def figure_png_bytes(figure) -> bytes:
    import io

    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110)
    _pyplot().close(figure)
    return buffer.getvalue()


def save_heat_map(matrix, path: str, title: str = "communication matrix") -> None:
    matplotlib = require("matplotlib")

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 4.4))
    image = ax.imshow(matrix, cmap="Greys", interpolation="nearest")
    fig.colorbar(image, ax=ax, label="communication events")
    ax.set_xlabel("thread")
    ax.set_ylabel("thread")
    ax.set_title(title)
    fig.tight_layout()
    import io

    from ..files import write_bytes_atomic

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    write_bytes_atomic(path, buffer.getvalue())


def simulation_figure(simulation):
    """One figure of a :class:`pinwise.simulate.Simulation`: each placement's critical path, last-level misses, transfers and remote DRAM,
    as ratios to the first placement."""
    plt = _pyplot()
    results = simulation.placements
    last = list(results[0].levels)[-1]
    series = {
        "critical path (cycles)": [p.critical_path for p in results],
        f"{last} misses": [p.levels[last].misses for p in results],
        "cache-to-cache transfers": [sum(p.transfers.values()) for p in results],
        "DRAM accesses": [p.dram.total for p in results],
    }
    fig, ax = plt.subplots(figsize=(8, 4.2))
    x = np.arange(len(results))
    width = 0.8 / len(series)
    for i, (label, values) in enumerate(series.items()):
        base = values[0] or 1
        ax.bar(x + (i - (len(series) - 1) / 2) * width, [v / base for v in values], width, label=label)
    ax.axhline(1.0, color="black", linewidth=1)
    ax.set_xticks(x, [p.policy for p in results])
    ax.set_ylabel(f"ratio to {results[0].policy}")
    ax.set_title(f"simulated on {simulation.topology}: lower is better", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


def save_simulation_png(simulation, path: str) -> None:
    """:func:`simulation_figure` as a PNG at ``path`` (written whole or not at all)."""
    from ..files import write_bytes_atomic

    write_bytes_atomic(path, figure_png_bytes(simulation_figure(simulation)))
