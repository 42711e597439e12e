"""The command palette: everything the keys do, and every slash command, findable by name.

The slash commands come from the one table (`ui/slash.py`): one that needs an
argument fills the input with `/name ` to complete there; the others run.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider

from tailrent_tui.ui.slash import SLASH_COMMANDS, SlashCommand

# (palette text, help, app method to call)
LADDER_COMMANDS = (
    ("Pin the focused message", "No fold may touch it", "action_pin"),
    ("Unpin the focused message", "Folds may take it again", "action_unpin"),
    ("Spill the focused message", "Move its content to a spill file, leave a pointer", "action_spill"),
    ("Fold", "The marked span, or the oldest unpinned span down to the fold target", "action_fold"),
    ("Inspect a fold", "Originals and summary side by side, lost facts highlighted", "action_inspect"),
    ("Toggle the sidebar", "The Tail, Spills, Pins and Folds panels", "action_toggle_sidebar"),
    ("Cancel the reply", "Stop the running reply; its partial text is kept", "action_cancel_reply"),
    ("Retry the last turn", "After a model error", "action_retry"),
    ("Dismiss the notice", "Hide the bar under the header", "action_dismiss_notice"),
    ("Help", "Keys and slash commands", "action_help"),
)


class LadderCommands(Provider):
    """The ladder's actions, then `/pin` ... `/help`."""

    def _entries(self) -> list[tuple[str, str, Callable[[], object]]]:
        entries: list[tuple[str, str, Callable[[], object]]] = [
            (text, help_text, partial(self._run, method)) for text, help_text, method in LADDER_COMMANDS
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

    def _run(self, method: str) -> None:
        getattr(self.app, method)()

    def _slash(self, command: SlashCommand) -> None:
        self.app.run_palette_slash(command)  # type: ignore[attr-defined]
