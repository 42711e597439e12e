"""Ollama keeps the model warm (keep_alive) and loads it before a resumed session's first
request (issue 14, item 2), against the fake Ollama on loopback."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tailrent_tui.agent.build import build_agent
from tailrent_tui.agent.lifecycle import open_agent
from tailrent_tui.models import ModelNotFound, OllamaModel
from tailrent_tui.models.ollama import DEFAULT_KEEP_ALIVE
from tailrent_tui.settings import (
    Settings,
    SettingsError,
    keep_alive_seconds,
    load_settings,
    ollama_keep_alive,
)
from tailrent_tui.ui.app import TailrentApp
from tests.support.fake_ollama import FakeModel, FakeOllama, fake_ollama  # noqa: F401
from tests.support.ui_helpers import wait_until

MODEL = "llama3.2:latest"


def test_the_default_keep_alive_is_a_day_and_the_client_agrees():
    assert Settings().keep_alive == "24h" == DEFAULT_KEEP_ALIVE
    assert keep_alive_seconds("24h") == 86400


@pytest.mark.parametrize(
    ("given", "sent", "seconds"),
    [("30m", "30m", 1800), ("1h30m", "1h30m", 5400), ("3600", 3600, 3600), (7200, 7200, 7200), ("-1", -1, math.inf), ("0", 0, 0)],
)
def test_keep_alive_is_sent_as_ollama_reads_it(given, sent, seconds):
    assert ollama_keep_alive(given) == sent
    assert keep_alive_seconds(sent) == seconds


def test_a_keep_alive_that_is_not_a_duration_names_the_key_and_its_source(tmp_path, monkeypatch):
    monkeypatch.setenv("TAILRENT_CONFIG_DIR", str(tmp_path))
    monkeypatch.setenv("TAILRENT_KEEP_ALIVE", "30 minutes")
    with pytest.raises(SettingsError, match=r"\$TAILRENT_KEEP_ALIVE: keep_alive: '30 minutes' is not a duration"):
        load_settings()
    monkeypatch.setenv("TAILRENT_KEEP_ALIVE", "-1")
    assert load_settings()[0].keep_alive == -1


async def test_preload_loads_with_the_window_and_keep_alive_the_turns_send(fake_ollama):
    model = OllamaModel(MODEL, host=fake_ollama.url, num_ctx=16384, keep_alive="2h")
    try:
        seconds = await model.preload()
    finally:
        await model.aclose()
    (body,) = fake_ollama.loads
    assert body == {"model": MODEL, "messages": [], "stream": False, "options": {"num_ctx": 16384}, "keep_alive": "2h"}
    assert seconds >= 0
    # Ollama lists the model as loaded, with that window
    assert fake_ollama._loaded[MODEL] == 16384


async def test_preload_of_a_model_not_pulled_is_a_one_line_error(fake_ollama):
    model = OllamaModel("qwen3:8b", host=fake_ollama.url)
    try:
        with pytest.raises(ModelNotFound) as caught:
            await model.preload(num_ctx=8192)
    finally:
        await model.aclose()
    assert "\n" not in str(caught.value) and not fake_ollama.loads


@pytest.fixture
def ollama_settings(fake_ollama, tmp_path: Path, monkeypatch):
    monkeypatch.setenv("TAILRENT_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("OLLAMA_HOST", fake_ollama.url)
    ws = tmp_path / "ws"
    ws.mkdir()
    return Settings(
        model=f"ollama:{MODEL}",
        data_dir=tmp_path / "data",
        workspace=ws,
        fsync=False,
        tokenizer="chars4",
        price_sheet="local",
        keep_alive="6h",
    )


async def _one_turn(settings: Settings) -> None:
    async with open_agent(settings, async_writer=False, new=True) as agent:
        assert (await agent.turn("where do refresh tokens live?", None)).error is None


async def test_a_new_session_does_not_preload_a_resumed_one_does(fake_ollama, ollama_settings):
    async with open_agent(ollama_settings, async_writer=False, new=True) as agent:
        # the local sheet's TTL is the keep_alive the app sends
        assert agent.rent.sheet.ttl_seconds == 6 * 3600
        await agent.link.start()
        assert not fake_ollama.loads and agent.link.preload_seconds is None
        assert (await agent.turn("where do refresh tokens live?", None)).error is None

    async with open_agent(ollama_settings, {"continue_": True}, async_writer=False) as resumed:
        assert resumed.link.will_preload()
        await resumed.link.start()
        (load,) = fake_ollama.loads
        # the window and keep_alive of the turns: no second load at the first request
        assert load["options"]["num_ctx"] == resumed.session.window and load["keep_alive"] == "6h"
        assert resumed.link.preload_seconds is not None
        assert (await resumed.turn("and for how long?", None)).error is None
        assert fake_ollama.requests[-1]["options"]["num_ctx"] == load["options"]["num_ctx"]


async def test_the_app_shows_the_load_of_a_resumed_model_then_how_long_it_took(fake_ollama, ollama_settings):
    await _one_turn(ollama_settings)
    fake_ollama.load_seconds = 0.6
    agent = build_agent(ollama_settings, {"continue_": True})
    app = TailrentApp(agent, ollama_settings)
    notes: list[str] = []
    try:
        async with app.run_test(size=(140, 40)) as pilot:
            app.notify = lambda message, **kw: notes.append(str(message))  # type: ignore[method-assign]
            await wait_until(pilot, lambda: "loading llama3.2:latest…" in app.sub_title, what="the loading status")
            await wait_until(pilot, lambda: any("loaded in" in n for n in notes), rounds=2000, what="the loaded notice")
            assert "model llama3.2:latest" in app.sub_title and "loading" not in app.sub_title
            assert len(fake_ollama.loads) == 1 and agent.link.preload_seconds >= 0.6
    finally:
        await agent.aclose()


async def test_a_failed_preload_is_noted_and_the_app_opens_anyway(fake_ollama, ollama_settings):
    await _one_turn(ollama_settings)
    del fake_ollama.models[MODEL]  # removed from the server since yesterday
    async with open_agent(ollama_settings, {"continue_": True}, async_writer=False) as agent:
        assert await agent.link.preload() is None
        note = agent.session.notes[-1]
        assert note.level == "warning" and "could not load llama3.2:latest before the first request" in note.text
        assert "\n" not in note.text
