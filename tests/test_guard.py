"""The fact guard: extraction, presence, repair across nested folds, decision pins, probes."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from tailrent_tui.core.guard import (
    DEFAULT_DECISION_PATTERNS,
    REPAIR_HEADING,
    DecisionDetector,
    Fact,
    extract_facts,
    find_expected,
    lost_facts,
    parse_repair_block,
    repair_summary,
)

# The article's decision and acknowledgement, word for word.
DECISION = (
    "DECISION: We will store refresh tokens in Redis with a 15 minute TTL and "
    "rotate them on every use, because the mobile team's client can't reliably "
    "persist tokens between app restarts."
)
ACK = (
    "Acknowledged. I'll wire the token service to Redis with a 15 minute TTL "
    "and rotate-on-use, and flag any code path that assumes long-lived tokens."
)
FILLER_TOPICS = [
    "Ran the integration suite against the staging cluster.",
    "Investigated a flaky test in the billing module.",
    "Reviewed the PR that touches the rate limiter.",
    "Checked memory usage on the worker pool overnight.",
    "Updated the changelog for the upcoming release.",
]
REASON = "because the mobile team's client can't reliably persist tokens between app restarts"


def texts(facts: list[Fact]) -> list[tuple[str, str]]:
    return [(f.kind, f.text) for f in facts]


# --------------------------------------------------------------------------
# Extraction
# --------------------------------------------------------------------------

EXTRACTION_TABLE = [
    # (sentence, facts that must be found, texts that must not be facts)
    (DECISION, [("name", "Redis"), ("number", "15 minute"), ("name", "TTL"), ("reason", REASON)], ["DECISION", "We"]),
    ("Use a 15-minute TTL.", [("number", "15-minute"), ("name", "TTL")], ["Use"]),
    ("Requests time out after 30s and the cache holds 512 MB.", [("number", "30s"), ("number", "512 MB")], ["Requests"]),
    ("The run took 2,000 turns and was 3.5x slower.", [("number", "2,000 turns"), ("number", "3.5x")], ["The"]),
    ("Uptime was 99.9% at $3/MTok output.", [("number", "99.9%"), ("number", "$3/MTok")], ["Uptime"]),
    ("Cache writes cost 1.25× and reads 0.1×.", [("number", "1.25×"), ("number", "0.1×")], []),
    ("Codex caps tool outputs in the 10k-16k token range.", [("number", "10k-16k token")], []),
    ("It spills at roughly the 100k-token mark.", [("number", "100k-token")], []),
    ("Claude Code compacts at around 95 percent of capacity.", [("number", "95 percent")], []),
    ("Keep the worker alive for five minutes.", [("number", "five minutes")], []),
    (
        "Release v2.3.1 replaced 2.3.0 and the build targets net8.0.",
        [("version", "v2.3.1"), ("version", "2.3.0"), ("version", "net8.0")],
        [],
    ),
    ("Set OLLAMA_HOST before calling RefreshTokenService.", [("name", "OLLAMA_HOST"), ("name", "RefreshTokenService")], ["Set"]),
    ("The refresh_ttl setting and the maxRetries field.", [("name", "refresh_ttl"), ("name", "maxRetries")], ["The"]),
    ("We moved the sessions from Memcached to Postgres last week.", [("name", "Memcached"), ("name", "Postgres")], ["We"]),
    (
        "Patched src/auth/token.py and ./scripts/run and /etc/hosts and ~/.config/tailrent.",
        [("path", "src/auth/token.py"), ("path", "./scripts/run"), ("path", "/etc/hosts"), ("path", "~/.config/tailrent")],
        ["Patched", "src", "auth/token.py"],
    ),
    ("Edit config.toml and TailRent.cs.", [("path", "config.toml"), ("path", "TailRent.cs")], ["Edit"]),
    (
        "Docs at https://ollama.com/docs/api, then http://localhost:11434/api/chat.",
        [("url", "https://ollama.com/docs/api"), ("url", "http://localhost:11434/api/chat")],
        [],
    ),
    (
        "Call it `rotate_on_use` and label it \"strict\", not 'lax'.",
        [("quoted", "`rotate_on_use`"), ("name", "rotate_on_use"), ("quoted", '"strict"'), ("quoted", "'lax'")],
        ["Call"],
    ),
    ("We batch writes since the API is rate limited.", [("reason", "since the API is rate limited"), ("name", "API")], []),
    (
        "The job failed due to a missing index on the orders table.",
        [("reason", "due to a missing index on the orders table")],
        ["The"],
    ),
    ("Pin it so that later folds can't touch it; then move on.", [("reason", "so that later folds can't touch it")], []),
    ("Deployed 2026-11-02T09:00:00Z, fixes #482.", [("number", "2026-11-02T09:00:00Z"), ("number", "#482")], ["Deployed"]),
    # Things that must not become facts.
    ("Turn 12: Ran the integration suite against the staging cluster.", [], ["Turn", "12", "Ran"]),
    ("Turn 12: done, no issues found.", [], ["Turn", "12"]),
    ("We have been on Postgres since 2019.", [("name", "Postgres")], ["since 2019"]),
    ("Nothing changed since Monday.", [], ["since Monday", "Monday", "Nothing"]),
    ("It has been flaky ever since the upgrade.", [], ["since the upgrade"]),
    ("See turn 5 and step 3 of the plan; the other 195 were noise.", [], ["turn 5", "5", "3", "195", "See"]),
    ("Use and/or read/write access 24/7.", [], ["and/or", "read/write", "24/7"]),
    ("I think the PR is OK, FYI, LGTM.", [], ["PR", "OK", "FYI", "LGTM", "I"]),
    ("We met on Friday to talk about it. May I ask?", [], ["May", "Friday", "We"]),
    (
        "We leave Python 3.9 as it goes end of life in October; the window is 02:00-04:00 UTC.",
        [("number", "October"), ("number", "02:00-04:00 UTC"), ("name", "Python 3.9")],
        ["04:00 UTC"],
    ),
    ("Logs stay 90 days for SOC 2 and ISO 27001.", [("name", "SOC 2"), ("name", "ISO 27001"), ("number", "90 days")], ["SOC"]),
    ("The mobile team's client can't do it.", [], ["'s client can'"]),
    ("That was because.", [], ["because"]),
    # Issue 11: everyday coding facts, each with its kind.
    ("The PostgreSQL server listens on port 5433.", [("name", "PostgreSQL"), ("address", "port 5433")], ["5433"]),
    ("Deploy to the eu-west-2 region, then europe-west4.", [("name", "eu-west-2"), ("name", "europe-west4")], ["eu"]),
    ("Tracked as ticket PAY-4412 and CVE-2024-3094.", [("name", "PAY-4412"), ("name", "CVE-2024-3094")], ["PAY", "CVE"]),
    (
        "Up on :8080, redis at localhost:6379, compose maps 5432:5432 at 14:05.",
        [("address", ":8080"), ("address", "localhost:6379"), ("address", "5432:5432"), ("number", "14:05")],
        ["14:05:00"],
    ),
    (
        "Allow 10.0.0.0/16, fe80::1 and 2001:db8::/32; not 12:30:45.",
        [("address", "10.0.0.0/16"), ("address", "fe80::1"), ("address", "2001:db8::/32"), ("number", "12:30:45")],
        ["db8"],
    ),
    ("Reverted a1b2c3d; deadbeef and 1234567 are not hashes.", [("name", "a1b2c3d")], ["deadbeef", "1234567"]),
    (
        "Set DATABASE_URL, read $HOME and ${NODE_ENV}, run with LOG_LEVEL=debug.",
        [("name", "DATABASE_URL"), ("name", "$HOME"), ("name", "${NODE_ENV}"), ("code", "LOG_LEVEL=debug")],
        ["HOME"],
    ),
    (
        "Bump to ^4.2.0, keep ~1.2 and >=3.11, tag v2.0.1-rc1, pin requests==2.31.0 and numpy<2.",
        [
            ("version", "^4.2.0"),
            ("version", "~1.2"),
            ("version", ">=3.11"),
            ("version", "v2.0.1-rc1"),
            ("version", "requests==2.31.0"),
            ("version", "numpy<2"),
        ],
        ["4.2.0"],
    ),
    ("It costs ~500 tokens, and 1.0 -> 2.0 is an arrow.", [("number", "500 tokens")], ["~500", "> 2.0", "2.0"]),
    ("The backup cron is 0 2 * * * and cleanup */15 * * * *.", [("code", "0 2 * * *"), ("code", "*/15 * * * *")], []),
    (
        "Restart deployment/api-gateway, svc/x and configmap/y.",
        [("name", "deployment/api-gateway"), ("name", "svc/x"), ("name", "configmap/y")],
        [],
    ),
    (
        "Retry with --max-retries 5, --dry-run and -n 5; -- this is prose.",
        [("code", "--max-retries 5"), ("code", "--dry-run"), ("code", "-n 5")],
        ["--", "-n"],
    ),
    (
        "Fix parse_args() and fooBar(); os.path.join() leaks.",
        [("code", "parse_args()"), ("code", "fooBar()"), ("code", "os.path.join()")],
        ["parse_args"],
    ),
    (
        "Errors: E1101, ERR_CONN_RESET, HTTP 503, ORA-00942, exit code 137.",
        [("name", "E1101"), ("name", "ERR_CONN_RESET"), ("name", "HTTP 503"), ("name", "ORA-00942"), ("name", "exit code 137")],
        ["ORA", "503"],
    ),
    (
        "It costs $4,200 or €30 or 12 USD with 3 replicas at 500 ms for 15 minute.",
        [
            ("number", "$4,200"),
            ("number", "€30"),
            ("number", "12 USD"),
            ("number", "3 replicas"),
            ("number", "500 ms"),
            ("number", "15 minute"),
        ],
        [],
    ),
    (
        "Move the orders_v2 table, drain queue billing-events, run migration 0042_add_index, turn off flag new-checkout.",
        [("name", "orders_v2"), ("name", "billing-events"), ("name", "0042_add_index"), ("name", "new-checkout")],
        ["table"],
    ),
    ("The high-priority queue and the read-only table are fine.", [], ["high-priority", "read-only"]),
    (
        "Send X-Request-ID and Authorization as svc-deploy@corp.example to @maria.",
        [("name", "X-Request-ID"), ("name", "Authorization"), ("address", "svc-deploy@corp.example"), ("name", "@maria")],
        ["Request", "corp.example"],
    ),
    (
        "Clone git@github.com:acme/payments.git and build python:3.12-slim.",
        [("url", "git@github.com:acme/payments.git"), ("name", "python:3.12-slim")],
        [],
    ),
    ("Node 20 is the floor; Node 18 is gone. Turn 12: done.", [("name", "Node 20"), ("name", "Node 18")], ["Turn 12"]),
]


@pytest.mark.parametrize(("sentence", "expected", "forbidden"), EXTRACTION_TABLE)
def test_extraction_table(sentence: str, expected: list[tuple[str, str]], forbidden: list[str]) -> None:
    found = texts(extract_facts(sentence))
    for fact in expected:
        assert fact in found, f"{fact} missing from {found}"
    found_texts = {t.casefold() for _, t in found}
    for text in forbidden:
        assert text.casefold() not in found_texts, f"{text!r} wrongly extracted from {sentence!r}: {found}"


def test_article_filler_yields_no_facts() -> None:
    for turn, topic in enumerate(FILLER_TOPICS * 2):
        assert extract_facts(f"Turn {turn}: {topic}") == []
        assert extract_facts(f"Turn {turn}: done, no issues found.") == []
        assert extract_facts("[inline] " + " ".join(["token"] * (turn + 20))) == []


def test_spill_pointer_keeps_what_names_the_artifact() -> None:
    guid = "3f2b6c1e-8a4d-4b2a-9c1e-2f3a4b5c6d7e"
    pointer = (
        f"[spilled] [spilled tool result: tool_call_3] ~500 tokens written to "
        f"/tmp/tailrent-spill/{guid}.json (id={guid}). Preview: token token token"
    )
    assert texts(extract_facts(pointer)) == [
        ("name", "tool_call_3"),
        ("number", "500 tokens"),
        ("path", f"/tmp/tailrent-spill/{guid}.json"),
        ("name", guid),
    ]


def test_order_of_first_appearance_and_case_insensitive_dedup() -> None:
    facts = extract_facts("Use redis_url with Redis. REDIS_URL is set; redis_url again; Redis again at 30s.")
    assert texts(facts) == [("name", "redis_url"), ("name", "Redis"), ("number", "30s")]


def test_sentence_initial_capital_counts_when_it_is_capitalised_mid_sentence_too() -> None:
    facts = texts(extract_facts("Redis is down. We depend on Redis heavily."))
    assert facts == [("name", "Redis")]
    assert extract_facts("Investigated it. Nothing found.") == []


def test_watch_words_are_facts_wherever_they_occur() -> None:
    facts = extract_facts("We rotate them on every use; the MOBILE client rotated keys.", watch=["rotate", "mobile"])
    assert ("watch", "rotate") in texts(facts)
    assert ("watch", "MOBILE") in texts(facts)
    # one fact per word, case-insensitively: "rotated" is the same watch hit
    assert sum(f.text.casefold() == "rotate" for f in facts) == 1
    # a watch word that is also a name is reported as watched
    assert texts(extract_facts("Backed by Redis.", watch=["redis"])) == [("watch", "Redis")]
    # not inside another word
    assert extract_facts("prorated billing", watch=["rate"]) == []


@pytest.mark.parametrize("bad", ["", "   "])
def test_empty_watch_word_is_a_clear_error(bad: str) -> None:
    with pytest.raises(ValueError, match="watch word"):
        extract_facts("anything", watch=[bad])


def test_reason_clause_stops_at_the_sentence_end_and_is_capped() -> None:
    facts = extract_facts("Fold late because every fold invalidates the cache. Then rest.")
    assert ("reason", "because every fold invalidates the cache") in texts(facts)
    long_text = "It broke because " + " ".join(f"w{i}" for i in range(100))
    (reason,) = [f for f in extract_facts(long_text) if f.kind == "reason"]
    assert len(reason.text.split()) == 40
    assert long_text.startswith("It broke " + reason.text)


def test_fact_text_must_not_be_blank() -> None:
    with pytest.raises(ValidationError):
        Fact(text="  ", kind="name")
    with pytest.raises(ValidationError):
        Fact(text="x", kind="colour")  # type: ignore[arg-type]


# --------------------------------------------------------------------------
# Presence
# --------------------------------------------------------------------------

PRESENCE_TABLE = [
    (Fact(text="15 minute", kind="number"), "Redis, 15-minute TTL", True),
    (Fact(text="15 minute", kind="number"), "a TTL of 15 minutes", True),
    (Fact(text="15 minute", kind="number"), "15min TTL", True),
    (Fact(text="15-minute", kind="number"), "15 minute TTL", True),
    (Fact(text="15 minute", kind="number"), "a 15 second TTL", False),
    (Fact(text="15 minute", kind="number"), "a short TTL of 15", False),
    (Fact(text="15 minute", kind="number"), "a quarter-hour TTL", False),
    (Fact(text="15 minute", kind="number"), "115 minutes", False),
    (Fact(text="2,000 turns", kind="number"), "after 2000 turns", True),
    (Fact(text="3.5x", kind="number"), "3.5× faster", True),
    (Fact(text="512 MB", kind="number"), "512mb of cache", True),
    (Fact(text="512 MB", kind="number"), "512 GB of cache", False),
    (Fact(text="Redis", kind="name"), "tokens live in REDIS", True),
    (Fact(text="TTL", kind="name"), "short TTLs", True),
    (Fact(text="PR", kind="name"), "provide a preview", False),
    (Fact(text="refresh_ttl", kind="name"), "refresh_ttl_seconds", False),
    (Fact(text="v2.3.1", kind="version"), "on 2.3.1 now", True),
    (Fact(text="2.3.1", kind="version"), "on v2.3.1 now", True),
    (Fact(text="2.3.1", kind="version"), "on 2.3.10 now", False),
    (Fact(text="src/auth/token.py", kind="path"), "see SRC/AUTH/TOKEN.PY", True),
    (Fact(text="src/auth/token.py", kind="path"), "see token.py", False),
    (Fact(text='"strict"', kind="quoted"), "mode `strict`", True),
    (Fact(text="rotate", kind="watch"), "rotated on use", True),
    (Fact(text="rotate", kind="watch"), "prorated", False),
    (Fact(text=REASON, kind="reason"), REASON, True),
    (Fact(text=REASON, kind="reason"), "because mobile clients can't reliably persist tokens across app restarts", True),
    (Fact(text=REASON, kind="reason"), "Redis, 15-min TTL, rotate on use, because mobile can't persist tokens", False),
    (Fact(text=REASON, kind="reason"), "refresh tokens: Redis, 15 minute TTL, because", False),
    (Fact(text=REASON, kind="reason"), "auth token handling was reviewed and updated", False),
    # a reason that loses its negation says the opposite
    (Fact(text="because the client can't persist tokens", kind="reason"), "the client can persist tokens", False),
    (Fact(text="port 5433", kind="address"), "postgres on :5433", True),
    (Fact(text="port 5433", kind="address"), "postgres on 15433", False),
    (Fact(text=":8080", kind="address"), "the dev port 8080", True),
    (Fact(text="10.0.0.1", kind="address"), "the host 10.0.0.10", False),
    (Fact(text="parse_args()", kind="code"), "fixed parse_args", True),
    (Fact(text="parse_args()", kind="code"), "fixed parse_args_v2", False),
    (Fact(text="--max-retries 5", kind="code"), "with --max-retries=5", True),
    (Fact(text="--max-retries 5", kind="code"), "with --max-retries 50", False),
    (Fact(text="0 2 * * *", kind="code"), "cron 10 2 * * *", False),
]


@pytest.mark.parametrize(("fact", "text", "expected"), PRESENCE_TABLE)
def test_fact_present_table(fact: Fact, text: str, expected: bool) -> None:
    assert (not lost_facts([fact], text)) is expected


def test_reason_threshold_is_eighty_percent_of_content_words() -> None:
    # content words: alpha beta gamma delta epsilon (5); 4/5 = 80% is present, 3/5 is not
    fact = Fact(text="because alpha beta gamma delta epsilon", kind="reason")
    assert not lost_facts([fact], "alpha beta gamma delta")
    assert lost_facts([fact], "alpha beta gamma")


def test_lost_facts_keeps_the_given_order() -> None:
    facts = extract_facts(DECISION)
    summary = "- user: DECISION: We will store refresh tokens in Redis with a..."
    assert lost_facts(facts, summary) == [f for f in facts if f.text != "Redis"]
    assert lost_facts(facts, DECISION) == []


# --------------------------------------------------------------------------
# Repair
# --------------------------------------------------------------------------


def test_repair_appends_one_line_under_the_heading() -> None:
    lost = extract_facts(DECISION)
    repaired = repair_summary("refresh tokens were discussed", lost)
    assert repaired.startswith("refresh tokens were discussed\n")
    last_line = repaired.splitlines()[-1]
    assert last_line.startswith(REPAIR_HEADING)
    for fact in lost:
        assert fact.text in last_line
    assert lost_facts(lost, repaired) == []


def test_repair_with_nothing_lost_changes_nothing() -> None:
    assert repair_summary("a summary\n", []) == "a summary\n"


def test_repair_is_idempotent_and_merges_an_existing_block() -> None:
    first = extract_facts(DECISION)
    once = repair_summary("s", first)
    assert repair_summary(once, first) == once
    more = [Fact(text="OLLAMA_HOST", kind="name")]
    twice = repair_summary(once + "\nmore summary text", more)
    assert twice.count(REPAIR_HEADING) == 1
    assert twice.splitlines()[-1].startswith(REPAIR_HEADING)
    assert "more summary text" in twice
    assert lost_facts(first + more, twice) == []


def test_repair_does_not_write_a_fact_the_block_already_shows() -> None:
    reason = Fact(text="because the cache holds 512 MB", kind="reason")
    number = Fact(text="512 MB", kind="number")
    repaired = repair_summary("x", [reason, number])
    assert repaired == f"x\n{REPAIR_HEADING} because the cache holds 512 MB"
    assert lost_facts([reason, number], repaired) == []


def test_extraction_refinds_repaired_facts_of_every_kind() -> None:
    source = (
        "DECISION: keep RefreshTokenService on Redis with a 15 minute TTL in src/auth/token.py "
        'at v2.3.1, see https://example.com/adr/7, mode "strict; fast", '
        "because the mobile client can't persist tokens."
    )
    facts = extract_facts(source, watch=["rotate", "mobile"])
    kinds = {f.kind for f in facts}
    assert {"name", "number", "path", "version", "url", "quoted", "reason", "watch"} <= kinds
    repaired = repair_summary("auth token handling was reviewed and updated", facts)
    refound = extract_facts(repaired, watch=["rotate", "mobile"])
    assert {f.text for f in facts} <= {f.text for f in refound}
    assert parse_repair_block(repaired)[0] == "RefreshTokenService"


def lossy_summary(contents: list[str], roles: list[str]) -> str:
    """The article's mock summarizer: the first 12 words of each message, split on single spaces."""
    lines = []
    for role, content in zip(roles, contents, strict=True):
        words = [w for w in content.split(" ") if w]
        more = "..." if len(words) > 12 else ""
        lines.append(f"- {role}: {' '.join(words[:12])}{more}")
    return "\n".join(lines)


def run_three_folds(repair: bool, watch: tuple[str, ...]) -> tuple[str, list[int]]:
    """The article's harness in small: fold the oldest 6 messages, summary at index 0, three times."""
    transcript: list[tuple[str, str]] = [("user", DECISION), ("assistant", ACK)]
    for turn in range(12):
        transcript.append(("user", f"Turn {turn}: {FILLER_TOPICS[turn % len(FILLER_TOPICS)]}"))
        transcript.append(("tool", "[inline] " + " ".join(["token"] * 30)))
        transcript.append(("assistant", f"Turn {turn}: done, no issues found."))
    repaired_counts = []
    for _ in range(3):
        span, transcript = transcript[:6], transcript[6:]
        roles = [r for r, _ in span]
        contents = [c for _, c in span]
        facts = extract_facts("\n".join(contents), watch=watch)
        summary = lossy_summary(contents, roles)
        lost = lost_facts(facts, summary)
        repaired_counts.append(len(lost))
        if repair:
            summary = repair_summary(summary, lost)
        transcript.insert(0, ("system", f"[folded {len(span)} messages]\n{summary}"))
    return transcript[0][1], repaired_counts


def test_every_fact_of_the_decision_survives_three_nested_folds() -> None:
    watch = ("rotate", "mobile")
    final, repaired_counts = run_three_folds(repair=True, watch=watch)
    # each fold after the first folds the previous repaired summary again
    assert final.count("[folded 6 messages]") == 3
    decision_facts = extract_facts(DECISION, watch=watch)
    assert lost_facts(decision_facts, final) == []
    assert find_expected(["Redis", "15 minute", "rotate", "mobile"], final) == dict.fromkeys(
        ["Redis", "15 minute", "rotate", "mobile"], True
    )
    assert all(n > 0 for n in repaired_counts), repaired_counts
    assert final.count(REPAIR_HEADING) == 1


def test_without_repair_the_same_folds_lose_the_decision() -> None:
    # The control for the test above: the article's loss happens in this harness.
    final, _ = run_three_folds(repair=False, watch=())
    lost = lost_facts(extract_facts(DECISION), final)
    assert {f.text for f in lost} >= {"15 minute", REASON}


fact_kinds = st.sampled_from(["number", "version", "name", "path", "url", "address", "code", "quoted", "reason", "watch"])
facts_strategy = st.builds(
    Fact,
    text=st.text(min_size=1, max_size=40).filter(lambda s: s.strip() != ""),
    kind=fact_kinds,
)


@settings(max_examples=300, deadline=None)
@given(summary=st.text(max_size=200), lost=st.lists(facts_strategy, max_size=6))
def test_repair_always_leaves_nothing_lost(summary: str, lost: list[Fact]) -> None:
    assert lost_facts(lost, repair_summary(summary, lost)) == []


FRAGMENTS = [
    "We store tokens in Redis",
    "with a 15 minute TTL",
    "because the mobile client can't persist them",
    "see src/auth/token.py",
    "on v2.3.1",
    "set OLLAMA_HOST",
    "RefreshTokenService",
    "refresh_ttl",
    "at https://example.com/x",
    'mode "strict"',
    "since the API is slow",
    "30s",
    "512 MB",
    "and",
    "Turn 12:",
    "done, no issues found",
    "Postgres",
    "2,000 turns",
    "due to load",
    "`fold_target`",
    "listens on port 5433",
    "in eu-west-2",
    "ticket PAY-4412",
    "drain queue billing-events",
    "--max-retries 5",
    "call parse_args()",
    "cron 0 2 * * *",
    "as svc-deploy@corp.example",
    "allow 10.0.0.0/16",
    "<|im_end|>",
]


@settings(max_examples=200, deadline=None)
@given(parts=st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=8), sep=st.sampled_from([" ", ". ", ", ", "\n"]))
def test_a_repaired_summary_refinds_its_facts(parts: list[str], sep: str) -> None:
    text = sep.join(parts)
    facts = extract_facts(text)
    repaired = repair_summary("something was decided", facts)
    assert lost_facts(facts, repaired) == []
    # every item the block wrote is a fact again for the next fold's check
    refound = {f.text.casefold() for f in extract_facts(repaired)}
    for item in parse_repair_block(repaired):
        assert item.casefold() in refound


# --------------------------------------------------------------------------
# Decisions
# --------------------------------------------------------------------------

DECISIONS = [
    DECISION,
    "decision: use Postgres for the audit log.",
    "Final decision: ship on Thursday.",
    "We decided to keep the retry budget at 3.",
    "We've decided to drop the legacy endpoint.",
    "We have decided to store sessions in Redis.",
    "After the review we finally decided to rotate keys weekly.",
    "The team decided on gRPC for internal calls.",
    "It's been decided: no more force pushes to main.",
    "We agreed to cap tool output at 10k tokens.",
    "Let's go with the 15 minute TTL.",
    "OK, let’s go with Redis then.",
    "We're going with option B.",
    "We are going with the in-place fold.",
    "We settled on a single fold from trigger to target.",
    "We chose to store refresh tokens in Redis.",
    "We've opted for SQLite for local state.",
    "We will pin decisions because folds lose them.",
    "We'll keep the cache warm because every expiry rewrites the context.",
    "Agreed: the spill threshold is 2,000 tokens.",
    "- Decided: keep_alive is 30m.",
    "# ADR 7: Token storage\n\nStatus: accepted\n\nContext: ...",
    "## Status\n\nAccepted\n\n## Decision\nUse Redis.",
    "Final call: we ship the ladder policy by default.",
    "Going forward, we fold in place.",
    "From now on, every decision gets a DECISION: prefix.",
]

CHATTER = [
    "I decided to take a look at the logs.",
    "We will run the tests after lunch.",
    "Let's see what the integration suite says.",
    "Status: pending",
    "Status: proposed, waiting on review.",
    "The test failed because the test was flaky.",
    "because the test was flaky",
    "Turn 12: Ran the integration suite against the staging cluster.",
    "Turn 12: done, no issues found.",
    "Investigated a flaky test in the billing module.",
    "Reviewed the PR that touches the rate limiter.",
    "Checked memory usage on the worker pool overnight.",
    "Updated the changelog for the upcoming release.",
    "Have we decided on the cache yet?",
    "Should we go with Redis or Memcached?",
    "We haven't decided yet.",
    "If we decided to use Redis, what would change?",
    "Let's go through the failures one by one.",
    "The decision tree classifier is slow on this data.",
    "Decision pending on the cache layer.",
    "Agreed, looks good to me.",
    "We could go with Postgres, but let's benchmark first.",
    "Let's try the other branch.",
    "We will need the staging credentials.",
    "We'll look into it tomorrow.",
    "Nothing has changed since Monday.",
    "We are going to lunch, back in an hour.",
    "What's the final call here?",
    "I picked up the ticket about rate limits.",
    "Decision: ?",
    "[inline] token token token token",
    "Acknowledged. I'll wire the token service to Redis with a 15 minute TTL.",
    "Here is the diff for src/auth/token.py.",
    "The HTTP status: 202 Accepted.",
]


@pytest.mark.parametrize("text", DECISIONS)
def test_each_decision_phrasing_pins(text: str) -> None:
    detector = DecisionDetector()
    assert detector.is_decision(text)
    assert detector.match(text) in DEFAULT_DECISION_PATTERNS


def test_chatter_does_not_pin() -> None:
    assert len(CHATTER) >= 25
    detector = DecisionDetector()
    pinned = [line for line in CHATTER if detector.is_decision(line)]
    assert pinned == []


def test_false_pin_rate_on_the_article_filler_is_zero() -> None:
    detector = DecisionDetector()
    lines = []
    for turn in range(40):
        lines.append(f"Turn {turn}: {FILLER_TOPICS[turn % len(FILLER_TOPICS)]}")
        lines.append(f"Turn {turn}: done, no issues found.")
        lines.append("[inline] " + " ".join(["token"] * 50))
    assert sum(detector.is_decision(line) for line in lines) == 0
    assert detector.is_decision(DECISION)


def test_match_names_the_pattern_that_hit() -> None:
    detector = DecisionDetector([r"\bADR-\d+\b", r"(?-i:SHIP IT)"])
    assert detector.match("Accepted in ADR-12.") == r"\bADR-\d+\b"
    assert detector.match("ship it") is None
    assert detector.match("SHIP IT now") == r"(?-i:SHIP IT)"
    assert detector.match("we decided") is None


def test_a_bad_pattern_is_a_clear_error_naming_it() -> None:
    with pytest.raises(ValueError, match=re.escape("'we (decided'")) as info:
        DecisionDetector(["DECISION:", "we (decided"])
    assert "not a valid regular expression" in str(info.value)


@pytest.mark.parametrize("pattern", ["", r"\b", "(?:x?)"])
def test_a_pattern_that_would_pin_everything_is_refused(pattern: str) -> None:
    with pytest.raises(ValueError, match="pin every message"):
        DecisionDetector([pattern])


# --------------------------------------------------------------------------
# Probe
# --------------------------------------------------------------------------


def test_find_expected_is_a_case_insensitive_substring_check() -> None:
    context = "refresh tokens: REDIS, 15 minute TTL"
    assert find_expected(["Redis", "15 minute", "rotate", "ttl"], context) == {
        "Redis": True,
        "15 minute": True,
        "rotate": False,
        "ttl": True,
    }


def test_find_expected_refuses_an_empty_expectation() -> None:
    with pytest.raises(ValueError, match="empty"):
        find_expected(["Redis", ""], "Redis")


@pytest.mark.parametrize("header", ["[fold #3 · 6 messages · depth 2]", "[folded 6 messages]"])
def test_a_fold_header_is_not_a_fact(header: str) -> None:
    assert extract_facts(f"{header}\n- user: Turn 3: done.") == []
    assert texts(extract_facts(f"{header}\n- user: keep 6 messages")) == [("number", "6 messages")]


TEMPLATE_JUNK = [
    "<|im_end|>",
    "<|im_start|>user",
    "<|im_start|>assistant\nok<|im_end|>",
    "<start_of_turn>model",
    "<end_of_turn>",
    "</s>",
    "<s>",
    "[INST] go on [/INST]",
    "<|eot_id|><|start_header_id|>assistant<|end_header_id|>",
    "<<SYS>>",
    "<</SYS>>",
    "<|endoftext|>",
    "<|im_",
    "im_start",
    "im_end",
    "im_",
    "im_st",
    "end_of_turn",
    "start_of",
    "|>",
]


@pytest.mark.parametrize("junk", TEMPLATE_JUNK)
def test_chat_template_tokens_and_their_fragments_are_never_facts(junk: str) -> None:
    assert extract_facts(junk) == []
    assert texts(extract_facts(f"{junk}\nPostgres listens on port 5433.\n{junk}")) == [("address", "port 5433")]


def test_a_name_kept_by_its_noun_is_refound_alone_in_a_repair_block() -> None:
    facts = extract_facts("Drain queue billing-events first.")
    assert texts(facts) == [("name", "billing-events")]
    repaired = repair_summary("the queue was drained", facts)
    assert "billing-events" in {f.text for f in extract_facts(repaired)}


def test_a_quoted_decision_is_a_report_not_a_decision():
    from tailrent_tui.core.guard import DecisionDetector

    d = DecisionDetector()
    assert d.is_decision("DECISION: Redis with a 15 minute TTL.")
    assert not d.is_decision('I read your message: "DECISION: Redis with a 15 minute TTL". Noted.')
    assert not d.is_decision("You wrote “we decided to use Redis” earlier.")
    assert d.is_decision('About "the cache": DECISION: Redis with a 15 minute TTL.')


def test_the_repair_has_room_for_a_share_of_its_span_and_reports_the_rest_lost() -> None:
    """A pasted log line's sixty timings are identifiers; carried all, the summary would be as big
    as its span. The repair takes what fits its room (the user's words first); the rest is lost, said so."""
    from tailrent_tui.core.rungs.fold import REPAIR_FLOOR, REPAIR_SHARE, prepare_fold
    from tailrent_tui.core.session import Session
    from tailrent_tui.core.tokens import get_counter

    s = Session(counter=get_counter("chars4"), system="sys", window=100_000, detect_statements=False)
    timings = " ".join(f"worker-{i} took {10 + i}ms;" for i in range(60))
    span = [
        s.add("user", f"the nightly run again: {timings}"),
        s.add("assistant", "Looked at it; nothing odd apart from worker-7."),
    ]
    record = prepare_fold(s, [m.id for m in span], summary="The nightly run's timings were pasted.", summarizer_name="t")
    room = max(REPAIR_FLOOR, int(sum(m.tokens for m in span) * REPAIR_SHARE))
    repaired_tokens = sum(s.count(f) + 1 for f in record.facts_repaired)
    assert record.facts_repaired and repaired_tokens <= room
    # everything the guard found missing is either carried or reported lost, never both, never neither
    assert set(record.facts_dropped) == set(record.facts_repaired) | set(record.facts_lost)
    assert not set(record.facts_repaired) & set(record.facts_lost)
    assert len(record.facts_lost) > 60  # most of the timings: a share of the span has no room for them
    assert record.tokens_after < record.tokens_before // 2
