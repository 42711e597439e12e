"""The command palette: everything the keys do, and every slash command, findable by name.

Both come from the one table of actions (`ui/actions.py`). The palette says
what was chosen to the screen it runs on (`PaletteAction`, `PaletteSlash`):
the session screen runs the action, or the slash command (one that needs an
argument fills the input with `/name ` to complete there).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider

from tailrent_tui.ui.actions import PALETTE, SLASH_COMMANDS
from tailrent_tui.ui.events import PaletteAction, PaletteSlash


class LadderCommands(Provider):
    """The ladder's actions, then `/pin` ... `/help` (the session screen's palette entries)."""

    def _entries(self) -> list[tuple[str, str, Callable[[], object]]]:
        entries: list[tuple[str, str, Callable[[], object]]] = [
            (text, help_text, partial(self._action, action)) for text, help_text, action in PALETTE
        ]
        entries += [(command.usage, command.help, partial(self._slash, command.name)) for command in SLASH_COMMANDS]
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

    def _action(self, action: str) -> None:
        self.screen.post_message(PaletteAction(action))

    def _slash(self, name: str) -> None:
        self.screen.post_message(PaletteSlash(name))
