"""The server's /tokenize under hostile input (issue 27, item 7): slow, 500s, wrong counts are
counted like cl100k, and the event loop waits at most LOOP_DEADLINE once (`models/tokenizer.py`).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tailrent_tui.core.tokens import get_counter
from tailrent_tui.models.tokenizer import LOOP_DEADLINE, ServerTokenizer

# -- the server's /tokenize --------------------------------------------------------------------


class HostileTokenize:
    """A /tokenize that is slow, fails, or counts wrong."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.calls = 0
        self.release = threading.Event()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                """Quiet."""

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                fake.calls += 1
                if fake.mode == "slow":
                    fake.release.wait(10)
                if fake.mode == "500":
                    payload, status = {"error": {"message": "boom"}}, 500
                elif fake.mode == "wrong":
                    payload, status = {"tokens": list(range(100_000))}, 200
                else:
                    payload, status = {"tokens": [1] * len(body.get("content", "").split())}, 200
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.fault("server /tokenize")
@pytest.mark.parametrize("mode", ["slow", "500", "wrong"])
async def test_a_hostile_tokenize_costs_the_event_loop_one_short_wait_at_most(mode):
    server = HostileTokenize(mode)
    tokenizer = ServerTokenizer(server.url)
    cl100k = get_counter("cl100k")
    texts = [f"message number {i} about the refresh token" for i in range(6)]
    try:
        started = time.monotonic()
        counts = [tokenizer.count(t) for t in texts]  # on the event loop's thread, as the app counts
        spent = time.monotonic() - started
        assert counts == [cl100k.count(t) for t in texts], "counted like cl100k"
        assert spent < LOOP_DEADLINE + 1.5, f"the loop waited {spent:.1f} s"
        assert server.calls <= 2, "the server is not asked again for every text"
    finally:
        tokenizer.close()
        server.stop()


async def test_a_late_answer_is_kept_for_the_next_count():
    server = HostileTokenize("slow")
    tokenizer = ServerTokenizer(server.url)
    try:
        text = "one two three"
        assert tokenizer.count(text) == get_counter("cl100k").count(text)
        server.mode = "ok"
        server.release.set()
        for _ in range(100):
            if text in tokenizer._cache:
                break
            await asyncio.sleep(0.02)
        assert tokenizer.count(text) == 3, "the server's own count, once it came"
    finally:
        tokenizer.close()
        server.stop()
