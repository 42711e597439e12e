"""What our OpenAI-compatible client adds on top of the engine's own time.

Against the real llama.cpp server (xllamacpp + gemma3-270m on 127.0.0.1), streams the
same request several times through ``OpenAIModel`` and through bare httpx (read the
lines, parse nothing), and compares both with the server's ``timings``:

- time to first token, as our client sees it, against the server's ``prompt_ms``;
- chunks per second through our client against the server's generated tokens/s;
- overhead: wall time minus the server's prompt + generation time, as a share of
  generation time (goal: under 5%), and the CPU our client's thread spent, as a
  share of generation time (the part that is ours alone: parsing, pydantic chunks).

Prints a markdown table of medians. Run: ``.venv/bin/python benchmarks/models_bench.py``
(``--runs N``, ``--tokens N``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tailrent_tui.models import OpenAIModel, TextDelta, Usage  # noqa: E402
from tests.support.engine import assemble_model_file, start_llama_server  # noqa: E402

MESSAGES = [
    {"role": "system", "content": "You are a coding assistant."},
    {"role": "user", "content": "Explain, step by step, how a KV cache speeds up a chat that resends its history."},
]


async def through_client(base: str, tokens: int) -> dict[str, float]:
    model = OpenAIModel(base, "gemma3-270m")
    chunks = 0
    cpu_start = time.thread_time()
    usage: Usage | None = None
    async for chunk in model.stream(MESSAGES, options={"max_tokens": tokens, "temperature": 0}):
        if isinstance(chunk, TextDelta):
            chunks += 1
        elif isinstance(chunk, Usage):
            usage = chunk
    cpu_ms = (time.thread_time() - cpu_start) * 1000.0
    await model.aclose()
    assert usage is not None and usage.first_token_ms is not None and usage.wall_ms is not None
    stream_s = (usage.wall_ms - usage.first_token_ms) / 1000.0
    return {
        "ttft_ms": usage.first_token_ms,
        "wall_ms": usage.wall_ms,
        "prompt_ms": usage.prompt_ms or 0.0,
        "gen_ms": usage.generation_ms or 0.0,
        "tokens": usage.output_tokens,
        "chunks": chunks,
        "chunks_per_s": (chunks - 1) / stream_s if stream_s > 0 else 0.0,
        "cpu_ms": cpu_ms,
    }


async def through_bare_httpx(base: str, tokens: int) -> dict[str, float]:
    body = {
        "model": "gemma3-270m",
        "messages": MESSAGES,
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": tokens,
        "temperature": 0,
    }
    async with httpx.AsyncClient(timeout=300) as client:
        started = time.perf_counter()
        cpu_start = time.thread_time()
        first_ms = None
        timings: dict[str, float] = {}
        async with client.stream("POST", f"{base}/v1/chat/completions", json=body) as response:
            async for line in response.aiter_lines():
                if first_ms is None and '"content":"' in line:
                    first_ms = (time.perf_counter() - started) * 1000.0
                if '"timings"' in line:
                    timings = json.loads(line[5:])["timings"]
        wall_ms = (time.perf_counter() - started) * 1000.0
        cpu_ms = (time.thread_time() - cpu_start) * 1000.0
    return {
        "ttft_ms": first_ms or wall_ms,
        "wall_ms": wall_ms,
        "prompt_ms": timings.get("prompt_ms", 0.0),
        "gen_ms": timings.get("predicted_ms", 0.0),
        "cpu_ms": cpu_ms,
    }


def median(rows: list[dict[str, float]], key: str) -> float:
    return statistics.median(r[key] for r in rows)


async def run(runs: int, tokens: int) -> None:
    server = start_llama_server(assemble_model_file())
    base = server.listening_address
    # Warm up: load pages, fill the KV cache with the shared prompt.
    await through_client(base, 4)
    ours, bare = [], []
    for _ in range(runs):
        # Interleaved, so the machine's noise hits both alike.
        ours.append(await through_client(base, tokens))
        bare.append(await through_bare_httpx(base, tokens))
    del server

    def overhead(r: dict[str, float]) -> float:
        return r["wall_ms"] - r["prompt_ms"] - r["gen_ms"]

    gen = median(ours, "gen_ms")
    server_tps = median(ours, "tokens") / gen * 1000.0
    print(f"llama.cpp gemma3-270m, {runs} runs of {tokens} tokens each, medians\n")
    print("| measure | our client | bare httpx | server's own |")
    print("| --- | ---: | ---: | ---: |")
    print(
        f"| time to first token (ms) | {median(ours, 'ttft_ms'):.1f} | {median(bare, 'ttft_ms'):.1f} "
        f"| {median(ours, 'prompt_ms'):.1f} (prompt_ms) |"
    )
    print(f"| generation (ms) | | | {gen:.1f} (predicted_ms) |")
    print(f"| chunks/s vs tokens/s | {median(ours, 'chunks_per_s'):.1f} | | {server_tps:.1f} |")
    print(
        f"| wall - server time (ms) | {statistics.median(overhead(r) for r in ours):.1f} "
        f"| {statistics.median(overhead(r) for r in bare):.1f} | |"
    )
    share = statistics.median(overhead(r) / r["gen_ms"] for r in ours) * 100
    bare_share = statistics.median(overhead(r) / r["gen_ms"] for r in bare) * 100
    print(f"| overhead share of generation | {share:.1f}% | {bare_share:.1f}% | |")
    cpu_share = statistics.median(r["cpu_ms"] / r["gen_ms"] for r in ours) * 100
    bare_cpu = statistics.median(r["cpu_ms"] / r["gen_ms"] for r in bare) * 100
    print(f"| client-thread CPU share of generation | {cpu_share:.1f}% | {bare_cpu:.1f}% | |")
    per_chunk = statistics.median(r["cpu_ms"] / r["chunks"] for r in ours) * 1000
    print(f"| client-thread CPU per chunk (us) | {per_chunk:.0f} | | |")
    print(f"\ngoal: overhead under 5% of generation time -> {'met' if share < 5 else 'NOT met'} ({share:.1f}%)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=64)
    args = parser.parse_args()
    asyncio.run(run(args.runs, args.tokens))


if __name__ == "__main__":
    main()
