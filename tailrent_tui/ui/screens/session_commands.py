"""The session's other slash commands, `!cmd`, and how a slash command finds its handler.

`run_slash` looks the name up in the table (`ui/actions.py`) and runs the
screen's `_slash_<name>`: the ladder's commands are `LadderActions`'
(`session_ladder.py`), the others (model, export, copy, theme, history,
retry, help) are here.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from textual import events, on
from textual.binding import Binding

from tailrent_tui.ui.actions import BINDINGS, SLASH_HELP, SlashCommand
from tailrent_tui.ui.screens.help import HelpScreen
from tailrent_tui.ui.screens.session_ladder import LadderActions
from tailrent_tui.ui.widgets.input import PromptInput
from tailrent_tui.ui.widgets.message import MessageView
from tailrent_tui.ui.widgets.tail_panel import schema_rent


class SessionCommands(LadderActions):
    """Slash commands besides the ladder's, `!cmd`, and help (part of `SessionScreen`)."""

    async def run_slash(self, text: str) -> bool:
        """Run a slash command; False (input kept) when it is unknown or malformed."""
        name, _, rest = text[1:].partition(" ")
        rest = rest.strip()
        handler = getattr(self, f"_slash_{name.replace('-', '_')}", None) if name in SLASH_HELP else None
        if handler is None:
            self.notify(f"unknown command /{name}: /help lists the commands", severity="error")
            return False
        return await handler(rest)

    def run_palette_slash(self, command: SlashCommand) -> None:
        """A slash command chosen in the palette: run it, or (if it needs an argument) start it in the input."""
        if command.needs_arg:
            box = self.prompt
            box.value = f"/{command.name} "
            box.focus()
            box.refresh_completion()
            return
        self.run_worker(self.run_slash(f"/{command.name}"), group="palette", exit_on_error=False)

    async def _slash_model(self, rest: str) -> bool:
        if not rest:
            self.notify(f"the model is {self.agent.model.name}; /model SPEC switches it", severity="information")
            return True

        async def switch() -> None:
            try:
                await self.agent.switch_model(rest)
            except Exception as exc:  # a bad spec or a server that does not answer: say which
                self.notify(f"could not switch to {rest}: {exc}", severity="error")
                return
            self.app.sub_title = self._sub_title()
            self.show_agent_notice()
            self.notify(f"model: {self.agent.model.name}")

        self.run_worker(switch(), group="model", exit_on_error=False)
        return True

    async def _slash_export(self, rest: str) -> bool:
        """`/export [md|json] [PATH]`: into the session's directory unless a path is given."""
        fmt, _, target = rest.strip().partition(" ")
        if fmt not in ("md", "json"):
            fmt, target = Path(rest.strip()).suffix[1:], rest.strip()
            if fmt not in ("md", "json"):
                self.notify("/export md, /export json, or a path ending in .md or .json", severity="error")
                return False
        try:
            path = self.agent.export(fmt, Path(target.strip()) if target.strip() else None)
        except (OSError, ValueError) as exc:
            self.notify(f"export failed: {exc}", severity="error")
            return False
        self.notify(f"exported to {path}", timeout=15)
        return True

    async def _slash_copy(self, rest: str) -> bool:
        self.copy_last_reply()
        return True  # nothing to copy yet is no typo to fix: the input is cleared all the same

    async def _slash_theme(self, rest: str) -> bool:
        if rest not in self.app.available_themes:
            names = ", ".join(sorted(self.app.available_themes))
            self.notify(f"/theme NAME, one of: {names}", severity="error")
            return False
        self.app.theme = rest
        return True

    def start_mcp(self) -> None:
        """After the first frame: start the MCP servers in the background; they stop when the worker
        does (quit, or the app's end), and each says how it went in one note."""
        hub = self.agent.mcp
        if hub is None:
            return
        self.sidebar.mcp_tokens = hub.schema_tokens

        self.run_worker(hub.start(), group="mcp", name="mcp servers", exit_on_error=False)

    @on(events.Unmount)
    async def stop_mcp(self) -> None:
        """Stop the MCP servers while the loop still runs (quit, or the app's end), beside the
        screen's own `on_unmount`; launch kills any survivor after the loop."""
        hub = self.agent.mcp
        if hub is not None and hub.started:
            await hub.aclose()

    async def _slash_mcp(self, rest: str) -> bool:
        """`/mcp`: the servers, their state and tools; `/mcp disable NAME`, `/mcp enable NAME`."""
        hub = self.agent.mcp
        if hub is None:
            self.notify("no MCP server is configured: add [mcp.servers.NAME] to config.toml (see the README)")
            return True
        verb, _, name = rest.partition(" ")
        if verb in ("disable", "enable") and name.strip():
            # the hub notes what changed in the session (the journal); said here too, with what it saves
            tokens = hub.schema_tokens().get(name.strip(), 0)
            line = await hub.disable(name.strip()) if verb == "disable" else hub.enable(name.strip())
            saved = schema_rent(tokens, self.sidebar.tail.figures) if verb == "disable" else ""
            self.notify(f"{line}; that saves {saved}" if saved else line, title="MCP", timeout=12)
            return True
        if verb:
            self.notify("/mcp lists the servers; /mcp disable NAME, /mcp enable NAME", severity="error")
            return False
        self.notify("\n".join(hub.lines()) or "no MCP server", title="MCP servers", timeout=30)
        return True

    async def _slash_history(self, rest: str) -> bool:
        self.prompt.action_search_history()
        return True

    async def _slash_retry(self, rest: str) -> bool:
        self.action_retry()
        return True

    async def _slash_exit(self, rest: str) -> bool:
        self.app.exit()
        return True

    async def _slash_new(self, rest: str) -> bool:
        # the app ends and `tailrent` opens a new session in the same terminal (ui/launch.py)
        self.app.next_session = "new"  # type: ignore[attr-defined]  # TailrentApp's (the demo has none to open)
        self.app.exit()
        return True

    async def _slash_clear(self, rest: str) -> bool:
        return await self._slash_new(rest)

    async def _slash_help(self, rest: str) -> bool:
        self.action_help()
        return True

    def copy_last_reply(self) -> bool:
        """The last reply's text to the clipboard (OSC 52: the terminal must allow it; tmux needs set-clipboard on)."""
        reply = next((m for m in reversed(self.session.messages) if m.role == "assistant" and m.content.strip()), None)
        if reply is None:
            self.notify("no reply to copy yet", severity="warning")
            return False
        self.app.copy_to_clipboard(reply.content)
        self.notify(f"copied the last reply ({len(reply.content):,} characters)")
        return True

    def action_help(self) -> None:
        self.app.push_screen(HelpScreen(self.key_table(), SLASH_HELP))

    def key_table(self) -> list[tuple[str, str, str]]:
        """(keys, what, binding id) of the app's, the session's, the input's and a message's bindings, after the keymap."""
        keymap = self.app._keymap
        rows = []
        for binding in [*type(self.app).BINDINGS, *BINDINGS, *PromptInput.BINDINGS, *MessageView.BINDINGS]:
            if isinstance(binding, Binding) and binding.id:
                keys = keymap.get(binding.id, binding.key)
                rows.append((keys, binding.tooltip or binding.description, binding.id))
        return rows

    def _run_shell(self, command: str) -> bool:
        if not command:
            self.notify("!cmd runs a shell command: type one after the !", severity="error")
            return False
        if self.busy:
            self.notify("a reply or a fold is running: wait, or press escape to cancel it", severity="warning")
            return False
        if self._shell_worker is not None and not self._shell_worker.is_finished:
            self.notify("a command is running: wait, or press escape to stop it", severity="warning")
            return False

        async def run() -> None:
            try:
                await self.agent.shell(command)
            except asyncio.CancelledError:
                self.notify(f"!{command} cancelled: its processes were killed", severity="warning")
                raise
            except Exception as exc:  # the command's failure is the user's to read, not a crash
                self.notify(f"!{command} failed: {exc}", severity="error")

        self._shell_worker = self.run_worker(run(), group="shell", exit_on_error=False)
        return True
