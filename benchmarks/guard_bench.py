"""Speed of the fact guard over about 1 MB of mixed text, and its accuracy on the labelled corpus.

Default: extract_facts throughput, facts found, lost_facts + repair_summary over
the same span, and the ratio to a plain word scan (re.findall(r"\\w+")) of the
same text in the same run, which is the figure to compare across machines.

--corpus: precision and recall of extract_facts on tests/support/guard_corpus.py (the
hand-labelled coding-session lines, issue 11), overall and for its tuned (dev)
and held-out parts, with what it missed and what it found that no label asked for.

Run: .venv/bin/python benchmarks/guard_bench.py [--corpus]
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple

from tailrent_tui.core.guard import DecisionDetector, extract_facts, lost_facts, repair_summary

SEED = Path(__file__).resolve().parents[2] / "shared" / "seed" / "000_80c604167534704c.txt"
ROOT = Path(__file__).resolve().parents[1]

CHATTER = [
    "Turn {i}: Ran the integration suite against the staging cluster.",
    "Turn {i}: done, no issues found.",
    "[inline] " + " ".join(["token"] * 40),
    "DECISION: We will store refresh tokens in Redis with a 15 minute TTL, because mobile can't persist them.",
    "Patched src/auth/token.py at v2.3.{i}; RefreshTokenService now reads REFRESH_TTL (30s) from config.toml.",
    "See https://example.com/issues/{i} and the `fold_target` setting, 512 MB cap, 2,000 turns.",
    "def refresh(self, token_id: str) -> Token:\n    return self._store.get(token_id)  # {i}",
]


def mixed_text(target_bytes: int) -> str:
    parts: list[str] = []
    size = 0
    article = SEED.read_text(encoding="utf-8") if SEED.exists() else ""
    i = 0
    while size < target_bytes:
        line = CHATTER[i % len(CHATTER)].format(i=i)
        if article and i % 50 == 0:
            start = (i * 997) % max(1, len(article) - 2000)
            line = article[start : start + 2000]
        parts.append(line)
        size += len(line.encode()) + 1
        i += 1
    return "\n".join(parts)


def best_of(n: int, fn) -> float:
    best = float("inf")
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


class CorpusFigures(NamedTuple):
    lines: int
    no_fact_lines: int
    parts: dict[str, Any]
    """"all", "dev" and "held_out": a guard_corpus.Score each."""
    ms: float


def corpus_figures() -> CorpusFigures:
    """Precision and recall on the labelled corpus, as printed by ``--corpus``."""
    sys.path.insert(0, str(ROOT))
    from tests.support.guard_corpus import CORPUS, DEV, HELD_OUT, score

    def extract(text: str) -> list[str]:
        return [f.text for f in extract_facts(text)]

    took = best_of(3, lambda: [extract_facts(text) for text, _ in CORPUS])
    parts = {"all": score(CORPUS, extract), "dev": score(DEV, extract), "held_out": score(HELD_OUT, extract)}
    return CorpusFigures(len(CORPUS), sum(1 for _, facts in CORPUS if not facts), parts, took * 1000)


def print_corpus() -> None:
    figures = corpus_figures()
    result = figures.parts["all"]
    share = figures.no_fact_lines / figures.lines
    print(
        f"corpus: {figures.lines} lines, {figures.no_fact_lines} of them ({share:.0%}) without a fact, "
        f"{result.labelled} labelled facts"
    )
    for name, r in figures.parts.items():
        print(
            f"{name:>8}: precision {r.precision:.1%} ({r.matched}/{r.extracted}), "
            f"recall {r.recall:.1%} ({r.matched}/{r.labelled})"
        )
    print(f"extract_facts over the corpus, line by line: {figures.ms:.0f} ms")
    for text, fact in result.missed:
        print(f"missed: {fact!r} in {text!r}")
    for text, fact in result.spurious:
        print(f"spurious: {fact!r} in {text!r}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", action="store_true", help="precision and recall on the labelled corpus instead of speed")
    if ap.parse_args().corpus:
        print_corpus()
        return
    text = mixed_text(1_000_000)
    mb = len(text.encode()) / 1e6
    words = best_of(3, lambda: re.findall(r"\w+", text))
    extract = best_of(3, lambda: extract_facts(text, watch=["rotate", "mobile"]))
    facts = extract_facts(text, watch=["rotate", "mobile"])
    summary = text[:2000]
    check = best_of(3, lambda: repair_summary(summary, lost_facts(facts, summary)))
    lost = lost_facts(facts, summary)
    lines = text.split("\n")
    detector = DecisionDetector()
    pin = best_of(3, lambda: [detector.is_decision(line) for line in lines])
    print(f"text: {mb:.2f} MB, {len(lines)} lines")
    print(f"extract_facts: {extract * 1000:.0f} ms ({mb / extract:.1f} MB/s), {len(facts)} facts")
    print(f"word scan baseline: {words * 1000:.0f} ms; extract_facts / word scan = {extract / words:.1f}x")
    print(f"lost_facts + repair_summary ({len(facts)} facts vs a 2 kB summary, {len(lost)} lost): {check * 1000:.0f} ms")
    print(f"DecisionDetector over {len(lines)} lines: {pin * 1000:.0f} ms ({pin / len(lines) * 1e6:.1f} us/line)")


if __name__ == "__main__":
    main()
