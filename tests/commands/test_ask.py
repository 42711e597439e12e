"""`tailrent ask`: one headless turn through the agent, recorded in a session.

Through click's CliRunner for most cases and once as a real subprocess. The
data dir is a tmp dir (TAILRENT_HOME); what was recorded is read back from
disk (`tailrent sessions --json` and the journal), not from the command's
own output.
"""

from __future__ import annotations

import json
import os
import pty
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from tailrent_tui.cli import cli
from tailrent_tui.core.messages import MessageAdded
from tailrent_tui.store.sessions import SessionDir, find_session, session_dirs
from tests.support.fake_ollama import Reply, fake_ollama  # noqa: F401


@pytest.fixture
def home(tmp_path: Path, monkeypatch) -> Path:
    """An isolated tailrent: data in tmp, no user config, no model server in the environment."""
    data = tmp_path / "data"
    monkeypatch.setenv("TAILRENT_HOME", str(data))
    monkeypatch.setenv("TAILRENT_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("TAILRENT_FSYNC", "false")
    for var in ("TAILRENT_MODEL", "TAILRENT_WINDOW", "TAILRENT_POLICY", "TAILRENT_YOLO", "OLLAMA_HOST"):
        monkeypatch.delenv(var, raising=False)
    (tmp_path / "ws").mkdir()
    return data


@pytest.fixture
def ws(home: Path) -> Path:
    return home.parent / "ws"


def run(*args: str, ws: Path):
    result = CliRunner().invoke(cli, ["--workspace", str(ws), *args], catch_exceptions=False)
    return result


def sessions(ws: Path) -> list[dict]:
    result = run("sessions", "--json", ws=ws)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def journal_messages(home: Path, session_id: str) -> list:
    sd = find_session(home, session_id)
    return [e.message for e in sd.events() if isinstance(e, MessageAdded)]


def test_ask_prints_the_reply_and_starts_a_new_session_each_time(home, ws):
    first = run("ask", "--model", "mock", "Where do refresh tokens live?", ws=ws)
    assert first.exit_code == 0, first.output
    (listed,) = sessions(ws)
    msgs = journal_messages(home, listed["id"])
    assert next((m.role, m.content) for m in msgs) == ("user", "Where do refresh tokens live?")
    assert msgs[1].role == "assistant"
    assert first.stdout.strip() == msgs[1].content.strip()
    assert listed["messages"] == 2

    second = run("ask", "--model", "mock", "And their TTL?", ws=ws)
    assert second.exit_code == 0, second.output
    listing = sessions(ws)
    assert len(listing) == 2
    assert sorted(s["messages"] for s in listing) == [2, 2]


def test_ask_continue_appends_to_the_last_session(home, ws):
    assert run("ask", "--model", "mock", "First question.", ws=ws).exit_code == 0
    result = run("ask", "--model", "mock", "--continue", "Second question.", ws=ws)
    assert result.exit_code == 0, result.output
    (listed,) = sessions(ws)
    assert listed["messages"] == 4
    users = [m.content for m in journal_messages(home, listed["id"]) if m.role == "user"]
    assert users == ["First question.", "Second question."]


def test_ask_continue_via_the_group_flag(home, ws):
    assert run("ask", "--model", "mock", "One.", ws=ws).exit_code == 0
    result = CliRunner().invoke(cli, ["--workspace", str(ws), "--continue", "ask", "--model", "mock", "Two."])
    assert result.exit_code == 0, result.output
    (listed,) = sessions(ws)
    assert listed["messages"] == 4


def test_ask_continue_without_a_session_is_a_clear_error(home, ws):
    result = run("ask", "--model", "mock", "--continue", "Anyone?", ws=ws)
    assert result.exit_code == 1
    assert "no session to continue" in result.stderr


def lock_holder(sd: SessionDir) -> int | None:
    """The pid a session's lock file names (None: no file, empty, or half written)."""
    try:
        return json.loads(sd.lock_path.read_text())["pid"]
    except (OSError, ValueError, KeyError):
        return None


def killed_app_session(home: Path, ws: Path) -> SessionDir:
    """Start the real app (`tailrent`, on a pty), SIGKILL it once it holds its new session's lock: the blank session it leaves."""
    before = {d.id for d in session_dirs(home)}
    master, child_tty = pty.openpty()
    app = subprocess.Popen(
        [sys.executable, "-m", "tailrent_tui", "--workspace", str(ws), "--model", "mock"],
        stdin=child_tty,
        stdout=child_tty,
        stderr=child_tty,
        close_fds=True,
    )
    os.close(child_tty)
    try:
        deadline = time.monotonic() + 120  # the app's imports take 14 s on a loaded machine
        while time.monotonic() < deadline and app.poll() is None:
            new = [d for d in session_dirs(home) if d.id not in before]
            if new and lock_holder(new[0]) == app.pid:
                break
            time.sleep(0.05)
        else:
            pytest.fail(f"the app took no session lock (exit code {app.poll()})")
    finally:
        app.send_signal(signal.SIGKILL)
        app.wait(timeout=30)
        os.close(master)
    assert app.returncode == -signal.SIGKILL
    return new[0]


def test_continue_passes_over_a_blank_session_left_by_a_killed_app(home, ws):
    assert run("ask", "--model", "mock", "Where do refresh tokens live?", ws=ws).exit_code == 0
    (real,) = sessions(ws)
    blank = killed_app_session(home, ws)
    # the killed app's session is the newest, holds no message, and still names its dead holder
    assert blank.read_meta().last_active > find_session(home, real["id"]).read_meta().last_active
    assert not [e for e in blank.events() if isinstance(e, MessageAdded)]
    dead = lock_holder(blank)
    assert dead is not None

    result = run("ask", "--model", "mock", "--continue", "And their TTL?", ws=ws)
    assert result.exit_code == 0, result.output
    users = [m.content for m in journal_messages(home, real["id"]) if m.role == "user"]
    assert users == ["Where do refresh tokens live?", "And their TTL?"]
    # said nothing about it, and left it as it was (not opened: its stale lock is not taken over)
    assert blank.id not in result.stdout + result.stderr and "took over" not in result.stderr
    assert not [e for e in blank.events() if isinstance(e, MessageAdded)]
    assert lock_holder(blank) == dead


def test_ask_json_has_session_reply_usage_and_rent(home, ws):
    result = run("ask", "--model", "mock", "--json", "What is the TTL?", ws=ws)
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert {"session", "reply", "usage", "rent"} <= out.keys()
    (listed,) = sessions(ws)
    assert out["session"] == listed["id"]
    msgs = journal_messages(home, out["session"])
    assert out["reply"] == msgs[-1].content
    (usage,) = out["usage"]
    assert usage["prompt_tokens"] > 0
    assert usage["cached_tokens"] + usage["evaluated_tokens"] == usage["prompt_tokens"]
    assert usage["output_tokens"] > 0 and usage["done_reason"] == "stop"
    rent = out["rent"]
    assert rent["context_tokens"] > 0
    assert rent["predicted_cached"] + rent["predicted_evaluated"] == rent["context_tokens"]
    assert isinstance(rent["predicted_usd"], float)
    assert rent["price_sheet"] == "local"
    assert out.get("error") is None

    again = json.loads(run("ask", "--model", "mock", "--json", "--continue", "Why?", ws=ws).stdout)
    assert again["session"] == out["session"]
    # resumed within the cache TTL, the rent model predicts a cached prefix (the mock's own
    # cache lives in its process, so what it measures here starts from zero again)
    assert again["rent"]["predicted_cached"] > 0


def test_ask_denies_writing_tools_without_yolo(home, ws, tmp_path):
    script = tmp_path / "script.jsonl"
    script.write_text(
        json.dumps({"tool_calls": [{"name": "write_file", "arguments": {"path": "x.txt", "content": "x"}}]})
        + "\n"
        + json.dumps({"text": "Could not write."})
        + "\n"
    )
    result = run("ask", "--model", f"mock:{script}", "Write x.txt.", ws=ws)
    assert result.exit_code == 0, result.output
    assert not (ws / "x.txt").exists()
    assert "denied write_file" in result.stderr and "--yolo" in result.stderr
    assert result.stdout.strip() == "Could not write."

    yolo = CliRunner().invoke(cli, ["--workspace", str(ws), "--yolo", "ask", "--model", f"mock:{script}", "Write x.txt."])
    assert yolo.exit_code == 0, yolo.output
    assert (ws / "x.txt").read_text() == "x"


def test_ask_rejects_an_empty_prompt_and_a_bad_model_spec(home, ws):
    empty = run("ask", "--model", "mock", "  ", ws=ws)
    assert empty.exit_code == 2 and "empty" in empty.stderr
    bad = run("ask", "--model", "llamafile:x", "Hi", ws=ws)
    assert bad.exit_code == 1 and "llamafile" in bad.stderr
    assert sessions(ws) == []


@pytest.mark.parametrize("as_json", [False, True])
def test_ask_fault_exits_1_with_message_and_hint_and_keeps_the_message(home, ws, fake_ollama, monkeypatch, as_json):
    monkeypatch.setenv("OLLAMA_HOST", fake_ollama.url)
    fake_ollama.push(Reply(fault="status", status=500, error="llama runner process has terminated"))
    args = ["ask", "--model", "ollama:llama3.2:latest", *(["--json"] if as_json else []), "What is the TTL?"]
    result = run(*args, ws=ws)
    assert result.exit_code == 1
    assert "llama runner process has terminated" in result.stderr
    assert "hint:" in result.stderr
    (listed,) = sessions(ws)
    assert listed["id"] in result.stderr
    msgs = journal_messages(home, listed["id"])
    assert [(m.role, m.content) for m in msgs] == [("user", "What is the TTL?")]
    if as_json:
        out = json.loads(result.stdout)
        assert out["reply"] is None
        assert "terminated" in out["error"]["message"] and out["error"]["hint"]

    retry = run("ask", "--model", "ollama:llama3.2:latest", "--continue", "Again: what is the TTL?", ws=ws)
    assert retry.exit_code == 0, retry.output
    assert retry.stdout.strip() == Reply().content
    (listed,) = sessions(ws)
    users = [m.content for m in journal_messages(home, listed["id"]) if m.role == "user"]
    assert users == ["What is the TTL?", "Again: what is the TTL?"]


def test_ask_connection_refused_names_the_server(home, ws, monkeypatch):
    import socket

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    monkeypatch.setenv("OLLAMA_HOST", f"127.0.0.1:{port}")
    result = run("ask", "--model", "ollama:llama3.2:latest", "Hello?", ws=ws)
    assert result.exit_code == 1
    assert f"127.0.0.1:{port}" in result.stderr and "hint:" in result.stderr
    (listed,) = sessions(ws)
    assert [m.content for m in journal_messages(home, listed["id"])] == ["Hello?"]


def test_ask_as_a_real_process(home, ws):
    env = {**os.environ, "TAILRENT_HOME": str(home)}
    base = [sys.executable, "-m", "tailrent_tui", "--workspace", str(ws), "ask", "--model", "mock"]
    proc = subprocess.run(
        [*base, "--json", "Where do refresh tokens live?"], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    sd = find_session(home, out["session"])
    assert sd.journal_path.is_file()
    msgs = journal_messages(home, out["session"])
    assert [m.role for m in msgs] == ["user", "assistant"] and msgs[1].content == out["reply"]
    # the process released the session: a second process can continue it
    plain = subprocess.run([*base, "--continue", "And the TTL?"], capture_output=True, text=True, env=env, timeout=120)
    assert plain.returncode == 0, plain.stderr
    msgs = journal_messages(home, out["session"])
    assert len(msgs) == 4 and plain.stdout.strip() == msgs[-1].content.strip()


def test_with_no_model_asked_ollama_is_used_when_it_answers(fake_ollama, monkeypatch, tmp_path):
    from tailrent_tui.models.factory import open_model
    from tailrent_tui.models.mock import MockModel
    from tailrent_tui.models.ollama import OllamaModel

    monkeypatch.setenv("OLLAMA_HOST", fake_ollama.url)
    model, notice = open_model(None)
    assert isinstance(model, OllamaModel) and model.name and notice is None

    monkeypatch.setenv("OLLAMA_HOST", "http://127.0.0.1:9")  # the discard port: nothing listens
    # without the embedded engine (tests/models/test_embedded.py has the case with it)
    monkeypatch.setattr("tailrent_tui.models.factory.engine_installed", lambda: False)
    model, notice = open_model(None)
    assert isinstance(model, MockModel)
    assert "No model server answered at http://127.0.0.1:9" in notice and "--model" in notice


def test_a_new_session_is_named_after_its_first_message(tmp_path, monkeypatch):
    monkeypatch.setenv("TAILRENT_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("TAILRENT_CONFIG_DIR", str(tmp_path / "config"))
    runner = CliRunner()
    first = "Where should refresh tokens live, and for how long? We need to decide today, " + "x" * 40
    assert runner.invoke(cli, ["--model", "mock", "ask", first]).exit_code == 0
    assert runner.invoke(cli, ["--model", "mock", "ask", "--continue", "and the queue?"]).exit_code == 0
    listed = json.loads(runner.invoke(cli, ["sessions", "--json"]).output)
    assert len(listed) == 1
    title = listed[0]["title"]
    assert title.startswith("Where should refresh tokens live") and title.endswith("…") and len(title) == 61


def test_ask_at_a_small_window_with_the_apps_system_prompt_never_refuses_a_turn(home, ws, monkeypatch):
    """20 turns at 2,048 with the app's ~1,300-token head, each stating a new value: every fold of the
    ladder made a ledger message of its own and the ledger, pinned, crowded out the request (refused
    at turn 17 with the pins' budget raised). Now the ledger folds itself when the pins alone crowd
    the request, whatever the budget."""
    from tailrent_tui.core.session import replay
    from tests.support.filler import words

    monkeypatch.setenv("TAILRENT_WINDOW", "2048")
    monkeypatch.setenv("TAILRENT_PIN_SHARE", "0.9")  # a generous budget: the last rung, not the budget, must fit it
    sid = None
    for i in range(20):
        body = words(i, 300)
        args = ["ask", "--model", "mock", "--json", *(["--continue"] if i else []), f"the build uses port {8000 + i}. {body}"]
        result = run(*args, ws=ws)
        assert result.exit_code == 0, f"turn {i}: {result.output}"
        sid = json.loads(result.stdout)["session"]
    s = replay(list(find_session(home, sid).events()), window=2048)
    assert s.folds and max(f.depth for f in s.folds) == 1
    assert all(u.prompt_tokens is None or u.prompt_tokens <= 2048 for u in s.usage)
