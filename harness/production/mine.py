"""`harness personas from-traces` as one library call: production calls -> sessions measured
(`behaviour.measure_conversation`) -> profiles (`profiles.profiles`) -> one persona file per
profile, whose `behaviour:` holds the profile's measured values.

The mapping, per profile: `disclosure_first` is the mean disclosure share (1 when no session
gave a fact), `clarify_rate` the share of all its sessions' answers to an agent question that
ask back (pooled: a session with more answers counts more), the four reaction rates the
profile's mean reaction shares (scaled down together when they sum to more than 1), `patience`
the 90th percentile of its sessions' user turns, rounded up (a session that ended satisfied
says only that its user had at least that much patience, so the median would have simulated
users give up where most real ones were still going), `words_per_turn` the median, and
`examples` up to
`EXAMPLES` short user messages of the profile's sessions with secrets and personal data masked
(`harness.secrets.redact_pii`: keys, passwords, card numbers, emails, phones, SSNs). The profile's
name and session count are in the persona's `description`, its traffic share is its `share`
(what a task's `persona: {mix: FOLDER}` weighs it by).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from harness.production.behaviour import SessionBehaviour, measure_conversation, sessions
from harness.production.calls import CallRecord, Filters, Unreadable
from harness.production.profiles import Profile, profiles
from harness.secrets import redact_data, redactor
from harness.specs.persona import Persona

EXAMPLES = 3
EXAMPLE_CHARS = 200  # a longer user message is not an example of a typical turn
REACTION_RATES = {
    "pushback": "pushback_rate",
    "rephrase": "rephrase_rate",
    "pivot": "pivot_rate",
    "abandon": "abandon_rate",
}


def slug(text: str) -> str:
    """`gradual, pushes back` -> `gradual-pushes-back`."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "profile"


def clarify_rate(sessions: Sequence[SessionBehaviour]) -> float:
    """Share of the sessions' answers to an agent question that ask back (0 without any)."""
    answers = sum(b.answers for b in sessions)
    asked = sum((b.clarify or 0.0) * b.answers for b in sessions)
    return asked / answers if answers else 0.0


def patience(sessions: Sequence[SessionBehaviour]) -> int:
    """The 90th percentile of the sessions' user turns, rounded up, at least 1."""
    turns = [b.user_turns for b in sessions]
    return max(1, math.ceil(float(np.percentile(turns, 90)))) if turns else 1


def behaviour_of(
    profile: Profile, examples: list[str], sessions: Sequence[SessionBehaviour] = ()
) -> dict[str, Any]:
    """The `behaviour:` mapping of a persona playing the profile (see the module's doc), from
    its sessions' measures (without them: the profile's mean `clarify` and median turns)."""
    mean, median = profile.mean, profile.median
    rates = {field: mean.get(name) or 0.0 for name, field in REACTION_RATES.items()}
    total = sum(rates.values())
    if total > 1:
        rates = {field: value / total for field, value in rates.items()}
    disclosure = mean.get("disclosure_first")
    words = median.get("words_per_turn")
    return {
        "disclosure_first": round(1.0 if disclosure is None else disclosure, 3),
        "clarify_rate": round(
            clarify_rate(sessions) if sessions else mean.get("clarify") or 0.0, 3
        ),
        # rounded down, so that they still sum to at most 1
        **{field: math.floor(value * 1000) / 1000 for field, value in rates.items()},
        "patience": patience(sessions) if sessions else max(1, round(median["user_turns"] or 1)),
        **({"words_per_turn": round(words, 1)} if words else {}),
        "examples": examples,
    }


def persona_data(
    profile: Profile,
    name: str,
    examples: list[str],
    sessions: Sequence[SessionBehaviour] = (),
) -> dict[str, Any]:
    """A persona file's content for the profile, checked against the persona schema."""
    data = {
        "kind": "persona",
        "name": name,
        "description": f"Mined from production: profile '{profile.name}', {profile.sessions} "
        f"sessions, {profile.share:.0%} of traffic (share {profile.share:.3f}).",
        "model": "scripted",
        "share": round(profile.share, 3),
        "behaviour": behaviour_of(profile, examples, sessions),
    }
    Persona.model_validate(data)
    return data


def mine_personas(
    calls: Iterable[CallRecord],
    filters: Filters,
    problems: list[Unreadable],
    out: Path,
    seed: int = 0,
) -> list[Path]:
    """Write one persona file per profile of the sessions the filters admit into `out`
    (`mined-<profile slug>.yaml`, overwritten), largest profile first; [] when no session."""
    measured, users = [], {}
    for conversation in sessions(calls, filters, problems):
        behaviour = measure_conversation(conversation)
        measured.append(behaviour)
        users[behaviour.key] = [
            m.content
            for m in conversation.transcript.messages
            if m.role == "user" and isinstance(m.content, str)
        ]
    found = profiles(measured, seed=seed)
    by_key = {b.key: b for b in measured}
    masked = redactor(pii=True)
    problems[:] = [problem.masked(masked) for problem in problems]
    if not found:
        return []
    out.mkdir(parents=True, exist_ok=True)
    written, names = [], set()
    for profile in found:
        name = base = f"mined-{slug(profile.name)}"
        count = 1
        while name in names:
            count += 1
            name = f"{base}-{count}"
        names.add(name)
        examples: list[str] = []
        for key in profile.keys:
            for text in users.get(key, []):
                text = masked(text.strip())
                if text and len(text) <= EXAMPLE_CHARS and text not in examples:
                    examples.append(text)
                    break
            if len(examples) == EXAMPLES:
                break
        members = [by_key[key] for key in profile.keys]
        path = out / f"{name}.yaml"
        path.write_text(
            yaml.safe_dump(
                redact_data(persona_data(profile, name, examples, members), masked),
                sort_keys=False,
                allow_unicode=True,
            ),
            encoding="utf-8",
        )
        written.append(path)
    return written
