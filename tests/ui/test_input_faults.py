"""Hostile input at the keyboard and in the input history (issue 27, items 2 and 7).

- A byte typed or pasted that is not UTF-8 reaches the real app on a real terminal (a pty):
  the app stays up, and the message is sent and journaled with U+FFFD.
- The input history file: corrupt, 100 MB, a FIFO, unwritable, a prompt that is not UTF-8.
"""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
import time

import pytest

from tailrent_tui.core.messages import MessageAdded
from tailrent_tui.store.history import PromptHistory
from tailrent_tui.store.sessions import session_dirs


def _drain(master: int) -> None:
    while select.select([master], [], [], 0)[0]:
        try:
            if not os.read(master, 65536):
                return
        except OSError:
            return


@pytest.mark.fault("bytes are data")
@pytest.mark.parametrize("how", ["typed", pytest.param("bracketed paste", marks=pytest.mark.fault("bracketed pastes"))])
def test_a_byte_that_is_not_utf8_typed_in_the_real_app_is_sent_not_a_crash(tmp_path, how):
    data, ws = tmp_path / "data", tmp_path / "ws"
    ws.mkdir()
    env = {
        **os.environ,
        "TAILRENT_HOME": str(data),
        "TAILRENT_CONFIG_DIR": str(tmp_path / "config"),
        "TAILRENT_FSYNC": "false",
        "TERM": "xterm-256color",
        "COLUMNS": "120",
        "LINES": "40",
    }
    master, child_tty = pty.openpty()
    app = subprocess.Popen(
        [sys.executable, "-m", "tailrent_tui", "--workspace", str(ws), "--model", "mock"],
        stdin=child_tty,
        stdout=child_tty,
        stderr=child_tty,
        close_fds=True,
        env=env,
    )
    os.close(child_tty)
    try:
        deadline = time.monotonic() + 120  # the app's imports are slow on a loaded machine
        while time.monotonic() < deadline and app.poll() is None and not session_dirs(data):
            _drain(master)
            time.sleep(0.05)
        time.sleep(1.0)  # the first frame: the input has the focus
        _drain(master)
        typed = b"note: caf\xe9 and \xff\xfe"
        os.write(master, typed if how == "typed" else b"\x1b[200~" + typed + b"\x1b[201~")
        time.sleep(0.3)
        os.write(master, b"\r")
        sent = None
        while time.monotonic() < deadline and app.poll() is None:
            _drain(master)
            (sd,) = session_dirs(data)
            users = [e.message.content for e in sd.events() if isinstance(e, MessageAdded) and e.message.role == "user"]
            if users:
                sent = users[0]
                break
            time.sleep(0.1)
        assert app.poll() is None, "the app is still running"
        assert sent == "note: caf\ufffd and \ufffd\ufffd"
    finally:
        app.send_signal(signal.SIGTERM)
        try:
            app.wait(timeout=30)
        except subprocess.TimeoutExpired:
            app.kill()
            app.wait(timeout=30)
        os.close(master)


@pytest.mark.fault("input history file")
def test_a_corrupt_history_file_keeps_what_it_can(tmp_path):
    path = tmp_path / "h.jsonl"
    path.write_bytes(b'{"text": "first"}\n\x00\xff garbage\n[1,2]\n{"text": 5}\n{"text": "second"}\n{"te')
    history = PromptHistory(path)
    assert history.entries == ["first", "second"] and history.error is None
    history.append("third")
    assert PromptHistory(path).entries[-1] == "third"


@pytest.mark.fault("input history file")
def test_a_100_mb_history_file_is_read_by_its_end_and_rewritten(tmp_path):
    path = tmp_path / "h.jsonl"
    line = json.dumps({"text": "x" * 1000}) + "\n"
    with path.open("w") as f:
        for _ in range(100_000):  # ~100 MB
            f.write(line)
        f.write(json.dumps({"text": "the newest"}) + "\n")
    started = time.monotonic()
    history = PromptHistory(path, limit=50)
    assert time.monotonic() - started < 5
    assert history.entries[-1] == "the newest" and len(history.entries) <= 50
    history.append("one more")
    assert path.stat().st_size < 200_000, "rewritten to its newest entries"
    assert PromptHistory(path).entries[-2:] == ["the newest", "one more"]


@pytest.mark.fault("input history file")
def test_a_fifo_in_place_of_the_history_never_hangs(tmp_path):
    path = tmp_path / "h.jsonl"
    os.mkfifo(path)
    history = PromptHistory(path)  # before: read_text blocked for ever
    assert history.entries == [] and "not a regular file" in (history.error or "")
    history.append("hello")  # and the append (O_WRONLY on a FIFO with no reader) neither
    assert history.entries == ["hello"]


@pytest.mark.fault("input history file")
def test_an_unwritable_history_is_said_and_the_prompt_still_kept_in_memory(tmp_path):
    folder = tmp_path / "history"
    folder.mkdir()
    path = folder / "h.jsonl"
    path.write_text(json.dumps({"text": "old"}) + "\n")
    path.chmod(0o400)
    try:
        history = PromptHistory(path)
        history.append("new")
        assert history.entries == ["old", "new"]
        if os.geteuid() != 0:  # root writes anyway
            assert history.error and "not saved" in history.error
    finally:
        path.chmod(0o600)


@pytest.mark.fault("input history file")
def test_a_prompt_that_is_not_utf8_is_kept_in_the_history(tmp_path):
    path = tmp_path / "h.jsonl"
    history = PromptHistory(path)
    history.append(os.fsdecode(b"@caf\xe9.txt"))  # before: UnicodeEncodeError took the app down
    assert history.error is None
    assert PromptHistory(path).entries == ["@caf\ufffd.txt"]
