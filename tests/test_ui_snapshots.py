"""Snapshots of the main screen, the fold inspector and the spill viewer, in the three shipped themes.

The session is built with fixed ids, a fixed clock and fixed spill ids, and
the time zone is UTC, so every run draws the same screen.
"""

from __future__ import annotations

import time

import pytest
from folds import fold_span
from ui_helpers import NOW, fill, make_agent, make_app

from tailrent_tui.core.messages import UsageRecorded
from tailrent_tui.core.summarize import LossySummarizer
from tailrent_tui.settings import Settings

THEMES = ["tailrent-dark", "tailrent-light", "tailrent-contrast"]
SIZE = (140, 40)


@pytest.fixture(autouse=True)
def stable(tmp_path, monkeypatch):
    monkeypatch.setenv("TAILRENT_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def scene(tmp_path, theme: str):
    settings = Settings(theme=theme, fold={"guard": "report"}, tokenizer="chars4", tools={"spill_threshold": 200})
    ids = iter(f"00000000-0000-4000-8000-{n:012d}" for n in range(1, 100))
    agent = make_agent(tmp_path, settings=settings, window=4096, spill_ids=lambda: next(ids))
    s = agent.session
    fill(s, 10, tool_every=5, big=300)
    s.add_message(
        s.make_message(
            "user", "DECISION: refresh tokens live in Redis with a 15 minute TTL, because the mobile client cannot persist them."
        ),
        autopin=False,
    )
    decision = s.messages[-1].id
    agent.ladder.pin(decision)
    agent.ladder.spill("m00004")
    fold_span(s, ["m00001", "m00002", "m00003"], summarizer=LossySummarizer(5), guard="report", archive=agent.archive)
    s.emit(
        UsageRecorded(
            request_no=1,
            context_tokens=s.context_tokens,
            predicted_cached=120,
            predicted_evaluated=310,
            prompt_tokens=s.context_tokens + 12,
            cached_tokens=118,
            evaluated_tokens=314,
            output_tokens=40,
            prompt_ms=628.0,
            model="mock",
            at=NOW,
        )
    )
    s.emit(
        UsageRecorded(
            request_no=2,
            context_tokens=420,
            predicted_evaluated=420,
            evaluated_tokens=431,
            output_tokens=60,
            prompt_ms=862.0,
            model="mock",
            purpose="summary",
            at=NOW,
        )
    )
    app = make_app(agent)
    return app, agent


async def settle(pilot) -> None:
    pilot.app.query_one("PromptInput").cursor_blink = False
    for _ in range(5):
        await pilot.pause()


@pytest.mark.parametrize("theme", THEMES)
def test_main_screen(snap_compare, tmp_path, theme):
    app, _ = scene(tmp_path, theme)
    assert snap_compare(app, terminal_size=SIZE, run_before=settle)


@pytest.mark.parametrize("theme", THEMES)
def test_fold_inspector(snap_compare, tmp_path, theme):
    app, _ = scene(tmp_path, theme)

    async def open_inspector(pilot):
        await settle(pilot)
        assert await pilot.app.inspect(1)
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=open_inspector)


@pytest.mark.parametrize("theme", THEMES)
def test_spill_viewer(snap_compare, tmp_path, theme):
    app, agent = scene(tmp_path, theme)
    spill_id = next(iter(agent.session.spills))

    async def open_viewer(pilot):
        await settle(pilot)
        assert await pilot.app.open_spill(spill_id)
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=open_viewer)


@pytest.mark.parametrize("theme", THEMES)
def test_fold_preview(snap_compare, tmp_path, theme):
    """A fold by hand shown before it applies: originals, proposed summary, facts, tokens, re-read cost."""
    app, agent = scene(tmp_path, theme)
    fill(agent.session, 6, prefix="p", pad=3)
    span = [m.id for m in agent.session.messages[-6:-2]]

    async def open_preview(pilot):
        await settle(pilot)
        assert pilot.app.start_fold(span)
        from tailrent_tui.ui.screens.fold_preview import FoldPreview

        for _ in range(200):
            if isinstance(pilot.app.screen, FoldPreview):
                break
            await pilot.pause()
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=open_preview)


def test_editor_with_a_multi_line_paste_and_a_chip(snap_compare, tmp_path):
    """The input grows with a pasted snippet; a big paste beside it is a chip; `/` offers commands above."""
    from textual import events

    app, _ = scene(tmp_path, "tailrent-dark")

    async def paste(pilot):
        await settle(pilot)
        box = pilot.app.prompt
        await pilot.press(*"why does this fail?", "shift+enter")
        box.post_message(events.Paste("def f():\n    return 1\n\nprint(f())\n"))
        await pilot.pause()
        box.post_message(events.Paste("\n".join(f"log line {i}" for i in range(212))))
        await settle(pilot)

    assert snap_compare(app, terminal_size=SIZE, run_before=paste)


@pytest.mark.parametrize("theme", THEMES)
def test_narrow_screen(snap_compare, tmp_path, theme):
    """80x24: the sidebar hides itself; the selected message shows its id, the input says navigation."""
    app, _ = scene(tmp_path, theme)

    async def navigate(pilot):
        await settle(pilot)
        await pilot.press("tab", "up")  # the message above the decision: a stable id
        await settle(pilot)

    assert snap_compare(app, terminal_size=(80, 24), run_before=navigate)
