"""Pilot tests of the input (issue 15): the editor, pastes, history, completion, focus, and the rest of the UI side."""

from __future__ import annotations

import os
import stat

import pytest
from textual import events
from textual.keys import _character_to_key
from ui_helpers import FixedClock, fill, make_agent, make_app, wait_until

from tailrent_tui.core.messages import Kind
from tailrent_tui.settings import Settings
from tailrent_tui.store.history import PromptHistory, history_path
from tailrent_tui.ui.demo import open_demo
from tailrent_tui.ui.screens.fold_preview import FoldPreview
from tailrent_tui.ui.screens.history_search import HistorySearch
from tailrent_tui.ui.widgets.completion_menu import CompletionMenu
from tailrent_tui.ui.widgets.input import CHIP_LINES, PromptInput
from tailrent_tui.ui.widgets.message import MessageView


@pytest.fixture(autouse=True)
def config_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TAILRENT_CONFIG_DIR", str(tmp_path / "config"))


def user_texts(agent) -> list[str]:
    return [m.content for m in agent.session.messages if m.role == "user"]


async def paste(pilot, app, text: str) -> None:
    app.prompt.post_message(events.Paste(text))
    await pilot.pause()


async def test_a_multi_line_paste_keeps_its_lines_and_is_sent_whole(tmp_path):
    agent = make_agent(tmp_path, script=[{"text": "ok"}])
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press(*"look: ")
        await paste(pilot, app, "def f():\r\n    return 1\r\nprint(f())")
        assert app.prompt.text == "look: def f():\n    return 1\nprint(f())"
        assert not agent.session.messages, "a paste never sends"
        await pilot.press("enter")
        await wait_until(pilot, lambda: not app.running and len(agent.session) == 2, what="the reply")
        assert user_texts(agent) == ["look: def f():\n    return 1\nprint(f())"]


async def test_enter_sends_shift_enter_and_ctrl_j_start_a_new_line(tmp_path):
    agent = make_agent(tmp_path, script=[{"text": "ok"}])
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press("a", "shift+enter", "b", "ctrl+j", "c")
        assert app.prompt.text == "a\nb\nc" and not agent.session.messages
        # up in the last line of three moves the cursor, it does not walk the history
        await pilot.press("up")
        assert app.prompt.cursor_location[0] == 1 and app.prompt.text == "a\nb\nc"
        await pilot.press("enter")
        await wait_until(pilot, lambda: not app.running and len(agent.session) == 2, what="the reply")
        assert user_texts(agent) == ["a\nb\nc"] and app.prompt.text == ""


async def test_a_big_paste_is_a_chip_and_enters_through_the_ladder(tmp_path):
    """Past the room left before the fold trigger, a paste is spilled whole; its pointer shows its
    head and its tail (a traceback's decisive line is its last)."""
    agent = make_agent(tmp_path, script=[{"text": "ok"}])  # window 8,192, chars4
    app = make_app(agent)
    lines = [f"line {i}: some pasted log text that goes on" for i in range(900)]
    big = "\n".join(["Traceback (most recent call last):", *lines, "ValueError: the decisive line"])
    assert agent.session.count(big) > agent.budget.room(), "the paste must not fit the room"
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press(*"why does this fail? ")
        await paste(pilot, app, big)
        assert app.prompt.text == "why does this fail? [pasted 902 lines]"
        await pilot.press("enter")
        await wait_until(pilot, lambda: not app.running and agent.session.messages[-1].role == "assistant", what="reply")
        kinds = [(m.role, m.kind, m.tool) for m in agent.session.messages]
        assert kinds[:2] == [("tool", Kind.spill_pointer, "paste"), ("user", Kind.chat, None)]
        pointer = agent.session.messages[0]
        assert agent.spill_store.read_spill(pointer.spill_id) == "[pasted 902 lines]\n" + big
        assert "Traceback (most recent call last)" in pointer.content
        assert "ValueError: the decisive line" in pointer.content, pointer.content
        assert "line 450:" not in pointer.content, "the middle stays in the spill"
        assert user_texts(agent) == ["why does this fail? [pasted 902 lines]"]


async def test_a_paste_that_fits_the_room_is_kept_inline(tmp_path):
    """Over the spill threshold (200 tokens here) but well inside the window: the model reads it
    without a read_spill."""
    agent = make_agent(tmp_path, script=[{"text": "ok"}])
    app = make_app(agent)
    big = "\n".join(f"line {i}: some pasted log text that goes on" for i in range(212))
    assert agent.settings.tools.spill_threshold < agent.session.count(big) < agent.budget.room()
    async with app.run_test(size=(140, 40)) as pilot:
        await paste(pilot, app, big)
        assert app.prompt.text == "[pasted 212 lines]"
        await pilot.press("enter")
        await wait_until(pilot, lambda: not app.running and agent.session.messages[-1].role == "assistant", what="reply")
        first = agent.session.messages[0]
        assert (first.role, first.kind, first.tool) == ("tool", Kind.tool_result, "paste")
        assert first.content == "[pasted 212 lines]\n" + big
        assert not agent.spill_store.items


async def test_a_chip_expands_back_into_text(tmp_path):
    app = make_app(make_agent(tmp_path))
    body = "\n".join(str(i) for i in range(CHIP_LINES + 5))
    async with app.run_test(size=(140, 40)) as pilot:
        await paste(pilot, app, body)
        await paste(pilot, app, body)
        assert app.prompt.text == f"[pasted {CHIP_LINES + 5} lines][pasted {CHIP_LINES + 5} lines #2]"
        await pilot.press("ctrl+o")
        assert app.prompt.text == body + body and not app.prompt.pastes


async def test_history_is_kept_per_workspace_across_a_restart(tmp_path):
    settings = Settings(tools={"spill_threshold": 200}, tokenizer="chars4", data_dir=tmp_path / "data")
    first = make_app(make_agent(tmp_path, settings=settings, script=[{"text": "ok"}, {"text": "ok"}]))
    async with first.run_test(size=(140, 40)) as pilot:
        await pilot.press(*"first question", "enter")
        await wait_until(pilot, lambda: not first.running and len(first.session) == 2, what="the first reply")
        await pilot.press(*"second", "shift+enter", *"on two lines", "enter")
        await wait_until(pilot, lambda: not first.running and len(first.session) == 4, what="the second reply")
    path = history_path(tmp_path / "data", tmp_path)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600

    second = make_app(make_agent(tmp_path, settings=settings))
    async with second.run_test(size=(140, 40)) as pilot:
        box = second.prompt
        await pilot.press("up")
        assert box.text == "second\non two lines"
        await pilot.press("up")  # the cursor is at the end: up goes to the first line, then walks on
        assert box.text == "second\non two lines" and box.cursor_location[0] == 0
        await pilot.press("up")
        assert box.text == "first question"
        await pilot.press("down")
        assert box.text == "second\non two lines"
        await pilot.press("down")
        assert box.text == "", "past the newest: the draft (empty) again"

    (tmp_path / "elsewhere").mkdir()
    other = make_app(make_agent(tmp_path / "elsewhere", settings=settings))
    async with other.run_test(size=(140, 40)) as pilot:
        await pilot.press("up")
        assert other.prompt.text == "", "another workspace has its own history"


def test_the_history_file_is_bounded(tmp_path):
    path = tmp_path / "h.jsonl"
    history = PromptHistory(path, limit=5)
    for i in range(23):
        history.append(f"prompt {i}")
    assert history.entries == [f"prompt {i}" for i in range(18, 23)]
    assert len(path.read_text().splitlines()) <= 10
    path.write_text(path.read_text() + '{"text": "half a li')  # a crash mid-write
    assert PromptHistory(path, limit=5).entries == [f"prompt {i}" for i in range(18, 23)]


async def test_reverse_search_puts_the_chosen_prompt_in_the_input(tmp_path):
    app = make_app(make_agent(tmp_path), history=PromptHistory(None))
    app.prompt_history.entries = ["fold the logs", "pin the decision", "fold again please"]
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press("ctrl+s")
        assert isinstance(app.screen, HistorySearch)
        await pilot.press(*"fold")
        assert app.screen.matches == ["fold again please", "fold the logs"]
        await pilot.press("down", "enter")
        assert app.prompt.text == "fold the logs" and app.focused is app.prompt


async def test_slash_completion_offers_commands_then_their_arguments(tmp_path):
    agent = make_agent(tmp_path)
    fill(agent.session, 4)
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        menu = app.query_one(CompletionMenu)
        await pilot.press("/")
        assert menu.is_open and menu.display and len(menu.completion.items) > 8
        await pilot.press("e", "x", "p")
        assert [i.text for i in menu.completion.items] == ["/export"]
        await pilot.press("tab")
        assert app.prompt.text == "/export "
        assert [i.text for i in menu.completion.items] == ["md", "json"]
        await pilot.press("enter")  # nothing typed of the argument yet: enter sends, it does not take "md"
        await wait_until(pilot, lambda: any("export" in n.message for n in app._notifications), what="the export")
        assert not menu.is_open
        app.prompt.value = ""

        await pilot.press(*"/pin m0000")
        assert [i.text for i in menu.completion.items] == ["m00003", "m00002", "m00001", "m00000"]
        await pilot.press("escape")
        assert not menu.is_open and app.prompt.text == "/pin m0000"


async def test_enter_after_a_burst_runs_what_was_typed_not_a_stale_completion(tmp_path):
    """In a terminal "/fold" and enter arrive in one burst, before the menu has caught up
    with the text: enter must judge the text as it is (tmux showed /fold becoming /pin)."""
    agent = make_agent(tmp_path)
    fill(agent.session, 6, pad=4)
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        menu = app.query_one(CompletionMenu)
        await pilot.press("/")
        assert menu.is_open and menu.current is not None and menu.current.text == "/pin"
        box = app.prompt
        # the rest of the burst: every key queued before any of their Changed messages
        for key in ["f", "o", "l", "d"]:
            box.post_message(events.Key(key, key))
        box.post_message(events.Key("enter", "\r"))
        await wait_until(pilot, lambda: isinstance(app.screen, FoldPreview), what="the fold's preview")
        assert "/pin" not in box.text and not any(m.pinned for m in agent.session.messages)


async def test_at_path_completes_and_attaches_the_file_through_read_file(tmp_path):
    (tmp_path / "notes.md").write_text("port 8002 is the cache\n")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "main.py").write_text("print('hi')\n")
    agent = make_agent(tmp_path, script=[{"text": "ok"}])
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        menu = app.query_one(CompletionMenu)
        await pilot.press(*"read @s")
        assert [i.text for i in menu.completion.items] == ["@src/"]
        await pilot.press("tab")
        assert app.prompt.text == "read @src/" and [i.text for i in menu.completion.items] == ["@src/main.py"]
        await pilot.press("enter")  # a token is being typed: enter takes the entry
        assert app.prompt.text == "read @src/main.py "
        await pilot.press(*"and @notes.md, ask @nobody", "enter")
        await wait_until(pilot, lambda: not app.running and agent.session.messages[-1].role == "assistant", what="reply")
        tools = [m for m in agent.session.messages if m.role == "tool"]
        assert [m.tool for m in tools] == ["read_file", "read_file"]
        assert "print('hi')" in tools[0].content and "port 8002" in tools[1].content
        assert user_texts(agent) == ["read @src/main.py and @notes.md, ask @nobody"]


async def test_tab_enters_navigation_and_typing_returns_to_the_input(tmp_path):
    agent = make_agent(tmp_path)
    fill(agent.session, 3)
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        assert app.mode == "input"
        await pilot.press("tab")
        assert app.mode == "navigation" and isinstance(app.focused, MessageView)
        head = str(app.focused.query_one(".head").render())
        assert f"id {app.focused.message_id}" in head
        assert "navigation" in (app.prompt.border_title or "")
        await pilot.press("w")
        assert app.mode == "input" and app.prompt.text == "w"
        assert "id m0" not in str(app.transcript.view_of("m00002").query_one(".head").render())

        app.prompt.value = ""
        await pilot.press("tab", *"/export md")
        assert app.prompt.text == "/export md"
        assert not any(m.pinned for m in agent.session.messages), "the p of /export must not pin"

        # a terminal sends a typed burst at once: no key of it may land on the message
        app.prompt.value = ""
        await pilot.press("tab")
        for ch in "/export md":
            app.post_message(events.Key(_character_to_key(ch), ch))
        await pilot.pause()
        assert app.prompt.text == "/export md"
        assert not any(m.pinned for m in agent.session.messages) and not app.transcript.selected_ids

        app.prompt.value = ""
        await pilot.press("tab", "up", "p")
        assert agent.session.get("m00001").pinned and app.mode == "navigation"
        await pilot.press("escape")
        assert app.mode == "input"


async def test_the_demo_focuses_its_input_and_space_pauses_only_while_it_is_empty(tmp_path):
    # at its own pace the demo is still playing when the keys land (at x8 it outran them to its end,
    # and each key waited on the lines it drew)
    async with (
        open_demo(pinned=False, speed=1.0, clock=FixedClock(), workspace=tmp_path) as app,
        app.run_test(size=(140, 40)) as pilot,
    ):
        await pilot.pause()
        assert isinstance(app.focused, PromptInput)
        await pilot.press(*"/inspect 1")
        assert app.prompt.text == "/inspect 1"
        assert app._unpaused.is_set() and len(app.screen_stack) == 1
        app.prompt.value = ""
        await pilot.press("space")
        assert not app._unpaused.is_set()
        assert not app.finished.is_set(), "the keys landed while the demo played"


async def test_at_80_columns_the_sidebar_hides_itself_and_ctrl_b_shows_it(tmp_path):
    app = make_app(make_agent(tmp_path))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert not app.sidebar.display or app.sidebar.has_class("-hidden")
        assert app.transcript.size.width > 70
        await pilot.press("ctrl+b")
        assert not app.sidebar.has_class("-hidden")
        await pilot.press("ctrl+b")
        assert app.sidebar.has_class("-hidden")
    wide = make_app(make_agent(tmp_path))
    async with wide.run_test(size=(140, 40)) as pilot:
        await pilot.pause()
        assert not wide.sidebar.has_class("-hidden")


async def test_copy_puts_the_last_reply_and_a_message_on_the_clipboard(tmp_path):
    agent = make_agent(tmp_path, script=[{"text": "Use **Redis**."}])
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press(*"/copy", "enter")
        assert app.clipboard == ""
        await pilot.press(*"which cache?", "enter")
        await wait_until(pilot, lambda: not app.running and len(agent.session) == 2, what="the reply")
        await pilot.press(*"/copy", "enter")
        assert app.clipboard == "Use **Redis**."
        await pilot.press("tab", "up", "c")
        assert app.clipboard == "which cache?"


async def test_the_notice_speaks_the_apps_language_and_can_be_dismissed(tmp_path):
    from tailrent_tui.models.factory import CONNECT_HOW

    app = make_app(make_agent(tmp_path, notice=f"No model server answered: to use a real model, {CONNECT_HOW}."))
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.pause()
        text = str(app.notice_bar.render())
        assert "/model ollama:NAME" in text and "--model" not in text
        await pilot.press("ctrl+n")
        assert not app.notice_bar.has_class("-shown")


async def test_the_palette_lists_every_slash_command(tmp_path):
    from tailrent_tui.ui.actions import SLASH_COMMANDS

    app = make_app(make_agent(tmp_path))
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press("ctrl+p", *"/model")
        await wait_until(pilot, lambda: app.screen.query("CommandList").first().option_count > 0, what="palette hits")
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.prompt.text == "/model ", what="the input filled")
        menu = app.query_one(CompletionMenu)
        assert "mock" in [i.text for i in menu.completion.items]
    from tailrent_tui.ui.commands import LadderCommands

    names = [text for text, _, _ in LadderCommands._entries(LadderCommands.__new__(LadderCommands))]
    assert all(c.usage in names for c in SLASH_COMMANDS)


def test_the_farewell_names_the_session_and_how_to_resume_it(tmp_path):
    agent = make_agent(tmp_path)
    app = make_app(agent)
    assert app.farewell() is None  # no journal: nothing to resume
    agent.journal = object()
    assert app.farewell() is None  # nothing said yet
    fill(agent.session, 1)
    assert app.farewell() == "session test-session\nresume it with: tailrent --resume test-session"


async def test_an_at_path_that_is_missing_or_leads_out_is_said(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "app.py").write_text("print('hi')\n")
    (tmp_path / "secret.txt").write_text("outside\n")
    agent = make_agent(ws, script=[{"text": "ok"}])
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        app.prompt.value = "see @app.py @nope.py @../secret.txt and ask @alice"
        await pilot.press("enter")
        await wait_until(pilot, lambda: not app.running and agent.session.messages[-1].role == "assistant", what="reply")
        said = [str(n.message) for n in app._notifications]
        assert any("@nope.py: no such file in the workspace" in n for n in said), said
        assert any("@../secret.txt: outside the workspace" in n for n in said), said
        assert not any("alice" in n for n in said), "@someone is just text"
        attached = [m for m in agent.session.messages if m.tool == "read_file"]
        assert len(attached) == 1 and "print('hi')" in attached[0].content
        assert "outside" not in " ".join(m.content for m in agent.session.messages if m.role == "tool")
