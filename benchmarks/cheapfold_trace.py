"""Where llama.cpp's cache stopped matching: `cheapfold_bench.py` with every request's prompt kept (issue 23).

    .venv/bin/python benchmarks/cheapfold_trace.py --turns 30 --reply 8 --placements after --prepare \
        --raw run.json --trace run.trace.json
    .venv/bin/python benchmarks/cheapfold_trace.py --explain run.trace.json [--from 0] [--url http://127.0.0.1:PORT]

The first form runs the bench (same arguments) and writes, per request, the body sent, the reply's
text, the usage, and the prompt as the server tokenized it (`/apply-template` then `/tokenize`, asked
right after the request). The second reads that file and prints, for each request, its common prefix
with the tokens the slot held (the previous prompt and its reply), where llama.cpp's chunk reuse
(`n_cache_reuse` 64) would stop, what the server reported (`cache_n`, read), and the text there.
Where `cache_n` is below the simulated reuse, the server took another prompt from its host-RAM prompt
cache (`--cache-ram`): one that shared a longer common prefix.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def install(trace: list[dict[str, Any]]) -> None:
    """Wrap the OpenAI client's request so every body, reply and tokenized prompt is kept."""
    import httpx

    from tailrent_tui.models import openai as oa
    from tailrent_tui.models.base import TextDelta, Usage

    original = oa.OpenAIModel._stream_request

    async def traced(self, messages, tools, options, started):  # type: ignore[no-untyped-def]
        seen: dict[str, Any] = {}
        real_open = self.open_stream

        def capture(path, body):  # type: ignore[no-untyped-def]
            seen["body"] = body
            return real_open(path, body)

        self.open_stream = capture
        text: list[str] = []
        usage = None
        try:
            async for chunk in original(self, messages, tools, options, started):
                if isinstance(chunk, TextDelta):
                    text.append(chunk.text)
                if isinstance(chunk, Usage):
                    usage = chunk
                yield chunk
        finally:
            del self.open_stream
            body = seen.get("body")
            row: dict[str, Any] = {"body": body, "reply": "".join(text)}
            if usage is not None:
                row["usage"] = usage.model_dump(mode="json")
            if body is not None:
                root = self.server_root
                try:
                    with httpx.Client(timeout=120) as c:
                        tb = {k: v for k, v in body.items() if k in ("messages", "tools")}
                        prompt = c.post(root + "/apply-template", json=tb).json()["prompt"]
                        ids = c.post(root + "/tokenize", json={"content": prompt, "add_special": True}).json()["tokens"]
                        out = c.post(root + "/tokenize", json={"content": "".join(text), "add_special": False}).json()
                    row["prompt"] = prompt
                    row["tokens"] = ids
                    row["reply_tokens"] = out["tokens"]
                except Exception as exc:  # a diagnostic: say it and go on
                    row["tokenize_error"] = repr(exc)
            trace.append(row)

    oa.OpenAIModel._stream_request = traced  # type: ignore[method-assign]


def run_bench(argv: list[str], trace_path: Path) -> None:
    import cheapfold_bench

    trace: list[dict[str, Any]] = []
    install(trace)
    sys.argv = ["cheapfold_bench.py", *argv]
    try:
        cheapfold_bench.main()
    finally:
        trace_path.write_text(json.dumps(trace))


def common(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def chunk_reuse(cache: list[int], prompt: list[int], n_reuse: int = 64) -> tuple[int, int, list[tuple[int, int, int]]]:
    """What llama.cpp's server reuses of `cache` for `prompt` with `n_cache_reuse`: (the common prefix, the
    position where reuse stopped, the chunks shifted as (prompt position, cache position, length)). After the
    common prefix it scans the cache for a run of at least `n_reuse` tokens equal to the prompt from where it
    stands, shifts it into place and goes on; a shorter run is skipped, and the prompt position only moves with
    a run: an insertion, or a piece shorter than `n_reuse` between two deletions, ends the reuse."""
    n_past = common(cache, prompt)
    head_c = head_p = n_past
    chunks = []
    while head_c < len(cache) and head_p < len(prompt):
        n = 0
        while head_c + n < len(cache) and head_p + n < len(prompt) and cache[head_c + n] == prompt[head_p + n]:
            n += 1
        if n >= n_reuse:
            chunks.append((head_p, head_c, n))
            head_p += n
            head_c += n
        else:
            head_c += 1
    return n_past, head_p, chunks


def explain(path: Path, start: int, url: str | None) -> None:
    """Per request: the prompt's length, its common prefix with the slot (the previous prompt and its reply),
    where llama.cpp's chunk reuse would stop (`chunk_reuse`), what the server reported (`cache_n`, read), and,
    with `url` (a llama.cpp server with the same model, for /detokenize), the text where the reuse stopped."""
    import httpx

    rows = json.loads(path.read_text())
    slot: list[int] = []
    for i, r in enumerate(rows):
        toks = r.get("tokens") or []
        u = r.get("usage") or {}
        n_past, stop, chunks = chunk_reuse(slot, toks)
        body = r.get("body") or {}
        msgs = body.get("messages") or [{}]
        last = msgs[-1]
        if i >= start:
            print(
                f"#{i:3d} prompt {len(toks):5d} common {n_past:5d} reuse-stops {stop:5d} cache_n {u.get('cached_tokens')}"
                f" read {u.get('evaluated_tokens')} out {u.get('output_tokens')} messages {len(msgs)}"
                f" last={last.get('role')}:{str(last.get('content', ''))[:40]!r}"
            )
            if chunks:
                print(f"      shifted chunks (prompt at, cache at, tokens): {chunks}")
            if url and slot and stop < len(toks) and (u.get("evaluated_tokens") or 0) > 120:

                def text(ids: list[int]) -> str:
                    return httpx.post(url + "/detokenize", json={"tokens": ids}).json()["content"] if ids else ""

                print(f"      stopped at {stop}: {text(toks[max(0, stop - 12) : stop])!r} || {text(toks[stop : stop + 30])!r}")
        slot = toks + (r.get("reply_tokens") or [])


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--explain":
        ap = argparse.ArgumentParser()
        ap.add_argument("--explain", type=Path)
        ap.add_argument("--from", dest="start", type=int, default=0)
        ap.add_argument("--url", help="a llama.cpp server with the same model, to show the text where reuse stopped")
        a = ap.parse_args()
        explain(a.explain, a.start, a.url)
        return
    argv = sys.argv[1:]
    trace_path = Path("cheapfold.trace.json")
    if "--trace" in argv:
        k = argv.index("--trace")
        trace_path = Path(argv[k + 1])
        del argv[k : k + 2]
    run_bench(argv, trace_path)


if __name__ == "__main__":
    main()
