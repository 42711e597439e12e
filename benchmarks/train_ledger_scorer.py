"""Train the ledger's learned scorer (core/ledger_scorer.py) on the corpus's development lines.

Every sentence the detector would judge (the same splitting, the same roles) becomes one
example, labelled with the kind of the corpus statement it states (a sentence that holds
all of a statement's probe words, or that lies inside its quote), else "none". The model
is a multinomial logistic regression over hashed features, fitted by plain stochastic
gradient descent with L2 (stdlib only, seeded, a few seconds). The weights are written,
rounded and pruned, to tailrent_tui/core/_ledger_weights.py.

    .venv/bin/python benchmarks/train_ledger_scorer.py                      # train on the six parts (--train), write
    .venv/bin/python benchmarks/train_ledger_scorer.py --train dev --check heldout   # train on dev, score heldout, write nothing

Never train on a fresh held-out part (`FORBIDDEN`): it is scored once, by ledger_bench.py. heldout2 …
heldout6 were scored once each in earlier passes and are training data now.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path
from typing import Any

from tailrent_tui.core import ledger, ledger_scorer
from tailrent_tui.core.ledger_scorer import CLASSES

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "ledger_corpus"
OUT = ROOT / "tailrent_tui" / "core" / "_ledger_weights.py"
FORBIDDEN: set[str] = set()  # keep in step with ledger_bench.FRESH (heldout6 was scored once, then seen)


def load(part: str) -> list[dict[str, Any]]:
    if part in FORBIDDEN:
        raise SystemExit(f"{part} is the fresh held-out part: it is never trained on")
    with open(CORPUS / f"{part}.jsonl", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _label(sentence: str, statements: list[dict[str, Any]]) -> int:
    low = sentence.casefold()
    for st in statements:
        keep = st["must_keep"]
        if keep and all(w.casefold() in low for w in keep):
            return CLASSES.index(st["kind"])
    for st in statements:
        q = " ".join(st["quote"].split())
        s = " ".join(sentence.split())
        if len(s) >= 8 and (s in q or (len(q) >= 8 and q in s)):
            return CLASSES.index(st["kind"])
    return 0


def examples(lines: list[dict[str, Any]]) -> list[tuple[list[int], int]]:
    """(features, class) for every sentence the detector judges in these lines."""
    out: list[tuple[list[int], int]] = []
    real_score = ledger.score
    current: dict[str, Any] = {}

    def collect(sentence: str, role: str = "user") -> tuple[ledger.StatementKind | None, float, ledger.StatementKind]:
        rule_kind = ledger.classify(sentence, role)
        s = ledger._clean(sentence)
        if len(s) >= 4:
            feats = ledger_scorer.features(s, role, ledger.signals(sentence, role, rule_kind))
            out.append((feats, _label(sentence, current["statements"])))
        return rule_kind, 1.0, rule_kind or "fact"

    ledger.score = collect  # type: ignore[assignment]
    try:
        for line in lines:
            current["statements"] = line["statements"]
            role = "user" if line["role"] == "instructions" else line["role"]
            ledger.detect(line["text"], "instructions" if line["role"] == "instructions" else role)
    finally:
        ledger.score = real_score  # type: ignore[assignment]
    return out


def train(
    data: list[tuple[list[int], int]], epochs: int = 30, rate: float = 0.2, l2: float = 1e-4, seed: int = 7
) -> dict[int, list[float]]:
    k = len(CLASSES)
    w: dict[int, list[float]] = {}
    rng = random.Random(seed)
    order = list(range(len(data)))
    # the classes are unbalanced ("none" is most sentences): weigh a statement's example up a little
    weight = [1.0] + [1.5] * (k - 1)
    step = 0
    for epoch in range(epochs):
        rng.shuffle(order)
        lr = rate / (1 + epoch * 0.3)
        for i in order:
            feats, y = data[i]
            z = [0.0] * k
            for f in feats:
                row = w.get(f)
                if row is not None:
                    for c in range(k):
                        z[c] += row[c]
            p = ledger_scorer.softmax(z)
            g = [p[c] - (1.0 if c == y else 0.0) for c in range(k)]
            scale = lr * weight[y]
            for f in feats:
                row = w.setdefault(f, [0.0] * k)
                for c in range(k):
                    row[c] -= scale * (g[c] + l2 * row[c])
            step += 1
    return w


def _b36(n: int) -> str:
    if n == 0:
        return ""
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    neg, n = n < 0, abs(n)
    s = ""
    while n:
        n, r = divmod(n, 36)
        s = digits[r] + s
    return ("-" if neg else "") + s


def pack(w: dict[int, list[float]], prune: float = 0.05) -> tuple[str, dict[int, tuple[float, ...]]]:
    lines = []
    kept: dict[int, tuple[float, ...]] = {}
    for f in sorted(w):
        q = [round(v * 1000) for v in w[f]]
        if max(abs(v) for v in q) < prune * 1000:
            continue
        kept[f] = tuple(v / 1000 for v in q)
        lines.append(_b36(f) + ":" + ",".join(_b36(v) for v in q))
    return "\n".join(lines), kept


def _tuple(parts: list[str]) -> str:
    """A tuple of strings as `ruff format` writes it (double quotes, no trailing comma but for one)."""
    inner = ", ".join(f'"{p}"' for p in parts)
    return f"({inner},)" if len(parts) == 1 else f"({inner})"


def write(text: str, meta: str, parts: list[str]) -> None:
    OUT.write_text(
        '"""Weights of the ledger\'s learned scorer (core/ledger_scorer.py), written by\n'
        f"benchmarks/train_ledger_scorer.py:\n{meta}.\nDo not edit by hand.\n\n"
        "Each line: a feature's hash, then its weight per class (thousandths), base 36.\n"
        '"""\n\n'
        f"TRAINED_ON = {_tuple(parts)}\n\n"
        f'WEIGHTS = """\n{text}\n"""\n',
        encoding="utf-8",
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--train",
        nargs="+",
        default=["dev", "heldout", "heldout2", "heldout3", "heldout4", "heldout5"],
        help="the parts to learn from (the committed weights: these six; with heldout6 too the scorer vetoes the "
        "article's own decision sentence said by the assistant, tests/core/test_ledger.py, benchmarks/RESULTS.md)",
    )
    ap.add_argument("--check", nargs="*", default=[], help="parts to score with the new weights (nothing is written)")
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--l2", type=float, default=1e-4)
    ap.add_argument("--misses", type=int, default=0, help="with --check: list up to N misses and false finds")
    args = ap.parse_args()
    lines = [line for part in args.train for line in load(part)]
    data = examples(lines)
    w = train(data, epochs=args.epochs, l2=args.l2)
    text, kept = pack(w)
    pos = sum(1 for _, y in data if y)
    meta = f"{len(data)} sentences ({pos} load-bearing) of {'+'.join(args.train)}, {len(kept)} features kept"
    print(meta)
    if args.check:
        import benchmarks.ledger_bench as bench

        ledger_scorer._weights.cache_clear()
        real = ledger_scorer._weights
        ledger_scorer._weights = lambda: kept  # type: ignore[assignment]
        try:
            for part in args.check:
                print(bench.report(part, bench.score(bench.load(part), args.misses), tuple(args.train)))
        finally:
            ledger_scorer._weights = real  # type: ignore[assignment]
        return
    write(text, meta, args.train)
    print(f"wrote {OUT.relative_to(ROOT)} ({OUT.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
