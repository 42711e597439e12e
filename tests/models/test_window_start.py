"""The window is known before the first request: asked of the server at start-up
(after the app's first frame), kept in the session for the next resume, and the
user's `window` setting wins. A malformed answer leaves the window as it was and
says why in one line.

The servers' shapes: llama.cpp `/props` (`default_generation_settings.n_ctx`,
older servers a top-level `n_ctx`) and `/v1/models` `meta.n_ctx`; vLLM
`/v1/models` `max_model_len`; Ollama `/api/show` and `/api/ps`. A scripted
server plays them here; the real llama.cpp engine is at the end.
"""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from tailrent_tui.agent.lifecycle import open_agent
from tailrent_tui.models import MalformedResponse, OllamaModel, OpenAIModel
from tailrent_tui.settings import Settings
from tailrent_tui.store.export import export_session
from tailrent_tui.ui.app import TailrentApp
from tests.support.engine import N_CTX
from tests.support.ui_helpers import wait_until

LLAMA_MODELS = {
    "object": "list",
    "data": [{"id": "gemma.gguf", "owned_by": "llamacpp", "meta": {"n_ctx": 16384, "n_ctx_train": 32768}}],
}
# two slots of 8,192: one request may fill one slot, not the server's total
LLAMA_PROPS = {"default_generation_settings": {"n_ctx": 8192, "params": {}}, "total_slots": 2}


class InfoServer:
    """Answers GETs from a table (path -> (status, body)); counts every request by path."""

    def __init__(self, answers: dict[str, tuple[int, Any]]) -> None:
        self.answers = answers
        self.seen: list[tuple[str, str]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                """Quiet."""

            def _answer(self) -> None:
                server.seen.append((self.command, self.path))
                status, body = server.answers.get(self.path, (404, {"error": {"message": "File Not Found"}}))
                payload = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = _answer
            do_POST = _answer

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    def chats(self) -> int:
        return sum(path.endswith(("/chat/completions", "/api/chat")) for _, path in self.seen)

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


@pytest.fixture
def serve() -> Iterator[Any]:
    servers: list[InfoServer] = []

    def start(answers: dict[str, tuple[int, Any]]) -> InfoServer:
        servers.append(InfoServer(answers))
        return servers[-1]

    yield start
    for s in servers:
        s.stop()


@pytest.fixture
def settings_for(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("TAILRENT_CONFIG_DIR", str(tmp_path / "config"))
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)

    def make(url: str, **overrides: Any) -> Settings:
        values = {
            "model": f"openai:{url}",
            "data_dir": tmp_path / "data",
            "workspace": ws,
            "fsync": False,
            "tokenizer": "chars4",
            **overrides,
        }
        return Settings(**values)

    return make


@asynccontextmanager
async def opened(settings: Settings, flags: dict[str, Any] | None = None, **kwargs: Any) -> AsyncIterator[Any]:
    """An agent built as `tailrent` builds it; closed (lock released, HTTP client shut) at the end."""
    async with open_agent(settings, flags, **kwargs) as agent:
        yield agent


# -- what each server says -------------------------------------------------------------


@pytest.mark.parametrize(
    ("answers", "window"),
    [
        ({"/props": (200, LLAMA_PROPS), "/v1/models": (200, LLAMA_MODELS)}, 8192),
        ({"/props": (200, {"n_ctx": 4096}), "/v1/models": (200, LLAMA_MODELS)}, 4096),
        ({"/v1/models": (200, LLAMA_MODELS)}, 16384),
        ({"/v1/models": (200, {"data": [{"id": "qwen", "max_model_len": 32000}]})}, 32000),
        ({"/props": (200, {"error": "Unexpected endpoint"}), "/v1/models": (200, {"data": [{"id": "m"}]})}, None),
    ],
    ids=["llama.cpp slot", "llama.cpp older top-level", "llama.cpp without props", "vLLM", "LM Studio"],
)
async def test_each_server_says_its_window_its_own_way(serve, answers, window):
    server = serve(answers)
    model = OpenAIModel(server.url)
    try:
        await model.resolve_name()
        assert await model.context_window() == window
    finally:
        await model.aclose()


@pytest.mark.parametrize(
    ("props", "reason"),
    [
        ({"default_generation_settings": {"n_ctx": "lots"}}, "default_generation_settings.n_ctx"),
        ({"n_ctx": -1}, "n_ctx: Input should be greater than 0"),
        (b"<html>not json</html>", "not JSON"),
    ],
)
async def test_a_malformed_props_is_a_one_line_model_error(serve, props, reason):
    server = serve({"/props": (200, props), "/v1/models": (200, LLAMA_MODELS)})
    model = OpenAIModel(server.url, "gemma.gguf")
    try:
        with pytest.raises(MalformedResponse) as err:
            await model.context_window()
    finally:
        await model.aclose()
    assert reason in err.value.message and "/props" in err.value.message
    assert "\n" not in str(err.value)


async def test_a_malformed_ollama_show_is_a_one_line_model_error(serve):
    show = {"parameters": "temperature 0.2", "model_info": {"general.architecture": "llama", "llama.context_length": "big"}}
    server = serve({"/api/show": (200, show), "/api/ps": (200, {"models": []})})
    model = OllamaModel("llama3.2", host=server.url)
    try:
        with pytest.raises(MalformedResponse, match="context_length"):
            await model.context_window()
    finally:
        await model.aclose()


# -- the agent: learned at start, kept for the resume, the setting wins ---------------------


async def test_start_learns_the_window_before_any_request_and_a_resume_starts_with_it(serve, settings_for):
    server = serve({"/props": (200, LLAMA_PROPS), "/v1/models": (200, LLAMA_MODELS)})
    async with opened(settings_for(server.url), new=True) as agent:
        assert agent.session.window == 32768  # nothing known yet
        await agent.link.start()
        assert agent.session.window == 8192 and server.chats() == 0
        assert agent.session_dir.read_meta().window == 8192
        assert "window 8,192 tokens" in export_session(agent.session_dir, "md")
        agent.session.add("user", "see you tomorrow")  # a session where nothing was sent is not kept

    server.stop()  # the server is gone by the morning: the window kept in the session still holds
    async with opened(settings_for(server.url), {"continue_": True}) as resumed:
        assert resumed.session.window == 8192


async def test_the_window_setting_wins_over_the_server(serve, settings_for):
    server = serve({"/props": (200, LLAMA_PROPS), "/v1/models": (200, LLAMA_MODELS)})
    async with opened(settings_for(server.url, window=6000), new=True) as agent:
        await agent.link.start()
        assert agent.session.window == 6000 and agent.session_dir.read_meta().window == 6000
        # /props is still read (it says whether the server keeps KV slots), not for the window
        assert not any("window" in n.text for n in agent.session.notes)


async def test_a_malformed_props_leaves_the_window_and_says_why_in_one_line(serve, settings_for):
    server = serve({"/props": (200, {"default_generation_settings": {"n_ctx": "lots"}}), "/v1/models": (200, LLAMA_MODELS)})
    async with opened(settings_for(server.url), new=True) as agent:
        await agent.link.start()
        assert agent.session.window == 32768
        (note,) = [n for n in agent.session.notes if "window" in n.text]
        assert note.level == "warning" and "\n" not in note.text
        assert "could not read the model's window" in note.text and "n_ctx" in note.text and "32,768" in note.text


# -- the app: the Tail panel shows it after the first frame ----------------------------------


def window_shown(app: TailrentApp, window: int) -> bool:
    tail = app.sidebar.tail
    return tail.figures is not None and f"/ {window:,} tokens" in str(tail.query_one(".figures").render())


async def test_the_tail_panel_shows_the_servers_window_before_any_request(serve, settings_for):
    server = serve({"/props": (200, LLAMA_PROPS), "/v1/models": (200, LLAMA_MODELS)})
    settings = settings_for(server.url)
    async with opened(settings, new=True) as agent:
        app = TailrentApp(agent, settings)
        async with app.run_test(size=(140, 40)) as pilot:
            await wait_until(pilot, lambda: window_shown(app, 8192), what="8,192 in the Tail panel")
            assert "fold trigger at 7,372" in str(app.sidebar.tail.query_one(".figures").render())
            assert server.chats() == 0
            assert "model gemma ·" in app.sub_title  # the model by its name, not its GGUF file (issue 26, item 14)


async def test_the_app_shows_why_the_window_stayed(serve, settings_for):
    server = serve({"/props": (200, {"n_ctx": "lots"}), "/v1/models": (200, LLAMA_MODELS)})
    settings = settings_for(server.url)
    async with opened(settings, new=True) as agent:
        app = TailrentApp(agent, settings)
        async with app.run_test(size=(140, 40)) as pilot:
            said = lambda: [w for w in app.transcript.query(".turn-notice") if "window" in str(w.render())]  # noqa: E731
            await wait_until(pilot, lambda: len(said()) == 1, what="the note in the transcript")
            assert window_shown(app, 32768)


# -- the real engine ------------------------------------------------------------------------


@pytest.mark.engine
async def test_the_real_engine_window_is_known_after_the_first_frame(llama_server, settings_for):
    async with httpx.AsyncClient() as client:
        props = (await client.get(f"{llama_server}/props")).json()
    server_n_ctx = props["default_generation_settings"]["n_ctx"]
    assert server_n_ctx == N_CTX

    settings = settings_for(llama_server)
    async with opened(settings, new=True) as agent:
        app = TailrentApp(agent, settings)
        async with app.run_test(size=(140, 40)) as pilot:
            await wait_until(pilot, lambda: window_shown(app, N_CTX), rounds=2000, what="the engine's n_ctx in the Tail panel")
            assert agent.session.window == server_n_ctx
            assert agent.session.usage == []  # before any chat request
        assert agent.session_dir.read_meta().window == N_CTX
