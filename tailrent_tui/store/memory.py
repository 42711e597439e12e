"""Rung 4's memory entries: `memory/<key>.json`, written whole (temp, fsync, rename).

`remember` stores an artifact under a key and the caller leaves a one-line
pointer in context; `recall` reads it back. Keeps: the whole text, on disk.
Loses: nothing, but it is out of context until recalled.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from pydantic import BaseModel, ValidationError

from tailrent_tui.store.paths import check_name, ensure_private_dir, write_file_atomic


class MemoryEntryMissing(LookupError):
    """No memory entry under that key."""


class MemoryEntry(BaseModel):
    key: str
    text: str
    saved_at: float


class MemoryStore:
    def __init__(self, directory: Path, *, clock=time.time) -> None:
        self.directory = Path(directory)
        self.clock = clock

    def _path(self, key: str) -> Path:
        return self.directory / f"{check_name(key, 'memory key')}.json"

    def remember(self, key: str, text: str) -> Path:
        """Store `text` under `key` (replacing an earlier entry); returns the file."""
        if not isinstance(text, str):
            raise ValueError(f"memory entry {key!r}: text must be a string")
        path = self._path(key)
        ensure_private_dir(self.directory)
        entry = MemoryEntry(key=key, text=text, saved_at=self.clock())
        return write_file_atomic(path, entry.model_dump_json().encode("utf-8"))

    def entry(self, key: str) -> MemoryEntry:
        path = self._path(key)
        try:
            return MemoryEntry.model_validate(json.loads(path.read_bytes().decode("utf-8")))
        except FileNotFoundError:
            known = ", ".join(self.list()) or "none"
            raise MemoryEntryMissing(f"no memory entry {key!r} (entries: {known})") from None
        except (ValueError, ValidationError) as exc:
            raise MemoryEntryMissing(f"memory entry {key!r}: {path} is not valid ({type(exc).__name__})") from None

    def recall(self, key: str) -> str:
        return self.entry(key).text

    def list(self) -> list[str]:
        if not self.directory.is_dir():
            return []
        return sorted(p.stem for p in self.directory.glob("*.json") if not p.name.startswith("."))
