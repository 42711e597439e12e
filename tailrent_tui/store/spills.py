"""Spill files (rung 2's store): `spill/<uuid>.json` in the session directory.

Each file holds {"tool", "captured_at", "content", "sha256"}; it is written to
a temp file, fsynced and renamed, so a spill is either whole or absent. The
transcript keeps only the pointer. Reading back checks the file against its
hash: a missing or altered file is a clear `SpillMissing` / `SpillAltered`
(core's store entry errors, so LookupErrors), which the spill viewer turns into a
line it shows instead of crashing (agent/stores.py `spill_text`).
"""

from __future__ import annotations

import hashlib
import os
import uuid
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from tailrent_tui.core.ports import SpillAltered, SpillMissing, SpillStore, SpillStoreError
from tailrent_tui.store.paths import check_name, ensure_private_dir, write_file_atomic
from tailrent_tui.store.records import parse_record, read_record, unreadable


class SpillFile(BaseModel):
    tool: str
    captured_at: float
    content: str
    sha256: str


def _digest(content: str) -> str:
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


class FileSpillStore(SpillStore):
    """Implements core's `SpillStore` with one JSON file per spill."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)

    def path_for(self, spill_id: str) -> Path:
        return self.directory / f"{check_name(spill_id, 'spill id')}.json"

    def write_spill(self, spill_id: str, tool: str, content: str, at: float) -> str:
        """Write the spill file (temp, fsync, rename); return its path for the pointer."""
        path = self.path_for(spill_id)
        record = SpillFile(tool=tool, captured_at=at, content=content, sha256=_digest(content))
        try:
            ensure_private_dir(self.directory)
            write_file_atomic(path, record.model_dump_json().encode("utf-8"))
        except OSError as exc:
            raise SpillStoreError(exc.errno, f"could not write spill {spill_id} to {path}: {exc.strerror or exc}") from exc
        return str(path)

    def _checked_record(self, spill_id: str) -> SpillFile:
        path = self.path_for(spill_id)
        record = read_record(path, SpillFile, f"spill {spill_id}", missing=SpillMissing, damaged=SpillAltered)
        return self._checked(spill_id, path, record)

    def _checked(self, spill_id: str, path: Path, record: SpillFile) -> SpillFile:
        if _digest(record.content) != record.sha256:
            raise SpillAltered(
                f"spill {spill_id}: file {path} was altered after it was written (its content no longer matches its sha256)"
            )
        return record

    # Raw spills: a command's whole output streamed straight to disk (run_shell past
    # its in-memory cap), too big to hold as one JSON string. Written as bytes,
    # read back with replacement decoding, whole when small or by line range.

    RAW_READ_LIMIT = 64 * 1024 * 1024

    def raw_path_for(self, spill_id: str) -> Path:
        return self.directory / f"{check_name(spill_id, 'spill id')}.raw"

    def open_raw(self) -> tuple[Any, str]:
        """A new raw spill file opened for binary writing, and its spill id."""
        spill_id = str(uuid.uuid4())
        ensure_private_dir(self.directory)
        fd = os.open(self.raw_path_for(spill_id), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        return os.fdopen(fd, "wb"), spill_id

    def raw_bytes(self) -> int:
        """Bytes the spills of this session hold, raw and JSON (counted against spills_session_max_bytes)."""
        try:
            return sum(p.stat().st_size for p in self.directory.glob("*") if p.suffix in (".raw", ".json"))
        except OSError:
            return 0

    def read_spill(self, spill_id: str) -> str:
        path, raw = self.spill_file(spill_id)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise unreadable(path, f"spill {spill_id}", exc, missing=SpillMissing, damaged=SpillAltered) from None
        return self.spill_from_bytes(spill_id, path, data, raw=raw)

    def spill_file(self, spill_id: str) -> tuple[Path, bool]:
        """The file that holds a spill, and whether it is raw bytes (else a JSON record checked against its hash).

        A raw spill too big to read whole is a SpillStoreError (read a range instead)."""
        raw = self.raw_path_for(spill_id)
        if not self.path_for(spill_id).exists() and raw.exists():
            size = raw.stat().st_size
            if size > self.RAW_READ_LIMIT:
                raise SpillStoreError(
                    f"spill {spill_id} holds {size:,} bytes: too big to read whole; read a range with start/end"
                )
            return raw, True
        return self.path_for(spill_id), False

    def spill_from_bytes(self, spill_id: str, path: Path, data: bytes, *, raw: bool) -> str:
        """A spill's text from the bytes of its file (`spill_file`), read here or by the app with aiofiles."""
        if raw:
            return data.decode("utf-8", errors="replace")
        record = parse_record(data, path, SpillFile, f"spill {spill_id}", damaged=SpillAltered)
        return self._checked(spill_id, path, record).content

    def read_spill_lines(self, spill_id: str, start: int, end: int) -> str:
        """Lines start..end (1-based, inclusive) of a spill, streamed for raw spills."""
        raw = self.raw_path_for(spill_id)
        if self.path_for(spill_id).exists() or not raw.exists():
            return super().read_spill_lines(spill_id, start, end)
        out = []
        n = 0
        with raw.open("rb") as f:
            for n, line in enumerate(f, 1):
                if n > end:
                    break
                if n >= start:
                    out.append(line.decode("utf-8", errors="replace").rstrip("\n"))
        if not out:
            raise ValueError(f"empty range {start}-{end}: spill {spill_id} has {n} lines")
        return "\n".join(out)

    def exists(self, spill_id: str) -> bool:
        return self.path_for(spill_id).exists() or self.raw_path_for(spill_id).exists()
