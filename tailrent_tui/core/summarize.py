"""Summarizers, and what a fold asks of them.

A policy never calls a summarizer: it yields a `Summarize` request (the span
and a token budget) and is handed back a `Summary`. Core's synchronous driver
answers with one of the summarizers below; the agent's asynchronous driver may
ask a model first (models/summarizer.py `ModelSummarizer`). Either way the policy
checks the text with `check_summary` and, if it is unusable, falls back to the
extractive summarizer here, saying why.

Summarizers take core Messages or wire dicts (anything with a role and content).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from tailrent_tui.core.messages import Message


@runtime_checkable
class Summarizer(Protocol):
    name: str

    def summarize(self, messages: Sequence[Any]) -> str: ...


@dataclass(frozen=True)
class Summarize:
    """A plan's request: a summary of `span` in at most `budget` tokens.

    `ids` are the messages the fold takes, when `span` is not them as they are (a ledger's
    statements taken out of their text): a summary written ahead for the same messages
    answers it whatever the ledger carries by then."""

    span: tuple[Message, ...]
    budget: int
    ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class Summary:
    """A driver's answer to `Summarize`.

    `truncated` says the writer stopped at the budget (a model's
    done_reason "length"); `error` says it could not write one at all.
    `asked` is the user message a model answered with it, in the conversation's
    own context: the fold keeps it as the summary's header, and a request sends
    the summary as that question and its answer, the tokens the engine cached.
    `rejected`: this is a fallback's text, written because the first summary was refused, and why.
    """

    text: str
    by: str
    truncated: bool = False
    error: str | None = None
    asked: str | None = None
    #: a fallback's text written when the first summarizer's was refused: why (the fold record says so)
    rejected: str | None = None
    #: the statements of a ledger the engine has read already for this fold (sent ahead with a summary
    #: prepared while the user read), in that order: the fold's ledger keeps them first, in that order, and
    #: puts what is new after them, so that what the engine read stays one run it can shift (`stable_order`)
    ledger_order: tuple[str, ...] = ()


@dataclass(frozen=True)
class Review:
    """A plan's request: show this fold before it is applied (the fold preview).

    `span` is what it folds; `record` the fold as prepared (the summary, the
    facts the guard found dropped and repaired, tokens before and after)."""

    record: Any  # FoldRecord (messages.py); Any keeps this module free of the import cycle
    span: tuple[Message, ...]
    note: str | None = None
    """one line about the last edit, when it was not used (empty, chat-template tokens)"""


@dataclass(frozen=True)
class Verdict:
    """A driver's answer to `Review`: apply it, drop it, or an edited summary to
    prepare (and guard) again and show once more."""

    apply: bool
    text: str | None = None


def role_content(m: Any) -> tuple[str, str]:
    """(role, content) of a wire dict or a core Message."""
    if type(m) is Message:
        return m.role, m.content
    if isinstance(m, Mapping):
        return str(m["role"]), str(m.get("content", ""))
    return str(m.role), str(m.content)


# .NET's Char.IsWhiteSpace set, which the article's TrimEnd() strips; Python's
# str.rstrip() would also strip U+001C..U+001F.
_DOTNET_WHITESPACE = (
    "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)


class LossySummarizer:
    """The article's mock: the first 12 words of each message, nothing else.

    Words are split on single spaces only (newlines stay inside words), as the
    C# `Split(' ', RemoveEmptyEntries)` does. It stands in for a summarizer
    under pressure: it keeps the shape of each message and drops the specifics;
    folding its output again loses more each time (the fold of a fold).
    """

    name = "mock-lossy"

    def __init__(self, words: int = 12) -> None:
        self.words = words

    def summarize(self, messages: Sequence[Any]) -> str:
        lines = []
        for m in messages:
            role, content = role_content(m)
            words, more = first_words(content, self.words)
            lines.append(f"- {role}: {' '.join(words)}{'...' if more else ''}")
        return "\n".join(lines).rstrip(_DOTNET_WHITESPACE)


def first_words(text: str, n: int) -> tuple[list[str], bool]:
    """The first `n` words split on single spaces, and whether more follow.

    Splits only as far as needed, so a huge message costs no more than a small one.
    """
    limit = n + 1
    while True:
        parts = text.split(" ", limit)
        rest = parts[limit] if len(parts) > limit else ""
        words = [w for w in parts[:limit] if w]
        if len(words) > n or not rest.strip(" "):
            if rest.strip(" "):
                return words[:n], True
            return words[:n], len(words) > n
        limit *= 4


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_FACT_PATTERNS = [
    re.compile(r"\d"),  # numbers, with whatever unit follows them
    re.compile(
        r"(?:^|\s)[~.]?/?[\w.-]+/[\w./-]+|\b[\w-]+\.(?:py|js|ts|tsx|md|json|jsonl|toml|ya?ml|txt|rs|go|cs|java|c|h|cpp|sh|cfg|ini|lock|sql|html|css)\b"
    ),
    re.compile(r"\b(?:because|since|so that|due to|in order to|therefore|otherwise|reason)\b", re.I),
    re.compile(r"\bDECISION:|\b(?:decided|decision|must|never|always)\b", re.I),
    re.compile(r"`[^`]+`|\b[a-z]+_[a-z_]+\b|\b[a-z]+[A-Z]\w*\b|\b[A-Z][a-z]+[A-Z]\w*\b"),
]
_NAME = re.compile(r"\b[A-Z][\w-]*")


def _is_fact_sentence(sentence: str) -> bool:
    if any(p.search(sentence) for p in _FACT_PATTERNS):
        return True
    # A capitalized word after the first one is most likely a name (Redis, Alice).
    return any(m.start() > 0 for m in _NAME.finditer(sentence.lstrip()))


def cut_to_budget(text: str, budget: int, count: Any) -> str:
    """``text`` as a model asked for at most ``budget`` tokens would return it: whole when it
    fits, else cut at the budget (the article's harness sent max_tokens with its summary
    request; a mock summarizer has no such stop). Counts only what it may keep: a text that
    grew to megabytes costs no more than one the size of the budget."""
    head = text[: budget * 8]  # no tokenizer packs more than ~8 characters a token
    if len(head) == len(text) and count(text) <= budget:
        return text
    lo, hi = 0, len(head)
    while lo < hi:  # the longest prefix that fits
        mid = (lo + hi + 1) // 2
        if count(head[:mid]) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return head[:lo]


class ExtractiveSummarizer:
    """A careful extractive summarizer: keeps load-bearing sentences verbatim.

    Keeps, word for word: every sentence that carries a number, a path or file name,
    a name (a capitalized word inside a sentence, an identifier), a reason
    (because, since, so that, due to ...) or a decision (DECISION:, decided, must,
    never). Loses: the other sentences, each cut to its first 6 words. It is the
    fallback whenever a model's summary is rejected.
    """

    name = "mock-extractive"
    short_words = 6

    def summarize(self, messages: Sequence[Any]) -> str:
        lines = []
        for m in messages:
            parts = []
            role, content = role_content(m)
            for sentence in _SENTENCE_END.split(content):
                sentence = sentence.strip()
                if not sentence:
                    continue
                if _is_fact_sentence(sentence):
                    parts.append(sentence)
                else:
                    words = sentence.split()
                    cut = len(words) > self.short_words
                    parts.append(" ".join(words[: self.short_words]) + ("..." if cut else ""))
            lines.append(f"- {role}: {' '.join(parts)}")
        return "\n".join(lines)


# Special tokens of the common chat templates (ChatML, Gemma, Llama 2/3, Mistral,
# Phi): a base model that does not know the template writes them as text.
TEMPLATE_TOKEN = re.compile(
    r"<\|[a-z_]+(?:\|>|\b)|<(?:start|end)_of_turn>|</?s>|\[/?INST\]|<<SYS>>|<</SYS>>|<bos>|<eos>",
    re.IGNORECASE,
)


def _repetitive(text: str) -> bool:
    """Does the text loop? Half its lines are repeats of a line said four times or
    more, or under a third of its 4-word runs are distinct."""
    lines = [ln.strip() for ln in text.splitlines() if len(ln.strip()) >= 8]
    counts: dict[str, int] = {}
    for ln in lines:
        counts[ln] = counts.get(ln, 0) + 1
    looped = sum(n for n in counts.values() if n >= 4)
    if lines and looped * 2 >= len(lines):
        return True
    words = text.split()
    if len(words) < 48:
        return False
    grams = [" ".join(words[i : i + 4]) for i in range(len(words) - 3)]
    return len(set(grams)) * 3 < len(grams)


# A reply to the user, not a summary of the conversation: it opens as an answer does.
_ANSWER_RE = re.compile(
    r"^\W*(?:sure|certainly|of course|absolutely|great|thanks|thank you|hello|hi|hey|yes|no,|okay|ok,|happy to|"
    r"i can|i['’]ll|i will|i['’]d|i would|i['’]m|let me|here is|here['’]s|here are|to answer|you can|you should|you['’]re|"
    r"as an ai|good question)\b",
    re.IGNORECASE,
)
# The instruction written back: a model that echoes what it was asked.
_ECHO_RE = re.compile(
    r"\b(?:summari[sz]e (?:this|the|messages|the conversation|the part)|compress part of a coding session|"
    r"write a short summary|keep verbatim every|answer with the summary only)\b",
    re.IGNORECASE,
)
#: a model's summary must save at least this share of its span, or the fold is not worth its loss
MIN_SAVING = 0.1
#: a summary of this many content words or more must take at least this share of them from its span:
#: a small model that writes back its system prompt or an app notice is not summarizing the span
ABOUT_MIN_WORDS = 12
ABOUT_MIN_SHARE = 0.3
_CONTENT_WORD_RE = re.compile(r"[^\W\d_]{4,}")


def _about_its_span(text: str, span: Sequence[Any]) -> bool:
    words = [w.casefold() for w in _CONTENT_WORD_RE.findall(text)]
    if len(words) < ABOUT_MIN_WORDS or not span:
        return True
    source = {w.casefold() for m in span for w in _CONTENT_WORD_RE.findall(role_content(m)[1])}
    return sum(w in source for w in words) >= ABOUT_MIN_SHARE * len(words)


def check_summary(summary: Summary, *, span_tokens: int, count: Any, span: Sequence[Any] = ()) -> str | None:
    """Why a summary cannot be used for a fold, or None when it can.

    Rejected: no text, an error, a text cut at the budget, chat-template tokens,
    a text that repeats itself when its span does not (a faithful summary of a
    repetitive log may repeat too), one that writes back its instruction or
    answers the conversation instead of summarizing it, one whose words mostly come from
    elsewhere (a system prompt or an app notice written back), or one that saves under
    a tenth of its span (:data:`MIN_SAVING`).
    """
    text = summary.text.strip()
    if summary.error:
        return summary.error
    if not text:
        return "it was empty"
    if summary.truncated:
        return "it was cut at its token budget"
    if TEMPLATE_TOKEN.search(text):
        return "it holds chat-template tokens"
    if _repetitive(text) and not _repetitive("\n".join(role_content(m)[1] for m in span)):
        return "it repeats itself"
    if _ECHO_RE.search(text):
        return "it repeats the summary instruction"
    if _ANSWER_RE.match(text):
        return "it answers the conversation instead of summarizing it"
    if not _about_its_span(text, span):
        return "it is not about its span (most of its words are not in it)"
    tokens = count(text)
    if tokens >= span_tokens:
        return f"it was not shorter than its span ({tokens:,} >= {span_tokens:,} tokens)"
    if tokens > span_tokens * (1 - MIN_SAVING):
        return f"it saves under a tenth of its span ({tokens:,} of {span_tokens:,} tokens)"
    return None


def check_edit(text: str) -> str | None:
    """Why a summary the user edited in the fold preview cannot be used; None when it can.

    Only what no reading of the user's intent can mend: nothing to fold into, or
    chat-template tokens (a local model would read them as a turn of its own). An edit
    that is not smaller than its span is shown again, marked, and cannot be applied."""
    if not text.strip():
        return "it is empty (the span would fold into nothing)"
    found = TEMPLATE_TOKEN.search(text)
    if found:
        return f"it holds chat-template tokens ({found.group(0).strip()[:20]}), which a local model reads as a turn of its own"
    return None


def fit_budget(text: str, budget: int, count: Any) -> str:
    """`text` cut so it counts at most `budget` tokens, with a marker in the middle
    saying how much was cut: the first and the last lines stay (where the span
    began and what it led to). Whole lines when that keeps at least two of them,
    else words (a long first paragraph, one unbroken line). What the cut drops
    of facts, the guard finds. Empty when not even the marker fits."""
    if count(text) <= budget:
        return text
    lines = text.splitlines()
    if len(lines) > 2:
        kept, cut = _fit_units(lines, "line", "\n", "- ", budget, count)
        if kept >= 2:
            return cut
    kept, cut = _fit_units(text.split(), "word", " ", "", budget, count)
    return cut if count(cut) <= budget else ""


def _fit_units(units: list[str], unit: str, joiner: str, prefix: str, budget: int, count: Any) -> tuple[int, str]:
    """The most of `units` (the first half and the last half) that fit with the marker: (how many, the text)."""

    def cut(keep: int) -> str:
        head, tail = keep - keep // 2, keep // 2
        dropped = len(units) - keep
        marker = f"{prefix}[... {dropped:,} {unit}{'s' if dropped != 1 else ''} of this summary cut to fit its budget ...]"
        return joiner.join([*units[:head], marker, *(units[len(units) - tail :] if tail else [])])

    lo, hi = 0, len(units) - 1  # the most units that fit lies in [lo, hi]
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count(cut(mid)) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return lo, cut(lo)
