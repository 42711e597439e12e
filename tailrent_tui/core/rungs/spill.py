"""Rung 2: spill to a store, leave a pointer.

Keeps: the whole content, in the spill store (a file per spill in the session
directory), and a compact pointer in context: id, tool, token count, a short
preview. Loses: nothing, but reading it back costs a tool call (`read_spill`)
and re-enters the context. The policy reaches for it whenever a tool result is
over the spill threshold after rung 1, and again before any fold: re-spilling
big inline results is cheaper than folding.

Core does no I/O: it writes through the `SpillStore` protocol; `store/` has the
file-backed implementation, `MemorySpillStore` serves tests and benchmarks.
"""

from __future__ import annotations

from tailrent_tui.core.messages import Kind, Message, Spilled
from tailrent_tui.core.ports import SpillMissing, SpillStore
from tailrent_tui.core.ports import SpillStoreError as SpillStoreError
from tailrent_tui.core.session import Session, SessionError

PREVIEW_CHARS = 120


class MemorySpillStore(SpillStore):
    """Spills kept in a dict: for tests, benchmarks and traces."""

    def __init__(self) -> None:
        self.items: dict[str, tuple[str, str, float]] = {}

    def write_spill(self, spill_id: str, tool: str, content: str, at: float) -> str:
        self.items[spill_id] = (tool, content, at)
        return f"mem://spill/{spill_id}"

    def read_spill(self, spill_id: str) -> str:
        try:
            return self.items[spill_id][1]
        except KeyError:
            raise SpillMissing(f"spill {spill_id} is not in the store (kept in memory)") from None


def pointer_text(tool: str, tokens: int, spill_id: str, content: str) -> str:
    """The compact pointer left in context in place of a spilled result."""
    flat = " ".join(content[: PREVIEW_CHARS * 8].split())
    preview = flat[:PREVIEW_CHARS] + ("…" if len(flat) > PREVIEW_CHARS else "")
    return f'[spill {spill_id}] {tool}: ~{tokens:,} tokens; read_spill("{spill_id}") for the whole. Preview: {preview}'


_POINTER_PROBE_ID = "00000000-0000-4000-8000-000000000000"


def spill_gain(session: Session, m: Message) -> int:
    """Tokens a spill of `m` would free: its tokens less its pointer's (negative: it would grow)."""
    return m.tokens - session.count(pointer_text(m.tool or m.role, m.tokens, _POINTER_PROBE_ID, m.content))


def spill_message(session: Session, message_id: str, store: SpillStore, *, tool: str | None = None) -> Spilled:
    """Move a message's content to the store and leave a pointer in its place.

    Refused when the pointer would not be smaller than the message: a spill
    must shrink the context.
    """
    m = session.get(message_id)
    if m.kind == Kind.spill_pointer:
        raise SessionError(f"message {message_id} is already spilled: it is a pointer to its file")
    if m.kind == Kind.fold_summary:
        raise SessionError(f"message {message_id} is a fold summary; only content can be spilled (fold it again instead)")
    if m.kind == Kind.instructions:
        raise SessionError(f"message {message_id} holds the project instructions; they stay in the context")
    if m.pinned:
        raise SessionError(f"message {message_id} is pinned; unpin it before spilling")
    spill_id = session.spill_ids()
    tool_name = tool or m.tool or m.role
    pointer = pointer_text(tool_name, m.tokens, spill_id, m.content)
    pointer_tokens = session.count(pointer)
    if pointer_tokens >= m.tokens:
        raise SessionError(
            f"nothing spilled: the {m.tokens:,}-token message would become a {pointer_tokens:,}-token pointer"
        )
    at = session.clock()
    location = store.write_spill(spill_id, tool_name, m.content, at)
    event = Spilled(
        id=message_id,
        spill_id=spill_id,
        tool=tool_name,
        location=location,
        tokens_before=m.tokens,
        pointer=pointer,
        pointer_tokens=pointer_tokens,
        at=at,
    )
    return session.emit(event)  # type: ignore[return-value]


def admit_tool_result(
    session: Session,
    tool: str,
    content: str,
    store: SpillStore,
    *,
    threshold: int,
    tool_call_id: str | None = None,
    at: float | None = None,
) -> Message:
    """Add a tool result through rung 2: inline if small, else spilled with a pointer.

    The result is counted once; if it is over `threshold` tokens the content
    goes to the store first, and the message enters as a pointer. If the store
    cannot write, the full result enters inline and a note says why, so the
    content is never lost.
    """
    tokens = session.count(content)
    if tokens <= threshold:
        m = session.make_message(
            "tool", content, kind=Kind.tool_result, tool=tool, tool_call_id=tool_call_id, at=at, tokens=tokens
        )
        return session.add_message(m, autopin=False)
    spill_id = session.spill_ids()
    stamp = session.clock() if at is None else at
    try:
        location = store.write_spill(spill_id, tool, content, stamp)
    except OSError as exc:
        session.note(f"spill failed ({exc}); the {tool} result stays inline ({tokens:,} tokens)", "error")
        m = session.make_message(
            "tool", content, kind=Kind.tool_result, tool=tool, tool_call_id=tool_call_id, at=at, tokens=tokens
        )
        return session.add_message(m, autopin=False)
    pointer = pointer_text(tool, tokens, spill_id, content)
    m = session.make_message("tool", pointer, kind=Kind.spill_pointer, tool=tool, tool_call_id=tool_call_id, at=at)
    m.spill_id = spill_id
    m.meta = {"spill_location": location, "spilled_tokens": tokens}
    return session.add_message(m, autopin=False)
