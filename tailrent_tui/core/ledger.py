# ruff: noqa: E501  (the cue tables below read best one alternation a line, however long)
"""The ledger: load-bearing statements, found on arrival and kept verbatim.

What a user relies on after a week of folds is a *statement*, not an atom: a
decision, a rule or prohibition, a constraint (a cap, a limit, a version, an
SLO, a permission), a preference (how the user wants things done), the goal
state (where we are, the next step, what blocks us), an identifying fact (a
host, key, branch, commit, queue, flag). The article's failure is a summary
that keeps the shape of such a statement and loses its specifics; so a
statement never enters a summary. It stays in the context, word for word, for
as long as it is current:

* while its message is live, the message itself holds it (a short message that
  is mostly statement is pinned on arrival, in place, so the cached prefix is
  not rewritten);
* when a fold takes its message, the fold carries it into a pinned *ledger
  message* where the span was (core/rungs/fold.py), and the summarizer is
  shown the span without it (:func:`without_statements`).

A correction supersedes: "the limit is now $500" after "stays under $300"
marks the old statement superseded (with a pointer to the new one); the old
one is unpinned and leaves the context at the next fold, and no fold carries
it or shows it to a summarizer.

What the model says it decided is a *proposal* until the user agrees: an
assistant's unlabelled statements are recorded as proposals, shown, and
neither pinned nor carried (the user accepts one with a key). Labelled lines
("DECISION: ...") are taken as stated, whoever wrote them.

Detection is plain regular expressions over sentences, linear in the text:
labelled forms (``SECURITY RULE: ...``, ``LIMIT: ...``, ADR lines) take their
kind from the label (the label word itself is never a fact), unlabelled
sentences from their cues. Questions, hedges ("maybe we should revisit the cap
later, no decision yet"), hypotheticals and code are not statements. How well
it does is measured on a corpus written by other hands
(tests/ledger_corpus/): `benchmarks/ledger_bench.py` prints precision and
recall per kind, the held-out quarter apart.

Pure, synchronous, deterministic: no I/O, no clock.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Literal

from pydantic import BaseModel, Field

from tailrent_tui.core import ledger_scorer

StatementKind = Literal["decision", "rule", "constraint", "preference", "goal", "fact"]
STATEMENT_KINDS: tuple[StatementKind, ...] = ("decision", "rule", "constraint", "preference", "goal", "fact")
Status = Literal["current", "superseded", "proposal"]

#: statements kept from one message at most (a pasted rule book of a thousand lines is a file, not a ledger)
MAX_PER_MESSAGE = 48
#: a statement longer than this many characters is a document, not a statement: not kept verbatim
MAX_STATEMENT_CHARS = 600
#: a labelled line longer than this states its first sentence only; the rest is read sentence by sentence
LABELLED_LINE_CHARS = 300


class Statement(BaseModel):
    """One entry of the ledger."""

    id: str = Field(description="the message id and the statement's number in it: 'a1b2c3d4e5f6.0'")
    message_id: str
    kind: StatementKind
    text: str = Field(description="verbatim, as it was said (or as the user edited it)")
    role: str = Field(description="who said it: user, assistant, tool, instructions")
    status: Status = "current"
    label: str | None = Field(default=None, description="the label it was written under ('SECURITY RULE'), if any")
    supersedes: str | None = None
    superseded_by: str | None = None
    amended_by: str | None = Field(default=None, description="a correction replaced part of it (marked in its text)")
    edited: bool = False
    score: float = Field(default=1.0, description="the detector's confidence that this is a statement (0..1)")
    said: bool = Field(default=False, description="the user's words, not recognized as a statement: kept, ranked last")
    unpinned: bool = Field(default=False, description="the user unpinned it: the next fold does not carry it verbatim")
    original: str | None = Field(default=None, description="the words its message holds, once the user edited them")
    at: float = 0.0

    @property
    def current(self) -> bool:
        return self.status == "current"


@dataclass(frozen=True)
class Found:
    """A statement found in a text: its kind, its verbatim text, its place."""

    kind: StatementKind
    text: str
    start: int
    label: str | None
    correction: bool
    #: how sure the detector is that this is a statement (0..1): what leaves first when the budget binds
    score: float = 1.0
    #: the user's own words that the detector could not call a statement: kept verbatim all the same
    said: bool = False


# -- splitting ---------------------------------------------------------------------------

_FENCE_RE = re.compile(r"^[ \t]*(?:```|~~~)")
# A sentence ends at . ! ? followed by space and more text, or at a line end. Not after
# an abbreviation, nor inside a number, a version or a host ("v1.2.3", "pg.internal").
_ABBREV = ("e.g", "i.e", "etc", "vs", "approx", "incl", "esp", "cf", "mr", "ms", "dr", "no", "fig", "min", "max", "sec")
_SENT_END_RE = re.compile(r"(?<=[.!?])[\"')\]]?\s+(?=\S)")


def _sentences(line: str) -> Iterable[tuple[int, str]]:
    """(offset, sentence) pieces of one line."""
    start = 0
    for m in _SENT_END_RE.finditer(line):
        before = line[start : m.start()].rstrip(".!?\"')]")
        last = before.rsplit(None, 1)[-1].lower() if before.split() else ""
        if last.rstrip(".") in _ABBREV or (len(last) == 1 and last.isalpha()):
            continue
        piece = line[start : m.start()]
        if piece.strip():
            yield start, piece
        start = m.end()
    if line[start:].strip():
        yield start, line[start:]


# -- cues --------------------------------------------------------------------------------

_LEAD_RE = re.compile(
    r"^(?:[-*•>]+\s*|\d{1,2}[.)]\s+|#{1,6}\s+)?(?:\*\*|__)?\s*"
    r"(?:(?:ok(?:ay)?|so|and|also|oh|btw|fyi|heads[- ]up|note|one more thing|just|plus|again|important|reminder|"
    r"remember|also remember|please note|pls|ps|hey|alright|right|cool|great|thanks|ty|yeah|yes|yep|hmm+|ugh|huh|ah+|well|"
    r"actually|wait|no wait|oh wait|one thing|quick one|fwiw|sorry|update|correction)"
    r"[,:!.]*\s+|(?:no|nope)[,:!.]+\s+)*",
    re.I,
)
_LABEL_RE = re.compile(
    r"^[ \t]*(?:[-*•>]+[ \t]*|\d{1,2}[.)][ \t]+)?(?:\*\*|__)?"
    r"(?P<label>[A-Za-z][A-Za-z0-9 /&()-]{0,34}?)(?:\*\*|__)?[ \t]*(?:\*\*)?:(?:\*\*)?[ \t]+(?P<body>\S.*)$"
)
_LABEL_KINDS: tuple[tuple[StatementKind, re.Pattern[str]], ...] = (
    (
        "decision",
        re.compile(
            r"\b(?:decision|decisions|decided|adr|agreed|resolution|resolved|final call|verdict|chosen|choice|conclusion)\b", re.I
        ),
    ),
    (
        "rule",
        re.compile(
            r"\b(?:rules?|polic(?:y|ies)|never|prohibit\w*|forbidden|must|security|safety|guardrails?|hard rule|do not|don'?t|law)\b",
            re.I,
        ),
    ),
    (
        "constraint",
        re.compile(
            r"\b(?:limits?|constraints?|budget|caps?|quota|max(?:imum)?|min(?:imum)?|slo|sla|deadline|versions?|pin(?:ned|s)?|requirements?|timeouts?|ttl|thresholds?|permissions?|access|latency|memory|spend|cost|size|rate)\b",
            re.I,
        ),
    ),
    (
        "preference",
        re.compile(
            r"\b(?:preferences?|prefs?|style|conventions?|tone|language|format(?:ting)?|prefer(?:red)?|taste|naming|wording)\b",
            re.I,
        ),
    ),
    (
        "goal",
        re.compile(
            r"\b(?:goals?|next(?: steps?| up)?|tmrw|tomorrow|today|tonight|eod|this week|next week|todo|to do|status|blockers?|blocked|open questions?|plan|current state|where we are|progress|wip|milestone|objective|focus|remaining|done|now|state|current task|task)\b",
            re.I,
        ),
    ),
    (
        "fact",
        re.compile(
            r"\b(?:facts?|hosts?|hostname|servers?|keys?|ids?|branch(?:es)?|commits?|queues?|topics?|buckets?|flags?|ports?|endpoints?|urls?|env|environment|db|database|repo(?:sitory)?|accounts?|owners?|contacts?|regions?|clusters?|names?|services?|config|path|secret|token|credentials?|tickets?|project|channel|table|namespace|image|domain|ip|address|email|user(?:name)?|team)\b",
            re.I,
        ),
    ),
)
# Labels that are not statements whatever follows (a log's level, a speaker, a field of output).
_NON_LABELS = re.compile(
    r"^(?:error|info|debug|trace|warn|fatal|critical|traceback|file|line|note|notes|q|a|question|answer|user|assistant|"
    r"system|tool|me|you|output|result|results|example|e\.g|usage|summary|tl;?dr|re|subject|from|to|cc|date|time|"
    r"http|https|ftp|ssh|git|step \d+|test|tests|failed|passed|ok|expected|actual|got|hint|see|update|edit|ps|fyi|btw|"
    r"warning|warnings|caution|deprecated|task|plan|short version|long version|in short|version|short|summary|recap|context|"
    r"background|why|how|what|where|result|status code|response|request|reply|error message|log|logs|details?)$",
    re.I,
)

_QUESTION_START = re.compile(
    # an auxiliary opens a question only with its subject after it ("do we ...", "is the box up"), not "do 50"
    r"^(?:(?:should|shall|can|could|would|will|do|does|did|is|are|was|were|have|has|had)\s+(?!not\b)(?!(?<=\bdo\s)(?:it|that|this|those|these)\b)"
    r"(?:i|we|you|u|they|it|he|she|this|that|these|those|there|the|a|an|any|anyone|someone|my|our|your|their|its)\b|"
    r"(?:what|why|how|when|where|which|"
    r"who|whom|whose|any idea|anyone|wdyt|thoughts|isn'?t|aren'?t|don'?t you|doesn'?t|am i|may i|mind if|whats|what['’]s|"
    r"hows|how['’]s|wheres|where['’]s|any chance|quick q)\b)",
    re.I,
)
_HEDGE_RE = re.compile(
    r"\b(?:maybe|perhaps|might|possibly|probably|not sure|unsure|no decision|undecided|tbd|to be decided|"
    r"not decided|haven'?t decided|hasn'?t been decided|didn'?t decide|did not decide|not (?:yet )?settled|"
    r"let'?s think|thinking (?:about|of)|consider(?:ing)?|what if|i wonder|wondering|revisit|idk|dunno|no idea|"
    r"could be|may be|kinda|sort of|for example|e\.g\.|hypothetically|in theory|if we|if you|if i|if it|"
    r"unless we|whether|would be nice|someday|one day|eventually maybe|not a rule|just an idea|brainstorm|"
    r"(?:nobody|no\s+one)\s+knows|(?:i|we)\s+(?:\w+\s+)?(?:don['’]?t|do\s+not)\s+know|we\s+could|thoughts\s*\??\s*$|"
    r"should\s+(?:fit|work|suffice|hold(?:\s+up)?|be\s+(?:fine|ok|okay|enough|good|plenty))|"
    # what would happen, not what holds: "that would need its own endpoint", "nothing would carry over"
    r"(?:that|this|it|which|nothing|everything|they|he|she)\s+would\s+(?!rather|like|prefer|love)\w+)\b",
    re.I,
)
# idioms that look like rules and state nothing: "never mind i'll find out", "park it", "keep an eye on that"
_IDIOM_RE = re.compile(
    r"\b(?:never\s?mind|park\s+it|(?:don['’]?t|do\s+not)\s+read\s+(?:anything|too\s+much|much)\s+into|keep\s+an\s+eye\s+on(?:\s+(?:that|it|this))?|(?:write|jot)\s+(?:that|it)\s+down|"
    r"writing\s+(?:that|it)\s+down)\b[\s,.;:!]*",
    re.I,
)


def _idiom_only(s: str) -> bool:
    """Is what the sentence states an idiom alone? What is left without it states no rule, cap or value
    ("Never mind the linter, always run pytest before pushing" still states a rule)."""
    if not _IDIOM_RE.search(s):
        return False
    rest = _IDIOM_RE.sub(" ", s).strip(" ,.;:!")
    return not (
        _RULE_ANY_RE.search(rest)
        or any(_RULE_START_RE.match(part.strip()) for part in re.split(r"[,;]", rest))
        or _NUM_RE.search(rest)
        or _has_identifier(rest)
        or re.match(r"(?:on|at|to|in)\b", rest, re.I)  # "park it on port 8443": the idiom names a place
    )


_NEGATED_DECISION = re.compile(
    r"\b(?:not|never|n't)\s+(?:yet\s+)?(?:decided|agreed|chosen|settled|going with|decid(?:e|ing)|choos(?:e|ing)|pick(?:ing)?)\b",
    re.I,
)
_REPORT_RE = re.compile(
    r"^(?:i |we )?(?:ran|running|tried|trying|looked|looking|checked|checking|fixed|fixing|pushed|pushing|"
    r"merged|deployed|opened|closed|added|removed|updated|saw|seeing|got|getting|found|noticed|reading|"
    r"(?:i|we)\s+(?:run|see|read)|"
    r"here'?s|here is|here are|this is|that'?s|thanks|thank you|cool|nice|great|lgtm|sounds good|ok|okay|sure|"
    r"yes|yeah|yep|no|nope|hmm|huh|lol|ugh|oops)\b",
    re.I,
)

_DECISION_RE = re.compile(
    r"\bdecision\s*:\s*\S|^(?:agreed|decided)\s*:|"
    r"(?<!\bif )(?<!\bwhether )\bwe(?:['’]ve|\s+have|\s+had)?\s+(?:(?:now|finally|already|just|all|officially)\s+)?"
    r"(?:decided|agreed|settled on|chosen|chose|opted for|picked|went with|landed on|committed to)\b|"
    r"\b(?:the\s+team|everyone)\s+(?:has\s+|have\s+)?(?:decided|agreed)\b|\bit(?:['’]s|\s+has|\s+is|"
    r"\s+was)\s+(?:been\s+)?decided\b|"
    r"\blet['’]?s\s+(?:go\s+with|use|stick\s+with|keep|do|pick|choose|adopt)\b|"
    r"\bwe(?:['’]re|\s+are)\s+(?:going\s+with|using|sticking\s+with|moving\s+to|switching\s+to|standardi[sz]ing\s+on|adopting|"
    r"dropping|ditching|deprecating|killing|retiring)\b|"
    r"\bwe(?:['’]ll|\s+will)\s+(?:go\s+with|use|stick\s+with|keep|adopt|move\s+to|switch\s+to|ship|store|run|put)\b|"
    r"\bwe\s+(?:use|store|run|keep|ship|deploy)\s+\S+.*\b(?:because|since|so that|instead of|rather than)\b|"
    r"\b(?:final\s+(?:call|answer|decision|word)|status\s*:\s*accepted)\b|\bgoing\s+with\b|\bdecided\s+(?:to|on|that|against)\b",
    re.I,
)
_RULE_START_RE = re.compile(
    r"^(?:please\s+)?(?:never|don['’]?t|do\s+not|dont|do\s+NOT|always|avoid|stop|no\s+one|nobody|nothing|"
    r"no\s+\w+\s+(?:in|to|on|into|without|before|until)|"
    r"must|make\s+sure|ensure|only|under\s+no\s+circumstances|at\s+no\s+point|keep\s+\w+\s+out\s+of|"
    r"(?:merge|push|deploy|commit|delete|drop|touch|edit|change|modify|run|print|log|expose|share|release|ship)\s+"
    r"(?:nothing|no\s+\w+|anything)\b)",
    re.I,
)
_RULE_ANY_RE = re.compile(
    r"\b(?:must(?:\s+not|n['’]t)?|shall\s+not|should\s+never|may\s+not|must\s+never|not\s+allowed|isn['’]t\s+allowed|"
    r"forbidden|prohibited|off[- ]limits|strictly|mandatory|required\s+to|is\s+required|are\s+required|"
    r"without\s+(?:asking|approval|sign[- ]?off|review|my\s+ok|permission|checking\s+with)|"
    r"until\s+.{1,60}\b(?:signs?\s+off|approves?|reviews?|says\s+so|okays?|gives\s+the\s+ok)|"
    r"(?:^|[,;:(]\s*|\b(?:and|but|please|so|just|you|we|also|pls)\s+)(?:never\s+(?:ever\s+)?\w+|do\s+not\s+\w+|"
    r"don['’]?t\s+(?:ever\s+)?(?!know|think|remember|see|get|understand|care|mind|worry|forget\s+to|have|need|"
    r"want|like|assume)\w+)|"
    r"is\s+read[- ]only|are\s+read[- ]only|no\s+(?:force[- ]push|direct\s+push|commits?\s+to|pushing|merging|deploys?)\b)",
    re.I,
)
_NUMBERISH = r"(?:[$€£]\s?\d[\d,.]*\s*[kKmM]?|\d[\d,.]*\s*(?:%|[kKmMgGtT]i?[bB]?\b|ms\b|s\b|sec|secs|seconds?|mins?|minutes?|h\b|hrs?|hours?|days?|weeks?|months?|rps|qps|req|requests?|users?|tokens?|lines?|chars?|characters?|workers?|replicas?|retries|attempts?|cores?|threads?|connections?|items?|files?|usd|eur|dollars?|x\b)|\d[\d,.]*|v?\d+(?:\.\d+)+)"
_CAP_RE = re.compile(
    r"\b(?:under|below|(?:above|over)(?=\s+[$€£~]?\d)|at\s+most|at\s+least|no\s+more\s+than|no\s+less\s+than|"
    r"not\s+more\s+than|fewer\s+than(?=\s+[$€£~]?\d)|"
    r"less\s+than(?=\s+[$€£~]?\d)|more\s+than(?=\s+[$€£~]?\d)|max(?:imum)?|min(?:imum)?|cap(?:ped)?(?:\s+at)?|limit(?:ed)?(?:\s+(?:to|at|is|of))?|"
    r"budget|quota|within|exceed(?:s|ing)?|up\s+to|p\d{2}|slo|sla|deadline|by\s+(?:mon|tue|wed|thu|fri|sat|sun)\w*|"
    r"by\s+(?:eod|end\s+of|tomorrow|tonight|noon)|pin(?:ned)?\s+(?:\S+\s+)?(?:to|at|on)|stays?\s+(?:on|at|"
    r"pinned)|locked\s+(?:to|at)|"
    r"timeout|ttl|rate[- ]limit|needs?\s+python|requires?|supported?|target(?:s|ing)?|no\s+later\s+than|"
    # "before" bounds a time: "before 18:00", "before friday", "before the freeze" (not "more than before")
    r"before(?=\s+(?:[\w.-]+\s+){0,2}(?:\d|due|mon|tue|wed|thu|fri|sat|sun|jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec|"
    r"eod|noon|midnight|release|launch|deadline|cutover|freeze|end|merge|merging|deploy|deploying|going)))\b"
    r"|[<>]=?|==|~=",
    re.I,
)
_CAP_VALUE_RE = re.compile(_NUMBERISH, re.I)
_PERMISSION_RE = re.compile(
    r"\b(?:read[- ]only|write\s+access|read\s+access|no\s+access|admin\s+rights|permission\s+to|allowed\s+to|"
    r"not\s+allowed\s+to|only\s+\w+\s+(?:can|may)|can\s+only)\b",
    re.I,
)
_PREFERENCE_RE = re.compile(
    r"\b(?:i|we)\s+(?:(?:really|strongly|much|always|usually)\s+)?(?:prefer|like|want|love|hate|dislike|"
    r"'d\s+(?:like|rather|prefer)|"
    r"would\s+(?:like|rather|prefer)|care\s+about)\b|\bmy\s+preference\b|"
    r"^(?:please\s+)?(?:(?:always|just)\s+)?(?:use|write|answer|reply|respond|keep|format|name|put|stick\s+to|"
    r"stick\s+with|prefer|"
    r"call|spell|indent|favou?r|default\s+to|go\s+for)\b|"
    r"\b(?:answer|reply|respond|write|talk)\s+(?:to\s+me\s+)?in\s+\w+|\b(?:instead\s+of|rather\s+than)\s+\w+|"
    r"\bplease\s+(?:always\s+)?(?:use|write|answer|reply|respond|keep|format|name|put|stick|add|avoid|be)\b|"
    r"\b(?:tabs|spaces|british|american|metric|imperial|snake_case|camel\s?case|kebab-case|type\s+hints|docstrings|"
    r"f-strings|conventional\s+commits|small\s+commits|terse|concise|verbose|emoji)\b",
    re.I,
)
_GOAL_RE = re.compile(
    r"\bnext\s+(?:step|steps|up|thing|task|is|we|i|you)\b|^next\b|^then\s+(?:we|i)(?:['’]ll|\s+will|\s+can)\b|"
    r"\bafter\s+that,?\s+(?:we|i)\b|"
    r"\b(?:we['’]re|we\s+are|i['’]m|i\s+am)\s+(?:now\s+|currently\s+|still\s+)?(?:on|at(?!\s+[~$€£]?\d)|in\s+the\s+middle\s+of|working\s+on|"
    r"halfway|almost\s+done|done\s+with|finished\s+with|stuck\s+on|focusing\s+on|through)\b|"
    r"\b(?:blocked|waiting)\s+(?:on|by|for)\b|\bblocker\b|\bblocking\b|"
    r"\bthe\s+(?:goal|plan|objective|aim|priority|focus)\s+(?:is|for|right\s+now|today|this\s+week)\b|"
    r"\b(?:still\s+)?(?:need|needs|have|has)\s+to\s+(?:finish|do|land|ship|fix|wire|add|write|get|port|migrate|update)\b|"
    r"\bopen\s+question\b|\btodo\b|\bremaining\b|\bleft\s+to\s+do\b|\bmilestone\b|\bwhere\s+we\s+are\b|"
    r"\b(?:today|this\s+week|tomorrow)\s+(?:we|i)['’]?(?:ll|\s+will|\s+need|\s+want)\b|\b(?:is|are)\s+(?:done|"
    r"finished|complete|merged|shipped|landed)\b.*\b(?:next|now|then)\b|"
    r"\bonce\s+.{1,60}\bwe(?:['’]ll|\s+will|\s+can)\b",
    re.I,
)
# An identifier: letters mixed with digits, or with - _ . / : inside (lowercase too).
_IDENT_RE = re.compile(r"(?<![\w$@])[A-Za-z0-9][\w.:/@-]*[A-Za-z0-9]")
# "python 3.12, django 5.1", "go 1.22", "expo sdk 51", "java 21, spring boot 3.3"
_VERSION_LINE_RE = re.compile(
    r"^(?:(?:it['’]?s|we['’]?re\s+on|on|"
    r"this\s+is\s+(?:a\s+)?)\s*)?(?:[A-Za-z][\w.+#-]*\s+){1,3}v?\d+(?:\.\d+)*(?:\s*(?:[,/&+]|and|on)\s*"
    r"(?:[A-Za-z][\w.+#-]*\s+){1,3}v?\d+(?:\.\d+)*)*\s*(?:app|project|repo)?[.!]?$",
    re.I,
)
_RUNTIME_RE = re.compile(
    r"\b(?:support(?:s|ed)?|msrv|min(?:imum)?\s+supported|runtime|python|node|java|go|golang|rust|ruby|elixir|otp|erlang|php|"
    r"django|rails|react|next(?:\.js)?|spring\s+boot|sdk|api\s+level|ios|android|postgres(?:ql)?|mysql|redis|"
    r"kafka|k8s|kubernetes|"
    r"terraform|helm|numpy|pandas|torch|cuda)\b[^.?!]{0,40}?\bv?\d+(?:\.\d+)+|\bv?\d+(?:\.\d+)+\s+(?:through|"
    r"to|-|–)\s+v?\d+(?:\.\d+)+",
    re.I,
)
_PERSON_RE = re.compile(
    r"(?:^|,\s*|\.\s+)(?:i['’]?m|im|i\s+am)\s+(?:the\s+)?(?:[A-Z][a-z]+|incident\s+commander|release\s+captain|on[- ]?call|"
    r"owner|maintainer|tech\s+lead|lead|reviewer|approver)\b|"
    r"\b(?!(?:The|This|That|It|We|You|They|He|She|There|Here|Then|So|And|But|Also|Ok|Okay|Yes|No|Please|Just|Now|Thanks)\b)"
    r"[A-Z][a-z]{2,}\s+(?:does|owns|covers|handles|leads|reviews|runs|approves|maintains|is\s+on|is\s+out|is\s+the|is\s+our|"
    r"will\s+review|signs\s+off)\b|\bmaintainers?\s+(?:is|are)\b|\bon[- ]?call\s+(?:is|this\s+week)\b|"
    r"\b(?:ask|ping|cc)\s+[A-Z][a-z]{2,}\s+(?:for|about|before)\b",
)
# auxiliaries, modals and fillers: "X not Y" after one of them is a negation, not a choice of X over Y
_AUX = (
    r"(?:do|does|did|is|are|was|were|am|be|been|can|lets|let['’]s|let|now|today|here|there|or|could|would|should|will|shall|may|might|must|have|has|had|why|if|or|"
    r"whether|maybe|probably|definitely|certainly|really|just|still|and|but|so|yet|it|that|this|i|we|you|they|he|she|"
    r"thats|its|hes|shes|theyre|were|youre|im|dont|doesnt|didnt|isnt|arent|wasnt|cant|wont|need|needs)"
)
_CHOICE_RE = re.compile(
    r"(?:^|[,;:]\s*|\b(?!(?:as|what|how|whatever|where|who|which|that|this|is|was|see|know|thats|whats)\b)\w+\s+)it\s+is\s*(?:[.!,;]|$)|"
    r"^(?:ok(?:ay)?,?\s+|yes,?\s+|yep,?\s+|yeah,?\s+|"
    r"right,?\s+)?[\w./`-]+(?:\s+[\w./`-]+){0,3},?\s+(?:yes|please)\s*[.!]?$|"
    r"\b(?!" + _AUX + r"\b)\w+\s+not\s+(?:the\s+)?\w+(?:\s+\w+)?\s*[.!]?$|\b(?:first|wins)\s*[,.]|\bfirst\s*$|"
    r"^(?:just\s+)?(?:stream|subset|drop|catch|bump|match|keep|store|split|cache|batch|shard|inline|vendor|defer|skip|reuse|pin|"
    r"retry|queue|version|gate|flag|hash)\s+(?:it|them|the|only|all|to|a|an|on|in)\b",
    re.I,
)
_MORE_RULE_RE = re.compile(
    r"(?:^|[,;:(]\s*|\b(?:and|but|please|so|just|you|we|also|pls)\s+)dont\s+(?:ever\s+)?(?!read\s+(?:anything|too\s+much)\s+into|know|think|remember|"
    r"see|get|understand|care|mind|worry|assume|have|need|want|like)\w+|"
    r"\b(?:stays?|remains?|keeps?\s+running|keep\s+it)\s+(?:on|off|in|enabled|disabled|as\s+it\s+is|exactly|running|untouched|"
    r"as\s+(?:is|they\s+are)|at\s+[~$€£]?\d|without|the\s+same|put|where\s+(?:it\s+is|they\s+are))\b|\b(?:that|it|this)\s+stays\s*(?:[.!,;]|$)|"
    r"^no\s+\S+(?:\s+\S+){0,3}\s+(?:in|on|for|from|into)\b|\bfrom\s+now\s+on\b|"
    r"\bneeds?\s+(?:an?\s+)?(?:\w+\s+)?(?:approval|sign[- ]?off|review)\b|"
    r"\bshould\s+(?:have\s+no|never|not|always)\b|\bbefore\s+(?:opening|merging|pushing|committing|deploying|releasing)\b",
    re.I,
)
_MORE_GOAL_RE = re.compile(
    r"\bnext\b|\bunblocked\b|\bgoal\b|\baction\s+item\b|\b(?:wants?|needs?|need)\s+(?:a|an)\s+new\b|\bi\s+need\s+(?:a|an)\b|"
    r"\bresults?\s+(?:tomorrow|today|tonight|monday|next\s+week)\b|\b(?:still\s+)?open\b.*\b(?:question|check\s+again)\b|"
    r"\bwe['’]?re\s+(?:now\s+)?(?:retraining|migrating|porting|moving|rolling\s+out|rewriting|building|adding)\b|"
    r"\b(?:rolling\s+out|is\s+running)\b.*\bnow\b",
    re.I,
)
_MORE_CONSTRAINT_RE = re.compile(
    r"\bfreeze\b|\bper\s+(?:page|second|sec|minute|min|hour|day|request|user|pod|app|tenant|seat|run|batch)\b|"
    r"\bevery\s+(?:other\s+)?(?:mon|tue|wed|thu|fri|sat|sun|day|week|night|sprint|hour)\w*|\bnot\s+\d[\d.,]*\s*\w*\s*[.!]?$|"
    r"\b(?:alert|page|fail)\s+(?:if|when)\b.*\d|\bby\s+(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)\w*\s+\d|"
    r"\b(?:starts?|ends?)\s+(?:on\s+)?(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec|mon|tue|wed|thu|fri)\w*\b",
    re.I,
)
_LINK_FACT_RE = re.compile(
    r"\b(?:is|are|lives?|listens?|runs?|sits?|goes|went|deploys?|points?|registered|stored|expires?|started|publishes?|"
    r"pushing)\b[^.?!]{0,40}|\bport\s+\d{2,5}\b|\bon\s+\d{2,5}\b",
    re.I,
)
_FACT_NOUN_RE = re.compile(
    r"\b(?:host(?:name)?|server|db|database|key|secret|token|id|branch|commit|sha|queue|topic|bucket|flag|port|endpoint|"
    r"url|env(?:ironment)?|cluster|region|repo(?:sitory)?|namespace|service|account|table|channel|project|ticket|issue|"
    r"image|tag|domain|ip|address|email|user(?:name)?|workspace|org|team|owner|contact|dashboard|runbook|vault|path|"
    r"file|dir(?:ectory)?|config|profile|role|stack|pipeline|job|cron|schedule|model|dataset|index|version|release|"
    r"instance|node|pod|deployment|container|volume|disk|api|lives?|runs?|sits?)\b",
    re.I,
)
_FACT_LINK_RE = re.compile(
    r"\b(?:is|are|=|lives?\s+(?:at|in|on)|runs?\s+(?:on|at|in)|sits?\s+(?:at|in|on)|points?\s+to|is\s+called|named|"
    r"called|at|on|in|uses?|via|under)\b|[:=]",
    re.I,
)
_CORRECTION_RE = re.compile(
    r"\b(?:now|actually|instead|changed?\s+(?:it\s+)?to|mov(?:e|ed|es|ing)\s+(?:[\w.-]+\s+){0,3}to|"
    r"switch(?:ed|es|ing)?\s+(?:it\s+)?to|switch(?:ed|es|ing)?\s+(?:[\w.-]+\s+){0,4}from|renam(?:e|ed|es|ing)|"
    r"migrat(?:ed|ing)\s+to|mov(?:e|ed|ing)\s+(?:off|away\s+from)|switch(?:ed|ing)?\s+(?:off|away\s+from)|"
    r"scratch\s+(?:that|the|this|it)|forget\s+(?:that|it|what\s+i\s+said|the|about)|ignore\s+(?:that|what\s+i\s+said|my\s+last)|"
    r"no\s+longer|nvm|change\s+of\s+(?:mind|approach|plans?)|"
    r"any\s?more|update[ds]?|correction|correcting|rather\s+than|make\s+it|"
    r"(?:bump(?:ed)?|raised?|lowered?|increased?|reduced?)\s+(?:[\w.-]+\s+){0,6}to|goes\s+(?:up\s+|down\s+)?to\s+[$€£~]?\d+|"
    r"new\s+(?:limit|value|port|host|"
    r"branch|cap|budget|target|url|key)|"
    r"from\s+now\s+on|going\s+forward|turns\s+out|wrong|my\s+bad|i\s+meant|not\s+\S+\s+but|replaced?\s+(?:by|with)|"
    r"renamed?|revised|overrides?|supersedes?|change\s+of\s+plan|bumped|went\s+(?:up|down)\s+to|lowered|raised|becomes|"
    r"dropping|drop\s+it\s+to|has\s+to\s+be\s+\S+\s+not|(?:is|are|was|were)\s+too\s+(?:strict|aggressive|high|low|big|small|slow|short|long|tight|loose|lax|few|many|much|little|expensive)|"
    r"(?:changed|moved|switched|set|cut)\b[^.!?]{0,40}\bto\b|lost\s+(?:one|two|some)|\w+\s+again\b|heads\s+up|"
    r"not\s+\S+\s+any\s?more|no\s+wait|oh\s+wait|wait|sorry|ignore\s+what\s+i\s+said\s+about|unblocked|"
    r"decomm?(?:ed|issioned)?|retired|replaced|not\s+[$€£]?\d[\w.]*|was\s+wrong|is\s+wrong|we\s+now|it['’]?s\s+now|"
    r"(?:is|are)\s+now|done,?\s+next|next\s+up)\b",
    re.I,
)
# A correction that names the value it replaces: "80 not 50", "from 10 to 15", "instead of 3.9"
_OLD_VALUE_RE = re.compile(
    r"\b(?:not|from|instead\s+of|rather\s+than|was|no\s+longer)\s+[$€£~]?(?P<v>\d[\d,.]*|[A-Za-z][\w.:/-]*\d[\w.:/-]*)", re.I
)
_NUM_RE = re.compile(r"\d[\d,.]*\d|\d")
# A goal that moves on: what was next is done, unblocked, or replaced by a new next step
_GOAL_SHIFT_RE = re.compile(r"\b(?:done|finished|unblocked|landed|merged|shipped|next\s+up|now\s+on|moving\s+on)\b", re.I)
_STATUS_RE = re.compile(
    r"\b(?:next|blocked|status|where\s+we\s+are|done|finished|in\s+review|waiting\s+on|then\s+the|after\s+that)\b", re.I
)
_BACKREF_RE = re.compile(
    r"\b(?:scratch\s+that|forget\s+(?:that|it|what\s+i\s+said)|ignore\s+(?:that|what\s+i\s+said|my\s+last)|my\s+bad|i\s+meant)\b",
    re.I,
)
_QUOTED_RE = re.compile(r"\"[^\"\n]{3,}\"|“[^”\n]{3,}”|'[^'\n]{12,}'")
_SAYS_RE = re.compile(
    r"\b(?:says?|said|suggests?|recommends?|claims?|complains?|warns?|according\s+to|left\s+a\s+comment)\b", re.I
)
_DONE_RE = re.compile(
    r"\b(?:went\s+(?:fine|well|ok|smoothly)|is\s+done|are\s+done|its\s+done|it['’]s\s+done|finished|shipped|passing|passed|"
    r"green|submitting|done\s+now|is\s+intended|good\b|looks\s+(?:good|right|fine)|over\s+again)\b",
    re.I,
)


# "X is Y now", "the budget is 900 A100-hours for the quarter now": a value said to be current, anywhere in
# the statement (the cue of a correction that opens with its news and ends with its value)
_NEW_LABEL_RE = re.compile(r"^(?:new|revised|changed|updated)\b", re.I)
_NOW_VALUE_RE = re.compile(r"\b(?:is|are|'s|’s)\s+now\b|\bnow\s*(?:[.!;,)]|$)", re.I)


def _corrects(text: str) -> bool:
    """Does the statement say it corrects an earlier one? The cue must open it (its first
    sixteen words): a long statement that mentions a rename in passing corrects nothing. A value
    said to hold "now" counts wherever it stands."""
    # the cue of a reason is about something else: "listens on 9300 because elasticsearch moved off 9300"
    said = _before_reason(text)
    head = " ".join(said.split()[:16])
    return bool(_CORRECTION_RE.search(head) or _NOW_VALUE_RE.search(said))


_REASON_RE = re.compile(r"\b(?:because|since|due\s+to|given\s+that)\b", re.I)


def _before_reason(text: str) -> str:
    """The statement's own words, before a reason clause that follows three or more of them."""
    for m in _REASON_RE.finditer(text):
        if len(text[: m.start()].split()) >= 3:
            return text[: m.start()]
    return text


def _clean(sentence: str) -> str:
    """The sentence without its lead-ins ('ok so', 'btw', a bullet), for matching."""
    return _LEAD_RE.sub("", sentence.strip(), count=1)


# "where we are: …", "what's left: …", "how: …": a wh-word heading a status line, not a question
_HEADING_RE = re.compile(
    r"^(?:where|what|what['’]s|whats|how|when)\b(?!\s+(?:not|do|does|did|is|are|should|can|would)\b)(?:\s+\S+){0,4}:\s", re.I
)


# "does django 4.2 even support 3.12", "is clippy's lint worth allowing": no imperative opens with these
_AUX_QUESTION_RE = re.compile(r"^(?:does|did|is|are|was|were)\s+(?!not\b|n['’]t\b)[\w`'’.-]+\s+\S", re.I)


# a question asked with a tag: "..., right", "..., correct?"
_TAG_QUESTION_RE = re.compile(
    r",\s*(?:right|correct|yes\s+or\s+no|no\?|isn['’]?t\s+it|don['’]?t\s+we|didn['’]?t\s+we)\s*[?.]?$", re.I
)
# a short heading before what is said: "first: ", "re the cache: ", "flash check: "
_HEAD_PREFIX_RE = re.compile(r"^[A-Za-z][\w '’/-]{0,24}:\s+(?=\S)")


def _is_question(s: str) -> bool:
    t = s.rstrip()
    if t.endswith("?") or _TAG_QUESTION_RE.search(t):
        return True
    return any(
        bool(_QUESTION_START.match(u) or _AUX_QUESTION_RE.match(u)) and not _HEADING_RE.match(u)
        for u in {t, _HEAD_PREFIX_RE.sub("", t, count=1)}
    )


def _has_identifier(text: str) -> bool:
    return any(identifier_ok(m.group(0)) and not _ORDINAL_RE.match(m.group(0)) for m in _IDENT_RE.finditer(text))


def identifier_ok(token: str) -> bool:
    """Is this token an identifier by the guard's rule: letters with digits, or with - _ . / : inside?"""
    has_alpha = any(c.isalpha() for c in token)
    if not has_alpha:
        return False
    if any(c.isdigit() for c in token):
        return True
    inner = token[1:-1]
    if any(c in inner for c in "_./:@"):
        return not token.lower().startswith(("e.g", "i.e", "etc."))
    if "-" in inner:
        # a hyphenated code name ("api-gateway" is a name by its noun; "load-test" is a word): kept only
        # with a capital or three parts ("eu-west-2" has a digit already)
        return token.count("-") >= 2 or any(c.isupper() for c in token[1:])
    return False


def identifiers(text: str) -> list[str]:
    """The identifiers of ``text``, in order, deduplicated (case-insensitively)."""
    return list(_identifiers(text))


@lru_cache(maxsize=16384)
def _identifiers(text: str) -> tuple[str, ...]:
    """`identifiers`, kept per text: the ledger asks them of every current statement for each new one."""
    seen: set[str] = set()
    out = []
    for m in _IDENT_RE.finditer(text):
        tok = m.group(0).rstrip(".:/-")
        if len(tok) < 3 or not identifier_ok(tok):
            continue
        key = tok.casefold()
        if key not in seen:
            seen.add(key)
            out.append(tok)
    return tuple(out)


def _label_kind(label: str) -> StatementKind | None:
    words = " ".join(label.split())
    if _NON_LABELS.match(words):
        return None
    for kind, rx in _LABEL_KINDS:
        if rx.search(words):
            return kind
    return None


_SHORT_RE = re.compile(
    r"^(?:[\w./@`+#-]+\s+){1,2}only\s*[.!]?$|^(?:please\s+)?be\s+(?:terse|brief|concise|careful|explicit|verbose|polite|direct)\b",
    re.I,
)
_SUGGESTION_RE = re.compile(
    r"^(?:i['’]?d|i\s+would|we['’]?d|you\s+could|one\s+option)\s+(?!rather|prefer|like|love|want)\w+", re.I
)
_EXTRA_RULE_RE = re.compile(
    r"\b(?:is|are)\s+never\s+\w+|\bonly\s+(?:on|in|during|after|before|from|via|through|with|by)\b|"
    r"\bkeep\s+\S+\s+(?:untouched|as\s+is|clean|green|private|off|out\s+of)\b|"
    r"\bbefore\s+(?:saying|calling|marking|declaring|claiming)\b",
    re.I,
)
_EXTRA_DECISION_RE = re.compile(
    r"^(?:agreed|decided|settled)\s+(?:on|to|that)\b|(?:^|[,;:]\s*)(?:go|switch|revert|roll)\s+back\s+to\b|"
    # "s3 it is, the nfs box is too flaky", "do that, the outbox table it is" (not "leave it as it is", "that's how it is")
    r"(?:^|[,;:]\s*)(?!(?:what|how|that|this|thats|as|which|whatever|so|leave|keep)\b)[\w./`+#-]+"
    r"(?:\s+(?!(?:as|what|how|that|is|was|where)\b)[\w./`+#-]+){0,3}\s+it\s+is\s*(?:[.!,;]|$)|"
    r"\b(?:not|no)\s+going\s+back\b|\bafter\s+all\s*(?:[.!,;]|$)|\bwe\s+go\s+with\b|\bdecided\s+(?:with|together|jointly)\b|"
    r"\b(?:now|first|for\s+now|for\s+\w+day|for\s+the\s+[\w-]+)\s*,\s*(?:[\w-]+\s+){1,5}later\s*[.!]?$|^(?:ok(?:ay)?,?\s+|so\s+|then\s+)?go\s+with\s+(?!the\s+flow\b)\S|\b(?:that['’]?s|thats|it['’]?s|its)\s+settled\b|"
    r"(?:^|[,;:]\s*)(?:move|set|change|make|bump|raise|lower|cut|drop|switch)\s+(?:it|them|the\s+\w+(?:\s+\w+)?)\s+(?:to\s+)?[$€£~]?\d|"
    r"\bwe['’]?re\s+(?:doing|going\s+for|taking)\s+(?:the|a|an)\s+\w+",
    re.I,
)
_EXTRA_PREFERENCE_RE = re.compile(
    r"\b(?:i|we)(?:['’]d|\s+would)\s+(?:rather|prefer|like)\b|\bwe\s+use\s+\S+[^.]*?,?\s+not\s+\w+|"
    r"^(?:tag|ping|cc|loop\s+in)\s+@\w",
    re.I,
)
_MOVED_FACT_RE = re.compile(r"\b(?:moved\s+to|switched\s+to|changed\s+to|renamed\s+to)\s+\S|\bnow\s*[.!]?$", re.I)
_CONDITIONAL_RULE_RE = re.compile(
    r"^(?:if|when|whenever)\b[^?]{3,80}?,?\s+(?:then\s+)?(?:always\s+)?(?:page|call|ping|escalate\s+to|alert|notify|roll\s+back|"
    r"rollback|stop|restart|tell|ask|wake|open\s+a\s+ticket|revert|fail\s+over)\b",
    re.I,
)
# A request to the agent for this turn ("Open X and show me Y"): work to do, not a statement to keep
_REQUEST_RE = re.compile(
    r"^(?:please\s+|pls\s+|now\s+|then\s+)?(?:open|show|read|look\s+(?:at|into)|explain|find|grep|search|list|print|cat|"
    r"write\s+(?:a|an|the)\s+(?:\S+\s+){0,2}(?:test|tests|function|method|class|script|helper|query|migration)|implement|refactor|"
    r"rename\s+(?:the\s+)?\S+\s+to\b|add\s+(?:a|an|some|more)\s+(?:\S+\s+){0,2}(?:tests?|logging|logs?|comments?|docstrings?)\b|"
    r"run\s+the\s+(?:\S+\s+)?(?:tests?|suite|checks?|linters?|benchmarks?)\s*[.!]?$|"
    r"tell\s+me|walk\s+me|give\s+me|remind\s+me|(?:write|note|jot)\s+down|recap|sum\s+up|restate|summari[sz]e|review|compare|diff|investigate|debug|trace|profile|paste|dump)\b",
    re.I,
)


def _is_request(s: str) -> bool:
    # a numbered entry's lead does not make a request a statement: "step 3: please look at module m3 next"
    return bool(_REQUEST_RE.match(s) or _REQUEST_RE.match(_ENTRY_RE.sub("", s, count=1))) and not (
        _RULE_ANY_RE.search(s) or _MORE_RULE_RE.search(s) or _EXTRA_RULE_RE.search(s) or _RULE_START_RE.match(s)
    )


_ORDINAL_RE = re.compile(r"^\d+(?:st|nd|rd|th)$", re.I)


# The user's pick among options just offered: "yes desugaring.", "yeah auto loader, decided.", "yes own
# codec", "40k yes": a yes with a thing named after it (not a go-ahead: "yes fix it", "yes thats the plan")
_YES_CHOICE_RE = re.compile(
    r"^(?:yes|yep|yeah|yup)[,.!]?\s+(?!(?:please|pls|go|do|sure|exactly|correct|right|thanks|thank|ty|that|thats|that['’]s|"
    r"this|it|its|it['’]s|and|but|so|i|im|i['’]m|we|you|ok|okay|absolutely|definitely|indeed|agreed|perfect|true|lol|same|"
    r"fine|good|great|makes|sounds|looks|works|fix|remove|add|delete|drop|use|make|keep|change|update|write|move|rename|"
    r"revert|check|test|run|ship|push|merge|commit|try|send|open|close|let['’]?s|will|would|should|can|the\s+\w+\s+(?:is|are)|"
    # an adverb, a filler or a status names no option: "yes really", "yeah whatever", "yep merged", "yes all green"
    r"\w+ly|whatever|just|all|also|more|one|sir|indeed\w*|maybe|of\s+course|\w+ed(?=\s*[,.!]?\s*$)"
    r")\b)[A-Za-z][\w./`+-]*(?:\s+[\w./`+-]+){0,3}\s*(?:[,.!]|$)|"
    r"^[\w./`+-]+(?:\s+[\w./`+-]+){0,3},?\s+(?:decided|settled)\s*[.!]?$",
    re.I,
)
# The same pick said the other way round, or agreed to: "bundled, yes", "rocksdb yes, incremental yes", "hmac with
# pepper, agreed", "agreed: sweep + webhook" (not "oh yes", "ok, agreed", "agreed, thanks")
_PICK = r"(?!(?:oh|ok|okay|and|but|so|well|hmm+|ah|uh|um|erm|thanks|please|sure|right|yes|yeah|yep|no|nope|fine|good|great|cool|that|this|it|i|we|you)\b)[\w./`+#%()-]+(?:\s+[\w./`+#%()-]+){0,3}"
_PICK_YES_RE = re.compile(
    r"^" + _PICK + r"(?:,?\s+(?:yes|it\s+is)|,\s*agreed)(?:\s*,\s*" + _PICK + r"(?:,?\s+yes|,\s*agreed))*\s*[.!]?$|"
    r"^" + _PICK + r",\s*(?:yes|agreed)\s*,\s*\S|"
    r"^(?:agreed|settled|decided)\s*[,:]\s+(?!(?:thanks|thank|cool|nice|great|good|sounds|makes|lets|let['’]s|do|go|that|this|it)\b)"
    r"[\w./`+#%()-]+(?:\s+[\w./`+#%()-]+){0,5}\s*[.!]?$",
    re.I,
)
# the choice handed back to the user: "I'd add one but it's your call", "I'd keep that unless the board wants the sheet"
_DEFER_RE = re.compile(r"\b(?:your\s+call|up\s+to\s+you|unless|if\s+you\s+(?:want|prefer|agree|like))\b", re.I)
# the assistant's proposal of a choice: "I'd key the state by (imsi, seq)", "I would start with a hash join" (not an
# expectation or an opinion: "I'd expect p99 at 24 ms", "I'd lean towards (1)", "I'd say it's fine")
_PROPOSAL_RE = re.compile(
    # at the start, after a clause ("Cron fires once; I'd match cron"), or after a short lead ("For CSV I'd stream rows")
    r"(?:^|[,;:]\s*|^(?:for|with|since|given|then|so|here|in|on|at|to|if\s+so)\b[^.;:?!]{0,60}?\s|\bso\s+)(?:i['’]?d|i\s+would)\s+(?:also\s+|first\s+|still\s+)?(?!(?:expect|guess|think|say|assume|imagine|bet|look|lean|need|"
    r"like|love|want|rather|prefer|be|have|hope|worry|wait|check|ask|suggest\s+you)\b)[a-z]+\b",
    re.I,
)


def classify(sentence: str, role: str = "user") -> StatementKind | None:
    """The kind of statement an unlabelled sentence makes, or None: not load-bearing."""
    s = _clean(sentence)
    if role in ("user", "instructions") and _SHORT_RE.search(s):
        return "preference"
    if role == "user" and (_YES_CHOICE_RE.match(sentence.strip()) or _PICK_YES_RE.match(s)) and not _is_question(s):
        return "decision"
    if role in ("user", "instructions") and not _is_question(s):
        if len(s.split()) == 2 and re.search(r"\d\.\d", s) and _stack_line(s):
            return "constraint"  # "nixos 24.05", "python 3.12": the version the work is on
        if _PROGRESS_RE.search(s):
            return "goal"  # "71/112 done", "so 84/112": where the work is
    if len(s) < 8 or len(s.split()) < 3:
        return None
    if _CONDITIONAL_RULE_RE.match(s):
        return "rule"
    if role == "assistant" and _PROPOSAL_RE.search(s) and not (_is_question(s) or _HEDGE_RE.search(s) or _DEFER_RE.search(s)):
        return "decision"  # a proposal: the ledger records it as one, and the user's yes makes it a decision
    if _states_nothing(s):
        return None
    return _rule_kind(s) or _fact_or_choice(s, role)


def _states_nothing(s: str) -> bool:
    """A request, an offer, a question, a hedge, someone else's words, an account of work, a report of
    what is done: none of them states anything to keep."""
    if _is_request(s):
        return True  # "if it breaks at night page oncall-hazel-4f78": a condition, not a hedge
    if _SUGGESTION_RE.match(s) and not _RULE_ANY_RE.search(s):
        return True  # an opinion or an offer ("I'd fix it to stay in Decimal"), not a statement
    if _is_question(s) or _HEDGE_RE.search(s) or _NEGATED_DECISION.search(s) or _idiom_only(s):
        return True
    if _SAYS_RE.search(s) and (_QUOTED_RE.search(s) or _HEARSAY_RE.search(s) or _rule_kind(s) is None):
        return True  # a report of someone else's words, or a quote being discussed (not a rule relayed: "ops says max 5")
    if _MEASURED_RE.match(s) and len(s.split()) <= 10 and not (_RULE_ANY_RE.search(s) or _RULE_START_RE.match(s)):
        return True  # a measurement held against its bound: a report, not the bound
    if _is_reading(s) and not (_RULE_ANY_RE.search(s) or _RULE_START_RE.match(s)):
        return True  # a reading ("642 at p95", "p95 was 2.4s", "we're at 341 KB"), with no bound said
    if _ONE_SHOT_RE.match(s) and not (
        _NUM_RE.search(s) or _GENERAL_RE.search(s) or _GOAL_RE.search(s) or re.search(r"\bit\s+is\b", s, re.I)
    ):
        return True  # work for this step on the thing at hand ("run it on the test db", "try it, dont ship anything yet")
    unquoted = _QUOTED_RE.sub(" ", s)  # an error message quoted in it says nothing of how to work
    if _PROBLEM_RE.match(s) and not (_RULE_ANY_RE.search(unquoted) or _RULE_START_RE.match(unquoted)):
        return True  # the problem being worked on, described: what is wrong, not what holds
    if _REPORT_RE.match(s) and not (
        _GOAL_RE.search(s) or _RULE_ANY_RE.search(s) or _DECISION_RE.search(s) or _EXTRA_DECISION_RE.search(s)
    ):
        return True
    # a report of what is done
    return bool(_DONE_RE.search(s)) and not (
        re.search(r"\b(?:next|then|blocked|unblocked|tomorrow|now\s+we)\b", s, re.I)
        or _RULE_START_RE.match(s)
        or _EXTRA_RULE_RE.search(s)
    )


def _rule_kind(s: str) -> StatementKind | None:
    """A decision, a rule or a constraint (a rule with a cap or a limit), or a goal."""
    if _DECISION_RE.search(s) or _EXTRA_DECISION_RE.search(s):
        return "decision"
    capped = _CAP_RE.search(s) and _CAP_VALUE_RE.search(s)
    if _RULE_START_RE.match(s):
        return "constraint" if capped and not re.match(r"(?:please\s+)?(?:never|don|do\s+not|dont)", s, re.I) else "rule"
    if capped or _PERMISSION_RE.search(s) or _VERSION_LINE_RE.match(s) or _RUNTIME_RE.search(s) or _stack_line(s):
        return "constraint"
    if _RULE_ANY_RE.search(s) or _MORE_RULE_RE.search(s) or _EXTRA_RULE_RE.search(s):
        return "rule"
    if _MORE_CONSTRAINT_RE.search(s) and _CAP_VALUE_RE.search(s):
        return "constraint"
    if _VALUE_CHANGE_RE.search(s):
        return "constraint"  # a value set anew: "we moved to R 4.4.1", "finance bumped the alarm to $21k"
    if _GOAL_RE.search(s) or _MORE_GOAL_RE.search(s):
        return "goal"
    return None


# A name that is no identifier by the guard's rule but names a thing all the same: backticked or quoted, a
# hyphenated name ("billing-export", "macos-arm"), an inner capital ("FernhillTeaECOM"), key=value, #channel
# (not an adjective written with a hyphen: "stable-ish", "well-known", "up-to-date", "back-pressured")
_NAME_RE = (
    r"(?:`[^`\n]{2,60}`|\"[^\"\n]{2,40}\"|#[\w-]{2,}|"
    r"(?!(?:well|up|self|half|non|ill|over|under|out|back|semi|all|long|short|hard|high|low)-)[A-Za-z0-9]+(?:-[A-Za-z0-9]+)+"
    r"(?<!-ish)(?<![a-z]ed)(?<!-known)(?<!-like)|(?-i:[A-Z][a-z]+[A-Z]\w*)|"
    r"\w+=[^\s,;]+|[\w-]+(?:[./][\w-]+)+)"
)
# "repo is billing-export", "the param is ranking=hybrid", "queues are macos-arm and linux-large",
# "merchant account is FernhillTeaECOM": a fact noun, a copula, a name
_NAMED_FACT_RE = re.compile(
    r"\b(?:" + _FACT_NOUN_RE.pattern[5:-3] + r"|param(?:eter)?|merchant|entity|app|lane|site|store|provider|"
    r"remote|alias|handle|slug|label|sku|bundle)(?:e?s)?\s+(?:is|are|=|will\s+be)\s+(?:now\s+)?(?:called\s+|named\s+|in\s+|at\s+|on\s+)?"
    r"(?:the\s+)?" + _NAME_RE + r"(?=[\s,.;:!)]|$)",
    re.I,
)

# one part of a stack line: a name and its version ("gcc 13", "node 20 LTS", "C++20", "s140 7.3.0") or a bare name
_STACK_PART_RE = re.compile(
    r"^(?:[A-Za-z][\w.+#-]*(?:\s+[A-Za-z][\w.+#-]*){0,2}\s+v?\d+(?:\.\d+)*[a-z]?(?:\s+[A-Za-z]{2,5}(?:\s+\d{2,4})?)?|[A-Za-z][A-Za-z+#]*\d+(?:\.\d+)*)$"
)
# words that open no tool's name: "thats 1.80", "back in 40", "could save like 2k", "rollback works on all 3"
_STACK_STOP_RE = re.compile(
    r"^(?:ok|okay|so|thats|that['’]s|its|it['’]s|it|this|that|the|a|an|we|i|you|back|in|on|at|all|like|about|around|only|just|"
    r"could|would|should|can|will|was|is|are|build|pr|issue|ticket|zone|level|page|line|step|day|week|room|item|row|"
    r"part|chapter|section|round|run|attempt|try|number|no|yes|maybe|works?|save|got|have|has|need|needs|took|takes)\b",
    re.I,
)
_STACK_SPLIT_RE = re.compile(r"\s*(?:[,;&]|\s\+\s|\band\b|\bwith\b|\bon\b|\bbuilds?\s+with\b)\s*", re.I)

# a count of work done: "71/112 done", "38 of 112 done", "so 84/112", "52/112 now"
_PROGRESS_RE = re.compile(
    r"\b\d+\s*(?:/|\bof\b)\s*\d+\s+(?:\w+\s+)?(?:done|left|to\s+go|migrated|complete|completed|finished|ported|now)\b|"
    r"\b(?:so|now|at)\s+\d+\s*/\s*\d+\s*[.!]?$",
    re.I,
)

# a value changed to a new one: "we moved to R 4.4.1", "they bumped the budget to 6500 credits", "cutover moved to 27 jan"
_VALUE_CHANGE_RE = re.compile(
    r"\b(?:moved|bumped|upgraded|switched|migrated|changed|raised|lowered|cut|increased|reduced)\s+(?:[\w.-]+\s+){0,4}"
    r"(?:to|at)\s+(?:[A-Za-z][\w.+-]*\s+)?[~$€£]?v?\d",
    re.I,
)


def _stack_line(s: str) -> bool:
    """Is the sentence a list of tools and their versions ("nuxt 3.12, node 20 LTS", "C++20, cmake, gcc 13",
    "fortran 2008 + MPI, builds with ifx 2024.2")? Every part is a name with its version or a bare name of one
    or two words, and at least one part has a version."""
    parts = [p for p in _STACK_SPLIT_RE.split(s.strip().rstrip(".!")) if p]
    if not parts or len(s.split()) > 16 or _STACK_STOP_RE.match(parts[0]):
        return False
    versioned = [p for p in parts if _STACK_PART_RE.match(p) and not _STACK_STOP_RE.match(p)]
    bare = sum(
        1 for p in parts if not _STACK_PART_RE.match(p) and re.fullmatch(r"[A-Za-z][\w.+#/-]*(?:\s+[A-Za-z][\w.+#/-]*)?", p)
    )
    # a dotted version ("3.12") or a name with its number in it ("C++20") is a version; "back in 40" and "build
    # 4812" are not, unless the line names two or more tools with numbers
    strong = sum(1 for p in versioned if re.search(r"\d\.\d|[A-Za-z+#]\d", p))
    return (strong >= 1 or len(versioned) >= 2) and len(versioned) + bare == len(parts)


def _fact_or_choice(s: str, role: str) -> StatementKind | None:
    """A preference (the user's), an identifying fact, or a short choice ("pnpm it is")."""
    if (_PREFERENCE_RE.search(s) or _EXTRA_PREFERENCE_RE.search(s)) and role in ("user", "instructions"):
        return "preference"
    if _has_identifier(s) and _MOVED_FACT_RE.search(s) and role != "assistant":
        return "fact"
    if _PERSON_RE.search(s.strip()):
        return "fact"
    if role != "assistant" and _NAMED_FACT_RE.search(s) and not _REPORT_RE.match(s):
        return "fact"
    if re.search(r"\b(?:listens?|runs?|serves?|is|sits?|lives?)\s+on\s+port\s+\d{2,5}\b", s, re.I):
        return "fact"
    if re.search(r"\b(?:id|key|sku|slug|handle|uuid|hash|code)\s+(?:is|=)\s+`?[\w.:/-]{8,}`?\s*[.!]?$", s, re.I):
        return "fact"  # "store listing id is kmhfoedjgbnplacoeiaghmdkjfnbelop"
    if _has_identifier(s) and (_FACT_NOUN_RE.search(s) or _LINK_FACT_RE.search(s)) and not _REPORT_RE.match(s):
        return "fact"
    if role == "user" and len(s.split()) <= 12 and _CHOICE_RE.search(s):
        return "decision"
    if role == "user" and len(s.split()) <= 20 and _CONTRAST_RE.search(s):
        return "decision"  # one thing over another: "TRT, not MRT, for the runs", "by swiping the row, not with a button"
    return None


# what follows "not" when it is no alternative: a time, a degree, a state ("not now", "not sure", "not working")
_NOT_ALT = (
    r"(?:now|today|tonight|tomorrow|yet|sure|bad|there|here|happening|enough|it|us|me|him|her|them|this|that|those|these|"
    r"a\s+rule|so|too|really|much|great|ideal|always|quite|exactly|just|only|even|all|every|fully|entirely|necessarily|"
    r"worth|needed|needs?|possible|ready|right|wrong|working|done|true|clear|obvious|an?\s+(?:issue|problem|big\s+deal|"
    r"option|priority))\b"
)
# straight after "not", a verb or an adverb: "not going", "not tested", "not really"
_NOT_FORM = r"(?:\w+ing|\w+ed|\w+ly)\b"
_PREP = r"(?:a|an|the|with|in|on|via|by|to|for|from|at|as|over|through)"
# what may follow "not" in a contrast: an alternative, not a time, a degree or a verb form
_NOT_NEXT = r"(?!(?:" + _PREP + r"\s+)?" + _NOT_ALT + r"|" + _NOT_FORM + r")"
_CONTRAST_RE = re.compile(
    r"\b(?!"
    + _AUX
    + r"\b)[\w.+`/#-]*[A-Za-z0-9`%][)\]\"'’]?,?\s+not\s+"
    + _NOT_NEXT
    + r"(?:"
    + _PREP
    + r"\s+)?[\w.+`/#-]*[A-Za-z0-9`]|"
    # "existing timetable app, no new app", "already in the app, no new state libs"
    r"^(?!(?:ok|okay|yes|yeah|thanks|sure|fine|hmm|ah|oh)\b)[\w\s.+`/#-]{2,40},\s+no\s+(?!(?:worries|problem|problems|rush|idea|"
    r"need|way|clue|thanks|biggie|change|changes|news|luck|offense|pressure|hurry|doubt|issue|issues|errors?|warnings?|"
    r"failures?|incidents?|regressions?|decision|promises?|more|longer)\b)\w+",
    re.I,
)


def signals(sentence: str, role: str, rule_kind: StatementKind | None) -> list[str]:
    """What the rules see in a sentence, as the learned scorer's features."""
    s = _clean(sentence)
    out = [f"rule={rule_kind or 'none'}"]
    checks = (
        ("question", _is_question(s)),
        ("hedge", bool(_HEDGE_RE.search(s))),
        ("negated", bool(_NEGATED_DECISION.search(s))),
        ("says", bool(_SAYS_RE.search(s))),
        ("report", bool(_REPORT_RE.match(s))),
        ("done", bool(_DONE_RE.search(s))),
        ("ident", _has_identifier(s)),
        ("cap", bool(_CAP_RE.search(s) and _CAP_VALUE_RE.search(s))),
        ("rule_any", bool(_RULE_ANY_RE.search(s) or _RULE_START_RE.match(s))),
        ("pref", bool(_PREFERENCE_RE.search(s))),
        ("goalcue", bool(_GOAL_RE.search(s) or _MORE_GOAL_RE.search(s))),
        ("decisioncue", bool(_DECISION_RE.search(s))),
    )
    out += [name for name, on in checks if on]
    return out


#: a sentence the rules missed is kept when the scorer gives it at least this chance of being one
ADMIT = 0.5
#: a sentence the rules call empty (a hedge, someone else's words, a reading) is not admitted by the scorer either
GATE_SCORER = True
#: the rules' verdict stands unless the scorer gives the sentence less than this chance of being a statement
VETO = 0.0
#: the same for the assistant's sentences, mostly explanations of its work ("the next biggest chunk is ...")
ASSISTANT_VETO = 0.2
#: the user's other words are kept verbatim (ranked last) unless the scorer gives them less than this
SAID_MIN = 0.0


def score(sentence: str, role: str = "user") -> tuple[StatementKind | None, float, StatementKind]:
    """The kind of statement a sentence makes (None: not load-bearing), how sure the detector
    is that it is one (0..1), and its best guess of the kind all the same: the rules' verdict,
    weighed by the learned scorer."""
    rule_kind = classify(sentence, role)
    s = _clean(sentence)
    if len(s) < 4:
        return None, 0.0, rule_kind or "fact"
    probs = ledger_scorer.probabilities(ledger_scorer.features(s, role, signals(sentence, role, rule_kind)))
    p_stmt = 1.0 - probs[0]
    guess = rule_kind or STATEMENT_KINDS[max(range(1, len(probs)), key=probs.__getitem__) - 1]
    if rule_kind is not None and p_stmt >= (ASSISTANT_VETO if role == "assistant" else VETO):
        return rule_kind, p_stmt, guess
    if rule_kind is not None:
        return None, p_stmt, guess
    if (
        p_stmt < ADMIT
        or len(s.split()) < 2
        or sentence.lstrip().startswith("#")
        or (_is_question(s) and not _RULE_ANY_RE.search(s))
        or _is_request(s)
        or _idiom_only(s)
        or (GATE_SCORER and _gated(s))
    ):
        return None, p_stmt, guess
    return guess, p_stmt, guess


def _gated(s: str) -> bool:
    """What the scorer may not admit either: a reading, the problem at hand, a request aimed at the thing at hand."""
    return bool(
        _is_reading(s) or _PROBLEM_RE.match(s) or (_ONE_SHOT_RE.match(s) and not (_NUM_RE.search(s) or _GENERAL_RE.search(s)))
    )


_ACK_RE = re.compile(
    r"^(?:ok(?:ay)?|k|kk|sure|thanks?|thx|ty|cool|nice|great|perfect|awesome|lgtm|sgtm|yes|yep|yeah|yup|no|nope|nah|"
    r"go|go ahead|do it|ship it|sounds good|makes sense|got it|right|ah|ahh|oh|hmm+|lol|haha|brb|back|morning|hi|hello|hey|"
    r"good|fine|done|all good|np|no worries|cheers|bye|later|continue|proceed|next|yes please|please do|agreed)\b[\s,.!]*",
    re.I,
)


# a numbered entry's lead ("Turn 17:", "Step 3 -", "Day 2.") and a past-tense opening ("Investigated ...")
_ENTRY_RE = re.compile(r"^[A-Za-z]+\s+\d+\s*[:.)-]\s*")
_PAST_RE = re.compile(r"^(?:i\s+|we\s+)?(?!need|feed|seed|speed|embed|proceed|succeed|exceed)[a-z]{3,}ed\b", re.I)


def worth_keeping(sentence: str) -> bool:
    """Is a sentence of the user's that the detector did not call a statement still worth keeping
    word for word? Yes, unless it is a question, an acknowledgement, a hedge or a report of
    someone else's words: the user's own words are never handed to a summarizer to paraphrase."""
    s = _clean(sentence)
    words = s.split()
    short_but_specific = len(words) == 2 and (
        _has_identifier(s) or any(c.isdigit() for c in s) or re.search(r"\b(?:only|never|always|no)\b", s, re.I)
    )
    if (len(words) < 3 and not short_but_specific) or sentence.lstrip().startswith("#"):
        return False
    if len(words) >= 12 and len({w.casefold() for w in words}) < 0.35 * len(words):
        return False  # the same few words over and over (filler, a stuck paste): nobody states a thing that way
    # a condition is no hedge here: "if it breaks at night page oncall-hazel-4f78" is a rule
    hedged = any(not h.group(0).lower().startswith(("if ", "unless ")) for h in _HEDGE_RE.finditer(s))
    # a report of someone's words is kept too ("mei says start from 2025-01-01"): it is ranked last, not believed
    if _is_question(s) or hedged or _NEGATED_DECISION.search(s) or _is_request(s) or _idiom_only(s):
        return False
    # the user's account of their own work ("I read through the scheduler", "Turn 17: Investigated a flaky
    # test"), nothing specific in it
    entry = _ENTRY_RE.sub("", s, count=1)
    if (_REPORT_RE.match(entry) or _PAST_RE.match(entry)) and not (_has_identifier(entry) or any(c.isdigit() for c in entry)):
        return False
    if re.match(r"(?:here['’]?s|here\s+(?:is|are)|attached|pasting|see\s+(?:below|above))\b", s, re.I):
        return False  # a paste's cover note: the paste itself is what counts
    rest = _ACK_RE.sub("", s, count=1)
    return len(rest.split()) >= (2 if short_but_specific else 3)


def detect_scored(sentence: str, role: str, words: bool) -> tuple[StatementKind | None, float, bool]:
    """(kind, score, said) of one unlabelled sentence; with ``words``, a user's sentence the detector
    did not call a statement but that is worth keeping comes back as ``said``."""
    kind, p, guess = score(sentence, role)
    if kind is None and words and role in ("user", "instructions") and p >= SAID_MIN and worth_keeping(sentence):
        return guess, p, True
    return kind, p, False


_LOG_LINE_RE = re.compile(
    r"^\s*(?:\[?\d[\d:.TZ-]*\]?\s+)?\[?(?:INFO|DEBUG|WARN(?:ING)?|ERROR|TRACE|FATAL|CRITICAL|NOTICE)\b", re.I
)
_COMMENT_RE = re.compile(r"^[ \t]*(?:#+|//+|--|;+|/\*+|\*)[ \t]+(?P<body>\S.*?)(?:\*/)?[ \t]*$")

# A second label on the same line starts a statement of its own: "LIMIT: ... . FACT: ...".
_NEXT_LABEL_RE = re.compile(r"(?<=[.!?;])[ \t]+(?=(?:\*\*)?[A-Z][A-Z0-9 /&-]{1,30}(?:\*\*)?:[ \t])")


def _pieces(line: str) -> Iterable[tuple[int, str]]:
    """A line, split where another label starts."""
    start = 0
    for m in _NEXT_LABEL_RE.finditer(line):
        yield start, line[start : m.start()]
        start = m.end()
    yield start, line[start:]


def detect(text: str, role: str = "user", *, words: bool = False) -> list[Found]:
    """The statements of a message, in order. Tool output counts only its labelled lines
    and its prose rules ("Never commit secrets."), not its logs; code blocks count nothing.
    With ``words``, the user's other sentences worth keeping come too, marked ``said``."""
    found: list[Found] = []
    in_code = False
    offset = 0
    tool = role == "tool"
    for line in text.splitlines(keepends=True):
        base = offset
        offset += len(line)
        if _FENCE_RE.match(line):
            in_code = not in_code
            continue
        if not line.strip():
            continue
        stripped = line.rstrip("\r\n")
        comment = _COMMENT_RE.match(stripped)
        if in_code or (tool and comment):
            # code says nothing; its comments may state a rule ("# do not change the seed")
            if comment is None:
                continue
            body = comment.group("body")
            for f in _detect_piece(body, base + comment.start("body"), "user", False):
                if f.kind in ("rule", "constraint", "decision") and (
                    f.label or _RULE_ANY_RE.search(f.text) or _RULE_START_RE.match(_clean(f.text))
                ):
                    found.append(f)
            continue
        if tool and (stripped[:1] in " \t" and not stripped.lstrip().startswith(("-", "*"))):
            continue  # indented output: code, a traceback, a listing
        if len(stripped) > 4 * MAX_STATEMENT_CHARS:
            stripped = stripped[: 4 * MAX_STATEMENT_CHARS]
        for at, piece in _pieces(stripped):
            found.extend(_detect_piece(piece, base + at, role, words))
            if len(found) >= MAX_PER_MESSAGE:
                break
        if len(found) >= MAX_PER_MESSAGE:
            break
    return _carry_cue([f for f in found[:MAX_PER_MESSAGE] if len(f.text) <= MAX_STATEMENT_CHARS])


def _carry_cue(found: list[Found]) -> list[Found]:
    """A message that opens with its correction ("update: we're dropping 3.9. support is 3.10 to 3.13",
    "scratch the sqlite plan, backend wants watermelondb") corrects with the statements that follow the
    cue too, not only with the sentence that holds it."""
    out: list[Found] = []
    cue = False
    for f in found:
        if cue and not f.correction:
            f = replace(f, correction=True)
        # only a cue that says something earlier no longer holds carries ("update:", "scratch that");
        # "from now on" or "now" opens a new statement, not a correction of the ones after it
        cue = cue or (f.correction and bool(_CARRY_RE.search(" ".join(f.text.split()[:16]))))
        out.append(f)
    return out


_CARRY_RE = re.compile(
    r"\b(?:update[ds]?|correction|correcting|scratch|forget|ignore|nvm|change\s+of|actually|no\s+wait|oh\s+wait|my\s+bad|"
    r"i\s+meant|turns\s+out|no\s+longer|any\s?more|moved|switched|renamed|changed|is\s+too|was\s+wrong|is\s+wrong|"
    r"dropping|instead)\b",
    re.I,
)


_ITEM_RE = re.compile(r"\s*(?:[-*+]|\d{1,2}[.)])\s+\S")
_MARKER_RE = re.compile(r"^(?:[-*+]|\d{1,2}[.)])\s+(?=\S)")


def _instruction(sentence: str) -> bool:
    """Does a sentence of an instruction file's list item instruct? Not a question, a hedge, or a
    fragment of one or two words."""
    s = _clean(sentence)
    return len(s.split()) >= 2 and not (_is_question(s) or _HEDGE_RE.search(s))


def _tool_sentence_end(text: str) -> bool:
    return bool(re.search(r"[.!]\s*$", text))


def _tool_rule(sentence: str) -> bool:
    """Is a sentence of a tool's output a prose rule? It ends like a sentence and opens like a rule
    ("Never …", "Run …", "Use …")."""
    return _tool_sentence_end(sentence) and bool(
        re.match(r"\s*(?:[-*]\s+|\d{1,2}[.)]\s+)?(?:never|always|do\s+not|don['’]?t|must|only|run|use|please)\b", sentence, re.I)
    )


# a label over nothing: "DECISION: none yet on clustering.", "PREF: none really, pick whatever", "TBD"
_EMPTY_BODY_RE = re.compile(
    r"(?:(?:none|nothing)(?:\s+(?:yet|really|so\s+far|for\s+now|at\s+the\s+moment|decided))?(?:\s*$|\s*[,.;:]|\s+(?:on|for|about)\b)"
    r"|(?:nothing\s+(?:new|to\s+report|changed)|no\s+(?:change|changes|news|updates?)|unchanged|same\s+as\s+(?:before|yesterday|last\s+\w+))\b"
    r"|(?:n/a|tbd|pending|\?|-)\s*$)",
    re.I,
)
# a measured value held against its bound: "19.4, under 22.", "742, tight but under.", "1h47 is way over what we want"
_MEASURED_RE = re.compile(
    r"^[~$€£]?\d[\d.,:]*\s*[a-zµ°%]{0,4}\d{0,2}(?:\s+[a-z]\w*){0,2}\s*,?\s*(?:(?:tight|just|way|well|still|barely|comfortably|"
    r"but|is|are|was|so)\s+){0,3}(?:under|over|below|above|within)\b(?!\s+(?:no\s+circumstances|any))",
    re.I,
)

# a reading of a measured value: "642 at p95.", "14.1 at p99, meh", "peak was 3,800 users", "we're at 341 KB now"
_READING_RE = re.compile(
    r"^[~$€£]?\d[\d.,]*\s*[a-zµ%]{0,5}\s+(?:at|@|on)\s+(?:the\s+)?(?:p\d{2,3}|peak|median|mean|avg|average)\b|"
    r"\b(?:p\d{2,3}|peak|median|average|mean|avg)\b(?:\s+[\w-]+){0,4}\s*(?:was|were|came\s+in\s+at|hit|reached|peaked\s+at|:)?\s+[~$€£]?\d|"
    r"\bat\s+the\s+peak\b|\bso\s+far\s*[.!]?$|"
    r"^(?:we['’]?re|we\s+are|it['’]?s|its|it\s+is)\s+(?:now\s+|still\s+)?at\s+[~$€£]?\d",
    re.I,
)


def _is_reading(s: str) -> bool:
    """A measured value read out, with no bound beside it (under a heading too: "flash check: we're at 341 KB")."""
    return bool((_READING_RE.search(s) or _READING_RE.search(_HEAD_PREFIX_RE.sub("", s, count=1))) and not _BOUND_RE.search(s))


# a bound said beside a number: what makes a reading a constraint
_BOUND_RE = re.compile(
    r"\b(?:under|below|at\s+most|at\s+least|no\s+more\s+than|must|should|need|needs|has\s+to|have\s+to|target|slo|sla|"
    r"budget|limit|cap|max(?:imum)?|min(?:imum)?|keep|stay|stays|within|exceed\w*|allowed|only)\b|[<>]",
    re.I,
)
# a go-ahead or a request aimed at the thing at hand: "try it", "run it on the test db", "change it in risk.yaml"
_ONE_SHOT_RE = re.compile(
    r"^(?:ok(?:ay)?,?\s+|yes,?\s+|fine,?\s+|then\s+|so\s+|now\s+)?(?:try|run|rerun|queue|change|do|redo|retry|fix|commit|push|test|"
    r"check|rebuild|restart|send|post|kick\s+off|start|add|put|bump|update|revert|delete|remove|merge|deploy|ship)\s+"
    r"(?:it|them|both|this|that|those|these)\b|^(?:don['’]?t|do\s+not)\s+do\s+anything\s+(?:about|with|to)\s+(?:it|that|this|them)\b",
    re.I,
)
# what makes a request a standing one: "always", "from now on", "every time"
_GENERAL_RE = re.compile(
    r"\b(?:always|never|every|each\s+time|whenever|any\s+time|from\s+now\s+on|going\s+forward|in\s+future|in\s+the\s+future|"
    r"by\s+default)\b",
    re.I,
)
# the problem at hand, described: "the bug: players rubberband above ~40", "the crash: IllegalStateException in ..."
_PROBLEM_RE = re.compile(
    r"^(?:(?:the|a|one|another|new|weird|same)\s+)?(?:bug|crash|error|problem|issue|failure|symptom|regression|repro|flake|"
    r"incident|outage|exception|traceback)s?\s*(?::|is\s+that\b|was\s+that\b)|"
    # "QA found a crash on android 8", "support reported another bug in the export"
    r"^(?:[\w-]+\s+){0,2}(?:found|hit|saw|got|reported|reports|filed)\s+(?:a|an|another|the|some|two|three)\s+(?:[\w-]+\s+)?"
    r"(?:bug|crash|error|problem|issue|failure|regression|leak)s?\b|"
    # a story of what happened: "yesterday the deploy broke because ...", "last week someone published ..."
    r"^(?:yesterday|last\s+(?:week|night|time|sprint|month)|this\s+morning|earlier\s+today)\b(?!.*\b(?:decided|agreed|now|from\s+now\s+on)\b)",
    re.I,
)
# words heard once, or said by someone unnamed: "someone said that once in standup", "someone in slack said both"
_HEARSAY_RE = re.compile(r"\b(?:once|someone|somebody|apparently|rumou?r)\b", re.I)

# the model's account of its own work: "Done: …", "I've added …", "Changed `X` to …", "It does now: …"
_WORK_REPORT_RE = re.compile(
    r"^(?:done|changed|added|fixed|updated|removed|renamed|moved|rewrote|replaced|wired|i['’]ve|i\s+have|"
    r"it\s+does\s+now|now\s+it)\b",
    re.I,
)

# a tool's progress line ("Applying Policy: keep 14 daily", "Running migrations: 3 of 9") or a commit subject under
# its hash (`git log --oneline`: "e1f4a07 ADR-0042: ..."): output that reports, not a label that states
_TOOL_NON_LABEL_RE = re.compile(
    r"^(?:[0-9a-f]{7,40}\s|(?:applying|running|checking|building|compiling|downloading|installing|fetching|creating|updating|"
    r"removing|deleting|loading|saving|writing|reading|processing|starting|stopping|waiting|pruning|scanning|resolving|"
    r"collecting|generating|uploading|pushing|pulling|migrating|syncing|verifying|validating|testing|linking|copying|"
    r"packing|unpacking|preparing|finalizing|cleaning|forgetting|restoring|snapshotting)\b)",
    re.I,
)

# a sentence that only settles what was just said: "thats settled", "that's the decision for v1", "decided."
_SETTLED_RE = re.compile(
    r"^(?:and\s+|so\s+)?(?:(?:that|this|it)['’]?s|thats|its|(?:that|this|it)\s+is)\s+(?:now\s+)?(?:the\s+|a\s+|our\s+|my\s+|)"
    r"(?:decision|settled|decided|final|agreed|call)\b|^(?:decided|settled|agreed|final)\s*[.!]*$|"
    # "decided with Hana this morning", "agreed with the traders yesterday"
    r"^(?:we\s+|i\s+)?(?:decided|agreed|settled)\s+(?:(?:with|in|at)\s+(?:\S+\s+){0,4}?)?(?:yesterday|today|this\s+\w+|last\s+\w+|earlier)?\s*[.!]?$",
    re.I,
)


def _detect_piece(stripped: str, base: int, role: str, words: bool) -> list[Found]:
    """The statements of one line (or of one labelled part of it)."""
    found: list[Found] = []
    tool = role == "tool"
    if tool and _LOG_LINE_RE.match(stripped):
        return found
    labelled = _LABEL_RE.match(stripped)
    if labelled:
        kind = _label_kind(labelled.group("label"))
        if (tool and (kind not in ("rule", "decision") or _TOOL_NON_LABEL_RE.match(labelled.group("label")))) or (
            role == "assistant" and _WORK_REPORT_RE.match(_clean(stripped))
        ):
            kind = None
        if kind is not None:
            body = labelled.group("body")
            asks = _is_question(body) and not (kind == "goal" and re.search(r"\bquestions?\b", labelled.group("label"), re.I))
            if _EMPTY_BODY_RE.match(body):
                return found  # the label says there is nothing to say yet
            if not (asks or _HEDGE_RE.search(stripped)):
                label = " ".join(labelled.group("label").split())
                rest = ""
                if len(stripped) > LABELLED_LINE_CHARS:
                    # a label inside a paragraph states one sentence, not the rest of the paragraph
                    first = next(iter(_sentences(body)), (0, body))[1]
                    cut = labelled.start("body") + len(first)
                    stripped, rest = stripped[:cut], stripped[cut:]
                text_ = stripped.strip()
                # the label may carry the cue: "correction on the region: …", "new plan for the rollout: …"
                cue = _corrects(body) or bool(_CORRECTION_RE.search(label)) or bool(_NEW_LABEL_RE.search(label))
                found_ = [Found(kind, text_, base + stripped.find(text_), label, cue)]
                if rest.strip():
                    found_ += _detect_piece(rest, base + len(stripped), role, words)
                return found_
    # a document's list (CONTRIBUTING.md, a runbook) read through a tool states its rules as items
    tool_item = (
        tool
        and _tool_sentence_end(stripped)
        and bool(_ITEM_RE.match(stripped))
        and classify(stripped, "user") in ("rule", "constraint")
    )
    if tool and not tool_item and not any(_tool_rule(piece) for _, piece in _sentences(stripped)):
        return found
    # an instruction file's list item (AGENTS.md, CLAUDE.md) is an instruction: "- Java 17 toolchain."
    item = role == "instructions" and _ITEM_RE.match(stripped) is not None
    prev: tuple[int, str] | None = None
    for start, piece in _sentences(stripped):
        if tool and not tool_item and not _tool_rule(piece):
            continue  # a tool's output states only its prose rules ("We follow standardrb. Run `…` before pushing.")
        if role == "assistant" and _WORK_REPORT_RE.match(_clean(piece)):
            continue  # the model's account of what it did: its work, not a statement
        before, prev = prev, (start, piece)
        if role == "user" and before is not None and _SETTLED_RE.match(_clean(piece)):
            # "start from 2025-01-01, no backfill. thats settled": the marker settles the sentence before it
            b_start, b_piece = before
            if found and found[-1].start == base + b_start + b_piece.find(found[-1].text):
                found.pop()
            whole = stripped[b_start : start + len(piece)].strip()
            found.append(Found("decision", whole, base + stripped.find(whole, b_start), None, _corrects(whole), 1.0))
            continue
        kind, p, said = detect_scored(piece, role, words)
        if kind is None and item and _instruction(piece):
            kind = score(piece, role)[2]
        if kind is None or (role == "assistant" and kind not in ("decision", "goal", "rule")):
            continue  # the model's facts and figures are its work, not the user's statements
        text_ = _MARKER_RE.sub("", piece.strip(), count=1)  # a list item's marker is not part of what it says
        found.append(Found(kind, text_, base + start + piece.find(text_), None, _corrects(piece), p, said))
    if item and len(found) > 1:
        # an instruction file's item is one instruction, however many sentences it takes ("No third-party
        # JavaScript. No analytics, no web fonts.", "Watchdog stays on in every build. Timeout 500 ms.")
        whole = _MARKER_RE.sub("", stripped.strip(), count=1)
        if len(whole) <= LABELLED_LINE_CHARS:
            first = found[0]
            return [
                Found(
                    first.kind,
                    whole,
                    base + stripped.find(whole),
                    None,
                    any(f.correction for f in found),
                    max(f.score for f in found),
                    all(f.said for f in found),
                )
            ]
    return found


# -- supersession ------------------------------------------------------------------------

_STOP = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "but",
        "if",
        "of",
        "to",
        "in",
        "on",
        "at",
        "by",
        "for",
        "with",
        "from",
        "into",
        "onto",
        "over",
        "under",
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
        "that",
        "these",
        "those",
        "we",
        "our",
        "us",
        "you",
        "your",
        "i",
        "me",
        "my",
        "they",
        "them",
        "their",
        "he",
        "she",
        "his",
        "her",
        "as",
        "so",
        "not",
        "no",
        "do",
        "does",
        "did",
        "done",
        "don't",
        "dont",
        "never",
        "always",
        "must",
        "should",
        "shall",
        "will",
        "would",
        "can",
        "could",
        "may",
        "might",
        "now",
        "actually",
        "instead",
        "please",
        "just",
        "also",
        "still",
        "then",
        "than",
        "any",
        "more",
        "some",
        "all",
        "each",
        "every",
        "only",
        "very",
        "really",
        "changed",
        "change",
        "moved",
        "move",
        "switched",
        "switch",
        "make",
        "made",
        "new",
        "old",
        "use",
        "uses",
        "using",
        "used",
        "stay",
        "stays",
        "keep",
        "kept",
        "go",
        "goes",
        "going",
        "there",
        "here",
        "what",
        "which",
        "who",
        "when",
        "where",
        "how",
        "why",
        "forget",
        "scratch",
        "ignore",
        "update",
        "updated",
        "correction",
        "rather",
        "anymore",
        "longer",
        "turns",
        "out",
        "wrong",
        "bad",
        "meant",
        "let's",
        "lets",
        "decision",
        "rule",
        "limit",
        "constraint",
        "preference",
        "goal",
        "fact",
        "note",
        "security",
        "hard",
        "label",
    ]
)
_WORD_RE = re.compile(r"[a-z][a-z'-]+")


@lru_cache(maxsize=8192)
def subject_words(text: str, label: str | None = None) -> frozenset[str]:
    """What a statement is about: its content words, without values, cue words or its label."""
    body = text
    if label:
        body = body.split(":", 1)[1] if ":" in body else body
    idents = {t.casefold() for t in identifiers(body)}
    words = set()
    for w in _WORD_RE.findall(body.casefold().replace("’", "'")):
        w = w.removesuffix("'s").strip("'-")
        if len(w) < 3 or w in _STOP or w in idents:
            continue
        if w.endswith("s") and len(w) > 4 and not w.endswith("ss"):
            w = w[:-1]
        words.add(w)
    return frozenset(words)


@lru_cache(maxsize=8192)
def _values(text: str) -> frozenset[str]:
    return frozenset(m.group(0).casefold().strip() for m in _CAP_VALUE_RE.finditer(text)) | frozenset(
        t.casefold() for t in identifiers(text)
    )


def _num(v: str) -> str:
    return v.casefold().rstrip(".,").replace(",", "")


@lru_cache(maxsize=8192)
def _stems(text: str) -> frozenset[str]:
    """Identifiers without their numbers: "bastion-2.ops.internal" and "bastion-3" share "bastion"."""
    out = set()
    for t in identifiers(text):
        head = re.split(r"[-_.:/]?\d", t.casefold(), maxsplit=1)[0].strip("-_./:")
        if len(head) >= 4 and any(c.isdigit() for c in t):
            out.add(head)
    return frozenset(out)


# A value with what it measures or names: "27 jan", "7200 credits", "48G", "iOS 17.0", "v5.2.2" after
# "ESP-IDF", "CUDA_VISIBLE_DEVICES=0,1". A correction that gives the same anchor another value updates it.
_UNIT_AFTER_RE = re.compile(r"(?<![\w.])[$€£~]?(\d+(?:[,.:]\d+)*)\s?([a-zµ°%]+)\b", re.I)
_NAME_BEFORE_RE = re.compile(r"\b([a-z][\w-]*)\s+v?(\d+(?:\.\d+)+)\b", re.I)
_KEY_VALUE_RE = re.compile(r"\b([a-z_][\w.-]*)=([^\s;)]+)", re.I)
# "port 5433", "PR 91", "node 4": a number that a noun before it names
_NOUN_NUMBER_RE = re.compile(
    r"\b(port|pr|issue|ticket|release|node|gpu|shard|replica|tier|level|region|slot|partition)s?\s+#?(\d+)\b(?![.:]\d)"
    r"(?!\s*(?:weeks?|days?|hours?|minutes?|months?|years?|times?|of)\b)",
    re.I,
)
# "the batch window is now 01:30", "nomad is 1.9 now", "jupyterhub is on 9443": the word before "is"
_IS_VALUE_RE = re.compile(
    r"\b([a-z][\w-]*)(?:['’]s\s+|\s+(?:is|are|=)\s+)(?:now\s+)?(?:on\s+|at\s+)?(?:port\s+)?v?(\d+(?:[.:]\d+)*)\b(?![.:]?\w)", re.I
)
# words before "is" that name no measure of their own: "mine is 3", "the total is 5", "what we want is 20"
_GENERIC_ANCHORS = frozenset(
    [
        "mine",
        "yours",
        "ours",
        "theirs",
        "everything",
        "something",
        "anything",
        "nothing",
        "each",
        "all",
        "both",
        "rest",
        "left",
        "right",
        "want",
        "need",
        "number",
        "count",
        "total",
        "value",
        "answer",
        "amount",
        "result",
        "one",
        "ones",
        "thing",
        "things",
    ]
)
_UNIT_SAME = {
    "minute": "min", "minutes": "min", "mins": "min", "hour": "h", "hours": "h", "hr": "h", "hrs": "h",
    "second": "s", "seconds": "s", "sec": "s", "secs": "s", "gb": "g", "gib": "g", "mb": "m", "mib": "m",
    "day": "d", "days": "d", "percent": "%",
}  # fmt: skip


def _unit(word: str) -> str:
    """The unit a number is measured in ("minutes" and "min" alike); "" for a word that is none
    (a one-letter word other than a unit letter: "step 1 I looked", "3 a day")."""
    w = word.casefold()
    if len(w) == 1 and w not in "gmkhsdx%":
        return ""
    w = _UNIT_SAME.get(w, w)
    return w[:-1] if len(w) > 3 and w.endswith("s") else w


def anchored_values(text: str) -> dict[str, set[str]]:
    """The values of ``text`` by what anchors them: a unit after a number, a name before a version,
    a key before ``=``. Function words are no anchor ("10 and", "port 8443 in" name no unit)."""
    out: dict[str, set[str]] = {}
    for anchor, value, _, _ in _anchored_spans(text):
        out.setdefault(anchor, set()).add(value)
    return out


def _updates_value(new: dict[str, set[str]], old: dict[str, set[str]]) -> bool:
    """Does the new text give an anchor of the old one a value the old one does not have?"""
    return any(anchor in old and vals - old[anchor] for anchor, vals in new.items())


#: what stands where a correction replaced part of a statement (the rest of it still holds)
AMENDED_MARK = "[superseded]"


@lru_cache(maxsize=8192)
def _anchored_spans(text: str) -> tuple[tuple[str, str, int, int], ...]:
    """(anchor, value, start, end) of every anchored value of ``text`` (see `anchored_values`); kept
    per text, as the ledger asks it of every current statement for each new one."""
    out: list[tuple[str, str, int, int]] = []
    for m in _UNIT_AFTER_RE.finditer(text):
        unit = _unit(m.group(2))
        if unit and unit not in _STOP:
            out.append(("#" + unit, _num(m.group(1)), m.start(), m.end()))
    for m in _NAME_BEFORE_RE.finditer(text):
        if m.group(1).casefold() not in _STOP:
            out.append((m.group(1).casefold(), _num(m.group(2)), m.start(2), m.end()))
    for m in _NOUN_NUMBER_RE.finditer(text):
        out.append((m.group(1).casefold(), m.group(2), m.start(2), m.end(2)))
    for m in _IS_VALUE_RE.finditer(text):
        if m.group(1).casefold() not in _STOP and m.group(1).casefold() not in _GENERIC_ANCHORS:
            out.append((m.group(1).casefold(), _num(m.group(2)), m.start(2), m.end(2)))
    for m in _KEY_VALUE_RE.finditer(text):
        out.append(
            (
                m.group(1).casefold() + "=",
                m.group(2).casefold().rstrip(".,"),
                m.start(2),
                m.start(2) + len(m.group(2).rstrip(".,")),
            )
        )
    return tuple(out)


_CLAUSE_SPLIT_RE = re.compile(r"[,;:]\s|\.\s|\s(?:and|but|so|while)\s|\(|\)", re.I)


def _clauses(text: str) -> list[tuple[int, int]]:
    """(start, end) of each clause of ``text``: split at commas, semicolons, sentence ends, 'and', 'but', 'so'."""
    out, last = [], 0
    for m in _CLAUSE_SPLIT_RE.finditer(text):
        out.append((last, m.start()))
        last = m.end()
    out.append((last, len(text)))
    return [(a, b) for a, b in out if text[a:b].strip()]


def amendment(new_text: str, old_text: str) -> str | None:
    """The old statement with what the correction replaced marked `AMENDED_MARK`, when the rest of it
    still holds values of its own ("python 3.12 … db pg-bill-07 on port 6432" corrected by "the db is
    pg-bill-09 now": the version and the port stay current); None when the correction replaces it whole
    or what it replaces cannot be told apart.

    Replaced: a value whose anchor the correction gives another value (of several under one anchor, the
    one nearest a word the two share), an old value the correction names ("36 months, not 24"), an
    identifier of the same stem ("pg-bill-07" → "pg-bill-09")."""
    spans = _replaced_spans(new_text, old_text)
    if spans is None or not spans or not _about_one_clause(new_text, old_text, spans):
        return None
    out, last = [], 0
    for a, b in spans:
        if a < last:
            continue
        out.append(old_text[last:a] + AMENDED_MARK)
        last = b
    amended = "".join(out) + old_text[last:]
    if len(" ".join(amended.split())) > MAX_STATEMENT_CHARS:
        return None  # the marks would take it past what a statement may hold: superseded whole instead
    return amended if _still_says_something(new_text, old_text, amended) else None


def _replaced_spans(new_text: str, old_text: str) -> list[tuple[int, int]] | None:
    """Where the old text holds what the correction replaces, sorted; None when it cannot be told apart
    (several values under one anchor changed, and no word the two share says which)."""
    new_anchors = anchored_values(new_text)
    shared = subject_words(_UNIT_AFTER_RE.sub(" ", new_text)) & subject_words(_UNIT_AFTER_RE.sub(" ", old_text))
    low = old_text.casefold()
    near = [m.start() for w in shared for m in re.finditer(re.escape(w), low)]
    spans: list[tuple[int, int]] = []
    by_anchor: dict[str, list[tuple[str, int, int]]] = {}
    for anchor, value, start, end in _anchored_spans(old_text):
        by_anchor.setdefault(anchor, []).append((value, start, end))
    for anchor, olds in by_anchor.items():
        vals = new_anchors.get(anchor)
        if not vals or not vals - {v for v, _, _ in olds}:
            continue
        changed = [(v, a, b) for v, a, b in olds if v not in vals]
        if len(changed) > 1 and near:
            changed = [min(changed, key=lambda c: min(abs(c[1] - n) for n in near))]
        elif len(changed) > 1:
            return None
        spans += [(a, b) for _, a, b in changed]
    named = {_num(m.group("v")) for m in _OLD_VALUE_RE.finditer(new_text)}
    new_stems = {t.casefold(): st for t in identifiers(new_text) for st in _stems(t)}
    for m in _IDENT_RE.finditer(old_text):
        tok = m.group(0).rstrip(".:/-")
        if not identifier_ok(tok) or tok.casefold() in new_stems:
            continue
        if _num(tok) in named or _stems(tok) & set(new_stems.values()):
            spans.append((m.start(), m.start() + len(tok)))
    for m in _NUM_RE.finditer(old_text):
        if _num(m.group(0)) in named:
            spans.append((m.start(), m.end()))
    return sorted(set(spans))


def _about_one_clause(new_text: str, old_text: str, spans: list[tuple[int, int]]) -> bool:
    """Is the correction plainly about one part? Another clause on its subject ("gpu 2 and 3 only,
    CUDA_…=2,3" corrected by "all four gpus now, CUDA_…=0,1,2,3") may restate what it replaces, so
    the whole goes."""
    about = subject_words(_UNIT_AFTER_RE.sub(" ", new_text))
    for a, b in _clauses(old_text):
        if any(a <= x < b for x, _ in spans):
            continue
        if subject_words(_UNIT_AFTER_RE.sub(" ", old_text[a:b])) & about:
            return False
    return True


def _still_says_something(new_text: str, old_text: str, amended: str) -> bool:
    """What is left must still say something specific, of its own and not restated by the correction:
    a value or an identifier (a key whose value was replaced, "MAX_WORKERS=", is no value of its own;
    "18:00 to 06:00" corrected by "20:00 to 06:00" is one value)."""
    rest = amended.replace(AMENDED_MARK, " ")
    keys = {a[:-1] for a, _, _, _ in _anchored_spans(old_text) if a.endswith("=")}
    own = {_num(n) for n in _NUM_RE.findall(rest)} | {t.casefold() for t in identifiers(rest) if t.casefold() not in keys}
    said_again = {_num(n) for n in _NUM_RE.findall(new_text)} | {t.casefold() for t in identifiers(new_text)}
    return bool(own - said_again)


def overlap(a: frozenset[str], b: frozenset[str], weight: Mapping[str, float] | None = None) -> float:
    """How much of the smaller subject the two share; with ``weight``, a word counts by its weight
    (see `subject_weights`: a word most statements of the session use says little of what one is about)."""
    if not a or not b:
        return 0.0
    if weight is None:
        return len(a & b) / min(len(a), len(b))

    def mass(words: frozenset[str]) -> float:
        return sum(weight.get(w, 1.0) for w in words)

    return mass(a & b) / min(mass(a), mass(b))


def subject_weights(statements: Sequence[Statement]) -> dict[str, float]:
    """Each subject word's weight in this session: 1 for a word at most two statements use, less for one
    that many use ("takes", "node", "run" in a session of timings), so that a correction's subject is
    matched on the words that tell its statements apart."""
    df: dict[str, int] = {}
    for st in statements:
        for w in subject_words(st.text, st.label):
            df[w] = df.get(w, 0) + 1
    return {w: min(1.0, 2.0 / n) for w, n in df.items() if n > 2}


def _value_shape(v: str) -> str:
    return re.sub(r"[a-z]+", "a", re.sub(r"\d+", "0", v))


def _sibling_value(new_text: str, old_text: str) -> bool:
    """Does the correction name a value of the old statement next to a new value of the same shape?
    ("pin 550.144 instead, 550.127 has the hang", "on 9443 now … a redirect on 8443")"""

    mine, theirs = _specific(new_text), _specific(old_text)
    shared, fresh = mine & theirs, mine - theirs
    return any(_value_shape(a) == _value_shape(b) for a in shared for b in fresh)


@lru_cache(maxsize=8192)
def _specific(text: str) -> frozenset[str]:
    """A statement's numbers of three characters or more and its identifiers with a digit."""
    nums = {_num(n) for n in _NUM_RE.findall(text) if len(n) >= 3}
    return frozenset(nums | {t.casefold() for t in _identifiers(text) if any(c.isdigit() for c in t)})


_SHORT_NAME_RE = re.compile(r"(?<![\w.-])[a-z]{1,3}\d{1,3}(?![\w.-])", re.I)


@lru_cache(maxsize=8192)
def _names(text: str) -> frozenset[str]:
    """The names in a statement that carry a number: identifiers that open with a letter ("svc-1",
    "web3"; not a measure, "10s"), and names too short to be identifiers ("s1", "db2")."""
    found = {t.casefold() for t in identifiers(text) if any(ch.isdigit() for ch in t) and t[0].isalpha()}
    return frozenset(found | {m.group(0).casefold() for m in _SHORT_NAME_RE.finditer(text)})


@dataclass(frozen=True)
class _Correction:
    """What a correction's text offers as evidence, read once for every candidate it is held against."""

    subject: frozenset[str]
    values: frozenset[str]
    old_values: frozenset[str]
    stems: frozenset[str]
    anchored: dict[str, set[str]]
    bare: frozenset[str]
    shifts_goal: bool
    backref: bool
    names: frozenset[str]

    @classmethod
    def of(cls, new: Found) -> _Correction:
        return cls(
            subject=subject_words(new.text, new.label),
            values=_values(new.text),
            old_values=frozenset(_num(m.group("v")) for m in _OLD_VALUE_RE.finditer(new.text)),
            stems=frozenset(_stems(new.text)),
            anchored=anchored_values(new.text),
            # the subject without the measures: "min" is no subject
            bare=subject_words(_UNIT_AFTER_RE.sub(" ", new.text)),
            shifts_goal=new.kind == "goal" and not new.said and bool(_GOAL_SHIFT_RE.search(new.text)),
            backref=bool(_BACKREF_RE.search(new.text)),
            names=_names(new.text),
        )


def _evidence(new: Found, c: _Correction, s: Statement, score: float) -> float:
    """Evidence beyond shared words that ``new`` corrects ``s``: the old value named ("80 not 50"), a
    sibling identifier ("bastion-2" → "bastion-3.ops.internal") or value, a goal that moves on from
    the last one, the same measure or name with another value on the same subject."""
    bonus = 0.0
    if c.old_values & _named_values(s.text):
        bonus += 1.0
    if c.stems & _stems(s.text) or _sibling_value(new.text, s.text):
        bonus += 1.0
    if c.names & _names(s.text):
        # the same name again ("service s1 … now" of six services s0…s5): among statements that all
        # match as well otherwise, the one it names
        bonus += 0.5
    if c.shifts_goal and s.kind == "goal" and score > 0:
        bonus += 0.5
    if _updates_value(c.anchored, anchored_values(s.text)) and overlap(c.bare, subject_words(_UNIT_AFTER_RE.sub(" ", s.text))):
        bonus += 1.0
    return bonus


@lru_cache(maxsize=8192)
def _named_values(text: str) -> frozenset[str]:
    """The numbers and identifiers of a statement, as a correction names an old value."""
    return frozenset({_num(v) for v in _NUM_RE.findall(text)} | {t.casefold() for t in identifiers(text)})


def _content(words: frozenset[str]) -> set[str]:
    """The words of a statement that name something: no function word, no number, no value."""
    return {w for w in words if len(w) >= 3 and w not in _STOP and w not in _NEAR_STOP and not any(c.isdigit() for c in w)}


@lru_cache(maxsize=8192)
def _words(text: str) -> frozenset[str]:
    return frozenset(_norm(t) for t in _TOKEN_RE.findall(text))


def _candidates(new: Found, earlier: Sequence[Statement]) -> list[Statement]:
    """The statements ``new`` may replace. Only a correction supersedes: taking a current statement
    for a replaced one would drop it silently, the very loss the ledger is for. A goal that moves on
    ("X is done, next is Y") updates the last status line, cue or not ("load test is the next step",
    not "Solveig is back on the 20th"). Without a cue, a statement that gives a value of an earlier one
    another value, about the same thing, corrects it (see `_restates_value`); the user's unclassified
    words (`said`) do not (tried: +3 corrections, +2 false ones, and a canary lost 56 visible words)."""
    candidates = [s for s in earlier if s.status == "current" and s.role != "instructions"]
    if _HYPOTHETICAL_RE.match(new.text):
        return []  # "if we ever move to the bigger nodes, the pool is 16": nothing changed yet
    if new.correction:
        return candidates
    moves_on = new.kind == "goal" and not new.said and bool(_GOAL_SHIFT_RE.search(new.text))
    goals = [s for s in candidates if s.kind == "goal" and _STATUS_RE.search(s.text)] if moves_on else []
    if new.said:
        return goals
    return goals + [s for s in candidates if s not in goals and _restates_value(new.text, s.text)]


# what opens a statement about what might be, not what is: "if we ever moved to 9000", "maybe 40 later"
_HYPOTHETICAL_RE = re.compile(r"\W*(?:if|when|whenever|unless|in\s+case|maybe|perhaps|what\s+if|say)\b", re.I)
_TOKEN_RE = re.compile(r"[a-z0-9][\w.-]*[a-z0-9]|[a-z]", re.I)
# words near a value that name no thing of their own: how it compares, how it moved ("goes back to max 2")
_NEAR_STOP = frozenset(
    ["max", "maximum", "most", "min", "minimum", "least", "below", "above", "up", "down", "back", "upto", "per",
     "about", "around", "roughly", "approx", "exactly", "target", "budget", "cap", "got", "gets", "get", "went",
     "becomes", "become", "set", "drop", "dropped", "raise", "raised", "bump", "bumped", "once", "starting",
     "from", "till", "until", "before", "after", "next", "today", "tomorrow", "week", "then", "anyway", "btw"]
)  # fmt: skip
NEAR_WORDS = 3


def _norm(word: str) -> str:
    w = word.casefold().strip(".-")
    return w[:-1] if w.endswith("s") and len(w) > 4 and not w.endswith("ss") else w


def _near(text: str, start: int, end: int) -> set[str]:
    """The words of the value's clause within `NEAR_WORDS` of it, both sides: what the value is of."""
    a, b = next(((x, y) for x, y in _clauses(text) if x <= start < y), (0, len(text)))
    before = [_norm(t) for t in _TOKEN_RE.findall(text[a:start])][-NEAR_WORDS:]
    after = [_norm(t) for t in _TOKEN_RE.findall(text[end:b])][:NEAR_WORDS]
    return {w for w in before + after if len(w) >= 2 and not w.isdigit() and w not in _STOP and w not in _NEAR_STOP}


def _restates_value(new_text: str, old_text: str) -> bool:
    """Does a statement with no correction cue give a value of ``old_text`` another value, about the same
    thing? The same anchor (a unit, a name before a version, "port", the word before "is") with another
    value; the words near both values agree ("checkpoint interval goes to 60s" corrects "checkpoint
    interval 90s"; "prod runs 12 workers" does not correct "we run 3 workers in staging", nor "the db
    timeout is 5s" "the api timeout is 30s": each names near its value a thing the other never mentions);
    and a name that carries a number is the same ("s1" is not "s2").

    A unit or "X is" says little of what the value is of: there a word near both values must be shared
    ("cache seat data for 10 seconds" is not "p95 300ms"). A range or a comparison in the new statement
    (two values under one anchor: "python 3.9 through 3.13") corrects nothing, and neither does a reading
    of a bound ("p95 was 710ms at the peak" against "p95 under 500ms": the bound's word is not the
    reading's)."""
    olds: dict[str, list[tuple[str, int, int]]] = {}
    for anchor, value, a, b in _anchored_spans(old_text):
        olds.setdefault(anchor, []).append((value, a, b))
    if not olds:
        return False
    mine, theirs = _names(new_text), _names(old_text)
    if mine and theirs and not mine & theirs:
        return False
    new_spans = _anchored_spans(new_text)
    values: dict[str, set[str]] = {}
    for anchor, value, _, _ in new_spans:
        values.setdefault(anchor, set()).add(value)
    said_is = {m.group(1).casefold() for m in _IS_VALUE_RE.finditer(new_text)}
    new_words, old_words = _words(new_text), _words(old_text)
    if len(_content(new_words) - old_words) >= 2 and len(_content(old_words) - new_words) >= 2:
        # each names things the other never mentions ("the search indexer ... shard rebalance" against "the
        # auth worker ... old host"): two statements of the same shape about two things, not a restatement
        return False
    for anchor, value, a, b in new_spans:
        old = olds.get(anchor)
        if not old or len(values[anchor]) > 1 or value in {v for v, _, _ in old} or _in_range(new_text, a, b):
            continue
        near_new = _near(new_text, a, b)
        bound_new = _bound(new_text, a)
        loose = anchor.startswith("#") or anchor in said_is
        for _, oa, ob in old:
            near_old = _near(old_text, oa, ob)
            if _bound(old_text, oa) and not bound_new and not _SET_BEFORE_RE.search(new_text[max(0, a - 24) : a]):
                continue
            shared = near_new & near_old - {anchor, anchor.lstrip("#")}
            if loose and not shared and not (near_new and near_new <= old_words and near_old <= new_words):
                continue
            if not (near_new - old_words and near_old - new_words) and (shared or not near_new or not near_old):
                return True
    return False


# a value given as a bound, not a reading: "under 500ms", "max 2", "at most 40", "<= 3", "no more than 9"
_BOUND_BEFORE_RE = re.compile(
    r"(?:under|below|above|over|max|maximum|min|minimum|cap(?:ped)?|limit|within|at\s+(?:most|least)|"
    r"no\s+(?:more|less|fewer)\s+than|up\s+to|[<>]=?|≤|≥)\W*(?:\w+\W+)?$",
    re.I,
)


_RANGE_AFTER_RE = re.compile(r"\s*(?:through|thru|to|-|–|or|and|/)\s*v?\d")
_RANGE_BEFORE_RE = re.compile(r"\d[\w.]*\s*(?:through|thru|to|-|–|or|and|/)\s*v?$")


def _in_range(text: str, start: int, end: int) -> bool:
    """Is the value at ``start:end`` one end of a range or a choice ("3.9 through 3.13", "2 or 3")?"""
    return bool(_RANGE_AFTER_RE.match(text, end) or _RANGE_BEFORE_RE.search(text[max(0, start - 24) : start]))


# a value set anew, not read off: "the cap goes to 300 MB", "raise it to 9", "is now 40"
_SET_BEFORE_RE = re.compile(r"\b(?:to|now|(?:is|are|be)\s+(?:now\s+)?(?:set\s+to\s+)?)\s*[~$€£]?$", re.I)


def _bound(text: str, start: int) -> bool:
    """Is the value at ``start`` given as a bound (a word of comparison just before it)?"""
    return _BOUND_BEFORE_RE.search(text[max(0, start - 24) : start]) is not None


def find_superseded(new: Found, earlier: Sequence[Statement]) -> Statement | None:
    """The current statement that ``new`` corrects, or None.

    A correction ("now", "moved to", "forget that", "make it 15 not 10") of
    the same kind that shares the subject of an earlier statement replaces it;
    so does a statement under the same label with nearly the same subject and
    other values. "Forget that" / "scratch that" alone replaces the latest one.
    """
    candidates = _candidates(new, earlier)
    if not candidates:
        return None
    c = _Correction.of(new)
    weight = subject_weights(candidates)
    best: Statement | None = None
    best_score = 0.0
    for s in reversed(candidates):
        other = subject_words(s.text, s.label)
        score = overlap(c.subject, other, weight)
        if not any(weight.get(w, 1.0) >= 1.0 for w in c.subject & other):
            score = 0.0  # only words many statements use in common: about something else
        bonus = _evidence(new, c, s, score)
        if new.said and bonus < 1.0:
            continue  # the user's unrecognized words replace a statement only when they name its value
        need = 0.25 if s.kind == new.kind else 0.5
        if not (c.values - _values(s.text)) and score < 1.0 and not c.backref and not bonus:
            need = max(need, 0.5)
        if (score >= need or bonus >= 1.0) and score + bonus > best_score:
            best, best_score = s, score + bonus
    if best is None and not new.said and c.backref:
        same = [s for s in candidates if s.kind == new.kind]
        best = same[-1] if same else candidates[-1]
    return best


# -- what a summarizer sees ----------------------------------------------------------------


def strip_statements(content: str, texts: Iterable[str]) -> str:
    """``content`` with each of ``texts`` taken out once (they are kept verbatim elsewhere)."""
    out = content
    for t in texts:
        i = out.find(t)
        if i >= 0:
            out = out[:i] + out[i + len(t) :]
    return out


LEDGER_HEADER = "[ledger: statements kept verbatim]"
"""The first line of a ledger message (no numbers: nothing in it is a fact)."""


def ledger_line(s: Statement) -> str:
    if s.unpinned and s.status == "current":
        return f"- {s.kind} (unpinned: the next fold may summarize it): {' '.join(s.text.split())}"
    if s.said and s.status == "current":
        # kept because the user said it, not because the detector knew what it is
        return f"- said: {' '.join(s.text.split())}"
    if s.status == "proposal":
        # the model's own words: kept, but said to be unagreed, so nobody takes it for the user's decision
        return f"- proposed {s.kind} (the assistant's, not agreed): {' '.join(s.text.split())}"
    return f"- {s.kind}: {' '.join(s.text.split())}"


def ledger_text(statements: Sequence[Statement]) -> str:
    """A ledger message's content: one verbatim line per statement."""
    return "\n".join([LEDGER_HEADER, *(ledger_line(s) for s in statements)])
