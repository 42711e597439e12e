"""The ledger (issue 22): statements kept verbatim through folds, corrections that supersede,
folds of depth one, a guard that says what was lost, and a ladder that always fits."""

from __future__ import annotations

import pytest

from tailrent_tui.core.guard import DecisionDetector, guarded_facts
from tailrent_tui.core.ledger import AMENDED_MARK, MAX_PER_MESSAGE, MAX_STATEMENT_CHARS, detect
from tailrent_tui.core.messages import Kind
from tailrent_tui.core.policies import PolicyContext, PolicySettings, get_policy, run_plan
from tailrent_tui.core.rungs.fold import MemoryFoldArchive, unfold
from tailrent_tui.core.rungs.spill import MemorySpillStore
from tailrent_tui.core.session import Session, replay
from tailrent_tui.core.summarize import LossySummarizer
from tailrent_tui.core.tokens import get_counter

SECRET = "SECURITY RULE: Never print the signing secret sk-9q2-alder to the logs."
LIMIT = "LIMIT: the load-test spend stays under $300; do not go over it without asking."
MERGE = "Merge nothing to main until Ana Oliveira signs off."
ENGLISH = "Answer in British English, with metric units."

WORK = (
    "I traced the call path from the CLI down to emit and renamed the local offset to batch in "
    "seventeen places; the loop builds the result incrementally, so a generator would save one copy. "
)


def ladder(window: int = 2048, **settings):
    policy = get_policy("ladder")
    s = Session(counter=get_counter("cl100k"), system="You are a coding agent.", window=window, decisions=DecisionDetector())
    ctx = PolicyContext(
        spill_store=MemorySpillStore(), archive=MemoryFoldArchive(), settings=PolicySettings(window=window, **settings)
    )
    return policy, s, ctx


ASK = "step {i}: please look at module m{m} next"


def work(policy, s, ctx, rounds: int, summarizer=None, *, ask: str = ASK, tag: str | None = None) -> None:
    """`rounds` of a request for the turn (`ask`, nothing to keep) and an account of work (numbered after `tag`)."""
    summarizer = summarizer or LossySummarizer()
    for i in range(rounds):
        reply = ("" if tag is None else f"{tag}{i} ") + WORK * 3
        for role, text in (("user", ask.format(i=i, m=i % 7)), ("assistant", reply)):
            s.add(role, text)
            run_plan(policy.after_add(s, ctx), summarizer)
        run_plan(policy.before_request(s, ctx, expired=False), summarizer)
        assert s.context_tokens <= s.window


def test_the_issues_statements_are_found_whole_and_their_labels_are_not_facts():
    kinds = {text: [f.kind for f in detect(text)] for text in (SECRET, LIMIT, MERGE, ENGLISH)}
    assert kinds == {SECRET: ["rule"], LIMIT: ["constraint"], MERGE: ["rule"], ENGLISH: ["preference"]}
    assert detect(LIMIT)[0].text == LIMIT  # verbatim, "do not go over" included
    facts = [f.text for f in guarded_facts(SECRET + " " + LIMIT)]
    assert "sk-9q2-alder" in facts and "$300" in facts
    assert not {"SECURITY", "RULE", "LIMIT"} & set(facts)


def test_chatter_questions_and_hedges_are_not_statements():
    for text in (
        "thanks!",
        "ok running it now",
        "should we cap the retries?",
        "maybe we should revisit the cap later, no decision yet",
        "the linter says never use bare except, is that right?",
        "ran the tests, 3 failures",
        "we did NOT decide on postgres yet",
        "```\nrm -rf build  # clean\nmake test\n```",
    ):
        assert detect(text) == [], text
    # ... but a rule beside an idiom, or a word that only looks like one, still counts (found in review)
    for text in (
        "Always use nvm to switch to Node 20 before building.",
        "Never mind the linter, always run pytest before pushing.",
        "Always keep an eye on the p99 latency; it must stay under 200 ms.",
        "park it on port 8443 from now on",
        "Add a check that the timeout is always under 30s.",
    ):
        assert detect(text), text
    # a question with a colon in it is still a question; a status line headed with a wh-word is not
    for text in ("should we: never deploy on fridays", "is it ok: max 3 retries per job", "any idea: the db moved to pg-main-04"):
        assert detect(text) == [], text
    # idioms with a rule's words in them are not even the user's words to keep
    for text in (
        "never mind, i'll ask Priya",
        "nobody knows yet, park it",
        "keep an eye on that one",
        "write that down somewhere, it will bite us again",
    ):
        assert detect(text, words=True) == [], text


def test_a_request_for_a_recap_is_not_a_statement_nor_the_users_words_to_keep():
    # seen on llama.cpp: "write down what we agreed" was pinned as a decision
    for text in (
        "Write down what we agreed on the retry policy.",
        "remind me what the limit on the spend was",
        "can you recap where we are with the migration",
        "sum up the last hour for me pls",
        "Write a remove_all(name) method for Inventory.",  # seen pinned as a preference on llama.cpp
    ):
        assert detect(text, "user", words=True) == [], text


def test_a_fold_keeps_every_statement_verbatim_in_a_pinned_ledger_message_and_the_summary_never_sees_them():
    policy, s, ctx = ladder()
    seen: list[str] = []

    class Recording(LossySummarizer):
        def summarize(self, messages):
            seen.extend(m.content for m in messages)
            return super().summarize(messages)

    s.add("user", f"{SECRET} {LIMIT}\n\nalso can you explain the digest handling in metrics, {WORK}")
    s.add("user", f"{MERGE} {ENGLISH} and then look at the scheduler")
    work(policy, s, ctx, 40, Recording())
    assert s.folds and all(f.depth == 1 for f in s.folds)
    text = s.visible_text()
    for statement in (SECRET, LIMIT, MERGE, ENGLISH):
        assert statement in text
    assert not any("sk-9q2-alder" in t or "$300" in t for t in seen), "a summarizer was shown a carried statement"
    ledger = [m for m in s.messages if m.kind is Kind.ledger]
    assert ledger and all(m.pinned for m in ledger)
    assert all(f.carried or not f.ledger for f in s.folds) and any(f.carried for f in s.folds)


def test_a_correction_supersedes_and_the_old_value_leaves_at_the_next_fold():
    policy, s, ctx = ladder()
    old = s.add("user", LIMIT)
    assert old.pinned
    work(policy, s, ctx, 3)
    new = s.add("user", "update: the spend limit is now $500 for the load test")
    (before,) = [st for st in s.statements.values() if st.message_id == old.id]
    assert before.status == "superseded" and s.statements[before.superseded_by].message_id == new.id
    work(policy, s, ctx, 40)
    current = "\n".join(m.content for m in s.messages if m.pinned or m.kind in (Kind.ledger, Kind.fold_summary))
    assert "$300" not in current, "a superseded value is shown as current"
    assert "$500" in s.visible_text()


def test_a_correction_of_a_statement_a_fold_carried_takes_its_line_out_of_the_ledger_at_once():
    """Once a fold has carried a statement into a ledger message, its correction must not leave the old
    value there until some later fold: the model would read both as current in the meantime."""
    policy, s, ctx = ladder()
    events = []
    s.listeners.append(events.append)
    s.add("user", f"{SECRET} {LIMIT}\n\nalso {WORK}")
    s.add("user", f"{MERGE} and then look at the scheduler")
    work(policy, s, ctx, 40)
    (ledger,) = [m for m in s.messages if m.kind is Kind.ledger and "$300" in m.content]
    assert "sk-9q2-alder" in ledger.content
    folds = len(s.folds)
    s.add("user", "update: the spend limit is now $500 for the load test")
    assert len(s.folds) == folds  # no fold in between
    assert "$300" not in ledger.content and "sk-9q2-alder" in ledger.content
    # unpinned, it leaves at the next fold, which carries the rest of it again
    assert not ledger.pinned
    work(policy, s, ctx, 40)
    assert ledger.id not in s and "sk-9q2-alder" in s.visible_text() and "$300" not in s.visible_text()
    current = "\n".join(m.content for m in s.messages if m.pinned or m.kind in (Kind.ledger, Kind.fold_summary))
    assert "$300" not in current and "$500" in s.visible_text()
    # the journal replays to the same ledger line
    again = replay(events, counter=s.counter, system=s.system, window=s.window)
    assert [m.content for m in again.messages if m.kind is Kind.ledger] == [
        m.content for m in s.messages if m.kind is Kind.ledger
    ]


@pytest.mark.parametrize(
    ("said", "correction"),
    [
        # the same unit after a number
        ("the staging db box has 32 GB of ram", "update: staging db got resized, 64 GB now"),
        (
            "nightly export runs every 30 min right now, leave the schedule alone",
            "ok the export schedule changed, every 45 minutes now",
        ),
        # the same name before a version
        ("the lambdas run on node 18.19, dont use newer syntax", "heads up: lambdas are on node 20.11 now, newer syntax is fine"),
        # the same key before =
        ("set MAX_WORKERS=8 in the compose file for the ingest service", "actually MAX_WORKERS=4 for ingest, the box swaps at 8"),
        # units people type with a sign: microseconds, degrees
        ("the hot path's p99 has to stay under 8 µs", "update: hot path p99 can be 12 µs now, we relaxed it"),
        ("the kiln cutoff sits at 1200 °C, dont go above", "correction: the kiln cutoff is 1180 °C now"),
        # the word before "is": "the freeze window is now 20:00", "terraform is 1.7 now"
        ("deploy freeze window is 18:00 to 06:00 on weekdays", "heads up, the freeze window is now 20:00 to 06:00"),
        ("we're on terraform 1.5 for the whole estate", "fyi terraform is 1.7 now, i upgraded the runners"),
        # the old value named next to a new one of the same shape, with no cue before either
        ("pin the nvidia driver to 535.104 on every gpu box", "update: pin 535.129 instead, 535.104 leaks memory under load"),
    ],
)
def test_a_correction_that_gives_the_same_measure_another_value_supersedes(said, correction):
    _, s, _ = ladder()
    s.add("user", "the cache TTL is 15 min on the edge, because the origin is slow")  # same unit, other subject
    old = s.add("user", said)
    new = s.add("user", correction)
    by_message = {st.message_id: st for st in s.statements.values()}
    assert by_message[old.id].status == "superseded"
    assert s.statements[by_message[old.id].superseded_by].message_id == new.id
    assert all(st.status != "superseded" for st in s.statements.values() if "TTL" in st.text)


def test_a_correction_of_one_value_of_several_amends_the_statement_and_the_rest_stays_current():
    """People pack several facts in one sentence; a correction of one of them must not take the
    others out of the context with it (they would leave at the next fold, silently)."""
    policy, s, ctx = ladder()
    events = []
    s.listeners.append(events.append)
    first = s.add(
        "user", "morning. we're on the billing service today, python 3.12, and the ledger db is pg-bill-07 on port 6432"
    )
    s.add("user", "the staging db box has 16 GB of ram so dont load more than 4 GB of fixtures")
    s.add("user", "actually the db moved, it's pg-bill-09 now, same port")
    s.add("user", "update: staging db got resized, 32 GB now")
    amended = [st for st in s.statements.values() if st.amended_by]
    assert len(amended) == 2 and all(st.status == "current" for st in amended)
    texts = " ".join(st.text for st in amended)
    assert "python 3.12" in texts and "6432" in texts and "4 GB of fixtures" in texts
    assert "pg-bill-07" not in texts and "16 GB" not in texts and AMENDED_MARK in texts
    # what /ledger says of them: who changed them, and which statement did
    from tailrent_tui.store.ledger_report import ledger_lines

    said = "\n".join(ledger_lines(s))
    assert said.count("part superseded → #") == 2 and said.count("a ledger line (amended by a correction)") == 2
    work(policy, s, ctx, 40)
    assert first.id not in s, "the first message should have been folded by now"
    visible = s.visible_text()
    for word in ("python 3.12", "6432", "4 GB of fixtures", "pg-bill-09", "32 GB"):
        assert word in visible, word
    current = "\n".join(m.content for m in s.messages if m.pinned or m.kind in (Kind.ledger, Kind.fold_summary))
    assert "pg-bill-07" not in current and "16 GB" not in current, "a replaced value is shown as current"
    again = replay(events, counter=s.counter, system=s.system, window=s.window)
    assert {k: (v.text, v.amended_by) for k, v in again.statements.items()} == {
        k: (v.text, v.amended_by) for k, v in s.statements.items()
    }


def test_a_correction_is_matched_on_the_words_that_tell_statements_apart_not_on_the_words_they_all_share():
    """Three jobs "must always run on the small runner, never on the shared pool"; a rule for a fourth
    job that shares those words with them, and nothing else, replaces none of them (it would take one
    out of the context at the next fold, without a word). Matched on all words alike, it replaced the
    cleanup job's rule, and the backup job's own correction then replaced the ingest job's."""
    _, s, _ = ladder()
    rule = "the {} job must always run on the small runner, never on the shared pool"
    jobs = [s.add("user", rule.format(job)) for job in ("report", "backup", "cleanup")]
    ingest = s.add("user", "from now on the ingest job must always run on the big runner, never on the shared pool")
    by_message = {st.message_id: st for st in s.statements.values()}
    assert [by_message[m.id].status for m in jobs] == ["current"] * 3
    fix = s.add("user", "from now on the backup job must always run on the big runner, never on the shared pool")
    assert by_message[jobs[1].id].status == "superseded"
    assert s.statements[by_message[jobs[1].id].superseded_by].message_id == fix.id
    assert [by_message[m.id].status for m in (jobs[0], jobs[2], ingest)] == ["current"] * 3


def test_an_instruction_files_list_items_are_statements_without_their_markers():
    text = (
        "# AGENTS.md: till-app\n\n"
        "Point-of-sale app for a bakery chain.\n\n"
        "## Setup\n"
        "- Java 17 toolchain.\n"
        "- Gradle wrapper only, no global gradle.\n"
        "- Amounts are BigDecimal end to end.\n"
        "1. Regenerate the schema classes after touching schema/.\n"
    )
    found = detect(text, "instructions")
    texts = [f.text for f in found]
    for item in (
        "Java 17 toolchain.",
        "Gradle wrapper only, no global gradle.",
        "Amounts are BigDecimal end to end.",
        "Regenerate the schema classes after touching schema/.",
    ):
        assert item in texts, (item, texts)
    assert not any(t.startswith(("-", "1.", "#")) for t in texts)
    # the same lines typed by the user in chat are judged sentence by sentence, as before
    assert len(detect("- ok\n- sounds good", "user")) == 0


def test_a_new_port_amends_the_statement_that_also_says_when_the_export_runs():
    """Seen in the app: "port 5433" had no anchor, so the port's correction superseded the whole
    statement, and "the nightly export runs at 02:00 utc" left the context at the next fold."""
    _, s, _ = ladder()
    first = s.add("user", "the staging db is pg-stg-04 on port 5433, and the nightly export runs at 02:00 utc")
    s.add("user", "update: the staging db moved to port 6544 now")
    (st,) = [st for st in s.statements.values() if st.message_id == first.id]
    assert st.status == "current" and st.amended_by
    assert "02:00 utc" in st.text and "pg-stg-04" in st.text and "5433" not in st.text


def test_a_status_line_headed_with_a_wh_word_is_a_goal_and_a_documents_prose_rule_counts_mid_line():
    """Both were missed on the held-out canary and no fold reported them lost."""
    (goal,) = detect("nice, all green. where we are: the payout fix is done, refunds are next", "user", words=True)
    assert goal.kind == "goal" and not goal.said and "refunds are next" in goal.text
    assert detect("where do we stand on the refunds", "user", words=True) == []  # that one asks
    tool = "## Style\n\nWe follow ruff. Run `make lint-fix` before pushing.\nThe CI image is rebuilt weekly."
    assert [f.text for f in detect(tool, "tool")] == ["Run `make lint-fix` before pushing."]


def test_a_status_line_that_moves_on_replaces_the_last_status_line_and_nothing_else():
    _, s, _ = ladder()
    back = s.add("user", "Ines is back from leave on the 20th, she reviews the exporter")
    old = s.add("user", "where we are: the exporter is in review, next is the csv writer")
    new = s.add("user", "status: exporter merged and the csv writer shipped. retry queue is next")
    by_message = {st.message_id: st for st in s.statements.values()}
    assert by_message[old.id].status == "superseded"
    assert s.statements[by_message[old.id].superseded_by].message_id == new.id
    assert by_message[back.id].status == "current"


def test_a_correction_with_the_same_unit_on_another_subject_leaves_the_statement_current():
    _, s, _ = ladder()
    ttl = s.add("user", "the cache TTL is 15 min on the edge, because the origin is slow")
    s.add("user", "the cron for the report runs every 30 min")
    s.add("user", "actually the report cron runs every 45 min now")
    (st,) = [st for st in s.statements.values() if st.message_id == ttl.id]
    assert st.status == "current"


def test_a_correction_that_matches_nothing_supersedes_nothing_and_two_in_one_message_both_stand():
    _, s, _ = ladder()
    s.add("user", "FACT: the staging database is pg-stg-04.internal on port 5433.")
    s.add("user", "actually, the deploy window moved to Thursdays 14:00 UTC")
    assert not any(st.status == "superseded" for st in s.statements.values())
    s.add("user", "RULE: always squash on merge. RULE: never squash on merge.")
    both = [st for st in s.statements.values() if "squash" in st.text]
    assert len(both) == 2 and all(st.status == "current" for st in both)


def test_what_the_model_states_is_a_proposal_until_the_user_accepts_it():
    policy, s, ctx = ladder()
    reply = s.add("assistant", "We decided to refresh tokens based on the ability of mobile clients to persist tokens.")
    assert not reply.pinned
    (proposal,) = s.statements.values()
    assert proposal.status == "proposal"
    work(policy, s, ctx, 40)
    # a fold keeps it word for word, said to be the assistant's and not agreed: never as the user's decision
    shown = "\n".join(m.content for m in s.messages if m.kind is Kind.ledger)
    assert "proposed decision (the assistant's, not agreed): We decided to refresh tokens" in shown
    assert "- decision: We decided to refresh tokens" not in shown
    s2 = ladder()[1]
    r2 = s2.add("assistant", "We decided to keep refresh tokens in Redis with a 15 minute TTL.")
    (p2,) = s2.statements.values()
    s2.accept(p2.id)
    assert s2.statements[p2.id].status == "current" and not s2.get(r2.id).pinned


def test_editing_a_statement_shows_the_new_words_at_once_and_superseding_by_hand_releases_its_pin():
    _, s, _ = ladder()
    m = s.add("user", LIMIT)
    (st,) = s.statements.values()
    s.edit_statement(st.id, "LIMIT: the load-test spend stays under $450; ask before going over.")
    assert "$450" in s.visible_text() and s.statements[st.id].edited
    s.supersede(st.id)
    assert s.statements[st.id].status == "superseded"
    assert not s.get(m.id).pinned


def test_folds_have_depth_one_and_summaries_that_crowd_the_window_retire_to_a_pointer_that_unfolds():
    policy, s, ctx = ladder(window=2048)
    s.add("user", SECRET)
    work(policy, s, ctx, 60)
    assert max(f.depth for f in s.folds) == 1
    assert s.retired, "sixty rounds at 2,048 tokens retire old summaries"
    assert SECRET in s.visible_text()
    no = max(s.retired)
    archived = ctx.archive.read_fold(no)
    unfold(s, no, archived.originals, limit=10**6)
    assert all(i in s for i in s.folds[no - 1].span_ids)


def test_summaries_smaller_than_a_pointer_retire_together_when_they_crowd_the_window():
    """A fold of last resort leaves a short note, smaller than the one-line pointer a retirement
    writes: one at a time none of them could retire, so they piled up (48 of them, 1,200 tokens of a
    2,048 window on canary-typed) until requests went over the window. Two or more retire together."""
    from tailrent_tui.core.rungs.fold import apply_fold, prepare_fold, retire_summaries

    def fold(s, text: str, *, dropped: bool) -> None:
        done = s.add("assistant", text + ": " + WORK)
        record = prepare_fold(s, [done.id], summary=text, summarizer_name="dropped", guard="report")
        apply_fold(s, record.model_copy(update={"dropped": dropped}), None)

    _, s, _ = ladder(window=4096)
    for i in range(12):
        fold(s, f"left whole {i}", dropped=True)  # a fold of last resort's note
    notes = [m for m in s.messages if m.kind is Kind.fold_summary]
    assert len(notes) == 12 and all(m.tokens < 25 for m in notes)
    before = s.context_tokens
    retire_summaries(s, 0, keep_recent=0)
    (pointer,) = [m for m in s.messages if m.kind is Kind.fold_summary]
    assert s.context_tokens < before / 4 and "archived" in pointer.content
    assert set(s.retired) == set(range(1, 13)) and s.retired[12].merged == [11]  # each takes in the one before
    # a short summary that holds what it says is not retired to save nothing
    _, s, _ = ladder(window=4096)
    for i in range(3):
        fold(s, f"port {8000 + i} for svc-{i}", dropped=False)
    retire_summaries(s, 0, keep_recent=0)
    assert not s.retired and "port 8001 for svc-1" in s.visible_text()


def test_a_statement_the_ledger_had_no_room_for_and_the_summary_showed_is_reported_when_the_summary_retires():
    """Past the pins' budget, a statement stays in the span's text; a summary that quotes it keeps it
    visible, so its fold loses nothing. When that summary retires, the statement leaves: said so."""
    from tailrent_tui.core.rungs.fold import retire_summaries
    from tests.support.folds import fold_span

    s = Session(counter=get_counter("cl100k"), system="sys", window=4096, decisions=DecisionDetector(), pin_share=0.0)
    rule = "the nightly export must finish before the backup starts, we agreed on that twice"
    said = s.add("user", rule)
    work_ = s.add("assistant", WORK * 3)
    folded = fold_span(s, [said.id, work_.id], summary=rule + ". Work on the loop.", summarizer_name="test", guard="report")
    assert rule not in folded.fold.facts_lost and rule in folded.fold.facts
    for i in range(3):
        done = s.add("assistant", f"did {i}: " + WORK)
        fold_span(s, [done.id], summary=f"step {i}", summarizer_name="test", guard="report")
    retired = retire_summaries(s, 0, keep_recent=0)
    assert rule not in s.visible_text() and any(rule in r.facts_lost for r in retired)


def test_the_repetitive_session_of_the_issue_folds_and_never_passes_the_window():
    import random

    policy, s, ctx = ladder()
    rng = random.Random(1)
    lines = [
        "Let's review the module layout for the ingestion pipeline.",
        "The retry logic uses exponential backoff with jitter, capped at 30s.",
        "We pinned numpy to 1.26 for compatibility with the imaging stack.",
        "The load test peaked at 1.2k rps with no errors on the small cluster.",
    ]
    summarizer = LossySummarizer()
    over = 0
    for i in range(150):
        s.add("user", rng.choice(lines))
        run_plan(policy.after_add(s, ctx), summarizer)
        if i % 4 == 0 and i > 60:
            body = "\n".join(f"tests/test_m{rng.randint(1, 40)}.py::test_{j} PASSED" for j in range(rng.randint(20, 120)))
            policy.admit_tool(s, ctx, "run_shell", body)
            run_plan(policy.after_add(s, ctx), summarizer)
        run_plan(policy.before_request(s, ctx, expired=False), summarizer)
        over += s.context_tokens > s.window
        s.add("assistant", "Acknowledged. Continuing with the plan.")
        run_plan(policy.after_add(s, ctx), summarizer)
    assert over == 0 and s.folds
    assert "numpy" in s.visible_text() and "1.26" in s.visible_text()


def test_the_guard_counts_what_a_probe_would_miss():
    # guard "report": the lossy summary drops the identifiers; each is counted, and each is gone
    policy, s, ctx = ladder(guard="report")
    s.add("assistant", WORK + " In passing I looked at build b77-x3 on runner gh-r12 and the cache key ck_92a.")
    work(policy, s, ctx, 40)
    lost = {t for f in s.folds for t in f.facts_lost}
    text = s.visible_text().casefold()
    assert {"b77-x3", "gh-r12", "ck_92a"} <= lost
    assert all(t.casefold() not in text for t in lost if t in ("b77-x3", "gh-r12", "ck_92a"))


def test_a_ledger_past_its_budget_says_so_and_counts_what_it_could_not_keep():
    policy, s, ctx = ladder(window=2048)
    for i in range(90):
        s.add("user", f"FACT: service s{i} listens on port {7000 + i} behind gateway gw-{i}a.\n\n{WORK}")
    work(policy, s, ctx, 40)
    assert s.totals.pinned <= s.pin_budget + 64
    uncarried = [i for f in s.folds for i in f.uncarried]
    assert uncarried and any("the ledger is past its" in n.text for n in s.notes)
    lost = {t for f in s.folds for t in f.facts_lost}
    assert all(s.statements[i].text in lost for i in uncarried)


def test_bad_input_is_bounded():
    # a thousand statements in one paste: the first few dozen; a statement longer than the window: not kept
    # (how long these take: `benchmarks/ledger_bench.py --bounds`)
    paste = "\n".join(f"RULE: never touch table t{i}." for i in range(1000))
    assert len(detect(paste)) == MAX_PER_MESSAGE
    huge = "\n".join(f"tests/test_{i}.py::test_x PASSED" for i in range(50_000)) + "\nNever commit the fixtures.\n"
    found = detect(huge, "tool")
    assert [f.text for f in found] == ["Never commit the fixtures."]
    assert detect("RULE: " + "never do that " * 2000) == []


def test_the_ledger_replays_from_the_journal_and_is_built_for_a_session_journaled_before_it():
    policy, s, ctx = ladder()
    events = []
    s.listeners.append(events.append)
    s.add("user", LIMIT)
    s.add("user", "update: the spend limit is now $500 for the load test")
    work(policy, s, ctx, 40)
    again = replay(events, counter=s.counter, system=s.system, window=s.window)
    assert {k: v.status for k, v in again.statements.items()} == {k: v.status for k, v in s.statements.items()}
    assert again.visible_text() == s.visible_text()
    # an old journal: its messages, no ledger events
    old = [e for e in events if e.type not in ("statements_found", "statement_changed")]
    plain = [e for e in old if e.type == "message_added"]
    before = replay(plain, counter=s.counter, window=s.window, decisions=DecisionDetector())
    assert not before.statements
    assert before.rebuild_ledger() >= 2 and any(st.status == "superseded" for st in before.statements.values())


def test_the_apps_own_system_notices_never_enter_the_ledger():
    # seen on the real engine: the text protocol's pinned note became five "statements"
    from tailrent_tui.agent.text_protocol import PROTOCOL_NOTE

    _, s, _ = ladder()
    s.add("system", PROTOCOL_NOTE, pinned=True, autopin=False)
    assert [st for st in s.statements.values() if st.status == "current"] == []
    s.add("user", "never run migrations against prod without asking me first.")
    assert [st.kind for st in s.statements.values() if st.status == "current"] == ["rule"]


def test_a_correction_whose_subject_another_clause_restates_supersedes_the_statement_whole():
    _, s, _ = ladder()
    old = s.add("user", "the ci runners are shared, you get runners r3 and r4 only, RUNNER_POOL=r3,r4")
    s.add("user", "runner news: the other team left, RUNNER_POOL=r1,r2,r3,r4 now, all four runners are yours")
    (st,) = [st for st in s.statements.values() if st.message_id == old.id]
    assert st.status == "superseded" and not st.amended_by


def test_unpinning_the_only_statement_of_a_message_pinned_for_it_unpins_the_message():
    # seen on llama.cpp: "/ledger unpin 6" said unpinned, and the message stayed pinned for good
    _, s, _ = ladder()
    m = s.add("user", "never deploy on fridays, ops rule")
    assert m.pinned
    (st,) = [st for st in s.statements.values() if st.message_id == m.id]
    s.pin_statement(st.id, False)
    assert not s.get(m.id).pinned
    # pinned by the user's own hand, the message keeps its pin
    s.pin(m.id)
    s.pin_statement(st.id, True)
    s.pin_statement(st.id, False)
    assert s.get(m.id).pinned


def test_a_statement_at_its_length_limit_is_superseded_whole_rather_than_amended_past_it():
    _, s, _ = ladder()
    tail = "the ledger db is pg-bill-07 on port 6432"
    filler = ("the batch importer keeps its own retry table and " * 13)[: MAX_STATEMENT_CHARS - 1 - len(tail)]
    old = s.add("user", filler.rstrip() + " " + tail)
    (st,) = [st for st in s.statements.values() if st.message_id == old.id]
    assert len(st.text) > MAX_STATEMENT_CHARS - 10
    s.add("user", "actually the db moved, it's pg-bill-09 now, same port")  # raised past the limit before
    assert s.statements[st.id].status == "superseded" and not s.statements[st.id].amended_by


# -- the ledger's own fold: a long system prompt in a small window -------------------------------

LONG_SYSTEM = "You are a coding agent working in a terminal with tools to read, search and edit files. " * 75


def crowded(pin_share: float = 0.55):
    """The app's head (~1,300 tokens of system prompt) in a 2,048 window, 256 tokens kept for the reply."""
    policy = get_policy("ladder")
    s = Session(counter=get_counter("cl100k"), system=LONG_SYSTEM, window=2048, decisions=DecisionDetector(), pin_share=pin_share)
    settings = PolicySettings(window=2048, reply_reserve=256)
    ctx = PolicyContext(spill_store=MemorySpillStore(), archive=MemoryFoldArchive(), settings=settings)
    return policy, s, ctx


def test_with_a_long_system_prompt_the_ledger_folds_into_one_message_and_no_request_passes_the_window():
    """Each fold carries its statements into a ledger message of its own, heading included; 20 of them
    and a 1,300-token system prompt left no room in a 2,048 window (`tailrent ask` refused the turn).
    The ledger's messages fold into one, then its lowest-ranked lines leave, each reported lost."""
    from tailrent_tui.core.rungs.fold import LEDGER_TRIGGER

    policy, s, ctx = crowded()
    assert s.head_tokens > 1200
    summarizer = LossySummarizer()
    for i in range(30):
        s.add("user", f"FACT: service s{i} listens on port {7000 + i} behind gateway gw-{i}a.\n\n{WORK * 2}")
        run_plan(policy.after_add(s, ctx), summarizer)
        run_plan(policy.before_request(s, ctx, expired=False), summarizer)
        assert s.context_tokens <= ctx.settings.request_limit, f"turn {i}: {s.context_tokens:,} tokens"
        s.add("assistant", f"Noted s{i}.")
        run_plan(policy.after_add(s, ctx), summarizer)
    assert max(f.depth for f in s.folds) == 1
    ledger_folds = [f for f in s.folds if f.trigger == LEDGER_TRIGGER]
    assert ledger_folds
    # what a ledger fold let go is reported lost, by statement, and said in a note; what it kept is visible
    released = [i for f in ledger_folds for i in f.uncarried]
    assert released and any("no room for every pin" in n.text for n in s.notes)
    lost = {t for f in ledger_folds for t in f.facts_lost}
    assert all(s.statements[i].text in lost for i in released)
    text = s.visible_text()
    for st in s.statements.values():
        if st.status == "current" and st.id not in {i for f in s.folds for i in f.uncarried}:
            assert st.text in text, st.text


def test_the_ledgers_fold_never_takes_the_turn_in_flight():
    """The user's newest message, mostly rules and so auto-pinned, with a long reply before it: the
    ledger's fold took it to the archive with the rest of the pins, and the request went out ending
    with the model's own reply, the user's question nowhere in it."""
    policy, s, ctx = crowded(pin_share=0.9)
    summarizer = LossySummarizer()
    for i in range(6):
        s.add("user", f"FACT: service s{i} listens on port {7000 + i} behind gateway gw-{i}a.\n\n{WORK * 2}")
        run_plan(policy.after_add(s, ctx), summarizer)
        run_plan(policy.before_request(s, ctx, expired=False), summarizer)
        s.add("assistant", "Noted. " + WORK)
        run_plan(policy.after_add(s, ctx), summarizer)
    s.add("assistant", "Here is what I found. " + WORK * 3)
    run_plan(policy.after_add(s, ctx), summarizer)
    rules = " ".join(f"Never restart worker w{j} on a weekend." for j in range(8))
    asked = s.add("user", rules + " Which scheduler file do I edit?")
    assert asked.pinned and s.context_tokens > ctx.settings.request_limit
    run_plan(policy.after_add(s, ctx), summarizer)
    run_plan(policy.before_request(s, ctx, expired=False), summarizer)
    assert s.messages[-1].id == asked.id
    assert s.context_tokens <= ctx.settings.request_limit


def test_merging_the_ledger_loses_nothing_and_unfolding_it_gives_each_line_back_to_its_message():
    from tailrent_tui.core.rungs.fold import LEDGER_TRIGGER, apply_fold, fold_ledger
    from tests.support.folds import fold_span

    s = Session(counter=get_counter("cl100k"), system="sys", window=8192, decisions=DecisionDetector())
    events = []
    s.listeners.append(events.append)
    for i in range(6):
        said = s.add("user", f"RULE: never deploy service s{i} on a friday.\n\n{WORK}")
        filler = s.add("assistant", WORK)
        fold_span(s, [said.id, filler.id], summary=f"work on s{i}", summarizer_name="test", guard="report")
    holders = [m for m in s.messages if m.kind is Kind.ledger]
    assert len(holders) == 6
    before = s.context_tokens
    record = fold_ledger(s, 1, release=False)
    assert record is not None and record.trigger == LEDGER_TRIGGER and not record.uncarried and not record.facts_lost
    apply_fold(s, record, None)
    assert s.context_tokens < before
    merged = [m for m in s.messages if m.kind is Kind.ledger]
    assert len(merged) == 1 and merged[0].pinned
    assert all(f"never deploy service s{i} on a friday" in merged[0].content for i in range(6))
    assert replay(events, counter=s.counter, system="sys", window=8192).visible_text() == s.visible_text()
    unfold(s, record.fold_no, holders, limit=8192)
    assert [m.id for m in s.messages if m.kind is Kind.ledger] == [m.id for m in holders]
    for m in holders:
        for sid in m.meta["statements"]:
            assert s.carrier[sid] == m.id
    again = replay(events, counter=s.counter, system="sys", window=8192)
    assert again.visible_text() == s.visible_text() and again.carrier == s.carrier


def test_unfolding_the_ledgers_fold_shows_each_line_as_it_is_now():
    """A statement edited (or amended by a correction) while the ledger was merged: /unfold gave its
    message back with the words it held when it was merged, the old value shown as current."""
    from tailrent_tui.core.rungs.fold import apply_fold, fold_ledger
    from tests.support.folds import fold_span

    s = Session(counter=get_counter("cl100k"), system="sys", window=8192, decisions=DecisionDetector())
    events = []
    s.listeners.append(events.append)
    for i in range(6):
        said = s.add("user", f"RULE: never deploy service s{i} on a friday.\n\n{WORK}")
        fold_span(s, [said.id], summary=f"work on s{i}", summarizer_name="test", guard="report")
    holders = [m for m in s.messages if m.kind is Kind.ledger]
    record = fold_ledger(s, 1, release=False)
    assert record is not None
    apply_fold(s, record, None)
    (sid,) = holders[2].meta["statements"]
    s.edit_statement(sid, "RULE: never deploy service s2 on a friday or a weekend.")
    unfold(s, record.fold_no, holders, limit=8192)
    text = s.visible_text()
    assert "s2 on a friday or a weekend." in text and "s2 on a friday.\n" not in text + "\n"
    assert replay(events, counter=s.counter, system="sys", window=8192).visible_text() == text


def test_the_ledger_releases_the_users_unclassified_words_before_what_the_detector_knows():
    from tailrent_tui.core.rungs.fold import fold_ledger
    from tests.support.folds import fold_span

    s = Session(counter=get_counter("cl100k"), system="sys", window=8192, decisions=DecisionDetector())
    said = "the numbers from bench-7 looked odd to me"
    texts = [f"RULE: never force-push to release branch r{i}." for i in range(5)]
    texts.insert(2, said)
    for text in texts:
        m = s.add("user", f"{text}\n\n{WORK}")
        filler = s.add("assistant", WORK)
        fold_span(s, [m.id, filler.id], summary="work", summarizer_name="test", guard="report")
    assert [st.text for st in s.statements.values() if st.said] == [said]
    merged = fold_ledger(s, 1, release=False)
    assert merged is not None and not merged.uncarried
    saved = merged.tokens_before - merged.tokens_after
    record = fold_ledger(s, saved + 1)
    assert record is not None and record.tokens_before - record.tokens_after >= saved + 1
    released = [s.statements[i].text for i in record.uncarried]
    rules = [t for t in texts if t != said]
    assert said in released and [t for t in released if t != said] == rules[: len(released) - 1]  # then the oldest
    assert set(released) == set(record.facts_lost) & set(texts)
    assert fold_ledger(s, 10_000) is None  # no release saves that much: nothing is folded for nothing


def test_the_ledgers_fold_takes_no_pin_the_user_or_the_app_made():
    from tailrent_tui.core.rungs.fold import fold_ledger
    from tests.support.folds import fold_span

    s = Session(counter=get_counter("cl100k"), system="sys", window=8192, decisions=DecisionDetector())
    note = s.add("system", "Act through text: the user approves each action.", pinned=True, autopin=False)
    by_hand = s.add("user", "Here is the call transcript, for reference. " + WORK)
    s.pin(by_hand.id)
    auto = s.add("user", "DECISION: we keep the orders queue on rabbitmq.")
    assert auto.pinned
    for i in range(3):
        m = s.add("user", f"RULE: never deploy service s{i} on a friday.\n\n{WORK}")
        fold_span(s, [m.id], summary="work", summarizer_name="test", guard="report")
    record = fold_ledger(s, 1)
    assert record is not None
    assert auto.id in record.span_ids and note.id not in record.span_ids and by_hand.id not in record.span_ids


@pytest.mark.parametrize(
    ("said", "correction"),
    [
        # the cue sits in the label: "correction on …:", "new plan for …:"
        (
            "the nightly export writes to the bucket exports-eu-2 in frankfurt",
            "correction on the export: it writes to the bucket exports-eu-3, the old one is read only",
        ),
        (
            "plan for the beta: invite 40 testers on monday, then 200 by friday",
            "new plan for the beta: 25 testers on monday, 200 by friday stays",
        ),
        # the cue opens the message and the new value follows in a sentence of its own
        (
            "we support node 18 through 22 in the sdk",
            "update: node 18 is end of life. the sdk supports node 20 to 22 from the next minor",
        ),
        # a value said to hold now, past the message's first sixteen words
        (
            "the render budget for this sprint is 300 gpu-hours on the farm",
            "good news from the producers after a long meeting about the trailer, "
            "the render budget for the sprint is 450 gpu-hours now",
        ),
        # "X is too short" of any kind, a raise with a longer name before "to", "goes to", a move off a tool
        (
            "a login session expires after 20 minutes of idle time",
            "20 min is too short for the nurses, session expiry is 45 minutes of idle time",
        ),
        ("cap the concurrent android emulator jobs at 4", "raise the concurrent android emulator cap to 6"),
        (
            "the firmware image must stay under 64 MB of flash",
            "the new boards have more flash, the firmware image cap goes to 96 MB",
        ),
        (
            "format the python code with black, line length 100",
            "we're moving off black to ruff format for the python code, line length 100 stays",
        ),
    ],
)
def test_a_correction_is_taken_when_its_cue_is_in_the_label_before_it_or_says_now_at_the_end(said, correction):
    _, s, _ = ladder()
    old = s.add("user", said)
    new = s.add("user", correction)
    mine = [st for st in s.statements.values() if st.message_id == old.id]
    replaced = [st for st in mine if st.status == "superseded" or st.amended_by]
    assert replaced, [(st.text, st.status) for st in s.statements.values()]
    by = replaced[0].superseded_by or replaced[0].amended_by
    assert s.statements[by].message_id == new.id


def test_a_message_that_corrects_nothing_earlier_in_it_does_not_make_its_later_statements_corrections():
    """The cue carries forward through its message, never back: a statement before the cue stands alone."""
    _, s, _ = ladder()
    s.add("user", "the api gateway listens on port 8080 in staging")
    s.add("user", "the gateway team owns port 8080 in staging. by the way we moved standup to 10:00")
    assert all(st.status == "current" for st in s.statements.values())


def test_from_now_on_opens_a_new_statement_and_does_not_make_the_next_one_a_correction():
    """Only a cue that says something earlier no longer holds ("update:", "scratch that") carries to the
    sentences after it; "from now on" states a new rule, and the sentence after it corrects nothing."""
    _, s, _ = ladder()
    notes = s.add("user", "for the release notes I'd like them short, max 4 bullets, no emoji")
    s.add("user", "from now on please keep your replies shorter, I read them on my phone. bullets over paragraphs")
    (st,) = [st for st in s.statements.values() if st.message_id == notes.id]
    assert st.status == "current" and not st.amended_by


def test_a_correction_that_names_one_of_several_alike_statements_replaces_that_one():
    # six limits alike but for the service's short name: the correction names s1, not the latest (s5)
    s = Session(counter=get_counter("cl100k"), system="sys", window=8192, decisions=DecisionDetector())
    olds = [s.add("user", f"LIMIT: service s{i} runs at most {i + 3} replicas.") for i in range(6)]
    s.add("user", "LIMIT: service s1 runs at most 9 replicas now.")
    replaced = [st.message_id for st in s.statements.values() if st.status == "superseded" or st.amended_by]
    assert replaced == [olds[1].id]


def test_a_statement_the_user_unpinned_is_kept_by_the_ledgers_merge_and_reported_when_it_leaves():
    from tailrent_tui.core.rungs.fold import fold_ledger
    from tests.support.folds import fold_span

    s = Session(counter=get_counter("cl100k"), system="sys", window=8192, decisions=DecisionDetector())
    for i in range(6):
        m = s.add("user", f"RULE: never deploy service s{i} on a friday.\n\n{WORK}")
        fold_span(s, [m.id], summary="work", summarizer_name="test", guard="report")
    loose = next(st for st in s.statements.values() if "s2 " in st.text)
    s.pin_statement(loose.id, False)
    merged = fold_ledger(s, 1, release=False)
    assert merged is not None and loose.id in merged.carried and not merged.facts_lost
    assert loose.text in merged.ledger.content
    saved = merged.tokens_before - merged.tokens_after
    released = fold_ledger(s, saved + 1)
    assert released is not None and loose.id not in released.carried
    assert loose.id in released.uncarried and loose.text in released.facts_lost


def test_a_cue_in_a_reason_clause_corrects_nothing():
    # "moved off" says why this port was chosen, about another system: no earlier statement is replaced
    s = Session(counter=get_counter("cl100k"), system="sys", window=8192, decisions=DecisionDetector())
    s.add("user", "FACT: the backup agent listens on port 8201 because Vault already owns 8200 on that host.")
    s.add("user", "FACT: the pricing engine listens on port 9300 because Elasticsearch moved off 9300 last year.")
    assert all(st.status == "current" and not st.amended_by for st in s.statements.values())
    # a cue before the reason still corrects
    s.add("user", "update: the backup agent moved to port 8202 because 8201 clashed with the new exporter.")
    old = next(st for st in s.statements.values() if "8201 because Vault" in (st.original or st.text))
    assert old.status == "superseded" or old.amended_by


@pytest.mark.parametrize(
    ("said", "restated"),
    [
        # no cue word at all: the same thing, said again with another value
        ("the checkpoint interval on the flink job is 90s", "checkpoint interval on the flink job goes to 60s"),
        ("mqtt broker listens on port 1883 on the lab box", "mqtt broker listens on port 8883 on the lab box, tls only"),
        ("we build against node 18.19 in ci", "we build against node 20.11 in ci, the toolchain bump merged"),
        # a bound set anew ("goes to"), not a reading of it
        ("keep the docker image under 900 MB", "the docker image cap goes to 1200 MB with the cuda layer"),
        # the old value with nothing near it, the new one near a word of the old statement
        ("render budget on the old ipad (the 9th gen) is 16ms", "we relaxed the old ipad to 33 ms render budget"),
    ],
)
def test_a_value_restated_without_a_cue_supersedes_the_earlier_one(said, restated):
    _, s, _ = ladder()
    old = s.add("user", said)
    new = s.add("user", restated)
    by_message = {st.message_id: st for st in s.statements.values()}
    assert by_message[old.id].status == "superseded"
    assert s.statements[by_message[old.id].superseded_by].message_id == new.id


@pytest.mark.parametrize(
    ("said", "other"),
    [
        # another subject with the same unit
        ("the api gateway timeout is 30s, dont raise it", "the nightly export takes 45s on the small box"),
        # a reading of a bound is not a new bound
        ("p95 for checkout stays under 400ms", "yesterday's load test: p95 was 520ms at the peak"),
        # a range or a choice under one anchor
        ("we test against postgres 15 in ci", "the library should support postgres 13 through 16"),
        # what might be, not what is
        ("the worker pool is 8 on prod", "if we ever move to the bigger nodes the worker pool is 16"),
        # the same unit near another thing entirely
        ("cache the seat map for 10 seconds at most", "the hold on a seat expires after 600 seconds"),
        # two statements of one shape about two things (the same anchors, each naming what the other never does)
        (
            "the auth worker listens on port 9102 because the old host ran out of memory; it runs version 3.1.0",
            "the search indexer listens on port 7701 because the shard rebalance needs it; it runs version 1.9.3",
        ),
    ],
)
def test_a_value_of_another_thing_a_reading_a_range_or_a_maybe_supersedes_nothing(said, other):
    _, s, _ = ladder()
    old = s.add("user", said)
    s.add("user", other)
    assert all(st.status == "current" for st in s.statements.values() if st.message_id == old.id)
    assert any(st.message_id == old.id for st in s.statements.values()), "the first statement should be found"
