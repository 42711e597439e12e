"""The article's C# harness (TailRent.cs), replayed exactly.

`run_article` gives what `dotnet run -- mock` gives for the same parameters:
the same RNG draws, the same chars/4 counts, the same lossy summaries, the
same spill pointers (so the same path lengths), hence the same folds. What
the harness does that this port keeps on purpose:

- the summarizer keeps the first 12 space-separated words of each message
  (newlines stay inside words), and the summary goes in at index 0 as an
  unpinned system message, so later folds fold it again (fold of a fold);
- at most one fold per added message, of the first `batch` unpinned messages;
- the spill pointer names the spill file, so the spill directory's length
  changes every token count after it.

What it does differently: the tail total is kept as a running sum instead of
re-summed on every add (same numbers, linear instead of quadratic), and the
time-of-day stamp of each fold is not printed (the article's published output
leaves it out).
"""

from __future__ import annotations

import json
import os
import uuid
from datetime import UTC, datetime
from decimal import ROUND_HALF_EVEN, Decimal

from pydantic import BaseModel

from tailrent_tui.core.tokens import chars4
from tailrent_tui.scenarios.dotnet_random import INT_MAX, INT_MIN, DotNetRandom

WATCHLIST = ("Redis", "15 minute", "rotate", "mobile")
DECISION = (
    "DECISION: We will store refresh tokens in Redis with a 15 minute TTL and "
    "rotate them on every use, because the mobile team's client can't reliably "
    "persist tokens between app restarts."
)
ACKNOWLEDGEMENT = (
    "Acknowledged. I'll wire the token service to Redis with a 15 minute TTL "
    "and rotate-on-use, and flag any code path that assumes long-lived tokens."
)
FILLER_TOPICS = (
    "Ran the integration suite against the staging cluster.",
    "Investigated a flaky test in the billing module.",
    "Reviewed the PR that touches the rate limiter.",
    "Checked memory usage on the worker pool overnight.",
    "Updated the changelog for the upcoming release.",
)
PROBE = "What did we decide about refresh tokens, and why?"
SUMMARY_WORDS = 12

# The trace's window: the harness budgets 900 estimated tokens of tail, so a
# 2048-token window makes every policy spill and fold on this trace as the
# harness did, with room left for the system prompt and a reply.
TRACE_WINDOW = 2048
TRACE_SYSTEM = "You are a coding agent working through a migration backlog."

_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
# char.IsWhiteSpace, which String.TrimEnd() trims; Python's isspace() also
# counts U+001C..U+001F, so str.rstrip() would trim more than .NET does.
_DOTNET_WHITESPACE = frozenset(
    "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)


class SpillDirError(OSError):
    """The spill directory cannot be created or written."""


class ArticleFold(BaseModel):
    """One fold of the harness's compaction log."""

    fold: int
    messages_folded: int
    tokens_before: int
    tokens_after: int
    keywords_lost: list[str]


class ArticleRecall(BaseModel):
    """The recall probe: watched keywords still visible in context."""

    surviving: int
    total: int


class ArticleRun(BaseModel):
    """Everything the harness prints, plus where its spills went."""

    final_tail_tokens: int
    folds: list[ArticleFold]
    recall: ArticleRecall
    spill_paths: list[str] = []

    def summary_dict(self) -> dict:
        """The `--json` shape: exactly the printed figures."""
        return {
            "final_tail_tokens": self.final_tail_tokens,
            "folds": [fold.model_dump() for fold in self.folds],
            "recall": self.recall.model_dump(),
        }


def estimate_tokens(text: str) -> int:
    """TokenEstimator.EstimateTokens: chars/4 over UTF-16 code units, as .NET counts length."""
    if text.isascii():
        return chars4(text)
    return chars4_utf16(text)


def chars4_utf16(text: str) -> int:
    if not text:
        return 0
    return max(1, (len(text.encode("utf-16-le")) // 2) // 4)


def contains_ignore_case(text: str, keyword: str) -> bool:
    """`string.Contains(keyword, StringComparison.OrdinalIgnoreCase)` for an ASCII keyword.

    Ordinal casing maps no non-ASCII character onto an ASCII letter (.NET
    excludes the dotless i and the long s on purpose), so folding ASCII letters
    only is exact; `str.lower()` would not be ("K" Kelvin sign becomes "k").
    """
    return keyword.translate(_ASCII_LOWER) in text.translate(_ASCII_LOWER)


def trim_end(text: str) -> str:
    end = len(text)
    while end and text[end - 1] in _DOTNET_WHITESPACE:
        end -= 1
    return text[:end]


def dotnet_temp_path() -> str:
    """Path.GetTempPath() on Unix: $TMPDIR with a trailing slash, else /tmp/."""
    path = os.environ.get("TMPDIR", "")
    if not path:
        return "/tmp/"
    return path if path.endswith("/") else path + "/"


def path_combine(first: str, second: str) -> str:
    """Path.Combine(first, second) on Unix: no normalising, a rooted second wins."""
    if not second:
        return first
    if not first:
        return second
    if second.startswith("/"):
        return second
    if first.endswith("/"):
        return first + second
    return first + "/" + second


def default_spill_dir() -> str:
    return path_combine(dotnet_temp_path(), "tailrent-spill")


def lossy_summary(messages: list[tuple[str, str]]) -> str:
    """MockLossySummarizerClient: the first 12 words of each (role, content)."""
    lines = []
    for role, content in messages:
        words = [word for word in content.split(" ") if word]
        kept = " ".join(words[:SUMMARY_WORDS])
        more = "..." if len(words) > SUMMARY_WORDS else ""
        lines.append(f"- {role}: {kept}{more}\n")
    return trim_end("".join(lines))


def format_reduction(tokens_before: int, tokens_after: int) -> str:
    """`(1 - (double)after / Math.Max(1, before)).ToString("P0")` in en-US.

    .NET rounds the exact binary value of the double to two decimals with
    Dragon4 (ties to even), keeps the sign of a negative value that rounds to
    zero ("-0%"), and groups thousands with commas.
    """
    value = 1.0 - tokens_after / max(1, tokens_before)
    percent = (Decimal(value) * 100).quantize(Decimal(1), rounding=ROUND_HALF_EVEN)
    sign = "-" if value < 0 else ""
    return f"{sign}{abs(int(percent)):,}%"


class _Message:
    __slots__ = ("content", "pinned", "role", "tokens")

    def __init__(self, role: str, content: str, pinned: bool = False) -> None:
        self.role = role
        self.content = content
        self.pinned = pinned
        self.tokens = estimate_tokens(content)


class _Spiller:
    """ToolOutputSpiller: tool results over the threshold go to a file, a pointer stays."""

    def __init__(self, spill_dir: str, threshold: int, write: bool) -> None:
        self.spill_dir = spill_dir
        self.threshold = threshold
        self.write = write
        self.paths: list[str] = []
        if write:
            try:
                os.makedirs(spill_dir, exist_ok=True)
            except OSError as exc:
                raise SpillDirError(f"cannot create spill directory {spill_dir!r}: {exc.strerror or exc}") from exc

    def maybe_spill(self, tool: str, raw: str) -> tuple[str, bool]:
        tokens = estimate_tokens(raw)
        if tokens <= self.threshold:
            return raw, False
        spill_id = str(uuid.uuid4())
        path = path_combine(self.spill_dir, f"{spill_id}.json")
        if self.write:
            self._write_spill_file(path, tool, raw)
        # String slicing counts UTF-16 units in C#; tool output here is ASCII.
        preview = raw[:160] + "..." if len(raw) > 160 else raw
        pointer = f"[spilled tool result: {tool}] ~{tokens} tokens written to {path} (id={spill_id}). Preview: {preview}"
        return pointer, True

    def _write_spill_file(self, path: str, tool: str, raw: str) -> None:
        payload = json.dumps(
            {"tool": tool, "capturedAt": datetime.now(UTC).isoformat(), "content": raw},
            separators=(",", ":"),
        )
        try:
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(payload)
        except OSError as exc:
            raise SpillDirError(f"cannot write spill file {path!r}: {exc.strerror or exc}") from exc
        self.paths.append(path)


class _Session:
    """AgentSession: the transcript, the fold rule and the compaction log."""

    def __init__(self, spiller: _Spiller, max_tail: int, batch: int) -> None:
        self.transcript: list[_Message] = []
        self.folds: list[ArticleFold] = []
        self.spiller = spiller
        self.max_tail = max_tail
        self.batch = batch
        self.tail_tokens = 0

    def add(self, message: _Message) -> None:
        self.transcript.append(message)
        self.tail_tokens += message.tokens
        if self.tail_tokens > self.max_tail:
            self._fold_oldest()

    def add_tool_result(self, tool: str, raw: str) -> None:
        stored, spilled = self.spiller.maybe_spill(tool, raw)
        tag = "[spilled]" if spilled else "[inline]"
        self.add(_Message("tool", f"{tag} {stored}"))

    def _fold_oldest(self) -> None:
        foldable_at: list[int] = []
        for index, message in enumerate(self.transcript):
            if len(foldable_at) == self.batch:
                break
            if not message.pinned:
                foldable_at.append(index)
        if not foldable_at:
            return
        foldable = [self.transcript[index] for index in foldable_at]
        tokens_before = sum(message.tokens for message in foldable)
        summary = lossy_summary([(message.role, message.content) for message in foldable])
        lost = [
            keyword
            for keyword in WATCHLIST
            if any(contains_ignore_case(message.content, keyword) for message in foldable)
            and not contains_ignore_case(summary, keyword)
        ]
        # List.Remove on records removes the first equal message; the folded
        # ones are the first unpinned ones, so that is exactly these positions.
        keep = set(foldable_at)
        self.transcript = [message for index, message in enumerate(self.transcript) if index not in keep]
        summary_message = _Message("system", f"[folded {len(foldable)} messages]\n{summary}")
        self.transcript.insert(0, summary_message)
        self.tail_tokens += summary_message.tokens - tokens_before
        self.folds.append(
            ArticleFold(
                fold=len(self.folds) + 1,
                messages_folded=len(foldable),
                tokens_before=tokens_before,
                tokens_after=summary_message.tokens,
                keywords_lost=lost,
            )
        )

    def recall(self) -> ArticleRecall:
        visible = "\n".join(message.content for message in self.transcript)
        surviving = sum(1 for keyword in WATCHLIST if contains_ignore_case(visible, keyword))
        return ArticleRecall(surviving=surviving, total=len(WATCHLIST))


def _check_int(name: str, value: int, minimum: int) -> None:
    # The harness's parameters are C# ints.
    if not isinstance(value, int) or isinstance(value, bool) or not INT_MIN <= value <= INT_MAX:
        raise ValueError(f"{name} must be a 32-bit int, as in the C# harness (got {value!r})")
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum} (got {value})")


def _filler(rng: DotNetRandom, turn: int) -> tuple[str, str, str, str]:
    """One filler turn: (user text, tool name, raw tool output, assistant text)."""
    topic = FILLER_TOPICS[rng.next_max(len(FILLER_TOPICS))]
    tool_size = rng.next_range(20, 2000)
    return (
        f"Turn {turn}: {topic}",
        f"tool_call_{turn}",
        " ".join(["token"] * tool_size),
        f"Turn {turn}: done, no issues found.",
    )


def run_article(
    *,
    pinned: bool = False,
    seed: int = 42,
    batch: int = 6,
    max_tail: int = 900,
    spill_threshold: int = 120,
    turns: int = 40,
    spill_dir: str | None = None,
    write_spills: bool = True,
) -> ArticleRun:
    """Run the harness. Raises ValueError for bad parameters, SpillDirError for an unwritable spill dir.

    `write_spills=False` skips the files but keeps the pointers (and so the numbers) identical.
    """
    _check_int("seed", seed, INT_MIN)
    _check_int("batch", batch, 1)
    _check_int("max_tail", max_tail, 0)
    _check_int("spill_threshold", spill_threshold, 0)
    _check_int("turns", turns, 0)
    directory = default_spill_dir() if spill_dir is None else str(spill_dir)
    if not directory:
        raise SpillDirError("the spill directory must not be empty")
    spiller = _Spiller(directory, spill_threshold, write_spills)
    session = _Session(spiller, max_tail, batch)
    session.add(_Message("user", DECISION, pinned))
    session.add(_Message("assistant", ACKNOWLEDGEMENT))
    rng = DotNetRandom(seed)
    for turn in range(turns):
        user, tool, raw, assistant = _filler(rng, turn)
        session.add(_Message("user", user))
        session.add_tool_result(tool, raw)
        session.add(_Message("assistant", assistant))
    return ArticleRun(
        final_tail_tokens=session.tail_tokens,
        folds=session.folds,
        recall=session.recall(),
        spill_paths=spiller.paths,
    )


def format_article(run: ArticleRun) -> str:
    """The harness's console output, without the time-of-day stamps."""
    lines = [
        f"Final tail tokens (est.): {run.final_tail_tokens}",
        f"Total folds triggered: {len(run.folds)}",
        "",
    ]
    for fold in run.folds:
        lines.append(
            f"[fold #{fold.fold}] folded {fold.messages_folded} messages, "
            f"{fold.tokens_before} -> {fold.tokens_after} tokens "
            f"({format_reduction(fold.tokens_before, fold.tokens_after)} reduction)"
        )
        if fold.keywords_lost:
            lines.append(f"  keywords lost at this fold: {', '.join(fold.keywords_lost)}")
    lines.append("")
    lines.append(f"Recall test: {run.recall.surviving}/{run.recall.total} watched keywords still visible in context.")
    return "\n".join(lines) + "\n"


def article_trace(*, seed: int = 42, turns: int = 40) -> list[dict]:
    """The harness's scenario as trace records (DESIGN.md's JSONL format).

    Same messages in the same order; tool lines carry the raw output (the
    policy under test decides whether to spill). The decision is not pinned:
    a policy has to find it on its own.
    """
    _check_int("seed", seed, INT_MIN)
    _check_int("turns", turns, 0)
    records: list[dict] = [
        {"trace": "article", "window": TRACE_WINDOW, "system": TRACE_SYSTEM},
        {"role": "user", "content": DECISION},
        {"role": "assistant", "content": ACKNOWLEDGEMENT},
    ]
    rng = DotNetRandom(seed)
    for turn in range(turns):
        user, tool, raw, assistant = _filler(rng, turn)
        records.append({"role": "user", "content": user})
        records.append({"role": "tool", "tool": tool, "content": raw})
        records.append({"role": "assistant", "content": assistant})
    records.append({"probe": PROBE, "expect": list(WATCHLIST)})
    return records
