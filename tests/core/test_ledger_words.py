"""The ledger keeps the user's own words (issue 22, second pass): survival does not depend on the
detector's recall. What it could not classify is kept verbatim as `said`, ranked last when the
budget binds; the learned scorer ranks; corrections name what they replace; one statement is
pinned or unpinned alone; a retired pointer's facts are never lost silently; the baselines'
summaries stop at their max_tokens."""

from __future__ import annotations

import pytest

from benchmarks import train_ledger_scorer
from tailrent_tui.core import ledger_scorer
from tailrent_tui.core.guard import DecisionDetector, Fact, Visible
from tailrent_tui.core.ledger import detect, worth_keeping
from tailrent_tui.core.messages import Kind
from tailrent_tui.core.policies import PolicyContext, PolicySettings, get_policy, run_plan
from tailrent_tui.core.rungs.fold import MemoryFoldArchive
from tailrent_tui.core.rungs.spill import MemorySpillStore
from tailrent_tui.core.session import Session, replay
from tailrent_tui.core.summarize import LossySummarizer, cut_to_budget
from tailrent_tui.core.tokens import get_counter
from tests.core import test_ledger
from tests.core.test_ledger import ladder

# natural phrasing the detector does not call a statement, but the user said it and means it
UNSEEN = "the bastion box sits behind the vpn for now"
WORK = test_ledger.WORK


def work(policy, s, ctx, rounds: int, summarizer=None, tag: str = "") -> None:
    test_ledger.work(policy, s, ctx, rounds, summarizer, ask="step {i}: what does module m{m} do?", tag=tag)


def test_the_users_unclassified_words_are_kept_verbatim_through_every_fold_and_never_summarized():
    assert detect(UNSEEN) == []  # the detector alone would lose it
    (said,) = detect(UNSEEN, "user", words=True)
    assert said.said and said.text == UNSEEN and 0.0 <= said.score < 0.5
    policy, s, ctx = ladder()
    seen: list[str] = []

    class Recording(LossySummarizer):
        def summarize(self, messages):
            seen.extend(m.content for m in messages)
            return super().summarize(messages)

    s.add("user", f"{UNSEEN}. Anyway, {WORK}")
    work(policy, s, ctx, 40, Recording())
    assert s.folds and UNSEEN in s.visible_text()
    assert not any(UNSEEN in t for t in seen), "the user's words were handed to a summarizer"
    ledger = "\n".join(m.content for m in s.messages if m.kind is Kind.ledger)
    assert f"- said: {UNSEEN}" in ledger


@pytest.mark.parametrize(
    "text",
    [
        "thanks, looks good",
        "can you check the retry module?",
        "maybe we should revisit the cap later, no decision yet",
        "Open services/orders/app/db.py and show me the batch handling.",
        "Here is the call transcript, for reference.",
        "ok",
        # filler: the same few words over and over
        "turn 5 " + "word " * 20,
        "lorem ipsum dolor " * 5 + "sit amet",
    ],
)
def test_questions_acks_hedges_requests_and_cover_notes_are_not_kept(text):
    assert not worth_keeping(text)
    assert [f for f in detect(text, "user", words=True) if f.said] == []


def test_a_long_sentence_that_repeats_its_subject_is_still_kept():
    # repetition of a few words is normal in a real sentence; only filler falls under the ratio
    text = (
        "the export job for the eu tenants runs after the import job for the eu tenants, and the export job "
        "for the us tenants waits for both of them before it starts at 02:30 utc"
    )
    assert worth_keeping(text)


def test_when_the_budget_binds_the_least_sure_leave_first_and_the_guard_counts_them():
    # a pin budget with room for a few lines: the labelled rules are carried, the user's other words are not
    policy, s, ctx = ladder(window=2048)
    s.pin_share = 0.05
    names = ("alder", "birch", "cedar", "hazel", "maple", "rowan")
    for i, name in enumerate(names):
        said = f"the {name} box sits behind the vpn for now"
        assert [f.said for f in detect(said, "user", words=True)] == [True]
        s.add("user", f"RULE: never restart worker w{i}x without a drain.\n\n{said}\n\n{WORK}")
    work(policy, s, ctx, 30, tag="r")
    fold = s.folds[0]
    assert any(not s.statements[i].said for i in fold.carried)
    if any(s.statements[i].said for i in fold.carried):
        assert all(s.statements[i].said for i in fold.uncarried), "an unclassified line took a rule's room"
    said_out = [s.statements[i] for i in fold.uncarried if s.statements[i].said]
    assert said_out, "the budget never bound on the user's unclassified words"
    lost = {t for f in s.folds for t in f.facts_lost}
    assert all(st.text in lost for st in said_out)
    assert all(st.text not in s.visible_text() for st in said_out)


def test_corrections_that_name_the_old_value_or_a_sibling_identifier_supersede():
    _, s, _ = ladder()
    cap = s.add("user", "yeah do 50, hard cap")
    bastion = s.add("user", "the bastion is bastion-2.ops.internal, ssh as deploy@")
    s.add("user", "actually make the candidate cap 80 not 50, real data has more near-dupes")
    s.add("user", "oh wait bastion-2 got decommed last week, its bastion-3.ops.internal now")
    by_msg = {st.message_id: st for st in s.statements.values()}
    assert by_msg[cap.id].status == "superseded"
    assert by_msg[bastion.id].status == "superseded"


def test_chatter_with_a_correction_cue_replaces_nothing():
    _, s, _ = ladder()
    s.add("user", "FACT: the staging database is pg-stg-04.internal on port 5433.")
    for text in ("ok running it now", "good enough for now, ship it", "cool all green now", "yeah i know, sorry"):
        s.add("user", text)
    assert all(st.status != "superseded" for st in s.statements.values())


def test_unpinning_one_carried_statement_leaves_the_rest_of_its_ledger_pinned_and_the_next_fold_summarizes_it():
    policy, s, ctx = ladder()
    events: list = []
    s.listeners.append(events.append)
    s.add("user", f"RULE: never print the token tk-91a. LIMIT: the spend stays under $300.\n\n{WORK}")
    work(policy, s, ctx, 40)
    holder = next(m for m in s.messages if m.kind is Kind.ledger)
    rule, limit = (s.statements[i] for i in holder.meta["statements"][:2])
    assert s.pin_statement(rule.id, False) is not None
    assert s.pin_statement(rule.id, False) is None  # already unpinned
    assert s.get(holder.id).pinned and s.statements[rule.id].unpinned
    assert "unpinned" in s.get(holder.id).content
    assert rule.id not in {st.id for st in s.carried_by([s.get(holder.id)])}
    assert limit.id in {st.id for st in s.carried_by([s.get(holder.id)])}
    again = replay(events, counter=s.counter, system=s.system, window=s.window)
    assert again.statements[rule.id].unpinned and not again.statements[limit.id].unpinned
    s.pin_statement(rule.id, True)
    assert not s.statements[rule.id].unpinned


def test_no_fact_leaves_silently_when_retired_pointers_merge():
    # every fact a fold guarded is, at the end, visible or counted lost (pointers merged into pointers included)
    policy, s, ctx = ladder(window=2048)
    for i in range(80):
        s.add("user", f"the build of shard sh{i}q3 went to runner gh-r{i}z. {WORK}")
        run_plan(policy.after_add(s, ctx), LossySummarizer())
        s.add("assistant", WORK * 2)
        run_plan(policy.after_add(s, ctx), LossySummarizer())
        run_plan(policy.before_request(s, ctx, expired=False), LossySummarizer())
    assert len(s.retired) >= 3 and any(r.merged for r in s.retired.values())
    lost = {t for f in s.folds for t in f.facts_lost} | {t for r in s.retired.values() for t in r.facts_lost}
    visible = Visible(s.visible_text())
    silent = [t for f in s.folds for t in f.facts if t not in lost and not visible.shows(Fact(text=t, kind="quoted"))]
    assert silent == []


def test_a_baselines_summary_stops_at_its_max_tokens_and_counts_only_what_it_keeps():
    counter = get_counter("cl100k")
    seen: list[int] = []

    def count(text: str) -> int:
        seen.append(len(text))
        return counter.count(text)

    short = "the cap is 50"
    assert cut_to_budget(short, 100, count) == short
    huge = "- user: we moved the cache to redis-7 because latency. " * 50_000
    cut = cut_to_budget(huge, 200, count)
    assert 0 < counter.count(cut) <= 200 and huge.startswith(cut)
    assert max(seen) <= 200 * 8, "the whole text was counted"


def test_the_scorer_is_a_probability_and_the_trainer_never_reads_the_fresh_held_out_part(monkeypatch):
    feats = ledger_scorer.features("never force-push to main", "user", ["rule=rule"])
    assert feats == sorted(set(feats)) and feats == ledger_scorer.features("never force-push to main", "user", ["rule=rule"])
    probs = ledger_scorer.probabilities(feats)
    assert len(probs) == len(ledger_scorer.CLASSES) and abs(sum(probs) - 1) < 1e-9
    assert probs[0] < 0.5  # a rule is not "none"
    assert ledger_scorer.probabilities(ledger_scorer.features("lol ok", "user", ["rule=none"]))[0] > 0.5
    # heldout6 was scored once and is seen now; a part named fresh is refused the same way
    monkeypatch.setattr(train_ledger_scorer, "FORBIDDEN", {"heldout6"})
    with pytest.raises(SystemExit, match="never trained on"):
        train_ledger_scorer.load("heldout6")


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("if the nightly job breaks page oncall-hazel-4f78", "rule"),
        ("Do not edit files under src/recon/generated/; they come from the XSD.", "rule"),
        ("reports are never overwritten, a rerun writes _v2", "rule"),
        ("I'd rather you ask before running anything with sudo", "preference"),
        ("pnpm only", "preference"),
        ("its bastion-3.ops.internal now", "fact"),
    ],
)
def test_natural_phrasings_the_rules_now_read(text, kind):
    assert [f.kind for f in detect(text)] == [kind]


def test_a_request_an_opinion_and_an_ordinal_are_not_statements():
    for text in (
        "Open services/orders/app/db.py and show me the batch handling.",
        "I'd fix it to stay in Decimal.",
        "the 29th one is tiny, weird.",
    ):
        assert detect(text) == [], text


def test_a_label_inside_a_paragraph_states_one_sentence_and_the_rest_is_read_on_its_own():
    long = "I walked the call path from the cron entry down to the worker and back again. " * 6
    found = detect(
        f"the bastion box sits behind the vpn for now. RULE: never restart a worker without a drain. {long}", "user", words=True
    )
    labelled = [f for f in found if f.label]
    assert [f.text for f in labelled] == ["RULE: never restart a worker without a drain."]


def test_the_users_words_fit_beside_a_system_prompt_that_takes_most_of_the_window():
    # the ask session of the issue: a 1,300-token head in a 2,048 window, each turn saying something unclassified
    policy = get_policy("ladder")
    system = "You are a coding agent. " + "Tools: read_file, write_file, run_shell, grep, search_history. " * 88
    s = Session(counter=get_counter("cl100k"), system=system, window=2048, decisions=DecisionDetector())
    ctx = PolicyContext(spill_store=MemorySpillStore(), archive=MemoryFoldArchive(), settings=PolicySettings(window=2048))
    assert s.head_tokens > 1200
    summarizer = LossySummarizer()
    for i in range(30):
        s.add("user", f"Step {i}: the build uses port {8000 + i}. " + "we looked at the logs and talked it over " * 12)
        run_plan(policy.after_add(s, ctx), summarizer)
        run_plan(policy.before_request(s, ctx, expired=False), summarizer)
        assert s.context_tokens <= ctx.settings.request_limit, f"turn {i}: {s.context_tokens} tokens"
        s.add("assistant", "Acknowledged.")
        run_plan(policy.after_add(s, ctx), summarizer)
    said = [st for st in s.statements.values() if st.said and s.carrier.get(st.id) in s]
    assert said, "nothing the user said was kept"


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        # a fact noun, a copula, a name that is no identifier by the guard's rule
        ("the deploy repo is harbor-config", "fact"),
        ("ci queues are arm-small and x86-large", "fact"),
        ("our sentry org is PebbleWorksHQ", "fact"),
        ("the feature param is layout=compact", "fact"),
        ("alerts channel is #pager-storefront", "fact"),
        # the same shape with an ordinary word is no name
        ("the design review is tomorrow-ish, whatever", None),
        ("the test suite is slow today", None),
        ("the api team is Picky about naming", None),
        # an adjective written with a hyphen is no name either
        ("the service is stable-ish.", None),
        ("the host is well-known to ops.", None),
        ("the queue is back-pressured right now.", None),
    ],
)
def test_a_fact_noun_named_by_a_hyphenated_camel_case_or_key_value_name_is_a_fact(text, kind):
    assert [f.kind for f in detect(text)] == ([kind] if kind else [])


@pytest.mark.parametrize(
    "text",
    [
        # a label over nothing yet
        "DECISION: none yet on the cache eviction policy.",
        "PREF: none really for the changelog format, whatever the tool writes",
        "LIMIT: nothing yet, finance will tell us",
        # a question without its question mark, opened by an auxiliary no imperative starts with
        "does the arm runner even have docker on it",
        "is the flaky retry plugin worth keeping or is it hiding real failures",
        # a measurement held against its bound: a report, not the bound
        "31.2, under 40.",
        "880, tight but under.",
        "2h10 is way over what we budgeted.",
        "41ms p95, over.",
    ],
)
def test_empty_labels_auxiliary_questions_and_measurements_against_a_bound_state_nothing(text):
    assert detect(text) == []


@pytest.mark.parametrize(
    "text",
    [
        "RULE: none of the lambdas may call the billing db directly.",
        "RULE: nothing ships on fridays.",
        "do 3 retries, hard cap",
        "latency stays under 40ms at p95",
    ],
)
def test_what_those_look_like_but_states_a_rule_or_a_bound_is_still_found(text):
    assert [f.kind for f in detect(text)] in (["rule"], ["constraint"])


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("yes the sqlite backend.", True),
        ("yeah blue-green, decided.", True),
        ("yep webhooks, polling as the fallback", True),
        ("hash join, settled.", True),
        # a go-ahead, an agreement or a value recalled is no pick
        ("yes fix it.", False),
        ("yeah thats the plan.", False),
        ("yes please", False),
        ("yeah 4.2, like i said.", False),
        # an adverb, a filler or a status after the yes names no option
        ("yes really, go ahead", False),
        ("yeah whatever you think.", False),
        ("yes finally.", False),
        ("yep, just one.", False),
        ("yes obviously", False),
        ("yeah mostly.", False),
        ("yep merged", False),
        ("yes, pushed.", False),
        ("yes all green", False),
        ("yes indeedy", False),
        # and an option named after one is still a pick
        ("yeah in memory", True),
        ("yes managed postgres", True),
    ],
)
def test_a_yes_that_names_the_option_picked_is_a_decision(text, found):
    assert [f.kind for f in detect(text)] == (["decision"] if found else [])


def test_an_instruction_files_item_of_several_sentences_is_one_statement():
    text = (
        "# CLAUDE.md\n"
        "- No tracking pixels. No third-party fonts, no CDN scripts.\n"
        "- Amounts are integer cents end to end. Never a float near money.\n"
        "- Keep replies short.\n"
    )
    found = detect(text, "instructions")
    assert [f.text for f in found] == [
        "No tracking pixels. No third-party fonts, no CDN scripts.",
        "Amounts are integer cents end to end. Never a float near money.",
        "Keep replies short.",
    ]
    assert all(text[f.start : f.start + len(f.text)] == f.text for f in found)


def test_a_word_before_is_that_names_no_measure_anchors_no_value():
    from tailrent_tui.core.ledger import anchored_values

    for text in ("what we want is 20", "mine is 3", "so the total is 5 now", "the answer is 42"):
        assert anchored_values(text) == {}, text
    assert anchored_values("the pool size is 20") == {"size": {"20"}}
    assert anchored_values("nomad is 1.9 now") == {"nomad": {"1.9"}}
