"""The session keeps the context's (identity, tokens) items as messages arrive (issue: per-request
cost): after every kind of change they are what a reading of the whole transcript gives, and the
rent model's prefix comparison (done in C on the common path) counts what the item-by-item walk counts."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tailrent_tui.core import rent as rent_module
from tailrent_tui.core.guard import DecisionDetector
from tailrent_tui.core.messages import Kind
from tailrent_tui.core.rent import Item, reused_prefix, shared_prefix
from tailrent_tui.core.rungs.fold import MemoryFoldArchive, apply_fold, prepare_fold, retire_summaries, unfold
from tailrent_tui.core.rungs.spill import MemorySpillStore, spill_message
from tailrent_tui.core.session import Session, replay
from tailrent_tui.core.tokens import Framing, get_counter
from tests.support.folds import fold_span

WORK = "I traced the call path from the CLI down to emit and renamed the local offset to batch in seventeen places. "


def rebuilt(session: Session) -> list[Item]:
    """The items as `context_items` made them before the session kept them: every message read."""
    return [(f"{m.id}#{m.kind.value}", session.sent_tokens(m)) for m in session.messages if not m.cut_off]


def _session(*, listening: bool) -> tuple[Session, list]:
    s = Session(
        counter=get_counter("cl100k"),
        system="You are a coding agent.",
        window=8192,
        decisions=DecisionDetector(),
        framing=Framing(request=3, system=2, roles={"user": 4, "assistant": 5, "tool": 7, "system": 6}),
    )
    events: list = []
    if listening:
        s.listeners.append(events.append)
    return s, events


@pytest.mark.parametrize("listening", [True, False], ids=["journaled", "alone"])
def test_items_follow_every_change_to_the_transcript(listening):
    s, events = _session(listening=listening)
    archive = MemoryFoldArchive()
    store = MemorySpillStore()

    def same() -> None:
        assert s.context_items() == rebuilt(s)

    same()
    s.read_instructions("AGENTS.md", "Never push to main on a Friday.")
    same()
    first = s.add("user", "Decision: the cache TTL is 15 minutes because of the SLA.")
    for i in range(6):
        s.add("user", f"step {i}: look at module m{i}")
        s.add("assistant", WORK * 3)
        same()
    big = s.add("tool", WORK * 40, kind=Kind.tool_result, tool="grep")
    same()
    spill_message(s, big.id, store)
    assert s.get(big.id).kind is Kind.spill_pointer
    same()
    s.add("assistant", "a reply cut short", meta={"cancelled": True})  # shown, never sent
    same()
    if first.pinned:
        s.unpin(first.id)
    same()
    span = [m.id for m in s.messages if not m.pinned and m.kind is Kind.chat][:6]
    assert first.id in span
    folded = fold_span(s, span, summary="Looked at modules m0 to m2.", summarizer_name="test", archive=archive)
    same()
    s.read_instructions("AGENTS.md", "Never push to main on a Friday or a Saturday.")  # replaces the reading
    same()
    (ledger,) = [m for m in s.messages if m.kind is Kind.ledger]  # the fold carried the decision
    longer = "Decision: the cache TTL is 20 minutes because of the SLA and the audit of March."
    s.edit_statement(ledger.meta["statements"][0], longer)
    assert "20 minutes" in s.get(ledger.id).content  # rewritten in place
    same()
    unfold(s, folded.fold.fold_no, archive.read_fold(folded.fold.fold_no).originals, limit=10**6)
    same()
    for i in range(3):
        done = s.add("assistant", f"did {i}: " + WORK)
        record = prepare_fold(s, [done.id], summary=f"left whole {i}", summarizer_name="dropped", guard="report")
        apply_fold(s, record.model_copy(update={"dropped": True}), archive)  # a note smaller than a pointer
        same()
    assert retire_summaries(s, 0, keep_recent=0)  # the notes retire together: one pointer
    same()
    s.pin(first.id)  # a pin changes no item
    same()
    if listening:
        again = replay(events, counter=s.counter, system=s.system, window=s.window, framing=s.framing)
        assert again.context_items() == s.context_items() == rebuilt(again)


def test_items_handed_out_are_the_callers():
    """A caller may change the list it got (the rent model keeps it as the previous request): the
    session's own copy is not touched."""
    s, _ = _session(listening=False)
    s.add("user", "hello")
    items = s.context_items()
    items.append(("x#chat", 1))
    items[0] = ("y#chat", 2)
    assert s.context_items() == rebuilt(s)


def _shared_prefix_walk(previous: list[Item], current: list[Item]) -> int:
    total = 0
    for a, b in zip(previous, current, strict=False):
        if a != b:
            break
        total += b[1]
    return total


def _reused_prefix_walk(previous: list[Item], current: list[Item], min_tokens: int) -> int:
    i = j = 0
    while i < len(previous) and j < len(current) and previous[i] == current[j]:
        i, j = i + 1, j + 1
    total = sum(t for _, t in current[:j])
    while j < len(current):
        try:
            k = previous.index(current[j], i)
        except ValueError:
            break
        run, n = 0, 0
        while k + n < len(previous) and j + n < len(current) and previous[k + n] == current[j + n]:
            run += current[j + n][1]
            n += 1
        if run < min_tokens:
            i = k + 1
            continue
        total += run
        i, j = k + n, j + n
    return total


_items = st.lists(st.tuples(st.sampled_from("abcdefg"), st.integers(0, 90)), max_size=14)


@settings(max_examples=300, deadline=None)
@given(previous=_items, current=_items, shared=st.integers(0, 14), min_tokens=st.integers(1, 120))
def test_prefix_counts_as_the_walk_counts(previous, current, shared, min_tokens):
    current = previous[:shared] + current  # a common run as long as drawn, then anything
    assert shared_prefix(previous, current) == _shared_prefix_walk(previous, current)
    assert reused_prefix(previous, current, min_tokens) == _reused_prefix_walk(previous, current, min_tokens)
    assert rent_module.common_length(previous, current) <= min(len(previous), len(current))
