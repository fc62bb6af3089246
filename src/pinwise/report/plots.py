"""Plots of an experiment (matplotlib, no display needed): time distributions and speedups."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import PinwiseError
from ..stats import format_level
from .summary import ExperimentSummary


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def distribution_figure(summary: ExperimentSummary):
    plt = _pyplot()
    results = [p for p in summary.policies if len(p.times)]
    fig, ax = plt.subplots(figsize=(max(5, 1.3 * len(results) + 2), 4))
    data = [p.times * 1e3 for p in results]
    ax.boxplot(data, showfliers=False)
    rng = np.random.default_rng(0)
    for i, values in enumerate(data, start=1):
        ax.scatter(i + rng.uniform(-0.15, 0.15, len(values)), values, s=10, alpha=0.6)
    ax.set_xticks(range(1, len(results) + 1), [p.name for p in results], rotation=20, ha="right")
    ax.set_ylabel(f"{summary.metric} (ms)")
    ax.set_title(f"{summary.metric} per placement ({len(data[0]) if data else 0} runs each)")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


def speedup_figure(summary: ExperimentSummary):
    plt = _pyplot()
    results = [p for p in summary.policies if p.median_ci is not None]
    fig, ax = plt.subplots(figsize=(max(5, 1.3 * len(results) + 2), 4))
    x = np.arange(len(results))
    medians = [p.median.speedup for p in results]
    low = [p.median.speedup - p.median_ci.low for p in results]
    high = [p.median_ci.high - p.median.speedup for p in results]
    colours = ["tab:green" if p.median.significant and p.median.speedup > 1 else "tab:red" if p.slower else "tab:grey"
               for p in results]
    ax.bar(x, medians, yerr=[low, high], capsize=4, color=colours)
    ax.axhline(1.0, color="black", linewidth=1)
    ax.set_xticks(x, [p.name for p in results], rotation=20, ha="right")
    ax.set_ylabel(f"median speedup vs {summary.baseline}")
    ax.set_title(f"speedup with {format_level(summary.confidence)} bootstrap CI (green: significantly faster, red: slower)")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


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
    import matplotlib

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
