"""What a request sends: the session as neutral wire messages.

Shared by the turn loop (every request), the slot keeper (the prefix hash of
what is about to be sent) and the framing probes of `build`.
"""

from __future__ import annotations

from typing import Any

from tailrent_tui.core.session import Session


def wire_messages(session: Session) -> list[dict[str, Any]]:
    """The context as neutral wire messages: system prompt, then the transcript.

    Fold summaries and pointers travel as user-side context notes, because
    several chat templates refuse a system message after the first. A tool
    result whose call was folded away travels the same way, so the request
    never holds an orphan tool message.
    """
    out: list[dict[str, Any]] = []
    if session.system:
        out.append({"role": "system", "content": session.system})
    open_calls: set[str] = set()
    for m in session.messages:
        if m.cut_off:
            continue
        if m.role == "assistant":
            entry: dict[str, Any] = {"role": "assistant", "content": m.content}
            if m.tool_calls:
                entry["tool_calls"] = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in m.tool_calls]
                open_calls = {c.id for c in m.tool_calls}
            out.append(entry)
        elif m.role == "tool" and m.tool_call_id and m.tool_call_id in open_calls:
            out.append({"role": "tool", "content": m.content, "tool_name": m.tool or "", "tool_call_id": m.tool_call_id})
        elif m.role == "tool":
            out.append({"role": "user", "content": f"[tool result: {m.tool or 'tool'}]\n{m.content}"})
        elif m.role == "system":
            out.append({"role": "user", "content": f"[context note]\n{m.content}"})
        else:
            out.append({"role": "user", "content": m.content})
    return out
