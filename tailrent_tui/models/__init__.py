"""Model backends: the ChatModel protocol, Ollama, OpenAI-compatible servers, the mock.

Everything here does network I/O (httpx) or stands in for it; ``core`` never imports it.
"""

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
