"""Model spec strings, used by every command's ``--model``, and opening the model they name.

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

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

import httpx
from pydantic import BaseModel, ConfigDict

from .base import ChatModel
from .errors import ModelError, ModelNotFound
from .http import DEFAULT_CONNECT_TIMEOUT, DEFAULT_READ_TIMEOUT
from .mock import MockModel
from .ollama import DEFAULT_KEEP_ALIVE, OllamaModel, ollama_host
from .openai import OpenAIModel, api_base, api_key_from_env
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


async def open_model(
    spec: str | ModelSpec,
    *,
    timeout: float = DEFAULT_CONNECT_TIMEOUT,
    read_timeout: float | None = DEFAULT_READ_TIMEOUT,
    num_ctx: int | None = None,
    keep_alive: str | int = DEFAULT_KEEP_ALIVE,
    mock_delay: float = 0.0,
    env: Mapping[str, str] | None = None,
) -> ChatModel:
    """Open the model a spec names, ready to stream.

    ``timeout`` is the connect timeout, ``read_timeout`` the longest silence
    allowed while streaming. ``ollama`` alone asks the server for its models and
    takes the first; ``openai:URL`` without ``#MODEL`` likewise. Raises
    ``ModelError`` (e.g. ``ConnectionRefused``, ``ModelNotFound``) when the server
    cannot provide the model, ``ValueError`` for a bad spec or mock script.
    """
    parsed = parse_model_spec(spec) if isinstance(spec, str) else spec
    env = os.environ if env is None else env
    if parsed.kind == "mock":
        return MockModel(parsed.script, delay=mock_delay)
    if parsed.kind == "embedded":
        from .embedded import EmbeddedModel

        return EmbeddedModel(parsed.file, n_ctx=num_ctx, connect_timeout=timeout, read_timeout=read_timeout)
    if parsed.kind == "ollama":
        host = ollama_host(env.get("OLLAMA_HOST", ""))
        model = OllamaModel(
            parsed.name or "",
            host=host,
            num_ctx=num_ctx,
            keep_alive=keep_alive,
            connect_timeout=timeout,
            read_timeout=read_timeout,
        )
        if not parsed.name:
            try:
                models = await model.list_models()
            except ModelError:
                await model.aclose()
                raise
            if not models:
                await model.aclose()
                raise ModelNotFound(
                    "", f"the Ollama server at {host} has no models", "pull one, e.g. `ollama pull llama3.2`"
                )
            model.name = models[0].name
        return model
    server = OpenAIModel(
        parsed.url or "",
        parsed.name,
        api_key=api_key_from_env(env),
        connect_timeout=timeout,
        read_timeout=read_timeout,
    )
    try:
        await server.resolve_name()
    except ModelError:
        await server.aclose()
        raise
    return server


async def probe_default(
    timeout: float = 0.5, *, env: Mapping[str, str] | None = None
) -> tuple[ChatModel, str | None]:
    """The model to start with when none was asked for, and a notice for the user.

    Ollama when it answers at ``OLLAMA_HOST`` within ``timeout`` seconds and has a
    model; else the mock, with a notice that says why and how to connect a real one.
    """
    env = os.environ if env is None else env
    host = ollama_host(env.get("OLLAMA_HOST", ""))
    how = "start Ollama (`ollama serve`) and pass --model ollama:NAME, or --model openai:URL for llama.cpp, vLLM or LM Studio"
    try:
        async with httpx.AsyncClient(timeout=timeout) as client:
            response = await client.get(f"{host}/api/version")
        answered = response.status_code == 200
    except httpx.HTTPError:
        answered = False
    if not answered:
        return MockModel(), f"No model server answered at {host}: running on the mock model. To use a real model, {how}."
    try:
        # The short timeout was for the probe; the model gets the usual ones.
        return await open_model("ollama", env=env), None
    except ModelError as exc:
        return MockModel(), f"Ollama at {host}: {exc.message} ({exc.hint}). Running on the mock model meanwhile."
