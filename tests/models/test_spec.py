"""Model spec strings and open_model (models/factory.py), against the fake Ollama on loopback."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from tailrent_tui.models import (
    MockModel,
    ModelSpec,
    OllamaModel,
    TextDelta,
    parse_model_spec,
)
from tailrent_tui.models.factory import CannotOpenModel, ModelOptions, open_model
from tests.support.fake_ollama import FakeModel, FakeOllama, fake_ollama  # noqa: F401


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("mock", ModelSpec(kind="mock")),
        ("mock:scripts/demo.jsonl", ModelSpec(kind="mock", script=Path("scripts/demo.jsonl"))),
        ("ollama", ModelSpec(kind="ollama")),
        ("ollama:qwen3:8b", ModelSpec(kind="ollama", name="qwen3:8b")),
        ("openai:http://127.0.0.1:8080", ModelSpec(kind="openai", url="http://127.0.0.1:8080")),
        (
            "openai:http://127.0.0.1:8080/v1#qwen2.5-coder",
            ModelSpec(kind="openai", url="http://127.0.0.1:8080/v1", name="qwen2.5-coder"),
        ),
        (" ollama:llama3.2 ", ModelSpec(kind="ollama", name="llama3.2")),
    ],
)
def test_parse_model_spec(spec, expected):
    assert parse_model_spec(spec) == expected
    assert parse_model_spec(str(expected)) == expected


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("gpt4", "unknown model spec 'gpt4'"),
        ("", "unknown model spec"),
        ("ollama:", "needs a model name"),
        ("mock:", "needs a script path"),
        ("openai:", "needs a server URL"),
        ("openai:http://h:1#", "a model name must follow"),
        ("openai:ftp://h", "must be http"),
        ("Ollama:llama3", "unknown model spec"),
    ],
)
def test_bad_specs_say_what_is_accepted(spec, message):
    with pytest.raises(ValueError, match=message) as err:
        parse_model_spec(spec)
    if "unknown" in message:
        assert "openai:URL#MODEL" in str(err.value)


async def test_open_mock_with_a_script(tmp_path):
    script = tmp_path / "s.jsonl"
    script.write_text(json.dumps({"text": "scripted"}) + "\n", encoding="utf-8")
    model, _ = open_model(f"mock:{script}")
    assert isinstance(model, MockModel)
    chunks = [c async for c in model.stream([{"role": "user", "content": "hi"}])]
    assert "".join(c.text for c in chunks if isinstance(c, TextDelta)) == "scripted"


async def test_open_ollama_alone_takes_the_first_model_at_ollama_host():
    with FakeOllama([FakeModel("qwen3:8b"), FakeModel("llama3.2:latest")]) as fake:
        model, _ = open_model("ollama", ModelOptions(env={"OLLAMA_HOST": fake.url}, window=4096, keep_alive="2h"))
        assert isinstance(model, OllamaModel)
        assert model.name == "qwen3:8b"
        [c async for c in model.stream([{"role": "user", "content": "hi"}])]
        await model.aclose()
        body = fake.requests[-1]
    assert body["model"] == "qwen3:8b"
    assert body["keep_alive"] == "2h" and body["options"]["num_ctx"] == 4096


async def test_open_ollama_with_host_without_scheme(fake_ollama):
    host_port = fake_ollama.url.removeprefix("http://")
    model, _ = open_model("ollama:llama3.2:latest", ModelOptions(env={"OLLAMA_HOST": host_port}))
    assert model.base_url == fake_ollama.url
    assert await model.context_window() == 8192
    await model.aclose()


async def test_open_ollama_without_models_says_to_pull_one():
    with FakeOllama([]) as fake, pytest.raises(CannotOpenModel) as err:
        open_model("ollama", ModelOptions(env={"OLLAMA_HOST": fake.url}))
    assert str(err.value) == f"the Ollama server at {fake.url} has no models: pull one, e.g. `ollama pull llama3.2`"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_open_ollama_when_nothing_listens():
    with pytest.raises(CannotOpenModel, match=r"^Ollama at http://127\.0\.0\.1:\d+ did not answer \(.*\); start Ollama"):
        open_model("ollama", ModelOptions(env={"OLLAMA_HOST": f"127.0.0.1:{closed_port()}"}))


async def test_no_spec_uses_ollama_when_it_answers(fake_ollama):
    model, notice = open_model(None, ModelOptions(env={"OLLAMA_HOST": fake_ollama.url}))
    assert isinstance(model, OllamaModel) and notice is None
    assert model.name == "llama3.2:latest"
    await model.aclose()


async def test_no_spec_falls_back_to_the_mock_and_says_how_to_connect(monkeypatch):
    # without the embedded engine (tests/models/test_embedded.py has the case with it)
    monkeypatch.setattr("tailrent_tui.models.factory.engine_installed", lambda: False)
    model, notice = open_model(None, ModelOptions(env={"OLLAMA_HOST": f"127.0.0.1:{closed_port()}"}))
    assert isinstance(model, MockModel)
    assert "mock" in notice and "--model ollama:NAME" in notice and "openai:URL" in notice


async def test_no_spec_with_an_empty_ollama_runs_the_mock_and_says_why(monkeypatch):
    monkeypatch.setattr("tailrent_tui.models.factory.engine_installed", lambda: False)
    with FakeOllama([]) as fake:
        model, notice = open_model(None, ModelOptions(env={"OLLAMA_HOST": fake.url}))
    assert isinstance(model, MockModel)
    assert "no models" in notice and "ollama pull" in notice
