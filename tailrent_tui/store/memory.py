"""Rung 4's memory entries: `memory/<key>.json`, written whole (temp, fsync, rename).

`remember` stores an artifact under a key and the caller leaves a one-line
pointer in context; `recall` reads it back. Keeps: the whole text, on disk.
Loses: nothing, but it is out of context until recalled.
"""

from __future__ import annotations

import time
from pathlib import Path

from pydantic import BaseModel

from tailrent_tui.core.ports import Memory, StoreEntryError
from tailrent_tui.store.paths import check_name, ensure_private_dir, write_file_atomic
from tailrent_tui.store.records import read_record


class MemoryEntryMissing(StoreEntryError):
    """No memory entry under that key, or its file is not what was written."""


class MemoryEntry(BaseModel):
    key: str
    text: str
    saved_at: float


class MemoryStore(Memory):
    """Implements core's `Memory` with one JSON file per entry."""

    def __init__(self, directory: Path, *, clock=time.time) -> None:
        self.directory = Path(directory)
        self.clock = clock

    def _path(self, key: str) -> Path:
        return self.directory / f"{check_name(key, 'memory key')}.json"

    def remember(self, key: str, text: str) -> str:
        """Store `text` under `key` (replacing an earlier entry); returns the file."""
        if not isinstance(text, str):
            raise ValueError(f"memory entry {key!r}: text must be a string")
        path = self._path(key)
        ensure_private_dir(self.directory)
        entry = MemoryEntry(key=key, text=text, saved_at=self.clock())
        return str(write_file_atomic(path, entry.model_dump_json().encode("utf-8")))

    def recall(self, key: str) -> str:
        path = self._path(key)
        if not path.exists():
            # the caller (often the model) guessed a key: name the ones there are
            known = ", ".join(self.keys()) or "none"
            raise MemoryEntryMissing(f"no memory entry {key!r} in {self.directory} (entries: {known})")
        entry = read_record(path, MemoryEntry, f"memory entry {key!r}", missing=MemoryEntryMissing, damaged=MemoryEntryMissing)
        return entry.text

    def keys(self) -> list[str]:
        if not self.directory.is_dir():
            return []
        return sorted(p.stem for p in self.directory.glob("*.json") if not p.name.startswith("."))
