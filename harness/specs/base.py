"""Shared base for every YAML-facing model: unknown fields are errors, every field documented."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Spec(BaseModel):
    """A model read from a user's YAML file. Unknown fields are rejected so typos surface."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
