"""Quitting the real app (its own event loop, as `tailrent` runs it) saves everything,
releases the session, and prints no traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent(
    """
    import asyncio
    import sys
    from tailrent_tui.agent.lifecycle import open_agent
    from tailrent_tui.settings import Settings
    from tailrent_tui.ui.app import TailrentApp

    settings = Settings(model="mock", data_dir=sys.argv[1], workspace=sys.argv[2], tokenizer="chars4")

    class Quitting(TailrentApp):
        def on_ready(self) -> None:
            self.session.add("user", "DECISION: written while the app runs, just before quitting")
            self.call_later(self.exit)

    async def main() -> str:
        async with open_agent(settings, {}, new=True) as agent:  # as `tailrent` runs the app
            await Quitting(agent, settings).run_async(headless=True)
        return agent.session.id

    print(asyncio.run(main()))
    """
)


def test_quitting_the_app_saves_and_releases_the_session(tmp_path: Path) -> None:
    data, ws = tmp_path / "data", tmp_path / "ws"
    ws.mkdir()
    env = {**os.environ, "TAILRENT_CONFIG_DIR": str(tmp_path / "config")}
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(data), str(ws)], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    session_id = proc.stdout.strip().splitlines()[-1]

    from tailrent_tui.store.sessions import SessionDir, open_session

    sd = SessionDir(data / "sessions" / session_id)
    opened = open_session(sd, fsync=False)  # the lock is free again
    session, writer = opened.session, opened.writer
    try:
        assert not any("took over" in w or "stale" in w for w in opened.warnings), opened.warnings
        assert [m.content for m in session.messages] == ["DECISION: written while the app runs, just before quitting"]
        meta = json.loads(sd.meta_path.read_text())
        assert meta["summary"]["messages"] == 1
    finally:
        writer.close()
        opened.lock.release()
