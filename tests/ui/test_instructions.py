"""AGENTS.md in the app: the Pins panel and the transcript show it, and follow an edit on disk; a new
session that starts with it owes no reply."""

from __future__ import annotations

import os

from textual.widgets import OptionList

from tailrent_tui.agent.loop import Agent
from tailrent_tui.core.messages import Kind
from tailrent_tui.core.session import Session
from tailrent_tui.core.tokens import get_counter
from tailrent_tui.models.mock import MockModel
from tailrent_tui.settings import Settings
from tailrent_tui.ui.widgets.input import PromptInput
from tests.support.ui_helpers import FixedClock, make_app, wait_until


async def test_pins_panel_shows_agents_md_and_follows_an_edit(tmp_path):
    (tmp_path / "AGENTS.md").write_text("Use tabs for indentation.\n")
    session = Session(counter=get_counter("chars4"), system="You are a test agent.", window=8192, clock=FixedClock(), id="t")
    agent = Agent(
        session=session, model=MockModel(), settings=Settings(tokenizer="chars4"), workspace=tmp_path, instructions=True
    )
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        pins = app.sidebar.ledger
        await wait_until(pilot, lambda: "1 pin ·" in str(pins.query_one(".cost").render()), what="pins panel")
        rows = pins.query_one(OptionList)
        row = str(rows.get_option_at_index(rows.option_count - 1).prompt)
        assert "AGENTS.md · project instructions" in row
        view = app.transcript.view_of(session.messages[0].id)
        assert view is not None and "Use tabs" in session.messages[0].content
        old_tokens = session.messages[0].tokens
        path = tmp_path / "AGENTS.md"
        st = path.stat()
        path.write_text("Use spaces, four of them, and run pytest before every commit.\n")
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
        box = app.query_one(PromptInput)
        box.focus()
        box.value = "hello"
        await pilot.press("enter")
        await wait_until(pilot, lambda: any(m.role == "assistant" for m in session.messages), what="the reply")
        instructions = [m for m in session.messages if m.kind == Kind.instructions]
        assert len(instructions) == 1 and "Use spaces" in instructions[0].content
        await wait_until(
            pilot,
            lambda: f"{instructions[0].tokens} tok" in str(rows.get_option_at_index(rows.option_count - 1).prompt),
            what="the Ledger panel's new count",
        )
        assert instructions[0].tokens != old_tokens
        assert app.transcript.view_of(instructions[0].id) is not None


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
