"""One ladder: policies are plans; folds always shrink; requests always fit; pins have a budget.

The plans are driven both ways: by core's synchronous driver (`run_plan`) and
by the agent's asynchronous one (the path of the app, `ask`, the demo and the
bench's default driver). Summaries that cannot be used are refused and the
fold says who really wrote it.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tailrent_tui.agent.loop import SummaryEnded, SummaryStarted
from tailrent_tui.bench.runner import run_bench
from tailrent_tui.cli import cli
from tailrent_tui.core.guard import REPAIR_HEADING
from tailrent_tui.core.messages import Folded, FoldSkipped, Kind, Message, MessageAdded
from tailrent_tui.core.policies import (
    LADDER_HEADER,
    LadderPolicy,
    PolicyContext,
    PolicySettings,
    choose_fold,
    get_policy,
    run_plan,
)
from tailrent_tui.core.rungs.spill import MemorySpillStore, spill_message
from tailrent_tui.core.session import Session, SessionError
from tailrent_tui.core.summarize import (
    ExtractiveSummarizer,
    LossySummarizer,
    Summarize,
    Summary,
    fit_budget,
    role_content,
)
from tailrent_tui.core.tokens import Chars4Counter, get_counter
from tailrent_tui.models.mock import MockModel
from tailrent_tui.models.summarizer import ModelSummarizer
from tailrent_tui.scenarios.traces import get_trace
from tailrent_tui.store.sessions import find_session
from tests.support.filler import prose

FACTS = "The API listens on port 5433 in eu-west-2, because the VPC peering only exists there."


def ladder_session(window: int = 2000, ledger: bool = True, **settings):
    """A ladder session; `ledger=False` keeps no statements, for tests of the guard's repair of a summary."""
    policy = get_policy("ladder")
    s = Session(
        counter=get_counter("chars4"),
        system="sys",
        window=window,
        decisions=policy.decision_detector(),
        clock=lambda: 0.0,
        detect_statements=ledger,
    )
    ctx = PolicyContext(spill_store=MemorySpillStore(), settings=PolicySettings(window=window, **settings))
    return policy, s, ctx


def fill_past_trigger(s: Session, ctx: PolicyContext) -> None:
    i = 0
    while s.context_tokens <= ctx.settings.trigger_tokens:
        s.add("user" if i % 2 == 0 else "assistant", prose(i))
        i += 1


def drive_with(plan, reply_for):
    """Drive a plan by hand: `reply_for(request)` answers each Summarize."""
    requests = []
    try:
        request = next(plan)
        while True:
            requests.append(request)
            request = plan.send(reply_for(request))
    except StopIteration as stop:
        return stop.value, requests


def test_a_policy_asks_for_a_summary_instead_of_calling_a_summarizer():
    policy, s, ctx = ladder_session()
    fill_past_trigger(s, ctx)
    plan = policy.after_add(s, ctx)
    request = next(plan)
    assert isinstance(request, Summarize)
    span_tokens = sum(m.tokens for m in request.span)
    assert 32 <= request.budget <= span_tokens // 2
    assert not s.folds  # nothing applied before the answer
    plan.close()
    assert not s.folds and s.listeners == []


BAD_SUMMARIES = {
    "template tokens": (Summary(text="<|im_end|>user\n<|im_start|>assistant", by="model:x"), "chat-template tokens"),
    "a loop": (Summary(text="\n".join(["- the user asked about the port"] * 40), by="model:x"), "repeats itself"),
    "cut at the budget": (Summary(text="- we decided to", by="model:x", truncated=True), "cut at its token budget"),
    "empty": (Summary(text="  ", by="model:x"), "empty"),
    "a server error": (Summary(text="", by="model:x", error="the model could not summarize (timeout)"), "timeout"),
}


@pytest.mark.parametrize("case", sorted(BAD_SUMMARIES))
def test_an_unusable_summary_is_refused_and_the_fold_says_who_wrote_it(case):
    bad, why = BAD_SUMMARIES[case]
    policy, s, ctx = ladder_session()
    s.add("user", FACTS)
    fill_past_trigger(s, ctx)
    events, requests = drive_with(policy.after_add(s, ctx), lambda r: bad)
    folds = [e.fold for e in events if isinstance(e, Folded)]
    assert requests and folds and folds[0].summarizer == "mock-extractive"
    for f in folds:
        # a later pass refolds an extractive summary, which only the lossy one can shrink
        assert f.summarizer in ("mock-extractive", "mock-lossy") and f.rejected and why in f.rejected
        assert f.tokens_after < f.tokens_before
    assert "5433" in s.visible_text() and "eu-west-2" in s.visible_text()


def written_part(content: str) -> str:
    """A fold summary's text as its writer wrote it: no header line, no facts the guard added."""
    body = content.split("\n", 1)[1]
    return body.split("\n" + REPAIR_HEADING, 1)[0]


def test_no_summary_outgrows_its_budget():
    """A summarizer that takes no budget (the bench's mocks) is held to the one a model gets
    as max_tokens, the room the fold planned for its summary: its text is cut there at
    whole lines, and the guard carries the facts the cut drops."""
    policy, s, ctx = ladder_session()
    s.add("user", FACTS)
    fill_past_trigger(s, ctx)
    budgets = []

    def long_reply(request):
        budgets.append(request.budget)
        # the first 24 words of each message: shorter than the span, longer than a quarter of it
        return Summary(text="\n".join("- " + " ".join(role_content(m)[1].split()[:24]) for m in request.span), by="model:x")

    events, _ = drive_with(policy.after_add(s, ctx), long_reply)
    folds = [e.fold for e in events if isinstance(e, Folded)]
    assert folds and len(folds) == len(budgets)
    for f, budget in zip(folds, budgets, strict=True):
        assert f.summarizer == "model:x" and f.rejected is None
        assert "cut to fit its budget" in f.summary.content
        assert s.count(written_part(f.summary.content)) <= budget
    assert "5433" in s.visible_text() and "eu-west-2" in s.visible_text()


def test_the_last_resort_is_cut_to_the_budget_and_the_guard_keeps_the_facts():
    _, s, _ = ladder_session(window=200_000, ledger=False)
    s.add("user", FACTS)
    for i in range(300):
        s.add("user" if i % 2 == 0 else "assistant", f"Step {i}: looked at the logs again and nothing new turned up there.")
    span = list(s.messages)
    failed = Summary(text="", by="model:x", error="the model could not summarize (timeout)")
    record = choose_fold(
        s,
        span,
        failed,
        guard="repair",
        position="in_place",
        header=LADDER_HEADER,
        trigger="test",
        fallbacks=(LossySummarizer(),),
        budget=200,
    )
    assert record.summarizer == "mock-lossy" and "could not summarize" in record.rejected
    assert 150 < s.count(written_part(record.summary.content)) <= 200  # cut to the budget, not far below it
    assert "cut to fit its budget" in record.summary.content
    assert "5433" in record.summary.content and "eu-west-2" in record.summary.content  # repaired by the guard


def test_fit_budget_keeps_the_first_and_last_lines_and_says_what_it_cut():
    text = "\n".join(f"- line {i}: something happened" for i in range(100))
    count = Chars4Counter().count
    cut = fit_budget(text, 120, count)
    lines = cut.splitlines()
    assert count(cut) <= 120
    assert lines[0] == "- line 0: something happened" and lines[-1] == "- line 99: something happened"
    marker = next(ln for ln in lines if "cut to fit its budget" in ln)
    assert f"{100 - (len(lines) - 1):,} lines" in marker
    assert fit_budget("- short", 120, count) == "- short"


def test_a_summary_longer_than_its_span_is_refused():
    policy, s, ctx = ladder_session()
    fill_past_trigger(s, ctx)
    events, _ = drive_with(policy.after_add(s, ctx), lambda r: Summary(text=" ".join(f"w{i}" for i in range(5000)), by="model:x"))
    f = next(e.fold for e in events if isinstance(e, Folded))
    assert "not shorter than its span" in f.rejected and f.summarizer == "mock-extractive"


def test_a_fold_that_cannot_shrink_spills_the_big_message_instead():
    # A span of one dense message: its extractive summary is the message itself.
    policy, s, ctx = ladder_session(window=1200, keep_recent=1, ledger=False)
    big = s.add("user", " ".join(f"Service svc{i} listens on port {5000 + i}." for i in range(130)))
    s.add("assistant", "ok")
    before = s.context_tokens
    events = run_plan(policy.after_add(s, ctx), ExtractiveSummarizer())
    assert before > ctx.settings.trigger_tokens
    assert s.get(big.id).kind == Kind.spill_pointer
    assert not any(isinstance(e, Folded) and e.fold.context_after >= e.fold.context_before for e in events)
    assert any("would not shrink" in n.text for n in s.notes)
    assert s.context_tokens < before


def test_the_guard_setting_means_the_same_in_every_policy_and_driver():
    for guard in ("report", "off", "repair"):
        policy, s, ctx = ladder_session(guard=guard)
        s.add("user", FACTS)
        fill_past_trigger(s, ctx)
        run_plan(policy.after_add(s, ctx), LossySummarizer())
        assert s.folds and all(f.guard == guard for f in s.folds)
        naive = get_policy("naive")
        assert naive.guard_for(ctx) == guard
    assert get_policy("naive").guard_for(PolicyContext()) == "report"
    assert get_policy("ladder").guard_for(PolicyContext()) == "repair"


def test_a_manual_spill_or_fold_that_would_grow_is_refused_with_a_reason():
    policy, s, ctx = ladder_session()
    small = s.add("assistant", "Done, all green.")
    for i in range(4):
        s.add("user", prose(i, 5))
    with pytest.raises(SessionError, match=r"nothing spilled: the .*-token message would become a .*-token pointer"):
        spill_message(s, small.id, ctx.spill_store)
    events = run_plan(policy.fold_by_hand(s, ctx, [small.id]), ExtractiveSummarizer())
    assert isinstance(events[-1], FoldSkipped) and "would not be smaller" in events[-1].reason
    assert not s.folds and s.get(small.id).content == "Done, all green."


def test_pins_have_a_budget_and_auto_pinning_stops_with_a_notice():
    policy, s, ctx = ladder_session(window=1000)
    decisions = [s.add("user", f"DECISION: we use queue q{i} because {prose(i, 36)}") for i in range(12)]
    pinned = [d for d in decisions if s.get(d.id).pinned]
    assert 0 < len(pinned) < len(decisions)
    assert s.totals.pinned <= s.pin_budget
    notes = [n.text for n in s.notes if n.text.startswith("auto-pin stopped")]
    assert (
        len(notes) == 1
        and f"{s.pin_budget:,}-token budget (55% of what the system prompt and the reply leave of the 1,000-token window)"
        in notes[0]
    )
    fill_past_trigger(s, ctx)
    run_plan(policy.after_add(s, ctx), ExtractiveSummarizer())
    assert all(f.context_after < f.context_before for f in s.folds)
    # unpinning makes room, and the next decision may be pinned again
    s.unpin(pinned[0].id)
    assert s.add("user", "DECISION: short one because it matters.").pinned


async def test_the_agent_spills_a_message_bigger_than_the_window_and_never_sends_past_it(make_agent):
    agent = make_agent(window=2048, system_prompt="Be brief.")
    paste = "\n".join(f"log line {i}: request id r{i} took {i % 97} ms" for i in range(3000))
    result = await agent.turn(paste)
    assert result.error is None
    user = next(m for m in agent.session.messages if m.role == "user")
    assert user.kind == Kind.spill_pointer and agent.spill_store.read_spill(user.spill_id) == paste
    assert any("too big for the window" in n.text for n in agent.session.notes)
    usage = agent.session.usage[-1]
    assert usage.context_tokens + agent.budget.reply_cap() <= agent.session.window


async def test_escape_during_a_model_summary_applies_no_fold(make_agent):
    agent = make_agent(window=2048, system_prompt="Be brief.")
    for i in range(3):
        agent.session.add("assistant", prose(i, 80))  # the user's own words would be kept, not summarized
    gate = asyncio.Event()

    class SlowSummarizer(ModelSummarizer):
        async def asummarize(self, messages, budget=None, context=None):
            await gate.wait()
            return Summary(text="- short", by=self.name)

    agent.fold_requests.summarizer = SlowSummarizer(MockModel())
    listeners = list(agent.session.listeners)
    reports = []
    agent.fold_requests.on_summary = reports.append
    task = asyncio.create_task(agent.ladder.fold())
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not agent.session.folds and agent.session.listeners == listeners
    assert [type(r) for r in reports] == [SummaryStarted, SummaryEnded] and reports[1].outcome == "cancelled"


@pytest.mark.parametrize(("reply", "outcome"), [({"text": "- short"}, "written"), ({"fault": "refused"}, "failed")])
async def test_the_agent_reports_a_fold_summary_as_it_starts_and_ends(make_agent, reply, outcome):
    agent = make_agent(window=2048, system_prompt="Be brief.")
    for i in range(3):
        agent.session.add("assistant", prose(i, 80))  # the user's own words would be kept, not summarized
    agent.fold_requests.summarizer = ModelSummarizer(MockModel([reply]))
    reports = []
    agent.fold_requests.on_summary = reports.append
    folded = await agent.ladder.fold()
    started, ended = reports
    assert isinstance(started, SummaryStarted) and started.by == "model:mock"
    assert started.messages == len(folded.fold.span_ids) and started.tokens == folded.fold.tokens_before
    assert isinstance(ended, SummaryEnded) and ended.outcome == outcome
    assert (ended.error is not None) == (outcome == "failed")


def test_ask_with_500_token_messages_in_a_2048_window_never_grows_a_fold_nor_passes_the_window(tmp_path, monkeypatch):
    monkeypatch.setenv("TAILRENT_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("TAILRENT_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("TAILRENT_WINDOW", "2048")
    monkeypatch.setenv("TAILRENT_FSYNC", "false")
    monkeypatch.delenv("TAILRENT_MODEL", raising=False)
    (tmp_path / "ws").mkdir()
    runner = CliRunner()
    session_id = None
    for i in range(12):
        words = prose(i, 380)  # about 500 tokens
        args = ["--workspace", str(tmp_path / "ws"), "ask", "--model", "mock", "--json"]
        args += ["--continue"] if i else []
        result = runner.invoke(cli, [*args, f"Step {i}: the build uses port {8000 + i}. {words}"])
        assert result.exit_code == 0, result.output
        session_id = json.loads(result.stdout)["session"]
    events = list(find_session(tmp_path / "data", session_id).events())
    folds = [e.fold for e in events if isinstance(e, Folded)]
    usage = [e for e in events if e.type == "usage_recorded"]
    assert len(usage) == 12
    assert all(f.context_after < f.context_before for f in folds)
    assert folds and all(f.depth == 1 for f in folds), "a fold never summarizes a summary"
    assert all(u.context_tokens <= 2048 for u in usage)
    texts = [e.message.content for e in events if isinstance(e, MessageAdded)]
    assert len(texts) >= 24


@pytest.mark.parametrize("trace", ["article", pytest.param("migration-week", marks=pytest.mark.slow)])
@pytest.mark.parametrize("summarizer", ["mock-lossy", "mock-extractive"])
def test_bench_agent_driver_equals_core_driver(trace, summarizer):
    t = get_trace(trace)
    policies = ["none", "ladder"] if trace == "migration-week" else ["none", "naive", "naive-pin", "autocompact", "ladder"]
    kw = dict(summarizer=summarizer, price_sheet="local")
    agent = run_bench(t, policies, driver="agent", **kw).to_json()
    core = run_bench(t, policies, driver="core", **kw).to_json()
    assert agent == core
    ladder = agent["extras"][0]["policies"]["ladder"]
    assert ladder["folds_grew"] == 0 and ladder["requests_over_window"] == 0
    assert agent["traces"][0]["policies"]["ladder"]["folds"] > 0


def test_bench_model_summarizer_needs_the_agent_driver():
    from tailrent_tui.bench.runner import BenchError

    with pytest.raises(BenchError, match="--driver agent"):
        run_bench(get_trace("article"), ["ladder"], summarizer="model", driver="core")


async def test_the_demo_runs_through_the_agent(tmp_path: Path):
    from tailrent_tui.ui.demo import open_demo

    async with open_demo(pinned=True, speed=64.0, workspace=tmp_path) as app:
        assert app.feeder.budget.policy.name == "naive"
        assert app.feeder.budget.policy_context().settings.guard is None


async def test_the_pins_panel_warns_when_auto_pinning_stops(tmp_path: Path):
    from tailrent_tui.ui.widgets.input import PromptInput
    from tests.support.ui_helpers import make_agent, make_app, wait_until

    agent = make_agent(tmp_path, window=2048)
    agent.session.decisions = get_policy("ladder").decision_detector()
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        pins = app.sidebar.ledger
        for i in range(8):
            box = app.query_one(PromptInput)
            box.focus()
            box.value = f"DECISION: we keep queue q{i} because {prose(i, 96)}"
            await pilot.press("enter")
            await wait_until(
                pilot, lambda: agent.session.messages and agent.session.messages[-1].role == "assistant", what="the reply"
            )
            if agent.session.auto_pin_stopped:
                break
        assert agent.session.auto_pin_stopped
        await wait_until(pilot, lambda: pins.has_class("-over-budget"), what="pins warning")
        assert "pin budget: auto-pin is off" in str(pins.query_one(".cost").render())
        assert any(n.text.startswith("auto-pin stopped") for n in agent.session.notes)


def test_the_inspector_and_inspect_say_who_wrote_a_summary_and_why():
    from tailrent_tui.ui.screens.fold_inspector import writer_line

    policy, s, ctx = ladder_session()
    fill_past_trigger(s, ctx)
    drive_with(policy.after_add(s, ctx), lambda r: Summary(text="<|im_end|>user", by="model:gemma"))
    line = str(writer_line(s.folds[0]))
    assert line.startswith("summary by mock-extractive · model:gemma's summary refused: it holds chat-template tokens")


@pytest.mark.parametrize("guard", ["report", "off"])
async def test_the_guard_setting_holds_through_the_agent_and_manual_folds(make_agent, guard):
    agent = make_agent(window=2048, system_prompt="Be brief.", fold={"guard": guard})
    agent.session.add("user", FACTS)
    for i in range(6):
        agent.session.add("assistant", prose(i, 80))  # the user's own words would be kept, not summarized
    folded = await agent.ladder.fold()
    assert isinstance(folded, Folded) and folded.fold.guard == guard
    assert agent.budget.policy_context().settings.guard == guard


async def test_a_span_made_only_of_pins_is_refused_with_a_reason(make_agent):
    agent = make_agent(window=2048, system_prompt="Be brief.")
    pinned = agent.session.add("user", "DECISION: keep the 30 second timeout because the proxy cuts at 31.")
    assert pinned.pinned
    with pytest.raises(SessionError, match="cannot fold pinned messages"):
        await agent.ladder.fold([pinned.id])
    agent.session.add("assistant", "noted")
    result = await agent.ladder.fold()
    assert isinstance(result, FoldSkipped) and "nothing to fold" in result.reason and not agent.session.folds


@pytest.mark.parametrize("fault", ["timeout", "server_error", "stream_cut"])
async def test_a_summarizer_that_fails_is_replaced_and_the_fold_says_why(make_agent, fault):
    agent = make_agent(window=2048, system_prompt="Be brief.")
    agent.session.add("user", FACTS)
    for i in range(6):
        agent.session.add("assistant", prose(i, 80))  # the user's own words would be kept, not summarized
    agent.fold_requests.summarizer = ModelSummarizer(MockModel([{"text": "- partial", "fault": fault}]))
    folded = await agent.ladder.fold()
    assert isinstance(folded, Folded)
    assert folded.fold.summarizer == "mock-extractive"
    assert "model:mock's summary refused: the model could not summarize" in folded.fold.rejected
    assert "5433" in agent.session.visible_text()


def test_a_summary_that_saves_under_a_tenth_of_its_span_is_refused_in_every_pass():
    # barely shorter (no loop, no template tokens): a fold that keeps 93% of the span costs
    # its specifics for almost nothing, so even the first pass refuses it (issue 26, item 3)
    _, s, _ = ladder_session(window=200_000)
    for i in range(8):
        s.add("assistant", prose(i))  # the user's own words would be kept, not summarized
    span = list(s.messages)
    words = " ".join(role_content(m)[1] for m in span).split()
    nearly_as_long = Summary(text=" ".join(words[: int(len(words) * 0.93)]), by="model:x")
    fold = dict(guard="repair", position="in_place", header=LADDER_HEADER, trigger="test")
    for gain in (0.0, LadderPolicy.min_gain):
        record = choose_fold(s, span, nearly_as_long, **fold, min_gain=gain)
        assert record.summarizer != "model:x" and "saves under a tenth of its span" in record.rejected
        assert record.tokens_after <= (1 - LadderPolicy.min_gain) * record.tokens_before


def test_a_summary_that_answers_or_echoes_its_instruction_is_refused():
    from tailrent_tui.core.summarize import check_summary

    span_tokens = 400
    for text, why in (
        ("Sure! Here's how to fix the retry loop: wrap the call in a backoff.", "answers the conversation"),
        ("I'll summarize: the user asked about ports.", "answers the conversation"),
        ("Summarize this part of the conversation: the user asked about ports.", "repeats the summary instruction"),
    ):
        assert why in check_summary(Summary(text=text, by="model:x"), span_tokens=span_tokens, count=lambda t: len(t) // 4)
    ok = "- user asked to move the API to port 5433 in eu-west-2\n- the VPC peering only exists there"
    assert check_summary(Summary(text=ok, by="model:x"), span_tokens=span_tokens, count=lambda t: len(t) // 4) is None


def test_a_summary_that_writes_back_an_app_notice_is_refused_and_a_paraphrase_is_not():
    """Seen on llama.cpp with SmolLM2: asked to summarize, the model wrote back the text protocol's
    note (a pinned system notice, not in the span), and the fold kept it as the summary."""
    from tailrent_tui.agent.text_protocol import PROTOCOL_NOTE
    from tailrent_tui.core.summarize import check_summary

    span = [
        Message(
            role="user",
            content="the importer chokes on rows with a null vendor_id; can you look at parse_row in importer/rows.py?",
        ),
        Message(
            role="assistant",
            content="parse_row assumes vendor_id is set; I made it skip such rows and log a warning with the row number.",
        ),
        Message(role="user", content="good. keep the batch size at 500 and rerun the nightly import against staging."),
    ]
    count = lambda t: len(t) // 4  # noqa: E731
    echo = check_summary(Summary(text=PROTOCOL_NOTE, by="model:x"), span_tokens=2000, count=count, span=span)
    assert echo is not None and "not about its span" in echo
    paraphrase = (
        "The importer failed on rows whose vendor_id was null. The assistant changed parse_row to skip "
        "those rows and warn with their number. The user wants the batch size kept at 500 and the nightly "
        "import rerun against staging."
    )
    assert check_summary(Summary(text=paraphrase, by="model:x"), span_tokens=2000, count=count, span=span) is None


def test_a_summarizer_refused_once_is_not_asked_again_in_the_same_fold():
    # gemma3-270m runs to its budget every time: each refused request costs tens of seconds
    # on a small machine, so the later passes of one fold go straight to the fallbacks
    policy, s, ctx = ladder_session(ledger=False)
    i = 0
    while s.context_tokens <= ctx.settings.trigger_tokens:
        s.add("user", FACTS.replace("5433", str(6000 + i)))
        i += 1
    cut = Summary(text="- we decided to", by="model:x", truncated=True)
    events, requests = drive_with(policy.after_add(s, ctx), lambda r: cut)
    folds = [e.fold for e in events if isinstance(e, Folded)]
    assert folds and len(requests) == 1, "asked once, whatever the passes"
    assert all("model:x" in f.rejected or f.dropped for f in folds)
    assert s.context_tokens <= ctx.settings.trigger_tokens


def test_fold_placement_after_puts_the_summary_after_the_kept_messages():
    """`fold_placement = "after"`: the span leaves, and the summary follows the messages the fold
    keeps, so an engine that shifts KV keeps their cache; in place it takes the span's first position."""
    from tailrent_tui.core.messages import Kind
    from tailrent_tui.core.policies import PolicyContext, PolicySettings, get_policy, run_plan
    from tailrent_tui.core.rungs.fold import MemoryFoldArchive
    from tailrent_tui.core.session import Session
    from tailrent_tui.core.summarize import ExtractiveSummarizer

    for placement in ("in_place", "after"):
        s = Session(window=2048)
        ctx = PolicyContext(archive=MemoryFoldArchive(), settings=PolicySettings(window=2048, fold_placement=placement))
        policy = get_policy("ladder")
        for i in range(40):
            s.add("user", f"note {i}: the ingestion pipeline reads the queue and writes batches to the store " * 3)
            run_plan(policy.after_add(s, ctx), ExtractiveSummarizer())
            if s.folds:
                break
        assert s.folds, "the context passed the trigger and folded"
        kinds = [m.kind for m in s.messages]
        where = kinds.index(Kind.fold_summary)
        if placement == "in_place":
            assert where == 0
        else:
            assert where == len(kinds) - 1 - kinds[::-1].index(Kind.fold_summary)
            assert all(k is Kind.chat for k in kinds[:where]), "the kept messages stay ahead of the summary"
            assert where > 0


class _CountingSummarizer:
    """A summary a third of its span, each span it was asked recorded."""

    name = "counting"

    def __init__(self) -> None:
        self.asked: list[int] = []

    def summarize(self, messages):
        words = " ".join(m.content for m in messages).split()
        self.asked.append(len(messages))
        return " ".join(words[: max(3, len(words) // 3)])


def test_a_later_pass_whose_span_is_a_few_tokens_asks_no_summary():
    # folded after the kept messages, the first pass leaves the context above the target (the ledger it carries,
    # the user's long new message); what the ladder may still take is the reply before the summary, 2 tokens.
    # On llama.cpp the summary request of such a span read 603 tokens and could save none
    s = Session(window=2048, counter=Chars4Counter(), detect_statements=True)
    s.add("user", "context: " + "pinned words " * 50, pinned=True)
    s.add("assistant", "ok, noted")
    for i in range(6):
        s.add(
            "user",
            f"We decided to keep the queue{i} worker on host node-{i} because it handles retries. "
            + "plain words here " * 50
            + f"Never deploy queue{i} on Fridays.",
        )
        s.add("assistant", "ok, noted")
    s.add("user", "turn 6: " + "plain words here " * 120)
    summarizer = _CountingSummarizer()
    ctx = PolicyContext(settings=PolicySettings(window=2048, keep_recent=2, fold_placement="after"))
    events = run_plan(LadderPolicy().after_add(s, ctx), summarizer)
    assert [type(e) for e in events] == [Folded]
    assert s.context_tokens > ctx.settings.target_tokens
    assert summarizer.asked == [12]
