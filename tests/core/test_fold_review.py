"""Folds you can see before they happen, and undo after (issue 15, parts 3 and 4).

A fold's plan yields a `Review` when the settings ask for a preview; the driver
answers apply, cancel, or an edited summary that is guarded again. `/unfold N`
puts fold N's originals back in place of its summary, as a journaled event,
when they fit under the fold trigger.
"""

from __future__ import annotations

import pytest

from tailrent_tui.core.messages import Folded, Unfolded
from tailrent_tui.core.policies import run_plan
from tailrent_tui.core.rungs.fold import unfold
from tailrent_tui.core.session import SessionError, replay
from tailrent_tui.core.summarize import ExtractiveSummarizer, Review, Summary, Verdict
from tailrent_tui.core.tokens import get_counter
from tailrent_tui.store.journal import load_journal
from tests.core.test_ladder_plans import FACTS, fill_past_trigger, ladder_session, prose


def manual_fold_session(**settings):
    # no ledger: these folds test the preview and the guard's repair of the summary itself
    policy, s, ctx = ladder_session(window=4000, ledger=False, **settings)
    s.add("user", FACTS)
    for i in range(1, 9):
        s.add("user" if i % 2 == 0 else "assistant", prose(i))
    return policy, s, ctx


def drive(plan, verdicts):
    """Answer Summarize with the extractive summary and each Review with the next verdict."""
    reviews: list[Review] = []
    extractive = ExtractiveSummarizer()
    try:
        request = next(plan)
        while True:
            if isinstance(request, Review):
                reviews.append(request)
                request = plan.send(verdicts.pop(0))
            else:
                request = plan.send(Summary(text=extractive.summarize(request.span), by=extractive.name))
    except StopIteration as stop:
        return stop.value, reviews


def test_a_manual_fold_is_shown_before_it_applies_and_cancel_changes_nothing():
    policy, s, ctx = manual_fold_session(fold_preview="manual")
    before = [m.id for m in s.messages]
    events, reviews = drive(policy.fold_by_hand(s, ctx, None), [Verdict(apply=False)])
    assert len(reviews) == 1 and events == []
    review = reviews[0]
    assert [m.id for m in review.span] == review.record.span_ids
    assert review.record.tokens_after < review.record.tokens_before
    assert [m.id for m in s.messages] == before and not s.folds


def test_an_approved_preview_applies_exactly_the_fold_it_showed():
    policy, s, ctx = manual_fold_session(fold_preview="manual")
    events, reviews = drive(policy.fold_by_hand(s, ctx, None), [Verdict(apply=True)])
    folded = [e for e in events if isinstance(e, Folded)]
    assert len(folded) == 1 and folded[0].fold == reviews[0].record


def test_an_edited_summary_is_guarded_again_and_shown_again():
    policy, s, ctx = manual_fold_session(fold_preview="manual")
    # the edit drops the port and the region: the guard (repair) puts them back and says so
    edit = Verdict(apply=True, text="We talked about the API and chatted.")
    events, reviews = drive(policy.fold_by_hand(s, ctx, None), [edit, Verdict(apply=True)])
    assert len(reviews) == 2
    again = reviews[1].record
    assert again.summarizer == "you (edited)"
    assert "We talked about the API and chatted." in again.summary.content
    assert any("5433" in f for f in again.facts_repaired) and not again.facts_lost
    assert "5433" in again.summary.content
    (folded,) = [e for e in events if isinstance(e, Folded)]
    assert folded.fold == again


def test_an_edit_that_grows_the_fold_is_not_applied():
    policy, s, ctx = manual_fold_session(fold_preview="manual")
    huge = " ".join(prose(i, 200) for i in range(20))
    _events, reviews = drive(policy.fold_by_hand(s, ctx, None), [Verdict(apply=True, text=huge), Verdict(apply=True)])
    assert reviews[1].record.tokens_after >= reviews[1].record.tokens_before
    assert not s.folds and "would not be smaller" in s.skipped[-1].reason


def test_automatic_folds_are_shown_only_with_always():
    for mode, shown in (("manual", 0), ("always", 1), ("never", 0)):
        policy, s, ctx = ladder_session(window=2000, fold_preview=mode)
        fill_past_trigger(s, ctx)
        _events, reviews = drive(policy.after_add(s, ctx), [Verdict(apply=True)] * 5)
        assert (len(reviews) >= 1) == bool(shown), mode
        assert s.folds, mode


def test_core_driver_applies_a_review_nobody_can_see():
    policy, s, ctx = manual_fold_session(fold_preview="always")
    events = run_plan(policy.fold_by_hand(s, ctx, None), ExtractiveSummarizer())
    assert any(isinstance(e, Folded) for e in events)


def test_unfold_puts_the_originals_back_where_the_summary_was():
    policy, s, ctx = manual_fold_session()
    originals = {m.id: m.clone() for m in s.messages}
    order = [m.id for m in s.messages]
    context = s.context_tokens
    events = run_plan(policy.fold_by_hand(s, ctx, None), ExtractiveSummarizer())
    (folded,) = [e for e in events if isinstance(e, Folded)]
    record = folded.fold
    assert s.context_tokens < context
    back = [originals[i] for i in record.span_ids]
    ev = unfold(s, record.fold_no, back, limit=ctx.settings.trigger_tokens)
    assert isinstance(ev, Unfolded) and s.unfolded == {record.fold_no: ev}
    assert [m.id for m in s.messages] == order
    assert s.context_tokens == context
    assert record.summary.id not in s
    # twice is refused with a reason
    with pytest.raises(SessionError, match="undone already"):
        unfold(s, record.fold_no, back, limit=ctx.settings.trigger_tokens)


def test_unfold_refuses_when_the_originals_would_not_fit_under_the_trigger():
    policy, s, ctx = manual_fold_session()
    originals = {m.id: m.clone() for m in s.messages}
    run_plan(policy.fold_by_hand(s, ctx, None), ExtractiveSummarizer())
    record = s.folds[-1]
    back = [originals[i] for i in record.span_ids]
    limit = s.context_tokens + 10
    with pytest.raises(SessionError, match=r"over the fold trigger .* tokens must go first"):
        unfold(s, record.fold_no, back, limit=limit)
    assert record.summary.id in s and not s.unfolded


def test_a_fold_by_hand_over_a_summary_leaves_the_summary_alone_so_either_fold_can_be_undone():
    # depth one: a span the user marks across an earlier summary folds the messages around it, never the summary
    policy, s, ctx = manual_fold_session()
    originals = {m.id: m.clone() for m in s.messages}
    first = run_plan(policy.fold_by_hand(s, ctx, [m.id for m in s.messages[:4]]), ExtractiveSummarizer())
    one = next(e for e in first if isinstance(e, Folded)).fold
    second = run_plan(policy.fold_by_hand(s, ctx, [m.id for m in s.messages[:3]]), ExtractiveSummarizer())
    two = next(e for e in second if isinstance(e, Folded)).fold
    assert one.summary.id not in two.span_ids and two.depth == 1
    unfold(s, one.fold_no, [originals[i] for i in one.span_ids], limit=10**6)
    assert all(i in s for i in one.span_ids)


async def test_the_agent_unfolds_from_its_archive_and_the_journal_replays_it(make_agent):
    agent = make_agent(window=4000, fold={"summarizer": "extractive"})
    agent.session.add("user", FACTS)
    for i in range(1, 9):
        agent.session.add("user" if i % 2 == 0 else "assistant", prose(i))
    order = [m.id for m in agent.session.messages]
    result = await agent.ladder.fold()
    assert isinstance(result, Folded)
    agent.ladder.unfold(result.fold.fold_no)
    assert [m.id for m in agent.session.messages] == order
    agent.journal.flush()
    events = load_journal(agent.journal.path).events
    again = replay(events, counter=get_counter(agent.session.counter.name), window=agent.session.window)
    assert [m.id for m in again.messages] == order and set(again.unfolded) == {result.fold.fold_no}


async def test_the_agent_asks_its_reviewer_and_applies_the_edit(make_agent):
    agent = make_agent(window=4000, fold={"summarizer": "extractive"})
    agent.session.add("user", FACTS)
    for i in range(1, 9):
        agent.session.add("user" if i % 2 == 0 else "assistant", prose(i))
    seen: list[Review] = []

    async def reviewer(review: Review) -> Verdict:
        seen.append(review)
        return Verdict(apply=True, text="Port and region, see facts.") if len(seen) == 1 else Verdict(apply=True)

    agent.ladder.on_review = reviewer
    result = await agent.ladder.fold()
    assert isinstance(result, Folded) and len(seen) == 2
    # the fact stays in the context: the ledger pinned its message on arrival, or the guard repaired the edit
    assert result.fold.summarizer == "you (edited)" and "5433" in agent.session.visible_text()
    assert not result.fold.facts_lost
