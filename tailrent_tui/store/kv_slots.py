"""Slot files in the llama.cpp server's slot dir, as far as tailrent can see them.

The server writes the files (``--slot-save-path``); tailrent only names them. When
the user tells tailrent where that directory is (the ``slot_dir`` setting), it can
size them, delete the oldest past the caps and list them; without it, each
session's meta.json keeps the names and sizes the server reported, and cleanup is
the user's (``tailrent sessions --json`` lists what was saved).

Only files named like tailrent's (``tailrent-<session>-<hash>.bin``, see
``core/kv_slots.py``) are ever touched: the same directory may hold other clients' slots.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, Field

from tailrent_tui.core.kv_slots import SlotFile, SlotRecord, parse_slot_file_name


class SlotListing(BaseModel):
    """One slot file of a session, for `tailrent sessions --json`."""

    file: str
    hash: str | None = None
    tokens: int | None = Field(None, description="tokens the slot held when saved")
    bytes: int | None = Field(None, description="size on disk when slot_dir is set, else as the server reported it")
    saved_at: float | None = None
    exists: bool | None = Field(None, description="whether the file is in slot_dir; None without slot_dir")


def scan_slot_dir(slot_dir: Path) -> list[SlotFile]:
    """tailrent's slot files in the directory (no recursion, symlinks skipped)."""
    out: list[SlotFile] = []
    try:
        entries = list(os.scandir(slot_dir))
    except OSError:
        return out
    for entry in entries:
        parsed = parse_slot_file_name(entry.name)
        if parsed is None:
            continue
        try:
            if not entry.is_file(follow_symlinks=False):
                continue
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        out.append(SlotFile(entry.name, parsed[0], st.st_size, st.st_mtime))
    return out


def delete_slot_files(slot_dir: Path, files: list[SlotFile]) -> tuple[int, list[str]]:
    """Delete these files; (bytes freed, one line per file that could not be deleted)."""
    freed, errors = 0, []
    for f in files:
        try:
            (slot_dir / f.name).unlink()
            freed += f.bytes
        except FileNotFoundError:
            continue
        except OSError as exc:
            errors.append(f"{f.name}: {exc.strerror or exc}")
    return freed, errors


def session_slots(session_id: str, records: list[SlotRecord], slot_dir: Path | None) -> list[SlotListing]:
    """A session's slot files: what its meta recorded, and with slot_dir what is on disk too."""
    on_disk = {f.name: f for f in scan_slot_dir(slot_dir) if f.session == session_id} if slot_dir else {}
    out: list[SlotListing] = []
    for r in sorted(records, key=lambda r: r.saved_at):
        seen = on_disk.pop(r.file, None)
        out.append(
            SlotListing(
                file=r.file,
                hash=r.hash,
                tokens=r.tokens,
                bytes=seen.bytes if seen else r.bytes,
                saved_at=r.saved_at,
                exists=(seen is not None) if slot_dir else None,
            )
        )
    for f in sorted(on_disk.values(), key=lambda f: f.mtime):
        parsed = parse_slot_file_name(f.name)
        out.append(SlotListing(file=f.name, hash=parsed[1] if parsed else None, bytes=f.bytes, saved_at=f.mtime, exists=True))
    return out
