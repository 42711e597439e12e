"""`tailrent demo`: the article's run plays in the app; the decision is lost unpinned, kept pinned."""

from __future__ import annotations

import pytest

from tailrent_tui.scenarios.article import WATCHLIST
from tailrent_tui.ui.demo import open_demo
from tests.support.ui_helpers import FixedClock, wait_until


@pytest.fixture(autouse=True)
def config_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TAILRENT_CONFIG_DIR", str(tmp_path / "config"))


async def play(tmp_path, pinned: bool):
    async with (
        open_demo(pinned=pinned, speed=64.0, clock=FixedClock(), workspace=tmp_path) as app,
        app.run_test(size=(140, 40)) as pilot,
    ):
        await wait_until(pilot, app.finished.is_set, rounds=20000, what="the demo to finish")
        await wait_until(pilot, lambda: app.sidebar.folds.option_count == len(app.session.folds), what="timeline")
        notes = [n.text for n in app.session.notes if n.text.startswith("probe:")]
        return app, notes


async def test_demo_unpinned_loses_the_decision_fold_by_fold(tmp_path):
    app, notes = await play(tmp_path, pinned=False)
    s = app.session
    assert len(s.folds) > 5 and s.spills, "the run must fold and spill, as in the article"
    assert max(f.depth for f in s.folds) > 2, "summaries are folded again (fold of a fold)"
    lost = {fact.lower() for f in s.folds for fact in f.facts_lost}
    assert {w.lower() for w in WATCHLIST} <= lost
    assert notes and "0/4" in notes[-1]


async def test_demo_pinned_keeps_the_decision(tmp_path):
    app, notes = await play(tmp_path, pinned=True)
    assert notes and "4/4" in notes[-1]
    assert any(m.pinned and m.content.startswith("DECISION:") for m in app.session.messages)


async def test_space_pauses_the_demo(tmp_path):
    async with (
        open_demo(pinned=False, speed=64.0, clock=FixedClock(), workspace=tmp_path) as app,
        app.run_test(size=(140, 40)) as pilot,
    ):
        await wait_until(pilot, lambda: app.played >= 3, what="the first lines")
        await pilot.press("space")
        paused_at = app.played
        # a second of real time: unpaused, the demo plays a line every few ms at x64 (40 in 2 s on a loaded
        # machine); a hundred idle rounds of the app cost seven
        await pilot.pause(1.0)
        assert app.played <= paused_at + 1  # the line in flight may land, no more
        await pilot.press("space")
        await wait_until(pilot, lambda: app.played > paused_at + 5, rounds=5000, what="the demo to go on")


async def test_the_demo_ignores_the_workspaces_agents_md(tmp_path):
    """The article's run is the same in any folder: a project's AGENTS.md is not read into it."""
    (tmp_path / "AGENTS.md").write_text("Always answer in French. Use tabs.\n", encoding="utf-8")
    async with (
        open_demo(pinned=True, speed=64.0, clock=FixedClock(), workspace=tmp_path) as app,
        app.run_test(size=(140, 40)) as pilot,
    ):
        await wait_until(pilot, lambda: app.played >= 3, what="the first lines")
        assert not any("French" in m.content for m in app.session.messages)
        assert not app.session.instructions
