"""An MCP tool result as a tailrent tool outcome: rung 1 applied to text and structured content alike.

Text blocks are joined; structured content enters as JSON when no text block
carries it; images and audio become one line each (saved to a raw spill when
the session has one, which the line names); resources become one line with
their URI (an embedded text resource keeps its text). The whole is then cut at
`max_result_bytes` with a cut line, as every built-in tool caps its own output;
rung 2 (spill above the threshold) follows in the agent as for any tool.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from tailrent_tui.agent.tools.base import ToolContext, ToolOutcome, decode_output, fmt_bytes, outcome


def _save_binary(data: bytes, ctx: ToolContext) -> str | None:
    """Write `data` to a raw spill when the session has one and its budget allows; its id."""
    if ctx.spill_sink is None or ctx.spill_budget is None:
        return None
    if ctx.spill_budget.take(len(data)) < len(data):
        return None
    try:
        fh, spill_id = ctx.spill_sink()
        with fh:
            fh.write(data)
    except OSError:
        ctx.spill_budget.give_back(len(data))
        return None
    return spill_id


def _binary_line(kind: str, mime: str, b64: str, ctx: ToolContext) -> str:
    try:
        data = base64.b64decode(b64, validate=False)
    except (binascii.Error, ValueError):
        return f"[{kind} ({mime}): its data is not valid base64; not shown]"
    saved = _save_binary(data, ctx)
    where = f"; saved as raw spill {saved}" if saved else ""
    return f"[{kind} ({mime}, {fmt_bytes(len(data))}): not passed to the model{where}]"


def block_text(block: Any, ctx: ToolContext) -> str:
    """One content block as the text the model reads."""
    kind = getattr(block, "type", "")
    if kind == "text":
        return str(block.text)
    if kind in ("image", "audio"):
        return _binary_line(kind, block.mime_type, block.data, ctx)
    if kind == "resource_link":
        mime = f", {block.mime_type}" if getattr(block, "mime_type", None) else ""
        return f"[resource {block.name}{mime}: {block.uri}]"
    if kind == "resource":
        res = block.resource
        if getattr(res, "text", None) is not None:
            return f"[resource {res.uri}]\n{res.text}"
        mime = getattr(res, "mime_type", None) or "binary"
        return _binary_line(f"resource {res.uri}", mime, getattr(res, "blob", ""), ctx)
    return f"[a {kind or 'unknown'} block this client does not read]"


def to_outcome(tool: str, result: Any, ctx: ToolContext, max_bytes: int) -> ToolOutcome:
    """Rung 1 for an MCP result: the text the model reads, cut at `max_bytes` with a cut line."""
    parts = [block_text(block, ctx) for block in result.content]
    structured = getattr(result, "structured_content", None)
    if structured is not None and not any(getattr(b, "type", "") == "text" for b in result.content):
        parts.append(json.dumps(structured, ensure_ascii=False, indent=1))
    text = "\n".join(parts)
    data = text.encode("utf-8")
    cut = None
    if len(data) > max_bytes:
        text, _ = decode_output(data[:max_bytes], truncated=True)
        cut = (
            f"[{tool}: showing the first {fmt_bytes(max_bytes)} of {fmt_bytes(len(data))} (mcp.max_result_bytes); "
            "the rest was dropped: ask the tool for less]"
        )
    if result.is_error:
        return outcome(f"error: {tool}: {text or 'the tool failed without saying why'}", cut=cut, is_error=True)
    return outcome(text or f"[{tool} returned no content]", cut=cut, meta={"bytes": len(data)})
