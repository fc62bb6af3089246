"""One self-contained HTML file: tables, verdicts and plots (PNG data URIs), no network needed.

An inline script counts the images that decoded and writes it into the title, so a headless
browser can tell that the page rendered (tests do exactly that).
"""

from __future__ import annotations

import base64
import html
from pathlib import Path

from ..stats import format_interval
from .plots import distribution_figure, figure_png_bytes, speedup_figure
from .summary import ExperimentSummary, fmt_seconds, overall_rows
from .terminal import _decision, hyperfine_lines

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; max-width: 1200px; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: right; white-space: nowrap; }
th:first-child, td:first-child { text-align: left; }
th { background: #f0f0f0; }
.verdicts li { margin: 0.2em 0; }
.plots img { max-width: 48%; margin-right: 1%; border: 1px solid #eee; }
code { background: #f6f6f6; padding: 0 0.2em; }
"""

SCRIPT = """
window.addEventListener('load', function () {
  var images = Array.prototype.slice.call(document.images);
  var ok = images.filter(function (i) { return i.complete && i.naturalWidth > 0; }).length;
  var tables = document.getElementsByTagName('table').length;
  document.title = 'pinwise report: rendered ' + ok + '/' + images.length + ' images, ' + tables + ' tables';
});
"""


def _image(figure, alt: str) -> str:
    data = base64.b64encode(figure_png_bytes(figure)).decode()
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'


def _table(headers: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def experiment_section(summary: ExperimentSummary) -> str:
    rows = []
    for p in summary.policies:
        if p.spread is None:
            rows.append([p.name, p.placement, str(p.runs), str(sum(p.failures.values()))] + ["-"] * 8)
            continue
        mean = median = "1 (baseline)" if p.name == summary.baseline else "-"
        if p.mean_ci:
            mean = f"{p.mean.speedup:.2f} {format_interval(p.mean_ci)}"
            median = f"{p.median.speedup:.2f} {format_interval(p.median_ci)}"
        rows.append([p.name, p.placement, str(p.runs), str(sum(p.failures.values())), fmt_seconds(p.spread.mean),
                     fmt_seconds(p.spread.median), mean, median, _decision(p, "mean"), _decision(p, "median"),
                     f"{p.spread.variance:.3g}", f"{p.spread.cv:.1%}"])
    headers = ["policy", "CPUs", "runs", "failed", "mean", "median", "speedup mean [CI]", "speedup median [CI]",
               "faster (mean)", "faster (median)", "variance", "CV"]
    verdicts = "".join(f"<li>{html.escape(line)}</li>" for line in hyperfine_lines(summary))
    e = summary.experiment
    return (
        f"<h2>{html.escape(e.label)}</h2>"
        f"<p>experiment {e.id}, {html.escape(e.created)}; {html.escape(summary.metric)}; baseline "
        f"<code>{html.escape(summary.baseline)}</code>; {html.escape(summary.level_text())} "
        f"(Speedup-Test: Welch/Student t-test on means, Wilcoxon-Mann-Whitney on medians); CPUs allowed: "
        f"{html.escape(e.cpuset or '?')}</p>"
        + _table(headers, rows)
        + f'<ul class="verdicts">{verdicts}</ul>'
        + '<div class="plots">' + _image(distribution_figure(summary), "time distribution per placement")
        + _image(speedup_figure(summary), "speedups with confidence intervals") + "</div>"
    )


def write_html(summaries: list[ExperimentSummary], path: str | Path, extra_sections: list[str] | None = None) -> None:
    from ..files import write_text_atomic

    parts = [f"<section>{experiment_section(s)}</section>" for s in summaries]
    if len(summaries) > 1:
        rows = [[r.policy, f"{r.overall.geometric_mean_speedup:.3f}", f"{r.overall.significant}/{r.overall.programs}",
                 f"{r.overall.share:.0%} [{r.overall.share_interval.low:.0%}, {r.overall.share_interval.high:.0%}]",
                 f"{r.variance_min:.3g}", f"{r.variance_max:.3g}"] for r in overall_rows(summaries)]
        parts.append("<section><h2>over all programs</h2>" + _table(
            ["policy", "geometric mean speedup", "significantly faster", "share [CI]", "variance min", "variance max"],
            rows) + "</section>")
    parts.extend(extra_sections or [])
    document = (
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>pinwise report</title>"
        f"<style>{STYLE}</style><script>{SCRIPT}</script></head><body><h1>pinwise report</h1>"
        + "".join(parts) + "</body></html>\n"
    )
    write_text_atomic(path, document)
