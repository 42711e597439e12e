"""Fold geometry for an engine that shifts KV (issue 23, sixth pass): what a fold leaves in the cached prompt.

- a retired fold's pointer that a span placed `after` surrounds moves after the summary: left alone between
  two deletions it is a piece shorter than llama.cpp's shift, and everything after it was read again;
- a ledger sent ahead while the user read keeps its order at the trigger, new lines last (`stable_order`),
  and the rent model reads only those lines again (`lines_read_again`).
"""

from __future__ import annotations

import pytest

from tailrent_tui.core import ledger as ledger_rules
from tailrent_tui.core.messages import FoldRetired, Kind
from tailrent_tui.core.rent import HEAD_ID, RentModel, get_price_sheet, lines_read_again, reused_prefix
from tailrent_tui.core.rungs.fold import REUSE_RUN_TOKENS, apply_fold, prepare_fold, stable_order, stranded
from tailrent_tui.core.session import Session
from tailrent_tui.core.tokens import chars4

pytestmark = pytest.mark.no_ledger


def folded_once(turns: int = 4) -> Session:
    """A conversation whose first turn was folded after the kept messages and its summary retired: the pointer
    sits before the turn that was in flight then, between raw messages a later fold takes."""
    s = Session(window=32768)
    for i in range(turns):
        s.add("user", f"question {i} about the parser " + "words " * 60)
        s.add("assistant", f"answer {i}")
    first = prepare_fold(s, [m.id for m in s.messages[:2]], summary="- q0", summarizer_name="x", guard="off", position="after")
    apply_fold(s, first, None)
    s.emit(
        FoldRetired(
            fold_no=1, pointer="[fold #1 archived]", pointer_tokens=s.count("[fold #1 archived]"), position=3, at=s.clock()
        )
    )
    return s


def test_a_pointer_between_two_parts_of_a_span_moves_after_the_summary():
    s = folded_once()
    pointer = next(m for m in s.messages if m.meta.get("retired"))
    at = s.index_of(pointer.id)
    assert 0 < at < len(s.messages) - 1
    # the next fold takes the messages on both sides of it
    span = [m.id for m in s.messages[: at + 2] if m.id != pointer.id]
    assert stranded(s, span) == [pointer.id]
    record = prepare_fold(s, span, summary="- q1 q2", summarizer_name="x", guard="off", position="after")
    assert record.moved == [pointer.id]
    apply_fold(s, record, None)
    # the kept turn, then the summary, then the pointer: the engine shifts the turn and reads the pointer alone
    assert [m.content.split(" ")[0] for m in s.messages] == ["question", "answer", record.summary.content.split(" ")[0], "[fold"]
    assert s.messages[-1].id == pointer.id and s.messages[-2].id == record.summary.id


def test_a_pointer_beside_kept_messages_or_a_fold_in_place_does_not_move():
    s = folded_once()
    pointer = next(m for m in s.messages if m.meta.get("retired"))
    at = s.index_of(pointer.id)
    before = [m.id for m in s.messages[:at]]
    assert stranded(s, before) == []  # the span ends before it: the pointer is followed by what it was followed by
    span = [m.id for m in s.messages[: at + 2] if m.id != pointer.id]
    in_place = prepare_fold(s, span, summary="- q1 q2", summarizer_name="x", guard="off", position="in_place")
    assert in_place.moved == []


def test_a_run_the_engine_shifts_stays_where_it_is():
    s = folded_once()
    pointer = next(m for m in s.messages if m.meta.get("retired"))
    at = s.index_of(pointer.id)
    # a raw message kept next to it: the piece is the conversation's too, and a raw message never moves
    said = s.messages[at - 1]
    span = [m.id for m in s.messages[: at + 2] if m.id not in (pointer.id, said.id)]
    assert stranded(s, span) == []
    # a piece of pointers as long as the engine shifts stays too
    pointer.content = "[fold #1 archived] " + "words " * REUSE_RUN_TOKENS
    pointer.tokens = s.count(pointer.content)
    assert stranded(s, [m.id for m in s.messages[: at + 2] if m.id != pointer.id]) == []


def test_a_ledger_sent_ahead_keeps_its_order_and_new_lines_come_last():
    s = Session(window=32768)
    s.detect_statements = True
    for text in (
        "We use PostgreSQL 16 for the main database.",
        "The deploy script must never touch production on Fridays.",
        "Our goal is p95 under 200 ms on the search endpoint.",
    ):
        s.add("user", "We went over the logs this morning with the team and talked for a long while about it. " + text)
        s.add("assistant", "ok")
    span = [m for m in s.messages if not m.pinned]
    carried = s.carried_by(span)
    assert len(carried) >= 2
    # the ledger sent ahead held the last two, the last first; the first is new at the trigger
    sent = (carried[-1].id, carried[-2].id)
    ordered = stable_order(carried, sent)
    assert [st.id for st in ordered] == [carried[-1].id, carried[-2].id, *(st.id for st in carried[:-2])]
    record = prepare_fold(s, [m.id for m in span], summary="- notes", summarizer_name="x", guard="off", ledger_order=sent)
    assert record.ledger is not None
    assert record.ledger.content == ledger_rules.ledger_text(ordered)


def test_lines_read_again_follow_the_engines_runs():
    head = "[ledger: statements kept verbatim]"
    old = [f"- fact: line {i} " + "x" * 60 for i in range(8)]
    sent = "\n".join([head, *old])
    count = chars4
    # the same ledger: nothing read
    assert lines_read_again(sent, sent, count, 64) == 0
    # one line left mid-ledger, one came last: the new line is read, the rest shifted
    now = "\n".join([head, *old[:3], *old[4:], "- goal: a new line"])
    assert lines_read_again(sent, now, count, 64) == count("- goal: a new line") + 1
    # a line that came in mid-ledger (the order the fold had before): everything after it is read
    mid = "\n".join([head, *old[:3], "- goal: a new line", *old[3:]])
    assert lines_read_again(sent, mid, count, 64) == sum(count(x) + 1 for x in ["- goal: a new line", *old[3:]])
    # after a deletion, a run shorter than the engine shifts is read too
    short = "\n".join([head, *old[:6], old[7]])
    assert lines_read_again(sent, short, count, 64) == count(old[7]) + 1
    # nothing in common at the start: not this rule's
    assert lines_read_again(sent, "other", count, 64) is None


def test_a_rename_with_lines_read_again_charges_them_with_the_next_request():
    rent = RentModel(get_price_sheet("local-reuse"))
    rent.request([("a", 300), ("pair", 80), ("ledger-sent", 400)], 500, at=0.0)
    assert rent.rename(["pair", "ledger-sent"], [("summary", 80), ("ledger", 420)], reread=30)
    r = rent.request([("a", 300), ("summary", 80), ("ledger", 420), ("user", 250)], 500, at=1.0)
    assert r.tail_tokens == 250 + 30
    # the engine's own rule, for comparison: the item renamed is found whole
    assert reused_prefix([(HEAD_ID, 500), ("a", 300)], [(HEAD_ID, 500), ("a", 300)], 64) == 800
    assert Kind.ledger.value == "ledger"
