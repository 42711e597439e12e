"""The model server's own token counts: llama.cpp's ``/tokenize`` and ``/apply-template``.

cl100k is not the server model's tokenizer, and a chat template adds its own
tokens around every message: on llama.cpp with gemma3-270m, a cl100k
prediction missed the server's ``prompt_tokens`` by 33% on the median turn of a
chat of short messages (1% counted here: benchmarks/morning_after_bench.py).
llama.cpp renders its template and tokenizes on its HTTP thread, without
evaluating anything (no slot is taken, no KV cache is touched), so the app can
ask it how the server will count.

The calls are synchronous: a message is counted once, when it enters the
session (core is synchronous), and llama.cpp on loopback answers in 1.4 ms
(1.9 ms while it generates; measured with gemma3-270m). Each distinct text is
asked once.

Counted from a thread that runs an event loop (the app, `ask`), the request
runs in a worker thread and is waited for at most `LOOP_DEADLINE`: a slow
server (9 s per text in the review) costs that, once, and the text is counted
like cl100k; the answer, when it comes, is cached for the next count, and the
server is not asked again for `RETRY_AFTER`. A count the server could not mean
(more tokens than the text has bytes, plus a few) is refused the same way.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from collections.abc import Mapping, Sequence
from typing import Any

import httpx
from pydantic import BaseModel, Field, ValidationError

from tailrent_tui.core.tokens import Framing, get_counter

from .base import ToolSpec, WireMessage, wire_tools
from .errors import first_problem
from .http import error_text, retry_after
from .openai import OpenAIModel, openai_messages
from .text import clean_text, redact

TIMEOUT = httpx.Timeout(10.0, connect=2.0)
#: after the server failed to answer, count like cl100k for this long before asking it again,
#: so a server that went away costs one timeout, not one per message
RETRY_AFTER = 30.0
#: the longest a server's own ``Retry-After`` keeps us from asking it again
RETRY_AFTER_MAX = 300.0
#: the longest an event loop's thread waits for one count before it counts like cl100k
LOOP_DEADLINE = 0.5
#: what a template or BOS may add beyond one token per byte of text
_SPECIAL_SLACK = 8
#: the text inside the probe messages that `measure_framing` renders
PROBE = "status report"


class TokenizerUnavailable(RuntimeError):
    """The server cannot count tokens for us (no llama.cpp /tokenize, or it did not answer)."""

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(redact(clean_text(message)))
        self.retry_after = retry_after


class _Tokens(BaseModel):
    """llama.cpp's ``POST /tokenize`` reply (token ids)."""

    tokens: list[int] = Field(min_length=1)


class _Rendered(BaseModel):
    """llama.cpp's ``POST /apply-template`` reply: the prompt its chat template makes."""

    prompt: str


class ServerTokenizer:
    """Counts text with the server's tokenizer, and whole requests as the server will."""

    name = "server"

    def __init__(self, root: str, *, headers: Mapping[str, str] | None = None, timeout: httpx.Timeout | float = TIMEOUT) -> None:
        self.root = root.rstrip("/")
        self._client = httpx.Client(timeout=timeout, headers=dict(headers or {}))
        self._cache: dict[str, int] = {}
        self._fallback = get_counter("cl100k")
        self._retry_at = 0.0
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
        self._client.close()

    def _post(self, path: str, body: dict[str, Any], reply: type[BaseModel]) -> Any:
        url = self.root + path
        try:
            response = self._client.post(url, json=body)
        except httpx.HTTPError as exc:
            raise TokenizerUnavailable(f"{url} did not answer ({exc})") from None
        if response.status_code != 200:
            raise TokenizerUnavailable(
                f"{url} answered {response.status_code}: {error_text(response.content)}",
                retry_after=retry_after(response.headers.get("retry-after")),
            )
        try:
            return reply.model_validate_json(response.content)
        except ValidationError as exc:
            raise TokenizerUnavailable(f"{url} did not answer as llama.cpp does ({first_problem(exc)})") from None

    def tokens(self, text: str, *, prompt: bool = False) -> int:
        """Tokens of `text`; as a whole prompt (`prompt=True`), with the BOS the server adds to one."""
        n = len(self._post("/tokenize", {"content": text, "add_special": prompt}, _Tokens).tokens)
        most = len(text.encode("utf-8", "replace")) + _SPECIAL_SLACK
        if n > most:
            raise TokenizerUnavailable(f"{self.root}/tokenize counted {n:,} tokens in a text of at most {most:,}")
        return n

    def _tokens_off_loop(self, text: str) -> int:
        """`tokens(text)`, waited for at most LOOP_DEADLINE when this thread runs an event loop."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return self.tokens(text)
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="tokenize")
        future = self._pool.submit(self.tokens, text)
        try:
            return future.result(timeout=LOOP_DEADLINE)
        except concurrent.futures.TimeoutError:
            future.add_done_callback(lambda f: self._late(text, f))
            raise TokenizerUnavailable(
                f"{self.root}/tokenize did not answer in {LOOP_DEADLINE:g} s", retry_after=RETRY_AFTER
            ) from None

    def _late(self, text: str, future: concurrent.futures.Future[int]) -> None:
        """A count that came after its deadline: kept for the next time the text is counted."""
        if not future.cancelled() and future.exception() is None:
            self._cache[text] = future.result()

    def count(self, text: str) -> int:
        if not text:
            return 0
        n = self._cache.get(text)
        if n is not None:
            return n
        if time.monotonic() < self._retry_at:
            return self._fallback.count(text)
        try:
            n = self._cache[text] = self._tokens_off_loop(text)
        except TokenizerUnavailable as exc:
            # The server went away: the request will fail and say so. The message is
            # still counted, close enough, and the server is asked again later (when
            # it said when, then; within reason).
            wait = RETRY_AFTER if exc.retry_after is None else min(max(exc.retry_after, 1.0), RETRY_AFTER_MAX)
            self._retry_at = time.monotonic() + wait
            return self._fallback.count(text)
        return n

    def prompt_tokens(self, messages: Sequence[WireMessage], tools: Sequence[ToolSpec] | None = None) -> int:
        """What the server will count for a request: its chat template rendered, then tokenized as a prompt."""
        body: dict[str, Any] = {"messages": openai_messages(messages)}
        if tools:
            body["tools"] = wire_tools(tools)
        return self.tokens(self._post("/apply-template", body, _Rendered).prompt, prompt=True)


def measure_framing(
    tokenizer: ServerTokenizer,
    probes: Mapping[str, WireMessage],
    *,
    system: str = "",
    tools: Sequence[ToolSpec] | None = None,
) -> tuple[Framing, int]:
    """The framing the server adds (per request, around the system prompt, around each
    role's messages) and the tokens the tool schema costs, from prompts it renders and counts.

    `probes` maps each transcript role (`user` at least) to the wire message that one
    message of that role, holding `PROBE`, becomes: the agent's own wire format, so its
    prefixes are measured too.
    Raises TokenizerUnavailable when the server cannot render or count.
    """
    count = tokenizer.tokens  # raises where `count` would fall back
    opening = [{"role": "user", "content": "hello there"}]
    alone = tokenizer.prompt_tokens(opening)

    def added(*messages: WireMessage) -> int:
        return tokenizer.prompt_tokens([*opening, *messages]) - alone

    text = count(PROBE)
    user = added(probes["user"]) - text
    roles = {}
    for role, message in probes.items():
        if message["role"] == "assistant":
            # a request that ends with an assistant message asks the server to continue it
            # (a prefill, rendered without its end of turn): a user message follows it, as in a chat
            roles[role] = added(message, probes["user"]) - 2 * text - user
        else:
            roles[role] = added(message) - text
    request = alone - count(opening[0]["content"]) - user
    framed_system = 0
    if system:
        framed_system = tokenizer.prompt_tokens([{"role": "system", "content": system}, *opening]) - alone - count(system)
    # a template that does not render tools (gemma3-270m's: llama.cpp drops them) makes them cost nothing
    schema = tokenizer.prompt_tokens(opening, tools) - alone if tools else 0
    return Framing(request=request, system=framed_system, roles=roles), schema


def server_tokenizer(model: OpenAIModel, *, timeout: float | None = None) -> ServerTokenizer:
    """The model server's own tokenizer, if it has one (llama.cpp): ask it with `measure_framing`."""
    chosen = TIMEOUT if timeout is None else httpx.Timeout(timeout, connect=min(2.0, timeout))
    return ServerTokenizer(model.server_root, headers=model.headers, timeout=chosen)
