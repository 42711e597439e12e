"""The per-request path reads only what changed (the session's kept items, the prefix compared in C,
the expiry told without the context, the keep-warm price asked only when a ping was due). Its bench
figures are those of the reading it replaced — every message read on every request — to the byte, on
three traces, both drivers and three kinds of sheet (a priced one that pings, a local one that shifts KV)."""

from __future__ import annotations

import json
import math

import pytest

from tailrent_tui.bench.runner import run_bench
from tailrent_tui.core import rent as rent_module
from tailrent_tui.core.keepwarm import KeepWarm, PauseOutcome, ping_price
from tailrent_tui.core.policies import PolicySettings
from tailrent_tui.core.rent import Item
from tailrent_tui.core.session import Session
from tailrent_tui.scenarios.traces import get_trace
from tests.core.test_context_items import rebuilt

CORPUS = "tests/ledger_corpus"


def _common_length_walk(previous, current) -> int:
    k = 0
    for a, b in zip(previous, current, strict=False):
        if a != b:
            break
        k += 1
    return k


def _price_asked_always(self: KeepWarm):
    """KeepWarm.price as it was: what a cold resume writes asked whether the sheet pings or not."""
    start, _ = self._pause()
    prefix = sum(t for _, t in self.rent._previous) if self.rent._previous is not None else 0
    prefix = prefix if prefix >= self.sheet.min_cacheable else 0
    if self._priced is not None and self._priced[:2] == (start, prefix):
        return self._priced[2]
    rewrite = self.rewrite_tokens() if self.rewrite_tokens is not None else None
    price = ping_price(self.sheet, prefix, rewrite)
    self._priced = (start, prefix, price)
    return price


def _replay_priced_first(self: KeepWarm, at: float):
    """KeepWarm.replay_until as it was: the pause priced before it is known whether a ping was due."""
    start = self.rent.last_at
    price = self.price()
    if start is None or price is None:
        return []
    cadence = self.sheet.ttl_seconds - self.sheet.ping_lead_seconds
    first = start + cadence
    if at <= first:
        return []
    sent = []
    while (nxt := self.next_ping_at()) is not None and nxt < at:
        sent.append(self.rent.ping(nxt))
    expired = self.rent.cache_expires_at is not None and at >= self.rent.cache_expires_at
    self.pauses.append(
        PauseOutcome(
            start=start,
            end=at,
            prefix_tokens=price.prefix_tokens,
            pings=len(sent),
            ping_usd=price.ping_usd,
            expired=expired,
            due_pings=math.ceil((at - first) / cadence),
            expiry_usd=price.expiry_usd,
        )
    )
    return sent


def _migration_days():
    """The first days of migration-week (its pauses, spills and folds) at a window that folds."""
    trace = get_trace("migration-week")
    return trace.model_copy(update={"steps": trace.steps[:560], "window": 8192})


def _canary_half():
    """The first half of canary-typed: the ledger's statements, corrected and carried, at 2,048 tokens."""
    trace = get_trace(f"{CORPUS}/canary-typed.jsonl")
    return trace.model_copy(update={"steps": trace.steps[:200]})


EVERY = ("none", "naive", "naive-pin", "autocompact", "ladder")
CASES = {
    "article": (lambda: get_trace("article"), "anthropic-5m", "agent", "mock-lossy", EVERY),
    "migration-days-core": (_migration_days, "anthropic-5m", "core", "mock-lossy", EVERY),
    "canary-typed-reuse": (_canary_half, "local-reuse", "agent", "mock-extractive", ("none", "ladder")),
}


@pytest.mark.parametrize("case", list(CASES))
def test_figures_are_those_of_reading_every_message_on_every_request(monkeypatch, case):
    make, sheet, driver, summarizer, policies = CASES[case]
    trace = make()

    def bench() -> str:
        settings = PolicySettings(window=trace.window)
        r = run_bench(trace, policies, price_sheet=sheet, driver=driver, summarizer=summarizer, settings=settings)
        return json.dumps(r.to_json(), sort_keys=True)

    kept = Session.context_items
    asked: list[int] = []

    def checked(self: Session) -> list[Item]:
        items = kept(self)
        assert items == rebuilt(self)
        asked.append(len(items))
        return items

    monkeypatch.setattr(Session, "context_items", checked)
    fast = bench()
    assert asked, "the bench charged its requests with the session's kept items"

    monkeypatch.setattr(Session, "context_items", rebuilt)
    monkeypatch.setattr(rent_module, "common_length", _common_length_walk)
    monkeypatch.setattr(KeepWarm, "price", _price_asked_always)
    monkeypatch.setattr(KeepWarm, "replay_until", _replay_priced_first)
    slow = bench()
    assert fast == slow
    figures = json.loads(fast)["traces"][0]["policies"]
    assert any(p["folds"] for p in figures.values())
    if case == "migration-days-core":
        assert figures["ladder"]["pings"] > 0  # the keep-warm rule priced pauses and pinged through them
