"""Capability 7-8: what the report says agrees with itself. Generated samples near the boundary of
significance, where the one-sided test and the bootstrap interval can disagree, must never
produce "significant" beside an interval that contains 1."""

from __future__ import annotations

from dataclasses import replace

import csv
import io
import itertools
import json
import math
import re
import statistics

import numpy as np
import pytest
from conftest import FakeProgram, run_pinwise
from rich.console import Console

from pinwise import stats
from pinwise.bench import BenchOptions, build_candidates, db, run_bench
from pinwise.report import summarize
from pinwise.report.terminal import conclusion_line, heat_map_text, hyperfine_lines, summary_table
from pinwise.topology import load_topology

TOPOLOGY = load_topology("pack:1 core:2 pu:1")


def benched(path: str, candidates, runner, options: BenchOptions):
    """The summary of a bench of ``candidates`` whose runs ``runner`` makes, written to ``path``."""
    experiment = run_bench(["/bin/true"], candidates, TOPOLOGY, path, options, runner=runner)
    connection = db.open_db(path, create=False)
    try:
        return summarize(connection, experiment)
    finally:
        connection.close()


def boundary_summary(tmp_path, seed: int):
    """os against a placement 3% faster under 3% noise, 12 runs each: close to the edge."""
    candidates = build_candidates(["os"], ["near=0"], TOPOLOGY, None)
    path = str(tmp_path / f"boundary{seed}.db")
    program = FakeProgram({"os": 1.0, "0": 0.97, "other": 1.0}, 0.03, seed=seed)
    return benched(path, candidates, program, BenchOptions(12, progress=False))


def test_significant_never_stands_beside_an_interval_containing_one(tmp_path):
    disagreements = 0
    for seed in range(40):
        summary = boundary_summary(tmp_path, seed)
        base, near = summary.result("os"), summary.result("near")
        raw = stats.median_test(base.times, near.times, summary.confidence)
        if raw.significant and near.median_ci.low <= 1:
            disagreements += 1  # the test alone would have said "significant"
        assert not near.median.significant or near.median_ci.low > 1
        assert not near.mean.significant or near.mean_ci.low > 1
        text = "\n".join(hyperfine_lines(summary))
        if ": significantly faster" in text:
            assert near.median_ci.low > 1, text
        # One verdict: the sentence, the table's cell and the conclusion say the same.
        assert ("best: near" in text) == near.verdict.faster == (": significantly faster" in text)
        console = Console(width=250, record=True, file=io.StringIO())
        console.print(summary_table(summary))
        row = next(line for line in console.export_text().splitlines() if line.strip("│ ").startswith("near"))
        cells = [cell.strip() for cell in row.strip("│").split("│")]
        assert cells[8] == near.verdict.word, row
        if cells[8] == "faster":
            assert near.median_ci.low > 1, row
    # The samples do reach the boundary, so the rule above was exercised, not passed by luck.
    assert disagreements >= 1


def test_one_level_is_printed_with_its_correction(tmp_path):
    summary = boundary_summary(tmp_path, 0)
    assert summary.level_text() == "one-sided tests and intervals at 95%"
    summary = replace(summary, correction="95% overall, Bonferroni over 3 looks x 2 candidates",
                      confidence=1 - 0.05 / 6)
    assert summary.level_text() == ("one-sided tests and intervals at 99.17% "
                                    "(95% overall, Bonferroni over 3 looks x 2 candidates)")


@pytest.mark.parametrize("name", ["a|b", "x`y|", "`z", "two\nlines", "|"])
def test_a_markdown_table_keeps_its_cells_whatever_the_placement_is_named(tmp_path, name):
    """A placement's name holding a |, a backtick or a line break stays inside its cell: every
    row has the header's cells, and the cell reads back as the name (GitHub's table rules: a |
    escaped even inside code, a fence longer than the backticks inside)."""
    from pinwise.report.export import to_markdown

    candidates = build_candidates(["os"], [f"{name}=0"], TOPOLOGY, None)
    path = str(tmp_path / "named.db")
    experiment = run_bench(["/bin/true"], candidates, TOPOLOGY, path, BenchOptions(4, progress=False),
                           runner=FakeProgram({"os": 1.0, "other": 0.9}, 0.01))
    connection = db.open_db(path, create=False)
    try:
        text = to_markdown([summarize(connection, experiment)])
    finally:
        connection.close()
    rows = [line for line in text.splitlines() if line.startswith("|")]
    cells = [re.split(r"(?<!\\)\|", row)[1:-1] for row in rows]  # GitHub splits on every | not escaped
    assert len(rows) == 4 and all(len(row) == len(cells[0]) for row in cells), text
    shown = cells[3][0].strip() if cells[2][0].strip() == "`os`" else cells[2][0].strip()
    fence = re.match(r"`+", shown).group()
    assert shown.endswith(fence) and shown[len(fence):-len(fence)].strip().replace("\\|", "|") == " ".join(
        name.splitlines())


def test_heat_map_text():
    text = heat_map_text(neighbours(4))
    lines = text.splitlines()
    assert len(lines) == 5 and lines[0].startswith("  @@") and "darker" in lines[-1]
    assert "cell" in heat_map_text(np.ones((200, 200))).splitlines()[-1]
    # nothing recorded: said in words, not drawn as rows of blanks
    assert heat_map_text(np.zeros((3, 3))) == "(no heat map: no communication was recorded between any two threads)"


def neighbours(threads: int) -> np.ndarray:
    """Thread i talks to i + 1."""
    m = np.zeros((threads, threads))
    for i in range(threads - 1):
        m[i, i + 1] = m[i + 1, i] = 100
    return m


def test_report_lines_carry_the_figures_of_the_recorded_runs(tmp_path):
    """Planted medians: `fast` takes half the baseline's time, `slow` 1.3 times it, `same` as much.
    Every figure of `pinwise report` (the papers' table and hyperfine's lines) is recomputed here
    from the database's runs by its definition, not through pinwise.stats."""
    candidates = build_candidates(["os"], ["fast=0", "slow=1", "same=0,1"], TOPOLOGY, None)
    path = tmp_path / "planted.db"
    program = FakeProgram({"os": 1.0, "0": 0.5, "1": 1.3, "other": 1.0}, 0.02)
    run_bench(["/bin/true"], candidates, TOPOLOGY, str(path), BenchOptions(12, progress=False, seed=3), runner=program)
    connection = db.open_db(path, create=False)
    times = {}
    for run in db.runs(connection, 1):
        times.setdefault(run.policy, []).append(run.wall)
    connection.close()
    out = run_pinwise("report", str(path), check=True).stdout
    base = times["os"]

    def mean(x):
        return sum(x) / len(x)

    def variance(x):
        return sum((v - mean(x)) ** 2 for v in x) / (len(x) - 1)

    lines = {line.split()[0]: line for line in out.splitlines() if " ran " in line}
    assert set(lines) == {"fast", "slow", "same"}
    for name, sample in times.items():
        if name == "os":
            continue
        found = re.match(rf"{name} ran (\S+) ± (\S+) times (faster|slower) than os: (.*); variance (\S+) x os's$",
                         lines[name])
        assert found, lines[name]
        ratio = mean(base) / mean(sample)
        error = ratio * math.sqrt(variance(base) / mean(base) ** 2 + variance(sample) / mean(sample) ** 2)
        shown, shown_error = (ratio, error) if ratio >= 1 else (1 / ratio, error / ratio ** 2)
        assert found.group(1) == f"{shown:.2f}" and found.group(2) == f"{shown_error:.2f}"
        assert found.group(3) == ("faster" if ratio >= 1 else "slower")
        assert float(found.group(5)) == pytest.approx(variance(sample) / variance(base), rel=0.05)
        # fast and slow are separated from os: U = 0 or n*m, and the large-sample Mann-Whitney
        # p (normal, continuity-corrected) is the same number either way.
        n = m = 12
        u = sum((b > c) + 0.5 * (b == c) for b in base for c in sample)
        z = (abs(u - n * m / 2) - 0.5) / math.sqrt(n * m * (n + m + 1) / 12)
        p = 0.5 * math.erfc(z / math.sqrt(2))
        verdict = found.group(4)
        if name == "fast":
            assert u == n * m and verdict.startswith(f"significantly faster (median test p={p:.2g}, mean test p=")
        elif name == "slow":
            assert u == 0 and verdict == f"significantly slower (median test p={p:.2g})"
        else:
            assert verdict.startswith(f"no significant difference (median test p={p:.2g}, mean test p=")
    assert out.rstrip().splitlines()[-1] == "best: fast (CPUs 0)"
    table = {cells[0]: cells for cells in
             ([c.strip() for c in line.strip("│").split("│")] for line in out.splitlines() if line.startswith("│"))}
    assert [table[name][1] for name in ("os", "fast", "slow", "same")] == ["12"] * 4
    for name, sample in times.items():
        # each time in the unit it reads best in; min...max in the larger's; the variance in one unit, ms² here
        assert table[name][3] == f"{timed(mean(sample))} ± {timed(math.sqrt(variance(sample)))}"
        assert table[name][4] == timed(statistics.median(sample))
        assert table[name][5] == timed(min(sample), max(sample))
        assert table[name][9] == f"{variance(sample) * 1e6:.3g} ms²"
        assert table[name][10] == f"{math.sqrt(variance(sample)) / mean(sample):.1%}"
        if name != "os":
            assert table[name][6].startswith(f"{mean(base) / mean(sample):.2f} [")
            assert table[name][7].startswith(f"{statistics.median(base) / statistics.median(sample):.2f} [")
    assert table["fast"][8] == "faster" and table["slow"][8] == "SLOWER" and table["same"][8] == "no difference"


def timed(value: float, high: float | None = None) -> str:
    """A time (or a low...high range) as the tables print it: seconds, ms or us by magnitude."""
    factor, unit = (1, "s") if (high or value) >= 1 else (1e-3, "ms") if (high or value) >= 1e-3 else (1e-6, "us")
    if high is not None:
        return f"{value / factor:.3g}…{high / factor:.3g} {unit}"
    return f"{value / factor:.3g} {unit}"


def test_printed_times_below_the_clocks_resolution_fall_back_to_wall_time(tmp_path):
    """A program that prints `Time in seconds = 0.00` on every run: comparing its printed times
    would divide by zero; the summary names the cause and compares wall times instead."""
    from pinwise.bench.db import Run

    def quantised(argv, plan, pattern, timeout, counters):
        wall = 0.003 if plan is None else 0.002
        return Run(started="2026-01-01T00:00:00", wall=wall, program_time=0.0, user=wall, sys=0.0, max_rss_kb=1,
                   migrations=0, context_switches=1, energy_j=None, exit_status=0, failure=None, misplaced=0,
                   placement="os" if plan is None else plan.cpulist())

    candidates = build_candidates(["os"], ["one=0"], TOPOLOGY, None)
    path = str(tmp_path / "coarse.db")
    summary = benched(path, candidates, quantised, BenchOptions(6, time_regex="= *([0-9.]+)", progress=False))
    assert summary.metric == "wall time (the printed times are too coarse: 12 runs printed 0 or less)"
    assert summary.result("one").median.speedup == pytest.approx(1.5)
    assert all(line.isprintable() for line in hyperfine_lines(summary))


def test_html_report_has_the_machine_units_both_speedups_and_the_recommended_row(tmp_path):
    """Two programs with planted answers: `fast` (recommended for the first) halves the time,
    `slow` (recommended for the second) takes 1.3 times it. The HTML names the machine, gives
    times with units, both speedups, marks the slowdown, and the overall table has a row for the
    placement each program's analysis recommended."""
    from pinwise.report import write_html
    from pinwise.report.summary import overall_rows

    path = str(tmp_path / "two.db")
    program = FakeProgram({"os": 1.0, "0": 0.5, "1": 1.3, "other": 1.0}, 0.02)
    summaries = []
    for argv, recommended in ((["/bin/true"], "fast"), (["/bin/echo", "x"], "slow")):
        candidates = build_candidates(["os"], ["fast=0", "slow=1"], TOPOLOGY, None)
        experiment = run_bench(argv, candidates, TOPOLOGY, path,
                               BenchOptions(10, progress=False, seed=5, extra_config={"recommended": recommended}),
                               runner=program)
        connection = db.open_db(path, create=False)
        summaries.append(summarize(connection, experiment))
        connection.close()
    rows = {r.policy: r for r in overall_rows(summaries)}
    assert rows["recommended"].overall.programs == 2 and rows["recommended"].overall.significant == 1
    assert rows["recommended"].overall.geometric_mean_speedup == pytest.approx(
        math.sqrt(summaries[0].result("fast").median.speedup * summaries[1].result("slow").median.speedup))
    html = tmp_path / "r.html"
    write_html(summaries, html)
    text = html.read_text()
    for fact in ("CPU model", "kernel", "allowed CPUs", "pinwise", summaries[0].experiment.host.kernel):
        assert fact in text, fact
    assert text.count("speedup mean [CI]") == 2 and text.count("speedup median [CI]") == 2
    assert re.search(r"<td>[0-9.]+ (s|ms) ± [0-9.]+ (s|ms)</td>", text) and " ms²</td>" in text
    assert text.count('<tr class="slower">') == 2 and "SLOWER" in text
    assert "recommended (per program)" in text and "geometric mean of the <em>median</em> speedups" in text.replace(
        "Geometric", "geometric")
    assert text.count("<img") == 4 and "<title>pinwise report</title>" in text


class PlantedProgram:
    """A bench runner whose runs take the planted times of each placement, in order (keyed by
    CPU list, "os" for the OS); ``busy`` is the share of the CPUs other processes take."""

    def __init__(self, times: dict[str, list[float]], busy: float = 0.0):
        self.times = {name: iter(values) for name, values in times.items()}
        self.busy = busy

    def __call__(self, argv, plan, pattern, timeout, counters) -> db.Run:
        placement = "os" if plan is None else plan.cpulist()
        wall = next(self.times[placement])
        return db.Run(started="2026-01-01T00:00:00", wall=wall, program_time=None, user=wall, sys=0.0,
                      max_rss_kb=1000, migrations=0, context_switches=2, energy_j=None, exit_status=0, failure=None,
                      misplaced=0, placement=placement, load1=1.0, others_cpu=self.busy * 2 * wall, steal_cpu=0.0,
                      all_cpu=2 * wall)


def planted_summary(tmp_path, times: dict[str, list[float]], placements: list[str], busy: float = 0.0, name="p"):
    candidates = build_candidates(["os"], placements, TOPOLOGY, None)
    path = str(tmp_path / f"{name}.db")
    runs = len(next(iter(times.values())))
    return benched(path, candidates, PlantedProgram(times, busy), BenchOptions(runs, progress=False, seed=1))


def every_output(tmp_path, summary) -> dict[str, str]:
    """The experiment as each output writes it: terminal, HTML, Markdown, LaTeX, CSV and JSON."""
    from pinwise.report import write_html
    from pinwise.report.export import to_csv, to_json, to_latex, to_markdown

    console = Console(width=250, record=True, file=io.StringIO())
    console.print(summary_table(summary))
    for line in hyperfine_lines(summary):
        console.print(line, soft_wrap=True, markup=False, highlight=False)
    html = tmp_path / "r.html"
    write_html([summary], html)
    return {"terminal": console.export_text(), "html": html.read_text(), "markdown": to_markdown([summary]),
            "latex": to_latex([summary]), "csv": to_csv([summary]), "json": to_json([summary])}


def test_a_gain_of_the_mean_alone_is_one_verdict_in_every_output(tmp_path):
    """pigz's case: a few slow runs of the OS make the mean test say faster while the median test
    does not. The table, the sentence, the conclusion, the HTML, Markdown, LaTeX, CSV and JSON
    say one thing: faster by one test only, not established; no "yes" and no "best"."""
    steady = [1.0 + 0.001 * (i % 10) for i in range(30)]
    base = [2.0 if i % 5 == 0 else t for i, t in enumerate(steady)]  # 6 of 30 runs twice as slow
    summary = planted_summary(tmp_path, {"os": base, "0": steady}, ["steady=0"])
    steady_result = summary.result("steady")
    assert steady_result.mean.significant and not steady_result.median.significant  # the planted disagreement
    assert steady_result.verdict.kind == "one test"
    out = every_output(tmp_path, summary)
    row = next(line for line in out["terminal"].splitlines() if line.startswith("│ steady"))
    assert [c.strip() for c in row.strip("│").split("│")][8] == "one test"
    assert re.search(r"steady ran 1\.\d\d ± 0\.\d\d times faster than os: faster by the mean test only \(",
                     out["terminal"]), out["terminal"]
    assert out["terminal"].rstrip().endswith("no placement is faster by both tests: steady by one test only; measure "
                                             "more runs before choosing, or keep the OS placement")
    assert "significantly faster" not in out["terminal"] and "best:" not in out["terminal"]
    assert "<td>one test</td>" in out["html"] and '<tr class="faster">' not in out["html"]
    assert "| one test |" in out["markdown"] and "- no placement is faster by both tests" in out["markdown"]
    assert r"& one test \\" in out["latex"]
    csv_row = next(r for r in csv.DictReader(io.StringIO(out["csv"])) if r["policy"] == "steady")
    assert csv_row["verdict"] == "one test"
    found = next(r for r in json.loads(out["json"])["experiments"][0]["results"] if r["policy"] == "steady")
    assert found["verdict"] == "one test" and found["verdict_text"].startswith("faster by the mean test only")


def test_without_the_os_placement_the_advice_keeps_the_baseline_that_was_measured(tmp_path):
    """An experiment without ``os`` has its first placement as baseline: when nothing beats it, the
    advice is to keep that placement, not "the OS placement", which was never measured."""
    same = [1.0 + 0.001 * (i % 10) for i in range(12)]
    candidates = build_candidates([], ["first=0", "second=1"], TOPOLOGY, None)
    path = str(tmp_path / "b.db")
    summary = benched(path, candidates, PlantedProgram({"0": same, "1": list(reversed(same))}),
                      BenchOptions(12, progress=False, seed=1))
    assert summary.baseline == "first"
    assert conclusion_line(summary) == "no placement is significantly faster than first: keep first"


def test_what_adapt_did_in_its_runs_is_said_under_the_verdicts(tmp_path):
    """adapt's runs keep the placements each applied and why one could not place by what the threads
    share: the summary gives the fewest, median and most, and counts the runs that saw nothing, in
    the terminal and in every export's notes."""
    moves = iter([0, 2, 1, 1])
    notes = iter([None, None, "100% of the samples were in 1 child process(es)", None])

    def runner(argv, plan, pattern, timeout, counters):
        run = PlantedProgram({"0": [1.0] * 4})(argv, plan, pattern, timeout, counters) if plan else None
        if run is not None:
            return run
        return replace(PlantedProgram({"os": [1.0] * 4})(argv, None, pattern, timeout, counters), placement="adapt",
                       moves=next(moves), adapt_note=next(notes))

    candidates = build_candidates(["adapt"], ["mine=0"], TOPOLOGY, None)
    path = str(tmp_path / "a.db")
    summary = benched(path, candidates, runner, BenchOptions(4, progress=False, seed=1))
    adapt, mine = summary.result("adapt"), summary.result("mine")
    assert adapt.moves == (0, 1.0, 2) and adapt.shortcomings == (1, "100% of the samples were in 1 child process(es)")
    assert mine.moves is None and mine.shortcomings is None
    out = every_output(tmp_path, summary)
    assert "adapt applied 0 to 2 placements a run (median 1)" in out["terminal"]
    assert ("warning: adapt could not place the threads by what they share in 1 of its 4 runs: 100% of the samples "
            "were in 1 child process(es)") in out["terminal"]
    assert "adapt applied 0 to 2 placements a run" in json.loads(out["json"])["experiments"][0]["notes"][0]


def test_a_verdict_on_runs_of_different_shapes_says_what_the_rank_test_shows():
    """Mann-Whitney tests medians only for samples of one shape (Touati et al. 4.2): a candidate
    whose runs are bimodal beside the baseline's tight ones is still called faster (the median's
    interval agrees), and the verdict says that the rank test shows the baseline slower more often
    than not; runs of one shape keep the plain words."""
    from pinwise.report import summary

    rng = np.random.default_rng(1)
    tight = 10 + rng.normal(0, 0.05, 20)
    bimodal = np.concatenate([8 + rng.normal(0, 0.01, 10), 9.5 + rng.normal(0, 0.5, 10)])
    compared = summary._compared(summary.PolicyResult("os", "os", tight), summary.PolicyResult("c", "c", bimodal),
                                 0.95, 0)
    assert not compared.median.same_shape
    text = summary.verdict(compared, "os", False).text
    assert text.startswith("significantly faster (median test p=") and text.endswith(
        "; the runs differ in shape (Kolmogorov-Smirnov): the rank test shows os slower more often than not, and "
        "the median speedup's bootstrap interval excludes 1)"), text
    shifted = summary._compared(summary.PolicyResult("os", "os", tight), summary.PolicyResult("c", "c", tight - 1),
                                0.95, 0)
    assert shifted.median.same_shape and "shape" not in summary.verdict(shifted, "os", False).text


def test_one_placement_under_two_names_is_run_once_with_one_verdict(tmp_path):
    """The issue's xz case on two CPUs: compact and scatter are both 0,1. Benched once, under
    compact's name, and reported under both: one row, one sentence, and a CSV row per name."""
    program = FakeProgram({"os": 1.0, "0,1": 0.9, "other": 1.0}, 0.02)
    candidates = build_candidates(["os", "compact", "scatter"], [], TOPOLOGY, 2)
    path = str(tmp_path / "same.db")
    said = []
    experiment = run_bench(["/bin/true"], candidates, TOPOLOGY, path,
                           BenchOptions(8, progress=False, seed=2, say=said.append), runner=program)
    assert set(program.calls) == {"os", "0,1"} and len(program.calls) == 16  # 8 runs each, not 8 more of scatter
    assert said[0] == ("pinwise: scatter and compact place the threads on the same CPUs here: one placement, run once "
                       "and reported under both names")
    connection = db.open_db(path, create=False)
    summary = summarize(connection, experiment, baseline="os")
    assert summarize(connection, experiment, baseline="scatter").baseline == "compact"
    connection.close()
    assert summary.result("scatter") is summary.result("compact")
    out = every_output(tmp_path, summary)
    assert out["terminal"].count("compact = scatter") == 3  # the row, the sentence, the conclusion
    assert "compact = scatter ran 1.1" in out["terminal"] and out["terminal"].count(" ran ") == 1
    rows = {r["policy"]: r for r in csv.DictReader(io.StringIO(out["csv"]))}
    assert rows["scatter"]["same_as"] == "compact" and rows["compact"]["same_as"] == ""
    assert {k: v for k, v in rows["scatter"].items() if k not in ("policy", "same_as")} == \
        {k: v for k, v in rows["compact"].items() if k not in ("policy", "same_as")}
    assert "| `compact = scatter` |" in out["markdown"] and "compact = scatter" in out["latex"]


def test_a_busy_machines_warning_reaches_every_export(tmp_path):
    program = FakeProgram({"os": 1.0, "other": 1.0}, 0.05, busy=0.5)
    candidates = build_candidates(["os"], ["one=0"], TOPOLOGY, None)
    path = str(tmp_path / "busy.db")
    experiment = run_bench(["/bin/true"], candidates, TOPOLOGY, path, BenchOptions(6, progress=False),
                           runner=program)
    connection = db.open_db(path, create=False)
    summary = summarize(connection, experiment)
    connection.close()
    out = every_output(tmp_path, summary)
    for kind in ("terminal", "html", "markdown", "latex", "json"):
        text = out[kind].replace(r"\%", "%")  # LaTeX escapes it
        assert "the machine was busy during the bench (other processes used 50% of the CPU time" in text, kind
        assert "inconclusive: the machine was busy" in text, kind
    assert summary.result("one").verdict.kind in ("inconclusive", "faster", "slower", "one test")
    assert "keep the OS placement" not in out["markdown"] + out["latex"]


def test_the_variance_column_has_one_unit(tmp_path):
    """Variances of 0.03 s² and 1e-8 s² side by side: one unit for the column (s² here), so that
    a reader compares numbers, not units."""
    slow = [2.0 + 0.2 * (i % 3) for i in range(6)]
    fast = [0.001 + 0.0001 * (i % 3) for i in range(6)]
    summary = planted_summary(tmp_path, {"os": slow, "0": fast}, ["fast=0"])
    console = Console(width=250, record=True, file=io.StringIO())
    console.print(summary_table(summary))
    rows = [[c.strip() for c in line.strip("│").split("│")] for line in console.export_text().splitlines()
            if line.startswith("│")]
    variances = {row[0]: row[9] for row in rows}
    assert variances == {"os": f"{statistics.variance(slow):.3g} s²", "fast": f"{statistics.variance(fast):.3g} s²"}


def test_the_speedup_plots_legend_names_the_colours_of_its_bars(tmp_path):
    """Each bar's colour is its placement's verdict, and the legend's entry of that colour names
    that verdict: green faster, red slower, grey no difference."""
    from matplotlib.colors import to_rgb

    from pinwise.report.plots import speedup_figure

    base = [1.0 + 0.01 * (i % 5) for i in range(12)]
    times = {"os": base, "0": [t * 0.5 for t in base], "1": [t * 1.5 for t in base], "0,1": list(reversed(base))}
    summary = planted_summary(tmp_path, times, ["fast=0", "slow=1", "same=0,1"])
    figure = speedup_figure(summary)
    axes = figure.axes[0]
    legend = {to_rgb(h.get_facecolor()): text.get_text()
              for h, text in zip(axes.get_legend().legend_handles, axes.get_legend().get_texts())}
    names = [t.get_text() for t in axes.get_xticklabels()]
    bars = axes.patches
    assert len(bars) == 2 * len(names)
    expected = {"fast": "faster", "slow": "slower", "same": "no significant difference"}
    for i, bar in enumerate(bars):
        name = names[i % len(names)]
        assert legend[to_rgb(bar.get_facecolor())] == expected[name], (name, legend)
        assert summary.result(name).verdict.kind == {"faster": "faster", "slower": "slower"}.get(
            expected[name], "no difference")
    import matplotlib.pyplot as plt

    plt.close(figure)


def test_a_placement_faster_only_in_the_runs_that_finished_is_not_established(tmp_path):
    """A placement whose runs are 20 % faster when they finish, but 4 of its 20 timed out (a
    livelock now and then): the runs left out may be its slowest, so the tests on the ones that
    finished establish nothing. Every output says so, no "best", and auto names no winner."""
    times = [1.0 + 0.001 * (i % 10) for i in range(20)]
    quick = [0.8 + 0.001 * (i % 10) for i in range(20)]
    hangs = (calls % 5 == 4 for calls in itertools.count())  # the warm-up run included

    def runner(argv, plan, pattern, timeout, counters):
        run = PlantedProgram({"os": times, "0": quick})(argv, plan, pattern, timeout, counters)
        return replace(run, failure="timeout after 5 s", exit_status=-9) if plan and next(hangs) else run

    candidates = build_candidates(["os"], ["quick=0"], TOPOLOGY, None)
    path = str(tmp_path / "hangs.db")
    summary = benched(path, candidates, runner, BenchOptions(20, progress=False, seed=1))
    result = summary.result("quick")
    failed = sum(result.failures.values())
    assert result.median.significant and result.runs == 20 and failed == 20 - len(result.times) >= 3  # as planted
    assert result.verdict.kind == "failed runs" and not result.verdict.faster and summary.winner() is None
    assert result.verdict.text.endswith(f"but {failed} of its 20 runs failed ({failed} x timeout after 5 s): "
                                        "not established")
    assert conclusion_line(summary).startswith("no placement is established faster than os: quick was faster only in "
                                               "the runs that finished")
    out = every_output(tmp_path, summary)
    assert "best:" not in out["terminal"] and '<tr class="faster">' not in out["html"]
    found = next(r for r in json.loads(out["json"])["experiments"][0]["results"] if r["policy"] == "quick")
    assert found["verdict"] == "failed runs"


def test_a_program_where_a_placement_has_no_comparison_is_not_counted_in_its_overall_row(tmp_path):
    """Across two programs, a placement 1.5x faster on one and with a single good run on the other
    (no comparison there): its overall row is of the one program it was compared on, not a
    speedup of 1.0 averaged in for the other."""
    from pinwise.report.summary import overall_rows

    summaries = []
    for name, fast in (("a", [0.5] * 8), ("b", [0.5] + [None] * 7)):
        def runner(argv, plan, pattern, timeout, counters, fast=iter(fast)):
            run = PlantedProgram({"os": [1.0 + 0.01 * i for i in range(8)], "0": [0.5] * 8})(
                argv, plan, pattern, timeout, counters)
            if plan is None:
                return run
            wall = next(fast)
            return replace(run, failure="exit status 1", exit_status=1) if wall is None else run

        summaries.append(benched(str(tmp_path / f"{name}.db"), build_candidates(["os"], ["fast=0"], TOPOLOGY, None),
                                 runner, BenchOptions(8, progress=False, seed=1)))
    assert summaries[1].result("fast").verdict.kind == "no data"
    row = next(r for r in overall_rows(summaries) if r.policy == "fast")
    assert row.overall.programs == 1 and row.overall.geometric_mean_speedup == pytest.approx(2.0, rel=0.05)
    assert len(row.programs) == 1


def test_a_mean_that_points_the_other_way_than_the_verdict_is_said_to_be_the_means(tmp_path):
    """The OS's runs are 1.00 s but 3 of 35 take 2 s; the candidate's all take 1.05 s. Its mean is
    faster (hyperfine's ratio, 1.03x), its median slower, and the median test decides: the line
    says which figure points which way, never "ran 1.03 times faster than os: significantly slower"."""
    base = [2.0 if i % 12 == 0 else 1.0 + 0.0001 * (i % 10) for i in range(35)]
    summary = planted_summary(tmp_path, {"os": base, "0": [1.05 + 0.0001 * (i % 10) for i in range(35)]},
                              ["steady=0"])
    result = summary.result("steady")
    assert result.verdict.slower and result.ratio[0] > 1, result.verdict
    line = next(line for line in hyperfine_lines(summary) if line.startswith("steady ran"))
    assert re.match(r"steady ran 1\.0\d ± \d\.\d\d times faster than os by the mean, 0\.95x by the median: "
                    r"significantly slower \(", line), line
