"""Eval pipelines: DAGs of nodes (load tasks, simulate, grade, compare, gate, report, log to W&B)
run concurrently, cached by content and resumable."""
