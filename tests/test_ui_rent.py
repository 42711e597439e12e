"""The Tail panel's rent, read as a person: time on a local sheet, dollars on a priced one,
fold summaries counted apart, and no phrase split across two lines at any terminal width.

Agents come from `build_agent` (the conftest's `make_agent`, with a rent model and a
journal) when a turn is run; a bare agent with usage emitted by hand when only the
figures matter.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from rich.cells import cell_len
from textual.widgets import Markdown, Static
from ui_helpers import NOW, FixedClock, make_app, wait_until
from ui_helpers import make_agent as bare_agent

from tailrent_tui.core.messages import UsageRecorded
from tailrent_tui.core.rent import context_items, conversation_usage
from tailrent_tui.models.base import Usage
from tailrent_tui.models.mock import MockModel
from tailrent_tui.settings import Settings
from tailrent_tui.store.sessions import SessionDir
from tailrent_tui.ui.screens.help import HelpScreen
from tailrent_tui.ui.widgets.input import PromptInput
from tailrent_tui.ui.widgets.tail_panel import WORDS, duration

# where folds go and what they cost the engine: the filler is the user's, which the ledger would keep
pytestmark = pytest.mark.no_ledger

LONG = "We went through the deployment notes again and nothing stood out. " * 24


class TimedMock(MockModel):
    """The mock, with the prompt time a llama.cpp server reports: 2 ms per evaluated token (500 tok/s)."""

    async def stream(self, messages, *, tools=None, options=None) -> AsyncIterator:
        async for chunk in super().stream(messages, tools=tools, options=options):
            if isinstance(chunk, Usage):
                chunk = chunk.model_copy(update={"prompt_ms": 2.0 * (chunk.evaluated_tokens or 0)})
            yield chunk


async def send(pilot, app, text: str) -> None:
    box = app.query_one(PromptInput)
    box.focus()
    box.value = text
    # a fold may take replies out of the transcript: the journaled requests only grow
    turns = len(conversation_usage(app.session.usage))
    await pilot.press("enter")
    await wait_until(
        pilot, lambda: not app.running and len(conversation_usage(app.session.usage)) > turns, rounds=2000, what="the reply"
    )


def rent_shown(app) -> str:
    return str(app.sidebar.tail.query_one(".rent").render())


async def test_a_local_sheet_shows_time_at_the_measured_rate_and_no_dollars(make_agent):
    agent = make_agent()
    agent.model = TimedMock()
    app = make_app(agent)
    async with app.run_test(size=(140, 45)) as pilot:
        shown = rent_shown(app)
        assert "rent (local sheet)" in shown and "600 tok/s, the sheet's guess" in shown
        await send(pilot, app, "hello")
        await send(pilot, app, "and again")
        await wait_until(pilot, lambda: "measured" in rent_shown(app), what="the measured rate")
        shown = rent_shown(app)
        last = agent.session.usage[-1]
        assert "prompt rate: 500 tok/s, measured" in shown
        seconds = last.predicted_evaluated / 500
        row = next(line for line in shown.splitlines() if line.startswith("last request"))
        assert row.split() == ["last", "request", f"{last.predicted_evaluated:,}", *duration(seconds).split()]
        assert "2 requests" in shown and "$" not in shown


async def test_a_priced_sheet_shows_dollars(make_agent):
    agent = make_agent(price_sheet="anthropic-5m")
    app = make_app(agent)
    async with app.run_test(size=(140, 45)) as pilot:
        await send(pilot, app, "hello")
        await wait_until(pilot, lambda: "1 request" in rent_shown(app), what="the request counted")
        shown = rent_shown(app)
        last = agent.session.usage[-1]
        assert "rent (anthropic-5m sheet)" in shown and "dollars" in shown
        assert f"${last.predicted_usd:,.4f}" in shown and last.predicted_usd > 0
        assert "tok/s" not in shown


async def test_a_model_written_fold_is_a_summary_request_that_reads_the_cached_conversation(make_agent):
    agent = make_agent(policy="ladder", window=4096, fold={"summarizer": "model"})
    predictions = []
    summarize = agent.fold_requests.summary_for

    async def watched(request):
        # the session does not change during the summary request: neither may the next turn's rent
        before = agent.rent.predict(context_items(agent.session), agent.session.head_tokens, agent.session.clock())
        summary = await summarize(request)
        after = agent.rent.predict(context_items(agent.session), agent.session.head_tokens, agent.session.clock())
        predictions.append((before, after))
        return summary

    agent.fold_requests.summary_for = watched
    app = make_app(agent)
    async with app.run_test(size=(140, 45)) as pilot:
        for _ in range(12):
            await send(pilot, app, LONG)
            if agent.session.folds:
                break
        assert agent.session.folds and agent.session.folds[0].summarizer.startswith("model:")
        await send(pilot, app, "What now?")
        summaries = [u for u in agent.session.usage if u.purpose == "summary"]
        turns = [u for u in agent.session.usage if u.purpose == "turn"]
        assert summaries and len(predictions) == len(summaries)
        assert all(before == after for before, after in predictions)
        # the turn after the fold still finds the prefix up to the fold's span cached
        assert turns[-1].predicted_cached > 0
        # asked in the conversation's own context: its prefix is read from the cache, not written again
        # (a later pass of the same fold, after the context changed, asks for its span alone: cheaper then)
        first = summaries[0]
        assert first.predicted_cached > 4 * first.predicted_evaluated
        assert first.evaluated_tokens is not None and first.evaluated_tokens < first.prompt_tokens / 4
        n, m = len(turns), len(summaries)
        counted = f"{n} requests + {m} fold summar{'y' if m == 1 else 'ies'}"
        await wait_until(pilot, lambda: counted in rent_shown(app), what=counted)
        assert "fold summaries" in rent_shown(app).split(counted)[0]
    # journaled with the turns, so a resume counts them too
    replayed, _ = SessionDir(agent.session_dir.path).replay()
    assert [u.purpose for u in replayed.usage] == [u.purpose for u in agent.session.usage]


def busy_session(agent, *, prompt_ms: bool) -> None:
    """A long week's figures: big counts, a fold summary, a delegate, a measured rate."""
    s = agent.session
    for n in range(1, 40):
        s.emit(
            UsageRecorded(
                request_no=n,
                context_tokens=118_000,
                predicted_cached=90_000,
                predicted_evaluated=28_000,
                predicted_usd=0.1234,
                prompt_tokens=118_400,
                cached_tokens=89_000,
                evaluated_tokens=29_400,
                prompt_ms=49_000.0 if prompt_ms else None,
                model="gemma",
                at=NOW,
            )
        )
    s.emit(
        UsageRecorded(
            request_no=40,
            context_tokens=64_000,
            predicted_evaluated=64_000,
            predicted_usd=0.19,
            evaluated_tokens=64_100,
            prompt_ms=107_000.0 if prompt_ms else None,
            model="gemma",
            purpose="summary",
            at=NOW,
        )
    )


@pytest.mark.parametrize("sheet", ["local", "openai"])
@pytest.mark.parametrize("width", [80, 120, 160])
async def test_no_phrase_of_the_tail_panel_wraps(tmp_path, width, sheet):
    agent = bare_agent(tmp_path, window=131_072, settings=Settings(tokenizer="chars4", price_sheet=sheet))
    busy_session(agent, prompt_ms=True)
    agent.sub_tokens = 1_234_567
    app = make_app(agent)
    async with app.run_test(size=(width, 50)) as pilot:
        tail = app.sidebar.tail
        if width < 100:  # the sidebar hides itself there; shown by hand, it must still fit
            await pilot.press("ctrl+b")
        await wait_until(pilot, lambda: "fold summar" in rent_shown(app), what="the figures")
        await pilot.pause()
        for static in tail.query(Static):
            lines = str(static.render()).split("\n")
            widest = max(cell_len(line) for line in lines)
            assert widest <= static.content_size.width, f"{lines!r} in {static.content_size.width} columns"
            assert static.size.height == len(lines)
        shown = rent_shown(app)
        assert "39 requests + 1 fold summary" in shown
        assert ("$" in shown) == (sheet == "openai")


async def test_the_words_are_explained_in_help_and_on_the_panel(tmp_path):
    agent = bare_agent(tmp_path)
    app = make_app(agent)
    async with app.run_test(size=(140, 45)) as pilot:
        tooltip = str(app.sidebar.tail.tooltip)
        for word in ("tail", "prefix", "rent", "predicted", "cached", "evaluated"):
            assert f"{word}: " in tooltip
        await pilot.press("f1")
        await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen), what="help")
        text = app.screen.query_one(Markdown).source
        assert all(f"**{word}**: {meaning}" in text for word, meaning in WORDS)


PRICED = """
[priced-test]
description = "anthropic-5m's prices, with nothing too small to cache"
input_per_mtok = 3.0
cache_write_multiplier = 1.25
cache_read_multiplier = 0.1
output_per_mtok = 15.0
min_cacheable = 0
ttl_seconds = 300
pings = true
"""


def priced_app(make_agent):
    """An agent on the priced test sheet (pings on), its fixed clock, and the app around it."""
    from tailrent_tui.settings import config_dir

    config_dir().mkdir(parents=True, exist_ok=True)
    (config_dir() / "prices.toml").write_text(PRICED, encoding="utf-8")
    agent = make_agent(price_sheet="priced-test")
    clock = FixedClock()
    agent.session.clock = clock
    return agent, clock, make_app(agent, clock=clock)


async def test_keep_warm_pings_through_the_model_while_they_cost_less_than_a_rewrite(make_agent):
    agent, clock, app = priced_app(make_agent)

    def pings():
        return [u for u in agent.session.usage if u.purpose == "ping"]

    async with app.run_test(size=(140, 45)) as pilot:
        await send(pilot, app, "hello")
        turn = agent.model.requests[-1]
        price = agent.meter.keep_warm.price()
        assert price is not None and price.max_pings >= 2
        await wait_until(pilot, lambda: "keep-warm: first ping at" in rent_shown(app), what="the first ping's time")
        app.session_screen.clocks.keep_warm_tick()  # not due yet: the cache has 300 s to live
        assert not pings()
        for n in range(1, price.max_pings + 1):
            clock.now += 280  # 20 s before the cache would expire
            app.session_screen.clocks.keep_warm_tick()  # what the one-second timer calls
            await wait_until(pilot, lambda n=n: len(pings()) == n, what=f"ping {n}")
            # the exact cached prefix went out again, and the cache holds all of it
            assert agent.model.requests[-1] == turn
            last = pings()[-1]
            assert last.predicted_cached == last.context_tokens and last.predicted_evaluated == 0
            assert last.at == clock.now
        await wait_until(pilot, lambda: "keep-warm stopped" in rent_shown(app), what="the rule stops")
        shown = rent_shown(app)
        spent = sum(u.predicted_usd for u in pings())
        assert f"keep-warm stopped: {price.max_pings} pings, ${spent:,.4f}" in shown
        assert f"a rewrite would add ${price.expiry_usd:,.4f}" in shown and "letting it expire at" in shown
        assert spent <= price.expiry_usd  # rent or buy: never more in pings than the expiry costs
        # past the last ping the rule sends nothing more, and the cache expires
        clock.now += 280
        app.session_screen.clocks.keep_warm_tick()
        await pilot.pause()
        assert len(pings()) == price.max_pings
        assert agent.rent.totals.pings == price.max_pings
        assert "keep-warm" in shown and all(cell_len(line) <= 46 for line in shown.splitlines())


async def test_a_local_sheet_never_pings(make_agent):
    agent = make_agent()
    clock = FixedClock()
    agent.session.clock = clock
    app = make_app(agent, clock=clock)
    async with app.run_test(size=(140, 45)) as pilot:
        await send(pilot, app, "hello")
        clock.now += 1790
        app.session_screen.clocks.keep_warm_tick()
        await pilot.pause()
        assert not [u for u in agent.session.usage if u.purpose == "ping"]
        assert "keep" not in rent_shown(app)


async def test_a_failed_ping_is_said_once_and_not_retried_every_second(make_agent):
    """A server that refuses the ping: one note, no request a second later (the review saw
    one failed request and one journaled warning per second until the cache expired)."""
    from tailrent_tui.models.errors import ModelError

    agent, clock, app = priced_app(make_agent)
    async with app.run_test(size=(140, 45)) as pilot:
        await send(pilot, app, "hello")
        sent = len(agent.model.requests)
        real_stream = agent.model.stream

        async def refused(*args, **kwargs):
            agent.model.requests.append(args[0])
            raise ModelError("the server is busy")
            yield  # an async generator, as stream is

        agent.model.stream = refused
        clock.now += 280
        for _ in range(5):  # five ticks of the one-second timer, all past the ping time
            app.session_screen.clocks.keep_warm_tick()
            await pilot.pause()
            clock.now += 1
        assert len(agent.model.requests) == sent + 1, "one ping tried, none retried"
        notes = [n.text for n in agent.session.notes if "keep-warm ping failed" in n.text]
        assert len(notes) == 1 and "no more pings in this pause" in notes[0]
        agent.model.stream = real_stream
        await send(pilot, app, "back")  # a new request: a new pause may ping again
        clock.now += 280

        def pinged() -> bool:
            # as the app's one-second timer does: a tick that lands while the turn still winds
            # down (the app busy, under a loaded machine) is followed by the next one
            app.session_screen.clocks.keep_warm_tick()
            return any(u.purpose == "ping" for u in agent.session.usage)

        await wait_until(pilot, pinged, rounds=2000, what="a ping after the turn")
