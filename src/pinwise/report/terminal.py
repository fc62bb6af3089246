"""Terminal tables shaped like the papers' Table 1, and hyperfine's closing lines."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..stats import OUTLIER_Z, format_interval, format_level
from ..streams import plain
from .summary import ExperimentSummary, OverallRow, fmt_range, fmt_seconds, fmt_variance, machine_line
from .wide import wide_console


def _decision(result, which: str) -> str:
    test = getattr(result, which)
    if test is None:
        return "-"
    if which == "mean" and not test.concluded:
        return "no conclusion"
    word = "yes" if test.significant else "no"
    return f"{word} (p={test.pvalue:.2g})"


def _short_decision(result) -> str:
    """"yes/yes" (mean/median significantly faster), or SLOWER when the median test says so."""
    if result.mean is None:
        return "-"
    if result.slower:
        return "SLOWER"
    mean = "?" if not result.mean.concluded else "yes" if result.mean.significant else "no"
    return f"{mean}/{'yes' if result.median.significant else 'no'}"


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
               "speedup median [CI]", "faster? mean/median", "variance", "CV", "migrations", "ctx sw"]
    longest = max((len(p.name) for p in summary.policies), default=6)
    for column in columns:
        table.add_column(plain(column), justify="left" if column in ("policy", "faster? mean/median") else "right",
                         min_width=longest if column == "policy" else None)
    for p in summary.policies:
        if p.spread is None:
            table.add_row(p.name, str(p.runs), str(sum(p.failures.values())), *["-"] * 10)
            continue
        mean_cell, median_cell = speedup_cells(p, summary.baseline)
        table.add_row(
            *map(plain, (p.name, str(p.runs), str(sum(p.failures.values())),
                         f"{fmt_seconds(p.spread.mean)} ± {fmt_seconds(p.spread.std)}", fmt_seconds(p.spread.median),
                         fmt_range(p.spread.minimum, p.spread.maximum), mean_cell, median_cell, _short_decision(p),
                         fmt_variance(p.spread.variance), f"{p.spread.cv:.1%}",
                         "-" if p.migrations is None else f"{p.migrations:g}",
                         "-" if p.context_switches is None else f"{p.context_switches:g}")),
            style="red" if p.slower else None,
        )
    return table


def hyperfine_lines(summary: ExperimentSummary) -> list[str]:
    """"compact ran 2.14 ± 0.08 times faster than os", with the evidence behind it."""
    lines = []
    for p in summary.policies:
        if p.ratio is None:
            continue
        ratio, error = p.ratio
        if ratio >= 1:
            text = f"{p.name} ran {ratio:.2f} ± {error:.2f} times faster than {summary.baseline}"
        else:
            text = f"{p.name} ran {1 / ratio:.2f} ± {error / ratio ** 2:.2f} times slower than {summary.baseline}"
        if p.median.significant and p.median.speedup > 1:
            verdict = f"significantly faster (median test p={p.median.pvalue:.2g}"
            verdict += f", mean test p={p.mean.pvalue:.2g})" if p.mean.concluded else ", mean: no conclusion)"
        elif p.slower:
            verdict = f"significantly slower (median test p={p.median.pvalue_slower:.2g})"
        else:
            verdict = "no significant difference"
        variance = ""
        base = summary.result(summary.baseline)
        if base and base.spread and p.spread and base.spread.variance > 0:
            variance = f"; variance {p.spread.variance / base.spread.variance:.2g} x {summary.baseline}'s"
        lines.append(f"{text}: {verdict}{variance}")
    failures = [f"{p.name}: {n} x {reason}" for p in summary.policies for reason, n in p.failures.items()]
    if failures:
        lines.append("failed runs: " + "; ".join(failures))
    misplaced = [f"{p.name} ({p.misplaced_runs} runs)" for p in summary.policies if p.misplaced_runs]
    if misplaced:
        lines.append("threads found off their CPUs in: " + ", ".join(misplaced))
    lines.extend(noise_lines(summary))
    base = summary.result(summary.baseline)
    if base is None or not len(base.times):
        lines.append(f"no verdict: the baseline {summary.baseline} has no successful run")
        return lines
    # Faster by the median test while the mean test, which concluded, does not agree: not a winner.
    median_only = [p.name for p in summary.policies if p.median and p.median.significant and p.median.speedup > 1
                   and p.mean is not None and p.mean.concluded and not p.mean.significant]
    advice = f"no placement is significantly faster than {summary.baseline}: keep the OS placement"
    if median_only:
        advice = (f"no placement is faster by both tests: {', '.join(median_only)} by the median test only (the mean "
                  "test does not agree: slow outliers); measure more runs before choosing, or keep the OS placement")
    lines.append(summary.conclusion(lambda winner: f"best: {winner.name} (CPUs {winner.placement})", advice))
    return lines


#: Outliers are warned about when they are more than this share of the runs: a normal sample
#: has an occasional one, a machine with something else running has many.
OUTLIER_WARNING_SHARE = 0.05


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
    for row in rows:
        o = row.overall
        name = row.policy + (" (per program)" if row.policy == "recommended" else "")
        table.add_row(name, f"{o.programs}", f"{o.geometric_mean_speedup:.3f}", f"{o.significant}/{o.programs}",
                      f"{o.share:.0%} [{o.share_interval.low:.0%}, {o.share_interval.high:.0%}]",
                      fmt_variance(row.variance_min), fmt_variance(row.variance_max))
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
