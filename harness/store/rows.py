"""The results store's records (runs, episodes, pipelines) and the rows they are read from."""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from harness.grading.result import Verdict
from harness.secrets import redact
from harness.transcript import Usage

if TYPE_CHECKING:
    from harness.store.database import Database, Row


# What the harness computed itself, stored as it is: a mask would corrupt a hex digest (16 hex
# digits may be 16 decimal ones that pass for a card number, and a gate would then find the task
# "changed"), and a digest holds nothing of anyone's. A run's `suite` (task id -> content hash)
# and a node output's hashes; a value that is not made of hex digests is redacted all the same.
DIGESTS = frozenset({"suite", "task_hashes", "content_hash", "variant_hash"})
_HEX = re.compile(r"[0-9a-f]+")


def stored_json(value: Mapping[str, Any]) -> str:
    """`value` as JSON for the store (keys sorted), redacted (`harness.secrets.redact`) but for
    the digests of `DIGESTS` at its top level."""
    kept = {key: value[key] for key in DIGESTS.intersection(value) if _digests(value[key])}
    text = redact(json.dumps({k: v for k, v in value.items() if k not in kept}, sort_keys=True))
    return json.dumps({**json.loads(text), **kept}, sort_keys=True) if kept else text


def _digests(value: Any) -> bool:
    """A hex digest, or a mapping of names to hex digests."""
    if isinstance(value, Mapping):
        return all(isinstance(v, str) and _HEX.fullmatch(v) for v in value.values())
    return isinstance(value, str) and _HEX.fullmatch(value) is not None


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def new_id(prefix: str = "") -> str:
    """A time-ordered unique id."""
    return prefix + datetime.now(UTC).strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(3)


@dataclass
class RunInfo:
    """A stored run's header."""

    id: str
    created_at: str
    variant: str
    variant_hash: str
    config: dict[str, Any]
    status: str
    node_key: str | None = None
    pipeline_id: str | None = None


@dataclass
class EpisodeRow:
    """One stored episode as summaries need it."""

    task_id: str
    trial: int
    end_reason: str
    turns: int
    usage: Usage
    user_usage: Usage
    duration_s: float
    verdict: Verdict | None

    @property
    def judge_usage(self) -> Usage:
        """The judge calls that graded the episode (its newest verdict)."""
        return self.verdict.judge_usage() if self.verdict else Usage()

    @property
    def spend(self) -> Usage:
        """Every model call the episode cost: agent, simulated user and judge."""
        total = Usage()
        for part in (self.usage, self.user_usage, self.judge_usage):
            total.add(part)
        return total


@dataclass
class PipelineInfo:
    """A stored pipeline execution: its resolved configuration and what each node did."""

    id: str
    name: str
    created_at: str
    status: str
    config: dict[str, Any]
    nodes: dict[str, Any]


def insert_run(
    db: Database,
    variant: str,
    variant_hash: str,
    config: dict[str, Any],
    node_key: str | None,
    pipeline_id: str | None,
) -> str:
    run_id = new_id()
    db.execute(
        "INSERT INTO runs (id, created_at, variant, variant_hash, config, status,"
        " node_key, pipeline_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            run_id,
            now(),
            variant,
            variant_hash,
            stored_json(config),
            "running",
            node_key,
            pipeline_id,
        ),
    )
    return run_id


def run_info(row: Row) -> RunInfo:
    return RunInfo(
        id=row["id"],
        created_at=row["created_at"],
        variant=row["variant"],
        variant_hash=row["variant_hash"],
        config=json.loads(row["config"]),
        status=row["status"],
        node_key=row["node_key"],
        pipeline_id=row["pipeline_id"],
    )


def pipeline_info(row: Row) -> PipelineInfo:
    return PipelineInfo(
        id=row["id"],
        name=row["name"],
        created_at=row["created_at"],
        status=row["status"],
        config=json.loads(row["config"]),
        nodes=json.loads(row["nodes"]),
    )
