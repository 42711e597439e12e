"""edit_file(path, old, new): replace the one occurrence of `old` in a text file with `new`.

`old` must occur exactly once: zero or several occurrences are tool errors that
say which, so the model can quote more context. The unified diff of the edit is
in meta["diff"] and in the result; `preview` computes it without writing, for
the approval dialog. Rung 1 does not apply: the result is the diff of one edit.
"""

from __future__ import annotations

import stat
from typing import Any

from pydantic import Field

from tailrent_tui.agent.tools.base import (
    String,
    ToolArgs,
    ToolContext,
    ToolError,
    ToolOutcome,
    ToolSpec,
    fmt_n,
    locate,
    open_regular_file,
    outcome,
    unified_diff,
    write_or_explain,
)
from tailrent_tui.agent.workspace import Beneath

_MAX_LINES_LISTED = 10


class EditFileArgs(ToolArgs):
    path: String = Field(description="file path, relative to the workspace")
    old: String = Field(description="the exact text to replace; must occur once")
    new: String = Field(description="the text to put in its place")


SPEC = ToolSpec.of(
    "edit_file",
    "Edit a text file in the workspace: replace the exact text `old` (which must occur "
    "exactly once, whitespace included) with `new`. Returns the diff.",
    EditFileArgs,
    needs_approval=True,
)


def _line_numbers(text: str, needle: str) -> list[int]:
    lines = []
    at = text.find(needle)
    while at != -1:
        lines.append(text.count("\n", 0, at) + 1)
        at = text.find(needle, at + len(needle))
    return lines


def _plan(spot: Beneath, args: dict[str, Any], ctx: ToolContext) -> tuple[bytes, int, ToolOutcome]:
    """What the edit does: the new bytes, the mode to keep, the outcome. Writes nothing."""
    shown = spot.shown
    old, new = args["old"], args["new"]
    if spot.name is None or (spot.st is not None and stat.S_ISDIR(spot.st.st_mode)):
        raise ToolError(f"{shown} is a directory")
    if spot.st is None:
        raise ToolError(f"no such file: {shown}; use write_file to create it")
    if old == "":
        raise ToolError("old is empty; give the exact text to replace")
    if old == new:
        raise ToolError("old and new are the same; nothing to change")
    fh, st = open_regular_file(spot, "edit_file")
    limit = ctx.caps.diff_max_file_bytes
    with fh:
        data = fh.read(limit + 1) if st.st_size <= limit else b""
    if st.st_size > limit or len(data) > limit:
        raise ToolError(
            f"{shown} has {fmt_n(max(st.st_size, len(data)))} bytes, more than edit_file edits "
            f"({fmt_n(limit)}); use write_file, or run_shell with sed"
        )
    try:
        before = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ToolError(f"{shown} is not UTF-8 text ({exc.reason}); edit_file only edits text") from None
    count = before.count(old)
    if count == 0:
        raise ToolError(
            f"old text not found in {shown}; read_file it and copy the exact text (whitespace and indentation must match)"
        )
    if count > 1:
        where = _line_numbers(before, old)
        listed = ", ".join(str(n) for n in where[:_MAX_LINES_LISTED])
        more = f" and {len(where) - _MAX_LINES_LISTED} more" if len(where) > _MAX_LINES_LISTED else ""
        raise ToolError(
            f"old text occurs {count} times in {shown} (at lines {listed}{more}); "
            f"include more surrounding lines in old so that it occurs exactly once"
        )
    after = before.replace(old, new, 1)
    diff, too_large = unified_diff(before, after, shown, max_lines=ctx.caps.diff_max_lines, max_bytes=ctx.caps.diff_max_bytes)
    line = before.count("\n", 0, before.find(old)) + 1
    meta = {"path": shown, "diff": diff or too_large or "", "diff_cut": too_large, "line": line}
    return (
        after.encode("utf-8"),
        stat.S_IMODE(st.st_mode),
        outcome(f"edited {shown} at line {line}\n{diff or too_large}", meta=meta),
    )


def preview(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    """What run would do and return, without writing anything."""
    with locate(ctx, args["path"]) as spot:
        return _plan(spot, args, ctx)[2]


def run(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    with locate(ctx, args["path"]) as spot:
        data, mode, result = _plan(spot, args, ctx)
        write_or_explain(spot, data, mode)
    return result
