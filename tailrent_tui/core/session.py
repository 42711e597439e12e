"""The session: an ordered transcript with running totals, changed only by events.

Every command (`add`, `pin`, `unpin`, and the rungs that call `emit`) builds an
event and applies it; `apply` is the only code that mutates state, so replaying
a journal through `apply` rebuilds the session exactly. Totals are kept
incrementally: adding a message costs O(1) however long the transcript is (the
article's harness re-sums the transcript on every add, which makes a long
session quadratic).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from tailrent_tui.core.messages import (
    Event,
    Folded,
    FoldRecord,
    FoldSkipped,
    InstructionsRead,
    Kind,
    Message,
    MessageAdded,
    Note,
    Pinned,
    Role,
    Spilled,
    ToolCall,
    Unfolded,
    Unpinned,
    UsageRecorded,
    WatchAdded,
    WatchRemoved,
    new_id,
    new_spill_id,
)
from tailrent_tui.core.tokens import Framing, TokenCounter, get_counter


class SessionError(ValueError):
    """A command the session cannot carry out (unknown message, bad state)."""


class DecisionMatcher(Protocol):
    def match(self, text: str) -> str | None: ...


_ROLES = ("system", "user", "assistant", "tool")
_ROLE_SET = frozenset(_ROLES)
_POINTER_KINDS = (Kind.spill_pointer, Kind.memory_pointer, Kind.delegate_result)


@dataclass
class ContextTotals:
    """Token totals of the transcript by role in the ladder, kept incrementally.

    A message counts as sent: its text and the framing around it (Session.sent_tokens).
    """

    transcript: int = 0
    pinned: int = 0
    summaries: int = 0
    pointers: int = 0
    messages: int = 0

    @property
    def live(self) -> int:
        """Unpinned, non-summary, non-pointer tokens: the foldable live tail."""
        return self.transcript - self.pinned - self.summaries - self.pointers

    def _account(self, m: Message, sign: int, sent_tokens: int) -> None:
        if m.cut_off:
            return  # shown, never sent: not in the context
        t = sign * sent_tokens
        self.transcript += t
        self.messages += sign
        if m.pinned:
            self.pinned += t
        elif m.kind == Kind.fold_summary:
            self.summaries += t
        elif m.kind in _POINTER_KINDS:
            self.pointers += t


@dataclass
class Session:
    """One conversation's context, as the engine sees it.

    `system` and `tool_schema_tokens` form the head of every request; the
    transcript follows. `window` is the model's context window in tokens.
    `framing` is what the request adds around those texts (a chat template's
    markers): counted in, so the context is what the server will count.
    `clock`, `ids` and `spill_ids` give the time, new message ids and new
    spill ids: inject fixed ones to make a run repeat.
    """

    counter: TokenCounter = field(default_factory=lambda: get_counter("cl100k"))
    system: str = ""
    window: int = 32768
    tool_schema_tokens: int = 0
    decisions: DecisionMatcher | None = None
    clock: Callable[[], float] = time.time
    ids: Callable[[], str] = new_id
    spill_ids: Callable[[], str] = new_spill_id
    id: str = ""
    #: pins may hold this share of the window; past it auto-pinning stops (the user decides what to unpin)
    pin_share: float = 0.4
    framing: Framing = field(default_factory=Framing)

    def __post_init__(self) -> None:
        self._messages: list[Message] = []
        self._index: dict[str, Message] = {}
        self.totals = ContextTotals()
        self.folds: list[FoldRecord] = []
        self.skipped: list[FoldSkipped] = []
        #: folds the user undid, by number: their records stay in `folds` (numbers never repeat)
        self.unfolded: dict[int, Unfolded] = {}
        self.spills: dict[str, Spilled] = {}
        self.watch: list[str] = []
        self.usage: list[UsageRecorded] = []
        self.notes: list[Note] = []
        self.user_unpinned: set[str] = set()
        self.listeners: list[Callable[[Event], None]] = []
        self.system_tokens = self.counter.count(self.system)
        self._owned = False
        self.auto_pin_stopped = False  # a decision was left unpinned: the pins are at their budget
        self._handlers: dict[str, Callable[[Any], None]] = {
            name[len("_apply_") :]: getattr(self, name) for name in dir(type(self)) if name.startswith("_apply_")
        }

    # -- reading -----------------------------------------------------------

    @property
    def messages(self) -> Sequence[Message]:
        return self._messages

    def __len__(self) -> int:
        return len(self._messages)

    def get(self, message_id: str) -> Message:
        try:
            return self._index[message_id]
        except KeyError:
            raise SessionError(f"no message with id {message_id!r} in this session") from None

    def __contains__(self, message_id: object) -> bool:
        return message_id in self._index

    def index_of(self, message_id: str) -> int:
        m = self.get(message_id)
        for i, other in enumerate(self._messages):
            if other is m:
                return i
        raise SessionError(f"message {message_id!r} is indexed but not in the transcript")

    @property
    def head_tokens(self) -> int:
        """System prompt plus tool schema, framed: the part of the context before the transcript."""
        framing = self.framing.request + (self.framing.system if self.system else 0)
        return self.system_tokens + self.tool_schema_tokens + framing

    def sent_tokens(self, m: Message) -> int:
        """A message's tokens as sent: its text and the framing around it."""
        return m.tokens + self.framing.message(m.role)

    @property
    def context_tokens(self) -> int:
        """Tokens of the context that would be sent now (head + transcript)."""
        return self.head_tokens + self.totals.transcript

    @property
    def pinned(self) -> list[Message]:
        return [m for m in self._messages if m.pinned]

    @property
    def pin_budget(self) -> int:
        """Tokens the pins may hold before auto-pinning stops."""
        return int(self.window * self.pin_share)


    def count(self, text: str) -> int:
        return self.counter.count(text)

    # -- events ------------------------------------------------------------

    def emit(self, event: Event) -> Event:
        """Apply an event and tell the listeners (the journal, the UI)."""
        self.apply(event)
        if self.listeners:
            for listener in tuple(self.listeners):
                listener(event)
        return event

    def apply(self, event: Event, *, owned: bool = False) -> None:
        """The only mutator: replaying events through here rebuilds the session.

        `owned=True` says nobody else holds this event (it was just parsed from
        the journal), so its message objects are taken as they are instead of copied.
        """
        self._owned = owned
        handler = self._handlers.get(event.type)
        if handler is None:
            raise SessionError(f"unknown event type {event.type!r}")
        handler(event)

    def _apply_message_added(self, e: MessageAdded) -> None:
        # A copy, so that later pins and spills never alter the event already journaled.
        self._append(e.message if self._owned else e.message.clone())

    def _append(self, m: Message) -> None:
        """MessageAdded's effect: `m` becomes the transcript's last message."""
        index = self._index
        if m.id in index:
            raise SessionError(f"message id {m.id!r} added twice")
        self._messages.append(m)
        index[m.id] = m
        self.totals._account(m, +1, m.tokens + self.framing.message(m.role))
        if m.kind is Kind.spill_pointer and m.spill_id:
            self.spills[m.spill_id] = Spilled(
                id=m.id,
                spill_id=m.spill_id,
                tool=m.tool or m.role,
                location=str(m.meta.get("spill_location", "")),
                tokens_before=int(m.meta.get("spilled_tokens", 0)),
                pointer=m.content,
                pointer_tokens=m.tokens,
                at=m.created,
            )

    def _set_pinned(self, message_id: str, pinned: bool) -> None:
        m = self.get(message_id)
        if m.pinned == pinned:
            return
        self.totals._account(m, -1, self.sent_tokens(m))
        m.pinned = pinned
        self.totals._account(m, +1, self.sent_tokens(m))

    def _apply_pinned(self, e: Pinned) -> None:
        self._set_pinned(e.id, True)
        self.user_unpinned.discard(e.id)

    def _apply_unpinned(self, e: Unpinned) -> None:
        self._set_pinned(e.id, False)
        self.user_unpinned.add(e.id)

    def _apply_spilled(self, e: Spilled) -> None:
        m = self.get(e.id)
        self.totals._account(m, -1, self.sent_tokens(m))
        m.content = e.pointer
        m.tokens = e.pointer_tokens
        m.kind = Kind.spill_pointer
        m.spill_id = e.spill_id
        m.tool = m.tool or e.tool
        self.totals._account(m, +1, self.sent_tokens(m))
        self.spills[e.spill_id] = e

    def _apply_folded(self, e: Folded) -> None:
        f = e.fold
        span = set(f.span_ids)
        missing = [i for i in f.span_ids if i not in self._index]
        if missing:
            raise SessionError(f"fold #{f.fold_no} names messages not in the transcript: {missing}")
        for i in span:
            gone = self._index.pop(i)
            self.totals._account(gone, -1, self.sent_tokens(gone))
        kept = [m for m in self._messages if m.id not in span]
        # the transcript's summary is its own object: a later pin must not alter the record
        summary = f.summary.clone()
        position = min(max(f.position, 0), len(kept))
        kept.insert(position, summary)
        self._messages = kept
        self._index[summary.id] = summary
        self.totals._account(summary, +1, self.sent_tokens(summary))
        self.folds.append(f)

    def _apply_unfolded(self, e: Unfolded) -> None:
        record = next((f for f in self.folds if f.fold_no == e.fold_no), None)
        if record is None:
            raise SessionError(f"no fold #{e.fold_no} to unfold")
        summary = self._index.get(record.summary.id)
        if summary is None:
            raise SessionError(f"fold #{e.fold_no}'s summary is no longer in the context")
        originals = [m if self._owned else m.clone() for m in e.originals]
        twice = [m.id for m in originals if m.id in self._index]
        if twice:
            raise SessionError(f"fold #{e.fold_no}'s originals are in the context already: {twice}")
        position = self.index_of(summary.id)
        del self._index[summary.id]
        self.totals._account(summary, -1, self.sent_tokens(summary))
        self._messages[position : position + 1] = originals
        for m in originals:
            self._index[m.id] = m
            self.totals._account(m, +1, self.sent_tokens(m))
        self.unfolded[e.fold_no] = e

    def _apply_instructions_read(self, e: InstructionsRead) -> None:
        old = self._index.get(e.replaces) if e.replaces else None
        if e.replaces and old is None:
            raise SessionError(f"instructions from {e.source} replace a message not in the transcript: {e.replaces!r}")
        if old is not None:
            position = self.index_of(old.id)
            del self._index[old.id]
            del self._messages[position]
            self.totals._account(old, -1, self.sent_tokens(old))
        else:
            # after the instructions already at the head, in the order they were read
            position = 0
            while position < len(self._messages) and self._messages[position].kind == Kind.instructions:
                position += 1
        if e.message is None:
            return
        m = e.message if self._owned else e.message.clone()
        if m.id in self._index:
            raise SessionError(f"message id {m.id!r} added twice")
        self._messages.insert(position, m)
        self._index[m.id] = m
        self.totals._account(m, +1, self.sent_tokens(m))

    def _apply_fold_skipped(self, e: FoldSkipped) -> None:
        self.skipped.append(e)

    def _apply_watch_added(self, e: WatchAdded) -> None:
        if e.word.lower() not in (w.lower() for w in self.watch):
            self.watch.append(e.word)

    def _apply_watch_removed(self, e: WatchRemoved) -> None:
        self.watch = [w for w in self.watch if w.lower() != e.word.lower()]

    def _apply_usage_recorded(self, e: UsageRecorded) -> None:
        self.usage.append(e)

    def _apply_note(self, e: Note) -> None:
        self.notes.append(e)

    # -- commands ----------------------------------------------------------

    def make_message(
        self,
        role: Role,
        content: str,
        *,
        kind: Kind = Kind.chat,
        pinned: bool = False,
        tool: str | None = None,
        tool_call_id: str | None = None,
        tool_calls: Iterable[ToolCall] = (),
        meta: dict[str, Any] | None = None,
        at: float | None = None,
        tokens: int | None = None,
    ) -> Message:
        """A message with its tokens counted once (or given, when already counted), not yet in the transcript."""
        # The boundary: what is checked here is not validated again on the way in.
        if not isinstance(content, str):
            raise SessionError(f"message content must be text, got {type(content).__name__}")
        if role not in _ROLE_SET:
            raise SessionError(f"unknown role {role!r}: one of {', '.join(_ROLES)}")
        if tokens is None:
            tokens = self.counter.count(content)
        calls = [c if isinstance(c, ToolCall) else ToolCall.model_validate(c) for c in tool_calls] if tool_calls else None
        if calls:
            tokens += sum(self.counter.count(c.name) + self.counter.count(str(c.arguments)) for c in calls)
        return Message.trusted(
            id=self.ids(),
            role=role,
            content=content,
            kind=kind if type(kind) is Kind else Kind(kind),
            pinned=bool(pinned),
            tokens=tokens,
            created=self.clock() if at is None else at,
            tool=tool,
            tool_call_id=tool_call_id,
            tool_calls=calls,
            meta=dict(meta) if meta else None,
        )

    def add(
        self,
        role: Role,
        content: str,
        *,
        kind: Kind = Kind.chat,
        pinned: bool = False,
        autopin: bool = True,
        at: float | None = None,
        **fields: Any,
    ) -> Message:
        """Append a message. Chat messages that state a decision are pinned on arrival."""
        m = self.make_message(role, content, kind=kind, pinned=pinned, at=at, **fields)
        return self.add_message(m, autopin=autopin)

    def add_message(self, m: Message, *, autopin: bool = True) -> Message:
        """Append a message made by `make_message`; returns the transcript's message.

        `m` is handed over: the transcript keeps it, or a copy of it when a
        listener holds the event (so that a later pin or spill never alters
        what was journaled). The event is made only when a listener is there
        to receive it: on its own the session needs only its effect.
        """
        auto = None
        if (
            autopin
            and not m.pinned
            and self.decisions is not None
            and m.kind == Kind.chat
            and m.role in ("user", "assistant")
        ):
            auto = self.decisions.match(m.content)
            if auto is not None and self._restates_a_pin(m.content):
                auto = None
        over_budget = auto is not None and self.totals.pinned + m.tokens > self.pin_budget
        if over_budget:
            auto = None
        if auto is not None:
            m.pinned = True
        if self.listeners:
            self.emit(MessageAdded.trusted(m, auto, m.created))
        else:
            self._append(m)
        if over_budget and not self.auto_pin_stopped:
            # Folding cannot make room for pins, so the user must choose what to unpin.
            self.auto_pin_stopped = True
            self.note(
                f"auto-pin stopped: pins hold {self.totals.pinned:,} tokens and this decision would pass "
                f"{self.pin_share:.0%} of the {self.window:,}-token window; unpin what no longer matters (u), "
                "or pin this one by hand (p)",
                "warning",
            )
        return self._index[m.id]

    def _restates_a_pin(self, content: str) -> bool:
        """Does this message open by repeating a pinned message (an echo or a quote-back)?

        Pinning it again would rent the same decision twice on every turn.
        """
        head = " ".join(content.split()).lower()[:80]
        if len(head) < 20:
            return False
        return any(head in " ".join(p.content.split()).lower() for p in self._messages if p.pinned)

    @property
    def blank(self) -> bool:
        """Nothing was said yet: no message but the project instructions. Such a session is not kept."""
        return not self.folds and all(m.kind == Kind.instructions for m in self._messages)

    @property
    def instructions(self) -> dict[str, Message]:
        """The project instructions in the context, by the file they were read from."""
        return {str(m.meta.get("source", "")): m for m in self._messages if m.kind == Kind.instructions}

    def read_instructions(self, source: str, text: str | None, *, meta: dict[str, Any] | None = None) -> InstructionsRead | None:
        """Put a project instructions file's text at the head of the transcript, pinned, in place
        of its previous reading; `text=None` removes it. None when nothing changed.

        Pinned messages count against `pin_share`, so instructions leave less
        room for pinned decisions; the agent caps them (`agent/instructions.py`).
        """
        old = self.instructions.get(source)
        if text is None:
            if old is None:
                return None
            return self.emit(InstructionsRead(source=source, message=None, replaces=old.id, at=self.clock()))  # type: ignore[return-value]
        if old is not None and old.content == text:
            return None
        m = self.make_message("user", text, kind=Kind.instructions, pinned=True, meta={**(meta or {}), "source": source})
        event = InstructionsRead(source=source, message=m, replaces=old.id if old else None, at=m.created)
        return self.emit(event)  # type: ignore[return-value]

    def pin(self, message_id: str) -> Pinned | None:
        """Pin a message: no fold may touch it. None if it was already pinned."""
        m = self.get(message_id)
        if m.pinned:
            return None
        return self.emit(Pinned(id=message_id, at=self.clock()))  # type: ignore[return-value]

    def unpin(self, message_id: str) -> Unpinned | None:
        """Unpin a message; an unpinned decision is never auto-pinned again."""
        m = self.get(message_id)
        if not m.pinned:
            return None
        if m.kind == Kind.instructions:
            source = m.meta.get("source", "the instructions file")
            raise SessionError(f"project instructions stay pinned: edit or remove {source} to change them")
        self.auto_pin_stopped = False
        return self.emit(Unpinned(id=message_id, at=self.clock()))  # type: ignore[return-value]

    def add_watch(self, word: str) -> WatchAdded | None:
        word = word.strip()
        if not word:
            raise SessionError("a watch word cannot be empty")
        if word.lower() in (w.lower() for w in self.watch):
            return None
        return self.emit(WatchAdded(word=word, at=self.clock()))  # type: ignore[return-value]

    def remove_watch(self, word: str) -> WatchRemoved | None:
        if word.lower() not in (w.lower() for w in self.watch):
            return None
        return self.emit(WatchRemoved(word=word, at=self.clock()))  # type: ignore[return-value]

    def note(self, text: str, level: str = "info") -> Note:
        return self.emit(Note(text=text, level=level, at=self.clock()))  # type: ignore[return-value,arg-type]

    def visible_text(self) -> str:
        """Everything that would be sent now, as one text (for probes)."""
        return "\n".join([self.system, *(m.content for m in self._messages if not m.cut_off)])


def replay(events: Iterable[Event], **session_kwargs: Any) -> Session:
    """Rebuild a session from its events (the journal's job, testable without files)."""
    session = Session(**session_kwargs)
    for event in events:
        session.apply(event)
    return session
