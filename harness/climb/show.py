"""`harness climb show`: a stored climb as text: its decision, then every candidate with its
parent, what became of it, each evaluation (the run, the purpose, the score) and its diff."""

from __future__ import annotations

from harness.store import Store


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
            f"  {e.purpose:<10} {e.run_id or 'no run'}  {e.mean:.0%} on {len(e.scores)} tasks"
            for e in evaluations
            if e.candidate == candidate.candidate
        ]
        lines += [f"  {line}" for line in candidate.diff.splitlines()]
    return "\n".join(lines)


def climbs_text(store: Store) -> str:
    """The newest climbs, one line each."""
    lines = []
    for climb_id in store.climbs():
        climb = store.climb(climb_id)
        assert climb is not None
        lines.append(f"{climb.id}  {climb.name}  {climb.status}  {climb.created_at}")
    return "\n".join(lines) or "no climbs in this store"
