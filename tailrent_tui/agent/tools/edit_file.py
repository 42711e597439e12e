"""edit_file(path, old, new): replace the one occurrence of `old` in a text file with `new`.

`old` must occur exactly once: zero or several occurrences are tool errors that
say which, so the model can quote more context. The unified diff of the edit is
in meta["diff"] and in the result; `preview` computes it without writing, for
the approval dialog. Rung 1 does not apply: the result is the diff of one edit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tailrent_tui.agent.tools.base import (
    ToolContext,
    ToolError,
    ToolOutcome,
    ToolSpec,
    outcome,
    unified_diff,
    write_text_atomically,
)
from tailrent_tui.agent.workspace import display_path, resolve_in_workspace

_MAX_LINES_LISTED = 10

SPEC = ToolSpec(
    name="edit_file",
    description=(
        "Edit a text file in the workspace: replace the exact text `old` (which must occur "
        "exactly once, whitespace included) with `new`. Returns the diff."
    ),
    parameters={
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "file path, relative to the workspace"},
            "old": {"type": "string", "description": "the exact text to replace; must occur once"},
            "new": {"type": "string", "description": "the text to put in its place"},
        },
        "required": ["path", "old", "new"],
    },
    needs_approval=True,
)


def _line_numbers(text: str, needle: str) -> list[int]:
    lines = []
    at = text.find(needle)
    while at != -1:
        lines.append(text.count("\n", 0, at) + 1)
        at = text.find(needle, at + len(needle))
    return lines


def _plan(args: dict[str, Any], ctx: ToolContext) -> tuple[Path, str, ToolOutcome]:
    real = resolve_in_workspace(ctx.root, args["path"])
    shown = display_path(ctx.root, real)
    old, new = args["old"], args["new"]
    if not real.exists():
        raise ToolError(f"no such file: {shown}; use write_file to create it")
    if real.is_dir():
        raise ToolError(f"{shown} is a directory")
    if old == "":
        raise ToolError("old is empty; give the exact text to replace")
    if old == new:
        raise ToolError("old and new are the same; nothing to change")
    try:
        with real.open("r", encoding="utf-8", newline="") as fh:
            before = fh.read()
    except UnicodeDecodeError as exc:
        raise ToolError(f"{shown} is not UTF-8 text ({exc.reason}); edit_file only edits text") from exc
    count = before.count(old)
    if count == 0:
        raise ToolError(
            f"old text not found in {shown}; read_file it and copy the exact text "
            f"(whitespace and indentation must match)"
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
    diff = unified_diff(before, after, shown)
    line = _line_numbers(before, old)[0]
    meta = {"path": shown, "diff": diff, "line": line}
    return real, after, outcome(f"edited {shown} at line {line}\n{diff}", meta=meta)


def preview(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    """What run would do and return, without writing anything."""
    return _plan(args, ctx)[2]


def run(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    real, after, result = _plan(args, ctx)
    write_text_atomically(real, after)
    return result
