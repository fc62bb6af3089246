"""Terminal tables shaped like the papers' Table 1, and hyperfine's closing lines."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from .. import policies
from ..stats import OUTLIER_Z, format_interval, format_level
from ..streams import plain
from .summary import (ExperimentSummary, OverallRow, fmt_range, fmt_seconds, fmt_variance, machine_line,
                      variance_unit)
from .wide import wide_console


def speedup_cells(p, baseline: str) -> tuple[str, str]:
    """The mean and median speedups with their intervals, as the tables show them."""
    if p.name == baseline:
        return "1 (baseline)", "1 (baseline)"
    if not p.mean_ci:
        return "-", "-"
    return (f"{p.mean.speedup:.2f} {format_interval(p.mean_ci)}", f"{p.median.speedup:.2f} {format_interval(p.median_ci)}")


def summary_title(summary: ExperimentSummary) -> str:
    return (f"{summary.experiment.label}  [{summary.metric}, baseline {summary.baseline}, "
            f"{summary.level_text()}]")


def summary_table(summary: ExperimentSummary) -> Table:
    table = Table(title=Text(summary_title(summary)), title_justify="left")
    columns = ["policy", "runs", "failed", "mean ± σ", "median", "min…max", "speedup mean [CI]",
               "speedup median [CI]", "verdict", "variance", "CV", "migrations", "ctx sw"]
    longest = max((len(p.label) for p in summary.policies), default=6)
    for column in columns:
        table.add_column(plain(column), justify="left" if column in ("policy", "verdict") else "right",
                         min_width=longest if column == "policy" else None)
    unit = variance_unit(p.spread.variance for p in summary.policies if p.spread is not None)
    for p in summary.policies:
        if p.spread is None:
            table.add_row(p.label, str(p.runs), str(sum(p.failures.values())), *["-"] * 5, "no data", *["-"] * 4)
            continue
        mean_cell, median_cell = speedup_cells(p, summary.baseline)
        table.add_row(
            *map(plain, (p.label, str(p.runs), str(sum(p.failures.values())),
                         f"{fmt_seconds(p.spread.mean)} ± {fmt_seconds(p.spread.std)}", fmt_seconds(p.spread.median),
                         fmt_range(p.spread.minimum, p.spread.maximum), mean_cell, median_cell,
                         "-" if p.verdict.kind == "baseline" else p.verdict.word,
                         fmt_variance(p.spread.variance, unit), f"{p.spread.cv:.1%}",
                         "-" if p.migrations is None else f"{p.migrations:g}",
                         "-" if p.context_switches is None else f"{p.context_switches:g}")),
            style="red" if p.slower else None,
        )
    return table


def hyperfine_lines(summary: ExperimentSummary) -> list[str]:
    """"compact ran 2.14 ± 0.08 times faster than os", with the placement's verdict, then the
    failures, the machine's noise and the conclusion: every line from the one verdict per placement."""
    lines = []
    for p in summary.policies:
        if p.ratio is None:
            continue
        ratio, error = p.ratio
        if ratio >= 1:
            text = f"{p.label} ran {ratio:.2f} ± {error:.2f} times faster than {summary.baseline}"
        else:
            text = f"{p.label} ran {1 / ratio:.2f} ± {error / ratio ** 2:.2f} times slower than {summary.baseline}"
        if p.median is not None and (p.verdict.slower and ratio >= 1 or p.verdict.faster and ratio < 1):
            # the means (hyperfine's ratio) and the median test that decided point opposite ways
            text += f" by the mean, {p.median.speedup:.2f}x by the median"
        variance = ""
        base = summary.result(summary.baseline)
        if base and base.spread and p.spread and base.spread.variance > 0:
            variance = f"; variance {p.spread.variance / base.spread.variance:.2g} x {summary.baseline}'s"
        lines.append(f"{text}: {p.verdict.text}{variance}")
    failures = [f"{p.label}: {n} x {reason}" for p in summary.policies for reason, n in p.failures.items()]
    if failures:
        lines.append("failed runs: " + "; ".join(failures))
    misplaced = [f"{p.label} ({p.misplaced_runs} runs)" for p in summary.policies if p.misplaced_runs]
    if misplaced:
        lines.append("threads found off their CPUs in: " + ", ".join(misplaced))
    fewer = [p for p in summary.policies if p.fewer_threads]
    if fewer:
        lines.append("the program ran fewer threads than the plan (slots that placed nothing): " + ", ".join(
            f"{p.name} ({thread_range(p.threads)} of {p.slots} slots)" for p in fewer))
    lines.extend(noise_lines(summary))
    lines.extend(adapt_lines(summary))
    lines.append(conclusion_line(summary))
    return lines


def adapt_lines(summary: ExperimentSummary) -> list[str]:
    """What the adapt placement did in its runs: the placements it applied, and the runs in which it
    could not place the threads by what they share (its time is then the OS's placement's, not a
    verdict on adapting)."""
    lines = []
    for p in summary.policies:
        if p.moves is not None:
            fewest, median, most = p.moves
            if fewest == most:
                lines.append(f"{p.label} applied {fewest} placement{'' if fewest == 1 else 's'} in each run")
            else:
                lines.append(f"{p.label} applied {fewest} to {most} placements a run (median {median:g})")
        if p.shortcomings is not None:
            count, first = p.shortcomings
            lines.append(f"warning: {p.label} could not place the threads by what they share in {count} of its "
                         f"{len(p.times)} runs: {first}")
    return lines


def conclusion_line(summary: ExperimentSummary) -> str:
    """The experiment's conclusion, from its placements' verdicts."""
    base = summary.result(summary.baseline)
    if base is None or not len(base.times):
        return f"no verdict: the baseline {summary.baseline} has no successful run"
    unsure = [p.label for p in summary.policies if p.verdict.kind == "one test"]
    # the baseline is the OS's placement where it was measured, else the experiment's first placement
    keep = "the OS placement" if summary.baseline == policies.BASELINE else summary.baseline
    advice = f"no placement is significantly faster than {summary.baseline}: keep {keep}"
    if unsure:
        advice = (f"no placement is faster by both tests: {', '.join(unsure)} by one test only; measure more runs "
                  f"before choosing, or keep {keep}")
    failing = [p.label for p in summary.policies if p.verdict.kind == "failed runs"]
    if failing:
        advice = (f"no placement is established faster than {summary.baseline}: {', '.join(failing)} "
                  f"{'was' if len(failing) == 1 else 'were'} faster only in the runs that finished (see the failed "
                  f"runs); find why runs fail before choosing, or keep {keep}")

    def best(winner) -> str:
        text = f"best: {winner.label} (CPUs {winner.placement})"
        if summary.busy:
            text += "; measured on a busy machine: confirm on a quiet one"
        return text

    return summary.conclusion(best, advice)


#: Outliers are warned about when they are more than this share of the runs: a normal sample
#: has an occasional one, a machine with something else running has many.
OUTLIER_WARNING_SHARE = 0.05


def thread_range(threads: tuple[int, int]) -> str:
    low, high = threads
    return f"{low} thread{'s' if high != 1 else ''}" if low == high else f"{low} to {high} threads"


def noise_lines(summary: ExperimentSummary) -> list[str]:
    """hyperfine-style warnings, with the numbers behind them."""
    noise = summary.noise
    if noise is None:
        return []
    if noise.busy:
        return [f"warning: the machine was busy during the bench ({noise.describe()}): "
                "timings are unreliable; rerun on a quiet machine"]
    if noise.outliers > OUTLIER_WARNING_SHARE * noise.runs:
        return [f"warning: {noise.outliers} of {noise.runs} runs are statistical outliers "
                f"(modified z-score > {OUTLIER_Z:g}; {noise.describe()}): something else may have run meanwhile"]
    return []


def overall_table(rows: list[OverallRow], confidence: float) -> Table:
    programs = max((r.overall.programs for r in rows), default=0)
    table = Table(title=f"over {programs} programs (geometric mean of the median speedups)", title_justify="left")
    for column in ("policy", "programs", "speedup", "significantly faster", f"share, {format_level(confidence)} CI",
                   "variance min", "variance max"):
        table.add_column(column, justify="left" if column == "policy" else "right", no_wrap=True)
    unit = variance_unit(v for row in rows for v in (row.variance_min, row.variance_max))
    for row in rows:
        o = row.overall
        name = row.policy + (" (per program)" if row.policy == "recommended" else "")
        table.add_row(name, f"{o.programs}", f"{o.geometric_mean_speedup:.3f}", f"{o.significant}/{o.programs}",
                      f"{o.share:.0%} [{o.share_interval.low:.0%}, {o.share_interval.high:.0%}]",
                      fmt_variance(row.variance_min, unit), fmt_variance(row.variance_max, unit))
    return table


def print_report(summaries: list[ExperimentSummary], console: Console | None = None) -> None:
    from .summary import overall_rows

    console = console or wide_console()
    machine = None
    for summary in summaries:
        if machine_line(summary.experiment).rsplit(", ", 1)[0] != machine:  # the date aside
            machine = machine_line(summary.experiment).rsplit(", ", 1)[0]
            console.print(Text(f"machine: {machine}"), soft_wrap=True)
        console.print(summary_table(summary))
        for line in hyperfine_lines(summary):
            console.print(Text(line), soft_wrap=True)
        console.print()
    if len(summaries) > 1:
        console.print(overall_table(overall_rows(summaries), summaries[0].confidence))


SHADES = " .:-=+*#%@"


def heat_map_text(matrix, size: int = 48) -> str:
    """The matrix in characters, darker for more communication (blocks averaged past `size`)."""
    t = matrix.shape[0]
    if not matrix.any():  # rows of blanks would read as a rendering fault
        return "(no heat map: no communication was recorded between any two threads)"
    step = max(1, -(-t // size))
    cells = matrix[: t // step * step or t, : t // step * step or t]
    if step > 1:
        n = cells.shape[0] // step
        cells = cells[: n * step, : n * step].reshape(n, step, n, step).mean(axis=(1, 3))
    top = cells.max()
    rows = []
    for row in cells:
        shades = [min(len(SHADES) - 1, int(v / top * (len(SHADES) - 1) + 0.5)) if top > 0 else 0 for v in row]
        rows.append("".join(SHADES[k] * 2 for k in shades))
    legend = f"(each cell {step}x{step} threads)" if step > 1 else "(thread i is row i, column j; darker = more)"
    return "\n".join(rows) + "\n" + legend
