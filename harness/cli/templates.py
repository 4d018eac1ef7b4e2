"""The pipelines the flag forms of `run-eval` and `compare` stand for: built in
`harness.pipeline.templates`, named here for the commands."""

from harness.pipeline.templates import (
    COMPARE_SHORTCUTS,
    RUN_EVAL_SHORTCUTS,
    compare_dag,
    flags_dag,
)

__all__ = ["COMPARE_SHORTCUTS", "RUN_EVAL_SHORTCUTS", "compare_dag", "flags_dag"]
