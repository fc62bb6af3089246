"""Exports of a report, as hyperfine has them: CSV, JSON, Markdown, and the papers' tables in LaTeX.

Every export holds, per experiment and placement, the figures of the terminal table in plain
units (seconds, seconds squared for the variance), the Speedup-Test decisions and the one verdict
per placement the terminal prints (:class:`pinwise.report.summary.Verdict`); JSON adds every run's
time, the machine header and the lines under the table (a busy machine's warning, the conclusion),
which Markdown and LaTeX carry too; LaTeX writes the papers' tables (per program, and over all
programs when there are several) with booktabs rules.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from pathlib import Path

from .. import __version__
from ..stats import format_level
from .summary import ExperimentSummary, OverallRow, machine_facts, overall_rows

#: The columns of the CSV export, one row per placement of each experiment.
CSV_COLUMNS = ("experiment", "program", "policy", "cpus", "metric", "baseline", "runs", "failed", "mean_s",
               "stddev_s", "median_s", "min_s", "max_s", "variance_s2", "cv", "speedup_mean", "speedup_mean_low",
               "speedup_mean_high", "speedup_median", "speedup_median_low", "speedup_median_high", "faster_mean",
               "faster_median", "slower", "verdict", "same_as", "p_mean", "p_median", "migrations", "context_switches",
               "max_rss_kb", "confidence")


def _number(value):
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value


def placement_rows(summary: ExperimentSummary, every_name: bool = True) -> list[dict]:
    """One dict per placement with the CSV columns (None where a figure does not exist); with
    ``every_name``, one per name of a placement benched under several (``same_as`` names the one
    it ran as), else one per placement under its label (``compact = scatter``)."""
    rows = []
    for p in summary.policies:
        s = p.spread
        row = {
            "experiment": summary.experiment.id, "program": summary.experiment.label,
            "policy": p.name if every_name else p.label,
            "cpus": p.placement, "metric": summary.metric, "baseline": summary.baseline, "runs": p.runs,
            "failed": sum(p.failures.values()),
            "mean_s": s and s.mean, "stddev_s": s and s.std, "median_s": s and s.median, "min_s": s and s.minimum,
            "max_s": s and s.maximum, "variance_s2": s and s.variance, "cv": s and _number(s.cv),
            "speedup_mean": None, "speedup_mean_low": None, "speedup_mean_high": None, "speedup_median": None,
            "speedup_median_low": None, "speedup_median_high": None, "faster_mean": None, "faster_median": None,
            "slower": p.slower, "verdict": p.verdict.kind, "same_as": None, "p_mean": None, "p_median": None,
            "migrations": p.migrations,
            "context_switches": p.context_switches, "max_rss_kb": p.max_rss_kb, "confidence": summary.confidence,
        }
        if p.name == summary.baseline and s is not None:
            row.update(speedup_mean=1.0, speedup_median=1.0)
        if p.mean_ci is not None:
            row.update(speedup_mean=p.mean.speedup, speedup_mean_low=p.mean_ci.low, speedup_mean_high=p.mean_ci.high,
                       speedup_median=p.median.speedup, speedup_median_low=p.median_ci.low,
                       speedup_median_high=p.median_ci.high,
                       faster_mean=p.mean.significant if p.mean.concluded else None,
                       faster_median=p.median.significant, p_mean=_number(p.mean.pvalue),
                       p_median=_number(p.median.pvalue))
        row = {k: _number(v) for k, v in row.items()}
        rows.append(row)
        if every_name:
            rows.extend({**row, "policy": alias, "same_as": p.name} for alias in p.aliases)
    return rows


def to_csv(summaries: list[ExperimentSummary]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for summary in summaries:
        for row in placement_rows(summary):
            writer.writerow({k: "" if v is None else v for k, v in row.items()})
    return buffer.getvalue()


def overall_csv(rows: list[OverallRow]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["policy", "programs", "geometric_mean_median_speedup", "significantly_faster", "share",
                     "share_low", "share_high", "variance_min_s2", "variance_max_s2"])
    for r in rows:
        o = r.overall
        writer.writerow([r.policy, o.programs, o.geometric_mean_speedup, o.significant, o.share,
                         o.share_interval.low, o.share_interval.high, r.variance_min, r.variance_max])
    return buffer.getvalue()


def to_json(summaries: list[ExperimentSummary]) -> str:
    experiments = []
    for summary in summaries:
        results = placement_rows(summary)
        for row in results:
            p = summary.result(row["policy"])
            row["verdict_text"] = p.verdict.text
            row["times_s"] = [float(t) for t in p.times]
            row["failures"] = dict(p.failures)
        e = summary.experiment
        experiments.append({"id": e.id, "command": e.command, "created": e.created, "metric": summary.metric,
                            "baseline": summary.baseline, "confidence": summary.confidence,
                            "machine": machine_facts(e), "results": results, "notes": notes(summary)})
    overall = [{"policy": r.policy, "programs": r.overall.programs,
                "geometric_mean_median_speedup": _number(r.overall.geometric_mean_speedup),
                "significantly_faster": r.overall.significant, "share": _number(r.overall.share),
                "share_interval": [_number(r.overall.share_interval.low), _number(r.overall.share_interval.high)],
                "variance_min_s2": r.variance_min, "variance_max_s2": r.variance_max}
               for r in overall_rows(summaries)] if len(summaries) > 1 else []
    return json.dumps({"pinwise": __version__, "experiments": experiments, "overall": overall}, indent=2) + "\n"


def _ms(value) -> str:
    return "-" if value is None else f"{value * 1e3:.3f}"


def _speedup(value, low, high) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}" + (f" [{low:.3f}, {high:.3f}]" if low is not None else "")


def notes(summary: ExperimentSummary) -> list[str]:
    """What the terminal prints under an experiment's table beside the verdicts: the machine's
    noise (a busy machine's warning), what an adapt placement did, and the conclusion."""
    from .terminal import adapt_lines, conclusion_line, noise_lines

    return [*noise_lines(summary), *adapt_lines(summary), conclusion_line(summary)]


def _md_code(text: str) -> str:
    """``text`` as a Markdown code span that stays inside its table cell or heading: a ``|``
    escaped (GitHub's tables split cells on it even in code), a line break as a blank, and a
    fence longer than any run of backticks in it."""
    text = " ".join(str(text).replace("|", "\\|").splitlines())
    longest = max((len(run) for run in re.findall("`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def to_markdown(summaries: list[ExperimentSummary]) -> str:
    parts = []
    for summary in summaries:
        parts.append(f"### {_md_code(summary.experiment.label)}\n\n{summary.metric}, baseline {_md_code(summary.baseline)}, "
                     f"{summary.level_text()}\n")
        parts.append("| Placement | CPUs | Mean ± σ [ms] | Median [ms] | Min…Max [ms] | Speedup (mean) [CI] | "
                     "Speedup (median) [CI] | Verdict |\n|:---|:---|---:|---:|---:|---:|---:|:---|")
        for row, p in zip(placement_rows(summary, every_name=False), summary.policies):
            mean = "-" if row["mean_s"] is None else f"{_ms(row['mean_s'])} ± {_ms(row['stddev_s'])}"
            extremes = "-" if row["min_s"] is None else f"{_ms(row['min_s'])}…{_ms(row['max_s'])}"
            parts.append(f"| {_md_code(row['policy'])} | {row['cpus']} | {mean} | {_ms(row['median_s'])} | {extremes} | "
                         f"{_speedup(row['speedup_mean'], row['speedup_mean_low'], row['speedup_mean_high'])} | "
                         f"{_speedup(row['speedup_median'], row['speedup_median_low'], row['speedup_median_high'])} | "
                         f"{_verdict_cell(p)} |")
        parts.append("")
        parts.extend(f"- {line}" for line in notes(summary))
        parts.append("")
    if len(summaries) > 1:
        programs = max((r.overall.programs for r in overall_rows(summaries)), default=0)
        parts.append(f"### over {programs} programs (geometric mean of the median speedups)\n")
        parts.append("| Policy | Programs | Speedup | Significantly faster | Share [CI] |\n|:---|---:|---:|---:|---:|")
        for r in overall_rows(summaries):
            o = r.overall
            parts.append(f"| {_md_code(r.policy)} | {o.programs} | {o.geometric_mean_speedup:.3f} | {o.significant}/{o.programs} "
                         f"| {o.share:.0%} [{o.share_interval.low:.0%}, {o.share_interval.high:.0%}] |")
        parts.append("")
    return "\n".join(parts)


def _tex(text: str) -> str:
    out = str(text)
    for char, escaped in (("\\", r"\textbackslash{}"), ("&", r"\&"), ("%", r"\%"), ("$", r"\$"), ("#", r"\#"),
                          ("_", r"\_"), ("{", r"\{"), ("}", r"\}"), ("~", r"\textasciitilde{}"),
                          ("^", r"\textasciicircum{}")):
        out = out.replace(char, escaped) if char != "\\" else out.replace(char, "\x00")
    return out.replace("\x00", r"\textbackslash{}")


def to_latex(summaries: list[ExperimentSummary]) -> str:
    """The papers' tables: per program, each placement's mean, median, standard deviation and the
    speedups with their intervals; over all programs, the geometric mean and the share faster."""
    parts = ["% pinwise " + __version__ + ": tables for \\usepackage{booktabs}"]
    for summary in summaries:
        parts += [r"\begin{table}[ht]", r"\centering",
                  rf"\caption{{\texttt{{{_tex(summary.experiment.label)}}}: {_tex(summary.metric)} against "
                  rf"\texttt{{{_tex(summary.baseline)}}}, {_tex(summary.level_text())}}}",
                  r"\begin{tabular}{llrrrrrl}", r"\toprule",
                  r"Placement & CPUs & Mean (ms) & Median (ms) & $\sigma$ (ms) & Speedup (mean) & "
                  r"Speedup (median) & Verdict \\", r"\midrule"]
        for row, p in zip(placement_rows(summary, every_name=False), summary.policies):
            parts.append(" & ".join([
                rf"\texttt{{{_tex(row['policy'])}}}", _tex(row["cpus"]), _ms(row["mean_s"]), _ms(row["median_s"]),
                _ms(row["stddev_s"]),
                _tex(_speedup(row["speedup_mean"], row["speedup_mean_low"], row["speedup_mean_high"])),
                _tex(_speedup(row["speedup_median"], row["speedup_median_low"], row["speedup_median_high"])),
                _tex(_verdict_cell(p).strip("*"))]) + r" \\")
        parts += [r"\bottomrule", r"\end{tabular}"]
        parts += [r"\par\smallskip{\footnotesize " + _tex(line) + "}" for line in notes(summary)]
        parts += [r"\end{table}", ""]
    if len(summaries) > 1:
        confidence = format_level(summaries[0].confidence)
        programs = max((r.overall.programs for r in overall_rows(summaries)), default=0)
        parts += [r"\begin{table}[ht]", r"\centering",
                  rf"\caption{{Over {programs} programs: geometric mean of the median speedups and share of "
                  rf"programs significantly faster ({_tex(confidence)} Clopper-Pearson interval)}}",
                  r"\begin{tabular}{lrrrr}", r"\toprule",
                  r"Policy & Programs & Speedup & Faster & Share \\", r"\midrule"]
        for r in overall_rows(summaries):
            o = r.overall
            parts.append(rf"\texttt{{{_tex(r.policy)}}} & {o.programs} & {o.geometric_mean_speedup:.3f} & "
                         rf"{o.significant}/{o.programs} & {o.share * 100:.0f}\% [{o.share_interval.low * 100:.0f}, "
                         rf"{o.share_interval.high * 100:.0f}] \\")
        parts += [r"\bottomrule", r"\end{tabular}", r"\end{table}", ""]
    return "\n".join(parts)


def _verdict_cell(p) -> str:
    """The verdict's word, as the terminal table shows it (slower in bold)."""
    if p.verdict.kind == "baseline":
        return "baseline"
    return "**slower**" if p.verdict.slower else p.verdict.word


#: Export option -> (what it writes, its function).
EXPORTS = {"csv": to_csv, "json": to_json, "markdown": to_markdown, "latex": to_latex}


def write_exports(summaries: list[ExperimentSummary], targets: dict[str, str | None]) -> list[str]:
    """Write each asked export (format -> path, None: not asked); returns what was written, each
    a path (and what it holds, where that is not plain). With several programs, the CSV export
    writes the overall table beside it (NAME.overall.csv); to a device or a pipe (/dev/stdout),
    which has no file beside it, after the experiments' table and a blank line."""
    from ..files import is_special, write_text_atomic

    written = []
    for kind, path in targets.items():
        if not path:
            continue
        text = EXPORTS[kind](summaries)
        overall = kind == "csv" and len(summaries) > 1
        if overall and is_special(path):
            write_text_atomic(path, text + "\n" + overall_csv(overall_rows(summaries)))
            written.append(f"{path} (the overall table after the experiments', past a blank line)")
            continue
        write_text_atomic(path, text)
        written.append(path)
        if overall:
            beside = str(Path(path).with_suffix("")) + ".overall.csv"
            write_text_atomic(beside, overall_csv(overall_rows(summaries)))
            written.append(beside)
    return written

