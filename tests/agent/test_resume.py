"""Resuming a session: within the cache TTL the prefix is still cached; past it,
the rent model counts the whole prefix as rewritten (issue 3, item 5)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tailrent_tui.agent import build as build_mod
from tailrent_tui.agent.build import build_agent
from tailrent_tui.agent.lifecycle import open_agent
from tailrent_tui.settings import Settings


@pytest.fixture
def settings(tmp_path: Path, monkeypatch) -> Settings:
    monkeypatch.setenv("TAILRENT_CONFIG_DIR", str(tmp_path / "config"))
    ws = tmp_path / "ws"
    ws.mkdir()
    # the local sheet: its TTL is the keep_alive the app sends (30 minutes)
    return Settings(model="mock", data_dir=tmp_path / "data", workspace=ws, fsync=False, price_sheet="local")


async def _first_turn(settings: Settings) -> None:
    async with open_agent(settings, async_writer=False, new=True) as agent:
        for text in ("first question about the cache", "second question about the queue"):
            result = await agent.turn(text, None)
            assert result.error is None


async def _resume_and_ask(settings: Settings, monkeypatch, seconds_later: float):
    real = time.time
    monkeypatch.setattr(build_mod.time, "time", lambda: real() + seconds_later)
    agent = build_agent(settings, {"continue_": True}, async_writer=False)
    monkeypatch.setattr(build_mod.time, "time", real)
    try:
        # the session's clock is the agent's for the rent's TTL check
        agent.session.clock = lambda: real() + seconds_later
        result = await agent.turn("and now?", None)
        assert result.error is None
        return agent, agent.session.usage[-1]
    finally:
        await agent.model.aclose()
        await agent.aclose()


async def test_resume_within_the_ttl_keeps_the_prefix_cached(settings, monkeypatch):
    await _first_turn(settings)
    agent, usage = await _resume_and_ask(settings, monkeypatch, 0)
    assert usage.predicted_cached > 0
    assert usage.predicted_evaluated < usage.context_tokens
    assert not any("past the cache TTL" in n.text for n in agent.session.notes)


async def test_resume_past_the_ttl_rewrites_the_whole_prefix(settings, monkeypatch):
    await _first_turn(settings)
    agent, usage = await _resume_and_ask(settings, monkeypatch, 31 * 60)
    assert usage.predicted_cached == 0
    assert usage.predicted_evaluated == usage.context_tokens
    assert any("past the cache TTL" in n.text for n in agent.session.notes)
