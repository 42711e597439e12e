"""Ollama over its native API: ``/api/chat`` streamed as NDJSON, following
``reference/ollama-api.md``.

Two settings decide what the rent panel can promise:

- ``num_ctx`` is always sent in ``options``: the window the app budgets for must be
  the window the model really runs with, and Ollama's own default depends on the
  machine's VRAM (4k, 32k or 256k).
- ``keep_alive`` defaults to ``"24h"`` (``settings.DEFAULT_KEEP_ALIVE`` says why):
  for a local engine the cache TTL is what we ask for. Ollama unloads an idle model
  after 5 minutes by default, and an unload throws away the KV cache, so the next
  turn re-evaluates the whole context. People pause longer than five minutes all
  the time.

``preload`` loads the model before the first turn (an ``/api/chat`` with no
messages, which Ollama answers with ``done_reason: "load"`` once the model is in
memory), with the same ``num_ctx`` and ``keep_alive`` the turns send: a different
``num_ctx`` would make Ollama load the model again on the first turn.

Usage: Ollama reports ``prompt_eval_count``, the prompt tokens it actually
evaluated; tokens reused from its KV cache are not counted and the total is not
sent. So ``Usage.evaluated_tokens`` is exact while ``prompt_tokens`` and
``cached_tokens`` are ``None`` (``cache_reported`` False): the agent infers the
cached share as its own prompt count minus the evaluated count.
"""

from __future__ import annotations

import ipaddress
import os
import re
import time
import uuid
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any

import httpx
from pydantic import BaseModel, PositiveInt, TypeAdapter, ValidationError

from .base import (
    Chunk,
    ModelInfo,
    TextDelta,
    ThinkingDelta,
    ToolCallChunk,
    ToolSpec,
    Usage,
    WireMessage,
    check_wire_messages,
    parse_arguments,
    wire_tools,
)
from .errors import (
    Busy,
    Cancelled,
    EmptyReply,
    MalformedChunk,
    MalformedResponse,
    ModelError,
    ModelNotFound,
    ServerError,
    StreamCut,
    StreamError,
    ToolsUnsupported,
)
from .http import DEFAULT_CONNECT_TIMEOUT, DEFAULT_READ_TIMEOUT, HttpBackend, StreamClock, iter_lines
from .text import SurrogateJoiner
from .wire import OllamaChunk, OllamaMessage, OllamaTags, OllamaVersion, parse_json_line

DEFAULT_HOST = "http://127.0.0.1:11434"
DEFAULT_KEEP_ALIVE = "24h"  # the settings' default (settings.DEFAULT_KEEP_ALIVE), for callers without settings
# Used only when neither the Modelfile nor the running instance names a window:
# small enough to load on a laptop, large enough for a coding session's tail.
FALLBACK_NUM_CTX = 8192

# Neutral option names that Ollama spells differently.
_OPTION_NAMES = {"max_tokens": "num_predict"}


class BadHost(ValueError):
    """An ``OLLAMA_HOST`` that names no address; the message says what is wrong, in one line."""


def ollama_host(value: str | None = None) -> str:
    """The base URL for ``OLLAMA_HOST`` (or ``value``), read the way Ollama reads it.

    Accepts ``host``, ``host:port``, ``:port``, ``http://host:port``, ``https://host``
    and an optional path. Without a scheme: http and port 11434. With ``http://``
    and no port: 80; with ``https://``: 443. Empty: ``http://127.0.0.1:11434``.
    Anything else (a port that is not 1-65535, a host that is not a name or an
    address, credentials, another scheme) is a ``BadHost``.
    """
    raw = (os.environ.get("OLLAMA_HOST", "") if value is None else value).strip()
    if not raw:
        return DEFAULT_HOST
    shown = "OLLAMA_HOST=" + repr(_USERINFO.sub(r"\1***@", raw))
    example = "use host:port, e.g. 127.0.0.1:11434 or http://gpu-box:11434"
    default_port = "11434"
    if "://" in raw:
        scheme, rest = raw.split("://", 1)
        scheme = scheme.lower()
        if scheme not in ("http", "https"):
            raise BadHost(f"{shown}: the scheme must be http or https; {example}")
        default_port = {"http": "80", "https": "443"}[scheme]
    else:
        scheme, rest = "http", raw
    hostport, _, path = rest.partition("/")
    if "@" in hostport:
        raise BadHost(
            f"{shown} holds credentials, which Ollama's API does not take; remove them "
            "(for a server behind a login, use --model openai:URL with TAILRENT_API_KEY)"
        )
    host, port = _split_host_port(hostport)
    if not host:
        host = "127.0.0.1"
    if port is None or port == "":
        port = default_port
    elif not port.isascii() or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise BadHost(f"{shown}: the port {port!r} is not a number from 1 to 65535; {example}")
    if ":" in host:
        try:
            host = f"[{ipaddress.IPv6Address(host).compressed}]"
        except ValueError:
            raise BadHost(f"{shown}: {host!r} is neither a host name nor an IP address; {example}") from None
    elif not _HOST_NAME.fullmatch(host):
        raise BadHost(f"{shown}: {host!r} is neither a host name nor an IP address; {example}")
    base = f"{scheme}://{host}:{port}"
    return f"{base}/{path}".rstrip("/") if path else base


_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)?[^/@]*@")
_HOST_NAME = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?\.?")


def _split_host_port(hostport: str) -> tuple[str, str | None]:
    if hostport.startswith("["):
        host, _, rest = hostport[1:].partition("]")
        return host, rest[1:] if rest.startswith(":") else (rest or None)
    if hostport.count(":") == 1:
        host, port = hostport.split(":")
        return host, port
    # Zero colons: a bare host. Several: a bare IPv6 address.
    return hostport, None


def ollama_messages(messages: Sequence[WireMessage]) -> list[dict[str, Any]]:
    """Neutral messages -> Ollama's: arguments as objects, tool results named by ``tool_name``."""
    check_wire_messages(messages)
    out = []
    for m in messages:
        item: dict[str, Any] = {"role": m["role"], "content": m.get("content", "")}
        if m.get("tool_calls"):
            item["tool_calls"] = [{"function": {"name": c["name"], "arguments": c.get("arguments", {})}} for c in m["tool_calls"]]
        if m["role"] == "tool":
            if m.get("tool_name"):
                item["tool_name"] = m["tool_name"]
            if m.get("tool_call_id"):
                item["tool_call_id"] = m["tool_call_id"]
        out.append(item)
    return out


def ollama_options(options: Mapping[str, Any] | None) -> dict[str, Any]:
    return {_OPTION_NAMES.get(k, k): v for k, v in (options or {}).items()}


class _ShowWindow(BaseModel):
    """What ``/api/show`` says about the window: the Modelfile's parameters and the trained length."""

    parameters: str | None = None
    model_info: dict[str, Any] | None = None

    @property
    def num_ctx(self) -> int | None:
        for line in (self.parameters or "").splitlines():
            key, _, value = line.strip().partition(" ")
            if key == "num_ctx" and value.strip().isascii() and value.strip().isdigit() and int(value.strip()) > 0:
                return int(value.strip())
        return None

    @property
    def trained(self) -> int | None:
        """``<architecture>.context_length``; a ValidationError when it is not a positive number."""
        info = self.model_info or {}
        value = info.get(f"{info.get('general.architecture')}.context_length")
        return None if value is None else _POSITIVE.validate_python(value)


class _LoadedModel(BaseModel):
    name: str | None = None
    model: str | None = None
    context_length: PositiveInt | None = None


class _Running(BaseModel):
    """``/api/ps``: the models loaded now, each with the window it was loaded with."""

    models: list[_LoadedModel]


_POSITIVE = TypeAdapter(PositiveInt)


class OllamaModel(HttpBackend):
    """A chat model served by Ollama.

    ``num_ctx=None`` takes the window, once, from the server: the Modelfile's
    ``num_ctx`` (``/api/show`` parameters), else the window the model is loaded with
    now (``/api/ps``), else the smaller of its trained length and 8192. Whatever is
    chosen is then sent with every request.
    """

    kind = "ollama"
    backend_label = "Ollama server"

    def __init__(
        self,
        name: str,
        *,
        host: str | None = None,
        num_ctx: int | None = None,
        keep_alive: str | int = DEFAULT_KEEP_ALIVE,
        think: bool | None = None,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        read_timeout: float | None = DEFAULT_READ_TIMEOUT,
        retry_without_tools: bool = True,
    ) -> None:
        super().__init__(
            ollama_host(host),
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            retry_without_tools=retry_without_tools,
        )
        self.name = name
        self.num_ctx = num_ctx
        self.keep_alive = keep_alive
        self.think = think
        self._show: dict[str, Any] | None = None

    def unreachable_hint(self) -> str:
        return f"start Ollama (`ollama serve`) or set OLLAMA_HOST (now {self.base_url})"

    def status_error(self, status: int, message: str, *, retry_after: float | None = None) -> ModelError:
        if status == 404:
            return ModelNotFound(self.name, message or f"model '{self.name}' not found")
        if status == 400 and "does not support tools" in message:
            return ToolsUnsupported(message, f"{self.name} cannot call tools; pick a model that can")
        if status == 499:
            return Cancelled(message or "request canceled", "the server dropped the request; retry")
        if status in (429, 503):
            return Busy(message or "server busy", status=status, retry_after=retry_after)
        return ServerError(status, message or f"HTTP {status}")

    # -- information ------------------------------------------------------------------

    async def version(self) -> str:
        data = await self.get_json("/api/version")
        try:
            return OllamaVersion.model_validate(data).version
        except ValidationError as exc:
            raise MalformedResponse.invalid(f"{self.base_url}/api/version", exc) from None

    async def show(self) -> dict[str, Any]:
        """``/api/show`` for this model, fetched once; a MalformedResponse when it is not an object."""
        if self._show is None:
            data = await self.post_json("/api/show", {"model": self.name})
            if not isinstance(data, dict):
                raise MalformedResponse(f"{self.base_url}/api/show", f"a JSON object expected, got {type(data).__name__}")
            self._show = data
        return self._show

    async def running(self) -> list[dict[str, Any]]:
        data = await self.get_json("/api/ps")
        if not isinstance(data, dict):
            raise MalformedResponse(f"{self.base_url}/api/ps", f"a JSON object expected, got {type(data).__name__}")
        models = data.get("models")
        if models is not None and not isinstance(models, list):
            raise MalformedResponse(f"{self.base_url}/api/ps", f"models: a list expected, got {type(models).__name__}")
        return list(models or [])

    async def list_models(self) -> list[ModelInfo]:
        data = await self.get_json("/api/tags")
        try:
            tags = OllamaTags.model_validate(data)
        except ValidationError as exc:
            raise MalformedResponse.invalid(f"{self.base_url}/api/tags", exc) from None
        out = []
        for m in tags.models or []:
            details = m.details
            out.append(
                ModelInfo(
                    name=m.name or m.model or "",
                    family=details.family if details else None,
                    parameter_size=details.parameter_size if details else None,
                    quantization=details.quantization_level if details else None,
                    size=m.size,
                    raw=m.model_dump(exclude_unset=True),
                )
            )
        return out

    async def context_window(self) -> int | None:
        if self.num_ctx is None:
            self.num_ctx = await self._resolve_window()
        return self.num_ctx

    async def _resolve_window(self) -> int:
        try:
            show = _ShowWindow.model_validate(await self.show())
        except ValidationError as exc:
            raise MalformedResponse.invalid(f"{self.base_url}/api/show", exc) from None
        if show.num_ctx is not None:
            return show.num_ctx
        try:
            loaded = _Running.model_validate({"models": await self.running()}).models
        except ValidationError as exc:
            raise MalformedResponse.invalid(f"{self.base_url}/api/ps", exc) from None
        for m in loaded:
            if self.name in (m.name, m.model) and m.context_length:
                return m.context_length
        try:
            trained = show.trained
        except ValidationError as exc:
            reason = f"model_info's context_length: {exc.errors()[0]['msg']}"
            raise MalformedResponse(f"{self.base_url}/api/show", reason) from None
        return min(trained, FALLBACK_NUM_CTX) if trained else FALLBACK_NUM_CTX

    # -- loading ---------------------------------------------------------------------

    async def preload(self, num_ctx: int | None = None) -> float:
        """Load the model into memory now; the seconds it took (near 0 when it was loaded).

        An ``/api/chat`` with no messages loads the model with this ``num_ctx`` and
        ``keep_alive`` and answers ``done`` with ``done_reason: "load"``. Raises
        ``ModelError`` as a turn would (``ModelNotFound`` for a model not pulled).
        """
        started = time.perf_counter()
        body = {
            "model": self.name,
            "messages": [],
            "stream": False,
            "options": {"num_ctx": num_ctx or await self.context_window()},
            "keep_alive": self.keep_alive,
        }
        data = await self.post_json("/api/chat", body)
        where = f"{self.base_url}/api/chat"
        try:
            answer = OllamaChunk.model_validate(data)
        except ValidationError as exc:
            raise MalformedResponse.invalid(where, exc) from None
        if answer.error is not None:
            raise StreamError(f"the model server could not load {self.name}: {answer.error}", "check the Ollama server's log")
        if not answer.done:
            raise MalformedResponse(where, "a load request answered without done: true")
        return time.perf_counter() - started

    # -- chat ------------------------------------------------------------------------

    async def _stream_once(
        self,
        messages: Sequence[WireMessage],
        tools: Sequence[ToolSpec] | None,
        options: Mapping[str, Any] | None,
        started: float,
    ) -> AsyncGenerator[Chunk, None]:
        body: dict[str, Any] = {
            "model": self.name,
            "messages": ollama_messages(messages),
            "stream": True,
            # the caller's num_ctx (the agent budgets its window) spares asking the server
            "options": {
                "num_ctx": (options or {}).get("num_ctx") or await self.context_window(),
                **ollama_options(options),
            },
            "keep_alive": self.keep_alive,
        }
        if tools:
            body["tools"] = wire_tools(tools)
        if self.think is not None:
            body["think"] = self.think
        clock = StreamClock(started)
        text, thinking = SurrogateJoiner(), SurrogateJoiner()
        said = False  # any text, thinking or tool call
        async with self.open_stream("/api/chat", body) as response:
            number = 0
            try:
                async for line in iter_lines(response):
                    number += 1
                    if not line.strip():
                        continue
                    try:
                        data = OllamaChunk.model_validate(parse_json_line(line))
                    except ValueError as exc:
                        if isinstance(exc, ValidationError):
                            raise MalformedChunk.invalid(line, number, exc) from None
                        raise MalformedChunk(line, number, f"not JSON ({getattr(exc, 'msg', exc)})") from None
                    if data.error is not None:
                        raise StreamError(
                            f"the model server reported an error mid-reply: {data.error}",
                            "the partial reply is kept; retry",
                        )
                    for chunk in self._deltas(data.message or OllamaMessage(), text, thinking, final=data.done):
                        said = True
                        clock.saw_delta()
                        yield chunk
                    if data.done:
                        if not said and data.done_reason in (None, "load", "unload"):
                            raise EmptyReply(
                                "the server said the reply was done before sending any of it"
                                + (f" (done_reason {data.done_reason!r})" if data.done_reason else ""),
                                "retry; if it repeats, check the Ollama server's log",
                            )
                        yield self._usage(data, clock)
                        return
            except httpx.HTTPError as exc:
                raise self.transport_error(exc) from exc
        raise StreamCut(
            "the reply ended before the server said it was done",
            "the server may have crashed or restarted; the partial reply is kept; retry",
        )

    def _deltas(self, message: OllamaMessage, text: SurrogateJoiner, thinking: SurrogateJoiner, *, final: bool) -> list[Chunk]:
        out: list[Chunk] = []
        reasoning = thinking.feed(message.thinking or "") + (thinking.flush() if final else "")
        if reasoning:
            out.append(ThinkingDelta(text=reasoning))
        content = text.feed(message.content or "") + (text.flush() if final else "")
        if content:
            out.append(TextDelta(text=content))
        for position, call in enumerate(message.tool_calls or []):
            function = call.function
            arguments, raw, error = parse_arguments(function.arguments)
            out.append(
                ToolCallChunk(
                    # Older servers send neither id nor index.
                    id=call.id or f"call_{uuid.uuid4().hex[:12]}",
                    name=function.name,
                    arguments=arguments,
                    raw_arguments=raw,
                    arguments_error=error,
                    index=function.index if function.index is not None else position,
                )
            )
        return out

    def _usage(self, final: OllamaChunk, clock: StreamClock) -> Usage:
        # Every metric is omitted when zero: a missing field means 0.
        return Usage(
            prompt_tokens=None,
            cached_tokens=None,
            evaluated_tokens=final.prompt_eval_count or 0,
            output_tokens=final.eval_count or 0,
            prompt_ms=(final.prompt_eval_duration or 0) / 1e6,
            generation_ms=(final.eval_duration or 0) / 1e6,
            done_reason=final.done_reason,
            model=final.model or self.name,
            cache_reported=False,
            first_token_ms=clock.first_ms,
            wall_ms=clock.wall_ms(),
            raw=final.model_dump(exclude_unset=True),
        )
