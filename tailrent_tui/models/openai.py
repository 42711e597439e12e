"""OpenAI-compatible servers (llama.cpp's server, vLLM, LM Studio) over
``/v1/chat/completions`` with SSE streaming.

Usage is read from the final usage chunk (asked for with
``stream_options.include_usage``): ``prompt_tokens`` and
``prompt_tokens_details.cached_tokens``, so ``evaluated = prompt - cached``. When
llama.cpp adds its ``timings`` (``cache_n``, ``prompt_n``, ``prompt_ms``,
``predicted_ms``), those take precedence: they are the engine's own count of what it
reused and what it evaluated, and its own durations.

Tool calls arrive in fragments (arguments as pieces of a JSON string); they are
joined and handed over whole, once the server says the choice is finished.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import AsyncGenerator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
from pydantic import BaseModel, PositiveInt, ValidationError

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
    ContextOverflow,
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
from .wire import (
    LlamaTimings,
    OpenAIChunk,
    OpenAIDelta,
    OpenAIFunction,
    OpenAIModelList,
    OpenAIToolFragment,
    OpenAIUsage,
    parse_json_line,
)

API_KEY_VARIABLES = ("TAILRENT_API_KEY", "OPENAI_API_KEY")
# Keys servers use in /v1/models for the window: llama.cpp meta.n_ctx, vLLM
# max_model_len, LM Studio and others context_length / max_context_length.
_WINDOW_KEYS = ("n_ctx", "max_model_len", "context_length", "max_context_length", "context_window")
_OPTION_NAMES = {"num_predict": "max_tokens"}


def api_base(url: str) -> str:
    """``http://host:port`` -> ``http://host:port/v1``; a URL with a path is kept as given."""
    url = url.strip().rstrip("/")
    if "://" not in url:
        url = "http://" + url
    return url if urlsplit(url).path else url + "/v1"


def api_key_from_env(env: Mapping[str, str] | None = None) -> str | None:
    """``TAILRENT_API_KEY``, else ``OPENAI_API_KEY``; None when neither is set."""
    env = os.environ if env is None else env
    for name in API_KEY_VARIABLES:
        if env.get(name):
            return env[name]
    return None


def openai_messages(messages: Sequence[WireMessage]) -> list[dict[str, Any]]:
    """Neutral messages -> OpenAI's: arguments as JSON text, tool results by ``tool_call_id``."""
    check_wire_messages(messages)
    out = []
    for m in messages:
        item: dict[str, Any] = {"role": m["role"], "content": m.get("content", "")}
        if m.get("tool_calls"):
            item["tool_calls"] = [
                {
                    "id": c.get("id") or f"call_{i}",
                    "type": "function",
                    "function": {"name": c["name"], "arguments": json.dumps(c.get("arguments", {}))},
                }
                for i, c in enumerate(m["tool_calls"])
            ]
        if m["role"] == "tool":
            if m.get("tool_call_id"):
                item["tool_call_id"] = m["tool_call_id"]
            if m.get("tool_name"):
                item["name"] = m["tool_name"]
        out.append(item)
    return out


def openai_options(options: Mapping[str, Any] | None) -> dict[str, Any]:
    return {_OPTION_NAMES.get(k, k): v for k, v in (options or {}).items()}


@dataclass(frozen=True)
class SentPrompt:
    """A request as the server read it: the slot it went through holds its KV."""

    model: str
    tools: list[dict[str, Any]] | None
    messages: list[dict[str, Any]]
    id_slot: int | None


def rendered_prompt(model: str, messages: Sequence[WireMessage], tools: Sequence[ToolSpec] | None) -> SentPrompt:
    """What a request for these neutral messages and tools would carry, without sending it."""
    return SentPrompt(model, wire_tools(tools) if tools else None, openai_messages(messages), None)


class _SlotSettings(BaseModel):
    n_ctx: PositiveInt | None = None


class _LlamaProps(BaseModel):
    """The part of llama.cpp's ``/props`` that names the window.

    ``default_generation_settings.n_ctx`` is what one slot (one request) may fill;
    with several slots it is smaller than the server's total (``/v1/models``
    ``meta.n_ctx``). Older servers also put ``n_ctx`` at the top level.
    """

    default_generation_settings: _SlotSettings | None = None
    n_ctx: PositiveInt | None = None

    @property
    def window(self) -> int | None:
        slot = self.default_generation_settings
        return (slot.n_ctx if slot is not None else None) or self.n_ctx


def _window_of(entry: Mapping[str, Any]) -> int | None:
    meta = entry.get("meta")
    for place in (entry, meta if isinstance(meta, Mapping) else {}):
        for key in _WINDOW_KEYS:
            value = place.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
    return None


_ALTERNATE = re.compile(r"roles must alternate|must alternate (?:between )?user|alternat\w* user/assistant", re.IGNORECASE)


def alternated(messages: Sequence[WireMessage]) -> list[WireMessage]:
    """The messages with each run of user messages (and of assistant messages without tool
    calls) joined into one, for chat templates that raise on two of a role in a row."""
    out: list[WireMessage] = []
    for m in messages:
        last = out[-1] if out else None
        if (
            last is not None
            and m["role"] == last["role"]
            and m["role"] in ("user", "assistant")
            and not m.get("tool_calls")
            and not last.get("tool_calls")
        ):
            out[-1] = {**last, "content": f"{last.get('content', '')}\n\n{m.get('content', '')}"}
        else:
            out.append(dict(m))
    return out


class OpenAIModel(HttpBackend):
    """A chat model behind an OpenAI-compatible server.

    ``model=None`` means the server's first model (from ``/v1/models``), looked up
    by ``resolve_name()``: on the first request, or before it (the agent's start, the bench).
    """

    kind = "openai"
    backend_label = "OpenAI-compatible server"

    def __init__(
        self,
        url: str,
        model: str | None = None,
        *,
        api_key: str | None = None,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        read_timeout: float | None = DEFAULT_READ_TIMEOUT,
        retry_without_tools: bool = True,
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else None
        self._headers = headers
        super().__init__(
            api_base(url),
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            headers=headers,
            retry_without_tools=retry_without_tools,
        )
        self.name = model or ""
        self._models: list[dict[str, Any]] | None = None
        #: llama.cpp's slot every request is pinned to (``id_slot``), when the KV slots are saved and restored
        self.id_slot: int | None = None
        #: what the last request that finished sent (model, tools, rendered messages): the prefix its slot holds
        self.last_prompt: SentPrompt | None = None
        #: llama.cpp's ``n_cache_reuse`` sent with every request (KV shifted past a deletion), when set
        self.cache_reuse: int | None = None
        #: why the server refused ``n_cache_reuse`` (its error), once it did: it is not sent again
        self.cache_reuse_refused: str | None = None
        #: the server's chat template refused two user (or assistant) messages in a row: they are
        #: joined into one before every request from then on (`alternated`), the same for all requests
        self.alternate_roles = False

    def status_error(self, status: int, message: str, *, retry_after: float | None = None) -> ModelError:
        lowered = message.lower()
        if status in (401, 403):
            return ServerError(status, message or "not authorized", "set TAILRENT_API_KEY or OPENAI_API_KEY")
        if status == 404 and "model" in lowered:
            return ModelNotFound(self.name, message, f"list the server's models at {self.base_url}/models")
        if status == 400 and "tool" in lowered and ("support" in lowered or "not enabled" in lowered):
            return ToolsUnsupported(message, f"{self.name or 'this model'} cannot call tools on this server")
        if status in (429, 503):
            return Busy(message or "server busy", status=status, retry_after=retry_after)
        if status == 400 and ("context" in lowered and ("exceed" in lowered or "maximum" in lowered)):
            # llama.cpp: "exceeds the available context size"; vLLM and OpenAI: "maximum context length"
            return ContextOverflow(
                f"the server says the request does not fit its window: {message}",
                "ctrl+r retries with the window cut to what the server counts; or unpin, spill or fold by hand",
            )
        return ServerError(status, message or f"HTTP {status}")

    # -- information ------------------------------------------------------------------

    async def _model_entries(self) -> list[dict[str, Any]]:
        if self._models is None:
            try:
                data = await self.get_json("/models")
            except (ModelNotFound, ServerError) as exc:
                # A server without /v1/models still chats; it just cannot say its window.
                if isinstance(exc, ServerError) and exc.status != 404:
                    raise
                data = {}
            try:
                listed = OpenAIModelList.model_validate(data)
            except ValidationError as exc:
                raise MalformedResponse.invalid(f"{self.base_url}/models", exc) from None
            self._models = [e.model_dump() for e in listed.data or []]
        return self._models

    async def resolve_name(self) -> str:
        """Pick the server's first model when none was named."""
        if not self.name:
            entries = await self._model_entries()
            if not entries:
                raise ModelNotFound("", f"{self.base_url} offers no models", "load a model into the server")
            self.name = entries[0]["id"]
        return self.name

    async def list_models(self) -> list[ModelInfo]:
        return [ModelInfo(name=e.get("id", ""), context_length=_window_of(e), raw=e) for e in await self._model_entries()]

    async def context_window(self) -> int | None:
        """llama.cpp's ``/props`` (one slot's window), else what ``/v1/models`` says for the model."""
        window = await self._props_window()
        if window is not None:
            return window
        entries = await self._model_entries()
        for e in entries:
            if e.get("id") == self.name:
                return _window_of(e)
        # llama.cpp serves one model whatever name is asked for.
        return _window_of(entries[0]) if len(entries) == 1 else None

    @property
    def server_root(self) -> str:
        """The server's root, beside ``/v1``, where llama.cpp serves ``/props``, ``/tokenize``..."""
        return self.base_url.removesuffix("/v1")

    @property
    def headers(self) -> dict[str, str] | None:
        """The headers every request to this server carries (an API key), for other clients of it."""
        return self._headers

    async def _props_window(self) -> int | None:
        """The window in llama.cpp's ``/props`` (at the server's root, beside ``/v1``); None from other servers."""
        root = self.server_root
        try:
            data = await self.get_json("/props", base=root)
        except ModelNotFound:
            return None
        except ServerError as exc:
            if exc.status == 200:  # answered, but not with JSON
                raise MalformedResponse(f"{root}/props", "not JSON") from None
            return None  # vLLM, LM Studio...: no /props; /v1/models may say the window
        try:
            return _LlamaProps.model_validate(data).window
        except ValidationError as exc:
            raise MalformedResponse.invalid(f"{root}/props", exc) from None

    # -- chat ------------------------------------------------------------------------

    async def _stream_once(
        self,
        messages: Sequence[WireMessage],
        tools: Sequence[ToolSpec] | None,
        options: Mapping[str, Any] | None,
        started: float,
    ) -> AsyncGenerator[Chunk, None]:
        """One request; a server that refuses ``n_cache_reuse`` gets it again without it (said by
        ``cache_reuse_refused``, which the agent reports once and folds in place from then on)."""
        if self.alternate_roles:
            messages = alternated(messages)
        try:
            async for chunk in self._stream_request(messages, tools, options, started):
                yield chunk
            return
        except ServerError as exc:
            if _ALTERNATE.search(exc.message) and not self.alternate_roles:
                # the chat template forbids two messages of a role in a row: from now on they go as one
                self.alternate_roles = True
                messages = alternated(messages)
            elif self.cache_reuse is None or exc.status not in (400, 422) or "cache_reuse" not in exc.message.lower():
                raise
            else:
                self.cache_reuse, self.cache_reuse_refused = None, exc.message
        async for chunk in self._stream_request(messages, tools, options, started):
            yield chunk

    async def _stream_request(
        self,
        messages: Sequence[WireMessage],
        tools: Sequence[ToolSpec] | None,
        options: Mapping[str, Any] | None,
        started: float,
    ) -> AsyncGenerator[Chunk, None]:
        body: dict[str, Any] = {
            "model": self.name or await self.resolve_name(),
            "messages": openai_messages(messages),
            "stream": True,
            "stream_options": {"include_usage": True},
            **openai_options(options),
        }
        if tools:
            body["tools"] = wire_tools(tools)
        if self.id_slot is not None:
            body["id_slot"] = self.id_slot
        if self.cache_reuse is not None:
            body["n_cache_reuse"] = self.cache_reuse
        # the slot is being overwritten: until this request ends, it holds no known prompt
        self.last_prompt = None
        clock = StreamClock(started)
        calls: dict[int, dict[str, Any]] = {}
        usage: OpenAIUsage | None = None
        timings: LlamaTimings | None = None
        finish: str | None = None
        model = self.name
        text, thinking = SurrogateJoiner(), SurrogateJoiner()
        said = False  # any text, thinking or tool call
        async with self.open_stream("/chat/completions", body) as response:
            number = 0
            try:
                async for line in iter_lines(response):
                    number += 1
                    if not line or line.startswith(":"):
                        continue
                    if not line.startswith("data:"):
                        if line.startswith(("event:", "id:", "retry:")):
                            continue
                        raise MalformedChunk(line, number, "not a server-sent event line")
                    payload = line[5:].strip()
                    if payload == "[DONE]":
                        for piece in (TextDelta(text=text.flush()), ThinkingDelta(text=thinking.flush())):
                            if piece.text:
                                yield piece
                        whole = _whole_calls(calls)
                        if not (said or whole or finish):
                            raise EmptyReply(
                                "the server ended the reply ([DONE]) before sending any of it",
                                "retry; if it repeats, check the server's log (the model may have failed to load)",
                            )
                        for chunk in whole:
                            clock.saw_delta()
                            yield chunk
                        self.last_prompt = SentPrompt(body["model"], body.get("tools"), body["messages"], self.id_slot)
                        yield _usage(usage, timings, finish, model, clock)
                        return
                    try:
                        data = OpenAIChunk.model_validate(parse_json_line(payload))
                    except ValueError as exc:
                        if isinstance(exc, ValidationError):
                            raise MalformedChunk.invalid(line, number, exc) from None
                        raise MalformedChunk(line, number, f"not JSON ({getattr(exc, 'msg', exc)})") from None
                    if data.error is not None:
                        error = data.error
                        message = error.get("message", json.dumps(error)) if isinstance(error, dict) else error
                        raise StreamError(
                            f"the model server reported an error mid-reply: {message}",
                            "the partial reply is kept; retry",
                        )
                    model = data.model or model
                    usage = data.usage or usage
                    timings = data.timings or timings
                    for choice in data.choices or []:
                        delta = choice.delta or OpenAIDelta()
                        reasoning = thinking.feed(delta.reasoning_content or delta.reasoning or "")
                        if reasoning:
                            said = True
                            clock.saw_delta()
                            yield ThinkingDelta(text=reasoning)
                        content = text.feed(delta.content or "")
                        if content:
                            said = True
                            clock.saw_delta()
                            yield TextDelta(text=content)
                        for fragment in delta.tool_calls or []:
                            said = True
                            _add_fragment(calls, fragment)
                        if choice.finish_reason:
                            finish = choice.finish_reason
                            for chunk in _whole_calls(calls):
                                clock.saw_delta()
                                yield chunk
            except httpx.HTTPError as exc:
                raise self.transport_error(exc) from exc
        raise StreamCut(
            "the reply ended before the server sent [DONE]",
            "the server may have crashed or restarted; the partial reply is kept; retry",
        )


def _add_fragment(calls: dict[int, dict[str, Any]], fragment: OpenAIToolFragment) -> None:
    index = fragment.index if fragment.index is not None else len(calls)
    call = calls.setdefault(index, {"id": None, "name": "", "arguments": []})
    if fragment.id:
        call["id"] = fragment.id
    function = fragment.function or OpenAIFunction()
    if function.name:
        call["name"] += function.name
    if function.arguments:
        call["arguments"].append(function.arguments)


def _whole_calls(calls: dict[int, dict[str, Any]]) -> list[ToolCallChunk]:
    """The tool calls gathered so far, as whole chunks; empties the gathering."""
    out = []
    for index in sorted(calls):
        call = calls[index]
        arguments, raw, error = parse_arguments("".join(call["arguments"]))
        out.append(
            ToolCallChunk(
                id=call["id"] or f"call_{index}",
                name=call["name"],
                arguments=arguments,
                raw_arguments=raw,
                arguments_error=error,
                index=index,
            )
        )
    calls.clear()
    return out


def _usage(
    usage: OpenAIUsage | None,
    timings: LlamaTimings | None,
    finish: str | None,
    model: str,
    clock: StreamClock,
) -> Usage:
    usage = usage or OpenAIUsage()
    prompt = usage.prompt_tokens
    cached = usage.prompt_tokens_details.cached_tokens if usage.prompt_tokens_details else None
    evaluated = max(0, prompt - cached) if prompt is not None and cached is not None else None
    if timings is not None and timings.cache_n is not None:
        cached = timings.cache_n
    if timings is not None and timings.prompt_n is not None:
        evaluated = timings.prompt_n
    output = usage.completion_tokens
    if output is None and timings is not None:
        output = timings.predicted_n
    raw: dict[str, Any] = {"usage": usage.model_dump(exclude_unset=True)}
    if timings is not None:
        raw["timings"] = timings.model_dump(exclude_unset=True)
    return Usage(
        prompt_tokens=prompt,
        cached_tokens=cached,
        evaluated_tokens=evaluated,
        output_tokens=output or 0,
        prompt_ms=timings.prompt_ms if timings else None,
        generation_ms=timings.predicted_ms if timings else None,
        done_reason=finish,
        model=model,
        cache_reported=cached is not None,
        first_token_ms=clock.first_ms,
        wall_ms=clock.wall_ms(),
        raw=raw,
    )
