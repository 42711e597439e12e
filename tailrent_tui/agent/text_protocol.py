"""Tools for a model that cannot call them: a text protocol parsed into the same tool calls.

A server whose chat template has no place for tools (llama.cpp without ``--jinja``,
many small GGUF models) or that refuses a request with tools leaves the model unable
to call any: it then invents what a file holds. When the agent sees that, it says so
once and tells the model, in one pinned context note, to write its actions as text:

- a line that starts with ``!`` (outside a fenced block) runs that shell command;
- a line ``@read PATH`` reads a file;
- a fenced block opened with ```` ```write PATH ```` holds a file's whole new content;
- a fenced block opened with ```` ```edit PATH ```` holds one replacement, the old text
  between ``<<<<<<< OLD`` and ``=======``, the new between that and ``>>>>>>> NEW``.

`parse_actions` turns a reply into `ToolCallChunk`s for run_shell, read_file,
write_file and edit_file, which go through the same approvals and rungs as native
calls. A malformed block becomes a call whose ``arguments_error`` says what is wrong,
so the model reads the error and can try again.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from tailrent_tui.models.base import ToolCallChunk

#: the note's meta marker: one per session, pinned so that no fold takes it
PROTOCOL_META = "text_protocol"

PROTOCOL_NOTE = "\n".join(
    [
        "This model cannot call tools here, so act through text. The user approves each action; "
        "its result comes back in the next message.",
        "- To run a shell command, write a line that starts with ! (for example: !ls src).",
        "- To read a file, write a line: @read path/to/file",
        "- To write a whole file, write a fenced block whose first line is ```write path/to/file, then the content, then ```.",
        "- To change part of a file, write a fenced block whose first line is ```edit path/to/file, then the line "
        "<<<<<<< OLD, the exact text to replace, the line =======, the new text, the line >>>>>>> NEW, then ```.",
        "Never guess what a file contains: read it first. Write no action when you only answer.",
    ]
)

OLD_MARK = "<<<<<<< OLD"
MID_MARK = "======="
NEW_MARK = ">>>>>>> NEW"

_FENCE = re.compile(r"^(`{3,})\s*(\S*)\s*(.*?)\s*$")


@dataclass(frozen=True)
class _Block:
    verb: str
    path: str
    lines: list[str]
    closed: bool


def parse_actions(text: str, *, id_prefix: str = "text") -> list[ToolCallChunk]:
    """The actions a reply writes in the text protocol, in order, as tool calls."""
    calls: list[ToolCallChunk] = []

    def add(name: str, arguments: dict[str, object] | None = None, error: str | None = None) -> None:
        calls.append(
            ToolCallChunk(
                id=f"{id_prefix}_{len(calls)}", name=name, arguments=arguments or {}, arguments_error=error, index=len(calls)
            )
        )

    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        fence = _FENCE.match(line.strip())
        if fence:
            block, i = _read_block(lines, i, fence)
            if block is not None:
                _add_block(block, add)
            continue
        stripped = line.strip()
        if stripped.startswith("!") and len(stripped) > 1 and not stripped.startswith("!="):
            add("run_shell", {"command": stripped[1:].strip()})
        elif stripped.startswith("@read"):
            path = stripped[len("@read") :].strip()
            if path:
                add("read_file", {"path": path})
            else:
                add("read_file", error="@read needs a path: write @read path/to/file")
        i += 1
    return calls


def _read_block(lines: list[str], start: int, fence: re.Match[str]) -> tuple[_Block | None, int]:
    """The fenced block opening at `start` (None for a plain code block) and the line after it."""
    ticks, verb, rest = fence.group(1), fence.group(2).lower(), fence.group(3)
    body: list[str] = []
    i = start + 1
    while i < len(lines):
        if lines[i].strip() == ticks or (lines[i].strip().startswith(ticks) and not lines[i].strip()[len(ticks) :].strip()):
            break
        body.append(lines[i])
        i += 1
    closed = i < len(lines)
    after = i + 1 if closed else i
    if verb not in ("write", "edit"):
        return None, after  # an ordinary code block: its lines are not actions
    return _Block(verb, rest.strip(), body, closed), after


def _add_block(block: _Block, add: Callable[..., None]) -> None:
    name = "write_file" if block.verb == "write" else "edit_file"
    opening = f"```{block.verb} PATH"
    if not block.path:
        add(name, error=f"the {opening} block names no file: write the path after ```{block.verb}")
        return
    if not block.closed:
        add(name, error=f"the ```{block.verb} {block.path} block is not closed: end it with a line of ```")
        return
    if block.verb == "write":
        content = "\n".join(block.lines)
        add(name, {"path": block.path, "content": content + "\n" if content else ""})
        return
    body = [line.rstrip("\r") for line in block.lines]
    try:
        start, mid, end = body.index(OLD_MARK), body.index(MID_MARK), body.index(NEW_MARK)
    except ValueError:
        add(
            name,
            error=f"the ```edit {block.path} block needs the lines {OLD_MARK}, {MID_MARK} and {NEW_MARK} "
            "around the old and the new text",
        )
        return
    if not start < mid < end:
        add(name, error=f"the ```edit {block.path} block has its markers out of order: {OLD_MARK}, {MID_MARK}, {NEW_MARK}")
        return
    old = "\n".join(body[start + 1 : mid])
    if not old.strip():
        add(name, error=f"the ```edit {block.path} block has no old text: copy the exact lines to replace after {OLD_MARK}")
        return
    add(name, {"path": block.path, "old": old, "new": "\n".join(body[mid + 1 : end])})
