"""A DAG eval pipeline: nodes with a kind, parameters and the nodes whose outputs they take."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from harness.specs.base import Spec


class Node(Spec):
    """One step of a pipeline."""

    uses: str = Field(description="Node kind from the registry, e.g. load_tasks, simulate, grade.")
    with_: dict[str, Any] = Field(
        default_factory=dict, alias="with", description="Parameters of the node kind."
    )
    needs: list[str] = Field(default_factory=list, description="Nodes whose outputs it takes.")


class Dag(Spec):
    """An eval pipeline as a graph of nodes."""

    kind: Literal["dag"] = Field(description="File kind.")
    name: str = Field(description="Pipeline name.")
    description: str = Field(default="", description="What the pipeline is for.")
    nodes: dict[str, Node] = Field(min_length=1, description="Nodes by id.")

    @field_validator("nodes")
    @classmethod
    def _needs_exist(cls, nodes: dict[str, Node]) -> dict[str, Node]:
        for node_id, node in nodes.items():
            for need in node.needs:
                if need not in nodes:
                    raise ValueError(f"node '{node_id}' needs unknown node '{need}'")
        return nodes
