"""grep(pattern, path?, glob?): lines matching a Python regex, in files under a workspace path.

Rung 1 keeps the first `grep_max_matches` matches (files in sorted order) and
loses the rest; the cut line says how many there were (counted up to
`grep_count_limit`) and how to narrow the search. Long matching lines are
shortened to `grep_max_line_chars`. Binary files (a NUL in their first 8 KiB),
the directories in SKIPPED_DIRS (.git, .venv, node_modules...) and symlinks
that lead out of the workspace are skipped.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tailrent_tui.agent.tools.base import (
    ToolContext,
    ToolError,
    ToolOutcome,
    ToolSpec,
    fmt_n,
    outcome,
)
from tailrent_tui.agent.workspace import (
    WorkspaceEscape,
    data_dir_refusal,
    display_path,
    resolve_in_workspace,
    workspace_root,
)

#: Directories a search walks past (VCS data, environments, caches); a path=
#: that points inside one still searches it.
SKIPPED_DIRS = frozenset(
    {".git", ".hg", ".svn", ".venv", "venv", "node_modules", "__pycache__", ".mypy_cache", ".pytest_cache", ".tox"}
)
_SNIFF = 8192

SPEC = ToolSpec(
    name="grep",
    description=(
        "Search files under a workspace path (default: the whole workspace) for lines "
        "matching a Python regular expression. Output lines are 'path:line: text'. "
        "glob= limits the files searched (e.g. '*.py', 'src/**/*.ts'). .git, .venv, node_modules "
        "and caches are skipped unless path= points inside them. Many matches are cut; "
        "the last line then says how many there were."
    ),
    parameters={
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "Python regular expression"},
            "path": {"type": "string", "description": "file or directory to search, relative to the workspace"},
            "glob": {"type": "string", "description": "only files whose name (or relative path) matches this glob"},
        },
        "required": ["pattern"],
    },
)


def _glob_matches(glob: str, rel: str) -> bool:
    # A glob without '/' is about the file name, as in `grep --include`; one
    # with '/' is about the path from the workspace root.
    if "/" not in glob:
        return fnmatch.fnmatchcase(rel.rsplit("/", 1)[-1], glob)
    return fnmatch.fnmatchcase(rel, glob) or fnmatch.fnmatchcase(rel, glob.replace("**/", ""))


def _files_under(real: Path, root: Path, private: Path | None) -> Iterator[Path]:
    """The files to search; `private` (the data dir, real path) is walked past, even through symlinks."""
    if real.is_file():
        yield real
        return
    for dirpath, dirnames, filenames in os.walk(real, followlinks=False):
        dirnames[:] = sorted(
            d for d in dirnames if d not in SKIPPED_DIRS and Path(dirpath, d) != private
        )
        for name in sorted(filenames):
            candidate = Path(dirpath) / name
            try:
                target = resolve_in_workspace(root, candidate)
            except WorkspaceEscape:
                continue
            if private is not None and target.is_relative_to(private):
                continue
            if target.is_file():
                yield candidate


def _is_binary(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            return b"\x00" in fh.read(_SNIFF)
    except OSError:
        return True


def run(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    pattern = args["pattern"]
    glob = args.get("glob") or None
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        raise ToolError(f"invalid regular expression {pattern!r}: {exc}") from exc
    asked = args.get("path") or "."
    real = resolve_in_workspace(ctx.root, asked)
    private = Path(os.path.realpath(ctx.data_dir)) if ctx.data_dir is not None else None
    if private is not None and real.is_relative_to(private):
        raise WorkspaceEscape(data_dir_refusal(asked))
    if not real.exists():
        raise ToolError(f"no such file or directory: {display_path(ctx.root, real)}")

    caps = ctx.caps
    root = workspace_root(ctx.root)
    shown: list[str] = []
    total = 0
    files_searched = 0
    skipped_binary = 0
    stopped_counting = False
    for path in _files_under(real, root, private):
        rel = display_path(root, path)
        if glob and not _glob_matches(glob, rel):
            continue
        if _is_binary(path):
            skipped_binary += 1
            continue
        files_searched += 1
        try:
            fh = path.open("r", encoding="utf-8", errors="replace", newline=None)
        except OSError:
            continue
        with fh:
            for lineno, line in enumerate(fh, start=1):
                if regex.search(line) is None:
                    continue
                total += 1
                if len(shown) < caps.grep_max_matches:
                    text = line.rstrip("\n")
                    if len(text) > caps.grep_max_line_chars:
                        text = text[: caps.grep_max_line_chars] + " …[line shortened]"
                    shown.append(f"{rel}:{lineno}: {text}")
                if total >= caps.grep_count_limit:
                    stopped_counting = True
                    break
        if stopped_counting:
            break

    meta = {
        "matches": total,
        "counted_all": not stopped_counting,
        "files_searched": files_searched,
        "binary_files_skipped": skipped_binary,
    }
    if total == 0:
        where = display_path(root, real)
        scope = f" in files matching {glob!r}" if glob else ""
        return outcome(
            f"no matches for {pattern!r} under {where}{scope} "
            f"({fmt_n(files_searched)} files searched)",
            meta=meta,
        )
    cut = None
    if total > len(shown):
        of = f"at least {fmt_n(total)}" if stopped_counting else fmt_n(total)
        cut = (
            f"[grep: showing {fmt_n(len(shown))} of {of} matches; "
            f"narrow the pattern or pass path= or glob= to see more]"
        )
    return outcome("\n".join(shown), cut=cut, meta=meta)
