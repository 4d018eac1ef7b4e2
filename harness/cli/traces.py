"""`harness traces`: episodes recorded as Weave traces, and production traces turned into
regression tasks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from harness import defaults
from harness.cli._common import (
    fail,
    make_console,
    parse_model_option,
    readable_file,
    user_errors,
)

if TYPE_CHECKING:
    from rich.console import Console

    from harness.production.app_sessions import AppSession

traces_app = typer.Typer(
    help="Weave traces: the harness's episodes and apps' sessions (local store), exported or "
    "turned into regression tasks.",
    no_args_is_help=True,
)
TraceStoreOpt = Annotated[Path, typer.Option("--trace-store", help="Local trace store.")]


@traces_app.command("list")
def traces_list(
    store: TraceStoreOpt = defaults.TRACE_STORE,
    limit: Annotated[
        int, typer.Option(min=1, help="How many episodes, and how many app sessions, newest first.")
    ] = 50,
) -> None:
    """List recorded episodes (task, variant, trial, verdict, end reason, turns) and the
    sessions apps recorded, one row each (a thread, or a trace without one: root op, turns,
    status, feedback anywhere in the session)."""
    from rich.table import Table

    from harness.production.app_sessions import list_sessions
    from harness.production.episodes import list_episodes

    if not store.is_file():
        fail(f"{store}: no trace store (run an eval first)")
    console = make_console()
    episodes, sessions = list_episodes(store, limit), list_sessions(store, limit)
    table = Table(title=f"Episodes in {store}", title_justify="left")
    for column in ("id", "task", "variant", "trial", "verdict", "end reason", "turns", "run"):
        table.add_column(column, no_wrap=column == "verdict", overflow="fold")
    for episode in episodes:
        t, v, a = episode.transcript, episode.verdict, episode.attributes
        table.add_row(
            episode.call_id[-8:],
            str(a.get("task_id", "")),
            str(a.get("variant", "")),
            str(a.get("trial", "")),
            v.outcome if v else "-",
            t.end_reason.value if t else episode.status or "running",
            str(t.turns) if t else "-",
            str(a.get("run_id", "")),
        )
    if episodes or not sessions:
        console.print(table)
    if sessions:
        title = f"Sessions recorded by apps in {store} (one row a session: its thread, or trace)"
        calls = Table(title=title, title_justify="left")
        for column in ("id", "op", "thread", "started", "turns", "status", "feedback"):
            calls.add_column(column, no_wrap=column == "status", overflow="fold")
        for session in sessions:
            calls.add_row(
                session.call_id[-8:],
                ", ".join(session.ops),
                session.thread_id or "-",
                session.started_at[:19],
                "-" if session.turns is None else str(session.turns),
                session.status,
                str(session.feedback),
            )
        console.print(calls)
    interrupted = sum(e.status == "interrupted" for e in episodes) + sum(
        s.status == "interrupted" for s in sessions
    )
    if interrupted:
        console.print(
            f"{interrupted} interrupted: the process recording them ended before they did "
            "(closed when the store was next opened)"
        )


@traces_app.command("show")
def traces_show(
    call_id: Annotated[
        str,
        typer.Argument(
            help="An episode's call id, an app's root call id (or their last characters, as "
            "`traces list` shows them), or an app's thread id."
        ),
    ],
    store: TraceStoreOpt = defaults.TRACE_STORE,
) -> None:
    """Print one recorded episode, or an app's session, as a readable conversation; a session
    also with its feedback and the failures found in it."""
    from harness.production.app_sessions import find_session
    from harness.production.episodes import find_episode
    from harness.report.conversation import print_conversation
    from harness.secrets import redact_pii

    episode = find_episode(store, call_id) if store.is_file() else None
    if episode is not None and episode.transcript is not None:
        # the harness's own episode: its users are simulated, their emails the task's facts
        verdict = _masked(episode.verdict, pii=False) if episode.verdict is not None else None
        print_conversation(_masked(episode.transcript, pii=False), verdict, make_console())
        return
    session = find_session(store, call_id) if store.is_file() and episode is None else None
    if session is None:
        fail(redact_pii(f"{store}: no single finished episode or app session with id {call_id!r}"))
    if session.conversation is None:
        fail(redact_pii(f"{store}: {session.key}: " + "; ".join(p.why for p in session.problems)))
    _print_session(session, make_console())


def _masked(model: Any, pii: bool = True) -> Any:
    """A pydantic model (a transcript, a verdict) with every string redacted: keys, passwords,
    card numbers always; with `pii`, emails and phone numbers too (`harness.secrets.redact_pii`):
    `traces show` prints production's text, never its users' contact details."""
    from harness.secrets import redact_data, redactor

    return type(model).model_validate(redact_data(model.model_dump(mode="json"), redactor(pii)))


def _print_session(session: AppSession, console: Console) -> None:
    """An app's session as `traces show` prints an episode, then its feedback (which call got
    it) and the failures `traces to-tasks` would find in it."""
    from rich.markup import escape as escape_markup

    from harness.production.failures import failure_of
    from harness.report.conversation import print_conversation
    from harness.secrets import redactor

    masked = redactor(pii=True)

    def escape(text: str) -> str:
        return escape_markup(masked(text))

    conversation = session.conversation
    assert conversation is not None  # `traces_show` fails on a session it could not rebuild
    transcript = conversation.transcript.model_copy(
        update={
            "task_id": session.key,
            "started_at": conversation.started_at,
            "duration_s": session.duration_s,
        }
    )
    print_conversation(_masked(transcript), None, console)
    console.print(f"\nfeedback: {len(conversation.feedback) or 'none'}")
    for row in conversation.feedback:
        kind, payload = str(row.get("feedback_type", "")), row.get("payload") or {}
        if kind.startswith("wandb.reaction"):
            text = f"reaction {payload.get('emoji', '')}"
        elif kind.startswith("wandb.note"):
            text = f"note: {payload.get('note', '')}"
        else:
            text = f"{kind}: {json.dumps(payload, ensure_ascii=False)}"
        call = str(row.get("weave_ref") or "").rsplit("/call/", 1)[-1]
        on = f"  (on {session.ops[call]} {call[-8:]})" if call in session.ops else ""
        console.print(f"  {escape(text)}{escape(on)}")
    failure = failure_of(conversation)
    reasons = failure.reasons()
    console.print(f"\nfailures: {len(reasons) or 'none'}")
    origins = failure.errors + [error for error, _ in failure.silent]  # reasons() lists these first
    for index, reason in enumerate(reasons):
        origin = origins[index] if index < len(origins) else None
        at = f"  (at {origin.op} {origin.call_id[-8:]})" if origin and origin.call_id else ""
        console.print(f"  {escape(reason)}{escape(at)}")
    for problem in session.problems:
        console.print(f"  [dim]left out: {escape(problem.why)}[/]")


SourceOpt = Annotated[
    str, typer.Option(help="local, weave:ENTITY/PROJECT, or a FILE.jsonl export of calls.")
]


StatusOpt = Annotated[str, typer.Option(help="error, success or any.")]
NegativeOpt = Annotated[
    bool, typer.Option("--negative", help="Only conversations with negative feedback.")
]
OpOpt = Annotated[
    list[str] | None,
    typer.Option(
        help="Only conversations with a call of this op: a bare name (issue_refund), a dotted "
        "one (Backend.issue_refund, tool.issue_refund) or a full weave:/// ref (repeatable)."
    ),
]
ThreadOpt = Annotated[list[str] | None, typer.Option(help="Only these thread ids.")]
SinceOpt = Annotated[
    str | None,
    typer.Option(help="Conversations started at or after: ISO (2026-11-30) or an age (7d)."),
]
UntilOpt = Annotated[
    str | None,
    typer.Option(help="Conversations started before: ISO (2026-12-01T12:00) or an age (24h)."),
]


def session_filters(
    status: str,
    negative: bool,
    op: list[str] | None,
    thread: list[str] | None,
    since: str | None,
    until: str | None,
) -> Any:
    """The `Filters` of the session options (`--status`, `--negative`, `--op`, `--thread`,
    `--since`, `--until`); a `SpecError` names a bad one."""
    from harness.production.calls import Filters, parse_when
    from harness.specs.located import Location, SpecError

    if status not in ("error", "success", "any"):
        raise SpecError.at(Location(f"--status {status}"), "", "expected error, success or any")
    bounds = {}
    for name, text in (("since", since), ("until", until)):
        try:
            bounds[name] = parse_when(text) if text is not None else None
        except ValueError as exc:
            raise SpecError.at(Location(f"--{name} {text}"), "", str(exc)) from None
    return Filters(
        thread or [],
        ops=op or [],
        status=status,
        negative=negative,
        since=bounds["since"],
        until=bounds["until"],
    )


def open_source(
    source: str, store: Path, filters: Any, problems: list[Any], option: str = "--source"
) -> Any:
    """(calls iterator, closer) for a trace source (`production.sources.open_calls`)."""
    from harness.production.sources import open_calls

    return open_calls(source, store, filters, problems, option)


@traces_app.command("export")
def traces_export(
    out: Annotated[Path, typer.Option(help="The JSONL file to write.")],
    source: SourceOpt = "local",
    store: TraceStoreOpt = defaults.TRACE_STORE,
) -> None:
    """Write calls as JSONL, one Weave call per line in the trace server's call schema."""
    from harness.production.calls import Filters, write_jsonl

    problems: list[Any] = []
    with user_errors():
        calls, close = open_source(source, store, Filters(), problems)
    try:
        count = write_jsonl(calls, out)
    finally:
        close()
    for problem in problems:
        typer.echo(f"{'skipped' if problem.skipped else 'warning'} {problem}", err=True)
    typer.echo(f"wrote {count} calls to {out}")


@traces_app.command("to-tasks")
def traces_to_tasks(
    out: Annotated[Path, typer.Option(help="Folder of the task files.")] = Path("tasks/regression"),
    source: SourceOpt = "local",
    store: TraceStoreOpt = defaults.TRACE_STORE,
    domain: Annotated[
        str,
        typer.Option(
            help="Domain of the tasks: replay (production's tools, answering what they answered), "
            "or your own (a registered name, package.module:Class or path/file.py:Class), seeded "
            "from the recorded tool results by its observed_state hook."
        ),
    ] = "replay",
    state_file: Annotated[
        Path | None, typer.Option(help="Start-state snapshot (JSON) the tasks start from.")
    ] = None,
    state_db: Annotated[
        Path | None, typer.Option(help="Start-state snapshot (SQLite) the tasks start from.")
    ] = None,
    persona_model: Annotated[
        str | None,
        typer.Option(help="Have personas played by this model instead of replaying the turns."),
    ] = None,
    criteria_model: Annotated[
        str | None,
        typer.Option(help="Have this model write the judge criteria of failures (else templates)."),
    ] = None,
    status: StatusOpt = "any",
    negative: NegativeOpt = False,
    op: OpOpt = None,
    thread: ThreadOpt = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    judge: Annotated[
        str,
        typer.Option(
            help="soft: judge criteria are reported but decide nothing (a task never hangs on a "
            "judge alone); hard: they decide the task like its other checks."
        ),
    ] = "soft",
    error_key: Annotated[
        list[str] | None,
        typer.Option(
            help="A tool-result field whose non-empty value means the call failed, besides "
            "error, errors, ok: false, status: error/failed, an HTTP status >= 400 (repeatable)."
        ),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite existing task files.")] = False,
) -> None:
    """Turn production traces into regression tasks (one per cluster of near-duplicates)."""
    from harness.domains import UnknownDomain
    from harness.outcomes import ErrorValues
    from harness.production.convert import TaskOptions
    from harness.production.to_tasks import domain_for_tasks, to_tasks
    from harness.specs.located import Location, SpecError

    readable_file("--state-file", state_file)
    readable_file("--state-db", state_db)
    problems: list[Any] = []
    with user_errors():
        filters = session_filters(status, negative, op, thread, since, until)
        if judge not in ("soft", "hard"):
            raise SpecError.at(Location(f"--judge {judge}"), "", "expected soft or hard")
        try:
            reference, domain_class = domain_for_tasks(domain, out, Path.cwd())
        except UnknownDomain as exc:
            raise SpecError.at(Location(f"--domain {domain}"), "", str(exc)) from None
        writer = parse_model_option("--criteria-model", criteria_model)
        calls, close = open_source(source, store, filters, problems)
    options = TaskOptions(
        reference,
        domain_class,
        state_file,
        state_db,
        persona_model,
        writer,
        hard_judges=judge == "hard",
        error_values=ErrorValues(extra_keys=tuple(error_key or ())),
    )
    try:
        written = to_tasks(calls, filters, out, options, force)
    finally:
        close()
    for path in written.made:
        typer.echo(f"made    {path}  ({written.counts[path.name]} conversation(s))")
    for path in written.skipped:
        typer.echo(f"skipped {path}  (exists; --force to overwrite)")
    unreadable = problems + written.unreadable
    for problem in unreadable:
        typer.echo(f"{getattr(problem, 'label', 'unreadable')} {problem}", err=True)
    for note in written.notes:
        typer.echo(f"note {note}", err=True)
    typer.echo(
        f"{len(written.made)} made, {len(written.skipped)} skipped, "
        f"{sum(getattr(p, 'skipped', True) for p in unreadable)} unreadable"
    )
