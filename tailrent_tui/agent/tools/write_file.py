"""write_file(path, content): create or overwrite a text file in the workspace.

Missing parent directories are created (inside the workspace only: the path
is resolved before anything is made). The write is atomic. When the file
existed, meta["diff"] holds the unified diff of the change; `preview` computes
the same outcome without writing, for the approval dialog. Rung 1 does not
apply: the result is one short line (plus the diff).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
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
from tailrent_tui.agent.workspace import Beneath, open_beneath


class WriteFileArgs(ToolArgs):
    path: String = Field(description="file path, relative to the workspace")
    content: String = Field(description="the whole new content of the file")


SPEC = ToolSpec.of(
    "write_file",
    "Create or overwrite a text file in the workspace with the given content "
    "(missing parent directories are created). To change part of a file, use edit_file.",
    WriteFileArgs,
    needs_approval=True,
)


def _old_text(spot: Beneath, ctx: ToolContext) -> tuple[str | None, str | None, int]:
    """The file's current text (None when not diffed), why it is not diffed, and its mode."""
    fh, st = open_regular_file(spot, "write_file")
    with fh:
        limit = ctx.caps.diff_max_file_bytes
        if st.st_size > limit:
            return None, f"[diff not shown: the old file has {fmt_n(st.st_size)} bytes (diff limit {fmt_n(limit)})]", st.st_mode
        data = fh.read(limit + 1)
    if len(data) > limit:
        return None, f"[diff not shown: the old file grew past the {fmt_n(limit)}-byte diff limit]", st.st_mode
    try:
        return data.decode("utf-8"), None, st.st_mode
    except UnicodeDecodeError:
        return None, f"[diff not shown: the old file ({fmt_n(len(data))} bytes) is not UTF-8 text]", st.st_mode


def _plan(spot: Beneath | None, shown: str, content: str, ctx: ToolContext) -> tuple[bytes, int | None, ToolOutcome]:
    """What the write does: the bytes, the mode to keep, the outcome. Writes nothing."""
    existed = spot is not None and spot.st is not None
    if spot is not None and (spot.name is None or (spot.st is not None and stat.S_ISDIR(spot.st.st_mode))):
        raise ToolError(f"{shown} is a directory; give a file path")
    before, not_diffed, mode = _old_text(spot, ctx) if existed and spot is not None else ("", None, None)
    data = content.encode("utf-8")
    diff, too_large = (
        ("", not_diffed)
        if before is None
        else unified_diff(before, content, shown, max_lines=ctx.caps.diff_max_lines, max_bytes=ctx.caps.diff_max_bytes)
    )
    lines = content.count("\n") + (0 if content.endswith("\n") or not content else 1)
    verb = "overwrote" if existed else "created"
    summary = f"{verb} {shown}: {fmt_n(len(data))} bytes, {fmt_n(lines)} lines"
    shown_diff = diff or too_large or ""
    body = summary + ("\n" + shown_diff if existed and shown_diff else "")
    if existed and before == content:
        body = f"{shown} already has exactly this content; nothing changed"
    meta = {
        "path": shown,
        "bytes": len(data),
        "lines": lines,
        "created": not existed,
        "diff": shown_diff if existed else "",
        "diff_cut": too_large,
    }
    return data, (None if mode is None else stat.S_IMODE(mode)), outcome(body, meta=meta)


def preview(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    """What run would do and return, without writing anything (no directory is made)."""
    try:
        spot = open_beneath(ctx.root, args["path"], data_dir=ctx.data_dir)
    except FileNotFoundError:
        # a directory on the way is missing: run creates it, and the file is new
        shown = Path(os.path.normpath(args["path"])).as_posix()
        return _plan(None, shown, args["content"], ctx)[2]
    except OSError:
        spot = locate(ctx, args["path"])  # the same fault, as a ToolError
    with spot:
        return _plan(spot, spot.shown, args["content"], ctx)[2]


def run(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    with locate(ctx, args["path"], make_dirs=True) as spot:
        data, mode, result = _plan(spot, spot.shown, args["content"], ctx)
        write_or_explain(spot, data, mode)
    return result
