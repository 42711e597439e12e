"""Which model a session talks to: the one the settings name, else whatever answers.

The one model a spec names (`mock`, `embedded`, `openai:URL`, `ollama:NAME`);
without a spec, Ollama if it answers at OLLAMA_HOST within a short timeout,
else the embedded engine when it is installed, else the mock, with a notice
saying which and how to connect a real model. `build_agent` picks the first
model here; `Agent.switch_model` the next.
"""

from __future__ import annotations

import os
from pathlib import Path

import httpx
from pydantic import ValidationError

from tailrent_tui.models.base import ChatModel
from tailrent_tui.models.embedded import EmbeddedModel, EngineUnavailable, engine_installed
from tailrent_tui.models.errors import first_problem
from tailrent_tui.models.mock import MockModel
from tailrent_tui.models.ollama import BadHost, OllamaModel, ollama_host
from tailrent_tui.models.openai import OpenAIModel, api_key_from_env
from tailrent_tui.models.spec import parse_model_spec
from tailrent_tui.models.wire import OllamaTags, parse_json_line
from tailrent_tui.settings import Settings

PROBE_TIMEOUT = 0.5
CONNECT_HOW = (
    "start Ollama (`ollama serve`) and pass --model ollama:NAME, "
    "or --model openai:URL for llama.cpp, vLLM or LM Studio"
)


class BuildError(RuntimeError):
    """The agent could not be built (unknown session, bad model spec, a locked session)."""


def _port_open(host: str, timeout: float) -> bool:
    """A bare TCP connect: the cheap answer to "is anything listening there?"."""
    import socket
    from urllib.parse import urlsplit

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


def _ollama_host() -> str:
    try:
        return ollama_host(os.environ.get("OLLAMA_HOST", ""))
    except BadHost as exc:
        raise BuildError(str(exc)) from None


def pick_model(settings: Settings, *, probe_timeout: float = PROBE_TIMEOUT) -> tuple[ChatModel, str | None]:
    """The model for these settings, and a notice for the user (None when all is as asked)."""
    read_timeout = settings.request_timeout
    if settings.model:
        try:
            spec = parse_model_spec(settings.model)
        except ValueError as exc:
            raise BuildError(str(exc)) from None
        if spec.kind == "mock":
            return MockModel(spec.script), None
        if spec.kind == "embedded":
            try:
                return embedded_model(settings, spec.file), None
            except EngineUnavailable as exc:
                raise BuildError(f"{exc.message}; {exc.hint}") from None
        if spec.kind == "openai":
            return OpenAIModel(spec.url or "", spec.name, api_key=api_key_from_env(), read_timeout=read_timeout), None
        host = _ollama_host()
        name = spec.name
        if not name:
            try:
                name = _first_ollama_model(host, probe_timeout * 4)
            except (httpx.HTTPError, ValueError) as exc:
                raise BuildError(f"Ollama at {host} did not answer ({exc}); {CONNECT_HOW}") from None
            if not name:
                raise BuildError(f"the Ollama server at {host} has no models: pull one, e.g. `ollama pull llama3.2`")
        return OllamaModel(
            name, host=host, num_ctx=settings.window, keep_alive=settings.keep_alive, read_timeout=read_timeout
        ), None
    host = _ollama_host()
    try:
        if not _port_open(host, probe_timeout):
            raise httpx.ConnectError(f"nothing listens at {host}")
        name = _first_ollama_model(host, probe_timeout)
    except (httpx.HTTPError, ValueError):
        return _fallback(settings, f"No model server answered at {host}", f"To use a real model, {CONNECT_HOW}.")
    if not name:
        return _fallback(settings, f"Ollama at {host} has no models (`ollama pull llama3.2`)", "")
    return OllamaModel(name, host=host, num_ctx=settings.window, keep_alive=settings.keep_alive, read_timeout=read_timeout), None


def embedded_model(settings: Settings, file: Path | None = None) -> EmbeddedModel:
    """The embedded engine (not started yet); an EngineUnavailable when it is not installed."""
    return EmbeddedModel(file, n_ctx=settings.window, read_timeout=settings.request_timeout)


def _fallback(settings: Settings, why: str, advice: str) -> tuple[ChatModel, str]:
    """No server to use: the embedded engine when installed, else the mock; the notice says which, and what it is good for."""
    if engine_installed():
        try:
            model = embedded_model(settings)
        except EngineUnavailable:
            pass
        else:
            return model, " ".join(filter(None, [f"{why}: running on the embedded engine, {model.summary}.", advice]))
    return MockModel(), " ".join(filter(None, [f"{why}: running on the mock model.", advice]))
