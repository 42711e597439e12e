"""The rent model on small cases computed by hand."""

from __future__ import annotations

import math

import pytest
from folds import fold_span

from tailrent_tui.core.messages import Kind
from tailrent_tui.core.rent import (
    PriceSheet,
    PriceSheetError,
    RentModel,
    context_items,
    load_price_sheets,
    parse_price_sheets,
)
from tailrent_tui.core.rungs.spill import MemorySpillStore, spill_message
from tailrent_tui.core.session import Session
from tailrent_tui.core.tokens import get_counter


def sheet(**kw) -> PriceSheet:
    base = dict(
        name="t",
        input_per_mtok=1_000_000.0,
        cache_write_multiplier=2.0,
        cache_read_multiplier=0.5,
        output_per_mtok=10_000_000.0,
        min_cacheable=0,
        ttl_seconds=300,
    )
    base.update(kw)
    return PriceSheet(**base)


def test_prefix_by_identity_and_dollars():
    rent = RentModel(sheet())
    r1 = rent.request([("a", 10), ("b", 20)], head_tokens=5, at=0)
    assert (r1.context_tokens, r1.cached_tokens, r1.tail_tokens) == (35, 0, 35)
    assert r1.usd == pytest.approx(35 * 1 * 2.0)
    r2 = rent.request([("a", 10), ("b", 20), ("c", 7)], head_tokens=5, at=60, output_tokens=3)
    assert (r2.cached_tokens, r2.tail_tokens) == (35, 7)
    # 35 cached at half price, 7 written at double, 3 output at 10/token
    assert r2.usd == pytest.approx(35 * 0.5 + 7 * 2.0 + 3 * 10)
    assert rent.totals.requests == 2
    assert rent.totals.tail_tokens == 42
    assert rent.totals.cached_tokens == 35


def test_changed_message_breaks_the_prefix_there():
    rent = RentModel(sheet())
    rent.request([("a", 10), ("b", 20), ("c", 30)], head_tokens=5, at=0)
    r = rent.request([("a", 10), ("x", 20), ("c", 30)], head_tokens=5, at=1)
    assert r.cached_tokens == 15  # head + a only: c after the change is re-sent


def test_ttl_expiry_rewrites_everything():
    rent = RentModel(sheet(ttl_seconds=300))
    rent.request([("a", 100)], head_tokens=0, at=0)
    inside = rent.request([("a", 100), ("b", 1)], head_tokens=0, at=299)
    assert inside.cached_tokens == 100 and not inside.cache_expired
    late = rent.request([("a", 100), ("b", 1), ("c", 1)], head_tokens=0, at=299 + 300)
    assert late.cache_expired and late.cached_tokens == 0 and late.tail_tokens == 102
    assert rent.totals.expiries == 1


def test_resume_after_ttl_forgets_the_cache():
    rent = RentModel(sheet(ttl_seconds=60))
    rent.request([("a", 50)], head_tokens=0, at=0)
    assert rent.resume(30) is False
    assert rent.resume(100) is True
    r = rent.request([("a", 50)], head_tokens=0, at=101)
    assert r.cached_tokens == 0


def test_infinite_ttl_never_expires():
    rent = RentModel(sheet(ttl_seconds=math.inf))
    rent.request([("a", 50)], head_tokens=0, at=0)
    r = rent.request([("a", 50), ("b", 5)], head_tokens=0, at=10 * 86400)
    assert r.cached_tokens == 50 and not r.cache_expired


def test_below_min_cacheable_nothing_is_cached_and_base_rate():
    rent = RentModel(sheet(min_cacheable=1024))
    rent.request([("a", 500)], head_tokens=0, at=0)
    r = rent.request([("a", 500), ("b", 10)], head_tokens=0, at=1)
    assert r.cached_tokens == 0 and r.tail_tokens == 510
    assert r.usd == pytest.approx(510 * 1.0)  # nothing written to the cache: base input price
    rent.request([("a", 500), ("b", 10), ("c", 600)], head_tokens=0, at=2)
    r = rent.request([("a", 500), ("b", 10), ("c", 600), ("d", 1)], head_tokens=0, at=3)
    assert r.cached_tokens == 1110


def _session() -> Session:
    s = Session(counter=get_counter("chars4"), system="s" * 40, window=10_000, clock=lambda: 0.0)
    for i in range(6):
        s.add("user", f"message {i} " + "x" * 40)
    return s


def test_spilled_message_changes_identity():
    s = _session()
    s.add_message(s.make_message("tool", "y" * 400, kind=Kind.tool_result, tool="grep"), autopin=False)
    s.add("assistant", "done " * 5)
    rent = RentModel(sheet())
    rent.request_session(s, at=0)
    spilled_id = s.messages[6].id
    before = sum(m.tokens for m in s.messages[:6]) + s.head_tokens
    spill_message(s, spilled_id, MemorySpillStore())
    assert s.messages[6].id == spilled_id  # same id, new content
    r = rent.request_session(s, at=1)
    assert r.cached_tokens == before


def test_fold_in_place_keeps_the_prefix_before_the_span():
    s = _session()
    rent = RentModel(sheet())
    rent.request_session(s, at=0)
    ids = [m.id for m in s.messages]
    keep = s.head_tokens + s.messages[0].tokens + s.messages[1].tokens
    fold_span(s, ids[2:4], summary="two messages", guard="off", position="in_place")
    r = rent.request_session(s, at=1)
    assert r.cached_tokens == keep
    assert r.tail_tokens == s.context_tokens - keep


def test_fold_at_front_invalidates_all_but_the_head():
    s = _session()
    rent = RentModel(sheet())
    rent.request_session(s, at=0)
    ids = [m.id for m in s.messages]
    fold_span(s, ids[2:4], summary="two messages", guard="off", position="front")
    r = rent.request_session(s, at=1)
    assert r.cached_tokens == s.head_tokens
    assert next(k for k, _ in context_items(s)).startswith(s.folds[0].summary.id)


def test_packaged_sheets_load_with_design_numbers():
    sheets = load_price_sheets()
    assert {"anthropic-5m", "anthropic-1h", "openai", "local"} <= set(sheets)
    a = sheets["anthropic-5m"]
    assert (
        a.input_per_mtok,
        a.cache_write_multiplier,
        a.cache_read_multiplier,
        a.output_per_mtok,
        a.min_cacheable,
        a.ttl_seconds,
    ) == (3.0, 1.25, 0.1, 15.0, 1024, 300)
    assert sheets["anthropic-1h"].cache_write_multiplier == 2.0
    assert sheets["local"].local and sheets["local"].output_per_mtok == 0


def test_missing_price_names_the_sheet_and_key():
    text = (
        "[cheap]\ninput_per_mtok = 1.0\ncache_write_multiplier = 1\ncache_read_multiplier = 0.1\n"
        "min_cacheable = 0\nttl_seconds = 60\n"
    )
    with pytest.raises(PriceSheetError, match=r"'cheap'.*'output_per_mtok'"):
        parse_price_sheets(text, "user.toml")


def test_user_sheet_file_adds_and_overrides(tmp_path):
    f = tmp_path / "prices.toml"
    f.write_text(
        "[mine]\ninput_per_mtok = 0.5\ncache_write_multiplier = 1\ncache_read_multiplier = 0.1\n"
        "output_per_mtok = 2\nmin_cacheable = 0\nttl_seconds = 600\n",
        encoding="utf-8",
    )
    sheets = load_price_sheets([f, tmp_path / "absent.toml"])
    assert sheets["mine"].ttl_seconds == 600 and "local" in sheets


def test_bad_toml_is_a_clear_error(tmp_path):
    f = tmp_path / "prices.toml"
    f.write_text("[broken\n", encoding="utf-8")
    with pytest.raises(PriceSheetError, match="not valid TOML"):
        load_price_sheets([f])
