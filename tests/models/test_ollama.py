"""The Ollama client against the fake Ollama server (real HTTP on loopback): every path, every fault."""

from __future__ import annotations

import asyncio
import socket
from contextlib import aclosing

import pytest

from tailrent_tui.models import (
    Busy,
    ConnectionRefused,
    MalformedChunk,
    ModelError,
    ModelNotFound,
    OllamaModel,
    ReadTimeout,
    ServerError,
    StreamCut,
    StreamError,
    TextDelta,
    ThinkingDelta,
    ToolCallChunk,
    ToolsUnsupported,
    Usage,
)
from tailrent_tui.models.errors import Cancelled
from tailrent_tui.models.ollama import ollama_host
from tests.support.fake_ollama import FakeModel, FakeOllama, Reply, fake_ollama  # noqa: F401

MODEL = "llama3.2:latest"
USER = [{"role": "user", "content": "What is the TTL of refresh tokens?"}]
GREP = {
    "name": "grep",
    "description": "search files",
    "parameters": {"type": "object", "properties": {"pattern": {"type": "string"}}},
}


async def collect(model, messages=USER, **kwargs):
    out = []
    async with aclosing(model.stream(messages, **kwargs)) as chunks:
        async for chunk in chunks:
            out.append(chunk)
    return out


def text_of(chunks):
    return "".join(c.text for c in chunks if isinstance(c, TextDelta))


@pytest.fixture
async def model(fake_ollama):
    m = OllamaModel(MODEL, host=fake_ollama.url, read_timeout=5.0)
    yield m
    await m.aclose()


async def test_streams_text_in_several_chunks_and_ends_with_usage(fake_ollama, model):
    fake_ollama.push(Reply(content="Fifteen minutes, rotated on use.", chunk_size=4))
    chunks = await collect(model)
    deltas = [c for c in chunks if isinstance(c, TextDelta)]
    assert len(deltas) > 1
    assert text_of(chunks) == "Fifteen minutes, rotated on use."
    assert isinstance(chunks[-1], Usage)
    assert sum(isinstance(c, Usage) for c in chunks) == 1


async def test_request_sends_num_ctx_keep_alive_and_ollama_shaped_messages(fake_ollama, model):
    model.num_ctx = 16384
    messages = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c1", "name": "get_weather", "arguments": {"city": "Toronto"}}],
        },
        {"role": "tool", "content": "11 degrees celsius", "tool_name": "get_weather", "tool_call_id": "c1"},
    ]
    await collect(model, messages, tools=[GREP], options={"temperature": 0, "max_tokens": 64})
    body = fake_ollama.requests[-1]
    assert body["stream"] is True
    assert body["keep_alive"] == "24h"  # settings.DEFAULT_KEEP_ALIVE
    assert body["options"] == {"num_ctx": 16384, "temperature": 0, "num_predict": 64}
    assert body["messages"][2]["tool_calls"] == [{"function": {"name": "get_weather", "arguments": {"city": "Toronto"}}}]
    assert body["messages"][3]["tool_name"] == "get_weather"
    assert body["tools"][0]["type"] == "function"
    assert body["tools"][0]["function"]["name"] == "grep"


async def test_usage_converts_the_final_line(fake_ollama, model):
    fake_ollama.push(Reply(content="ok", prompt_eval_count=169, eval_count=15, done_reason="stop"))
    usage = (await collect(model))[-1]
    assert usage.evaluated_tokens == 169
    assert usage.output_tokens == 15
    assert usage.prompt_tokens is None and usage.cached_tokens is None and not usage.cache_reported
    raw = usage.raw
    assert usage.prompt_ms == pytest.approx(raw["prompt_eval_duration"] / 1e6)
    assert usage.generation_ms == pytest.approx(raw["eval_duration"] / 1e6)
    assert usage.done_reason == "stop" and usage.model == MODEL


async def test_missing_metrics_mean_zero(fake_ollama, model):
    fake_ollama.push(Reply(content="", prompt_eval_count=0, eval_count=0))
    usage = (await collect(model))[-1]
    assert "prompt_eval_count" not in usage.raw and "eval_count" not in usage.raw
    assert (usage.evaluated_tokens, usage.output_tokens, usage.prompt_ms, usage.generation_ms) == (0, 0, 0.0, 0.0)


async def test_evaluated_count_shrinks_when_the_request_extends_the_previous_one(fake_ollama, model):
    first = (await collect(model))[-1]
    extended = [*USER, {"role": "assistant", "content": "15 minutes."}, {"role": "user", "content": "Why?"}]
    second = (await collect(model, extended))[-1]
    assert 0 < second.evaluated_tokens < first.evaluated_tokens + 20
    new_front = [{"role": "system", "content": "new system prompt"}, *extended]
    third = (await collect(model, new_front))[-1]
    assert third.evaluated_tokens > second.evaluated_tokens


async def test_thinking_streams_before_content(fake_ollama, model):
    fake_ollama.push(Reply(thinking="Check the decision first.", content="15 minutes."))
    chunks = await collect(model)
    kinds = [c.kind for c in chunks if isinstance(c, TextDelta | ThinkingDelta)]
    assert kinds[0] == "thinking" and kinds[-1] == "text"
    assert kinds.index("text") > max(i for i, k in enumerate(kinds) if k == "thinking")
    assert "".join(c.text for c in chunks if isinstance(c, ThinkingDelta)) == "Check the decision first."


async def test_think_setting_is_sent_and_refused_by_a_model_without_thinking(fake_ollama, model):
    model.think = True
    with pytest.raises(ServerError) as err:
        await collect(model)
    assert err.value.status == 400 and "does not support thinking" in err.value.message
    assert fake_ollama.requests[-1]["think"] is True


async def test_tool_calls_arrive_whole_with_id_and_index(fake_ollama, model):
    fake_ollama.push(
        Reply(
            content="",
            tool_calls=[
                {"name": "grep", "arguments": {"pattern": "TTL"}, "id": "call_k3j9x0ab"},
                {"name": "read_file", "arguments": {"path": "src/auth.py"}},
            ],
        )
    )
    chunks = await collect(model, tools=[GREP])
    calls = [c for c in chunks if isinstance(c, ToolCallChunk)]
    assert [(c.id, c.name, c.arguments, c.index) for c in calls] == [
        ("call_k3j9x0ab", "grep", {"pattern": "TTL"}, 0),
        ("call_00000001", "read_file", {"path": "src/auth.py"}, 1),
    ]
    assert all(c.arguments_error is None for c in calls)


async def test_tool_calls_from_an_older_server_get_ids(fake_ollama, model):
    fake_ollama.push(
        Reply(content="", legacy_tool_calls=True, tool_calls=[{"name": "a", "arguments": {}}, {"name": "b", "arguments": {}}])
    )
    calls = [c for c in await collect(model, tools=[GREP]) if isinstance(c, ToolCallChunk)]
    assert [c.index for c in calls] == [0, 1]
    assert len({c.id for c in calls}) == 2 and all(c.id for c in calls)


async def test_invalid_tool_arguments_become_an_arguments_error(fake_ollama, model):
    fake_ollama.push(Reply(content="", tool_calls=[{"name": "grep", "arguments": '{"pattern": "TTL"'}]))
    (call,) = [c for c in await collect(model, tools=[GREP]) if isinstance(c, ToolCallChunk)]
    assert call.arguments == {}
    assert call.raw_arguments == '{"pattern": "TTL"'
    assert "not valid JSON" in call.arguments_error


async def test_done_reason_length_is_visible(fake_ollama, model):
    fake_ollama.push(Reply(content="a reply that ran out of", done_reason="length"))
    usage = (await collect(model))[-1]
    assert usage.done_reason == "length" and usage.truncated


# -- the window, capabilities and listings ------------------------------------------------


async def test_window_comes_from_the_modelfile_then_the_loaded_instance_then_a_capped_default():
    models = [
        FakeModel("a:latest", num_ctx=12288),
        FakeModel("b:latest", loaded_ctx=65536),
        FakeModel("c:latest", context_length=2048),
        FakeModel("d:latest"),
    ]
    with FakeOllama(models) as fake:
        windows = []
        for m in models:
            client = OllamaModel(m.name, host=fake.url)
            windows.append(await client.context_window())
            await collect(client)
            assert fake.requests[-1]["options"]["num_ctx"] == windows[-1]
            await client.aclose()
    assert windows == [12288, 65536, 2048, 8192]


async def test_explicit_num_ctx_wins_and_skips_show(fake_ollama):
    client = OllamaModel(MODEL, host=fake_ollama.url, num_ctx=4096)
    await collect(client)
    await client.aclose()
    assert "/api/show" not in fake_ollama.paths
    assert fake_ollama.requests[-1]["options"]["num_ctx"] == 4096


async def test_list_models_version_and_running(fake_ollama, model):
    names = [m.name for m in await model.list_models()]
    assert names == [MODEL]
    assert await model.version() == "0.5.1"
    assert await model.running() == []
    await collect(model)
    (loaded,) = await model.running()
    assert loaded["context_length"] == await model.context_window()


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("", "http://127.0.0.1:11434"),
        ("example.com", "http://example.com:11434"),
        ("example.com:1234", "http://example.com:1234"),
        (":5000", "http://127.0.0.1:5000"),
        ("http://example.com", "http://example.com:80"),
        ("https://example.com", "https://example.com:443"),
        ("https://example.com:8443/ollama", "https://example.com:8443/ollama"),
        ("0.0.0.0", "http://0.0.0.0:11434"),
        ("[::1]:8080", "http://[::1]:8080"),
        ("::1", "http://[::1]:11434"),
    ],
)
def test_ollama_host_reads_like_ollama(value, expected):
    assert ollama_host(value) == expected


def test_ollama_host_defaults_to_the_environment(monkeypatch):
    monkeypatch.setenv("OLLAMA_HOST", "10.0.0.5:9999")
    assert ollama_host() == "http://10.0.0.5:9999"


# -- faults -------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_connection_refused_says_how_to_start_ollama():
    client = OllamaModel(MODEL, host=f"127.0.0.1:{free_port()}", num_ctx=4096)
    with pytest.raises(ConnectionRefused) as err:
        await collect(client)
    await client.aclose()
    assert "ollama serve" in err.value.hint and "OLLAMA_HOST" in err.value.hint


async def test_unknown_model_404_says_how_to_pull_it(fake_ollama):
    client = OllamaModel("qwen3:8b", host=fake_ollama.url, num_ctx=4096)
    with pytest.raises(ModelNotFound) as err:
        await collect(client)
    await client.aclose()
    assert "qwen3:8b" in err.value.message
    assert "ollama pull qwen3:8b" in err.value.hint


async def test_unknown_model_is_also_caught_by_show(fake_ollama):
    client = OllamaModel("nope", host=fake_ollama.url)
    with pytest.raises(ModelNotFound):
        await client.context_window()
    await client.aclose()


async def test_tools_unsupported_retries_without_tools_and_says_so():
    with FakeOllama([FakeModel("gemma2:2b", tools=False)]) as fake:
        client = OllamaModel("gemma2:2b", host=fake.url, num_ctx=4096)
        chunks = await collect(client, tools=[GREP])
        assert text_of(chunks) == Reply().content
        assert chunks[-1].tools_dropped and client.tools_dropped
        assert [("tools" in r) for r in fake.requests] == [True, False]
        # Later turns leave the tools out from the start, and still say so.
        again = await collect(client, tools=[GREP])
        assert again[-1].tools_dropped
        assert "tools" not in fake.requests[-1] and len(fake.requests) == 3
        await client.aclose()


async def test_tools_unsupported_raises_when_retry_is_off():
    with FakeOllama([FakeModel("gemma2:2b", tools=False)]) as fake:
        client = OllamaModel("gemma2:2b", host=fake.url, num_ctx=4096, retry_without_tools=False)
        with pytest.raises(ToolsUnsupported) as err:
            await collect(client, tools=[GREP])
        await client.aclose()
    assert "does not support tools" in err.value.message


@pytest.mark.parametrize(
    ("status", "error", "kind"),
    [
        (500, "unexpected EOF", ServerError),
        (503, "server busy, please try again. maximum pending requests exceeded", Busy),
        (499, "request canceled", Cancelled),
    ],
)
async def test_error_statuses(fake_ollama, model, status, error, kind):
    fake_ollama.push(Reply(fault="status", status=status, error=error))
    with pytest.raises(kind) as err:
        await collect(model)
    assert error in err.value.message
    if isinstance(err.value, ServerError):
        assert err.value.status == status
    # The server is fine afterwards: a retry works.
    assert text_of(await collect(model)) == Reply().content


async def test_error_line_mid_stream_keeps_the_partial_reply(fake_ollama, model):
    fake_ollama.push(Reply(content="The TTL is fifteen minutes", fault="error_line", error="out of memory", lines_before_fault=2))
    seen = []
    with pytest.raises(StreamError) as err:
        async for chunk in model.stream(USER):
            seen.append(chunk)
    assert "out of memory" in err.value.message
    assert text_of(seen) == "The TTL is fifteen minutes"[:10]


@pytest.mark.parametrize("fault", ["cut", "cut_clean"])
async def test_stream_cut_before_done(fake_ollama, model, fault):
    fake_ollama.push(Reply(content="The TTL is fifteen minutes", fault=fault, lines_before_fault=3))
    seen = []
    with pytest.raises(StreamCut):
        async for chunk in model.stream(USER):
            seen.append(chunk)
    assert text_of(seen) == "The TTL is fifteen minutes"[:15]
    assert not any(isinstance(c, Usage) for c in seen)


async def test_malformed_line_says_which(fake_ollama, model):
    fake_ollama.push(Reply(content="The TTL is fifteen minutes", fault="malformed", lines_before_fault=2))
    with pytest.raises(MalformedChunk) as err:
        await collect(model)
    assert err.value.line_number == 3
    assert "assis" in err.value.line and "line 3" in err.value.message


async def test_a_stalled_server_raises_read_timeout(fake_ollama):
    client = OllamaModel(MODEL, host=fake_ollama.url, num_ctx=4096, read_timeout=0.3)
    fake_ollama.push(Reply(fault="stall", lines_before_fault=1))
    with pytest.raises(ReadTimeout) as err:
        await collect(client)
    assert "0.3 s" in err.value.message
    # Timing out closed the connection: the server sees the hang-up.
    assert await asyncio.to_thread(fake_ollama.disconnected.wait, 10)
    await client.aclose()


async def test_cancelling_the_consumer_closes_the_response(fake_ollama, model):
    fake_ollama.push(Reply(content="The TTL is fifteen minutes", fault="stall", lines_before_fault=1))
    first = asyncio.Event()

    async def consume():
        async for chunk in model.stream(USER):
            if isinstance(chunk, TextDelta):
                first.set()

    task = asyncio.create_task(consume())
    await first.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await asyncio.to_thread(fake_ollama.disconnected.wait, 10)
    # And the next turn works.
    assert text_of(await collect(model)) == Reply().content


def test_model_errors_have_a_message_and_a_hint():
    for error in (ConnectionRefused("x", "y"), ModelNotFound("m"), Busy(), ReadTimeout(1.0), StreamCut("x", "y")):
        assert isinstance(error, ModelError)
        assert error.message and error.hint
