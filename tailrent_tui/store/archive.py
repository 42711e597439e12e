"""The fold archive: the originals of every fold, written before the fold applies.

`archive/fold-0001.json` holds the fold number, the time, the originals (full
messages, as they stood in the transcript), the summary text and the facts
the summary lost. Core's `fold_span` calls `write_fold` before it emits the
Folded event; if the write fails, the OSError stops the fold, so a fold never
destroys what the archive does not hold. A fold is destructive for the
context, never for the session.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from tailrent_tui.core.messages import Message
from tailrent_tui.store.paths import ensure_private_dir, write_file_atomic

_NAME = re.compile(r"^fold-(\d{4,})\.json$")


class ArchiveError(Exception):
    """An archived fold cannot be read."""


class ArchivedFold(BaseModel):
    fold_no: int
    archived_at: float
    originals: list[Message]
    summary: str
    facts_lost: list[str] = Field(default_factory=list)


class HistoryHit(BaseModel):
    """A match in the archive: the fold and the original message that contains the query."""

    fold_no: int
    message_id: str
    role: str
    snippet: str


class FileFoldArchive:
    """Implements core's `FoldArchive` with one JSON file per fold."""

    def __init__(self, directory: Path, *, clock=time.time) -> None:
        self.directory = Path(directory)
        self.clock = clock

    def path_for(self, fold_no: int) -> Path:
        return self.directory / f"fold-{fold_no:04d}.json"

    def write_fold(self, fold_no: int, originals: Sequence[Message], summary: str, facts_lost: Sequence[str]) -> None:
        """Persist the originals (temp, fsync, rename); an OSError stops the fold."""
        record = ArchivedFold(
            fold_no=fold_no,
            archived_at=self.clock(),
            originals=[m.model_copy(deep=True) for m in originals],
            summary=summary,
            facts_lost=list(facts_lost),
        )
        ensure_private_dir(self.directory)
        # a file left by a fold that was archived but never journaled (a crash in between) is replaced
        write_file_atomic(self.path_for(fold_no), record.model_dump_json().encode("utf-8"))

    def fold_numbers(self) -> list[int]:
        if not self.directory.is_dir():
            return []
        return sorted(int(m.group(1)) for p in self.directory.iterdir() if (m := _NAME.match(p.name)))

    def read_fold(self, fold_no: int) -> ArchivedFold:
        path = self.path_for(fold_no)
        try:
            return ArchivedFold.model_validate(json.loads(path.read_bytes().decode("utf-8")))
        except FileNotFoundError:
            raise ArchiveError(f"fold #{fold_no}: archive file {path} is missing") from None
        except (ValueError, ValidationError) as exc:
            raise ArchiveError(f"fold #{fold_no}: archive file {path} is not valid ({type(exc).__name__})") from None

    def search_history(self, query: str, *, limit: int = 20, context: int = 80) -> list[HistoryHit]:
        """Case-insensitive search through every archived original (for the `search_history` tool)."""
        q = query.strip().lower()
        if not q:
            raise ValueError("search_history needs a non-empty query")
        hits: list[HistoryHit] = []
        for n in self.fold_numbers():
            try:
                fold = self.read_fold(n)
            except ArchiveError:
                continue
            for m in fold.originals:
                i = m.content.lower().find(q)
                if i < 0:
                    continue
                start = max(0, i - context)
                snippet = m.content[start : i + len(q) + context].replace("\n", " ")
                hits.append(HistoryHit(fold_no=n, message_id=m.id, role=m.role, snippet=snippet))
                if len(hits) >= limit:
                    return hits
        return hits
