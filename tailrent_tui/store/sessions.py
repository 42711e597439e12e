"""Session directories: create, list, find, lock, open (replay) and close.

    <data>/sessions/<id>/          mode 0700
        meta.json                  id, title, created, last_active, model, workspace, policy,
                                   window, tokenizer and framing, system prompt (+ a summary cache for listing)
        journal.jsonl              every event (see journal.py)
        spill/<uuid>.json          spilled tool results
        archive/fold-0001.json     the originals of each fold
        memory/<key>.json          remembered artifacts
        lock                       pid/host/started of the process that has the session open

Every file is 0600. Only one process may have a session open: the lock is an
flock on `lock` (the kernel drops it when the process dies), and the file's
contents name the holder so a second process is refused with a message that
says who has it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from tailrent_tui.core.kv_slots import SlotRecord
from tailrent_tui.core.messages import Event, EventAdapter, Kind, UsageRecorded
from tailrent_tui.core.session import DecisionMatcher, Session, SessionError
from tailrent_tui.core.tokens import Framing, TokenCounter, get_counter
from tailrent_tui.store.archive import FileFoldArchive
from tailrent_tui.store.journal import (
    JOURNAL_NAME,
    AsyncJournalWriter,
    JournalWriter,
    LoadResult,
    Writer,
    _read,
    attach,
    header_line,
    replay_journal,
)
from tailrent_tui.store.kv_slots import SlotListing, session_slots
from tailrent_tui.store.memory import MemoryStore
from tailrent_tui.store.paths import (
    FILE_MODE,
    check_name,
    clean_stale_temp_files,
    ensure_private_dir,
    new_session_id,
    sessions_root,
    write_file_atomic,
)
from tailrent_tui.store.rescue import RESCUE_DIR, RescueOutcome, rescue_unsaved, state_rescue_dir, unsaved_message
from tailrent_tui.store.spills import FileSpillStore


class SessionLookupError(LookupError):
    """No session matches an id (or a prefix matches several)."""


class SessionLocked(RuntimeError):
    """Another process has the session open."""


class SessionSummary(BaseModel):
    """Counts cached in meta.json for `tailrent sessions`; valid while the journal size matches."""

    journal_bytes: int
    messages: int
    folds: int
    pinned: int
    context_tokens: int
    last_request_at: float | None = None


class SessionMeta(BaseModel):
    id: str
    title: str = ""
    created: float = Field(default_factory=time.time)
    last_active: float = Field(default_factory=time.time)
    model: str | None = None
    model_spec: str | None = Field(
        None, description="the spec its model was opened with, which a resume reopens; None when it held credentials"
    )
    workspace: str | None = None
    policy: str | None = None
    window: int = 32768
    tokenizer: str = Field(
        "cl100k", description="what counts the session's text: cl100k, chars4, or server (the model server's own)"
    )
    framing: Framing = Field(default_factory=Framing, description="what the server adds around the texts (its chat template)")
    system: str = ""
    tool_schema_tokens: int = 0
    summary: SessionSummary | None = None
    slots: list[SlotRecord] = Field(
        default_factory=list, description="KV slot files the server saved for this session (store/kv_slots.py)"
    )


class SessionInfo(BaseModel):
    """One row of `tailrent sessions`."""

    id: str
    title: str
    created: float
    last_active: float
    messages: int | None = None
    folds: int | None = None
    pinned: int | None = None
    context_tokens: int | None = None
    path: Path
    error: str | None = Field(default=None, description="why the counts are missing (an unreadable journal)")
    note: str | None = Field(default=None, description="what was damaged and rebuilt (meta.json from the journal)")
    slots: list[SlotListing] = Field(default_factory=list, description="the session's KV slot files (sized when slot_dir is set)")

    @property
    def blank(self) -> bool:
        """Readable and without a message or a fold: opened and left, or killed, before a message was sent."""
        return self.error is None and self.messages == 0 and self.folds == 0


class SessionDir:
    """A session's directory and the stores inside it."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        #: set by read_meta when meta.json was damaged and the meta was rebuilt from the journal
        self.meta_note: str | None = None

    @property
    def id(self) -> str:
        return self.path.name

    @property
    def journal_path(self) -> Path:
        return self.path / JOURNAL_NAME

    @property
    def meta_path(self) -> Path:
        return self.path / "meta.json"

    @property
    def lock_path(self) -> Path:
        return self.path / "lock"

    def spills(self) -> FileSpillStore:
        return FileSpillStore(self.path / "spill")

    def archive(self) -> FileFoldArchive:
        return FileFoldArchive(self.path / "archive")

    def memory(self) -> MemoryStore:
        return MemoryStore(self.path / "memory")

    @classmethod
    def create(
        cls,
        data_dir: Path,
        *,
        title: str = "",
        model: str | None = None,
        workspace: Path | str | None = None,
        policy: str | None = None,
        window: int = 32768,
        tokenizer: str = "cl100k",
        framing: Framing | None = None,
        system: str = "",
        tool_schema_tokens: int = 0,
        session_id: str | None = None,
        now: float | None = None,
    ) -> SessionDir:
        """Make a new session directory (0700) with meta.json and the journal header (0600)."""
        now = time.time() if now is None else now
        sid = check_name(session_id or new_session_id(now), "session id")
        root = ensure_private_dir(sessions_root(data_dir))
        path = root / sid
        try:
            path.mkdir(mode=0o700)
        except FileExistsError:
            raise SessionLookupError(f"session {sid} already exists in {root}") from None
        try:
            os.chmod(path, 0o700)
            sd = cls(path)
            for sub in ("spill", "archive", "memory"):
                ensure_private_dir(path / sub)
            meta = SessionMeta(
                id=sid,
                title=title,
                created=now,
                last_active=now,
                model=model,
                workspace=str(workspace) if workspace is not None else None,
                policy=policy,
                window=window,
                tokenizer=tokenizer,
                framing=framing or Framing(),
                system=system,
                tool_schema_tokens=tool_schema_tokens,
            )
            sd.write_meta(meta)
            write_file_atomic(sd.journal_path, header_line(sid, now))
        except BaseException:
            # a full disk or a read-only data dir: leave no half-made session for `sessions` to list
            shutil.rmtree(path, ignore_errors=True)
            raise
        return sd

    def read_meta_file(self) -> tuple[SessionMeta | None, str | None]:
        """meta.json as it is on disk, or None and what is wrong with it (one line)."""
        try:
            raw = self.meta_path.read_bytes()
        except FileNotFoundError:
            return None, "meta.json is missing"
        except OSError as exc:
            return None, f"meta.json cannot be read ({exc.strerror or exc})"
        try:
            meta = SessionMeta.model_validate(json.loads(raw.decode("utf-8")))
        except (ValueError, ValidationError) as exc:
            why = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else " ".join(str(exc).split())
            return None, f"meta.json is not valid ({type(exc).__name__}: {why[:120]})"
        if meta.id != self.id:
            return None, f"meta.json belongs to another session ({meta.id})"
        return meta, None

    def read_meta(self) -> SessionMeta:
        """The session's meta; when meta.json is damaged (missing, empty, cut, another session's), rebuilt
        from the journal, with `meta_note` saying so. SessionLookupError when neither can be read."""
        meta, problem = self.read_meta_file()
        if meta is not None:
            self.meta_note = None
            return meta
        rebuilt = self._meta_from_journal()
        if rebuilt is None:
            if not self.journal_path.exists() and problem == "meta.json is missing":
                raise SessionLookupError(f"{self.path} is not a tailrent session (no meta.json, no journal)")
            raise SessionLookupError(
                f"session {self.id}: {problem}, and its journal cannot rebuild it; "
                f"`tailrent sessions repair {self.id}` says what is left"
            )
        self.meta_note = (
            f"{problem}; rebuilt from the journal (model, window and system prompt come from your settings): "
            f"`tailrent sessions repair {self.id} --apply` writes it back"
        )
        return rebuilt

    def _meta_from_journal(self) -> SessionMeta | None:
        """What the journal says of the session: its id, when it began, its title (the first message)."""
        try:
            with self.journal_path.open("rb") as f:
                first = f.readline(1 << 16)
            header = json.loads(first)
            if not isinstance(header, dict) or header.get("journal") != "tailrent":
                return None
            created = float(header.get("created") or self.journal_path.stat().st_mtime)
            mtime = self.journal_path.stat().st_mtime
        except (OSError, ValueError, TypeError):
            return None
        title = ""
        try:
            for event in self.events():
                message = getattr(event, "message", None)
                if message is not None and message.role == "user" and message.kind == Kind.chat:
                    line = " ".join(message.content.strip().split())
                    title = line[:60] + ("…" if len(line) > 60 else "")
                    break
        except Exception:  # the title is a nicety: a journal that cannot be read is said where it is read
            title = ""
        return SessionMeta(id=self.id, title=title, created=created, last_active=mtime)

    def write_meta(self, meta: SessionMeta) -> None:
        write_file_atomic(self.meta_path, meta.model_dump_json(indent=2).encode("utf-8"))

    def update_meta(self, **changes: Any) -> SessionMeta:
        meta = self.read_meta().model_copy(update=changes)
        self.write_meta(meta)
        return meta

    def new_session(
        self, *, decisions: DecisionMatcher | None = None, meta: SessionMeta | None = None, counter: TokenCounter | None = None
    ) -> Session:
        """An empty core Session configured from meta (tokenizer, framing, system prompt, window).

        `counter` is the one meta's tokenizer names when it is the model server's,
        which only the agent can reach; without it, such a session's new text is
        counted like cl100k (a replay only reads the counts its journal holds).
        """
        meta = meta or self.read_meta()
        return Session(
            counter=counter or get_counter(meta.tokenizer),
            system=meta.system,
            window=meta.window,
            tool_schema_tokens=meta.tool_schema_tokens,
            framing=meta.framing,
            decisions=decisions,
            id=meta.id,
        )

    def replay(
        self, *, decisions: DecisionMatcher | None = None, save_torn: bool = True, counter: TokenCounter | None = None
    ) -> tuple[Session, LoadResult]:
        """Rebuild the session from its journal (read only; no lock)."""
        session = self.new_session(decisions=decisions, counter=counter)
        result = replay_journal(self.journal_path, session, save_torn=save_torn)
        return session, result

    def events(self, *, save_torn: bool = False) -> list[Event]:
        out: list[Event] = []
        _read(self.journal_path, save_torn, lambda n, ev: out.append(ev))
        return out

    def acquire_lock(self) -> SessionLock:
        return SessionLock.acquire(self.lock_path)

    def summarize(self, session: Session) -> SessionSummary:
        size = self.journal_path.stat().st_size
        return SessionSummary(
            journal_bytes=size,
            messages=sum(1 for m in session.messages if m.kind != Kind.instructions),
            folds=len(session.folds),
            pinned=sum(1 for m in session.messages if m.pinned),
            context_tokens=session.context_tokens,
            last_request_at=last_request_at(session),
        )

    def info(self, slot_dir: Path | None = None) -> SessionInfo:
        """Counts for listing: from the cached summary if the journal has not grown, else a replay."""
        meta = self.read_meta()
        slots = session_slots(meta.id, meta.slots, slot_dir)
        try:
            mtime = self.journal_path.stat().st_mtime
            size = self.journal_path.stat().st_size
        except OSError as exc:
            return SessionInfo(
                id=meta.id,
                title=meta.title,
                created=meta.created,
                last_active=meta.last_active,
                path=self.path,
                error=f"no journal ({exc.strerror})",
                note=self.meta_note,
                slots=slots,
            )
        summary = meta.summary if meta.summary and meta.summary.journal_bytes == size else None
        error = None
        if summary is None:
            try:
                session, _ = self.replay(save_torn=False)
                summary = self.summarize(session)
            except Exception as exc:  # a listing shows a broken session instead of failing
                error = str(exc)
        return SessionInfo(
            id=meta.id,
            title=meta.title,
            created=meta.created,
            last_active=max(meta.last_active, mtime),
            messages=summary.messages if summary else None,
            folds=summary.folds if summary else None,
            pinned=summary.pinned if summary else None,
            context_tokens=summary.context_tokens if summary else None,
            path=self.path,
            error=error,
            note=self.meta_note,
            slots=slots,
        )


class LockInfo(BaseModel):
    pid: int
    host: str
    started: float


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class SessionLock:
    """An flock held on the session's `lock` file for as long as the session is open."""

    def __init__(self, path: Path, fd: int, info: LockInfo, took_over: str | None) -> None:
        self.path = path
        self._fd: int | None = fd
        self.info = info
        self.took_over = took_over

    @classmethod
    def acquire(cls, path: Path) -> SessionLock:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, FILE_MODE)
        except OSError as exc:
            raise SessionLocked(
                f"cannot open the lock file {path} ({exc.strerror or exc}): if no tailrent has session "
                f"{path.parent.name} open, remove {path} and try again"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            held = _read_lock(fd)
            os.close(fd)
            who = _describe(held) if held else "another process"
            raise SessionLocked(f"session {path.parent.name} is already open in {who}; close it there first") from None
        previous = _read_lock(fd)
        host = socket.gethostname()
        took_over = None
        if previous is not None and previous.pid != os.getpid():
            if previous.host != host:
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
                raise SessionLocked(
                    f"session {path.parent.name} is locked by {_describe(previous)}; this host cannot check "
                    f"that process: if it is gone, delete {path}"
                )
            if _pid_alive(previous.pid):
                # alive but not holding the flock: a pid reused by an unrelated process after a crash
                took_over = f"took over the lock of {_describe(previous)} (that process no longer holds it)"
            else:
                took_over = f"took over a stale lock of {_describe(previous)}, which is no longer running"
        info = LockInfo(pid=os.getpid(), host=host, started=time.time())
        os.ftruncate(fd, 0)
        os.pwrite(fd, info.model_dump_json().encode("utf-8"), 0)
        os.fsync(fd)
        return cls(path, fd, info, took_over)

    def release(self) -> None:
        if self._fd is None:
            return
        # emptied, so the next opener knows the session was closed cleanly
        os.ftruncate(self._fd, 0)
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None

    def __enter__(self) -> SessionLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _read_lock(fd: int) -> LockInfo | None:
    raw = os.pread(fd, 4096, 0)
    if not raw.strip():
        return None
    try:
        return LockInfo.model_validate_json(raw)
    except ValidationError:
        return None


def _describe(info: LockInfo) -> str:
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(info.started))
    return f"process {info.pid} on {info.host} (since {started})"


# -- finding sessions --------------------------------------------------------


def session_dirs(data_dir: Path) -> list[SessionDir]:
    root = sessions_root(data_dir)
    if not root.is_dir():
        return []
    # a session whose meta.json is lost is still listed from its journal
    return [SessionDir(p) for p in sorted(root.iterdir()) if (p / "meta.json").is_file() or (p / JOURNAL_NAME).is_file()]


def find_session(data_dir: Path, ref: str) -> SessionDir:
    """The session whose id is `ref` or starts with it; a clear error if none or several."""
    ref = ref.strip()
    if not ref:
        raise SessionLookupError("give a session id (or a unique prefix of one)")
    dirs = session_dirs(data_dir)
    exact = [d for d in dirs if d.id == ref]
    if exact:
        return exact[0]
    matches = [d for d in dirs if d.id.startswith(ref)]
    if not matches:
        where = sessions_root(data_dir)
        raise SessionLookupError(f"no session {ref!r} in {where} (`tailrent sessions` lists them)")
    if len(matches) > 1:
        names = ", ".join(d.id for d in matches[:8]) + (" ..." if len(matches) > 8 else "")
        raise SessionLookupError(f"session id {ref!r} is ambiguous: it matches {names}")
    return matches[0]


def list_sessions(data_dir: Path, slot_dir: Path | None = None) -> list[SessionInfo]:
    """Every session, most recently active first (with slot_dir, its slot files sized on disk)."""
    infos = []
    for d in session_dirs(data_dir):
        try:
            info = d.info(slot_dir)
        except SessionLookupError:
            continue
        if info.blank and not rescue_files(d):
            continue
        infos.append(info)
    return sorted(infos, key=lambda i: i.last_active, reverse=True)


def last_active(data_dir: Path) -> SessionDir | None:
    """The most recently active session (for `--continue`), by meta last_active and journal mtime.

    A blank session is passed over, silently: a process killed before its first
    message leaves one (a normal exit removes it), and it holds nothing to continue.
    """
    stamped: list[tuple[float, SessionDir]] = []
    for d in session_dirs(data_dir):
        try:
            meta = d.read_meta()
            stamped.append((max(meta.last_active, d.journal_path.stat().st_mtime), d))
        except (SessionLookupError, OSError):
            continue
    # newest first; a stable sort keeps the directory order among equal stamps
    for _, d in sorted(stamped, key=lambda item: item[0], reverse=True):
        try:
            # the cached summary, or a replay (a killed process left none); a session whose
            # first message waits in a rescue file (a full disk) is not blank
            if d.info().blank and not rescue_files(d):
                continue
        except SessionLookupError:
            continue
        return d
    return None


def resolve_session(data_dir: Path, *, continue_: bool = False, resume: str | None = None) -> SessionDir | None:
    """`--resume ID` or `--continue`; None means start a new session."""
    if resume:
        return find_session(data_dir, resume)
    if continue_:
        found = last_active(data_dir)
        if found is None:
            raise SessionLookupError(
                f"no session to continue in {sessions_root(data_dir)}; start a new session: leave out --continue"
            )
        return found
    return None


# -- time since the last request (for the rent model) -------------------------


def last_request_at(session: Session) -> float | None:
    """When the last model request was made (its UsageRecorded event), or None if never."""
    usage: list[UsageRecorded] = session.usage
    return usage[-1].at if usage else None


# -- opening and closing --------------------------------------------------------


@dataclass
class OpenedSession:
    """A session `open_session` opened: replayed, its writer attached, its lock held until `close_session`."""

    session: Session
    writer: Writer
    session_dir: SessionDir
    #: the flock that keeps other processes out; None when opened with `lock=False`
    lock: SessionLock | None
    #: what the user must be told once: a torn tail that was skipped, rescued lines appended, a stale lock taken over
    warnings: list[str] = field(default_factory=list)


def open_session(
    session_dir: SessionDir | Path,
    *,
    decisions: DecisionMatcher | None = None,
    fsync: bool = True,
    async_writer: bool = False,
    lock: bool = True,
    on_status: Any = None,
    counter: TokenCounter | None = None,
) -> OpenedSession:
    """Lock the session, replay its journal, attach a writer; close it with `close_session`.

    With `async_writer` the writer is an `AsyncJournalWriter` (the app); else a
    `JournalWriter`. `counter` counts the session's new text (see
    `SessionDir.new_session`).
    """
    sd = session_dir if isinstance(session_dir, SessionDir) else SessionDir(Path(session_dir))
    held = sd.acquire_lock() if lock else None
    try:
        # a kill mid-write leaves temp files; only this session's, only their dead writers'
        clean_stale_temp_files(sd.path, *(p for p in sd.path.iterdir() if p.is_dir() and not p.is_symlink()))
        session, result = sd.replay(decisions=decisions, counter=counter)
        restored, stale = restore_rescued(sd, session)
        if stale:
            session, _ = sd.replay(decisions=decisions, counter=counter, save_torn=False)
        sd.update_meta(last_active=time.time())
    except BaseException:
        if held is not None:
            held.release()
        raise
    writer: Writer
    if async_writer:
        writer = AsyncJournalWriter(sd.journal_path, fsync=fsync, on_status=on_status)
    else:
        writer = JournalWriter(sd.journal_path, fsync=fsync)
    warnings = [*result.warnings, *restored]
    if held is not None and held.took_over:
        warnings.append(held.took_over)
    attach(session, writer)
    return OpenedSession(session, writer, sd, held, warnings)


def rescue_files(sd: SessionDir) -> list[Path]:
    """The session's rescue files (what an earlier close could not write), oldest first."""
    pattern = re.compile(rf"^unsaved-{re.escape(sd.id)}-\d{{8}}T\d{{6}}-\d+\.jsonl$")
    dirs = (sd.path.parent.parent / RESCUE_DIR, state_rescue_dir())
    return sorted((p for d in dirs if d.is_dir() for p in d.iterdir() if pattern.match(p.name)), key=lambda p: p.name)


def restore_rescued(sd: SessionDir, session: Session) -> tuple[list[str], bool]:
    """Append the lines an earlier close could not save (its rescue files) to the journal.

    Run while the lock is held, right after the replay, before anything new is
    journaled: the rescued events are the ones that came next. A file is
    removed once its lines are on disk (the journal first, then the unlink, so
    a kill in between leaves a file whose first line no longer replays, which
    is reported, not applied twice). Returns what to tell the user and whether
    `session` no longer matches the journal (a refused event or a failed
    write), in which case the caller replays again.
    """
    found = rescue_files(sd)
    notes: list[str] = []
    for path in found:
        try:
            lines = [line if line.endswith(b"\n") else line + b"\n" for line in path.read_bytes().splitlines(keepends=True)]
            events = [EventAdapter.validate_json(line) for line in lines]
        except (OSError, ValidationError) as exc:
            notes.append(f"rescue file {path} cannot be read ({type(exc).__name__}); it is left as it is")
            continue
        applied = 0
        try:
            for event in events:
                session.apply(event, owned=True)
                applied += 1
        except SessionError as exc:
            notes.append(f"rescue file {path}: line {applied + 1} does not follow the journal ({exc}); it is left as it is")
            return notes, applied > 0
        writer = JournalWriter(sd.journal_path)
        try:
            for line in lines:
                writer.append_line(line)
            saved = writer.flush()
        finally:
            writer.close()
        if not saved:
            notes.append(f"rescue file {path} could not be appended to the journal yet ({writer.last_error}); it is kept")
            with contextlib.suppress(OSError):
                write_file_atomic(path, b"".join(writer.unsaved_lines()))
            return notes, True
        path.unlink(missing_ok=True)
        notes.append(f"{len(events)} change(s) that an earlier run could not save were restored from {path}")
    return notes, False


class CloseReport(BaseModel):
    """What `close_session` could and could not save; `message` is the one line to show when not all of it."""

    journal: Path
    pending: int = Field(0, description="events accepted but not on disk; they are in the rescue file")
    journal_error: str | None = None
    rescue: RescueOutcome | None = None
    meta_error: str | None = Field(None, description="why meta.json's last_active and listing summary were not updated")
    discarded: bool = Field(False, description="the session was blank (no message sent) and its directory removed")
    close_error: str | None = Field(None, description="the journal's file did not close cleanly (the writer's line)")

    @property
    def saved(self) -> bool:
        """Every event is in the journal (the meta update is only a cache)."""
        return self.pending == 0

    def message(self) -> str | None:
        """One line for the terminal: what was lost from the journal, else what meta.json missed,
        else a failed close, else None (a failed close is added to the others)."""
        noticed = self.close_error or ""
        if self.rescue is not None:
            lost = unsaved_message(self.pending, self.journal, self.journal_error, self.rescue)
            return f"{lost} ({noticed})" if noticed else lost
        if self.meta_error is not None:
            return (
                f"every change is saved in {self.journal}, but {self.meta_error}; "
                "`tailrent sessions` reads the journal instead, nothing to do" + (f" ({noticed})" if noticed else "")
            )
        return noticed or None


def close_session(opened: OpenedSession, *, discard_blank: bool = False) -> CloseReport:
    """Flush (sync writer), close, cache the listing summary in meta, release the lock.

    Never raises for a failed write: the report says what could not be saved.
    Lines still pending go to a rescue file (`store/rescue.py`); meta.json is
    then left as it was (its summary would count events the journal lacks),
    and the report says so. For an AsyncJournalWriter, `await writer.aclose()` first.
    With `discard_blank` (the app, `ask`), a session where no message was sent is removed.
    """
    session, writer, sd = opened.session, opened.writer, opened.session_dir
    report = CloseReport(journal=writer.path)
    try:
        if isinstance(writer, JournalWriter):
            writer.flush()
        writer.close()
        report.close_error = writer.close_error
        report.pending = writer.pending
        if report.pending:
            report.journal_error = str(writer.last_error) if writer.last_error else "not written"
            report.rescue = rescue_unsaved(session.id or sd.id, writer.unsaved_lines(), sd.path.parent.parent)
            report.meta_error = "meta.json was not updated (the journal is missing events)"
        else:
            try:
                sd.update_meta(last_active=time.time(), summary=sd.summarize(session))
            except (OSError, SessionLookupError) as exc:
                report.meta_error = f"meta.json could not be updated ({getattr(exc, 'strerror', None) or exc})"
    finally:
        if opened.lock is not None:
            # the kernel drops the flock when the process ends
            with contextlib.suppress(OSError):
                opened.lock.release()
    if discard_blank and session.blank and report.saved:
        # a session exists once a message is sent: an app opened and closed, or an `ask`
        # that failed before its message, leaves nothing behind in `tailrent sessions`
        shutil.rmtree(sd.path, ignore_errors=True)
        report.meta_error = None
        report.discarded = True
    return report


def close_session_sync(opened: OpenedSession, *, discard_blank: bool = False) -> CloseReport:
    """`close_session` for when no event loop runs (the app's has ended, or never started):
    an AsyncJournalWriter's queued lines are written the plain way first. The lock is
    released whatever happens."""
    if isinstance(opened.writer, AsyncJournalWriter):
        # what is left is still queued: close_session rescues it
        with contextlib.suppress(OSError):
            opened.writer.close_sync()
    return close_session(opened, discard_blank=discard_blank)
