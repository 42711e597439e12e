"""grep(pattern, path?, glob?): lines matching a Python regex, in files under a workspace path.

Rung 1 keeps the first `grep_max_matches` matches (files in sorted order) and
loses the rest; the cut line says how many there were (counted up to
`grep_count_limit`) and how to narrow the search. Long matching lines are
shortened to `grep_max_line_chars`. Binary files (a NUL in their first 8 KiB),
the directories in SKIPPED_DIRS (.git, .venv, node_modules...) and symlinks
that lead out of the workspace are skipped. Each file is opened as read_file
opens it (beneath the root, no symlink followed out, checked on its fd): a
hard-linked file, a FIFO or a device is not searched, and the output says so.

The search runs in a child process (grep_worker.py), killed after
`grep_timeout` seconds or when the call is cancelled: a pattern that
backtracks catastrophically holds the GIL inside one C call, which no thread
can stop. The cut line then says where it stopped and what was found before.
(A non-backtracking engine such as google-re2 would change the dialect the
model is promised: no backreferences, no lookaround.)
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
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

class GrepArgs(ToolArgs):
    pattern: String = Field(description="Python regular expression")
    path: String | None = Field(default=None, description="file or directory to search, relative to the workspace")
    glob: String | None = Field(default=None, description="only files whose name (or relative path) matches this glob")


SPEC = ToolSpec.of(
    "grep",
    "Search files under a workspace path (default: the whole workspace) for lines "
    "matching a Python regular expression. Output lines are 'path:line: text'. "
    "glob= limits the files searched (e.g. '*.py', 'src/**/*.ts'). .git, .venv, node_modules "
    "and caches are skipped unless path= points inside them. Many matches are cut; "
    "the last line then says how many there were.",
    GrepArgs,
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


_WORKER = Path(__file__).with_name("grep_worker.py")
_POLL = 0.1


class _Search:
    """What the worker reported before it finished, was stopped, or failed."""

    def __init__(self) -> None:
        self.shown: list[str] = []
        self.counts: dict[str, Any] = {
            "matches": 0, "files_searched": 0, "binary_files_skipped": 0, "files_refused": 0, "counted_all": True
        }
        self.refused: list[str] = []
        self.current: str | None = None
        self.done = False

    def read(self, out: bytes) -> None:
        for raw in out.splitlines():
            try:
                line = json.loads(raw)
            except ValueError:
                continue  # the last line, cut by the kill
            if "match" in line:
                self.shown.append(line["match"])
            elif "refused" in line:
                self.refused.append(line["why"])
            elif "file" in line:
                self.current = line["file"]
            elif "counts" in line:
                self.counts = line["counts"]
                self.current = None
                self.done = bool(line.get("done"))


def _search_in_worker(job: dict[str, Any], ctx: ToolContext) -> tuple[_Search, str | None]:
    """Run the search in a child process; kill it at grep_timeout or on cancel. (search, why it stopped)."""
    proc = subprocess.Popen(
        [sys.executable, "-I", "-S", str(_WORKER)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    data: bytes | None = json.dumps(job).encode("utf-8")
    deadline = time.monotonic() + ctx.caps.grep_timeout
    stopped: str | None = None
    try:
        while True:
            try:
                out, err = proc.communicate(data, timeout=min(_POLL, max(0.0, deadline - time.monotonic())))
                break
            except subprocess.TimeoutExpired:
                data = None
            if ctx.cancel is not None and ctx.cancel.is_set():
                stopped = "cancelled"
            elif time.monotonic() >= deadline:
                stopped = "timed out"
            if stopped:
                proc.kill()
                out, err = proc.communicate()
                break
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    search = _Search()
    search.read(out)
    if stopped is None and not search.done:
        detail = err.decode("utf-8", "replace").strip().splitlines()
        raise ToolError(f"the search failed ({detail[-1] if detail else f'exit code {proc.returncode}'})")
    return search, stopped


def _refused_note(refused: list[str]) -> list[str]:
    """One line for the files not searched (hard-linked, not regular, changed during the search)."""
    if not refused:
        return []
    if len(refused) == 1:
        return [f"[grep: 1 file not searched: {refused[0]}]"]
    return [f"[grep: {fmt_n(len(refused))} files not searched; the first: {refused[0]}]"]


def run(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    pattern = args["pattern"]
    glob = args.get("glob") or None
    try:
        re.compile(pattern)
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
    single = real.is_file()
    files = []
    for path in _files_under(real, root, private):
        if ctx.cancel is not None and ctx.cancel.is_set():
            break
        rel = display_path(root, path)
        if glob and not _glob_matches(glob, rel):
            continue
        files.append(rel)
    job = {
        "pattern": pattern,
        "root": str(root),
        "data_dir": str(ctx.data_dir) if ctx.data_dir is not None else None,
        "files": files,
        "max_matches": caps.grep_max_matches,
        "count_limit": caps.grep_count_limit,
        "max_line_chars": caps.grep_max_line_chars,
    }
    search, stopped = _search_in_worker(job, ctx)
    if search.refused and single and not search.shown:
        raise ToolError(search.refused[0])  # the one file asked for: say why, as read_file would
    notes = _refused_note(search.refused)
    shown = search.shown
    total = search.counts["matches"]
    stopped_counting = not search.counts["counted_all"]
    files_searched = search.counts["files_searched"]
    skipped_binary = search.counts["binary_files_skipped"]
    if stopped is not None:
        where = f" while searching {search.current}" if search.current else ""
        if stopped == "timed out":
            line = (
                f"[grep: stopped after {caps.grep_timeout:g} s (the grep_timeout cap){where}; "
                f"a pattern with nested repeats such as (a+)+ can take exponential time: "
                f"simplify it, or narrow path= or glob=; {fmt_n(len(shown))} matches found before the stop]"
            )
        else:
            line = f"[grep: cancelled{where}; {fmt_n(len(shown))} matches found before the stop]"
        meta = {
            "matches": total,
            "counted_all": False,
            "files_searched": files_searched,
            "binary_files_skipped": skipped_binary,
            "files_refused": len(search.refused),
            "timed_out": stopped == "timed out",
            "cancelled": stopped == "cancelled",
        }
        return outcome("\n".join(shown), cut=line, meta=meta, is_error=not shown, notes=notes)

    meta = {
        "matches": total,
        "counted_all": not stopped_counting,
        "files_searched": files_searched,
        "binary_files_skipped": skipped_binary,
        "files_refused": len(search.refused),
        "timed_out": False,
        "cancelled": False,
    }
    if total == 0:
        where = display_path(root, real)
        scope = f" in files matching {glob!r}" if glob else ""
        return outcome(
            f"no matches for {pattern!r} under {where}{scope} "
            f"({fmt_n(files_searched)} files searched)",
            meta=meta,
            notes=notes,
        )
    cut = None
    if total > len(shown):
        of = f"at least {fmt_n(total)}" if stopped_counting else fmt_n(total)
        cut = (
            f"[grep: showing {fmt_n(len(shown))} of {of} matches; "
            f"narrow the pattern or pass path= or glob= to see more]"
        )
    return outcome("\n".join(shown), cut=cut, meta=meta, notes=notes)
