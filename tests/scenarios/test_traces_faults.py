"""Hostile traces (issue 13): times with offsets, numbers that are not numbers, deep nesting.

Each is loaded both as lines (what `load_trace` parses) and, for the CLI, through
`tailrent bench --trace FILE`: a refused trace is one line naming the line, never a traceback.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from tailrent_tui.cli import cli
from tailrent_tui.scenarios.traces import TraceError, load_trace

NINE = datetime(2026, 11, 2, 9, 3, 10, tzinfo=UTC).timestamp()


def user_at(at: str) -> str:
    return json.dumps({"role": "user", "content": "hi", "at": at})


@pytest.mark.fault("trace times and numbers")
@pytest.mark.parametrize(
    ("at", "expected"),
    [
        ("2026-11-02T09:03:10Z", NINE),
        ("2026-11-02T09:03:10+00:00", NINE),
        (datetime.fromtimestamp(NINE, UTC).isoformat(), NINE),
        ("2026-11-02T10:03:10+01:00", NINE),
        ("2026-11-02T03:33:10-05:30", NINE),
        ("2026-11-02T09:03:10.250Z", NINE + 0.25),
        ("2026-11-02t09:03:10z", NINE),
    ],
    ids=["Z", "+00:00", "isoformat()", "+01:00", "-05:30", "fraction", "lower case"],
)
def test_an_at_time_with_any_offset_is_taken(at, expected):
    (step,) = load_trace([user_at(at)]).steps
    assert step.at == pytest.approx(expected)


@pytest.mark.fault("trace times and numbers")
@pytest.mark.parametrize(
    "at",
    ["2026-11-02T09:03:10", "2026-11-02", "yesterday", "2026-13-02T09:03:10Z", ""],
    ids=["no offset", "a date", "a word", "month 13", "empty"],
)
def test_an_at_time_without_an_offset_or_not_a_time_is_refused(at):
    with pytest.raises(TraceError, match="line 1"):
        load_trace([user_at(at)])


@pytest.mark.fault("trace times and numbers")
@pytest.mark.parametrize(
    "line",
    [
        '{"idle": NaN}',
        '{"idle": Infinity}',
        '{"idle": -Infinity}',
        '{"idle": 1e400}',
        '{"role": "user", "content": "x", "pin": NaN}',
        '{"trace": "t", "window": Infinity}',
    ],
    ids=["idle NaN", "idle Infinity", "idle -Infinity", "idle 1e400", "NaN elsewhere", "window Infinity"],
)
def test_numbers_that_are_not_json_numbers_are_refused(line):
    with pytest.raises(TraceError, match="line 2"):
        load_trace(['{"role": "user", "content": "first"}', line])


@pytest.mark.fault("trace times and numbers")
def test_idle_nan_given_as_a_parsed_line_is_refused():
    with pytest.raises(TraceError, match="idle"):
        load_trace([{"idle": float("nan")}])


@pytest.mark.fault("deep traces")
@pytest.mark.parametrize("depth", [200_000, 2_000_000])
def test_a_trace_nested_deep_is_one_line(tmp_path: Path, depth):
    path = tmp_path / "deep.jsonl"
    path.write_text('{"role": "user", "content": "x"}\n' + "[" * depth + "]" * depth + "\n")
    with pytest.raises(TraceError, match="line 2"):
        load_trace(path)
    result = CliRunner().invoke(cli, ["bench", "--trace", str(path), "--policy", "none"], catch_exceptions=False)
    assert result.exit_code == 1
    assert result.output.startswith("Error: ") and result.output.strip().count("\n") == 0


@pytest.mark.fault("deep traces")
def test_a_deep_object_in_a_field_is_one_line(tmp_path: Path):
    path = tmp_path / "deep.jsonl"
    path.write_text('{"role": "user", "content": ' + '{"a": ' * 100_000 + "1" + "}" * 100_000 + "}\n")
    result = CliRunner().invoke(cli, ["bench", "--trace", str(path), "--policy", "none"], catch_exceptions=False)
    assert result.exit_code == 1 and "line 1" in result.output and "Traceback" not in result.output
