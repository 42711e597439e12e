"""Bytes are data (issue 27, item 2): what is not UTF-8 is kept with U+FFFD, never lost after a "saved".

A prompt in argv, a file name seen by a tool, a lone surrogate from a server:
each is stored in the journal decoded with replacement (`text.storable`), and
what the journal holds reads back as what the session holds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tailrent_tui.agent.loop import TurnCallbacks
from tailrent_tui.core.messages import MessageAdded
from tailrent_tui.core.session import Session
from tailrent_tui.store.journal import event_line
from tailrent_tui.store.sessions import find_session
from tailrent_tui.text import storable
from tests.agent.test_tools_shell_faults import call, calls, tool_messages


def _env(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "TAILRENT_HOME": str(tmp_path / "data"),
        "TAILRENT_CONFIG_DIR": str(tmp_path / "config"),
        "TAILRENT_FSYNC": "false",
    }


def _journal_messages(home: Path, session_id: str) -> list:
    sd = find_session(home, session_id)
    return [e.message for e in sd.events() if isinstance(e, MessageAdded)]


@pytest.mark.fault("bytes are data")
@pytest.mark.parametrize("raw", [b"my note: caf\xe9", b"\xff\xfe half", b"ok \xe2\x82 cut euro", b"caf\xc3\xa9 fine"])
def test_a_prompt_that_is_not_utf8_is_kept_in_the_journal(tmp_path, raw):
    ws = tmp_path / "ws"
    ws.mkdir()
    proc = subprocess.run(
        [sys.executable, "-m", "tailrent_tui", "--workspace", str(ws), "ask", "--model", "mock", "--json", os.fsdecode(raw)],
        capture_output=True,
        env=_env(tmp_path),
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode("utf-8", "replace")
    out = json.loads(proc.stdout)
    assert out["saved"] is True and out["error"] is None
    first = _journal_messages(tmp_path / "data", out["session"])[0]
    assert first.role == "user"
    assert first.content == raw.decode("utf-8", "replace"), "the prompt is in the journal, bytes decoded"


@pytest.mark.fault("bytes are data")
async def test_a_file_name_that_is_not_utf8_reaches_the_journal(make_agent, workspace, tmp_path):
    name = os.fsdecode(b"caf\xe9.txt")
    (workspace / "d").mkdir()
    (workspace / "d" / name).write_text("hello\n")
    agent = make_agent([calls(call("list_dir", path="d")), calls(call("read_file", path=os.path.join("d", name))), "ok"])
    result = await agent.turn("Look.", TurnCallbacks())
    assert result.error is None
    listed, read = tool_messages(agent)
    assert "caf\ufffd.txt" in listed.content
    # the model asked for the name as the server would have sent it (JSON: no surrogates), and it was refused in one line
    assert read.content
    journaled = [m for m in _journal_messages(tmp_path / "data", agent.session.id) if m.role == "tool"]
    assert [m.content for m in journaled] == [listed.content, read.content], "every tool result is journaled"


@pytest.mark.fault("bytes are data")
@pytest.mark.parametrize("text", ["caf\udce9", "half \ud83d", "tail \ude00", "\udcff\udcfe"])
def test_a_journal_line_holds_any_text_and_reads_back(text):
    session = Session()
    events: list = []
    session.listeners.append(events.append)
    session.add("user", text)
    line = event_line(events[-1])
    back = json.loads(line)["message"]["content"]
    assert back == storable(text) and "\ufffd" in back


def test_storable_keeps_clean_text_and_joins_what_the_escape_split():
    assert storable("plain café") == "plain café"
    assert storable(os.fsdecode("café".encode())) == "café"
    assert storable("\ud83d\ude00") == "\U0001f600"
