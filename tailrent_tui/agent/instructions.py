"""Project instructions: AGENTS.md and TAILRENT.md at the workspace root, pinned at the head of the context.

The convention of Codex, opencode and others: a file in the repository tells
every agent how to work there. Each file present is one pinned message of kind
`instructions` at the head of the transcript, read at start and again before
each request when its mtime or size changed; a new reading replaces the old
one in place (an `InstructionsRead` event, so a replay needs only the journal),
and a deleted file's message goes.

Pins have a budget (`pin_share` of what the system prompt and the reply leave of the window), and instructions are pins:
together they may hold at most half of it, so pinned decisions keep the other
half. A longer file is cut at a line boundary, and the cut is said in the text
the model reads (rung 1: truncate at the source).

The files are opened the way the tools open files (`open_beneath`, then
`open_regular`): a symlink that leads out of the workspace, a FIFO, a device,
a file with a second hard link is refused, never read into the context (a cloned
repository's `AGENTS.md -> ~/.ssh/id_rsa` or `/proc/self/environ` would be sent
to the model and journaled). A refusal is one warning line in the transcript
naming the file, said once until the file changes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from tailrent_tui.agent.workspace import FileRefused, WorkspaceEscape, open_beneath, open_regular, refusal
from tailrent_tui.core.session import Session

FILES = ("AGENTS.md", "TAILRENT.md")
#: the instructions' share of the pin budget (the rest is for pinned decisions)
PIN_BUDGET_SHARE = 0.5
#: read no more than this of a file (a generated or mistaken giant is cut anyway)
MAX_BYTES = 256 * 1024


@dataclass
class InstructionsWatcher:
    """Reads the instruction files into a session when they changed on disk."""

    workspace: Path
    seen: dict[str, tuple[int, int] | None] = field(default_factory=dict)
    #: the refusal said for each file, so it is said once until it changes
    refused: dict[str, str] = field(default_factory=dict)

    def refresh(self, session: Session) -> list[str]:
        """Bring the session's instructions in line with the files; returns the names that changed."""
        changed = []
        budget = int(session.pin_budget * PIN_BUDGET_SHARE)
        current = session.instructions
        for name in FILES:
            stamp, why = _stamp(self.workspace, name)
            if why is not None:
                if self.refused.get(name) != why:
                    self.refused[name] = why
                    session.note(f"{name} not read: {why}", "warning")
                stamp = None
            else:
                self.refused.pop(name, None)
            if name in self.seen and self.seen[name] == stamp and (stamp is None) == (name not in current):
                budget -= current[name].tokens if name in current else 0
                continue
            self.seen[name] = stamp
            text = None if stamp is None else _read(self.workspace, name)
            if text is not None:
                text = _capped(session, name, text, max(0, budget))
                budget -= session.count(text)
            if session.read_instructions(name, text) is not None:
                changed.append(name)
        return changed


def _why(exc: Exception) -> str:
    return " ".join(str(exc).split()) + "; project instructions are read only from regular files inside the workspace"


def _stamp(workspace: Path, name: str) -> tuple[tuple[int, int] | None, str | None]:
    """(mtime, size) of the file `name` as the tools would open it, and why it is refused (or None)."""
    try:
        with open_beneath(workspace, name) as spot:
            if spot.st is None:
                return None, None
            why = refusal(spot.st, spot.shown, "instructions")
            if why is not None:
                return None, why + "; project instructions are read only from regular files inside the workspace"
            return (spot.st.st_mtime_ns, spot.st.st_size), None
    except WorkspaceEscape as exc:
        return None, _why(exc)
    except OSError:
        return None, None


def _read(workspace: Path, name: str) -> str | None:
    """The file's text, opened beneath the workspace (no way out, no special file), at most MAX_BYTES."""
    try:
        with open_beneath(workspace, name) as spot:
            fd, _ = open_regular(spot, "instructions")
        with os.fdopen(fd, "rb") as f:
            data = f.read(MAX_BYTES)
    except (OSError, WorkspaceEscape, FileRefused):
        return None
    text = data.decode("utf-8", "replace").strip()
    return text or None


def instructions_text(name: str, body: str) -> str:
    """What the model reads: the file's name, then its text."""
    return f"Project instructions from {name} (workspace root):\n\n{body}"


def _capped(session: Session, name: str, body: str, budget: int) -> str:
    """The message for `body`, cut at a line so that it holds at most `budget` tokens."""
    text = instructions_text(name, body)
    total = session.count(text)
    if total <= budget:
        return text
    lines = body.splitlines()
    note = (
        f"[{name} cut at ~{{kept:,}} of {total:,} tokens: project instructions may hold half the pin budget "
        f"([fold] pin_share of what the system prompt and the reply leave of the window); shorten the file or raise pin_share]"
    )
    low, high = 0, len(lines)
    while low < high:  # the most whole lines that fit with the note
        mid = (low + high + 1) // 2
        candidate = instructions_text(name, "\n".join(lines[:mid]))
        if session.count(candidate) + session.count(note) <= budget:
            low = mid
        else:
            high = mid - 1
    kept = instructions_text(name, "\n".join(lines[:low]))
    return f"{kept}\n{note.format(kept=session.count(kept))}"
