"""The OpenAI-compatible client's protocol handling, against a scripted SSE server on loopback.

The real llama.cpp engine (test_models_engine.py) covers streaming, usage, the cache,
cancellation and timeouts; a base model never calls tools nor fails on cue, so tool
call fragments, usage variants and faults are scripted here.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import aclosing
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tailrent_tui.models import (
    Busy,
    MalformedChunk,
    ModelNotFound,
    OpenAIModel,
    ServerError,
    StreamCut,
    StreamError,
    TextDelta,
    ThinkingDelta,
    ToolCallChunk,
    Usage,
)
from tailrent_tui.models.errors import ContextOverflow
from tailrent_tui.models.factory import ModelOptions, open_model
from tailrent_tui.models.openai import api_base, openai_messages


@dataclass
class Scripted:
    status: int = 200
    events: list[Any] = field(default_factory=list)  # dicts become `data: {json}`, strings are sent raw
    done: bool = True
    body: Any = None  # for error statuses


class ScriptedServer:
    def __init__(self) -> None:
        self.script: list[Scripted] = []
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.models: dict[str, Any] | None = {
            "object": "list",
            "data": [{"id": "qwen2.5-coder", "object": "model", "max_model_len": 32768}],
        }
        #: llama.cpp's /props, when the server plays llama.cpp
        self.props: dict[str, Any] | None = None
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:
                """Quiet."""

            def _send(self, status: int, payload: bytes, content_type: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def do_GET(self) -> None:
                server.headers.append(dict(self.headers))
                if self.path == "/v1/models" and server.models is not None:
                    self._send(200, json.dumps(server.models).encode(), "application/json")
                elif self.path == "/props" and server.props is not None:
                    self._send(200, json.dumps(server.props).encode(), "application/json")
                else:
                    self._send(404, b'{"error": {"message": "File Not Found"}}', "application/json")

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(body)
                server.headers.append(dict(self.headers))
                step = server.script.pop(0) if server.script else Scripted(events=[_text("ok")])
                if step.status != 200:
                    return self._send(step.status, json.dumps(step.body).encode(), "application/json")
                lines = [e if isinstance(e, str) else "data: " + json.dumps(e) for e in step.events]
                if step.done:
                    lines.append("data: [DONE]")
                self._send(200, "".join(line + "\n\n" for line in lines).encode(), "text/event-stream")

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def _text(text: str) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}], "model": "qwen2.5-coder"}


def _finish(reason: str) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]}


def _usage(**usage: Any) -> dict[str, Any]:
    return {"choices": [], "usage": usage}


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    s = ScriptedServer()
    yield s
    s.stop()


@pytest.fixture
async def model(server):
    m = OpenAIModel(server.url, "qwen2.5-coder", read_timeout=5.0)
    yield m
    await m.aclose()


async def collect(model, messages=None, **kwargs):
    messages = messages or [{"role": "user", "content": "hi"}]
    out = []
    async with aclosing(model.stream(messages, **kwargs)) as chunks:
        async for chunk in chunks:
            out.append(chunk)
    return out


GREP = {"name": "grep", "description": "search", "parameters": {"type": "object", "properties": {"pattern": {"type": "string"}}}}


def test_api_base_adds_v1_only_to_a_bare_server():
    assert api_base("http://127.0.0.1:8080") == "http://127.0.0.1:8080/v1"
    assert api_base("http://127.0.0.1:8080/v1/") == "http://127.0.0.1:8080/v1"
    assert api_base("localhost:1234") == "http://localhost:1234/v1"
    assert api_base("https://openrouter.ai/api/v1") == "https://openrouter.ai/api/v1"


def test_messages_convert_to_openai_shape():
    wire = openai_messages(
        [
            {"role": "assistant", "content": "", "tool_calls": [{"id": "c7", "name": "grep", "arguments": {"pattern": "TTL"}}]},
            {"role": "tool", "content": "auth.py:12: TTL = 900", "tool_name": "grep", "tool_call_id": "c7"},
        ]
    )
    call = wire[0]["tool_calls"][0]
    assert call["id"] == "c7" and call["type"] == "function"
    assert json.loads(call["function"]["arguments"]) == {"pattern": "TTL"}
    assert isinstance(call["function"]["arguments"], str)
    assert wire[1]["tool_call_id"] == "c7" and wire[1]["role"] == "tool"


def test_bad_neutral_messages_are_refused_with_their_index():
    with pytest.raises(ValueError, match="message 1: role"):
        openai_messages([{"role": "user", "content": "a"}, {"role": "robot", "content": "b"}])


async def test_request_asks_for_usage_and_sends_tools_and_options(server, model):
    await collect(model, tools=[GREP], options={"max_tokens": 32, "temperature": 0})
    body = server.requests[-1]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["model"] == "qwen2.5-coder"
    assert body["max_tokens"] == 32 and body["temperature"] == 0
    assert body["tools"][0]["function"]["name"] == "grep"


async def test_tool_call_fragments_are_joined_into_whole_calls(server, model):
    server.script.append(
        Scripted(
            events=[
                {
                    "choices": [
                        {
                            "index": 0,
                            "delta": {
                                "tool_calls": [
                                    {
                                        "index": 0,
                                        "id": "call_a",
                                        "type": "function",
                                        "function": {"name": "grep", "arguments": ""},
                                    }
                                ]
                            },
                        }
                    ]
                },
                {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": '{"patt'}}]}}]},
                {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": 'ern": "TTL"}'}}]}}]},
                {
                    "choices": [
                        {
                            "index": 0,
                            "delta": {
                                "tool_calls": [
                                    {
                                        "index": 1,
                                        "id": "call_b",
                                        "function": {"name": "read_file", "arguments": '{"path": "a.py"'},
                                    }
                                ]
                            },
                        }
                    ]
                },
                _finish("tool_calls"),
                _usage(prompt_tokens=50, completion_tokens=20),
            ]
        )
    )
    chunks = await collect(model, tools=[GREP])
    calls = [c for c in chunks if isinstance(c, ToolCallChunk)]
    assert [(c.id, c.name, c.arguments, c.index) for c in calls] == [
        ("call_a", "grep", {"pattern": "TTL"}, 0),
        ("call_b", "read_file", {}, 1),
    ]
    assert calls[0].arguments_error is None
    assert calls[1].raw_arguments == '{"path": "a.py"' and "not valid JSON" in calls[1].arguments_error
    assert chunks[-1].done_reason == "tool_calls"


async def test_usage_from_prompt_tokens_details(server, model):
    server.script.append(
        Scripted(
            events=[
                _text("a"),
                _text("b"),
                _finish("length"),
                _usage(prompt_tokens=678, completion_tokens=4, prompt_tokens_details={"cached_tokens": 543}),
            ]
        )
    )
    usage = (await collect(model))[-1]
    assert (usage.prompt_tokens, usage.cached_tokens, usage.evaluated_tokens, usage.output_tokens) == (678, 543, 135, 4)
    assert usage.cache_reported and usage.truncated
    assert usage.prompt_ms is None and usage.generation_ms is None


async def test_llama_cpp_timings_take_precedence(server, model):
    timings = {"cache_n": 540, "prompt_n": 138, "prompt_ms": 247.1, "predicted_n": 4, "predicted_ms": 56.7}
    server.script.append(
        Scripted(
            events=[
                _text("a"),
                _finish("stop"),
                {
                    **_usage(prompt_tokens=678, completion_tokens=4, prompt_tokens_details={"cached_tokens": 543}),
                    "timings": timings,
                },
            ]
        )
    )
    usage = (await collect(model))[-1]
    assert (usage.cached_tokens, usage.evaluated_tokens) == (540, 138)
    assert (usage.prompt_ms, usage.generation_ms) == (247.1, 56.7)
    assert usage.raw["timings"] == timings


async def test_usage_without_cache_details_says_the_cache_is_unknown(server, model):
    server.script.append(Scripted(events=[_text("a"), _finish("stop"), _usage(prompt_tokens=30, completion_tokens=1)]))
    usage = (await collect(model))[-1]
    assert usage.prompt_tokens == 30 and usage.cached_tokens is None and usage.evaluated_tokens is None
    assert not usage.cache_reported


async def test_reasoning_content_streams_as_thinking(server, model):
    server.script.append(
        Scripted(events=[{"choices": [{"index": 0, "delta": {"reasoning_content": "think"}}]}, _text("answer"), _finish("stop")])
    )
    chunks = await collect(model)
    assert [type(c) for c in chunks] == [ThinkingDelta, TextDelta, Usage]


async def test_sse_comments_and_event_lines_are_skipped(server, model):
    server.script.append(Scripted(events=[": keep-alive", "event: message", _text("fine"), _finish("stop")]))
    chunks = await collect(model)
    assert [c.text for c in chunks if isinstance(c, TextDelta)] == ["fine"]


async def test_error_event_mid_stream(server, model):
    server.script.append(Scripted(events=[_text("part"), {"error": {"message": "context shift failed", "code": 500}}]))
    seen = []
    with pytest.raises(StreamError) as err:
        async for chunk in model.stream([{"role": "user", "content": "hi"}]):
            seen.append(chunk)
    assert "context shift failed" in err.value.message
    assert [c.text for c in seen] == ["part"]


async def test_stream_without_done_is_cut(server, model):
    server.script.append(Scripted(events=[_text("part"), _finish("stop")], done=False))
    with pytest.raises(StreamCut):
        await collect(model)


async def test_malformed_data_line(server, model):
    server.script.append(Scripted(events=[_text("part"), 'data: {"choices": [', _finish("stop")]))
    with pytest.raises(MalformedChunk) as err:
        await collect(model)
    assert err.value.line_number == 3  # an SSE event is a data line and a blank line


@pytest.mark.parametrize(
    ("status", "body", "kind", "hint_part"),
    [
        (
            404,
            {"error": {"message": "The model `gpt-x` does not exist", "type": "invalid_request_error"}},
            ModelNotFound,
            "/models",
        ),
        (401, {"error": {"message": "Invalid API Key", "type": "authentication_error"}}, ServerError, "OPENAI_API_KEY"),
        (503, {"error": {"message": "Loading model", "type": "unavailable_error", "code": 503}}, Busy, "retry"),
        (500, {"error": {"message": "boom"}}, ServerError, "HTTP 500"),
        # llama.cpp's words, then vLLM's and OpenAI's
        (
            400,
            {
                "error": {
                    "code": 400,
                    "message": "the request exceeds the available context size, try increasing it",
                    "type": "exceed_context_size_error",
                }
            },
            ContextOverflow,
            "ctrl+r",
        ),
        (
            400,
            {
                "error": {
                    "message": "This model's maximum context length is 8192 tokens. However, you requested 9000 tokens.",
                    "type": "BadRequestError",
                }
            },
            ContextOverflow,
            "ctrl+r",
        ),
    ],
)
async def test_error_statuses(server, model, status, body, kind, hint_part):
    server.script.append(Scripted(status=status, body=body))
    with pytest.raises(kind) as err:
        await collect(model)
    assert body["error"]["message"] in err.value.message
    assert hint_part in err.value.hint


async def test_tools_unsupported_retries_without_tools(server, model):
    server.script.append(
        Scripted(status=400, body={"error": {"message": "tools param requires --jinja flag; tools are not supported"}})
    )
    chunks = await collect(model, tools=[GREP])
    assert chunks[-1].tools_dropped and model.tools_dropped
    assert ["tools" in r for r in server.requests] == [True, False]


async def test_a_server_that_refuses_n_cache_reuse_gets_the_request_again_without_it(server, model):
    model.cache_reuse = 64
    server.script.append(Scripted(status=400, body={"error": {"message": "unknown field: n_cache_reuse"}}))
    chunks = await collect(model)
    assert [r.get("n_cache_reuse") for r in server.requests] == [64, None]
    assert isinstance(chunks[0], TextDelta) and model.cache_reuse is None
    assert model.cache_reuse_refused == "unknown field: n_cache_reuse"
    await collect(model)
    assert "n_cache_reuse" not in server.requests[-1]


async def test_open_model_picks_the_first_model_and_sends_the_api_key(server):
    model, _ = open_model(f"openai:{server.url}", ModelOptions(env={"OPENAI_API_KEY": "sk-test-123"}))
    await model.resolve_name()
    assert model.name == "qwen2.5-coder"
    assert await model.context_window() == 32768
    await collect(model)
    await model.aclose()
    assert server.headers[-1]["Authorization"] == "Bearer sk-test-123"


async def test_tailrent_api_key_wins_over_openai_api_key(server):
    model, _ = open_model(f"openai:{server.url}#other", ModelOptions(env={"OPENAI_API_KEY": "a", "TAILRENT_API_KEY": "b"}))
    await collect(model)
    await model.aclose()
    assert model.name == "other"
    assert server.requests[-1]["model"] == "other"
    assert server.headers[-1]["Authorization"] == "Bearer b"


async def test_no_key_sends_no_authorization(server):
    model, _ = open_model(f"openai:{server.url}", ModelOptions(env={}))
    await collect(model)
    await model.aclose()
    assert "Authorization" not in server.headers[-1]


async def test_a_server_without_a_models_list_still_chats(server):
    server.models = None
    model, _ = open_model(f"openai:{server.url}#named", ModelOptions(env={}))
    assert await model.context_window() is None
    assert isinstance((await collect(model))[-1], Usage)
    await model.aclose()
    unnamed, _ = open_model(f"openai:{server.url}", ModelOptions(env={}))
    with pytest.raises(ModelNotFound, match="offers no models"):
        await unnamed.resolve_name()


async def test_a_request_the_server_refuses_as_too_large_is_fitted_to_a_smaller_window_on_retry(server, tmp_path):
    from tailrent_tui.agent.loop import Agent
    from tailrent_tui.core.session import Session
    from tailrent_tui.core.tokens import get_counter
    from tailrent_tui.settings import Settings

    session = Session(counter=get_counter("chars4"), system="Be brief.", window=4096)
    agent = Agent(
        session=session,
        model=OpenAIModel(server.url, "qwen2.5-coder", read_timeout=5.0),
        settings=Settings(window=4096, max_reply_tokens=256, tokenizer="chars4"),
        workspace=tmp_path,
    )
    try:
        for i in range(12):  # about 3,400 tokens of history: fits our count, not the server's
            session.add("user" if i % 2 == 0 else "assistant", f"turn {i}: " + "we talked it over for a while. " * 36)
        server.script.append(
            Scripted(
                status=400,
                body={
                    "error": {
                        "code": 400,
                        "type": "exceed_context_size_error",
                        "message": "the request exceeds the available context size",
                    }
                },
            )
        )
        first = await agent.turn("and now?")
        assert isinstance(first.error, ContextOverflow) and "ctrl+r" in first.error.hint
        assert agent.budget.budget_window() < 4096
        sent_before = len(server.requests)
        retry = await agent.turn(None)
        assert retry.error is None and len(server.requests) == sent_before + 1
        assert session.usage[-1].context_tokens + agent.budget.reply_cap() <= agent.budget.budget_window()
        assert session.folds or session.spills
    finally:
        await agent.model.aclose()
