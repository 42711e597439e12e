"""Bracketed pastes under hostile input (issue 27, item 7): control and escape sequences in a paste are
shown as visible text, never sent to the terminal; a 10 MB paste is taken whole, spilled, and the app
stays up; the spill holds it as pasted."""

from __future__ import annotations

import pytest
from textual import events

from tailrent_tui.ui.widgets.input import PromptInput
from tests.support.ui_helpers import make_agent, make_app, wait_until


@pytest.fixture(autouse=True)
def config_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TAILRENT_CONFIG_DIR", str(tmp_path / "config"))


def _shown(app) -> str:
    from textual.widgets import Markdown, Static

    return "\n".join([str(s.render()) for s in app.screen.query(Static)] + [m.source for m in app.screen.query(Markdown)])


@pytest.mark.fault("bracketed pastes")
@pytest.mark.parametrize("size", [200, 10 * 1024 * 1024])
async def test_a_paste_with_escapes_is_shown_as_text_and_kept_whole(tmp_path, size):
    hostile = "\x1b]52;c;cm0gLXJmIH4=\x07\x1b[2J\x9b31m"
    body = (hostile + " pasted line\n") * max(1, size // 40)
    agent = make_agent(tmp_path, script=[{"text": "got it"}])
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        box = app.query_one(PromptInput)
        box.focus()
        box.post_message(events.Paste(body))
        await pilot.pause()
        await pilot.press(*"see above", "enter")
        await wait_until(pilot, lambda: any(m.content == "got it" for m in agent.session.messages), rounds=4000, what="the reply")
        await pilot.pause()
        assert app.is_running
        shown = _shown(app)
        assert "]52;c;" in shown and "\x1b" not in shown and "\x9b" not in shown and "\x07" not in shown
    kept = "\n".join(m.content for m in agent.session.messages)
    spilled = "".join([await agent.stores.spill_text(m.spill_id) for m in agent.session.messages if m.spill_id])
    assert hostile in kept + spilled, "the paste is data: kept as pasted, only shown with pictures"
