"""Where llama.cpp keeps context checkpoints for a sliding-window model (gemma3-270m), request by request (issue 23).

    .venv/bin/python benchmarks/checkpoint_probe.py

A system prompt and eight ~170-token messages (user and reply in turn), sent as growing requests, then with one
message changed at a time, one token asked each; prints each prompt's size, `timings.cache_n`, and where each
message ends in tokens (`/apply-template`, `/tokenize`). The figures behind `core/rent.py`'s `Checkpoints` and
`tests/core/test_rent_checkpoints.py` (benchmarks/RESULTS.md, the seventh pass). About two minutes on 2 cores.
"""

from __future__ import annotations

import gc
import random
import sys
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.engine import assemble_model_file, start_llama_server

WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima"]
WORDS += ["mike", "november", "oscar", "papa"]


def text(i: int, n: int = 120) -> str:
    r = random.Random(i)
    return f"Message {i}: " + " ".join(r.choice(WORDS) for _ in range(n))


def main() -> None:
    server = start_llama_server(assemble_model_file(), 4096)
    url = server.listening_address
    c = httpx.Client(timeout=600)

    def tokens(msgs: list[dict[str, str]]) -> int:
        prompt = c.post(url + "/apply-template", json={"messages": msgs}).json()["prompt"]
        return len(c.post(url + "/tokenize", json={"content": prompt, "add_special": True}).json()["tokens"])

    def ask(msgs: list[dict[str, str]], label: str) -> None:
        body = {"messages": msgs, "max_tokens": 1, "temperature": 0}
        t = c.post(url + "/v1/chat/completions", json=body).json()["timings"]
        ends = [tokens(msgs[: k + 1]) for k in range(len(msgs))]
        print(f"{label}: prompt {ends[-1]} cache_n {t['cache_n']} prompt_n {t['prompt_n']} message ends {ends}", flush=True)

    base = [{"role": "system", "content": "You are terse."}]
    base += [{"role": "user" if i % 2 == 0 else "assistant", "content": text(i)} for i in range(8)]

    def changed(index: int, seed: int) -> list[dict[str, str]]:
        m = [dict(x) for x in base]
        m[index]["content"] = text(seed)
        return m

    ask(base[:3], "A: s u0 a1")
    ask(base[:5], "B: + u2 a3")
    ask(base[:7], "C: + u4 a5")
    ask(base[:9], "D: + u6 a7")
    ask(changed(4, 40), "E: a3 changed")
    ask(base[:9], "F: original again")
    ask(changed(5, 50), "G: u4 changed")
    ask(base[:9], "H: original again")
    ask(changed(7, 60), "I: u6 changed")
    del server
    gc.collect()


if __name__ == "__main__":
    main()
