"""Messages and the events that change a session.

The session's state is a fold over its events: every change (a message added,
a pin, a spill, a fold) is an event, the store appends it to the journal, and
replaying the journal rebuilds the session exactly.
"""

from __future__ import annotations

import os
import time
import uuid
from enum import StrEnum
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from tailrent_tui.core.ledger import Statement

Role = Literal["system", "user", "assistant", "tool"]


class Kind(StrEnum):
    """What a message is, as far as the ladder is concerned."""

    chat = "chat"
    tool_result = "tool_result"
    spill_pointer = "spill_pointer"
    fold_summary = "fold_summary"
    delegate_result = "delegate_result"
    memory_pointer = "memory_pointer"
    instructions = "instructions"
    ledger = "ledger"

    @property
    def label(self) -> str:
        """The kind in words, for whatever the user reads (headers, errors, listings)."""
        return "message" if self is Kind.chat else self.value.replace("_", " ")


def new_id() -> str:
    """A message id: 12 hex digits, unique enough within a session, cheap on the append path.

    The session's default `ids` factory; tests and benchmarks inject their own."""
    return os.urandom(6).hex()


def new_spill_id() -> str:
    """A spill id: a random UUID (it names the spill's file). The session's default `spill_ids` factory."""
    return str(uuid.uuid4())


_Model = TypeVar("_Model", bound=BaseModel)


def _trusted(cls: type[_Model], fields: dict[str, Any], fields_set: set[str]) -> _Model:
    """An instance from values the engine already holds valid: no validation.

    Validation happens at the boundaries (a journal line, a caller's arguments
    to `Session.make_message`); copies and events made inside the engine skip
    it, because the append path is the engine's hottest loop. `fields` holds
    every field, so `fields_set` is all of them and is shared by every such
    instance (pydantic only ever adds to it, a name already there).
    """
    new = cls.__new__(cls)
    _set = object.__setattr__
    _set(new, "__dict__", fields)
    _set(new, "__pydantic_fields_set__", fields_set)
    _set(new, "__pydantic_extra__", None)
    _set(new, "__pydantic_private__", None)
    return new


class ToolCall(BaseModel):
    """A tool call the model asked for (arguments already parsed)."""

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class Message(BaseModel):
    """One message of the transcript. `tokens` is counted once, at creation."""

    id: str = Field(default_factory=new_id)
    role: Role
    content: str
    kind: Kind = Kind.chat
    pinned: bool = False
    tokens: int = 0
    created: float = Field(default_factory=time.time)
    fold_depth: int = 0
    folded_ids: list[str] = Field(default_factory=list)
    tool: str | None = None
    tool_call_id: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    spill_id: str | None = None
    meta: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def trusted(
        cls,
        *,
        id: str,
        role: Role,
        content: str,
        kind: Kind,
        tokens: int,
        created: float,
        pinned: bool = False,
        tool: str | None = None,
        tool_call_id: str | None = None,
        tool_calls: list[ToolCall] | None = None,
        meta: dict[str, Any] | None = None,
    ) -> Message:
        """A message from values already checked (`Session.make_message` checks them): no validation."""
        fields = {
            "id": id,
            "role": role,
            "content": content,
            "kind": kind,
            "pinned": pinned,
            "tokens": tokens,
            "created": created,
            "fold_depth": 0,
            "folded_ids": [],
            "tool": tool,
            "tool_call_id": tool_call_id,
            "tool_calls": tool_calls if tool_calls is not None else [],
            "spill_id": None,
            "meta": meta if meta is not None else {},
        }
        return _trusted(cls, fields, _MESSAGE_FIELDS)

    def clone(self) -> Message:
        """A shallow copy that skips validation. The engine never changes a message's lists or
        dicts in place (it assigns new ones), so sharing them is safe."""
        return _trusted(Message, self.__dict__.copy(), set(self.__pydantic_fields_set__))

    @property
    def first_line(self) -> str:
        line = self.content.strip().splitlines()[0] if self.content.strip() else ""
        return line

    @property
    def cut_off(self) -> str | None:
        """ "cancelled" or "incomplete" for a reply that was stopped before its end, else None.

        Such a reply stays in the transcript for the user but is never sent (a
        server would continue it as a prefill), so it is not counted in the context.
        """
        if self.role != "assistant" or self.tool_calls:
            return None
        for why in ("cancelled", "incomplete"):
            if self.meta.get(why):
                return why
        return None


_MESSAGE_FIELDS = set(Message.model_fields)


class _Event(BaseModel):
    at: float = Field(default_factory=time.time)


class MessageAdded(_Event):
    type: Literal["message_added"] = "message_added"
    message: Message
    auto_pinned: str | None = Field(default=None, description="the decision pattern that pinned it on arrival, if any")

    @classmethod
    def trusted(cls, message: Message, auto_pinned: str | None, at: float) -> MessageAdded:
        """The event for a message the session made and checked: no validation."""
        fields = {"at": at, "type": "message_added", "message": message, "auto_pinned": auto_pinned}
        return _trusted(cls, fields, _MESSAGE_ADDED_FIELDS)


_MESSAGE_ADDED_FIELDS = set(MessageAdded.model_fields)


class Pinned(_Event):
    type: Literal["pinned"] = "pinned"
    id: str
    auto: bool = False


class Unpinned(_Event):
    type: Literal["unpinned"] = "unpinned"
    id: str


class Spilled(_Event):
    """A message's content moved to a spill file; a pointer took its place."""

    type: Literal["spilled"] = "spilled"
    id: str
    spill_id: str
    tool: str
    location: str
    tokens_before: int
    pointer: str
    pointer_tokens: int


class FoldRecord(BaseModel):
    """What one fold did: the span, the summary, the tokens, the facts."""

    fold_no: int
    span_ids: list[str]
    position: int = Field(description="transcript index where the summary now sits")
    summary: Message
    tokens_before: int = Field(description="tokens of the folded span")
    tokens_after: int = Field(description="tokens of the summary")
    context_before: int
    context_after: int
    depth: int
    facts: list[str] = Field(default_factory=list)
    facts_dropped: list[str] = Field(default_factory=list, description="facts of the span the summarizer left out")
    facts_lost: list[str] = Field(default_factory=list, description="facts missing from the summary as applied (after repair)")
    facts_repaired: list[str] = Field(default_factory=list)
    repair_tokens: int = 0
    trigger: str = "manual"
    summarizer: str = Field(default="", description="who really wrote the summary")
    rejected: str | None = Field(
        default=None, description="why the asked summarizer's text was refused (the extractive fallback wrote it)"
    )
    guard: str = "report"
    ledger: Message | None = Field(
        default=None, description="the pinned message that carries the span's current statements verbatim (before the summary)"
    )
    carried: list[str] = Field(default_factory=list, description="ids of the statements the ledger message carries")
    uncarried: list[str] = Field(
        default_factory=list, description="current statements of the span the ledger had no room for (counted lost)"
    )
    dropped: bool = Field(default=False, description="no summary could shrink the span: it left for the archive with a pointer")
    moved: list[str] = Field(
        default_factory=list,
        description="ids of short kept messages (retired folds' pointers, summaries) that sat between two parts of "
        "the span, moved after the summary (and its ledger) so that the engine's KV shift is not stopped by them",
    )


class Folded(_Event):
    type: Literal["folded"] = "folded"
    fold: FoldRecord


class FoldSkipped(_Event):
    """A fold was asked for and did nothing: the reason says why."""

    type: Literal["fold_skipped"] = "fold_skipped"
    reason: str
    trigger: str = "manual"


class Unfolded(_Event):
    """A fold undone by the user: its originals back in the place of its summary.

    The event carries the originals (read from the fold archive), so a replay
    needs nothing but the journal."""

    type: Literal["unfolded"] = "unfolded"
    fold_no: int
    originals: list[Message]


class InstructionsRead(_Event):
    """A project instructions file (AGENTS.md, TAILRENT.md) read at start or after it changed.

    Its text is a pinned message of kind `instructions` at the head of the
    transcript; a new reading takes the place of the one it `replaces` (never a
    second copy), and `message=None` removes it (the file is gone)."""

    type: Literal["instructions_read"] = "instructions_read"
    source: str = Field(description="the file's name in the workspace root")
    message: Message | None = None
    replaces: str | None = Field(default=None, description="id of the message with the previous reading")


class StatementsFound(_Event):
    """Statements found in a message on arrival (core/ledger.py), and those they supersede."""

    type: Literal["statements_found"] = "statements_found"
    message_id: str
    statements: list[Statement]
    supersedes: dict[str, str] = Field(default_factory=dict, description="new statement id -> the id it replaces")


class StatementChanged(_Event):
    """The user's hand on the ledger: accept a proposal, supersede or restore a statement, edit its text."""

    type: Literal["statement_changed"] = "statement_changed"
    id: str
    status: Literal["current", "superseded", "proposal"] | None = None
    text: str | None = None
    #: per statement: False lets the next fold summarize it (its ledger message stays pinned for the rest)
    pinned: bool | None = None
    #: the statement whose correction replaced part of this one (its text has the replaced part marked)
    amended_by: str | None = None


class FoldRetired(_Event):
    """An old fold summary left the context whole, for a pointer to the fold archive (summaries
    never fold again: depth one). `/unfold` and `search_history` still reach it."""

    type: Literal["fold_retired"] = "fold_retired"
    fold_no: int
    pointer: str
    pointer_tokens: int
    facts_lost: list[str] = Field(default_factory=list, description="what it held that no other message shows")
    merged: list[int] = Field(
        default_factory=list, description="older folds whose pointers this one takes in (they leave the context)"
    )
    position: int | None = Field(
        default=None,
        ge=0,
        description="where the pointer goes, as an index among the messages that stay: before the turn in flight "
        "on an engine that shifts KV (the summaries leave, a deletion it bridges); None: where the summary was",
    )


class WatchAdded(_Event):
    type: Literal["watch_added"] = "watch_added"
    word: str


class WatchRemoved(_Event):
    type: Literal["watch_removed"] = "watch_removed"
    word: str


class UsageRecorded(_Event):
    """A model request: what the rent model predicted and what the server measured."""

    type: Literal["usage_recorded"] = "usage_recorded"
    request_no: int
    context_tokens: int
    predicted_cached: int = 0
    predicted_evaluated: int = 0
    predicted_usd: float = 0.0
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    evaluated_tokens: int | None = None
    output_tokens: int | None = None
    prompt_ms: float | None = None
    generation_ms: float | None = None
    done_reason: str | None = None
    model: str | None = None
    sub_session: str | None = Field(default=None, description="set for a delegate's requests")
    purpose: Literal["turn", "summary", "ping"] = Field(
        default="turn",
        description="a turn of the conversation, a fold's summary asked of the model (another prefix, "
        "outside the conversation's rent), or a keep-warm ping (the cached prefix, one output token); "
        "journals written before it are all turns",
    )
    cancelled: bool = Field(
        default=False,
        description="the reply was cancelled: the server read the prompt, its usage is the prediction (it reported none)",
    )


class Note(_Event):
    """Free-form session note (a resume, a cancelled reply, a model switch)."""

    type: Literal["note"] = "note"
    text: str
    level: Literal["info", "warning", "error"] = "info"


Event = Annotated[
    MessageAdded
    | Pinned
    | Unpinned
    | Spilled
    | Folded
    | FoldSkipped
    | Unfolded
    | InstructionsRead
    | StatementsFound
    | StatementChanged
    | FoldRetired
    | WatchAdded
    | WatchRemoved
    | UsageRecorded
    | Note,
    Field(discriminator="type"),
]

EventAdapter: TypeAdapter[Event] = TypeAdapter(Event)
