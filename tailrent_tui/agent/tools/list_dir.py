"""list_dir(path?): the entries of a workspace directory, sorted, directories marked with '/'.

Rung 1 keeps the first `list_dir_max_entries` names in sorted order and loses
the rest; the cut line gives the total and how to find the others. Only the
kept names are held in memory, however large the directory.
"""

from __future__ import annotations

import heapq
import os
from collections.abc import Iterable
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
    outcome,
)
from tailrent_tui.agent.workspace import data_dir_key


class ListDirArgs(ToolArgs):
    path: String | None = Field(default=None, description="directory path, relative to the workspace")


SPEC = ToolSpec.of(
    "list_dir",
    "List a directory in the workspace (default: the workspace root), sorted; "
    "directories end with '/'. Large directories are cut; the last line says so.",
    ListDirArgs,
)


def _entry_name(entry: os.DirEntry[str]) -> str:
    try:
        is_dir = entry.is_dir()
    except OSError:
        is_dir = False
    return entry.name + "/" if is_dir else entry.name


def run(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    path = args.get("path") or "."
    try:
        spot = locate(ctx, path, leaf=False)
    except ToolError as exc:
        if str(exc).endswith("is a file, not a directory"):
            raise ToolError(f"{exc}; use read_file to read it") from None
        raise
    shown = spot.shown
    hidden_key = data_dir_key(ctx.data_dir)
    hidden = 0
    cap = ctx.caps.list_dir_max_entries
    total = 0

    def counted(entries: Iterable[os.DirEntry[str]]):
        nonlocal total, hidden
        for entry in entries:
            if hidden_key is not None and entry.inode() == hidden_key[1]:
                st = entry.stat(follow_symlinks=False)
                if (st.st_dev, st.st_ino) == hidden_key:
                    hidden += 1
                    continue
            total += 1
            yield _entry_name(entry)

    with spot, os.scandir(spot.dir_fd) as entries:
        names = heapq.nsmallest(cap, counted(entries))

    notes = [f"[list_dir: {entries_word(hidden)} hidden: tailrent's data dir (session transcripts)]"] if hidden else []
    if total == 0:
        return outcome(f"({shown} is empty)", notes=notes, meta={"path": shown, "entries": 0})
    cut = None
    if total > len(names):
        where = "." if shown == "." else shown
        cut = (
            f"[list_dir: showing the first {fmt_n(len(names))} of {fmt_n(total)} entries (sorted); "
            f"list a subdirectory, or run_shell `find {where} -maxdepth 1 -name 'PATTERN'` "
            f"to find the others]"
        )
    return outcome("\n".join(names), cut=cut, notes=notes, meta={"path": shown, "entries": total})


def entries_word(n: int) -> str:
    return "1 entry" if n == 1 else f"{fmt_n(n)} entries"
