"""Path safety: every path a tool touches is resolved inside the workspace root.

A path is refused (WorkspaceEscape, which the tool registry turns into a tool
error for the model) when it starts with `~`, when its `..` parts climb out of
the root, when it is absolute and names a place outside the root, or when a
symlink anywhere along it resolves outside the root. The check is made on the
real path, so a file that does not exist yet (write_file) is judged by where
its existing parent really is, and a dangling symlink by where it points.
"""

from __future__ import annotations

import os
from pathlib import Path


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
    if "\x00" in text:
        raise WorkspaceEscape(f"refused path {text!r}: it contains a NUL byte")
    if text.startswith("~"):
        raise WorkspaceEscape(
            f"refused path {text!r}: '~' (home directory) paths are outside the workspace "
            f"{real_root}; use a path relative to the workspace"
        )
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
            raise WorkspaceEscape(
                f"refused path {text!r}: its '..' parts lead outside the workspace {real_root}"
            )
    real = Path(os.path.realpath(lexical))
    if not real.is_relative_to(real_root):
        raise WorkspaceEscape(
            f"refused path {text!r}: a symlink along it resolves to {real}, "
            f"outside the workspace {real_root}"
        )
    return real


def display_path(root: str | Path, real: Path) -> str:
    """The path as the model should see it: relative to the root, '/'-separated."""
    rel = os.path.relpath(real, workspace_root(root))
    return Path(rel).as_posix()
