"""`tailrent sessions repair ID`: a repaired copy of a damaged journal, and swapping it in.

`repair_session` always writes `journal.repaired.jsonl` beside the journal,
keeping every line that loads and replays and listing the ones it skipped;
the original is not touched. With `apply=True` the original is kept as
`journal.bak-<time>.jsonl` (never deleted) and the repaired copy replaces it
in one atomic rename.

A damaged meta.json (missing, empty, cut, another session's) is rebuilt from the
journal the same way: `meta.repaired.json` beside it, and with `apply=True` the
damaged file kept as `meta.json.bak-<time>` and the rebuilt one put in its place.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from pydantic import BaseModel

from tailrent_tui.store.journal import repair_journal
from tailrent_tui.store.paths import fsync_dir, write_file_atomic
from tailrent_tui.store.sessions import SessionDir


class RepairOutcome(BaseModel):
    journal: Path
    repaired: Path
    kept: int
    skipped: list[tuple[int, str]]
    applied: bool = False
    backup: Path | None = None
    meta_problem: str | None = None
    """what was wrong with meta.json; None when it was fine"""
    meta_repaired: Path | None = None
    meta_backup: Path | None = None


def repair_session(sd: SessionDir, *, apply: bool = False) -> RepairOutcome:
    """Write the repaired copy; with `apply`, keep the original as a backup and swap the copy in.

    With `apply` the lock is held from the read to the swap (no append can slip
    in between), and the swap never leaves the session without a journal: the
    backup is a hard link to the original (or a copy, where links are refused),
    then one `os.replace` puts the repaired copy in place. A kill at any point
    leaves the original or the repaired journal, never neither.
    """
    lock = sd.acquire_lock() if apply else None
    try:
        report = repair_journal(sd.journal_path)
        outcome = RepairOutcome(journal=sd.journal_path, repaired=report.path, kept=report.kept, skipped=report.skipped)
        if apply:
            backup = sd.path / f"journal.bak-{time.strftime('%Y%m%dT%H%M%S')}-{time.time_ns() % 1_000_000:06d}.jsonl"
            _keep_backup(sd.journal_path, backup)
            os.replace(report.path, sd.journal_path)
            fsync_dir(sd.path)
            outcome.applied = True
            outcome.backup = backup
            outcome.repaired = sd.journal_path
        _repair_meta(sd, outcome, apply=apply)
    finally:
        if lock is not None:
            lock.release()
    return outcome


def _repair_meta(sd: SessionDir, outcome: RepairOutcome, *, apply: bool) -> None:
    """meta.json rebuilt from the (repaired) journal when it is damaged: beside it, or in its place."""
    meta, problem = sd.read_meta_file()
    if meta is not None:
        return
    outcome.meta_problem = problem
    rebuilt = sd.read_meta()  # from the journal (SessionLookupError when it cannot be)
    data = rebuilt.model_dump_json(indent=2).encode("utf-8")
    if not apply:
        outcome.meta_repaired = sd.path / "meta.repaired.json"
        write_file_atomic(outcome.meta_repaired, data)
        return
    if sd.meta_path.exists():
        outcome.meta_backup = sd.path / f"meta.json.bak-{time.strftime('%Y%m%dT%H%M%S')}"
        _keep_backup(sd.meta_path, outcome.meta_backup)
    write_file_atomic(sd.meta_path, data)
    outcome.meta_repaired = sd.meta_path


def _keep_backup(journal: Path, backup: Path) -> None:
    """`backup` holds the original's bytes, durably, and `journal` is untouched."""
    try:
        os.link(journal, backup)
    except OSError:
        write_file_atomic(backup, journal.read_bytes())
    fsync_dir(journal.parent)
