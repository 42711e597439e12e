"""Managing sessions (issue 26, item 7): `tailrent sessions` shows each one's model and
workspace, `sessions rm` and `sessions prune` delete (never one open elsewhere), failed
one-message sessions do not pile up, and `--resume` alone opens a picker (Pilot, 1,000 sessions)."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tailrent_tui.cli import cli
from tailrent_tui.store.sessions import SessionDir, find_session, list_sessions
from tailrent_tui.ui.picker import PickerRow, SessionPicker, picker_rows


@pytest.fixture
def home(tmp_path: Path, monkeypatch) -> Path:
    data = tmp_path / "data"
    monkeypatch.setenv("TAILRENT_HOME", str(data))
    monkeypatch.setenv("TAILRENT_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("TAILRENT_FSYNC", "false")
    for var in ("TAILRENT_MODEL", "TAILRENT_WINDOW", "TAILRENT_POLICY", "TAILRENT_YOLO", "OLLAMA_HOST"):
        monkeypatch.delenv(var, raising=False)
    (tmp_path / "ws").mkdir()
    return data


def run(*args: str, ok: bool = True, input: str | None = None) -> Any:
    result = CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False)
    if ok:
        assert result.exit_code == 0, result.output
    return result


def ask(home: Path, *args: str) -> str:
    out = run("--workspace", str(home.parent / "ws"), "ask", "--model", "mock", "--json", *args)
    return json.loads(out.stdout)["session"]


def test_the_listing_shows_model_and_workspace(home):
    sid = ask(home, "Where do refresh tokens live?")
    out = run("sessions").stdout
    header, row = out.splitlines()[:2]
    assert header.split()[:4] == ["id", "title", "model", "workspace"]
    assert row.startswith(sid) and " mock " in row and str(home.parent / "ws") in row
    listed = json.loads(run("sessions", "--json").stdout)
    assert listed[0]["model"] == "mock" and listed[0]["workspace"] == str(home.parent / "ws")


def test_rm_deletes_asks_first_and_refuses_a_session_open_elsewhere(home):
    keep, gone = ask(home, "One."), ask(home, "Two.")
    refused = run("sessions", "rm", gone, ok=False)
    assert refused.exit_code != 0 and "pass --yes" in refused.output
    assert run("sessions", "rm", gone, "--yes").stdout == f"deleted {gone}\n"
    assert [i.id for i in list_sessions(home)] == [keep]
    lock = find_session(home, keep).acquire_lock()
    try:
        out = run("sessions", "rm", keep, "--yes", ok=False)
        assert out.exit_code == 1 and f"not deleted {keep}" in out.stderr and "already open" in out.stderr
    finally:
        lock.release()
    assert run("sessions", "rm", "nosuchsession", "--yes", ok=False).exit_code != 0


def _one_unanswered(home: Path) -> str:
    """A session whose first turn failed: its message kept, no reply."""
    out = run("--workspace", str(home.parent / "ws"), "ask", "--model", "openai:http://127.0.0.1:9", "Hello?", ok=False)
    assert out.exit_code == 1 and "Your message is kept in session" in out.stderr, out.output
    return out.stderr.split("Your message is kept in session ")[1].split(";")[0]


def test_failed_one_message_sessions_do_not_pile_up_and_prune_sweeps_them(home):
    first = _one_unanswered(home)
    assert [i.id for i in list_sessions(home)] == [first], "the latest stays: `ask --continue` retries it"
    second = _one_unanswered(home)
    assert [i.id for i in list_sessions(home)] == [second], "a new session takes the place of the older failed one"
    answered = ask(home, "This one works.")
    assert {i.id for i in list_sessions(home)} == {answered}
    # prune: the unanswered ones, and with --older-than the idle ones
    old = SessionDir(find_session(home, answered).path)
    old.update_meta(last_active=1.0)
    os.utime(old.journal_path, (1.0, 1.0))  # a month and more idle
    dry = run("sessions", "prune", "--older-than", "30", "--dry-run").stdout
    assert answered in dry and "1 session(s) would be deleted (dry run)" in dry
    assert run("sessions", "prune").stdout == "nothing to prune\n"
    assert "deleted 1 session(s)" in run("sessions", "prune", "--older-than", "30", "--yes").stdout
    assert list_sessions(home) == []


async def test_the_picker_filters_a_thousand_sessions_and_opens_the_chosen_one():
    rows = [
        PickerRow(f"20261101-{i:06d}-aaaaaa", f"talk {i}", "mock" if i % 2 else "openai:http://h:8080", f"/w/{i % 7}", 1e9 - i, i)
        for i in range(1000)
    ]
    app = SessionPicker(rows, clock=lambda: 1e9)
    async with app.run_test(size=(100, 30)) as pilot:
        assert "1,000 of 1,000 sessions" in str(app.query_one("#count").render())
        await pilot.press(*"talk 99 /w/3")
        expected = [r for r in rows if "99" in r.title and r.workspace == "/w/3"]
        assert app.shown == expected and len(expected) > 1
        await pilot.press("down", "enter")
    assert app.return_value == expected[1].id


def test_the_picker_cancels_with_escape_and_lists_real_sessions(home):
    sid = ask(home, "Hello.")
    rows = picker_rows(home)
    assert [(r.id, r.model, r.workspace) for r in rows] == [(sid, "mock", str(home.parent / "ws"))]
    app = SessionPicker(rows)

    async def escape() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.press("escape")

    asyncio.run(escape())
    assert app.return_value is None


def test_resume_alone_in_ask_is_a_clear_error(home):
    out = run("--resume=", "ask", "--model", "mock", "Hello?", ok=False)
    assert out.exit_code == 2 and "--resume needs a session id here" in out.output


@pytest.mark.parametrize("args", [["--help"], ["ask", "--help"]])
def test_help_lists_every_model_spec(args):
    out = " ".join(run(*args).stdout.split())
    for spec in ("mock:SCRIPT.jsonl", "ollama:NAME", "openai:URL#MODEL", "embedded:FILE.gguf"):
        assert spec in out
