"""Folds prepared while the user reads (issue 23, item 5): past the pre-trigger the next fold's
summary is written ahead; at the trigger the fold applies with it, no summary request waited for."""

from __future__ import annotations

import asyncio
import random

import pytest

from tailrent_tui.agent.fold_requests import PRE_TRIGGER
from tailrent_tui.models.mock import MockModel, ScriptedReply
from tailrent_tui.models.summarizer import ModelSummarizer
from tests.models.test_summary_aligned import chatter

# where folds go and what they cost the engine: the filler is the user's, which the ledger would keep
pytestmark = pytest.mark.no_ledger

SUMMARY = "- Turns 0 to 5: notes on the router, the queue and the cache; nothing decided."


def writer_agent(make_agent, writer):
    agent = make_agent(window=8192, tokenizer="chars4", system_prompt="Be brief.")
    agent.fold_requests.summarizer = ModelSummarizer(writer)
    return agent


async def turns_until_prepared(agent, limit: int = 30) -> int:
    for i in range(limit):
        await agent.turn(chatter(i, 300))
        if await agent.fold_requests.prepare_fold() is not None:
            return i + 1
    raise AssertionError("no fold was prepared")


async def test_a_fold_prepared_ahead_applies_at_the_trigger_without_a_request(make_agent):
    writer = MockModel([SUMMARY] * 4)
    agent = writer_agent(make_agent, writer)
    reported = []
    agent.fold_requests.on_prepared = reported.append
    i = await turns_until_prepared(agent)
    prepared = agent.fold_requests.prepared
    settings = agent.budget.policy_context().settings
    limit = min(settings.trigger_tokens, settings.request_limit)
    assert PRE_TRIGGER * limit <= agent.session.context_tokens <= limit
    # the summary, and (when the fold carries statements: the user's words are kept) the ledger read ahead
    asked = len(writer.requests)
    assert asked == (2 if agent.fold_requests._ledger_text(prepared) is not None else 1) and reported == [prepared]
    while not agent.session.folds:
        await agent.turn(chatter(i, 300))
        i += 1
    fold = agent.session.folds[0]
    print("DBG", prepared.messages, len(fold.span_ids), agent.session.totals.pinned, i)
    assert fold.summarizer == "model:mock, prepared"
    assert fold.span_ids[: prepared.messages] == list(prepared.span_ids)
    assert SUMMARY in agent.session.get(fold.summary.id).content
    assert len(writer.requests) == asked  # the fold waited for no summary
    assert reported[-1] is None and agent.fold_requests.prepared is None


async def test_a_cancel_in_the_middle_of_a_prepared_fold_leaves_nothing_prepared(make_agent):
    gate = asyncio.Event()

    class Slow(MockModel):
        async def stream(self, messages, *, tools=None, options=None):
            await gate.wait()
            async for chunk in super().stream(messages, tools=tools, options=options):
                yield chunk

    agent = writer_agent(make_agent, Slow([SUMMARY] * 4))
    i = 0
    while agent.fold_requests.prepared_span() is None:
        await agent.turn(chatter(i, 300))
        i += 1
    task = asyncio.create_task(agent.fold_requests.prepare_fold())
    await asyncio.sleep(0)
    task.cancel()  # the user sent the next message
    gate.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert agent.fold_requests.prepared is None and not agent.session.folds
    # resumed at the next pause
    assert await agent.fold_requests.prepare_fold() is not None


async def test_a_prepared_summary_that_no_longer_fits_the_span_is_not_used(make_agent):
    writer = MockModel([SUMMARY] * 4)
    agent = writer_agent(make_agent, writer)
    i = await turns_until_prepared(agent)
    first = agent.fold_requests.prepared.span_ids[0]
    agent.ladder.pin(first)  # the span the ladder takes now starts elsewhere
    while not agent.session.folds:
        await agent.turn(chatter(i, 300))
        i += 1
    assert agent.session.folds[0].summarizer == "model:mock"
    assert len(writer.requests) == 2


@pytest.mark.parametrize("fold_target", [0.35, 0.6])
async def test_a_fold_placed_after_with_its_summary_prepared_costs_the_next_request_its_new_message(make_agent, fold_target):
    # the model writes the summaries in the conversation's context; the mock shifts its cache as llama.cpp does.
    # A deep fold (0.35) takes all but the last messages: its span grows each turn and is written again; a
    # shallow one (0.6) keeps its span, and is sent again after each turn (one token asked) to stay cached
    agent = make_agent(
        window=8192, system_prompt="Be brief.", tokenizer="chars4", fold={"placement": "after", "target": fold_target}
    )
    await agent.link.start()
    agent.fold_requests.summarizer = ModelSummarizer(agent.model)
    prepared_requests = []
    i = 0
    while not agent.session.folds:
        await agent.turn(chatter(i, 100))
        i += 1
        before = len(agent.session.usage)
        await agent.fold_requests.prepare_fold()
        prepared_requests += agent.session.usage[before:]
    record = agent.session.folds[0]
    assert record.summarizer.endswith("prepared") and record.summary.meta.get("asked")
    summaries = [u for u in prepared_requests if (u.output_tokens or 0) > 1]
    warm = [u for u in prepared_requests if (u.output_tokens or 0) <= 1]
    assert summaries
    assert bool(warm) is (fold_target == 0.6)
    # each summary request read its instruction only
    assert all(u.evaluated_tokens < 0.05 * record.tokens_before for u in summaries)
    turns = [u for u in agent.session.usage if u.purpose == "turn"]
    ordinary, after = turns[-2], turns[-1]
    new_message = agent.session.sent_tokens(agent.session.messages[-2])
    # the fold came before the last request: it read the user's new message, nothing of the fold
    assert after.evaluated_tokens <= new_message + 8 < ordinary.evaluated_tokens + 16
    for u in [*prepared_requests, *turns]:
        assert u.predicted_evaluated == pytest.approx(u.evaluated_tokens, rel=0.1, abs=8), u


# prose with no word a statement is made of (no "keep", "next", "wants"): shuffled, those words made
# statements of their own, and what the ledger carried depended on the detector's weights of the day
PROSE_TEXT = (
    "We looked at the logs again and the numbers moved a little since yesterday. The team read the report "
    "over lunch and the graphs looked much like the ones from last week."
)
PROSE = PROSE_TEXT.split(" ")


def fact_message(i: int) -> str:
    """A fact the ledger carries, then prose (as benchmarks/cheapfold_bench.py writes its turns)."""
    rng = random.Random(i)
    body = " ".join(rng.choice(PROSE) for _ in range(150))
    fact = f"Turn {i}: the billing worker now takes {100 + 37 * i} ms at p95 on host node-{i}."
    return f"{fact} {body}. What should we check first?"


async def test_a_span_with_statements_is_prepared_as_the_ladder_asks_it(make_agent):
    # each message states a fact the ledger carries: the ladder asks a summary of the span without them,
    # and the prepared fold must be of that same span (aimed at the ladder's goal, the pins on top of the
    # target), or it is not used at the trigger
    agent = make_agent(window=2048, max_reply_tokens=8, tokenizer="chars4", fold={"placement": "after", "summarizer": "model"})
    agent.session.detect_statements = True
    agent.model = MockModel([SUMMARY] * 60)
    agent.model.prompt_cache = True  # llama.cpp's --cache-ram, on by default
    await agent.link.start()
    agent.fold_requests.summarizer = ModelSummarizer(agent.model)
    post_fold = False
    for i in range(12):
        await agent.turn(fact_message(i))
        await agent.fold_requests.prepare_fold()
        post_fold = post_fold or agent.placement.expect_prompt_cache
        if agent.session.folds:
            break
    assert agent.session.statements, "the facts were found"
    record = agent.session.folds[0]
    assert record.summarizer.endswith("prepared"), record.summarizer
    # the ledger the fold carries comes after its summary
    assert record.ledger is not None
    ids = [m.id for m in agent.session.messages]
    assert ids.index(record.summary.id) + 1 == ids.index(record.ledger.id)
    # and was sent ahead while the user read, after the prepared pair: in the whole conversation when that fits
    # the window (the engine shifts the kept messages at the fold), else (the conversation, the pair and the
    # ledger are a few tokens past the window, as here: this test sat on that edge) in the context the fold leaves
    turn_request = agent.model.requests[-1]
    warmed = [r for r in agent.model.requests[:-1] if r[-1]["content"].startswith("[context note]\n[ledger")]
    assert warmed, "no ledger was sent ahead"
    ahead = warmed[-1]
    asked = record.summary.meta["asked"]
    assert [m["content"] for m in ahead[-3:-1]] == [asked, SUMMARY]
    contents = [m["content"] for m in turn_request]
    at = contents.index(asked)  # the summary's pair, then the ledger, in the request after the fold
    assert contents[at + 1 : at + 3] == [SUMMARY, "[context note]\n" + record.ledger.content]
    if post_fold:
        # the context the fold leaves is what the request after the fold starts with, up to its ledger
        assert turn_request[: len(ahead) - 1] == ahead[:-1]
    else:
        # the whole conversation, the span with it: the messages the fold keeps before its summary were in it
        assert all(m in ahead for m in turn_request[:at])
    # the ledger at the fold: the one sent ahead, less lines the user's next message superseded (the engine
    # bridges a deletion), in the order sent, and new lines last (`stable_order`)
    sent = ahead[-1]["content"].splitlines()
    carried = contents[at + 2].splitlines()
    kept = [line for line in sent if line in carried]
    assert carried[: len(kept)] == kept and len(kept) > len(sent) // 2
    # either way the request after the fold reads the user's new message only
    after = [u for u in agent.session.usage if u.purpose == "turn"][-1]
    new_message = agent.session.sent_tokens(agent.session.messages[-2])
    assert after.evaluated_tokens <= new_message + 8 < record.ledger.tokens + new_message
    for u in agent.session.usage:
        assert u.predicted_evaluated == pytest.approx(u.evaluated_tokens, rel=0.1, abs=8), u


def distinct_fact_message(i: int) -> str:
    """The user's words, kept as said (no later message corrects them)."""
    rng = random.Random(i)
    body = " ".join(rng.choice(PROSE) for _ in range(220))
    name = ["billing", "search", "upload", "mailer", "gateway", "scheduler", "metrics", "auth", "export", "webhook"][i % 10]
    return f"About the {name} team: {body}. What should we check first?"


async def test_near_the_window_the_context_a_prepared_fold_leaves_is_sent_ahead_and_the_next_request_reads_the_new_message(
    make_agent,
):
    # the ledger does not fit after the whole conversation in the window (the reply's room is large): the
    # prepared fold's context (span out, summary and ledger after the last reply) is sent while the user
    # reads; the engine keeps the prompts before it (llama.cpp's --cache-ram), so a turn before the trigger
    # still finds its own, and the request after the fold reads the user's new message only
    agent = make_agent(
        window=2048,
        max_reply_tokens=8,
        system_prompt="Be brief.",
        tokenizer="chars4",
        fold={"placement": "after", "summarizer": "model"},
    )
    agent.session.detect_statements = True
    agent.model = MockModel([SUMMARY] * 60)
    agent.model.prompt_cache = True
    await agent.link.start()
    assert agent.rent.sheet.prompt_cache
    agent.fold_requests.summarizer = ModelSummarizer(agent.model)
    sent_ahead = 0
    question = " ".join(f"Which {w} number should we check first?" for w in PROSE[:24])
    for i in range(12):
        # once a fold is prepared, the next message asks only: it states nothing the ledger would carry or
        # correct, so the fold at the trigger carries the ledger that was sent ahead
        await agent.turn(question if agent.fold_requests.prepared is not None else distinct_fact_message(i))
        await agent.fold_requests.prepare_fold()
        sent_ahead += agent.placement.expect_prompt_cache
        if agent.session.folds:
            break
    record = agent.session.folds[0]
    assert record.summarizer.endswith("prepared") and record.ledger is not None
    assert sent_ahead >= 1
    turns = [u for u in agent.session.usage if u.purpose == "turn"]
    after = turns[-1]
    new_message = agent.session.sent_tokens(agent.session.messages[-2])
    # the fold came before this request: it read the user's new message, not the ledger nor the summary
    assert after.evaluated_tokens <= new_message + 8 < record.ledger.tokens + new_message
    for u in agent.session.usage:
        assert u.predicted_evaluated == pytest.approx(u.evaluated_tokens, rel=0.1, abs=8), u
    assert not [n for n in agent.session.notes if "prompt cache" in n.text]


async def test_a_server_without_a_prompt_cache_is_noticed_at_the_next_turn_and_said_once(make_agent):
    # the context a prepared fold leaves was sent ahead, then the user sent a short message (no fold yet): the
    # engine had no prompt cache to find the conversation in, and read it whole
    agent = make_agent(
        window=2048, max_reply_tokens=8, system_prompt="Be brief.", tokenizer="chars4", fold={"placement": "after"}
    )
    agent.session.detect_statements = True
    agent.model = MockModel([SUMMARY] * 60)
    agent.model.prompt_cache = True
    await agent.link.start()
    agent.fold_requests.summarizer = ModelSummarizer(agent.model)
    agent.model.prompt_cache = False  # what the server turns out to do
    i = 0
    while not agent.placement.expect_prompt_cache:
        assert i < 12 and not agent.session.folds
        await agent.turn(distinct_fact_message(i))
        await agent.fold_requests.prepare_fold()
        i += 1
    # the next message does not reach the trigger (here: the trigger is raised), so no fold comes before it
    settings = agent.budget.settings
    agent.budget.settings = settings.model_copy(update={"fold": settings.fold.model_copy(update={"trigger": 0.99})})
    await agent.turn("Thanks. Which one first?")
    assert not agent.session.folds
    said = [n.text for n in agent.session.notes if "keeps no prompt cache" in n.text]
    assert len(said) == 1
    assert not agent.rent.sheet.prompt_cache
    # from then on a prepared fold's context is not sent ahead where the conversation does not fit with it
    agent.budget.settings = settings
    for j in range(i, i + 4):
        await agent.turn(distinct_fact_message(j))
        await agent.fold_requests.prepare_fold()
        assert not agent.placement.expect_prompt_cache
    assert len([n for n in agent.session.notes if "keeps no prompt cache" in n.text]) == 1


class RefusedWriter(MockModel):
    """Writes summaries the ladder refuses (their words are not the span's), answers turns as the mock does."""

    async def stream(self, messages, *, tools=None, options=None):
        if "leave the context." in str(messages[-1].get("content", "")):
            self._script.insert(0, ScriptedReply(text="Sure! Send the deployment checklist and staging hostnames tomorrow."))
        async for chunk in super().stream(messages, tools=tools, options=options):
            yield chunk


async def test_a_prepared_summary_refused_when_written_prepares_the_fallbacks_and_sends_it_ahead(make_agent):
    # the model's summary is refused when it is written, not at the trigger: the extractive one is prepared instead
    # and the context the fold leaves with it is read while the user reads. Refused at the trigger, the fallback's
    # text was new tokens there (1,421 read on llama.cpp before the reply, with the ledger after it)
    agent = make_agent(window=8192, system_prompt="Be brief.", tokenizer="chars4", fold={"placement": "after", "target": 0.6})
    agent.model = RefusedWriter([])
    await agent.link.start()
    agent.fold_requests.summarizer = ModelSummarizer(agent.model)
    i = 0
    while not agent.session.folds:
        await agent.turn(chatter(i, 100))
        i += 1
        await agent.fold_requests.prepare_fold()
    record = agent.session.folds[0]
    assert record.summarizer.startswith("mock-extractive") and record.summarizer.endswith("prepared"), record.summarizer
    assert "refused" in record.summarizer
    # the record says why, as a fold refused at the trigger does (the Folds panel and test_morning_after read it)
    assert record.rejected and "summary refused" in record.rejected, record
    turns = [u for u in agent.session.usage if u.purpose == "turn"]
    ordinary, after = turns[-2], turns[-1]
    new_message = agent.session.sent_tokens(agent.session.messages[-2])
    # the fold came before the last request: it read the user's new message, not the summary
    assert after.evaluated_tokens <= new_message + 8 < ordinary.evaluated_tokens + 16
    for u in agent.session.usage:
        assert u.predicted_evaluated == pytest.approx(u.evaluated_tokens, rel=0.1, abs=8), u


async def test_a_prepared_fallback_whose_repair_line_changed_at_the_trigger_is_still_predicted_as_cached(make_agent):
    # the guard's repair line of a prepared fallback is written again at the trigger: the user's next message
    # may show (or hide) a fact, and the summary applied is the note sent ahead less (or plus) a line at its end.
    # llama.cpp shifts the common text and reads the new message (fold 2 of the 30-turn bench: 256 read), where
    # the rent model, comparing whole messages, predicted the note read again (401)
    from tailrent_tui.agent.fold_requests import note_key

    agent = make_agent(window=8192, system_prompt="Be brief.", tokenizer="chars4", fold={"placement": "after", "target": 0.6})
    agent.model = RefusedWriter([])
    await agent.link.start()
    requests = agent.fold_requests
    requests.summarizer = ModelSummarizer(agent.model)
    rent = agent.rent
    assert rent is not None
    extra = "\nFacts kept verbatim: 351 ms; node-10"
    i = 0
    while not agent.session.folds:
        await agent.turn(chatter(i, 100))
        i += 1
        await requests.prepare_fold()
        warmed = requests.warmed_note
        previous = rent._previous  # what the engine holds after the note was sent ahead
        if warmed is not None and previous and previous[-1][0] == note_key(warmed):
            # as if the note sent ahead had carried one more repaired fact than the fold will
            requests.warmed_note = warmed + extra
            previous[-1] = (note_key(warmed + extra), previous[-1][1] + agent.session.count(extra))
            rent._hold(previous)  # the rent model keeps the sum of what it holds with it
    assert agent.session.folds[0].summarizer.endswith("prepared")
    after = [u for u in agent.session.usage if u.purpose == "turn"][-1]
    new_message = agent.session.sent_tokens(agent.session.messages[-2])
    assert after.predicted_evaluated <= new_message + 8
    assert after.predicted_evaluated == pytest.approx(after.evaluated_tokens, rel=0.1, abs=8)


async def test_a_fold_prepared_with_pins_is_the_fold_the_ladder_takes_at_the_trigger(make_agent):
    # the ladder's fold aims at the target with the pins on top (`fold_goal`): prepared to the bare target, the
    # span ran past the one taken at the trigger, the prepared fold was not used, and its summary was asked again
    # while the user waited (fold 1 of the 30-turn bench on llama.cpp: refused, and its turn read 1,463 tokens)
    writer = MockModel([SUMMARY] * 40)
    agent = writer_agent(make_agent, writer)
    await agent.turn(chatter(0, 1200))
    agent.ladder.pin(agent.session.messages[0].id)
    assert agent.session.totals.pinned > 1000
    prepared, asked = None, 0
    for i in range(1, 60):
        await agent.turn(chatter(i, 100))
        if agent.session.folds:
            break
        # the user reads: the next fold is prepared (kept, or written again for the span as it is now)
        prepared = await agent.fold_requests.prepare_fold() or prepared
        asked = len(writer.requests)
    assert prepared is not None
    fold = agent.session.folds[0]
    assert fold.summarizer == "model:mock, prepared"
    assert fold.span_ids[: prepared.messages] == list(prepared.span_ids)
    assert len(writer.requests) == asked  # the fold waited for no summary


@pytest.mark.parametrize("ahead", [True, False])
async def test_a_fold_the_engine_has_not_read_is_sent_ahead_while_the_user_reads(make_agent, ahead):
    # a fold that came after the reply (the reply took the context past the trigger) was not prepared: its summary
    # and ledger are new to the engine, and the next request read them with the user's message (614 tokens on the
    # 30-turn bench, where an ordinary turn reads 253). Sent ahead while the user reads, the request reads the message
    from tailrent_tui.agent.wire import wire_messages

    agent = make_agent(window=8192, system_prompt="Be brief.", tokenizer="chars4", fold={"placement": "after"})
    agent.model = RefusedWriter([])  # the fallback's summary: new text
    await agent.link.start()
    agent.fold_requests.summarizer = ModelSummarizer(agent.model)
    for i in range(4):
        await agent.turn(chatter(i, 100))
    assert agent.placement.state.placement == "after"
    agent.placement.state.confirmed = True  # a first post-fold request found its cache
    ids = [m.id for m in agent.session.messages[:4]]
    await agent.ladder.fold(ids)
    assert agent.session.folds
    sent = len(agent.model.requests)
    if ahead:
        await agent.fold_requests.prepare_fold()
        assert len(agent.model.requests) == sent + 1
        assert agent.model.requests[-1] == wire_messages(agent.session)
    await agent.turn("Thanks. Which one should we check first?")
    after = [u for u in agent.session.usage if u.purpose == "turn"][-1]
    new_message = agent.session.sent_tokens(agent.session.messages[-2])
    if ahead:
        assert after.evaluated_tokens <= new_message + 8
    else:
        assert after.evaluated_tokens > new_message + 64
    for u in agent.session.usage:
        assert u.predicted_evaluated == pytest.approx(u.evaluated_tokens, rel=0.1, abs=8), u
