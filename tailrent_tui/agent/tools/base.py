"""What every tool shares: its spec, its caps, its context and its outcome.

Rung 1 of the ladder lives in the tools: each caps its own output before it
enters the context and says in one line (`ToolOutcome.cut`) what the cap cut
and how to get more. What rung 1 keeps is the head of the output (the first
matches, entries, lines or bytes); what it loses is the rest, which the model
can ask for with a narrower call. Rung 2 (spill above the threshold) is applied
to `ToolOutcome.content` afterwards by the agent.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import stat
import threading
import types
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, BinaryIO, Union, get_args, get_origin

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr

from tailrent_tui.agent.tools.caps import ToolCaps
from tailrent_tui.agent.workspace import (
    Beneath,
    FileRefused,
    WorkspaceEscape,
    file_kind,
    open_beneath,
    open_regular,
)
from tailrent_tui.store.paths import clean_stale_temp_files, resolve_data_dir, temp_name

#: A spill sink opens a fresh writable binary file and names it (path or id).
#: run_shell writes the whole of an over-cap output into it and closes it.
SpillSink = Callable[[], tuple[BinaryIO, str]]


def _integral(value: Any) -> Any:
    # JSON has one number type: 3.0 where an integer is expected is taken as 3
    return int(value) if isinstance(value, float) and value.is_integer() else value


#: the argument types a tool may take, each one JSON type, checked strictly (no "3" for 3)
String = StrictStr
Integer = Annotated[StrictInt, BeforeValidator(_integral)]
Number = StrictFloat  # takes an int too, never a bool
Boolean = StrictBool
_JSON_NAMES: dict[type, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}


def _json_type(annotation: Any) -> str:
    if get_origin(annotation) in (Union, types.UnionType):
        (annotation,) = [a for a in get_args(annotation) if a is not type(None)]
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    return _JSON_NAMES[annotation]


class ToolArgs(BaseModel):
    """A tool's arguments: one pydantic model validates a call and gives the JSON schema the model is sent.

    Fields are String, Integer, Number or Boolean; optional ones default to None
    (a JSON null counts as absent). `Field(description=...)` is what the model
    reads; `json_schema_extra` adds a hint to the schema only (a `minimum` the
    tool itself checks and explains).
    """

    model_config = ConfigDict(extra="forbid", strict=True)

    @classmethod
    def tool_schema(cls) -> dict[str, Any]:
        """The JSON schema (type: object) offered to the model: one entry per field, in order."""
        properties: dict[str, Any] = {}
        for name, info in cls.model_fields.items():
            prop: dict[str, Any] = {"type": _json_type(info.annotation)}
            if info.description:
                prop["description"] = info.description
            if isinstance(info.json_schema_extra, dict):
                prop.update(info.json_schema_extra)
            properties[name] = prop
        required = [name for name, info in cls.model_fields.items() if info.is_required()]
        return {"type": "object", "properties": properties, "required": required}


class ToolSpec(BaseModel):
    """A tool as offered to the model: name, description, JSON schema of its arguments."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    name: str
    description: str
    parameters: dict[str, Any] = Field(description="JSON schema (type: object) of the arguments")
    needs_approval: bool = Field(default=False, description="The app asks the user before running it (unless --yolo)")
    in_sub_session: bool = Field(
        default=True, description="Offered to a delegate's sub-session too (delegate itself is not: rung 3 goes one level deep)"
    )
    arguments: type[ToolArgs] | None = Field(
        default=None,
        exclude=True,
        repr=False,
        description="the model that validates a call's arguments, `parameters` derived from it (see `of`)",
    )

    @classmethod
    def of(
        cls,
        name: str,
        description: str,
        arguments: type[ToolArgs],
        *,
        needs_approval: bool = False,
        in_sub_session: bool = True,
    ) -> ToolSpec:
        """A tool whose arguments are a ToolArgs model: its schema is derived, never written by hand."""
        return cls(
            name=name,
            description=description,
            parameters=arguments.tool_schema(),
            needs_approval=needs_approval,
            in_sub_session=in_sub_session,
            arguments=arguments,
        )

    def to_wire(self) -> dict[str, Any]:
        """The neutral entry a request's `tools` list carries (each backend turns it into its own)."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


class SpillBudget:
    """Bytes spills may still take; shared by calls that run in worker threads.

    A turn's budget has the session's as its `outer`: what it grants is taken from both,
    so a turn stops at spills_turn_max_bytes and a session at spills_session_max_bytes."""

    def __init__(self, limit: int, used: int = 0, *, outer: SpillBudget | None = None) -> None:
        self.limit = limit
        self.used = used
        self.outer = outer
        self._lock = threading.Lock()

    def take(self, wanted: int) -> int:
        """Reserve up to `wanted` bytes; return how many were granted."""
        with self._lock:
            granted = max(0, min(wanted, self.limit - self.used))
            if self.outer is not None:
                granted = self.outer.take(granted)
            self.used += granted
            return granted

    def give_back(self, unused: int) -> None:
        with self._lock:
            back = min(unused, self.used)
            self.used -= back
            if self.outer is not None:
                self.outer.give_back(back)

    def restart(self) -> None:
        """A new turn: its own budget is whole again (the session's is not)."""
        with self._lock:
            self.used = 0


class ToolContext(BaseModel):
    """What a tool runs against: the workspace root, the caps, an optional spill sink."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    root: Path = Field(description="workspace root; every path is resolved inside it")
    caps: ToolCaps = Field(default_factory=ToolCaps)
    spill_sink: SpillSink | None = Field(
        default=None,
        description="when set, run_shell streams output past shell_max_bytes into it "
        "(up to shell_spill_max_bytes and the session's spill budget)",
    )
    spill_budget: SpillBudget | None = Field(
        default=None, description="what is left of the session's spills_session_max_bytes (shared by every call)"
    )
    cancel: threading.Event | None = Field(
        default=None,
        description="for a tool run in a worker thread: set when the call is cancelled (escape), "
        "and the tool stops what it started (a coroutine tool is cancelled as its task is)",
    )
    data_dir: Path | None = Field(
        default_factory=resolve_data_dir,
        description="tailrent's data dir (the session transcripts): the file tools refuse it when it lies inside the workspace",
    )
    session: Any = Field(
        default=None,
        description="the session the session tools (read_spill, search_history, remember, recall, "
        "delegate) run against: a `SessionBinding` (agent/tools/session.py) the agent sets; "
        "None where no session is open (`tailrent tool`)",
    )


class ToolOutcome(BaseModel):
    """A tool's result after rung 1, before rung 2."""

    content: str = Field(description="what the model receives before rung 2 (includes the cut line)")
    is_error: bool = False
    cut: str | None = Field(default=None, description="one line: what the cap cut and how to get more (also in content)")
    binary: bool = Field(default=False, description="the output was not UTF-8 text; decoded with replacement")
    meta: dict[str, Any] = Field(default_factory=dict)
    spilled_path: str | None = Field(default=None, description="where run_shell streamed the whole over-cap output (spill sink)")


class ToolError(Exception):
    """Raised by a tool for a fault the model should read and fix (bad path, no match...)."""


def fmt_n(n: int) -> str:
    """A count as people read it: 1,234."""
    return f"{n:,}"


def fmt_bytes(n: int) -> str:
    """A size as people read it: 10 MB, 2.9 GB (powers of 1024), bytes below 1 KB."""
    size = float(n)
    for unit in ("bytes", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            break
        size /= 1024
    if unit == "bytes":
        return f"{n:,} bytes"
    return f"{size:.1f}".removesuffix(".0") + f" {unit}"


def binary_note(nbytes: int) -> str:
    return f"[binary or non-UTF-8 output: {fmt_n(nbytes)} bytes decoded with replacement]"


def decode_output(data: bytes | bytearray, *, truncated: bool = False) -> tuple[str, bool]:
    """Decode bytes as UTF-8; return (text, binary).

    `binary` is True when the bytes hold a NUL or are not valid UTF-8; they are
    then decoded with replacement and NULs become U+FFFD. When the bytes were
    cut at a cap (`truncated`), a multi-byte character split by the cut is
    dropped rather than taken as a sign of binary data.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        split_at_cut = truncated and exc.reason == "unexpected end of data" and exc.start >= len(data) - 3
        if not split_at_cut:
            return data.decode("utf-8", errors="replace").replace("\x00", "\ufffd"), True
        try:
            text = data[: exc.start].decode("utf-8")
        except UnicodeDecodeError:
            return data.decode("utf-8", errors="replace").replace("\x00", "\ufffd"), True
    if "\x00" in text:
        return text.replace("\x00", "\ufffd"), True
    return text, False


def outcome(
    body: str,
    *,
    cut: str | None = None,
    binary_bytes: int | None = None,
    meta: dict[str, Any] | None = None,
    is_error: bool = False,
    spilled_path: str | None = None,
    notes: list[str] | None = None,
) -> ToolOutcome:
    """Assemble a ToolOutcome: the body, then note lines, the binary mark, the cut line."""
    lines = [body.rstrip("\n")] if body else []
    lines.extend(notes or [])
    if binary_bytes is not None:
        lines.append(binary_note(binary_bytes))
    if cut:
        lines.append(cut)
    return ToolOutcome(
        content="\n".join(lines),
        is_error=is_error,
        cut=cut,
        binary=binary_bytes is not None,
        meta=meta or {},
        spilled_path=spilled_path,
    )


def error(message: str, **meta: Any) -> ToolOutcome:
    """A tool error as the model receives it."""
    return ToolOutcome(content=f"error: {message}", is_error=True, meta=meta)


def _hunk_range(start: int, length: int) -> str:
    # as difflib writes it: 1-based start, the length omitted when 1, start-1 when empty
    if length == 1:
        return str(start + 1)
    return f"{start if length == 0 else start + 1},{length}"


def _diff_window(a: list[str], b: list[str], lo: int, a_hi: int, b_hi: int, shown_path: str) -> list[str]:
    out = [f"--- a/{shown_path}\n", f"+++ b/{shown_path}\n"]
    matcher = difflib.SequenceMatcher(None, a[lo:a_hi], b[lo:b_hi])
    for group in matcher.get_grouped_opcodes(3):
        first, last = group[0], group[-1]
        i1, i2, j1, j2 = first[1], last[2], first[3], last[4]
        out.append(f"@@ -{_hunk_range(lo + i1, i2 - i1)} +{_hunk_range(lo + j1, j2 - j1)} @@\n")
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                out.extend(" " + line for line in a[lo + i1 : lo + i2])
                continue
            out.extend("-" + line for line in a[lo + i1 : lo + i2])
            out.extend("+" + line for line in b[lo + j1 : lo + j2])
    return out


def unified_diff(
    before: str,
    after: str,
    shown_path: str,
    *,
    max_lines: int = 1000,
    max_bytes: int = 64 * 1024,
) -> tuple[str, str | None]:
    """A unified diff of a text file's change, for the approval dialog and the result.

    Returns (diff, None), or ("", one line) when the diff would pass `max_lines`
    or `max_bytes`: the line then says which lines changed, so a rewrite of a
    big file costs one line, not the file twice. Only the span between the
    common head and tail is diffed, so the work is bounded by the caps too.
    """
    a = before.splitlines(keepends=True)
    b = after.splitlines(keepends=True)
    head, common = 0, min(len(a), len(b))
    while head < common and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < common - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    old_n, new_n = len(a) - head - tail, len(b) - head - tail
    if old_n == new_n == 0:
        return "", None
    too_large = (
        f"[diff too large to show: {fmt_n(old_n + new_n)} lines changed (old lines "
        f"{fmt_n(head + 1)}-{fmt_n(head + old_n)} became {fmt_n(new_n)} new lines); "
        f"read_file start={head + 1} to check the result]"
    )
    changed_bytes = sum(map(len, a[head : head + old_n])) + sum(map(len, b[head : head + new_n]))
    if old_n + new_n > max_lines or changed_bytes > max_bytes:
        return "", too_large
    lo = max(0, head - 3)
    lines = _diff_window(a, b, lo, min(len(a), head + old_n + 3), min(len(b), head + new_n + 3), shown_path)
    # A last line without a newline would run into the next line of the diff.
    text = "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)
    if len(lines) > max_lines or len(text) > max_bytes:
        return "", too_large
    return text, None


def _read_umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


# Read once at import: os.umask is process-wide, and tools run in worker threads.
_UMASK = _read_umask()


def locate(ctx: ToolContext, path: str, *, leaf: bool = True, make_dirs: bool = False) -> Beneath:
    """Open the way to `path` beneath the workspace (see workspace.open_beneath); faults as ToolError."""
    try:
        return open_beneath(ctx.root, path, data_dir=ctx.data_dir, leaf=leaf, make_dirs=make_dirs)
    except WorkspaceEscape:
        raise
    except OSError as exc:
        if exc.errno is None:  # ours: the message names the shown path
            raise ToolError(str(exc)) from None
        raise ToolError(f"cannot open {path!r}: {exc.strerror}") from None


def open_regular_file(spot: Beneath, tool: str) -> tuple[BinaryIO, os.stat_result]:
    """Open the existing file `spot` names for reading; refuse anything but a plain regular file.

    See workspace.open_regular (no symlink followed, no blocking on a FIFO or a
    device, checked on the open fd, hard-linked files refused); a refusal is a ToolError.
    """
    try:
        fd, st = open_regular(spot, tool)
    except FileRefused as exc:
        raise ToolError(str(exc)) from None
    return os.fdopen(fd, "rb"), st


def replace_file(spot: Beneath, data: bytes, mode: int | None = None) -> None:
    """Replace (or create) the file `spot` names with `data`, atomically, beneath its directory fd.

    The data goes to a temp file in the same directory (O_EXCL, O_NOFOLLOW),
    is flushed to disk, and is renamed over the name last: any failure (a full
    disk, a file-size limit, a kill) leaves the old file whole and no temp file
    behind (a kill leaves a `.tailrent-tmp`). The rename replaces whatever the
    name is at that moment (a symlink planted there is replaced, not followed).
    An existing file keeps its `mode`; a new one gets 0666 less the umask.

    The temp file is named as the store names its own (`temp_name`: the
    writer's pid inside), and the stale ones that killed writers left in the
    directory are removed first (`clean_stale_temp_files`: tailrent's names
    only, a dead pid or a day old).
    """
    assert spot.name is not None
    clean_stale_temp_files(spot.dir_fd)
    tmp = temp_name(spot.name)
    fd = os.open(
        tmp,
        os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0),
        0o600,
        dir_fd=spot.dir_fd,
    )
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fchmod(fh.fileno(), (0o666 & ~_UMASK) if mode is None else mode)
            os.fsync(fh.fileno())
        os.replace(tmp, spot.name, src_dir_fd=spot.dir_fd, dst_dir_fd=spot.dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=spot.dir_fd)
        raise


def write_or_explain(spot: Beneath, data: bytes, mode: int | None) -> None:
    """replace_file, with a failure told in one line that says the file is unchanged."""
    try:
        replace_file(spot, data, mode)
    except OSError as exc:
        was = "is unchanged" if spot.st is not None else "was not created"
        raise ToolError(
            f"could not write {spot.shown}: {exc.strerror or exc} ({fmt_n(len(data))} bytes); {spot.shown} {was}. "
            f"Free some space or write less, then try again"
        ) from None


def save_beneath(ctx: ToolContext, path: str, data: bytes) -> str:
    """Write `data` to the workspace file `path` as write_file writes, for tailrent's own files there.

    Opened beneath the workspace (missing directories made; no symlink followed
    out; the data dir refused), replaced atomically by `replace_file`; what is
    there and not a regular file is refused, not replaced. Returns the shown
    path; a fault is a one-line ToolError or WorkspaceEscape.
    """
    with locate(ctx, path, make_dirs=True) as spot:
        if spot.st is not None and not stat.S_ISREG(spot.st.st_mode):
            raise ToolError(f"{spot.shown} is {file_kind(spot.st.st_mode)}, not a file")
        write_or_explain(spot, data, stat.S_IMODE(spot.st.st_mode) if spot.st is not None else None)
        return spot.shown
