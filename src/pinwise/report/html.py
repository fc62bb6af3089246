"""One self-contained HTML file: tables, verdicts and plots (PNG data URIs), no network needed.

An inline script counts the images that decoded and writes it into the title, so a headless
browser can tell that the page rendered (tests do exactly that).
"""

from __future__ import annotations

import base64
import html
from pathlib import Path

from .plots import distribution_figure, figure_png_bytes, speedup_figure
from .summary import (
    RECOMMENDED_ROW,
    ExperimentSummary,
    fmt_range,
    fmt_seconds,
    fmt_variance,
    machine_facts,
    overall_rows,
    variance_unit,
)
from .terminal import hyperfine_lines, speedup_cells

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; max-width: 1500px; }
.wide { overflow-x: auto; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.45em; text-align: right; white-space: nowrap; }
th:first-child, td:first-child { text-align: left; }
th { background: #f0f0f0; }
.verdicts li { margin: 0.2em 0; }
.plots { display: grid; grid-template-columns: repeat(auto-fit, minmax(420px, 1fr)); gap: 1em; }
.plots img, .heatmaps img { width: 100%; border: 1px solid #eee; }
.heatmaps { display: grid; grid-template-columns: repeat(auto-fill, minmax(240px, 1fr)); gap: 0.8em; }
.heatmaps figure { margin: 0; }
.heatmaps figcaption { font-size: 0.85em; text-align: center; }
.machine { background: #f6f8fa; border: 1px solid #ddd; padding: 0.5em 1em; }
.machine dt { font-weight: bold; float: left; clear: left; width: 9em; }
.machine dd { margin-left: 10em; }
tr.slower td { color: #b00; font-weight: bold; }
tr.faster td:first-child { color: #070; font-weight: bold; }
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


def _table(headers: list[str], rows: list[list[str]], classes: list[str] | None = None) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    classes = classes or [""] * len(rows)
    body = "".join((f'<tr class="{c}">' if c else "<tr>") + "".join(f"<td>{html.escape(v)}</td>" for v in row)
                   + "</tr>" for row, c in zip(rows, classes))
    return f'<div class="wide"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def machine_header(summaries: list[ExperimentSummary]) -> str:
    """The machine the experiments ran on (each distinct one, if they ran on several)."""
    seen: dict[tuple, list[int]] = {}
    facts_of = {}
    for summary in summaries:
        facts = machine_facts(summary.experiment)
        key = tuple((k, str(v)) for k, v in facts.items() if k != "date")
        seen.setdefault(key, []).append(summary.experiment.id)
        facts_of[key] = facts
    blocks = []
    for key, ids in seen.items():
        f = facts_of[key]
        dates = sorted(s.experiment.created for s in summaries if s.experiment.id in ids)
        rows = [("CPU model", f["cpu_model"] or "not recorded"), ("host", f["host"] or "not recorded"),
                ("kernel", f["kernel"] or "not recorded"), ("CPUs", str(f["cpus"] or "not recorded")),
                ("allowed CPUs", f["allowed_cpus"] or "?"), ("topology", f["topology"] or "?"),
                ("pinwise", f["pinwise"] or "?"),
                ("date", dates[0] if len(dates) == 1 else f"{dates[0]} to {dates[-1]}")]
        if len(seen) > 1:
            rows.insert(0, ("experiments", ", ".join(map(str, ids))))
        blocks.append('<dl class="machine">' + "".join(f"<dt>{html.escape(k)}</dt><dd>{html.escape(v)}</dd>"
                                                        for k, v in rows) + "</dl>")
    return "<h2>machine</h2>" + "".join(blocks)


def experiment_section(summary: ExperimentSummary) -> str:
    rows, classes = [], []
    unit = variance_unit(p.spread.variance for p in summary.policies if p.spread is not None)
    for p in summary.policies:
        runs, failed = str(p.runs), str(sum(p.failures.values()))
        if p.spread is None:
            rows.append([p.label, p.placement, runs, failed] + ["-"] * 5 + ["no data"] + ["-"] * 4)
            classes.append("")
            continue
        mean, median = speedup_cells(p, summary.baseline)
        rows.append([p.label, p.placement, runs, failed, f"{fmt_seconds(p.spread.mean)} ± {fmt_seconds(p.spread.std)}",
                     fmt_seconds(p.spread.median), fmt_range(p.spread.minimum, p.spread.maximum), mean, median,
                     p.verdict.word,
                     fmt_variance(p.spread.variance, unit), f"{p.spread.cv:.1%}",
                     "-" if p.migrations is None else f"{p.migrations:g}",
                     "-" if p.context_switches is None else f"{p.context_switches:g}"])
        classes.append("slower" if p.slower else "faster" if p.verdict.faster else "")
    headers = ["policy", "CPUs", "runs", "failed", "mean ± σ", "median", "min…max", "speedup mean [CI]",
               "speedup median [CI]", "verdict", "variance", "CV", "migrations", "ctx switches"]
    verdicts = "".join(f"<li>{html.escape(line)}</li>" for line in hyperfine_lines(summary))
    e = summary.experiment
    return (
        f"<h2>{html.escape(e.label)}</h2>"
        f"<p>experiment {e.id}, {html.escape(e.created)}; {html.escape(summary.metric)}; baseline "
        f"<code>{html.escape(summary.baseline)}</code>; {html.escape(summary.level_text())} "
        f"(Speedup-Test: Welch/Student t-test on means, Wilcoxon-Mann-Whitney on medians); migrations and context "
        f"switches are medians per run; CPUs allowed: {html.escape(e.cpuset or '?')}</p>"
        + _table(headers, rows, classes)
        + f'<ul class="verdicts">{verdicts}</ul>'
        + '<div class="plots">'
        + _image(distribution_figure(summary), f"{e.label}: time distribution per placement")
        + _image(speedup_figure(summary), f"{e.label}: mean and median speedups with confidence intervals") + "</div>"
    )


def overall_section(summaries: list[ExperimentSummary]) -> str:
    found = overall_rows(summaries)
    unit = variance_unit(v for r in found for v in (r.variance_min, r.variance_max))
    rows = [[r.policy + (" (per program)" if r.policy == RECOMMENDED_ROW else ""), str(r.overall.programs),
             f"{r.overall.geometric_mean_speedup:.3f}", f"{r.overall.significant}/{r.overall.programs}",
             f"{r.overall.share:.0%} [{r.overall.share_interval.low:.0%}, {r.overall.share_interval.high:.0%}]",
             fmt_variance(r.variance_min, unit), fmt_variance(r.variance_max, unit)] for r in found]
    return ("<section><h2>over all programs</h2><p>Geometric mean of the <em>median</em> speedups (each program's "
            "median time against its baseline's), the programs whose verdict is faster (both tests), and that "
            "share's exact (Clopper-Pearson) interval. Each placement is counted over the programs that measured "
            f"it; <code>{RECOMMENDED_ROW}</code> takes, program by program, the placement its analysis "
            "recommended.</p>" + _table(
                ["policy", "programs", "geometric mean speedup (medians)", "significantly faster", "share [CI]",
                 "variance min", "variance max"], rows) + "</section>")


def write_html(summaries: list[ExperimentSummary], path: str | Path, extra_sections: list[str] | None = None) -> None:
    from ..files import write_text_atomic

    parts = [f"<section>{machine_header(summaries)}</section>"] if summaries else []
    parts += [f"<section>{experiment_section(s)}</section>" for s in summaries]
    if len(summaries) > 1:
        parts.append(overall_section(summaries))
    parts.extend(extra_sections or [])
    programs = ", ".join(dict.fromkeys(s.experiment.label.split()[0] for s in summaries)) or "simulation"
    document = (
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>pinwise report</title>"
        f"<style>{STYLE}</style><script>{SCRIPT}</script></head><body><h1>pinwise report: {html.escape(programs)}</h1>"
        + "".join(parts) + "</body></html>\n"
    )
    write_text_atomic(path, document)


def heat_map_grid(images: list[tuple[str, str]]) -> str:
    """Heat maps (caption, PNG as base64) side by side in a grid, not one per screen."""
    return '<div class="heatmaps">' + "".join(
        f'<figure><img alt="{html.escape(caption)} heat map" src="data:image/png;base64,{data}">'
        f"<figcaption>{html.escape(caption)}</figcaption></figure>" for caption, data in images) + "</div>"


def simulation_section(simulation) -> str:
    """A `pinwise simulate` result: its table, ranking and comparison plot."""
    from .plots import simulation_figure

    first = simulation.placements[0]
    levels = list(first.levels)
    rows = []
    for p in simulation.placements:
        ratio = f"{p.critical_path / first.critical_path:.2f}" if first.critical_path else "-"
        rows.append([p.policy, ",".join(map(str, p.cpus)), *[f"{p.levels[n].misses:,}" for n in levels],
                     f"{p.invalidations:,}", f"{sum(p.transfers.values()):,}", f"{p.dram.local:,}",
                     f"{p.dram.remote:,}", f"{p.critical_path:,}", ratio])
    headers = ["placement", "CPUs", *[f"{n} misses" for n in levels], "invalidations", "transfers", "DRAM local",
               "DRAM remote", "cycles (busiest PU)", "vs first"]
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in simulation.notes)
    return (f"<section><h2>simulated on {html.escape(simulation.topology)}: {html.escape(simulation.program)}</h2>"
            f"<p>{simulation.threads} threads, {sum(simulation.accesses_per_thread):,} accesses, quantum "
            f"{simulation.quantum}, {'inclusive' if simulation.inclusive else 'independent levels'}; cycles are "
            "estimated memory cycles from the latency table (pinwise simulate)</p>"
            + (f"<ul>{notes}</ul>" if notes else "") + _table(headers, rows)
            + '<div class="plots">' + _image(simulation_figure(simulation), "placements compared by simulation")
            + "</div></section>")
