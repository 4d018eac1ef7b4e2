"""`end_state`: the final environment state is exactly what it should be.

`state` is a partial match: it cannot say that a key is absent or that nothing else changed.
This kind compares the whole final state, in one of three forms:

- `equals`: the final state equals the given state;
- `gold: true`: the final state equals the start state with the task's `gold_actions` replayed
  through the domain's own tools (as tau-bench grades: the database an oracle would leave);
- `nothing_else_changed: [PATHS]`: the final state equals the start state except under the
  listed JSONPaths (what the task asks to change; pair it with `state` checks of their values).

`ignore: [PATHS]` leaves values out of every form (timestamps, generated ids). A failure names
each difference by its path (`$.users['u1'].certificates[2]: unexpected (added)`), the first
`SHOWN` of them.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from harness.grading.checks import CheckContext, register_check
from harness.grading.result import Finding
from harness.specs.checks import CheckBase, References
from harness.specs.located import PathKey
from harness.specs.state_paths import key_path, parse_jsonpath
from harness.specs.task import Task
from harness.state_diff import apply_changes, state_changes
from harness.transcript import Transcript

if TYPE_CHECKING:
    from harness.domains import Environment

SHOWN = 5
Keys = tuple[str | int, ...]
_GOLD: OrderedDict[tuple[int, bool], tuple[Task, dict[str, Any]]] = OrderedDict()  # its gold state
_GOLD_KEPT = 64


class EndStateCheck(CheckBase):
    """The final state is exactly right: equal to a given state, to the start state with the
    task's gold actions replayed, or to the start state changed only under listed paths."""

    kind: Literal["end_state"]
    passes_when: ClassVar[str] = (
        "the whole final state is exactly right: `equals` a given state, `gold: true` the start "
        "state with the task's `gold_actions` (tool calls) replayed through the domain (a refused"
        " one is an error, or skipped with `refused_gold: skip`), or `nothing_else_changed: "
        "[PATHS]` the start state changed only under those JSONPaths; `ignore: [PATHS]` leaves "
        "values out; a failure names each difference by its path "
        "(`$.accounts['A-1005'].address.street: was '...', now '...'`)"
    )
    equals: dict[str, Any] | None = Field(
        default=None, description="The whole expected final state."
    )
    gold: bool = Field(
        default=False,
        description="Expect the start state with the task's `gold_actions` replayed through "
        "the domain's tools.",
    )
    nothing_else_changed: list[str] | None = Field(
        default=None,
        description="JSONPaths the episode may change (e.g. \"$.items['A-1'].status\"): "
        "anything else that differs from the start state fails, named by its path; [] means "
        "nothing may change.",
    )
    ignore: list[str] = Field(
        default_factory=list,
        description="JSONPaths left out of the comparison (timestamps, generated ids).",
    )
    refused_gold: Literal["error", "skip"] = Field(
        default="error",
        description="With `gold: true`, a gold action the domain refuses: `error` (the task's "
        "gold is wrong: the check is an error) or `skip` (it is part of the reference "
        "conversation, a lookup of a wrong id, say, and changes nothing: tau-bench's evaluator "
        "skips it).",
    )

    @field_validator("nothing_else_changed", "ignore")
    @classmethod
    def _valid_paths(cls, paths: list[str] | None) -> list[str] | None:
        for path in paths or []:
            try:
                parse_jsonpath(path)
            except Exception as exc:  # jsonpath-ng raises several exception types
                raise ValueError(f"invalid JSONPath {path!r}: {exc}") from None
        return paths

    @model_validator(mode="after")
    def _one_form(self) -> EndStateCheck:
        given = [self.equals is not None, self.gold, self.nothing_else_changed is not None]
        if sum(given) != 1:
            raise ValueError("give exactly one of 'equals', 'gold: true' or 'nothing_else_changed'")
        return self

    def references(self) -> References:
        paths: dict[PathKey, str] = {
            ("nothing_else_changed", n): p for n, p in enumerate(self.nothing_else_changed or [])
        }
        paths |= {("ignore", n): p for n, p in enumerate(self.ignore)}
        values: dict[PathKey, tuple[str, Any]] = (
            {("equals",): ("$", self.equals)} if self.equals is not None else {}
        )
        return References(state_paths=paths, state_values=values)


def differences(
    expected: Any, found: Any, keys: Keys = (), words: tuple[str, str] = ("expected", "found")
) -> Iterator[tuple[Keys, str]]:
    """Every place where `found` differs from `expected`, as (keys, what differs), in order:
    mappings key by key (missing and added keys named), lists item by item, then values;
    `words` name the two sides (`was`, `now` for changes from a start state)."""
    before, after = words
    if expected is found:  # a part both share (the start state's, by structural sharing)
        return
    if isinstance(expected, dict) and isinstance(found, dict):
        for key in expected:
            if key not in found:
                yield (*keys, key), f"missing ({before} {_short(expected[key])})"
            else:  # read as stored (harness.domains.own_state): what it shares is skipped
                value = dict.__getitem__(found, key)
                yield from differences(expected[key], value, (*keys, key), words)
        for key in found:
            if key not in expected:
                yield (*keys, key), f"added ({_short(found[key])})"
        return
    if isinstance(expected, list) and isinstance(found, list):
        for n, (a, b) in enumerate(zip(expected, found, strict=False)):
            yield from differences(a, b, (*keys, n), words)
        for n in range(len(found), len(expected)):
            yield (*keys, n), f"missing ({before} {_short(expected[n])})"
        for n in range(len(expected), len(found)):
            yield (*keys, n), f"added ({_short(found[n])})"
        return
    if expected != found or (
        type(expected) is not type(found) and not _same_number(expected, found)
    ):
        yield keys, f"{before} {_short(expected)}, {after} {_short(found)}"


def _same_number(a: Any, b: Any) -> bool:
    numbers = (int, float)
    return isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool) and a == b


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def spell(keys: Keys) -> str:
    """A difference's path as a JSONPath (`$` for the whole state)."""
    if not keys:
        return "$"
    return key_path(keys) or "$" + "".join(f"[{k!r}]" for k in keys)


def matched_keys(state: Any, path: str) -> list[Keys]:
    """The key paths of what a JSONPath selects in a state."""
    found = []
    for match in parse_jsonpath(path).find(state):
        keys: list[str | int] = []
        datum = match
        while datum is not None and datum.context is not None:
            step = datum.path
            value = getattr(step, "fields", None)
            index: Any = getattr(step, "index", None)  # a field's name, else an index
            keys.append(value[0] if value else index)
            datum = datum.context
        found.append(tuple(reversed(keys)))
    return found


def under(keys: Keys, prefixes: list[Keys]) -> bool:
    return any(keys[: len(prefix)] == prefix for prefix in prefixes)


def _domain(context: CheckContext) -> type[Environment]:
    """The domain class of the task graded: the suite's, else resolved from its reference."""
    from harness.domains import resolve_domain

    return context.domain or resolve_domain(context.task.domain)


def as_domain_state(state: dict[str, Any], context: CheckContext) -> dict[str, Any]:
    """A given state as the start state is held: for a domain with a `State` model, the
    validated model's dump (defaults applied), so that a default left out is no difference."""
    domain = _domain(context)
    if domain.State is None:
        return state
    return domain.State.model_validate(state).model_dump(mode="json", by_alias=True)


async def gold_state(
    task: Task, context: CheckContext, skip_refused: bool = False
) -> dict[str, Any]:
    """The start state with the task's gold actions replayed through its domain's tools (once
    per task object and way: every episode of a task shares it); a refused gold action is a
    bad task, unless `skip_refused`."""
    key = (id(task), skip_refused)
    kept = _GOLD.get(key)
    if kept is not None and kept[0] is task:
        return kept[1]
    from harness.domains.trace_replay import make_environment

    env = make_environment(task, task.start.state, _domain(context))
    for n, action in enumerate(task.gold_actions):
        outcome = await env.call(action.tool, action.arguments)
        if outcome.is_error and not skip_refused:
            raise GoldRefused(f"gold action {n + 1} ({action.tool}) was refused: {outcome.content}")
    # kept as the start state with the gold's changes, sharing what they leave alone: 64 whole
    # copies of a real database would be gigabytes
    gold = apply_changes(task.start.state, state_changes(task.start.state, env.state))
    _GOLD[key] = (task, gold)
    while len(_GOLD) > _GOLD_KEPT:
        _GOLD.popitem(last=False)
    return gold


class GoldRefused(ValueError):
    """A gold action the domain refuses: the task's gold is wrong, not the agent."""


@register_check(EndStateCheck)
async def check_end_state(
    spec: EndStateCheck, transcript: Transcript, context: CheckContext
) -> Finding:
    final = transcript.final_state
    ignored = [k for path in spec.ignore for state in (final, context.task.start.state)
               for k in matched_keys(state, path)]  # fmt: skip
    allowed: list[Keys] = []
    if spec.equals is not None:
        expected, what = as_domain_state(spec.equals, context), "the expected state"
    elif spec.gold:
        if not context.task.gold_actions:
            return Finding("error", "gold: true, but the task has no gold_actions")
        try:
            expected = await gold_state(context.task, context, spec.refused_gold == "skip")
        except GoldRefused as exc:
            return Finding("error", str(exc))
        what = "the gold state (the start state with the gold actions replayed)"
    else:
        expected, what = context.task.start.state, "the start state"
        allowed = [
            k
            for path in spec.nothing_else_changed or []
            for state in (final, expected)
            for k in matched_keys(state, path)
        ]
    changes = spec.nothing_else_changed is not None
    words = ("was", "now") if changes else ("expected", "found")
    found = [
        (keys, why)
        for keys, why in differences(expected, final, (), words)
        if not under(keys, ignored) and not under(keys, allowed)
    ]
    if not found:
        if changes:
            return Finding("pass", "nothing changed outside the allowed paths")
        return Finding("pass", f"the final state equals {what}")
    shown = "; ".join(f"{spell(keys)}: {why}" for keys, why in found[:SHOWN])
    more = f" (+{len(found) - SHOWN} more)" if len(found) > SHOWN else ""
    verb = "changed outside the allowed paths" if changes else f"differs from {what}"
    return Finding("fail", f"the final state {verb}: {shown}{more}")
