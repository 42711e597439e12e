"""Ollama over its native API: ``/api/chat`` streamed as NDJSON, following
``reference/ollama-api.md``.

Two settings decide what the rent panel can promise:

- ``num_ctx`` is always sent in ``options``: the window the app budgets for must be
  the window the model really runs with, and Ollama's own default depends on the
  machine's VRAM (4k, 32k or 256k).
- ``keep_alive`` defaults to ``"30m"``: for a local engine the cache TTL is what we
  ask for. Ollama unloads an idle model after 5 minutes by default, and an unload
  throws away the KV cache, so the next turn re-evaluates the whole context. People
  pause longer than five minutes all the time.

Usage: Ollama reports ``prompt_eval_count``, the prompt tokens it actually
evaluated; tokens reused from its KV cache are not counted and the total is not
sent. So ``Usage.evaluated_tokens`` is exact while ``prompt_tokens`` and
``cached_tokens`` are ``None`` (``cache_reported`` False): the agent infers the
cached share as its own prompt count minus the evaluated count.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
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
    MalformedChunk,
    MalformedResponse,
    ModelError,
    ModelNotFound,
    ServerError,
    StreamCut,
    StreamError,
    ToolsUnsupported,
)
from .http import DEFAULT_CONNECT_TIMEOUT, DEFAULT_READ_TIMEOUT, HttpBackend, StreamClock

DEFAULT_HOST = "http://127.0.0.1:11434"
DEFAULT_KEEP_ALIVE = "30m"
# Used only when neither the Modelfile nor the running instance names a window:
# small enough to load on a laptop, large enough for a coding session's tail.
FALLBACK_NUM_CTX = 8192

# Neutral option names that Ollama spells differently.
_OPTION_NAMES = {"max_tokens": "num_predict"}


def ollama_host(value: str | None = None) -> str:
    """The base URL for ``OLLAMA_HOST`` (or ``value``), read the way Ollama reads it.

    Accepts ``host``, ``host:port``, ``:port``, ``http://host:port``, ``https://host``
    and an optional path. Without a scheme: http and port 11434. With ``http://``
    and no port: 80; with ``https://``: 443. Empty: ``http://127.0.0.1:11434``.
    """
    raw = (os.environ.get("OLLAMA_HOST", "") if value is None else value).strip()
    if not raw:
        return DEFAULT_HOST
    default_port = "11434"
    if "://" in raw:
        scheme, rest = raw.split("://", 1)
        scheme = scheme.lower()
        default_port = {"http": "80", "https": "443"}.get(scheme, default_port)
    else:
        scheme, rest = "http", raw
    hostport, _, path = rest.partition("/")
    host, port = _split_host_port(hostport)
    if not host:
        host = "127.0.0.1"
    if port is None or not port.isdigit() or int(port) > 65535:
        port = default_port
    if ":" in host:
        host = f"[{host}]"
    base = f"{scheme}://{host}:{port}"
    return f"{base}/{path}".rstrip("/") if path else base


def _split_host_port(hostport: str) -> tuple[str, str | None]:
    if hostport.startswith("["):
        host, _, rest = hostport[1:].partition("]")
        return host, rest[1:] if rest.startswith(":") else None
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
            item["tool_calls"] = [
                {"function": {"name": c["name"], "arguments": c.get("arguments", {})}}
                for c in m["tool_calls"]
            ]
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
            if key == "num_ctx" and value.strip().isdigit():
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

    def status_error(self, status: int, message: str) -> ModelError:
        if status == 404:
            return ModelNotFound(self.name, message or f"model '{self.name}' not found")
        if status == 400 and "does not support tools" in message:
            return ToolsUnsupported(message, f"{self.name} cannot call tools; pick a model that can")
        if status == 499:
            return Cancelled(message or "request canceled", "the server dropped the request; retry")
        if status == 503:
            return Busy(message or "server busy")
        return ServerError(status, message or f"HTTP {status}")

    # -- information ------------------------------------------------------------------

    async def version(self) -> str:
        data = await self.get_json("/api/version")
        return str(data.get("version", ""))

    async def show(self) -> dict[str, Any]:
        """``/api/show`` for this model, fetched once."""
        if self._show is None:
            self._show = await self.post_json("/api/show", {"model": self.name})
        return self._show

    async def running(self) -> list[dict[str, Any]]:
        data = await self.get_json("/api/ps")
        return list(data.get("models") or [])

    async def list_models(self) -> list[ModelInfo]:
        data = await self.get_json("/api/tags")
        out = []
        for m in data.get("models") or []:
            details = m.get("details") or {}
            out.append(
                ModelInfo(
                    name=m.get("name") or m.get("model", ""),
                    family=details.get("family"),
                    parameter_size=details.get("parameter_size"),
                    quantization=details.get("quantization_level"),
                    size=m.get("size"),
                    raw=m,
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

    async def supports_tools(self) -> bool | None:
        if self.tools_dropped:
            return False
        capabilities = (await self.show()).get("capabilities")
        return None if capabilities is None else "tools" in capabilities

    # -- chat ------------------------------------------------------------------------

    async def _stream_once(
        self,
        messages: Sequence[WireMessage],
        tools: Sequence[ToolSpec] | None,
        options: Mapping[str, Any] | None,
        started: float,
    ) -> AsyncIterator[Chunk]:
        body: dict[str, Any] = {
            "model": self.name,
            "messages": ollama_messages(messages),
            "stream": True,
            "options": {"num_ctx": await self.context_window(), **ollama_options(options)},
            "keep_alive": self.keep_alive,
        }
        if tools:
            body["tools"] = wire_tools(tools)
        if self.think is not None:
            body["think"] = self.think
        clock = StreamClock(started)
        async with self.open_stream("/api/chat", body) as response:
            number = 0
            try:
                async for line in response.aiter_lines():
                    number += 1
                    if not line.strip():
                        continue
                    try:
                        data = json.loads(line)
                    except json.JSONDecodeError as exc:
                        raise MalformedChunk(line, number, f"not JSON ({exc.msg})") from exc
                    if not isinstance(data, dict):
                        raise MalformedChunk(line, number, "not a JSON object")
                    if "error" in data:
                        raise StreamError(
                            f"the model server reported an error mid-reply: {data['error']}",
                            "the partial reply is kept; retry",
                        )
                    for chunk in self._deltas(data.get("message") or {}):
                        clock.saw_delta()
                        yield chunk
                    if data.get("done"):
                        yield self._usage(data, clock)
                        return
            except httpx.HTTPError as exc:
                raise self.transport_error(exc) from exc
        raise StreamCut(
            "the reply ended before the server said it was done",
            "the server may have crashed or restarted; the partial reply is kept; retry",
        )

    def _deltas(self, message: Mapping[str, Any]) -> list[Chunk]:
        out: list[Chunk] = []
        if message.get("thinking"):
            out.append(ThinkingDelta(text=message["thinking"]))
        if message.get("content"):
            out.append(TextDelta(text=message["content"]))
        for position, call in enumerate(message.get("tool_calls") or []):
            function = call.get("function") or {}
            arguments, raw, error = parse_arguments(function.get("arguments"))
            out.append(
                ToolCallChunk(
                    # Older servers send neither id nor index.
                    id=call.get("id") or f"call_{uuid.uuid4().hex[:12]}",
                    name=function.get("name", ""),
                    arguments=arguments,
                    raw_arguments=raw,
                    arguments_error=error,
                    index=function.get("index", position),
                )
            )
        return out

    def _usage(self, final: Mapping[str, Any], clock: StreamClock) -> Usage:
        # Every metric is omitted when zero: a missing field means 0.
        return Usage(
            prompt_tokens=None,
            cached_tokens=None,
            evaluated_tokens=int(final.get("prompt_eval_count", 0)),
            output_tokens=int(final.get("eval_count", 0)),
            prompt_ms=final.get("prompt_eval_duration", 0) / 1e6,
            generation_ms=final.get("eval_duration", 0) / 1e6,
            done_reason=final.get("done_reason"),
            model=final.get("model", self.name),
            cache_reported=False,
            first_token_ms=clock.first_ms,
            wall_ms=clock.wall_ms(),
            raw=dict(final),
        )
