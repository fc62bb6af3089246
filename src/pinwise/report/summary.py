"""What a bench experiment showed: per placement, its times, spread and Speedup-Test decisions."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field, replace

import numpy as np

from .. import policies, stats
from ..errors import PinwiseError
from ..bench import db
from ..bench.config import BenchConfig
from ..bench.noise import Noise, summarize_noise


@dataclass(frozen=True)
class Verdict:
    """The one decision on a placement against the baseline, made once (:func:`verdict`) and
    printed as it is by every output: the terminal table (``word``) and sentence (``text``), the
    HTML, the plots' colours, Markdown, LaTeX, CSV and JSON (``kind``).

    ``kind`` is one of VERDICT_KINDS: ``faster`` (both tests say so, or the median test when the
    mean test could not conclude), ``slower`` (the median test for "slower"), ``one test`` (one
    test says faster and the other does not: not established), ``no difference`` (neither, on a
    quiet machine), ``inconclusive`` (neither, on a busy machine: a gain could hide in the
    noise), ``failed runs`` (the tests say faster, but some of its runs failed or timed out, and
    those left out may be its slowest: not established), ``baseline``, ``no data`` (fewer than 2
    successful runs on one side)."""

    kind: str
    word: str
    text: str

    @property
    def faster(self) -> bool:
        return self.kind == "faster"

    @property
    def slower(self) -> bool:
        return self.kind == "slower"


VERDICT_KINDS = ("faster", "slower", "one test", "failed runs", "no difference", "inconclusive", "baseline",
                 "no data")


@dataclass(frozen=True, eq=False)
class PolicyResult:
    """One placement of an experiment: its measured runs' times, their spread, and (for every
    placement but the baseline) the Speedup-Test decisions and intervals against the baseline."""

    name: str
    placement: str
    times: np.ndarray                      # seconds, successful measured runs
    failures: Counter = field(default_factory=Counter)
    spread: stats.Spread | None = None
    mean: stats.MeanTest | None = None     # None for the baseline itself
    median: stats.MedianTest | None = None
    mean_ci: stats.Interval | None = None
    median_ci: stats.Interval | None = None
    ratio: tuple[float, float] | None = None
    migrations: float | None = None        # median per run
    context_switches: float | None = None
    max_rss_kb: float | None = None
    misplaced_runs: int = 0
    verdict: Verdict | None = None         # set by summarize, once
    #: Other names of this placement (the same CPUs, or their mirror image): run once, under ``name``.
    aliases: tuple[str, ...] = ()
    #: The fewest and most threads its good runs ran (read back), and the plan's slots
    threads: tuple[int, int] | None = None
    slots: int | None = None
    #: An adapt placement's good runs: the fewest, median and most placements one applied, and how
    #: many of them could not place the threads by what they share, with the first one's reason
    moves: tuple[int, float, int] | None = None
    shortcomings: tuple[int, str] | None = None

    @property
    def fewer_threads(self) -> bool:
        """Some good run ran fewer threads than the plan has slots: slots placed nothing."""
        return self.threads is not None and self.slots is not None and self.threads[0] < self.slots

    @property
    def runs(self) -> int:
        return len(self.times) + sum(self.failures.values())

    @property
    def label(self) -> str:
        """The placement's names as the tables show them: ``compact = scatter``."""
        return " = ".join((self.name, *self.aliases))

    @property
    def slower(self) -> bool:
        return self.verdict is not None and self.verdict.slower

    def tests_say_slower(self) -> bool:
        """The one-sided median test for "slower" rejects at the level of the interval, and the
        median speedup's interval lies below 1."""
        if self.median is None or self.median_ci is None:
            return False
        alpha = stats.risk(self.median_ci.confidence)
        return self.median.pvalue_slower < alpha and stats.agrees_with_interval(True, self.median_ci, faster=False)


def verdict(result: PolicyResult, baseline: str, busy: bool) -> Verdict:
    """The placement's one verdict from its two tests (module :mod:`pinwise.stats`, each already
    checked against its interval); see :class:`Verdict` for the kinds."""
    if result.name == baseline:
        return Verdict("baseline", "baseline", "the baseline")
    if result.median is None or result.mean is None:
        return Verdict("no data", "-", "no comparison: fewer than 2 successful runs of it or of the baseline")
    mean, median = result.mean, result.median
    median_faster = median.significant and median.speedup > 1
    mean_faster = mean.concluded and mean.significant and mean.speedup > 1
    mean_p = f"mean test p={mean.pvalue:.2g}" if mean.concluded else "mean: no conclusion"
    failed = sum(result.failures.values())
    if median_faster and failed:  # its slowest runs may be the ones that never finished
        return Verdict("failed runs", "failed runs", f"faster in the runs that finished (median test "
                       f"p={median.pvalue:.2g}), but {failed} of its {result.runs} runs failed "
                       f"({'; '.join(f'{n} x {why}' for why, n in result.failures.items())}): not established")
    # the rank test reads as a test of medians only for samples of one shape (Touati et al. 4.2);
    # otherwise it says P(X > Y) > 1/2, and the median's bootstrap interval (which must agree) speaks for the median
    def shapes(baseline_was: str) -> str:
        return "" if median.same_shape else (f"; the runs differ in shape (Kolmogorov-Smirnov): the rank test shows "
                                             f"{baseline} {baseline_was} more often than not, and the median speedup's "
                                             "bootstrap interval excludes 1")
    if median_faster and (mean_faster or not mean.concluded):
        return Verdict("faster", "faster",
                       f"significantly faster (median test p={median.pvalue:.2g}, {mean_p}{shapes('slower')})")
    if median_faster:
        return Verdict("one test", "one test", f"faster by the median test only (p={median.pvalue:.2g}; the mean "
                       f"test, p={mean.pvalue:.2g}, does not agree: slow outliers?): not established")
    if mean_faster:
        return Verdict("one test", "one test", f"faster by the mean test only (p={mean.pvalue:.2g}; the median "
                       f"test, p={median.pvalue:.2g}, does not agree): not established")
    if result.tests_say_slower():
        return Verdict("slower", "SLOWER",
                       f"significantly slower (median test p={median.pvalue_slower:.2g}{shapes('faster')})")
    tests = f"median test p={median.pvalue:.2g}, {mean_p}"
    if busy:
        return Verdict("inconclusive", "inconclusive", f"no significant difference ({tests}) on a busy machine: "
                       "cannot tell")
    return Verdict("no difference", "no difference", f"no significant difference ({tests})")


@dataclass(frozen=True)
class ExperimentSummary:
    experiment: db.Experiment
    metric: str
    baseline: str
    confidence: float
    policies: list[PolicyResult]
    correction: str = ""                   # how `confidence` was corrected for several tests, if it was
    noise: Noise | None = None

    def level_text(self) -> str:
        """The one level every test and interval of this summary uses, and where it comes from."""
        text = f"one-sided tests and intervals at {stats.format_level(self.confidence)}"
        return f"{text} ({self.correction})" if self.correction else text

    @property
    def busy(self) -> bool:
        return self.noise is not None and self.noise.busy

    def no_gain_text(self, advice: str) -> str:
        """What to say when no placement beat the baseline: ``advice`` on a quiet machine; on a busy
        one, that the bench could not tell."""
        if self.noise is not None and self.noise.busy:
            return (f"inconclusive: the machine was busy ({self.noise.describe()}); "
                    "rerun on a quiet machine before deciding")
        return advice

    def conclusion(self, won, advice: str) -> str:
        """``won(winner)`` when a placement beat the baseline (:meth:`winner`); otherwise
        :meth:`no_gain_text` of ``advice``."""
        winner = self.winner()
        return won(winner) if winner is not None else self.no_gain_text(advice)

    def result(self, name: str) -> PolicyResult | None:
        """The placement called ``name``, under its own name or another it stands for."""
        return next((p for p in self.policies if p.name == name or name in p.aliases), None)

    def winner(self) -> PolicyResult | None:
        """The placement with the best median speedup among those whose verdict is faster."""
        faster = [p for p in self.policies if p.verdict is not None and p.verdict.faster]
        return max(faster, key=lambda p: p.median.speedup, default=None)


def _median(values) -> float | None:
    values = [v for v in values if v is not None]
    return float(np.median(values)) if values else None


#: A placement whose printed times are all equal over this many runs has a clock too coarse for it.
COARSE_RUNS = 5


def _too_coarse(times: list[float], per_placement: list[list[float]]) -> str:
    """Why the times a program printed cannot be compared (empty if they can): some are zero or
    negative, or a placement's are all the same over COARSE_RUNS runs or more."""
    if any(t is not None and t <= 0 for t in times):
        return f"{sum(1 for t in times if t is not None and t <= 0)} runs printed 0 or less"
    same = next((s for s in per_placement if len(s) >= COARSE_RUNS and len(set(s)) == 1), None)
    return f"{len(same)} runs of one placement all printed {same[0]:g}" if same else ""


def _redrawn(name: str) -> bool:
    """A placement drawn anew for every run (the random policy), which has no one CPU list."""
    return policies.is_policy(name) and name.strip().lower() != policies.AUTO and policies.lookup(name).redrawn


def _measured(name: str, mine: list[db.Run], use_program_time: bool, planned: str | None) -> PolicyResult:
    """A placement's own figures, before any comparison."""
    good = [r for r in mine if r.failure is None]
    times = np.array([r.program_time if use_program_time else r.wall for r in good], dtype=np.float64)
    placement = next((r.placement for r in mine if r.placement), planned or policies.BASELINE)
    return PolicyResult(
        name, placement if not _redrawn(name) else "new random permutation per run", times,
        Counter(r.failure for r in mine if r.failure is not None),
        spread=stats.spread(times) if len(times) else None,
        migrations=_median(r.migrations for r in good), context_switches=_median(r.context_switches for r in good),
        max_rss_kb=_median(r.max_rss_kb for r in good), misplaced_runs=sum(1 for r in good if r.misplaced),
        threads=(min(counts), max(counts)) if (counts := [r.threads for r in good if r.threads is not None]) else None,
        slots=next((r.slots for r in good if r.slots is not None), None),
        moves=(min(moves), float(np.median(moves)), max(moves)) if (moves := [r.moves for r in good
                                                                            if r.moves is not None]) else None,
        shortcomings=(len(notes), notes[0]) if (notes := [r.adapt_note for r in good if r.adapt_note]) else None)


def _compared(base: PolicyResult, result: PolicyResult, confidence: float, seed: int) -> PolicyResult:
    """``result`` with the Speedup-Test's decisions against ``base``; a test's "significant"
    stands only when the bootstrap interval at the same level agrees."""
    if len(result.times) < 2 or len(base.times) < 2:
        return result
    mean_ci = stats.speedup_interval(base.times, result.times, "mean", confidence, seed)
    median_ci = stats.speedup_interval(base.times, result.times, "median", confidence, seed)
    mean = stats.mean_test(base.times, result.times, confidence)
    median = stats.median_test(base.times, result.times, confidence)
    return replace(result, mean_ci=mean_ci, median_ci=median_ci,
                   mean=replace(mean, significant=stats.agrees_with_interval(mean.significant, mean_ci)),
                   median=replace(median, significant=stats.agrees_with_interval(median.significant, median_ci)),
                   ratio=stats.ratio_error(base.times, result.times))


def has_placement(connection, experiment: db.Experiment, name: str) -> bool:
    """Whether ``name`` is a placement of ``experiment``, or another name of one."""
    names = list(experiment.config.candidates) or sorted({r.policy for r in db.runs(connection, experiment.id)})
    return name in names or any(name in same for same in _aliases(experiment.config, names).values())


def summarize(connection, experiment: db.Experiment, baseline: str | None = None, confidence: float = 0.95,
              seed: int = 0, correction: str = "") -> ExperimentSummary:
    """Every placement's spread and Speedup-Test decisions against ``baseline``, all at one
    ``confidence`` (already corrected for multiple tests by the caller, who says how in
    ``correction``). A test's "significant" stands only when the bootstrap interval at the same
    level agrees (:func:`pinwise.stats.agrees_with_interval`)."""
    rows = db.runs(connection, experiment.id)
    names = list(experiment.config.candidates) or sorted({r.policy for r in rows})
    aliases = _aliases(experiment.config, names)
    if baseline is None:  # the OS's placement where it was measured, else the first placement
        baseline = policies.BASELINE if policies.BASELINE in names else names[0]
    elif baseline not in names:
        baseline = next((name for name, same in aliases.items() if baseline in same), baseline)
        if baseline not in names:
            every = [*names, *(n for same in aliases.values() for n in same)]
            raise PinwiseError(f"baseline {baseline!r} is not a placement of experiment {experiment.id} "
                               f"(it has {', '.join(every)})")
    use_program_time = bool(experiment.config.time_regex)
    metric = "program time" if use_program_time else "wall time"
    coarse = use_program_time and _too_coarse([r.program_time for r in rows if r.failure is None],
                                              [[r.program_time for r in rows if r.policy == n and r.failure is None]
                                               for n in names])
    if coarse:  # what the program prints cannot tell placements apart: its own clock is too coarse
        use_program_time, metric = False, f"wall time (the printed times are too coarse: {coarse})"
    plans = experiment.config.plans
    measured = {name: _measured(name, [r for r in rows if r.policy == name], use_program_time, plans.get(name))
                for name in names}
    base = measured[baseline]
    results = [result if result is base else _compared(base, result, confidence, seed)
               for result in measured.values()]
    noise = summarize_noise([r for r in rows if r.failure is None], [r.times for r in results if len(r.times)])
    results = [replace(r, verdict=verdict(r, baseline, noise.busy), aliases=tuple(aliases.get(r.name, ())))
               for r in results]
    return ExperimentSummary(experiment, metric, baseline, confidence, results, correction, noise)


def _aliases(config: BenchConfig, names: list[str]) -> dict[str, list[str]]:
    """The other names of each benched placement (the bench's ``aliases``), but benched ones."""
    return {name: [n for n in same if n not in names] for name, same in (config.aliases or {}).items() if name in names}


@dataclass(frozen=True)
class OverallRow:
    policy: str
    overall: stats.Overall
    variance_min: float
    variance_max: float
    programs: tuple[str, ...] = ()         # the programs (experiments) the row is over


#: The aggregate row of the placement each program's analysis recommended.
RECOMMENDED_ROW = "recommended"


def recommended_policy(summary: ExperimentSummary) -> str | None:
    """The placement the analysis recommended for this program: the one kept in the experiment's
    configuration (``recommended``, written by demo and auto) or the ``auto`` candidate."""
    names = [p.name for p in summary.policies]
    named = summary.experiment.config.recommended
    if named is not None and named in names:
        return named
    return policies.AUTO if policies.AUTO in names else None


def overall_rows(summaries: list[ExperimentSummary]) -> list[OverallRow]:
    """Across programs (experiments), like the papers' Tables 1-3: geometric mean of the median
    speedups, share significantly faster, and the smallest and largest variance observed. Every
    placement has its row over the programs that measured it (``programs`` says which), and a
    ``recommended`` row gathers, program by program, the placement its analysis recommended."""
    names = list(dict.fromkeys(n for s in summaries for p in s.policies for n in (p.name, *p.aliases)))
    chosen = {name: [(s, s.result(name)) for s in summaries] for name in names}
    recommended = [(s, s.result(name)) for s in summaries if (name := recommended_policy(s)) is not None]
    if recommended:
        chosen[RECOMMENDED_ROW] = recommended
    rows = []
    for name, found in chosen.items():
        # a program where it has no comparison (fewer than 2 good runs) has no speedup to count
        found = [(s, r) for s, r in found if r is not None and r.spread is not None
                 and (r.median is not None or r.name == s.baseline or s.baseline in r.aliases)]
        if not found:
            continue
        speedups = [r.median.speedup if r.median else 1.0 for _, r in found]
        significant = [r.verdict is not None and r.verdict.faster for _, r in found]
        variances = [r.spread.variance for _, r in found]
        rows.append(OverallRow(name, stats.overall(speedups, significant, summaries[0].confidence),
                               min(variances), max(variances), tuple(s.experiment.label for s, _ in found)))
    return rows


def machine_facts(experiment: db.Experiment) -> dict:
    """The machine header of a report: CPU model, host, kernel, CPU count, allowed CPUs, the
    machine's shape, pinwise version and date (what the database kept; empty where it did not)."""
    host = experiment.host
    return {"cpu_model": host.cpu_model, "host": host.host, "kernel": host.kernel,
            "cpus": host.cpus, "allowed_cpus": experiment.cpuset or "", "topology": experiment.shape,
            "pinwise": experiment.version or "", "date": experiment.created}


def machine_line(experiment: db.Experiment) -> str:
    """The machine header in one line."""
    f = machine_facts(experiment)
    parts = [f["cpu_model"] or "CPU model not recorded", f"host {f['host']}" if f["host"] else "",
             f["kernel"], f"{f['cpus']} CPUs" if f["cpus"] else "",
             f"allowed {f['allowed_cpus']}" if f["allowed_cpus"] else "", f["topology"],
             f"pinwise {f['pinwise']}" if f["pinwise"] else "", f["date"]]
    return ", ".join(p for p in parts if p)


def _time_unit(value: float) -> tuple[str, float]:
    for unit, factor in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if abs(value) >= factor:
            return unit, factor
    return "ns", 1e-9


def variance_unit(values) -> tuple[str, float]:
    """One unit for a column of variances of times: the largest squared unit (s², ms², us², ns²)
    in which the largest of them reads at least 0.01, and its factor (seconds per unit)."""
    values = [v for v in values if v is not None and not math.isnan(v)]
    top = max(values, default=0.0)
    return next(((u, f) for u, f in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)) if top / f ** 2 >= 0.01), ("ns", 1e-9))


def fmt_variance(value: float, unit: tuple[str, float] | None = None) -> str:
    """A variance of times in ``unit`` (:func:`variance_unit` of its column), by default its own:
    3.1e-7 s² is "0.31 ms²"."""
    if value is None or math.isnan(value):
        return "-"
    name, factor = unit or variance_unit([value])
    return f"{value / factor ** 2:.3g} {name}²"


def fmt_seconds(value: float) -> str:
    if math.isnan(value):
        return "-"
    unit, factor = _time_unit(value)
    return f"{value / factor:.3g} {unit}"


def fmt_range(low: float, high: float) -> str:
    """min...max in the unit of the larger."""
    unit, factor = _time_unit(high)
    return f"{low / factor:.3g}…{high / factor:.3g} {unit}"
