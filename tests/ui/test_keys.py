"""Keys people expect and input never lost (issue 26, items 6 and 7), through the real app (Pilot):
what is typed while the app takes a message in stays in the input; a queued message is said at the
input and given back however the turn is cancelled; ctrl+c interrupts, clears, and twice quits;
/exit, /new, /clear."""

from __future__ import annotations

import asyncio
import re

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
