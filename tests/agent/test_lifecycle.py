"""`open_agent`: one lifecycle, closed on every exit path (issue 24 item 2, issue 26 item 11).

Each way out of the block leaves the session closed as quitting does: the journal
flushed and closed, meta.json written (its listing summary), the lock released, the
model's client and the embedded engine stopped, and what could not be saved said with
the rescue file that holds it. The ways out: the block returns; an exception in the
turn; ctrl+c and SIGTERM through `tailrent ask` (a real process, its turn stalled on a
fake Ollama); SIGTERM and SIGHUP to the real app on a terminal (a pty); a full disk at
close; an embedded engine that will not stop.
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import pty
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tailrent_tui.agent.closing import CloseLine
from tailrent_tui.agent.lifecycle import Signalled, open_agent
from tailrent_tui.core.messages import MessageAdded
from tailrent_tui.models import embedded as embedded_mod
from tailrent_tui.models.embedded import EmbeddedModel
from tailrent_tui.settings import Settings
from tailrent_tui.store.sessions import SessionDir, SessionLock, session_dirs
from tests.support.fake_ollama import Reply, fake_ollama  # noqa: F401


@pytest.fixture
def settings(tmp_path: Path, monkeypatch) -> Settings:
    monkeypatch.setenv("TAILRENT_CONFIG_DIR", str(tmp_path / "config"))
    ws = tmp_path / "ws"
    ws.mkdir()
    return Settings(model="mock", data_dir=tmp_path / "data", workspace=ws, fsync=False, tokenizer="chars4")


def closed_cleanly(sd: SessionDir) -> bool:
    """The lock was released by its holder (emptied, no stale take-over) and can be taken."""
    emptied = sd.lock_path.read_bytes() == b""
    with SessionLock.acquire(sd.lock_path) as lock:
        return emptied and lock.took_over is None


def users(sd: SessionDir) -> list[str]:
    return [e.message.content for e in sd.events() if isinstance(e, MessageAdded) and e.message.role == "user"]


async def test_the_block_returning_saves_the_session_writes_meta_and_releases_the_lock(settings):
    said: list[CloseLine] = []
    async with open_agent(settings, new=True, say=said.append) as agent:
        result = await agent.turn("Where do refresh tokens live?")
        assert result.error is None
        sd = agent.opened.session_dir
        assert not closed_cleanly_now(sd), "held while the block runs"
    assert closed_cleanly(sd)
    assert sd.read_meta().summary is not None and sd.read_meta().summary.messages == 2
    assert agent.closing is not None and agent.closing.report.saved and agent.closing.signal is None
    assert said == []  # nothing went wrong: nothing to say


def closed_cleanly_now(sd: SessionDir) -> bool:
    try:
        with SessionLock.acquire(sd.lock_path):
            return True
    except RuntimeError:
        return False


async def test_an_exception_in_the_turn_still_closes_the_session(settings):
    async def broken(*args, **kwargs):
        raise RuntimeError("a bug in the model client")
        yield  # an async generator, as `stream` is

    with pytest.raises(RuntimeError, match="a bug in the model client"):
        async with open_agent(settings, new=True) as agent:
            agent.model.stream = broken  # type: ignore[method-assign]
            await agent.turn("This message is kept.")
    sd = agent.opened.session_dir
    assert closed_cleanly(sd)
    assert users(sd) == ["This message is kept."]
    assert sd.read_meta().summary.messages == 1


async def test_sigterm_inside_the_block_closes_then_raises_signalled(settings):
    with pytest.raises(Signalled) as stopped:
        async with open_agent(settings, new=True) as agent:
            agent.session.add("user", "Written before the signal.")
            os.kill(os.getpid(), signal.SIGTERM)
            await asyncio.sleep(60)  # cancelled by the signal's close
    assert stopped.value.exit_code == 128 + signal.SIGTERM
    sd = agent.opened.session_dir
    assert closed_cleanly(sd) and agent.closing.signal == "SIGTERM"
    assert users(sd) == ["Written before the signal."] and sd.read_meta().summary.messages == 1


async def test_a_signal_asks_the_hook_first_and_the_block_ends_by_itself(settings):
    asked: list[str] = []
    done = asyncio.Event()
    with pytest.raises(Signalled):
        async with open_agent(settings, new=True) as agent:
            agent.session.add("user", "The app quits by itself.")
            agent.on_signal = lambda name: (asked.append(name), done.set())
            os.kill(os.getpid(), signal.SIGHUP)
            await asyncio.wait_for(done.wait(), 60)
    assert asked == ["SIGHUP"] and agent.closing.signal == "SIGHUP"
    assert closed_cleanly(agent.opened.session_dir)


async def test_a_full_disk_at_close_keeps_the_lines_in_a_rescue_file_and_says_where(settings, monkeypatch):
    said: list[CloseLine] = []
    async with open_agent(settings, new=True, say=said.append) as agent:
        writer = agent.journal

        def no_space(*args, **kwargs):
            raise OSError(errno.ENOSPC, "No space left on device")

        await writer.drain()
        # from here the journal's writes fail as a full disk fails them
        monkeypatch.setattr(writer, "_write_bytes", no_space)
        agent.session.add("user", "Written when the disk was full.")
    sd = agent.opened.session_dir
    report = agent.closing.report
    assert not report.saved and report.rescue is not None and report.rescue.saved
    rescue = Path(report.rescue.path)
    assert "Written when the disk was full." in rescue.read_text()
    (line,) = [line for line in said if line.about == "journal"]
    assert line.level == "error" and str(rescue) in line.text
    assert closed_cleanly(sd)


class StuckEngine:
    """An engine whose stop never returns (until the test lets it)."""

    def __init__(self) -> None:
        self.released = threading.Event()
        self.asked = threading.Event()

    running = True

    def stop(self) -> None:
        self.asked.set()
        self.released.wait()


async def test_an_engine_that_will_not_stop_is_said_and_the_session_is_closed_all_the_same(settings, monkeypatch):
    monkeypatch.setattr(embedded_mod, "ENGINE_STOP_SECONDS", 0.2)
    stuck = StuckEngine()
    said: list[CloseLine] = []
    try:
        async with open_agent(settings.model_copy(update={"model": "embedded"}), new=True, say=said.append) as agent:
            assert isinstance(agent.model, EmbeddedModel)
            agent.model.engine = stuck  # type: ignore[assignment]
            agent.session.add("user", "Kept, though the engine hangs.")
        assert stuck.asked.is_set()
        (line,) = [line for line in said if line.about == "model"]
        assert "did not stop within 0.2 s" in line.text and line.level == "warning"
        sd = agent.opened.session_dir
        assert closed_cleanly(sd) and users(sd) == ["Kept, though the engine hangs."]
        assert sd.read_meta().summary.messages == 1
    finally:
        stuck.released.set()


# -- real processes: `tailrent ask` and the app, stopped by a signal -----------------------------------


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "TAILRENT_HOME": str(tmp_path / "data"),
        "TAILRENT_CONFIG_DIR": str(tmp_path / "config"),
        "TAILRENT_FSYNC": "false",
        "TAILRENT_TOKENIZER": "chars4",
        **extra,
    }


def _wait_for(what: str, check, proc: subprocess.Popen, seconds: float = 120.0, drain: int | None = None) -> None:
    deadline = time.monotonic() + seconds  # the imports are slow on a loaded machine
    while time.monotonic() < deadline:
        if drain is not None:
            _drain(drain)
        if check():
            return
        assert proc.poll() is None, f"exited early waiting for {what}"
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _drain(master: int) -> None:
    while select.select([master], [], [], 0)[0]:
        try:
            if not os.read(master, 65536):
                return
        except OSError:
            return


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 1), (signal.SIGTERM, 128 + signal.SIGTERM)])
def test_ask_stopped_mid_reply_closes_the_session_as_quitting_does(tmp_path, fake_ollama, signum, code):
    fake_ollama.push(Reply(fault="stall"))
    ws = tmp_path / "ws"
    ws.mkdir()
    env = _env(tmp_path, OLLAMA_HOST=fake_ollama.url)
    cmd = [
        sys.executable,
        "-m",
        "tailrent_tui",
        "--workspace",
        str(ws),
        "ask",
        "--model",
        "ollama:llama3.2:latest",
        "--json",
        "A question that waits.",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        _wait_for("the stalled reply", lambda: bool(fake_ollama.requests), proc)
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code, err
    assert "Traceback" not in err
    (sd,) = session_dirs(tmp_path / "data")
    assert closed_cleanly(sd)
    # meta.json's listing counts what the journal holds (the message, and a reply cut short if one began)
    assert users(sd) == ["A question that waits."]
    assert sd.read_meta().summary.messages == sum(isinstance(e, MessageAdded) for e in sd.events())
    assert f"Your message is kept in session {sd.id}" in err
    if signum == signal.SIGTERM:
        assert json.loads(out)["error"]["message"] == "stopped by SIGTERM"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_the_app_closes_its_session_on_sigterm_and_sighup(tmp_path, signum):
    ws = tmp_path / "ws"
    ws.mkdir()
    env = _env(tmp_path, TERM="xterm-256color", COLUMNS="120", LINES="40")
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
    data = tmp_path / "data"
    try:
        _wait_for("the session", lambda: bool(session_dirs(data)), app, drain=master)
        time.sleep(1.0)  # the first frame: the input has the focus
        _drain(master)
        os.write(master, b"a message before the signal\r")
        (sd,) = session_dirs(data)
        _wait_for("the reply", lambda: len([e for e in sd.events() if isinstance(e, MessageAdded)]) == 2, app, drain=master)
        app.send_signal(signum)
        deadline = time.monotonic() + 60
        while app.poll() is None and time.monotonic() < deadline:
            _drain(master)
            time.sleep(0.05)
        assert app.poll() == 128 + signum
    finally:
        if app.poll() is None:
            app.kill()
            app.wait(timeout=30)
        os.close(master)
    assert closed_cleanly(sd)
    assert users(sd) == ["a message before the signal"]
    assert sd.read_meta().summary.messages == 2
