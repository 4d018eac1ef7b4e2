"""No sandbox, no checker code. A python check's code runs only under OS isolation (bubblewrap,
or Docker where an engine answers). Where there is neither, a run whose graded tasks have python
checks stops before it plays or writes anything, unless the user allowed checker code to run
without isolation (`--unsafe-checkers`, a grade node's `sandbox: none`, `HARNESS_SANDBOX=none`):
every check would otherwise end as an error, or run code that can reach the harness's secrets."""

from __future__ import annotations

from harness.grading.requirements import missing_isolation
from harness.grading.sandbox import isolation_problem
from harness.pipeline.dag import Plan, PlannedNode
from harness.pipeline.judges import task_sources
from harness.specs.located import Location, SpecError

__all__ = ["missing_isolation", "require_isolation"]


def require_isolation(pipeline: Plan, unsafe: bool = False) -> None:
    """Raise a SpecError, one line, when grade nodes would run checker code of their tasks
    where they may not: without OS isolation and without permission (`unsafe`, the node's
    `sandbox: none`), or without the backend `HARNESS_SANDBOX` forces."""
    from harness.pipeline.nodes.load_tasks import planned_tasks

    sources: dict[bool, dict[str, PlannedNode]] = {False: {}, True: {}}  # by permission
    for node in pipeline.nodes.values():
        if node.kind.name == "grade":
            allowed = unsafe or getattr(node.params, "sandbox", "auto") == "none"
            sources[allowed].update({s.id: s for s in task_sources(pipeline, node.id)})
    for allowed, found in sources.items():
        if not found or isolation_problem(allowed) is None:
            continue  # nothing to load: checker code may run here
        cases = [case for source in found.values() for case in planned_tasks(source).cases]
        message = missing_isolation(cases, allowed)
        if message is not None:
            paths = dict.fromkeys(path for source in found.values() for path in source.params.paths)
            raise SpecError.at(Location(", ".join(paths)), "", message)
