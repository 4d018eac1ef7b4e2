"""Which runs a gate compares. A run records its suite (the task ids it played and each task's
content hash) and its variant's lineage (its name and the names it extends); baselines are kept
per suite; a gate without a candidate takes the newest run of the baseline's suite and lineage
by another variant than the baseline's; runs of different suites are compared only when asked,
and then only on the tasks they share."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from harness.gate.evidence import is_evidence
from harness.gate.figures import SuiteFigures
from harness.specs.located import Location, SpecError
from harness.store import RunInfo, Store

SUITE_PREFIX = "suite:"  # a baseline's name in the store: one baseline per suite
SHOWN_RUNS = 5  # runs a gate that found no candidate names, newest first


def run_suite(store: Store, info: RunInfo) -> dict[str, str]:
    """Task id -> content hash, as the run recorded them. A run stored before suites were
    recorded gives the task ids it played, each with an unknown ('') hash."""
    recorded = info.config.get("suite")
    if isinstance(recorded, dict):
        return {str(task): str(digest) for task, digest in recorded.items()}
    return {task: "" for task, _ in sorted(store.episode_keys(info.id))}


def suite_id(suite: dict[str, str]) -> str:
    """A short name for a suite: the hash of its sorted (task id, content hash) pairs."""
    return hashlib.sha256(json.dumps(sorted(suite.items())).encode()).hexdigest()[:12]


def lineage(info: RunInfo) -> list[str]:
    """The run's variant name and the names of the variants it extends, nearest first."""
    recorded = info.config.get("lineage")
    return [str(name) for name in recorded] if isinstance(recorded, list) else [info.variant]


def same_lineage(a: RunInfo, b: RunInfo) -> bool:
    """Two runs' variants are of one lineage when one extends the other or both extend one."""
    return bool(set(lineage(a)) & set(lineage(b)))


def compare_suites(baseline: dict[str, str], candidate: dict[str, str]) -> SuiteFigures:
    """The tasks both suites hold in the same content (an unknown hash matches any), and the
    rest."""
    both = sorted(baseline.keys() & candidate.keys())
    changed = [t for t in both if baseline[t] and candidate[t] and baseline[t] != candidate[t]]
    unknown = any(not baseline[t] or not candidate[t] for t in both)
    only_baseline = sorted(baseline.keys() - candidate.keys())
    only_candidate = sorted(candidate.keys() - baseline.keys())
    return SuiteFigures(
        same=not (changed or unknown or only_baseline or only_candidate),
        common=[t for t in both if t not in changed],
        only_baseline=only_baseline,
        only_candidate=only_candidate,
        changed=changed,
    )


def describe_change(
    suite: SuiteFigures, baseline: str = "the baseline", candidate: str = "the candidate"
) -> str:
    """What differs between two suites, in one line (`baseline` and `candidate` name the two
    runs: 'A' and 'B' in a comparison)."""
    parts = [
        f"{label}: {', '.join(tasks)}"
        for label, tasks in (
            (f"only in {baseline}", suite.only_baseline),
            (f"only in {candidate}", suite.only_candidate),
            ("changed content", suite.changed),
        )
        if tasks
    ]
    if not parts:
        parts = ["task content hashes not recorded (a run from before suites were recorded)"]
    return "; ".join(parts)


def check_suites(suite: SuiteFigures, allow_change: bool, where: str) -> list[str]:
    """Refuse runs of different suites unless allowed; when allowed, say what counts."""
    if suite.same:
        return []
    change = describe_change(suite)
    if not allow_change:
        raise SpecError.at(
            Location(where),
            "",
            f"the candidate and the baseline ran different suites ({change}); pass "
            "--allow-suite-change to compare them on the tasks they share",
        )
    return [
        f"suite changed ({change}): only the {len(suite.common)} common tasks count: "
        + (", ".join(suite.common) or "none")
    ]


@dataclass
class Selection:
    """The runs a gate compares, and how each was chosen."""

    candidate: str
    baseline: str | None
    notes: list[str] = field(default_factory=list)


def _info(store: Store, run_id: str) -> RunInfo:
    info = store.run(run_id)
    if info is None:
        raise SpecError.at(Location(str(store.path)), "", f"no run {run_id!r} in the store")
    return info


def _named(info: RunInfo, suite: dict[str, str]) -> str:
    return f"{info.id} ({info.variant}, suite {suite_id(suite)} of {len(suite)} tasks)"


def baseline_for(store: Store, candidate: RunInfo, allow_change: bool) -> tuple[str | None, str]:
    """The stored baseline of the candidate's suite, and a note saying which it is. Without
    one: none at all when no baseline is set; with baselines of other suites only, an error,
    or with `allow_change` the newest of the same lineage (else the newest)."""
    suite = run_suite(store, candidate)
    named = store.baseline(SUITE_PREFIX + suite_id(suite))
    if named is not None:
        return named, f"baseline {_named(_info(store, named), suite)}: the candidate's suite"
    stored = [_info(store, run_id) for _, run_id, _ in store.baselines()]
    if not stored:
        return None, "no baseline set (harness baseline set RUN_ID): no comparison rules apply"
    for info in stored:  # a baseline set before baselines were kept per suite
        if suite_id(run_suite(store, info)) == suite_id(suite):
            return info.id, f"baseline {_named(info, suite)}: the candidate's suite"
    others = ", ".join(_named(info, run_suite(store, info)) for info in stored)
    if not allow_change:
        raise SpecError.at(
            Location(str(store.path)),
            "",
            f"no baseline for the candidate's suite {suite_id(suite)} ({len(suite)} tasks); "
            f"baselines are set for other suites: {others}. Set one with `harness baseline set "
            "RUN_ID`, or pass --allow-suite-change to compare on the tasks they share",
        )
    chosen = next((info for info in stored if same_lineage(info, candidate)), stored[0])
    note = f"baseline {_named(chosen, run_suite(store, chosen))}: of another suite (allowed)"
    return chosen.id, note


def newest_candidate(store: Store, baseline: RunInfo) -> str:
    """The newest finished run of the baseline's suite and variant lineage by another variant
    (variant hash) than the baseline's: after a DAG that ran production and a candidate, the
    candidate, never a rerun of production compared with itself. None is an error that lists
    the runs of the suite it passed over and asks for --candidate."""
    suite = suite_id(run_suite(store, baseline))
    of_suite = [
        info
        for info in store.runs()
        if info.id != baseline.id
        and info.status == "done"
        and not is_evidence(info)
        and suite_id(run_suite(store, info)) == suite
    ]
    found = [
        info
        for info in of_suite
        if info.variant_hash != baseline.variant_hash and same_lineage(info, baseline)
    ]
    if found:
        return found[-1].id
    same = "the baseline's variant"
    passed_over = [
        f"{info.id} ({info.variant} {info.variant_hash}: "
        f"{same if info.variant_hash == baseline.variant_hash else 'another lineage'})"
        for info in reversed(of_suite[-SHOWN_RUNS:])
    ]
    more = len(of_suite) - SHOWN_RUNS
    found_text = ", ".join(passed_over) + (f" and {more} older" if more > 0 else "")
    raise SpecError.at(
        Location(str(store.path)),
        "",
        f"no candidate for the baseline {baseline.id} ({baseline.variant} "
        f"{baseline.variant_hash}): no finished run of its suite {suite} by another variant of "
        f"its lineage ({', '.join(lineage(baseline))}); found "
        f"{found_text or 'only the baseline'}; pass --candidate RUN_ID",
    )


def choose_runs(
    store: Store, candidate: str | None, baseline: str | None, allow_change: bool
) -> Selection:
    """The candidate and baseline a gate compares when either was not given, with notes."""
    notes: list[str] = []
    if baseline is None and candidate is not None:
        baseline, note = baseline_for(store, _info(store, candidate), allow_change)
        notes.append(note)
    elif baseline is None:
        stored = store.baselines()
        baseline = stored[0][1] if stored else None
        if baseline is not None:
            info = _info(store, baseline)
            note = "the most recently set baseline"
            notes.append(f"baseline {_named(info, run_suite(store, info))}: {note}")
    else:
        info = _info(store, baseline)
        notes.append(f"baseline {_named(info, run_suite(store, info))}: given")
    if candidate is not None:
        info = _info(store, candidate)
        notes.insert(0, f"candidate {_named(info, run_suite(store, info))}: given")
    elif baseline is not None:
        candidate = newest_candidate(store, _info(store, baseline))
        info = _info(store, candidate)
        note = (
            "the newest run of the baseline's suite and lineage by a variant other than the "
            "baseline's"
        )
        notes.insert(0, f"candidate {_named(info, run_suite(store, info))}: {note}")
    else:
        runs = store.runs()
        finished = [info for info in runs if info.status == "done" and not is_evidence(info)]
        if not finished:
            raise SpecError.at(Location(str(store.path)), "", "no candidate run in the store")
        candidate = finished[-1].id
        notes.insert(0, f"candidate {candidate} ({finished[-1].variant}): the newest run")
    return Selection(candidate, baseline, notes)
