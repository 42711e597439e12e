"""What the HTTP backends share: one httpx client, timeouts, and error mapping.

Every httpx failure and every error status becomes a ``ModelError`` subclass with a
message the user can act on. Streams are opened with ``open_stream``, an async
context manager: leaving it (normally, by an error, or because the consuming task
was cancelled) closes the response at once, which drops the connection so the
server stops generating.

Streams are read as bytes and decoded here, incrementally and always as UTF-8
(``iter_lines``): a character split across two reads is joined, whatever
charset the server claims. A redirect is reported with where it points, never
followed: the request and its key go only where the user sent them.
"""

from __future__ import annotations

import codecs
import json
import math
import time
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from .base import Chunk, ToolSpec, Usage, WireMessage
from .errors import (
    Busy,
    ConnectionRefused,
    ModelError,
    ReadTimeout,
    Redirected,
    ServerError,
    ServerUnavailable,
    StreamCut,
    ToolsUnsupported,
)

DEFAULT_CONNECT_TIMEOUT = 5.0
# A local model may take a minute to load and then evaluate a long prompt before
# its first token; a shorter read timeout would call a busy server stalled.
DEFAULT_READ_TIMEOUT = 300.0
#: the longest wait a ``Retry-After`` header is believed for; past it, a day is said
RETRY_AFTER_MAX = 86400.0


def error_text(body: bytes) -> str:
    """The error text of a body: Ollama ``{"error": str}``, OpenAI ``{"error": {"message": ...}}``."""
    try:
        data = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return body.decode("utf-8", "replace").strip()[:300]
    if isinstance(data, dict):
        err = data.get("error", data.get("message"))
        if isinstance(err, dict):
            err = err.get("message", json.dumps(err))
        if err is not None:
            return str(err)
    return json.dumps(data)[:300]


def retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds from a ``Retry-After`` header (delay-seconds or an HTTP date); None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    if math.isnan(seconds):
        return None
    return float(min(max(0, round(seconds)), RETRY_AFTER_MAX))


async def iter_lines(response: httpx.Response) -> AsyncIterator[str]:
    """The lines of a streamed body, decoded as UTF-8 across reads (``\n`` or ``\r\n`` ends a line)."""
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    pending = ""
    async for data in response.aiter_bytes():
        pending += decoder.decode(data)
        *lines, pending = pending.split("\n")
        for line in lines:
            yield line.removesuffix("\r")
    pending += decoder.decode(b"", final=True)
    if pending:
        yield pending.removesuffix("\r")


def _caused_by(exc: BaseException, kind: type[BaseException]) -> bool:
    """Whether ``kind`` is anywhere in the exception's cause chain (httpx wraps the OS error)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, kind):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


class HttpBackend:
    """Base of the Ollama and OpenAI-compatible clients."""

    name: str
    backend_label = "model server"

    def __init__(
        self,
        base_url: str,
        *,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        read_timeout: float | None = DEFAULT_READ_TIMEOUT,
        headers: Mapping[str, str] | None = None,
        retry_without_tools: bool = True,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.retry_without_tools = retry_without_tools
        self.tools_dropped = False
        timeout = httpx.Timeout(connect=connect_timeout, read=read_timeout, write=connect_timeout, pool=connect_timeout)
        self._client = httpx.AsyncClient(timeout=timeout, headers=dict(headers or {}))

    async def aclose(self) -> None:
        await self._client.aclose()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # -- errors -----------------------------------------------------------------

    def unreachable_hint(self) -> str:
        return f"start the {self.backend_label} or check its address ({self.base_url})"

    def transport_error(self, exc: httpx.HTTPError) -> ModelError:
        """An httpx failure -> the ModelError the user sees."""
        if isinstance(exc, httpx.ConnectError):
            if _caused_by(exc, ConnectionRefusedError):
                return ConnectionRefused(f"nothing answers at {self.base_url}", self.unreachable_hint())
            return ServerUnavailable(f"cannot connect to {self.base_url}: {exc}", self.unreachable_hint())
        if isinstance(exc, httpx.ConnectTimeout | httpx.PoolTimeout | httpx.WriteTimeout):
            return ServerUnavailable(
                f"{self.base_url} did not accept the request within {self.connect_timeout:g} s",
                self.unreachable_hint(),
            )
        if isinstance(exc, httpx.ReadTimeout):
            return ReadTimeout(self.read_timeout)
        if isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError):
            return StreamCut(
                f"the connection to {self.base_url} closed before the reply ended ({exc})",
                "the server may have crashed or restarted; retry",
            )
        return ServerUnavailable(f"request to {self.base_url} failed: {exc}", self.unreachable_hint())

    def status_error(self, status: int, message: str, *, retry_after: float | None = None) -> ModelError:
        """An error status -> the ModelError the user sees. Backends refine this."""
        if status in (429, 503):
            return Busy(message or "server busy", status=status, retry_after=retry_after)
        return ServerError(status, message or f"HTTP {status}")

    def response_error(self, response: httpx.Response) -> ModelError:
        """A redirect or an error status (its body read) -> the ModelError the user sees."""
        if response.is_redirect or 300 <= response.status_code < 400:
            return Redirected(response.status_code, str(response.request.url), response.headers.get("location"))
        return self.status_error(
            response.status_code,
            error_text(response.content),
            retry_after=retry_after(response.headers.get("retry-after")),
        )

    # -- requests -----------------------------------------------------------------

    async def get_json(self, path: str, *, base: str | None = None) -> Any:
        """GET ``path`` under ``base`` (default: the API's base URL)."""
        return await self._request_json("GET", path, None, base)

    async def post_json(self, path: str, body: Any) -> Any:
        return await self._request_json("POST", path, body)

    async def _request_json(self, method: str, path: str, body: Any, base: str | None = None) -> Any:
        try:
            response = await self._client.request(method, (base or self.base_url) + path, json=body)
        except httpx.HTTPError as exc:
            raise self.transport_error(exc) from exc
        if response.status_code >= 300:
            raise self.response_error(response)
        try:
            return json.loads(response.content)
        except (ValueError, RecursionError):
            # not JSON, not UTF-8, or nested deeper than anyone means
            raise ServerError(response.status_code, f"{path} answered with something that is not JSON") from None

    @asynccontextmanager
    async def open_stream(self, path: str, body: Any) -> AsyncIterator[httpx.Response]:
        """POST ``body`` and hand over the streaming response; error statuses raise."""
        request = self._client.build_request("POST", self.base_url + path, json=body)
        try:
            response = await self._client.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise self.transport_error(exc) from exc
        try:
            if response.status_code >= 300:
                try:
                    await response.aread()
                except httpx.HTTPError as exc:
                    raise self.transport_error(exc) from exc
                raise self.response_error(response)
            yield response
        finally:
            await response.aclose()

    # -- streaming with the tools fallback ------------------------------------------

    async def stream(
        self,
        messages: Sequence[WireMessage],
        *,
        tools: Sequence[ToolSpec] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> AsyncIterator[Chunk]:
        """Stream one reply; the last item is a ``Usage``.

        Tools and models: when the server answers that the model does not support
        tools and ``retry_without_tools`` is on (the default), the request is sent
        again without tools, ``self.tools_dropped`` becomes True (later requests
        leave the tools out from the start) and the final ``Usage`` has
        ``tools_dropped=True`` so the agent can say so. With
        ``retry_without_tools=False``, ``ToolsUnsupported`` is raised instead.
        """
        offered = bool(tools)
        send = list(tools) if tools and not self.tools_dropped else None
        started = time.perf_counter()
        try:
            async for chunk in self._stream_once(messages, send, options, started):
                if isinstance(chunk, Usage) and offered and send is None:
                    chunk = chunk.model_copy(update={"tools_dropped": True})
                yield chunk
            return
        except ToolsUnsupported:
            if send is None or not self.retry_without_tools:
                raise
        self.tools_dropped = True
        async for chunk in self._stream_once(messages, None, options, started):
            if isinstance(chunk, Usage):
                chunk = chunk.model_copy(update={"tools_dropped": True})
            yield chunk

    def _stream_once(
        self,
        messages: Sequence[WireMessage],
        tools: Sequence[ToolSpec] | None,
        options: Mapping[str, Any] | None,
        started: float,
    ) -> AsyncGenerator[Chunk, None]:
        raise NotImplementedError


class StreamClock:
    """Client-side timings of one stream: to the first delta, and to the end."""

    def __init__(self, started: float) -> None:
        self.started = started
        self.first_ms: float | None = None

    def saw_delta(self) -> None:
        if self.first_ms is None:
            self.first_ms = (time.perf_counter() - self.started) * 1000.0

    def wall_ms(self) -> float:
        return (time.perf_counter() - self.started) * 1000.0
