"""list_dir(path?): the entries of a workspace directory, sorted, directories marked with '/'.

Rung 1 keeps the first `list_dir_max_entries` names in sorted order and loses
the rest; the cut line gives the total and how to find the others. Only the
kept names are held in memory, however large the directory.
"""

from __future__ import annotations

import heapq
import os
from typing import Any

from tailrent_tui.agent.tools.base import (
    ToolContext,
    ToolError,
    ToolOutcome,
    ToolSpec,
    fmt_n,
    outcome,
)
from tailrent_tui.agent.workspace import display_path, resolve_in_workspace

SPEC = ToolSpec(
    name="list_dir",
    description=(
        "List a directory in the workspace (default: the workspace root), sorted; "
        "directories end with '/'. Large directories are cut; the last line says so."
    ),
    parameters={
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "directory path, relative to the workspace"},
        },
        "required": [],
    },
)


def _entry_name(entry: os.DirEntry[str]) -> str:
    try:
        is_dir = entry.is_dir()
    except OSError:
        is_dir = False
    return entry.name + "/" if is_dir else entry.name


def run(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    real = resolve_in_workspace(ctx.root, args.get("path") or ".")
    shown = display_path(ctx.root, real)
    if not real.exists():
        raise ToolError(f"no such directory: {shown}")
    if not real.is_dir():
        raise ToolError(f"{shown} is a file, not a directory; use read_file to read it")

    cap = ctx.caps.list_dir_max_entries
    total = 0

    def counted(entries: os.ScandirIterator[os.DirEntry[str]]):
        nonlocal total
        for entry in entries:
            total += 1
            yield _entry_name(entry)

    with os.scandir(real) as entries:
        names = heapq.nsmallest(cap, counted(entries))

    if total == 0:
        return outcome(f"({shown} is empty)", meta={"path": shown, "entries": 0})
    cut = None
    if total > len(names):
        where = "." if shown == "." else shown
        cut = (
            f"[list_dir: showing the first {fmt_n(len(names))} of {fmt_n(total)} entries (sorted); "
            f"list a subdirectory, or run_shell `find {where} -maxdepth 1 -name 'PATTERN'` "
            f"to find the others]"
        )
    return outcome("\n".join(names), cut=cut, meta={"path": shown, "entries": total})
