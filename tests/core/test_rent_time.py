"""Rent as time on a local sheet: the prompt rate the server measured, fold summaries priced aside."""

from __future__ import annotations

import pytest

from tailrent_tui.core.messages import EventAdapter, UsageRecorded
from tailrent_tui.core.rent import (
    PriceSheet,
    RentModel,
    aside_rent,
    conversation_usage,
    get_price_sheet,
    prompt_rate,
)
from tailrent_tui.ui.widgets.tail_panel import duration


def usage(n: int, *, evaluated: int | None = None, ms: float | None = None, model: str = "gemma", **fields) -> UsageRecorded:
    return UsageRecorded(request_no=n, context_tokens=1000, evaluated_tokens=evaluated, prompt_ms=ms, model=model, **fields)


def test_the_measured_rate_is_the_servers_tokens_over_its_prompt_time():
    local = get_price_sheet("local")
    rate = prompt_rate([usage(1, evaluated=1200, ms=2000.0), usage(2, evaluated=300, ms=500.0)], local)
    assert rate is not None and rate.measured
    assert rate.tokens_per_second == pytest.approx(1500 / 2.5)
    assert rate.seconds(520) == pytest.approx(520 / 600)


def test_the_rate_follows_the_latest_model_and_skips_untimed_requests():
    local = get_price_sheet("local")
    history = [
        usage(1, evaluated=1000, ms=100.0, model="big"),
        usage(2, evaluated=1000, ms=4000.0, model="small"),
        usage(3, evaluated=None, ms=None, model="small"),  # a server that sends no timings
        usage(4, evaluated=0, ms=3.0, model="small"),  # all cached: says nothing of the speed
    ]
    rate = prompt_rate(history, local)
    assert rate is not None and rate.tokens_per_second == pytest.approx(250.0)


def test_without_timings_the_sheets_rate_else_nothing():
    local = get_price_sheet("local")
    rate = prompt_rate([usage(1, evaluated=500)], local)
    assert rate is not None and not rate.measured and rate.tokens_per_second == local.eval_tokens_per_second
    bare = local.model_copy(update={"eval_tokens_per_second": None})
    assert prompt_rate([], bare) is None


def test_only_a_sheet_with_prices_is_priced():
    assert not get_price_sheet("local").priced
    assert get_price_sheet("anthropic-5m").priced and get_price_sheet("openai").priced
    mine = PriceSheet(
        name="mine",
        input_per_mtok=0.2,
        cache_write_multiplier=1,
        cache_read_multiplier=0,
        output_per_mtok=0,
        min_cacheable=0,
        ttl_seconds=60,
        local=True,
    )
    assert mine.priced


def test_a_summary_request_is_priced_aside_and_leaves_the_prefix_alone():
    sheet = get_price_sheet("anthropic-5m")
    rent = RentModel(sheet)
    items = [("a#chat", 800), ("b#chat", 700)]
    rent.request(items, head_tokens=500, at=0.0)
    before = rent.predict([*items, ("c#chat", 50)], 500, at=10.0)
    aside = aside_rent(2_000, 300, sheet)
    assert (aside.context_tokens, aside.cached_tokens, aside.tail_tokens) == (2_000, 0, 2_000)
    assert aside.usd == pytest.approx((2_000 * 3.0 + 300 * 15.0) / 1e6)
    assert rent.predict([*items, ("c#chat", 50)], 500, at=10.0) == before
    assert rent.totals.requests == 1
    assert aside_rent(600, 0, get_price_sheet("local")).eval_seconds == pytest.approx(1.0)
    assert aside_rent(600).usd == 0.0 and aside_rent(600).eval_seconds is None


def test_old_journals_are_all_turns_and_summaries_are_not_the_conversation():
    old = EventAdapter.validate_python({"type": "usage_recorded", "request_no": 1, "context_tokens": 10, "at": 1.0})
    assert old.purpose == "turn"
    history = [old, usage(2, purpose="summary"), usage(3, sub_session="sub-1"), usage(4)]
    assert [u.request_no for u in conversation_usage(history)] == [1, 4]


@pytest.mark.parametrize(
    ("seconds", "said"),
    [(0, "0 s"), (0.047, "0.05 s"), (0.87, "0.9 s"), (12.4, "12 s"), (252, "4 min 12 s"), (7_530, "2 h 5 min")],
)
def test_durations_read_as_a_person_says_them(seconds, said):
    assert duration(seconds) == said


async def test_a_local_engine_keeps_the_reply_it_wrote_so_the_next_turn_reads_only_the_new_message(tmp_path, monkeypatch):
    """llama.cpp (and the mock, which copies it) keeps the tokens it generated in its KV cache:
    the next request evaluates the new user message, not the reply again. The prediction must
    say the same, or the Tail panel's 'evaluated' and the rent double-count every reply."""
    from tailrent_tui.agent.build import build_agent
    from tailrent_tui.agent.loop import TurnCallbacks
    from tailrent_tui.models.mock import MockModel
    from tailrent_tui.settings import Settings

    monkeypatch.setenv("TAILRENT_CONFIG_DIR", str(tmp_path / "config"))
    settings = Settings(model="mock", data_dir=tmp_path / "data", workspace=tmp_path, tokenizer="chars4", fsync=False)
    agent = build_agent(settings, async_writer=False, new=True)
    agent.model = MockModel([{"text": "A long reply about the cache. " * 30}, {"text": "Short."}])
    try:
        await agent.turn("What about the cache?", TurnCallbacks())
        await agent.turn("And the port?", TurnCallbacks())
        second = [u for u in agent.session.usage if u.purpose == "turn"][-1]
        assert second.evaluated_tokens is not None and second.evaluated_tokens < 40  # the server read the new message only
        predicted, measured = second.predicted_evaluated, second.evaluated_tokens
        assert abs(predicted - measured) <= 4, (predicted, measured)
    finally:
        await agent.aclose()
