"""`--continue` / `--resume` reopen with the session's model and workspace unless told
otherwise, and say so when they differ (issue 26, item 5): through `tailrent ask`, a real
OpenAI-compatible server on loopback, real folders."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from tailrent_tui.cli import cli
from tailrent_tui.store.sessions import find_session
from tests.agent.test_text_protocol import Scripted, server, ws  # noqa: F401 (fixtures)


def _ask(*args: str) -> Any:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


def test_continue_from_another_folder_reopens_the_sessions_model_and_workspace(ws, server, tmp_path, monkeypatch):
    first = json.loads(_ask("--workspace", str(ws), "ask", "--model", f"openai:{server.url}", "--json", "One.").stdout)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    sent = len(server.bodies)
    again = _ask("ask", "--continue", "--json", "Two.")
    assert json.loads(again.stdout)["session"] == first["session"]
    assert len(server.bodies) == sent + 1, "the session's own server answered, not the embedded engine"
    assert f"working in {ws}, where this session began (you are in {elsewhere})" in again.stderr


def test_a_model_or_workspace_given_wins_and_the_difference_is_said(ws, server, tmp_path, monkeypatch):
    _ask("--workspace", str(ws), "ask", "--model", f"openai:{server.url}", "One.")
    other = tmp_path / "other"
    other.mkdir()
    again = _ask("--workspace", str(other), "ask", "--continue", "--model", "mock", "Two.")
    assert f"this session ran on openai:{server.url}; now on mock (--model)" in again.stderr
    assert f"this session began in {ws}; working in {other} (--workspace)" in again.stderr
    # the next resume reopens what this one used
    third = _ask("--workspace", str(other), "ask", "--continue", "--json", "Three.")
    assert "this session ran on" not in third.stderr and "began in" not in third.stderr
    assert find_session(Path(str(ws.parent / "data")), json.loads(third.stdout)["session"]).read_meta().model_spec == "mock"


def test_a_workspace_deleted_since_is_said_and_the_session_goes_on_here(ws, server, tmp_path, monkeypatch):
    _ask("--workspace", str(ws), "ask", "--model", f"openai:{server.url}", "One.")
    shutil.rmtree(ws)
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    again = _ask("ask", "--continue", "Two.")
    assert f"this session began in {ws}, which no longer exists (moved or deleted): working in {here}" in again.stderr
