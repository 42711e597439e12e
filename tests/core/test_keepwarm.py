"""Keep-warm (issue 14): the rent-or-buy rule by hand on small cases, its competitive ratio on
every built-in trace, the sheet fields that switch it on, and slot restores in the rent model.

The hand-checked sheet: $3/MTok input, writes 1.25x, reads 0.1x, $15/MTok output, a 300 s TTL,
pings 20 s before expiry (so every 280 s), nothing too small to cache. A 100,000-token prefix:

- a ping reads it: 100,000 x $3e-6 x 0.1 = $0.03, plus one output token $0.000015 = $0.030015;
- an expiry rewrites it: 100,000 x $3e-6 x 1.25 = $0.375, less the $0.03 read a warm resume
  pays anyway = $0.345;
- so the rule allows 11 pings (11 x 0.030015 = 0.330165 <= 0.345 < 12 x 0.030015 = 0.36018),
  sent at 280, 560, ..., 3,080 s; the cache then lives to 3,380 s.
"""

from __future__ import annotations

import math

import pytest

from tailrent_tui.bench.runner import run_bench
from tailrent_tui.core.keepwarm import KeepWarm, competitive_ratio, pause_ratio, ping_price
from tailrent_tui.core.rent import PriceSheet, PriceSheetError, RentModel, get_price_sheet, parse_price_sheets
from tailrent_tui.scenarios.traces import BUILTIN_TRACES, get_trace

SHEET = PriceSheet(
    name="hand",
    input_per_mtok=3.0,
    cache_write_multiplier=1.25,
    cache_read_multiplier=0.1,
    output_per_mtok=15.0,
    min_cacheable=0,
    ttl_seconds=300,
    pings=True,
    ping_lead_seconds=20,
)
PREFIX = [("a", 100_000)]
PING = 0.030015
EXPIRY = 0.345


def started(sheet: PriceSheet = SHEET) -> tuple[RentModel, KeepWarm]:
    rent = RentModel(sheet)
    rent.request(PREFIX, head_tokens=0, at=0.0)
    return rent, KeepWarm(rent)


def test_the_prices_by_hand():
    price = ping_price(SHEET, 100_000)
    assert price is not None
    assert price.ping_usd == pytest.approx(PING)
    assert price.rewrite_usd == pytest.approx(0.375)
    assert price.expiry_usd == pytest.approx(EXPIRY)
    assert price.max_pings == 11


def test_an_expiry_the_policy_folds_first_is_priced_by_what_it_writes():
    # the ladder folds the 100,000-token prefix to 20,000 at a cold resume: the expiry writes
    # 20,000 x $3e-6 x 1.25 = $0.075 and spares the $0.03 warm read, so it adds $0.045, and
    # the rule buys after one ping (1 x 0.030015 <= 0.045 < 2 x 0.030015)
    price = ping_price(SHEET, 100_000, rewrite_tokens=20_000)
    assert price is not None and price.rewrite_tokens == 20_000
    assert price.rewrite_usd == pytest.approx(0.075) and price.expiry_usd == pytest.approx(0.045)
    assert price.max_pings == 1
    # never more than the prefix; a fold to nothing still pays no less than zero
    assert ping_price(SHEET, 100_000, rewrite_tokens=500_000).max_pings == 11
    assert ping_price(SHEET, 100_000, rewrite_tokens=0).max_pings == 0
    rent = RentModel(SHEET)
    rent.request(PREFIX, head_tokens=0, at=0.0)
    warm = KeepWarm(rent, rewrite_tokens=lambda: 20_000)
    assert [r.at for r in warm.replay_until(1000.0)] == [280.0]
    (pause,) = warm.pauses
    assert pause.expired and pause.expiry_usd == pytest.approx(0.045)
    assert pause_ratio(pause) <= 2


def test_the_price_is_fixed_when_the_pause_begins():
    # the session changing mid-pause (a !cmd's output, a setting) must not make the pings
    # already sent cost more than the expiry they were weighed against
    rent = RentModel(SHEET)
    rent.request(PREFIX, head_tokens=0, at=0.0)
    rewrite: list[int | None] = [None]
    warm = KeepWarm(rent, rewrite_tokens=lambda: rewrite[0])
    first = warm.price()
    for at in (280.0, 560.0, 840.0):
        rent.ping(at)
    rewrite[0] = 20_000
    assert warm.price() == first and warm.price().max_pings == 11
    assert warm.next_ping_at() == 840.0 + 280.0
    # the next pause is priced afresh
    rent.request(PREFIX, head_tokens=0, at=900.0)
    assert warm.price().rewrite_tokens == 20_000 and warm.price().max_pings == 1


def test_a_pause_inside_the_ttl_needs_no_decision():
    rent, warm = started()
    assert warm.replay_until(250.0) == []
    assert warm.pauses == []
    assert rent.request(PREFIX, head_tokens=0, at=250.0).cached_tokens == 100_000


def test_a_pause_shorter_than_the_break_even_is_pinged_through():
    rent, warm = started()
    sent = warm.replay_until(1000.0)
    assert [r.at for r in sent] == [280.0, 560.0, 840.0]
    assert all(r.ping and r.tail_tokens == 0 and r.output_tokens == 1 for r in sent)
    assert rent.totals.pings == 3 and rent.totals.ping_usd == pytest.approx(3 * PING)
    r = rent.request(PREFIX, head_tokens=0, at=1000.0)
    assert r.cached_tokens == 100_000 and not r.cache_expired
    (pause,) = warm.pauses
    assert not pause.expired and pause.due_pings == 3
    assert pause.online_usd == pytest.approx(3 * PING) == pytest.approx(pause.best_usd)
    assert pause_ratio(pause) == pytest.approx(1.0)


def test_a_pause_longer_than_the_break_even_stops_pinging_and_expires():
    rent, warm = started()
    sent = warm.replay_until(10_000.0)
    assert len(sent) == 11 and sent[-1].at == 11 * 280.0
    assert rent.cache_expires_at == 3380.0
    r = rent.request(PREFIX, head_tokens=0, at=10_000.0)
    assert r.cache_expired and r.cached_tokens == 0
    (pause,) = warm.pauses
    assert pause.expired and pause.due_pings == 35  # ceil((10,000 - 280) / 280)
    assert pause.best_usd == pytest.approx(EXPIRY)  # expiring at once was the better choice
    assert pause.online_usd == pytest.approx(11 * PING + EXPIRY)
    assert pause_ratio(pause) == pytest.approx((11 * PING + EXPIRY) / EXPIRY)  # 1.957
    assert pause_ratio(pause) <= 2


def test_back_after_the_last_ping_but_before_the_expiry_is_still_warm():
    rent, warm = started()
    assert len(warm.replay_until(3100.0)) == 11
    assert not rent.request(PREFIX, head_tokens=0, at=3100.0).cache_expired
    assert pause_ratio(warm.pauses[0]) <= 1


def test_many_pauses_each_decided_afresh():
    rent, warm = started()
    at = 0.0
    for gap in (100, 1000, 10_000, 600, 86_400):
        at += gap
        warm.replay_until(at)
        rent.request(PREFIX, head_tokens=0, at=at)
    # 1000 s: 3 pings; 10,000 s: 11 and an expiry; 600 s: 2; a day: 11 and an expiry
    assert [p.pings for p in warm.pauses] == [3, 11, 2, 11]
    assert [p.expired for p in warm.pauses] == [False, True, False, True]
    assert rent.totals.pings == 27 and rent.totals.requests == 6 and rent.totals.expiries == 2
    cr = competitive_ratio(warm.pauses)
    assert cr.pauses == 4 and cr.pinged_through == 2 and cr.expired == 2
    assert cr.best_usd == pytest.approx(5 * PING + 2 * EXPIRY)
    assert cr.online_usd == pytest.approx(27 * PING + 2 * EXPIRY)
    assert cr.ratio == pytest.approx(cr.online_usd / cr.best_usd) and cr.ratio <= 2
    assert cr.worst_pause <= 2
    # billed: the turns' rent and the pings, together
    assert rent.totals.usd == pytest.approx(sum(r.usd for r in rent.history))


def test_the_status_the_tail_panel_shows():
    _, warm = started()
    s = warm.status(10.0)
    assert s.state == "warm" and s.next_ping_at == 280.0 and s.expires_at == 280.0 + 10 * 280 + 300
    warm.replay_until(600.0)
    s = warm.status(600.0)
    assert s.state == "keeping" and s.pings == 2 and s.spent_usd == pytest.approx(2 * PING)
    assert s.expires_at == 3380.0  # the last allowed ping at 3,080 s, then the TTL
    warm.replay_until(5000.0)
    assert warm.status(3200.0).state == "expiring"
    assert warm.status(3400.0).state == "expired"
    assert not warm.due(3200.0)


def test_local_sheets_and_sheets_without_pings_never_ping():
    for sheet in (get_price_sheet("local"), get_price_sheet("local-slots"), SHEET.model_copy(update={"pings": False})):
        _, warm = started(sheet)
        assert ping_price(sheet, 100_000) is None
        assert warm.replay_until(100_000.0) == [] and warm.status(10.0).state == "off"


def test_nothing_cached_nothing_to_keep_warm():
    sheet = SHEET.model_copy(update={"min_cacheable": 1024})
    rent = RentModel(sheet)
    rent.request([("a", 500)], head_tokens=0, at=0.0)
    warm = KeepWarm(rent)
    assert warm.replay_until(5000.0) == [] and warm.status(1.0).state == "off"
    with pytest.raises(ValueError, match="nothing to keep warm"):
        rent.ping(10.0)


@pytest.mark.parametrize(
    ("extra", "error"),
    [
        ("local = true\npings = true", "a local sheet never pings"),
        ("pings = true\ncache_read_multiplier = 0.0", "a ping is priced as a cached read"),
        ("pings = true\nping_lead_seconds = 300", "ping_lead_seconds: must be shorter than ttl_seconds"),
        ("restores_slots = true", "restores_slots: only a local engine"),
        ('pings = "yes"', "pings: Input should be a valid boolean"),
    ],
)
def test_bad_keep_warm_fields_are_one_line_errors(extra, error):
    keys = {
        "input_per_mtok": "3.0",
        "cache_write_multiplier": "1.25",
        "cache_read_multiplier": "0.1",
        "output_per_mtok": "15.0",
        "min_cacheable": "0",
        "ttl_seconds": "300",
    }
    for line in extra.splitlines():
        keys[line.split(" = ")[0]] = line.split(" = ")[1]
    text = "[bad]\n" + "\n".join(f"{k} = {v}" for k, v in keys.items())
    with pytest.raises(PriceSheetError) as exc:
        parse_price_sheets(text, "prices.toml")
    msg = str(exc.value)
    assert error in msg and "\n" not in msg and msg.startswith("price sheet 'bad' in prices.toml: ")


def test_packaged_sheets_say_who_pings():
    assert get_price_sheet("anthropic-5m").pings and get_price_sheet("anthropic-1h").pings
    assert not get_price_sheet("local").pings and get_price_sheet("local-slots").restores_slots


def test_a_restored_slot_re_reads_only_what_follows_the_saved_prefix():
    slots, plain = RentModel(get_price_sheet("local-slots")), RentModel(get_price_sheet("local"))
    for rent in (slots, plain):
        rent.request([("a", 8000)], head_tokens=52, at=0.0)
    after = [("a", 8000), ("b", 54)]
    assert slots.predict(after, 52, 7200.0)[2] is False  # the policy finds the prefix warm
    r = slots.request(after, head_tokens=52, at=7200.0)
    assert (r.cached_tokens, r.tail_tokens, r.restored, r.cache_expired) == (8052, 54, True, False)
    assert r.restore_seconds == pytest.approx(8052 / 500_000)
    assert slots.totals.restores == 1 and slots.totals.expiries == 0
    r = plain.request(after, head_tokens=52, at=7200.0)
    assert (r.cached_tokens, r.tail_tokens, r.restored, r.cache_expired) == (0, 8106, False, True)


@pytest.mark.parametrize("name", BUILTIN_TRACES)
@pytest.mark.parametrize("sheet", ["anthropic-5m", "anthropic-1h", "openai"])
def test_the_competitive_ratio_is_at_most_two_on_every_built_in_trace(name, sheet):
    result = run_bench(get_trace(name), price_sheet=sheet, driver="core").traces[0]
    for policy, p in result.policies.items():
        cr = competitive_ratio(p.pauses)
        assert cr.worst_pause <= 2, (policy, cr)
        assert cr.ratio is None or cr.ratio <= 2, (policy, cr)
        assert p.pings == sum(x.pings for x in p.pauses)
        assert p.billed_usd >= p.ping_usd >= 0
        assert not math.isnan(p.billed_usd)
    assert result.policies["none"].pings == 0  # the floor's cache never expires
