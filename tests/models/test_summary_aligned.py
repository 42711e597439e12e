"""Cache-aligned summary requests (issue 23, item 1): a fold's summary is asked in the
conversation's own context, so an engine that kept its KV reads only the instruction."""

from __future__ import annotations

import itertools
import random

import pytest

from tailrent_tui.agent.wire import wire_messages
from tailrent_tui.core.messages import Kind
from tailrent_tui.models.errors import ServerError
from tailrent_tui.models.mock import MockModel
from tailrent_tui.models.summarizer import ModelSummarizer

# where folds go and what they cost the engine: the filler is the user's, which the ledger would keep
pytestmark = pytest.mark.no_ledger

WORDS = ["router", "queue", "cache", "parser", "ledger", "window", "shard", "replica", "bucket", "schema", "worker", "timer"]


def chatter(i: int, words: int = 400) -> str:
    rng = random.Random(i)
    return f"Turn {i} notes. " + " ".join(rng.choice(WORDS) for _ in range(words)) + "."


def summary_usage(agent):
    return [u for u in agent.session.usage if u.purpose == "summary"]


async def test_the_summary_request_is_the_last_request_plus_one_instruction(make_agent):
    agent = make_agent(window=8192, system_prompt="Be brief.")
    for i in range(4):
        await agent.turn(chatter(i))
    agent.fold_requests.summarizer = ModelSummarizer(agent.model)
    last = agent.model.requests[-1]
    span = [m.id for m in agent.session.messages[:4]]
    await agent.ladder.fold(span)
    sent = agent.model.requests[-1]
    # the conversation as the last request sent it, its reply, then the instruction
    assert sent[: len(last)] == last
    assert sent[len(last)]["role"] == "assistant" and len(sent) == len(last) + 2
    instruction = sent[-1]
    assert instruction["role"] == "user" and "Messages 1-4 " in instruction["content"]
    # named by position and by the first words of its first and last message
    assert '("Turn 0 notes.' in instruction["content"] and 'to "(mock) I read' in instruction["content"]
    (usage,) = summary_usage(agent)
    # the engine read the instruction only, and the rent model said so before it was sent
    span_tokens = agent.session.folds[0].tokens_before
    assert usage.evaluated_tokens is not None and usage.evaluated_tokens < 0.15 * span_tokens
    assert abs(usage.predicted_evaluated - usage.evaluated_tokens) <= 0.1 * usage.evaluated_tokens
    assert usage.predicted_cached > 0.9 * usage.context_tokens


class AlternatingModel(MockModel):
    """A server whose chat template refuses two user messages in a row (Gemma's, Mistral's)."""

    async def stream(self, messages, *, tools=None, options=None):
        roles = [m["role"] for m in messages if m["role"] != "system"]
        if any(a == b == "user" for a, b in itertools.pairwise(roles)):
            raise ServerError(500, "Conversation roles must alternate user/assistant/user/assistant/...")
        async for chunk in super().stream(messages, tools=tools, options=options):
            yield chunk


async def test_a_template_that_forbids_two_user_messages_sees_the_roles_alternate(make_agent):
    agent = make_agent(window=8192, system_prompt="Be brief.")
    agent.model = AlternatingModel()
    for i in range(3):
        await agent.turn(chatter(i))
    await agent.ladder.add_message("user", chatter(9))  # the fold comes before this message is answered
    agent.fold_requests.summarizer = ModelSummarizer(agent.model)
    folded = await agent.ladder.fold([m.id for m in agent.session.messages[:4]])
    sent = agent.model.requests[-1]
    # the request stops before the turn in flight (the engine has not read it): the instruction follows a reply
    assert [m["role"] for m in sent[-2:]] == ["assistant", "user"] and "Messages 1-4 " in sent[-1]["content"]
    assert not any("Turn 9 notes." in m["content"] for m in sent)
    assert folded is not None and folded.fold.summarizer == "model:mock" and folded.fold.rejected is None
    # after the fold the summary travels as that instruction and its answer: the roles still alternate
    roles = [m["role"] for m in wire_messages(agent.session)][1:]
    assert all(a != b for a, b in itertools.pairwise(roles)), roles
    assert roles[-1] == "user"


async def test_a_model_that_answers_the_user_instead_is_refused_and_the_fallback_says_why(make_agent):
    agent = make_agent(window=8192, system_prompt="Be brief.")
    for i in range(3):
        await agent.turn(chatter(i))
    await agent.ladder.add_message("user", "Deploy the frontend tomorrow morning? Which environment, staging or production?")
    answer = "Sure! Deploying the frontend tomorrow morning to staging first, then production, sounds sensible overall."
    agent.fold_requests.summarizer = ModelSummarizer(MockModel([answer]))
    folded = await agent.ladder.fold([m.id for m in agent.session.messages[:4]])
    assert folded is not None
    record = folded.fold
    assert record.summarizer == "mock-extractive"
    assert record.rejected is not None and "answered the conversation instead of summarizing" in record.rejected
    assert agent.session.get(record.summary.id).kind is Kind.fold_summary


async def test_a_cold_cache_asks_for_the_span_alone(make_agent):
    agent = make_agent(window=8192, system_prompt="Be brief.")
    for i in range(4):
        await agent.turn(chatter(i))
    agent.rent.expire()  # the engine forgot the conversation: reading it whole would cost more than the span
    agent.fold_requests.summarizer = ModelSummarizer(agent.model)
    await agent.ladder.fold([m.id for m in agent.session.messages[:4]])
    sent = agent.model.requests[-1]
    assert [m["role"] for m in sent] == ["system", "user"] and sent[1]["content"].startswith("Summarize this part")


async def test_near_the_window_the_summary_request_stops_after_the_span_and_fits(make_agent):
    agent = make_agent(window=4096, tokenizer="chars4", system_prompt="Be brief.")
    agent.fold_requests.summarizer = ModelSummarizer(agent.model)
    i = 0
    while not agent.session.folds:
        await agent.turn(chatter(i, 200))
        i += 1
    (usage,) = summary_usage(agent)[:1]
    k = next(n for n, r in enumerate(agent.model.requests) if "leave the context." in r[-1]["content"])
    summary_request, last_turn = agent.model.requests[k], agent.model.requests[k - 1]
    # the request is the last one (and its reply) up to the turn in flight, or stops right after the
    # span when that would not fit: either way a prefix of what the engine holds, then the instruction
    shared = min(len(summary_request) - 1, len(last_turn))
    assert summary_request[:shared] == last_turn[:shared]
    assert not any(m["content"] == agent.model.requests[k + 1][-1]["content"] for m in summary_request)
    # it fits the window with the summary's room; its prefix is still read from the cache
    budget = agent.budget.policy_context().settings.summary_budget(agent.session.folds[0].tokens_before)
    assert usage.prompt_tokens + budget <= agent.session.window
    assert usage.cached_tokens > usage.evaluated_tokens
