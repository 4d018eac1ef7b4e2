"""A DAG eval pipeline: nodes with a kind, parameters and the nodes whose outputs they take."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from harness.specs.base import Spec


class Node(Spec):
    """One step of a pipeline."""

    uses: str = Field(description="Node kind from the registry, e.g. load_tasks, simulate, grade.")
    with_: dict[str, Any] = Field(
        default_factory=dict, alias="with", description="Parameters of the node kind."
    )
    needs: list[str] = Field(default_factory=list, description="Nodes whose outputs it takes.")


class Dag(Spec):
    """An eval pipeline as a graph of nodes. Node kinds, parameters, references, cycles and the
    types wired between nodes are checked by `harness.pipeline.dag.plan` before anything runs.
    Paths in parameters are relative to the working folder, as on the command line."""

    kind: Literal["dag"] = Field(description="File kind.")
    name: str = Field(description="Pipeline name.")
    description: str = Field(default="", description="What the pipeline is for.")
    nodes: dict[str, Node] = Field(min_length=1, description="Nodes by id.")
