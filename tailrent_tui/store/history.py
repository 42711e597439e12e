"""What the user typed, per workspace, kept across restarts.

One JSONL file per workspace under `<data dir>/history/`, named by a hash of
the workspace's path (the path itself is the first line's `workspace`, for a
reader). Each sent prompt is one appended line `{"text": ..., "at": ...}`;
the file is 0600 (a prompt holds whatever the user pasted). It is bounded: past
twice `limit` lines it is rewritten atomically with the newest `limit`. A
line that cannot be read (a crash mid-write) is skipped, never fatal.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

from tailrent_tui.store.paths import FILE_MODE, ensure_private_dir, write_file_atomic

#: Prompts kept per workspace.
HISTORY_LIMIT = 10_000


def history_path(data_dir: Path, workspace: Path) -> Path:
    """The history file of a workspace: `<data dir>/history/<hash of the resolved path>.jsonl`."""
    key = hashlib.sha256(str(Path(workspace).resolve()).encode()).hexdigest()[:16]
    return Path(data_dir) / "history" / f"{key}.jsonl"


class PromptHistory:
    """The prompts sent in one workspace, oldest first; `append` writes through to the file."""

    def __init__(self, path: Path | None, *, workspace: Path | None = None, limit: int = HISTORY_LIMIT) -> None:
        self.path = path
        self.workspace = workspace
        self.limit = limit
        self.entries: list[str] = []
        self._lines = 0
        self.error: str | None = None
        if path is not None:
            self._load()

    def _load(self) -> None:
        assert self.path is not None
        try:
            raw = self.path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return
        except OSError as exc:
            self.error = f"input history not read: {exc}"
            return
        for line in raw.splitlines():
            self._lines += 1
            try:
                text = json.loads(line).get("text")
            except (ValueError, AttributeError):
                continue
            if isinstance(text, str) and text:
                self.entries.append(text)
        self.entries = self.entries[-self.limit :]

    def append(self, text: str, at: float | None = None) -> None:
        """Remember a sent prompt (a repeat of the last one is not added); I/O errors are kept in `error`."""
        if not text or (self.entries and self.entries[-1] == text):
            return
        self.entries.append(text)
        if len(self.entries) > self.limit:
            del self.entries[: len(self.entries) - self.limit]
        if self.path is None:
            return
        try:
            self._write_line(text, time.time() if at is None else at)
        except OSError as exc:
            self.error = f"input history not saved: {exc}"

    def _write_line(self, text: str, at: float) -> None:
        assert self.path is not None
        if self._lines + 1 > 2 * self.limit:
            self._rewrite()
        ensure_private_dir(self.path.parent)
        record: dict[str, object] = {"text": text, "at": at}
        if self._lines == 0 and self.workspace is not None:
            record["workspace"] = str(self.workspace)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, FILE_MODE)
        try:
            os.write(fd, (json.dumps(record, ensure_ascii=False) + "\n").encode())
        finally:
            os.close(fd)
        self._lines += 1

    def _rewrite(self) -> None:
        assert self.path is not None
        lines = []
        for i, text in enumerate(self.entries[:-1]):
            record: dict[str, object] = {"text": text}
            if i == 0 and self.workspace is not None:
                record["workspace"] = str(self.workspace)
            lines.append(json.dumps(record, ensure_ascii=False) + "\n")
        write_file_atomic(self.path, "".join(lines).encode())
        self._lines = len(lines)

    def search(self, query: str) -> list[str]:
        """Entries containing `query` (case-insensitive), newest first, each once."""
        q = query.lower()
        seen: set[str] = set()
        out = []
        for text in reversed(self.entries):
            if text in seen or q not in text.lower():
                continue
            seen.add(text)
            out.append(text)
        return out
