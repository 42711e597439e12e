"""MCP tool servers: their tools are tailrent tools (see hub.py), their config is `[mcp]` (config.py).

`hub_for` builds a session's hub from the settings; nothing here imports the
mcp SDK until a server starts (it costs ~0.7 s to import), so a session with
no server configured pays nothing, and one with servers draws its first
frame before they come up.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tailrent_tui.agent.mcp.config import ServerEntry, server_entries
from tailrent_tui.agent.mcp.hub import McpHub
from tailrent_tui.settings import Settings

__all__ = ["McpHub", "ServerEntry", "hub_for", "run_once", "server_entries"]


def hub_for(settings: Settings, sources: dict[str, str] | None, workspace: Path, session: Any = None) -> McpHub:
    """The hub of the servers the settings (and, when opted in, the workspace's .mcp.json) name.

    With a session, its notes carry the servers' lines and its head counts their schema tokens.
    """
    origin = (sources or {}).get("mcp", "config")
    entries = server_entries(settings.mcp, origin, workspace)
    if session is None:
        return McpHub(entries, settings.mcp, workspace)

    def on_schema(delta: int) -> None:
        session.tool_schema_tokens = max(0, session.tool_schema_tokens + delta)

    return McpHub(
        entries,
        settings.mcp,
        workspace,
        note=lambda text, level: session.note(text, level),
        count=session.count,
        on_schema=on_schema,
    )


def run_once(settings: Settings, workspace: Path, server: str, name: str, raw_args: Any, ctx: Any) -> Any:
    """`tailrent tool NAME__tool ARGS`: start that one server, run the call through the registry's
    door, stop it. A server that cannot start is the call's one-line error."""
    import asyncio

    from tailrent_tui.agent.tools import run_tool_async
    from tailrent_tui.agent.tools.base import error

    one = settings.model_copy(update={"mcp": settings.mcp.model_copy(update={"servers": {server: settings.mcp.servers[server]}})})
    hub = hub_for(one, None, workspace)
    done: list[Any] = []

    async def run() -> None:
        try:
            await hub.start()
            await hub.wait_ready()
            failures = hub.failures()
            done.append(error(f"mcp: {failures[0]}") if failures else await run_tool_async(name, raw_args, ctx))
        finally:
            await hub.aclose()

    asyncio.run(run())
    return done[0]
