"""The sim-to-real report: how far a run's simulated users behave like production's real ones.

Both sides are measured with the same functions (`behaviour.measure`): the simulated users in
each stored episode of the run (the task's prior `history` left out; episodes that ended in a
harness `error` are not a user's behaviour and are left out; after an end the user did not
choose, such as the turn limit, an error in the last reply is no abandonment), and the users of
the production sessions the source and filters give.

Per dimension (`FAMILIES`), the two distributions are summarised side by side and compared by
their Kolmogorov-Smirnov distance (the largest gap between their cumulative distributions; for a
yes/no dimension, the gap between the two rates). A dimension with fewer than `MIN_VALUES`
sessions holding a value on either side (reactions exist only where the agent erred) is left out
and named.

The distance between two *samples* is biased up: two samples of the very same users differ by
their noise, so the plug-in distance of a perfect simulator is about 0.9 x sqrt(1/n + 1/m), not
0, and a plug-in index scored a perfect simulator 91-96 depending on the sample sizes. Each
dimension's distance is therefore corrected (`agreement._Correction`): the bootstrap gives the
noise alone, the largest gap between the resampled and the observed difference of the two
distributions, whose mean is what identical users would show at these sample sizes and with this
clustering; that mean is subtracted in full from a distance that noise alone explains and less
and less from one well beyond it (weighted by exp(-(D/s)^2 / 2), s the noise's root mean square,
normalised so that the subtraction's expectation under identical users is the noise's mean). The
corrected distance is unbiased for identical users and for well-separated ones, and in between
errs by at most about half the noise's standard deviation, towards agreement (no estimator of a
distance is unbiased everywhere: its true value 0 is a boundary). A dimension's agreement is 1 -
its corrected distance, and can exceed 1 by noise when the two sides agree.

Production's users are also a mix of populations (the profiles `personas from-traces` mines:
`profiles.populations`), and a simulator can leave one out. Averaged over dimensions, that
barely shows: a population with a fifth of the traffic moves each dimension by at most a fifth,
most dimensions not at all, and a mix that lost its impatient users (who abandon) read 96 beside
the full mix's 101, against production's own three populations. So every session of either side
is put in the population whose information traits are nearest its own (`Populations.assign`:
how it discloses, which is what a persona sets and a simulator plays; the style of an opening is
real users' own), and the *coverage* is 1 - the total variation distance between the
populations' production shares and simulated shares: the share of production's traffic whose
kind of user the simulation plays. Its distance is bias-corrected as a dimension's is (its noise:
how far the resampled difference of the shares moves). The fidelity index is 100 x the coverage
x the mean over the five families of the mean agreement of their dimensions (families, so that
seven style proxies do not outweigh information disclosure): a simulator whose users behave
like production's reads 100 on average at any sample size (a reading a little above 100 is
noise), one that lost a population of a fifth of the traffic loses about a fifth of its index
(and its dimensions' share of it), and `plug_in_index` keeps the uncorrected figure. With one
population the coverage is 1 and the index the mean over families. The shares are what a small
sample estimates worst (20 tasks draw 20 kinds of user): the index is noisier than a mean over
dimensions, and its interval says so.

Its 95% interval is the percentile interval of the corrected index over `BOOTSTRAP` resamples
that draw production sessions and, on the simulated side, tasks with all their episodes (a
task's trials are not independent); it is meant to cover the index of the two populations,
clustered by task. A distance at its boundary makes no bootstrap interval exact, so its
coverage is measured where the truth is known (`bench/fidelity.py`: a simulator identical to
production, a slightly easier and a much easier one, one that lost a population, at several
sample sizes): docs/guide/fidelity.md quotes the figures.

A dimension is *easy mode* when simulation differs from production in the direction that makes
the agent's job easier (`EASIER`: more front-loaded, less asking back, less pushback, fewer
abandons, more accepting or quietly pivoting), the bootstrap interval of the difference of
means lies entirely on that side, and its agreement is below `EASY_AGREEMENT`.

Outcome calibration compares, on the run's tasks made from production traces (their `source`),
the simulated pass rate with the outcome production had for the same sessions (a `success`
task's sessions succeeded, a `failure` task's failed), both weighted by the task's session
count; a positive gap means simulation is more optimistic than production.

The modules: `dimensions` (the families and easy directions), `results` (the report's models),
`agreement` (the comparison and its bootstrap), `run` (a stored run's report).
"""

from harness.fidelity.agreement import BOOTSTRAP, MIN_VALUES, compare_behaviour
from harness.fidelity.dimensions import DIMENSIONS, EASIER, FAMILIES, FAMILY_OF
from harness.fidelity.results import (
    DimensionAgreement,
    Distribution,
    FidelityReport,
    OutcomeCalibration,
    OutcomeRow,
    PopulationShare,
)
from harness.fidelity.run import outcome_calibration, redacted, run_fidelity, simulated_behaviour

__all__ = [
    "BOOTSTRAP",
    "DIMENSIONS",
    "EASIER",
    "FAMILIES",
    "FAMILY_OF",
    "MIN_VALUES",
    "DimensionAgreement",
    "Distribution",
    "FidelityReport",
    "OutcomeCalibration",
    "OutcomeRow",
    "PopulationShare",
    "compare_behaviour",
    "outcome_calibration",
    "redacted",
    "run_fidelity",
    "simulated_behaviour",
]
