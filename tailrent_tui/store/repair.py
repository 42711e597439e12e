"""`tailrent sessions repair ID`: a repaired copy of a damaged journal, and swapping it in.

`repair_session` always writes `journal.repaired.jsonl` beside the journal,
keeping every line that loads and replays and listing the ones it skipped;
the original is not touched. With `apply=True` the original is renamed to
`journal.bak-<time>.jsonl` (kept, never deleted) and the repaired copy is
renamed into its place.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from pydantic import BaseModel

from tailrent_tui.store.journal import repair_journal
from tailrent_tui.store.paths import fsync_dir
from tailrent_tui.store.sessions import SessionDir


class RepairOutcome(BaseModel):
    journal: Path
    repaired: Path
    kept: int
    skipped: list[tuple[int, str]]
    applied: bool = False
    backup: Path | None = None


def repair_session(sd: SessionDir, *, apply: bool = False) -> RepairOutcome:
    """Write the repaired copy; with `apply`, keep the original as a backup and swap the copy in."""
    report = repair_journal(sd.journal_path)
    outcome = RepairOutcome(journal=sd.journal_path, repaired=report.path, kept=report.kept, skipped=report.skipped)
    if apply:
        lock = sd.acquire_lock()
        try:
            backup = sd.path / f"journal.bak-{time.strftime('%Y%m%dT%H%M%S')}.jsonl"
            os.rename(sd.journal_path, backup)
            os.rename(report.path, sd.journal_path)
            fsync_dir(sd.path)
        finally:
            lock.release()
        outcome.applied = True
        outcome.backup = backup
        outcome.repaired = sd.journal_path
    return outcome
