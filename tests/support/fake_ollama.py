"""A fake Ollama server for the tests: real HTTP on 127.0.0.1, in a background thread.

It follows ``reference/ollama-api.md``: ``/api/chat`` streams NDJSON with chunked
transfer, the final line carries ``done``, ``done_reason`` and the metrics (each
metric omitted when zero), tool calls arrive whole in one ``done: false`` line with
``id`` and ``index``, error bodies are ``{"error": "..."}`` with the documented
statuses, and ``/api/tags``, ``/api/show``, ``/api/ps``, ``/api/version`` answer.

Like the real server it remembers the previous prompt: ``prompt_eval_count`` counts
only the tokens past the prefix shared with the previous request (tokens: the
article's chars/4 over one segment per message).

An ``/api/chat`` with no messages loads the model and answers at once, as Ollama
does: one JSON object (not a stream, whatever ``stream`` says) with an empty
assistant message, ``done: true`` and ``done_reason: "load"``; the model is then
listed by ``/api/ps`` with the request's ``num_ctx``. Such requests are kept in
``loads`` (and in ``requests``); ``load_seconds`` makes a load take that long.

Replies and faults are scripted with ``FakeOllama.push(Reply(...))``, consumed one
per ``/api/chat`` request; without a script each request gets a short default reply.
Faults: ``status`` (an error status before streaming), ``error_line`` (an error line
mid-stream, status 200), ``cut`` (the connection dropped before ``done``),
``cut_clean`` (the body ends properly but without ``done``), ``malformed`` (a line
that is not JSON), ``stall`` (stop sending and wait until the client goes away or the
test releases it). ``disconnected`` is set when a client hangs up on a stalled stream.
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


@dataclass
class FakeModel:
    """A model the fake server offers."""

    name: str
    tools: bool = True
    thinking: bool = False
    num_ctx: int | None = None  # the Modelfile's num_ctx, shown in /api/show parameters
    context_length: int = 131072  # the trained maximum, in model_info
    family: str = "llama"
    loaded_ctx: int | None = None  # listed by /api/ps as loaded with this window


@dataclass
class Reply:
    """One scripted answer to an /api/chat request."""

    content: str = "Hello from the fake Ollama."
    thinking: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # {"name", "arguments", optional "id"}
    legacy_tool_calls: bool = False  # old servers: no id, no index
    done_reason: str = "stop"
    prompt_eval_count: int | None = None  # None: computed from the shared prefix
    eval_count: int | None = None  # None: one per chunk sent
    chunk_size: int = 5
    fault: str | None = None
    status: int = 500
    error: str = "something went wrong"
    lines_before_fault: int = 2


def _tokens(text: str) -> int:
    return max(1, len(text) // 4) if text else 0


def _segments(body: dict[str, Any]) -> list[str]:
    out = [json.dumps(body["tools"], sort_keys=True)] if body.get("tools") else []
    out += [json.dumps(m, sort_keys=True) for m in body.get("messages") or []]
    return out


class FakeOllama:
    """Start with ``with FakeOllama() as fake:`` (or the ``fake_ollama`` fixture); ``fake.url``."""

    def __init__(self, models: list[FakeModel] | None = None, version: str = "0.5.1") -> None:
        self.models = {m.name: m for m in (models if models is not None else [FakeModel("llama3.2:latest")])}
        self.version = version
        self.requests: list[dict[str, Any]] = []  # every /api/chat body, in order
        self.paths: list[str] = []  # every request path, in order
        self.loads: list[dict[str, Any]] = []  # every /api/chat body without messages (a load)
        self.load_seconds = 0.0
        self.disconnected = threading.Event()
        self.release = threading.Event()
        self._script: list[Reply] = []
        self._lock = threading.Lock()
        self._previous: list[str] = []
        self._loaded: dict[str, int] = {}
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self._server.block_on_close = False
        self._server.fake = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)
        host, port = self._server.server_address[:2]
        self.url = f"http://{host}:{port}"

    def start(self) -> FakeOllama:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.release.set()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FakeOllama:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def push(self, *replies: Reply) -> None:
        with self._lock:
            self._script.extend(replies)

    def next_reply(self) -> Reply:
        with self._lock:
            return self._script.pop(0) if self._script else Reply()

    def evaluated(self, body: dict[str, Any]) -> int:
        """Prompt tokens past the prefix shared with the previous request; remembers this one."""
        segments = _segments(body)
        with self._lock:
            shared = 0
            for new, old in zip(segments, self._previous, strict=False):
                if new != old:
                    break
                shared += 1
            self._previous = segments
        return sum(_tokens(s) for s in segments[shared:])


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "FakeOllama/1"
    # Headers and body go out in separate writes; without this, Nagle's algorithm
    # and the client's delayed ACK add 40 ms to every request.
    disable_nagle_algorithm = True

    @property
    def fake(self) -> FakeOllama:
        return self.server.fake  # type: ignore[attr-defined]

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the tests assert on ``fake.requests``, not on a log."""

    # -- plumbing ---------------------------------------------------------------------

    def _json(self, status: int, data: Any) -> None:
        body = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _error(self, status: int, text: str) -> None:
        self._json(status, {"error": text})

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw:
            return None
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            return None

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _line(self, obj: Any) -> None:
        self._chunk(json.dumps(obj).encode() + b"\n")

    def _end_chunks(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _wait_for_hangup_or_release(self) -> None:
        """Hold a stalled stream until the client closes its end or the test releases it."""
        sock = self.connection
        while not self.fake.release.is_set():
            readable, _, _ = select.select([sock], [], [], 0.05)
            if readable:
                try:
                    gone = sock.recv(1, socket.MSG_PEEK) == b""
                except OSError:
                    gone = True
                if gone:
                    self.fake.disconnected.set()
                    return

    # -- routes ------------------------------------------------------------------------

    def do_GET(self) -> None:
        self.fake.paths.append(self.path)
        if self.path == "/api/version":
            self._json(200, {"version": self.fake.version})
        elif self.path == "/api/tags":
            self._json(200, {"models": [self._tag(m) for m in self.fake.models.values()]})
        elif self.path == "/api/ps":
            loaded = []
            for m in self.fake.models.values():
                window = self.fake._loaded.get(m.name, m.loaded_ctx)
                if window:
                    loaded.append({**self._tag(m), "context_length": window, "expires_at": "2099-01-01T00:00:00Z"})
            self._json(200, {"models": loaded})
        else:
            self._error(404, "404 page not found")

    def do_POST(self) -> None:
        self.fake.paths.append(self.path)
        body = self._body()
        if self.path == "/api/show":
            self._show(body)
        elif self.path == "/api/chat":
            self._chat(body)
        else:
            self._error(404, "404 page not found")

    def _tag(self, m: FakeModel) -> dict[str, Any]:
        return {
            "name": m.name,
            "model": m.name,
            "modified_at": "2025-07-01T10:00:00Z",
            "size": 2019393189,
            "digest": "a80c4f17acd5",
            "details": {"format": "gguf", "family": m.family, "parameter_size": "3.2B", "quantization_level": "Q4_K_M"},
        }

    def _show(self, body: Any) -> None:
        if not isinstance(body, dict):
            return self._error(400, "missing request body")
        m = self.fake.models.get(body.get("model", ""))
        if m is None:
            return self._error(404, f"model '{body.get('model')}' not found")
        capabilities = ["completion"] + (["tools"] if m.tools else []) + (["thinking"] if m.thinking else [])
        parameters = 'stop "<|eot_id|>"'
        if m.num_ctx:
            parameters = f"num_ctx {m.num_ctx}\n" + parameters
        self._json(
            200,
            {
                "parameters": parameters,
                "details": self._tag(m)["details"],
                "model_info": {"general.architecture": m.family, f"{m.family}.context_length": m.context_length},
                "capabilities": capabilities,
            },
        )

    def _chat(self, body: Any) -> None:
        if not isinstance(body, dict):
            return self._error(400, "missing request body")
        self.fake.requests.append(body)
        name = body.get("model")
        if not name:
            return self._error(400, "model is required")
        m = self.fake.models.get(name)
        if m is None:
            return self._error(404, f"model '{name}' not found")
        if body.get("tools") and not m.tools:
            return self._error(400, f"registry.ollama.ai/library/{name} does not support tools")
        if body.get("think") and not m.thinking:
            return self._error(400, f'"{name}" does not support thinking')
        if not body.get("messages"):
            return self._load(name, body)
        reply = self.fake.next_reply()
        if reply.fault == "status":
            return self._error(reply.status, reply.error)
        self.fake._loaded[name] = (body.get("options") or {}).get("num_ctx") or 4096
        evaluated = self.fake.evaluated(body)
        lines = self._reply_lines(name, reply)
        final = self._final(name, reply, evaluated, sum(1 for line in lines if line["message"].get("content")))
        if body.get("stream") is False:
            text = "".join(line["message"].get("content", "") for line in lines)
            final["message"] = {"role": "assistant", "content": text}
            return self._json(200, final)

        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        if reply.fault is None:
            for line in lines:
                self._line(line)
            self._line(final)
            return self._end_chunks()
        for line in lines[: reply.lines_before_fault]:
            self._line(line)
        if reply.fault == "error_line":
            self._line({"error": reply.error})
            self._end_chunks()
        elif reply.fault == "malformed":
            self._chunk(b'{"model":"' + name.encode() + b'","message":{"role":"assis\n')
            self._end_chunks()
        elif reply.fault == "cut_clean":
            self._end_chunks()
        elif reply.fault == "cut":
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
        elif reply.fault == "stall":
            self._wait_for_hangup_or_release()
            self.close_connection = True
        else:
            raise ValueError(f"unknown fault {reply.fault!r}")

    def _load(self, name: str, body: dict[str, Any]) -> None:
        """No messages: load the model with the request's num_ctx and say so."""
        self.fake.loads.append(body)
        if self.fake.load_seconds:
            time.sleep(self.fake.load_seconds)
        self.fake._loaded[name] = (body.get("options") or {}).get("num_ctx") or 4096
        stamp = datetime.now(UTC).isoformat().replace("+00:00", "Z")
        self._json(
            200,
            {
                "model": name,
                "created_at": stamp,
                "message": {"role": "assistant", "content": ""},
                "done_reason": "load",
                "done": True,
            },
        )

    def _reply_lines(self, name: str, reply: Reply) -> list[dict[str, Any]]:
        def line(message: dict[str, Any]) -> dict[str, Any]:
            stamp = datetime.now(UTC).isoformat().replace("+00:00", "Z")
            return {"model": name, "created_at": stamp, "message": {"role": "assistant", **message}, "done": False}

        size = reply.chunk_size
        out = [line({"content": "", "thinking": reply.thinking[i : i + size]}) for i in range(0, len(reply.thinking), size)]
        out += [line({"content": reply.content[i : i + size]}) for i in range(0, len(reply.content), size)]
        if reply.tool_calls:
            calls = []
            for index, call in enumerate(reply.tool_calls):
                function = {"name": call["name"], "arguments": call.get("arguments", {})}
                if reply.legacy_tool_calls:
                    calls.append({"function": function})
                else:
                    calls.append({"id": call.get("id", f"call_{index:08x}"), "function": {"index": index, **function}})
            out.append(line({"content": "", "tool_calls": calls}))
        return out

    def _final(self, name: str, reply: Reply, evaluated: int, chunks: int) -> dict[str, Any]:
        prompt = evaluated if reply.prompt_eval_count is None else reply.prompt_eval_count
        output = chunks if reply.eval_count is None else reply.eval_count
        metrics = {
            "total_duration": (prompt + output * 10) * 1_000_000,
            "prompt_eval_count": prompt,
            "prompt_eval_duration": prompt * 1_000_000,
            "eval_count": output,
            "eval_duration": output * 10_000_000,
        }
        final = {
            "model": name,
            "created_at": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
            "message": {"role": "assistant", "content": ""},
            "done": True,
            "done_reason": reply.done_reason,
        }
        # Every metric is omitted when zero.
        final.update({k: v for k, v in metrics.items() if v})
        return final


@pytest.fixture
def fake_ollama() -> Iterator[FakeOllama]:
    """A running fake Ollama server with one model, ``llama3.2:latest``, that supports tools."""
    with FakeOllama() as fake:
        yield fake
