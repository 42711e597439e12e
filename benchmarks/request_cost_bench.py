"""What one request costs the engine core as the transcript grows (the sixth pass).

A core Session of N messages (a user line and an assistant reply in turn, chars/4 tokens),
then 200 more turns; each turn adds a message and charges a request as the bench and the agent
do: the policy's expiry check (`predict`'s third figure before this pass, `expired_at` since), the
context's items (`context_items`) and the charge (`RentModel.request`). Printed: microseconds per
turn, median of 5 repeats, for each N. Quadratic work shows as a cost that grows with N.

Run: .venv/bin/python benchmarks/request_cost_bench.py [--sizes 250,1000,4000,16000]
(with PYTHONPATH pointing at another tree, the same figures for that tree).
"""

from __future__ import annotations

import argparse
import statistics
import time

from tailrent_tui.core.rent import RentModel, context_items, get_price_sheet
from tailrent_tui.core.session import Session
from tailrent_tui.core.tokens import get_counter

TURNS = 200


def _session(n: int) -> Session:
    clock = [0.0]
    s = Session(counter=get_counter("chars4"), system="You are a coding agent.", window=10**9, clock=lambda: clock[0])
    for i in range(n):
        role = "user" if i % 2 == 0 else "assistant"
        s.add(role, f"turn {i}: the step after the last one, with a path src/mod_{i}.py and a port {8000 + i % 900}.")
    return s


def per_turn_us(n: int) -> float:
    s = _session(n)
    rent = RentModel(get_price_sheet("anthropic-5m"))
    rent.request_session(s, 0.0)
    expired_at = getattr(rent, "expired_at", None)
    t0 = time.perf_counter()
    for i in range(TURNS):
        at = 30.0 * (i + 1)
        s.add("user", f"one more step {i}: look at src/mod_{i}.py")
        if expired_at is not None:
            expired_at(at)
        else:  # the tree before this pass: the check read the whole context
            rent.predict(context_items(s), s.head_tokens, at)
        rent.request(context_items(s), s.head_tokens, at)
    return (time.perf_counter() - t0) / TURNS * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="250,1000,4000,16000")
    args = ap.parse_args()
    print("| messages in the transcript | µs per turn (median of 5) |")
    print("| ---: | ---: |")
    for n in (int(x) for x in args.sizes.split(",")):
        print(f"| {n:,} | {statistics.median(per_turn_us(n) for _ in range(5)):,.0f} |")


if __name__ == "__main__":
    main()
