"""The OpenAI-compatible client against the real llama.cpp engine (xllamacpp + gemma3-270m).

Gemma 3 270M is a base model: these tests never look at its words, only at the
transport, the usage it reports, cancellation, timeouts and its KV cache.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import aclosing

import httpx
import pytest

from tailrent_tui.models import OpenAIModel, ReadTimeout, TextDelta, Usage
from tailrent_tui.models.factory import open_model
from tests.support.engine import N_CTX, serve

pytestmark = pytest.mark.engine

SYSTEM = {"role": "system", "content": "You are a coding assistant. Keep answers short and precise."}


async def collect(model, messages, **kwargs):
    out = []
    async with aclosing(model.stream(messages, **kwargs)) as chunks:
        async for chunk in chunks:
            out.append(chunk)
    return out


async def wait_until_idle(base: str, deadline: float = 20.0) -> bool:
    """Poll llama.cpp's /slots until no slot is generating (or the deadline passes)."""
    end = time.monotonic() + deadline
    async with httpx.AsyncClient() as client:
        while time.monotonic() < end:
            slots = (await client.get(f"{base}/slots")).json()
            if not any(s["is_processing"] for s in slots):
                return True
            await asyncio.sleep(0.02)
    return False


@pytest.fixture(scope="module")
def llama_server() -> Iterator[str]:
    """This module's own server, fresh: its tests assert what a new server's cache holds (nothing
    of a prompt whose first message is new); the suite's shared one (tests/conftest.py) keeps the
    prompts of other modules in its prompt cache."""
    yield from serve()


@pytest.fixture
async def model(llama_server):
    m, _ = open_model(f"openai:{llama_server}")
    await m.resolve_name()
    yield m
    await m.aclose()


async def test_streams_several_chunks_and_reports_usage(model):
    messages = [SYSTEM, {"role": "user", "content": "List three prime numbers."}]
    chunks = await collect(model, messages, options={"max_tokens": 12})
    deltas = [c for c in chunks if isinstance(c, TextDelta)]
    usage = chunks[-1]
    assert len(deltas) > 1
    assert isinstance(usage, Usage) and sum(isinstance(c, Usage) for c in chunks) == 1
    assert usage.cache_reported
    assert usage.prompt_tokens > 0
    assert usage.cached_tokens + usage.evaluated_tokens == usage.prompt_tokens
    assert 0 < usage.output_tokens <= 12
    assert usage.prompt_ms > 0 and usage.generation_ms > 0
    assert usage.done_reason in ("stop", "length")
    if usage.done_reason == "length":
        assert usage.truncated and usage.output_tokens == 12
    assert usage.raw["timings"]["predicted_n"] == usage.output_tokens
    assert usage.first_token_ms is not None and usage.first_token_ms <= usage.wall_ms


async def test_models_endpoint_gives_the_window(model):
    (info,) = await model.list_models()
    assert info.name == model.name
    assert info.context_length == N_CTX
    assert await model.context_window() == N_CTX


async def test_kv_cache_reuse_on_append_and_none_after_a_new_first_message(model):
    first = [SYSTEM, {"role": "user", "content": "Where do refresh tokens live? Answer in one line."}]
    one = (await collect(model, first, options={"max_tokens": 4}))[-1]
    extended = [
        *first,
        {"role": "assistant", "content": "In Redis."},
        {"role": "user", "content": "And what is their TTL, and why?"},
    ]
    two = (await collect(model, extended, options={"max_tokens": 4}))[-1]
    assert two.cached_tokens > 0
    assert two.evaluated_tokens == two.prompt_tokens - two.cached_tokens
    assert two.evaluated_tokens < two.prompt_tokens
    assert two.prompt_tokens > one.prompt_tokens

    new_front = [{"role": "system", "content": "Zebra notes: everything below is about zebras."}, *extended]
    three = (await collect(model, new_front, options={"max_tokens": 4}))[-1]
    assert three.cached_tokens == 0
    assert three.evaluated_tokens == three.prompt_tokens


async def test_cancelling_mid_stream_stops_the_engine(model, llama_server):
    messages = [SYSTEM, {"role": "user", "content": "Write a very long essay about caches."}]
    first = asyncio.Event()

    async def consume():
        # Thousands of tokens: a minute of work unless the hang-up stops it.
        async for chunk in model.stream(messages, options={"max_tokens": 3000}):
            if isinstance(chunk, TextDelta):
                first.set()

    task = asyncio.create_task(consume())
    await first.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await wait_until_idle(llama_server)
    # The engine is free again: the next turn goes through.
    assert isinstance((await collect(model, messages, options={"max_tokens": 2}))[-1], Usage)


async def test_read_timeout_on_a_slow_generation(llama_server):
    # Tokens come every ~10-30 ms on two cores; 2 ms of silence is a stall here.
    # llama.cpp serves its one model under any name; naming it skips /v1/models.
    model = OpenAIModel(llama_server, "gemma3-270m", read_timeout=0.002)
    messages = [SYSTEM, {"role": "user", "content": "Write a very long essay about timeouts."}]
    with pytest.raises(ReadTimeout) as err:
        await collect(model, messages, options={"max_tokens": 3000})
    assert "0.002 s" in err.value.message
    await model.aclose()
    assert await wait_until_idle(llama_server)
