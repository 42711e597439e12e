"""Keys people expect and input never lost (issue 26, items 6 and 7), through the real app (Pilot):
what is typed while the app takes a message in stays in the input; a queued message is said at the
input and given back however the turn is cancelled; ctrl+c interrupts, clears, and twice quits;
/exit, /new, /clear. After a crash mid-reply, ctrl+r answers the last user message (item 11);
the spill viewer's search keys, `k` at the first message, and a reply that scrolls into view only
for a reader at the bottom (item 14)."""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from textual import events
from textual.keys import _character_to_key

from tailrent_tui.ui.screens.session import SessionScreen
from tests.support.ui_helpers import GatedModel, make_agent, make_app, wait_until


@pytest.fixture(autouse=True)
def config_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TAILRENT_CONFIG_DIR", str(tmp_path / "config"))


def gated_app(tmp_path, replies: list[str]):
    agent = make_agent(tmp_path)
    agent.model = GatedModel([{"text": r} for r in replies], chunk_size=4)
    return agent, make_app(agent)


async def test_what_is_typed_while_a_message_is_taken_in_stays_in_the_input(tmp_path, monkeypatch):
    agent, app = gated_app(tmp_path, ["first reply", "second reply"])
    real = SessionScreen._queue_prompt

    async def slow_queue(self, out):
        # the transcript is slow to show the queued line (a big screen, a loaded machine), and the
        # user types on: the keys reach the input while the screen is still taking "two" in
        for ch in " and three":
            app.prompt.post_message(events.Key(_character_to_key(ch), ch))
        for _ in range(200):
            if app.prompt.text.endswith("three"):
                break
            await asyncio.sleep(0)
        await real(self, out)

    monkeypatch.setattr(SessionScreen, "_queue_prompt", slow_queue)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press(*"one", "enter")
        await wait_until(pilot, lambda: app.session_screen.running, what="the turn")
        await pilot.press(*"two", "enter")
        await wait_until(pilot, lambda: bool(app.transcript.query(".queued")), what="the queued line")
        assert app.prompt.text == " and three"
        assert "1 message queued, sent when the reply ends" in str(app.prompt.border_title)
        agent.model.gate.set()
        await wait_until(
            pilot, lambda: len([m for m in agent.session.messages if m.role == "assistant"]) == 2, what="both replies"
        )
        assert [m.content for m in agent.session.messages if m.role == "user"] == ["one", "two"]
        assert app.prompt.text == " and three" and not app.prompt.border_title


async def test_ctrl_c_interrupts_the_reply_gives_the_queue_back_and_a_second_quits(tmp_path):
    _, app = gated_app(tmp_path, ["never streamed"])
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press(*"question", "enter")
        await wait_until(pilot, lambda: app.session_screen.running, what="the turn")
        await pilot.press(*"follow-up", "enter")
        await wait_until(pilot, lambda: bool(app.transcript.query(".queued")), what="queued")
        await pilot.press("ctrl+c")
        await wait_until(pilot, lambda: not app.session_screen.running, what="the interrupt")
        assert app.prompt.text == "follow-up", "the queued message is back in the input"
        assert app.is_running
        await pilot.press("ctrl+c")
        await wait_until(pilot, lambda: not app.is_running, what="the second ctrl+c to quit")


async def test_ctrl_c_clears_the_input_undoably_and_copies_a_selection(tmp_path, monkeypatch):
    agent = make_agent(tmp_path)
    app = make_app(agent)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press(*"a long draft")
        app.prompt.select_all()
        copied: list[str] = []
        monkeypatch.setattr(app, "copy_to_clipboard", copied.append)
        await pilot.press("ctrl+c")
        assert copied == ["a long draft"] and app.prompt.text == "a long draft"
        app.prompt.move_cursor(app.prompt.document.end)
        await pilot.press("ctrl+c")
        assert app.prompt.text == ""
        await pilot.press("ctrl+z")
        assert app.prompt.text == "a long draft"
        app.session_screen._quit_armed_at = None  # the window has passed
        # a chip cleared and brought back keeps its paste
        body = "\n".join(f"frame {i}" for i in range(40))
        app.prompt.post_message(events.Paste(body))
        await wait_until(pilot, lambda: "[pasted 40 lines]" in app.prompt.text, what="the chip")
        await pilot.press("ctrl+c")
        assert "[pasted" not in app.prompt.text
        await pilot.press("ctrl+z")
        assert "[pasted 40 lines]" in app.prompt.text
        await pilot.press("ctrl+o")
        assert body in app.prompt.text, "the paste came back with its chip"
        app.session_screen._quit_armed_at = None
        await pilot.press("ctrl+c")
        app.session_screen._quit_armed_at = None
        await pilot.press("ctrl+c")
        assert app.prompt.text == "" and app.is_running
        await pilot.press("ctrl+c")
        await wait_until(pilot, lambda: not app.is_running, what="the quit")


@pytest.mark.parametrize(("command", "next_session"), [("/exit", None), ("/new", "new"), ("/clear", "new")])
async def test_exit_new_and_clear_end_the_app(tmp_path, command, next_session):
    agent = make_agent(tmp_path)
    app = make_app(agent)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press(*command, "enter")
        await wait_until(pilot, lambda: not app.is_running, what=command)
    assert app.next_session == next_session


async def test_at_80_by_24_the_context_figure_stays_on_screen(tmp_path):
    """Issue 26, item 12: the header leads with "N% context left", kept current after a turn."""
    agent = make_agent(tmp_path, script=[{"text": "a reply " * 200}])
    app = make_app(agent)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press(*"hello", "enter")
        await wait_until(pilot, lambda: not app.session_screen.running and len(agent.session.messages) >= 2, what="reply")
        await pilot.pause()
        left = round(100 * (1 - agent.session.context_tokens / agent.session.window))
        assert left < 100
        assert app.sub_title.startswith(f"{left}% context left")
        # what the terminal shows: the screenshot's text, its spaces as the SVG writes them
        shown = re.sub(r"<[^>]+>", "", app.export_screenshot()).replace("&#160;", " ")
        assert f"{left}% context left" in shown


async def test_a_toast_shows_its_brackets_as_written(tmp_path):
    """Seen on llama.cpp: "set [slots] dir (the server's --slot-save-path)" showed as "set  dir"."""
    from textual.widgets._toast import Toast

    text = "2 slot files stay in the server's slot dir: set [slots] dir, [b]not bold[/b], [unclosed"
    app = make_app(make_agent(tmp_path, notice=text))  # the agent's notice: the bar above the input
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: "set [slots] dir" in str(app.notice_bar.render()), what="the notice bar")
        assert "[b]not bold[/b], [unclosed" in str(app.notice_bar.render())
        app.session_screen.notify(text, severity="warning")
        await pilot.pause()
        # run_test shows no toasts: the toast the terminal would show, from the notification
        shown = str(Toast(list(app._notifications)[-1]).render())
        assert shown == text


# -- after a crash mid-reply, ctrl+r answers the last user message (issue 26, item 11) --------------


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


# -- keys and scrolling in the app (issue 26, item 14) ---------------------------------------


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
    agent.model = GatedModel([{"text": "a line of the reply\n" * 80}], chunk_size=20)
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
