"""Hostile input at the keyboard (issue 27, items 2 and 7): a byte typed or pasted that is not
UTF-8 reaches the real app on a real terminal (a pty): the app stays up, and the message is sent
and journaled with U+FFFD. (The input history file's cases are in tests/store/test_history_faults.py.)
"""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import sys
import time

import pytest

from tailrent_tui.core.messages import MessageAdded
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
