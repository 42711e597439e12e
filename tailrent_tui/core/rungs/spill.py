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
#: the head probed of a long result: this many characters per threshold token (cl100k
#: reads English at about 4 characters a token, code at about 3)
PROBE_CHARS_PER_TOKEN = 6
#: the head must be this far over the threshold: a cut can split a token or two
PROBE_MARGIN = 16


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


def measure_for_spill(session: Session, content: str, threshold: int) -> tuple[int, bool]:
    """A tool result's tokens, and whether the count is exact.

    A result far over the threshold is spilled whatever its exact size, so it
    is tokenized only as far as the threshold: its head (about six
    characters per threshold token, cut at a line or a word) is counted, and
    when the head alone is over, the whole is estimated from the head's
    characters per token (the pointer says "~N tokens"). The rest is never
    tokenized: a 10 MB output costs what its first few KB do, with the server's
    tokenizer too. A counter that costs nothing (chars4) counts the whole.
    """
    probe = threshold * PROBE_CHARS_PER_TOKEN
    if getattr(session.counter, "cheap", False) or len(content) <= probe + probe // 2:
        return session.count(content), True
    cut = content.rfind("\n", probe // 2, probe)
    if cut < 0:
        cut = content.rfind(" ", probe // 2, probe)
    if cut <= 0:
        cut = probe
    head = session.count(content[:cut])
    if head > threshold + PROBE_MARGIN:
        return max(head, round(head * len(content) / cut)), False
    return session.count(content), True


def pointer_text(tool: str, tokens: int, spill_id: str, content: str, *, tail: bool = False) -> str:
    """The compact pointer left in context in place of a spilled result.

    Its preview is the content's head; with `tail` (a paste: a traceback's decisive line is
    its last) the head and the tail, each `PREVIEW_CHARS` long, when the content is longer
    than both."""
    flat = " ".join(content[: PREVIEW_CHARS * 8].split())
    preview = flat[:PREVIEW_CHARS] + ("…" if len(flat) > PREVIEW_CHARS else "")
    if tail:
        end = " ".join(content[-PREVIEW_CHARS * 8 :].split())
        whole = " ".join(content.split()) if len(content) <= PREVIEW_CHARS * 16 else None
        if whole is not None and len(whole) <= 2 * PREVIEW_CHARS:
            preview = whole
        else:
            preview = f"{flat[:PREVIEW_CHARS]} … {end[-PREVIEW_CHARS:]}"
        return (
            f'[spill {spill_id}] {tool}: ~{tokens:,} tokens; read_spill("{spill_id}") for the whole. '
            f"Preview (head … tail): {preview}"
        )
    return f'[spill {spill_id}] {tool}: ~{tokens:,} tokens; read_spill("{spill_id}") for the whole. Preview: {preview}'


_POINTER_PROBE_ID = "00000000-0000-4000-8000-000000000000"


def spill_gain(session: Session, m: Message) -> int:
    """Tokens a spill of `m` would free: its tokens less its pointer's (negative: it would grow)."""
    return m.tokens - session.count(pointer_text(m.tool or m.role, m.tokens, _POINTER_PROBE_ID, m.content))


class NothingSpilled(SessionError):
    """A spill refused because its pointer would be no smaller than the message."""


def try_spill(session: Session, message_id: str, store: SpillStore) -> Spilled | None:
    """The ladder's spill: None where the pointer would not shrink the message.

    `spill_gain` estimates the pointer with a placeholder id; the real id is drawn at the spill
    and can tokenize longer, so a message close to its pointer's size is only known at the spill.
    A refused spill is a rung that does not apply, not a failed fold."""
    try:
        return spill_message(session, message_id, store)
    except NothingSpilled:
        return None


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
        raise NothingSpilled(f"nothing spilled: the {m.tokens:,}-token message would become a {pointer_tokens:,}-token pointer")
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
    preview_tail: bool = False,
) -> Message:
    """Add a tool result through rung 2: inline if small, else spilled with a pointer
    (its preview the head, and the tail too with `preview_tail`).

    The result is counted once (only its head when it is far over the
    threshold: `measure_for_spill`); if it is over `threshold` tokens the
    content goes to the store first, and the message enters as a pointer. If
    the store cannot write, the full result enters inline, counted whole, and a
    note says why, so the content is never lost.
    """
    tokens, exact = measure_for_spill(session, content, threshold)
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
        if not exact:
            tokens = session.count(content)
        session.note(f"spill failed ({exc}); the {tool} result stays inline ({tokens:,} tokens)", "error")
        m = session.make_message(
            "tool", content, kind=Kind.tool_result, tool=tool, tool_call_id=tool_call_id, at=at, tokens=tokens
        )
        return session.add_message(m, autopin=False)
    pointer = pointer_text(tool, tokens, spill_id, content, tail=preview_tail)
    m = session.make_message("tool", pointer, kind=Kind.spill_pointer, tool=tool, tool_call_id=tool_call_id, at=at)
    m.spill_id = spill_id
    m.meta = {"spill_location": location, "spilled_tokens": tokens}
    return session.add_message(m, autopin=False)
