"""The ledger in the app (issue 22, item 6): the Ledger panel, its keys (p u a x e), `/ledger`,
ledger messages in the transcript and the inspector, the resume build, inspect and export."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tailrent_tui.agent.build import build_agent
from tailrent_tui.agent.lifecycle import open_agent
from tailrent_tui.cli import cli
from tailrent_tui.core.messages import Kind
from tailrent_tui.settings import Settings
from tailrent_tui.ui.screens.fold_inspector import FoldInspector
from tailrent_tui.ui.widgets.input import PromptInput
from tailrent_tui.ui.widgets.ledger_panel import LedgerList
from tailrent_tui.ui.widgets.message import MessageView
from tests.support.ui_helpers import approve_preview, make_agent, make_app, submit, wait_until

RULE = "SECURITY RULE: never print the signing secret sk-9q2-alder"
OLD = "the spend limit is $300"
NEW = "update: the spend limit is now $500"
# chatter the ledger keeps nothing of (a question): the user's other words would be kept as said
PAD = " Did everyone in the room think it looked fine?"
PROPOSAL = "Sounds good. We decided to use Postgres 16 for the billing service."


@pytest.fixture(autouse=True)
def config_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TAILRENT_CONFIG_DIR", str(tmp_path / "config"))


def ledger_agent(tmp_path: Path, **kwargs):
    agent = make_agent(tmp_path, **kwargs)
    agent.session.detect_statements = True
    return agent


def said(agent) -> None:
    s = agent.session
    s.add("user", RULE)
    s.add("user", OLD)
    s.add("assistant", PROPOSAL)
    s.add("user", NEW)
    m = s.make_message("user", "Here is the call transcript, for reference.", pinned=True)
    m.id = "handpin00001"
    s.add_message(m, autopin=False)


def rows(app) -> list[str]:
    listing = app.sidebar.ledger.query_one(LedgerList)
    return [str(listing.get_option_at_index(i).prompt) for i in range(listing.option_count)]


def cost(app) -> str:
    return str(app.sidebar.ledger.query_one(".cost").render())


async def highlight(pilot, app, text: str) -> None:
    """Focus the Ledger panel's list on the row that shows `text`."""
    listing = app.sidebar.ledger.query_one(LedgerList)
    listing.focus()
    listing.highlighted = next(i for i, r in enumerate(rows(app)) if text in r)
    await pilot.pause()


async def test_the_panel_lists_statements_by_kind_with_the_chain_proposals_and_plain_pins(tmp_path):
    agent = ledger_agent(tmp_path)
    said(agent)
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_until(pilot, lambda: any("#4" in r for r in rows(app)), what="the ledger rows")
        shown = rows(app)
        assert shown.index("decision") < shown.index("rule") < shown.index("constraint") < shown.index("pinned messages")
        assert any(r.startswith(" #1 SECURITY RULE: never print the sign") for r in shown), shown
        assert " #2 the spend limit is $300 → #4" in shown  # superseded, with its successor
        assert any(r.startswith("?#3 We decided to use Postgres") and r.endswith("proposal") for r in shown), shown
        assert "pinned messages" in shown and any(r.startswith("Here is the call transcript") for r in shown)
        assert all(len(r) <= 46 for r in shown), [r for r in shown if len(r) > 46]  # fits the sidebar
        text = cost(app)
        assert "4 statements: 2 current · 1 proposed · 1 superseded" in text
        s = agent.session
        held = sum(m.tokens for m in s.pinned)
        assert f"{len(s.pinned)} pins · {held:,} tok re-sent every turn" in text
        assert f"budget {s.pin_budget:,}" in text and not app.sidebar.ledger.has_class("-over-budget")


async def test_past_the_pin_budget_the_panel_warns(tmp_path):
    agent = ledger_agent(tmp_path, window=60)
    said(agent)
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_until(pilot, lambda: app.sidebar.ledger.has_class("-over-budget"), what="the warning")
        assert f"at the {agent.session.pin_budget:,}-token pin budget: auto-pin is off" in cost(app)


async def test_keys_accept_supersede_edit_and_pin_on_the_highlighted_statement(tmp_path):
    agent = ledger_agent(tmp_path)
    said(agent)
    s = agent.session
    rule, _old, proposal, new = list(s.statements)
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_until(pilot, lambda: len(rows(app)) > 4, what="the ledger rows")
        await highlight(pilot, app, "We decided")
        await pilot.press("a")
        assert s.statements[proposal].status == "current"
        await wait_until(pilot, lambda: any(r.startswith(" #3 We decided") for r in rows(app)), what="accepted row")

        await highlight(pilot, app, "#1 SECURITY")
        await pilot.press("x")
        assert s.statements[rule].status == "superseded"
        assert not s.get(s.statements[rule].message_id).pinned  # it leaves at the next fold
        await wait_until(
            pilot, lambda: any(r.startswith(" #1 SECURITY") and r.endswith("✗") for r in rows(app)), what="superseded row"
        )

        await highlight(pilot, app, "#4 update")
        await pilot.press("e")
        box = app.query_one(PromptInput)
        assert box.has_focus and box.value == f"/ledger edit 4 {NEW}"
        box.value = "/ledger edit 4 the spend limit is $550 per month"
        await pilot.press("enter")
        await wait_until(pilot, lambda: s.statements[new].text == "the spend limit is $550 per month", what="the edit")
        assert any(m.kind is Kind.ledger and "the spend limit is $550 per month" in m.content for m in s.messages)
        await wait_until(pilot, lambda: any(r.startswith("✎#4 the spend limit is $550") for r in rows(app)), what="edited")

        await highlight(pilot, app, "#3 We decided")
        holder = s.carrier[proposal]
        assert not s.get(holder).pinned
        await pilot.press("p")
        assert s.get(holder).pinned
        await pilot.press("u")
        assert not s.get(holder).pinned
        # enter on a row selects the message that holds it in the transcript
        await pilot.press("enter")
        await wait_until(
            pilot, lambda: isinstance(app.focused, MessageView) and app.focused.message_id == holder, what="the holder focused"
        )
        # a selected message lists its statements: a acts on its one proposal, x on it too
        head = str(app.focused.query_one(".head").render())
        assert "ledger #3" in head
        await pilot.press("x")
        assert s.statements[proposal].status == "superseded"


async def test_a_message_with_no_or_several_statements_says_so(tmp_path):
    agent = ledger_agent(tmp_path)
    said(agent)
    s = agent.session
    app = make_app(agent)
    notes: list[str] = []
    async with app.run_test(size=(140, 40)) as pilot:
        app.screen.notify = lambda text, **kw: notes.append(text)  # type: ignore[method-assign]
        view = app.transcript.view_of("handpin00001")
        view.focus()
        await pilot.pause()
        await pilot.press("x")
        assert notes[-1] == "this message holds no statement to supersede (/ledger lists them)"
        assert [st.status for st in s.statements.values()] == ["current", "superseded", "proposal", "current"]


async def test_slash_ledger_lists_and_its_subcommands_take_a_number_or_an_id_prefix(tmp_path):
    agent = ledger_agent(tmp_path)
    said(agent)
    s = agent.session
    rule, _old, proposal, new = list(s.statements)
    app = make_app(agent)
    notes: list[tuple[str, str]] = []
    async with app.run_test(size=(140, 40)) as pilot:
        app.screen.notify = lambda text, severity="information", **kw: notes.append((text, severity))  # type: ignore[method-assign]
        await submit(pilot, app, "/ledger")
        await wait_until(pilot, lambda: app.transcript.query(".listing"), what="the listing")
        listing = str(app.transcript.query(".listing").last().render())
        assert listing.splitlines()[0].startswith("ledger: 4 statements (2 current, 1 proposed, 1 superseded)")
        assert f"  #1 {RULE}\n     current · pinned in its message\n" in listing
        assert "superseded → #4 · " in listing and "proposal · in its message" in listing

        await submit(pilot, app, f"/ledger accept {proposal[:6]}")
        assert s.statements[proposal].status == "current"
        assert notes[-1] == ("#3 accepted: a current decision, kept verbatim from now on", "information")
        await submit(pilot, app, "/ledger supersede #1")
        assert s.statements[rule].status == "superseded"
        await submit(pilot, app, "/ledger edit 4 the spend limit is now $600")
        assert s.statements[new].text == "the spend limit is now $600"

        box = app.query_one(PromptInput)
        for bad, said_back in [
            ("/ledger frobnicate 1", "/ledger frobnicate: unknown; /ledger lists it"),
            ("/ledger accept", "/ledger accept needs a statement"),
            ("/ledger supersede 99", "no statement '99' in the ledger: /ledger lists them (1-4)"),
            ("/ledger accept zz", "no statement 'zz' in the ledger"),
        ]:
            await submit(pilot, app, bad)
            assert notes[-1][0].startswith(said_back) and notes[-1][1] == "error", notes[-1]
            assert box.value == bad  # kept, to fix
        # /ledger edit N without a text opens the input on it
        await submit(pilot, app, "/ledger edit 2")
        assert box.value == f"/ledger edit 2 {OLD}"


async def test_an_ambiguous_prefix_is_refused_with_the_numbers(tmp_path):
    agent = ledger_agent(tmp_path)
    s = agent.session
    for i, text in enumerate(["the spend limit is $300", "Deploy only from the release-4 branch."]):
        m = s.make_message("user", text)
        m.id = f"abc00000000{i}"
        s.add_message(m)
    app = make_app(agent)
    notes: list[str] = []
    async with app.run_test(size=(140, 40)) as pilot:
        app.screen.notify = lambda text, **kw: notes.append(text)  # type: ignore[method-assign]
        await submit(pilot, app, "/ledger supersede abc")
        assert notes[-1] == "'abc' names 2 statements (#1, #2): give its number or more of its id"
        assert all(st.status == "current" for st in s.statements.values())


async def test_a_fold_leaves_a_ledger_message_and_the_inspector_shows_what_it_carried(tmp_path):
    agent = ledger_agent(tmp_path, window=4096, settings=Settings(fold={"target": 0.05}, tokenizer="chars4"))
    s = agent.session
    s.add("user", "Deploys go through the staging-7 cluster first." + PAD * 6)
    s.add("assistant", "Understood." + PAD * 6)
    s.add("user", "ok" + PAD * 6)
    first = s.messages[0]
    assert not first.pinned and s.statements_held(first.id)
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        await submit(pilot, app, f"/fold {first.id} {s.messages[1].id}")
        await approve_preview(pilot, app)
        await wait_until(pilot, lambda: len(s.folds) == 1, what="the fold")
        fold = s.folds[0]
        assert fold.ledger is not None and fold.carried
        await wait_until(pilot, lambda: app.transcript.view_of(fold.ledger.id) is not None, what="the ledger widget")
        view = app.transcript.view_of(fold.ledger.id)
        head, body = (str(w.render()) for w in view.query("Static"))
        assert head.startswith("ledger · 1 statement kept verbatim") and "pinned" in head
        assert body == "- fact: Deploys go through the staging-7 cluster first."
        ids = app.transcript.mounted_ids
        assert ids.index(fold.summary.id) + 1 == ids.index(fold.ledger.id)
        await wait_until(pilot, lambda: "ledger 0" not in cost(app), what="the panel counts the ledger message")
        await submit(pilot, app, "/inspect 1")
        await wait_until(pilot, lambda: isinstance(app.screen, FoldInspector), what="the inspector")
        assert str(app.screen.query_one("#ledger").render()) == "ledger: carried 1 statement"
        assert str(app.screen.query_one("#carried").render()) == "#1 fact: Deploys go through the staging-7 cluster first."
        await pilot.press("escape")


async def test_p_and_u_on_a_statement_a_ledger_message_carries_act_on_that_statement_alone(tmp_path):
    agent = ledger_agent(tmp_path, window=4096, settings=Settings(fold={"target": 0.05}, tokenizer="chars4"))
    s = agent.session
    s.add("user", "Deploys go through the staging-7 cluster first. Never deploy on Fridays." + PAD * 6)
    s.add("assistant", "Understood." + PAD * 6)
    s.add("user", "ok" + PAD * 6)
    first = s.messages[0]
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        await submit(pilot, app, f"/fold {first.id} {s.messages[1].id}")
        await approve_preview(pilot, app)
        await wait_until(pilot, lambda: len(s.folds) == 1, what="the fold")
        holder = s.folds[0].ledger.id
        deploys, fridays = s.get(holder).meta["statements"]
        await wait_until(pilot, lambda: any("Never deploy on Fridays" in r for r in rows(app)), what="the rows")
        await highlight(pilot, app, "Never deploy on Fridays")
        await pilot.press("u")
        assert s.statements[fridays].unpinned and not s.statements[deploys].unpinned
        assert s.get(holder).pinned, "the whole ledger message was unpinned"
        await wait_until(pilot, lambda: "unpinned: the next fold may summarize it" in s.get(holder).content, what="shown")
        await pilot.press("p")
        assert not s.statements[fridays].unpinned and s.get(holder).pinned
        await submit(pilot, app, "/ledger unpin 1")
        assert s.statements[deploys].unpinned and s.get(holder).pinned
        await submit(pilot, app, "/ledger pin 1")
        assert not s.statements[deploys].unpinned


# -- a session journaled before the ledger, inspect and export ------------------------------------------


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    ws = tmp_path / "ws"
    ws.mkdir()
    return Settings(model="mock", data_dir=tmp_path / "data", workspace=ws, fsync=False, tokenizer="chars4")


async def _old_session(settings: Settings) -> Path:
    """A session whose journal has no statement in it, as one written before the ledger existed."""
    async with open_agent(settings, async_writer=False, new=True) as agent:
        for text in (RULE, OLD, NEW):
            assert (await agent.turn(text, None)).error is None
    journal = agent.session_dir.journal_path
    lines = journal.read_text().splitlines()
    kept = [line for line in lines if json.loads(line).get("type") not in ("statements_found", "statement_changed")]
    assert len(kept) < len(lines)
    journal.write_text("\n".join(kept) + "\n")
    return journal


async def test_resuming_an_old_session_builds_its_ledger_once_and_says_so(settings):
    await _old_session(settings)
    agent = build_agent(settings, {"continue_": True}, async_writer=False)
    s = agent.session
    try:
        assert [st.text for st in s.statements.values()] == [RULE, OLD, NEW]
        assert [st.status for st in s.statements.values()] == ["current", "superseded", "current"]
        line = f"the ledger was built from this session's {len(s):,} messages: 3 statements"
        assert [n.text for n in agent.startup_notes if n.text.startswith("the ledger")] == [line]
        app = make_app(agent)
        async with app.run_test(size=(140, 40)) as pilot:
            await wait_until(
                pilot,
                lambda: any(str(w.render()) == line for w in app.transcript.query(".turn-notice")),
                what="the line in the transcript",
            )
            assert " #2 the spend limit is $300 → #3" in rows(app)
    finally:
        await agent.model.aclose()
        await agent.aclose()
    async with open_agent(settings, {"continue_": True}, async_writer=False) as again:
        assert len(again.session.statements) == 3  # journaled the first time: not built twice
        assert not any(n.text.startswith("the ledger was built") for n in again.startup_notes)


async def test_inspect_and_export_include_the_ledger(settings, tmp_path):
    async with open_agent(settings, async_writer=False, new=True) as agent:
        agent.session.add("user", "Deploys go through the staging-7 cluster first." + PAD * 6)
        for text in (OLD, NEW):
            assert (await agent.turn(text, None)).error is None
        s = agent.session
        await agent.ladder.fold([s.messages[0].id, s.messages[1].id])
        assert s.folds and s.folds[0].carried
    runner = CliRunner()
    base = ["--data-dir", str(settings.data_dir)]
    out = runner.invoke(cli, [*base, "inspect", s.id])
    assert out.exit_code == 0, out.output
    assert "  carried into the ledger: 1\n    #1 fact: Deploys go through the staging-7 cluster first.\n" in out.output
    assert "ledger: 3 statements (2 current, 0 proposed, 1 superseded)" in out.output
    assert "  #2 the spend limit is $300\n     superseded → #3 · " in out.output
    doc = json.loads(runner.invoke(cli, [*base, "inspect", s.id, "--json"]).output)
    (fold,) = doc["folds"]
    assert fold["carried"] == [
        {"no": 1, "id": s.folds[0].carried[0], "kind": "fact", "text": "Deploys go through the staging-7 cluster first."}
    ]
    assert fold["uncarried"] == [] and fold["dropped"] is False and fold["retired"] is False
    assert [(r["no"], r["status"], r["superseded_by"]) for r in doc["ledger"]] == [
        (1, "current", None),
        (2, "superseded", doc["ledger"][2]["id"]),
        (3, "current", None),
    ]
    assert doc["ledger"][0]["held"] == "the ledger of fold #1"
    one = json.loads(runner.invoke(cli, [*base, "inspect", s.id, "--fold", "1", "--json"]).output)
    assert one["fold_no"] == 1 and one["carried"] == fold["carried"]

    md = runner.invoke(cli, [*base, "export", s.id]).output
    section = md[md.index("## Ledger") :]
    assert "**fact**\n\n- #1 Deploys go through the staging-7 cluster first.\n" in section
    assert "**constraint**\n\n- #3 update: the spend limit is now $500\n" in section
    assert "**superseded**\n\n- ~~#2 the spend limit is $300~~ → #3 update: the spend limit is now $500\n" in section
    assert "carried into the ledger, verbatim (1)" in md
    exported = json.loads(runner.invoke(cli, [*base, "export", s.id, "--format", "json"]).output)
    assert [r["text"] for r in exported["ledger"]] == [r["text"] for r in doc["ledger"]]
    assert exported["fold_log"][0]["carried"] == s.folds[0].carried


async def test_a_statement_the_ledger_let_go_is_marked_and_counted_as_not_in_the_context(tmp_path):
    from tailrent_tui.core.rungs.fold import apply_fold, fold_ledger
    from tests.support.folds import fold_span

    agent = ledger_agent(tmp_path)
    s = agent.session
    texts = [f"RULE: never deploy service s{i} on a friday." for i in range(4)]
    for text in texts:
        m = s.add("user", text + " We went over the rollout notes for a while, nothing else came up." * 4)
        fold_span(s, [m.id], summary="notes", summarizer_name="test", guard="report")
    merged = fold_ledger(s, 1, release=False)
    assert merged is not None
    record = fold_ledger(s, merged.tokens_before - merged.tokens_after + 1)
    assert record is not None and record.uncarried
    apply_fold(s, record, None)
    gone = {s.statements[i].text for i in record.uncarried}
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_until(pilot, lambda: "not in the context" in cost(app), what="the count")
        assert f"· {len(gone)} not in the context" in cost(app)
        marked = [r for r in rows(app) if r.startswith("○")]
        assert len(marked) == len(gone) and all(any(t[:20] in r for t in gone) for r in marked)
