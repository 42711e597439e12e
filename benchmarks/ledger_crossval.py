"""The ledger's detector, cross-validated over the seen parts of the corpus.

For each seen part (dev, heldout, heldout2 … heldout6; never a fresh one), the
learned scorer is trained on the other seen parts and the held-out one is scored with those weights:
recall, precision, false pins on chatter, kept verbatim, corrections, each the mean of three training
seeds. Nothing is written; the committed weights (`train_ledger_scorer.py`, every seen part) are not
touched. Per-kind tables and misses (`--misses`) are the first seed's.

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

SEEDS = (7, 8, 9)
CORRECTION_KEYS = ("labelled", "superseded_right", "superseded_unlabelled")


def fold(part: str, misses: int = 0, seeds: tuple[int, ...] = SEEDS) -> dict[str, Any]:
    """Train on every seen part but `part`, score `part` with those weights; the figures are the mean
    over `seeds` (one SGD path moves a part's recall by a point or two on its own)."""
    others = [p for p in bench.SEEN if p != part]
    data = trainer.examples([line for p in others for line in trainer.load(p)])
    lines = bench.load(part)
    runs = []
    real = ledger_scorer._weights
    try:
        for n, seed in enumerate(seeds):
            _, kept = trainer.pack(trainer.train(data, seed=seed))
            ledger_scorer._weights = lambda kept=kept: kept  # type: ignore[misc]
            runs.append(bench.score(lines, misses if n == 0 else 0))
    finally:
        ledger_scorer._weights = real  # type: ignore[assignment]
    out = dict(runs[0])
    for key in ("recall", "recall_kind_ok", "precision", "false_pin_rate", "kept_verbatim"):
        out[key] = sum(r[key] for r in runs) / len(runs)
    out["corrections"] = {k: sum(r["corrections"][k] for r in runs) / len(runs) for k in CORRECTION_KEYS}
    return out


def row(part: str, r: dict[str, Any]) -> str:
    c = r["corrections"]
    return (
        f"| {part} | {r['lines']} | {r['recall']:.1%} | {r['recall_kind_ok']:.1%} | "
        f"{r['precision']:.1%} | {r['false_pin_rate']:.1%} | {r['kept_verbatim']:.1%} | "
        f"{c['superseded_right']:.1f}/{c['labelled']:.0f} | {c['superseded_unlabelled']:.1f} |"
    )


def pooled(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The parts' figures pooled: each rate weighed by what it is a share of."""
    stmts = {p: sum(k["statements"] for k in r["kinds"].values()) for p, r in results.items()}
    dets = {p: sum(k["detections"] for k in r["kinds"].values()) for p, r in results.items()}

    def mean(key: str, weight: dict[str, int]) -> float:
        return sum(results[p][key] * weight[p] for p in results) / max(1, sum(weight.values()))

    chatter = {p: r["chatter_lines"] for p, r in results.items()}
    return {
        "lines": sum(r["lines"] for r in results.values()),
        "recall": mean("recall", stmts),
        "recall_kind_ok": mean("recall_kind_ok", stmts),
        "precision": mean("precision", dets),
        "false_pin_rate": mean("false_pin_rate", chatter),
        "kept_verbatim": mean("kept_verbatim", stmts),
        "corrections": {k: sum(r["corrections"][k] for r in results.values()) for k in CORRECTION_KEYS},
    }


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
    if len(results) > 1:
        print(row("all (pooled)", pooled(results)))
    if args.misses:
        for p, r in results.items():
            print()
            print(bench.report(p, r, tuple(q for q in bench.SEEN if q != p)))


if __name__ == "__main__":
    main()
