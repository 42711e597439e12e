"""What a request sends: the session as neutral wire messages.

Shared by the turn loop (every request), the slot keeper (the prefix hash of
what is about to be sent) and the framing probes of `build`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tailrent_tui.core.messages import Kind, Message
from tailrent_tui.core.session import Session


def summary_pair(m: Message) -> tuple[str, str] | None:
    """(the instruction, the summary) of a fold summary a model wrote in the conversation's
    context (core keeps the instruction as its header, `Summary.asked`); None otherwise."""
    if m.kind is not Kind.fold_summary:
        return None
    asked = m.meta.get("asked")
    if not isinstance(asked, str) or not asked or not m.content.startswith(asked + "\n"):
        return None
    return asked, m.content[len(asked) + 1 :]


def wire_messages(session: Session) -> list[dict[str, Any]]:
    """The context as neutral wire messages (`wire_entries` without the message ids)."""
    return [entry for _, entry in wire_entries(session)]


def wire_entries(session: Session) -> list[tuple[str | None, dict[str, Any]]]:
    """The context as (message id, wire message): system prompt (id None), then the transcript.

    Fold summaries and pointers travel as user-side context notes, because
    several chat templates refuse a system message after the first. A summary
    the model wrote in the conversation's context travels as what it was: the
    instruction that asked for it (a user message) and its answer (`summary_pair`),
    the very tokens the engine evaluated and generated for the summary request,
    so that an engine which shifts KV finds them cached after the fold. A tool
    result whose call was folded away travels the same way, so the request
    never holds an orphan tool message.
    """
    return wire_entries_of(session.system, session.messages)


def wire_entries_of(system: str | None, messages: Sequence[Message]) -> list[tuple[str | None, dict[str, Any]]]:
    """`wire_entries` of these messages after this system prompt (a context as it will be: the one a
    prepared fold leaves)."""
    out: list[tuple[str | None, dict[str, Any]]] = []
    if system:
        out.append((None, {"role": "system", "content": system}))
    open_calls: set[str] = set()
    for m in messages:
        if m.cut_off:
            continue
        if m.role == "assistant":
            entry: dict[str, Any] = {"role": "assistant", "content": m.content}
            if m.tool_calls:
                entry["tool_calls"] = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in m.tool_calls]
                open_calls = {c.id for c in m.tool_calls}
            out.append((m.id, entry))
        elif m.role == "tool" and m.tool_call_id and m.tool_call_id in open_calls:
            out.append((m.id, {"role": "tool", "content": m.content, "tool_name": m.tool or "", "tool_call_id": m.tool_call_id}))
        elif m.role == "tool":
            out.append((m.id, {"role": "user", "content": f"[tool result: {m.tool or 'tool'}]\n{m.content}"}))
        elif m.role == "system" and summary_pair(m) is not None:
            asked, answer = summary_pair(m)  # type: ignore[misc]
            out.append((m.id, {"role": "user", "content": asked}))
            out.append((m.id, {"role": "assistant", "content": answer}))
        elif m.role == "system":
            out.append((m.id, {"role": "user", "content": f"[context note]\n{m.content}"}))
        else:
            out.append((m.id, {"role": "user", "content": m.content}))
    return out
