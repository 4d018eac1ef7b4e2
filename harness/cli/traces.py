"""`harness traces`: episodes recorded as Weave traces, and production traces turned into
regression tasks."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from harness import defaults
from harness.cli._common import fail, make_console, parse_model_option, user_errors

traces_app = typer.Typer(
    help="Episodes recorded as Weave traces (local store).", no_args_is_help=True
)
TraceStoreOpt = Annotated[Path, typer.Option(help="Local trace store.")]


@traces_app.command("list")
def traces_list(
    store: TraceStoreOpt = defaults.TRACE_STORE,
    limit: Annotated[int, typer.Option(min=1, help="How many, newest first.")] = 50,
) -> None:
    """List recorded episodes: task, variant, trial, verdict, end reason, turns."""
    from rich.table import Table

    from harness.traces.episodes import list_episodes, list_roots

    if not store.is_file():
        fail(f"{store}: no trace store (run an eval first)")
    console = make_console()
    episodes, roots = list_episodes(store, limit), list_roots(store, limit)
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
    if episodes or not roots:
        console.print(table)
    if roots:
        calls = Table(title=f"Traces recorded by apps in {store}", title_justify="left")
        for column in ("id", "op", "thread", "started", "status", "feedback"):
            calls.add_column(column, no_wrap=column == "status", overflow="fold")
        for root in roots:
            calls.add_row(
                root.call_id[-8:],
                root.op,
                root.thread_id or "-",
                root.started_at[:19],
                root.status,
                str(root.feedback),
            )
        console.print(calls)
    interrupted = sum(e.status == "interrupted" for e in episodes) + sum(
        r.status == "interrupted" for r in roots
    )
    if interrupted:
        console.print(
            f"{interrupted} interrupted: the process recording them ended before they did "
            "(closed when the store was next opened)"
        )


@traces_app.command("show")
def traces_show(
    call_id: Annotated[str, typer.Argument(help="Episode call id, or its last characters.")],
    store: TraceStoreOpt = defaults.TRACE_STORE,
) -> None:
    """Print one recorded episode as a readable conversation."""
    from harness.report.conversation import print_conversation
    from harness.traces.episodes import find_episode

    episode = find_episode(store, call_id) if store.is_file() else None
    if episode is None or episode.transcript is None:
        fail(f"{store}: no single finished episode with id {call_id!r}")
    print_conversation(episode.transcript, episode.verdict, make_console())


SourceOpt = Annotated[
    str, typer.Option(help="local, weave:ENTITY/PROJECT, or a FILE.jsonl export of calls.")
]


def open_source(source: str, store: Path, filters: Any, problems: list[Any]) -> Any:
    """(calls iterator, closer) for a trace source."""
    from harness.specs.located import Location, SpecError
    from harness.traces.calls import read_client, read_jsonl
    from harness.tracing import Tracer, open_local_client, open_tracer

    if source == "local":
        if not store.is_file():
            raise SpecError.at(Location(str(store)), "", "no local trace store")
        tracer = Tracer(open_local_client(store))
        return read_client(tracer.client, filters), tracer.close
    if source.startswith("weave:"):
        try:
            tracer = open_tracer(source.removeprefix("weave:"))
        except RuntimeError as exc:
            raise SpecError.at(Location(f"--source {source}"), "", str(exc)) from None
        return read_client(tracer.client, filters), tracer.close
    path = Path(source)
    if not path.is_file():
        raise SpecError.at(
            Location(f"--source {source}"),
            "",
            "expected local, weave:ENTITY/PROJECT or an existing .jsonl file",
        )
    return read_jsonl(path, filters, problems), lambda: None


@traces_app.command("export")
def traces_export(
    out: Annotated[Path, typer.Option(help="The JSONL file to write.")],
    source: SourceOpt = "local",
    store: TraceStoreOpt = defaults.TRACE_STORE,
) -> None:
    """Write calls as JSONL, one Weave call per line in the trace server's call schema."""
    from harness.traces.calls import Filters, write_jsonl

    problems: list[Any] = []
    with user_errors():
        calls, close = open_source(source, store, Filters(), problems)
    try:
        count = write_jsonl(calls, out)
    finally:
        close()
    for problem in problems:
        typer.echo(f"skipped {problem}", err=True)
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
    status: Annotated[str, typer.Option(help="error, success or any.")] = "any",
    negative: Annotated[
        bool, typer.Option("--negative", help="Only conversations with negative feedback.")
    ] = False,
    op: Annotated[
        list[str] | None,
        typer.Option(
            help="Only conversations with a call of this op: a bare name (issue_refund), a dotted "
            "one (Backend.issue_refund, tool.issue_refund) or a full weave:/// ref (repeatable)."
        ),
    ] = None,
    thread: Annotated[list[str] | None, typer.Option(help="Only these thread ids.")] = None,
    since: Annotated[
        str | None,
        typer.Option(help="Conversations started at or after: ISO (2026-11-30) or an age (7d)."),
    ] = None,
    until: Annotated[
        str | None,
        typer.Option(help="Conversations started before: ISO (2026-12-01T12:00) or an age (24h)."),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite existing task files.")] = False,
) -> None:
    """Turn production traces into regression tasks (one per cluster of near-duplicates)."""
    from harness.domains import UnknownDomain
    from harness.specs.located import Location, SpecError
    from harness.traces.calls import Filters, parse_when
    from harness.traces.convert import TaskOptions
    from harness.traces.to_tasks import domain_for_tasks, to_tasks

    problems: list[Any] = []
    with user_errors():
        if status not in ("error", "success", "any"):
            raise SpecError.at(Location(f"--status {status}"), "", "expected error, success or any")
        bounds = {}
        for name, text in (("since", since), ("until", until)):
            try:
                bounds[name] = parse_when(text) if text is not None else None
            except ValueError as exc:
                raise SpecError.at(Location(f"--{name} {text}"), "", str(exc)) from None
        try:
            reference, domain_class = domain_for_tasks(domain, out, Path.cwd())
        except UnknownDomain as exc:
            raise SpecError.at(Location(f"--domain {domain}"), "", str(exc)) from None
        filters = Filters(thread or [], ops=op or [], status=status, negative=negative, **bounds)
        writer = parse_model_option("--criteria-model", criteria_model) if criteria_model else None
        calls, close = open_source(source, store, filters, problems)
    options = TaskOptions(reference, domain_class, state_file, state_db, persona_model, writer)
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
        typer.echo(f"unreadable {problem}", err=True)
    for note in written.notes:
        typer.echo(f"note {note}", err=True)
    typer.echo(
        f"{len(written.made)} made, {len(written.skipped)} skipped, {len(unreadable)} unreadable"
    )
