"""`tailrent mcp list`: each configured MCP server, where it came from, its state and its tools.

Every server is started (as a session starts it), listed, and stopped again;
one that cannot start is one line saying why, and the command goes on with
the others. The schema tokens are counted as a new session counts them.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import click


@click.group("mcp")
def mcp() -> None:
    """MCP tool servers ([mcp.servers.NAME] in config.toml, or the workspace's .mcp.json)."""


@mcp.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON object instead of the text.")
@click.pass_context
def list_servers(ctx: click.Context, as_json: bool) -> None:
    """Start each server, show its state and tools, stop it."""
    from tailrent_tui.agent.mcp import hub_for
    from tailrent_tui.core.tokens import get_counter
    from tailrent_tui.settings import SettingsError, config_file, load_settings

    flags = dict(ctx.find_root().obj or {})
    try:
        settings, sources, _ = load_settings(flags)
    except SettingsError as exc:
        raise click.ClickException(str(exc)) from None
    workspace = Path(settings.workspace or Path.cwd()).resolve()
    origin = sources.get("mcp.servers", "default")
    hub = hub_for(settings, {"mcp": str(config_file()) if origin == "default" else origin}, workspace)
    name = "cl100k" if settings.tokenizer == "auto" else settings.tokenizer
    hub.count = get_counter(name).count
    if not hub:
        click.echo(
            "no MCP server is configured: add [mcp.servers.NAME] to config.toml "
            "(or set mcp.project_file = true to read the workspace's .mcp.json)"
        )
        return

    async def run() -> list[dict[str, Any]]:
        try:
            await hub.start()
            await hub.wait_ready()
            return hub.report()
        finally:
            await hub.aclose()

    report = asyncio.run(run())
    if as_json:
        click.echo(json.dumps({"servers": report}, indent=2))
        return
    for line in hub.lines_of(report):
        click.echo(line)


COMMANDS = [mcp]
