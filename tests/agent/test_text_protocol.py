"""A model that cannot call tools through `openai:URL` (issue 26, item 2): one clear warning,
then a text protocol (`!cmd` lines, `@read`, fenced write/edit blocks) parsed into the same
tool calls, approvals and rungs. The parser alone, then `tailrent ask` against a scripted
OpenAI-compatible server over real HTTP whose template drops the tools."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tailrent_tui.agent.text_protocol import PROTOCOL_NOTE, parse_actions
from tailrent_tui.cli import cli


def test_commands_reads_writes_and_edits_become_tool_calls_in_order():
    reply = "\n".join(
        [
            "First the listing.",
            "!ls -la src",
            "@read src/app.py",
            "```write notes/todo.md",
            "# todo",
            "- ship it",
            "```",
            "```edit src/app.py",
            "<<<<<<< OLD",
            "PORT = 80",
            "=======",
            "PORT = 8443",
            ">>>>>>> NEW",
            "```",
        ]
    )
    calls = parse_actions(reply)
    assert [(c.name, c.arguments) for c in calls] == [
        ("run_shell", {"command": "ls -la src"}),
        ("read_file", {"path": "src/app.py"}),
        ("write_file", {"path": "notes/todo.md", "content": "# todo\n- ship it\n"}),
        ("edit_file", {"path": "src/app.py", "old": "PORT = 80", "new": "PORT = 8443"}),
    ]
    assert len({c.id for c in calls}) == 4 and not any(c.arguments_error for c in calls)


def test_lines_inside_an_ordinary_code_block_are_not_actions():
    reply = "Run this yourself:\n```bash\n!rm -rf build\n@read secrets.txt\n```\nThat is all. != is not a command."
    assert parse_actions(reply) == []


@pytest.mark.parametrize(
    ("reply", "said"),
    [
        ("```edit a.py\nold\nnew\n```", "needs the lines <<<<<<< OLD, ======= and >>>>>>> NEW"),
        ("```edit a.py\n=======\n<<<<<<< OLD\nx\n>>>>>>> NEW\n```", "markers out of order"),
        ("```edit a.py\n<<<<<<< OLD\n=======\nnew\n>>>>>>> NEW\n```", "has no old text"),
        ("```write\nhello\n```", "names no file"),
        ("```write a.txt\nhello, and the reply ends here", "is not closed"),
        ("@read", "@read needs a path"),
    ],
)
def test_a_malformed_block_is_a_call_that_answers_the_model_with_what_is_wrong(reply, said):
    calls = parse_actions(reply)
    assert len(calls) == 1 and calls[0].arguments_error is not None and said in calls[0].arguments_error


# -- a scripted server whose chat template drops the tools ------------------------------------


class Scripted:
    def __init__(self, replies: list[str]) -> None:
        self.replies = list(replies)
        self.bodies: list[dict[str, Any]] = []
        self.url = ""

    def sse(self) -> bytes:
        text = self.replies.pop(0) if self.replies else "Done."
        lines = [
            {"choices": [{"delta": {"content": text}}], "model": "tiny.gguf"},
            {"choices": [{"delta": {}, "finish_reason": "stop"}], "model": "tiny.gguf"},
            # a prompt far smaller than the tool schema sent: the template left the tools out
            {"choices": [], "usage": {"prompt_tokens": 30, "completion_tokens": 5}},
        ]
        return b"".join(b"data: " + json.dumps(x).encode() + b"\n\n" for x in lines) + b"data: [DONE]\n\n"


@pytest.fixture
def server() -> Iterator[Scripted]:
    state = Scripted([])

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            data = json.dumps({"data": [{"id": "tiny.gguf", "meta": {"n_ctx": 8192}}]}).encode()
            if not self.path.startswith("/v1/models"):
                self.send_response(404)
                data = b'{"error": {"code": 404, "message": "File Not Found"}}'
            else:
                self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            size = int(self.headers.get("content-length") or 0)
            body = json.loads(self.rfile.read(size)) if size else None
            if self.path != "/v1/chat/completions":
                data = b'{"error": {"code": 404, "message": "File Not Found"}}'
                self.send_response(404)
                self.send_header("content-type", "application/json")
            else:
                state.bodies.append(body)
                data = state.sse()
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    yield state
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def ws(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.setenv("TAILRENT_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("TAILRENT_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("TAILRENT_FSYNC", "false")
    monkeypatch.setenv("TAILRENT_TOKENIZER", "cl100k")
    for var in ("TAILRENT_MODEL", "TAILRENT_WINDOW", "TAILRENT_POLICY", "TAILRENT_YOLO", "OLLAMA_HOST"):
        monkeypatch.delenv(var, raising=False)
    root = tmp_path / "ws"
    root.mkdir()
    (root / "notes.txt").write_text("the deploy key lives in vault at secret/deploy\n", encoding="utf-8")
    return root


def _ask(ws: Path, server: Scripted, *args: str, yolo: bool = True) -> Any:
    flags = ["--yolo"] if yolo else []
    return CliRunner().invoke(
        cli, ["--workspace", str(ws), *flags, "ask", "--model", f"openai:{server.url}", *args], catch_exceptions=False
    )


def _sent(body: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content")) for m in body["messages"])


def test_a_model_without_tool_calls_is_warned_once_and_acts_through_text(ws, server):
    server.replies = [
        "Let me look first.\n@read notes.txt",
        "```write summary.md\nThe deploy key is in vault.\n```",
        "Written summary.md.",
    ]
    out = _ask(ws, server, "Read notes.txt and write summary.md")
    assert out.exit_code == 0, out.output
    warned = [line for line in out.stderr.splitlines() if "cannot call tools through this server" in line]
    assert len(warned) == 1, out.stderr
    assert (ws / "summary.md").read_text(encoding="utf-8") == "The deploy key is in vault.\n"
    assert len(server.bodies) == 3
    # the file's real content reached the model as a tool result, with the protocol told
    assert "[tool result: read_file]" in _sent(server.bodies[1]) and "secret/deploy" in _sent(server.bodies[1])
    assert PROTOCOL_NOTE in _sent(server.bodies[1])
    assert "[tool result: write_file]" in _sent(server.bodies[2])

    again = _ask(ws, server, "--continue", "Thanks.")
    assert again.exit_code == 0 and "cannot call tools" not in again.stderr, "said once per session"
    assert _sent(server.bodies[-1]).count(PROTOCOL_NOTE) == 1


def test_an_action_needing_approval_is_denied_without_one_and_a_malformed_block_answers_the_model(ws, server):
    server.replies = [
        "@read notes.txt",
        "```edit notes.txt\nvault -> kms\n```\n!rm notes.txt",
        "Sorry.",
    ]
    out = _ask(ws, server, "Tidy notes.txt", yolo=False)
    assert out.exit_code == 0, out.output
    assert "[denied run_shell" in out.stderr
    assert (ws / "notes.txt").exists()
    answered = _sent(server.bodies[2])
    assert "needs the lines <<<<<<< OLD, ======= and >>>>>>> NEW" in answered


def test_the_protocols_note_known_before_the_first_request_goes_before_the_users_message(ws, server):
    """Seen with SmolLM2 on llama.cpp: the note entered after the first message, so the request ended
    on the note, and the model recited it instead of answering."""
    config = Path(os.environ["TAILRENT_CONFIG_DIR"])
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text('[tools]\nprotocol = "text"\n', encoding="utf-8")
    server.replies = ["It keeps the deploy key's place."]
    out = _ask(ws, server, "What is in notes.txt?")
    assert out.exit_code == 0, out.output
    messages = server.bodies[0]["messages"]
    assert messages[-1] == {"role": "user", "content": "What is in notes.txt?"}
    assert PROTOCOL_NOTE in _sent(server.bodies[0])


def test_the_text_protocols_note_puts_no_statements_in_the_ledger():
    """Seen in tmux on SmolLM2: the pinned protocol note filled the Ledger panel with the app's own rules."""
    from tailrent_tui.agent.text_protocol import PROTOCOL_NOTE
    from tailrent_tui.core.session import Session
    from tailrent_tui.core.tokens import get_counter

    s = Session(counter=get_counter("chars4"), system="sys", window=8192, detect_statements=True)
    s.add("system", PROTOCOL_NOTE, pinned=True, autopin=False)
    assert not s.statements
    s.add("user", "SECURITY RULE: never log tokens.")
    assert len(s.statements) == 1
