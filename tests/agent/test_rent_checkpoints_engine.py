"""The rent model against llama.cpp's context checkpoints on gemma3-270m (sliding-window attention, issue 23).

llama.cpp cannot roll gemma3's KV back past its 512-token window: a prompt changed further back restarts from a
checkpoint it took while reading an earlier prompt, at the start of a user message. The rent model, told so by
the model file's header (`gguf_header`), predicts `timings.cache_n` where the plain prefix rule predicted the
common prefix cached (the fold turns of the gemma3 bench: 1,170 predicted where 248 were kept)."""

from __future__ import annotations

import random

import httpx
import pytest

from tailrent_tui.agent.placement import LLAMA_CHECKPOINT_MIN_STEP, LLAMA_CTX_CHECKPOINTS, gguf_header
from tailrent_tui.core.rent import RentModel, get_price_sheet
from tests.support.engine import assemble_model_file

pytestmark = pytest.mark.engine

WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima"]


def text(i: int, n: int = 110) -> str:
    rng = random.Random(i)
    return f"Message {i}: " + " ".join(rng.choice(WORDS) for _ in range(n))


def test_a_change_behind_the_window_is_predicted_from_the_checkpoints(llama_server):
    arch, window = gguf_header(assemble_model_file())
    assert (arch, window) == ("gemma3", 512)
    sheet = get_price_sheet("local").model_copy(
        update={"checkpoints": LLAMA_CTX_CHECKPOINTS, "checkpoint_min_step": LLAMA_CHECKPOINT_MIN_STEP, "swa_tokens": window}
    )
    messages = [{"role": "system", "content": "You are terse."}]
    messages += [{"role": "user" if i % 2 == 0 else "assistant", "content": text(100 + i)} for i in range(7)]
    with httpx.Client(base_url=llama_server, timeout=600) as c:

        def n_tokens(msgs: list[dict[str, str]]) -> int:
            prompt = c.post("/apply-template", json={"messages": msgs}).json()["prompt"]
            return len(c.post("/tokenize", json={"content": prompt, "add_special": True}).json()["tokens"])

        def items(msgs: list[dict[str, str]]) -> list[tuple[str, int]]:
            ends = [n_tokens(msgs[: k + 1]) for k in range(len(msgs))]
            starts = [0, *ends[:-1]]
            return [(f"{k}:{hash(m['content'])}#chat", ends[k] - starts[k]) for k, m in enumerate(msgs)]

        def ask(msgs: list[dict[str, str]]) -> int:
            body = {"messages": msgs, "max_tokens": 1, "temperature": 0, "cache_prompt": True}
            return int(c.post("/v1/chat/completions", json=body).json()["timings"]["cache_n"])

        # another conversation first: the slot and its checkpoints are this test's own from here
        ask([{"role": "user", "content": text(1, 20)}])
        rent, plain = RentModel(sheet), RentModel(get_price_sheet("local"))
        roles: dict[str, str] = {}
        for r in (rent, plain):
            r.user_start = lambda key: roles[key] != "assistant"
        first = items([{"role": "user", "content": text(1, 20)}])
        roles.update({k: "user" for k, _ in first})
        for r in (rent, plain):
            r.request(first, 0, 0.0)
        changed = [dict(m) for m in messages]
        changed[2]["content"] = text(999)  # the first reply, ~1,000 tokens before the end: behind the window
        for request in (messages[:4], messages[:6], messages[:8], changed):
            its = items(request)
            roles.update({k: m["role"] for (k, _), m in zip(its, request, strict=True)})
            predicted = rent.request(its, 0, 0.0).cached_tokens
            naive = plain.request(its, 0, 0.0).cached_tokens
            measured = ask(request)
            # within the few tokens of a message's header (a checkpoint sits after it) or of the template's end
            assert abs(measured - predicted) <= 8, (predicted, measured, naive)
    # the change: restarted at the user message before the reply, not at the common prefix (the reply's start)
    assert naive - measured > 100, (naive, measured)
