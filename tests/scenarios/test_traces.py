"""The trace loader: good traces, named faults, and the built-ins."""

from __future__ import annotations

import json

import pytest

from tailrent_tui.bench.runner import run_bench
from tailrent_tui.core.tokens import get_counter
from tailrent_tui.scenarios.traces import DEFAULT_START, TraceError, get_trace, load_trace


def lines(*objs) -> list[str]:
    return [json.dumps(o) for o in objs]


def test_times_default_to_thirty_seconds_and_idle_moves_the_clock():
    t = load_trace(
        lines(
            {"trace": "t", "window": 500, "system": "be brief"},
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"},
            {"idle": 3600},
            {"role": "user", "content": "back", "at": "2026-11-03T09:00:00Z"},
            {"role": "tool", "tool": "grep", "content": "a:1:x"},
        )
    )
    msgs = t.messages
    assert t.name == "t" and t.window == 500 and t.system == "be brief"
    assert msgs[0].at == DEFAULT_START and msgs[1].at == DEFAULT_START + 30
    assert msgs[2].at == 1793696400.0  # 2026-11-03T09:00:00Z
    assert msgs[3].at == msgs[2].at + 30 and msgs[3].tool == "grep"
    assert t.steps[2].kind == "idle" and t.steps[2].seconds == 3600


@pytest.mark.parametrize(
    ("bad", "where", "what"),
    [
        ("{not json", 2, "not JSON"),
        ('["a list"]', 2, "JSON object"),
        ('{"role": "robot", "content": "x"}', 2, "unknown role"),
        ('{"role": "user", "content": 42}', 2, "'content' must be a string"),
        ('{"role": "user", "content": "x", "pin": "yes"}', 2, "'pin'"),
        ('{"role": "user", "content": "x", "at": "yesterday"}', 2, "ISO 8601"),
        ('{"idle": "long"}', 2, "'idle'"),
        ('{"probe": "q", "expect": "Redis"}', 2, "'expect'"),
        ('{"trace": "late"}', 2, "may only come first"),
        ('{"hello": 1}', 2, "expected a message"),
        ('{"role": "user"}', 2, "'content' is missing: it must be a string"),
        ('{"idle": true}', 2, "'idle' must be a number of seconds >= 0, got bool True"),
        ('{"probe": "q", "expect": ["Redis", ""]}', 2, "'expect' must be a list of non-empty strings"),
    ],
)
def test_bad_lines_name_the_line(bad, where, what):
    with pytest.raises(TraceError, match=rf"line {where}: .*{what}|line {where}:.*{what}"):
        load_trace(['{"role": "user", "content": "ok"}', bad])


def test_bad_header_types():
    with pytest.raises(TraceError, match="line 1: 'window' must be a positive integer"):
        load_trace(['{"trace": "t", "window": "big"}'])


def test_unknown_fields_are_ignored_and_counted(tmp_path):
    f = tmp_path / "t.jsonl"
    f.write_text(
        "\n".join(
            lines(
                {"trace": "t", "window": 900, "model": "x"},
                {"role": "user", "content": "hi", "mood": "happy", "lang": "en"},
                {"idle": 10, "why": "coffee"},
            )
        )
        + "\n\n",
        encoding="utf-8",
    )
    t = load_trace(f)
    assert t.ignored_fields == 4
    assert t.ignored_field_names == {"model": 1, "mood": 1, "lang": 1, "why": 1}
    assert len(t.messages) == 1


def test_window_smaller_than_system_prompt():
    records = lines({"trace": "t", "window": 5, "system": "You are a careful agent. " * 10})
    with pytest.raises(TraceError, match=r"window \(5 tokens\) is smaller than the system prompt"):
        load_trace(records, counter=get_counter("chars4"))


def test_missing_file_and_unknown_builtin():
    with pytest.raises(TraceError, match="no trace 'nope'"):
        get_trace("nope")


def test_probe_before_any_message_scores_the_system_prompt_only():
    t = load_trace(
        lines(
            {"trace": "t", "window": 500, "system": "Use Redis."},
            {"probe": "what store?", "expect": ["Redis", "Postgres"]},
            {"role": "user", "content": "Postgres please"},
            {"role": "assistant", "content": "ok"},
        )
    )
    res = run_bench(t, ["none"], tokenizer="chars4")
    p = res.traces[0].policies["none"]
    assert (p.recall_hits, p.recall_total) == (1, 2)
    assert p.probe_misses == ["line 2: Postgres"]


def test_article_builtin_is_the_harness_scenario():
    t = get_trace("article")
    assert t.name == "article"
    assert len(t.messages) == 2 + 3 * 40
    assert t.probes[0].expect == ["Redis", "15 minute", "rotate", "mobile"]
    assert not any(s.pin for s in t.messages)  # a policy has to find the decision itself


def test_migration_week_shape():
    from tailrent_tui.scenarios.migration_week import decision_line_numbers, migration_week_records

    records = migration_week_records()
    assert records == migration_week_records()  # deterministic
    t = load_trace(records, name="migration-week")
    assert len(t.messages) >= 2000
    gaps = [s.seconds for s in t.steps if s.kind == "idle"]
    assert sum(1 for g in gaps if g >= 12 * 3600) >= 4  # overnight gaps between five days
    assert len(t.decision_line_numbers) >= 12
    assert t.decision_line_numbers == decision_line_numbers()
    counter = get_counter("cl100k")
    big = [s for s in t.messages if s.role == "tool" and counter.count(s.content) >= 3000]
    assert len(big) >= 20
    assert len(t.probes) >= 5
    # every expected fact is stated verbatim by a decision line before its probe
    seen = ""
    for s in t.steps:
        if s.kind == "message" and s.decision:
            seen += s.content.casefold()
        if s.kind == "probe":
            assert all(e.casefold() in seen for e in s.expect)
