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
    PairedDifference,
    SignFlip,
    bootstrap_interval,
    clustered_difference,
    lattice_scale,
    mcnemar_exact,
    minimum_detectable_effect,
    paired_bootstrap,
    pass_at_k,
    pass_hat_k,
    sign_flip_test,
    suite_pass_at_k,
    suite_pass_hat_k,
    task_wilson_interval,
    wilson_interval,
    win_rate,
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


# bootstrap_interval


def test_bootstrap_counts_tasks_not_trials() -> None:
    # Pooling trials would give 10/11; each task weighs the same, so (1 + 0) / 2.
    result = bootstrap_interval({"many": [T] * 10, "one": [F]})
    assert result == Interval(0.5, 0.0, 1.0)
    # Ten copies of a trial carry no more information than one: the interval does not narrow.
    rates = [0.0, 0.25, 0.5, 1.0, 1.0, 0.75]
    once = {f"t{i}": [r] for i, r in enumerate(rates)}
    ten_times = {f"t{i}": [r] * 10 for i, r in enumerate(rates)}
    assert bootstrap_interval(ten_times) == bootstrap_interval(once)


def test_bootstrap_matches_reference_and_is_reproducible() -> None:
    rng = np.random.default_rng(7)
    outcomes = {
        f"task{i}": list(rng.random(int(rng.integers(1, 8))) < rng.random()) for i in range(30)
    }
    task_means = [sum(trials) / len(trials) for trials in outcomes.values()]
    result = bootstrap_interval(outcomes)
    assert result.estimate == pytest.approx(sum(task_means) / len(task_means))
    assert result.low < result.estimate < result.high
    _, low, high = bootstrap_reference(task_means)
    assert result.low == pytest.approx(low, abs=0.02)
    assert result.high == pytest.approx(high, abs=0.02)
    assert bootstrap_interval(outcomes) == result
    assert bootstrap_interval(outcomes, seed=1) != result
    narrower = bootstrap_interval(outcomes, confidence=0.5)
    assert result.low < narrower.low < narrower.high < result.high


def test_bootstrap_edges() -> None:
    assert bootstrap_interval({f"t{i}": [T, T] for i in range(5)}) == Interval(1.0, 1.0, 1.0)
    assert bootstrap_interval({f"t{i}": [F] for i in range(5)}) == Interval(0.0, 0.0, 0.0)
    assert bootstrap_interval({"only": [T, F, F, F]}) == Interval(0.25, 0.25, 0.25)
    assert bootstrap_interval({}) == Interval(0.0, 0.0, 1.0)
    with pytest.raises(ValueError, match="empty"):
        bootstrap_interval({"ok": [T], "empty": []})
    with pytest.raises(ValueError, match="confidence"):
        bootstrap_interval({"ok": [T]}, confidence=1.0)


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


# win_rate


def test_win_rate_by_hand() -> None:
    # 6 wins, 2 losses, 2 ties: (6 + 2/2) / 10 = 0.7
    result = win_rate(6, 2, 2)
    assert result.estimate == pytest.approx(0.7)
    assert (result.low, result.high) == pytest.approx(wilson_reference(0.7, 10), abs=1e-12)
    # 3 wins, 4 losses, 1 tie: 3.5 / 8, half a win cannot go through binomtest
    result = win_rate(3, 4, 1, confidence=0.9)
    assert result.estimate == pytest.approx(3.5 / 8)
    assert (result.low, result.high) == pytest.approx(wilson_reference(3.5 / 8, 8, 0.9), abs=1e-12)


def test_win_rate_without_ties_is_wilson() -> None:
    result = win_rate(7, 5, 0)
    assert result.estimate == pytest.approx(7 / 12)
    assert (result.low, result.high) == pytest.approx(wilson_interval(7, 12), abs=1e-12)


def test_win_rate_edges() -> None:
    assert win_rate(0, 0, 0) == Interval(0.5, 0.0, 1.0)
    all_ties = win_rate(0, 0, 4)
    assert all_ties.estimate == 0.5
    assert all_ties.low < 0.5 < all_ties.high
    all_wins = win_rate(5, 0, 0)
    assert (all_wins.estimate, all_wins.high) == (1.0, 1.0)
    assert all_wins.low == pytest.approx(wilson_interval(5, 5)[0])
    assert win_rate(0, 5, 0).low == 0.0
    with pytest.raises(ValueError, match="non-negative"):
        win_rate(-1, 2, 0)


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
    assert result.low <= result.difference <= result.high
    empty = clustered_difference({}, {})
    assert (empty.tasks, empty.low, empty.high, empty.test.p_value) == (0, -1.0, 1.0, 1.0)
    with pytest.raises(ValueError, match="only in a: y"):
        clustered_difference({"x": [T], "y": [T]}, {"x": [F]})


def test_lattice_scale_is_the_common_denominator() -> None:
    assert lattice_scale([[T] * 4, [T, F], [F] * 3]) == 12
    assert lattice_scale([]) == 1


def test_minimum_detectable_effect() -> None:
    # (1.96 + 0.84) x SE, and never below the 6 whole tasks a two-sided 0.05 test needs
    assert minimum_detectable_effect(0.04, 400) == pytest.approx(0.04 * 2.8016, abs=1e-4)
    assert minimum_detectable_effect(0.0, 22) == pytest.approx(6 / 22)
    assert minimum_detectable_effect(0.001, 100) == pytest.approx(0.06)
    assert minimum_detectable_effect(0.5, 0) == 1.0


def test_task_wilson_counts_tasks_not_trials() -> None:
    once = {f"t{i}": [i % 3 != 0] for i in range(30)}
    eight = {t: v * 8 for t, v in once.items()}
    assert task_wilson_interval(eight) == task_wilson_interval(once)
    assert (task_wilson_interval(once).low, task_wilson_interval(once).high) == pytest.approx(
        wilson_interval(20, 30), abs=1e-12
    )
    assert task_wilson_interval({}) == Interval(0.0, 0.0, 1.0)
