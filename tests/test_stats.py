"""Capability 7: the Speedup-Test statistics, against hand formulas and known distributions."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from pinwise import stats


def welch_by_hand(x, y):
    """Welch's t and Welch-Satterthwaite degrees of freedom, written out."""
    vx, vy = np.var(x, ddof=1) / len(x), np.var(y, ddof=1) / len(y)
    t = (np.mean(x) - np.mean(y)) / math.sqrt(vx + vy)
    df = (vx + vy) ** 2 / (vx ** 2 / (len(x) - 1) + vy ** 2 / (len(y) - 1))
    return t, df


def test_welch_one_sided_matches_the_formula():
    rng = np.random.default_rng(3)
    x, y = rng.normal(10.5, 1.0, 40), rng.normal(10.0, 2.0, 35)
    result = stats.mean_test(x, y)
    t, df = welch_by_hand(x, y)
    assert result.test == "welch" and result.concluded
    assert result.statistic == pytest.approx(t)
    assert result.pvalue == pytest.approx(sps.t.sf(t, df))
    assert result.speedup == pytest.approx(np.mean(x) / np.mean(y))


def test_student_when_small_normal_samples_have_equal_variances():
    rng = np.random.default_rng(4)
    x, y = rng.normal(11.0, 1.0, 20), rng.normal(10.0, 1.0, 20)
    result = stats.mean_test(x, y)
    assert result.test == "student"
    pooled = ((len(x) - 1) * np.var(x, ddof=1) + (len(y) - 1) * np.var(y, ddof=1)) / (len(x) + len(y) - 2)
    t = (np.mean(x) - np.mean(y)) / math.sqrt(pooled * (1 / len(x) + 1 / len(y)))
    assert result.statistic == pytest.approx(t)
    assert result.pvalue == pytest.approx(sps.t.sf(t, len(x) + len(y) - 2))


def test_welch_when_small_normal_samples_have_different_variances():
    rng = np.random.default_rng(5)
    result = stats.mean_test(rng.normal(11.0, 0.2, 20), rng.normal(10.0, 3.0, 20))
    assert result.test == "welch" and result.concluded


def test_no_conclusion_on_small_non_normal_samples():
    rng = np.random.default_rng(6)
    x = np.concatenate([rng.exponential(1.0, 15) + 10, [40.0, 45.0]])
    result = stats.mean_test(x, rng.normal(10.0, 0.1, 17))
    assert not result.concluded and not result.significant and "no conclusion" in result.reason


def test_mann_whitney_statistic_and_exact_pvalue_by_counting():
    """U counts the pairs where the baseline is slower; with no ties and small samples the one-sided
    p-value is the share of all rank assignments whose U is at least as large (enumerated here)."""
    import itertools

    x = np.array([5.1, 4.9, 6.2, 5.7, 6.0, 5.5])
    y = np.array([4.1, 4.6, 5.0, 4.4, 4.0])
    u = sum(1.0 if a > b else 0.5 if a == b else 0.0 for a in x for b in y)
    result = stats.median_test(x, y)
    assert result.statistic == u == 29
    ranks = range(len(x) + len(y))
    at_least = total = 0
    for x_ranks in itertools.combinations(ranks, len(x)):
        others = [r for r in ranks if r not in x_ranks]
        total += 1
        at_least += sum(a > b for a in x_ranks for b in others) >= u
    assert result.pvalue == pytest.approx(at_least / total)
    assert result.speedup == pytest.approx(np.median(x) / np.median(y))


def test_shape_check_decides_how_the_median_test_reads():
    rng = np.random.default_rng(8)
    same = stats.median_test(rng.normal(11, 1, 60), rng.normal(10, 1, 60))
    assert same.same_shape and same.reading == "median"
    other = stats.median_test(rng.exponential(1.0, 200) + 10, rng.normal(10, 0.05, 200))
    assert not other.same_shape and other.reading == "P(X > Y) > 1/2"


def test_a_real_ten_percent_speedup_is_detected_at_35_runs():
    detected = 0
    for seed in range(20):
        rng = np.random.default_rng(seed)
        base, fast = rng.normal(1.10, 0.05, 35), rng.normal(1.00, 0.05, 35)
        mean, median = stats.mean_test(base, fast), stats.median_test(base, fast)
        detected += mean.significant and median.significant
    assert detected == 20


def test_identical_distributions_give_false_positives_at_the_chosen_risk_only():
    positives_mean = positives_median = 0
    trials = 300
    for seed in range(trials):
        rng = np.random.default_rng(1000 + seed)
        a, b = rng.normal(1.0, 0.05, 35), rng.normal(1.0, 0.05, 35)
        positives_mean += stats.mean_test(a, b, 0.95).significant
        positives_median += stats.median_test(a, b, 0.95).significant
    # Under H0 the count is Binomial(300, 0.05): more than 25 would happen with probability < 1%.
    assert positives_mean <= 25 and positives_median <= 25
    assert sps.binomtest(positives_mean, trials, 0.05, alternative="greater").pvalue > 0.01


def test_bootstrap_interval_is_seeded_and_covers_the_estimate():
    rng = np.random.default_rng(9)
    base, fast = rng.normal(2.0, 0.1, 35), rng.normal(1.0, 0.05, 35)
    first = stats.speedup_interval(base, fast, "median", seed=1)
    again = stats.speedup_interval(base, fast, "median", seed=1)
    assert first == again
    assert first.low < np.median(base) / np.median(fast) < first.high
    assert 1.8 < first.low and first.high < 2.2


def test_spread_and_hyperfine_ratio():
    s = stats.spread([1.0, 2.0, 3.0, 4.0])
    assert (s.mean, s.median, s.variance) == (2.5, 2.5, pytest.approx(5 / 3))
    assert s.cv == pytest.approx(math.sqrt(5 / 3) / 2.5)
    ratio, error = stats.ratio_error([2.0, 2.2, 1.8], [1.0, 1.1, 0.9])
    assert ratio == pytest.approx(2.0)
    assert error == pytest.approx(2.0 * math.sqrt(2 * (0.2 / 2.0) ** 2))


def test_overall_speedup_and_share_interval():
    result = stats.overall([1.2, 1.5, 0.9, 1.0], [True, True, False, False])
    assert result.geometric_mean_speedup == pytest.approx((1.2 * 1.5 * 0.9 * 1.0) ** 0.25)
    assert result.significant == 2 and result.share == 0.5
    # Clopper-Pearson for 2 of 4: beta quantiles.
    assert result.share_interval.low == pytest.approx(sps.beta.ppf(0.025, 2, 3))
    assert result.share_interval.high == pytest.approx(sps.beta.ppf(0.975, 3, 2))


def test_slower_is_its_own_one_sided_test():
    """With 3 runs each, Mann-Whitney's smallest one-sided p is 1/20 = 0.05 either way: a
    candidate slower on every run is still not significantly slower at 95%. (1 - p of the
    "faster" test would say p = 0: the statistic is discrete.)"""
    base, slow = [1.00, 1.01, 1.02], [1.10, 1.11, 1.12]
    test = stats.median_test(base, slow)
    assert test.pvalue == pytest.approx(1.0) and test.pvalue_slower == pytest.approx(0.05)
    assert stats.median_test(base * 4, slow * 4).pvalue_slower < 0.05


def test_an_exact_p_of_alpha_is_not_below_alpha():
    """3 runs against 3, every candidate run faster: Mann-Whitney's exact p is 1/20 = 0.05, which
    must not count as significant at 95% (1 - 0.95 is 0.05000000000000004 in floating point)."""
    test = stats.median_test([1.10, 1.11, 1.12], [1.00, 1.01, 1.02], confidence=0.95)
    assert test.pvalue == 0.05 and not test.significant
    assert stats.median_test([1.10, 1.11, 1.12, 1.13], [1.00, 1.01, 1.02, 1.03]).significant  # p = 1/70


def test_interval_bounds_are_printed_on_their_side_of_one():
    assert stats.format_ratio(1.002) == "1.002" and stats.format_ratio(0.9996) == "0.9996"
    assert stats.format_ratio(1.2345) == "1.23" and stats.format_ratio(1.0) == "1.00"
    assert stats.format_interval(stats.Interval(1.0004, 1.06, 0.95)) == "[1.0004, 1.06]"


def test_tied_runs_get_the_exact_test_not_an_approximation_below_its_floor():
    """Times printed to 0.1 s tie: 3 runs against 3, every candidate run faster. No split of 6
    runs gives a p below 1/20, but scipy's normal approximation (which it takes whenever runs
    tie) gave 0.036 and a "faster" at 95 %. The exact permutation p, counted here over the 20
    splits as the statistic sees them, is 0.05: not significant, on either side."""
    import itertools

    x, y = np.array([3.0, 3.0, 3.1]), np.array([1.0, 1.0, 1.1])
    assert sps.mannwhitneyu(x, y, alternative="greater").pvalue < 0.05  # the approximation it replaces
    test = stats.median_test(x, y)
    runs = np.concatenate([x, y])

    def u(first):
        rest = [runs[k] for k in range(6) if k not in first]
        return sum(1.0 if runs[a] > b else 0.5 if runs[a] == b else 0.0 for a in first for b in rest)

    splits = list(itertools.combinations(range(6), 3))
    assert test.pvalue == pytest.approx(sum(u(s) >= u((0, 1, 2)) for s in splits) / len(splits)) == 0.05
    assert not test.significant and not stats.median_test(y, x).significant
    assert stats.median_test(y, x).pvalue_slower == pytest.approx(0.05)
