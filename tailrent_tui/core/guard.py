"""The fact guard: what a fold must not lose, and the decisions no fold may touch.

A fold (rung 5) keeps the shape of a span and loses its specifics; a fold of a
fold loses more. The guard works on both sides of a fold:

* before it, :class:`DecisionDetector` pins messages that state a decision, so
  they never enter the foldable pool (the article's fix, made automatic);
* around it, :func:`extract_facts` collects the span's load-bearing details
  (numbers with units, versions, names, paths, URLs, addresses and ports,
  code such as flags and calls, quoted strings, reason clauses, watch words),
  :func:`lost_facts` finds which the summary dropped,
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
* chat-template tokens a local model wrote as text ("<|im_end|>",
  "<start_of_turn>model", "[INST]", "</s>"), or their cut ends ("im_start",
  "<|im_") -> nothing.

How well it does on coding chat is measured on a hand-labelled corpus,
tests/guard_corpus.py: `benchmarks/guard_bench.py --corpus` prints precision
and recall.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from typing import Literal, NamedTuple

from pydantic import BaseModel, Field, field_validator

FactKind = Literal["number", "version", "name", "path", "url", "address", "code", "quoted", "reason", "watch"]

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
        f"{_MONTHS} {_DAYS} mondays tuesdays wednesdays thursdays fridays saturdays sundays"
    ).split()
)

# Acronyms that chatter is full of and no summary needs to keep, and the
# markers that label a message rather than say something in it.
_CAPS_STOP = frozenset(
    [
        "DECISION",
        "SUMMARIZE",
        "NOTE",
        "TODO",
        "FIXME",
        "XXX",
        "OK",
        "PR",
        "PRS",
        "FYI",
        "LGTM",
        "WIP",
        "ASAP",
        "IMO",
        "IMHO",
        "AFAIK",
        "TBD",
        "BTW",
        "TLDR",
        "TL",
        "DR",
        "AM",
        "PM",
        "AND",
        "OR",
        "THE",
        "IS",
        "IT",
        "IN",
        "ON",
        "TO",
        "OF",
        "NO",
        "YES",
        "ALL",
    ]
)

# Words that carry no content in a reason clause: the markers themselves and
# function words. Negations stay content words on purpose: a reason that lost
# its "can't" says the opposite.
_REASON_STOP = frozenset(
    [
        "because",
        "since",
        "due",
        "so",
        "that",
        "given",
        "order",
        "owing",
        "the",
        "a",
        "an",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "it",
        "its",
        "this",
        "these",
        "those",
        "of",
        "in",
        "on",
        "at",
        "by",
        "for",
        "with",
        "to",
        "from",
        "and",
        "or",
        "but",
        "as",
        "we",
        "our",
        "you",
        "your",
        "they",
        "their",
        "he",
        "she",
        "his",
        "her",
        "i",
        "my",
        "me",
        "us",
        "them",
        "there",
        "here",
        "has",
        "have",
        "had",
        "do",
        "does",
        "did",
        "will",
        "would",
        "should",
        "could",
        "can",
        "may",
        "might",
        "must",
        "shall",
        "just",
        "very",
        "really",
        "also",
        "then",
        "than",
        "such",
        "into",
        "onto",
        "about",
        "any",
        "some",
        "which",
        "who",
        "what",
        "when",
        "where",
        "how",
        "if",
    ]
)

_WORD_NUMBERS = (
    "two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty|forty|forty-five|fifty|sixty|ninety"
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

_PATH_RE = re.compile(
    r"(?<![\w.@+/~$-])(?:~|\.\.?|\$\{?[A-Za-z_]\w*\}?)?(?:[\w.@+-]*+/)++[\w.@+-]*+"
    r"|(?<![\w\\])[A-Za-z]:\\[^\s\"'<>|;]+"
)
# A dotted word; the last segment must be a known extension (checked after).
_FILENAME_RE = re.compile(r"(?<![\w./-])[\w-]++(?:\.[\w-]++)++(?![\w/-])")
_DOTFILE_RE = re.compile(r"\.(?<![\w./-]\.)(?:env|gitignore|dockerignore|bashrc|zshrc|profile|npmrc|editorconfig)(?![\w/-])")
_EXTENSION_SET = frozenset(_EXTENSIONS.split("|"))

_VERSION_RE = re.compile(
    r"(?<![\w.])(?=[vV\d]|[A-Za-z]+\d)(?:"
    r"[vV]\d+(?:\.\d+)*"
    r"|\d+\.\d+\.\d+(?:\.\d+)?"
    r"|[A-Za-z]+\d+(?:\.\d+)+"
    r"|\d+(?:\.\d+)*\.[xX]"
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
    "fps|rps|qps|tps|rpm|ops|dollars?|cents?|usd|eur|gbp|°c|°f|degrees?|"
    "packages?|modules?|dependencies|dependency|services?|containers?|endpoints?|tables?|columns?|"
    "indexes|indices|migrations?|tickets?|bugs?|issues?|branch(?:es)?|repos?|clusters?|regions?|zones?|"
    "vcpus?|hosts?|servers?|machines?|runners?|builds?|deploys?|releases?|events?|spans?|keys?|"
    "tenants?|customers?|accounts?|topics?|queues?|consumers?|alerts?|incidents?|layers?|chunks?|"
    "objects?|blobs?|images?"
)
# Single letters and tiny abbreviations only count glued to the number ("30s",
# "5m", "2h", "7d", "10us"): spaced, they are ordinary words or letters.
_GLUED_UNITS = "s|m|h|d|w|y|us|ns|[kmgtpe]i"
_RATE = r"(?:/[A-Za-z]{1,10}(?![\w]))?"
# What may follow a clock time: a zone, or am/pm.
_ZONES = "UTC|GMT|CET|CEST|EET|EEST|WET|WEST|BST|IST|JST|KST|AEST|AEDT|EST|EDT|CST|CDT|MST|MDT|PST|PDT|am|pm"
_NUMBER_RE = re.compile(
    # The lookahead first: most positions are not a digit, and fail at once.
    r"(?=[\d$€£¥])(?<![\w.,$€£¥#-])(?:"
    r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?(?![\w-])"
    rf"|\d{{1,2}}:\d{{2}}(?::\d{{2}})?(?:\s?(?:-|–|to)\s?\d{{1,2}}:\d{{2}}(?::\d{{2}})?)?(?:\s?(?:{_ZONES}))?(?![\w:])"
    r"|\d{1,2}\s?[ap]m(?!\w)"
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
_ISSUE_RE = re.compile(r"#(?<![\w&#]#)\d+(?!\w)")


def _numbers(text: str) -> Iterable[re.Match[str]]:
    yield from _NUMBER_RE.finditer(text)
    yield from _WORD_NUMBER_RE.finditer(text)
    yield from _ISSUE_RE.finditer(text)


# A name with its number or edition ("SOC 2", "ISO 27001", "Python 3.12",
# "PostgreSQL 16"): the number is what a summary tends to drop.
_NAMED_NUMBER_RE = re.compile(r"[A-Z](?<![\w.].)[a-zA-Z]+[ \u00a0]\d+(?:\.\d+)*(?!\w|\.\d)")
# A month, capitalised, with an optional day and year ("October", "March 3",
# "June 2027"): a deadline or a date. Capitalised "May" mid-sentence is the month.
_MONTH_DATE_RE = re.compile(
    r"(?:January|February|March|April|May|June|July|August|September|October|November|December)"
    r"(?:[ \u00a0]\d{1,2}(?:st|nd|rd|th)?)?(?:,?[ \u00a0]\d{4})?(?![\w-])"
)
_UUID_RE = re.compile(
    r"[0-9a-fA-F](?<![\w-].)[0-9a-fA-F]{7}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}(?![\w-])"
)
# 7 to 40 hex digits; a digit and a letter among them (see _hex_id_ok).
_SHA_RE = re.compile(r"[0-9a-f](?<![\w-].)[0-9a-f]{6,39}(?![\w-])")

# Operations and code atoms. Python's `re` skips ahead fast only when a pattern
# starts with a literal or a character class (a leading lookaround turns that
# off), so each pattern starts with its first character and checks what comes
# before it afterwards ("[A-Z](?<![\w-].)"). Atoms that start with an ordinary
# letter ("requests==2.31.0", "localhost:6379") are found from their rare
# character instead, then read back to their start (see _match_before).
_IPV4_RE = re.compile(r"\d(?<![\w.:/-].)\d{0,2}(?:\.\d{1,3}){3}(?:/\d{1,2}|:\d{1,5})?(?![\w/:]|\.\d)")
_IPV6_RE = re.compile(r"(?:[0-9a-fA-F]{0,4}:){2,7}[0-9a-fA-F]{0,4}(?:/\d{1,3})?(?![\w:])")
_HEX_HEAD_RE = re.compile(r"[0-9a-fA-F]{1,4}\Z")
_PORT_RE = re.compile(r"[pP](?<![\w.:-].)ort[ \u00a0](\d{2,5})(?![\w:]|\.\d)")
# A colon with a word after it: a port, a port map, a host or an image with its
# tag, or an IPv6 address.
_COLON_RE = re.compile(r":(?=[\w:])")
_TAG_RE = re.compile(r":(\w(?:[\w.-]*\w)?)(?![\w:/@]|\.\w)")
_HOST_RE = re.compile(r"[A-Za-z0-9][\w.-]*(?:/[\w.-]+)*\Z")
_BARE_PORT_RE = re.compile(r":\d{2,5}(?![\w:]|\.\d)")

_AT_RE = re.compile(r"@(?=[A-Za-z])")
_LOCAL_PART_RE = re.compile(r"[\w.+-]+\Z")
_DOMAIN_RE = re.compile(
    r"@[A-Za-z][\w-]*(?:\.[A-Za-z0-9][\w-]*)*"
    # git's scp form, "git@github.com:acme/payments.git", addresses a repository
    r"(?::[\w.-]+(?:/[\w-]+(?:\.[\w-]+)*)+)?"
)
_MENTION_RE = re.compile(r"@[A-Za-z][\w-]*(?:[./][A-Za-z][\w-]*)*")

_URL_TAIL_RE = re.compile(r"://[^\s<>\"'`;“”‘’]+")
_SCHEME_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]{0,15}\Z")
_PARENS_RE = re.compile(r"\(\)")
_CALLEE_RE = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*\Z")
_DOT_RE = re.compile(r"\.(?=[A-Za-z_])")
_IDENT_RE = re.compile(r"[A-Za-z_]\w*\Z")
_DOTTED_TAIL_RE = re.compile(r"(?:\.[A-Za-z_][\w-]*)+(?![\w/-]|\.\w)")

_DIRS = "northeast|southeast|northwest|southwest|north|south|east|west|central"
_REGION_DIR_RE = re.compile(rf"-(?:{_DIRS})(?:-\d[a-f]?|\d{{1,2}})(?![\w-])")
_REGION_HEAD_RE = re.compile(
    r"(?:us|eu|ap|sa|ca|me|af|il|mx|cn|europe|asia|australia|northamerica|southamerica|africa)(?:-gov|-iso)?\Z"
)
_REGION_RE = re.compile(
    rf"(?:us|eu|ap|sa|ca|me|af|il|mx|cn)(?:-gov|-iso)?-(?:{_DIRS})-\d[a-f]?"
    rf"|(?:us|europe|asia|australia|northamerica|southamerica|me|africa)-(?:{_DIRS})\d{{1,2}}"
)
# Azure's regions are plain words ("westeurope"): looked for only when the text names Azure.
_AZURE_RE = re.compile(
    r"(?:eastus2|eastus|westus3|westus2|westus|centralus|northcentralus|southcentralus|westcentralus|"
    r"northeurope|westeurope|uksouth|ukwest|francecentral|germanywestcentral|swedencentral|"
    r"switzerlandnorth|norwayeast|polandcentral|italynorth|eastasia|southeastasia|japaneast|japanwest|"
    r"koreacentral|australiaeast|australiasoutheast|centralindia|southindia|canadacentral|canadaeast|"
    r"brazilsouth|uaenorth|southafricanorth)(?![\w-])"
)
# A ticket, a CVE or an Oracle error: "PAY-4412", "CVE-2024-3094", "ORA-00942".
_TICKET_RE = re.compile(r"[A-Z](?<![\w-].)[A-Z0-9]{1,9}(?:-\d+)+(?![\w-]|\.\d)")
# HTTP headers and other capitalised compounds: "X-Request-ID", "Retry-After".
_HEADER_RE = re.compile(r"[A-Z](?<![\w-].)[A-Za-z0-9]*(?:-[A-Z][A-Za-z0-9]*)+(?![\w-])")
_STATUS_PHRASES = (
    "OK|Created|Accepted|No Content|Moved Permanently|Found|See Other|Not Modified|Temporary Redirect|"
    "Permanent Redirect|Bad Request|Unauthorized|Payment Required|Forbidden|Not Found|Method Not Allowed|"
    "Not Acceptable|Request Timeout|Conflict|Gone|Precondition Failed|Payload Too Large|Content Too Large|"
    "URI Too Long|Unsupported Media Type|Unprocessable Entity|Unprocessable Content|Too Many Requests|"
    "Internal Server Error|Not Implemented|Bad Gateway|Service Unavailable|Gateway Timeout"
)
# A code is a bare number until its keyword or its reason phrase says what it is.
_STATUS_RE = re.compile(
    r"(?:HTTP|Status(?: code)?|status(?: code)?|Exit (?:code|status)|exit (?:code|status)|Error|error|Errno|errno)"
    rf"[ \u00a0]\d{{1,5}}(?:[ \u00a0](?:{_STATUS_PHRASES}))?(?![\w-]|\.\d)"
)
_STATUS_CODE_RE = re.compile(rf"[1-5](?<![\w-].)\d\d[ \u00a0](?:{_STATUS_PHRASES})(?![\w-])")
_ENV_RE = re.compile(r"\$(?<![\w$].)(?:\{[A-Za-z_]\w*\}|[A-Z_][A-Z0-9_]+(?!\w))")
_ASSIGN_RE = re.compile(r"[A-Z](?<![\w$.-].)[A-Z0-9_]+=[^\s,;'\"`]*[^\s,;'\"`.:)]")
_FLAG_RE = re.compile(
    r"-(?<![\w-].)(?:"
    r"-[A-Za-z][\w-]*(?:=[^\s,;'\"`]*[^\s,;'\"`.:)]|[ ]\d+(?:\.\d+)?[A-Za-z%]{0,3}(?!\w|[.,]\d))?"
    r"|[A-Za-z][ ]?\d+(?!\w|[.,]\d)"
    r")"
)
_K8S_RE = re.compile(
    r"(?:deployments?|deploy|svc|services?|pods?|po|configmaps?|cm|secrets?|ingress(?:es)?|ing|statefulsets?|"
    r"sts|daemonsets?|ds|jobs?|cronjobs?|cj|namespaces?|ns|nodes?|pvc|pv|hpa|replicasets?|rs|"
    r"serviceaccounts?|sa|roles?|rolebindings?|clusterroles?|clusterrolebindings?|networkpolic(?:y|ies)|"
    r"netpol|endpoints|ep|crd)/[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?"
)
_MIME_RE = re.compile(r"(?:application|text|image|audio|video|multipart|font)/[\w.+-]*\w")
# Loose on the way in (one class for every field), strict on the way out (_cron_ok).
_CRON_RE = re.compile(r"[\d*](?<![\w*/,.:-].)(?:[\d*/,-]*[\d*])?(?:[ \t]+[\d*](?:[\d*/,-]*[\d*])?){4}(?![\w*/-])")
_CRON_FIELD_RE = re.compile(r"(?:\*|\d{1,2}(?:-\d{1,2})?)(?:/\d{1,2})?(?:,\d{1,2}(?:-\d{1,2})?)*")
# A constraint needs a dotted version: "~500 tokens" is an amount, "-> 2.0" an arrow.
_VERSION_NUM = r"v?\d+(?:\.(?:\d+|x|\*))+(?:-[0-9A-Za-z]+(?:\.[0-9A-Za-z]+)*)?"
_CONSTRAINT_RE = re.compile(
    rf"(?:\^|~=|~>|~|>=|<=|==|!=|>|<)[ ]?{_VERSION_NUM}"
    r"(?:,(?:~=|>=|<=|==|!=|>|<)v?\d+(?:\.(?:\d+|x|\*))*)*(?!\w|\.\d)"
)
# A package with its pin: "requests==2.31.0", "numpy<2", "react@18.2.0".
_PIN_OP_RE = re.compile(r"[=<>~!@]=?(?=v?\d)")
_PIN_OPS = frozenset(("==", ">=", "<=", "~=", "!=", ">", "<", "@"))
_PACKAGE_RE = re.compile(r"[A-Za-z][\w.-]*\w(?:\[[\w,-]+\])?\Z")
_PIN_TAIL_RE = re.compile(r"(?:[=<>~!]=|[<>@])v?\d+(?:[.+-][\w*]+)*(?:,(?:[=<>~!]=|[<>])v?\d+(?:[.+-][\w*]+)*)*(?!\w)")


def _cased(words: str) -> str:
    """'tables?|queues?' -> 'tables?|Tables?|queues?|Queues?': case-insensitive
    without re.IGNORECASE, which would turn off the fast skip-ahead."""
    return "|".join(f"{w}|{w[0].upper()}{w[1:]}" for w in words.split("|"))


# The name of a table, queue, flag, migration... next to its noun: "queue
# billing-events", "flag new-checkout", "the orders_v2 table". Only the noun
# makes a lowercase hyphenated word a name ("read-only" is not one).
_CONTAINER_NOUN_RE = re.compile(
    "(?:" + _cased("tables?|queues?|topics?|flags?|toggles?|migrations?|branch(?:es)?|buckets?|namespaces?|streams?") + r")(?!\w)"
)
_CODE_WORD = r"[A-Za-z0-9][\w./-]*[A-Za-z0-9]"
_NAME_AFTER_NOUN_RE = re.compile(rf"[ \u00a0]+(?:(?:is[ \u00a0]+)?(?:called|named)[ \u00a0]+)?({_CODE_WORD})(?![\w/-]|\.\w)")
_NAME_BEFORE_NOUN_RE = re.compile(rf"({_CODE_WORD})[ \u00a0]+\Z")
# Tokens worth classifying: starting with a capital or underscore, or a
# lowercase run followed by a capital, digit or underscore. Plain lowercase
# words never become names, so the regex skips them without a Python call.
_TOKEN_RE = re.compile(r"\b(?:[A-Z_]|[a-z]+[A-Z0-9_]|\d+_[A-Za-z])[A-Za-z0-9_]*")
_CAPS_RE = re.compile(r"[A-Z][A-Z0-9]+s?")
# "fooBar", "PostgreSQL", and a run of capitals into a word: "SQLite".
_CAMEL_RE = re.compile(r"[a-z][A-Z]|[A-Z]{2}[a-z]")
# "arm64", "utf8", and a latency percentile, "p99".
_ALNUM_NAME_RE = re.compile(r"[a-z]{2,}\d+[a-z0-9]*|p\d{2,3}")
_CAPITALISED_RE = re.compile(r"[A-Z][a-z]+\d*")

_QUOTED_RE = re.compile(
    r"\"[^\"\n]*[^\s\"][^\"\n]*\""
    r"|“[^”\n]*[^\s”][^”\n]*”"
    r"|‘[^’\n]*[^\s’][^’\n]*’"
    r"|`[^`\n]*[^\s`][^`\n]*`"
    r"|'(?<![\w']')[^'\n]*[^\s'][^'\n]*'(?!\w)"
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

# Special tokens of the chat templates (ChatML, Llama 2 and 3, Gemma, Mistral,
# Phi), whole or cut: a model that writes them as text, or a summary that kept
# half of one, is not saying anything the next fold must keep.
_TEMPLATE_RE = re.compile(
    r"<(?:\|[^|<>\s]{0,40}(?:\|>)?|/?(?:s|bos|eos|pad|unk|start_of_turn|end_of_turn)>|</?SYS>>)|\|>|\[/?INST\]"
)
_TEMPLATE_WORDS = (
    "im_start",
    "im_end",
    "im_sep",
    "start_of_turn",
    "end_of_turn",
    "eot_id",
    "eom_id",
    "start_header_id",
    "end_header_id",
    "begin_of_text",
    "end_of_text",
    "endoftext",
    "inst",
)
# A word of a template token, and its cut ends ("im_", "im_st", "of_turn"):
# the names the masked tokens leave behind when their brackets were lost.
_TEMPLATE_FRAGMENTS = frozenset(_TEMPLATE_WORDS) | frozenset(
    piece
    for word in _TEMPLATE_WORDS
    for piece in [word[:i] for i in range(1, len(word))] + [word[i:] for i in range(1, len(word))]
    if "_" in piece and not piece.startswith("_")
)

_BLOCK_RE = re.compile(rf"(?m)^[ \t]*{re.escape(REPAIR_HEADING)}[ \t]?(.*)$")
# A fold summary's own header ("[fold #3 · 6 messages · depth 2]", the
# article's "[folded 6 messages]") is machinery, not a fact of the span.
_FOLD_HEADER_RE = re.compile(r"(?m)^[ \t]*\[(?:fold #\d+|folded \d+ messages?)\b[^\]\n]*\]")
_BLOCK_LINE_RE = re.compile(rf"(?m)^[ \t]*{re.escape(REPAIR_HEADING)}.*(?:\n|$)")

_WORD_RE = re.compile(r"[^\W_]+(?:'[^\W_]+)*")

# Which atom wins an overlap of equal length.
_PRIORITY = {"url": 0, "path": 1, "address": 2, "version": 3, "code": 4, "number": 5, "name": 6}

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
    head, _, ext = path.rpartition(".")
    return bool(head) and ext.lower() in _EXTENSION_SET


def _path_ok(path: str) -> bool:
    if path[:1] in "~$" or path.startswith(("./", "../")) or re.match(r"[A-Za-z]:\\", path):
        return True
    segments = [s for s in path.split("/") if s]
    if not segments or all(s.replace(".", "").replace(",", "").isdigit() for s in segments):
        return False
    slashes = path.count("/")
    if path.startswith("/"):
        # "/tmp", "/app": a root directory, or a slash command; "/s" is neither
        return slashes >= 2 or re.fullmatch(r"/[A-Za-z][\w.-]+", path) is not None
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
        first = _FIRST_WORDS_RE.match(text, m.start(), end)
        if first is None:
            continue
        clause = first.group(0)
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
            if re.search(r"[A-Za-z]", tok) and tok.strip("_") and tok.casefold() not in _TEMPLATE_FRAGMENTS:
                out.append(_Cand(m.start(), m.end(), "name", tok))
        elif _CAPS_RE.fullmatch(tok):
            core = tok[:-1] if tok.endswith("s") else tok
            upper = sum(c.isupper() for c in core)
            if (
                (upper >= 2 or any(c.isdigit() for c in core))
                and tok.upper() not in _CAPS_STOP
                and tok.casefold() not in _TEMPLATE_FRAGMENTS
            ):
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


def _match_before(text: str, end: int, head: re.Pattern[str], fence: str, run: str = "") -> re.Match[str] | None:
    """The token ``head`` (a pattern ending in \\Z) finds right before ``end``, or None.

    The token must start a word: the character before it is not a word
    character nor one of ``fence``. ``head`` is tried only on the run of word
    characters and ``run`` characters before ``end`` (at most 100): a regex
    search over a wider window costs more than the rest of the anchor.
    """
    lo = end
    floor = max(0, end - 100)
    while lo > floor and (text[lo - 1].isalnum() or text[lo - 1] == "_" or text[lo - 1] in run):
        lo -= 1
    m = head.search(text, lo, end)
    if m is None:
        return None
    s = m.start()
    if s > 0 and (text[s - 1].isalnum() or text[s - 1] == "_" or text[s - 1] in fence):
        return None
    return m


def _starts_word(text: str, start: int, fence: str = "") -> bool:
    return start == 0 or not (text[start - 1].isalnum() or text[start - 1] == "_" or text[start - 1] in fence)


def _ipv4_ok(text: str) -> bool:
    addr, _, suffix = text.partition("/")
    addr = addr.partition(":")[0]
    return all(int(octet) <= 255 for octet in addr.split(".")) and (not suffix or int(suffix) <= 32)


def _ipv6_ok(text: str) -> bool:
    addr = text.partition("/")[0]
    if ":::" in addr or addr.count("::") > 1 or not any(c.isdigit() for c in addr):
        return False
    if "::" not in addr:
        return addr.count(":") == 7
    # a single colon at either end is punctuation ("key: value:"), not the address
    return not ((addr[0] == ":" and addr[:2] != "::") or (addr[-1] == ":" and addr[-2:] != "::"))


def _hex_id_ok(text: str) -> bool:
    return any(c.isdigit() for c in text) and any(c.isalpha() for c in text)


def _cron_ok(text: str) -> bool:
    return "*" in text and all(_CRON_FIELD_RE.fullmatch(f) for f in text.split())


def _dotted_ok(text: str) -> bool:
    # "e.g" and "i.e" are abbreviations; a one-letter segment rarely names code
    return all(len(part) >= 2 for part in text.split("."))


def _code_word_ok(word: str, after_noun: bool) -> bool:
    """Is ``word``, next to a table/queue/flag noun, that thing's name?

    After the noun ("queue billing-events") any code-shaped word is; before it
    ("the orders_v2 table") a lone hyphen is usually an adjective
    ("high-priority queue"), so it takes an underscore, a digit, a slash or two
    hyphens.
    """
    if not any(c.isalpha() for c in word) or word.isalpha():
        return False
    if after_noun:
        return True
    return "_" in word or "/" in word or word.count("-") >= 2 or any(c.isdigit() for c in word)


def _colon_atoms(text: str) -> Iterable[_Cand]:
    covered = 0
    for m in _COLON_RE.finditer(text):
        i = m.start()
        if i < covered:
            continue
        hex_head = _match_before(text, i, _HEX_HEAD_RE, ":.")
        start = hex_head.start() if hex_head else i
        if _starts_word(text, start, ":."):
            v6 = _IPV6_RE.match(text, start)
            if v6 and _ipv6_ok(v6.group(0)):
                covered = v6.end()
                yield _Cand(start, v6.end(), "address", v6.group(0))
                continue
        tag = _TAG_RE.match(text, i)
        if tag is None or not any(c.isdigit() for c in tag.group(1)):
            continue
        head = _match_before(text, i, _HOST_RE, ".@/:$-", run="./-")
        if head is None:
            port = _BARE_PORT_RE.match(text, i)
            if port and _starts_word(text, i, ".:-") and int(port.group(0)[1:]) <= 65535:
                yield _Cand(i, port.end(), "address", port.group(0))
            continue
        host, value = head.group(0), tag.group(1)
        if host.isdigit():
            # "5432:5432" maps a port; "14:05" is a clock time
            clock = len(host) <= 2 and int(host) <= 23 and len(value) == 2 and value.isdigit() and int(value) <= 59
            if not clock and value.isdigit() and len(host) >= 2 and int(host) <= 65535 and int(value) <= 65535:
                yield _Cand(head.start(), tag.end(), "address", text[head.start() : tag.end()])
        elif host[0].isalpha():
            kind = "address" if value.isdigit() and int(value) <= 65535 else "name"
            yield _Cand(head.start(), tag.end(), kind, text[head.start() : tag.end()])


def _at_atoms(text: str) -> Iterable[_Cand]:
    for m in _AT_RE.finditer(text):
        i = m.start()
        local = _match_before(text, i, _LOCAL_PART_RE, "@", run=".+-")
        if local is not None:
            domain = _DOMAIN_RE.match(text, i)
            end = _trim_path(text, local.start(), domain.end())  # type: ignore[union-attr]
            kind = "url" if ":" in text[i:end] else "address"
            yield _Cand(local.start(), end, kind, text[local.start() : end])
        elif _starts_word(text, i, ".+@/-"):
            mention = _MENTION_RE.match(text, i)
            yield _Cand(i, mention.end(), "name", mention.group(0))  # type: ignore[union-attr]


def _anchored_atoms(text: str) -> Iterable[_Cand]:
    """Atoms found from their rare character, read back to their start."""
    for m in _URL_TAIL_RE.finditer(text):
        scheme = _match_before(text, m.start(), _SCHEME_RE, "+.-", run="+.-")
        if scheme is None:
            continue
        end = m.end()
        while end > m.start() and text[end - 1] in ".,:!?)]}":
            if text[end - 1] == ")" and text.count("(", m.start(), end) >= text.count(")", m.start(), end):
                break
            end -= 1
        yield _Cand(scheme.start(), end, "url", text[scheme.start() : end])
    for m in _PIN_OP_RE.finditer(text):
        if m.group(0) not in _PIN_OPS:
            continue
        package = _match_before(text, m.start(), _PACKAGE_RE, ".@/-", run=".-[],")
        if package is not None:
            tail = _PIN_TAIL_RE.match(text, m.start())
            if tail is not None:
                yield _Cand(package.start(), tail.end(), "version", text[package.start() : tail.end()])
    for m in _CONSTRAINT_RE.finditer(text):
        if _starts_word(text, m.start(), "<>=!~^-"):
            yield _Cand(m.start(), m.end(), "version", m.group(0))
    for m in _PARENS_RE.finditer(text):
        callee = _match_before(text, m.start(), _CALLEE_RE, ".$@/-", run=".")
        if callee is not None:
            yield _Cand(callee.start(), m.end(), "code", text[callee.start() : m.end()])
    covered = 0
    for m in _DOT_RE.finditer(text):
        if m.start() < covered:
            continue
        head = _match_before(text, m.start(), _IDENT_RE, ".@/$-")
        tail = _DOTTED_TAIL_RE.match(text, m.start())
        if head is not None and tail is not None:
            covered = tail.end()
            dotted = text[head.start() : tail.end()]
            if _dotted_ok(dotted):
                yield _Cand(head.start(), tail.end(), "name", dotted)
    for m in _REGION_DIR_RE.finditer(text):
        head = _match_before(text, m.start(), _REGION_HEAD_RE, "-", run="-")
        if head is not None and _REGION_RE.fullmatch(text, head.start(), m.end()):
            yield _Cand(head.start(), m.end(), "name", text[head.start() : m.end()])
    if "zure" in text or "ZURE" in text:
        for m in _AZURE_RE.finditer(text):
            if _starts_word(text, m.start(), "-"):
                yield _Cand(m.start(), m.end(), "name", m.group(0))
    for m in _CONTAINER_NOUN_RE.finditer(text):
        if not _starts_word(text, m.start(), "-"):
            continue
        after = _NAME_AFTER_NOUN_RE.match(text, m.end())
        if after and _code_word_ok(after.group(1), after_noun=True):
            yield _Cand(after.start(1), after.end(1), "name", after.group(1))
        before = _match_before(text, m.start(), _NAME_BEFORE_NOUN_RE, "./-", run="./- \u00a0")
        if before and _code_word_ok(before.group(1), after_noun=False):
            yield _Cand(before.start(1), before.end(1), "name", before.group(1))
    yield from _colon_atoms(text)
    yield from _at_atoms(text)


# The atoms a pattern finds alone, with their kind and a check of the match.
_SIMPLE_ATOMS: tuple[tuple[re.Pattern[str], str, Callable[[re.Match[str]], bool] | None], ...] = (
    (_IPV4_RE, "address", lambda m: _ipv4_ok(m.group(0))),
    (_PORT_RE, "address", lambda m: int(m.group(1)) <= 65535),
    (_TICKET_RE, "name", None),
    (_HEADER_RE, "name", None),
    (_STATUS_RE, "name", lambda m: _starts_word(m.string, m.start(), "-")),
    (_STATUS_CODE_RE, "name", None),
    (_ENV_RE, "name", None),
    (_ASSIGN_RE, "code", None),
    (_FLAG_RE, "code", None),
    (_CRON_RE, "code", lambda m: _cron_ok(m.group(0))),
    (_UUID_RE, "name", None),
    (_SHA_RE, "name", lambda m: _hex_id_ok(m.group(0))),
)


def _atoms(text: str, initial_rule: bool) -> list[_Cand]:
    cands: list[_Cand] = []
    for m in _PATH_RE.finditer(text):
        end = _trim_path(text, m.start(), m.end())
        path = text[m.start() : end]
        if end > m.start() and _path_ok(path):
            cands.append(_Cand(m.start(), end, "path", path))
        elif _K8S_RE.fullmatch(path) or _MIME_RE.fullmatch(path):
            # one slash: a Kubernetes resource ("deployment/api-gateway") or a media type
            cands.append(_Cand(m.start(), end, "name", path))
    for m in _FILENAME_RE.finditer(text):
        if _has_extension(m.group(0)):
            cands.append(_Cand(m.start(), m.end(), "path", m.group(0)))
    for m in _DOTFILE_RE.finditer(text):
        cands.append(_Cand(m.start(), m.end(), "path", m.group(0)))
    for m in _VERSION_RE.finditer(text):
        cands.append(_Cand(m.start(), m.end(), "version", m.group(0)))
    for m in _numbers(text):
        cands.append(_Cand(m.start(), m.end(), "number", m.group(0)))
    for rx, kind, ok in _SIMPLE_ATOMS:
        for m in rx.finditer(text):
            if ok is None or ok(m):
                cands.append(_Cand(m.start(), m.end(), kind, m.group(0)))
    cands.extend(_anchored_atoms(text))
    for m in _MONTH_DATE_RE.finditer(text):
        sentence_may = initial_rule and _sentence_initial(text, m.start()) and m.group(0) == "May"
        if _starts_word(text, m.start(), "-") and not sentence_may:
            cands.append(_Cand(m.start(), m.end(), "number", m.group(0)))
    cands.extend(_name_cands(text, initial_rule))
    # At a sentence start, a name with its number counts if the text shows the
    # same name with a number mid-sentence ("Node 20 ...; Node 18 ..."); a
    # counter that starts every line ("Turn 12: ...") never is.
    pending: list[re.Match[str]] = []
    numbered: set[str] = set()
    for m in _NAMED_NUMBER_RE.finditer(text):
        word = m.group(0).split()[0]
        if word.lower() in _CAPITAL_STOP:
            continue
        if initial_rule and _sentence_initial(text, m.start()):
            pending.append(m)
        else:
            numbered.add(word)
            cands.append(_Cand(m.start(), m.end(), "name", m.group(0)))
    cands.extend(_Cand(m.start(), m.end(), "name", m.group(0)) for m in pending if m.group(0).split()[0] in numbered)
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

    Deduplicated case-insensitively on their text. Kinds:

    * number: with a unit ("15 minute", "15-minute", "30s", "512 MB", "512Mi",
      "2,000 turns", "3 replicas", "3.5x", "99.9%", "100k"), money ("$4,200",
      "€30", "12 USD", "$3/MTok"), ISO dates, "March 3", clock times with
      their zone ("02:00 UTC", "9:30am", "3pm"), "#42";
    * version: "v2.3.1", "2.3.1", "1.x", "net8.0", constraints ("^4.2.0",
      "~1.2", ">=3.11"), pins ("requests==2.31.0", "numpy<2", "react@18.2.0");
    * name: CamelCase, snake_case, ALL_CAPS, capitalised words mid-sentence
      (Redis), a name with its number ("PostgreSQL 16"), dotted code names and
      hosts ("requests.get"), UUIDs, commit hashes, cloud regions
      ("eu-west-2", "europe-west4"), tickets and coded errors ("PAY-4412",
      "ORA-00942", "E1101", "HTTP 503", "exit code 137", "429 Too Many
      Requests"), environment variables ("$HOME"), headers ("X-Request-ID"),
      Kubernetes resources ("deployment/api-gateway"), media types, mentions
      ("@maria"), images with their tag ("python:3.12-slim"), and the code-shaped
      name next to a table, queue, topic, flag, migration, branch, bucket,
      namespace or stream ("queue billing-events", "the orders_v2 table");
    * address: IPv4 and IPv6 with their CIDR or port, ports ("port 5433",
      ":8080", "localhost:6379", "5432:5432"), accounts ("svc@corp.example");
    * code: command-line flags ("--dry-run", "--timeout=30s", "-n 5"), calls
      written with their parentheses ("parse_args()"), cron expressions
      ("0 2 * * *"), environment assignments ("LOG_LEVEL=debug");
    * path; url (any scheme, and git's "git@host:org/repo.git"); quoted
      strings; reason clauses from "because", causal "since", "due to", "so
      that", "given that", "in order to", "owing to" to the end of the
      sentence (or ";", at most :data:`REASON_MAX_WORDS` words); and ``watch``
      words wherever they occur, case-insensitively.

    Not facts: bare numbers ("turn 5"), words that start a sentence ("The",
    "Ran") unless capitalised mid-sentence elsewhere in the text, stop-listed
    chatter acronyms ("PR", "OK"), weekdays, plain lowercase words (package
    names included), chat-template tokens and their fragments, a fold
    summary's header ("[fold #3 · 6 messages · depth 2]", "[folded 6
    messages]"). A line starting with :data:`REPAIR_HEADING` is read item by
    item, so a repaired summary yields its repaired facts; an item the rules
    would not find alone (a name that was one by its noun) is kept whole.
    """
    patterns = _watch_patterns(watch)
    cands: list[_Cand] = []
    blocks = list(_BLOCK_RE.finditer(text))
    noise = [*_FOLD_HEADER_RE.finditer(text), *_TEMPLATE_RE.finditer(text)]
    if blocks or noise:
        masked = list(text)
        for h in noise:
            masked[h.start() : h.end()] = " " * (h.end() - h.start())
        for b in blocks:
            masked[b.start() : b.end()] = " " * (b.end() - b.start())
            body_start = b.start(1)
            for offset, item in _block_items(b.group(1)):
                base = body_start + offset
                found = _scan(item, patterns, initial_rule=False)
                # Every item was a fact when it was written; one that was a fact
                # by its context ("queue billing-events") stays one alone.
                if not any(c.start == 0 and c.end == len(item) for c in found):
                    found.append(_Cand(0, len(item), "name", item))
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
    "s": "s",
    "sec": "s",
    "secs": "s",
    "second": "s",
    "seconds": "s",
    "m": "min",
    "min": "min",
    "mins": "min",
    "minute": "min",
    "minutes": "min",
    "h": "h",
    "hr": "h",
    "hrs": "h",
    "hour": "h",
    "hours": "h",
    "d": "d",
    "day": "d",
    "days": "d",
    "w": "w",
    "wk": "w",
    "wks": "w",
    "week": "w",
    "weeks": "w",
    "month": "mo",
    "months": "mo",
    "y": "y",
    "yr": "y",
    "yrs": "y",
    "year": "y",
    "years": "y",
    "ms": "ms",
    "millisecond": "ms",
    "milliseconds": "ms",
    "x": "x",
    "×": "x",
    "%": "%",
    "percent": "%",
    "pct": "%",
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
            # distinct words first: a long text repeats most of its words, and stemming is the cost
            self._words = {_stem(w) for w in set(_WORD_RE.findall(self.norm))}
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
    if (left and needle[:1].isalnum()) or (left and needle[:1] == "_"):
        pattern = r"(?<!\w)" + pattern
    if right and (needle[-1:].isalnum() or needle[-1:] == "_"):
        pattern += r"(?:e?s)?(?!\w)" if plural else r"(?!\w)"
    return _rx(pattern).search(hay) is not None


# A port said alone: "port 5433", ":8080". Its digits are the fact.
_PORT_FACT_RE = re.compile(r"(?:port |:)(\d{2,5})")
_FLAG_VALUE_RE = re.compile(r"(-{1,2}[a-z][\w-]*)[ =]?(\d[\w.%]*)")


@lru_cache(maxsize=4096)
def _code_pattern(needle: str) -> str | None:
    """How a code fact may be written again: a call without its parentheses
    ("parse_args" keeps "parse_args()"), a flag's value after "=" or a space
    ("--retries=5" keeps "--retries 5"). None: the text itself, verbatim."""
    if needle.endswith("()") and len(needle) > 2:
        return r"(?<!\w)" + re.escape(needle[:-2]) + r"(?!\w)"
    flag = _FLAG_VALUE_RE.fullmatch(needle)
    if flag:
        return r"(?<![\w-])" + re.escape(flag.group(1)) + r"[ =]?" + re.escape(flag.group(2)) + r"(?![\w.]|\.\d)"
    return None


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
    if fact.kind == "address":
        port = _PORT_FACT_RE.fullmatch(needle)
        if port:
            digits = port.group(1)
            return digits in hay.norm and _rx(rf"(?<![\d.]){digits}(?!\d)").search(hay.norm) is not None
        return needle in hay.norm and _bounded(needle, hay.norm, left=True, right=True)
    if fact.kind == "code":
        code_re = _code_pattern(needle)
        if code_re is None:
            return needle in hay.norm and _bounded(needle, hay.norm, left=True, right=True)
        return _rx(code_re).search(hay.norm) is not None
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


def lost_facts(facts: Iterable[Fact], summary: str) -> list[Fact]:
    """The facts not visible in ``summary``, in their given order. Case-insensitive and
    whitespace-insensitive; a fact is visible, by its kind:

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
      plurals and possessives folded) occur anywhere in ``summary``. "because"
      alone keeps none of them, so the reason is lost.
    * watch: from a word start, as the probe would see it ("rotate" in
      "rotated").
    * address: a port alone by its digits ("port 5433" is present in
      ":5433"), the rest as a whole word ("10.0.0.1" not in "10.0.0.10").
    * code: as a whole word; a call without its parentheses ("parse_args()"
      in "parse_args"), a flag's value after "=" or a space ("--retries 5" in
      "--retries=5").
    * path, url: verbatim substring.
    """
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
                raise ValueError(f"decision pattern {pattern!r} is not a valid regular expression: {err}") from None
            if compiled.search("") is not None or compiled.search("x") is not None:
                raise ValueError(
                    f"decision pattern {pattern!r} matches text that states nothing ('' or 'x'), so it would pin every message"
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


# --------------------------------------------------------------------------
# The fold's guard: what the span said, against what stays visible
# --------------------------------------------------------------------------

# A label at a line's start ("SECURITY RULE:", "**LIMIT**:"): its words name a kind, they are not facts.
_LABEL_PREFIX_RE = re.compile(
    r"(?m)(?:^|(?<=[.!?;]\s))[ \t]*(?:[-*•>]+[ \t]*)?(?:\*\*)?[A-Z][A-Z0-9 _/&-]{1,30}(?:\*\*)?[ \t]*:(?=[ \t])"
)


def guarded_facts(text: str, watch: Iterable[str] = ()) -> list[Fact]:
    """What a fold of ``text`` must keep visible: its facts (:func:`extract_facts`) and its
    identifiers (any token that mixes letters with digits, or with - _ . / : inside, lowercase
    too: ``sk-9q2-alder``, ``hotfix/2``), without the words of a label ("SECURITY RULE:")."""
    from tailrent_tui.core.ledger import identifiers

    masked = _LABEL_PREFIX_RE.sub(lambda m: " " * len(m.group(0)), text)
    facts = extract_facts(masked, watch)
    known = [f.text.casefold() for f in facts]
    for ident in identifiers(_TEMPLATE_RE.sub(" ", _FOLD_HEADER_RE.sub(" ", masked))):
        key = ident.casefold()
        if any(key in k for k in known) or key.strip("_-") in _TEMPLATE_FRAGMENTS:
            continue
        known.append(key)
        facts.append(Fact(text=ident, kind="name"))
    return facts


class Visible:
    """A text prepared once for many checks: is a fact still there, as a probe would find it?

    Strict, as a probe is: the fact's text, case- and whitespace-insensitively, at word
    boundaries ("15 minute" is not in "115 minutes", nor in "15min"). A reason clause counts by
    its content words (:data:`REASON_THRESHOLD`), a quoted string by what is inside its quotes.
    Each check is one substring search over the text, and a boundary check only when found."""

    def __init__(self, text: str) -> None:
        self.hay = _Haystack(text)

    def shows(self, fact: Fact) -> bool:
        hay = self.hay
        if fact.kind == "reason":
            return _present(fact, hay)
        needle = _norm(fact.text)
        if fact.kind == "quoted" and len(needle) >= 2 and _QUOTE_PAIRS.get(needle[0]) == needle[-1]:
            needle = needle[1:-1].strip()
        if not needle:
            return True
        return _found_bounded(needle, hay.norm, plural=fact.kind == "name")


def _found_bounded(needle: str, hay: str, *, plural: bool) -> bool:
    """Does ``needle`` occur in ``hay`` at word boundaries (a plural "s"/"es" allowed after a name)?

    The same rule as :func:`_bounded`, by ``str.find`` over the occurrences instead of a regular
    expression compiled per fact: one pass of C over the text, whatever the number of facts."""

    def wordy(c: str) -> bool:
        return c.isalnum() or c == "_"

    check_left = wordy(needle[0])
    check_right = wordy(needle[-1])
    start = hay.find(needle)
    n = len(needle)
    while start >= 0:
        end = start + n
        ok_left = not check_left or start == 0 or not wordy(hay[start - 1])
        if ok_left:
            if not check_right or end >= len(hay) or not wordy(hay[end]):
                return True
            if plural:
                for suffix in ("s", "es"):
                    if hay.startswith(suffix, end):
                        after = end + len(suffix)
                        if after >= len(hay) or not wordy(hay[after]):
                            return True
        start = hay.find(needle, start + 1)
    return False
