"""`seed_env`: start every task from a production data file (a SQLite snapshot or JSON)."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path
from typing import Any

from pydantic import Field

from harness.pipeline.nodes import NodeContext, NodeKind, file_digest, register
from harness.pipeline.types import Tasks
from harness.sim.env import read_snapshot
from harness.specs.base import Spec
from harness.specs.located import Location, SpecError
from harness.specs.overrides import deep_merge
from harness.specs.references import read_json
from harness.specs.validation import validate


class SeedEnvParams(Spec):
    """Which data the environments start from."""

    data: str = Field(description="A SQLite snapshot (.sqlite, .db) or a JSON state file.")
    replace: bool = Field(
        default=False,
        description="Start from the data alone instead of merging it over each task's state.",
    )


def read_data(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise SpecError.at(Location(str(path)), "", "file not found")
    return read_json(path) if path.suffix == ".json" else read_snapshot(path)


async def run(params: SeedEnvParams, inputs: list[Any], ctx: NodeContext) -> Tasks:
    [tasks] = inputs
    data = read_data(Path(params.data))
    seeded = []
    for case in tasks.cases:
        state = data if params.replace else deep_merge(case.state, data)
        if case.domain.State is not None:  # the state is what the model says: defaults applied
            model = validate(case.domain.State, state, {}, Path(params.data))
            state = model.model_dump(mode="json", by_alias=True)
        seeded.append(dataclasses.replace(case, state=state))
    digest = hashlib.sha256(
        f"{tasks.content_hash}:{file_digest(params.data)}:{params.replace}".encode()
    ).hexdigest()
    source = {**tasks.source, "seed_env": params.model_dump(mode="json")}
    return Tasks(task_ids=tasks.task_ids, content_hash=digest, source=source).with_cases(seeded)


register(
    NodeKind(
        "seed_env",
        SeedEnvParams,
        ((Tasks,),),
        Tasks,
        run,
        always_run=True,
        files=("data",),
    )
)
