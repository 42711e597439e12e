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

from tailrent_tui.core import ledger as ledger_rules
from tailrent_tui.core.ledger import Statement
from tailrent_tui.core.messages import (
    Event,
    Folded,
    FoldRecord,
    FoldRetired,
    FoldSkipped,
    InstructionsRead,
    Kind,
    Message,
    MessageAdded,
    Note,
    Pinned,
    Role,
    Spilled,
    StatementChanged,
    StatementsFound,
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

#: the share of the pins' budget the user's unclassified words (`said` statements) may hold at most
SAID_SHARE = 0.5


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
    #: pins may hold this share of what the head and the reply leave of the window; past it auto-pinning
    #: stops (the user decides what to unpin)
    pin_share: float = 0.55
    #: tokens every request keeps for the reply (the ladder sets it from its settings): not the pins' room
    reply_reserve: int = 0
    framing: Framing = field(default_factory=Framing)
    #: find statements in every message on arrival and keep them in the ledger (core/ledger.py);
    #: None: whenever decisions are detected (the ladder's sessions)
    detect_statements: bool | None = None

    def __post_init__(self) -> None:
        self._messages: list[Message] = []
        self._index: dict[str, Message] = {}
        #: the context's (identity, tokens) items (`context_items`), kept as messages arrive; None: to rebuild
        #: (a spill, a fold, an unfold changed the transcript in place). A turn appends, so a request reads
        #: them in time proportional to what changed, not to the transcript's length
        self._items: list[tuple[str, int]] | None = []
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
        #: messages the user pinned by hand: unpinning a statement never takes their pin
        self.user_pinned: set[str] = set()
        self.listeners: list[Callable[[Event], None]] = []
        self.system_tokens = self.counter.count(self.system)
        if self.detect_statements is None:
            self.detect_statements = self.decisions is not None
        self._owned = False
        self.auto_pin_stopped = False  # a decision was left unpinned: the pins are at their budget
        #: the ledger: every statement found, in order, current or not
        self.statements: dict[str, Statement] = {}
        self._statements_of: dict[str, list[str]] = {}
        #: which message in the context holds each statement's text now (its own, or a ledger message)
        self.carrier: dict[str, str] = {}
        #: folds whose summary left the context for a pointer, by number
        self.retired: dict[int, FoldRetired] = {}
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

    def context_items(self) -> list[tuple[str, int]]:
        """The transcript as the rent model compares requests: one (identity, tokens) item per
        message sent (a cut-off reply is not), the identity its id and kind, the tokens as sent.

        Kept incrementally: an appended message appends its item; an event that changes the
        transcript in place (a spill, a fold, an unfold, a retirement, a ledger rewrite) drops the
        list, rebuilt once at the next call. Returns a copy the caller may keep or change."""
        items = self._items
        if items is None:
            framing = self.framing
            items = self._items = [
                (f"{m.id}#{m.kind.value}", m.tokens + framing.message(m.role)) for m in self._messages if not m.cut_off
            ]
        return items.copy()

    def _changed(self) -> None:
        """The transcript changed in place: the context's items are rebuilt when next asked."""
        self._items = None

    @property
    def context_tokens(self) -> int:
        """Tokens of the context that would be sent now (head + transcript)."""
        return self.head_tokens + self.totals.transcript

    @property
    def pinned(self) -> list[Message]:
        return [m for m in self._messages if m.pinned]

    @property
    def pin_budget(self) -> int:
        """Tokens the pins may hold before auto-pinning stops: a share of what the head (the system
        prompt, the tools) and the reply's room leave of the window. A 1,300-token head in a 2,048 window
        leaves little, and pins sized on the whole window crowded every request."""
        return int(max(0, self.window - self.head_tokens - self.reply_reserve) * self.pin_share)

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
        sent = m.tokens + self.framing.message(m.role)
        self.totals._account(m, +1, sent)
        items = self._items
        if items is not None and not m.cut_off:
            items.append((f"{m.id}#{m.kind.value}", sent))
        if m.kind is Kind.ledger:
            for sid in m.meta.get("statements", ()):
                self.carrier[sid] = m.id
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
        if not e.auto:
            self.user_pinned.add(e.id)

    def _apply_unpinned(self, e: Unpinned) -> None:
        self._set_pinned(e.id, False)
        self.user_unpinned.add(e.id)
        self.user_pinned.discard(e.id)

    def _apply_spilled(self, e: Spilled) -> None:
        m = self.get(e.id)
        self._changed()
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
        self._changed()
        for i in span:
            gone = self._index.pop(i)
            self.totals._account(gone, -1, self.sent_tokens(gone))
        moving = set(f.moved)
        moved = [m for m in self._messages if m.id in moving]
        kept = [m for m in self._messages if m.id not in span and m.id not in moving]
        # the transcript's summary is its own object: a later pin must not alter the record
        summary = f.summary.clone()
        position = min(max(f.position, 0), len(kept))
        kept.insert(position, summary)
        after = position + 1
        if f.ledger is not None:
            # after its summary: a summary the engine wrote (and cached) comes first, the new tokens after it
            carried = f.ledger.clone()
            kept.insert(after, carried)
            after += 1
            self._index[carried.id] = carried
            self.totals._account(carried, +1, self.sent_tokens(carried))
            for sid in f.carried:
                self.carrier[sid] = carried.id
        # short messages the span surrounded go after them (read again: a few tokens, where left alone between
        # two deletions they stopped llama.cpp's KV shift and everything after them was read again)
        kept[after:after] = moved
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
        self._changed()
        if record.ledger is not None and record.ledger.id in self._index:
            # the originals hold the statements again, word for word
            carried = self._index.pop(record.ledger.id)
            self.totals._account(carried, -1, self.sent_tokens(carried))
            self._messages.remove(carried)
        position = self.index_of(summary.id)
        del self._index[summary.id]
        self.totals._account(summary, -1, self.sent_tokens(summary))
        self.retired.pop(e.fold_no, None)
        self._messages[position : position + 1] = originals
        ledger_id = record.ledger.id if record.ledger is not None else None
        # a fold of ledger messages gives its statements back to them, any other to the messages that said them
        held_by = {sid: m.id for m in originals if m.kind is Kind.ledger for sid in m.meta.get("statements", ())}
        for sid in record.carried:
            source = self.statements.get(sid)
            if source is not None and ledger_id is not None and self.carrier.get(sid) == ledger_id:
                self.carrier[sid] = held_by.get(sid, source.message_id)
        for m in originals:
            self._index[m.id] = m
            self.totals._account(m, +1, self.sent_tokens(m))
            if m.kind is Kind.ledger:
                # archived with the words it held then: a line edited or superseded since shows as it is now
                self._rewrite(m, self._ledger_content(m))
        self.unfolded[e.fold_no] = e

    def _apply_instructions_read(self, e: InstructionsRead) -> None:
        old = self._index.get(e.replaces) if e.replaces else None
        if e.replaces and old is None:
            raise SessionError(f"instructions from {e.source} replace a message not in the transcript: {e.replaces!r}")
        self._changed()
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

    def _apply_statements_found(self, e: StatementsFound) -> None:
        ids = self._statements_of.setdefault(e.message_id, [])
        for st in e.statements:
            self.statements[st.id] = st if self._owned else st.model_copy()
            ids.append(st.id)
            if e.message_id in self._index:
                self.carrier.setdefault(st.id, e.message_id)
        for new, old in e.supersedes.items():
            before = self.statements.get(old)
            if before is not None:
                before.status = "superseded"
                before.superseded_by = new
                self.statements[new].supersedes = old
                holder = self._index.get(self.carrier.get(old, ""))
                if holder is not None and holder.kind is Kind.ledger:
                    # the replaced line leaves the ledger message at once, not at the next fold (a message whose
                    # every line is replaced keeps its text until then: see _ledger_content)
                    self._rewrite(holder, self._ledger_content(holder))

    def _apply_statement_changed(self, e: StatementChanged) -> None:
        st = self.statements.get(e.id)
        if st is None:
            raise SessionError(f"no statement {e.id!r} in the ledger")
        if e.status is not None:
            st.status = e.status
        if e.pinned is not None:
            st.unpinned = not e.pinned
        if e.amended_by is not None:
            st.amended_by = e.amended_by
        if e.text is not None and e.text != st.text:
            if st.original is None:
                st.original = st.text
            st.text = e.text
            st.edited = True
        holder = self._index.get(self.carrier.get(e.id, ""))
        if holder is not None and holder.kind is Kind.ledger:
            # the ledger message shows the statement as it is now (a superseded one leaves at the next fold)
            self._rewrite(holder, self._ledger_content(holder))

    def _ledger_content(self, holder: Message) -> str:
        shown = [self.statements[i] for i in holder.meta.get("statements", ()) if i in self.statements]
        current = [s for s in shown if s.status != "superseded"]
        if not current:
            return holder.content
        return ledger_rules.ledger_text(current)

    def _rewrite(self, m: Message, content: str) -> None:
        if content == m.content:
            return
        self._changed()
        self.totals._account(m, -1, self.sent_tokens(m))
        m.content = content
        m.tokens = self.counter.count(content)
        self.totals._account(m, +1, self.sent_tokens(m))

    def _apply_fold_retired(self, e: FoldRetired) -> None:
        record = next((f for f in self.folds if f.fold_no == e.fold_no), None)
        if record is None or record.summary.id not in self._index:
            raise SessionError(f"fold #{e.fold_no}'s summary is not in the context to retire")
        self._changed()
        by_no = {f.fold_no: f for f in self.folds}
        for no in e.merged:
            older = by_no.get(no)
            gone = self._index.pop(older.summary.id, None) if older is not None else None
            if gone is not None:
                self.totals._account(gone, -1, self.sent_tokens(gone))
                self._messages.remove(gone)
        m = self._index[record.summary.id]
        self.totals._account(m, -1, self.sent_tokens(m))
        m.content = e.pointer
        m.tokens = e.pointer_tokens
        m.meta = {**m.meta, "retired": True}
        self.totals._account(m, +1, self.sent_tokens(m))
        if e.position is not None:
            # the summary leaves its place and the pointer comes before the turn in flight: a deletion, which
            # an engine that shifts KV bridges, where a pointer in the summary's place is new text mid-context
            self._messages.remove(m)
            self._messages.insert(min(e.position, len(self._messages)), m)
        self.retired[e.fold_no] = e

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

        With `detect_statements`, the message's statements go into the ledger
        (core/ledger.py); a correction supersedes what it corrects (unpinned,
        it leaves at the next fold), and a short message of the user's that is
        mostly statement is pinned in place. What the model states unlabelled
        is a proposal, neither pinned nor carried, until the user accepts it.
        """
        auto = None
        found: list[ledger_rules.Found] = []
        # the app's own notices (role "system": the text protocol's note, resume lines) state its rules,
        # not the user's: they are pinned where needed and never enter the ledger
        if self.detect_statements and m.kind in (Kind.chat, Kind.tool_result) and m.role != "system" and not m.cut_off:
            found = ledger_rules.detect(m.content, m.role, words=m.role == "user")
        known = [f for f in found if not f.said]
        if autopin and not m.pinned and m.kind == Kind.chat and m.role in ("user", "assistant"):
            # what the model states is a proposal, unless it writes it as a labelled decision
            if self.decisions is not None and (
                m.role == "user" or not self.detect_statements or any(f.label and f.kind == "decision" for f in found)
            ):
                auto = self.decisions.match(m.content)
            if auto is None and m.role == "user" and known and self._mostly_statement(m, known):
                auto = f"ledger: {known[0].kind}"
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
        if found:
            self._record_statements(m, found)
        if over_budget and not self.auto_pin_stopped:
            # Folding cannot make room for pins, so the user must choose what to unpin.
            self.auto_pin_stopped = True
            self.note(
                f"auto-pin stopped: pins hold {self.totals.pinned:,} tokens and this decision would pass their "
                f"{self.pin_budget:,}-token budget ({self.pin_share:.0%} of what the system prompt and the reply leave of the "
                f"{self.window:,}-token window); unpin what no longer matters (u), "
                "or pin this one by hand (p)",
                "warning",
            )
        return self._index[m.id]

    @staticmethod
    def _mostly_statement(m: Message, found: Sequence[ledger_rules.Found]) -> bool:
        """Is the message mostly what its statements say (pin it whole), or do they sit in a
        longer text (keep them alone: a fold carries them into the ledger)?"""
        said = sum(len(f.text) for f in found)
        return said >= 0.6 * len(m.content.strip()) or m.tokens <= 48

    def _record_statements(self, m: Message, found: Sequence[ledger_rules.Found]) -> None:
        role = "instructions" if m.kind is Kind.instructions else m.role
        labelled_roles = ("user", "instructions", "tool")
        statements: list[Statement] = []
        supersedes: dict[str, str] = {}
        amends: dict[str, tuple[str, str]] = {}
        earlier = [st for st in self.statements.values() if st.status == "current"]
        said = {" ".join(st.text.casefold().split()) for st in earlier}
        for n, f in enumerate(found):
            key = " ".join(f.text.casefold().split())
            if key in said:
                continue  # said again: the ledger keeps it once
            said.add(key)
            proposal = role == "assistant" and f.label is None
            st = Statement(
                id=f"{m.id}.{n}",
                message_id=m.id,
                kind=f.kind,
                text=f.text,
                role=role,
                label=f.label,
                status="proposal" if proposal else "current",
                at=m.created,
                score=round(f.score, 3),
                said=f.said,
            )
            if not proposal and (role in labelled_roles or f.label):
                old = ledger_rules.find_superseded(f, earlier)
                if old is not None and old.message_id != m.id:
                    # a correction of one value of several: the rest of the old statement still holds
                    amended = ledger_rules.amendment(f.text, old.text)
                    if amended is not None:
                        amends[old.id] = (st.id, amended)
                    else:
                        supersedes[st.id] = old.id
                    earlier = [e for e in earlier if e.id != old.id]
            statements.append(st)
        self.emit(StatementsFound(message_id=m.id, statements=statements, supersedes=supersedes, at=m.created))
        for old_id in supersedes.values():
            self._release(old_id)
        for old_id, (by_id, text) in amends.items():
            self.edit_statement(old_id, text, amended_by=by_id)

    def _release(self, statement_id: str) -> None:
        """A superseded statement's message is unpinned, so it leaves at the next fold
        (project instructions stay: their file says what it says). A ledger message has lost the
        line already (see `_apply_statements_found`); unpinned, the next fold carries its other lines
        again into its own ledger message, so that the ledger messages do not pile up pinned."""
        holder = self._index.get(self.carrier.get(statement_id, ""))
        if holder is None or not holder.pinned or holder.kind is Kind.instructions:
            return
        # its other current statements are carried again, verbatim, when the next fold takes it
        self.emit(Unpinned(id=holder.id, at=self.clock()))

    def statements_held(self, message_id: str) -> list[str]:
        """Ids of the statements whose text this message holds now."""
        m = self._index.get(message_id)
        if m is not None and m.kind is Kind.ledger:
            return list(m.meta.get("statements", ()))
        return [i for i in self._statements_of.get(message_id, ()) if self.carrier.get(i) == message_id]

    def carried_by(self, span: Sequence[Message], *, budget: bool = True) -> list[Statement]:
        """The current statements whose text the span holds that a fold of it carries into the
        ledger: as many as the pins' budget has room for (the span's own ledger messages give
        theirs back). The rest stay in the span's text, for the summary and the guard."""
        room = self.pin_budget - self.totals.pinned + sum(self.sent_tokens(m) for m in span if m.pinned or m.kind is Kind.ledger)
        held: list[Statement] = []
        seen: set[str] = set()
        for m in span:
            for sid in self.statements_held(m.id):
                st = self.statements.get(sid)
                if st is None or st.status == "superseded" or st.unpinned or sid in seen:
                    continue
                seen.add(sid)
                held.append(st)
        if not budget:
            return held
        # when the budget binds, what the detector is least sure of stays behind first (the user's
        # unrecognized words, then the lowest scores); the guard counts what the summary then drops
        # and the user's unclassified words never take more than SAID_SHARE of the budget, so that what
        # the detector recognized later still finds room (a fold cannot take back an earlier one's room)
        in_span = {m.id for m in span}
        said_room = int(self.pin_budget * SAID_SHARE) - sum(
            self.counter.count(ledger_rules.ledger_line(self.statements[i])) + 1
            for m in self._messages
            if m.kind is Kind.ledger and m.id not in in_span
            for i in m.meta.get("statements", ())
            if i in self.statements and self.statements[i].said and self.statements[i].status != "superseded"
        )
        keep: set[str] = set()
        for st in sorted(held, key=lambda st: (st.said, -st.score)):
            cost = self.counter.count(ledger_rules.ledger_line(st)) + 1
            if cost <= room and (not st.said or cost <= said_room):
                room -= cost
                said_room -= cost if st.said else 0
                keep.add(st.id)
        return [st for st in held if st.id in keep]

    def summarizable(self, span: Sequence[Message]) -> list[Message]:
        """The span as a summarizer sees it: ledger messages out, and the text of every
        statement a fold of it carries (or that was superseded) taken out of its message.
        The copies keep their ids; a message left with nothing to say is left out."""
        carried = {st.id for st in self.carried_by(span)}
        out: list[Message] = []
        for m in span:
            if m.kind is Kind.ledger:
                # what it holds beyond the budget stays as text for the summary
                left = [self.statements[i] for i in m.meta.get("statements", ()) if i in self.statements]
                left = [st for st in left if st.status != "superseded" and st.id not in carried]
                if left:
                    copy = m.clone()
                    copy.content = "\n".join(st.text for st in left)
                    copy.tokens = self.counter.count(copy.content)
                    out.append(copy)
                continue
            # an edited statement's message holds its original words
            held = [self.statements[i] for i in self._statements_of.get(m.id, ()) if i in self.statements]
            texts = [
                st.original or st.text
                for st in held
                if st.id in carried or st.status == "superseded" or (st.edited and self.carrier.get(st.id) != m.id)
            ]
            if not texts:
                out.append(m)
                continue
            rest = ledger_rules.strip_statements(m.content, texts)
            if not rest.strip(" \t\n.,;:-"):
                continue
            copy = m.clone()
            copy.content = rest
            copy.tokens = self.counter.count(rest)
            out.append(copy)
        return out

    def rebuild_ledger(self) -> int:
        """Find the statements of every message in the context that has none recorded (a session
        journaled before the ledger existed); returns how many were found."""
        before = len(self.statements)
        for m in list(self._messages):
            if m.id in self._statements_of or m.kind not in (Kind.chat, Kind.tool_result) or m.cut_off:
                continue
            found = ledger_rules.detect(m.content, m.role, words=m.role == "user")
            if found:
                self._record_statements(m, found)
        return len(self.statements) - before

    def accept(self, statement_id: str) -> StatementChanged | None:
        """A proposal of the model's becomes a current statement (kept verbatim from now on)."""
        st = self._statement(statement_id)
        if st.status == "current":
            return None
        return self.emit(StatementChanged(id=statement_id, status="current", at=self.clock()))  # type: ignore[return-value]

    def supersede(self, statement_id: str) -> StatementChanged | None:
        """Mark a statement superseded by hand: it leaves the context at the next fold."""
        st = self._statement(statement_id)
        if st.status == "superseded":
            return None
        ev = self.emit(StatementChanged(id=statement_id, status="superseded", at=self.clock()))
        self._release(statement_id)
        return ev  # type: ignore[return-value]

    def edit_statement(self, statement_id: str, text: str, *, amended_by: str | None = None) -> StatementChanged | None:
        """The user's wording for a statement. Held by a ledger message, that message shows it
        at once; held by its own live message, a pinned ledger line at the tail shows it.
        `amended_by`: the statement whose correction replaced part of it (the ledger's own edit)."""
        st = self._statement(statement_id)
        text = " ".join(text.split())
        if not text:
            raise SessionError("a statement cannot be empty: supersede it instead (x)")
        if len(text) > ledger_rules.MAX_STATEMENT_CHARS:
            raise SessionError(f"a statement holds at most {ledger_rules.MAX_STATEMENT_CHARS} characters; this is {len(text):,}")
        if text == st.text:
            return None
        holder = self._index.get(self.carrier.get(statement_id, ""))
        ev = self.emit(StatementChanged(id=statement_id, text=text, status="current", amended_by=amended_by, at=self.clock()))
        if holder is None or holder.kind is not Kind.ledger:
            edited = self.statements[statement_id]
            m = self.make_message(
                "system",
                ledger_rules.ledger_text([edited]),
                kind=Kind.ledger,
                pinned=True,
                meta={"statements": [statement_id]},
            )
            self.add_message(m, autopin=False)
            if holder is not None and holder.pinned and holder.kind is not Kind.instructions:
                # its own message still says the old words: it is not pinned for them any more
                self.emit(Unpinned(id=holder.id, at=self.clock()))
        return ev  # type: ignore[return-value]

    def pin_statement(self, statement_id: str, pinned: bool = True) -> StatementChanged | None:
        """Pin or unpin one statement. Unpinned, the next fold does not carry it verbatim (its text goes
        to the summary, and the guard checks it like any other); the ledger message that holds it
        stays pinned for its other statements. None when nothing changed."""
        st = self._statement(statement_id)
        if st.unpinned != pinned:
            return None
        ev = self.emit(StatementChanged(id=statement_id, pinned=pinned, at=self.clock()))
        holder = self._index.get(self.carrier.get(statement_id, ""))
        if not pinned and holder is not None and holder.pinned and holder.kind is Kind.chat and holder.id not in self.user_pinned:
            # pinned in its own message for its statements: with none of them pinned any more, the message
            # is not either (else "unpinned" would change nothing: the message would never leave)
            held = [self.statements[i] for i in self.statements_held(holder.id) if i in self.statements]
            if all(h.unpinned or h.status != "current" for h in held):
                self.emit(Unpinned(id=holder.id, at=self.clock()))
        return ev  # type: ignore[return-value]

    def _statement(self, statement_id: str) -> Statement:
        st = self.statements.get(statement_id)
        if st is None:
            raise SessionError(f"no statement {statement_id!r} in the ledger")
        return st

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
