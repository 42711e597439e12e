"""The agent loop end to end: one turn with the mock, usage against the rent
prediction, the journal on disk, every model fault through the agent (on a
fake Ollama on loopback), the real llama.cpp engine, and the policy folding
in the loop.

Agents are built the way the app builds them (`build_agent` with a tmp data
dir); the mock's script is swapped in where a test needs exact replies.
"""

from __future__ import annotations

import asyncio
import json
import socket

import pytest

from tailrent_tui.agent.loop import RequestStarted, TurnCallbacks
from tailrent_tui.core.messages import Kind, MessageAdded, Note, UsageRecorded
from tailrent_tui.models.errors import (
    Busy,
    ConnectionRefused,
    MalformedChunk,
    ModelError,
    ModelNotFound,
    ReadTimeout,
    ServerError,
    StreamCut,
    StreamError,
)
from tailrent_tui.models.ollama import OllamaModel
from tailrent_tui.models.openai import OpenAIModel
from tailrent_tui.store.sessions import SessionDir
from tests.support.fake_ollama import FakeModel, FakeOllama, Reply, fake_ollama  # noqa: F401

OLLAMA_MODEL = "llama3.2:latest"


# -- helpers ------------------------------------------------------------------------------


class Recorder:
    """TurnCallbacks that remember everything the loop told the caller."""

    def __init__(self) -> None:
        self.deltas: list[str] = []
        self.notices: list[tuple[str, str]] = []
        self.reply_starts = 0
        self.requests_started: list[RequestStarted] = []
        self.tool_calls = []
        self.tool_results = []

    def on_text(self, text: str) -> None:
        self.deltas.append(text)

    def on_reply_start(self, started: RequestStarted) -> None:
        self.reply_starts += 1
        self.requests_started.append(started)

    def callbacks(self, **overrides) -> TurnCallbacks:
        return TurnCallbacks(
            on_text=self.on_text,
            on_notice=lambda text, level: self.notices.append((text, level)),
            on_reply_start=self.on_reply_start,
            on_tool_call=self.tool_calls.append,
            on_tool_result=self.tool_results.append,
            **overrides,
        )


def snapshot(session) -> list[tuple]:
    """What must survive a replay: every message as it stands, and every usage record."""
    msgs = [
        (m.id, m.role, m.content, m.kind, m.pinned, m.tool_call_id, m.spill_id, m.meta, [c.id for c in m.tool_calls])
        for m in session.messages
    ]
    usage = [u.model_dump() for u in session.usage]
    return [msgs, usage, session.context_tokens, len(session.folds)]


def journal_user_texts(agent) -> list[str]:
    """User messages as the journal on disk has them (read back, not from memory)."""
    events = SessionDir(agent.session_dir.path).events()
    return [e.message.content for e in events if isinstance(e, MessageAdded) and e.message.role == "user"]


def closed_port_url() -> str:
    """A loopback URL where nothing listens (the port was just released)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return f"http://127.0.0.1:{port}"


# -- one turn with the mock ----------------------------------------------------------------


async def test_turn_streams_the_reply_and_keeps_both_messages(make_agent):
    reply_text = "The refresh tokens live in Redis with a TTL of 15 minutes, per the audit."
    agent = make_agent([reply_text])
    rec = Recorder()
    result = await agent.turn("Where do refresh tokens live?", rec.callbacks())

    assert result.error is None and not result.cancelled
    assert result.reply is not None and result.reply.content == reply_text
    assert len(rec.deltas) > 1, "the reply must arrive in pieces"
    assert "".join(rec.deltas) == reply_text
    assert rec.reply_starts == 1
    roles = [(m.role, m.kind) for m in agent.session.messages]
    assert roles == [("user", Kind.chat), ("assistant", Kind.chat)]
    assert agent.session.messages[0].content == "Where do refresh tokens live?"
    assert agent.session.messages[1].id == result.reply.id


async def test_a_request_says_what_the_server_reads_and_how_long_only_at_a_measured_rate(make_agent):
    agent = make_agent(["First answer.", "Second answer."])
    rec = Recorder()
    await agent.turn("What is the TTL of refresh tokens?", rec.callbacks())
    first = rec.requests_started[0]
    assert first.to_read == agent.session.usage[-1].predicted_evaluated and first.to_read > 0
    assert first.read_seconds is None, "the sheet's guess of a speed is no measure: no estimate before the server's"
    # what llama.cpp reports in its timings: 1,000 prompt tokens read in 2 s
    agent.session.emit(
        UsageRecorded(
            request_no=9,
            context_tokens=1000,
            evaluated_tokens=1000,
            prompt_ms=2000.0,
            model=agent.model.name,
            at=agent.session.clock(),
        )
    )
    await agent.turn("And why that TTL?", rec.callbacks())
    second = rec.requests_started[1]
    assert second.to_read == agent.session.usage[-1].predicted_evaluated
    assert second.read_seconds == pytest.approx(second.to_read / 500)
    assert second.context_tokens == agent.session.usage[-1].context_tokens


async def test_usage_recorded_with_prediction_and_measurement(make_agent):
    agent = make_agent(["First answer, short.", "Second answer, short."])
    first = await agent.turn("What is the TTL of refresh tokens?")
    second = await agent.turn("And why that TTL?")

    assert len(first.usage) == 1 and len(second.usage) == 1
    u1, u2 = agent.session.usage[:2]
    assert isinstance(u1, UsageRecorded) and isinstance(u2, UsageRecorded)
    assert (u1.request_no, u2.request_no) == (1, 2)
    for u in (u1, u2):
        # predicted: the rent model's view of the context
        assert u.context_tokens > 0
        assert u.predicted_cached + u.predicted_evaluated == u.context_tokens
        # measured: what the server (the mock engine) reported
        assert u.prompt_tokens and u.prompt_tokens > 0
        assert u.cached_tokens + u.evaluated_tokens == u.prompt_tokens
        assert u.output_tokens > 0
        assert u.done_reason == "stop"
        assert u.model == "mock"
    # Nothing was cached before the first request, by either account.
    assert u1.predicted_cached == 0 and u1.cached_tokens == 0
    # The second request extends the first: both the prediction and the engine see a cached prefix.
    assert u2.predicted_cached > 0 and u2.cached_tokens > 0
    assert u2.context_tokens > u1.context_tokens


async def test_journal_replays_to_the_same_session(make_agent, workspace):
    (workspace / "notes.md").write_text("refresh tokens: Redis, TTL 15 minutes\n")
    agent = make_agent(
        [
            "Sure.",
            {"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.md"}}]},
            "DECISION: keep them in Redis because the audit asks for it.",
        ]
    )
    await agent.turn("Hello there.")
    await agent.turn("Read notes.md and decide where tokens live.")
    before = snapshot(agent.session)
    await agent.aclose()

    replayed, load = SessionDir(agent.session_dir.path).replay()
    assert snapshot(replayed) == before
    assert not load.warnings


async def test_mock_script_file_through_the_model_spec(make_agent, tmp_path, workspace):
    (workspace / "a.txt").write_text("alpha\n")
    script = tmp_path / "script.jsonl"
    script.write_text(
        json.dumps({"tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}]})
        + "\n"
        + json.dumps({"text": "There is one file."})
        + "\n"
    )
    agent = make_agent(model=f"mock:{script}")
    result = await agent.turn("What is in the workspace?")
    assert result.reply.content == "There is one file."
    listing = next(m for m in agent.session.messages if m.role == "tool")
    assert listing.tool == "list_dir" and "a.txt" in listing.content


async def test_empty_message_is_refused_and_nothing_is_added(make_agent):
    agent = make_agent(["unused"])
    with pytest.raises(ValueError, match="empty"):
        await agent.turn("   ")
    assert agent.session.messages == []
    assert agent.model.requests == []


async def test_tools_unsupported_from_the_model_retries_without_tools(make_agent):
    agent = make_agent([{"fault": "tools_unsupported"}, "Answered without tools."])
    rec = Recorder()
    result = await agent.turn("Grep for TTL.", rec.callbacks())
    assert result.error is None
    assert result.reply.content == "Answered without tools."
    assert any("without tools" in n for n in result.notices)
    assert any("without tools" in text and level == "warning" for text, level in rec.notices)
    assert len([text for text, _ in rec.notices if "tools" in text]) == 1, "one fault, one warning"
    # the retry carries the text protocol (issue 26, item 2): a pinned note before the reply
    roles = [(m.role, m.pinned) for m in agent.session.messages]
    assert roles == [("user", False), ("system", True), ("assistant", False)]


async def test_done_reason_length_is_said(make_agent):
    agent = make_agent([{"text": "This reply was cut at the", "done_reason": "length"}])
    rec = Recorder()
    result = await agent.turn("Write a long essay.", rec.callbacks())
    assert result.error is None
    assert result.reply.content == "This reply was cut at the"
    assert any("length" in n for n in result.notices)
    assert any("length" in text for text, _ in rec.notices)
    assert any("length" in n.text for n in agent.session.notes)
    assert agent.session.usage[-1].done_reason == "length"


# -- faults through the agent, on a fake Ollama over real HTTP -------------------------------


@pytest.fixture
def ollama_agent(make_agent, fake_ollama, monkeypatch):
    """An agent on the fake Ollama, picked from its spec like the app does."""
    monkeypatch.setenv("OLLAMA_HOST", fake_ollama.url)

    def make(name: str = OLLAMA_MODEL, **overrides):
        values = {"model": f"ollama:{name}", "window": 4096, "request_timeout": 5.0}
        values.update(overrides)
        agent = make_agent(**values)
        assert isinstance(agent.model, OllamaModel)
        return agent

    return make


def assert_fault_kept_the_message(agent, result, question: str, kind: type[ModelError]) -> None:
    assert isinstance(result.error, kind), result.error
    assert result.error.message.strip()
    assert result.error.hint.strip()
    users = [m.content for m in agent.session.messages if m.role == "user"]
    assert users == [question]
    assert journal_user_texts(agent) == [question]
    errors = [n for n in agent.session.notes if n.level == "error"]
    assert errors and result.error.message in errors[-1].text
    on_disk = [e for e in SessionDir(agent.session_dir.path).events() if isinstance(e, Note) and e.level == "error"]
    assert on_disk and result.error.message in on_disk[-1].text


async def assert_retry_works(agent, fake, question: str) -> None:
    result = await agent.turn(None)
    assert result.error is None
    assert result.reply is not None and result.reply.content == Reply().content
    last_request = fake.requests[-1]["messages"]
    assert [m["content"] for m in last_request if m["role"] == "user"] == [question]
    assert [m.content for m in agent.session.messages if m.role == "user"] == [question]


FAULTS = [
    pytest.param(
        Reply(fault="status", status=500, error="CUDA error: out of memory"), ServerError, "out of memory", id="http-500"
    ),
    pytest.param(Reply(fault="status", status=503, error="server busy, please try again"), Busy, "busy", id="http-503"),
    pytest.param(
        Reply(content="The TTL is fifteen minutes.", fault="error_line", error="model runner has unexpectedly stopped"),
        StreamError,
        "unexpectedly stopped",
        id="error-line-mid-stream",
    ),
    pytest.param(Reply(content="The TTL is fifteen minutes.", fault="cut"), StreamCut, "", id="connection-cut"),
    pytest.param(Reply(content="The TTL is fifteen minutes.", fault="cut_clean"), StreamCut, "", id="stream-ends-without-done"),
    pytest.param(Reply(content="The TTL is fifteen minutes.", fault="malformed"), MalformedChunk, "", id="malformed-line"),
]


@pytest.mark.parametrize(("reply", "kind", "words"), FAULTS)
async def test_fault_keeps_the_message_and_a_retry_works(ollama_agent, fake_ollama, reply, kind, words, monkeypatch):
    from tailrent_tui.agent import turn as turn_module

    # a busy server is asked again after a wait (tests/agent/test_turn.py); here the fault is kept
    monkeypatch.setattr(turn_module, "BUSY_WAITS", ())
    agent = ollama_agent()
    question = "What is the TTL of refresh tokens?"
    fake_ollama.push(reply)
    result = await agent.turn(question)
    assert_fault_kept_the_message(agent, result, question, kind)
    assert words in result.error.message
    assert not agent.session.usage, "a failed request records no usage"
    partial = [m for m in agent.session.messages if m.role == "assistant"]
    if reply.fault in ("error_line", "cut", "cut_clean", "malformed"):
        # the lines streamed before the fault are kept, marked incomplete
        assert len(partial) == 1 and partial[0].meta.get("incomplete") is True
        assert reply.content.startswith(partial[0].content) and partial[0].content
    else:
        assert partial == []
    await assert_retry_works(agent, fake_ollama, question)


async def test_stall_is_a_read_timeout_and_a_retry_works(ollama_agent, fake_ollama):
    agent = ollama_agent(request_timeout=0.5)
    question = "Summarize the auth module."
    fake_ollama.push(Reply(content="The auth module", fault="stall", lines_before_fault=1))
    result = await agent.turn(question)
    assert_fault_kept_the_message(agent, result, question, ReadTimeout)
    assert "0.5 s" in result.error.message
    # the client hung up on the stalled stream
    assert await asyncio.to_thread(fake_ollama.disconnected.wait, 10)
    await assert_retry_works(agent, fake_ollama, question)


async def test_unknown_model_says_how_to_pull_it_and_a_retry_works_once_pulled(ollama_agent, fake_ollama):
    agent = ollama_agent("qwen-ghost:7b")
    question = "Hello?"
    result = await agent.turn(question)
    assert_fault_kept_the_message(agent, result, question, ModelNotFound)
    assert "ollama pull qwen-ghost:7b" in result.error.hint
    fake_ollama.models["qwen-ghost:7b"] = FakeModel("qwen-ghost:7b")  # the user pulled it
    await assert_retry_works(agent, fake_ollama, question)


async def test_connection_refused_and_a_retry_once_the_server_answers(make_agent, monkeypatch):
    url = closed_port_url()
    monkeypatch.setenv("OLLAMA_HOST", url)
    agent = make_agent(model=f"ollama:{OLLAMA_MODEL}", window=4096)
    question = "Are you there?"
    result = await agent.turn(question)
    assert_fault_kept_the_message(agent, result, question, ConnectionRefused)
    assert url in result.error.message
    assert "OLLAMA_HOST" in result.error.hint or "ollama serve" in result.error.hint
    with FakeOllama() as fake:
        # the user started Ollama (here on another port, so the test never races for one)
        agent.model.base_url = fake.url
        await assert_retry_works(agent, fake, question)


async def test_tools_not_supported_retries_without_tools_and_says_so(ollama_agent, fake_ollama):
    fake_ollama.models["tiny:1b"] = FakeModel("tiny:1b", tools=False)
    agent = ollama_agent("tiny:1b")
    rec = Recorder()
    result = await agent.turn("List the files.", rec.callbacks())
    assert result.error is None
    assert result.reply.content == Reply().content
    assert any("tools" in n for n in result.notices)
    assert any("tools" in text and level == "warning" for text, level in rec.notices)
    first, second = fake_ollama.requests
    assert first.get("tools") and not second.get("tools")
    # later requests leave the tools out from the start
    await agent.turn("And now?")
    assert len(fake_ollama.requests) == 3 and not fake_ollama.requests[2].get("tools")


async def test_done_reason_length_from_ollama_is_said(ollama_agent, fake_ollama):
    agent = ollama_agent()
    fake_ollama.push(Reply(content="An essay that stops mid", done_reason="length"))
    result = await agent.turn("Write an essay.")
    assert result.error is None and result.reply.content == "An essay that stops mid"
    assert any("length" in n for n in result.notices)
    assert agent.session.usage[-1].done_reason == "length"


async def test_cancel_mid_stream_keeps_the_partial_reply_marked(ollama_agent, fake_ollama):
    agent = ollama_agent()
    question = "Explain the cache TTL."
    fake_ollama.push(Reply(content="The cache TTL is five minutes by default.", fault="stall", lines_before_fault=3))
    rec = Recorder()
    got_three = asyncio.Event()

    def on_text(text: str) -> None:
        rec.deltas.append(text)
        if len(rec.deltas) >= 3:
            got_three.set()

    task = asyncio.create_task(agent.turn(question, TurnCallbacks(on_text=on_text)))
    await asyncio.wait_for(got_three.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    partial = agent.session.messages[-1]
    assert partial.role == "assistant"
    assert partial.meta.get("cancelled") is True
    assert partial.content == "".join(rec.deltas) and partial.content
    assert [m.content for m in agent.session.messages if m.role == "user"] == [question]
    assert any("cancelled" in n.text for n in agent.session.notes)
    # the server read the prompt: the request is counted, as predicted, marked cancelled
    counted = [u for u in agent.session.usage if u.cancelled]
    assert len(counted) == 1 and counted[0].purpose == "turn" and counted[0].prompt_tokens is None
    assert counted[0].predicted_evaluated > 0
    # the connection was dropped, so the server stops generating
    assert await asyncio.to_thread(fake_ollama.disconnected.wait, 10)
    # both the message and the marked partial reply are on disk
    events = SessionDir(agent.session_dir.path).events()
    added = [e.message for e in events if isinstance(e, MessageAdded)]
    assert added[-1].meta.get("cancelled") is True and added[-1].content == partial.content
    # what is counted is what is sent: the cut-off reply is shown, never sent, never counted
    assert partial.cut_off == "cancelled"
    assert agent.session.context_tokens == agent.session.head_tokens + sum(
        m.tokens for m in agent.session.messages if m is not partial
    )
    assert "Explain" in agent.session.visible_text() and partial.content not in agent.session.visible_text()
    exported = agent.stores.export("md", agent.workspace / "out.md").read_text(encoding="utf-8")
    assert "cancelled: cut off, never sent to the model" in exported
    await assert_retry_works(agent, fake_ollama, question)
    assert agent.session.usage[-1].context_tokens == agent.session.context_tokens - agent.session.messages[-1].tokens


# -- the real llama.cpp engine -------------------------------------------------------------


@pytest.mark.engine
async def test_engine_turns_record_server_usage_and_cache_reuse(make_agent, llama_server, monkeypatch):
    # cl100k, so the tool schema is counted as JSON until the server's prompt shows it was left out
    # (the server's own tokenizer, `auto`, measures it at 0 from the start: tests/ui/test_morning_after.py)
    agent = make_agent(
        model=f"openai:{llama_server}", window=4096, system_prompt="You are a terse assistant.", tokenizer="cl100k"
    )
    assert isinstance(agent.model, OpenAIModel)
    # gemma3-270m is a base model that rarely stops by itself: cap each reply so a turn takes a second
    base_options = agent.request_options
    monkeypatch.setattr(agent, "request_options", lambda: {**base_options(), "max_tokens": 8})

    first = await agent.turn("Where do refresh tokens live?")
    if first.error is not None and "tool" in first.error.message.lower():
        pytest.fail(f"the engine refused the tools and the agent did not recover: {first.error}")
    assert first.error is None, first.error
    second = await agent.turn("And what is their TTL?")
    assert second.error is None, second.error

    u1, u2 = agent.session.usage[:2]
    for u in (u1, u2):
        assert u.prompt_tokens > 0
        assert u.cached_tokens is not None and u.evaluated_tokens is not None
        assert u.cached_tokens + u.evaluated_tokens == u.prompt_tokens
        assert 0 < u.output_tokens <= 8
        assert u.prompt_ms is not None and u.generation_ms is not None
    assert u2.cached_tokens > 0
    assert u2.prompt_tokens > u1.prompt_tokens
    assert u2.predicted_cached > 0
    # this server (no --jinja) leaves the tool schema out of the prompt: the agent says so
    # and stops counting it, so the prediction tracks what the engine really evaluates
    assert u1.prompt_tokens < 1000
    assert any("ignores tools" in n.text for n in agent.session.notes)
    assert agent.session.tool_schema_tokens == 0
    assert abs(u2.context_tokens - u2.prompt_tokens) < u2.prompt_tokens


# -- the policy in the loop ---------------------------------------------------------------

DECISION = "DECISION: keep refresh tokens in Redis because the audit requires a 15 minute TTL."
FILLER_WORDS = (
    "we looked at the handler and the queue and the retry logic and talked about how the "
    "workers pick up jobs when the broker restarts and what the logs show during the night "
)


def filler(turn: int) -> str:
    # about 300 tokens of plain prose per message, different each turn
    return f"turn {turn} notes. " + FILLER_WORDS * 9


@pytest.mark.parametrize("policy", ["ladder", "none"])
async def test_tiny_window_folds_under_ladder_only(make_agent, policy):
    agent = make_agent(policy=policy, window=4096, system_prompt="Be brief.")
    trigger = int(agent.session.window * agent.settings.fold.trigger)
    await agent.turn(DECISION)
    decision = agent.session.messages[0]
    turns = 1
    while turns < 20 and not agent.session.folds and agent.session.context_tokens <= trigger:
        await agent.turn(filler(turns))
        turns += 1

    if policy == "ladder":
        assert agent.session.folds, f"no fold after {turns} turns"
        kept = agent.session.get(decision.id)
        assert kept is not None and kept.pinned
        assert decision.id not in agent.session.folds[0].span_ids
        # the decision is still sent with the next request
        await agent.turn("What did we decide?")
        sent = agent.model.requests[-1]
        assert any(m["content"] == DECISION for m in sent)
        assert agent.session.context_tokens <= trigger
    else:
        assert not agent.session.folds
        assert agent.session.context_tokens > trigger
        sent = len(agent.model.requests)
        result = await agent.turn("What did we decide?")
        assert not agent.session.folds
        # `none` never folds, and a request past the window (with room for the reply) is never sent
        assert agent.session.context_tokens + agent.budget.reply_cap() > agent.session.window
        assert result.error is not None and result.error.message.startswith("not sent")
        assert len(agent.model.requests) == sent
        assert agent.session.messages[-1].content == "What did we decide?"


async def test_ladder_folds_with_the_model_as_summarizer(make_agent):
    agent = make_agent(policy="ladder", window=4096, system_prompt="Be brief.", fold={"summarizer": "model"})
    summarizer_model = agent.fold_requests.summarizer.model
    trigger = int(agent.session.window * agent.settings.fold.trigger)
    await agent.turn(DECISION)
    turns = 1
    while turns < 20 and not agent.session.folds:
        await agent.turn(filler(turns))
        turns += 1
    assert agent.session.folds, f"no fold after {turns} turns"
    fold = agent.session.folds[0]
    assert fold.summarizer.startswith("model:")
    # the summary was asked of the model, with the span's text in the request
    summary_requests = [r for r in summarizer_model.requests if r[0]["role"] == "system" and "Summarize" in r[-1]["content"]]
    assert summary_requests
    assert agent.session.messages[0].content == DECISION and agent.session.messages[0].pinned
    assert agent.session.context_tokens <= trigger


@pytest.mark.parametrize(
    ("entry", "pinned"),
    [
        ({"text": "DECISION: keep port 8443 because the firewall allows it."}, True),
        # ran to its token cap: a base model rambling on, not a decision to pin whole
        ({"text": "DECISION: keep port 8443 because the firewall allows it. " * 20, "done_reason": "length"}, False),
        # writes the chat template's own tokens: the same rambling
        ({"text": "We decided to keep port 8443 because it is open.<|im_end|> <|im_start|>user We decided"}, False),
    ],
)
async def test_a_runaway_reply_is_not_auto_pinned(make_agent, entry, pinned):
    agent = make_agent([entry])
    result = await agent.turn("Which port?", TurnCallbacks())
    assert result.reply is not None and result.reply.pinned is pinned
    assert result.reply.meta.get("truncated", False) is (entry.get("done_reason") == "length")


async def test_a_model_switch_moves_the_summaries_and_the_cache_life_to_the_new_model(make_agent, tmp_path):
    agent = make_agent(window=4096, system_prompt="Be brief.", fold={"summarizer": "model"})
    old = agent.model
    for turn in range(4):
        await agent.turn(filler(turn))
    asked_before = len(old.requests)
    assert agent.placement.detected
    script = tmp_path / "new.jsonl"
    script.write_text(json.dumps({"text": "turn notes: the handler, the queue and the retry logic."}) + "\n")
    await agent.switch_model(f"mock:{script}")
    new = agent.model
    # where folds go is asked of the new server at its start
    assert not agent.placement.detected
    fold = await agent.ladder.fold()
    assert fold is not None and agent.session.folds, fold
    # the summary was asked of the new model, not of the one switched away from
    assert len(old.requests) == asked_before
    assert any("Summarize" in r[-1]["content"] for r in new.requests)
    assert new.remaining == 0
    # the price sheet's cache life is the new server's: Ollama's keep_alive, llama.cpp's slot (no clock)
    await agent.switch_model(f"ollama:{OLLAMA_MODEL}")
    assert agent.rent.sheet.ttl_seconds == 24 * 3600
    assert agent.fold_requests.summarizer.model is agent.model
    await agent.switch_model("openai:http://127.0.0.1:9/v1")
    assert agent.rent.sheet.ttl_seconds == float("inf")


async def test_a_model_switch_with_a_price_file_broken_since_the_start_changes_nothing(make_agent, tmp_path):
    agent = make_agent()
    old = agent.model
    config = tmp_path / "config"
    config.mkdir(exist_ok=True)
    (config / "prices.toml").write_text("[mine\n")
    with pytest.raises(ValueError, match=r"prices\.toml"):
        await agent.switch_model("mock")
    assert agent.model is old and not any("model switched" in n.text for n in agent.session.notes)
