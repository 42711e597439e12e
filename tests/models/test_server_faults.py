"""Hostile model servers (issue 13): odd but parseable data, split characters, redirects and
early ends, Retry-After, OLLAMA_HOST, credentials in URLs, `bench --engine` against a bad server.

Every server here is real HTTP on loopback (`Hostile`: raw bytes, written in the pieces a
test asks for). The clients must answer each fault with a `ModelError` (one line, a hint),
never another exception; `ask` must keep the prompt and any partial reply in the journal.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import aclosing
from dataclasses import dataclass, field
from email.utils import formatdate
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tailrent_tui.cli import cli
from tailrent_tui.core.messages import MessageAdded, Note
from tailrent_tui.models import (
    Busy,
    ModelError,
    OllamaModel,
    OpenAIModel,
    TextDelta,
    ToolCallChunk,
    Usage,
)
from tailrent_tui.models.ollama import ollama_host
from tailrent_tui.models.spec import parse_model_spec
from tailrent_tui.models.text import redact
from tailrent_tui.store.sessions import find_session

# -- a server that sends exactly the bytes a test scripts ----------------------------------


@dataclass
class Answer:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    pieces: list[bytes] = field(default_factory=list)  # written one by one, flushed, a pause between
    hang: bool = False  # send nothing, hold the connection until the test ends


def sse(*events: Any, done: bool = True) -> Answer:
    """An SSE stream: dicts become `data: {json}`, strings are sent as they are."""
    lines = [e if isinstance(e, str) else "data: " + json.dumps(e) for e in events]
    if done:
        lines.append("data: [DONE]")
    return Answer(headers={"Content-Type": "text/event-stream"}, pieces=[(line + "\n\n").encode() for line in lines])


def ndjson(*lines: Any) -> Answer:
    return Answer(
        headers={"Content-Type": "application/x-ndjson"},
        pieces=[(line if isinstance(line, str) else json.dumps(line)).encode() + b"\n" for line in lines],
    )


def body(data: Any, status: int = 200, **headers: str) -> Answer:
    raw = data if isinstance(data, bytes) else json.dumps(data).encode()
    return Answer(status=status, headers={"Content-Type": "application/json", **headers}, pieces=[raw])


class Hostile:
    """Routes: path -> Answer (the same every time) or a list of Answers (one per request)."""

    def __init__(self) -> None:
        self.routes: dict[str, Answer | list[Answer]] = {}
        self.requests: list[str] = []
        self._release = threading.Event()
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _answer_for(self, path: str) -> Answer:
        route = self.routes.get(path.split("?")[0])
        if isinstance(route, list):
            return route.pop(0) if route else body({"error": "no more answers"}, 500)
        return route or body({"error": {"message": "File Not Found"}}, 404)

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
            head, rest = data.split(b"\r\n\r\n", 1)
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.decode("latin-1").partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            while len(rest) < length:
                chunk = conn.recv(65536)
                if not chunk:
                    break
                rest += chunk
            path = head.split(b" ")[1].decode()
            self.requests.append(path)
            answer = self._answer_for(path)
            if answer.hang:
                self._release.wait(60)
                return
            reason = {200: "OK", 307: "Temporary Redirect", 308: "Permanent Redirect"}.get(answer.status, "Status")
            lines = [f"HTTP/1.1 {answer.status} {reason}", "Connection: close"]
            lines += [f"{k}: {v}" for k, v in answer.headers.items()]
            try:
                conn.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
                for piece in answer.pieces:
                    conn.sendall(piece)
                    time.sleep(0.01)
            except OSError:
                pass

    def stop(self) -> None:
        self._release.set()
        self._sock.close()


@pytest.fixture
def hostile() -> Iterator[Hostile]:
    server = Hostile()
    yield server
    server.stop()


def text_event(text: str) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}], "model": "m"}


FINISH = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
USER = [{"role": "user", "content": "hello"}]


async def collect(model: Any) -> tuple[list[Any], BaseException | None]:
    """The chunks a stream gave before it ended, and what it raised (None when it ended well)."""
    out: list[Any] = []
    try:
        async with aclosing(model.stream(USER)) as chunks:
            async for chunk in chunks:
                out.append(chunk)
    except Exception as exc:
        return out, exc
    return out, None


def text_of(chunks: list[Any]) -> str:
    return "".join(c.text for c in chunks if isinstance(c, TextDelta))


def assert_one_line_model_error(exc: BaseException | None) -> ModelError:
    assert isinstance(exc, ModelError), f"expected a ModelError, got {type(exc).__name__}: {exc}"
    assert exc.hint and "\n" not in exc.message and "\n" not in exc.hint
    return exc


# -- odd server data: the OpenAI-compatible stream ----------------------------------------------

OPENAI_ODD = {
    "usage a string": {"usage": "lots"},
    "usage a list": {"usage": [1, 2]},
    "prompt_tokens a word": {"usage": {"prompt_tokens": "many"}},
    "prompt_tokens negative": {"usage": {"prompt_tokens": -5, "completion_tokens": 1}},
    "prompt_tokens_details a string": {"usage": {"prompt_tokens": 5, "prompt_tokens_details": "none"}},
    "choices an object": {"choices": {"0": {"delta": {"content": "x"}}}},
    "choices a string": {"choices": "text"},
    "choice a number": {"choices": [5]},
    "delta a string": {"choices": [{"delta": "hello"}]},
    "content a number": {"choices": [{"delta": {"content": 5}}]},
    "content a list": {"choices": [{"delta": {"content": ["a"]}}]},
    "reasoning an object": {"choices": [{"delta": {"reasoning_content": {"a": 1}}}]},
    "tool_calls an object": {"choices": [{"delta": {"tool_calls": {"index": 0}}}]},
    "tool call a string": {"choices": [{"delta": {"tool_calls": ["call"]}}]},
    "tool call index a word": {"choices": [{"delta": {"tool_calls": [{"index": "first"}]}}]},
    "function a string": {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": "read_file"}]}}]},
    "function name a number": {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"name": 7}}]}}]},
    "finish_reason a number": {"choices": [{"delta": {}, "finish_reason": 3}]},
    "timings a string": {"timings": "fast"},
    "prompt_ms a word": {"timings": {"prompt_ms": "slow"}},
    "prompt_ms infinite": "data: " + '{"choices": [], "timings": {"prompt_ms": Infinity}}',
    "model a list": {"model": ["m"]},
    "nested 100,000 deep": "data: " + "[" * 100_000 + "]" * 100_000,
}


@pytest.mark.fault("odd server data")
@pytest.mark.parametrize("event", OPENAI_ODD.values(), ids=OPENAI_ODD.keys())
async def test_odd_openai_stream_data_is_a_model_error_after_the_partial_reply(hostile, event):
    hostile.routes["/v1/chat/completions"] = sse(text_event("partial "), event, FINISH)
    model = OpenAIModel(hostile.url, "m", read_timeout=5)
    chunks, exc = await collect(model)
    await model.aclose()
    assert text_of(chunks) == "partial "
    assert "malformed" in assert_one_line_model_error(exc).message


@pytest.mark.fault("odd server data")
async def test_tool_arguments_sent_as_an_object_are_accepted(hostile):
    call = {"index": 0, "id": "c1", "function": {"name": "read_file", "arguments": {"path": "a.py"}}}
    hostile.routes["/v1/chat/completions"] = sse(
        {"choices": [{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": "tool_calls"}]}
    )
    model = OpenAIModel(hostile.url, "m", read_timeout=5)
    chunks, exc = await collect(model)
    await model.aclose()
    assert exc is None
    (tool,) = [c for c in chunks if isinstance(c, ToolCallChunk)]
    assert (tool.name, tool.arguments, tool.arguments_error) == ("read_file", {"path": "a.py"}, None)


@pytest.mark.fault("odd server data")
async def test_usage_with_nulls_is_unknown_and_a_null_error_is_no_error(hostile):
    hostile.routes["/v1/chat/completions"] = sse(
        {**text_event("hi"), "error": None},
        FINISH,
        {
            "choices": [],
            "usage": {"prompt_tokens": None, "completion_tokens": None, "prompt_tokens_details": None},
            "timings": {"predicted_n": 3, "prompt_ms": None},
        },
    )
    model = OpenAIModel(hostile.url, "m", read_timeout=5)
    chunks, exc = await collect(model)
    await model.aclose()
    assert exc is None and text_of(chunks) == "hi"
    usage = chunks[-1]
    assert isinstance(usage, Usage)
    assert (usage.prompt_tokens, usage.cached_tokens, usage.output_tokens, usage.prompt_ms) == (None, None, 3, None)


MODELS_ODD = {
    "data a string": {"data": "m"},
    "id a number": {"data": [{"id": 5}]},
    "a list": [1, 2],
    "not UTF-8": b'{"data": [{"id": "\xff\xfe"}]}',
    "nested 100,000 deep": ("[" * 100_000 + "]" * 100_000).encode(),
}


@pytest.mark.fault("odd server data")
@pytest.mark.parametrize("reply", MODELS_ODD.values(), ids=MODELS_ODD.keys())
async def test_odd_v1_models_is_a_model_error(hostile, reply):
    hostile.routes["/v1/models"] = body(reply)
    model = OpenAIModel(hostile.url, "m", read_timeout=5)
    try:
        with pytest.raises(ModelError):
            await model.context_window()
            await model.list_models()
    finally:
        await model.aclose()


@pytest.mark.fault("odd server data")
@pytest.mark.parametrize(
    "entry",
    [{"id": "m", "meta": "n_ctx=4096"}, {"id": "m", "max_model_len": True}, {"id": "m", "meta": {"n_ctx": "big"}}],
    ids=["meta a string", "window a boolean", "window a word"],
)
async def test_a_v1_models_window_in_another_shape_is_unknown(hostile, entry):
    hostile.routes["/v1/models"] = body({"data": [entry]})
    model = OpenAIModel(hostile.url, "m", read_timeout=5)
    try:
        assert await model.context_window() is None
        assert [m.name for m in await model.list_models()] == ["m"]
    finally:
        await model.aclose()


# -- odd server data: Ollama -----------------------------------------------------------------------

OLLAMA_ODD = {
    "message a string": {"message": "hi", "done": False},
    "content a number": {"message": {"content": 5}, "done": False},
    "content a list": {"message": {"content": ["x"]}, "done": False},
    "thinking an object": {"message": {"thinking": {"a": 1}}, "done": False},
    "tool_calls an object": {"message": {"tool_calls": {"function": {}}}, "done": False},
    "tool call a number": {"message": {"tool_calls": [5]}, "done": False},
    "tool name a number": {"message": {"tool_calls": [{"function": {"name": 5}}]}, "done": False},
    "tool arguments a list": {"message": {"tool_calls": [{"function": {"name": "f", "arguments": [1]}}]}, "done": False},
    "prompt_eval_count a word": {"done": True, "done_reason": "stop", "prompt_eval_count": "many"},
    "eval_count negative": {"done": True, "done_reason": "stop", "eval_count": -1},
    "eval_duration a word": {"done": True, "done_reason": "stop", "eval_duration": "fast"},
    "done_reason a number": {"done": True, "done_reason": 5},
    "done a list": {"done": [True]},
    "model a number": {"model": 5, "done": True, "done_reason": "stop"},
    "nested 100,000 deep": "[" * 100_000 + "]" * 100_000,
}


@pytest.mark.fault("odd server data")
@pytest.mark.parametrize("line", OLLAMA_ODD.values(), ids=OLLAMA_ODD.keys())
async def test_odd_ollama_stream_data_is_a_model_error_after_the_partial_reply(hostile, line):
    partial = {"message": {"role": "assistant", "content": "partial "}, "done": False}
    hostile.routes["/api/chat"] = ndjson(partial, line, {"done": True, "done_reason": "stop"})
    model = OllamaModel("m", host=hostile.url, num_ctx=4096, read_timeout=5)
    chunks, exc = await collect(model)
    await model.aclose()
    assert text_of(chunks) == "partial "
    assert "malformed" in assert_one_line_model_error(exc).message


@pytest.mark.fault("odd server data")
async def test_ollama_null_durations_are_unknown_and_arguments_as_text_are_parsed(hostile):
    call = {"function": {"name": "read_file", "arguments": '{"path": "a.py"}'}}
    hostile.routes["/api/chat"] = ndjson(
        {"message": {"content": "hi", "tool_calls": [call]}, "done": False},
        {"done": True, "done_reason": "stop", "prompt_eval_duration": None, "eval_count": None},
    )
    model = OllamaModel("m", host=hostile.url, num_ctx=4096, read_timeout=5)
    chunks, exc = await collect(model)
    await model.aclose()
    assert exc is None and text_of(chunks) == "hi"
    (tool,) = [c for c in chunks if isinstance(c, ToolCallChunk)]
    assert tool.arguments == {"path": "a.py"}
    assert (chunks[-1].prompt_ms, chunks[-1].output_tokens) == (0.0, 0)


INFO_ODD = {
    "/api/show a list": ("/api/show", [], "context_window"),
    "/api/show nested deep": ("/api/show", ("[" * 100_000 + "]" * 100_000).encode(), "context_window"),
    "/api/ps a list": ("/api/ps", [], "context_window"),
    "/api/ps models a string": ("/api/ps", {"models": "llama"}, "context_window"),
    "/api/tags models a string": ("/api/tags", {"models": "llama"}, "list_models"),
    "/api/tags model a number": ("/api/tags", {"models": [5]}, "list_models"),
    "/api/version a list": ("/api/version", ["0.5"], "version"),
}


@pytest.mark.fault("odd server data")
@pytest.mark.parametrize(("path", "reply", "method"), INFO_ODD.values(), ids=INFO_ODD.keys())
async def test_odd_ollama_information_is_a_model_error(hostile, path, reply, method):
    hostile.routes["/api/show"] = body({"model_info": {}})
    hostile.routes[path] = body(reply)
    model = OllamaModel("m", host=hostile.url, read_timeout=5)
    try:
        with pytest.raises(ModelError):
            await getattr(model, method)()
    finally:
        await model.aclose()


# -- `ask` end to end: the prompt and the partial reply are kept ------------------------------


@pytest.fixture
def home(tmp_path: Path, monkeypatch) -> Path:
    data = tmp_path / "data"
    monkeypatch.setenv("TAILRENT_HOME", str(data))
    monkeypatch.setenv("TAILRENT_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("TAILRENT_FSYNC", "false")
    for var in (
        "TAILRENT_MODEL",
        "TAILRENT_WINDOW",
        "TAILRENT_POLICY",
        "TAILRENT_YOLO",
        "OLLAMA_HOST",
        "TAILRENT_API_KEY",
        "OPENAI_API_KEY",
    ):
        monkeypatch.delenv(var, raising=False)
    (tmp_path / "ws").mkdir()
    return data


def ask(home: Path, *args: str):
    return CliRunner().invoke(cli, ["--workspace", str(home.parent / "ws"), "ask", *args], catch_exceptions=False)


def journal(home: Path) -> tuple[list[Any], list[str]]:
    """The messages and the notes of the only session."""
    listed = CliRunner().invoke(cli, ["--workspace", str(home.parent / "ws"), "sessions", "--json"])
    (only,) = json.loads(listed.stdout)
    events = list(find_session(home, only["id"]).events())
    return (
        [e.message for e in events if isinstance(e, MessageAdded)],
        [e.text for e in events if isinstance(e, Note)],
    )


@pytest.mark.fault("odd server data")
@pytest.mark.parametrize(
    "models",
    [{"data": [{"id": "m", "meta": "n_ctx=4096"}]}, ("[" * 100_000 + "]" * 100_000).encode()],
    ids=["meta a string", "nested deep"],
)
def test_ask_survives_an_odd_v1_models_and_saves_the_prompt(home, hostile, models):
    hostile.routes["/v1/models"] = body(models)
    hostile.routes["/v1/chat/completions"] = sse(text_event("the reply"), FINISH)
    result = ask(home, "--model", f"openai:{hostile.url}#m", "Where do tokens live?")
    assert result.exit_code == 0, result.output
    messages, _ = journal(home)
    assert [(m.role, m.content) for m in messages] == [("user", "Where do tokens live?"), ("assistant", "the reply")]


@pytest.mark.fault("odd server data")
def test_ask_survives_an_odd_api_ps_and_saves_the_prompt(home, hostile, monkeypatch):
    monkeypatch.setenv("OLLAMA_HOST", hostile.url)
    hostile.routes["/api/show"] = body({"model_info": {}})
    hostile.routes["/api/ps"] = body([])
    hostile.routes["/api/chat"] = ndjson(
        {"message": {"content": "the reply"}, "done": False}, {"done": True, "done_reason": "stop"}
    )
    result = ask(home, "--model", "ollama:m", "Where do tokens live?")
    assert result.exit_code == 0, result.output
    messages, _ = journal(home)
    assert [(m.role, m.content) for m in messages] == [("user", "Where do tokens live?"), ("assistant", "the reply")]


@pytest.mark.fault("odd server data")
@pytest.mark.parametrize(
    "event",
    [{"usage": "lots"}, {"choices": [{"delta": {"content": 5}}]}, {"choices": "x"}],
    ids=["usage a string", "content a number", "choices a string"],
)
def test_ask_keeps_the_prompt_and_the_partial_reply_on_odd_stream_data(home, hostile, event):
    hostile.routes["/v1/chat/completions"] = sse(text_event("half a "), event, FINISH)
    result = ask(home, "--model", f"openai:{hostile.url}#m", "Where do tokens live?")
    assert result.exit_code == 1
    assert "Traceback" not in result.output and "malformed" in result.stderr
    messages, _ = journal(home)
    assert [(m.role, m.content) for m in messages] == [("user", "Where do tokens live?"), ("assistant", "half a ")]
    assert messages[1].meta.get("incomplete")


@pytest.mark.fault("odd server data")
def test_ask_on_ollama_keeps_the_partial_reply_on_odd_metrics(home, hostile, monkeypatch):
    monkeypatch.setenv("OLLAMA_HOST", hostile.url)
    hostile.routes["/api/show"] = body({"parameters": "num_ctx 4096"})
    hostile.routes["/api/chat"] = ndjson(
        {"message": {"content": "half a "}, "done": False},
        {"done": True, "done_reason": "stop", "prompt_eval_count": "many"},
    )
    result = ask(home, "--model", "ollama:m", "--json", "Where do tokens live?")
    assert result.exit_code == 1
    messages, _ = journal(home)
    assert [(m.role, m.content) for m in messages] == [("user", "Where do tokens live?"), ("assistant", "half a ")]


# -- split characters ---------------------------------------------------------------------------


@pytest.mark.fault("split characters")
@pytest.mark.parametrize(
    ("pieces", "expected"),
    [
        (['"\\ud83d"', '"\\ude00 done"'], "\U0001f600 done"),
        (['"a\\ud83d"', '"\\ude00"', '"\\ud83d"', '"\\ude01"'], "a\U0001f600\U0001f601"),
        (['"tail \\ud83d"'], "tail \ufffd"),
        (['"\\ude00 low first"'], "\ufffd low first"),
        (['"\\ud83d"', '"x"'], "\ufffdx"),
    ],
    ids=["pair across events", "two pairs across events", "high at the end", "low alone", "high then no low"],
)
async def test_surrogates_split_across_openai_events_join_or_become_replacement(hostile, pieces, expected):
    events = [f'data: {{"choices": [{{"index": 0, "delta": {{"content": {p}}}}}]}}' for p in pieces]
    hostile.routes["/v1/chat/completions"] = sse(*events, FINISH)
    model = OpenAIModel(hostile.url, "m", read_timeout=5)
    chunks, exc = await collect(model)
    await model.aclose()
    assert exc is None
    assert text_of(chunks) == expected
    for c in chunks:
        if isinstance(c, TextDelta):
            c.text.encode("utf-8")  # every piece can be journaled


@pytest.mark.fault("split characters")
async def test_surrogates_split_across_ollama_lines_join(hostile):
    hostile.routes["/api/chat"] = ndjson(
        '{"message": {"content": "x\\ud83d"}, "done": false}',
        '{"message": {"content": "\\ude00"}, "done": false}',
        '{"message": {"thinking": "\\ud83d"}, "done": false}',
        {"done": True, "done_reason": "stop"},
    )
    model = OllamaModel("m", host=hostile.url, num_ctx=4096, read_timeout=5)
    chunks, exc = await collect(model)
    await model.aclose()
    assert exc is None and text_of(chunks) == "x\U0001f600"
    assert "".join(c.text for c in chunks if c.kind == "thinking") == "\ufffd"


@pytest.mark.fault("split characters")
@pytest.mark.parametrize("charset", ["", "; charset=iso-8859-1"], ids=["no charset", "a wrong charset"])
async def test_utf8_bytes_split_across_reads_join(hostile, charset):
    raw = ('data: {"choices": [{"index": 0, "delta": {"content": "caf\u00e9 \U0001f600"}}]}\n\n').encode()
    cut = raw.index("\U0001f600".encode()) + 2
    answer = sse(FINISH)
    answer.headers["Content-Type"] = "text/event-stream" + charset
    answer.pieces = [raw[:cut], raw[cut:], *answer.pieces]
    hostile.routes["/v1/chat/completions"] = answer
    model = OpenAIModel(hostile.url, "m", read_timeout=5)
    chunks, exc = await collect(model)
    await model.aclose()
    assert exc is None and text_of(chunks) == "caf\u00e9 \U0001f600"


@pytest.mark.fault("split characters")
def test_ask_journals_a_lone_surrogate_as_a_replacement(home, hostile):
    hostile.routes["/v1/chat/completions"] = sse(
        'data: {"choices": [{"index": 0, "delta": {"content": "smile \\ud83d"}}]}', FINISH
    )
    result = ask(home, "--model", f"openai:{hostile.url}#m", "Smile?")
    assert result.exit_code == 0, result.output
    messages, _ = journal(home)
    assert messages[-1].content == "smile \ufffd"


@pytest.mark.fault("split characters")
def test_ask_journals_a_server_error_with_a_lone_surrogate(home, hostile):
    hostile.routes["/v1/chat/completions"] = sse(text_event("half "), 'data: {"error": {"message": "broke \\udc00 here"}}')
    result = ask(home, "--model", f"openai:{hostile.url}#m", "Smile?")
    assert result.exit_code == 1
    messages, notes = journal(home)
    assert [m.content for m in messages] == ["Smile?", "half "]
    assert any("broke \ufffd here" in n for n in notes)


# -- redirects and early ends --------------------------------------------------------------------


@pytest.mark.fault("redirects and early ends")
@pytest.mark.parametrize("status", [301, 302, 307, 308])
async def test_a_redirect_is_reported_with_where_it_points(hostile, status):
    hostile.routes["/v1/chat/completions"] = Answer(
        status=status, headers={"Location": "http://elsewhere:8080/v1/chat/completions"}
    )
    model = OpenAIModel(hostile.url, "m", read_timeout=5)
    _, exc = await collect(model)
    await model.aclose()
    err = assert_one_line_model_error(exc)
    assert "redirect" in err.message and "http://elsewhere:8080" in err.message
    assert "model spec" in err.hint


@pytest.mark.fault("redirects and early ends")
async def test_a_redirect_of_an_information_endpoint_is_reported(hostile):
    hostile.routes["/api/show"] = Answer(status=307, headers={"Location": "https://other:11434/api/show"})
    model = OllamaModel("m", host=hostile.url, read_timeout=5)
    with pytest.raises(ModelError, match=r"redirected.*https://other:11434"):
        await model.context_window()
    await model.aclose()


@pytest.mark.fault("redirects and early ends")
@pytest.mark.parametrize(
    "answer",
    [sse(), sse(": keep-alive"), sse({"choices": []})],
    ids=["[DONE] first", "a comment then [DONE]", "no choices then [DONE]"],
)
async def test_done_before_any_reply_is_a_model_error(hostile, answer):
    hostile.routes["/v1/chat/completions"] = answer
    model = OpenAIModel(hostile.url, "m", read_timeout=5)
    _, exc = await collect(model)
    await model.aclose()
    assert "before sending any" in assert_one_line_model_error(exc).message


@pytest.mark.fault("redirects and early ends")
@pytest.mark.parametrize(
    "line",
    [{"done": True}, {"model": "m", "done": True, "done_reason": "load"}, {"message": {"content": ""}, "done": True}],
    ids=["done first", "done_reason load", "empty message done"],
)
async def test_ollama_done_first_is_a_model_error(hostile, line):
    hostile.routes["/api/chat"] = ndjson(line)
    model = OllamaModel("m", host=hostile.url, num_ctx=4096, read_timeout=5)
    _, exc = await collect(model)
    await model.aclose()
    assert "before sending any" in assert_one_line_model_error(exc).message


@pytest.mark.fault("redirects and early ends")
def test_ask_says_why_an_early_done_gave_no_reply(home, hostile):
    hostile.routes["/v1/chat/completions"] = sse()
    result = ask(home, "--model", f"openai:{hostile.url}#m", "Anything?")
    assert result.exit_code == 1
    assert "before sending any" in result.stderr
    messages, _ = journal(home)
    assert [m.content for m in messages] == ["Anything?"]


# -- Retry-After -----------------------------------------------------------------------------------


@pytest.mark.fault("Retry-After")
@pytest.mark.parametrize(
    ("status", "header", "seconds"),
    [(503, "7", 7), (429, "120", 120), (503, None, None), (503, "soon", None)],
    ids=["503 seconds", "429 seconds", "503 without", "503 unreadable"],
)
async def test_retry_after_is_read_and_shown(hostile, status, header, seconds):
    headers = {"Retry-After": header} if header else {}
    hostile.routes["/v1/chat/completions"] = body({"error": {"message": "busy"}}, status, **headers)
    model = OpenAIModel(hostile.url, "m", read_timeout=5)
    _, exc = await collect(model)
    await model.aclose()
    assert isinstance(exc, Busy) and exc.retry_after == seconds
    if seconds is not None:
        assert f"retry after {seconds} s" in str(exc)


@pytest.mark.fault("Retry-After")
async def test_retry_after_as_an_http_date_on_ollama(hostile):
    hostile.routes["/api/chat"] = body({"error": "loading"}, 503, **{"Retry-After": formatdate(time.time() + 60, usegmt=True)})
    model = OllamaModel("m", host=hostile.url, num_ctx=4096, read_timeout=5)
    _, exc = await collect(model)
    await model.aclose()
    assert isinstance(exc, Busy) and 55 <= exc.retry_after <= 61
    assert "retry after" in exc.hint


@pytest.mark.fault("Retry-After")
@pytest.mark.parametrize(("header", "wait"), [("90", 90), ("999999", 300)], ids=["believed", "bounded"])
def test_the_server_tokenizer_waits_as_long_as_retry_after_says(hostile, header, wait):
    from tailrent_tui.models.tokenizer import ServerTokenizer

    hostile.routes["/tokenize"] = body({"error": "busy"}, 503, **{"Retry-After": header})
    tokenizer = ServerTokenizer(hostile.url)
    before = time.monotonic()
    tokenizer.count("some text")
    assert tokenizer._retry_at - before == pytest.approx(wait, abs=2)
    tokenizer.close()


# -- OLLAMA_HOST ------------------------------------------------------------------------------------

BAD_HOSTS = [
    "::::",
    "user:secret@gpu:11434",
    "http://user:secret@gpu:11434",
    "http://gpu:notaport",
    "gpu:99999",
    "gpu:0",
    "ftp://gpu",
    "gpu box:1",
    "[::1]junk",
]


@pytest.mark.fault("OLLAMA_HOST")
@pytest.mark.parametrize("value", BAD_HOSTS)
def test_a_bad_ollama_host_is_one_line_without_the_secret(value):
    with pytest.raises(ValueError) as err:  # noqa: PT011  (any message, as long as it is one line without the secret)
        ollama_host(value)
    message = str(err.value)
    assert "OLLAMA_HOST" in message and "\n" not in message and "secret" not in message


@pytest.mark.fault("OLLAMA_HOST")
@pytest.mark.parametrize("value", ["::::", "user:secret@gpu:11434", "http://gpu:notaport"])
def test_ask_with_a_bad_ollama_host_says_so_in_one_line(home, monkeypatch, value):
    monkeypatch.setenv("OLLAMA_HOST", value)
    result = ask(home, "--model", "ollama:m", "hello")
    assert result.exit_code == 1
    assert result.stderr.count("\n") == 1 and "OLLAMA_HOST" in result.stderr and "secret" not in result.stderr


# -- credentials in URLs ------------------------------------------------------------------------------


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.fault("credentials in URLs")
def test_credentials_in_a_model_url_stay_out_of_the_journal_and_exports(home, tmp_path):
    spec = f"openai:http://alice:hunter2@127.0.0.1:{closed_port()}#m"
    result = ask(home, "--model", spec, "hello")
    assert result.exit_code == 1
    assert "hunter2" not in result.output and "***@" in result.stderr
    listed = CliRunner().invoke(cli, ["--workspace", str(home.parent / "ws"), "sessions", "--json"])
    (only,) = json.loads(listed.stdout)
    session_dir = find_session(home, only["id"]).path
    for path in session_dir.rglob("*"):
        if path.is_file():
            assert b"hunter2" not in path.read_bytes(), path
    for fmt in ("md", "json"):
        out = tmp_path / f"export.{fmt}"
        exported = CliRunner().invoke(
            cli, ["--workspace", str(home.parent / "ws"), "export", "--format", fmt, "-o", str(out), only["id"]]
        )
        assert exported.exit_code == 0, exported.output
        assert "hunter2" not in out.read_text()


@pytest.mark.fault("credentials in URLs")
async def test_a_redirect_to_a_url_with_credentials_is_shown_redacted(hostile):
    hostile.routes["/v1/chat/completions"] = Answer(status=307, headers={"Location": "http://bob:pa55@other:1/v1"})
    model = OpenAIModel(hostile.url.replace("http://", "http://carol:s3cret@"), "m", read_timeout=5)
    _, exc = await collect(model)
    await model.aclose()
    text = str(exc)
    assert "pa55" not in text and "s3cret" not in text and "http://***@other:1" in text


@pytest.mark.fault("credentials in URLs")
def test_a_bad_model_spec_does_not_echo_its_credentials(home):
    result = ask(home, "--model", "openai:ftp://dave:topsecret@host", "hello")
    assert result.exit_code != 0 and "topsecret" not in result.output


# -- bench --engine against a bad server --------------------------------------------------------------


def llama_like(hostile: Hostile, *, tokens: Any = None, chat: Answer | None = None) -> None:
    """Enough of llama.cpp for the bench: /v1/models, /tokenize, /apply-template, and a chat answer."""
    hostile.routes["/v1/models"] = body({"data": [{"id": "m"}]})
    hostile.routes["/tokenize"] = body({"tokens": [1, 2, 3]} if tokens is None else tokens)
    hostile.routes["/apply-template"] = body({"prompt": "<start>user hello there<end>"})
    if chat is not None:
        hostile.routes["/v1/chat/completions"] = chat


def bench(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = {**os.environ, "TAILRENT_REQUEST_TIMEOUT": "2"}
    return subprocess.run(
        [sys.executable, "-m", "tailrent_tui", "bench", "--trace", "article", "--policy", "none", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


@pytest.mark.fault("bench --engine bad server")
@pytest.mark.parametrize(
    "chat",
    [body({"error": {"message": "out of memory"}}, 500), sse(), sse(text_event("x"), {"usage": "lots"})],
    ids=["HTTP 500", "[DONE] first", "odd usage"],
)
def test_bench_engine_against_a_failing_server_is_one_line(home, hostile, chat):
    llama_like(hostile, chat=chat)
    result = bench("--engine", f"openai:{hostile.url}")
    assert result.returncode == 1, result.stdout
    assert "Traceback" not in result.stderr and result.stderr.strip().count("\n") == 0
    assert result.stderr.startswith("Error: ")


@pytest.mark.fault("bench --engine bad server")
def test_bench_engine_honours_request_timeout_against_a_hung_server(home, hostile):
    llama_like(hostile, chat=Answer(hang=True))
    started = time.monotonic()
    result = bench("--engine", f"openai:{hostile.url}", timeout=40)
    assert time.monotonic() - started < 30
    assert result.returncode == 1 and "sent nothing for 2 s" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.fault("bench --engine bad server")
@pytest.mark.parametrize("tokens", [{"tokens": []}, {}, {"tokens": "abc"}], ids=["empty", "missing", "a string"])
def test_bench_engine_refuses_a_tokenize_reply_without_tokens(home, hostile, tokens):
    llama_like(hostile, tokens=tokens, chat=sse(text_event("x"), FINISH))
    result = bench("--engine", f"openai:{hostile.url}")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "count tokens" in result.stderr


@pytest.mark.fault("bench --engine bad server")
def test_bench_engine_without_server_usage_shows_no_infinite_error(home, hostile):
    llama_like(hostile, chat=sse(text_event("x"), FINISH))
    result = bench("--engine", f"openai:{hostile.url}")
    assert result.returncode == 0, result.stderr
    assert "inf" not in result.stdout and "n/a" in result.stdout
    as_json = bench("--engine", f"openai:{hostile.url}", "--json")
    assert "Infinity" not in as_json.stdout and "NaN" not in as_json.stdout


@pytest.mark.fault("credentials in URLs")
async def test_switching_to_a_model_url_with_credentials_journals_it_redacted(make_agent):
    agent = make_agent()
    shown = await agent.switch_model(f"openai:http://erin:letmein@127.0.0.1:{closed_port()}")
    assert "letmein" not in shown and "***@" in shown
    assert not any("letmein" in n.text for n in agent.session.notes)


# ----------------------------------------------------------- credentials in URLs

REDACT_CASES = {
    "openai:u:SECRET@host": "openai:***@host",
    "openai:u:SECRET@host:8080#m": "openai:***@host:8080#m",
    "openai:SECRET@host:8080": "openai:***@host:8080",
    "openai: u:SECRET@host": "openai: ***@host",
    "OPENAI:u:SECRET@host": "OPENAI:***@host",
    "u:SECRET@host:8080": "***@host:8080",
    "could not reach 'u:SECRET@host:1'": "could not reach '***@host:1'",
    "OLLAMA_HOST=u:SECRET@h:1": "OLLAMA_HOST=***@h:1",
    "openai:http://u:SECRET@host": "openai:http://***@host",
    "https://u:SECRET@h/v1 and openai:v:SECRET@k": "https://***@h/v1 and openai:***@k",
    'model = "openai:u:SECRET@h"': 'model = "openai:***@h"',
}
KEPT = [
    "openai:http://127.0.0.1:8080#qwen",
    "openai:host:8080",
    "ollama:llama3.2",
    "mail alice@example.com",
    "at 10:30 today",
    "http://h:8080/v1#a",
]


@pytest.mark.fault("credentials in URLs")
@pytest.mark.parametrize("text", list(REDACT_CASES))
def test_redact_hides_credentials_with_or_without_a_scheme(text: str) -> None:
    assert redact(text) == REDACT_CASES[text]


@pytest.mark.fault("credentials in URLs")
@pytest.mark.parametrize("text", KEPT)
def test_redact_leaves_text_without_credentials(text: str) -> None:
    assert redact(text) == text


@pytest.mark.fault("credentials in URLs")
@pytest.mark.parametrize("spec", ["openai:u:SECRET@host:1#m", "openai:SECRET@host:1"])
def test_a_schemeless_spec_is_shown_redacted(spec: str) -> None:
    assert "SECRET" not in str(parse_model_spec(spec))
    with pytest.raises(ValueError) as bad:  # noqa: PT011  (any message, as long as it hides the secret)
        parse_model_spec(spec.replace("host:1", "h:0"))
    assert "SECRET" not in str(bad.value)


@pytest.mark.fault("credentials in URLs")
@pytest.mark.parametrize("how", ["flag", "env", "config.toml"])
@pytest.mark.parametrize("spec", ["openai:http://u:SECRET@127.0.0.1:9#m", "openai:u:SECRET@127.0.0.1:9"])
@pytest.mark.parametrize("as_json", [False, True])
def test_config_prints_the_model_without_its_credentials(tmp_path: Path, monkeypatch, how: str, spec: str, as_json: bool) -> None:
    cfg = tmp_path / "cfg"
    cfg.mkdir()
    monkeypatch.setenv("TAILRENT_CONFIG_DIR", str(cfg))
    monkeypatch.setenv("TAILRENT_HOME", str(tmp_path / "home"))
    args = ["config"] + (["--json"] if as_json else [])
    if how == "flag":
        args = ["--model", spec, *args]
    elif how == "env":
        monkeypatch.setenv("TAILRENT_MODEL", spec)
    else:
        (cfg / "config.toml").write_text(f"model = {json.dumps(spec)}\n")
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "SECRET" not in result.output
    assert "***@127.0.0.1:9" in result.output
