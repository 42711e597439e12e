"""The slash commands: one function each, named in the action table (`ui/actions.py`).

`/pin` ... `/help` run `run_slash` on the session screen, which looks the name
up in the table and calls the row's function with the screen (a `SlashHost`)
and the rest of the line. A function returns False when the command was not
accepted (unknown or malformed: the input keeps it).
"""

from __future__ import annotations

import shlex
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol

from textual.app import App
from textual.notifications import SeverityLevel
from textual.worker import Worker, WorkType

from tailrent_tui.core.session import Session, SessionError
from tailrent_tui.ui.protocol import SessionAgent
from tailrent_tui.ui.screens.ladder_actions import LadderActions
from tailrent_tui.ui.screens.recall import RecallScreen
from tailrent_tui.ui.widgets.tail_panel import TailFigures, schema_rent


class SlashHost(Protocol):
    """What the slash commands use of the session screen."""

    ladder: LadderActions

    @property
    def agent(self) -> SessionAgent: ...
    @property
    def session(self) -> Session: ...
    @property
    def app(self) -> App[Any]: ...
    @property
    def tail_figures(self) -> TailFigures | None: ...
    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None: ...
    def run_worker(
        self,
        work: WorkType[Any],
        name: str | None = "",
        group: str = "default",
        description: str = "",
        exit_on_error: bool = True,
        start: bool = True,
        exclusive: bool = False,
        thread: bool = False,
    ) -> Worker[Any]: ...
    def refresh_header(self) -> None: ...
    def search_history(self) -> None: ...
    def action_retry(self) -> None: ...
    def action_help(self) -> None: ...


#: a slash command's function: the screen and the rest of the line; False: not accepted (the input keeps it)
SlashRun = Callable[[SlashHost, str], Awaitable[bool]]


def fold_number(text: str) -> int | None:
    """A fold number as typed (`3`, `#3`): ASCII digits only, never `²` or a 5,000-digit number
    (str.isdigit takes both, and int() then raised a ValueError that took the app down)."""
    digits = text.strip().removeprefix("#")
    return int(digits) if 0 < len(digits) <= 9 and digits.isascii() and digits.isdigit() else None


# -- the ladder --------------------------------------------------------------------------


async def pin(host: SlashHost, rest: str) -> bool:
    return host.ladder.pin(rest or None, fallback_last=True)


async def unpin(host: SlashHost, rest: str) -> bool:
    return host.ladder.unpin(rest or None, fallback_last=True)


async def spill(host: SlashHost, rest: str) -> bool:
    return host.ladder.spill(rest or None, fallback_last=True)


async def fold(host: SlashHost, rest: str) -> bool:
    ids = rest.split() or None
    if ids:
        missing = [i for i in ids if i not in host.session]
        if missing:
            host.notify(f"no message with id {missing[0]}", severity="error")
            return False
    return host.ladder.start_fold(ids)


async def inspect(host: SlashHost, rest: str) -> bool:
    if rest:
        fold_no = fold_number(rest)
        if fold_no is None:
            host.notify("/inspect takes a fold number (the Folds panel lists them)", severity="error")
            return False
        return await host.ladder.inspect(fold_no)
    return await host.ladder.inspect(None)


async def unfold(host: SlashHost, rest: str) -> bool:
    fold_no = fold_number(rest)
    if fold_no is None:
        host.notify("/unfold takes a fold number (the Folds panel lists them)", severity="error")
        return False
    return host.ladder.unfold(fold_no)


async def ledger(host: SlashHost, rest: str) -> bool:
    verb, _, args = rest.strip().partition(" ")
    args = args.strip()
    usage = (
        "/ledger lists it; /ledger accept N, /ledger supersede N, /ledger pin N, /ledger unpin N, "
        "/ledger edit N TEXT (N: its number or id)"
    )
    if not verb:
        await host.ladder.show_ledger()
        return True
    if verb not in ("accept", "supersede", "edit", "pin", "unpin"):
        host.notify(f"/ledger {verb}: unknown; {usage}", severity="error")
        return False
    ref, _, text = args.partition(" ")
    if not ref:
        host.notify(f"/ledger {verb} needs a statement: {usage}", severity="error")
        return False
    if verb == "accept":
        return host.ladder.accept_statement(ref)
    if verb == "supersede":
        return host.ladder.supersede_statement(ref)
    if verb in ("pin", "unpin"):
        st = host.ladder.target_statement(ref, verb, {"current", "proposal"})
        return st is not None and host.ladder.pin_statement(st, verb == "pin")
    if not text.strip():
        # the input opens on the statement's text, to edit there (kept: not accepted)
        host.ladder.edit_statement(ref, None)
        return False
    return host.ladder.edit_statement(ref, text.strip())


async def watch(host: SlashHost, rest: str) -> bool:
    if not rest:
        host.notify("/watch WORD: name the word to watch", severity="error")
        return False
    try:
        added = host.agent.ladder.watch(rest)
    except (SessionError, ValueError) as exc:
        host.notify(str(exc), severity="error")
        return False
    host.notify(f"watching {rest!r}: it counts as a fact in every fold" if added else f"already watching {rest!r}")
    return True


async def recall(host: SlashHost, rest: str) -> bool:
    try:
        words = shlex.split(rest)
    except ValueError:
        words = rest.split()
    question_words: list[str] = []
    expect: list[str] = []
    target = question_words
    for w in words:
        if w == "--expect":
            target = expect
            continue
        target.append(w)
    question = " ".join(question_words)
    if not question and not expect:
        host.notify("/recall QUESTION [--expect WORD ...]", severity="error")
        return False
    try:
        report, unreadable = host.agent.stores.recall(question, expect)
    except (ValueError, SessionError) as exc:
        host.notify(str(exc), severity="error")
        return False
    for reason in unreadable:
        host.notify(f"not searched: {reason}", severity="warning")
    host.app.push_screen(RecallScreen(report))
    return True


# -- the session, the model, the app ----------------------------------------------------------


async def model(host: SlashHost, rest: str) -> bool:
    agent = host.agent
    if not rest:
        host.notify(f"the model is {agent.model.name}; /model SPEC switches it", severity="information")
        return True

    async def switch() -> None:
        try:
            await agent.switch_model(rest)
        except Exception as exc:  # a bad spec or a server that does not answer: say which
            host.notify(f"could not switch to {rest}: {exc}", severity="error")
            return
        host.refresh_header()
        host.notify(f"model: {agent.model.name}")

    host.run_worker(switch(), group="model", exit_on_error=False)
    return True


async def export(host: SlashHost, rest: str) -> bool:
    """`/export [md|json] [PATH]`: into the session's directory unless a path is given."""
    fmt, _, target = rest.strip().partition(" ")
    if fmt not in ("md", "json"):
        fmt, target = Path(rest.strip()).suffix[1:], rest.strip()
        if fmt not in ("md", "json"):
            host.notify("/export md, /export json, or a path ending in .md or .json", severity="error")
            return False
    try:
        path = host.agent.stores.export(fmt, Path(target.strip()) if target.strip() else None)
    except (OSError, ValueError) as exc:
        host.notify(f"export failed: {exc}", severity="error")
        return False
    host.notify(f"exported to {path}", timeout=15)
    return True


async def copy(host: SlashHost, rest: str) -> bool:
    """The last reply's text to the clipboard (OSC 52: the terminal must allow it; tmux needs set-clipboard on)."""
    reply = next((m for m in reversed(host.session.messages) if m.role == "assistant" and m.content.strip()), None)
    if reply is None:
        host.notify("no reply to copy yet", severity="warning")
    else:
        host.app.copy_to_clipboard(reply.content)
        host.notify(f"copied the last reply ({len(reply.content):,} characters)")
    return True  # nothing to copy yet is no typo to fix: the input is cleared all the same


async def theme(host: SlashHost, rest: str) -> bool:
    app = host.app
    if rest not in app.available_themes:
        names = ", ".join(sorted(app.available_themes))
        host.notify(f"/theme NAME, one of: {names}", severity="error")
        return False
    app.theme = rest
    return True


async def mcp(host: SlashHost, rest: str) -> bool:
    """`/mcp`: the servers, their state and tools; `/mcp disable NAME`, `/mcp enable NAME`."""
    hub = host.agent.mcp
    if hub is None:
        host.notify("no MCP server is configured: add [mcp.servers.NAME] to config.toml (see the README)")
        return True
    verb, _, name = rest.partition(" ")
    if verb in ("disable", "enable") and name.strip():
        # the hub notes what changed in the session (the journal); said here too, with what it saves
        tokens = hub.schema_tokens().get(name.strip(), 0)
        line = await hub.disable(name.strip()) if verb == "disable" else hub.enable(name.strip())
        saved = schema_rent(tokens, host.tail_figures) if verb == "disable" else ""
        host.notify(f"{line}; that saves {saved}" if saved else line, title="MCP", timeout=12)
        return True
    if verb:
        host.notify("/mcp lists the servers; /mcp disable NAME, /mcp enable NAME", severity="error")
        return False
    host.notify("\n".join(hub.lines()) or "no MCP server", title="MCP servers", timeout=30)
    return True


async def history(host: SlashHost, rest: str) -> bool:
    host.search_history()
    return True


async def retry(host: SlashHost, rest: str) -> bool:
    host.action_retry()
    return True


async def exit_app(host: SlashHost, rest: str) -> bool:
    host.app.exit()
    return True


async def new(host: SlashHost, rest: str) -> bool:
    # the app ends and `tailrent` opens a new session in the same terminal (ui/launch.py)
    host.app.next_session = "new"  # type: ignore[attr-defined]  # TailrentApp's (the demo has none to open)
    host.app.exit()
    return True


async def help_(host: SlashHost, rest: str) -> bool:
    host.action_help()
    return True
