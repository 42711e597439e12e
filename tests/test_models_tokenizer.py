"""Counting as the server counts: the framing in core's totals, llama.cpp's /tokenize and
/apply-template (a fake server on loopback, exact by construction), and what build picks.

The real llama.cpp engine is in test_morning_after.py.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from folds import fold_span

from tailrent_tui.agent.build import framing_probes
from tailrent_tui.agent.lifecycle import open_agent
from tailrent_tui.agent.loop import wire_messages
from tailrent_tui.core.rent import context_items
from tailrent_tui.core.rungs.spill import MemorySpillStore, spill_message
from tailrent_tui.core.session import Session
from tailrent_tui.core.tokens import Framing, get_counter
from tailrent_tui.models.tokenizer import ServerTokenizer, TokenizerUnavailable, measure_framing
from tailrent_tui.settings import Settings
from tailrent_tui.store.sessions import last_active

# markers, words and single punctuation: each a token, so counts add up across boundaries
TOKEN = re.compile(r"<\|[a-z_]+\|>|\w+|[^\w\s]")
BOS = "<|bos|>"


def tokenize(text: str) -> list[str]:
    return TOKEN.findall(text)


def render(messages: list[dict[str, Any]], tools: list[Any] | None) -> str:
    """A ChatML-like template; tools go in a header of their own, as tool-aware templates do."""
    out = "".join(f"<|start|>{m['role']}\n{m['content']}<|end|>\n" for m in messages)
    if tools:
        out = "<|start|>tools\n" + " ".join(t["function"]["name"] for t in tools) + "<|end|>\n" + out
    return out + "<|start|>assistant\n"


class FakeLlama:
    """Just enough of llama.cpp's server: /tokenize, /apply-template; a `broken` one answers 404."""

    def __init__(self, broken: bool = False) -> None:
        self.calls: list[str] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                """Quiet."""

            def _send(self, status: int, payload: Any) -> None:
                body = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                self._send(404, {"error": {"message": "File Not Found"}})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.calls.append(self.path)
                if broken:
                    return self._send(404, {"error": {"message": "File Not Found"}})
                if self.path == "/tokenize":
                    tokens = ([BOS] if body.get("add_special") else []) + tokenize(body["content"])
                    return self._send(200, {"tokens": list(range(len(tokens)))})
                if self.path == "/apply-template":
                    return self._send(200, {"prompt": render(body["messages"], body.get("tools"))})
                self._send(404, {"error": {"message": "File Not Found"}})

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True).start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def prompt_tokens(self, messages: list[dict[str, Any]]) -> int:
        """What this server would measure for a chat request."""
        return 1 + len(tokenize(render(messages, None)))


@pytest.fixture
def llama() -> Iterator[FakeLlama]:
    server = FakeLlama()
    yield server
    server.stop()


# -- core: the framing is counted in, on every path that changes the totals ---------------


def framed_session() -> Session:
    framing = Framing(request=3, system=2, roles={"user": 3, "assistant": 4, "system": 7, "tool": 9})
    return Session(counter=get_counter("chars4"), system="s" * 40, window=100_000, framing=framing, clock=lambda: 0.0)


def sent_total(s: Session) -> int:
    return s.head_tokens + sum(s.sent_tokens(m) for m in s.messages if not m.cut_off)


def test_the_context_counts_each_message_framed_through_pins_spills_folds_and_cut_replies():
    s = framed_session()
    assert s.head_tokens == 10 + 3 + 2
    for i in range(6):
        s.add("user", f"question {i} " * 10)
        s.add("assistant", f"answer {i} " * 10)
    tool = s.add("tool", "line\n" * 400, tool="grep")
    s.add("assistant", "a partial reply", meta={"cancelled": True})
    assert s.context_tokens == sent_total(s)
    s.pin(s.messages[1].id)
    spill_message(s, tool.id, MemorySpillStore())
    fold_span(s, [m.id for m in s.messages[2:6]], summary="the summary of four messages")
    s.unpin(s.messages[1].id)
    assert s.context_tokens == sent_total(s)
    assert s.totals.live + s.totals.pinned + s.totals.summaries + s.totals.pointers == s.totals.transcript
    assert [t for _, t in context_items(s)] == [s.sent_tokens(m) for m in s.messages if not m.cut_off]
    assert s.sent_tokens(s.messages[2]) == s.messages[2].tokens + 7  # the summary travels as a context note


def test_a_session_without_framing_counts_as_before():
    s = Session(counter=get_counter("chars4"), system="sys prompt", clock=lambda: 0.0)
    m = s.add("user", "hello there, how are you")
    assert s.sent_tokens(m) == m.tokens and s.head_tokens == s.system_tokens


# -- models: the server's own counts ----------------------------------------------------


def test_measured_framing_makes_the_session_count_what_the_server_will(llama):
    tokenizer = ServerTokenizer(llama.url)
    try:
        tools = [{"name": "grep", "description": "search", "parameters": {}}]
        framing, schema = measure_framing(tokenizer, framing_probes(), system="You are terse.", tools=tools)
        # <|start|> role \n ... <|end|>: three tokens; a context note adds "[context note]", a tool result its prefix
        assert framing == Framing(request=3, system=3, roles={"user": 3, "assistant": 3, "system": 7, "tool": 9})
        assert schema == 4  # <|start|> tools grep <|end|>
        s = Session(counter=tokenizer, system="You are terse.", framing=framing, clock=lambda: 0.0)
        s.add("user", "Which port? The API listens on 8443, because 443 is taken.")
        s.add("assistant", "It listens on port 8443.")
        s.add("tool", "total 0\ndrwx------ 2 root root", tool="run_shell")
        fold_span(s, [s.messages[0].id], summary="[fold summary] - user asked about port 8443")
        s.add("user", "And the version?")
        assert s.context_tokens == llama.prompt_tokens(wire_messages(s))
    finally:
        tokenizer.close()


def test_counts_are_asked_once_per_text(llama):
    tokenizer = ServerTokenizer(llama.url)
    try:
        assert tokenizer.count("port 8443, because 443 is taken") == 7
        assert tokenizer.count("port 8443, because 443 is taken") == 7
        assert llama.calls.count("/tokenize") == 1
    finally:
        tokenizer.close()


def test_a_server_gone_away_still_lets_messages_be_counted():
    gone = FakeLlama()
    gone.stop()
    tokenizer = ServerTokenizer(gone.url)
    text = "port 8443, because 443 is taken"
    try:
        assert tokenizer.count(text) == get_counter("cl100k").count(text) != len(tokenize(text))
        with pytest.raises(TokenizerUnavailable, match="did not answer"):
            tokenizer.tokens(text)
    finally:
        tokenizer.close()


def test_a_server_that_cannot_count_says_so_in_one_line():
    broken = FakeLlama(broken=True)
    tokenizer = ServerTokenizer(broken.url)
    try:
        with pytest.raises(TokenizerUnavailable, match=r"/apply-template answered 404: File Not Found$"):
            measure_framing(tokenizer, framing_probes())
    finally:
        tokenizer.close()
        broken.stop()


# -- build: auto picks the server's tokenizer, records it, and a resume keeps it ----------------


def settings_for(tmp_path: Path, url: str, **overrides: Any) -> Settings:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    values = {"model": f"openai:{url}", "data_dir": tmp_path / "data", "workspace": ws, "fsync": False}
    return Settings(**{**values, **overrides})


async def test_auto_counts_with_the_server_and_a_resume_counts_the_same_way(tmp_path, llama, monkeypatch):
    monkeypatch.setenv("TAILRENT_CONFIG_DIR", str(tmp_path / "config"))
    async with open_agent(settings_for(tmp_path, llama.url), async_writer=False, new=True) as agent:
        assert isinstance(agent.session.counter, ServerTokenizer)
        expected = llama.prompt_tokens(wire_messages(agent.session)) + agent.session.tool_schema_tokens
        assert agent.session.context_tokens == expected
        agent.session.add("user", "keep this session")  # a session where nothing was sent is not kept
    meta = last_active(tmp_path / "data").read_meta()
    assert meta.tokenizer == "server" and meta.framing.roles == {"user": 3, "assistant": 3, "system": 7, "tool": 9}
    assert meta.tool_schema_tokens > 0  # this template renders the tools

    # resumed with a cl100k setting: the session goes on counting as it did
    cl100k = settings_for(tmp_path, llama.url, tokenizer="cl100k")
    async with open_agent(cl100k, {"continue_": True}, async_writer=False) as agent:
        assert isinstance(agent.session.counter, ServerTokenizer) and agent.session.framing == meta.framing

    # resumed where no server can count: said once, and new text is counted like cl100k
    mock = settings_for(tmp_path, llama.url, model="mock")
    async with open_agent(mock, {"continue_": True}, async_writer=False) as agent:
        assert agent.session.counter is get_counter("cl100k")
        assert any("counted like cl100k" in n.text for n in agent.session.notes)


async def test_a_model_switch_counts_new_text_with_the_new_server(tmp_path, llama, monkeypatch):
    monkeypatch.setenv("TAILRENT_CONFIG_DIR", str(tmp_path / "config"))
    other = FakeLlama()
    try:
        async with open_agent(settings_for(tmp_path, llama.url), async_writer=False, new=True) as agent:
            first = agent.session.counter
            assert isinstance(first, ServerTokenizer)
            await agent.switch_model(f"openai:{other.url}")
            # the new server counts from now on (the old one is not asked again)
            counter = agent.session.counter
            assert isinstance(counter, ServerTokenizer) and counter is not first
            asked = len(other.calls)
            agent.session.add("user", "counted by the server switched to")
            assert len(other.calls) > asked
            # a model that cannot count: said once, and new text is counted like cl100k
            await agent.switch_model("mock")
            assert agent.session.counter is get_counter("cl100k")
            assert [n.text for n in agent.session.notes if "counted like cl100k" in n.text]
    finally:
        other.stop()


async def test_auto_on_a_server_without_tokenize_counts_like_cl100k(tmp_path, monkeypatch):
    monkeypatch.setenv("TAILRENT_CONFIG_DIR", str(tmp_path / "config"))
    broken = FakeLlama(broken=True)
    try:
        async with open_agent(settings_for(tmp_path, broken.url), async_writer=False, new=True) as agent:
            agent.session.add("user", "keep this session")  # a session where nothing was sent is not kept
    finally:
        broken.stop()
    meta = last_active(tmp_path / "data").read_meta()
    assert meta.tokenizer == "cl100k" and meta.framing == Framing()
    assert agent.session.counter is get_counter("cl100k")
