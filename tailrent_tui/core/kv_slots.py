"""KV slots that survive restarts: what a saved slot holds, whether it may be restored,
which files to clean up, and what a resume will cost. Pure: no I/O, no clock.

llama.cpp's server can write a slot's KV cache to a file (``/slots/{id}?action=save``)
and read it back (``action=restore``), so a resume after a restart re-reads only the
tokens past the saved prefix instead of the whole context (8,052 tokens: 58 s cold,
15 ms to restore, 54 tokens evaluated after it).

What identifies a slot file: the *prefix hash*, a SHA-256 over the model's name and
what the request carried that the server turns into tokens: the tools and the
messages, rendered exactly as they went on the wire. Not the token ids: they would
cost a ``/tokenize`` round trip (with the chat template applied) on every save and
resume, and for one model and template they follow from the rendered messages
anyway. The hash says "this file holds the KV of these first ``messages`` messages";
a resume restores only when the first ``messages`` messages it is about to send hash
the same. If the server renders them differently after all (another chat template),
nothing breaks: llama.cpp compares the restored tokens with the new prompt and
re-evaluates from the first difference — the restore is just not a win.

File names: ``tailrent-<session id>-<hash>.bin``. The server refuses names with a
path separator, and joins its ``--slot-save-path`` and the name with no separator
(a path without a trailing ``/`` writes beside the directory, not in it).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field

PREFIX = "tailrent-"
SUFFIX = ".bin"
HASH_CHARS = 16
_NAME = re.compile(rf"^{PREFIX}(?P<session>[A-Za-z0-9._-]+)-(?P<hash>[0-9a-f]{{{HASH_CHARS}}}){re.escape(SUFFIX)}$")


def prefix_hash(model: str, tools: Sequence[Any] | None, messages: Sequence[Any]) -> str:
    """The hash of a prompt prefix as sent: model name, tools and rendered messages (canonical JSON)."""
    canonical = json.dumps(
        {"model": model, "tools": list(tools or []), "messages": list(messages)},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()[:HASH_CHARS]


def slot_file_name(session_id: str, digest: str) -> str:
    return f"{PREFIX}{session_id}-{digest}{SUFFIX}"


def parse_slot_file_name(name: str) -> tuple[str, str] | None:
    """(session id, hash) of a tailrent slot file name; None for any other file."""
    found = _NAME.match(name)
    return (found["session"], found["hash"]) if found else None


class SlotRecord(BaseModel):
    """One slot file tailrent asked the server to write, as kept in the session's meta.json."""

    file: str = Field(description="the name given to the server (relative to its --slot-save-path)")
    hash: str = Field(description="prefix hash of the first `messages` messages the slot holds")
    messages: int = Field(ge=0, description="how many rendered messages (system prompt included) the hash covers")
    model: str = Field("", description="the model name the hash covers")
    tokens: int = Field(0, ge=0, description="tokens the slot held when saved (the server's n_saved)")
    bytes: int = Field(0, ge=0, description="the file's size as the server reported it (n_written)")
    digest: str | None = Field(
        None, description="sha256 of the file as the server wrote it, where tailrent sees the slot dir (None: not seen)"
    )
    saved_at: float = Field(description="wall clock at the save (epoch seconds)")


@dataclass(frozen=True)
class Restore:
    """Whether to restore a record before the first request, and why (not)."""

    ok: bool
    reason: str
    record: SlotRecord | None = None


def choose_restore(records: Sequence[SlotRecord], model: str, hash_of_first: Any, *, exists: Any = None) -> Restore:
    """The newest record whose prefix is what the next request starts with.

    `hash_of_first(n)` hashes the first n messages about to be sent (None when
    fewer than n are); `exists(name)` says whether a file is there (None: cannot
    tell without the slot dir, the server will say).
    """
    if not records:
        return Restore(False, "no slot was saved for this session")
    newest_first = sorted(records, key=lambda r: r.saved_at, reverse=True)
    why = ""
    for record in newest_first:
        if record.model and model and record.model != model:
            why = why or f"the saved slot is from model {record.model}, this server runs {model}"
            continue
        if hash_of_first(record.messages) != record.hash:
            why = why or (
                f"the saved slot holds another prompt than the one about to be sent "
                f"(its first {record.messages} messages differ: a fold, an edit or other tools since)"
            )
            continue
        if exists is not None and exists(record.file) is False:
            why = why or f"the slot file {record.file} is no longer in the slot dir"
            continue
        return Restore(True, "prefix hash matches", record)
    return Restore(False, why)


@dataclass(frozen=True)
class SlotFile:
    """A slot file seen in the slot dir."""

    name: str
    session: str
    bytes: int
    mtime: float


def cleanup_plan(files: Iterable[SlotFile], *, keep: str | None, session_cap: int, total_cap: int) -> list[SlotFile]:
    """The files to delete, oldest first, so that each session's files fit `session_cap`
    bytes and all of them `total_cap`. `keep` (the file just saved) is never deleted.

    Age is the file's mtime: a clock that jumped back only reorders which old file
    goes first, and the newest save is kept whatever the clock says.
    """
    # the kept file counts first, then the others newest first
    files = sorted(files, key=lambda f: (f.name != keep, -f.mtime))
    doomed: dict[str, SlotFile] = {}
    by_session: dict[str, int] = {}
    for f in files:
        used = by_session.get(f.session, 0) + f.bytes
        if used > session_cap and f.name != keep:
            doomed[f.name] = f
        else:
            by_session[f.session] = used
    total = 0
    for f in files:
        if f.name in doomed:
            continue
        if f.name != keep and total + f.bytes > total_cap:
            doomed[f.name] = f
            continue
        total += f.bytes
    return sorted(doomed.values(), key=lambda f: f.mtime)


# -- the resume's price (issue 14, item 6) -----------------------------------------------------

Saver = Literal["slot", "warm", "fold", "none"]


class ResumePrice(BaseModel):
    """What the first request after a resume will re-read, and what saves it."""

    context_tokens: int = Field(description="the context as counted here")
    to_read: int = Field(description="tokens the server is expected to evaluate before the new message")
    saved_tokens: int = Field(0, description="tokens a restored slot or a warm cache spares")
    seconds: float | None = Field(None, description="`to_read` at the measured prompt rate (None before any measure)")
    saved_seconds: float | None = None
    usd: float | None = Field(None, description="dollars, with a priced sheet")
    saver: Saver = "none"
    fold_reviewed: bool = Field(False, description="the resume fold is shown for approval first ([fold] preview = always)")
    summary_tokens: int = Field(0, description="the resume fold's summary the model writes first: at most this many tokens")
    summary_seconds: float | None = Field(
        None, description="reading the span and writing that summary, in `seconds` (None: the writing's speed is not known yet)"
    )
    why: str = Field("", description="why nothing saves it, or what might")
    rate_measured: bool = False
    full_seconds: float | None = Field(None, description="the whole context at the measured rate: what a cold cache costs")
    full_usd: float | None = None

    def line(self) -> str:
        if self.saver == "fold" and self.fold_reviewed:
            head = (
                f"resume: the cache is cold, so the ladder will propose folding the {self.context_tokens:,}-token "
                f"context to about {self.to_read:,} (deeper than a fold in use: the prefix is read again anyway; "
                "you review it first); the first request re-reads what you keep"
            )
        elif self.saver == "fold":
            head = (
                f"resume: the cache is cold, so the ladder folds the {self.context_tokens:,}-token context "
                f"to about {self.to_read:,} (deeper than a fold in use: the prefix is read again anyway) "
                "and the first request re-reads that"
            )
        else:
            head = f"resume: the first request re-reads {self.to_read:,} of {self.context_tokens:,} context tokens"
        cost = []
        if self.seconds is not None:
            with_summary = ""
            if self.summary_tokens and self.summary_seconds is not None:
                with_summary = " with the summary"
            elif self.summary_tokens:
                with_summary = f" plus writing a summary of up to {self.summary_tokens:,} tokens"
            cost.append(f"~{_secs(self.seconds)}" + ("" if self.rate_measured else " at the sheet's speed") + with_summary)
        if self.usd is not None:
            cost.append(f"${self.usd:,.4f}")
        if cost:
            head += f" ({', '.join(cost)})"
        if self.saver == "slot":
            spared = f"; a restored KV slot spares {self.saved_tokens:,} tokens"
            if self.saved_seconds:
                spared += f" (~{_secs(self.saved_seconds)})"
            return head + spared
        if self.saver == "warm":
            # nothing can tell whether the server still holds it: say what a restart would cost too
            full = [f"~{_secs(self.full_seconds)}"] if self.full_seconds is not None else []
            full += [f"${self.full_usd:,.4f}"] if self.full_usd is not None else []
            cold = f"all {self.context_tokens:,}" + (f" ({', '.join(full)})" if full else "")
            return f"{head} if the cache is still warm ({self.why}); if the server was restarted, {cold}"
        return head + (f"; {self.why}" if self.why else "")


def _secs(seconds: float) -> str:
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.1f} min"


def resume_price(
    *,
    context_tokens: int,
    restored_tokens: int | None,
    warm: bool,
    why: str,
    tokens_per_second: float | None,
    rate_measured: bool,
    input_per_mtok: float = 0.0,
    write_multiplier: float = 1.0,
    read_multiplier: float = 1.0,
    fold_to: int | None = None,
    fold_reviewed: bool = False,
    summary_read: int = 0,
    summary_write: int = 0,
    gen_tokens_per_second: float | None = None,
) -> ResumePrice:
    """The first request's price after a resume: spared by a restored slot (the tokens it
    restored), or by a cache still warm, else the whole context is re-read, or what the
    policy folds it to first (`fold_to`: the ladder at a cold resume; `fold_reviewed`: that
    fold is shown to the user first, who may cancel it). A fold whose summary the model writes
    costs time first: reading its span (`summary_read` tokens, at the prompt rate) and writing
    up to `summary_write` tokens (at `gen_tokens_per_second`, when it was measured)."""
    spared = 0
    saver: Saver = "none"
    to_read = context_tokens
    if restored_tokens is not None:
        spared, saver = min(restored_tokens, context_tokens), "slot"
        to_read = context_tokens - spared
    elif warm:
        spared, saver, to_read = context_tokens, "warm", 0
    elif fold_to is not None and fold_to < context_tokens:
        saver, to_read = "fold", fold_to
    seconds = to_read / tokens_per_second if tokens_per_second else None
    summary_seconds = None
    if saver != "fold":
        summary_read = summary_write = 0
    if seconds is not None and tokens_per_second and summary_write:
        if gen_tokens_per_second:
            summary_seconds = summary_read / tokens_per_second + summary_write / gen_tokens_per_second
            seconds += summary_seconds
        else:
            seconds += summary_read / tokens_per_second
    saved_seconds = spared / tokens_per_second if tokens_per_second else None
    usd = full_usd = None
    if input_per_mtok > 0:
        usd = (to_read * input_per_mtok * write_multiplier + spared * input_per_mtok * read_multiplier) / 1_000_000
        full_usd = context_tokens * input_per_mtok * write_multiplier / 1_000_000
    return ResumePrice(
        fold_reviewed=fold_reviewed and saver == "fold",
        summary_tokens=summary_write,
        summary_seconds=summary_seconds,
        full_seconds=context_tokens / tokens_per_second if tokens_per_second else None,
        full_usd=full_usd,
        context_tokens=context_tokens,
        to_read=to_read,
        saved_tokens=spared,
        seconds=seconds,
        saved_seconds=saved_seconds,
        usd=usd,
        saver=saver,
        why=why,
        rate_measured=rate_measured,
    )
