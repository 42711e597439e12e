"""Catastrophic backtracking: find the repeats in a regex that can match one string in many ways.

Python's `re` backtracks, cannot be interrupted, and holds the GIL: a pattern
such as `(a+)+$` on forty `a`s and a `!` runs for minutes. User patterns (the
`decision_patterns` setting) run on every message, so they are checked once,
at load, and a risky one is refused with the reason.

The check works on the parsed pattern, not on a timed trial run: it is
deterministic (no deadline to tune for a slow machine) and instant. For each
unbounded repeat it builds a witness, a short string its body matches, and asks
the regex engine itself (on the body alone, so each question is tiny) whether
that string can be matched in two ways:

- one turn's text is also two turns' text (`(a+)+`, `(\\w+\\s?)+`, `(a|aa)+`),
- two turns can share their text out differently (`(\\s*,\\s*)+`), or
- two alternatives inside the body match the same text (`(a|a)+`).

Any of them makes the number of ways to match n characters grow exponentially, and
a failing suffix makes the engine try them all. A possessive repeat (`a++`)
or an atomic group (`(?>...)`) does not backtrack and is left alone, so the
error can offer them as the fix. What the check does not prove is that every
other pattern is linear: it catches the exponential shapes, not polynomial
ones such as `\\s*\\n+\\s*`, which stay bounded on messages of ordinary size.
"""

from __future__ import annotations

import re
from re import _compiler, _parser  # type: ignore[attr-defined]
from re import _constants as C  # type: ignore[attr-defined]
from typing import Any

_SAMPLE = [chr(c) for c in range(0x20, 0x300)] + ["\n", "\t"]
_REPEATS = (C.MAX_REPEAT, C.MIN_REPEAT)
_UNBOUNDED = 16  # a repeat allowed this many turns is treated as unbounded


def catastrophic_repeat(pattern: str, flags: int = re.IGNORECASE | re.MULTILINE) -> str | None:
    """Why `pattern` can backtrack catastrophically (the risky part, quoted), or None."""
    tree = _parser.parse(pattern, flags)
    # a witness made of the pattern's own letters overlaps most with the rest of it: `(.*a){20}` is tried on "aaa"
    global _hints
    _hints = sorted({chr(av) for op, av in _flat(tree) if op is C.LITERAL}) + _SAMPLE
    return _walk(tree, tree.state, pattern)


_hints: list[str] = _SAMPLE


def _flat(items: Any) -> list[tuple[Any, Any]]:
    out = []
    for op, av in items:
        out.append((op, av))
        if op in (*_REPEATS, C.POSSESSIVE_REPEAT):
            out += _flat(av[2])
        elif op is C.SUBPATTERN:
            out += _flat(av[-1])
        elif op is C.ATOMIC_GROUP:
            out += _flat(av)
        elif op is C.BRANCH:
            for alt in av[1]:
                out += _flat(alt)
        elif op in (C.ASSERT, C.ASSERT_NOT):
            out += _flat(av[1])
    return out


def _sub(state: Any, items: list[Any]) -> Any:
    return _parser.SubPattern(state, list(items))


def _compiled(state: Any, items: list[Any], flags: int) -> re.Pattern[str] | None:
    try:
        compiled: re.Pattern[str] = _compiler.compile(_sub(state, items), flags)
    except (re.error, TypeError, ValueError, IndexError, KeyError):  # a fragment that cannot stand alone: no verdict
        return None
    return compiled


def _witness(state: Any, items: Any, flags: int, depth: int = 0) -> str | None:
    """A short string the sequence `items` matches, or None when none is found."""
    if depth > 50:
        return None
    out = []
    for op, av in items:
        if op is C.LITERAL:
            out.append(chr(av))
        elif op in (C.NOT_LITERAL, C.IN, C.ANY, C.CATEGORY):
            one = _compiled(state, [(op, av)], flags)
            ch = next((c for c in _hints if one and one.fullmatch(c)), None)
            if ch is None:
                return None
            out.append(ch)
        elif op in (*_REPEATS, C.POSSESSIVE_REPEAT):
            lo, hi, body = av
            w = _witness(state, body, flags, depth + 1)
            if w is None:
                return None
            out.append(w * min(max(lo, 2), hi))
        elif op is C.SUBPATTERN:
            w = _witness(state, av[-1], flags, depth + 1)
            if w is None:
                return None
            out.append(w)
        elif op is C.ATOMIC_GROUP:
            w = _witness(state, av, flags, depth + 1)
            if w is None:
                return None
            out.append(w)
        elif op is C.BRANCH:
            # the longest alternative: a longer witness shows more ways to split it
            found = [x for x in (_witness(state, alt, flags, depth + 1) for alt in av[1]) if x is not None]
            if not found:
                return None
            out.append(max(found, key=len))
        elif op in (C.AT, C.ASSERT, C.ASSERT_NOT):
            continue
        else:  # group references, conditionals: no safe guess
            return None
    return "".join(out)


def _ambiguous(state: Any, body: Any, flags: int) -> bool:
    """Whether the repeat's body can match its witness in more than one way."""
    w = _witness(state, body, flags)
    if w is None or not _gives_back(body):
        return False
    one = _compiled(state, list(body), flags)
    twice = _compiled(state, [(C.MAX_REPEAT, (2, C.MAXREPEAT, body))], flags)
    if w and twice is not None and twice.fullmatch(w):
        return True  # one turn's text is also two turns' text: (a+)+, (a|aa)+
    if w and one is not None:
        ww = w + w
        for k in range(1, len(ww)):
            if k != len(w) and one.fullmatch(ww, 0, k) and one.fullmatch(ww, k):
                return True  # two turns can share their text out differently: (\s*,\s*)+
    return any(_branch_overlaps(state, alts, flags) for alts in _branches(body))


def _gives_back(items: Any) -> bool:
    """Whether a backtracking choice lies in `items` outside any possessive repeat or atomic group."""
    for op, av in items:
        if (op in _REPEATS and av[0] != av[1]) or op is C.BRANCH:
            return True
        if (op in _REPEATS and _gives_back(av[2])) or (op is C.SUBPATTERN and _gives_back(av[-1])):
            return True
    return False


def _branches(items: Any) -> list[list[Any]]:
    out = []
    for op, av in items:
        if op is C.BRANCH:
            out.append(av[1])
            for alt in av[1]:
                out += _branches(alt)
        elif op in (*_REPEATS, C.POSSESSIVE_REPEAT):
            out += _branches(av[2])
        elif op is C.SUBPATTERN:
            out += _branches(av[-1])
    return out


def _branch_overlaps(state: Any, alts: list[Any], flags: int) -> bool:
    """Two alternatives that match the same text: (a|a), which the parser keeps as a(?:|)."""
    for i, alt in enumerate(alts):
        wi = _witness(state, alt, flags)
        if wi is None:
            continue
        for j, other in enumerate(alts):
            if i != j and (m := _compiled(state, list(other), flags)) is not None and m.fullmatch(wi):
                return True
    return False


def _walk(items: Any, state: Any, pattern: str) -> str | None:
    for op, av in items:
        children: list[Any] = []
        if op in _REPEATS:
            _lo, hi, body = av
            if hi >= _UNBOUNDED and _ambiguous(state, body, state.flags):
                return (
                    "a repeat whose body can match the same text in more than one way (as in `(a+)+` or `(a|a)+`) "
                    "backtracks catastrophically on a near miss; make the inner repeat possessive (`a++`) "
                    "or the group atomic (`(?>...)`)"
                )
            children = [body]
        elif op is C.POSSESSIVE_REPEAT:
            children = [av[2]]
        elif op is C.SUBPATTERN:
            children = [av[-1]]
        elif op in (C.ATOMIC_GROUP,):
            children = [av]
        elif op is C.BRANCH:
            children = list(av[1])
        elif op in (C.ASSERT, C.ASSERT_NOT):
            children = [av[1]]
        elif op is C.GROUPREF_EXISTS:
            children = [x for x in av[1:] if x is not None]
        for child in children:
            found = _walk(child, state, pattern)
            if found:
                return found
    return None
