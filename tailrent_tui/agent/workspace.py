"""Path safety: every path a tool touches lies inside the workspace root, and outside the data dir.

A path is refused (WorkspaceEscape, which the tool registry turns into a tool
error for the model) when it starts with `~`, when its `..` parts climb out of
the root, when it is absolute and names a place outside the root, when a
symlink anywhere along it leads outside the root, or when it goes through
tailrent's data dir (other sessions' transcripts) lying inside the workspace.

The file tools open with `open_beneath`: one component at a time, each relative
to the directory fd opened before it, with O_NOFOLLOW, so a symlink swapped in
between check and use cannot lead out. `resolve_in_workspace` is the older
check on the real path, for callers that only need a path (grep's starting
path, the decisions file); it is a check, not a guard against a swap after it.
"""

from __future__ import annotations

import contextlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Self


class WorkspaceEscape(ValueError):
    """A path that would lead outside the workspace root."""


def workspace_root(root: str | Path) -> Path:
    """The real (symlink-free, absolute) path of the workspace root."""
    return Path(os.path.realpath(os.path.abspath(os.fspath(root))))


def resolve_in_workspace(root: str | Path, path: str | Path) -> Path:
    """Return the real absolute path of `path` inside `root`, or raise WorkspaceEscape.

    Relative paths are taken from the root. Absolute paths are fine when they
    lie inside the root (as given, or as resolved through its symlinks).
    """
    text = os.fspath(path)
    real_root = workspace_root(root)
    _refuse_static(text, real_root)
    if os.path.isabs(text):
        lexical = Path(os.path.normpath(text))
        given_root = Path(os.path.normpath(os.path.abspath(os.fspath(root))))
        # An absolute path may name the root through its symlinked spelling
        # (/tmp vs /private/tmp); either spelling counts as inside.
        if not (lexical.is_relative_to(given_root) or lexical.is_relative_to(real_root)):
            raise WorkspaceEscape(
                f"refused path {text!r}: it is an absolute path outside the workspace "
                f"{real_root}; use a path relative to the workspace"
            )
    else:
        lexical = Path(os.path.normpath(real_root / text))
        if not lexical.is_relative_to(real_root):
            raise WorkspaceEscape(f"refused path {text!r}: its '..' parts lead outside the workspace {real_root}")
    real = Path(os.path.realpath(lexical))
    if not real.is_relative_to(real_root):
        raise WorkspaceEscape(f"refused path {text!r}: a symlink along it resolves to {real}, outside the workspace {real_root}")
    return real


def display_path(root: str | Path, real: Path) -> str:
    """The path as the model should see it: relative to the root, '/'-separated."""
    rel = os.path.relpath(real, workspace_root(root))
    return Path(rel).as_posix()


# ------------------------------------------------------------------ opening beneath the root
#
# resolve_in_workspace checks a path, and the caller then opens it: a symlink
# swapped in between (check, then use) leads out. The tools open instead one
# component at a time, each relative to the directory fd opened before it and
# with O_NOFOLLOW, so what is opened is what was checked. A symlink met on the
# way is read (readlink) and its target walked the same way: a symlink that
# stays inside the workspace works, one that leads out is refused, whenever it
# was planted. This is openat2(RESOLVE_BENEATH) in user space (Python has no
# binding), and also takes absolute symlinks that point back inside the root.

_MAX_SYMLINKS = 40
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)

_KINDS = {
    stat.S_IFREG: "a file",
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFLNK: "a symlink",
    stat.S_IFDIR: "a directory",
}


def file_kind(mode: int) -> str:
    """What a stat mode names, for messages ('a FIFO (named pipe)', 'a directory'...)."""
    return _KINDS.get(stat.S_IFMT(mode), "not a regular file")


@dataclass
class Beneath:
    """A path opened beneath the root: the fd of its directory and its last name.

    `name` is None when the path is the root itself. `st` is the lstat of the
    last name when it exists (it is not a symlink: those were followed). The
    caller opens `name` relative to `dir_fd` with O_NOFOLLOW; `close()` (or
    `with`) releases the fd.
    """

    dir_fd: int
    name: str | None
    shown: str
    st: os.stat_result | None

    def close(self) -> None:
        os.close(self.dir_fd)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _same_file(a: os.stat_result, key: tuple[int, int] | None) -> bool:
    return key is not None and (a.st_dev, a.st_ino) == key


def data_dir_key(data_dir: str | Path | None) -> tuple[int, int] | None:
    """The identity (device, inode) of the data dir, or None when there is none yet."""
    if data_dir is None:
        return None
    try:
        st = os.stat(data_dir)
    except OSError:
        return None
    return (st.st_dev, st.st_ino) if stat.S_ISDIR(st.st_mode) else None


def data_dir_refusal(text: str) -> str:
    return (
        f"refused path {text!r}: it is inside tailrent's data dir (the session transcripts), "
        f"which the tools do not read or write; work on files outside it"
    )


def _refuse_static(text: str, real_root: Path) -> None:
    """The refusals that need no disk: a NUL byte, a home-directory path."""
    if "\x00" in text:
        raise WorkspaceEscape(f"refused path {text!r}: it contains a NUL byte")
    if text.startswith("~"):
        raise WorkspaceEscape(
            f"refused path {text!r}: '~' (home directory) paths are outside the workspace "
            f"{real_root}; use a path relative to the workspace"
        )


def _lexical_parts(root: str | Path, real_root: Path, text: str) -> list[str]:
    """The path's components from the root, after the static checks (never touches the disk)."""
    _refuse_static(text, real_root)
    if os.path.isabs(text):
        lexical = Path(os.path.normpath(text))
        given_root = Path(os.path.normpath(os.path.abspath(os.fspath(root))))
        for spelling in (real_root, given_root):
            if lexical.is_relative_to(spelling):
                return list(lexical.relative_to(spelling).parts)
        raise WorkspaceEscape(
            f"refused path {text!r}: it is an absolute path outside the workspace "
            f"{real_root}; use a path relative to the workspace"
        )
    if not Path(os.path.normpath(real_root / text)).is_relative_to(real_root):
        raise WorkspaceEscape(f"refused path {text!r}: its '..' parts lead outside the workspace {real_root}")
    return list(Path(text).parts)


def open_beneath(
    root: str | Path,
    path: str | Path,
    *,
    data_dir: str | Path | None = None,
    leaf: bool = True,
    make_dirs: bool = False,
) -> Beneath:
    """Walk `path` from the root without ever leaving it; return its directory fd and last name.

    With `leaf=False` every component (the last one too) must be a directory,
    and the result's `dir_fd` is that directory (name None). With `make_dirs`,
    missing directories on the way are created (write_file). Raises
    WorkspaceEscape for any way out (`..`, absolute paths, symlinks, the data
    dir), FileNotFoundError / NotADirectoryError naming the shown path.
    """
    text = os.fspath(path)
    real_root = workspace_root(root)
    pending = _lexical_parts(root, real_root, text)
    pending.reverse()  # a stack: pop() takes the next component
    private = data_dir_key(data_dir)
    root_fd = os.open(real_root, _DIR_FLAGS)
    stack: list[tuple[int, str]] = [(root_fd, "")]
    hops = 0

    def shown(extra: str | None = None) -> str:
        names = [n for _, n in stack[1:]] + ([extra] if extra else [])
        return "/".join(names) or "."

    def follow(name: str) -> None:
        nonlocal hops
        hops += 1
        if hops > _MAX_SYMLINKS:
            raise WorkspaceEscape(f"refused path {text!r}: too many symlinks along it")
        target = os.readlink(name, dir_fd=stack[-1][0])
        if os.path.isabs(target):
            try:
                parts = _lexical_parts(root, real_root, target)
            except WorkspaceEscape:
                raise WorkspaceEscape(
                    f"refused path {text!r}: a symlink along it ({shown(name)}) points to "
                    f"{target}, outside the workspace {real_root}"
                ) from None
            while len(stack) > 1:
                os.close(stack.pop()[0])
        else:
            parts = list(Path(target).parts)
        via.append(shown(name))
        pending.extend(reversed(parts))

    via: list[str] = []
    try:
        while pending:
            name = pending.pop()
            if name in ("", "."):
                continue
            if name == "..":
                if len(stack) == 1:
                    reason = (
                        f"a symlink along it ({via[-1]}) leads outside the workspace {real_root}"
                        if via
                        else f"its '..' parts lead outside the workspace {real_root}"
                    )
                    raise WorkspaceEscape(f"refused path {text!r}: {reason}")
                os.close(stack.pop()[0])
                continue
            if leaf and not pending:
                try:
                    st = os.stat(name, dir_fd=stack[-1][0], follow_symlinks=False)
                except FileNotFoundError:
                    st = None
                if st is not None and stat.S_ISLNK(st.st_mode):
                    follow(name)
                    continue
                if st is not None and _same_file(st, private):
                    raise WorkspaceEscape(data_dir_refusal(text))
                return Beneath(os.dup(stack[-1][0]), name, shown(name), st)
            try:
                fd = os.open(name, _DIR_FLAGS, dir_fd=stack[-1][0])
            except FileNotFoundError:
                if not make_dirs:
                    raise FileNotFoundError(f"no such directory: {shown(name)}") from None
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o777, dir_fd=stack[-1][0])
                pending.append(name)
                continue
            except OSError as exc:
                st = os.stat(name, dir_fd=stack[-1][0], follow_symlinks=False)
                if stat.S_ISLNK(st.st_mode):
                    follow(name)
                    continue
                raise NotADirectoryError(f"{shown(name)} is {file_kind(st.st_mode)}, not a directory") from exc
            stack.append((fd, name))
            if _same_file(os.fstat(fd), private):
                raise WorkspaceEscape(data_dir_refusal(text))
        return Beneath(os.dup(stack[-1][0]), None, shown(), os.fstat(stack[-1][0]))
    finally:
        for fd, _ in stack:
            os.close(fd)


# ------------------------------------------------------------------ opening a regular file
#
# Here beside open_beneath: read_file, grep (each file it hands to ripgrep as
# an open fd) and the project instructions open what they read the same way.

READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)


class FileRefused(ValueError):
    """A file a tool will not open (not a regular file, hard-linked, gone or changed); the message says why."""


def refusal(st: os.stat_result, shown: str, tool: str) -> str | None:
    """Why `tool` will not read the file `st` describes, or None for a plain regular file."""
    if stat.S_ISDIR(st.st_mode):
        return f"{shown} is a directory; use list_dir to see what it holds"
    if not stat.S_ISREG(st.st_mode):
        return f"{shown} is {file_kind(st.st_mode)}; {tool} works only on regular files"
    if st.st_nlink > 1:
        return (
            f"{shown} has {st.st_nlink} hard links; another of its names may be outside the workspace, "
            f"so {tool} refuses files with more than one link (ask the user to copy it if it is needed)"
        )
    return None


def open_regular(spot: Beneath, tool: str) -> tuple[int, os.stat_result]:
    """Open the existing file `spot` names for reading: a blocking fd and its fstat, or FileRefused.

    Opened without following a symlink and without blocking (a FIFO or a device
    must never hang a tool), then checked on the open fd: what is read is what
    was checked. A file with more than one hard link is refused: its other name
    may be outside the workspace, and nothing here can tell.
    """
    shown = spot.shown
    if spot.st is None or spot.name is None:
        raise FileRefused(f"no such file: {shown}")
    if why := refusal(spot.st, shown, tool):
        raise FileRefused(why)
    try:
        fd = os.open(spot.name, READ_FLAGS, dir_fd=spot.dir_fd)
    except OSError as exc:
        raise FileRefused(f"cannot open {shown}: {exc.strerror}; it may have just changed, try again") from None
    try:
        st = os.fstat(fd)
        if why := refusal(st, shown, tool):
            raise FileRefused(why)
        os.set_blocking(fd, True)
        return fd, st
    except BaseException:
        os.close(fd)
        raise
