"""The input: a multi-line editor. Enter sends; shift+enter or ctrl+j starts a new line.

- A paste keeps its lines. A big one (over `CHIP_LINES` lines or `chip_chars`
  characters) shows as a chip, `[pasted 212 lines]`; ctrl+o expands the chips
  back into text. What a chip holds is sent beside the message and enters the
  context as a tool output does (capped, spilled with a pointer when big).
- Up at the first line and down at the last walk the history (kept per
  workspace across restarts); ctrl+s searches it.
- Typing `/` offers the slash commands, then their arguments; `@` offers
  workspace paths. Tab or enter takes the highlighted entry, escape closes it.
- Tab (with nothing offered) moves to the messages: navigation mode.

Slash commands and `!cmd` are typed here too; the app interprets them. What is
sent is not cleared by the box itself: the app clears it once it has accepted
it, so an unknown command stays in the box to be fixed.
"""

from __future__ import annotations

from textual import events
from textual.actions import SkipAction
from textual.binding import Binding
from textual.widgets import TextArea

from tailrent_tui.store.history import PromptHistory
from tailrent_tui.ui.chips import chip_label, paste_lines
from tailrent_tui.ui.completion import Item, Sources, complete
from tailrent_tui.ui.events import PromptSubmitted
from tailrent_tui.ui.screens.history_search import HistorySearch
from tailrent_tui.ui.widgets.completion_menu import CompletionMenu

#: A paste with more lines than this becomes a chip.
CHIP_LINES = 20


class PromptInput(TextArea):
    """The prompt editor, with a history of what was sent."""

    DEFAULT_CSS = """
    PromptInput {
        margin: 0 1; height: auto; min-height: 3; max-height: 12;
        border: tall $primary 40%; background: $surface; padding: 0 1;
    }
    PromptInput:focus { border: tall $primary; }
    PromptInput .text-area--cursor-line { background: transparent; }
    """

    BINDINGS = [
        Binding(
            "shift+enter,ctrl+j", "newline", "New line", show=False, id="input.newline", tooltip="Start a new line (enter sends)"
        ),
        Binding(
            "up",
            "up",
            "Previous input",
            show=False,
            id="input.history_previous",
            tooltip="At the first line: what you sent before this",
        ),
        Binding(
            "down",
            "down",
            "Next input",
            show=False,
            id="input.history_next",
            tooltip="At the last line: what you sent after this",
        ),
        Binding(
            "tab",
            "tab",
            "To messages",
            id="input.to_transcript",
            tooltip="Take the offered completion, else move to the messages (navigation: p u s f i act there)",
        ),
        Binding(
            "ctrl+s",
            "search_history",
            "History",
            id="input.search_history",
            tooltip="Search what you typed before, in this workspace",
        ),
        Binding(
            "ctrl+o",
            "expand_pastes",
            "Expand paste",
            show=False,
            id="input.expand_paste",
            tooltip="Put the text of the [pasted N lines] chips back into the input",
        ),
        Binding(
            "ctrl+c",
            "copy_or_interrupt",
            "Copy / interrupt",
            show=False,
            id="input.copy",
            tooltip="Copy the selection; with none, the screen's ctrl+c (interrupt, clear the input, quit)",
        ),
    ]

    def __init__(
        self,
        history: PromptHistory | list[str] | None = None,
        *,
        menu: CompletionMenu | None = None,
        sources: Sources | None = None,
        chip_chars: int = 8000,
        id: str | None = None,
    ) -> None:
        super().__init__(id=id, soft_wrap=True, show_line_numbers=False, tab_behavior="focus")
        if not isinstance(history, PromptHistory):
            entries = list(history or [])
            history = PromptHistory(None)
            history.entries = entries
        self.prompt_history = history
        self.menu = menu
        self.sources = sources or Sources()
        self.chip_chars = chip_chars
        # keys the input does not take while it is empty, so the app's bindings get them (the demo's space)
        self.keys_when_empty: frozenset[str] = frozenset()
        # chip label -> the pasted text it stands for
        self.pastes: dict[str, str] = {}
        self.placeholder = "Ask · enter sends · shift+enter new line · / commands · @ files"
        self._cursor = len(self.prompt_history.entries)
        self._draft = ""
        self._quiet = False
        if menu is not None:
            menu.on_pick = self.take

    # -- the text ------------------------------------------------------------------

    @property
    def value(self) -> str:
        return self.text

    @value.setter
    def value(self, text: str) -> None:
        self._quiet = True
        try:
            self.load_text(text)
            self.move_cursor(self.document.end)
        finally:
            self._quiet = False
        self._close_menu()

    def insert_typed(self, text: str) -> None:
        """Type `text` at the cursor, as keys would (the transcript hands over a key this way)."""
        start, end = self.selection
        self._replace_via_keyboard(text, start, end)

    def remember(self, text: str) -> None:
        """Add a sent prompt to the history (no repeats in a row) and reset the walk."""
        self.prompt_history.append(text)
        self._cursor = len(self.prompt_history.entries)
        self._draft = ""

    def clear_sent(self, typed: str) -> None:
        """Take what was sent (`typed`, the text when enter was pressed) out of the box, keeping
        whatever was typed or pasted after it while the app took it in (a fast typist's next
        words, a paste): nothing typed is lost. Chips no longer in the box are forgotten."""
        now = self.text
        if now == typed:
            self.value = ""
        elif now.startswith(typed):
            self.value = now[len(typed) :].lstrip("\n")
        # else the sent text was edited meanwhile: it stays as it is, to send or clear
        self.pastes = self.sent_pastes(self.text)

    def sent_pastes(self, text: str) -> dict[str, str]:
        """The chips still present in `text`, with what they hold."""
        return {label: body for label, body in self.pastes.items() if label in text}

    # -- keys ----------------------------------------------------------------

    def check_consume_key(self, key: str, character: str | None = None) -> bool:
        # an empty input lets `keys_when_empty` reach the app's bindings (the demo's space)
        if not self.text and key in self.keys_when_empty:
            return False
        return super().check_consume_key(key, character)

    async def _on_key(self, event: events.Key) -> None:
        # runs before TextArea's own handler, which would insert a newline on enter
        if event.key == "enter":
            event.stop()
            event.prevent_default()
            menu = self.menu
            if menu is not None and menu.is_open:
                # keys typed in one burst arrive before their Changed messages: an open menu
                # may still offer what fitted the text a few keys ago (enter took "/pin" for "/fold")
                self.refresh_completion()
            if menu is not None and menu.is_open and menu.completion and menu.completion.token.strip() not in ("", "@"):
                item = menu.current
                if item is not None and item.text != menu.completion.token:
                    self.take(item)
                    return
            self._close_menu()
            text = self.text.strip()
            if text:
                self.post_message(PromptSubmitted(text, self.sent_pastes(text), typed=self.text))
        elif event.key == "escape" and self.menu is not None and self.menu.is_open:
            event.stop()
            event.prevent_default()
            self._close_menu()

    def action_copy_or_interrupt(self) -> None:
        if self.selected_text:
            self.action_copy()
            return
        raise SkipAction()  # the session screen's ctrl+c: interrupt, clear, quit

    def action_clear_input(self) -> None:
        if not self.text:
            return
        # through the editor's own edit, so that its undo (ctrl+z) brings the text back, and with it
        # its chips: their pastes stay known (only the chips present in the text are ever sent)
        self.replace("", self.document.start, self.document.end)

    def action_newline(self) -> None:
        self.insert_typed("\n")

    def action_up(self) -> None:
        if self.menu is not None and self.menu.is_open:
            self.menu.move(-1)
        elif self.cursor_location[0] == 0:
            self._walk(-1)
        else:
            self.action_cursor_up()

    def action_down(self) -> None:
        if self.menu is not None and self.menu.is_open:
            self.menu.move(1)
        elif self.cursor_location[0] == self.document.line_count - 1:
            self._walk(1)
        else:
            self.action_cursor_down()

    def _walk(self, step: int) -> None:
        entries = self.prompt_history.entries
        if not entries:
            return
        if self._cursor >= len(entries):
            self._cursor = len(entries)
            self._draft = self.text
        new = min(max(self._cursor + step, 0), len(entries))
        if new == self._cursor:
            return
        self._cursor = new
        self.value = self._draft if new == len(entries) else entries[new]

    def action_tab(self) -> None:
        if self.menu is not None and self.menu.is_open and self.menu.current is not None:
            self.take(self.menu.current)
            return
        self.to_transcript()

    def to_transcript(self) -> None:
        views = self.screen.query("Transcript MessageView")
        if views:
            views.last().focus()
        else:
            self.screen.focus_next()

    def action_search_history(self) -> None:
        def picked(text: str | None) -> None:
            if text is not None:
                self.value = text
                self._cursor = len(self.prompt_history.entries)
            self.focus()

        self.app.push_screen(HistorySearch(self.prompt_history, self.text if "\n" not in self.text else ""), picked)

    # -- pastes --------------------------------------------------------------

    async def _on_paste(self, event: events.Paste) -> None:
        event.stop()
        event.prevent_default()
        if self.read_only:
            return
        text = event.text.replace("\r\n", "\n").replace("\r", "\n")
        lines = paste_lines(text)
        if lines > CHIP_LINES or len(text) > self.chip_chars:
            label = chip_label(lines, self.pastes)
            self.pastes[label] = text
            text = label
        self.insert_typed(text)
        self.focus()

    def action_expand_pastes(self) -> None:
        text = self.text
        chips = self.sent_pastes(text)
        if not chips:
            self.notify("no [pasted N lines] chip to expand", severity="information")
            return
        for label, body in chips.items():
            text = text.replace(label, body)
            del self.pastes[label]
        self.value = text

    # -- completion --------------------------------------------------------------

    def _on_text_area_changed(self, event: TextArea.Changed) -> None:
        if not self._quiet:
            self.refresh_completion()

    def refresh_completion(self) -> None:
        if self.menu is None:
            return
        row, col = self.cursor_location
        line = self.document[row][:col]
        offered = complete(self.text, line, self.sources) if self.has_focus or self.text else None
        self.menu.show(offered)

    def _close_menu(self) -> None:
        if self.menu is not None and self.menu.is_open:
            self.menu.show(None)

    def take(self, item: Item) -> None:
        """Replace the token being completed with `item` (and a space, unless more may follow)."""
        menu = self.menu
        if menu is None or menu.completion is None:
            return
        row, col = self.cursor_location
        start = (row, menu.completion.start)
        more = item.text.endswith("/") or item.text.endswith(":")
        self.replace(item.text + ("" if more else " "), start, (row, col))
        self.focus()
        self.refresh_completion()
