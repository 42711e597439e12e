"""The app reads spill and fold-archive files with aiofiles (issue 24, item 7).

The spill viewer and the fold inspector show what the stores' own readers
return (a JSON spill checked against its hash, a raw spill decoded with
replacement, a fold's originals), through the real app and real session files;
a damaged file is said in one line; and the bytes come through
agent/async_files.py (aiofiles), never a blocking read on the event loop.
"""

from __future__ import annotations

import json
from pathlib import Path

from tailrent_tui.agent import stores as agent_stores
from tailrent_tui.agent.tools import ToolCaps
from tailrent_tui.core.messages import Folded, Kind
from tailrent_tui.ui.screens.fold_inspector import FoldInspector
from tailrent_tui.ui.screens.spill_viewer import SpillViewer
from tests.support.ui_helpers import make_app, wait_until


def _count_reads(monkeypatch) -> list[Path]:
    """The files the app read through agent/async_files.read_bytes (aiofiles)."""
    seen: list[Path] = []
    real = agent_stores.read_bytes

    async def read_bytes(path: Path) -> bytes:
        seen.append(Path(path))
        return await real(path)

    monkeypatch.setattr(agent_stores, "read_bytes", read_bytes)
    return seen


async def _viewer_text(app, pilot, spill_id: str) -> str:
    assert await app.open_spill(spill_id)
    await wait_until(pilot, lambda: isinstance(app.screen, SpillViewer), what="the spill viewer")
    assert app.screen.error is None, app.screen.error
    await wait_until(pilot, lambda: bool(app.screen.query("TextArea")), what="the viewer's text")
    text = app.screen.query_one("TextArea").text
    await pilot.press("escape")
    return text


async def test_the_spill_viewer_reads_json_and_raw_spills_with_aiofiles(make_agent, monkeypatch):
    command = "printf 'caf\\351 '; head -c 5000 /dev/zero | tr '\\0' y"
    agent = make_agent(
        [{"tool_calls": [{"name": "run_shell", "arguments": {"command": command}}]}, "ok"],
        yolo=True,
        caps=ToolCaps(shell_max_bytes=1000, shell_spill_max_bytes=100_000),
    )
    await agent.turn("Print a lot.", None)
    (raw,) = [m for m in agent.session.messages if m.kind == Kind.spill_pointer]
    assert agent.spill_store.raw_path_for(raw.spill_id).exists()
    plan = "the plan: " + "keep the port at 8443 because the proxy expects it. " * 20
    spilled = agent.ladder.spill(agent.session.add("user", plan, autopin=False).id)  # the ledger would pin it in place
    seen = _count_reads(monkeypatch)
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        assert await _viewer_text(app, pilot, spilled.spill_id) == plan
        raw_text = await _viewer_text(app, pilot, raw.spill_id)
        assert raw_text.startswith("caf\ufffd yyyy") and len(raw_text) >= 5000
        # the JSON spill's file altered behind the store's back: its hash no longer matches
        path = agent.spill_store.path_for(spilled.spill_id)
        record = json.loads(path.read_text())
        path.write_text(json.dumps({**record, "content": "edited"}))
        altered = await _viewer_text(app, pilot, spilled.spill_id)
        assert altered.startswith(f"[spill {spilled.spill_id} cannot be shown:") and "sha256" in altered
        assert "\n" not in altered
    assert seen == [path, agent.spill_store.raw_path_for(raw.spill_id), path]


async def test_the_fold_inspector_reads_the_archive_with_aiofiles(make_agent, monkeypatch):
    agent = make_agent(fold={"guard": "off", "summarizer": "lossy"})
    first = agent.session.add("user", "the ticket is ZEBRA-1111 and the port is 8443. " + "We went over it twice. " * 30)
    second = agent.session.add("assistant", "Noted, ZEBRA-1111 on port 8443. " + "Nothing else changes. " * 20)
    assert isinstance(await agent.ladder.fold([first.id, second.id]), Folded)
    seen = _count_reads(monkeypatch)
    app = make_app(agent)
    archive = agent.session_dir.path / "archive" / "fold-0001.json"
    async with app.run_test(size=(140, 40)) as pilot:
        assert await app.inspect(1)
        await wait_until(pilot, lambda: isinstance(app.screen, FoldInspector), what="the inspector")
        assert [m.content for m in app.screen.originals] == [first.content, second.content]
        await pilot.press("escape")
        archive.write_text("{not json")
        assert await app.inspect(1)
        await wait_until(pilot, lambda: isinstance(app.screen, FoldInspector), what="the inspector again")
        assert app.screen.originals == [] and app.screen.error.startswith("the originals cannot be shown: fold #1: file")
        assert "\n" not in app.screen.error
    assert seen == [archive, archive]
