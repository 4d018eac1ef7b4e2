"""`harness climb show`: a stored climb as text: its decision, then every candidate with its
parent, what became of it, each evaluation (the run, the purpose, the score) and its diff."""

from __future__ import annotations

from harness.climb.split import Split, split_text
from harness.store import EvaluationInfo, Store


def climb_text(store: Store, climb_id: str) -> str | None:
    """The climb as text; None when the store holds no such climb."""
    climb = store.climb(climb_id)
    if climb is None:
        return None
    decision = climb.decision
    lines = [f"climb {climb.id} ({climb.name}): {climb.status}, started {climb.created_at}"]
    lines.append(f"production: {climb.production}")
    if decision:
        lines.append(
            f"search: {decision['episodes']} episodes, ${decision['spent_usd']:.4f}; stopped "
            f"by {decision['stopped_by']}"
        )
        split = decision.get("split") or {}
        if "clusters" in split:  # a climb stored before the clusters were kept has no line
            sides = Split(split["train"], split["validation"], split["clusters"])
            lines.append(split_text(sides, final=True) + ".")
        lines += decision["evidence"]
        verdict = "SHIPPED" if decision["accepted"] else "NOT SHIPPED"
        lines.append(f"{verdict}: " + "; ".join(decision["reasons"]))
        if decision["variant_file"]:
            lines.append(f"variant file: {decision['variant_file']}")
    evaluations = store.climb_evaluations(climb_id)
    for candidate in store.climb_candidates(climb_id):
        parent = f" <- {candidate.parent}" if candidate.parent else ""
        note = f" ({candidate.note})" if candidate.note else ""
        lines += ["", f"candidate {candidate.candidate}{parent}: {candidate.status}{note}"]
        lines += [
            f"  {e.purpose:<10} {e.run_id or 'no run'}  {figures(store, e)}"
            for e in evaluations
            if e.candidate == candidate.candidate
        ]
        lines += [f"  {line}" for line in candidate.diff.splitlines()]
    return "\n".join(lines)


def figures(store: Store, evaluation: EvaluationInfo) -> str:
    """An evaluation's pass rate (from its run's stored verdicts) and mean score, named."""
    passed: dict[str, list[bool]] = {task_id: [] for task_id in evaluation.scores}
    if evaluation.run_id is not None:
        for verdict in store.latest_verdicts(evaluation.run_id):
            if verdict.task_id in passed:
                passed[verdict.task_id].append(verdict.outcome == "pass")
    rates = [sum(found) / len(found) if found else 0.0 for found in passed.values()]
    rate = sum(rates) / len(rates) if rates else 0.0
    held = "held-out " if evaluation.purpose == "acceptance" else ""
    return (
        f"pass rate {rate:.0%}, mean score {evaluation.mean:.0%} on "
        f"{len(evaluation.scores)} {held}tasks"
    )


def climbs_text(store: Store) -> str:
    """The newest climbs, one line each."""
    lines = []
    for climb_id in store.climbs():
        climb = store.climb(climb_id)
        assert climb is not None
        lines.append(f"{climb.id}  {climb.name}  {climb.status}  {climb.created_at}")
    return "\n".join(lines) or "no climbs in this store"
