"""A session's MCP servers, and their tools in the one tool registry.

When a server is ready its tools are registered as `NAME__tool` (the schema
as the server gave it), each a coroutine tool that calls the server: the
agent runs it through the same door as a built-in (`run_tool_async`: the
argument check, cancellation), the same approvals (`needs_approval` unless
the server is trusted), and admits its outcome through rung 2. A tool whose
name is taken by a built-in, whose name cannot be sent, or whose schema is
not a valid JSON schema of an object is left out with a line saying why.

Every change of a server's state is one note in the session (so in the
transcript and the journal), with the server's secrets masked. The schema
tokens of the servers' tools are added to the session's head while they are
offered, and counted apart (`schema_tokens`) for the Tail panel and `/mcp`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tailrent_tui.agent.mcp.config import ServerEntry
from tailrent_tui.agent.mcp.results import to_outcome
from tailrent_tui.agent.mcp.server import CallFailed, ServerLink
from tailrent_tui.agent.tools import TOOLS, ToolContext, ToolOutcome, ToolSpec, register, unregister
from tailrent_tui.agent.tools.base import error
from tailrent_tui.settings import McpSettings

SEPARATOR = "__"
_WIRE_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def schema_problem(schema: Any) -> str | None:
    """Why a tool's input schema cannot be offered (None: it can, as given)."""
    if not isinstance(schema, dict):
        return "its input schema is not a JSON object"
    if schema.get("type", "object") != "object":
        return f"its input schema has type {schema.get('type')!r}, not object"
    from jsonschema import SchemaError, validators  # type: ignore[import-untyped]

    try:
        validators.validator_for(schema).check_schema(schema)
    except SchemaError as exc:
        return f"its input schema is not valid JSON Schema ({exc.message[:120]})"
    props = schema.get("properties", {})
    if not isinstance(props, dict) or not all(isinstance(p, dict) for p in props.values()):
        return "its input schema's properties are not objects"
    return None


class McpHub:
    """The servers of one session: their life, their tools, what they cost."""

    def __init__(
        self,
        entries: list[ServerEntry],
        settings: McpSettings,
        workspace: Path,
        *,
        note: Callable[[str, str], None] = lambda text, level: None,
        count: Callable[[str], int] = lambda text: len(text) // 4,
        on_schema: Callable[[int], None] = lambda delta: None,
    ) -> None:
        self.settings = settings
        self.note = note
        self.count = count
        self.on_schema = on_schema
        self.problems: dict[str, str] = {}  # a server whose config could not be read
        self.links: dict[str, ServerLink] = {}
        self.origins: dict[str, str] = {}
        self.registered: dict[str, list[str]] = {}  # server -> the names it registered
        self.skipped: dict[str, list[str]] = {}  # server -> one line per tool left out
        self._tokens: dict[str, int] = {}
        self.started = False
        for entry in entries:
            self.origins[entry.name] = entry.origin
            if entry.config is None:
                self.problems[entry.name] = entry.problem or "cannot read its config"
                continue
            self.links[entry.name] = ServerLink(
                entry.name, entry.config, entry.origin, settings=settings, workspace=workspace, on_change=self._changed
            )

    def __bool__(self) -> bool:
        return bool(self.links or self.problems)

    # -- the life --------------------------------------------------------------------

    async def start(self) -> None:
        """Start every enabled server in the background (the mcp SDK is imported in a thread first,
        so the caller's loop keeps drawing)."""
        if self.started:
            return
        self.started = True
        for name, problem in self.problems.items():
            self.note(f"mcp: {name}: {problem}", "warning")
        if not self.links:
            return
        import importlib

        try:
            await asyncio.to_thread(importlib.import_module, "mcp")
        except ImportError as exc:
            for link in self.links.values():
                link.state, link.problem = "failed", f"the mcp package cannot be imported ({exc}): pip install mcp"
                self.note(f"mcp: {link.name} failed: {link.problem}", "warning")
            return
        for link in self.links.values():
            link.start()

    async def wait_ready(self, timeout: float | None = None) -> None:
        """Until every started server is ready, failed or off (`ask`, `mcp list`)."""
        slowest = max([link.startup_timeout for link in self.links.values()], default=0.0)
        limit = timeout if timeout is not None else slowest + 5

        async def settled() -> None:
            while any(link.state in ("starting", "restarting") for link in self.links.values() if link.config.enabled):
                await asyncio.sleep(0.02)

        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(settled(), limit)

    async def settle(self, say: Callable[[str, str], None] | None = None) -> None:
        """Before a request: start the servers if nothing has yet (a message sent before the app's
        first frame had started them), and wait for those still starting (up to their startup
        timeouts), so their tools are offered; said in one line. Nothing to wait for once they are
        up or failed."""
        waiting = [n for n, link in self.links.items() if link.state in ("starting", "restarting") and link.config.enabled]
        if not waiting:
            return
        await self.start()
        if say is not None:
            say(f"waiting for MCP server(s) {', '.join(waiting)} to start before the request", "info")
        await self.wait_ready()

    async def aclose(self) -> None:
        """Stop every server; their tools leave the registry."""
        await asyncio.gather(*(link.stop() for link in self.links.values()), return_exceptions=True)
        for name in list(self.registered):
            self._withdraw(name)

    def kill_now(self) -> None:
        """At exit without a loop: kill what still runs, withdraw the tools."""
        for link in self.links.values():
            link.kill_now()
        for name in list(self.registered):
            self._withdraw(name)

    # -- the session's choices -------------------------------------------------------------

    async def disable(self, name: str) -> str:
        """Stop a server for the rest of the session; its tools leave the next request. The line is noted too."""
        line = await self._disable(name)
        self.note(f"mcp: {line}", "info")
        return line

    def enable(self, name: str) -> str:
        """Start a disabled server again. The line is noted too."""
        line = self._enable(name)
        self.note(f"mcp: {line}", "info")
        return line

    async def _disable(self, name: str) -> str:
        link = self.links.get(name)
        if link is None:
            return f"no MCP server {name!r}; /mcp lists them"
        if link.state == "disabled":
            return f"{name} is already disabled for this session"
        tokens = self._tokens.get(name, 0)
        count = len(self.registered.get(name, []))
        link.state = "disabled"
        self._withdraw(name)
        await link.stop()
        link.state = "disabled"
        return (
            f"{name} disabled for this session: its {count} tool(s) leave the context at the next request, "
            f"~{tokens:,} tokens fewer in every request's head (the next request re-reads the context once: "
            "the tool list changed)"
        )

    def _enable(self, name: str) -> str:
        link = self.links.get(name)
        if link is None:
            return f"no MCP server {name!r}; /mcp lists them"
        if link.state != "disabled":
            return f"{name} is {link.state}, not disabled"
        fresh = ServerLink(
            name, link.config, link.origin, settings=self.settings, workspace=link.workspace, on_change=self._changed
        )
        self.links[name] = fresh
        fresh.start()
        return f"{name} is starting again; its tools come back when it is ready"

    # -- tools -----------------------------------------------------------------------

    def _changed(self, link: ServerLink, problem: str | None) -> None:
        if link is not self.links.get(link.name):
            return  # a link replaced by /mcp enable
        if link.state == "ready":
            added = self._offer(link)
            self.note(
                f"mcp: {link.name} ready: {added} tool(s), ~{self._tokens.get(link.name, 0):,} schema tokens per request",
                "info",
            )
            for line in self.skipped.get(link.name, []):
                self.note(f"mcp: {link.name}: {line}", "warning")
        elif link.state == "restarting":
            self.note(f"mcp: {link.name} {problem}", "warning")
        elif link.state == "failed":
            self._withdraw(link.name)
            self.note(f"mcp: {link.name} failed: {problem}; the session goes on without it", "warning")
        elif link.state in ("stopped", "disabled"):
            self._withdraw(link.name)

    def _offer(self, link: ServerLink) -> int:
        self._withdraw(link.name)
        names: list[str] = []
        skipped: list[str] = []
        for tool in link.tools:
            full = f"{link.name}{SEPARATOR}{tool.name}"
            why = None
            if not _WIRE_NAME.fullmatch(full):
                why = f"tool {tool.name!r} left out: {full!r} is not a name a model can call (letters, digits, _ and -, up to 64)"
            elif full in TOOLS and full not in names:
                why = f"tool {tool.name!r} refused: {full} is the name of a built-in tool; rename the server"
            elif problem := schema_problem(tool.input_schema):
                why = f"tool {tool.name!r} left out: {problem}"
            if why:
                skipped.append(why)
                continue
            spec = ToolSpec(
                name=full,
                description=f"[{link.name}] {tool.description or tool.name}",
                parameters=tool.input_schema,
                needs_approval=not link.config.trust,
            )
            register(spec, self._runner(link.name, tool.name, full))
            names.append(full)
        self.registered[link.name] = names
        self.skipped[link.name] = skipped
        tokens = self.count(json.dumps(_wire([TOOLS[n].spec for n in names]))) if names else 0
        self._tokens[link.name] = tokens
        self.on_schema(tokens)
        return len(names)

    def _withdraw(self, name: str) -> None:
        for full in self.registered.pop(name, []):
            unregister(full)
        tokens = self._tokens.pop(name, 0)
        if tokens:
            self.on_schema(-tokens)

    def _runner(self, server: str, tool: str, full: str) -> Callable[[dict[str, Any], ToolContext], Any]:
        async def run(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
            link = self.links.get(server)
            if link is None:
                return error(f"server {server} is not configured")
            try:
                result = await link.call(tool, args, full)
            except CallFailed as exc:
                return error(str(exc))
            return to_outcome(full, result, ctx, self.settings.max_result_bytes)

        return run

    # -- what it costs, what it says -------------------------------------------------------

    def failures(self) -> list[str]:
        """One line per server that could not start."""
        out = [f"{name}: {problem}" for name, problem in self.problems.items()]
        return out + [f"{n}: {link.problem}" for n, link in self.links.items() if link.state == "failed"]

    def schema_tokens(self) -> dict[str, int]:
        """Schema tokens each ready server's tools add to every request."""
        return {name: n for name, n in self._tokens.items() if n}

    def report(self) -> list[dict[str, Any]]:
        """Each server as `mcp list --json` shows it: state, transport, origin, tools, tokens, problem."""
        out: list[dict[str, Any]] = [
            {"name": name, "state": "failed", "problem": problem, "origin": self.origins.get(name, ""), "tools": []}
            for name, problem in self.problems.items()
        ]
        for name, link in self.links.items():
            tools = [
                {"name": full, "description": TOOLS[full].spec.description.removeprefix(f"[{name}] ")}
                for full in self.registered.get(name, [])
                if full in TOOLS
            ]
            out.append(
                {
                    "name": name,
                    "state": link.state,
                    "problem": link.problem,
                    "origin": self.origins.get(name, ""),
                    "transport": link.transport,
                    "trusted": link.config.trust,
                    "tools": tools,
                    "skipped": list(self.skipped.get(name, [])),
                    "schema_tokens": self._tokens.get(name, 0),
                    "stdout_garbage_lines": link.wire.garbage_lines,
                    "restarts": link.restarts,
                }
            )
        return out

    def lines(self) -> list[str]:
        return self.lines_of(self.report())

    @staticmethod
    def lines_of(report: list[dict[str, Any]]) -> list[str]:
        """One line a server (state, transport, tools, tokens, where it came from), its tools under it."""
        out: list[str] = []
        for s in report:
            kind = s.get("transport", "")
            if s["state"] == "ready":
                trust = ", trusted" if s.get("trusted") else ""
                head = (
                    f"{s['name']}  ready  {kind}{trust}  {len(s['tools'])} tool(s), "
                    f"~{s['schema_tokens']:,} schema tokens  ({s['origin']})"
                )
            else:
                why = f": {s['problem']}" if s.get("problem") else ""
                head = f"{s['name']}  {s['state']}{why}  {kind}  ({s['origin']})".replace("   ", "  ")
            if s.get("stdout_garbage_lines"):
                head += f"  [{s['stdout_garbage_lines']} non-JSON-RPC line(s) on stdout ignored]"
            out.append(head)
            for tool in s["tools"]:
                desc = (tool["description"].splitlines() or [""])[0]
                out.append(f"    {tool['name']}  {desc[:80]}")
            out.extend(f"    {line}" for line in s.get("skipped", []))
        return out


def _wire(specs: list[ToolSpec]) -> list[dict[str, Any]]:
    from tailrent_tui.models.base import wire_tools

    return wire_tools([s.to_wire() for s in specs])
