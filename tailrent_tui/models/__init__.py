"""Model backends: the ChatModel protocol, Ollama, OpenAI-compatible servers, the mock.

Everything here does network I/O (httpx) or stands in for it; ``core`` never imports it.

Its names are imported on first use (PEP 562), so that a command which needs
only `models.text` or `models.spec` does not pay for httpx and every backend.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .base import (
        ChatModel,
        Chunk,
        ModelInfo,
        TextDelta,
        ThinkingDelta,
        ToolCallChunk,
        ToolSpec,
        Usage,
        WireMessage,
    )
    from .errors import (
        Busy,
        Cancelled,
        ConnectionRefused,
        MalformedChunk,
        MalformedResponse,
        ModelError,
        ModelNotFound,
        ReadTimeout,
        ServerError,
        ServerUnavailable,
        StreamCut,
        StreamError,
        ToolsUnsupported,
    )
    from .mock import (
        MockExtractiveSummarizer,
        MockLossySummarizer,
        MockModel,
        ModelSummarizer,
    )
    from .ollama import OllamaModel, ollama_host
    from .openai import OpenAIModel
    from .spec import ModelSpec, open_model, parse_model_spec, probe_default

_EXPORTS = {
    "base": "ChatModel Chunk ModelInfo TextDelta ThinkingDelta ToolCallChunk ToolSpec Usage WireMessage",
    "errors": "Busy Cancelled ConnectionRefused MalformedChunk MalformedResponse ModelError ModelNotFound "
    "ReadTimeout ServerError ServerUnavailable StreamCut StreamError ToolsUnsupported",
    "mock": "MockExtractiveSummarizer MockLossySummarizer MockModel ModelSummarizer",
    "ollama": "OllamaModel ollama_host",
    "openai": "OpenAIModel",
    "spec": "ModelSpec open_model parse_model_spec probe_default",
}
#: public name -> the submodule that defines it
_HOMES = {name: home for home, names in _EXPORTS.items() for name in names.split()}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


__all__ = [
    "Busy",
    "Cancelled",
    "ChatModel",
    "Chunk",
    "ConnectionRefused",
    "MalformedChunk",
    "MalformedResponse",
    "MockExtractiveSummarizer",
    "MockLossySummarizer",
    "MockModel",
    "ModelError",
    "ModelInfo",
    "ModelNotFound",
    "ModelSpec",
    "ModelSummarizer",
    "OllamaModel",
    "OpenAIModel",
    "ReadTimeout",
    "ServerError",
    "ServerUnavailable",
    "StreamCut",
    "StreamError",
    "TextDelta",
    "ThinkingDelta",
    "ToolCallChunk",
    "ToolSpec",
    "ToolsUnsupported",
    "Usage",
    "WireMessage",
    "ollama_host",
    "open_model",
    "parse_model_spec",
    "probe_default",
]
