"""A resume after the cache expired folds deeper (`resume_fold_target`): the whole prefix is
paid for again anyway, so the first request of the morning carries pins, a summary and the
last exchange, not yesterday's whole tail — through the policy, and through the real app.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from test_resume_cold import settings  # noqa: F401 (the fixture app_settings builds on)
from ui_helpers import wait_until

from tailrent_tui.agent.lifecycle import open_agent
from tailrent_tui.agent.loop import Agent
from tailrent_tui.core.messages import Folded, Kind
from tailrent_tui.core.policies import RESUME_FOLD_TARGET, PolicyContext, PolicySettings, get_policy, run_plan
from tailrent_tui.core.rungs.spill import MemorySpillStore
from tailrent_tui.core.session import Session
from tailrent_tui.core.summarize import LossySummarizer
from tailrent_tui.core.tokens import get_counter
from tailrent_tui.settings import Settings
from tailrent_tui.store.sessions import last_active
from tailrent_tui.ui.app import TailrentApp
from tailrent_tui.ui.widgets.tail_panel import keep_warm_lines

# where folds go and what they cost the engine: the filler is the user's, which the ledger would keep
pytestmark = pytest.mark.no_ledger

TWO_HOURS = 7200.0
WINDOW = 4096
APP_WINDOW = 16384  # its 15% is above the head (system prompt and tool schemas), which no fold can take
DECISION = "DECISION: keep the refresh-token TTL at 15 minutes because the auth proxy caches for 16."


def chatter(i: int, parts: int = 6) -> str:
    return f"Turn {i}: " + " ".join(f"looked at module {i}.{k} and its tests, nothing stood out there" for k in range(parts))


def ladder(window: int = WINDOW, **settings):
    policy = get_policy("ladder")
    s = Session(counter=get_counter("chars4"), system="sys", window=window, decisions=policy.decision_detector())
    ctx = PolicyContext(spill_store=MemorySpillStore(), settings=PolicySettings(window=window, **settings))
    return policy, s, ctx


def test_an_expired_cache_folds_down_to_the_resume_target_and_keeps_pins_and_facts():
    policy, s, ctx = ladder()
    s.add("user", DECISION)
    s.add("user", "The API listens on port 8443 in eu-west-2.")
    for i in range(12):
        s.add("user" if i % 2 == 0 else "assistant", chatter(i))
    before = s.context_tokens
    assert ctx.settings.resume_tokens < before < ctx.settings.trigger_tokens

    assert run_plan(policy.before_request(s, ctx, expired=False), LossySummarizer()) == []
    assert s.context_tokens == before  # a warm cache: below the trigger nothing folds

    events = run_plan(policy.before_request(s, ctx, expired=True), LossySummarizer())
    folds = [e.fold for e in events if isinstance(e, Folded)]
    assert folds and all(f.trigger == "ladder: resume after the cache expired" for f in folds)
    # what the ledger carries verbatim (the user's words here) is on top of the target: no fold takes it
    ledger = sum(m.tokens for m in s.messages if m.kind is Kind.ledger)
    assert s.context_tokens <= ctx.settings.resume_tokens + ledger
    assert ctx.settings.resume_tokens == int(WINDOW * 0.15)
    assert s.messages[0].content == DECISION and s.messages[0].pinned
    assert "8443" in s.visible_text() and "eu-west-2" in s.visible_text()


def _big_last_message(s: Session) -> None:
    for i in range(6):
        s.add("user" if i % 2 == 0 else "assistant", chatter(i))
    s.add("user", chatter(99, 60))  # no fold takes the turn in flight


def _explicit_pins(s: Session) -> None:
    for i in range(14):
        s.add("user", f"note {i}: " + "keep this exactly " * 10, pinned=True)
    for i in range(10):
        s.add("user" if i % 2 == 0 else "assistant", chatter(i))


def _plain(s: Session) -> None:
    for i in range(12):
        s.add("user" if i % 2 == 0 else "assistant", chatter(i))


@pytest.mark.parametrize("build", [_plain, _big_last_message, _explicit_pins])
def test_what_a_cold_resume_will_send_is_said_before_it_folds(build):
    """The estimate the resume line and keep-warm use: never below what the fold leaves
    (pins, the last messages and a summary stay), and not far above it."""
    policy, s, ctx = ladder()
    build(s)
    estimate = policy.cold_resume_tokens(s, ctx)
    run_plan(policy.before_request(s, ctx, expired=True), LossySummarizer())
    assert estimate is not None and s.folds
    assert s.context_tokens <= estimate <= max(ctx.settings.resume_tokens, 1.25 * s.context_tokens)


@pytest.mark.parametrize(("resume", "target", "expected"), [(0.15, 0.35, 0.15), (0.5, 0.35, 0.35), (0.05, 0.35, 0.05)])
def test_the_resume_target_is_at_most_the_fold_target(resume, target, expected):
    settings = PolicySettings(window=10_000, resume_fold_target=resume, fold_target=target)
    assert settings.resume_tokens == int(10_000 * expected)


@pytest.fixture
def app_settings(settings) -> Settings:
    """test_resume_cold's settings (mock model, local sheet, chars4, a tmp data dir), with a bigger window."""
    return settings.model_copy(update={"window": APP_WINDOW})


def _yesterday(settings: Settings) -> int:
    """A session left two hours ago, past the local sheet's TTL: its context's tokens."""

    async def yesterday() -> int:
        async with open_agent(settings, async_writer=False, new=True) as agent:
            agent.session.clock = lambda: time.time() - TWO_HOURS
            for text in ["The API listens on port 8443 because 443 is taken.", *(chatter(i, 20) for i in range(16))]:
                result = await agent.turn(text, None)
                assert result.error is None
            return agent.session.context_tokens

    return asyncio.run(yesterday())


def test_the_morning_after_in_the_app_starts_from_a_small_context(app_settings):
    settings = app_settings
    evening = _yesterday(settings)
    resume_tokens = int(APP_WINDOW * RESUME_FOLD_TARGET)
    assert evening > 2 * resume_tokens

    async def morning() -> Agent:
        async with open_agent(settings, {"continue_": True}) as agent:
            assert agent.ladder.cold_resume
            app = TailrentApp(agent, settings)
            async with app.run_test(size=(140, 40)) as pilot:
                await pilot.press(*"which port?", "enter")
                await wait_until(pilot, lambda: not app.running and agent.session.folds, what="the reply after the resume fold")
                await pilot.press("ctrl+q")
        return agent

    agent = asyncio.run(morning())

    sd = last_active(settings.data_dir)
    folds = [e.fold for e in sd.events() if isinstance(e, Folded)]
    assert folds and all(f.trigger == "ladder: resume after the cache expired" for f in folds)
    # the request went out with the folded context: at most the resume target, then the question
    assert folds[-1].context_after <= resume_tokens
    assert "8443" in agent.session.visible_text()
    assert any(m.kind is Kind.fold_summary for m in agent.session.messages)
    # said up front: the first request re-reads the folded context, not yesterday's
    price = agent.link.resume_price
    assert price is not None and price.saver == "fold" and price.context_tokens == evening
    # about what the fold left: never less, not far more
    assert folds[-1].context_after <= price.to_read <= 1.25 * max(resume_tokens, folds[-1].context_after)
    assert any("the ladder folds the" in n.text and f"to about {price.to_read:,}" in n.text for n in agent.session.notes)


def test_a_resume_fold_shown_first_is_promised_as_a_proposal_and_can_be_cancelled(app_settings):
    from tailrent_tui.ui.screens.fold_preview import FoldPreview

    settings = app_settings.model_copy(update={"fold": app_settings.fold.model_copy(update={"preview": "always"})})
    evening = _yesterday(settings)

    async def morning() -> Agent:
        async with open_agent(settings, {"continue_": True}) as agent:
            app = TailrentApp(agent, settings)
            async with app.run_test(size=(140, 40)) as pilot:
                await pilot.press(*"which port?", "enter")
                await wait_until(pilot, lambda: isinstance(app.screen, FoldPreview), what="the resume fold's preview")
                await pilot.press("escape")
                await wait_until(pilot, lambda: not app.running and len(agent.session.usage) > 17, what="the reply")
                await pilot.press("ctrl+q")
        return agent

    agent = asyncio.run(morning())
    price = agent.link.resume_price
    assert price is not None and price.saver == "fold" and price.fold_reviewed
    line = next(n.text for n in agent.session.notes if "the cache is cold" in n.text)
    assert f"will propose folding the {evening:,}-token context to about {price.to_read:,}" in line
    assert "(deeper than a fold in use: the prefix is read again anyway; you review it first); the first request re-reads" in line
    # cancelled: nothing folded, and the message went out with what the other rungs left
    assert not agent.session.folds
    assert agent.session.usage[-1].context_tokens == agent.session.context_tokens - agent.session.messages[-1].tokens


def test_a_resume_fold_the_model_would_write_is_not_made_when_the_reread_costs_less(app_settings):
    """Issue 26, item 1: the model's summary reads the span and writes a summary before the first
    request, so on a cold cache it costs more than re-reading a context that fits: no fold."""
    settings = app_settings.model_copy(update={"fold": app_settings.fold.model_copy(update={"summarizer": "model"})})
    evening = _yesterday(settings)

    async def morning() -> None:
        async with open_agent(settings, {"continue_": True}) as agent:
            await agent.link.start()
            price = agent.link.resume_price
            fold = agent.budget.policy.cold_resume_fold(agent.session, agent.budget.policy_context())
            assert fold is not None and fold.summary_tokens > 0, "the ladder would fold, were it free"
            assert price is not None and price.saver == "none" and price.to_read == evening
            line = next(n.text for n in agent.session.notes if n.text.startswith("resume:"))
            assert f"re-reads {evening:,} of {evening:,} context tokens" in line
            assert f"no fold first: a summary of up to {fold.summary_tokens:,} tokens" in line
            result = await agent.turn("which port?", None)
            assert result.error is None and not agent.session.folds
            assert agent.session.usage[-1].context_tokens >= evening

    asyncio.run(morning())


def settings_rate(agent) -> float:
    return agent.rent.sheet.eval_tokens_per_second


def test_the_agents_keep_warm_prices_an_expiry_by_what_the_ladder_would_fold_to(make_agent):
    agent = make_agent(window=WINDOW, price_sheet="anthropic-5m")
    agent.session.add("user", DECISION)
    for i in range(12):
        agent.session.add("user" if i % 2 == 0 else "assistant", chatter(i))
    agent.rent.request_session(agent.session, at=agent.session.clock())
    price = agent.meter.keep_warm.price()
    resume = agent.budget.policy_context().settings.resume_tokens
    assert price is not None and price.prefix_tokens > resume
    assert price.rewrite_tokens == agent.budget.policy.cold_resume_tokens(agent.session, agent.budget.policy_context())
    assert resume <= price.rewrite_tokens < price.prefix_tokens
    lines = keep_warm_lines(agent.meter.keep_warm.status(agent.session.clock()))
    assert any(f"a rewrite of {price.rewrite_tokens:,} would add ${price.expiry_usd:,.4f}" in line for line in lines)
    assert all(len(line) <= 42 for line in lines)  # the panel's width, as the app draws it at 160 columns
