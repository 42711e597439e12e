"""`!cmd` in the app: escape stops it, as it stops a reply — the command's process group is
killed at once, the app stays usable, and the model is told the command has no output."""

from __future__ import annotations

import asyncio
import time

from tailrent_tui.settings import Settings
from tests.agent.test_tools_shell_faults import SLOW_THEN_MARK, _group_alive, _group_gone_within, _pids_written
from tests.support.ui_helpers import make_agent, make_app, wait_until


async def test_escape_stops_a_running_shell_command_and_a_second_one_waits(tmp_path):
    agent = make_agent(tmp_path, script=[{"text": "ok"}], settings=Settings(tokenizer="chars4"))
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press(*f"!{SLOW_THEN_MARK}", "enter")
        (pgid,) = await _pids_written(tmp_path, "shell.pid")
        assert _group_alive(pgid)
        # a second command waits for the first (refused with a notice), so escape reaches the one running
        await pilot.press(*"!echo second > second.txt", "enter")
        await pilot.pause(0.5)
        assert not (tmp_path / "second.txt").exists()
        assert app.prompt.text == "!echo second > second.txt"  # refused, not lost
        app.prompt.clear()
        pressed = time.monotonic()
        await pilot.press("escape")
        assert not await _group_gone_within(pgid, 1.0), "the command outlived escape"
        assert time.monotonic() - pressed < 2
        await wait_until(
            pilot,
            lambda: any("was cancelled before it finished" in m.content for m in agent.session.messages),
            what="the cancelled line for the model",
        )
        # the app takes the next message as usual
        await pilot.press(*"hello", "enter")
        await wait_until(pilot, lambda: agent.session.messages[-1].content == "ok", what="the reply after")
    await asyncio.sleep(0.1)
    assert not (tmp_path / "marker").exists()
