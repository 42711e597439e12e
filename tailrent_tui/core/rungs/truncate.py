"""Rung 1: truncate at the source.

Keeps: the head of the content, up to a cap, and one line saying what was cut
and how to get more. Loses: everything past the cap, for good (unless the
caller spills the whole first). The policy reaches for it on every tool result
before anything else: it is the cheapest rung and the only one with no
partial loss — content past the cap is either disposable or re-readable.
"""

from __future__ import annotations

from pydantic import BaseModel


class Truncated(BaseModel):
    text: str
    cut: str | None = None


def truncate_text(
    text: str,
    *,
    max_lines: int | None = None,
    max_chars: int | None = None,
    label: str = "output",
    how_to_get_more: str = "",
) -> Truncated:
    """Cap `text` to `max_lines` lines and `max_chars` characters; announce the cut."""
    if max_lines is not None and max_lines < 0:
        raise ValueError(f"max_lines must be >= 0, got {max_lines}")
    if max_chars is not None and max_chars < 0:
        raise ValueError(f"max_chars must be >= 0, got {max_chars}")
    kept = text
    reasons: list[str] = []
    if max_lines is not None:
        lines = kept.splitlines(keepends=True)
        if len(lines) > max_lines:
            kept = "".join(lines[:max_lines])
            reasons.append(f"showing {max_lines:,} of {len(lines):,} lines")
    if max_chars is not None and len(kept) > max_chars:
        reasons.append(f"showing {max_chars:,} of {len(kept):,} characters")
        kept = kept[:max_chars]
    if not reasons:
        return Truncated(text=text)
    more = f"; {how_to_get_more}" if how_to_get_more else ""
    cut = f"[{label} truncated: {', '.join(reasons)}{more}]"
    body = kept if kept.endswith("\n") or not kept else kept + "\n"
    return Truncated(text=body + cut, cut=cut)
