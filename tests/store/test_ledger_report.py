"""The ledger's report (`store/ledger_report.py`): the Ledger panel and the Tail panel agree on the
pinned tokens."""

from __future__ import annotations


def test_the_ledger_panel_and_the_tail_panel_agree_on_pin_tokens():
    from tailrent_tui.core.session import Session
    from tailrent_tui.core.tokens import Framing, get_counter
    from tailrent_tui.store.ledger_report import ledger_tokens

    s = Session(counter=get_counter("chars4"), system="sys", window=8192, framing=Framing(roles={"user": 5, "assistant": 5}))
    s.add("user", "SECURITY RULE: never log tokens.", pinned=True)
    s.add("user", "A long note I pinned by hand about the deploy. " * 5, pinned=True)
    s.add("assistant", "ok")
    led, pins, _ = ledger_tokens(s)
    assert led + pins == s.totals.pinned and s.totals.pinned > 0
