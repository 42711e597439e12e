"""What every tool shares: its spec, its caps, its context and its outcome.

Rung 1 of the ladder lives in the tools: each caps its own output before it
enters the context and says in one line (`ToolOutcome.cut`) what the cap cut
and how to get more. What rung 1 keeps is the head of the output (the first
matches, entries, lines or bytes); what it loses is the rest, which the model
can ask for with a narrower call. Rung 2 (spill above the threshold) is applied
to `ToolOutcome.content` afterwards by the agent.
"""

from __future__ import annotations

import difflib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from pydantic import BaseModel, ConfigDict, Field

#: A spill sink opens a fresh writable binary file and names it (path or id).
#: run_shell writes the whole of an over-cap output into it and closes it.
SpillSink = Callable[[], tuple[BinaryIO, str]]


class ToolSpec(BaseModel):
    """A tool as offered to the model: name, description, JSON schema of its arguments."""

    model_config = ConfigDict(frozen=True)

    name: str
    description: str
    parameters: dict[str, Any] = Field(description="JSON schema (type: object) of the arguments")
    needs_approval: bool = Field(
        default=False, description="The app asks the user before running it (unless --yolo)"
    )

    def to_openai(self) -> dict[str, Any]:
        """The tool entry for an OpenAI-compatible or Ollama `tools` list."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


class ToolCaps(BaseModel):
    """Rung 1: how much of each tool's output may enter the context."""

    grep_max_matches: int = Field(50, ge=1, description="grep shows at most this many matches")
    grep_count_limit: int = Field(
        10_000,
        ge=1,
        description="grep stops counting matches past this many (the cut line then says 'at least')",
    )
    grep_max_line_chars: int = Field(
        400, ge=20, description="a matching line longer than this is shortened in grep's output"
    )
    list_dir_max_entries: int = Field(200, ge=1, description="list_dir shows at most this many entries")
    read_file_max_lines: int = Field(2000, ge=1, description="read_file returns at most this many lines")
    read_file_max_bytes: int = Field(
        10 * 1024 * 1024, ge=1, description="read_file returns at most this many bytes of its line range"
    )
    shell_max_bytes: int = Field(
        10 * 1024 * 1024,
        ge=1,
        description="run_shell keeps at most this many bytes of stdout+stderr in memory "
        "(past it: stop and kill, or stream the rest to the spill sink)",
    )
    shell_timeout: float = Field(120.0, gt=0, description="run_shell's default timeout in seconds")
    shell_timeout_max: float = Field(
        600.0, gt=0, description="the largest timeout a run_shell call may ask for, in seconds"
    )


class ToolContext(BaseModel):
    """What a tool runs against: the workspace root, the caps, an optional spill sink."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    root: Path = Field(description="workspace root; every path is resolved inside it")
    caps: ToolCaps = Field(default_factory=ToolCaps)
    spill_sink: SpillSink | None = Field(
        default=None,
        description="when set, run_shell streams output past shell_max_bytes into it "
        "instead of killing the command",
    )


class ToolOutcome(BaseModel):
    """A tool's result after rung 1, before rung 2."""

    content: str = Field(description="what the model receives before rung 2 (includes the cut line)")
    is_error: bool = False
    cut: str | None = Field(
        default=None, description="one line: what the cap cut and how to get more (also in content)"
    )
    binary: bool = Field(default=False, description="the output was not UTF-8 text; decoded with replacement")
    meta: dict[str, Any] = Field(default_factory=dict)
    spilled_path: str | None = Field(
        default=None, description="where run_shell streamed the whole over-cap output (spill sink)"
    )


class ToolError(Exception):
    """Raised by a tool for a fault the model should read and fix (bad path, no match...)."""


def fmt_n(n: int) -> str:
    """A count as people read it: 1,234."""
    return f"{n:,}"


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
        split_at_cut = (
            truncated and exc.reason == "unexpected end of data" and exc.start >= len(data) - 3
        )
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



def unified_diff(before: str, after: str, shown_path: str) -> str:
    """A unified diff of a text file's change, for the approval dialog and the result."""
    lines = difflib.unified_diff(
        before.splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile=f"a/{shown_path}",
        tofile=f"b/{shown_path}",
    )
    # A last line without a newline would run into the next line of the diff.
    return "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines
    )


def _read_umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


# Read once at import: os.umask is process-wide, and tools run in worker threads.
_UMASK = _read_umask()


def write_text_atomically(path: Path, text: str) -> None:
    """Replace `path` with `text` (UTF-8, newlines untouched) via a temp file beside it.

    A crash mid-write leaves the old file whole; an existing file keeps its mode.
    """
    mode = path.stat().st_mode & 0o7777 if path.exists() else 0o666 & ~_UMASK
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tailrent-tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
