"""Speed of the fact guard over about 1 MB of mixed text.

Prints: extract_facts throughput, facts found, lost_facts + repair_summary over
the same span, and the ratio to a plain word scan (re.findall(r"\\w+")) of the
same text in the same run, which is the figure to compare across machines.

Run: .venv/bin/python benchmarks/guard_bench.py
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from tailrent_tui.core.guard import DecisionDetector, extract_facts, lost_facts, repair_summary

SEED = Path(__file__).resolve().parents[2] / "shared" / "seed" / "000_80c604167534704c.txt"

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


def main() -> None:
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
