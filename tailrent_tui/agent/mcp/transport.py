"""How tailrent talks to an MCP server: a stdio transport that bounds what it reads, and HTTP.

The SDK's own stdio client reads a line of any length into memory and hands
the session every line that is not JSON-RPC as an error. This one, written
for the same `ClientSession`, reads the server's stdout in chunks and:

- drops a message longer than `max_message_bytes` unread (a 1 GB result costs
  a counter, not a gigabyte), and says so through `Wire.on_oversize`, so the
  call it answered fails with a line instead of waiting for its timeout;
- ignores lines that are not JSON-RPC (a server that prints to stdout), counting
  them, the first one kept, shortened, for `tailrent mcp list`;
- reads stderr into a short tail (`Wire.stderr`), with the values of the
  server's environment and headers masked before anything can show or journal it.

The process runs in its own process group; on exit its stdin is closed, and
the group is sent SIGTERM, then SIGKILL, each after a short grace.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio

#: how long the server has to exit after its stdin closes, then after SIGTERM
EXIT_GRACE = 1.0
STDERR_LINES = 20
CHUNK = 64 * 1024


@dataclass
class Wire:
    """What the transport saw besides the messages: stderr, garbage, oversized messages."""

    secrets: list[str] = field(default_factory=list)
    stderr: deque[str] = field(default_factory=lambda: deque(maxlen=STDERR_LINES))
    garbage_lines: int = 0
    first_garbage: str | None = None
    oversized: int = 0
    on_oversize: Callable[[int], None] | None = None
    pid: int | None = None  # the server's process (and group) while it may run; None once it is reaped

    def mask(self, text: str) -> str:
        """`text` with every secret value replaced by `***`."""
        for secret in sorted(self.secrets, key=len, reverse=True):
            text = text.replace(secret, "***")
        return text

    def last_stderr(self) -> str | None:
        return self.stderr[-1] if self.stderr else None


def secret_values(values: Iterable[str]) -> list[str]:
    """The values worth masking: long enough not to mask ordinary words."""
    return [v for v in values if len(v) >= 6]


def _kill_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


async def _wait_exit(process: Any, seconds: float) -> bool:
    with anyio.move_on_after(seconds):
        while process.returncode is None:
            await anyio.sleep(0.02)
        return True
    return process.returncode is not None


async def stop_process(process: Any) -> None:
    """Close stdin, then SIGTERM, then SIGKILL the server's process group, each after a grace."""
    with anyio.CancelScope(shield=True):
        with contextlib.suppress(Exception):
            await process.stdin.aclose()
        if not await _wait_exit(process, EXIT_GRACE):
            _kill_group(process.pid, signal.SIGTERM)
            if not await _wait_exit(process, EXIT_GRACE):
                _kill_group(process.pid, signal.SIGKILL)
                await _wait_exit(process, EXIT_GRACE)


@asynccontextmanager
async def stdio_transport(
    argv: list[str],
    *,
    env: dict[str, str],
    cwd: str | None,
    wire: Wire,
    max_message_bytes: int,
    on_closed: Callable[[], None] | None = None,
) -> AsyncIterator[tuple[Any, Any]]:
    """Run the server and yield the (read, write) streams a ClientSession takes."""
    import mcp_types as types
    from mcp.shared.message import SessionMessage

    process = await anyio.open_process(
        argv,
        env=env,
        cwd=cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    wire.pid = process.pid
    read_send, read_recv = anyio.create_memory_object_stream[Any](0)
    write_send, write_recv = anyio.create_memory_object_stream[Any](0)

    def deliver_line(line: bytes) -> Any:
        try:
            return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
        except ValueError:
            wire.garbage_lines += 1
            if wire.first_garbage is None:
                wire.first_garbage = wire.mask(line[:120].decode("utf-8", "replace").strip())
            return None

    async def stdout_reader() -> None:
        assert process.stdout is not None
        buffer = bytearray()
        skipping = 0  # bytes of an oversized message dropped so far
        async with read_send:
            try:
                while True:
                    chunk = await process.stdout.receive(CHUNK)
                    start = 0
                    while True:
                        end = chunk.find(b"\n", start)
                        if end < 0:
                            piece = chunk[start:]
                            if skipping:
                                skipping += len(piece)
                            elif len(buffer) + len(piece) > max_message_bytes:
                                skipping = len(buffer) + len(piece)
                                buffer.clear()
                            else:
                                buffer += piece
                            break
                        piece = chunk[start:end]
                        start = end + 1
                        if skipping:
                            total, skipping = skipping + len(piece), 0
                            wire.oversized += 1
                            if wire.on_oversize is not None:
                                wire.on_oversize(total)
                            continue
                        if len(buffer) + len(piece) > max_message_bytes:
                            total = len(buffer) + len(piece)
                            buffer.clear()
                            wire.oversized += 1
                            if wire.on_oversize is not None:
                                wire.on_oversize(total)
                            continue
                        buffer += piece
                        line, buffer = bytes(buffer), bytearray()
                        if not line.strip():
                            continue
                        message = deliver_line(line)
                        if message is not None:
                            await read_send.send(message)
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                pass
            finally:
                if on_closed is not None:
                    on_closed()  # the server is gone (or stopping): its link wakes to say so

    async def stderr_reader() -> None:
        assert process.stderr is not None
        pending = b""
        with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            while True:
                pending += await process.stderr.receive(CHUNK)
                *lines, pending = pending.split(b"\n")
                pending = pending[-4096:]
                for raw in lines:
                    text = raw[:500].decode("utf-8", "replace").strip()
                    if text:
                        wire.stderr.append(wire.mask(text))

    async def stdin_writer() -> None:
        assert process.stdin is not None
        try:
            async with write_recv:
                async for message in write_recv:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await process.stdin.send((data + "\n").encode("utf-8"))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await read_send.aclose()

    async with anyio.create_task_group() as tg:
        tg.start_soon(stdout_reader)
        tg.start_soon(stderr_reader)
        tg.start_soon(stdin_writer)
        try:
            yield read_recv, write_send
        finally:
            await stop_process(process)
            if process.returncode is not None:
                wire.pid = None  # reaped: its number may be another process's from now on
            tg.cancel_scope.cancel()
            for stream in (read_recv, write_send, read_send, write_recv):
                with contextlib.suppress(Exception):
                    await stream.aclose()


class TooLarge(Exception):
    """An HTTP answer that says it is longer than mcp.max_message_bytes: refused before it is read."""


def http_client(headers: dict[str, str], max_message_bytes: int) -> Any:
    """The HTTP client for a streamable-HTTP server, with its headers; redirects are not followed
    (the SDK follows one only within the endpoint's origin, and fails the message otherwise). A
    response whose Content-Length passes `max_message_bytes` is refused unread; an SSE event is
    bounded by the SDK (`max_sse_event_size`, given the same bound)."""
    import httpx2

    async def bounded(response: Any) -> None:
        length = response.headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > max_message_bytes:
            await response.aclose()
            raise TooLarge(f"an answer of {int(length):,} bytes, over mcp.max_message_bytes ({max_message_bytes:,})")

    return httpx2.AsyncClient(
        headers=headers,
        follow_redirects=False,
        timeout=httpx2.Timeout(30.0, read=300.0),
        event_hooks={"response": [bounded]},
    )
