"""Model spec strings, used by every command's ``--model`` (``factory.open_model`` opens the model one names).

=====================  ===================================================
``mock``               the built-in mock model
``mock:PATH``          the mock, replying from the JSONL script at PATH
``ollama``             the first model the Ollama server lists (``/api/tags``)
``ollama:NAME``        that model on the Ollama server (``OLLAMA_HOST``)
``openai:URL``         the first model of an OpenAI-compatible server at URL
``openai:URL#MODEL``   that model on the server at URL
``embedded``           llama.cpp in this process, with a model a package ships
``embedded:FILE``      llama.cpp in this process, serving that GGUF file
=====================  ===================================================
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import httpx
from pydantic import BaseModel, ConfigDict

from .openai import api_base
from .text import redact

SPEC_HELP = "mock, mock:PATH, ollama, ollama:NAME, openai:URL, openai:URL#MODEL, embedded or embedded:FILE.gguf"


class ModelSpec(BaseModel):
    """A parsed model spec."""

    model_config = ConfigDict(frozen=True)
    kind: Literal["mock", "ollama", "openai", "embedded"]
    name: str | None = None
    url: str | None = None
    script: Path | None = None
    file: Path | None = None

    def __str__(self) -> str:
        if self.kind == "mock":
            return f"mock:{self.script}" if self.script else "mock"
        if self.kind == "embedded":
            return f"embedded:{self.file}" if self.file else "embedded"
        if self.kind == "ollama":
            return f"ollama:{self.name}" if self.name else "ollama"
        # redacted as a whole: a URL without a scheme (`user:pass@host`) is known for one after `openai:`
        return redact(f"openai:{self.url or ''}") + (f"#{self.name}" if self.name else "")


def parse_model_spec(spec: str) -> ModelSpec:
    """Parse a spec string; a ValueError names what is wrong and what is accepted."""
    text = spec.strip()
    kind, sep, rest = text.partition(":")
    rest = rest.strip()
    if kind == "mock":
        if sep and not rest:
            raise ValueError("model spec 'mock:' needs a script path after the colon")
        return ModelSpec(kind="mock", script=Path(rest).expanduser() if rest else None)
    if kind == "ollama":
        if sep and not rest:
            raise ValueError("model spec 'ollama:' needs a model name after the colon, e.g. ollama:llama3.2")
        return ModelSpec(kind="ollama", name=rest or None)
    if kind == "embedded":
        if sep and not rest:
            raise ValueError("model spec 'embedded:' needs a GGUF file after the colon, e.g. embedded:~/models/qwen.gguf")
        return ModelSpec(kind="embedded", file=Path(rest).expanduser() if rest else None)
    shown = redact(spec)
    if kind == "openai":
        url, hash_sep, model = rest.partition("#")
        url, model = url.strip(), model.strip()
        if not url:
            raise ValueError("model spec 'openai:' needs a server URL, e.g. openai:http://127.0.0.1:8080")
        if hash_sep and not model:
            raise ValueError(f"model spec {shown!r}: a model name must follow '#'")
        if "://" in url and not url.lower().startswith(("http://", "https://")):
            raise ValueError(f"model spec {shown!r}: the URL must be http:// or https://")
        try:
            parts = httpx.URL(api_base(url))
            valid = bool(parts.host) and parts.port != 0
        except (httpx.InvalidURL, ValueError):
            valid = False
        if not valid:
            bad = redact("openai:" + url).removeprefix("openai:")
            raise ValueError(f"model spec {shown!r}: {bad!r} is not a server URL, e.g. http://127.0.0.1:8080")
        return ModelSpec(kind="openai", url=url, name=model or None)
    raise ValueError(f"unknown model spec {shown!r}; use {SPEC_HELP}")
