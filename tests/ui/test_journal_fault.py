"""Disk full while chatting: the app says so, keeps the unsaved events, and catches up."""

from __future__ import annotations

import errno

from tailrent_tui.agent.build import build_agent
from tailrent_tui.settings import Settings
from tailrent_tui.store.journal import load_journal
from tailrent_tui.ui.app import TailrentApp
from tests.support.ui_helpers import wait_until


async def test_a_journal_write_failure_is_shown_kept_and_retried(tmp_path, monkeypatch):
    monkeypatch.setenv("TAILRENT_CONFIG_DIR", str(tmp_path / "config"))
    ws = tmp_path / "ws"
    ws.mkdir()
    settings = Settings(model="mock", data_dir=tmp_path / "data", workspace=ws, tokenizer="chars4")
    agent = build_agent(settings, async_writer=True, new=True)
    writer = agent.journal
    app = TailrentApp(agent, settings)
    async with app.run_test(size=(140, 40)) as pilot:
        agent.session.add("user", "saved before the fault")
        await writer.drain()
        saved = writer.saved
        real_write = writer._write_bytes

        def disk_full(fd, data):
            raise OSError(errno.ENOSPC, "No space left on device")

        writer._write_bytes = disk_full  # the writer's one seam where bytes leave the process
        agent.session.add("user", "DECISION: kept in memory while the disk is full")
        await wait_until(pilot, lambda: "not being saved" in str(app.notice_bar.render()), what="the notice")
        assert "No space left on device" in str(app.notice_bar.render())
        assert writer.pending >= 1 and writer.saved == saved
        assert app._journal_retry is not None

        writer._write_bytes = real_write
        app._retry_journal()  # what the 5-second interval calls
        await wait_until(pilot, lambda: writer.pending == 0, what="the retry")
        await wait_until(pilot, lambda: "not being saved" not in str(app.notice_bar.render()), what="notice cleared")
        assert app._journal_retry is None
    await writer.aclose()
    contents = [e.message.content for e in load_journal(writer.path).events if e.type == "message_added"]
    assert contents == ["saved before the fault", "DECISION: kept in memory while the disk is full"]
