"""Pilot: a fold prepared while you read shows in the Folds panel, and applies at the trigger."""

from __future__ import annotations

import pytest
from ui_helpers import PAD, fill, make_agent, make_app, wait_until

from tailrent_tui.agent.fold_requests import PRE_TRIGGER
from tailrent_tui.models.mock import MockModel
from tailrent_tui.models.summarizer import ModelSummarizer
from tailrent_tui.settings import Settings
from tailrent_tui.ui.widgets.input import PromptInput

SUMMARY = "- the cache on ports 8000 to 8030 was talked over; it looked fine to everyone"


@pytest.fixture(autouse=True)
def config_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TAILRENT_CONFIG_DIR", str(tmp_path / "config"))


async def send(pilot, app, text: str) -> None:
    box = app.query_one(PromptInput)
    box.focus()
    box.value = text
    await pilot.press("enter")


def folds_shown(app) -> str:
    panel = app.sidebar.folds
    return "\n".join(str(panel.get_option_at_index(i).prompt) for i in range(panel.option_count))


async def test_a_fold_prepared_while_you_read_is_shown_and_applied_at_the_trigger(tmp_path):
    agent = make_agent(tmp_path, window=4096, settings=Settings(tokenizer="chars4"))
    await agent.turn("Hello.")  # the server's count (the tool schema) sets the budget's drift
    limit = min(agent.budget.policy_context().settings.trigger_tokens, agent.budget.policy_context().settings.request_limit)
    while agent.session.context_tokens < PRE_TRIGGER * limit:
        fill(agent.session, 1, pad=4)
    writer = MockModel([SUMMARY] * 3)
    agent.fold_requests.summarizer = ModelSummarizer(writer)
    app = make_app(agent)
    async with app.run_test(size=(140, 45)) as pilot:
        # short messages, read one by one, until the next fold's summary is written ahead
        for _ in range(10):
            await send(pilot, app, "A short one.")
            await wait_until(pilot, lambda: not app.screen.running, what="the turn to end")
            for _ in range(20):
                await pilot.pause()
            if "prepared" in folds_shown(app) or agent.session.folds:
                break
        assert not agent.session.folds, "the trigger came before anything was prepared"
        assert "applies at the trigger" in folds_shown(app) and len(writer.requests) == 1
        while not agent.session.folds:
            await send(pilot, app, "And the cache?" + PAD * 8)
            await wait_until(pilot, lambda: not app.screen.running, what="the turn to end")
        assert agent.session.folds[0].summarizer == "model:mock, prepared"
        await wait_until(pilot, lambda: "#1" in folds_shown(app), what="the fold in the panel")
        assert "prepared" not in folds_shown(app).split("#1")[0]
