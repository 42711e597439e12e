"""Journal load benchmark: write a 100,000-event journal, then time loading it.

Usage: python benchmarks/journal_bench.py [--events N] [--keep DIR]

The journal is written through the real store (a session directory, the sync
JournalWriter, file spills) by a live core Session with the chars4 counter:
adds of mixed sizes, pins and unpins, tool results spilled past a threshold,
usage records, and — as the ladder does — one big fold down to 35% of the
window whenever the context passes 90%. Loading (parse + replay into a Session, what
`open_session` does) then runs in fresh subprocesses: one for the wall time
and the RSS growth (psutil), one for the tracemalloc peak (tracemalloc slows
the run, so its time is not the one reported). Goal: under 2 s and 300 MB.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # folds.py: a fold applied by hand

MEASURE = r"""
import json, sys, time, tracemalloc, gc
import psutil
sys.path.insert(0, {root!r})
from tailrent_tui.store.sessions import SessionDir
from tailrent_tui.core.tokens import get_counter
get_counter("chars4")
proc = psutil.Process()
sd = SessionDir({path!r})
gc.collect()
rss0 = proc.memory_info().rss
if {trace}:
    tracemalloc.start()
t0 = time.perf_counter()
session, result = sd.replay(save_torn=False)
dt = time.perf_counter() - t0
peak = tracemalloc.get_traced_memory()[1] if {trace} else None
rss1 = proc.memory_info().rss
from tailrent_tui.store.journal import _read
t1 = time.perf_counter()
_read(sd.journal_path, False, lambda n, ev: None)
parse_only = time.perf_counter() - t1
print(json.dumps({{"parse_only": parse_only, "seconds": dt, "rss_delta": rss1 - rss0, "rss": rss1, "tracemalloc_peak": peak,
                  "messages": len(session.messages), "folds": len(session.folds), "context": session.context_tokens}}))
"""


def write_journal(data: Path, events: int, seed: int = 7) -> tuple[Path, dict]:
    from folds import fold_span

    from tailrent_tui.core.messages import UsageRecorded
    from tailrent_tui.core.rungs.fold import span_to_target
    from tailrent_tui.core.rungs.spill import admit_tool_result
    from tailrent_tui.core.summarize import LossySummarizer
    from tailrent_tui.store.sessions import SessionDir, close_session, open_session

    rng = random.Random(seed)
    sd = SessionDir.create(data, title="bench", tokenizer="chars4", system="You are a coding agent.", window=32768)
    opened = open_session(sd, fsync=False)
    s, w = opened.session, opened.writer
    spills = sd.spills()
    summarizer = LossySummarizer()
    words = [
        "the",
        "cache",
        "prefix",
        "tail",
        "rent",
        "fold",
        "spill",
        "pin",
        "decision",
        "Redis",
        "port",
        "6379",
        "because",
        "latency",
    ]
    counts: dict[str, int] = {}
    n = 0

    def text(size: int) -> str:
        return " ".join(rng.choice(words) for _ in range(max(1, size // 6)))

    trigger, target = int(0.9 * s.window), int(0.35 * s.window)
    while w.saved < events:
        if s.context_tokens > trigger:
            # what the ladder does: one big fold from the trigger down to the target
            fold_span(s, span_to_target(s, target), summarizer=summarizer, guard="off", archive=sd.archive())
            kind = "fold"
        else:
            r = rng.random()
            if r < 0.75:
                s.add(rng.choice(("user", "assistant")), text(rng.choice((40, 200, 800, 3000))))
                kind = "add"
            elif r < 0.85:
                admit_tool_result(s, "grep", text(rng.choice((400, 20_000))), spills, threshold=1000)
                kind = "tool"
            elif r < 0.87 and s.messages:
                m = s.messages[rng.randrange(len(s.messages))]
                (s.unpin if m.pinned else s.pin)(m.id)
                kind = "pin/unpin"
            else:
                s.emit(UsageRecorded(request_no=n, context_tokens=s.context_tokens, at=s.clock()))
                kind = "usage"
        counts[kind] = counts.get(kind, 0) + 1
        n += 1
    close_session(opened)
    return sd.path, {"events": w.saved, "mix": counts, "messages": len(s.messages), "folds": len(s.folds)}


def measure(path: Path, trace: bool) -> dict:
    code = MEASURE.format(root=str(ROOT), path=str(path), trace=trace)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(r.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--keep", type=Path, help="write the session here instead of a temp dir")
    args = ap.parse_args()
    data = args.keep or Path(tempfile.mkdtemp(prefix="tailrent-bench-"))
    t0 = time.perf_counter()
    path, info = write_journal(data, args.events)
    written = time.perf_counter() - t0
    size = (path / "journal.jsonl").stat().st_size
    print(f"wrote {info['events']:,} events ({size / 1e6:.1f} MB) in {written:.1f} s; mix {info['mix']}")
    print(f"live session: {info['messages']:,} messages, {info['folds']:,} folds")
    timings = [measure(path, trace=False) for _ in range(args.runs)]
    best = min(timings, key=lambda t: t["seconds"])
    traced = measure(path, trace=True)
    assert best["messages"] == info["messages"] and best["folds"] == info["folds"], "replay differs from live"
    print(
        f"load (parse + replay), best of {args.runs}: {best['seconds']:.2f} s "
        "(all: " + ", ".join(f"{t['seconds']:.2f}" for t in timings) + ")"
    )
    print(f"  of which reading + parsing + validating the lines alone: {best['parse_only']:.2f} s")
    print(f"RSS growth during load: {best['rss_delta'] / 2**20:.0f} MiB (process RSS {best['rss'] / 2**20:.0f} MiB)")
    print(f"tracemalloc peak during load: {traced['tracemalloc_peak'] / 2**20:.0f} MiB")
    ok = best["seconds"] < 2.0 and max(best["rss_delta"], traced["tracemalloc_peak"]) < 300 * 2**20
    print("goal (< 2 s, < 300 MB):", "met" if ok else "NOT met")
    # linearity: half the journal should take about half the time
    half_data = Path(tempfile.mkdtemp(prefix="tailrent-bench-half-"))
    half_path, _ = write_journal(half_data, args.events // 2)
    half = min((measure(half_path, trace=False) for _ in range(args.runs)), key=lambda t: t["seconds"])
    print(f"half the events: {half['seconds']:.2f} s -> ratio full/half {best['seconds'] / half['seconds']:.2f} (2.0 = linear)")


if __name__ == "__main__":
    main()
