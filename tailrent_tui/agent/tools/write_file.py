"""write_file(path, content): create or overwrite a text file in the workspace.

Missing parent directories are created (inside the workspace only: the path
is resolved before anything is made). The write is atomic. When the file
existed, meta["diff"] holds the unified diff of the change; `preview` computes
the same outcome without writing, for the approval dialog. Rung 1 does not
apply: the result is one short line (plus the diff).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tailrent_tui.agent.tools.base import (
    ToolContext,
    ToolError,
    ToolOutcome,
    ToolSpec,
    fmt_n,
    outcome,
    unified_diff,
    write_text_atomically,
)
from tailrent_tui.agent.workspace import display_path, resolve_in_workspace

SPEC = ToolSpec(
    name="write_file",
    description=(
        "Create or overwrite a text file in the workspace with the given content "
        "(missing parent directories are created). To change part of a file, use edit_file."
    ),
    parameters={
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "file path, relative to the workspace"},
            "content": {"type": "string", "description": "the whole new content of the file"},
        },
        "required": ["path", "content"],
    },
    needs_approval=True,
)


def _plan(args: dict[str, Any], ctx: ToolContext) -> tuple[Path, str, ToolOutcome]:
    real = resolve_in_workspace(ctx.root, args["path"])
    shown = display_path(ctx.root, real)
    content = args["content"]
    if real.is_dir():
        raise ToolError(f"{shown} is a directory; give a file path")
    for parent in real.parents:
        if parent.exists():
            if not parent.is_dir():
                raise ToolError(f"cannot create {shown}: {display_path(ctx.root, parent)} is a file")
            break
    existed = real.exists()
    before = ""
    if existed:
        try:
            before = real.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            before = ""
    diff = unified_diff(before, content, shown)
    size = len(content.encode("utf-8"))
    lines = content.count("\n") + (0 if content.endswith("\n") or not content else 1)
    verb = "overwrote" if existed else "created"
    summary = f"{verb} {shown}: {fmt_n(size)} bytes, {fmt_n(lines)} lines"
    body = summary + ("\n" + diff if existed and diff else "")
    if existed and not diff:
        body = f"{shown} already has exactly this content; nothing changed"
    meta = {"path": shown, "bytes": size, "lines": lines, "created": not existed, "diff": diff}
    return real, content, outcome(body, meta=meta)


def preview(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    """What run would do and return, without writing anything."""
    return _plan(args, ctx)[2]


def run(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    real, content, result = _plan(args, ctx)
    real.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomically(real, content)
    return result
