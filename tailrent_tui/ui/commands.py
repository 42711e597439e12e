"""The command palette: everything the keys do, and every slash command, findable by name.

Both come from the one table of actions (`ui/actions.py`): an action runs on
the session screen; a slash command that needs an argument fills the input
with `/name ` to complete there, the others run.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider

from tailrent_tui.ui.actions import PALETTE, SLASH_COMMANDS, SlashCommand


class LadderCommands(Provider):
    """The ladder's actions, then `/pin` ... `/help` (the session screen's palette entries)."""

    def _entries(self) -> list[tuple[str, str, Callable[[], object]]]:
        entries: list[tuple[str, str, Callable[[], object]]] = [
            (text, help_text, partial(self._run, action)) for text, help_text, action in PALETTE
        ]
        entries += [(command.usage, command.help, partial(self._slash, command)) for command in SLASH_COMMANDS]
        return entries

    async def discover(self) -> Hits:
        for text, help_text, run in self._entries():
            yield DiscoveryHit(text, run, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for text, help_text, run in self._entries():
            score = max(matcher.match(text), matcher.match(help_text) * 0.5)
            if score > 0:
                yield Hit(score, matcher.highlight(text), run, help=help_text)

    def _run(self, action: str) -> None:
        getattr(self.screen, f"action_{action}")()

    def _slash(self, command: SlashCommand) -> None:
        from tailrent_tui.ui.screens.session import SessionScreen

        if isinstance(self.screen, SessionScreen):
            self.screen.run_palette_slash(command)
