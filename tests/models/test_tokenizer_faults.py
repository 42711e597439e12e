"""The new features under hostile input (issue 27, item 7): the tokenizer cache in ~/.cache/tailrent,
the server's /tokenize, and keep-warm pings.

- The cache: corrupt (duplicate ranks make tiktoken panic), a FIFO, unwritable, a symlink: never
  a panic, never a hang; the counter is rebuilt.
- /tokenize: slow, 500s, wrong counts: counted like cl100k, and the event loop waits at most
  LOOP_DEADLINE once.
- Keep-warm: a ping that never returns is abandoned at ping_deadline; a ping in flight when the
  user sends is cancelled, and the turn goes first.
"""

from __future__ import annotations

import asyncio
import json
import marshal
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tailrent_tui.agent.loop import TurnCallbacks
from tailrent_tui.core.tokens import get_counter
from tailrent_tui.models.tokenizer import LOOP_DEADLINE, ServerTokenizer

COUNT = "from tailrent_tui.core.tokens import get_counter; print(get_counter('cl100k').count('hello world'))"


def _count_in_child(cache: Path, timeout: float = 60) -> subprocess.CompletedProcess:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    return subprocess.run([sys.executable, "-c", COUNT], capture_output=True, text=True, env=env, timeout=timeout, check=False)


@pytest.fixture(scope="module")
def warm_cache(tmp_path_factory) -> Path:
    cache = tmp_path_factory.mktemp("cache")
    assert _count_in_child(cache).stdout.strip() == "2"
    (made,) = (cache / "tailrent").glob("*.marshal")
    return made


def _fresh(warm_cache: Path, tmp_path: Path) -> Path:
    target = tmp_path / "tailrent" / warm_cache.name
    target.parent.mkdir()
    target.write_bytes(warm_cache.read_bytes())
    return target


@pytest.mark.fault("tokenizer cache")
def test_a_cache_with_duplicate_ranks_is_rebuilt_not_a_panic(warm_cache, tmp_path):
    target = _fresh(warm_cache, tmp_path)
    params = marshal.loads(target.read_bytes())
    ranks = params["mergeable_ranks"]
    first, second = list(ranks)[:2]
    ranks[second] = ranks[first]  # one flipped bit in a rank: tiktoken's BPE panics on the duplicate
    target.write_bytes(marshal.dumps(params))
    done = _count_in_child(tmp_path)
    assert done.returncode == 0 and done.stdout.strip() == "2", done.stderr[-300:]
    assert marshal.loads(target.read_bytes())["mergeable_ranks"][second] != ranks[first], "rebuilt"


@pytest.mark.fault("tokenizer cache")
@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty"])
def test_a_damaged_cache_is_rebuilt(warm_cache, tmp_path, damage):
    target = _fresh(warm_cache, tmp_path)
    data = target.read_bytes()
    target.write_bytes({"truncated": data[: len(data) // 2], "garbage": os.urandom(4096), "empty": b""}[damage])
    done = _count_in_child(tmp_path)
    assert done.returncode == 0 and done.stdout.strip() == "2", done.stderr[-300:]


@pytest.mark.fault("tokenizer cache")
def test_a_fifo_in_place_of_the_cache_never_hangs(warm_cache, tmp_path):
    target = tmp_path / "tailrent" / warm_cache.name
    target.parent.mkdir()
    os.mkfifo(target)
    done = _count_in_child(tmp_path, timeout=30)  # before: blocked on open() for ever
    assert done.returncode == 0 and done.stdout.strip() == "2", done.stderr[-300:]


@pytest.mark.fault("tokenizer cache")
def test_an_unwritable_or_symlinked_cache_dir_still_counts(warm_cache, tmp_path):
    ro = tmp_path / "ro"
    (ro / "tailrent").mkdir(parents=True)
    (ro / "tailrent").chmod(0o500)
    try:
        done = _count_in_child(ro)
        assert done.returncode == 0 and done.stdout.strip() == "2", done.stderr[-300:]
    finally:
        (ro / "tailrent").chmod(0o700)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "ln").mkdir()
    (tmp_path / "ln" / "tailrent").symlink_to(elsewhere)
    done = _count_in_child(tmp_path / "ln")
    assert done.returncode == 0 and done.stdout.strip() == "2", done.stderr[-300:]


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


# -- keep-warm pings ----------------------------------------------------------------------------


def _priced(make_agent, **caps: Any):
    from tailrent_tui.settings import config_dir
    from tests.support.ui_helpers import FixedClock
    from tests.ui.test_rent import PRICED

    config_dir().mkdir(parents=True, exist_ok=True)
    (config_dir() / "prices.toml").write_text(PRICED, encoding="utf-8")
    agent = make_agent(["hello back", "second reply"], price_sheet="priced-test", caps=caps)
    agent.session.clock = FixedClock()
    return agent


@pytest.mark.fault("keep-warm pings")
async def test_a_ping_that_never_returns_is_abandoned_at_its_deadline(make_agent):
    agent = _priced(make_agent, ping_deadline=0.3)
    await agent.turn("hello", TurnCallbacks())
    real = agent.model.stream

    async def hangs(*args, **kwargs):
        await asyncio.Event().wait()
        yield  # an async generator, as stream is

    agent.model.stream = hangs
    agent.session.clock.now += 280
    started = time.monotonic()
    assert await asyncio.wait_for(agent.turns.ping(agent.session.clock()), 10) is False
    assert time.monotonic() - started < 5
    notes = [n.text for n in agent.session.notes if "keep-warm ping failed" in n.text]
    assert len(notes) == 1 and "ping_deadline" in notes[0]
    agent.model.stream = real


@pytest.mark.fault("keep-warm pings")
@pytest.mark.parametrize("fault", ["down", "erroring"])
async def test_a_ping_to_a_server_down_or_erroring_is_said_once(make_agent, fault):
    from tailrent_tui.models.errors import ModelError

    agent = _priced(make_agent)
    await agent.turn("hello", TurnCallbacks())

    async def fails(*args, **kwargs):
        raise ModelError("connection refused" if fault == "down" else "HTTP 500: boom")
        yield

    agent.model.stream = fails
    agent.session.clock.now += 280
    for _ in range(3):
        assert await agent.turns.ping(agent.session.clock()) is False
        agent.session.clock.now += 1
    assert len([n for n in agent.session.notes if "keep-warm ping failed" in n.text]) == 1


@pytest.mark.fault("keep-warm pings")
async def test_a_ping_in_flight_when_the_user_sends_is_cancelled_and_the_turn_goes_first(make_agent):
    agent = _priced(make_agent)
    await agent.turn("hello", TurnCallbacks())
    real = agent.model.stream
    started = asyncio.Event()

    def stream(messages, *args, **kwargs):
        if kwargs.get("options", {}).get("max_tokens") == 1:
            return slow_ping()
        return real(messages, *args, **kwargs)

    async def slow_ping():
        started.set()
        await asyncio.sleep(30)
        yield

    agent.model.stream = stream
    agent.session.clock.now += 280
    ping = asyncio.create_task(agent.turns.ping(agent.session.clock()))
    await asyncio.wait_for(started.wait(), 5)
    t0 = time.monotonic()
    result = await asyncio.wait_for(agent.turn("are you there?", TurnCallbacks()), 10)
    assert result.reply is not None and result.reply.content == "second reply"
    assert time.monotonic() - t0 < 5
    with pytest.raises(asyncio.CancelledError):
        await ping
