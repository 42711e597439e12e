"""What the user typed, per workspace, kept across restarts.

One JSONL file per workspace under `<data dir>/history/`, named by a hash of
the workspace's path (the path itself is the first line's `workspace`, for a
reader). Each sent prompt is one appended line `{"text": ..., "at": ...}`;
the file is 0600 (a prompt holds whatever the user pasted). It is bounded: past
twice `limit` lines it is rewritten atomically with the newest `limit`. A
line that cannot be read (a crash mid-write) is skipped, never fatal.

Hostile files are data too: only the last `MAX_READ_BYTES` of a huge file are
read (and the next prompt rewrites it to `limit` lines), a FIFO or device in
its place is neither read nor written (no hang), an unwritable one is said
once, and a prompt that is not valid UTF-8 is kept with U+FFFD.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import time
from pathlib import Path

from tailrent_tui.store.paths import FILE_MODE, ensure_private_dir, write_file_atomic
from tailrent_tui.text import storable

#: Prompts kept per workspace.
HISTORY_LIMIT = 10_000
#: read no more than the end of a history file this big (a 100 MB one took seconds and its memory)
MAX_READ_BYTES = 8 * 1024 * 1024
_OPEN_FLAGS = os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)


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
        #: the file ends in a torn line (a crash mid-write): the next line starts on a new one
        self._torn = False
        self.error: str | None = None
        if path is not None:
            self._load()

    def _open(self, flags: int) -> int:
        """The history file opened without blocking, refused unless it is a regular file."""
        assert self.path is not None
        fd = os.open(self.path, flags | _OPEN_FLAGS, FILE_MODE)
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            raise OSError(f"{self.path} is not a regular file; remove it to keep the history")
        os.set_blocking(fd, True)
        return fd

    def _load(self) -> None:
        assert self.path is not None
        try:
            fd = self._open(os.O_RDONLY)
        except FileNotFoundError:
            return
        except OSError as exc:
            self.error = f"input history not read: {exc}"
            return
        with os.fdopen(fd, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size > MAX_READ_BYTES:
                f.seek(size - MAX_READ_BYTES)
                f.readline()  # the line cut by the seek
                self._lines = 2 * self.limit  # the next prompt rewrites the file to its newest `limit`
            try:
                raw = f.read(MAX_READ_BYTES).decode("utf-8", "replace")
            except OSError as exc:
                self.error = f"input history not read: {exc}"
                return
        self._torn = bool(raw) and not raw.endswith("\n")
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
        text = storable(text)
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
        fd = self._open(os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        try:
            line = ("\n" if self._torn else "") + json.dumps(record, ensure_ascii=False) + "\n"
            os.write(fd, line.encode("utf-8", "replace"))
            self._torn = False
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
