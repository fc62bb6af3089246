"""Capability 7: the Speedup-Test protocol (Touati, Worms and Briais, 2013), as Mazouz et al. used it.

A speedup is declared only when a one-sided test at a stated confidence says the candidate is
faster than the baseline; averages alone prove nothing. Every test here comes from scipy.stats and
returns a small result object with named fields, in the style of scipy.

References: S.-A.-A. Touati, J. Worms, S. Briais, "The Speedup-Test: a statistical methodology for
programme speedup analysis and computation", Concurrency and Computation 25(10), 2013; Mazouz et
al. section 2.3 (seeds/).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

# scipy.stats is imported in the functions that use it: it takes 0.5-1 s to import, which the
# commands that only format numbers with this module (simulate, map, mpi) should not pay.

#: Below this many runs the t-test's normality assumption must be checked (Speedup-Test).
LARGE_SAMPLE = 30
#: Samples with ties are tested on every split of their runs up to this many splits (7 runs
#: against 7: 3,432, 0.05 s); beyond, the normal approximation with scipy's tie correction, which
#: is close there (8 against 8 took 0.16 s a test exactly, 9 against 9 0.35 s).
EXACT_SPLITS = 5_000


def risk(confidence: float) -> float:
    """The test level alpha = 1 - confidence, exactly as written: 1 - 0.95 is 0.05000000000000004
    in floating point, which would let an exact p-value of 0.05 (e.g. Mann-Whitney's smallest with
    3 runs against 3) pass as "below 0.05"."""
    return round(1 - confidence, 12)


@dataclass(frozen=True)
class MeanTest:
    """Speedup of the mean: baseline mean / candidate mean, and whether it is significant.

    Protocol: if either sample has fewer than 30 runs, both must pass Shapiro-Wilk at level
    ``alpha`` (otherwise no conclusion is drawn); then Fisher's F-test chooses Student's t-test
    (equal variances) or Welch's. With 30 runs or more, Welch's one-sided t-test is used directly.
    H0: mean(baseline) <= mean(candidate); H1: mean(baseline) > mean(candidate).
    """

    speedup: float
    statistic: float
    pvalue: float
    test: str             # "welch", "student" or "none"
    significant: bool
    concluded: bool       # False when normality failed on a small sample
    reason: str


@dataclass(frozen=True)
class MedianTest:
    """Speedup of the median: baseline median / candidate median, and whether it is significant.

    One-sided Wilcoxon-Mann-Whitney test, H1: baseline times are stochastically greater. When the
    two samples have the same shape (Kolmogorov-Smirnov on the median-centred samples does not
    reject), the test is read as a test of the medians; otherwise it only says P(X > Y) > 1/2.
    ``pvalue_slower`` is the other one-sided test (H1: candidate times stochastically greater),
    computed as its own test: the statistic is discrete, so it is not 1 - ``pvalue``.
    """

    speedup: float
    statistic: float
    pvalue: float
    significant: bool
    same_shape: bool
    reading: str          # "median" or "P(X > Y) > 1/2"
    pvalue_slower: float = math.nan


@dataclass(frozen=True)
class Interval:
    low: float
    high: float
    confidence: float


@dataclass(frozen=True)
class Spread:
    """Variance (the papers' stability measure), standard deviation and coefficient of variation."""

    n: int
    mean: float
    median: float
    variance: float
    std: float
    cv: float
    minimum: float
    maximum: float


def spread(sample) -> Spread:
    """The variability of one sample of times: mean, median, the unbiased variance
    s^2 = sum_i (x_i - mean)^2 / (n - 1), its square root, CV = s / mean, min and max (the
    stability Mazouz et al. report per policy, section 4)."""
    x = np.asarray(sample, dtype=np.float64)
    variance = float(np.var(x, ddof=1)) if len(x) > 1 else 0.0
    mean = float(np.mean(x))
    return Spread(len(x), mean, float(np.median(x)), variance, math.sqrt(variance),
                  math.sqrt(variance) / mean if mean else math.nan, float(np.min(x)), float(np.max(x)))


def mean_test(baseline, candidate, confidence: float = 0.95) -> MeanTest:
    """The Speedup-Test on the mean (Touati et al. 2013, section 4.1): H0 mean(baseline) <=
    mean(candidate) against the one-sided alternative that the candidate is faster, speedup =
    mean(baseline) / mean(candidate). Below LARGE_SAMPLE runs each sample must pass Shapiro-Wilk
    normality, then an F-test on the variances chooses Student's t (equal) or Welch's t; from
    LARGE_SAMPLE runs on, Welch's t (central limit theorem). No conclusion otherwise."""
    from scipy import stats

    x = np.asarray(baseline, dtype=np.float64)
    y = np.asarray(candidate, dtype=np.float64)
    alpha = risk(confidence)
    speedup = float(np.mean(x) / np.mean(y))
    if len(x) < 2 or len(y) < 2:
        return MeanTest(speedup, math.nan, math.nan, "none", False, False, "fewer than 2 runs")
    if min(len(x), len(y)) < LARGE_SAMPLE:
        normal = all(len(s) >= 3 and np.ptp(s) > 0 and stats.shapiro(s).pvalue > alpha for s in (x, y))
        if not normal:
            return MeanTest(speedup, math.nan, math.nan, "none", False, False,
                            f"fewer than {LARGE_SAMPLE} runs and not normal (Shapiro-Wilk): no conclusion on the mean")
        f = float(np.var(x, ddof=1) / np.var(y, ddof=1))
        p_f = 2 * min(stats.f.cdf(f, len(x) - 1, len(y) - 1), stats.f.sf(f, len(x) - 1, len(y) - 1))
        equal = p_f > alpha
        result = stats.ttest_ind(x, y, equal_var=equal, alternative="greater")
        test = "student" if equal else "welch"
        reason = f"normal samples, {'equal' if equal else 'unequal'} variances (F-test p={p_f:.3g})"
    else:
        result = stats.ttest_ind(x, y, equal_var=False, alternative="greater")
        test, reason = "welch", f"{LARGE_SAMPLE} runs or more"
    pvalue = float(result.pvalue)
    if math.isnan(pvalue):  # two constant samples: equal means give no evidence
        pvalue = 0.0 if np.mean(x) > np.mean(y) and np.ptp(x) == 0 and np.ptp(y) == 0 else 1.0
    return MeanTest(speedup, float(result.statistic), pvalue, test, pvalue < alpha, True, reason)


def median_test(baseline, candidate, confidence: float = 0.95) -> MedianTest:
    """The Speedup-Test on the median (Touati et al. 2013, section 4.2): the one-sided
    Wilcoxon-Mann-Whitney test, U = #{(i, j): baseline_i > candidate_j} (+1/2 per tie), H0 that the
    candidate is not faster; speedup = median(baseline) / median(candidate). It reads as a test of
    medians when both samples have the same shape (Kolmogorov-Smirnov on the centred samples),
    otherwise as P(baseline > candidate) > 1/2. Also the p-value of the opposite side ("slower")."""
    from scipy import stats

    x = np.asarray(baseline, dtype=np.float64)
    y = np.asarray(candidate, dtype=np.float64)
    alpha = risk(confidence)
    speedup = float(np.median(x) / np.median(y))
    # scipy's exact p-value assumes no ties; with ties it takes the normal approximation, which
    # on a few runs goes below the exact test's floor (3 runs against 3 of times printed to 0.1 s:
    # p = 0.036 where no split of 6 runs gives less than 1/20). Those samples get the exact
    # permutation distribution (conditional on the ties) while it is small enough to enumerate.
    exact = {}
    if len(np.unique(np.concatenate([x, y]))) < len(x) + len(y) and math.comb(len(x) + len(y), len(x)) <= EXACT_SPLITS:
        exact = {"method": stats.PermutationMethod(n_resamples=EXACT_SPLITS)}
    result = stats.mannwhitneyu(x, y, alternative="greater", **exact)
    slower = stats.mannwhitneyu(x, y, alternative="less", **exact)
    with warnings.catch_warnings():  # few runs, ties at the medians: scipy falls back to the asymptotic p, as meant
        warnings.filterwarnings("ignore", "ks_2samp: Exact calculation unsuccessful", RuntimeWarning)
        shape = stats.ks_2samp(x - np.median(x), y - np.median(y))
    same_shape = bool(shape.pvalue > alpha)
    return MedianTest(speedup, float(result.statistic), float(result.pvalue), bool(result.pvalue < alpha),
                      same_shape, "median" if same_shape else "P(X > Y) > 1/2", float(slower.pvalue))


def speedup_interval(baseline, candidate, statistic: str = "mean", confidence: float = 0.95,
                     seed: int = 0, resamples: int = 2000) -> Interval:
    """Bootstrap confidence interval (percentile, seeded) of baseline/candidate for the mean or
    the median: both samples resampled independently."""
    from scipy import stats

    x = np.asarray(baseline, dtype=np.float64)
    y = np.asarray(candidate, dtype=np.float64)
    centre = np.mean if statistic == "mean" else np.median

    def ratio(a, b, axis=-1):
        return centre(a, axis=axis) / centre(b, axis=axis)

    if len(x) < 2 or len(y) < 2:
        value = float(ratio(x, y))
        return Interval(value, value, confidence)
    result = stats.bootstrap((x, y), ratio, vectorized=True, paired=False, confidence_level=confidence,
                             n_resamples=resamples, method="percentile", rng=np.random.default_rng(seed))
    return Interval(float(result.confidence_interval.low), float(result.confidence_interval.high), confidence)


def agrees_with_interval(significant: bool, interval: Interval, faster: bool = True) -> bool:
    """The final decision: a one-sided test's rejection stands only when the speedup's interval at
    the same confidence lies wholly on its side of 1 (above 1 for "faster", below for "slower").

    The test (Mann-Whitney or t) and the percentile bootstrap interval can disagree near the
    boundary; reporting "significant" beside an interval that contains 1 would contradict
    itself, so both must agree. The two-sided interval at level 1 - alpha is at least as wide as
    the one-sided test needs, so the combined rule stays at level alpha or stricter.
    """
    if not significant:
        return False
    return interval.low > 1 if faster else interval.high < 1


def format_ratio(value: float, decimals: int = 2) -> str:
    """A speedup or interval bound with ``decimals`` decimals, or as many more as it takes to stay
    on its side of 1: a lower bound of 1.002 printed as "1.00" beside "significant" would read as
    an interval that contains 1."""
    for places in range(decimals, 7):
        text = f"{value:.{places}f}"
        if (float(text) > 1) == (value > 1) and (float(text) < 1) == (value < 1):
            return text
    return repr(value)


def format_interval(interval: Interval) -> str:
    """``[low, high]``, each bound on its own side of 1 (:func:`format_ratio`)."""
    return f"[{format_ratio(interval.low)}, {format_ratio(interval.high)}]"


def format_level(confidence: float) -> str:
    """A confidence level as a percentage with no false precision: 0.95 -> "95%",
    0.991667 -> "99.17%"."""
    text = f"{confidence * 100:.2f}".rstrip("0").rstrip(".")
    return f"{text}%"


#: Iglewicz and Hoaglin's cut-off for the modified z-score.
OUTLIER_Z = 3.5


def outliers(sample) -> int:
    """How many runs are outliers by the modified z-score of Iglewicz and Hoaglin (1993):
    M_i = 0.6745 (x_i - median(x)) / MAD, MAD = median(|x_i - median(x)|); an outlier has
    |M_i| > 3.5. hyperfine warns on the same score. A sample whose MAD is 0 (half the runs or
    more identical) counts every run that differs from the median as an outlier.

    Reference: B. Iglewicz, D. Hoaglin, "How to Detect and Handle Outliers", ASQC 1993.
    """
    x = np.asarray(sample, dtype=np.float64)
    if len(x) < 3:
        return 0
    deviation = np.abs(x - np.median(x))
    mad = float(np.median(deviation))
    if mad == 0:
        return int(np.count_nonzero(deviation))
    return int(np.count_nonzero(0.6745 * deviation / mad > OUTLIER_Z))


def ratio_error(baseline, candidate) -> tuple[float, float]:
    """hyperfine's "X ran r ± e times faster": r = mean(base)/mean(cand), e by error propagation."""
    b, c = spread(baseline), spread(candidate)
    r = b.mean / c.mean
    return r, r * math.sqrt((b.std / b.mean) ** 2 + (c.std / c.mean) ** 2)


@dataclass(frozen=True)
class Overall:
    """Across programs: geometric mean of the speedups, and the share of programs with a
    significant speedup with its binomial (Clopper-Pearson) confidence interval."""

    programs: int
    geometric_mean_speedup: float
    significant: int
    share: float
    share_interval: Interval


def overall(speedups: list[float], significant: list[bool], confidence: float = 0.95) -> Overall:
    """Across programs, as Mazouz et al.'s Tables 1-3: the geometric mean of the speedups,
    (prod_i s_i)^(1/n), and the share of programs significantly faster with its exact
    (Clopper-Pearson) binomial confidence interval (Touati et al. 2013, section 5)."""
    from scipy import stats

    n = len(speedups)
    geo = float(stats.gmean(speedups)) if n else math.nan
    k = int(sum(significant))
    if n:
        ci = stats.binomtest(k, n).proportion_ci(confidence_level=confidence, method="exact")
        interval = Interval(float(ci.low), float(ci.high), confidence)
    else:
        interval = Interval(math.nan, math.nan, confidence)
    return Overall(n, geo, k, k / n if n else math.nan, interval)
