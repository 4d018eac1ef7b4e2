"""`harness domains list|show`: the domains tasks can name, their tools and state."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from harness.cli._common import fail, make_console, user_errors

domains_app = typer.Typer(help="Domains: environments with state and tools.", no_args_is_help=True)


@domains_app.command("list")
def domains_list() -> None:
    """Every registered domain: bundled, installed plug-ins, and the project's `plugins:`."""
    from rich.table import Table

    from harness.domains.describe import registered

    with user_errors():
        found = registered()
    table = Table(title="Domains", title_justify="left")
    for column in ("name", "source", "tools"):
        table.add_column(column, overflow="fold")
    for info in found:
        table.add_row(info.name, info.source, ", ".join(tool.name for tool in info.tools))
    make_console().print(table)


@domains_app.command("show")
def domains_show(
    name: Annotated[
        str, typer.Argument(help="A registered name, package.module:Class or file.py:Class.")
    ],
) -> None:
    """A domain's description, policy, tools with their parameters' descriptions and JSON-schema
    parameters, and the JSON Schema of its state when it declares one."""
    from harness.domains import UnknownDomain, resolve_domain
    from harness.domains.describe import describe

    with user_errors():
        try:
            info = describe(resolve_domain(name))
        except UnknownDomain as exc:
            fail(str(exc))
    typer.echo(f"{info.name}  ({info.source})")
    for label, text in (("description", info.description), ("policy", info.policy)):
        if text:
            typer.echo(f"{label}: {text}")
    typer.echo("\ntools:")
    for spec in info.tools:
        typer.echo(f"  {spec.name}: {spec.description.splitlines()[0] if spec.description else ''}")
        for parameter, schema in spec.parameters.get("properties", {}).items():
            if isinstance(schema, dict) and schema.get("description"):
                typer.echo(f"    {parameter}: {schema['description']}")
        typer.echo("    " + json.dumps(spec.parameters))
    if info.state_schema is not None:
        typer.echo("\nstate (JSON Schema):")
        typer.echo(json.dumps(info.state_schema, indent=2))
