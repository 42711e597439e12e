"""Reading back the stores' JSON files (fold archive, spills, memory entries).

Each file is written whole (temp, fsync, rename), so a file that is missing,
cut short or not JSON was lost or changed after the store wrote it. Either is
reported as one line naming the file, raised as the store's own
`StoreEntryError`, so a reader walking many entries skips the damaged one.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from tailrent_tui.core.ports import StoreEntryError

Record = TypeVar("Record", bound=BaseModel)


def read_record(
    path: Path, model: type[Record], what: str, *, missing: type[StoreEntryError], damaged: type[StoreEntryError]
) -> Record:
    """The record in `path`; `what` names the entry in the error ("fold #3", "spill <id>")."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise unreadable(path, what, exc, missing=missing, damaged=damaged) from None
    return parse_record(raw, path, model, what, damaged=damaged)


def unreadable(
    path: Path, what: str, exc: OSError, *, missing: type[StoreEntryError], damaged: type[StoreEntryError]
) -> StoreEntryError:
    """The store's error for a file that could not be read (missing, or an I/O error)."""
    if isinstance(exc, FileNotFoundError):
        return missing(f"{what}: file {path} is missing")
    return damaged(f"{what}: file {path} cannot be read ({exc.strerror or exc})")


def parse_record(raw: bytes, path: Path, model: type[Record], what: str, *, damaged: type[StoreEntryError]) -> Record:
    """The record in the bytes read from `path` (read here, or by the app with aiofiles: agent/async_files.py)."""
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        raise damaged(f"{what}: file {path} is not valid ({_first_error(exc)})") from None


def _first_error(exc: ValidationError) -> str:
    first = exc.errors()[0]
    text = f"{'.'.join(map(str, first['loc']))}: {first['msg']}" if first["loc"] else first["msg"]
    return " ".join(text.split())
