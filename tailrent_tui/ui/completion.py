"""What the input offers as you type: slash commands and their arguments, and `@path` mentions.

Pure functions of the text before the cursor and a few sources the app hands
in (message ids, fold numbers, theme names); the popup only shows the result.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tailrent_tui.ui.actions import SLASH_BY_NAME, SLASH_COMMANDS

#: Rows the popup offers at most.
MAX_ITEMS = 30
#: Directories never offered after `@` (they hold nothing to attach).
SKIP_DIRS = {".git", ".hg", ".svn", "__pycache__", "node_modules", ".venv", ".mypy_cache", ".pytest_cache"}

# `@path` at the start or after whitespace
MENTION = re.compile(r"(?:^|(?<=\s))@([^\s@]+)")


@dataclass(frozen=True)
class Item:
    text: str  # what replaces the token
    help: str = ""


@dataclass(frozen=True)
class Completion:
    start: int  # column where the replaced token starts (in the cursor's line)
    token: str  # what is typed so far
    items: tuple[Item, ...]


@dataclass
class Sources:
    """Where arguments come from; each a callable, so the app answers from its live state."""

    workspace: Path | None = None
    message_ids: Callable[[], Sequence[str]] = lambda: ()
    fold_numbers: Callable[[], Sequence[int]] = lambda: ()
    theme_names: Callable[[], Sequence[str]] = lambda: ()
    model_specs: Callable[[], Sequence[str]] = lambda: ("mock", "ollama:", "openai:")
    extra: dict[str, Callable[[], Sequence[str]]] = field(default_factory=dict)


def complete(text: str, line_before_cursor: str, sources: Sources) -> Completion | None:
    """The completion for the cursor's position, or None when there is nothing to offer."""
    token_start = max(line_before_cursor.rfind(" "), line_before_cursor.rfind("\t")) + 1
    token = line_before_cursor[token_start:]
    if token.startswith("@") and sources.workspace is not None:
        items = complete_path(sources.workspace, token[1:])
        return Completion(token_start, token, items) if items else None
    if not text.startswith("/") or "\n" in text[: len(line_before_cursor)]:
        return None
    head, sep, _rest = line_before_cursor.partition(" ")
    if not sep:
        items = tuple(Item(f"/{c.name}", c.help) for c in SLASH_COMMANDS if f"/{c.name}".startswith(head))
        if len(items) == 1 and items[0].text == head:
            return None  # typed whole: nothing left to offer
        return Completion(0, head, items) if items else None
    command = SLASH_BY_NAME.get(head[1:])
    if command is None:
        return None
    values = _argument_values(command.arg, sources)
    items = tuple(Item(v) for v in values if v.startswith(token) and v != token)[:MAX_ITEMS]
    return Completion(token_start, token, items) if items else None


def _argument_values(kind: str, sources: Sources) -> list[str]:
    if kind in ("message", "messages"):
        return list(reversed(sources.message_ids()))
    if kind == "fold":
        return [str(n) for n in sorted(sources.fold_numbers(), reverse=True)]
    if kind == "theme":
        return sorted(sources.theme_names())
    if kind == "model":
        return list(sources.model_specs())
    if kind == "format":
        return ["md", "json"]
    if kind in sources.extra:
        return list(sources.extra[kind]())
    return []


def complete_path(workspace: Path, partial: str) -> tuple[Item, ...]:
    """Workspace entries that start with `partial` (directories end with /); never outside the workspace."""
    folder, _, prefix = partial.rpartition("/")
    root = workspace.resolve()
    base = (root / folder).resolve() if folder else root
    if base != root and root not in base.parents:
        return ()
    try:
        entries = sorted(os.scandir(base), key=lambda e: e.name)
    except OSError:
        return ()
    out = []
    for entry in entries:
        name = entry.name
        if not name.startswith(prefix) or (name.startswith(".") and not prefix.startswith(".")):
            continue
        try:
            is_dir = entry.is_dir()
        except OSError:
            continue
        if is_dir and name in SKIP_DIRS:
            continue
        shown = f"{folder}/{name}" if folder else name
        out.append(Item(f"@{shown}/" if is_dir else f"@{shown}", "folder" if is_dir else "file"))
        if len(out) >= MAX_ITEMS:
            break
    return tuple(out)


def looks_like_path(mention: str) -> bool:
    """Whether an `@word` names a path (a slash, or a dot before a name's end: `@src/app.py`,
    `@README.md`), rather than someone (`@alice`, `@team.`)."""
    return "/" in mention or re.search(r"\w\.\w", mention) is not None or mention.startswith(("~", "."))


def mentioned_files(text: str, workspace: Path) -> tuple[list[str], list[str]]:
    """The `@path` mentions of `text` that name a file in `workspace`, and one line for each that
    looks like a path but is missing, a directory, or leads out of the workspace (others, like
    @someone, are just text)."""
    root = workspace.resolve()
    files: list[str] = []
    problems: list[str] = []
    for path in mentions(text):
        try:
            real = (root / Path(path).expanduser()).resolve()
        except (OSError, RuntimeError, ValueError):
            problems.append(f"@{path}: not a path tailrent can read; not attached")
            continue
        inside = real == root or root in real.parents
        if inside and real.is_file():
            files.append(path)
        elif not looks_like_path(path):
            continue
        elif not inside:
            problems.append(f"@{path}: outside the workspace {root}; not attached")
        elif real.is_dir():
            problems.append(f"@{path}: a directory; not attached (mention its files, or ask the model to list it)")
        elif not real.exists():
            problems.append(f"@{path}: no such file in the workspace; not attached")
        else:
            problems.append(f"@{path}: not a regular file; not attached")
    return files, problems


def mentions(text: str) -> list[str]:
    """The `@path` mentions of a message, in order, each once."""
    seen: list[str] = []
    for m in MENTION.finditer(text):
        path = m.group(1).rstrip(".,;:!?)")
        if path and path not in seen:
            seen.append(path)
    return seen
