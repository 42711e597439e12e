"""Ports: what core and the agent need from the stores kept outside the context.

The fold archive (rung 5), the spill store (rung 2) and memory (rung 4) each
have a file-backed implementation in `store/` and, for the first two, one in
memory (tests, benchmarks, sub-sessions). Every implementation has the same
read methods, and a missing or damaged entry is the same error in each: a
`StoreEntryError`, a `LookupError` whose message is one line naming the file,
so a reader that walks many entries (search_history, a probe, the inspector)
reports the one it cannot read and goes on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from pydantic import BaseModel, Field

from tailrent_tui.core.messages import Message


class StoreEntryError(LookupError):
    """An entry a store should hold is missing or is not what was written."""


class ArchiveError(StoreEntryError):
    """An archived fold cannot be read."""


class SpillStoreError(OSError):
    """The spill store could not write (disk full, read-only, missing directory)."""


# The spill read errors are OSErrors too: the spill viewer and the agent's
# spill_text were written against OSError and still catch them.
class SpillMissing(SpillStoreError, StoreEntryError):
    """The spill a pointer names is not in the store."""


class SpillAltered(SpillStoreError, StoreEntryError):
    """The spill is there but is not what was written (edited, truncated, not JSON)."""


class ArchivedFold(BaseModel):
    """A fold as the archive holds it: its originals, its summary, the facts the summary lost."""

    fold_no: int
    archived_at: float
    originals: list[Message]
    summary: str
    facts_lost: list[str] = Field(default_factory=list)

    @classmethod
    def of(
        cls, fold_no: int, originals: Sequence[Message], summary: str, facts_lost: Sequence[str], *, at: float
    ) -> ArchivedFold:
        """A record with its own copies of the originals: later changes to the live messages never reach it."""
        return cls(
            fold_no=fold_no,
            archived_at=at,
            originals=[m.model_copy(deep=True) for m in originals],
            summary=summary,
            facts_lost=list(facts_lost),
        )


class FoldArchive(Protocol):
    def write_fold(self, fold_no: int, originals: Sequence[Message], summary: str, facts_lost: Sequence[str]) -> None:
        """Persist a fold's originals before it is applied; raise OSError to stop the fold."""
        ...

    def read_fold(self, fold_no: int) -> ArchivedFold:
        """The fold as archived; `ArchiveError` when it is missing or damaged."""
        ...

    def fold_numbers(self) -> list[int]:
        """The folds the archive holds, ascending."""
        ...

    def read_originals(self, fold_no: int) -> list[Message]:
        """The messages fold `fold_no` removed from the context."""
        return self.read_fold(fold_no).originals


class SpillStore(Protocol):
    def write_spill(self, spill_id: str, tool: str, content: str, at: float) -> str:
        """Persist content; return its location (a path or a URI) for the pointer."""
        ...

    def read_spill(self, spill_id: str) -> str:
        """The whole content; `SpillMissing` or `SpillAltered` when it cannot be read back."""
        ...

    def read_spill_lines(self, spill_id: str, start: int, end: int) -> str:
        """Lines start..end (1-based, inclusive); ValueError when the spill has fewer than `start`."""
        lines = self.read_spill(spill_id).splitlines()
        if start > len(lines):
            raise ValueError(f"empty range {start}-{end}: spill {spill_id} has {len(lines)} lines")
        return "\n".join(lines[start - 1 : end])


class Memory(Protocol):
    def remember(self, key: str, text: str) -> str:
        """Store `text` under `key`, replacing an earlier entry; return its location."""
        ...

    def recall(self, key: str) -> str:
        """The text stored under `key`; a `StoreEntryError` when it is missing or damaged."""
        ...

    def keys(self) -> list[str]:
        """The keys of every entry, sorted."""
        ...
