"""Terminal tables shaped like the papers' Table 1, and hyperfine's closing lines."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..stats import OUTLIER_Z, format_interval, format_level
from .summary import ExperimentSummary, OverallRow, fmt_seconds


def _decision(result, which: str) -> str:
    test = getattr(result, which)
    if test is None:
        return "-"
    if which == "mean" and not test.concluded:
        return "no conclusion"
    word = "yes" if test.significant else "no"
    return f"{word} (p={test.pvalue:.2g})"


def _short_decision(result) -> str:
    if result.mean is None:
        return "-"
    mean = "?" if not result.mean.concluded else "yes" if result.mean.significant else "no"
    return f"{mean}/{'yes' if result.median.significant else 'no'}"


def summary_table(summary: ExperimentSummary) -> Table:
    table = Table(title=Text(f"{summary.experiment.label}  [{summary.metric}, baseline {summary.baseline}, "
                             f"{summary.level_text()}]"), title_justify="left")
    columns = ["policy", "runs", "failed", "mean", "median", "speedup mean [CI]", "speedup median [CI]",
               "faster? mean/median", "variance", "CV", "migrations", "ctx sw"]
    for column in columns:
        table.add_column(column, justify="left" if column in ("policy", "faster? mean/median") else "right")
    for p in summary.policies:
        if p.spread is None:
            table.add_row(p.name, str(p.runs), str(sum(p.failures.values())), *["-"] * 9)
            continue
        mean_cell = median_cell = "1 (baseline)" if p.name == summary.baseline else "-"
        if p.mean_ci:
            mean_cell = f"{p.mean.speedup:.2f} {format_interval(p.mean_ci)}"
            median_cell = f"{p.median.speedup:.2f} {format_interval(p.median_ci)}"
        table.add_row(
            p.name, str(p.runs), str(sum(p.failures.values())), fmt_seconds(p.spread.mean),
            fmt_seconds(p.spread.median), mean_cell, median_cell, _short_decision(p),
            f"{p.spread.variance:.3g}", f"{p.spread.cv:.1%}",
            "-" if p.migrations is None else f"{p.migrations:g}",
            "-" if p.context_switches is None else f"{p.context_switches:g}",
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
    lines.append(summary.conclusion(lambda winner: f"best: {winner.name} (CPUs {winner.placement})",
                                    f"no placement is significantly faster than {summary.baseline}: keep the OS placement"))
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
    table = Table(title=f"over {rows[0].overall.programs if rows else 0} programs (geometric mean of median speedups)",
                  title_justify="left")
    for column in ("policy", "speedup", "significantly faster", f"share, {format_level(confidence)} CI", "variance min",
                   "variance max"):
        table.add_column(column, justify="left" if column == "policy" else "right")
    for row in rows:
        o = row.overall
        table.add_row(row.policy, f"{o.geometric_mean_speedup:.3f}", f"{o.significant}/{o.programs}",
                      f"{o.share:.0%} [{o.share_interval.low:.0%}, {o.share_interval.high:.0%}]",
                      f"{row.variance_min:.3g}", f"{row.variance_max:.3g}")
    return table


def print_report(summaries: list[ExperimentSummary], console: Console | None = None) -> None:
    from .summary import overall_rows

    console = console or Console(highlight=False, width=max(170, Console().width))
    for summary in summaries:
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
