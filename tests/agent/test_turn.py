"""The turn loop and a busy server (issue 26, item 10): a server still loading its model (HTTP 503
"Loading model") is asked again after a wait (`agent/turn.py`'s BUSY_WAITS), bounded, each wait
said; a failure is one message. Real HTTP on loopback."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tailrent_tui.agent import turn as turn_module
from tailrent_tui.cli import cli

LOADING = {"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}}


class Loading:
    """A llama.cpp server that answers 503 "Loading model" to its first `busy` chat requests."""

    def __init__(self, busy: int) -> None:
        self.busy = busy
        self.posts = 0
        self.url = ""

    def reply(self) -> bytes:
        lines = [
            {"choices": [{"delta": {"content": "Loaded and ready."}}], "model": "tiny.gguf"},
            {"choices": [{"delta": {}, "finish_reason": "stop"}], "model": "tiny.gguf"},
            {"choices": [], "usage": {"prompt_tokens": 900, "completion_tokens": 4}},
        ]
        return b"".join(b"data: " + json.dumps(x).encode() + b"\n\n" for x in lines) + b"data: [DONE]\n\n"


@pytest.fixture
def loading(request) -> Iterator[Loading]:
    state = Loading(request.param)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, status: int, data: bytes, kind: str) -> None:
            self.send_response(status)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path.startswith("/v1/models"):
                self._send(200, json.dumps({"data": [{"id": "tiny.gguf", "meta": {"n_ctx": 8192}}]}).encode(), "application/json")
            else:
                self._send(404, b'{"error": {"code": 404, "message": "File Not Found"}}', "application/json")

        def do_POST(self) -> None:
            size = int(self.headers.get("content-length") or 0)
            self.rfile.read(size)
            if self.path != "/v1/chat/completions":
                return self._send(404, b'{"error": {"code": 404, "message": "File Not Found"}}', "application/json")
            state.posts += 1
            if state.posts <= state.busy:
                return self._send(503, json.dumps(LOADING).encode(), "application/json")
            self._send(200, state.reply(), "text/event-stream")

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    yield state
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def ws(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.setenv("TAILRENT_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("TAILRENT_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("TAILRENT_FSYNC", "false")
    monkeypatch.setenv("TAILRENT_TOKENIZER", "chars4")
    for var in ("TAILRENT_MODEL", "TAILRENT_WINDOW", "TAILRENT_POLICY", "TAILRENT_YOLO", "OLLAMA_HOST"):
        monkeypatch.delenv(var, raising=False)
    # the waits the app makes, made short: the test checks how many and what is said, not the clock
    monkeypatch.setattr(turn_module, "BUSY_WAITS", (0.01, 0.02, 0.04, 0.08))
    root = tmp_path / "ws"
    root.mkdir()
    return root


def _ask(ws: Path, server: Loading) -> Any:
    return CliRunner().invoke(
        cli, ["--workspace", str(ws), "ask", "--model", f"openai:{server.url}", "hello"], catch_exceptions=False
    )


@pytest.mark.parametrize("loading", [2], indirect=True)
def test_a_server_loading_its_model_is_asked_again_and_the_waits_are_said(ws, loading):
    out = _ask(ws, loading)
    assert out.exit_code == 0, out.output
    assert "Loaded and ready." in out.stdout
    assert loading.posts == 3
    said = [line for line in out.stderr.splitlines() if "the server is busy" in line]
    assert len(said) == 2, out.stderr
    assert "Loading model" in said[0] and "retry 1 of 4" in said[0] and "retry 2 of 4" in said[1]


@pytest.mark.parametrize("loading", [100], indirect=True)
def test_a_server_that_stays_busy_is_given_up_on_after_the_last_wait_in_one_error(ws, loading):
    out = _ask(ws, loading)
    assert out.exit_code != 0
    assert loading.posts == 1 + len(turn_module.BUSY_WAITS), "bounded: the first try and one per wait"
    errors = [line for line in out.stderr.splitlines() if "Loading model" in line and "retry" not in line.split(":")[0]]
    assert "Traceback" not in out.output + out.stderr
    assert errors, out.stderr
