"""harness.stats against hand arithmetic and against references computed here without scipy."""

from __future__ import annotations

import math
import subprocess
import sys
from statistics import NormalDist

import numpy as np
import pytest

from harness.stats import (
    Interval,
    McNemar,
    NullLevels,
    PairedDifference,
    SignFlip,
    adjusted_p_values,
    at_most,
    clustered_difference,
    fewest_for_fisher,
    fisher_decline,
    lattice_scale,
    mcnemar_exact,
    minimum_detectable_effect,
    paired_bootstrap,
    pass_at_k,
    pass_hat_k,
    rate_below,
    run_rate,
    sign_flip_test,
    suite_pass_at_k,
    suite_pass_hat_k,
    wilson_interval,
)

T, F = True, False


def wilson_reference(rate: float, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Closed-form Wilson score interval (Wilson 1927), clipped to [0, 1]."""
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    center = (rate + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(rate * (1 - rate) / n + z * z / (4 * n * n))
    return max(0.0, center - half), min(1.0, center + half)


def bootstrap_reference(
    values: list[float], confidence: float = 0.95, resamples: int = 20_000
) -> tuple[np.ndarray, float, float]:
    """Percentile bootstrap of the mean by hand: resampled means and the interval's ends."""
    data = np.asarray(values)
    picks = np.random.default_rng(12345).integers(0, len(data), size=(resamples, len(data)))
    means = data[picks].mean(axis=1)
    alpha = 1 - confidence
    return means, float(np.quantile(means, alpha / 2)), float(np.quantile(means, 1 - alpha / 2))


def test_import_does_not_load_scipy() -> None:
    code = "import sys, harness.stats; assert not {'scipy', 'numpy'} & set(sys.modules)"
    subprocess.run([sys.executable, "-c", code], check=True)


# wilson_interval


def test_wilson_matches_closed_form() -> None:
    assert wilson_interval(3, 10) == pytest.approx(wilson_reference(3 / 10, 10), abs=1e-12)
    assert wilson_interval(3, 10, 0.9) == pytest.approx(wilson_reference(0.3, 10, 0.9), abs=1e-12)


def test_wilson_edges() -> None:
    assert wilson_interval(0, 0) == (0.0, 1.0)
    low, high = wilson_interval(10, 10)
    assert high == 1.0
    assert low == pytest.approx(wilson_reference(1.0, 10)[0])  # 10 / (10 + z^2) = 0.7225...
    assert low == pytest.approx(10 / (10 + 1.959963984540054**2))
    assert wilson_interval(0, 10)[0] == 0.0


# pass@k and pass^k


def test_pass_at_k_by_hand() -> None:
    # n=4, c=2, k=2: 1 - C(2,2)/C(4,2) = 1 - 1/6 = 5/6
    assert pass_at_k(4, 2, 2) == pytest.approx(5 / 6)
    # k=1 is the plain pass rate c/n
    assert pass_at_k(10, 3, 1) == pytest.approx(3 / 10)
    # n=10, c=3, k=5: 1 - C(7,5)/C(10,5) = 1 - 21/252 = 11/12
    assert pass_at_k(10, 3, 5) == pytest.approx(11 / 12)
    assert pass_at_k(5, 0, 3) == 0.0
    assert pass_at_k(5, 5, 3) == 1.0
    assert pass_at_k(5, 3, 3) == 1.0  # only 2 failures, so any 3 trials contain a pass


def test_pass_at_k_matches_chen_product_form() -> None:
    # Chen et al.'s numerically stable form: 1 - prod_{i=n-c+1}^{n} (1 - k/i)
    n, c, k = 200, 37, 10
    reference = 1 - math.prod(1 - k / i for i in range(n - c + 1, n + 1))
    assert pass_at_k(n, c, k) == pytest.approx(reference, rel=1e-12)


def test_pass_hat_k_by_hand() -> None:
    # n=4, c=2, k=2: C(2,2)/C(4,2) = 1/6
    assert pass_hat_k(4, 2, 2) == pytest.approx(1 / 6)
    assert pass_hat_k(10, 3, 1) == pytest.approx(3 / 10)
    # n=8, c=6, k=3: C(6,3)/C(8,3) = 20/56 = (6/8)(5/7)(4/6)
    assert pass_hat_k(8, 6, 3) == pytest.approx(20 / 56)
    assert pass_hat_k(8, 6, 3) == pytest.approx(6 / 8 * 5 / 7 * 4 / 6)
    assert pass_hat_k(5, 2, 3) == 0.0  # fewer passes than k
    assert pass_hat_k(5, 5, 5) == 1.0


@pytest.mark.parametrize("estimator", [pass_at_k, pass_hat_k])
@pytest.mark.parametrize(("n", "c", "k"), [(3, 1, 4), (0, 0, 1), (3, 1, 0), (3, 4, 1), (3, -1, 1)])
def test_counts_out_of_range(estimator, n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError):
        estimator(n, c, k)


def test_suite_averages_over_tasks() -> None:
    outcomes = {"half": [T, T, F, F], "all": [T, T, T, T]}
    # pass^2: (1/6 + 1) / 2 = 7/12; pass@2: (5/6 + 1) / 2 = 11/12
    assert suite_pass_hat_k(outcomes, 2) == pytest.approx(7 / 12)
    assert suite_pass_at_k(outcomes, 2) == pytest.approx(11 / 12)
    # trial counts may differ; each task still weighs 1/2: pass^1 = (2/4 + 1/1) / 2
    assert suite_pass_hat_k({"half": [T, T, F, F], "one": [T]}, 1) == pytest.approx(3 / 4)


@pytest.mark.parametrize("suite", [suite_pass_hat_k, suite_pass_at_k])
def test_suite_edges(suite) -> None:
    assert suite({}, 3) == 0.0
    with pytest.raises(ValueError, match="short"):
        suite({"ok": [T, F, T], "short": [T, T]}, 3)
    with pytest.raises(ValueError, match="empty"):
        suite({"empty": []}, 1)


# run_rate: the one pass rate of a run, clustered by task


def score_reference(rate: float, n: float, critical: float) -> tuple[float, float]:
    """The interval {p : |rate - p| <= critical sqrt(p (1 - p) / n)} by solving its quadratic."""
    c2 = critical**2
    a, b, c = 1 + c2 / n, -(2 * rate + c2 / n), rate**2
    root = math.sqrt(b * b - 4 * a * c)
    return max(0.0, (-b - root) / (2 * a)), min(1.0, (-b + root) / (2 * a))


def test_run_rate_is_clopper_pearson_over_tasks_when_trials_agree() -> None:
    from scipy.stats import binomtest

    once = {f"t{i}": [i % 3 != 0] for i in range(30)}
    eight = {t: v * 8 for t, v in once.items()}
    found = run_rate(once)
    exact = binomtest(20, 30).proportion_ci(0.95, method="exact")
    assert (found.low, found.high) == pytest.approx((exact.low, exact.high), abs=1e-9)
    assert (found.tasks, found.episodes, found.effective_n) == (30, 30, 30.0)
    repeated = run_rate(eight)  # a deterministic agent: eight trials add no tasks
    assert (repeated.estimate, repeated.low, repeated.high) == (
        found.estimate,
        found.low,
        found.high,
    )
    assert repeated.episodes == 240 and repeated.method == found.method


def test_run_rate_weighs_tasks_equally() -> None:
    # Pooling trials would give 10/11; each task weighs the same, so (1 + 0) / 2.
    assert run_rate({"many": [T] * 10, "one": [F]}).estimate == 0.5


def test_run_rate_uses_the_clustered_effective_size_by_hand() -> None:
    from scipy.stats import t as student

    rng = np.random.default_rng(3)
    outcomes = {f"t{i}": list(rng.random(4) < rng.random()) for i in range(20)}
    means = np.array([sum(v) / 4 for v in outcomes.values()])
    rate = means.mean()
    se2 = means.var(ddof=1) / 20
    effective = min(80.0, max(20.0, rate * (1 - rate) / se2))
    found = run_rate(outcomes)
    assert found.estimate == pytest.approx(rate)
    assert found.effective_n == pytest.approx(effective)
    clustered = score_reference(rate, effective, student.ppf(0.975, 19))
    kept = 0.025 ** (1 / 20)  # the missed share: 20 tasks miss 17% of a population entirely
    missed = (rate * kept, 1 - (1 - rate) * kept)
    assert (found.low, found.high) == pytest.approx(
        (min(clustered[0], missed[0]), max(clustered[1], missed[1])), abs=1e-9
    )
    assert found.method == "score interval at the task-clustered effective size, Student t"
    # what counting 80 independent episodes gives is narrower than the clustered interval
    pooled = wilson_interval(int(sum(map(sum, outcomes.values()))), 80)
    assert found.high - found.low > pooled[1] - pooled[0]


def test_run_rate_effective_size_is_between_tasks_and_episodes() -> None:
    # every task passes half its trials: no spread between tasks, so trials count fully
    even = run_rate({f"t{i}": [T, F, T, F] for i in range(10)})
    assert even.effective_n == 40.0
    # tasks far apart: the effective size never falls below the number of tasks
    apart = run_rate({**{f"a{i}": [T, T, T, F] for i in range(5)}, "z": [F, F, F, T]})
    assert apart.effective_n >= 6


def test_run_rate_edges() -> None:
    assert run_rate({}).interval == Interval(0.0, 0.0, 1.0)
    all_pass = run_rate({f"t{i}": [T, T] for i in range(5)})
    assert (all_pass.estimate, all_pass.high) == (1.0, 1.0)
    assert all_pass.low == pytest.approx(0.025 ** (1 / 5))  # Clopper-Pearson: 0.025^(1/n)
    assert run_rate({"t": [F, F]}).low == 0.0
    single = run_rate({"only": [T, F, F, F]})
    assert (single.estimate, single.low, single.high) == (0.25, 0.0, 1.0)  # one task: no spread
    with pytest.raises(ValueError, match="empty"):
        run_rate({"ok": [T], "empty": []})
    with pytest.raises(ValueError, match="confidence"):
        run_rate({"ok": [T]}, confidence=1.0)


def test_run_rate_scores_count_ties_as_half() -> None:
    scores = {"a": [1.0, 0.5], "b": [0.0, 0.5], "c": [1.0, 1.0]}
    found = run_rate(scores)
    assert found.estimate == pytest.approx((0.75 + 0.25 + 1.0) / 3)
    assert found.passed == 4.0 and found.low < found.estimate < found.high


def test_rate_below_is_the_test_the_interval_inverts() -> None:
    from scipy.stats import binom
    from scipy.stats import t as student

    binary = {f"t{i}": [i % 4 != 0] * 3 for i in range(12)}  # 9 of 12 tasks pass
    assert rate_below(binary, 0.9) == pytest.approx(binom.cdf(9, 12, 0.9))
    assert rate_below(binary, run_rate(binary).high) == pytest.approx(0.025, abs=1e-9)
    assert rate_below(binary, run_rate(binary, 0.9).high) == pytest.approx(0.05, abs=1e-9)
    rng = np.random.default_rng(11)
    varied = {f"t{i}": list(rng.random(4) < 0.7) for i in range(25)}
    found = run_rate(varied)
    statistic = (found.estimate - 0.9) / math.sqrt(0.9 * 0.1 / found.effective_n)
    assert rate_below(varied, 0.9) == pytest.approx(student.cdf(statistic, 24))
    # at the interval's upper end the one-sided p is the interval's tail, 2.5%
    assert rate_below(varied, found.high) == pytest.approx(0.025, abs=1e-9)
    assert rate_below(varied, found.estimate) == 1.0  # the interval always holds the rate
    assert rate_below(varied, 0.0) == 1.0
    assert rate_below({"t": [T, F]}, 1.0) == 0.0 and rate_below({"t": [T]}, 1.0) == 1.0
    assert rate_below({"t": [T, F]}, 0.9) == 1.0  # one task: (0, 1) at every confidence
    assert rate_below({}, 0.5) == 1.0


def test_binomial_tail_and_clopper_pearson_hold_for_thousands_of_tasks() -> None:
    from scipy.stats import binom, binomtest

    many = {f"t{i}": [i % 5 != 0] for i in range(1500)}  # 1200 of 1500 pass
    assert rate_below(many, 0.82) == pytest.approx(binom.cdf(1200, 1500, 0.82), rel=1e-9)
    exact = binomtest(1200, 1500).proportion_ci(0.95, method="exact")
    assert (run_rate(many).low, run_rate(many).high) == pytest.approx((exact.low, exact.high))


def near_certain_run() -> dict[str, list[bool]]:
    """20 tasks x 16 trials, one failure in 320 episodes: rare failures the spread hides."""
    return {f"t{i}": [T] * 16 for i in range(19)} | {"weak": [T] * 15 + [F]}


def test_run_rate_with_rare_failures_covers_the_tasks_a_sample_can_miss() -> None:
    runs = near_certain_run()
    found = run_rate(runs)
    rate = 319 / 320
    kept = 0.025 ** (1 / 20)
    # the spread between tasks is tiny (effective size: nearly every episode), yet 20 tasks
    # could have missed 17% of the population, all failing: the interval reaches that far down
    assert found.effective_n > 300
    assert found.low == pytest.approx(rate * kept) and found.low < 0.83
    assert found.estimate < found.high < 1.0
    assert "widened" in found.method
    # a population where 10% of tasks fail half their trials (rate 95%) is not excluded, and
    # the floor test agrees with the interval: 95% is not significantly above the rate
    assert found.low < 0.95 and rate_below(runs, 0.95) == 1.0
    assert rate_below(runs, found.high) == pytest.approx(0.025, abs=1e-9)
    # 20 tasks that all pass every trial: Clopper-Pearson's interval, the same lower end
    perfect = run_rate({f"t{i}": [T] * 16 for i in range(20)})
    assert (perfect.low, perfect.high) == (pytest.approx(kept), 1.0)


def test_missed_share_interval_and_its_p_value() -> None:
    from harness.stats.rates import clopper_pearson, missed_share_interval, missed_share_p

    assert missed_share_interval(1.0, 20) == pytest.approx((0.025 ** (1 / 20), 1.0))
    assert missed_share_interval(0.0, 6, 0.95, -1.0, 1.0) == pytest.approx(
        (-(1 - 0.025 ** (1 / 6)), 1 - 0.025 ** (1 / 6))
    )
    assert missed_share_interval(0.4, 0) == (0.0, 1.0)
    # its upper end is where the p-value is the tail; never wider than Clopper-Pearson
    for n in (1, 6, 20, 57):
        for x in range(n + 1):
            low, high = missed_share_interval(x / n, n)
            exact = clopper_pearson(x, n)
            assert exact[0] <= low + 1e-12 and high <= exact[1] + 1e-12
            if x < n:
                assert missed_share_p(x / n, n, high) == pytest.approx(0.025)
    assert missed_share_p(0.5, 10, 0.5) == 1.0 and missed_share_p(0.5, 10, 1.0) == 0.0
    assert missed_share_p(0.5, 10, 0.75) == pytest.approx(0.5**10)
    assert clopper_pearson(0, 0) == (0.0, 1.0)


# one error rate for several tests


def test_fisher_decline_is_fishers_exact_one_sided_test() -> None:
    from scipy.stats import fisher_exact

    for base, base_n, cand, cand_n in [(3, 3, 0, 3), (2, 3, 1, 3), (3, 3, 2, 3), (1, 3, 0, 3),
                                       (8, 8, 0, 8), (6, 8, 0, 8), (3, 3, 0, 1), (1, 4, 3, 5)]:  # fmt: skip
        p_value, null = fisher_decline(base, base_n, cand, cand_n)
        table = [[cand, cand_n - cand], [base, base_n - base]]
        assert p_value == pytest.approx(fisher_exact(table, alternative="less").pvalue)
        assert p_value in null.levels
    assert fisher_decline(3, 3, 0, 3)[1].levels == pytest.approx((0.05, 0.5, 0.95, 1.0))
    assert fisher_decline(8, 8, 0, 8)[0] == pytest.approx(1 / 12870)


def test_fisher_decline_attains_nothing_on_a_task_every_trial_agreed() -> None:
    """A task that passed (or failed) every trial on both sides takes no share of alpha; a
    fixed task (0/3 -> 3/3) could still have declined by chance, so it takes its 1/20."""
    for same in (fisher_decline(3, 3, 3, 3), fisher_decline(0, 3, 0, 3)):
        assert same == (1.0, NullLevels(levels=(1.0,)))
    p_value, null = fisher_decline(0, 3, 3, 3)
    assert p_value == 1.0 and null.at(0.05) == pytest.approx(0.05)


def test_null_levels_and_adjusted_p_values_by_hand() -> None:
    discrete = NullLevels(levels=(0.05, 0.5, 0.95, 1.0))
    assert (discrete.at(0.04), discrete.at(0.05), discrete.at(0.3)) == (0.0, 0.05, 0.05)
    continuous = NullLevels(continuous_from=2.0**-3)
    assert (continuous.at(0.1), continuous.at(0.2), continuous.minimum) == (0.0, 0.2, 0.125)
    # a regression at 1/20 beside a mean test that cannot go below 1/8: it keeps all of alpha
    assert adjusted_p_values([(0.05, discrete), (0.5, continuous)]) == pytest.approx([0.05, 1.0])
    # beside a test that could reach 0.05 itself, alpha is shared
    other = NullLevels(continuous_from=0.001)
    assert adjusted_p_values([(0.05, discrete), (0.3, other)]) == pytest.approx([0.1, 0.35])
    assert at_most(1 / 20, 0.05) and not at_most(0.0501, 0.05)
    assert fewest_for_fisher(0.05) == 3 and fewest_for_fisher(0.01) == 5  # 1/70 > 0.01 >= 1/252


# mcnemar_exact


def mcnemar_reference(b_only: int, a_only: int) -> float:
    """Two-sided exact binomial test at 1/2 on the discordant pairs, by summing C(n, i)."""
    n = b_only + a_only
    tail = sum(math.comb(n, i) for i in range(min(b_only, a_only) + 1)) / 2**n
    return min(1.0, 2 * tail)


def test_mcnemar_by_hand() -> None:
    # 7 items only b passes, 2 only a passes, 3 both, 4 neither
    a = [F] * 7 + [T] * 2 + [T] * 3 + [F] * 4
    b = [T] * 7 + [F] * 2 + [T] * 3 + [F] * 4
    result = mcnemar_exact(a, b)
    # 2 * (C(9,0) + C(9,1) + C(9,2)) / 2^9 = 2 * 46 / 512
    assert result == McNemar(b_only=7, a_only=2, p_value=pytest.approx(92 / 512))
    assert result.p_value == pytest.approx(mcnemar_reference(7, 2))
    assert mcnemar_exact(b, a) == McNemar(b_only=2, a_only=7, p_value=pytest.approx(92 / 512))


@pytest.mark.parametrize(("b_only", "a_only"), [(1, 0), (10, 0), (5, 5), (3, 12), (20, 31)])
def test_mcnemar_matches_reference(b_only: int, a_only: int) -> None:
    a = [F] * b_only + [T] * a_only + [T, F]
    b = [T] * b_only + [F] * a_only + [T, F]
    assert mcnemar_exact(a, b).p_value == pytest.approx(mcnemar_reference(b_only, a_only))


def test_mcnemar_edges() -> None:
    assert mcnemar_exact([T, F, T], [T, F, T]) == McNemar(0, 0, 1.0)
    assert mcnemar_exact([], []) == McNemar(0, 0, 1.0)
    assert mcnemar_exact([F] * 10, [T] * 10).p_value == pytest.approx(2 / 2**10)
    with pytest.raises(ValueError, match="length"):
        mcnemar_exact([T, F], [T])


# paired_bootstrap


def test_paired_bootstrap_matches_reference() -> None:
    rng = np.random.default_rng(3)
    a = {f"task{i}": list(rng.random(4) < 0.5) for i in range(40)}
    b = {task: list(rng.random(3) < 0.62) for task in a}
    differences = [sum(b[t]) / len(b[t]) - sum(a[t]) / len(a[t]) for t in a]
    result = paired_bootstrap(a, b)
    assert result.difference == pytest.approx(sum(differences) / len(differences))
    assert result.low < result.difference < result.high
    means, low, high = bootstrap_reference(differences)
    assert result.low == pytest.approx(low, abs=0.02)
    assert result.high == pytest.approx(high, abs=0.02)
    reference_p = 2 * min((means <= 0).mean(), (means >= 0).mean())
    assert 0.001 < reference_p < 0.5  # a case where the p-value is neither 0 nor 1
    assert result.p_value == pytest.approx(reference_p, abs=0.02)
    assert paired_bootstrap(a, b) == result
    swapped = paired_bootstrap(b, a)  # b - a turns sign
    assert swapped.difference == pytest.approx(-result.difference)
    assert swapped.p_value == pytest.approx(result.p_value, abs=0.02)


def test_paired_bootstrap_edges() -> None:
    same = {f"t{i}": [T, F] for i in range(10)}
    assert paired_bootstrap(same, same) == PairedDifference(0.0, 0.0, 0.0, 1.0)
    fail = {f"t{i}": [F] for i in range(20)}
    passed = {f"t{i}": [T, T, T] for i in range(20)}
    assert paired_bootstrap(fail, passed, resamples=999) == PairedDifference(
        1.0, 1.0, 1.0, 2 / 1000
    )
    assert paired_bootstrap({}, {}) == PairedDifference(0.0, -1.0, 1.0, 1.0)
    assert paired_bootstrap({"t": [F, F]}, {"t": [T, F]}) == PairedDifference(0.5, 0.5, 0.5, 1.0)
    with pytest.raises(ValueError, match=r"only in a: x; only in b: y, z"):
        paired_bootstrap({"t": [T], "x": [T]}, {"t": [T], "y": [T], "z": [F]})
    with pytest.raises(ValueError, match="empty"):
        paired_bootstrap({"t": [T], "empty": [T]}, {"t": [T], "empty": []})


# task-clustered paired inference


def sign_flip_reference(differences: list[float]) -> tuple[float, float, float]:
    """Every sign pattern enumerated: (two-sided, b worse, b better) p-values."""
    observed = sum(differences)
    sums = [
        sum(d if (pattern >> i) & 1 else -d for i, d in enumerate(differences))
        for pattern in range(2 ** len(differences))
    ]
    n, eps = len(sums), 1e-9
    return (
        sum(abs(x) >= abs(observed) - eps for x in sums) / n,
        sum(x <= observed + eps for x in sums) / n,
        sum(x >= observed - eps for x in sums) / n,
    )


@pytest.mark.parametrize(
    "differences",
    [
        [1, 1, 1, 1, 1],
        [1, -1, 0.5, 0.25, -0.25, 0.75, 1, 0],
        [-0.5, -0.5, -1, 0.5, -0.25, -1, -0.75, 0.25, -1, -1, 0.5, -0.5],
        [1 / 3, 2 / 3, -1 / 3, 1, 1, -2 / 3, 1 / 3],
    ],
)
def test_sign_flip_is_exact_on_the_lattice(differences: list[float]) -> None:
    scale = 12  # multiples of 1/4 and of 1/3
    result = sign_flip_test(np.array(differences, dtype=float), scale)
    two, less, greater = sign_flip_reference([d for d in differences if d])
    assert result.exact
    assert (result.p_value, result.p_less, result.p_greater) == pytest.approx((two, less, greater))


def test_sign_flip_off_the_lattice_samples_patterns() -> None:
    rng = np.random.default_rng(5)
    differences = rng.normal(0.2, 0.5, 14)
    sampled = sign_flip_test(differences)  # scale 1: not on the lattice, so sampled
    assert not sampled.exact
    two, less, greater = sign_flip_reference(list(differences))
    assert sampled.p_value == pytest.approx(two, abs=0.01)
    assert sampled.p_less == pytest.approx(less, abs=0.01)
    assert sampled.p_greater == pytest.approx(greater, abs=0.01)
    assert sign_flip_test(np.zeros(7)) == SignFlip(1.0, 1.0, 1.0, True)
    # m tasks all one way: p = 2^-m one-sided, so five tasks are the fewest that can reject
    assert sign_flip_test(-np.ones(5)).p_less == pytest.approx(1 / 32)
    assert sign_flip_test(-np.ones(4)).p_less == pytest.approx(1 / 16)


def test_repeated_trials_of_a_deterministic_agent_add_no_evidence() -> None:
    """The issue's case: two tasks flip, every trial repeats. McNemar's p falls with the number
    of repeats; the task-level test and interval do not move."""
    tasks = [f"t{i}" for i in range(22)]
    a_once = {t: [i not in (3, 7) and i % 5 != 0] for i, t in enumerate(tasks)}
    b_once = {t: [i % 5 != 0] for i, t in enumerate(tasks)}
    results, mcnemar = [], []
    for trials in (1, 3, 6):
        a = {t: v * trials for t, v in a_once.items()}
        b = {t: v * trials for t, v in b_once.items()}
        results.append(clustered_difference(a, b))
        flat_a = [o for t in tasks for o in a[t]]
        flat_b = [o for t in tasks for o in b[t]]
        mcnemar.append(mcnemar_exact(flat_a, flat_b).p_value)
    assert results[0] == results[1] == results[2]
    assert results[0].test.p_value == 0.5 and (results[0].better, results[0].worse) == (2, 0)
    assert mcnemar == pytest.approx([0.5, 1 / 32, 1 / 2048])


def test_clustered_difference_by_hand() -> None:
    from scipy.stats import t as student

    a = {"x": [T, T], "y": [F, F], "z": [T, F], "w": [F, T]}
    b = {"x": [T, F], "y": [T, T], "z": [T, T], "w": [F, T]}
    result = clustered_difference(a, b)
    differences = [-0.5, 1.0, 0.5, 0.0]
    assert result.difference == pytest.approx(sum(differences) / 4)
    assert result.se == pytest.approx(np.std(differences, ddof=1) / 2)
    assert (result.better, result.worse, result.tasks) == (2, 1, 4)
    two, less, greater = sign_flip_reference([-0.5, 1.0, 0.5])
    assert (result.test.p_value, result.test.p_less) == pytest.approx((two, less))
    assert result.test.p_greater == pytest.approx(greater) and result.test.exact
    # the score interval on the range the differences span (-0.5 to 1), at the effective size
    # n (mean - min)(max - mean) / s^2, kept at least the 4 tasks; the missed share on [-1, 1]
    effective = max(4.0, 4 * 0.75 * 0.75 / np.var(differences, ddof=1))
    spread = score_reference(0.5, effective, student.ppf(0.975, 3))
    kept = 0.025 ** (1 / 4)
    missed = (-1 + 1.25 * kept, 1 - 0.75 * kept)
    assert (result.low, result.high) == pytest.approx(
        (min(-0.5 + 1.5 * spread[0], missed[0]), max(-0.5 + 1.5 * spread[1], missed[1]))
    )
    assert result.low <= result.difference <= result.high
    empty = clustered_difference({}, {})
    assert (empty.tasks, empty.low, empty.high, empty.test.p_value) == (0, -1.0, 1.0, 1.0)
    with pytest.raises(ValueError, match="only in a: y"):
        clustered_difference({"x": [T], "y": [T]}, {"x": [F]})


def test_six_tasks_none_broken_leave_a_break_open() -> None:
    """The issue's case: no task of 6 changed, so the sample shows no difference, but a new
    sample could hold a broken task: 6 tasks miss 46% of a population entirely."""
    same = {f"t{i}": [i % 2 == 0] * 3 for i in range(6)}
    found = clustered_difference(same, same)
    share = 1 - 0.025 ** (1 / 6)
    assert (found.difference, found.se) == (0.0, 0.0)
    assert (found.low, found.high) == pytest.approx((-share, share))
    assert found.high - found.low > 0.9  # never "+0.0% to +0.0%"
    assert found.method == "the share of tasks a sample of this size can miss"
    assert found.test.p_value == 1.0
    # flaky trials that cancel out: the spread (within -1/3 to 1/3) is inside the missed share
    flaky = same | {"t0": [T, F, T], "t1": [F, T, F]}
    noisy = clustered_difference(same, flaky)
    assert noisy.difference == pytest.approx(0.0, abs=1e-12) and noisy.se > 0
    assert (noisy.low, noisy.high) == pytest.approx((-share, share))
    # twice the tasks, none changed: the open share shrinks with the number of tasks
    twelve = {f"t{i}": [T] * 3 for i in range(12)}
    assert clustered_difference(twelve, twelve).high == pytest.approx(1 - 0.025 ** (1 / 12))


def test_a_deterministic_break_is_wilson_over_tasks() -> None:
    """2 of 20 tasks went from passing every trial to failing every trial, the rest agree:
    the differences are two values (0, -1), and the interval below is Wilson's over tasks on
    that range (Student's t), above it the share of tasks 20 could miss."""
    from scipy.stats import t as student

    a = {f"t{i}": [T] * 3 for i in range(20)}
    b = a | {"t0": [F] * 3, "t1": [F] * 3}
    found = clustered_difference(a, b)
    assert found.difference == pytest.approx(-0.1) and (found.worse, found.better) == (2, 0)
    below = score_reference(0.9, 20, student.ppf(0.975, 19))[0]
    assert found.low == pytest.approx(-1 + below)
    assert found.high == pytest.approx(1 - 1.1 * 0.025 ** (1 / 20))
    assert "widened" in found.method
    # the same break seen over 1, 3 or 8 trials: the same interval (trials add no tasks)
    once = clustered_difference({t: v[:1] for t, v in a.items()}, {t: v[:1] for t, v in b.items()})
    assert (once.low, once.high) == (found.low, found.high)


def test_lattice_scale_is_the_common_denominator() -> None:
    assert lattice_scale([[T] * 4, [T, F], [F] * 3]) == 12
    assert lattice_scale([]) == 1


def test_minimum_detectable_effect() -> None:
    # (1.96 + 0.84) x SE, and never below 6 tasks (a two-sided 0.05 test needs 6) moving by one
    # step of the trial lattice
    assert minimum_detectable_effect(0.04, 400) == pytest.approx(0.04 * 2.8016, abs=1e-4)
    assert minimum_detectable_effect(0.0, 22) == pytest.approx(6 / 22)
    assert minimum_detectable_effect(0.001, 100) == pytest.approx(0.06)
    assert minimum_detectable_effect(0.0, 30, scale=4) == pytest.approx(6 / 120)
    assert minimum_detectable_effect(0.5, 0) == 1.0
