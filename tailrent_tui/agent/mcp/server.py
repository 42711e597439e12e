"""One MCP server's life: started in the background, its tools listed, restarted once, stopped.

`ServerLink.run` is the task that owns the connection (the SDK's context
managers are entered and left in it): it starts the server, initializes,
lists the tools, and then waits until it is stopped or the server goes away.
A server that goes away after it was ready is started again once; a second
loss, or a failure to start, leaves it `failed` with one line saying why
(`problem`), never an exception. `call` runs one tools/call against the live
session with the call's timeout; it is what the registered tools await.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, Literal

from tailrent_tui.agent.mcp.config import Launch, MissingVariable, launch_for
from tailrent_tui.agent.mcp.transport import Wire, http_client, secret_values, stdio_transport
from tailrent_tui.agent.tools.base import fmt_bytes
from tailrent_tui.settings import McpServer, McpSettings

State = Literal["starting", "ready", "restarting", "failed", "stopped", "disabled", "off"]
MAX_PAGES = 20


class Dropped(Exception):
    """The server's answer was longer than mcp.max_message_bytes and was dropped unread."""


class CallFailed(Exception):
    """One line for the model: why a call did not come back."""


def _first_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_first_line(e) for e in exc.exceptions[:2])
    return text or type(exc).__name__


class ServerLink:
    """A configured server and, while it runs, its session and tools."""

    def __init__(
        self,
        name: str,
        config: McpServer,
        origin: str,
        *,
        settings: McpSettings,
        workspace: Path,
        on_change: Callable[[ServerLink, str | None], None],
    ) -> None:
        self.name = name
        self.config = config
        self.origin = origin
        self.settings = settings
        self.workspace = workspace
        self.on_change = on_change
        self.state: State = "off" if not config.enabled else "starting"
        self.problem: str | None = None
        self.tools: list[Any] = []
        self.tools_seen = False  # it was ready once: a loss from now on is a death, restarted once
        self.restarts = 0
        self.wire = Wire()
        self.session: Any = None
        self._wake = asyncio.Event()
        self._stopping = False
        self._task: asyncio.Task[None] | None = None
        self._pending: set[asyncio.Future[int]] = set()

    @property
    def startup_timeout(self) -> float:
        return self.config.startup_timeout or self.settings.startup_timeout

    @property
    def _timeout_key(self) -> str:
        return f"mcp.servers.{self.name}.startup_timeout" if self.config.startup_timeout else "mcp.startup_timeout"

    @property
    def transport(self) -> str:
        return self.config.transport

    # -- the life --------------------------------------------------------------------

    def start(self) -> None:
        if self._task is None and self.config.enabled:
            self._task = asyncio.create_task(self.run(), name=f"mcp server {self.name}")

    async def run(self) -> None:
        ever_ready = False
        while not self._stopping:
            self._wake.clear()
            why = await self._connect_once()
            ever_ready = ever_ready or self.tools_seen
            if self._stopping:
                break
            if ever_ready and self.restarts == 0:
                self.restarts += 1
                self._set("restarting", f"{why}; starting it again (once)")
                continue
            self._set("failed", why)
            return
        self._set("stopped" if self.state != "disabled" else "disabled", None)

    async def _connect_once(self) -> str:
        """Run one connection until it ends; why it ended, in one line."""
        try:
            launch = launch_for(self.config, self.workspace)
        except MissingVariable as exc:
            return str(exc)
        self.wire = Wire(secrets=secret_values(launch.secrets), on_oversize=self._oversize)
        if (
            launch.argv
            and shutil.which(launch.argv[0], path=launch.env.get("PATH")) is None
            and not os.path.isfile(launch.argv[0])
        ):
            return f"command {launch.argv[0]!r} not found (PATH or the path given); check mcp.servers.{self.name}.command"
        try:
            async with AsyncExitStack() as stack:
                session = await self._open(stack, launch)
                try:
                    tools = await asyncio.wait_for(self._initialize(session), self.startup_timeout)
                except TimeoutError:
                    return (
                        f"did not answer initialize and tools/list within {self.startup_timeout:g} s "
                        f"({self._timeout_key})" + self._stderr_hint()
                    )
                self.session, self.tools, self.tools_seen = session, tools, True
                self._set("ready", None)
                await self._wake.wait()
                self.session = None
                return self._gone_why()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # whatever the server does, the session goes on: one line
            return self._describe(exc)
        finally:
            self.session = None

    async def _open(self, stack: AsyncExitStack, launch: Launch) -> Any:
        from mcp import ClientSession

        if self.config.command is not None:
            read, write = await stack.enter_async_context(
                stdio_transport(
                    launch.argv,
                    env=launch.env,
                    cwd=launch.cwd,
                    wire=self.wire,
                    max_message_bytes=self.settings.max_message_bytes,
                    on_closed=self._wake.set,
                )
            )
        else:
            from mcp.client.streamable_http import streamable_http_client

            assert launch.url is not None
            bound = self.settings.max_message_bytes
            client = await stack.enter_async_context(http_client(launch.headers, bound))
            read, write = await stack.enter_async_context(
                streamable_http_client(launch.url, http_client=client, max_sse_event_size=bound)
            )
        return await stack.enter_async_context(ClientSession(read, write))

    async def _initialize(self, session: Any) -> list[Any]:
        from mcp_types import PaginatedRequestParams

        await session.initialize()
        tools: list[Any] = []
        cursor = None
        for _ in range(MAX_PAGES):
            page = await session.list_tools(params=PaginatedRequestParams(cursor=cursor) if cursor else None)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        return tools

    def _gone_why(self) -> str:
        if self._stopping:
            return "stopped"
        return f"exited{self._stderr_hint()}"

    def _stderr_hint(self) -> str:
        last = self.wire.last_stderr()
        return f" (its last words on stderr: {last[:160]})" if last else ""

    def _describe(self, exc: BaseException) -> str:
        text = self.wire.mask(_first_line(exc))
        if self.config.url is not None and ("redirect" in text.lower() or "location" in text.lower()):
            return f"refused: {self.config.url} redirects elsewhere ({text[:200]}); point url at the server itself"
        if isinstance(exc, FileNotFoundError | PermissionError):
            return f"cannot run {self.config.command!r}: {exc.strerror}"
        return f"{text[:240]}{self._stderr_hint()}"

    def _set(self, state: State, problem: str | None) -> None:
        self.state = state
        self.problem = self.wire.mask(problem) if problem else None
        self.on_change(self, self.problem)

    async def stop(self) -> None:
        """Stop the server and wait for its process to be gone (bounded by the transport's graces)."""
        self._stopping = True
        self._wake.set()
        task = self._task
        if task is not None and not task.done():
            try:
                await asyncio.wait_for(asyncio.shield(task), 6.0)
            except (TimeoutError, asyncio.CancelledError):
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
        self.kill_now()

    def kill_now(self) -> None:
        """The last resort at exit, without a loop: kill the server's process group if it still runs
        (a reaped server's number is forgotten, so no other process is ever sent the signal)."""
        import signal

        pid = self.wire.pid
        if pid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
                os.killpg(pid, signal.SIGKILL)

    # -- calls -----------------------------------------------------------------------

    def _lost(self) -> None:
        """The connection is gone: no call goes to it any more; the run loop says so and reconnects once."""
        self.session = None
        if self.state == "ready" and self.restarts == 0:
            self.state = "restarting"  # said by the run loop's note when it starts again
        self._wake.set()

    def _oversize(self, nbytes: int) -> None:
        for future in list(self._pending):
            if not future.done():
                future.set_result(nbytes)

    async def call(self, tool: str, arguments: dict[str, Any], shown: str) -> Any:
        """tools/call on the live session; CallFailed says, in one line, why nothing came back."""
        from mcp.shared.exceptions import MCPError

        session = self.session
        if session is None or self.state != "ready":
            state = self.state if self.state != "ready" else "gone (its connection closed)"
            raise CallFailed(f"server {self.name} is {state}{': ' + self.problem if self.problem else ''}")
        loop = asyncio.get_running_loop()
        dropped: asyncio.Future[int] = loop.create_future()
        self._pending.add(dropped)
        inner = asyncio.ensure_future(session.call_tool(tool, arguments))
        timeout = self.config.timeout
        try:
            done, _ = await asyncio.wait({inner, dropped}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._pending.discard(dropped)
            if not inner.done():
                inner.cancel()
        if inner in done:
            try:
                return inner.result()
            except MCPError as exc:
                if exc.code == -32000 or "closed" in exc.message.lower():  # CONNECTION_CLOSED
                    self._lost()
                    if self.config.url is not None:
                        raise CallFailed(
                            f"the connection to server {self.name} closed during the call (the server stopped, or "
                            f"its answer passed mcp.max_message_bytes, {fmt_bytes(self.settings.max_message_bytes)}); "
                            "tailrent connects again once"
                        ) from None
                    raise CallFailed(
                        f"server {self.name} went away during the call{self._stderr_hint()}; "
                        "tailrent starts it again once: try the call again"
                    ) from None
                raise CallFailed(f"{shown}: the server answered with an error: {self.wire.mask(exc.message)[:400]}") from None
            except Exception as exc:  # a transport fault is the call's failure, not the session's
                if self.config.url is not None:
                    self._lost()  # an HTTP server that stopped answering: reconnect once
                raise CallFailed(f"{shown} failed: {self._describe(exc)}") from None
        if dropped in done:
            raise CallFailed(
                f"server {self.name} answered with a message of {fmt_bytes(dropped.result())}, over "
                f"mcp.max_message_bytes ({fmt_bytes(self.settings.max_message_bytes)}): it was dropped unread; "
                "ask the tool for less"
            )
        raise CallFailed(f"{shown} did not answer within {timeout:g} s (mcp.servers.{self.name}.timeout): the call was abandoned")
