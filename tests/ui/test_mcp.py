"""MCP in the app (Textual Pilot): servers come up after the first frame, the Tail panel counts their
schema apart, `/mcp disable NAME` takes the tools out of the next request, and quitting stops them."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from tailrent_tui.agent.build import build_agent
from tailrent_tui.settings import Settings
from tailrent_tui.ui.app import TailrentApp
from tailrent_tui.ui.widgets.tail_panel import duration, mcp_lines
from tests.agent.test_mcp import SERVER, mcp_names, no_tools_left_behind  # noqa: F401 (the registry check)


async def test_mcp_in_the_app(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("TAILRENT_CONFIG_DIR", str(tmp_path / "config"))
    ws = tmp_path / "ws"
    ws.mkdir()
    settings = Settings(
        model="mock",
        data_dir=tmp_path / "data",
        workspace=ws,
        fsync=False,
        tokenizer="chars4",
        mcp={"servers": {"fx": {"command": sys.executable, "args": [str(SERVER)]}}},
    )
    agent = build_agent(settings, {}, async_writer=True, new=True)
    app = TailrentApp(agent, settings)
    hub = agent.mcp
    try:
        async with app.run_test(size=(140, 40)) as pilot:
            await pilot.pause()
            # the first frame is drawn before the server is up
            assert hub.links["fx"].state == "starting"
            assert mcp_names() == []
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 30
            while hub.links["fx"].state != "ready":
                assert loop.time() < deadline, "the server did not come up"
                await asyncio.sleep(0.05)
            await pilot.pause()
            pid = hub.links["fx"].wire.pid
            tokens = hub.schema_tokens()["fx"]
            tail = app.screen.sidebar.tail
            assert tail.figures is not None and tail.figures.mcp_tokens == {"fx": tokens}
            assert mcp_lines({"fx": tokens})[0] == f"of system, mcp tools: {tokens:,} each request"
            head = agent.session.head_tokens
            assert any(t["name"] == "fx__echo" for t in agent.tools.offered_tools())

            await pilot.press(*"/mcp disable fx", "enter")
            deadline = loop.time() + 15
            while hub.links["fx"].state != "disabled":
                assert loop.time() < deadline, "the server was not disabled"
                await asyncio.sleep(0.05)
            await pilot.pause()
            assert not any(t["name"].startswith("fx__") for t in agent.tools.offered_tools())
            assert agent.session.head_tokens == head - tokens
            (note,) = [n.text for n in agent.session.notes if "disabled for this session" in n.text]
            assert f"~{tokens:,} tokens fewer in every request's head" in note
            # the toast adds the rent those tokens cost, at the local sheet's prompt rate
            rate = tail.figures.rate
            assert rate is not None
            said = [str(n.message) for n in app._notifications]
            assert any(
                note.removeprefix("mcp: ") in m and f"that saves {duration(rate.seconds(tokens))} of prompt time" in m
                for m in said
            ), said
            assert tail.figures.mcp_tokens == {}

            await pilot.press(*"/mcp enable fx", "enter")
            deadline = loop.time() + 30
            while hub.links["fx"].state != "ready":
                assert loop.time() < deadline, "the server did not come back"
                await asyncio.sleep(0.05)
            pid = hub.links["fx"].wire.pid
        # quitting stopped it while the loop ran
        assert pid is not None
        try:
            os.kill(pid, 0)
            alive = True
        except ProcessLookupError:
            alive = False
        assert not alive
        assert mcp_names() == []
    finally:
        hub.kill_now()
        await agent.aclose()
