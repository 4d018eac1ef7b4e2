"""Statistics for pass rates: every rate the harness prints comes with an interval from here.

Conventions, so that callers can rely on them:
- Outcomes of a suite are `{task id: [trial outcome, ...]}`; trial outcomes are booleans or scores
  in [0, 1]. Tasks are weighted equally (a task's rate is the mean over its trials), and bootstrap
  intervals resample tasks, not trials: the trials of one task are correlated, and counting them
  as independent would make intervals too narrow.
- A run's pass rate is `run_rate`: the mean of per-task rates with an interval clustered by
  task. Every printer of a run (terminal, JSON, Markdown, HTML, W&B, baselines, gate history)
  reads it, so one run shows one rate.
- No data never crashes and never gives NaN: each function documents what it returns instead.
- scipy and numpy are imported inside the functions, so that `import harness.stats` stays fast.
- Decisions between two variants use `clustered_difference` (or `sign_flip_test`): the unit is
  the task, so repeating trials of a deterministic agent cannot make a difference "significant".
  `mcnemar_exact` treats every (task, trial) pair as independent and decides nothing.
- Rules that decide together share one error rate through `adjusted_p_values` (family.py).
"""

from harness.stats.family import (
    NullLevels,
    adjusted_p_values,
    at_most,
    fewest_for_fisher,
    fisher_decline,
)
from harness.stats.paired import (
    ClusteredDifference,
    McNemar,
    PairedDifference,
    SignFlip,
    clustered_difference,
    lattice_scale,
    mcnemar_exact,
    minimum_detectable_effect,
    paired_bootstrap,
    sign_flip_test,
    task_differences,
)
from harness.stats.rates import (
    Interval,
    Outcomes,
    RunRate,
    binomial_cdf,
    pass_at_k,
    pass_hat_k,
    rate_below,
    run_rate,
    suite_pass_at_k,
    suite_pass_hat_k,
    wilson_interval,
)

__all__ = [
    "ClusteredDifference",
    "Interval",
    "McNemar",
    "NullLevels",
    "Outcomes",
    "PairedDifference",
    "RunRate",
    "SignFlip",
    "adjusted_p_values",
    "at_most",
    "binomial_cdf",
    "clustered_difference",
    "fewest_for_fisher",
    "fisher_decline",
    "lattice_scale",
    "mcnemar_exact",
    "minimum_detectable_effect",
    "paired_bootstrap",
    "pass_at_k",
    "pass_hat_k",
    "rate_below",
    "run_rate",
    "sign_flip_test",
    "suite_pass_at_k",
    "suite_pass_hat_k",
    "task_differences",
    "wilson_interval",
]
