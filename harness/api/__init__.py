"""The library API: what `import harness` gives, and what the pipeline's nodes, the commands,
the climb and the benches are built on.

    suite = harness.load_suite("tasks/support", tags=["smoke"])
    agent = harness.load_agent("agents/support-baseline.yaml", overrides=["model=..."])
    run = harness.evaluate(suite, agent, trials=3, store=".harness/results.db")
    run = harness.evaluate("tasks/support", "agents/support-careful.yaml")  # paths work too
    run.pass_rate, run.interval, run.episodes, run.to_pandas()
    ab = harness.compare(run_a, run_b)
    decision = harness.gate(candidate, baseline, config="ci/gate.yaml")

Each thing is loaded once and passed down; results are typed objects (with `_repr_html_` for
notebooks) that reach everything a command prints. `docs/api.md` has the whole surface.

Every function checks its options with the pydantic model the matching command checks them
with (`harness.options`: `EvalOptions`, `SelectionOptions`, ...) before it plays or writes
anything; a bad one is `BadOptions`, a `ValueError` naming the option and what was expected
(and a `TypeError` too for an argument of the wrong kind: a suite that is neither a `Suite` nor
paths, a run that is neither a `RunResult` nor a run id).
"""

from harness.api.agent import Agent, load_agent
from harness.api.decide import compare
from harness.api.evaluate import evaluate, evaluate_async, open_runtime, run_sync
from harness.api.gate import gate
from harness.api.results import Episode, RunResult
from harness.api.suite import Suite, load_suite
from harness.options import (
    BadOptions,
    CompareOptions,
    EvalOptions,
    GateOptions,
    RuntimeOptions,
    SelectionOptions,
)

__all__ = [
    "Agent",
    "BadOptions",
    "CompareOptions",
    "Episode",
    "EvalOptions",
    "GateOptions",
    "RunResult",
    "RuntimeOptions",
    "SelectionOptions",
    "Suite",
    "compare",
    "evaluate",
    "evaluate_async",
    "gate",
    "load_agent",
    "load_suite",
    "open_runtime",
    "run_sync",
]
