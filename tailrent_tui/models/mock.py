"""The built-in mock model and the summarizers that need no server.

``MockModel`` is a real ``ChatModel``: it streams deterministic chunks with a
configurable delay, from a JSONL script or a brief default answer, and reports
usage the way a local engine would: it keeps the previous request (and its own
reply, as an engine's KV cache does) and counts the leading segments the new request
shares with it as cached. The rent panel has real numbers to compare against.

Script lines (JSONL, one reply a line, consumed in order, one per request)::

    {"text": "Sure."}
    {"thinking": "look first", "tool_calls": [{"name": "grep", "arguments": {"pattern": "TTL"}}]}
    {"text": "partial", "done_reason": "length"}
    {"text": "half a reply", "fault": "stream_cut"}

``fault`` makes the reply fail the way a server can (after streaming its text, for
the mid-stream faults): one of ``FAULTS``. Once the script is used up (or without
one), each request gets a short answer built from the last user message.

Tokens are counted with the article's estimator (``max(1, len // 4)``, 0 for empty)
over a segment per message (``role: content`` plus its tool calls) and one for the
tool schema; deterministic, and close enough for ratios.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from tailrent_tui.core.rent import reused_prefix
from tailrent_tui.core.tokens import chars4

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
)
from .errors import (
    Busy,
    ConnectionRefused,
    MalformedChunk,
    ModelError,
    ModelNotFound,
    ReadTimeout,
    ServerError,
    StreamCut,
    StreamError,
    ToolsUnsupported,
)

Fault = Literal[
    "refused",
    "not_found",
    "tools_unsupported",
    "server_error",
    "busy",
    "stream_error",
    "stream_cut",
    "malformed",
    "timeout",
]
FAULTS: tuple[Fault, ...] = get_args(Fault)

# Faults raised before any chunk, and faults raised after the reply's text streamed.
_EARLY_FAULTS: dict[Fault, Callable[[], ModelError]] = {
    "refused": lambda: ConnectionRefused("nothing answers at mock://", "this fault was scripted"),
    "not_found": lambda: ModelNotFound("mock"),
    "tools_unsupported": lambda: ToolsUnsupported("mock does not support tools", "this fault was scripted"),
    "server_error": lambda: ServerError(500, "internal error (scripted)"),
    "busy": lambda: Busy("server busy (scripted)"),
}
_LATE_FAULTS: dict[Fault, Callable[[], ModelError]] = {
    "stream_error": lambda: StreamError("the model server reported an error mid-reply: scripted"),
    "stream_cut": lambda: StreamCut("the reply ended before the server said it was done"),
    "malformed": lambda: MalformedChunk("{not json", 1, "not JSON (scripted)"),
    "timeout": lambda: ReadTimeout(0.0),
}


class ScriptedToolCall(BaseModel):
    """A tool call the scripted reply makes."""

    model_config = ConfigDict(strict=True)

    name: str = Field(description="a string (the tool's name)")
    arguments: dict[str, Any] = Field(default_factory=dict, description="an object")


class ScriptedReply(BaseModel):
    """One line of a mock script: what the next request gets back."""

    model_config = ConfigDict(strict=True, extra="forbid")

    text: str = Field("", description="a string")
    thinking: str = Field("", description="a string")
    tool_calls: list[ScriptedToolCall] = Field(default_factory=list, description="a list of tool calls")
    done_reason: str | None = Field(None, description="a string")
    fault: Fault | None = Field(None, description=f"one of {', '.join(FAULTS)}")

    @model_validator(mode="before")
    @classmethod
    def _says_something(cls, data: Any) -> Any:
        if isinstance(data, dict) and not {"text", "thinking", "tool_calls", "fault"} & data.keys():
            raise PydanticCustomError("empty_reply", "a reply needs text, thinking, tool_calls or fault")
        return data


def load_script(script: str | Path | Sequence[Any] | None) -> list[ScriptedReply]:
    """A script (path to JSONL, or a list of entries or plain strings) -> checked replies."""
    if script is None:
        return []
    if isinstance(script, str | Path):
        path = Path(script)
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise ValueError(f"cannot read mock script {path}: {exc.strerror or exc}") from exc
        entries = []
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{number}: not JSON ({exc.msg})") from exc
            entries.append(_reply(entry, f"{path}:{number}"))
        return entries
    return [_reply({"text": e} if isinstance(e, str) else e, f"script entry {i}") for i, e in enumerate(script)]


def _reply(entry: Any, where: str) -> ScriptedReply:
    """`entry` as a reply, or a one-line ValueError that starts with `where` (the file and line)."""
    try:
        return ScriptedReply.model_validate(entry)
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        loc = error["loc"]
        if error["type"] == "model_type" and not loc:
            message = "each reply must be a JSON object"
        elif error["type"] == "empty_reply":
            message = error["msg"]
        elif error["type"] == "extra_forbidden":
            message = f"unknown key {loc[0]!r}: a reply has {', '.join(ScriptedReply.model_fields)}"
        else:
            key = str(loc[-1]) if isinstance(loc[-1], str) else str(loc[-2])
            model = ScriptedToolCall if "tool_calls" in loc and key != "tool_calls" else ScriptedReply
            field = model.model_fields.get(key)
            want = field.description if field is not None else "what a reply has"
            path = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc).lstrip(".")
            if error["type"] == "missing":
                message = f"{path} is missing: it must be {want}"
            else:
                message = f"{path} must be {want}, got {type(error['input']).__name__} {error['input']!r:.60}"
        raise ValueError(f"{where}: {message}") from None


def _segments(messages: Sequence[WireMessage], tools: Sequence[ToolSpec] | None) -> list[str]:
    """What the mock engine 'tokenizes': the tool schema, then one segment a message."""
    out = [json.dumps(list(tools), sort_keys=True)] if tools else []
    for m in messages:
        text = f"{m['role']}: {m.get('content', '')}"
        if m.get("tool_calls"):
            text += " " + json.dumps(
                [{"name": c["name"], "arguments": c.get("arguments", {})} for c in m["tool_calls"]],
                sort_keys=True,
            )
        if m.get("tool_name"):
            text += f" [{m['tool_name']}]"
        out.append(text)
    return out


def _ledger_lines(segments: Sequence[str]) -> list[tuple[str, int]]:
    """Segments as (text, tokens) items, a ledger's split at its lines."""
    out: list[tuple[str, int]] = []
    for seg in segments:
        if "\n[ledger: " not in seg[:40]:
            out.append((seg, chars4(seg)))
            continue
        items = [(line, chars4(line + "\n")) for line in seg.split("\n")]
        # the message's count is the engine's: what the lines' rounding leaves goes to the last one
        last, tokens = items[-1]
        items[-1] = (last, tokens + chars4(seg) - sum(t for _, t in items))
        out.extend(items)
    return out


def default_reply(messages: Sequence[WireMessage]) -> str:
    """The brief answer of the mock when no script line is left."""
    last = next((m for m in reversed(messages) if m["role"] == "user"), None)
    if last is None:
        return "(mock) Nothing to answer yet."
    words = len(last.get("content", "").split())
    # No echo of the message: quoted, the guard would keep it as a fact in every
    # fold; unquoted, a decision in it would be pinned twice.
    return f"(mock) I read your message of {words:,} words. Connect a real model to get real answers."


class MockModel:
    """A deterministic ``ChatModel`` that needs no server."""

    kind = "mock"

    def __init__(
        self,
        script: str | Path | Sequence[Any] | None = None,
        delay: float = 0.0,
        chunk_size: int = 12,
        *,
        name: str = "mock",
        window: int | None = None,
    ) -> None:
        if chunk_size < 1:
            raise ValueError("chunk_size must be at least 1")
        if delay < 0:
            raise ValueError("delay must not be negative")
        self.name = name
        self.delay = delay
        self.chunk_size = chunk_size
        self.window = window
        self.tools_dropped = False
        self.requests: list[list[WireMessage]] = []
        self._script = load_script(script)
        self._cache: list[str] = []
        #: shift cached segments past a deletion, as llama.cpp does with n_cache_reuse (runs of this many tokens)
        self.cache_reuse: int | None = None
        #: keep the last prompts besides the one in the slot, as llama.cpp's --cache-ram does: a request
        #: that repeats one of them more than the slot's reads it from there
        self.prompt_cache = False
        self._recent: list[list[str]] = []

    @property
    def remaining(self) -> int:
        """Script lines not yet used."""
        return len(self._script)

    async def list_models(self) -> list[ModelInfo]:
        return [ModelInfo(name=self.name, family="mock", context_length=self.window)]

    async def context_window(self) -> int | None:
        # no server behind it: unless a test gives one, the session's own window stands
        return self.window

    async def aclose(self) -> None:
        return None

    async def stream(
        self,
        messages: Sequence[WireMessage],
        *,
        tools: Sequence[ToolSpec] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> AsyncIterator[Chunk]:
        check_wire_messages(messages)
        started = time.perf_counter()
        self.requests.append([dict(m) for m in messages])
        number = len(self.requests)
        entry = self._script.pop(0) if self._script else ScriptedReply(text=default_reply(messages))
        fault = entry.fault
        if fault in _EARLY_FAULTS:
            raise _EARLY_FAULTS[fault]()

        segments = _segments(messages, tools)
        shared = 0
        for new, old in zip(segments, self._cache, strict=False):
            if new != old:
                break
            shared += 1
        prompt = sum(chars4(s) for s in segments)
        cached = sum(chars4(s) for s in segments[:shared])
        if self.cache_reuse is not None:
            # llama.cpp's KV shifting, a segment for a message (a ledger's for each of its lines: the engine
            # shifts the lines a ledger kept past one that left): the rent model's rule is the engine's here
            cached = reused_prefix(_ledger_lines(self._cache), _ledger_lines(segments), self.cache_reuse)
        if self.prompt_cache:
            for old_prompt in self._recent:
                same = 0
                for new, old in zip(segments, old_prompt, strict=False):
                    if new != old:
                        break
                    same += chars4(new)
                cached = max(cached, same)
            self._recent = [*self._recent, self._cache][-8:]

        first_ms: float | None = None
        max_tokens = (options or {}).get("max_tokens")
        text = entry.text
        done_reason = entry.done_reason
        if isinstance(max_tokens, int) and chars4(text) > max_tokens:
            text, done_reason = text[: max_tokens * 4], "length"
        pieces: list[Chunk] = [
            *(ThinkingDelta(text=p) for p in self._split(entry.thinking)),
            *(TextDelta(text=p) for p in self._split(text)),
        ]
        calls = [
            ToolCallChunk(id=f"call_{number}_{i}", name=c.name, arguments=c.arguments, index=i)
            for i, c in enumerate(entry.tool_calls)
        ]
        for chunk in [*pieces, *calls]:
            # Yield to the loop even without a delay so a UI stays live and a
            # cancel lands between chunks.
            await asyncio.sleep(self.delay)
            first_ms = first_ms if first_ms is not None else (time.perf_counter() - started) * 1000.0
            yield chunk
        if fault in _LATE_FAULTS:
            self._cache = []
            raise _LATE_FAULTS[fault]()

        reply: WireMessage = {"role": "assistant", "content": text}
        if calls:
            reply["tool_calls"] = [{"name": c.name, "arguments": c.arguments} for c in calls]
        self._cache = segments + _segments([reply], None)
        output = chars4(entry.thinking) + chars4(text)
        output += sum(chars4(json.dumps({"name": c.name, "arguments": c.arguments})) for c in calls)
        yield Usage(
            prompt_tokens=prompt,
            cached_tokens=cached,
            evaluated_tokens=prompt - cached,
            output_tokens=output,
            done_reason=done_reason or ("tool_calls" if calls else "stop"),
            model=self.name,
            cache_reported=True,
            tools_dropped=False,
            first_token_ms=first_ms,
            wall_ms=(time.perf_counter() - started) * 1000.0,
            raw={"mock": True, "request": number},
        )

    def _split(self, text: str) -> list[str]:
        return [text[i : i + self.chunk_size] for i in range(0, len(text), self.chunk_size)]
