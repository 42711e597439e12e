"""Each policy's behaviour on small synthetic sessions."""

from __future__ import annotations

import pytest

from tailrent_tui.core.messages import Kind
from tailrent_tui.core.policies import (
    POLICY_NAMES,
    PolicyContext,
    PolicySettings,
    UnknownPolicy,
    get_policy,
    run_plan,
)
from tailrent_tui.core.rungs.spill import MemorySpillStore
from tailrent_tui.core.session import Session
from tailrent_tui.core.summarize import LossySummarizer
from tailrent_tui.core.tokens import get_counter

DECISION = "DECISION: we store sessions in Redis with a 15 minute TTL because mobile clients drop tokens."


def make(policy_name: str, window: int = 1000, **settings):
    policy = get_policy(policy_name)
    s = Session(
        counter=get_counter("chars4"), system="sys", window=window, decisions=policy.decision_detector(), clock=lambda: 0.0
    )
    ctx = PolicyContext(spill_store=MemorySpillStore(), settings=PolicySettings(window=window, **settings))
    return policy, s, ctx


def after_add(policy, s, ctx):
    """The policy's after-add plan, driven by core's synchronous driver."""
    return run_plan(policy.after_add(s, ctx), LossySummarizer())


def add(policy, s, ctx, text, role="user"):
    s.add(role, text)
    return after_add(policy, s, ctx)


def filler(i: int) -> str:
    return f"turn {i} " + "word " * 20  # about 26 chars4 tokens


def test_get_policy_knows_the_five_and_rejects_others():
    assert set(POLICY_NAMES) == {"none", "naive", "naive-pin", "autocompact", "ladder"}
    with pytest.raises(UnknownPolicy, match=r"'greedy'.*none, naive"):
        get_policy("greedy")


def test_none_never_folds_past_the_window():
    policy, s, ctx = make("none", window=200)
    for i in range(30):
        add(policy, s, ctx, filler(i))
    assert s.context_tokens > 200 and not s.folds
    assert policy.infinite_ttl


def test_naive_folds_oldest_six_at_front_once_per_add():
    policy, s, ctx = make("naive", window=400)
    while s.context_tokens <= ctx.settings.trigger_tokens:
        s.add("user", filler(len(s.messages)))
    oldest = [m.id for m in s.messages[:6]]
    events = add(policy, s, ctx, filler(99))
    assert len(events) == 1 and len(s.folds) == 1
    fold = s.folds[0]
    assert fold.span_ids == oldest and fold.position == 0
    assert s.messages[0].content.startswith("[folded 6 messages]")
    assert fold.guard == "report"


def test_naive_does_not_pin_but_naive_pin_keeps_the_decision():
    for name, kept in (("naive", False), ("naive-pin", True)):
        policy, s, ctx = make(name, window=400)
        add(policy, s, ctx, DECISION)
        for i in range(60):
            add(policy, s, ctx, filler(i))
        assert s.folds
        visible = s.visible_text()
        assert ("15 minute" in visible) is kept, name
        assert any(m.content == DECISION for m in s.messages) is kept


def test_autocompact_threshold_and_recent_keep():
    policy, s, ctx = make("autocompact", window=1000)
    threshold = int(1000 * 0.835)
    while True:
        s.add("user", filler(len(s.messages)))
        if s.context_tokens >= threshold:
            break
        assert after_add(policy, s, ctx) == []
    keep = min(20000, int(1000 * 0.15))
    recent_before = [m.id for m in s.messages]
    events = after_add(policy, s, ctx)
    assert len(events) == 1
    summary = s.messages[0]
    assert summary.kind == Kind.fold_summary
    kept = s.messages[1:]
    assert sum(m.tokens for m in kept) <= keep
    assert [m.id for m in kept] == recent_before[-len(kept) :]
    assert len(kept) >= 2


def test_ladder_folds_from_trigger_to_target_in_one_step_and_never_pins():
    policy, s, ctx = make("ladder", window=2000)
    add(policy, s, ctx, DECISION)
    assert s.messages[0].pinned
    while s.context_tokens <= ctx.settings.trigger_tokens:
        s.add("user", filler(len(s.messages)))
    events = after_add(policy, s, ctx)
    folds = [e for e in events if e.type == "folded"]
    assert folds
    assert s.context_tokens <= ctx.settings.target_tokens
    assert s.messages[0].content == DECISION and s.messages[0].pinned
    for f in s.folds:
        assert s.messages[0].id not in f.span_ids
        assert f.guard == "repair"
        assert f.position >= 1  # in place, after the pin: the prefix before survives


def test_ladder_respills_big_inline_tool_results_before_folding():
    policy, s, ctx = make("ladder", window=2000, spill_threshold=400)
    s.add("user", "please read the log")
    policy.admit_tool(s, ctx, "run_shell", "line of log output\n" * 70)  # ~330 tokens, under the threshold
    assert s.messages[-1].kind == Kind.tool_result
    while s.context_tokens <= ctx.settings.trigger_tokens:
        s.add("assistant", filler(len(s.messages)))
    events = after_add(policy, s, ctx)
    assert events[0].type == "spilled"


def test_tool_results_pass_rungs_one_and_two_for_every_policy():
    for name in POLICY_NAMES:
        policy, s, ctx = make(name, window=4000, spill_threshold=50, tool_max_lines=10)
        m = policy.admit_tool(s, ctx, "grep", "src/app/module.py:12: a matching line of code\n" * 500)
        assert m.kind == Kind.spill_pointer, name
        ((_tool, content, _),) = ctx.spill_store.items.values()
        assert content.count("module.py") == 10 and "truncated" in content
