"""Opening a model: the one place a model spec, or none, becomes a ChatModel.

Every caller goes through `open_model`: the app and `ask` (the agent's build),
`/model` (the agent's switch), the bench's engine. With a spec it opens the
model the spec names (models/spec.py); without one, Ollama if it answers at
OLLAMA_HOST within `probe_timeout`, else the embedded engine when it is
installed, else the mock, with a notice saying which and how to connect a
real model.

It is synchronous, so the app can open its model before its event loop runs.
Nothing streams yet: an HTTP client connects on first use, on the loop that
uses it, and the embedded engine starts on first use (after the app's first
frame). Only two cases ask the network here, with short timeouts: no spec (is
Ollama there?) and `ollama` without a name (which model does it have?). An
`openai:URL` without `#MODEL` learns its name on first use (`resolve_name`).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import httpx
from pydantic import ValidationError

from .base import ChatModel
from .embedded import EmbeddedModel, EngineUnavailable, engine_installed
from .errors import first_problem
from .http import DEFAULT_READ_TIMEOUT
from .mock import MockModel
from .ollama import DEFAULT_KEEP_ALIVE, BadHost, OllamaModel, ollama_host
from .openai import OpenAIModel, api_key_from_env
from .spec import ModelSpec, parse_model_spec
from .wire import OllamaTags, parse_json_line

#: how long the start waits for Ollama before it runs on something else
PROBE_TIMEOUT = 0.5
CONNECT_HOW = "start Ollama (`ollama serve`) and pass --model ollama:NAME, or --model openai:URL for llama.cpp, vLLM or LM Studio"


class CannotOpenModel(RuntimeError):
    """The model a spec names cannot be opened (a bad spec, no server, no model file); one line for the user."""


@dataclass(frozen=True)
class ModelOptions:
    """What opening a model needs besides its spec; the agent fills it from the settings."""

    #: the window to ask for: Ollama's num_ctx, the embedded engine's n_ctx (None: the model's own)
    window: int | None = None
    #: how long Ollama keeps the model and its KV cache after a request
    keep_alive: str | int = DEFAULT_KEEP_ALIVE
    #: the longest silence allowed while a reply streams, in seconds
    read_timeout: float | None = DEFAULT_READ_TIMEOUT
    #: how long the start waits for Ollama (four times that to list an `ollama` spec's models)
    probe_timeout: float = PROBE_TIMEOUT
    #: where OLLAMA_HOST and the API keys are read; None: the process's environment
    env: Mapping[str, str] | None = None


def open_model(spec: str | ModelSpec | None, options: ModelOptions | None = None) -> tuple[ChatModel, str | None]:
    """The model a spec names (None: whatever answers), and a notice for the user (None when all is as asked).

    A CannotOpenModel, in one line, when the spec is bad or names a model that cannot be had.
    """
    opts = options or ModelOptions()
    env = os.environ if opts.env is None else opts.env
    if not spec:
        return _probe(opts, env)
    try:
        parsed = parse_model_spec(spec) if isinstance(spec, str) else spec
    except ValueError as exc:
        raise CannotOpenModel(str(exc)) from None
    if parsed.kind == "mock":
        return MockModel(parsed.script), None
    if parsed.kind == "embedded":
        try:
            return _embedded(opts, parsed.file), None
        except EngineUnavailable as exc:
            raise CannotOpenModel(f"{exc.message}; {exc.hint}") from None
    if parsed.kind == "openai":
        return OpenAIModel(parsed.url or "", parsed.name, api_key=api_key_from_env(env), read_timeout=opts.read_timeout), None
    host = _ollama_host(env)
    name = parsed.name
    if not name:
        try:
            name = _first_ollama_model(host, opts.probe_timeout * 4)
        except (httpx.HTTPError, ValueError) as exc:
            raise CannotOpenModel(f"Ollama at {host} did not answer ({exc}); {CONNECT_HOW}") from None
        if not name:
            raise CannotOpenModel(f"the Ollama server at {host} has no models: pull one, e.g. `ollama pull llama3.2`")
    return _ollama(name, host, opts), None


def _probe(opts: ModelOptions, env: Mapping[str, str]) -> tuple[ChatModel, str | None]:
    """No spec: Ollama when it answers with a model, else `_fallback`."""
    host = _ollama_host(env)
    try:
        if not _port_open(host, opts.probe_timeout):
            raise httpx.ConnectError(f"nothing listens at {host}")
        name = _first_ollama_model(host, opts.probe_timeout)
    except (httpx.HTTPError, ValueError):
        return _fallback(opts, f"No model server answered at {host}", f"To use a real model, {CONNECT_HOW}.")
    if not name:
        return _fallback(opts, f"Ollama at {host} has no models (`ollama pull llama3.2`)", "")
    return _ollama(name, host, opts), None


def _fallback(opts: ModelOptions, why: str, advice: str) -> tuple[ChatModel, str]:
    """No server to use: the embedded engine when installed, else the mock; the notice says which, and what it is good for."""
    if engine_installed():
        try:
            model = _embedded(opts)
        except EngineUnavailable:
            pass
        else:
            return model, " ".join(filter(None, [f"{why}: running on the embedded engine, {model.summary}.", advice]))
    return MockModel(), " ".join(filter(None, [f"{why}: running on the mock model.", advice]))


def _ollama(name: str, host: str, opts: ModelOptions) -> OllamaModel:
    return OllamaModel(name, host=host, num_ctx=opts.window, keep_alive=opts.keep_alive, read_timeout=opts.read_timeout)


def _embedded(opts: ModelOptions, file: Path | None = None) -> EmbeddedModel:
    """The embedded engine, not started yet (the agent gives it its slot dir first); an EngineUnavailable when not installed."""
    return EmbeddedModel(file, n_ctx=opts.window, read_timeout=opts.read_timeout)


def _ollama_host(env: Mapping[str, str]) -> str:
    try:
        return ollama_host(env.get("OLLAMA_HOST", ""))
    except BadHost as exc:
        raise CannotOpenModel(str(exc)) from None


def _port_open(host: str, timeout: float) -> bool:
    """A bare TCP connect: the cheap answer to "is anything listening there?"."""
    parts = urlsplit(host)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", port), timeout=timeout):
            return True
    except OSError:
        return False


def _first_ollama_model(host: str, timeout: float) -> str | None:
    """The first model ``/api/tags`` lists; a ValueError when it answers in another shape."""
    response = httpx.get(f"{host}/api/tags", timeout=timeout)
    response.raise_for_status()
    try:
        tags = OllamaTags.model_validate(parse_json_line(response.text))
    except ValidationError as exc:
        raise ValueError(f"{host}/api/tags answered in an unexpected shape ({first_problem(exc)})") from None
    models = tags.models or []
    return (models[0].name or models[0].model) if models else None
