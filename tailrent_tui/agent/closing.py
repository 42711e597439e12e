"""Closing a session's agent: what `Agent.aclose` runs, in order, each step whatever the one before did.

1. the MCP servers stop (killed if they will not);
2. llama.cpp's KV slot is saved, while the engine still runs (`reason` says why);
3. the journal is flushed and closed, meta.json written, the lock released; what the
   disk would not take goes to a rescue file, and the close says where;
4. the token counter and the model's client close; the embedded engine stops within
   `models.embedded.ENGINE_STOP_SECONDS` (one that will not is left to the process's end, and said).

Never raises for a step that fails: `Closing.lines` says what went wrong. `agent/lifecycle.py`'s
`open_agent` runs it on every way out of its block.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tailrent_tui.agent.slots import SlotKeeper, SlotOutcome
from tailrent_tui.core.tokens import TokenCounter
from tailrent_tui.models.base import ChatModel
from tailrent_tui.models.embedded import EngineStuck
from tailrent_tui.models.tokenizer import ServerTokenizer
from tailrent_tui.store.journal import AsyncJournalWriter
from tailrent_tui.store.sessions import CloseReport, OpenedSession, close_session

if TYPE_CHECKING:
    from tailrent_tui.agent.mcp.hub import McpHub


@dataclass
class CloseLine:
    text: str
    level: str = "info"
    #: "slot", "journal", "mcp", "model": what the line is about (`ask` words the journal's itself)
    about: str = "journal"


@dataclass
class Closing:
    """What the close did: the slot saved, the journal's report, the lines said."""

    reason: str
    signal: str | None = None
    slot: SlotOutcome | None = None
    report: CloseReport | None = None
    lines: list[CloseLine] = field(default_factory=list)


async def close_parts(
    *,
    reason: str,
    mcp: McpHub | None,
    slots: SlotKeeper | None,
    opened: OpenedSession | None,
    counter: TokenCounter,
    model: ChatModel | None,
) -> Closing:
    """Close what a session's agent holds (see the module's doc); `model` None: the caller's, left open."""
    closing = Closing(reason=reason)
    lines = closing.lines
    if mcp is not None:
        try:
            await mcp.aclose()
        except Exception as exc:  # a server that will not stop is killed below
            lines.append(CloseLine(f"the MCP servers did not stop cleanly ({_why(exc)}); killed", "warning", "mcp"))
        finally:
            mcp.kill_now()
    if slots is not None:
        try:
            closing.slot = await slots.save(reason)
        except Exception as exc:
            lines.append(CloseLine(f"KV slot not saved ({reason}): {_why(exc)}", "warning", "slot"))
        finally:
            slots.close()
        saved = closing.slot
        if saved is not None:
            lines.extend(CloseLine(text, saved.level, "slot") for text in filter(None, [saved.line, *saved.extra]))
    if opened is not None:
        try:
            if isinstance(opened.writer, AsyncJournalWriter):
                with contextlib.suppress(OSError):
                    await opened.writer.aclose()  # what it could not write stays pending: rescued below
            closing.report = close_session(opened, discard_blank=True)
        except Exception as exc:
            lines.append(CloseLine(f"the session did not close cleanly: {_why(exc)}", "error"))
            if opened.lock is not None:
                with contextlib.suppress(OSError):
                    opened.lock.release()
        report = closing.report
        message = report.message() if report is not None else None
        if message:
            lines.append(CloseLine(message, "warning" if report is not None and report.saved else "error"))
    if isinstance(counter, ServerTokenizer):
        with contextlib.suppress(Exception):
            counter.close()
    if model is not None:
        try:
            await model.aclose()
        except EngineStuck as exc:
            lines.append(CloseLine(exc.message, "warning", "model"))
        except Exception as exc:
            lines.append(CloseLine(f"the model's connection did not close cleanly: {_why(exc)}", "warning", "model"))
    return closing


def _why(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
