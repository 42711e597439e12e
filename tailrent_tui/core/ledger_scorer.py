"""A small learned scorer for the ledger's detector: is a sentence load-bearing, and of what kind?

Regular expressions alone miss a third to a half of the ways people phrase a rule
("keep main untouched", "pnpm only", "Be terse."). This is a multinomial logistic
regression over hashed word n-grams, a few word-shape features and the rules' own
verdict (so it learns where the rules are right and where they over- or under-fire).
It was trained on the ledger corpus's development lines by
``benchmarks/train_ledger_scorer.py`` and ships as the weights in
``_ledger_weights.py`` (a string the module parses once, on first use): no download,
no I/O, no dependency. Scoring a sentence is a few dozen dictionary look-ups.

Pure, synchronous, deterministic.
"""

from __future__ import annotations

import math
import re
import zlib
from collections.abc import Sequence
from functools import lru_cache
from itertools import pairwise

#: the classes, in the order the weights store them
CLASSES: tuple[str, ...] = ("none", "decision", "rule", "constraint", "preference", "goal", "fact")
#: hashed feature space (2**BITS buckets)
BITS = 18
_MASK = (1 << BITS) - 1

_TOKEN_RE = re.compile(r"[a-z_][a-z_']*|\d+(?:[.,]\d+)*|[$%<>=/:@#`*!-]")
_NUM_RE = re.compile(r"\d")


def _norm(tok: str) -> str:
    return "0" if tok[:1].isdigit() else tok


def features(sentence: str, role: str, signals: Sequence[str]) -> list[int]:
    """The hashed features of one sentence: its words and word pairs (digits folded to 0),
    its first words, its role, and the rules' signals (``rule=goal``, ``hedge``, ...)."""
    low = sentence.casefold()
    toks = [_norm(t) for t in _TOKEN_RE.findall(low)]
    names = [f"role={role}", *signals, "bias"]
    names += [f"w={t}" for t in toks]
    names += [f"b={a} {b}" for a, b in pairwise(toks)]
    if toks:
        names.append(f"first={toks[0]}")
        names.append(f"first2={' '.join(toks[:2])}")
        names.append(f"last={toks[-1]}")
    n = len(toks)
    names.append("len=" + ("1-3" if n <= 3 else "4-6" if n <= 6 else "7-12" if n <= 12 else "13-25" if n <= 25 else "26+"))
    if _NUM_RE.search(sentence):
        names.append("has_digit")
    if sentence.rstrip().endswith("?"):
        names.append("ends_q")
    if sentence.rstrip().endswith("!"):
        names.append("ends_bang")
    return sorted({zlib.crc32(x.encode()) & _MASK for x in names})


def softmax(z: Sequence[float]) -> list[float]:
    m = max(z)
    e = [math.exp(v - m) for v in z]
    s = sum(e)
    return [v / s for v in e]


@lru_cache(maxsize=1)
def _weights() -> dict[int, tuple[float, ...]]:
    from tailrent_tui.core._ledger_weights import WEIGHTS

    out: dict[int, tuple[float, ...]] = {}
    for line in WEIGHTS.split():
        key, _, vals = line.partition(":")
        out[int(key, 36)] = tuple(int(v, 36) / 1000 if v else 0.0 for v in vals.split(","))
    return out


def probabilities(feats: Sequence[int], weights: dict[int, tuple[float, ...]] | None = None) -> list[float]:
    """P(class) for each of CLASSES."""
    w = _weights() if weights is None else weights
    z = [0.0] * len(CLASSES)
    for f in feats:
        row = w.get(f)
        if row is not None:
            for i, v in enumerate(row):
                z[i] += v
    return softmax(z)
