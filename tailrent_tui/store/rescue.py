"""Rescue files: the journal lines a writer could not save, kept where the user can find them.

When the journal cannot be written (a full disk, a size limit, a read-only
data dir) and the session ends, the lines still pending go to
`<data dir>/rescue/unsaved-<session>-<time>-<pid>.jsonl`, or, if that cannot
be written either, to the same name under the user's state dir
(`platformdirs.user_state_dir("tailrent")/rescue`). Never the system temp
dir: a transcript holds whatever the user pasted into it.

The directory is made 0700 and must not be a symlink; the file is created
0600 with `O_CREAT|O_EXCL|O_NOFOLLOW` relative to the directory's descriptor,
so a planted file or symlink is refused, never followed or overwritten. The
app (at exit) and `tailrent ask` both call `rescue_unsaved`: one
implementation, one message.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from pathlib import Path

import platformdirs
from pydantic import BaseModel

from tailrent_tui.store.paths import DIR_MODE, FILE_MODE, ensure_private_dir

RESCUE_DIR = "rescue"


class RescueOutcome(BaseModel):
    """Where the unsaved lines went (`path`), or why they could not go anywhere (`errors`)."""

    lines: int
    path: Path | None = None
    errors: list[str] = []

    @property
    def saved(self) -> bool:
        return self.path is not None


def state_rescue_dir() -> Path:
    """The fallback: the user's state dir, not the data dir (which may be the full disk)."""
    return Path(platformdirs.user_state_dir("tailrent")) / RESCUE_DIR


def _open_private_dir(directory: Path) -> int:
    """A descriptor on `directory` (made 0700 if missing), refusing a symlink or another owner's dir."""
    ensure_private_dir(directory.parent)
    with contextlib.suppress(FileExistsError):
        directory.mkdir(mode=DIR_MODE)
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        st = os.fstat(fd)
        if st.st_uid != os.getuid():
            raise PermissionError(f"{directory} belongs to another user")
        if stat.S_IMODE(st.st_mode) != DIR_MODE:
            os.fchmod(fd, DIR_MODE)
    except BaseException:
        os.close(fd)
        raise
    return fd


def write_rescue_file(directory: Path, name: str, data: bytes) -> Path:
    """Create `directory/name` (0600, O_EXCL|O_NOFOLLOW) holding `data`, fsynced; an OSError if not."""
    dir_fd = _open_private_dir(directory)
    try:
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE, dir_fd=dir_fd)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            os.unlink(name, dir_fd=dir_fd)
            raise
        os.close(fd)
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return directory / name


def rescue_unsaved(session_id: str, lines: list[bytes], data_dir: Path | None, *, fallback: Path | None = None) -> RescueOutcome:
    """Write `lines` to a new rescue file: in the data dir, else in the user's state dir."""
    name = f"unsaved-{session_id}-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}.jsonl"
    data = b"".join(lines)
    outcome = RescueOutcome(lines=len(lines))
    places = [p for p in (data_dir / RESCUE_DIR if data_dir else None, fallback or state_rescue_dir()) if p]
    for place in places:
        try:
            outcome.path = write_rescue_file(place, name, data)
            return outcome
        except OSError as exc:
            outcome.errors.append(f"{place / name}: {exc.strerror or exc}")
    return outcome


def unsaved_message(pending: int, journal: Path, error: object, outcome: RescueOutcome) -> str:
    """One line: what was not saved, why, and where it went (or that it went nowhere)."""
    head = f"{pending} change(s) could not be saved to {journal} ({error})"
    if outcome.path is not None:
        return f"{head}; they are in {outcome.path}, and the next open of the session appends them to its journal"
    return f"{head}, and no rescue file could be written either ({'; '.join(outcome.errors)}): free some space and retry"
