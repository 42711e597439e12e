"""The journal: every core event of a session, one JSON line each, append-only.

Layout of `journal.jsonl`:

    {"journal": "tailrent", "version": 1, "session": "<id>", "created": <epoch>}
    {"type": "message_added", ...}          one event per line, EventAdapter.dump_json
    ...

Rules that keep a crash, a kill or a full disk from costing a message:

- the header is written once, to a temp file that is fsynced and renamed;
- every event is serialized to its whole line (with the newline) before the
  write, written with `os.write` on an O_APPEND descriptor and fsynced (unless
  `fsync=False`); nothing is ever truncated or rewritten in place;
- if a write fails (ENOSPC, EROFS, EACCES), the unsaved lines stay in memory,
  in order (`pending`, `last_error`), and are written on the next append or an
  explicit `retry()`. A short write is finished from where it stopped, so a
  line is never written twice;
- a torn last line (the process died mid-write) is loaded around: everything
  before it is kept, its bytes are copied to `journal.torn-<time>`, and the
  next writer starts a fresh line and appends a marker
  `{"journal_torn": {...}}` so later loads know the line is a known torn
  fragment, not corruption. That fix-up can itself be cut short by a kill or
  a full disk: a last line that is not JSON is torn even with its newline
  (the newline was the fix-up's first byte), the next writer marks it, and a
  marker cut short still marks the line before it;
- a bad line anywhere else is `JournalCorrupt`, naming the file and the line;
  `repair_journal` writes a repaired copy beside the original.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import PydanticSerializationError

from tailrent_tui.core.messages import Event, EventAdapter
from tailrent_tui.core.session import Session, SessionError
from tailrent_tui.store.paths import FILE_MODE, write_file_atomic
from tailrent_tui.text import storable_value

JOURNAL_NAME = "journal.jsonl"
JOURNAL_VERSION = 1
TORN_KEY = "journal_torn"
_TORN_PREFIX = b'{"' + TORN_KEY.encode() + b'"'


class JournalError(Exception):
    """The journal cannot be read as it is."""


class JournalVersionError(JournalError):
    """The journal was written by a newer tailrent."""


class JournalCorrupt(JournalError):
    """A line in the middle of the journal is not a valid event."""

    def __init__(self, path: Path, line_no: int, reason: str) -> None:
        self.path = Path(path)
        self.line_no = line_no
        self.reason = reason
        super().__init__(
            f"{self.path}: line {line_no} is corrupted ({reason}). "
            f"Nothing was changed; `tailrent sessions repair {self.path.parent.name}` writes a repaired copy."
        )


class JournalHeader(BaseModel):
    model_config = ConfigDict(extra="allow")

    journal: Literal["tailrent"] = "tailrent"
    version: int = JOURNAL_VERSION
    session: str
    created: float = Field(default_factory=time.time)


class LoadResult(BaseModel):
    """What `load_journal` read: the events, and what it had to step around."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    events: list[Event]
    header: JournalHeader
    torn: bool = False
    torn_bytes_path: Path | None = None
    warnings: list[str] = Field(default_factory=list)
    healed_lines: list[int] = Field(
        default_factory=list, description="torn lines from earlier crashes, marked by a later writer and skipped"
    )
    line_numbers: list[int] = Field(default_factory=list, description="1-based journal line of each event")


def header_line(session_id: str, created: float | None = None) -> bytes:
    h = JournalHeader(session=session_id, created=time.time() if created is None else created)
    return h.model_dump_json().encode("utf-8") + b"\n"


def event_line(event: Event) -> bytes:
    """The whole journal line for an event, newline included.

    Text that no UTF-8 line can hold (a surrogate escape from argv or a file name that
    slipped past its boundary) is stored decoded with U+FFFD (`text.storable`), never
    dropped with an error after the caller was told it was kept."""
    try:
        return EventAdapter.dump_json(event) + b"\n"
    except PydanticSerializationError:
        data = storable_value(EventAdapter.dump_python(event, mode="json", warnings=False))
        return EventAdapter.dump_json(EventAdapter.validate_python(data)) + b"\n"


def _parse_header(path: Path, raw: bytes) -> JournalHeader:
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise JournalCorrupt(path, 1, f"the header is not JSON: {exc}") from None
    if not isinstance(data, dict) or data.get("journal") != "tailrent":
        raise JournalCorrupt(path, 1, "the first line is not a tailrent journal header")
    version = data.get("version")
    if not isinstance(version, int):
        raise JournalCorrupt(path, 1, f"the header's version is {version!r}, not a number")
    if version > JOURNAL_VERSION:
        raise JournalVersionError(
            f"{path}: journal version {version} is newer than this tailrent ({JOURNAL_VERSION}): upgrade tailrent"
        )
    try:
        return JournalHeader.model_validate(data)
    except ValidationError as exc:
        raise JournalCorrupt(path, 1, f"bad header: {exc.errors()[0]['msg']}") from None


def _is_marker(raw: bytes) -> bool:
    """A torn-line marker, whole or cut short: its first bytes are the marker's (no event line starts so)."""
    raw = raw.rstrip(b"\n")
    return raw.startswith(_TORN_PREFIX) or (len(raw) >= 3 and _TORN_PREFIX.startswith(raw))


def _is_json(raw: bytes) -> bool:
    try:
        json.loads(raw)
    except ValueError:
        return False
    return True


def _parse_event(raw: bytes) -> tuple[Event | None, str]:
    try:
        return EventAdapter.validate_json(raw), ""
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err.get("loc", ()))
        return None, f"{err['msg']}{' at ' + where if where else ''}"


def save_torn_bytes(path: Path, tail: bytes) -> tuple[Path, bool]:
    """Copy a torn tail to `journal.torn-<time>` beside the journal; reuse an identical copy.

    Returns the side file and whether it was newly written.
    """
    for existing in sorted(path.parent.glob(path.stem + ".torn-*")):
        try:
            if existing.stat().st_size == len(tail) and existing.read_bytes() == tail:
                return existing, False
        except OSError:
            continue
    stamp = time.strftime("%Y%m%dT%H%M%S") + f"-{time.time_ns() % 1_000_000_000:09d}"
    side = path.with_name(f"{path.stem}.torn-{stamp}")
    write_file_atomic(side, tail)
    return side, True


def iter_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """(1-based line number, raw bytes including the newline if any), read in big chunks."""
    with open(path, "rb") as f:
        n = 0
        while True:
            batch = f.readlines(1 << 22)
            if not batch:
                return
            for raw in batch:
                n += 1
                yield n, raw


def load_journal(path: Path, *, save_torn: bool = True) -> LoadResult:
    """Read a journal: header, events, and a report of any torn tail.

    Refuses a newer journal version (`JournalVersionError`); a bad line that
    is not the last one raises `JournalCorrupt`. The file is only read.
    """
    events: list[Event] = []
    numbers: list[int] = []

    def keep(n: int, ev: Event) -> None:
        events.append(ev)
        numbers.append(n)

    result = _read(Path(path), save_torn, keep)
    result.events = events
    result.line_numbers = numbers
    return result


def _read(path: Path, save_torn: bool, on_event: Callable[[int, Event], Any]) -> LoadResult:
    """The loader proper: calls `on_event(line_no, event)` for each event in order."""
    if not path.exists():
        raise JournalError(
            f"{path}: no journal here: the session's transcript is gone (the rest of its directory is left as it "
            "is); restore journal.jsonl from a backup, or start a new session"
        )
    header: JournalHeader | None = None
    suspect: tuple[int, str] | None = None  # a bad line that only a torn marker may excuse
    suspect_body = b""
    healed: list[int] = []
    warnings: list[str] = []
    torn = False
    torn_path: Path | None = None
    for n, raw in iter_lines(path):
        complete = raw.endswith(b"\n")
        body = raw[:-1] if complete else raw
        if header is None:
            if not complete:
                raise JournalCorrupt(path, 1, "the header line is incomplete")
            header = _parse_header(path, body)
            continue
        if _is_marker(body):
            if suspect is not None:
                healed.append(suspect[0])
                suspect = None
            continue
        if suspect is not None:
            raise JournalCorrupt(path, *suspect)
        # the raw line: a trailing newline is JSON whitespace, and slicing it off copies every line
        event, reason = _parse_event(raw)
        if event is not None:
            on_event(n, event)
            continue
        if complete:
            suspect, suspect_body = (n, reason), body
            continue
        # the last line, without its newline and not an event: the writer died mid-line
        torn = True
        torn_path = _torn_tail(path, body, save_torn, warnings)
    if header is None:
        raise JournalCorrupt(path, 1, "the journal is empty (no header)")
    if suspect is not None:
        if _is_json(suspect_body):
            # a whole line that is no event (a later tailrent's, or damage): never skipped quietly
            raise JournalCorrupt(path, *suspect)
        # the last line is a fragment with a newline: the fix-up after a torn line was cut off
        # after its first byte (a kill, a full disk), so the fragment is torn like any other
        torn = True
        torn_path = _torn_tail(path, suspect_body, save_torn, warnings)
    return LoadResult(events=[], header=header, torn=torn, torn_bytes_path=torn_path, warnings=warnings, healed_lines=healed)


def _torn_tail(path: Path, body: bytes, save_torn: bool, warnings: list[str]) -> Path | None:
    """Report a torn last line (and copy its bytes beside the journal unless the load is read-only)."""
    torn_path = None
    if save_torn:
        torn_path, fresh = save_torn_bytes(path, body)
        where = f"saved to {torn_path.name}" + ("" if fresh else " (earlier)")
    else:
        where = "not saved (read-only load)"
    warnings.append(
        f"{path.name}: the last line ({len(body)} bytes) was torn by an interrupted write and is skipped; "
        f"its bytes are {where}; every line before it is loaded"
    )
    return torn_path


def replay_journal(path: Path, session: Session, *, save_torn: bool = True) -> LoadResult:
    """Stream the journal's events into `session.apply` without keeping them (for big journals).

    An event that the session refuses (a pin of a message never added) is
    reported as `JournalCorrupt` at its line.
    """

    def apply(n: int, event: Event) -> None:
        try:
            session.apply(event, owned=True)
        except SessionError as exc:
            raise JournalCorrupt(path, n, f"event cannot be replayed: {exc}") from None

    return _read(Path(path), save_torn, apply)


class RepairReport(BaseModel):
    path: Path
    kept: int
    skipped: list[tuple[int, str]]


def repair_journal(path: Path) -> RepairReport:
    """Write `journal.repaired.jsonl` beside `path`, keeping every line that loads and replays.

    Skipped lines (not JSON, not an event, an event the replay refuses, a torn
    tail) are listed with their 1-based line number. The original is not touched.
    """
    path = Path(path)
    out: list[bytes] = []
    skipped: list[tuple[int, str]] = []
    probe = Session(counter=_NullCounter())
    header: JournalHeader | None = None
    for n, raw in iter_lines(path):
        body = raw.rstrip(b"\n")
        if n == 1:
            try:
                header = _parse_header(path, body)
            except JournalVersionError:
                raise
            except JournalCorrupt as exc:
                skipped.append((1, exc.reason + "; a new header was written"))
                header = JournalHeader(session=path.parent.name)
            out.append(header.model_dump_json().encode("utf-8") + b"\n")
            continue
        if _is_marker(body):
            continue
        event, reason = _parse_event(body)
        if event is None:
            skipped.append((n, reason if raw.endswith(b"\n") else f"torn last line ({reason})"))
            continue
        try:
            probe.apply(event)
        except SessionError as exc:
            skipped.append((n, f"cannot be replayed: {exc}"))
            continue
        out.append(event_line(event))
    if header is None:
        raise JournalError(f"{path}: empty, nothing to repair")
    target = path.with_name(path.stem + ".repaired.jsonl")
    write_file_atomic(target, b"".join(out))
    return RepairReport(path=target, kept=len(out) - 1, skipped=skipped)


class _NullCounter:
    """Replay never counts tokens (they are on the events); repair needs no tokenizer."""

    name = "none"

    def count(self, text: str) -> int:
        return 0


def _tail_after_last_newline(path: Path) -> bytes:
    """The bytes after the file's last newline (empty if it ends with one)."""
    with open(path, "rb") as f:
        end = f.seek(0, os.SEEK_END)
        pos = end
        chunk = 1 << 16
        while pos > 0:
            start = max(0, pos - chunk)
            f.seek(start)
            block = f.read(pos - start)
            i = block.rfind(b"\n")
            if i >= 0:
                f.seek(start + i + 1)
                return f.read()
            pos = start
        f.seek(0)
        return f.read()


def _last_line(path: Path) -> bytes | None:
    """The last whole line of a file that ends with a newline (without it); None when it is the first line."""
    with open(path, "rb") as f:
        end = f.seek(0, os.SEEK_END)
        stop = end - 1  # the file's last newline, ending the line wanted
        pos = stop
        chunk = 1 << 16
        while pos > 0:
            start = max(0, pos - chunk)
            f.seek(start)
            i = f.read(pos - start).rfind(b"\n")
            if i >= 0:
                f.seek(start + i + 1)
                return f.read(stop - (start + i + 1))
            pos = start
        return None


def _fresh_line_fixup(path: Path) -> bytes:
    """What to write before the next line so that it starts on a fresh line.

    A tail that is a whole event without its newline only needs the newline;
    a torn fragment also gets a marker line, and its bytes a side file. A last
    line that is a fragment with its newline (the fix-up before was cut off
    after that newline) gets its marker now, before anything follows it.
    """
    tail = _tail_after_last_newline(path)
    lead = b"\n"
    if not tail:
        last = _last_line(path)
        if last is None or not last or _is_marker(last) or _is_json(last):
            return b""
        tail, lead = last, b""
    else:
        event, _ = _parse_event(tail)
        if event is not None:
            return b"\n"
    try:
        side, _ = save_torn_bytes(path, tail)
        side_name = side.name
    except OSError:
        side_name = None
    marker = {TORN_KEY: {"bytes": len(tail), "side_file": side_name, "at": time.time()}}
    return lead + json.dumps(marker).encode("utf-8") + b"\n"


class _JournalState:
    """Pending lines, error state and the one write loop, shared by the sync and async writers.

    Lines are queued on the caller's thread; `_write_now` writes them, in order,
    with plain blocking writes: the sync writer calls it at once, the async one
    in a worker thread. A lock keeps the queue whole between the two threads.
    """

    def __init__(self, path: Path, *, session_id: str | None, created: float | None, fsync: bool) -> None:
        self.path = Path(path)
        self.fsync = fsync
        self._header = header_line(session_id, created) if session_id is not None else None
        # (line bytes, counts as an event); the head may be partly written (`_offset` bytes)
        self._queue: deque[tuple[bytes, bool]] = deque()
        self._offset = 0
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._checked_tail = False
        self.last_error: OSError | None = None
        self.saved = 0
        #: a failed close, in one line (some file systems, NFS, report a lost write only there)
        self.close_error: str | None = None

    @property
    def pending(self) -> int:
        """Events accepted but not yet on disk."""
        with self._lock:
            return sum(1 for _, is_event in self._queue if is_event)

    def unsaved_lines(self) -> list[bytes]:
        """The event lines still pending (whole lines, for a rescue file)."""
        with self._lock:
            return [data for data, is_event in self._queue if is_event]

    def append_line(self, line: bytes) -> None:
        if not line.endswith(b"\n") or b"\n" in line[:-1]:
            raise ValueError("a journal line must be one line ending with a newline")
        with self._lock:
            self._queue.append((line, True))

    def _prepare_open(self) -> None:
        """Create the journal (header) if needed; queue the fresh-line fix-up for a torn tail."""
        if not self.path.exists():
            if self._header is None:
                raise JournalError(f"{self.path}: no journal to append to (give session_id to create one)")
            write_file_atomic(self.path, self._header)
        elif not self._checked_tail:
            # a torn tail was reported when the journal was loaded; here it is only closed off
            fixup = _fresh_line_fixup(self.path)
            if fixup:
                with self._lock:
                    self._queue.appendleft((fixup, False))
        self._checked_tail = True

    def _unwritten(self) -> memoryview | None:
        """What is left of the head line (a short write leaves part of it); None when nothing is queued."""
        with self._lock:
            return memoryview(self._queue[0][0])[self._offset :] if self._queue else None

    def _wrote(self, n: int) -> None:
        """`n` bytes of the head went out; a finished line leaves the queue."""
        with self._lock:
            self._offset += n
            data, is_event = self._queue[0]
            if self._offset == len(data):
                self._queue.popleft()
                self._offset = 0
                self.saved += is_event

    def _write_now(self) -> bool:
        """The write loop: open (creating the journal) if needed, write every queued line in
        order, fsync; True if nothing is left pending. An OSError keeps the rest queued."""
        try:
            if self._fd is None:
                self._prepare_open()
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND, FILE_MODE)
            wrote = False
            while (view := self._unwritten()) is not None:
                self._wrote(self._write_bytes(self._fd, view))
                wrote = True
            if wrote and self.fsync:
                os.fsync(self._fd)
        except OSError as exc:
            self.last_error = exc
            return False
        self.last_error = None
        return True

    def _write_bytes(self, fd: int, data: memoryview) -> int:
        """The one place where journal bytes leave the process (a short write is finished by the loop)."""
        return os.write(fd, data)

    def _close_fd(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                os.close(fd)
            except OSError as exc:
                note = "every line was fsynced before it" if self.fsync else "fsync is off, so the last lines may not be on disk"
                self.close_error = f"closing {self.path.name} failed ({exc.strerror or exc}); {note}"


class JournalWriter(_JournalState):
    """Synchronous appender: each `append` returns once the line is written and fsynced.

    For tests, `tailrent ask` and benchmarks. On an OSError the event stays
    pending (`pending`, `last_error`); the next `append` or `retry()` writes it.
    """

    def __init__(self, path: Path, *, session_id: str | None = None, created: float | None = None, fsync: bool = True) -> None:
        super().__init__(path, session_id=session_id, created=created, fsync=fsync)

    def append(self, event: Event) -> bool:
        """Journal one event; True if it (and everything before it) is on disk."""
        self.append_line(event_line(event))
        return self.flush()

    def append_serialized(self, line: bytes) -> bool:
        self.append_line(line)
        return self.flush()

    def retry(self) -> bool:
        return self.flush()

    def flush(self) -> bool:
        return self._write_now()

    def close(self) -> None:
        self._close_fd()

    def __enter__(self) -> JournalWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncJournalWriter(_JournalState):
    """The app's appender: `append` never blocks; a drain task runs the write loop in a thread.

    `append` must be called on the event loop's thread, or while no loop runs
    (the agent is built before the app's loop starts, and closed after it ends):
    then the line is written at once, synchronously. `drain()` waits until
    everything queued is written (or a fault stops it); `on_status(writer)` is
    called when a write fails and when a retry succeeds, so the UI can say so.
    """

    def __init__(
        self,
        path: Path,
        *,
        session_id: str | None = None,
        created: float | None = None,
        fsync: bool = True,
        on_status: Callable[[AsyncJournalWriter], None] | None = None,
    ) -> None:
        super().__init__(path, session_id=session_id, created=created, fsync=fsync)
        self.on_status = on_status
        self._task: asyncio.Task[bool] | None = None

    def append(self, event: Event) -> None:
        self.append_serialized(event_line(event))

    def append_serialized(self, line: bytes) -> None:
        self.append_line(line)
        self._kick()

    def _kick(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            # no loop to run the drain task: the app is still being built (a resume
            # note) or has ended, so the line is written now, on this thread
            self._write_now()
            return
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._flush())

    async def drain(self) -> bool:
        """Wait for the drain task; True if nothing is pending."""
        if self._task is not None:
            await asyncio.shield(self._task)
        return not self.pending

    async def retry(self) -> bool:
        if self._task is not None and not self._task.done():
            await asyncio.shield(self._task)
        self._task = asyncio.get_running_loop().create_task(self._flush())
        return await asyncio.shield(self._task)

    async def _flush(self) -> bool:
        had_error = self.last_error is not None
        while True:
            ok = await asyncio.to_thread(self._write_now)
            # lines appended while the thread wrote are on this loop's thread too: none is missed
            if not ok or not self.pending:
                break
        if (not ok or had_error) and self.on_status is not None:
            self.on_status(self)
        return ok

    async def aclose(self) -> bool:
        ok = await self.drain()
        self._close_fd()
        return ok

    def close_sync(self) -> bool:
        """After the event loop has ended: write what is still queued on this thread and
        close. True if nothing is left pending."""
        self._task = None
        ok = self._write_now() if self.pending else True
        self._close_fd()
        return ok

    def close(self) -> None:
        """Close without waiting (only when no write is running)."""
        if self._task is None or self._task.done():
            self._close_fd()


Writer = JournalWriter | AsyncJournalWriter


def attach(session: Session, writer: Writer) -> Callable[[Event], None]:
    """Journal every event the session emits from now on; returns the listener (to detach it)."""

    def listener(event: Event) -> None:
        # serialized now: the event object may be shared and changed later
        writer.append_serialized(event_line(event))

    session.listeners.append(listener)
    return listener
