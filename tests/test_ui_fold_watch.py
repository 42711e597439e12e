"""Pilot tests: a fold you can watch and interrupt, and a request that shows its time.

The model that writes the summaries is held at a gate (a slow server, held
still), so each test sees the app in the middle of a fold, types into it,
presses escape, then lets the summary through.
"""

from __future__ import annotations

import re

import pytest
from ui_helpers import NOW, PAD, FixedClock, GatedModel, approve_preview, fill, make_agent, make_app, wait_until

from tailrent_tui.core.messages import UsageRecorded
from tailrent_tui.core.rent import RentModel, get_price_sheet
from tailrent_tui.models.errors import ConnectionRefused
from tailrent_tui.models.mock import MockModel
from tailrent_tui.models.summarizer import ModelSummarizer
from tailrent_tui.settings import Settings
from tailrent_tui.ui.widgets.input import PromptInput
from tailrent_tui.ui.widgets.tail_panel import duration

ASK = "Where were we with the cache?" + PAD * 6  # longer than any message `fill` adds


@pytest.fixture(autouse=True)
def config_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TAILRENT_CONFIG_DIR", str(tmp_path / "config"))


def folding_agent(tmp_path, script, summaries=("- the cache is Redis on port 8000",)):
    """An agent one message short of its fold trigger, whose summaries come from a gated model."""
    agent = make_agent(tmp_path, script=script, window=4096, settings=Settings(tokenizer="chars4"))
    trigger = agent.budget.policy_context().settings.trigger_tokens
    while agent.session.context_tokens + agent.session.count(ASK) <= trigger:
        fill(agent.session, 1, pad=4)
    if agent.session.messages[-1].role == "user":
        # every question answered: a session ending on a user's message owes a reply (a crash mid-reply)
        agent.session.add_message(agent.session.make_message("assistant", "Noted."), autopin=False)
    assert agent.session.context_tokens <= trigger
    writer = GatedModel([{"text": t} for t in summaries])
    agent.fold_requests.summarizer = ModelSummarizer(writer)
    return agent, writer.gate


async def send(pilot, app, text: str) -> None:
    box = app.query_one(PromptInput)
    box.focus()
    box.value = text
    await pilot.press("enter")


def shown(app, selector: str) -> list[str]:
    return [str(w.render()) for w in app.transcript.query(selector)]


def notified(app, text: str) -> bool:
    return any(text in n.message for n in app._notifications)


async def wait_seconds(pilot, condition, *, seconds: float = 3.0, what: str) -> None:
    """For what a 1-second timer shows: let real time pass, in short steps, up to `seconds`."""
    for _ in range(int(seconds / 0.05)):
        if condition():
            return
        await pilot.pause(0.05)
    raise AssertionError(f"timed out waiting for: {what}")


async def test_a_fold_shows_its_status_and_pending_row_and_what_is_sent_meanwhile_waits(tmp_path):
    agent, gate = folding_agent(tmp_path, [{"text": "First reply."}, {"text": "Second reply."}])
    clock = FixedClock()
    app = make_app(agent, clock=clock)
    async with app.run_test(size=(140, 40)) as pilot:
        await send(pilot, app, ASK)
        await wait_until(pilot, lambda: app.transcript.fold_status is not None, what="the fold's status line")
        status = app.transcript.fold_status
        assert re.fullmatch(r"folding \d+ messages \([\d,]+ tokens\) — 0:00, escape cancels", str(status.render()))
        await wait_until(pilot, lambda: status.region.height > 0, what="the status line on screen")
        folds = app.sidebar.folds
        assert "pending" in str(folds.get_option_at_index(folds.option_count - 1).prompt)
        clock.now += 12
        await wait_seconds(pilot, lambda: "— 0:12," in str(status.render()), what="the timer at 0:12")

        # the input stays usable: what is sent now waits for the fold and the reply
        await send(pilot, app, "and the ports?")
        assert app.query_one(PromptInput).value == ""
        assert shown(app, ".queued") == ["queued, sent after the fold and the reply: and the ports?"]
        assert [m.content for m in agent.session.messages if m.role == "user"][-1] == ASK

        gate.set()
        await wait_until(
            pilot, lambda: not app.busy and agent.session.messages[-1].content == "Second reply.", what="both replies"
        )
        assert agent.session.folds and all(f.summarizer == "model:mock" for f in agent.session.folds)
        assert app.transcript.fold_status is None and not app.transcript.query(".fold-status")
        assert not app.transcript.query(".queued")
        assert all("pending" not in str(folds.get_option_at_index(i).prompt) for i in range(folds.option_count))
        users = [m.content for m in agent.session.messages if m.role == "user"]
        assert users[-2:] == [ASK, "and the ports?"]


@pytest.mark.parametrize("retry", ["ctrl+r", "/retry"])
async def test_escape_cancels_the_fold_gives_back_what_waited_and_retry_sends_the_message(tmp_path, retry):
    agent, gate = folding_agent(tmp_path, [{"text": "The reply."}])
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        await send(pilot, app, ASK)
        await wait_until(pilot, lambda: app.transcript.fold_status is not None, what="the fold's status line")
        await send(pilot, app, "and the ports?")
        await pilot.press("escape", "escape")  # twice: the second must not cut the first one's cleanup short
        await wait_until(pilot, lambda: not app.busy, what="the turn cancelled")
        assert not agent.session.folds
        assert agent.session.messages[-1].content == ASK
        assert app.query_one(PromptInput).value == "and the ports?"
        assert not app.transcript.query(".queued") and app.transcript.fold_status is None
        notices = shown(app, ".turn-notice")
        assert "fold cancelled: nothing was folded" in notices
        assert "your message is kept: ctrl+r or /retry sends it" in notices
        assert app.session_screen.retry_pending

        gate.set()
        if retry == "ctrl+r":
            await pilot.press("ctrl+r")
        else:
            await send(pilot, app, "/retry")
        await wait_until(
            pilot, lambda: not app.busy and agent.session.messages[-1].content == "The reply.", what="the retried turn"
        )
        assert agent.session.folds and not notified(app, "nothing to retry")
        assert [m.content for m in agent.session.messages if m.role == "user"].count(ASK) == 1


async def test_a_fold_by_hand_can_be_cancelled_and_a_message_waits_for_the_next_one(tmp_path):
    agent, gate = folding_agent(tmp_path, [{"text": "The reply."}])
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press("tab")  # to the messages: f folds the oldest span down to the target
        await pilot.press("f")
        await wait_until(pilot, lambda: app.transcript.fold_status is not None, what="the fold's status line")
        await pilot.press("f")  # a second plan must not run beside the first
        assert notified(app, "a reply or a fold is running")
        await pilot.press("escape")
        await wait_until(pilot, lambda: not app.busy and app.transcript.fold_status is None, what="the fold cancelled")
        assert not agent.session.folds and not app.session_screen.retry_pending
        assert "fold cancelled: nothing was folded" in shown(app, ".turn-notice")

        await pilot.press("f")
        await wait_until(pilot, lambda: app.transcript.fold_status is not None, what="the second fold")
        await send(pilot, app, "and now?")
        assert shown(app, ".queued") == ["queued, sent when the fold ends: and now?"]
        assert agent.session.messages[-1].content != "and now?"
        gate.set()
        await approve_preview(pilot, app)
        await wait_until(
            pilot,
            lambda: not app.busy and agent.session.messages[-1].content == "The reply.",
            what="the message sent after the fold",
        )
        assert agent.session.folds
        assert agent.session.messages[-2].content == "and now?"


class DyingModel(MockModel):
    """A server that stops answering (every request refused) until `dead` is False again."""

    dead = True

    async def stream(self, messages, **kwargs):
        if self.dead:
            raise ConnectionRefused("nothing answers at http://127.0.0.1:8080", "is the server running?")
        async for chunk in super().stream(messages, **kwargs):
            yield chunk


async def test_the_server_dies_during_a_fold_the_fold_falls_back_and_the_message_is_kept(tmp_path):
    agent, _ = folding_agent(tmp_path, [])
    agent.model = DyingModel([{"text": "Back again."}], chunk_size=4)
    agent.fold_requests.summarizer = ModelSummarizer(agent.model)
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        await send(pilot, app, ASK)
        await wait_until(pilot, lambda: app.session_screen.retry_pending, what="the turn's error")
        assert agent.session.folds
        for fold in agent.session.folds:
            assert fold.summarizer != "model:mock" and "could not summarize" in (fold.rejected or "")
        reasons = [n for n in shown(app, ".turn-notice") if n.startswith("fold #")]
        assert len(reasons) == len(agent.session.folds)
        assert all("nothing answers at http://127.0.0.1:8080" in r and "\n" not in r for r in reasons)
        assert "Your message is kept" in shown(app, ".turn-error")[0]
        assert agent.session.messages[-1].content == ASK
        agent.model.dead = False
        await pilot.press("ctrl+r")
        await wait_until(
            pilot, lambda: not app.busy and agent.session.messages[-1].content == "Back again.", what="the retried reply"
        )


async def test_the_reply_counts_its_time_and_says_how_long_the_prompt_takes_to_read(tmp_path):
    agent = make_agent(tmp_path, rent=RentModel(get_price_sheet("local")))
    model = agent.model = GatedModel([{"text": "Done reading."}, {"text": "Read faster."}], chunk_size=4)
    fill(agent.session, 6, pad=4)
    clock = FixedClock()
    app = make_app(agent, clock=clock)
    async with app.run_test(size=(140, 40)) as pilot:
        # no request measured yet: the tokens to read, and no guess of the time
        await send(pilot, app, "first")
        await wait_until(pilot, lambda: app.transcript.reply is not None, what="the reply's status line")
        head = app.transcript.reply.query_one(".head")
        assert re.fullmatch(r"assistant · 0:00 · reading [\d,]+ prompt tokens · escape cancels", str(head.render()))
        clock.now += 7
        await wait_seconds(pilot, lambda: "assistant · 0:07 · reading" in str(head.render()), what="the timer at 0:07")
        model.gate.set()
        await wait_until(pilot, lambda: not app.busy, what="the first reply")
        model.gate.clear()

        # the server measured 1,000 tokens read in 2 s: 500 tokens a second
        agent.session.emit(
            UsageRecorded(request_no=2, context_tokens=1000, evaluated_tokens=1000, prompt_ms=2000.0, model="mock", at=NOW)
        )
        await send(pilot, app, "second")
        await wait_until(pilot, lambda: app.transcript.reply is not None, what="the second reply's status line")
        text = str(app.transcript.reply.query_one(".head").render())
        match = re.fullmatch(
            r"assistant · 0:00 · reading ([\d,]+) prompt tokens \(~(.+) at the measured rate\) · "
            r"escape cancels",
            text,
        )
        assert match, text
        assert match[2] == duration(int(match[1].replace(",", "")) / 500)
        model.gate.set()
        await wait_until(
            pilot, lambda: not app.busy and agent.session.messages[-1].content == "Read faster.", what="the second reply"
        )
        assert "streaming" not in str(app.transcript.view_of(agent.session.messages[-1].id).query_one(".head").render())
