"""The command palette's ladder commands: everything the keys do, findable by name."""

from __future__ import annotations

from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider

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
    ("Help", "Keys and slash commands", "action_help"),
)


class LadderCommands(Provider):
    """pin, unpin, spill, fold, inspect, sidebar, cancel, retry, help."""

    async def discover(self) -> Hits:
        for text, help_text, method in LADDER_COMMANDS:
            yield DiscoveryHit(text, partial(self._run, method), help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for text, help_text, method in LADDER_COMMANDS:
            score = matcher.match(text)
            if score > 0:
                yield Hit(score, matcher.highlight(text), partial(self._run, method), help=help_text)

    def _run(self, method: str) -> None:
        getattr(self.app, method)()
