"""The morning after: a session whose last request is two hours old opens, says its
cache is cold, takes a message and closes cleanly — through the real app loop.

The session is opened and closed by `open_agent`, around the app, as `tailrent` does it
(`launch`): the resume note is written before the app exists.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from tailrent_tui.agent import build as build_mod
from tailrent_tui.agent.build import build_agent
from tailrent_tui.agent.lifecycle import open_agent
from tailrent_tui.core.messages import MessageAdded, Note, UsageRecorded
from tailrent_tui.settings import Settings
from tailrent_tui.store.sessions import SessionDir, SessionLock, last_active
from tailrent_tui.ui.app import TailrentApp
from tailrent_tui.ui.launch import launch
from tests.support.ui_helpers import wait_until

TWO_HOURS = 7200.0
COLD = "past the cache TTL"


@pytest.fixture
def settings(tmp_path: Path, monkeypatch) -> Settings:
    monkeypatch.setenv("TAILRENT_CONFIG_DIR", str(tmp_path / "config"))
    ws = tmp_path / "ws"
    ws.mkdir()
    return Settings(model="mock", data_dir=tmp_path / "data", workspace=ws, fsync=False, price_sheet="local", tokenizer="chars4")


def yesterdays_session(settings: Settings) -> SessionDir:
    """A session on disk whose one request was made two hours ago (the session's clock, injected)."""

    async def yesterday() -> None:
        async with open_agent(settings, async_writer=False, new=True) as agent:
            agent.session.clock = lambda: time.time() - TWO_HOURS
            result = await agent.turn("The API listens on port 8443 because 443 is taken.", None)
            assert result.error is None

    asyncio.run(yesterday())
    sd = last_active(settings.data_dir)
    (usage,) = [e for e in sd.events() if isinstance(e, UsageRecorded)]
    assert time.time() - usage.at > TWO_HOURS - 60
    return sd


def lock_is_free(sd: SessionDir) -> bool:
    """Released cleanly: the flock can be taken and the holder's line was emptied."""
    emptied = sd.lock_path.read_bytes() == b""
    with SessionLock.acquire(sd.lock_path) as lock:
        return emptied and lock.took_over is None


def test_a_resume_past_the_ttl_opens_says_so_takes_a_message_and_releases_the_lock(settings):
    sd = yesterdays_session(settings)

    async def morning() -> None:
        async with open_agent(settings, {"continue_": True}) as agent:  # as `tailrent --continue` opens it
            assert agent.session.id == sd.id and agent.ladder.cold_resume
            notes = [n for n in agent.session.notes if COLD in n.text]
            assert len(notes) == 1 and "2.0 h idle" in notes[0].text, "noted before the app exists (journaled below)"
            app = TailrentApp(agent, settings)
            async with app.run_test(size=(140, 40)) as pilot:
                shown = lambda: [w for w in app.transcript.query(".turn-notice") if COLD in str(w.render())]  # noqa: E731
                await wait_until(pilot, lambda: len(shown()) == 1, what="the cold-cache note in the transcript")
                await pilot.press(*"which port?", "enter")
                await wait_until(pilot, lambda: not app.running and len(agent.session) == 4, what="the reply")
                await pilot.press("ctrl+q")

    asyncio.run(morning())

    assert lock_is_free(sd)
    events = sd.events()
    said = [e.message.content for e in events if isinstance(e, MessageAdded)]
    assert said[0].startswith("The API listens on port 8443") and said[2] == "which port?" and len(said) == 4
    assert sum(isinstance(e, UsageRecorded) for e in events) == 2
    assert sum(isinstance(e, Note) and COLD in e.text for e in events) == 1
    assert sd.read_meta().summary.messages == 4


def test_a_build_that_fails_after_taking_the_lock_releases_it(settings, monkeypatch):
    sd = yesterdays_session(settings)

    def broken(*args, **kwargs):
        raise OSError("the disk went away")

    monkeypatch.setattr(build_mod, "Agent", broken)
    with pytest.raises(OSError, match="disk went away"):
        build_agent(settings, {"continue_": True})
    assert lock_is_free(sd)
    # the cold-cache note written before the failure is on disk, not lost with the build
    assert any(isinstance(e, Note) and COLD in e.text for e in sd.events())


def test_an_app_that_crashes_at_start_releases_the_lock(settings, monkeypatch):
    sd = yesterdays_session(settings)
    real_run = TailrentApp.run_async

    def crash(self) -> None:
        raise RuntimeError("a bug in on_mount")

    monkeypatch.setattr(TailrentApp, "on_mount", crash)
    monkeypatch.setattr(TailrentApp, "run_async", lambda self: real_run(self, headless=True))
    flags = {"continue_": True, **settings.model_dump(include={"model", "data_dir", "workspace", "fsync", "tokenizer"})}
    with pytest.raises(SystemExit) as exited:
        launch(flags)
    assert exited.value.code == 1
    assert lock_is_free(sd)
