"""Cheap folds on llama.cpp (issue 23): the geometry that lets the engine keep its cache across a fold.

- a fold placed `after` goes before the turn in flight, never after the user's new message;
- the summary travels as the instruction that asked for it and its answer, the tokens the engine
  evaluated and generated for the summary request, so the request after the fold reads only what is new;
- a chat template that forbids two user messages in a row gets them joined, said by the server once.
"""

from __future__ import annotations

import itertools

import pytest

from tailrent_tui.agent.build import build_agent
from tailrent_tui.agent.wire import summary_pair, wire_messages
from tailrent_tui.core.messages import FoldRetired, ToolCall
from tailrent_tui.core.rungs.fold import after_position, prepare_fold
from tailrent_tui.core.session import Session
from tailrent_tui.models.openai import OpenAIModel, alternated
from tailrent_tui.models.summarizer import ModelSummarizer
from tailrent_tui.settings import Settings
from tests.models.test_kv_slots import fake as fake_fixture
from tests.models.test_openai import Scripted, ScriptedServer, collect
from tests.models.test_summary_aligned import chatter

# where folds go and what they cost the engine: the filler is the user's, which the ledger would keep
pytestmark = pytest.mark.no_ledger


def conversation(turns: int) -> Session:
    s = Session(window=32768)
    for i in range(turns):
        s.add("user", f"question {i} about the parser")
        s.add("assistant", f"answer {i}: look at the tokenizer first")
    return s


def test_after_the_kept_messages_means_before_the_turn_in_flight():
    s = conversation(4)
    span = [m.id for m in s.messages[:4]]
    # a fold after a reply: the summary goes last
    assert after_position(s, span) == len(s.messages) - 4
    # a fold before the request for the user's new message: before that message
    s.add("user", "question 4: and the lexer?")
    assert after_position(s, span) == len(s.messages) - 4 - 1
    # a fold in a tool exchange: before the user's message that began the turn
    s.add("assistant", "", tool_calls=[ToolCall(id="c1", name="grep", arguments={"pattern": "lex"})])
    s.add("tool", "lexer.py:12", tool="grep", tool_call_id="c1")
    assert after_position(s, span) == len(s.messages) - 4 - 3
    # no reply after the span at all: before the last user message, never before the span's place
    t = Session(window=32768)
    for i in range(5):
        t.add("user", f"note {i}")
    assert after_position(t, [m.id for m in t.messages[:3]]) == 1


def test_a_summary_asked_in_context_travels_as_its_question_and_answer():
    s = conversation(3)
    s.add("user", "question 3: and the lexer?")
    span = [m.id for m in s.messages[:4]]
    asked = '[fold] Messages 1 to 4 (4, from "question 0 about the parser" to "answer 1: look at the...") leave the context here.'
    record = prepare_fold(
        s,
        span,
        summary="- parser questions, tokenizer first",
        summarizer_name="model:m",
        guard="off",
        position="after",
        asked=asked,
    )
    assert record.summary.content == asked + "\n- parser questions, tokenizer first"
    assert summary_pair(record.summary) == (asked, "- parser questions, tokenizer first")
    from tailrent_tui.core.rungs.fold import apply_fold

    apply_fold(s, record, None)
    wire = wire_messages(s)
    roles = [m["role"] for m in wire]
    assert roles == ["user", "assistant", "user", "assistant", "user"]
    assert wire[2] == {"role": "user", "content": asked} and wire[-1]["content"] == "question 3: and the lexer?"
    # a summary written without a question (a fallback's) is a context note as before
    plain = prepare_fold(s, [m.id for m in s.messages[:1]], summary="- q2", summarizer_name="x", guard="off")
    assert summary_pair(plain.summary) is None


async def test_the_request_after_a_fold_placed_after_reads_only_the_new_message(make_agent):
    # the model writes the summary (the mock shifts its cache as llama.cpp does with n_cache_reuse)
    agent = make_agent(window=8192, system_prompt="Be brief.", tokenizer="chars4", fold={"placement": "after", "target": 0.6})
    await agent.link.start()
    agent.fold_requests.summarizer = ModelSummarizer(agent.model)
    i = 0
    while not agent.session.folds:
        await agent.turn(chatter(i, 300))
        i += 1
    summary_request = next(u for u in agent.session.usage if u.purpose == "summary")
    turns = [u for u in agent.session.usage if u.purpose == "turn"]
    ordinary, after = turns[-2], turns[-1]
    record = agent.session.folds[0]
    assert record.summary.meta.get("asked") and record.summarizer == "model:mock"
    # the summary request read its instruction; the request after the fold the user's new message
    assert summary_request.evaluated_tokens < 0.05 * record.tokens_before
    new_message = agent.session.sent_tokens(agent.session.messages[-2])
    assert after.evaluated_tokens <= new_message + 8 < ordinary.evaluated_tokens + 16
    for u in [summary_request, *turns]:
        assert u.predicted_evaluated == pytest.approx(u.evaluated_tokens, rel=0.1, abs=8), u
    # in the context the model sees, the summary is a question and its answer, where they were asked
    roles = [m["role"] for m in wire_messages(agent.session)][1:]
    assert all(a != b for a, b in itertools.pairwise(roles)), roles


async def test_in_place_the_summary_pair_is_read_again_with_what_follows(make_agent):
    agent = make_agent(window=8192, system_prompt="Be brief.", tokenizer="chars4", fold={"placement": "in_place", "target": 0.6})
    await agent.link.start()
    agent.fold_requests.summarizer = ModelSummarizer(agent.model)
    i = 0
    while not agent.session.folds:
        await agent.turn(chatter(i, 300))
        i += 1
    turns = [u for u in agent.session.usage if u.purpose == "turn"]
    ordinary, after = turns[-2], turns[-1]
    assert after.evaluated_tokens > 2 * ordinary.evaluated_tokens
    assert after.predicted_evaluated == pytest.approx(after.evaluated_tokens, rel=0.1)


def test_runs_of_a_role_are_joined_for_a_template_that_forbids_them():
    joined = alternated(
        [
            {"role": "system", "content": "s"},
            {"role": "user", "content": "[context note]\nledger"},
            {"role": "user", "content": "asked"},
            {"role": "assistant", "content": "summary"},
            {"role": "assistant", "content": "", "tool_calls": [{"id": "c", "name": "grep", "arguments": {}}]},
            {"role": "tool", "content": "x", "tool_call_id": "c"},
            {"role": "user", "content": "next"},
        ]
    )
    assert [m["role"] for m in joined] == ["system", "user", "assistant", "assistant", "tool", "user"]
    assert joined[1]["content"] == "[context note]\nledger\n\nasked"


@pytest.fixture
def server():
    s = ScriptedServer()
    yield s
    s.stop()


async def test_a_server_whose_template_forbids_two_user_messages_gets_them_joined_from_then_on(server):
    refusal = {
        "error": {
            "code": 500,
            "message": "Conversation roles must alternate user/assistant/user/assistant/...",
            "type": "server_error",
        }
    }
    server.script = [Scripted(status=500, body=refusal)]
    model = OpenAIModel(server.url, "m", read_timeout=5.0)
    two = [{"role": "user", "content": "[context note]\nledger"}, {"role": "user", "content": "hello"}]
    out = await collect(model, two)
    assert any(getattr(c, "text", "") == "ok" for c in out)
    assert model.alternate_roles
    assert [m["role"] for m in server.requests[0]["messages"]] == ["user", "user"]
    assert [m["content"] for m in server.requests[1]["messages"]] == ["[context note]\nledger\n\nhello"]
    await collect(model, two)  # joined before it is sent: no refusal to wait for
    assert len(server.requests) == 3 and len(server.requests[2]["messages"]) == 1
    await model.aclose()


async def test_any_other_server_error_is_not_retried(server):
    server.script = [Scripted(status=500, body={"error": {"message": "out of memory"}})]
    model = OpenAIModel(server.url, "m", read_timeout=5.0)
    with pytest.raises(Exception, match="out of memory"):
        await collect(model, [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])
    assert not model.alternate_roles and len(server.requests) == 1
    await model.aclose()


def contiguous_span(session: Session) -> list[str]:
    """Four messages in a row, none pinned (the text-protocol note the server's answer brings is)."""
    msgs = session.messages
    start = max((i + 1 for i, m in enumerate(msgs[:-6]) if m.pinned), default=0)
    span = msgs[start : start + 4]
    assert not any(m.pinned for m in span)
    return [m.id for m in span]


async def slot_agent(fake, tmp_path, monkeypatch):
    """An agent on the scripted llama.cpp with --slot-save-path, four turns into its session."""
    fake.slot_dir = tmp_path / "slots"
    fake.slot_dir.mkdir()
    monkeypatch.setenv("TAILRENT_CONFIG_DIR", str(tmp_path / "config"))
    settings = Settings(
        model=f"openai:{fake.url}",
        data_dir=tmp_path / "data",
        workspace=tmp_path,
        fsync=False,
        slots={"dir": fake.slot_dir},
        tokenizer="chars4",
        window=16384,
        fold={"summarizer": "lossy"},
    )
    agent = build_agent(settings, async_writer=False, new=True)
    try:
        await agent.link.start()
        for i in range(4):
            await agent.turn(f"question {i}: " + " ".join(chatter(i, 300).split()[3:]))
    except BaseException:
        await agent.aclose()
        raise
    return agent


async def test_unfold_restores_the_slot_saved_before_the_fold(tmp_path, monkeypatch):
    # a scripted llama.cpp with --slot-save-path: the engine's prompt cache may have let the prompt
    # before the fold go; the slot saved before the fold is restored before the next request
    gen = fake_fixture.__wrapped__()
    fake = next(gen)
    try:
        agent = await slot_agent(fake, tmp_path, monkeypatch)
        try:
            folded = await agent.ladder.fold(contiguous_span(agent.session))
            assert folded is not None and agent.session.folds
            saves = [name for action, name in fake.actions if action == "save"]
            assert saves, "the slot was saved before the fold"
            agent.ladder.unfold(agent.session.folds[-1].fold_no)
            assert not [a for a in fake.actions if a[0] == "restore"], "nothing is restored before a request needs it"
            await agent.turn("and now?")
            restores = [name for action, name in fake.actions if action == "restore"]
            assert restores == [saves[-1]], [n.text for n in agent.session.notes]
            # the restore came before the request, and was said
            assert any("the slot saved before the fold" in n.text for n in agent.session.notes)
        finally:
            await agent.aclose()
    finally:
        next(gen, None)


async def test_unfold_with_the_slot_file_gone_says_so_and_the_turn_goes_on(tmp_path, monkeypatch):
    gen = fake_fixture.__wrapped__()
    fake = next(gen)
    try:
        agent = await slot_agent(fake, tmp_path, monkeypatch)
        try:
            await agent.ladder.fold(contiguous_span(agent.session))
            for f in fake.slot_dir.iterdir():
                f.unlink()  # the slot files were cleaned away meanwhile
            agent.ladder.unfold(agent.session.folds[-1].fold_no)
            before = len(fake.bodies)
            await agent.turn("and now?")
            assert len(fake.bodies) == before + 1, "the turn went on"
            assert not [a for a in fake.actions if a[0] == "restore"]
            said = [n.text for n in agent.session.notes if n.text.startswith("after /unfold")]
            assert len(said) == 1 and "no KV slot restored" in said[0]
        finally:
            await agent.aclose()
    finally:
        next(gen, None)


async def test_near_the_window_the_summary_is_asked_shorter_rather_than_losing_the_kept_messages_cache(make_agent):
    agent = make_agent(
        window=4096, fold={"placement": "after"}, system_prompt="Be brief.", tokenizer="chars4", max_reply_tokens=16
    )
    await agent.link.start()
    agent.fold_requests.summarizer = ModelSummarizer(agent.model)
    i = 0
    while not agent.session.folds:
        await agent.turn(chatter(i, 80))
        i += 1
    k = next(n for n, r in enumerate(agent.model.requests) if "leave the context." in r[-1]["content"])
    summary_request, last_turn = agent.model.requests[k], agent.model.requests[k - 1]
    # everything the engine held (the last request, then its reply), then the instruction
    assert summary_request[: len(last_turn)] == last_turn and len(summary_request) == len(last_turn) + 2
    planned = agent.budget.policy_context().settings.summary_budget(agent.session.folds[0].tokens_before)
    asked = agent.session.folds[0].summary.meta["asked"]
    fitted = int(asked.split("under ")[1].split()[0])
    assert fitted < planned
    turns = [u for u in agent.session.usage if u.purpose == "turn"]
    usage = next(u for u in agent.session.usage if u.purpose == "summary")
    assert usage.prompt_tokens + fitted <= agent.session.window
    new_message = agent.session.sent_tokens(agent.session.messages[-2])
    assert turns[-1].evaluated_tokens <= new_message + 8


async def test_a_summary_retired_on_an_engine_that_shifts_kv_costs_the_next_request_its_pointer_only(make_agent):
    # pins take most of the window, so folds are small and their summaries crowd it until the oldest is
    # retired for a pointer. Written in the summary's place near the head, the pointer was new text there
    # and the engine read everything after it again (649 tokens where an ordinary turn reads ~170); placed
    # before the turn in flight, the summaries leave their places (a deletion the engine bridges)
    agent = make_agent(window=4096, system_prompt="Be brief.", tokenizer="chars4", fold={"placement": "after"})
    await agent.link.start()
    retired_at: list[int] = []
    agent.session.listeners.append(lambda e: retired_at.append(len(agent.session.usage)) if isinstance(e, FoldRetired) else None)
    i = 0
    while not retired_at or len(agent.session.usage) <= retired_at[0]:
        assert i < 40, "no summary was retired"
        await agent.turn(chatter(i, 200 if i > 2 else 500))
        if i < 3:
            agent.ladder.pin(agent.session.messages[-2].id)
        i += 1
    turns = [u for u in agent.session.usage if u.purpose == "turn"]
    after, before = turns[retired_at[0]], turns[retired_at[0] - 1]
    # the pointer that stands for the retired folds (two retired at once merge into the later one's)
    record = next(f for f in agent.session.folds if f.fold_no in agent.session.retired and f.summary.id in agent.session)
    pointer = agent.session.get(record.summary.id)
    assert after.evaluated_tokens <= before.evaluated_tokens + pointer.tokens + agent.session.folds[-1].tokens_after + 16
    assert after.predicted_evaluated == pytest.approx(after.evaluated_tokens, rel=0.1, abs=8)


async def test_near_the_window_a_request_cut_after_the_span_asks_apart_from_the_users_message_it_ends_on(make_agent):
    # the context is so near the window that even a third of the summary's budget has no room after the whole
    # conversation: the request stops after the span, whose last message is the user's. Appended to it, the
    # instruction made the engine read that message again (382 tokens evaluated on llama.cpp for a 65-token
    # instruction); as a message of its own it reads the instruction only
    agent = make_agent(
        window=4096,
        fold={"placement": "after", "trigger": 1.0},
        system_prompt="Be brief.",
        tokenizer="chars4",
        max_reply_tokens=16,
    )
    await agent.link.start()
    agent.fold_requests.summarizer = ModelSummarizer(agent.model)
    for i in range(12):  # ~220 tokens a turn: 3,893 of the 4,080 a request may take
        await agent.turn(chatter(i, 120))
    assert not agent.session.folds and agent.session.context_tokens > 3800
    last_user = max(n for n, m in enumerate(agent.session.messages) if m.role == "user")
    span = [m.id for m in agent.session.messages[: last_user + 1]]
    await agent.ladder.fold(span)
    sent, last_turn = agent.model.requests[-1], agent.model.requests[-2]
    assert "leave the context." in sent[-1]["content"] and sent[-1]["role"] == "user"
    # the conversation up to the span's last message (the user's) as the engine holds it, then the instruction
    assert sent[:-1] == last_turn
    usage = next(u for u in reversed(agent.session.usage) if u.purpose == "summary")
    instruction = agent.session.count(sent[-1]["content"])
    assert usage.evaluated_tokens <= instruction + 8
    assert usage.predicted_evaluated == pytest.approx(usage.evaluated_tokens, rel=0.1, abs=8)
