"""Where production calls are read from: the local trace store, a Weave project, or a JSONL
export; one function for every command and node that reads them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from harness.production.calls import CallRecord, Filters, Unreadable, read_client, read_jsonl
from harness.specs.located import Location, SpecError


def open_calls(
    source: str,
    store: Path,
    filters: Filters,
    problems: list[Unreadable],
    option: str = "--source",
) -> tuple[Iterator[CallRecord], Callable[[], None]]:
    """(calls, closer) of a source: `local` (the trace store at `store`),
    `weave:ENTITY/PROJECT`, or a `.jsonl` export of calls; a `SpecError` at `option` names a
    bad one."""
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
            raise SpecError.at(Location(f"{option} {source}"), "", str(exc)) from None
        return read_client(tracer.client, filters), tracer.close
    path = Path(source)
    if not path.is_file():
        raise SpecError.at(
            Location(f"{option} {source}"),
            "",
            "expected local, weave:ENTITY/PROJECT or an existing .jsonl file",
        )
    return read_jsonl(path, filters, problems), lambda: None
