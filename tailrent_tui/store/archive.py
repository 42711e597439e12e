"""The fold archive: the originals of every fold, written before the fold applies.

`archive/fold-0001.json` holds the fold number, the time, the originals (full
messages, as they stood in the transcript), the summary text and the facts
the summary lost. Core's `apply_fold` calls `write_fold` before it emits the
Folded event; if the write fails, the OSError stops the fold, so a fold never
destroys what the archive does not hold. A fold is destructive for the
context, never for the session.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from pathlib import Path

from tailrent_tui.core.messages import Message
from tailrent_tui.core.ports import ArchivedFold, ArchiveError, FoldArchive
from tailrent_tui.store.paths import ensure_private_dir, write_file_atomic
from tailrent_tui.store.records import parse_record, read_record

_NAME = re.compile(r"^fold-(\d{4,})\.json$")


class FileFoldArchive(FoldArchive):
    """Implements core's `FoldArchive` with one JSON file per fold."""

    def __init__(self, directory: Path, *, clock=time.time) -> None:
        self.directory = Path(directory)
        self.clock = clock

    def path_for(self, fold_no: int) -> Path:
        return self.directory / f"fold-{fold_no:04d}.json"

    def write_fold(self, fold_no: int, originals: Sequence[Message], summary: str, facts_lost: Sequence[str]) -> None:
        """Persist the originals (temp, fsync, rename); an OSError stops the fold."""
        record = ArchivedFold.of(fold_no, originals, summary, facts_lost, at=self.clock())
        ensure_private_dir(self.directory)
        # a file left by a fold that was archived but never journaled (a crash in between) is replaced
        write_file_atomic(self.path_for(fold_no), record.model_dump_json().encode("utf-8"))

    def fold_numbers(self) -> list[int]:
        if not self.directory.is_dir():
            return []
        return sorted(int(m.group(1)) for p in self.directory.iterdir() if (m := _NAME.match(p.name)))

    def read_fold(self, fold_no: int) -> ArchivedFold:
        return read_record(self.path_for(fold_no), ArchivedFold, f"fold #{fold_no}", missing=ArchiveError, damaged=ArchiveError)

    def fold_from_bytes(self, fold_no: int, data: bytes) -> ArchivedFold:
        """An archived fold from the bytes of its file (`path_for`), read by the app with aiofiles."""
        return parse_record(data, self.path_for(fold_no), ArchivedFold, f"fold #{fold_no}", damaged=ArchiveError)
