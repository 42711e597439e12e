"""Model backends: the ChatModel protocol, Ollama, OpenAI-compatible servers, the embedded engine, the mock.

`open_model` (factory.py) is the one way to open one, from a spec or none.

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
    from .factory import CannotOpenModel, ModelOptions, open_model
    from .mock import MockModel
    from .ollama import OllamaModel, ollama_host
    from .openai import OpenAIModel
    from .spec import ModelSpec, parse_model_spec
    from .summarizer import ModelSummarizer

_EXPORTS = {
    "base": "ChatModel Chunk ModelInfo TextDelta ThinkingDelta ToolCallChunk ToolSpec Usage WireMessage",
    "errors": "Busy Cancelled ConnectionRefused MalformedChunk MalformedResponse ModelError ModelNotFound "
    "ReadTimeout ServerError ServerUnavailable StreamCut StreamError ToolsUnsupported",
    "mock": "MockModel",
    "summarizer": "ModelSummarizer",
    "ollama": "OllamaModel ollama_host",
    "openai": "OpenAIModel",
    "spec": "ModelSpec parse_model_spec",
    "factory": "CannotOpenModel ModelOptions open_model",
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
    "CannotOpenModel",
    "ChatModel",
    "Chunk",
    "ConnectionRefused",
    "MalformedChunk",
    "MalformedResponse",
    "MockModel",
    "ModelError",
    "ModelInfo",
    "ModelNotFound",
    "ModelOptions",
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
]
