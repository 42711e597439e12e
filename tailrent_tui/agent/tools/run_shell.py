"""run_shell(command, timeout?): run a shell command in the workspace root.

stdout and stderr share one pipe, so their lines keep their order. Rung 1
keeps the first `shell_max_bytes` bytes of that output. Past the cap:

- without a spill sink, reading stops and the whole process group is killed;
  the rest of the output is lost, and the cut line says so;
- with a spill sink (`ToolContext.spill_sink`), the whole output — the kept
  head and everything after it — is streamed to the sink in chunks, so memory
  stays bounded by the cap however much the command prints, and nothing is lost.

Past its timeout (default `shell_timeout`, at most `shell_timeout_max`) the
whole process group is killed and the partial output is returned as an error.
The exit code is always reported.
"""

from __future__ import annotations

import os
import selectors
import shutil
import signal
import subprocess
import time
from typing import Any, BinaryIO

from tailrent_tui.agent.tools.base import (
    ToolContext,
    ToolError,
    ToolOutcome,
    ToolSpec,
    decode_output,
    fmt_n,
    outcome,
)
from tailrent_tui.agent.workspace import workspace_root

_CHUNK = 256 * 1024
# After the shell exits, a background child may still hold the pipe open;
# stop reading once it has been quiet this long rather than wait for EOF.
_QUIET_AFTER_EXIT = 0.25

SPEC = ToolSpec(
    name="run_shell",
    description=(
        "Run a shell command (bash) in the workspace root. Returns stdout and stderr "
        "interleaved, then the exit code. Huge output is cut, and a command is killed "
        "past its timeout (seconds)."
    ),
    parameters={
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "the command line, run with bash -c"},
            "timeout": {"type": "number", "description": "seconds before the command is killed"},
        },
        "required": ["command"],
    },
    needs_approval=True,
)


def _shell() -> list[str]:
    bash = shutil.which("bash")
    return [bash, "-c"] if bash else ["/bin/sh", "-c"]


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _timeout(args: dict[str, Any], ctx: ToolContext) -> float:
    asked = args.get("timeout")
    if asked is None:
        return ctx.caps.shell_timeout
    if asked <= 0:
        raise ToolError(f"timeout must be more than 0 seconds (got {asked})")
    return min(float(asked), ctx.caps.shell_timeout_max)


def run(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    command = args["command"]
    if not command.strip():
        raise ToolError("command is empty")
    timeout = _timeout(args, ctx)
    cap = ctx.caps.shell_max_bytes

    proc = subprocess.Popen(
        [*_shell(), command],
        cwd=workspace_root(ctx.root),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group, so a kill reaches every child
    )
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    head = bytearray()
    total = 0
    sink: BinaryIO | None = None
    spill_name: str | None = None
    timed_out = False
    over_cap = False
    started = time.monotonic()
    deadline = started + timeout
    exited_at: float | None = None
    sink_error: str | None = None

    selector = selectors.DefaultSelector()
    selector.register(fd, selectors.EVENT_READ)
    try:
        while True:
            now = time.monotonic()
            if now >= deadline:
                timed_out = True
                _kill_group(proc)
                break
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            wait = deadline - now
            if exited_at is not None:
                wait = min(wait, _QUIET_AFTER_EXIT)
            else:
                wait = min(wait, 0.1)
            if not selector.select(wait):
                if exited_at is not None and time.monotonic() - exited_at >= _QUIET_AFTER_EXIT:
                    break
                continue
            chunk = os.read(fd, _CHUNK)
            if not chunk:
                break
            total += len(chunk)
            if sink is not None:
                try:
                    sink.write(chunk)
                except OSError as exc:
                    sink_error = f"writing spill {spill_name} failed ({exc}); the command was killed"
                    _kill_group(proc)
                    break
                continue
            room = cap - len(head)
            if len(chunk) <= room:
                head += chunk
                continue
            head += chunk[:room]
            over_cap = True
            if ctx.spill_sink is None:
                _kill_group(proc)
                break
            try:
                sink, spill_name = ctx.spill_sink()
                sink.write(head)
                sink.write(chunk[room:])
            except OSError as exc:
                # The head is still in memory: fall back to rung 1's cut
                # rather than lose the whole result.
                sink_error = f"could not spill the output past the cap ({exc}); the command was killed"
                _kill_group(proc)
                break
    finally:
        selector.close()
        proc.stdout.close()
        if sink is not None:
            try:
                sink.close()
            except OSError as exc:
                sink_error = sink_error or f"closing spill {spill_name} failed ({exc})"
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            proc.wait()
    elapsed = time.monotonic() - started

    code = proc.returncode
    text, binary = decode_output(head, truncated=over_cap)
    notes = []
    if code is not None and code < 0:
        notes.append(f"[exit code {code}: killed by signal {-code}]")
    else:
        notes.append(f"[exit code {code}]")
    cut = None
    if timed_out:
        cut = (
            f"[run_shell: timed out after {timeout:g} s; killed the process group "
            f"(pid {proc.pid}); the output so far is above"
            + (f" (all of it also in spill {spill_name})" if spill_name and not sink_error else "")
            + "; pass a larger timeout= or run it in the background with its output sent to a file]"
        )
    elif sink_error:
        cut = f"[run_shell: output cut at the {fmt_n(cap)}-byte cap: {sink_error}]"
    elif over_cap and sink is not None:
        cut = (
            f"[run_shell: output was {fmt_n(total)} bytes; showing the first {fmt_n(len(head))} "
            f"(the {fmt_n(cap)}-byte cap); the whole output is in spill {spill_name}]"
        )
    elif over_cap:
        cut = (
            f"[run_shell: output cut at the {fmt_n(cap)}-byte cap and the command was killed; "
            f"send its output to a file and grep or read_file a range of it]"
        )
    meta = {
        "exit_code": code,
        "timed_out": timed_out,
        "killed": timed_out or (over_cap and (sink is None or sink_error is not None)),
        "bytes": total,
        "seconds": round(elapsed, 3),
        "pid": proc.pid,
        "timeout": timeout,
    }
    return outcome(
        text if text else "(no output)",
        cut=cut,
        notes=notes,
        binary_bytes=len(head) if binary else None,
        meta=meta,
        is_error=timed_out,
        spilled_path=None if sink_error else spill_name,
    )
