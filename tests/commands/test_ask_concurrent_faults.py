"""Concurrent `ask --continue` on one session (issue 27, item 7): one process holds the session, the
others say so in one line and exit 1; nothing that was acknowledged is lost, the journal stays whole."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tailrent_tui.core.messages import MessageAdded
from tailrent_tui.store.sessions import session_dirs


@pytest.mark.fault("concurrent ask --continue")
def test_concurrent_continues_on_one_session_lose_nothing_acknowledged(tmp_path):
    ws, data = tmp_path / "ws", tmp_path / "data"
    ws.mkdir()
    env = {**os.environ, "TAILRENT_HOME": str(data), "TAILRENT_CONFIG_DIR": str(tmp_path / "config"), "TAILRENT_FSYNC": "false"}
    base = [sys.executable, "-m", "tailrent_tui", "--workspace", str(ws), "ask", "--model", "mock", "--json"]
    assert subprocess.run([*base, "first"], env=env, capture_output=True, timeout=120, check=False).returncode == 0
    procs = [
        subprocess.Popen(
            [*base, "--continue", f"concurrent {i}"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for i in range(3)
    ]
    outs = [(p.wait(timeout=120), *p.communicate()) for p in procs]
    saved = []
    for i, (code, out, err) in enumerate(outs):
        assert "Traceback" not in err
        if code == 0:
            assert json.loads(out)["saved"] is True
            saved.append(f"concurrent {i}")
        else:
            lines = [ln for ln in err.splitlines() if ln.startswith(("Error:", "error:"))]
            assert len(lines) == 1 and "already open" in lines[0], err
    assert saved, "one of them got the session"
    (sd,) = session_dirs(data)
    users = [e.message.content for e in sd.events() if isinstance(e, MessageAdded) and e.message.role == "user"]
    assert users[0] == "first" and set(saved) <= set(users[1:]), "every acknowledged prompt is in the journal"
