"""Every default path and value the harness uses, written once. Part of the core layer: it
imports nothing of the harness."""

from __future__ import annotations

from pathlib import Path

STATE_DIR = Path(".harness")
"""Where a project's results, traces and caches live by default."""

RESULTS_STORE = STATE_DIR / "results.db"
TRACE_STORE = STATE_DIR / "traces.db"
RESPONSE_CACHE = STATE_DIR / "cache.db"

STOP_SIGNAL = "###STOP###"
TRANSFER_SIGNAL = "###TRANSFER###"
OUT_OF_SCOPE_SIGNAL = "###OUT-OF-SCOPE###"
STOP_SIGNALS = (STOP_SIGNAL, TRANSFER_SIGNAL, OUT_OF_SCOPE_SIGNAL)
"""Markers a simulated user ends an episode with."""

GATE_CONFIG = Path("ci/gate.yaml")
MAX_ERROR_RATE = 0.05
"""Most share of a run's episodes without evidence before a gate or a comparison decides
nothing (`max_error_rate` of a gate, `--max-error-rate` of compare)."""

GATE_MAX_TRIALS = 8
"""Most trials per task and side the gate plays to decide (`Gate.max_trials`)."""
MIN_JUDGE_SESSIONS = 30
"""Fewest labelled sessions a judge's calibration needs for the gate's kappa rule."""

MODEL_TIMEOUT_S = 60.0
"""Seconds one model call may take before it counts as failed (and is retried)."""
MODEL_RETRIES = 4
"""Retries of a model call that failed in a way worth retrying (429, 5xx, timeouts)."""
CONCURRENCY = 8
"""Episodes simulated (or graded) at once."""
FOLLOW_S = 0.25
"""Seconds between two looks at the store of a `grade` node grading a run's episodes while
they are played: the episodes stored since the last look wait at most this long."""

PIPED_WIDTH = 200
"""Columns of command output that goes to a file or a pipe when $COLUMNS is not set: wide
enough that tables keep ids and rows whole (rich would fall back to 80)."""

YAML_MAX_ALIASES = 10_000
YAML_MAX_ALIAS_VALUES = 200_000
YAML_MAX_ALIAS_TEXT = 10_000_000
"""What aliases may add to one YAML file: uses, values and characters (an alias bomb stops)."""
YAML_MAX_DEPTH = 200
"""Nesting of mappings and sequences in one YAML file."""
YAML_MAX_BYTES = 50_000_000
"""Size of one YAML file, checked before it is read (a 5 MB task is large)."""
MAX_CONCURRENCY = 10_000
"""Episodes simulated (or graded) at once, at most: each is a task in flight."""
MAX_TRIALS = 10_000
"""Episodes per task, at most."""
