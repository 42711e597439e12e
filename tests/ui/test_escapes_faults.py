"""Terminal output is sanitized (issue 27, item 4): control and escape sequences from the model, tools
and files are shown as visible text (`text.visible`) in the app, `ask`, `tool` and `export`, never
acted on by the terminal (OSC 52 writes the user's clipboard; CSI moves the cursor, recolors, hides)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tailrent_tui.text import visible
from tests.support.fake_ollama import Reply, fake_ollama  # noqa: F401
from tests.support.ui_helpers import make_agent as make_ui_agent
from tests.support.ui_helpers import make_app, wait_until

HOSTILE = [
    "\x1b]52;c;cm0gLXJmIH4=\x07",  # OSC 52: set the clipboard
    "\x1b[2J\x1b[H",  # clear the screen, cursor home
    "\x1b]0;pwned title\x1b\\",  # set the window title
    "\x9b31m",  # a C1 CSI
    "line\rover",  # a carriage return that overwrites
    "\u202eevil\u202c",  # a bidirectional override
    "bell\x07",
]
RAW = ("\x1b", "\x9b", "\x07", "\u202e")


def _raw(text: str) -> list[str]:
    return [c for c in RAW if c in text] + (["\\r"] if "\r" in text.replace("\r\n", "") else [])


def _env(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "TAILRENT_HOME": str(tmp_path / "data"),
        "TAILRENT_CONFIG_DIR": str(tmp_path / "config"),
        "TAILRENT_FSYNC": "false",
    }


def _cli(tmp_path: Path, ws: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tailrent_tui", "--workspace", str(ws), *args],
        capture_output=True,
        env=env or _env(tmp_path),
        timeout=120,
        check=False,
        text=True,
        errors="surrogateescape",
    )


def test_visible_shows_every_control_and_keeps_lines_and_tabs():
    assert visible("a\tb\nc\r\nd") == "a\tb\nc\r\nd"
    assert visible("\x1b]52;c;eA==\x07") == "␛]52;c;eA==␇"
    assert visible("x\ry") == "x␍y" and visible("\x9b") == "<U+009B>" and visible("\u202e") == "<U+202E>"


@pytest.mark.fault("terminal escapes")
@pytest.mark.parametrize("as_json", [False, True])
def test_tool_prints_a_files_escapes_as_visible_text(tmp_path, as_json):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "evil.txt").write_text("".join(f"{h} end\n" for h in HOSTILE))
    proc = _cli(tmp_path, ws, "tool", "read_file", json.dumps({"path": "evil.txt"}), *(["--json"] if as_json else []))
    assert proc.returncode == 0, proc.stderr
    assert _raw(proc.stdout) == []
    shown = json.loads(proc.stdout)["content"] if as_json else proc.stdout
    assert "]52;c;" in shown, "the sequence is shown, not dropped"


@pytest.mark.fault("terminal escapes")
@pytest.mark.parametrize("as_json", [False, True])
def test_ask_prints_a_replys_escapes_as_visible_text(tmp_path, fake_ollama, as_json):
    ws = tmp_path / "ws"
    ws.mkdir()
    fake_ollama.push(Reply(content="".join(HOSTILE) + " done"))
    env = {**_env(tmp_path), "OLLAMA_HOST": fake_ollama.url}
    proc = _cli(tmp_path, ws, "ask", "--model", "ollama:llama3.2:latest", *(["--json"] if as_json else []), "hi", env=env)
    assert proc.returncode == 0, proc.stderr
    assert _raw(proc.stdout) == [] and _raw(proc.stderr) == []
    reply = json.loads(proc.stdout)["reply"] if as_json else proc.stdout
    assert "]52;c;" in reply and "done" in reply
    # the journal keeps the reply as the model sent it: what is data is not changed, only how it is shown
    for fmt in ("md", "json"):
        sessions = json.loads(_cli(tmp_path, ws, "sessions", "--json", env=env).stdout)
        exported = _cli(tmp_path, ws, "export", sessions[0]["id"], "--format", fmt, env=env)
        assert exported.returncode == 0, exported.stderr
        assert _raw(exported.stdout) == [], fmt
        assert "]52;c;" in exported.stdout


@pytest.fixture
def ui_config(tmp_path, monkeypatch):
    monkeypatch.setenv("TAILRENT_CONFIG_DIR", str(tmp_path / "config"))


@pytest.mark.fault("terminal escapes")
async def test_the_app_shows_escapes_from_the_model_and_a_tool_as_visible_text(tmp_path, ui_config):
    from textual.widgets import Markdown, Static

    (tmp_path / "evil.txt").write_text("".join(HOSTILE) + " tail\n")
    script = [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "evil.txt"}}]},
        {"text": "".join(HOSTILE) + " reply"},
    ]
    agent = make_ui_agent(tmp_path, script=script)
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press(*"go", "enter")
        await wait_until(
            pilot,
            lambda: any(m.role == "assistant" and "reply" in m.content for m in agent.session.messages),
            rounds=2000,
            what="the reply",
        )
        await pilot.pause()
        shown = [str(s.render()) for s in app.screen.query(Static)]
        shown += [m.source for m in app.screen.query(Markdown)]
        everything = "\n".join(shown)
        assert "]52;c;" in everything and "tail" in everything and "reply" in everything
        assert _raw(everything) == []


@pytest.fixture(scope="module")
def hostile_session(tmp_path_factory):
    """A session whose first message (so its title), a reply and a fold hold every hostile sequence."""
    tmp_path = tmp_path_factory.mktemp("hostile-session")
    ws = tmp_path / "ws"
    ws.mkdir()
    prompt = "note " + " ".join(HOSTILE) + " " + "pad " * 300
    for text in (prompt, prompt):
        args = ["ask", "--model", "mock"] + (["--continue"] if (tmp_path / "data").exists() else []) + [text]
        done = _cli(tmp_path, ws, *args)
        assert done.returncode == 0, done.stderr[-800:]
    (sd,) = (tmp_path / "data" / "sessions").iterdir()
    return tmp_path, ws, sd.name


@pytest.mark.fault("terminal escapes (new cases, round two)")
@pytest.mark.parametrize(
    "command",
    [
        "sessions",
        "sessions --json",
        "sessions prune --dry-run",
        "sessions repair",
        "export md",
        "export json",
        "inspect",
        "recall",
        "ask --continue",
    ],
)
def test_every_command_that_prints_a_sessions_words_shows_escapes_as_text(hostile_session, command):
    tmp_path, ws, sid = hostile_session
    args = {
        "sessions": ["sessions"],
        "sessions --json": ["sessions", "--json"],
        "sessions prune --dry-run": ["sessions", "prune", "--older-than", "0", "--dry-run"],
        "sessions repair": ["sessions", "repair", sid],
        "export md": ["export", sid, "--format", "md"],
        "export json": ["export", sid, "--format", "json"],
        "inspect": ["inspect", sid],
        "recall": ["recall", sid, "what was the note?", "--expect", "note"],
        "ask --continue": ["ask", "--model", "mock", "--continue", "again"],
    }[command]
    done = _cli(tmp_path, ws, *args)
    assert done.returncode in (0, 1) and "Traceback" not in done.stderr, done.stderr[-800:]
    assert _raw(done.stdout) == [] and _raw(done.stderr) == [], (done.stdout[-600:], done.stderr[-600:])
