"""Where a W&B run goes: shared by the `log_wandb` node and `harness climb`."""

from __future__ import annotations

import os
from typing import Literal

from pydantic import Field

from harness.defaults import STATE_DIR
from harness.specs.base import Spec


class WandbTarget(Spec):
    """A W&B project and mode; offline by default (a local run directory, synced later with
    `wandb sync`)."""

    project: str = Field(default="harness", description="W&B project.")
    entity: str | None = Field(default=None, description="W&B entity (team or user).")
    mode: Literal["offline", "online", "disabled"] | None = Field(
        default=None, description="Default: $WANDB_MODE, else offline."
    )
    dir: str = Field(
        default=str(STATE_DIR), description="Where the local run directory is written."
    )

    def resolved_mode(self) -> str:
        """The mode a run takes: this target's, else $WANDB_MODE, else offline."""
        mode = self.mode or os.environ.get("WANDB_MODE") or "offline"
        return "offline" if mode == "dryrun" else mode
