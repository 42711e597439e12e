"""The fact guard: what a fold must not lose, and the decisions no fold may touch.

A fold (rung 5) keeps the shape of a span and loses its specifics; a fold of a
fold loses more. The guard works on both sides of a fold:

* before it, :class:`DecisionDetector` pins messages that state a decision, so
  they never enter the foldable pool (the article's fix, made automatic);
* around it, :func:`extract_facts` collects the span's load-bearing details
  (numbers with units, versions, names, paths, URLs, quoted strings, reason
  clauses, watch words), :func:`lost_facts` finds which the summary dropped,
  and :func:`repair_summary` appends those verbatim under
  :data:`REPAIR_HEADING`, so a summary of a summary still carries them.

What the guard keeps: every extracted fact, verbatim, through any number of
nested folds. What it cannot keep: meaning that is not a fact by these rules
(the verb of a decision, "rotate them on every use", survives only if the
message is pinned or a watch word names it).

Everything here is pure, synchronous and deterministic: no I/O, no clock.

What the extractor returns on the article's filler (the harness's chatter):

* "Turn 12: Ran the integration suite against the staging cluster." -> nothing
  ("Turn" and "Ran" start a sentence; "12" has no unit).
* "Turn 3: Reviewed the PR that touches the rate limiter." -> nothing ("PR" is
  on the chatter-acronym stop list).
* "Turn 7: Investigated a flaky test in the billing module.", "Checked memory
  usage on the worker pool overnight.", "Updated the changelog for the
  upcoming release." -> nothing.
* "Turn 12: done, no issues found." -> nothing.
* "[inline] token token token ..." -> nothing.
* a spill pointer "[spilled tool result: tool_call_3] ~500 tokens written to
  /tmp/tailrent-spill/<guid>.json (id=<guid>). Preview: ..." -> "tool_call_3",
  "500 tokens", the spill path and the GUID: exactly what a pointer is for.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Literal, NamedTuple

from pydantic import BaseModel, Field, field_validator

FactKind = Literal["number", "version", "name", "path", "url", "quoted", "reason", "watch"]

REPAIR_HEADING = "Facts kept verbatim:"
"""Starts the line that :func:`repair_summary` appends to a summary."""

# One line, items separated by "; ": a separator costs one token, where a
# bullet list pays a newline and a "- " per item (two tokens or more), and
# the heading is paid once either way.
_REPAIR_SEPARATOR = "; "

REASON_THRESHOLD = 0.8
"""A reason clause is present when at least this share of its content words is."""

REASON_MAX_WORDS = 40
"""A reason clause runs to the end of its sentence, but never past this many words
(tool output without punctuation would otherwise make a clause of a log)."""


class Fact(BaseModel, frozen=True):
    """One load-bearing detail, in the surface form it had where it was found."""

    text: str = Field(min_length=1, description="verbatim surface form, e.g. '15 minute'")
    kind: FactKind

    @field_validator("text")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("a fact's text must contain a non-space character")
        return value


class _Cand(NamedTuple):
    start: int
    end: int
    kind: str
    text: str


# --------------------------------------------------------------------------
# Word lists
# --------------------------------------------------------------------------

_MONTHS = (
    "january february march april may june july august september october november december "
    "jan feb mar apr jun jul aug sep sept oct nov dec"
)
_DAYS = "monday tuesday wednesday thursday friday saturday sunday mon tue tues wed thu thur thurs fri sat sun"

# Capitalised words that are not names even mid-sentence (titles, shouting,
# a capital after an abbreviation): function words, pronouns, months, days,
# interjections.
_CAPITAL_STOP = frozenset(
    (
        "the a an and but or nor so yet for if when while because since although though unless until "
        "as at by with from to of in on into onto over under about after before between through during "
        "without within via per than then there here this that these those it its we our ours you your "
        "yours he him his she her they them their i me my mine us who whom whose what which where why how "
        "all any both each every few many more most much other some such no not only own same too very "
        "can will just should would could may might must shall do does did done is are was were be been "
        "being have has had having let lets yes ok okay thanks thank please sure hi hello hey sorry also "
        "now today tomorrow yesterday tonight mr mrs ms dr st see note "
        f"{_MONTHS} {_DAYS}"
    ).split()
)

# Acronyms that chatter is full of and no summary needs to keep, and the
# markers that label a message rather than say something in it.
_CAPS_STOP = frozenset(
    "DECISION SUMMARIZE NOTE TODO FIXME XXX OK PR PRS FYI LGTM WIP ASAP IMO IMHO AFAIK TBD BTW "
    "TLDR TL DR AM PM AND OR THE IS IT IN ON TO OF NO YES ALL".split()
)

# Words that carry no content in a reason clause: the markers themselves and
# function words. Negations stay content words on purpose: a reason that lost
# its "can't" says the opposite.
_REASON_STOP = frozenset(
    (
        "because since due so that given order owing the a an is are was were be been being it its "
        "this these those of in on at by for with to from and or but as we our you your they their "
        "he she his her i my me us them there here has have had do does did will would should could "
        "can may might must shall just very really also then than such into onto about any some "
        "which who what when where how if"
    ).split()
)

_WORD_NUMBERS = (
    "two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty|forty|"
    "forty-five|fifty|sixty|ninety"
)

_EXTENSIONS = (
    "py|pyi|pyx|ipynb|js|mjs|cjs|jsx|ts|tsx|json|jsonl|toml|yaml|yml|ini|cfg|conf|env|md|rst|txt|"
    "csv|tsv|log|sh|bash|zsh|fish|ps1|bat|cmd|cs|csproj|fs|sln|go|mod|sum|rs|java|kt|kts|swift|rb|"
    "php|c|h|cc|cpp|hpp|cxx|hxx|scala|sql|html|htm|css|scss|sass|less|tcss|xml|proto|lock|tf|"
    "tfvars|gradle|vue|svelte|lua|pl|jl|ex|exs|erl|hs|ml|clj|dart|gguf|bin|wasm|zip|gz|tgz|tar|"
    "pdf|png|jpg|jpeg|svg|gif|db|sqlite|parquet|pem|crt|key|service|plist|cmake|mk|dll|so|dylib|exe"
)

# --------------------------------------------------------------------------
# Patterns
# --------------------------------------------------------------------------

_URL_RE = re.compile(r"(?=[hfwHFW])\b(?:https?|ftp|file|wss?)://[^\s<>\"'`;“”‘’]+", re.IGNORECASE)

_PATH_RE = re.compile(
    r"(?<![\w.@+/~-])(?:~|\.\.?)?(?:[\w.@+-]*+/)++[\w.@+-]*+"
    r"|(?<![\w\\])[A-Za-z]:\\[^\s\"'<>|;]+"
)
# A dotted word; the last segment must be a known extension (checked after).
_FILENAME_RE = re.compile(r"(?<![\w./-])[\w-]++(?:\.[\w-]++)++(?![\w/-])")
_DOTFILE_RE = re.compile(r"(?<![\w./-])\.(?:env|gitignore|dockerignore|bashrc|zshrc|profile|npmrc|editorconfig)(?![\w/-])")
_EXTENSION_SET = frozenset(_EXTENSIONS.split("|"))

_VERSION_RE = re.compile(
    r"(?<![\w.])(?=[vV\d]|[A-Za-z]+\d)(?:"
    r"[vV]\d+(?:\.\d+)*"
    r"|\d+\.\d+\.\d+(?:\.\d+)?"
    r"|[A-Za-z]+\d+(?:\.\d+)+"
    r")(?:-(?:alpha|beta|rc|dev|pre)[\w.]*)?(?![\w]|\.\d)"
)

_NUM = r"(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
_NUMX = rf"(?:{_NUM}(?:[kK]|M|bn)?)"
_RANGE = rf"{_NUMX}(?:\s?(?:-|–|to)\s?{_NUMX})?"
# Units a number may be separated from by a space or a hyphen ("15 minute",
# "15-minute", "512 MB"): long enough not to be mistaken for something else.
_SPACED_UNITS = (
    "nanoseconds?|microseconds?|milliseconds?|ms|µs|seconds?|secs?|minutes?|mins?|hours?|hrs?|"
    "days?|weeks?|wks?|months?|years?|yrs?|"
    "bytes?|bits?|[KMGTP]i?B|[KMG]bps|[KMGT]b|"
    "hz|khz|mhz|ghz|tokens?|toks?|mtok|ktok|turns?|messages?|msgs?|requests?|reqs?|calls?|retries|"
    "retry|attempts?|rows?|lines?|files?|users?|items?|matches|chars?|characters?|words?|folds?|"
    "workers?|threads?|cores?|cpus?|gpus?|replicas?|nodes?|pods?|connections?|conns?|instances?|"
    "shards?|partitions?|tests?|commits?|steps?|epochs?|batch(?:es)?|records?|entries|entry|"
    "pages?|sessions?|queries|query|jobs?|tasks?|errors?|failures?|warnings?|percent|pct|px|dpi|"
    "fps|rps|qps|tps|rpm|ops|dollars?|cents?|usd|eur|gbp|°c|°f|degrees?"
)
# Single letters and tiny abbreviations only count glued to the number ("30s",
# "5m", "2h", "7d", "10us"): spaced, they are ordinary words or letters.
_GLUED_UNITS = "s|m|h|d|w|y|us|ns"
_RATE = r"(?:/[A-Za-z]{1,10}(?![\w]))?"
_NUMBER_RE = re.compile(
    # The lookahead first: most positions are not a digit, and fail at once.
    r"(?=[\d$€£¥])(?<![\w.,$€£¥#-])(?:"
    r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?(?![\w-])"
    r"|\d{1,2}:\d{2}(?::\d{2})?(?:\s?(?:-|–|to)\s?\d{1,2}:\d{2}(?::\d{2})?)?(?:\s?(?:UTC|GMT|am|pm))?(?![\w:])"
    rf"|[$€£¥]\s?{_NUMX}{_RATE}"
    rf"|{_RANGE}(?:\s?[%×]|x(?!\w)"
    rf"|(?:[ \u00a0]|-)?(?:{_SPACED_UNITS})(?!\w){_RATE}"
    rf"|(?:{_GLUED_UNITS})(?!\w){_RATE})"
    rf"|{_NUM}(?:[kK]|M|bn)(?!\w)"
    r")",
    re.IGNORECASE,
)
_WORD_NUMBER_RE = re.compile(
    rf"(?=[tfsenoTFSENO])\b(?<!-)(?:{_WORD_NUMBERS}|one(?=-))[ -](?:seconds?|minutes?|hours?|days?|weeks?|months?|years?)(?!\w)",
    re.IGNORECASE,
)
_ISSUE_RE = re.compile(r"(?<![\w&#])#\d+(?!\w)")


def _numbers(text: str) -> Iterable[re.Match[str]]:
    yield from _NUMBER_RE.finditer(text)
    yield from _WORD_NUMBER_RE.finditer(text)
    yield from _ISSUE_RE.finditer(text)


# A name with its number or edition ("SOC 2", "ISO 27001", "Python 3.12",
# "PostgreSQL 16"): the number is what a summary tends to drop.
_NAMED_NUMBER_RE = re.compile(r"(?<![\w.])(?:[A-Z][a-zA-Z]+|[A-Z]{2,}[a-z]*)[ \u00a0]\d+(?:\.\d+)*(?!\w|\.\d)")
# A month, capitalised, with an optional day and year ("October", "March 3",
# "June 2027"): a deadline or a date. Capitalised "May" mid-sentence is the month.
_MONTH_DATE_RE = re.compile(
    r"(?<![\w-])(?:January|February|March|April|May|June|July|August|September|October|November|December)"
    r"(?:[ \u00a0]\d{1,2}(?:st|nd|rd|th)?)?(?:,?[ \u00a0]\d{4})?(?![\w-])"
)
_UUID_RE = re.compile(r"(?=[0-9a-fA-F])(?<![\w-])[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}(?![\w-])")
_SHA_RE = re.compile(r"(?=[0-9a-f])(?<![\w-])(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}(?![\w-])")

# Tokens worth classifying: starting with a capital or underscore, or a
# lowercase run followed by a capital, digit or underscore. Plain lowercase
# words never become names, so the regex skips them without a Python call.
_TOKEN_RE = re.compile(r"\b(?:[A-Z_]|[a-z]+[A-Z0-9_])[A-Za-z0-9_]*")
_CAPS_RE = re.compile(r"[A-Z][A-Z0-9]+s?")
_CAMEL_RE = re.compile(r"[a-z][A-Z]")
_ALNUM_NAME_RE = re.compile(r"[a-z]{2,}\d+[a-z0-9]*")
_CAPITALISED_RE = re.compile(r"[A-Z][a-z]+\d*")

_QUOTED_RE = re.compile(
    r"(?=[\"“‘`'])(?:\"[^\"\n]*[^\s\"][^\"\n]*\""
    r"|“[^”\n]*[^\s”][^”\n]*”"
    r"|‘[^’\n]*[^\s’][^’\n]*’"
    r"|`[^`\n]*[^\s`][^`\n]*`"
    r"|(?<![\w'])'[^'\n]*[^\s'][^'\n]*'(?!\w))"
)

_REASON_RE = re.compile(
    r"(?=[bsdgioBSDGIO])(?<!\w)(?:because|since|due to|so that(?!['’])|given that|in order to|owing to)(?!\w)",
    re.IGNORECASE,
)
_CLAUSE_END_RE = re.compile(r"[.!?](?=[\s\"'”’)\]]|$)|[;\n\r]")
_TEMPORAL_SINCE_RE = re.compile(
    r"\s+(?:"
    rf"\d|v\d|(?:{_MONTHS.replace(' ', '|')}|{_DAYS.replace(' ', '|')})\b"
    r"|(?:yesterday|today|tonight|then|ever|forever|before|last|early|late|morning|afternoon|evening|"
    r"noon|midnight|launch|long)\b"
    r"|(?:the|this|our)\s+(?:start|beginning|launch|release|last|first|outage|incident|upgrade|migration|"
    r"morning|afternoon|evening|weekend|week|month|year|day|deploy|merge)\b"
    r"|(?:we|i|you|they|it|he|she)\s+(?:started|began|moved|switched|migrated|upgraded|deployed|launched|"
    r"last|first|merged|shipped|joined|left|came)\b"
    r")",
    re.IGNORECASE,
)
_EVER_SINCE_RE = re.compile(r"\bever\s+$", re.IGNORECASE)
_FIRST_WORDS_RE = re.compile(rf"(?:\S+\s+){{0,{REASON_MAX_WORDS - 1}}}\S+|")

_BLOCK_RE = re.compile(rf"(?m)^[ \t]*{re.escape(REPAIR_HEADING)}[ \t]?(.*)$")
# A fold summary's own header ("[fold #3 · 6 messages · depth 2]", the
# article's "[folded 6 messages]") is machinery, not a fact of the span.
_FOLD_HEADER_RE = re.compile(r"(?m)^[ \t]*\[(?:fold #\d+|folded \d+ messages?)\b[^\]\n]*\]")
_BLOCK_LINE_RE = re.compile(rf"(?m)^[ \t]*{re.escape(REPAIR_HEADING)}.*(?:\n|$)")

_WORD_RE = re.compile(r"[^\W_]+(?:'[^\W_]+)*")

# Which atom wins an overlap of equal length.
_PRIORITY = {"url": 0, "path": 1, "version": 2, "number": 3, "name": 4}

_OPENERS = " \t\"'“‘([{*_>#`-–—•"
_QUOTE_PAIRS = {'"': '"', "“": "”", "‘": "’", "`": "`", "'": "'"}


# --------------------------------------------------------------------------
# Extraction
# --------------------------------------------------------------------------


def _watch_patterns(watch: Iterable[str]) -> list[re.Pattern[str]]:
    patterns = []
    for word in watch:
        if not isinstance(word, str) or not word.strip():
            raise ValueError(f"watch word {word!r} is empty; a watch word needs at least one character")
        word = word.strip()
        # Left boundary only: "rotate" is watched in "rotated", not in "prorate".
        left = r"(?<!\w)" if re.match(r"\w", word) else ""
        patterns.append(re.compile(left + re.escape(word), re.IGNORECASE))
    return patterns


def _sentence_initial(text: str, start: int) -> bool:
    i = start - 1
    while i >= 0 and text[i] in _OPENERS:
        i -= 1
    return i < 0 or text[i] in ".!?:\n\r"


def _trim_path(text: str, start: int, end: int) -> int:
    while end > start and text[end - 1] in ".,:":
        end -= 1
    return end


def _has_extension(path: str) -> bool:
    head, dot, ext = path.rpartition(".")
    return bool(head) and ext.lower() in _EXTENSION_SET


def _path_ok(path: str) -> bool:
    if path[:1] == "~" or path.startswith(("./", "../")) or re.match(r"[A-Za-z]:\\", path):
        return True
    segments = [s for s in path.split("/") if s]
    if not segments or all(s.replace(".", "").replace(",", "").isdigit() for s in segments):
        return False
    slashes = path.count("/")
    if path.startswith("/"):
        return slashes >= 2
    return slashes >= 2 or path.endswith("/") or _has_extension(path)


def _reason_clauses(text: str) -> list[_Cand]:
    out: list[_Cand] = []
    covered = 0
    for m in _REASON_RE.finditer(text):
        if m.start() < covered:
            continue
        if m.group(0).lower() == "since" and (
            _TEMPORAL_SINCE_RE.match(text, m.end()) or _EVER_SINCE_RE.search(text[max(0, m.start() - 12) : m.start()])
        ):
            continue
        end_m = _CLAUSE_END_RE.search(text, m.end())
        end = end_m.start() if end_m else len(text)
        clause = _FIRST_WORDS_RE.match(text, m.start(), end).group(0)
        clause = clause.rstrip(" \t,:-–—.!?")
        if clause.count(")") > clause.count("("):
            clause = clause.rstrip(")")
        after = clause[len(m.group(0)) :]
        if not _content_words(after):
            continue
        out.append(_Cand(m.start(), m.start() + len(clause), "reason", clause))
        covered = m.start() + len(clause)
    return out


def _name_cands(text: str, initial_rule: bool) -> list[_Cand]:
    out: list[_Cand] = []
    pending: list[tuple[int, str]] = []
    mid: set[str] = set()
    for m in _TOKEN_RE.finditer(text):
        tok = m.group(0)
        if "_" in tok:
            if re.search(r"[A-Za-z]", tok) and tok.strip("_"):
                out.append(_Cand(m.start(), m.end(), "name", tok))
        elif _CAPS_RE.fullmatch(tok):
            core = tok[:-1] if tok.endswith("s") else tok
            upper = sum(c.isupper() for c in core)
            if (upper >= 2 or any(c.isdigit() for c in core)) and tok.upper() not in _CAPS_STOP:
                out.append(_Cand(m.start(), m.end(), "name", tok))
        elif _CAMEL_RE.search(tok) or _ALNUM_NAME_RE.fullmatch(tok):
            out.append(_Cand(m.start(), m.end(), "name", tok))
        elif _CAPITALISED_RE.fullmatch(tok) and tok.lower() not in _CAPITAL_STOP:
            if initial_rule and _sentence_initial(text, m.start()):
                pending.append((m.start(), tok))
            else:
                mid.add(tok)
                out.append(_Cand(m.start(), m.end(), "name", tok))
    # A capital at a sentence start is a name only if the word is capitalised
    # mid-sentence somewhere too ("Redis is down. We moved to Redis.").
    out.extend(_Cand(s, s + len(t), "name", t) for s, t in pending if t in mid)
    return out


def _atoms(text: str, initial_rule: bool) -> list[_Cand]:
    cands: list[_Cand] = []
    for m in _URL_RE.finditer(text):
        end = m.end()
        while end > m.start() and text[end - 1] in ".,:!?)]}":
            if text[end - 1] == ")" and text.count("(", m.start(), end) >= text.count(")", m.start(), end):
                break
            end -= 1
        cands.append(_Cand(m.start(), end, "url", text[m.start() : end]))
    for m in _PATH_RE.finditer(text):
        end = _trim_path(text, m.start(), m.end())
        if end > m.start() and _path_ok(text[m.start() : end]):
            cands.append(_Cand(m.start(), end, "path", text[m.start() : end]))
    for m in _FILENAME_RE.finditer(text):
        if _has_extension(m.group(0)):
            cands.append(_Cand(m.start(), m.end(), "path", m.group(0)))
    for m in _DOTFILE_RE.finditer(text):
        cands.append(_Cand(m.start(), m.end(), "path", m.group(0)))
    for m in _VERSION_RE.finditer(text):
        cands.append(_Cand(m.start(), m.end(), "version", m.group(0)))
    for m in _numbers(text):
        cands.append(_Cand(m.start(), m.end(), "number", m.group(0)))
    for rx in (_UUID_RE, _SHA_RE):
        for m in rx.finditer(text):
            cands.append(_Cand(m.start(), m.end(), "name", m.group(0)))
    for m in _NAMED_NUMBER_RE.finditer(text):
        if not (initial_rule and _sentence_initial(text, m.start())) and m.group(0).split()[0].lower() not in _CAPITAL_STOP:
            cands.append(_Cand(m.start(), m.end(), "name", m.group(0)))
    for m in _MONTH_DATE_RE.finditer(text):
        if not (initial_rule and _sentence_initial(text, m.start()) and m.group(0) == "May"):
            cands.append(_Cand(m.start(), m.end(), "number", m.group(0)))
    cands.extend(_name_cands(text, initial_rule))
    return _resolve_overlaps(cands)


def _resolve_overlaps(cands: list[_Cand]) -> list[_Cand]:
    """Keep the longest atom where atoms overlap (a path beats the name inside it)."""
    taken = bytearray(max((c.end for c in cands), default=0))
    kept: list[_Cand] = []
    for c in sorted(cands, key=lambda c: (c.start - c.end, _PRIORITY[c.kind], c.start)):
        if taken.find(1, c.start, c.end) != -1:
            continue
        taken[c.start : c.end] = b"\x01" * (c.end - c.start)
        kept.append(c)
    return kept


def _scan(text: str, watch: list[re.Pattern[str]], initial_rule: bool) -> list[_Cand]:
    cands = _atoms(text, initial_rule)
    cands.extend(_Cand(m.start(), m.end(), "quoted", m.group(0)) for m in _QUOTED_RE.finditer(text))
    cands.extend(_reason_clauses(text))
    for rx in watch:
        cands.extend(_Cand(m.start(), m.end(), "watch", m.group(0)) for m in rx.finditer(text))
    return cands


def _block_items(line: str) -> list[tuple[int, str]]:
    """Split a repair block's body into items with their offsets.

    Items are separated by "; "; a quoted item keeps a "; " inside its quotes.
    """
    items: list[tuple[int, str]] = []
    pos = 0
    acc_start, acc = 0, ""
    for piece in line.split(_REPAIR_SEPARATOR):
        if acc:
            acc += _REPAIR_SEPARATOR + piece
        else:
            acc_start, acc = pos, piece
        pos += len(piece) + len(_REPAIR_SEPARATOR)
        closer = _QUOTE_PAIRS.get(acc[:1])
        if closer and not (len(acc) > 1 and acc.rstrip().endswith(closer)):
            continue
        items.append((acc_start, acc))
        acc = ""
    if acc:
        items.append((acc_start, acc))
    return [(s + len(i) - len(i.lstrip()), i.strip()) for s, i in items if i.strip()]


def parse_repair_block(summary: str) -> list[str]:
    """The items of every repair block in a summary, in order, verbatim."""
    out: list[str] = []
    for m in _BLOCK_RE.finditer(summary):
        out.extend(item for _, item in _block_items(m.group(1)))
    return out


def extract_facts(text: str, watch: Iterable[str] = ()) -> list[Fact]:
    """The load-bearing details of ``text``, in order of first appearance.

    Deduplicated case-insensitively on their text. Kinds: numbers with a unit
    ("15 minute", "15-minute", "30s", "512 MB", "2,000 turns", "3.5x",
    "99.9%", "$3/MTok", "100k", ISO dates, clock times, "#42"); versions
    ("v2.3.1", "2.3.1", "net8.0"); names (CamelCase, snake_case, ALL_CAPS,
    capitalised words mid-sentence such as Redis, UUIDs and commit hashes);
    paths; URLs; quoted strings; reason clauses from "because", causal
    "since", "due to", "so that", "given that", "in order to", "owing to" to
    the end of the sentence (or ";", at most :data:`REASON_MAX_WORDS` words);
    and ``watch`` words wherever they occur, case-insensitively.

    Not facts: bare numbers ("turn 5"), words that start a sentence ("The",
    "Ran") unless capitalised mid-sentence elsewhere in the text, stop-listed
    chatter acronyms ("PR", "OK"), a fold summary's header ("[fold #3 · 6
    messages · depth 2]", "[folded 6 messages]"). A line starting with
    :data:`REPAIR_HEADING` is read item by item, so a repaired summary yields
    its repaired facts.
    """
    patterns = _watch_patterns(watch)
    cands: list[_Cand] = []
    blocks = list(_BLOCK_RE.finditer(text))
    headers = list(_FOLD_HEADER_RE.finditer(text))
    if blocks or headers:
        masked = list(text)
        for h in headers:
            masked[h.start() : h.end()] = " " * (h.end() - h.start())
        for b in blocks:
            masked[b.start() : b.end()] = " " * (b.end() - b.start())
            body_start = b.start(1)
            for offset, item in _block_items(b.group(1)):
                base = body_start + offset
                found = _scan(item, patterns, initial_rule=False)
                cands.extend(_Cand(c.start + base, c.end + base, c.kind, c.text) for c in found)
        scan_text = "".join(masked)
    else:
        scan_text = text
    cands.extend(_scan(scan_text, patterns, initial_rule=True))
    # Containers before what they contain; a watch word before the same atom.
    cands.sort(key=lambda c: (c.start, c.start - c.end, c.kind != "watch"))
    seen: set[str] = set()
    facts: list[Fact] = []
    for c in cands:
        key = c.text.casefold()
        if key in seen:
            continue
        seen.add(key)
        facts.append(Fact(text=c.text, kind=c.kind))  # type: ignore[arg-type]
    return facts


# --------------------------------------------------------------------------
# Presence
# --------------------------------------------------------------------------

_UNIT_ALIASES = {
    "s": "s", "sec": "s", "secs": "s", "second": "s", "seconds": "s",
    "m": "min", "min": "min", "mins": "min", "minute": "min", "minutes": "min",
    "h": "h", "hr": "h", "hrs": "h", "hour": "h", "hours": "h",
    "d": "d", "day": "d", "days": "d",
    "w": "w", "wk": "w", "wks": "w", "week": "w", "weeks": "w",
    "month": "mo", "months": "mo",
    "y": "y", "yr": "y", "yrs": "y", "year": "y", "years": "y",
    "ms": "ms", "millisecond": "ms", "milliseconds": "ms",
    "x": "x", "×": "x",
    "%": "%", "percent": "%", "pct": "%",
}
# The plain shape first: in "15min" the "m" starts a unit, not a magnitude.
_NUMBER_SHAPES = (
    re.compile(r"([\d.,]+)[\s\u00a0-]*([^\W\d_]+|%|×)"),
    re.compile(r"([\d.,]+(?:[km]|bn))[\s\u00a0-]*([^\W\d_]+|%|×)"),
)


def _number_key(text: str) -> str:
    """'15-minute', '15 minutes', '15min' -> '15 min'; '2,000 turns' -> '2000 turn'."""
    t = " ".join(text.casefold().split())
    m = _NUMBER_SHAPES[0].fullmatch(t) or _NUMBER_SHAPES[1].fullmatch(t)
    if not m:
        return t
    num = re.sub(r"(?<=\d),(?=\d{3})", "", m.group(1))
    unit = m.group(2)
    if unit in _UNIT_ALIASES:
        unit = _UNIT_ALIASES[unit]
    elif len(unit) > 3 and unit.endswith("s") and not unit.endswith("ss"):
        unit = unit[:-1]
    return f"{num} {unit}"


def _norm(text: str) -> str:
    return " ".join(text.casefold().replace("’", "'").split())


def _stem(word: str) -> str:
    if word.endswith("'s"):
        word = word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        word = word[:-1]
    return word


def _content_words(text: str) -> list[str]:
    words = []
    for w in _WORD_RE.findall(_norm(text)):
        if w not in _REASON_STOP:
            s = _stem(w)
            if s not in words:
                words.append(s)
    return words


class _Haystack:
    """A text prepared once for many presence checks (a summary against a span's facts)."""

    def __init__(self, text: str) -> None:
        self.norm = _norm(text)
        self._words: set[str] | None = None
        self._numbers: set[str] | None = None

    @property
    def words(self) -> set[str]:
        if self._words is None:
            self._words = {_stem(w) for w in _WORD_RE.findall(self.norm)}
        return self._words

    @property
    def numbers(self) -> set[str]:
        if self._numbers is None:
            self._numbers = {_number_key(m.group(0)) for m in _numbers(self.norm)}
        return self._numbers

    def add_item(self, text: str) -> None:
        """Grow a repair block's haystack by one item, as the block joins it."""
        part = _norm(text)
        self.norm = f"{self.norm}{_REPAIR_SEPARATOR}{part}" if self.norm else part
        if self._words is not None:
            self._words |= {_stem(w) for w in _WORD_RE.findall(part)}
        if self._numbers is not None:
            self._numbers |= {_number_key(m.group(0)) for m in _numbers(part)}


@lru_cache(maxsize=64)
def _haystack(text: str) -> _Haystack:
    return _Haystack(text)


@lru_cache(maxsize=1 << 16)
def _rx(pattern: str) -> re.Pattern[str]:
    """Compiled per-fact patterns, kept: a fold checks thousands of facts, and
    `re`'s own cache (512 patterns) would recompile them on every check."""
    return re.compile(pattern)


def _bounded(needle: str, hay: str, left: bool, right: bool, plural: bool = False) -> bool:
    pattern = re.escape(needle)
    if left and needle[:1].isalnum() or left and needle[:1] == "_":
        pattern = r"(?<!\w)" + pattern
    if right and (needle[-1:].isalnum() or needle[-1:] == "_"):
        pattern += r"(?:e?s)?(?!\w)" if plural else r"(?!\w)"
    return _rx(pattern).search(hay) is not None


def _present(fact: Fact, hay: _Haystack) -> bool:
    needle = _norm(fact.text)
    if fact.kind == "reason":
        words = _content_words(fact.text)
        if not words:
            return needle in hay.norm
        hits = sum(1 for w in words if w in hay.words)
        return hits / len(words) >= REASON_THRESHOLD
    if fact.kind == "quoted":
        inner = fact.text
        if len(inner) >= 2 and _QUOTE_PAIRS.get(inner[0]) == inner[-1]:
            inner = inner[1:-1]
        return _norm(inner) in hay.norm
    if fact.kind == "number":
        # Bounded on digits: "15 minute" is not in "115 minutes", "#48" not in "#482".
        if needle in hay.norm:
            pattern = re.escape(needle)
            if re.match(r"\w", needle):
                pattern = r"(?<![\w.,])" + pattern
            if re.search(r"\d$", needle):
                pattern += r"(?!\d)"
            if _rx(pattern).search(hay.norm):
                return True
        return _number_key(fact.text) in hay.numbers
    # The remaining kinds need the needle as a substring; the boundary check
    # (a regex built per fact) runs only when it is there.
    if fact.kind == "version":
        bare = needle[1:] if re.match(r"v\d", needle) else needle
        return bare in hay.norm and _rx(r"(?<![\w.])v?" + re.escape(bare) + r"(?!\w|\.\d)").search(hay.norm) is not None
    if needle not in hay.norm:
        return False
    if fact.kind == "name":
        return _bounded(needle, hay.norm, left=True, right=True, plural=True)
    if fact.kind == "watch":
        return _bounded(needle, hay.norm, left=True, right=False)
    return True


def fact_present(fact: Fact, text: str) -> bool:
    """Is ``fact`` still visible in ``text``? Case-insensitive, whitespace-insensitive.

    * number: verbatim, or the same number with the same unit in another
      spelling: "15 minute" is present in "15-minute", "15 minutes", "15min"
      and "15-min"; "2,000 turns" in "2000 turns"; "3.5x" in "3.5×". It is
      not present in "15 seconds", "15" or "a quarter hour": a summary that
      dropped the number or changed the unit fails.
    * name: as a whole word, a plural allowed ("TTL" in "TTLs", not "PR" in
      "PRovide"); version: "2.3.1" and "v2.3.1" match each other, "2.3.10"
      matches neither.
    * quoted: the quoted content, whatever the quote marks.
    * reason: at least :data:`REASON_THRESHOLD` (80%) of the clause's distinct
      content words (not the marker, not function words; negations count;
      plurals and possessives folded) occur anywhere in ``text``. "because"
      alone keeps none of them, so the reason is lost.
    * watch: from a word start, as the probe would see it ("rotate" in
      "rotated").
    * path, url: verbatim substring.
    """
    return _present(fact, _haystack(text))


def lost_facts(facts: Iterable[Fact], summary: str) -> list[Fact]:
    """The facts not present in ``summary``, in their given order."""
    hay = _haystack(summary)
    return [f for f in facts if not _present(f, hay)]


# --------------------------------------------------------------------------
# Repair
# --------------------------------------------------------------------------


def _assemble(body: str, items: Sequence[str]) -> str:
    if not items:
        return body
    block = REPAIR_HEADING + " " + _REPAIR_SEPARATOR.join(items)
    return f"{body}\n{block}" if body else block


def repair_summary(summary: str, lost: Sequence[Fact]) -> str:
    """Append the ``lost`` facts to ``summary`` verbatim, on one line under :data:`REPAIR_HEADING`.

    Verbatim but for whitespace, which is collapsed to single spaces so the
    block stays one line.

    A summary that already has repair blocks (the summarizer copied one from
    a folded summary) gets a single merged block at its end: the old items
    first, verbatim, then the new ones, so nested folds carry every fact. A
    lost fact that the block already shows (a number inside a repaired reason
    clause, a name inside a repaired quote) is not written twice. Repairing
    twice with the same facts gives the same text. Only the block is searched
    for those: a fact the body still shows is appended anyway, since the
    caller passes what :func:`lost_facts` found missing.
    """
    old_items = parse_repair_block(summary)
    if not old_items and not lost and not _BLOCK_RE.search(summary):
        return summary
    body = _BLOCK_LINE_RE.sub("", summary).rstrip("\n")
    items: list[str] = []
    seen: set[str] = set()
    # Only the block is searched: the facts are lost from the body already,
    # and the block grows by one item at a time.
    block = _Haystack("")
    for item in old_items:
        if item.casefold() not in seen:
            seen.add(item.casefold())
            items.append(item)
            block.add_item(item)
    for fact in lost:
        if _present(fact, block):
            continue
        # Whitespace collapsed: the block stays one line, and presence checks
        # ignore whitespace anyway.
        item = " ".join(fact.text.split())
        items.append(item)
        block.add_item(item)
    return _assemble(body, items)


# --------------------------------------------------------------------------
# Decisions
# --------------------------------------------------------------------------

DEFAULT_DECISION_PATTERNS: tuple[str, ...] = (
    # An explicit marker, the article's convention: "DECISION:", "decision:",
    # "Final decision:", but not "decision: pending" or "decision: ?".
    r"(?<![\w-])decision\s*:\s*(?!(?:pending|tbd|none|open|undecided|unknown|later|n/a)\b)[^\s?]",
    # A line that opens with "Agreed:" or "Decided:".
    r"^\s*(?:[-*>]\s*)?(?:\*\*)?(?:agreed|decided)(?:\*\*)?\s*:",
    # "we decided", "we've decided", "we have decided", "we finally decided";
    # not "if we decided", not "we haven't decided".
    r"(?<!\bif )(?<!\bwhether )(?<!\bunless )\bwe(?:['’]ve|\s+have|\s+had)?\s+"
    r"(?:(?:now|finally|already|just|all|jointly|officially)\s+)?decided\b",
    r"\b(?:the\s+team|everyone)\s+(?:has\s+|have\s+)?decided\b",
    r"\bit(?:['’]s\s+been|\s+has\s+been|\s+was|\s+is)\s+decided\b",
    r"\bwe(?:['’]ve|\s+have)?\s+(?:all\s+)?agreed\s+(?:to|on|that)\b",
    r"\blet['’]?s\s+go\s+with\b",
    r"\bwe(?:['’]re|\s+are)\s+going\s+with\b",
    r"\bwe(?:['’]ve|\s+have)?\s+(?:(?:now|finally|already)\s+)?(?:settled\s+on|chosen|chose|opted\s+for)\b",
    # A commitment with its reason in the same sentence.
    r"\bwe(?:\s+will|['’]ll)\s+[^.!?\n]*\bbecause\b",
    # ADR style: "Status: accepted", or a "## Status" heading over "Accepted".
    r"(?<![\w-])status\s*:\s*(?:\*\*)?accepted\b",
    r"^#+\s*status\s*\n+\s*accepted\b",
    r"\bfinal\s+call\s*:",
    r"\b(?:going\s+forward|from\s+now\s+on),?\s+(?:we|all|every|never|always)\b",
)
"""Phrasings that state a decision. Compiled case-insensitive and multiline."""

_SENTENCE_END_RE = re.compile(r"[.!?](?=\s|$)|\n")
# A decision quoted inside another message ("you said: \"DECISION: ...\"") is a
# report of the decision, not the decision: it is already pinned where it was made.
_QUOTED_SPAN_RE = re.compile(r"\"[^\"\n]*\"|“[^”\n]*”")


class DecisionDetector:
    """Decides whether a message states a decision, so the session pins it.

    Each pattern is a regular expression, compiled case-insensitive and
    multiline (``(?-i:...)`` makes a part case-sensitive). A match inside a
    question ("Have we decided on the cache?") does not count: a decision
    is a statement. Nor does one inside double quotes: that quotes a
    decision made elsewhere.
    """

    def __init__(self, patterns: Iterable[str] = DEFAULT_DECISION_PATTERNS) -> None:
        self.patterns: tuple[str, ...] = tuple(patterns)
        self._compiled: list[tuple[str, re.Pattern[str]]] = []
        for pattern in self.patterns:
            if not isinstance(pattern, str):
                raise ValueError(f"decision pattern {pattern!r} is not a string")
            try:
                compiled = re.compile(pattern, re.IGNORECASE | re.MULTILINE)
            except re.error as err:
                raise ValueError(
                    f"decision pattern {pattern!r} is not a valid regular expression: {err}"
                ) from None
            if compiled.search("") is not None or compiled.search("x") is not None:
                raise ValueError(
                    f"decision pattern {pattern!r} matches text that states nothing ('' or 'x'), "
                    "so it would pin every message"
                )
            self._compiled.append((pattern, compiled))

    def match(self, text: str) -> str | None:
        """The first pattern that finds a decision in ``text`` (for the UI), or None."""
        quoted = [q.span() for q in _QUOTED_SPAN_RE.finditer(text)]
        for pattern, compiled in self._compiled:
            for m in compiled.finditer(text):
                if any(a < m.start() < b for a, b in quoted):
                    continue
                end = _SENTENCE_END_RE.search(text, max(m.end() - 1, m.start()))
                if end is None or end.group(0) != "?":
                    return pattern
        return None

    def is_decision(self, text: str) -> bool:
        return self.match(text) is not None


# --------------------------------------------------------------------------
# Probe
# --------------------------------------------------------------------------


def find_expected(expect: Sequence[str], text: str) -> dict[str, bool]:
    """For each expected string of a probe, is it visible in ``text``? Case-insensitive substring."""
    hay = text.casefold()
    out: dict[str, bool] = {}
    for word in expect:
        if not isinstance(word, str) or not word:
            raise ValueError(f"probe expectation {word!r} is empty; an expected string needs a character")
        out[word] = word.casefold() in hay
    return out
