"""Rung 1's caps: how much of each tool's output may enter the context, and the turn's bounds.

Internal limits with fixed defaults, not settings: only `shell_timeout` comes
from config.toml (`[tools] shell_timeout`). The agent holds one `ToolCaps`
and hands it to every tool call; tests pass smaller ones.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ToolCaps(BaseModel):
    """Rung 1: how much of each tool's output may enter the context (fixed values; tests shrink them)."""

    # an infinite timeout is no timeout: `shell_timeout = inf` is valid TOML, and refused here
    model_config = ConfigDict(allow_inf_nan=False)

    grep_max_matches: int = Field(50, ge=1, description="grep shows at most this many matches")
    grep_count_limit: int = Field(
        10_000,
        ge=1,
        description="grep stops counting matches past this many (the cut line then says 'at least')",
    )
    grep_max_line_chars: int = Field(400, ge=20, description="a matching line longer than this is shortened in grep's output")
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
    shell_spill_max_bytes: int = Field(
        100 * 1024 * 1024,
        ge=1,
        description="run_shell keeps at most this many bytes of one output in its raw spill; the rest is counted, not kept",
    )
    spills_session_max_bytes: int = Field(
        1024 * 1024 * 1024,
        ge=1,
        description="a session's spills (every tool's, raw shell output included) hold at most this many bytes in total",
    )
    spills_turn_max_bytes: int = Field(
        256 * 1024 * 1024,
        ge=1,
        description="one turn's spills (every tool's) hold at most this many bytes; past it a result is cut, and says so",
    )
    reply_max_bytes: int = Field(
        4 * 1024 * 1024,
        ge=1,
        description="a model reply longer than this is cut there (the stream is closed) and marked as cut",
    )
    turn_deadline: float = Field(
        3600.0,
        gt=0,
        le=7 * 24 * 3600,
        description="a turn (requests and tool calls) that runs longer than this many seconds is stopped; what it did is kept",
    )
    tool_call_args_max_bytes: int = Field(
        1024 * 1024,
        ge=1,
        description="a tool call whose arguments are larger than this (as JSON) is not run; the model gets an error",
    )
    ping_deadline: float = Field(
        120.0,
        gt=0,
        le=3600,
        description="a keep-warm ping that has not returned after this many seconds is abandoned (and said once)",
    )
    tool_calls_max_per_reply: int = Field(
        64, ge=1, description="a reply that asks for more tool calls than this runs the first ones only, and says so"
    )
    shell_discard_max_bytes: int = Field(
        1024 * 1024 * 1024,
        ge=0,
        description="run_shell counts and drops output past what it keeps; past this many dropped "
        "bytes the command is taken for a runaway (`yes`) and killed",
    )
    grep_timeout: float = Field(10.0, gt=0, le=3600, description="grep stops searching after this many seconds and says so")
    shell_timeout: float = Field(120.0, gt=0, description="run_shell's default timeout in seconds")
    shell_timeout_max: float = Field(600.0, gt=0, description="the largest timeout a run_shell call may ask for, in seconds")
    diff_max_lines: int = Field(
        1000,
        ge=1,
        description="write_file and edit_file show a diff of at most this many lines "
        "(past it: one line saying how many lines changed)",
    )
    diff_max_bytes: int = Field(64 * 1024, ge=1, description="write_file and edit_file show a diff of at most this many bytes")
    diff_max_file_bytes: int = Field(
        16 * 1024 * 1024,
        ge=1,
        description="write_file does not diff (and edit_file does not edit) a file larger than this",
    )
