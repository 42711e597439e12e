"""read_file(path, start?, end?): a file's text, or a 1-based inclusive range of its lines.

Rung 1 keeps the first `read_file_max_lines` lines of the asked range (and no
more than `read_file_max_bytes` bytes); it loses the lines after them, and the
cut line names the `start=` that reads the next range. The file is streamed,
so a huge file costs only the range that is kept, and past what is kept its
lines are counted for at most `_SCAN_MAX` bytes (a 2 GB file said "at least").

A file with a NUL byte in its first `_SNIFF` bytes is binary and refused in one
line (the way git tells binary from text), and so is one whose start is mostly
not text (invalid UTF-8 or control bytes: a compressed or encrypted blob holds
no NUL for a while): read as text it is noise that costs the context thousands
of tokens (20 KB became 15,717 tokens of replacement characters).
"""

from __future__ import annotations

import os
from typing import Any

from pydantic import Field

from tailrent_tui.agent.tools.base import (
    Integer,
    String,
    ToolArgs,
    ToolContext,
    ToolError,
    ToolOutcome,
    ToolSpec,
    decode_output,
    fmt_n,
    locate,
    open_regular_file,
    outcome,
)

_PIECE = 1024 * 1024
#: how much of a file's start is looked at for a NUL byte (binary)
_SNIFF = 8192
#: a start with more than this share of bytes that are not text is binary
_NOT_TEXT_SHARE = 0.3
#: control characters text files hold (tab, newlines, form feed, escape for colours)
_TEXT_CONTROLS = frozenset("\t\n\r\f\v\x1b\x08")
#: past what is kept, lines are counted in at most this many bytes
_SCAN_MAX = 64 * 1024 * 1024


class ReadFileArgs(ToolArgs):
    path: String = Field(description="file path, relative to the workspace")
    start: Integer | None = Field(default=None, description="first line to read (1-based)", json_schema_extra={"minimum": 1})
    end: Integer | None = Field(default=None, description="last line to read (inclusive)", json_schema_extra={"minimum": 1})


SPEC = ToolSpec.of(
    "read_file",
    "Read a text file in the workspace. Optionally only lines start..end "
    "(1-based, inclusive). Long files are cut; the last line then says how to read on.",
    ReadFileArgs,
)


def binary_why(head: bytes) -> str | None:
    """Why a file whose first bytes are `head` is binary, or None when they read as text."""
    if b"\x00" in head:
        return f"a NUL byte in its first {fmt_n(_SNIFF)} bytes"
    if not head:
        return None
    # a character cut at the sniff's end is not held against the file
    text = head.decode("utf-8", errors="replace")
    if len(head) >= _SNIFF:
        for _ in range(3):
            text = text.removesuffix("\ufffd")
    if not text:
        return None
    noise = sum(1 for c in text if c == "\ufffd" or (c < " " and c not in _TEXT_CONTROLS) or c == "\x7f")
    if noise > _NOT_TEXT_SHARE * len(text):
        return f"{noise * 100 // len(text)}% of its first {fmt_n(len(head))} bytes are not text"
    return None


def run(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    start = args.get("start") or 1
    end = args.get("end")
    if start < 1:
        raise ToolError(f"start must be 1 or more (got {start})")
    if end is not None and end < start:
        raise ToolError(f"end ({end}) is before start ({start})")
    with locate(ctx, args["path"]) as spot:
        if spot.name is None:
            raise ToolError(f"{spot.shown} is a directory; use list_dir to see what it holds")
        fh, _ = open_regular_file(spot, "read_file")
    shown = spot.shown
    try:
        head = os.pread(fh.fileno(), _SNIFF, 0)
    except OSError:
        head = b""
    why = binary_why(head)
    if why:
        fh.close()
        raise ToolError(
            f"{shown} is a binary file ({why}); read_file reads text: use run_shell with file, xxd or strings to look into it"
        )
    max_lines = ctx.caps.read_file_max_lines
    max_bytes = ctx.caps.read_file_max_bytes
    kept = bytearray()
    lines_kept = 0
    total = 0
    byte_cut = False
    at_line_start = True
    scanned = 0
    counted_all = True
    with fh:
        # Read in bounded pieces rather than whole lines, so one giant line
        # (minified JS, a binary blob) cannot pull the whole file into memory.
        while piece := fh.readline(_PIECE):
            if at_line_start:
                total += 1
            starts_line = at_line_start
            at_line_start = piece.endswith(b"\n")
            if total < start or (end is not None and total > end) or byte_cut:
                scanned += len(piece)
                if scanned > _SCAN_MAX and (byte_cut or total >= start):
                    counted_all = False  # only the total is left to count: it is said as "at least"
                    break
                continue
            if starts_line:
                if lines_kept >= max_lines:
                    continue
                lines_kept += 1
            elif total != start + lines_kept - 1:
                continue
            room = max_bytes - len(kept)
            if len(piece) > room:
                kept += piece[:room]
                byte_cut = True
                continue
            kept += piece

    if total == 0:
        return outcome(f"({shown} is empty)", meta={"path": shown, "lines": 0})
    if start > total:
        raise ToolError(f"start {start} is past the end of {shown} ({fmt_n(total)} lines)")

    last_asked = total if end is None else min(end, total)
    last_kept = start + lines_kept - 1
    of_total = fmt_n(total) if counted_all else f"at least {fmt_n(total)}"
    cut = None
    if byte_cut:
        cut = (
            f"[read_file: showing lines {fmt_n(start)}-{fmt_n(last_kept)} of {of_total}, "
            f"line {fmt_n(last_kept)} cut at the {fmt_n(max_bytes)}-byte cap; "
            f"read the next range with start={last_kept + 1}, or grep for what you need]"
        )
    elif last_kept < last_asked:
        cut = (
            f"[read_file: showing lines {fmt_n(start)}-{fmt_n(last_kept)} of {of_total} "
            f"({fmt_n(max_lines)}-line cap); read the next range with start={last_kept + 1}]"
        )
    text, binary = decode_output(bytes(kept), truncated=byte_cut)
    return outcome(
        text,
        cut=cut,
        binary_bytes=len(kept) if binary else None,
        meta={"path": shown, "lines": total, "start": start, "end": last_kept},
    )
