"""Pilot tests: a fold shown before it applies, edited, cancelled; a fold undone (issue 15, parts 3-4)."""

from __future__ import annotations

import pytest
from textual.widgets import Static, TextArea
from ui_helpers import fill, make_agent, make_app, wait_until

from tailrent_tui.settings import Settings
from tailrent_tui.ui.screens.fold_inspector import FoldInspector
from tailrent_tui.ui.screens.fold_preview import FoldPreview


@pytest.fixture(autouse=True)
def config_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TAILRENT_CONFIG_DIR", str(tmp_path / "config"))


def agent_with_history(tmp_path, **fold):
    agent = make_agent(tmp_path, window=8192, settings=Settings(tokenizer="chars4", fold={"summarizer": "extractive", **fold}))
    fill(agent.session, 12, pad=4)
    return agent


def preview_text(app) -> str:
    return " ".join(str(w.render()) for w in app.screen.query(Static))


async def open_preview(pilot, app):
    await pilot.press("tab")  # to the messages: f folds down to the target
    await pilot.press("f")
    await wait_until(pilot, lambda: isinstance(app.screen, FoldPreview), what="the fold preview")
    return app.screen


async def test_f_opens_a_preview_and_escape_folds_nothing(tmp_path):
    agent = agent_with_history(tmp_path)
    before = [m.id for m in agent.session.messages]
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        preview = await open_preview(pilot, app)
        record = preview.review.record
        text = preview_text(app)
        assert f"{record.tokens_before:,} → {record.tokens_after:,} tokens" in text
        assert f"context {record.context_before:,} → {record.context_after:,} tokens" in text
        assert "the next request re-reads" in text
        assert "port 8000" in text  # the originals are shown
        await pilot.press("escape")
        await wait_until(pilot, lambda: not app.busy, what="the fold to end")
        assert not isinstance(app.screen, FoldPreview)
        assert not agent.session.folds and [m.id for m in agent.session.messages] == before


async def test_enter_applies_the_fold_the_preview_showed(tmp_path):
    agent = agent_with_history(tmp_path)
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        preview = await open_preview(pilot, app)
        shown = preview.review.record
        await pilot.press("enter")
        await wait_until(pilot, lambda: bool(agent.session.folds) and not app.busy, what="the fold")
        assert agent.session.folds[-1] == shown
        assert "#1" in str(app.sidebar.folds.get_option_at_index(0).prompt)


async def test_e_edits_the_summary_and_the_guard_checks_the_edit(tmp_path):
    agent = agent_with_history(tmp_path)
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        await open_preview(pilot, app)
        await pilot.press("e")
        editor = app.screen.query_one("#editor", TextArea)
        assert app.focused is editor
        editor.text = "We went over the cache questions."  # every port and TTL dropped
        await pilot.press("enter")  # a newline in the editor, not "apply"
        assert isinstance(app.screen, FoldPreview) and not agent.session.folds
        await pilot.press("ctrl+s")
        await wait_until(
            pilot,
            lambda: isinstance(app.screen, FoldPreview) and app.screen.review.record.summarizer == "you (edited)",
            what="the edited fold shown again",
        )
        again = app.screen.review.record
        assert "We went over the cache questions." in again.summary.content
        assert again.facts_repaired and not again.facts_lost  # the guard put the dropped facts back
        assert "repaired" in preview_text(app)
        await pilot.press("enter")
        await wait_until(pilot, lambda: bool(agent.session.folds) and not app.busy, what="the edited fold applied")
        assert agent.session.folds[-1].summarizer == "you (edited)"


async def test_unfold_from_the_inspector_and_by_command(tmp_path):
    agent = agent_with_history(tmp_path, preview="never")
    order = [m.id for m in agent.session.messages]
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press("tab", "f")
        await wait_until(pilot, lambda: bool(agent.session.folds) and not app.busy, what="the fold")
        assert [m.id for m in agent.session.messages] != order
        assert await app.session_screen.ladder.inspect(1)
        await wait_until(pilot, lambda: isinstance(app.screen, FoldInspector), what="the inspector")
        await pilot.press("u")
        await wait_until(pilot, lambda: bool(agent.session.unfolded), what="the unfold")
        assert [m.id for m in agent.session.messages] == order
        assert app.transcript.view_of(order[0]) is not None or app.transcript._first_index > 0
        await pilot.pause()
        assert "undone" in str(app.sidebar.folds.get_option_at_index(0).prompt)
        # a second time: a one-line reason
        assert not app.session_screen.ladder.unfold(1)
        await pilot.pause()
        assert any("undone already" in n.message for n in app._notifications), [n.message for n in app._notifications]


async def test_unfold_refuses_when_the_originals_would_pass_the_trigger(tmp_path):
    agent = agent_with_history(tmp_path, preview="never")
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press("tab", "f")
        await wait_until(pilot, lambda: bool(agent.session.folds) and not app.busy, what="the fold")
        trigger = agent.budget.policy_context().settings.trigger_tokens
        back = agent.session.folds[0].tokens_before - agent.session.folds[0].tokens_after
        while agent.session.context_tokens + back <= trigger:  # the context grows near the trigger again
            fill(agent.session, 1, prefix="n", pad=4)
        await pilot.pause()  # the screen has taken the new messages in: the notice below is not left to expire
        assert agent.session.context_tokens <= trigger
        assert not await app.session_screen.run_slash("/unfold 1")
        await pilot.pause()
        assert any("tokens must go first" in n.message for n in app._notifications), [n.message for n in app._notifications]
        assert not agent.session.unfolded
