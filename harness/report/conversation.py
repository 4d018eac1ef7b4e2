"""One episode as a readable conversation."""

from __future__ import annotations

import json

from rich.console import Console
from rich.markup import escape

from harness.grading.result import Verdict
from harness.transcript import Transcript

ROLE_STYLE = {"user": "bold cyan", "assistant": "bold green", "tool": "dim"}


def print_conversation(transcript: Transcript, verdict: Verdict | None, console: Console) -> None:
    """Header (task, variant, persona, end), the messages, then the checks."""
    t = transcript
    console.print(
        f"[bold]{t.task_id}[/bold]  variant {t.variant} ({t.variant_hash})  "
        f"persona {t.persona}  trial {t.trial}"
    )
    end = f"{t.end_reason.value}" + (f" ({t.end_detail})" if t.end_detail else "")
    if t.error:
        end += f": [{t.error.side.value}] {t.error.message}"
    console.print(f"ended: {escape(end)} after {t.turns} turns, {t.duration_s:.2f}s\n")
    for message in t.messages:
        style = ROLE_STYLE.get(message.role, "")
        if message.role == "tool":
            marker = "error " if message.is_error else ""
            console.print(f"  [{style}]<- {message.name} {marker}{escape(message.content)}[/]")
            continue
        if message.content:
            console.print(f"[{style}]{message.role}:[/] {escape(message.content)}")
        for call in message.tool_calls:
            console.print(f"  [dim]-> {call.name}({escape(json.dumps(call.arguments))})[/]")
    if verdict is not None:
        console.print(f"\nverdict: [bold]{verdict.outcome}[/bold]  score {verdict.score}")
        for check in verdict.checks:
            console.print(f"  {check.outcome:<5} {check.name}: {escape(check.reason)}")
