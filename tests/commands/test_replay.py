"""`tailrent replay article`: the article's numbers, and any other parameters
checked against a compact transliteration of the C# harness written here.

The transliteration does what TailRent.cs does, the slow way: it re-sums the
whole transcript after every add, removes folded messages one by one, and
computes the reduction percent from an exact fraction. It shares no code with
tailrent_tui.scenarios.article (only the .NET generator, which
tests/scenarios/test_dotnet_random.py checks against its own reference).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest
from click.testing import CliRunner

from tailrent_tui.cli import cli
from tailrent_tui.scenarios.article import (
    SpillDirError,
    article_trace,
    contains_ignore_case,
    default_spill_dir,
    estimate_tokens,
    format_article,
    format_reduction,
    run_article,
)
from tailrent_tui.scenarios.dotnet_random import DotNetRandom

REPO = Path(__file__).resolve().parents[2]

# The article's published run (unpinned): the first three folds, as printed.
ARTICLE_FOLD_LINES = [
    "[fold #1] folded 6 messages, 203 -> 138 tokens (32% reduction)",
    "  keywords lost at this fold: rotate, mobile",
    "[fold #2] folded 6 messages, 339 -> 163 tokens (52% reduction)",
    "  keywords lost at this fold: 15 minute",
    "[fold #3] folded 6 messages, 371 -> 171 tokens (54% reduction)",
    "  keywords lost at this fold: Redis",
]


def reference_harness(
    *, pinned=False, seed=42, batch=6, max_tail=900, spill_threshold=120, turns=40, spill_dir="/tmp/tailrent-spill"
):
    """TailRent.cs Main() with the mock client, line by line; returns its printed text."""
    est = lambda s: 0 if not s else max(1, len(s) // 4)  # noqa: E731
    watch = ["Redis", "15 minute", "rotate", "mobile"]
    transcript, log = [], []

    def add(role, content, pin=False):
        transcript.append({"role": role, "content": content, "pinned": pin})
        if sum(est(m["content"]) for m in transcript) > max_tail:
            foldable = [m for m in transcript if not m["pinned"]][:batch]
            if not foldable:
                return
            before = sum(est(m["content"]) for m in foldable)
            out = ""
            for m in foldable:
                words = [w for w in m["content"].split(" ") if w != ""]
                out += "- " + m["role"] + ": " + " ".join(words[:12]) + ("..." if len(words) > 12 else "") + "\n"
            summary = out.rstrip("\n")
            lost = [
                k for k in watch if any(k.lower() in m["content"].lower() for m in foldable) and k.lower() not in summary.lower()
            ]
            for m in foldable:
                transcript.remove(m)
            content = "[folded " + str(len(foldable)) + " messages]\n" + summary
            transcript.insert(0, {"role": "system", "content": content, "pinned": False})
            log.append((len(log) + 1, len(foldable), before, est(content), lost))

    add(
        "user",
        "DECISION: We will store refresh tokens in Redis with a 15 minute TTL and rotate them on every use, "
        "because the mobile team's client can't reliably persist tokens between app restarts.",
        pinned,
    )
    add(
        "assistant",
        "Acknowledged. I'll wire the token service to Redis with a 15 minute TTL and rotate-on-use, "
        "and flag any code path that assumes long-lived tokens.",
    )
    rng = DotNetRandom(seed)
    topics = [
        "Ran the integration suite against the staging cluster.",
        "Investigated a flaky test in the billing module.",
        "Reviewed the PR that touches the rate limiter.",
        "Checked memory usage on the worker pool overnight.",
        "Updated the changelog for the upcoming release.",
    ]
    for turn in range(turns):
        add("user", f"Turn {turn}: {topics[rng.next(len(topics))]}")
        raw = " ".join("token" for _ in range(rng.next(20, 2000)))
        name = f"tool_call_{turn}"
        tokens = est(raw)
        if tokens <= spill_threshold:
            add("tool", "[inline] " + raw)
        else:
            guid = "0123abcd-0000-4000-8000-00000000beef"  # any 36-character GUID prints the same length
            path = spill_dir + ("" if spill_dir.endswith("/") else "/") + guid + ".json"
            preview = raw[:160] + "..." if len(raw) > 160 else raw
            add(
                "tool",
                f"[spilled] [spilled tool result: {name}] ~{tokens} tokens written to {path} (id={guid}). Preview: {preview}",
            )
        add("assistant", f"Turn {turn}: done, no issues found.")

    text = [f"Final tail tokens (est.): {sum(est(m['content']) for m in transcript)}", f"Total folds triggered: {len(log)}", ""]
    for number, folded, before, after, lost in log:
        value = 1 - after / max(1, before)  # the same IEEE double operations as the C#
        percent = round(Fraction(value) * 100)  # exact value; round() on a Fraction ties to even, like Dragon4
        sign = "-" if value < 0 else ""
        text.append(f"[fold #{number}] folded {folded} messages, {before} -> {after} tokens ({sign}{abs(percent):,}% reduction)")
        if lost:
            text.append("  keywords lost at this fold: " + ", ".join(lost))
    visible = "\n".join(m["content"] for m in transcript).lower()
    text += ["", f"Recall test: {sum(k.lower() in visible for k in watch)}/4 watched keywords still visible in context."]
    return "\n".join(text) + "\n"


# --- the article's numbers -------------------------------------------------


def test_default_run_prints_the_articles_numbers(tmp_path: Path) -> None:
    run = run_article(spill_dir="/tmp/tailrent-spill", write_spills=False)
    text = format_article(run)
    lines = text.splitlines()
    assert lines[0] == "Final tail tokens (est.): 872"
    assert lines[1] == "Total folds triggered: 20"
    assert lines[2] == ""
    assert lines[3:9] == ARTICLE_FOLD_LINES
    assert not any("keywords lost" in line for line in lines[9:])
    assert lines[-2:] == ["", "Recall test: 0/4 watched keywords still visible in context."]
    assert len(run.folds) == 20 and run.recall.surviving == 0


def test_pinned_run_prints_the_articles_numbers() -> None:
    run = run_article(pinned=True, spill_dir="/tmp/tailrent-spill", write_spills=False)
    lines = format_article(run).splitlines()
    assert lines[0] == "Final tail tokens (est.): 871"
    assert lines[1] == "Total folds triggered: 20"
    assert lines[-1] == "Recall test: 4/4 watched keywords still visible in context."


def test_default_spill_dir_is_the_dotnet_temp_path(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.delenv("TMPDIR", raising=False)
    assert default_spill_dir() == "/tmp/tailrent-spill"
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    assert default_spill_dir() == f"{tmp_path}/tailrent-spill"
    monkeypatch.setenv("TMPDIR", f"{tmp_path}/")
    assert default_spill_dir() == f"{tmp_path}/tailrent-spill"


def test_tmpdir_moves_the_spills_and_changes_the_numbers_as_dotnet_would(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    run = run_article()
    assert run.spill_paths and all(p.startswith(f"{tmp_path}/tailrent-spill/") for p in run.spill_paths)
    assert format_article(run) == reference_harness(spill_dir=f"{tmp_path}/tailrent-spill")


# --- any other parameters: against the transliteration ----------------------


def _parameter_sets():
    corners = [
        dict(seed=0),
        dict(seed=1),
        dict(seed=-1),
        dict(seed=2**31 - 1),
        dict(seed=-(2**31)),
        dict(batch=1),
        dict(batch=1, pinned=True),
        dict(batch=2),
        dict(batch=100),
        dict(max_tail=0),
        dict(max_tail=0, batch=1),
        dict(max_tail=100000),
        dict(max_tail=50),
        dict(spill_threshold=0),
        dict(spill_threshold=100000),
        dict(spill_threshold=20),
        dict(turns=0),
        dict(turns=1),
        dict(turns=300),
        dict(turns=0, max_tail=10),
        dict(spill_dir="/srv/Redis mobile/rotate-15 minute"),  # keywords and spaces inside the pointer
        dict(spill_dir="relative/dir/"),
        dict(spill_dir="/"),
        dict(spill_dir="x" * 400),
        dict(pinned=True, batch=3, max_tail=120, spill_threshold=5),
    ]
    pick = random.Random(2024)
    drawn = [
        dict(
            pinned=pick.random() < 0.5,
            seed=pick.randrange(-(2**31), 2**31),
            batch=pick.choice([1, 2, 3, 4, 6, 8, 13]),
            max_tail=pick.choice([0, 40, 200, 500, 900, 1500, 4000]),
            spill_threshold=pick.choice([0, 50, 120, 250, 480, 600]),
            turns=pick.choice([0, 3, 10, 40, 77]),
            spill_dir=pick.choice(["/tmp/tailrent-spill", "/tmp/", "/var/tmp/a/b/c/spills", "s"]),
        )
        for _ in range(60)
    ]
    return corners + drawn


@pytest.mark.parametrize("params", _parameter_sets(), ids=lambda p: ",".join(f"{k}={v}" for k, v in p.items()))
def test_other_parameters_match_the_transliterated_harness(params: dict) -> None:
    params = {"spill_dir": "/tmp/tailrent-spill", **params}
    run = run_article(write_spills=False, **params)
    assert format_article(run) == reference_harness(**params)


@pytest.mark.parametrize("offset", [-1, 0, 1])
def test_a_tool_result_exactly_at_the_spill_threshold_stays_inline(offset: int) -> None:
    rng = DotNetRandom(42)
    rng.next(5)
    first_tool_tokens = (6 * rng.next(20, 2000) - 1) // 4  # "token token ..." has 6n - 1 characters
    params = dict(spill_threshold=first_tool_tokens + offset, turns=1, max_tail=100000, spill_dir="/tmp/tailrent-spill")
    assert format_article(run_article(write_spills=False, **params)) == reference_harness(**params)


def test_json_figures_agree_with_the_text() -> None:
    run = run_article(seed=9, batch=4, write_spills=False, spill_dir="/tmp/tailrent-spill")
    figures = run.summary_dict()
    assert set(figures) == {"final_tail_tokens", "folds", "recall"}
    assert set(figures["folds"][0]) == {"fold", "messages_folded", "tokens_before", "tokens_after", "keywords_lost"}
    text = reference_harness(seed=9, batch=4)
    assert f"Final tail tokens (est.): {figures['final_tail_tokens']}" in text
    assert f"Total folds triggered: {len(figures['folds'])}" in text


@pytest.mark.parametrize(
    ("before", "after", "shown"),
    [
        (203, 138, "32%"),  # the article's fold #1
        (339, 163, "52%"),
        (8, 7, "12%"),  # 0.125 exactly: Dragon4 rounds the tie to even
        (8, 3, "62%"),  # 0.625 exactly: to even again
        (8, 5, "38%"),  # 0.375: the even neighbour is up
        (7, 15, "-114%"),  # a fold can grow what it folds
        (250, 251, "-0%"),  # .NET keeps the sign of a negative value that rounds to zero
        (10, 10, "0%"),
        (0, 0, "100%"),  # Math.Max(1, before)
        (1, 20, "-1,900%"),  # P0 groups thousands
    ],
)
def test_reduction_percent_follows_dotnet_p0(before: int, after: int, shown: str) -> None:
    assert format_reduction(before, after) == shown


def test_lengths_are_counted_in_utf16_units_as_dotnet_does() -> None:
    # An emoji is one Python character but two .NET chars, so a spill dir with
    # one changes String.Length, and so the estimate, by twice as much.
    assert estimate_tokens("\U0001f600" * 8) == 4
    assert estimate_tokens("é" * 8) == 2
    assert estimate_tokens("abcd") == 1 and estimate_tokens("abc") == 1 and estimate_tokens("") == 0


def test_keyword_matching_is_ordinal_ignore_case() -> None:
    assert contains_ignore_case("stored in REDIS today", "Redis")
    assert contains_ignore_case("a 15 MINUTE ttl", "15 minute")
    assert not contains_ignore_case("a 15-minute ttl", "15 minute")
    # .NET's ordinal casing maps no non-ASCII letter onto ASCII: not the dotted
    # or dotless i, not the long s, not the Kelvin sign.
    assert not contains_ignore_case("REDİS", "Redis")
    assert not contains_ignore_case("redıs", "Redis")
    assert not contains_ignore_case("redi\u017f", "Redis")
    assert not contains_ignore_case("\u212aelvin", "kelvin")
    assert contains_ignore_case("MoBiLe", "mobile")


# --- spills are real files ----------------------------------------------------


def test_spills_are_written_as_json_files(tmp_path: Path) -> None:
    spill_dir = tmp_path / "spills"
    run = run_article(spill_dir=str(spill_dir))
    files = sorted(spill_dir.iterdir())
    assert len(files) == len(run.spill_paths) > 0
    for path in files:
        assert len(path.stem) == 36 and path.suffix == ".json"
        payload = json.loads(path.read_text(encoding="utf-8"))
        assert set(payload) == {"tool", "capturedAt", "content"}
        assert payload["tool"].startswith("tool_call_")
        words = payload["content"].split(" ")
        assert set(words) == {"token"} and 20 <= len(words) < 2000
        assert len(payload["content"]) // 4 > 120  # only results over the threshold are spilled


def test_write_spills_false_changes_no_number(tmp_path: Path) -> None:
    written = run_article(spill_dir=str(tmp_path / "s"), seed=3)
    skipped = run_article(spill_dir=str(tmp_path / "s"), seed=3, write_spills=False)
    assert skipped.spill_paths == []
    assert written.summary_dict() == skipped.summary_dict()


def test_a_spill_dir_that_is_a_file_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("not a directory")
    with pytest.raises(SpillDirError, match="cannot create spill directory"):
        run_article(spill_dir=str(blocker / "spills"))
    with pytest.raises(SpillDirError, match="cannot create spill directory"):
        run_article(spill_dir=str(blocker))
    assert blocker.read_text() == "not a directory"


def test_a_spill_dir_that_cannot_take_files_is_a_clear_error() -> None:
    # /proc/self exists as a directory, but no one (not even root) can create files in it.
    with pytest.raises(SpillDirError, match="cannot write spill file"):
        run_article(spill_dir="/proc/self")


def test_bad_parameters_are_value_errors() -> None:
    for bad in (dict(batch=0), dict(turns=-1), dict(max_tail=-5), dict(spill_threshold=-1), dict(seed=2**31)):
        with pytest.raises(ValueError, match="must be"):
            run_article(write_spills=False, **bad)
    with pytest.raises(SpillDirError):
        run_article(spill_dir="")


# --- the trace for the benchmark ---------------------------------------------


def test_article_trace_is_the_same_scenario() -> None:
    records = article_trace(seed=42, turns=40)
    header, decision, ack, *middle, probe = records
    assert header["trace"] == "article" and header["window"] == 2048 and header["system"]
    assert decision["role"] == "user" and decision["content"].startswith("DECISION:") and "pin" not in decision
    assert ack["role"] == "assistant"
    assert probe == {
        "probe": "What did we decide about refresh tokens, and why?",
        "expect": ["Redis", "15 minute", "rotate", "mobile"],
    }
    assert len(middle) == 3 * 40
    rng = DotNetRandom(42)
    for turn in range(40):
        user, tool, assistant = middle[3 * turn : 3 * turn + 3]
        rng.next(5)
        assert user["role"] == "user" and user["content"].startswith(f"Turn {turn}: ")
        assert tool == {"role": "tool", "tool": f"tool_call_{turn}", "content": " ".join(["token"] * rng.next(20, 2000))}
        assert assistant == {"role": "assistant", "content": f"Turn {turn}: done, no issues found."}
    json.dumps(records)  # every record is plain JSON
    assert article_trace(seed=5, turns=3) != article_trace(seed=6, turns=3)


# --- the command ----------------------------------------------------------------


def test_cli_json_prints_the_articles_numbers(tmp_path: Path, monkeypatch) -> None:
    # A spill dir exactly as long as /tmp/tailrent-spill gives the article's
    # numbers (only the pointer's length counts) without writing outside tmp_path.
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["replay", "article", "--json", "--spill-dir", "tmp/tailrent-spill1"])
    assert result.exit_code == 0, result.output
    figures = json.loads(result.output)
    assert figures["final_tail_tokens"] == 872
    assert len(figures["folds"]) == 20
    assert figures["folds"][0] == {
        "fold": 1,
        "messages_folded": 6,
        "tokens_before": 203,
        "tokens_after": 138,
        "keywords_lost": ["rotate", "mobile"],
    }
    assert figures["folds"][1]["keywords_lost"] == ["15 minute"]
    assert figures["folds"][2]["keywords_lost"] == ["Redis"]
    assert figures["recall"] == {"surviving": 0, "total": 4}
    assert len(os.listdir("tmp/tailrent-spill1")) > 0


def test_cli_pinned_text(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli,
        [
            "replay",
            "article",
            "--pinned",
            "--spill-dir",
            str(tmp_path / "s"),
            "--seed",
            "7",
            "--batch",
            "3",
            "--max-tail",
            "600",
            "--spill-threshold",
            "200",
            "--turns",
            "25",
        ],
    )
    assert result.exit_code == 0, result.output
    heading, _, rest = result.output.partition("\n\n")  # a heading line, then the harness's output exactly
    assert heading.startswith("The article's harness") and "decision pinned" in heading and "fold batch 3" in heading
    assert rest == reference_harness(
        pinned=True, seed=7, batch=3, max_tail=600, spill_threshold=200, turns=25, spill_dir=str(tmp_path / "s")
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--batch", "0"], "--batch"),
        (["--turns", "-1"], "--turns"),
        (["--max-tail", "-1"], "--max-tail"),
        (["--spill-threshold", "-3"], "--spill-threshold"),
        (["--seed", "2147483648"], "--seed"),
        (["--seed", "abc"], "--seed"),
    ],
)
def test_cli_rejects_bad_flags_clearly(args: list[str], message: str) -> None:
    result = CliRunner().invoke(cli, ["replay", "article", *args])
    assert result.exit_code == 2
    assert message in result.output and "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_cli_unwritable_spill_dir_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    result = CliRunner().invoke(cli, ["replay", "article", "--spill-dir", str(blocker / "spills")])
    assert result.exit_code == 1
    assert "Error: cannot create spill directory" in result.output
    assert isinstance(result.exception, SystemExit)
    result = CliRunner().invoke(cli, ["replay", "article", "--spill-dir", "/proc/self"])
    assert result.exit_code == 1 and "Error: cannot write spill file" in result.output


def test_real_subprocess_prints_the_articles_numbers(tmp_path: Path) -> None:
    env = {**os.environ}
    env.pop("TMPDIR", None)
    result = subprocess.run(
        [sys.executable, "-m", "tailrent_tui", "replay", "article", "--json", "--spill-dir", "tmp/tailrent-spill1"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    figures = json.loads(result.stdout)
    assert figures["final_tail_tokens"] == 872 and len(figures["folds"]) == 20
    assert figures["recall"] == {"surviving": 0, "total": 4}
    assert (tmp_path / "tmp" / "tailrent-spill1").is_dir()


def test_real_subprocess_reports_a_bad_spill_dir_without_traceback(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    result = subprocess.run(
        [sys.executable, "-m", "tailrent_tui", "replay", "article", "--spill-dir", str(tmp_path / "f" / "d")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1
    assert "cannot create spill directory" in result.stderr and "Traceback" not in result.stderr


def test_replay_article_starts_with_a_heading() -> None:
    r = CliRunner().invoke(cli, ["replay", "article"])
    assert r.exit_code == 0
    first, second, third = r.stdout.splitlines()[:3]
    assert first.startswith('The article\'s harness ("Tail Rent"), reproduced: seed 42') and "decision not pinned" in first
    assert second == "" and third == "Final tail tokens (est.): 872"
