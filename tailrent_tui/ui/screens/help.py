"""Help: every key (as currently bound, after the keymap), every slash command, and the Tail panel's words."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown

from tailrent_tui.ui.widgets.tail_panel import WORDS


class HelpScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll {
        width: 90; max-width: 96%; height: 90%; background: $surface; border: thick $primary; padding: 0 1;
    }
    """

    BINDINGS = [Binding("escape,q,f1", "close", "Close", id="help.close", tooltip="Back")]

    def __init__(self, keys: list[tuple[str, str, str]], slash_help: dict[str, str]) -> None:
        super().__init__()
        self.keys = keys
        self.slash_help = slash_help

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Markdown(self._text())

    def _text(self) -> str:
        rows = "\n".join(f"| {keys} | {what} (`{binding_id}`) |" for keys, what, binding_id in self.keys)
        slash = "\n".join(f"- `{line.split(':', 1)[0]}`:{line.split(':', 1)[1]}" for line in self.slash_help.values())
        words = "\n".join(f"- **{word}**: {meaning}" for word, meaning in WORDS)
        return (
            "# tailrent\n\n"
            "The transcript is on the left; the Tail, Spills, Ledger and Folds panels on the right (ctrl+b; "
            "hidden by itself under 100 columns).\n\n"
            "## Two modes\n\n"
            "- **input** (the usual): every key you type goes to the input. Enter sends, shift+enter or ctrl+j "
            "starts a new line, up/down at the first/last line walk what you sent before (ctrl+s searches it). "
            "`/` offers the commands, `@` the workspace's files (tab or enter takes one). A big paste shows as "
            "`[pasted N lines]` (ctrl+o expands it) and is sent beside your message as a tool output is: "
            "spilled with a pointer when big.\n"
            "- **navigation** (tab from the input): up/down or j/k move between messages, the selected one shows "
            "its id; p, u, s, f, i, c act on it, space marks it for the fold span, enter opens a spill or "
            "inspects a fold; a, x, e accept, supersede or edit its statement (on the Ledger panel: the highlighted "
            "one). Escape, `/` or any other letter goes back to the input (the letter is typed).\n\n"
            "## The ledger\n\n"
            "What you state that must survive every fold (a rule, a limit, a decision, a preference, where we are, "
            "an identifier) is a statement, kept word for word: pinned in its message, or carried by a fold into a "
            "pinned ledger message, never summarized. A correction supersedes the statement it corrects (struck "
            "through, `→` its successor) and it leaves the context at the next fold. What the model says it decided "
            "is a proposal (`?`) until you accept it (a). `/ledger` lists them all.\n\n"
            "## Keys (rebind them by id in config.toml's `[keymap]`)\n\n"
            "| key | action (id) |\n| --- | --- |\n" + rows + "\n\n"
            "## Commands in the input\n\n" + slash + "\n- `!cmd`: run a shell command in the workspace; "
            "its output enters through the ladder (truncate, spill)\n\n"
            "The command palette (ctrl+p) has the same actions, and the theme switcher.\n\n"
            "## The Tail panel's words\n\n"
            "Every request resends the whole context: system prompt, tool schema, the conversation so far.\n\n" + words + "\n"
        )

    def action_close(self) -> None:
        self.dismiss(None)
