"""run_shell(command, timeout?): run a shell command in the workspace root.

stdout and stderr share one pipe, so their lines keep their order. One cap, on
every path (the agent's and `tailrent tool`'s): rung 1 keeps the first
`shell_max_bytes` bytes in memory; with a spill sink (the agent's), the output
also streams to a raw spill, up to `shell_spill_max_bytes` and what is left of
the session's `spills_session_max_bytes`. Past what is kept, the output is
read, counted and dropped: the command runs on (a cap is no reason to kill a
build), and the cut line says how much was not kept; only past
`shell_discard_max_bytes` dropped bytes (a runaway such as `yes`) is it killed.

The command runs in its own session (process group): when the shell exits,
its timeout passes or the call is cancelled, the whole group is killed, so no
background process outlives the call (one that calls setsid itself escapes, and
once the shell has exited its output is read only until it has been quiet for
a moment, or the timeout has passed). The command's environment holds no API key tailrent knows about. The
exit code is always reported, and `timed_out` is true only when the shell
itself outran its timeout.

The tool is a coroutine that the agent awaits on its event loop (`tailrent
tool` runs the same one with `asyncio.run`): the shell's exit, its output and
its timeout are events, nothing polls. Cancelling the call (escape, quit)
kills the group at once and lets the CancelledError through: a cancelled call
has no outcome.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any, BinaryIO

from pydantic import Field

from tailrent_tui.agent.tools.base import (
    Number,
    String,
    ToolArgs,
    ToolContext,
    ToolError,
    ToolOutcome,
    ToolSpec,
    decode_output,
    fmt_bytes,
    fmt_n,
    outcome,
)
from tailrent_tui.agent.workspace import workspace_root
from tailrent_tui.models.openai import API_KEY_VARIABLES

# After the shell exits and its group is killed, a process that left the group may
# still hold the pipe open: stop reading once it has been quiet this long.
_QUIET_AFTER_EXIT = 0.25

#: Variables never handed to a command: the keys tailrent reads for its model server.
SECRET_VARIABLES = frozenset(API_KEY_VARIABLES)


class RunShellArgs(ToolArgs):
    command: String = Field(description="the command line, run with bash -c")
    timeout: Number | None = Field(default=None, description="seconds before the command is killed")


SPEC = ToolSpec.of(
    "run_shell",
    "Run a shell command (bash) in the workspace root. Returns stdout and stderr "
    "interleaved, then the exit code. Huge output is cut, and a command is killed "
    "past its timeout (seconds).",
    RunShellArgs,
    needs_approval=True,
)


def _shell() -> list[str]:
    bash = shutil.which("bash")
    return [bash, "-c"] if bash else ["/bin/sh", "-c"]


def command_env() -> dict[str, str]:
    """tailrent's environment without the keys it knows about."""
    return {k: v for k, v in os.environ.items() if k not in SECRET_VARIABLES}


def _live_in_group(pgid: int) -> int | None:
    """Processes still running (not zombies) in process group `pgid`; None where /proc cannot say."""
    proc = Path("/proc")
    if not proc.is_dir():
        return None
    live = 0
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
            live += 1
    return live


def _kill_group(pgid: int) -> bool:
    """Kill every process of the group; False when none was left."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _timeout(args: dict[str, Any], ctx: ToolContext) -> float:
    asked = args.get("timeout")
    if asked is None:
        return ctx.caps.shell_timeout
    if not asked > 0:
        raise ToolError(f"timeout must be more than 0 seconds (got {asked})")
    return min(float(asked), ctx.caps.shell_timeout_max)


class _Keeper:
    """Where the output goes: the head in memory, then the raw spill, then counted only."""

    def __init__(self, ctx: ToolContext) -> None:
        self.ctx = ctx
        self.cap = ctx.caps.shell_max_bytes
        self.head = bytearray()
        self.total = 0
        self.sink: BinaryIO | None = None
        self.spill_name: str | None = None
        self.spilled = 0
        self.spill_room = 0
        self.spill_limit = 0
        self.budget_short = False
        self.sink_tried = False
        self.error: str | None = None

    @property
    def kept(self) -> int:
        return max(len(self.head), self.spilled)

    @property
    def not_kept(self) -> int:
        return self.total - self.kept

    def _open_sink(self) -> None:
        self.sink_tried = True
        caps = self.ctx.caps
        wanted = caps.shell_spill_max_bytes
        budget = self.ctx.spill_budget
        granted = budget.take(wanted) if budget is not None else wanted
        self.budget_short = granted < wanted
        self.spill_limit = self.spill_room = granted
        if granted <= len(self.head):
            if budget is not None:
                budget.give_back(granted)
            self.spill_limit = self.spill_room = 0
            return
        try:
            assert self.ctx.spill_sink is not None
            self.sink, self.spill_name = self.ctx.spill_sink()
            self._to_sink(bytes(self.head))
        except OSError as exc:
            self._spill_failed(f"could not spill the output past the cap ({exc})")

    def _spill_failed(self, why: str) -> None:
        self.error = why
        self._close_sink()
        self.spilled = 0

    def _to_sink(self, data: bytes) -> None:
        assert self.sink is not None
        part = data[: self.spill_room]
        if part:
            self.sink.write(part)
            self.spilled += len(part)
            self.spill_room -= len(part)

    def _close_sink(self) -> None:
        if self.sink is None:
            return
        sink, self.sink = self.sink, None
        try:
            sink.close()
        except OSError as exc:
            self.error = self.error or f"closing spill {self.spill_name} failed ({exc})"
        budget = self.ctx.spill_budget
        if budget is not None and self.spill_room:
            budget.give_back(self.spill_room)
            self.spill_room = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.cap - len(self.head)
        if room > 0:
            self.head += chunk[:room]
        if self.total <= self.cap:
            return
        if not self.sink_tried and self.ctx.spill_sink is not None:
            self._open_sink()
            chunk = chunk[room:] if room > 0 else chunk
            if self.sink is None:
                return
        elif room > 0:
            chunk = chunk[room:]
        if self.sink is not None and self.spill_room > 0:
            try:
                self._to_sink(chunk)
            except OSError as exc:
                self._spill_failed(f"writing spill {self.spill_name} failed ({exc})")

    def close(self) -> None:
        self._close_sink()

    def cut_line(self) -> str | None:
        """One line: what the cap cut and how to get more; None when everything was kept."""
        if self.total <= self.cap:
            return None
        rest = f"{fmt_bytes(self.not_kept)} more not kept ({fmt_n(self.not_kept)} bytes)"
        if self.error:
            return (
                f"[run_shell: output cut at {fmt_bytes(len(self.head))} (the shell_max_bytes cap): "
                f"{self.error}; {rest}; send the output to a file and grep or read_file a range of it]"
            )
        if self.spill_name is None:
            why = (
                "the session's spills are full (spills_session_max_bytes)"
                if self.ctx.spill_sink is not None and self.budget_short
                else "the shell_max_bytes cap"
            )
            return (
                f"[run_shell: output cut at {fmt_bytes(len(self.head))} ({why}); {rest}; "
                f"send the output to a file and grep or read_file a range of it]"
            )
        if self.not_kept == 0:
            return (
                f"[run_shell: output was {fmt_n(self.total)} bytes; showing the first {fmt_n(len(self.head))} "
                f"(the {fmt_n(self.cap)}-byte cap); the whole output is in spill {self.spill_name}]"
            )
        why = "what is left of the session's spills_session_max_bytes" if self.budget_short else "the shell_spill_max_bytes cap"
        return (
            f"[run_shell: output cut at {fmt_bytes(self.spilled)} ({why}); {rest}; "
            f"the first {fmt_n(self.spilled)} bytes are in spill {self.spill_name}]"
        )


class _Shell(asyncio.SubprocessProtocol):
    """The call's side of the pipe: the output into the keeper as it comes, the shell's exit and the pipe's EOF."""

    def __init__(self, keeper: _Keeper, loop: asyncio.AbstractEventLoop) -> None:
        self.keeper = keeper
        self.loop = loop
        self.discard_max = keeper.ctx.caps.shell_discard_max_bytes
        #: the shell itself exited (a background process may still hold the pipe)
        self.exited: asyncio.Future[None] = loop.create_future()
        #: every writer closed the pipe
        self.eof: asyncio.Future[None] = loop.create_future()
        #: the output dropped past the caps passed shell_discard_max_bytes (a runaway such as `yes`), or keeping it failed
        self.stop: asyncio.Future[None] = loop.create_future()
        self.fault: Exception | None = None
        self.last_output = loop.time()
        self.reading = True

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        if not self.reading:
            return
        assert isinstance(data, bytes)
        self.last_output = self.loop.time()
        try:
            self.keeper.add(data)
        except Exception as exc:  # run() raises it: a bug costs the call, never the loop
            self.fault = exc
        if self.fault is not None or self.keeper.not_kept > self.discard_max:
            self.reading = False
            self.stop.set_result(None)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if not self.eof.done():
            self.eof.set_result(None)

    def process_exited(self) -> None:
        self.last_output = self.loop.time()  # what the shell wrote last may still be in the pipe
        if not self.exited.done():
            self.exited.set_result(None)

    async def quiet(self, deadline: float) -> None:
        """After the shell exits: read until EOF, or until nothing came for _QUIET_AFTER_EXIT
        (a process that left the group with setsid may hold the pipe), or the deadline."""
        while not self.eof.done() and not self.stop.done():
            left = min(self.last_output + _QUIET_AFTER_EXIT, deadline) - self.loop.time()
            if left <= 0:
                return
            await asyncio.wait([self.eof, self.stop], timeout=left)


async def run(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    command = args["command"]
    if not command.strip():
        raise ToolError("command is empty")
    if "\x00" in command:
        raise ToolError("command holds a NUL character; remove it")
    timeout = _timeout(args, ctx)
    cwd = workspace_root(ctx.root)

    loop = asyncio.get_running_loop()
    keeper = _Keeper(ctx)
    started = loop.time()
    deadline = started + timeout
    # A protocol of our own rather than create_subprocess_exec: its Process.wait() also waits
    # for the pipe to close, which a background child holding it would put off; _Shell hears
    # the shell's exit itself.
    transport, shell = await loop.subprocess_exec(
        lambda: _Shell(keeper, loop),
        *_shell(),
        command,
        cwd=cwd,
        env=command_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group, so a kill reaches every child
    )
    pid = transport.get_pid()
    timed_out = runaway = False
    background: int | None = 0
    try:
        try:
            async with asyncio.timeout_at(deadline):
                await asyncio.wait([shell.exited, shell.stop], return_when=asyncio.FIRST_COMPLETED)
        except TimeoutError:
            timed_out = True
        if not timed_out and shell.stop.done():
            runaway = shell.fault is None
        elif not timed_out:
            # The shell is done: what it left running in the background goes with it.
            # Its pipe then reaches EOF as soon as the buffered output is read.
            background = _live_in_group(pid)
            if background != 0 and _kill_group(pid) and background is None:
                background = -1
            await shell.quiet(max(deadline, loop.time() + _QUIET_AFTER_EXIT))
        if transport.get_returncode() is None:
            _kill_group(pid)
        shell.reading = False
        await shell.exited
    except asyncio.CancelledError:
        # escape or quit: the whole group goes at once, and the call ends with no outcome
        _kill_group(pid)
        # the shell's exit is collected (a moment after the kill) while the loop still watches for it
        await asyncio.wait([shell.exited], timeout=1.0)
        raise
    finally:
        shell.reading = False
        transport.close()
        keeper.close()
    if shell.fault is not None:
        raise shell.fault
    elapsed = loop.time() - started

    code = transport.get_returncode()
    text, binary = decode_output(keeper.head, truncated=keeper.total > keeper.cap)
    notes = []
    if code is not None and code < 0:
        notes.append(f"[exit code {code}: killed by signal {-code}]")
    else:
        notes.append(f"[exit code {code}]")
    if background:
        count = "" if background < 0 else f"{background} "
        notes.append(
            f"[run_shell: {count}background process(es) still ran when the shell exited and were killed; "
            "run a server or watcher outside tailrent]"
        )
    cut = keeper.cut_line()
    if runaway and cut:
        cut = cut.replace(" more not kept", " more not kept (at least)", 1).removesuffix("]") + (
            f"; the command was killed after {fmt_bytes(keeper.not_kept)} past the caps (shell_discard_max_bytes)]"
        )
    if timed_out:
        cut = (
            f"[run_shell: timed out after {timeout:g} s; killed the process group (pid {pid}); the output so far "
            "is above"
            + (f" ({cut.strip('[]')})" if cut else "")
            + "; pass a larger timeout= or run it in the background with its output sent to a file]"
        )
    spilled = keeper.spill_name if keeper.spilled and keeper.error is None else None
    meta = {
        "exit_code": code,
        "timed_out": timed_out,
        "killed": timed_out or runaway,
        "background_killed": bool(background),
        "bytes": keeper.total,
        "not_kept": keeper.not_kept,
        "seconds": round(elapsed, 3),
        "pid": pid,
        "timeout": timeout,
    }
    return outcome(
        text if text else "(no output)",
        cut=cut,
        notes=notes,
        binary_bytes=len(keeper.head) if binary else None,
        meta=meta,
        is_error=timed_out,
        spilled_path=spilled,
    )
