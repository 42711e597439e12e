"""The ledger's detector, cross-validated over the seen parts of the corpus.

For each seen part (dev, heldout, heldout2, heldout3, heldout4; never the fresh one, heldout5), the
learned scorer is trained on the other seen parts and the held-out one is scored with those weights:
recall, precision, false pins on chatter, kept verbatim, corrections. Nothing is written; the committed
weights (`train_ledger_scorer.py`, every seen part) are not touched.

    .venv/bin/python benchmarks/ledger_crossval.py                    # one row per seen part
    .venv/bin/python benchmarks/ledger_crossval.py --part heldout4 --misses 40   # one fold, with its misses
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import ledger_bench as bench
from benchmarks import train_ledger_scorer as trainer
from tailrent_tui.core import ledger_scorer


def fold(part: str, misses: int = 0) -> dict[str, Any]:
    """Train on every seen part but `part`, score `part` with those weights."""
    others = [p for p in bench.SEEN if p != part]
    w = trainer.train(trainer.examples([line for p in others for line in trainer.load(p)]))
    _, kept = trainer.pack(w)
    real = ledger_scorer._weights
    ledger_scorer._weights = lambda: kept  # type: ignore[assignment]
    try:
        return bench.score(bench.load(part), misses)
    finally:
        ledger_scorer._weights = real  # type: ignore[assignment]


def row(part: str, r: dict[str, Any]) -> str:
    c = r["corrections"]
    return (
        f"| {part} | {r['lines']} | {bench._pct(r['recall'])} | {bench._pct(r['recall_kind_ok'])} | "
        f"{bench._pct(r['precision'])} | {bench._pct(r['false_pin_rate'])} | {bench._pct(r['kept_verbatim'])} | "
        f"{c['superseded_right']}/{c['labelled']} | {c['superseded_unlabelled']} |"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", nargs="*", default=list(bench.SEEN), help="seen parts to hold out, one at a time")
    ap.add_argument("--misses", type=int, default=0, help="list up to N misses and false finds per part")
    args = ap.parse_args()
    for p in args.part:
        if p not in bench.SEEN:
            raise SystemExit(f"{p} is not a seen part (seen: {', '.join(bench.SEEN)})")
    results = {p: fold(p, args.misses) for p in args.part}
    print(
        "| held out (trained on the other seen parts) | lines | recall | kind right | precision | "
        "false pins on chatter | kept verbatim | corrections | unasked supersessions |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for p, r in results.items():
        print(row(p, r))
    if args.misses:
        for p, r in results.items():
            print()
            print(bench.report(p, r, tuple(q for q in bench.SEEN if q != p)))


if __name__ == "__main__":
    main()
