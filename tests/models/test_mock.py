"""The mock model and the summarizers that need no server."""

from __future__ import annotations

import asyncio
import json

import pytest

from tailrent_tui.core.summarize import ExtractiveSummarizer, LossySummarizer, check_summary
from tailrent_tui.core.tokens import chars4
from tailrent_tui.models import (
    Busy,
    ChatModel,
    MockModel,
    ModelSummarizer,
    StreamCut,
    TextDelta,
    ThinkingDelta,
    ToolCallChunk,
    Usage,
)


def estimate(text: str) -> int:
    """The article's chars/4 rule, written out again so the test does not borrow the code's."""
    return 0 if text == "" else max(1, len(text) // 4)


async def collect(model, messages, **kwargs):
    return [c async for c in model.stream(messages, **kwargs)]


def text_of(chunks):
    return "".join(c.text for c in chunks if isinstance(c, TextDelta))


ASK = [{"role": "user", "content": "Where do refresh tokens live?"}]


def test_mock_is_a_chat_model():
    assert isinstance(MockModel(), ChatModel)


async def test_scripted_replies_are_consumed_in_order_then_the_default_answers(tmp_path):
    script = tmp_path / "script.jsonl"
    lines = [
        {"text": "They live in Redis with a 15 minute TTL."},
        {"thinking": "look it up", "tool_calls": [{"name": "grep", "arguments": {"pattern": "TTL"}}]},
        {"text": "Rotated on every use.", "tool_calls": [{"name": "remember", "arguments": {"fact": "rotate"}}]},
    ]
    script.write_text("\n".join(json.dumps(line) for line in lines) + "\n\n", encoding="utf-8")
    mock = MockModel(script, chunk_size=7)
    first = await collect(mock, ASK)
    assert text_of(first) == lines[0]["text"]
    assert all(len(c.text) <= 7 for c in first if isinstance(c, TextDelta))
    assert sum(isinstance(c, TextDelta) for c in first) > 1

    second = await collect(mock, ASK)
    assert [type(c) for c in second] == [ThinkingDelta, ThinkingDelta, ToolCallChunk, Usage]
    (call,) = [c for c in second if isinstance(c, ToolCallChunk)]
    assert (call.name, call.arguments, call.id) == ("grep", {"pattern": "TTL"}, "call_2_0")
    assert second[-1].done_reason == "tool_calls"

    third = await collect(mock, ASK)
    assert text_of(third) == "Rotated on every use."
    assert [c.name for c in third if isinstance(c, ToolCallChunk)] == ["remember"]
    assert mock.remaining == 0

    question = [{"role": "user", "content": "What did we decide about the retry policy"}]
    default = text_of(await collect(mock, question))
    assert default.startswith("(mock) I read your message of 8 words.")
    assert default == text_of(await collect(MockModel(), question))


async def test_mock_is_deterministic():
    script = [{"text": "same every time", "tool_calls": [{"name": "x", "arguments": {"a": 1}}]}]
    runs = []
    for _ in range(2):
        chunks = await collect(MockModel(list(script), chunk_size=4), ASK)
        runs.append([c.model_dump(exclude={"first_token_ms", "wall_ms"}) for c in chunks])
    assert runs[0] == runs[1]


async def test_usage_counts_prompt_tokens_and_the_shared_prefix():
    mock = MockModel(["Redis, 15 minutes.", "Because mobile cannot persist tokens."])
    first_ask = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Where do refresh tokens live?"}]
    one = (await collect(mock, first_ask))[-1]
    expected_prompt = estimate("system: Be brief.") + estimate("user: Where do refresh tokens live?")
    assert (one.prompt_tokens, one.cached_tokens, one.evaluated_tokens) == (expected_prompt, 0, expected_prompt)
    assert one.output_tokens == estimate("Redis, 15 minutes.")
    assert one.cache_reported

    # The next request repeats the first, the reply (as an engine's cache keeps it), and a question.
    follow = [*first_ask, {"role": "assistant", "content": "Redis, 15 minutes."}, {"role": "user", "content": "Why?"}]
    two = (await collect(mock, follow))[-1]
    assert two.cached_tokens == expected_prompt + estimate("assistant: Redis, 15 minutes.")
    assert two.evaluated_tokens == estimate("user: Why?")
    assert two.prompt_tokens == two.cached_tokens + two.evaluated_tokens

    # A new first message shares nothing.
    three = (await collect(mock, [{"role": "system", "content": "Other."}, *follow]))[-1]
    assert three.cached_tokens == 0 and three.evaluated_tokens == three.prompt_tokens


async def test_max_tokens_cuts_the_reply_and_says_length():
    long_text = "word " * 100
    chunks = await collect(MockModel([long_text]), ASK, options={"max_tokens": 10})
    assert len(text_of(chunks)) == 40
    assert chunks[-1].done_reason == "length" and chunks[-1].truncated


async def test_scripted_faults():
    mock = MockModel([{"fault": "busy"}, {"text": "half a reply", "fault": "stream_cut"}, {"text": "fine"}])
    with pytest.raises(Busy):
        await collect(mock, ASK)
    seen = []
    with pytest.raises(StreamCut):
        async for chunk in mock.stream(ASK):
            seen.append(chunk)
    assert text_of(seen) == "half a reply"
    assert text_of(await collect(mock, ASK)) == "fine"


async def test_cancelling_a_slow_mock_mid_reply():
    mock = MockModel(["one two three four five six seven"], delay=0.05, chunk_size=4)
    first = asyncio.Event()
    received = []

    async def consume():
        async for chunk in mock.stream(ASK):
            received.append(chunk)
            first.set()

    task = asyncio.create_task(consume())
    await first.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert 1 <= len(received) < 9
    assert not any(isinstance(c, Usage) for c in received)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"text": "ok"}\nnot json\n', "script.jsonl:2: not JSON"),
        ('{"words": "ok"}\n', "script.jsonl:1: a reply needs"),
        ('{"text": "ok", "fault": "explode"}\n', "fault must be one of"),
        ('{"tool_calls": [{"name": "grep", "arguments": "TTL"}]}\n', "arguments must be an object"),
        ('["text"]\n', "must be a JSON object"),
        ('{"text": "ok"}\n{"tool_calls": [{"arguments": {}}]}\n', r"script.jsonl:2: tool_calls\[0\].name is missing"),
        ('{"text": "ok", "mood": "calm"}\n', "script.jsonl:1: unknown key 'mood'"),
        ('{"text": null}\n', "script.jsonl:1: text must be a string, got NoneType"),
    ],
)
def test_bad_scripts_are_refused_with_the_line(tmp_path, content, message):
    script = tmp_path / "script.jsonl"
    script.write_text(content, encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        MockModel(script)


def test_missing_script_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="cannot read mock script"):
        MockModel(tmp_path / "nope.jsonl")


async def test_mock_reports_its_window_and_models():
    mock = MockModel(window=8192)
    assert await mock.context_window() == 8192
    assert [m.name for m in await mock.list_models()] == ["mock"]


# -- summarizers ------------------------------------------------------------------------

DECISION = (
    "DECISION: We will store refresh tokens in Redis with a 15 minute TTL and "
    "rotate them on every use, because the mobile team's client can't reliably "
    "persist tokens between app restarts."
)


def test_lossy_summarizer_keeps_the_first_twelve_words_like_the_article():
    summary = LossySummarizer().summarize(
        [
            {"role": "user", "content": DECISION},
            {"role": "assistant", "content": "Turn 3: done, no issues found."},
        ]
    )
    assert summary == (
        "- user: DECISION: We will store refresh tokens in Redis with a 15 minute...\n- assistant: Turn 3: done, no issues found."
    )
    # The article's fold #1 loses "rotate" and "mobile" and keeps the rest.
    assert "rotate" not in summary and "mobile" not in summary


def test_lossy_summarizer_splits_on_single_spaces_only():
    summary = LossySummarizer().summarize(
        [{"role": "tool", "content": "a\nb  c d e f g h i j k l m  \n"}, {"role": "user", "content": "end \n"}]
    )
    # "a\nb" is one word, runs of spaces give no empty words, and only the end is trimmed.
    assert summary == "- tool: a\nb c d e f g h i j k l m...\n- user: end"


def test_extractive_summarizer_keeps_facts_verbatim_and_shortens_the_rest():
    filler = "Okay sounds good to me and we can proceed with the rest of it later today."
    tool = " ".join(["token"] * 300)
    messages = [
        {"role": "user", "content": DECISION},
        {"role": "assistant", "content": filler + " The config lives in src/auth/tokens.py now."},
        {"role": "tool", "content": tool},
    ]
    summary = ExtractiveSummarizer().summarize(messages)
    lines = summary.split("\n")
    assert lines[0] == f"- user: {DECISION}"
    assert "src/auth/tokens.py" in lines[1] and filler not in lines[1]
    assert lines[1].startswith("- assistant: Okay sounds good to me and... The config")
    assert len(lines[2]) < 60
    for fact in ("Redis", "15 minute", "rotate", "mobile"):
        assert fact in summary


async def test_model_summarizer_asks_to_keep_facts_and_returns_the_reply():
    mock = MockModel(["- refresh tokens: Redis, 15 minute TTL, rotate on use, because mobile."])
    summarizer = ModelSummarizer(mock)
    summary = await summarizer.asummarize([{"role": "user", "content": DECISION}], budget=64)
    assert summary.text == "- refresh tokens: Redis, 15 minute TTL, rotate on use, because mobile."
    assert summary.by == "model:mock" and not summary.truncated
    system, user = mock.requests[-1]
    assert system["role"] == "system" and "verbatim" in system["content"]
    assert DECISION in user["content"]
    assert summarizer.name == "model:mock" and summarizer.last_usage is not None


async def test_model_summarizer_carries_its_budget_and_says_when_it_hit_it():
    mock = MockModel(["word " * 200])
    summary = await ModelSummarizer(mock).asummarize([{"role": "user", "content": DECISION}], budget=16)
    assert summary.truncated and len(summary.text) <= 16 * 4
    assert check_summary(summary, span_tokens=1000, count=chars4) == "it was cut at its token budget"


async def test_an_empty_model_summary_is_refused():
    summary = await ModelSummarizer(MockModel([{"text": "   "}])).asummarize([{"role": "user", "content": "x"}])
    assert check_summary(summary, span_tokens=10, count=chars4) == "it was empty"
