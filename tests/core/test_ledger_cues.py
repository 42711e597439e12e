"""The ledger's rules on decisions and on what states nothing, checked on sentences written for
these tests (none of them is a line of tests/ledger_corpus/). `classify` is the rules alone, so
these hold whatever weights the learned scorer ships with."""

from __future__ import annotations

import pytest

from tailrent_tui.core.ledger import classify, detect


@pytest.mark.parametrize(
    "sentence",
    [
        # a pick said back with a yes or an agreement
        "sqlite, yes",
        "the cheaper tier yes",
        "wal mode yes, fsync off yes",
        "redis streams, agreed",
        "agreed: cron + lockfile",
        "nightly, yes, and keep the logs a week",
        # "X it is" as a clause of a longer sentence
        "do that, the outbox table it is",
        "s3 it is, the nfs box is too flaky anyway",
        # go with / go back to / not going back / after all
        "go with option two, the diff is smaller",
        "forget the warmup change, go back to 500 steps",
        "we removed python 2 support and we're not going back",
        "we're deprecating the v1 endpoint after all",
        "we are dropping the nightly build",
        "we go with msgpack over json for the cache",
        # one thing over another
        "Argon2, not bcrypt, for the new hashes",
        "the session lives in redis, not in the cookie",
        "jitter, not a fixed delay, between retries",
        "tokens get revoked from the admin page, not with a cli",
        "the existing worker, no new service",
        # a phased choice
        "polling for the beta, websockets later",
    ],
)
def test_a_choice_in_the_ways_people_type_it_is_a_decision(sentence):
    assert classify(sentence, "user") == "decision"


@pytest.mark.parametrize(
    "sentence",
    [
        "it did not go well",  # an auxiliary before "not" negates, it picks nothing
        "the deploy was not great",
        "lets not decide the schema today",
        "not now, not with this team size",
        "Priya agreed",  # someone's agreement, reported
        "ok, agreed",
        "oh yes",
        "fine, no worries",
        "the old board is dead, no more spares",
        "leave it, not needed",
    ],
)
def test_a_negation_a_deferral_or_an_acknowledgement_is_no_decision(sentence):
    assert classify(sentence, "user") != "decision"


@pytest.mark.parametrize(
    "sentence",
    [
        "I'd cache the parsed config per process and drop the global.",
        "For the export I'd write one file per tenant.",
        "The queue is already there, so I'd reuse it for the retries.",
        "Retries are cheap; I'd keep three and back off.",
    ],
)
def test_the_assistants_proposal_of_a_choice_is_a_decision_it_proposes(sentence):
    assert classify(sentence, "assistant") == "decision"


@pytest.mark.parametrize(
    "sentence",
    [
        "I'd expect the p99 to stay near 30 ms.",
        "I'd say it's fine for now.",
        "I'd lean towards the second option.",
        "A health check costs little; I'd add one but it's your call.",
        "I'd split the module unless you want it in one file.",
    ],
)
def test_an_expectation_an_opinion_or_a_choice_handed_back_is_no_proposal(sentence):
    assert classify(sentence, "assistant") is None


@pytest.mark.parametrize(
    "sentence",
    [
        # readings of measured values, with no bound said
        "812 at p99.",
        "3.2 at p95, meh.",
        "p99 after the cache change: 41ms.",
        "for reference, the peak last week was 2,100 sessions.",
        "1,900 concurrent at the peak, p95 640ms on search.",
        "we're at 412 KB now with the new fonts",
        "bundle check: we're at 1.9 MB, getting close",
        "error rate is 0.3% so far",
        # the problem at hand, described
        "the bug: the cursor jumps when more than ~200 rows are selected.",
        'the crash: NullPointerException in the sync worker, "Not allowed to bind service".',
        # a request aimed at the thing at hand
        "run it on the staging box",
        "try it, dont merge anything yet",
        "change it in settings.toml and rerun the suite",
        # hedges
        "the migration: keep the old table? drop it? i honestly dont know, thoughts",
        "two workers should be fine for the demo.",
        "if the new cluster has spare GPUs we could try the bigger model",
        "first: how did the soak test look overnight",
        "the cache goes in front of the api, right",  # a question with a tag
        "if we ever shard the db that would need a new migration tool",
        # a story of what happened, or a problem found
        "last night the backup job ran twice because the timer fired on both hosts.",
        "support found a crash in the export on large tenants",
        "dont do anything about it",
    ],
)
def test_readings_problems_requests_on_the_thing_at_hand_and_hedges_state_nothing(sentence):
    assert classify(sentence, "user") is None


@pytest.mark.parametrize(
    "sentence",
    [
        "p99 has to stay under 40ms",  # a bound beside the number: a constraint, not a reading
        "run it through the linter first from now on",  # a request made standing
        "bump it to 4 workers",  # a value set
    ],
)
def test_a_bound_a_standing_request_or_a_value_still_counts(sentence):
    assert classify(sentence, "user") is not None


@pytest.mark.parametrize(
    "sentence",
    [
        "vite 5.4, node 22 LTS",
        "C++17, meson, clang 18",
        "rust 1.82 with tokio 1.41",
        "postgres 16 + pgvector, builds with gcc 13.2",
        "debian 12.7",
    ],
)
def test_a_stack_line_of_names_and_versions_is_a_constraint(sentence):
    assert classify(sentence, "user") == "constraint"


@pytest.mark.parametrize("sentence", ["build 5521 is on the store", "PR 311, noted.", "thats 2.4.", "could save like 3k."])
def test_a_number_after_a_word_is_no_stack_line(sentence):
    assert classify(sentence, "user") != "constraint"


def test_progress_counts_and_things_that_stay_as_they_are_are_found():
    assert classify("48/130 done", "user") == "goal"
    assert classify("the invoices went through overnight, so 97/130", "user") == "goal"
    assert classify("the 3.x line stays as is for the old kiosks", "user") is not None
    assert classify("store app id is qzvmbnlkjhgfdsapoiuytrewq", "user") == "fact"


def test_a_rule_relayed_from_someone_counts_and_hearsay_or_a_reading_does_not():
    assert classify("legal says retention is 90 days max", "user") is not None
    assert classify("the dashboard says users stay 4 minutes way more than before.", "user") is None
    assert classify("someone in standup said never use the v1 client once", "user") is None


def test_a_marker_that_settles_the_sentence_before_it_takes_that_sentence_with_it():
    text = "ship the csv export first, pdf in the next release. thats settled"
    found = detect(text, "user")
    assert [(f.kind, f.text) for f in found] == [("decision", text)]
    text = "Argon2 for the new hashes. decided with Omar this morning"
    assert [f.text for f in detect(text, "user")] == [text]


def test_tool_progress_lines_and_commit_subjects_are_not_labels():
    out = "$ restic forget --prune\nApplying Policy: keep 7 daily, 4 weekly snapshots\n"
    assert detect(out, "tool") == []
    log = "$ git log --oneline -2\n3fa91c2 ADR-0012: events are immutable\n77ab013 fix typo\n"
    assert detect(log, "tool") == []
    assert detect("larder STATUS: nothing new", "user") == []
