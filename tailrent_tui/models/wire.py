"""What servers send, as pydantic models: validated at the boundary, once.

A streamed line or an information reply that does not fit these shapes is a
``MalformedChunk`` or ``MalformedResponse`` (a ``ModelError``), never a
traceback. The models are lenient where real servers are: unknown fields are
ignored, ``null`` means "not said", and tool arguments may come as a JSON
object where the API says a JSON string (and the other way round for Ollama).
Token counts are whole numbers >= 0 and durations finite numbers >= 0.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, field_validator

Seconds = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Count = NonNegativeInt


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore")


class _Kept(BaseModel):
    """A report kept as ``Usage.raw``: the fields it did not expect are kept too."""

    model_config = ConfigDict(extra="allow")


def _object_as_text(value: Any) -> Any:
    """Tool arguments sent as a JSON object where the API says a JSON string: serialised."""
    return json.dumps(value) if isinstance(value, dict) else value


# -- OpenAI-compatible: /v1/chat/completions (SSE) ------------------------------------------


class OpenAIFunction(_Lenient):
    name: str | None = None
    arguments: str | None = None

    @field_validator("arguments", mode="before")
    @classmethod
    def _serialise(cls, value: Any) -> Any:
        return _object_as_text(value)


class OpenAIToolFragment(_Lenient):
    index: Count | None = None
    id: str | None = None
    function: OpenAIFunction | None = None


class OpenAIDelta(_Lenient):
    content: str | None = None
    reasoning_content: str | None = None
    reasoning: str | None = None
    tool_calls: list[OpenAIToolFragment] | None = None


class OpenAIChoice(_Lenient):
    delta: OpenAIDelta | None = None
    finish_reason: str | None = None


class OpenAIPromptDetails(_Kept):
    cached_tokens: Count | None = None


class OpenAIUsage(_Kept):
    prompt_tokens: Count | None = None
    completion_tokens: Count | None = None
    prompt_tokens_details: OpenAIPromptDetails | None = None


class LlamaTimings(_Kept):
    """llama.cpp's own measures, beside ``usage``."""

    cache_n: Count | None = None
    prompt_n: Count | None = None
    predicted_n: Count | None = None
    prompt_ms: Seconds | None = None
    predicted_ms: Seconds | None = None


class OpenAIChunk(_Lenient):
    """One ``data:`` event of a chat completion stream."""

    model: str | None = None
    choices: list[OpenAIChoice] | None = None
    usage: OpenAIUsage | None = None
    timings: LlamaTimings | None = None
    error: Any = None


class OpenAIModelEntry(BaseModel):
    """One model of ``/v1/models``; every field the server sent is kept (the window keys vary)."""

    model_config = ConfigDict(extra="allow")
    id: str


class OpenAIModelList(_Lenient):
    data: list[OpenAIModelEntry] | None = None


# -- llama.cpp: /props and the slot actions (KV slots saved to disk) ----------------------


class LlamaServerProps(_Lenient):
    """What ``/props`` says about slots and the model (llama.cpp only)."""

    total_slots: Count | None = None
    model_path: str | None = None
    endpoint_slots: bool | None = None


class LlamaSlot(_Lenient):
    """One entry of ``GET /slots``."""

    id: Count
    n_ctx: Count | None = None
    is_processing: bool | None = None
    #: the tokens the slot holds (its last prompt and what it generated); absent on a slot no request used yet
    n_prompt_tokens: Count | None = None


class LlamaSlotTimings(_Lenient):
    save_ms: Seconds | None = None
    restore_ms: Seconds | None = None


class LlamaSlotSaved(_Lenient):
    """``POST /slots/{id}?action=save``: tokens saved and bytes written."""

    id_slot: Count | None = None
    filename: str | None = None
    n_saved: Count
    n_written: Count
    timings: LlamaSlotTimings | None = None


class LlamaSlotRestored(_Lenient):
    """``POST /slots/{id}?action=restore``: tokens restored and bytes read."""

    id_slot: Count | None = None
    filename: str | None = None
    n_restored: Count
    n_read: Count
    timings: LlamaSlotTimings | None = None


# -- Ollama: /api/chat (NDJSON) and the information endpoints ---------------------------------


class OllamaFunction(_Lenient):
    name: str = ""
    arguments: dict[str, Any] | str | None = None
    index: Count | None = None


class OllamaToolCall(_Lenient):
    id: str | None = None
    function: OllamaFunction = Field(default_factory=OllamaFunction)


class OllamaMessage(_Lenient):
    content: str | None = None
    thinking: str | None = None
    tool_calls: list[OllamaToolCall] | None = None


class OllamaChunk(_Kept):
    """One line of an ``/api/chat`` stream; the metrics come on the final (``done``) line."""

    model: str | None = None
    message: OllamaMessage | None = None
    done: bool = False
    done_reason: str | None = None
    prompt_eval_count: Count | None = None
    eval_count: Count | None = None
    prompt_eval_duration: Count | None = None
    eval_duration: Count | None = None
    error: Any = None


class OllamaDetails(_Lenient):
    family: str | None = None
    parameter_size: str | None = None
    quantization_level: str | None = None


class OllamaTag(_Lenient):
    name: str | None = None
    model: str | None = None
    size: Count | None = None
    details: OllamaDetails | None = None


class OllamaTags(_Lenient):
    """``/api/tags``: the models the server has."""

    models: list[OllamaTag] | None = None


class OllamaVersion(_Lenient):
    version: str = ""


def parse_json_line(text: str) -> Any:
    """``json.loads``, with nesting too deep for Python reported as a ValueError like any bad JSON."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply") from None
