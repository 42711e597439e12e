"""The ChatModel protocol, the chunks a reply streams as, and the neutral wire format.

Wire messages are plain dicts in a neutral shape that the agent produces from core
messages; each backend converts them to its server's format::

    {"role": "system" | "user" | "assistant" | "tool",
     "content": str,
     "tool_calls": [{"id": str, "name": str, "arguments": dict}],   # assistant, optional
     "tool_name": str,                                                 # tool, optional
     "tool_call_id": str}                                              # tool, optional

Tools are offered as ``{"name": str, "description": str, "parameters": <JSON schema>}``.

A reply is an async stream of chunks: ``TextDelta``, ``ThinkingDelta``, whole
``ToolCallChunk``s, and exactly one final ``Usage``, the last item. ``Usage`` carries
what the server measured (not what we predicted): that is what the rent panel
compares its prediction with.

The chunk models are where model text enters the session: each cleans what it
is given (``text.clean_text``), so a lone surrogate never reaches the journal.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .text import clean_text, clean_value

WireMessage = dict[str, Any]
ToolSpec = dict[str, Any]

ROLES = ("system", "user", "assistant", "tool")


class TextDelta(BaseModel):
    """A piece of the reply's visible text."""

    model_config = ConfigDict(frozen=True)
    kind: Literal["text"] = "text"
    text: str

    @field_validator("text")
    @classmethod
    def _clean(cls, value: str) -> str:
        return clean_text(value)


class ThinkingDelta(BaseModel):
    """A piece of the model's reasoning, streamed before the text by thinking models."""

    model_config = ConfigDict(frozen=True)
    kind: Literal["thinking"] = "thinking"
    text: str

    @field_validator("text")
    @classmethod
    def _clean(cls, value: str) -> str:
        return clean_text(value)


class ToolCallChunk(BaseModel):
    """One whole tool call.

    When the server sent arguments that are not a JSON object, nothing is raised:
    ``arguments`` is ``{}``, ``raw_arguments`` holds what was sent and
    ``arguments_error`` says what is wrong, so the agent can answer the model with a
    tool error and let it try again.
    """

    model_config = ConfigDict(frozen=True)
    kind: Literal["tool_call"] = "tool_call"
    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    raw_arguments: str | None = None
    arguments_error: str | None = None
    index: int = 0

    @field_validator("id", "name", "arguments", "raw_arguments", "arguments_error")
    @classmethod
    def _clean(cls, value: Any) -> Any:
        return clean_value(value)


class Usage(BaseModel):
    """What the server reported for one request; always the last chunk of a stream.

    - ``prompt_tokens``: the whole prompt, when the server says (OpenAI-compatible);
      ``None`` for Ollama, which reports only the evaluated part.
    - ``cached_tokens``: prompt tokens reused from the server's cache (llama.cpp
      ``timings.cache_n``, else ``usage.prompt_tokens_details.cached_tokens``);
      ``None`` when the server does not say, as with Ollama — then
      ``cache_reported`` is False and the cached share must be inferred
      (prompt tokens counted locally minus ``evaluated_tokens``).
    - ``evaluated_tokens``: prompt tokens the server actually computed (Ollama
      ``prompt_eval_count``; llama.cpp ``timings.prompt_n``; else prompt - cached).
    - ``output_tokens``: generated tokens.
    - ``prompt_ms`` / ``generation_ms``: the server's own durations, ``None`` if not sent.
    - ``done_reason``: ``stop``, ``length`` (the reply hit the token limit or the
      window — see ``truncated``), ``tool_calls``, ... as the server said it.
    - ``first_token_ms`` / ``wall_ms``: measured by our client, from sending the
      request to the first delta and to the end of the stream.
    - ``tools_dropped``: tools were asked for but not sent, because the model
      does not support them (see the backend's ``retry_without_tools``).
    - ``raw``: what the server reported, untouched: Ollama's final line; for an
      OpenAI-compatible server ``{"usage": ..., "timings": ...}`` (timings when sent).
    """

    model_config = ConfigDict(frozen=True)
    kind: Literal["usage"] = "usage"
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    evaluated_tokens: int | None = None
    output_tokens: int = 0
    prompt_ms: float | None = None
    generation_ms: float | None = None
    done_reason: str | None = None
    model: str = ""
    cache_reported: bool = False
    tools_dropped: bool = False
    first_token_ms: float | None = None
    wall_ms: float | None = None
    raw: dict[str, Any] = Field(default_factory=dict)

    @field_validator("done_reason", "model", "raw")
    @classmethod
    def _clean(cls, value: Any) -> Any:
        return clean_value(value)

    @property
    def truncated(self) -> bool:
        """True when the reply was cut by the token limit or the window."""
        return self.done_reason == "length"


Chunk = TextDelta | ThinkingDelta | ToolCallChunk | Usage


class ModelInfo(BaseModel):
    """One model a server offers."""

    model_config = ConfigDict(frozen=True)
    name: str
    family: str | None = None
    parameter_size: str | None = None
    quantization: str | None = None
    size: int | None = None
    context_length: int | None = None
    raw: dict[str, Any] = Field(default_factory=dict)


@runtime_checkable
class ChatModel(Protocol):
    """What the agent needs from a model backend.

    Consume ``stream`` inside ``contextlib.aclosing`` (or let the consuming task be
    cancelled): cancellation closes the HTTP response at once, and the server stops
    generating.
    """

    name: str

    def stream(
        self,
        messages: Sequence[WireMessage],
        *,
        tools: Sequence[ToolSpec] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> AsyncIterator[Chunk]:
        """Stream one reply; the last item is a ``Usage``. Raises ``ModelError`` subclasses."""
        ...

    async def list_models(self) -> list[ModelInfo]: ...

    async def context_window(self) -> int | None:
        """The window the model runs with, in tokens, when the backend can tell."""
        ...

    async def aclose(self) -> None: ...


@runtime_checkable
class Preloadable(Protocol):
    """A model that can be loaded before the first request, so the wait is shown and not silent."""

    name: str

    async def preload(self, num_ctx: int | None = None) -> float:
        """Load the model (with the window the turns will use); the seconds it took."""
        ...


def check_wire_messages(messages: Sequence[WireMessage]) -> None:
    """Reject a malformed neutral message early, naming its index and what is wrong."""
    for i, m in enumerate(messages):
        role = m.get("role")
        if role not in ROLES:
            raise ValueError(f"message {i}: role must be one of {', '.join(ROLES)}, got {role!r}")
        if not isinstance(m.get("content", ""), str):
            raise ValueError(f"message {i}: content must be a string")
        for call in m.get("tool_calls") or ():
            if not isinstance(call.get("name"), str) or not isinstance(call.get("arguments", {}), dict):
                raise ValueError(f"message {i}: each tool call needs a name and an arguments object")


def wire_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """Neutral tool specs to the function-tool shape both Ollama and OpenAI accept."""
    out = []
    for t in tools:
        if not t.get("name"):
            raise ValueError(f"tool spec without a name: {t!r}")
        out.append(
            {
                "type": "function",
                "function": {
                    "name": t["name"],
                    "description": t.get("description", ""),
                    "parameters": t.get("parameters") or {"type": "object", "properties": {}},
                },
            }
        )
    return out


def parse_arguments(raw: Any) -> tuple[dict[str, Any], str | None, str | None]:
    """Tool-call arguments as sent (object or JSON text) -> (arguments, raw text, error)."""
    if isinstance(raw, dict):
        return raw, None, None
    if raw is None or raw == "":
        return {}, raw, None
    if not isinstance(raw, str):
        return {}, json.dumps(raw), f"arguments must be a JSON object, got {type(raw).__name__}"
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        return {}, raw, f"arguments are not valid JSON: {exc.msg} at position {exc.pos}"
    if not isinstance(value, dict):
        return {}, raw, f"arguments must be a JSON object, got {type(value).__name__}"
    return value, raw, None
