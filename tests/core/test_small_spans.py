"""A span too small for a summary to pay for itself (issue 23).

On llama.cpp at a 2,048 window, with the ledger holding the pins' budget, the only raw text the
ladder could take after a reply was the previous 8-token reply: it asked the model for a summary of
it twice a turn (65 and ~300 tokens read, 32 written, refused as no smaller) before retiring the
old summaries anyway. Depth one: the summaries leave for a pointer, no summary is asked.
"""

from __future__ import annotations

from tailrent_tui.core.guard import DecisionDetector
from tailrent_tui.core.messages import Kind
from tailrent_tui.core.policies import PolicyContext, PolicySettings, get_policy, run_plan
from tailrent_tui.core.rungs.fold import MemoryFoldArchive, apply_fold, prepare_fold
from tailrent_tui.core.rungs.spill import MemorySpillStore
from tailrent_tui.core.session import Session
from tailrent_tui.core.summarize import LossySummarizer
from tailrent_tui.core.tokens import get_counter

PROSE = (
    "We looked at the logs again and the numbers moved a little since yesterday; the team wants a short "
    "answer before the standup, so keep it brief and say what you would try next. "
)


class Counting(LossySummarizer):
    """The lossy summarizer, counting the spans it was asked for (each is a request on a real engine)."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[int] = []

    def summarize(self, span):  # type: ignore[no-untyped-def]
        self.asked.append(sum(m.tokens for m in span))
        return super().summarize(span)


def crowded(placement: str = "after"):
    """Six summaries of earlier turns, each followed by its short reply, then the user's new message:
    the reply to it takes the context past the trigger, and the raw text outside the last two
    messages is the short replies."""
    window = 2048
    policy = get_policy("ladder")
    s = Session(
        counter=get_counter("cl100k"),
        system="You are a coding agent.",
        window=window,
        decisions=DecisionDetector(),
        detect_statements=False,
    )
    ctx = PolicyContext(
        spill_store=MemorySpillStore(),
        archive=MemoryFoldArchive(),
        settings=PolicySettings(window=window, fold_placement=placement),
    )
    for i in range(6):
        asked = s.add("user", f"round {i}: " + PROSE * 5, autopin=False)
        s.add("assistant", "Looking at it.", autopin=False)
        summary = f"- round {i}: the logs moved, the user wants a short answer; " + PROSE * 6
        apply_fold(s, prepare_fold(s, [asked.id], summary=summary, summarizer_name="x", guard="off", position=placement), None)
    s.add("user", "round 6: " + PROSE * 10, autopin=False)
    return policy, s, ctx


def test_a_span_too_small_to_save_anything_retires_summaries_instead_of_asking_one():
    policy, s, ctx = crowded()
    summaries = [m.id for m in s.messages if m.kind is Kind.fold_summary]
    s.add("assistant", "The answer to this question is:", autopin=False)  # past the trigger
    assert s.context_tokens > ctx.settings.trigger_tokens
    raw = [m for m in s.messages[:-2] if not m.pinned and m.kind is not Kind.fold_summary]
    assert sum(m.tokens for m in raw) < policy.min_pass_tokens  # only short replies are left to fold
    counting = Counting()
    run_plan(policy.after_add(s, ctx), counting)
    assert counting.asked == [], "no summary is asked of a span that cannot pay for its request"
    assert s.retired, "the oldest summaries left for a pointer"
    assert sum(1 for i in summaries if i in s) < len(summaries)
    assert s.context_tokens <= ctx.settings.trigger_tokens
    assert max((f.depth for f in s.folds), default=1) == 1


def test_with_no_summary_left_to_retire_the_small_span_is_still_asked():
    policy, s, ctx = crowded()
    for m in [m for m in s.messages if m.kind is Kind.fold_summary]:
        s.pin(m.id)  # pinned summaries cannot retire: the span is the only thing left to take
    s.add("assistant", "The answer to this question is:", autopin=False)
    counting = Counting()
    run_plan(policy.after_add(s, ctx), counting)
    assert counting.asked, "when nothing can retire, the ladder still tries the span"
    assert not s.retired
