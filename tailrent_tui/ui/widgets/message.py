"""One transcript message: a header line (who, kind, tokens, pin mark, fold depth) and its body.

Assistant chat replies render as Markdown; everything else as plain text, so
tool output is shown exactly. Long tool output is shown in part (the session
keeps all of it). The kind and role become CSS classes, so each kind looks
different through the theme's variables, never hard-coded colors.
"""

from __future__ import annotations

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.content import Content
from textual.widget import Widget
from textual.widgets import Markdown, Static

from tailrent_tui.core.ledger import LEDGER_HEADER
from tailrent_tui.core.messages import Kind, Message
from tailrent_tui.core.session import Session
from tailrent_tui.text import visible
from tailrent_tui.ui.events import (
    FoldInspectRequested,
    MessageFocused,
    SpillOpenRequested,
)

# Tool output beyond this many lines is shown cut; Enter on a spill pointer opens the whole.
BODY_LINES = 12
# Width assumed when estimating how many lines a message takes (for pruning).
ESTIMATE_WIDTH = 100

_KIND_CLASS = {
    Kind.chat: "",
    Kind.tool_result: "-tool",
    Kind.spill_pointer: "-spill",
    Kind.fold_summary: "-fold",
    Kind.delegate_result: "-delegate",
    Kind.memory_pointer: "-memory",
    Kind.instructions: "-instructions",
    Kind.ledger: "-ledger",
}
_KIND_LABEL = {
    Kind.tool_result: "tool",
    Kind.spill_pointer: "spill pointer",
    Kind.fold_summary: "fold summary",
    Kind.delegate_result: "delegate",
    Kind.memory_pointer: "memory pointer",
    Kind.instructions: "project instructions",
    Kind.ledger: "statements kept verbatim",
}
_ROLE_LABEL = {"user": "you", "assistant": "assistant", "system": "system", "tool": "tool"}


def shown_body(m: Message) -> str:
    """The text the transcript shows for a message (tool output cut to BODY_LINES; a ledger's
    lines without their header, which the message's own header says)."""
    text = m.content
    if m.kind == Kind.ledger:
        lines = text.splitlines()
        return visible("\n".join(lines[1:] if lines and lines[0] == LEDGER_HEADER else lines))
    if m.tool_calls:
        calls = "\n".join(f"→ {c.name}({_args(c.arguments)})" for c in m.tool_calls)
        text = f"{text}\n{calls}" if text.strip() else calls
    if m.kind == Kind.tool_result:
        lines = text.splitlines()
        if len(lines) > BODY_LINES:
            more = len(lines) - BODY_LINES
            text = "\n".join(lines[:BODY_LINES]) + f"\n… {more:,} more lines in the session"
    # model text, tool output, file contents: a control or escape sequence is shown, never sent to the terminal
    return visible(text)


def _args(arguments: dict) -> str:
    text = ", ".join(f"{k}={v!r}" for k, v in arguments.items())
    return text if len(text) <= 120 else text[:117] + "..."


def estimate_lines(m: Message) -> int:
    """Rough rendered height, for the prune watermark (no layout needed)."""
    body = shown_body(m)
    lines = sum(1 + len(line) // ESTIMATE_WIDTH for line in body.splitlines()) or 1
    return lines + 2


def header_content(m: Message, selected: bool = False, show_id: bool = False, statements: str = "") -> Content:
    who = _ROLE_LABEL.get(m.role, m.role)
    kind = _KIND_LABEL.get(m.kind)
    if m.kind == Kind.tool_result and m.tool:
        kind = m.tool  # the role says "tool" already
    if m.kind == Kind.instructions:
        who, kind = "project instructions", str(m.meta.get("source", ""))
    if m.kind == Kind.spill_pointer and m.tool:
        kind = f"spill pointer · {m.tool}"
    if m.kind == Kind.ledger:
        n = len(m.meta.get("statements", ()))
        who, kind = "ledger", f"{n} statement{'s' if n != 1 else ''} kept verbatim"
    retired = m.kind == Kind.fold_summary and bool(m.meta.get("retired"))
    if retired:
        kind = "retired fold · its summary is in the archive"
    parts = [Content.styled(who, "bold")]
    if kind:
        parts.append(Content(f" · {kind}"))
    parts.append(Content(f" · {m.tokens:,} tok"))
    if m.kind == Kind.fold_summary and not retired:
        parts.append(Content(" "))
        parts.append(Content.from_markup("[reverse $tail-summary] fold x$depth [/]", depth=m.fold_depth))
    if m.pinned:
        parts.append(Content(" "))
        parts.append(Content.from_markup("[reverse $tail-pinned] pinned [/]"))
    if m.meta.get("cancelled"):
        parts.append(Content.from_markup(" [$warning]· cancelled[/]"))
    if selected:
        parts.append(Content.from_markup(" [$accent]· in fold span[/]"))
    if show_id:
        parts.append(Content.from_markup(" [$accent]· id $id[/]", id=m.id))
    if statements:
        parts.append(Content.from_markup(" [$tail-pinned]· ledger $s[/]", s=statements))
    return Content("").join(parts)


def statement_numbers(session: Session | None, message_id: str) -> str:
    """ "#1 #3?": the ledger's numbers of the statements this message holds or said (? a proposal, ~ superseded)."""
    if session is None or not session.statements:
        return ""
    statements = session.statements
    held = session.statements_held(message_id)
    marks = {"current": "", "proposal": "?", "superseded": "~"}
    out = []
    for no, (sid, st) in enumerate(statements.items(), 1):
        if sid in held or st.message_id == message_id:
            out.append(f"#{no}{marks.get(st.status, '')}")
    return " ".join(out)


def kind_classes(m: Message) -> str:
    classes = [f"-{m.role}"]
    extra = _KIND_CLASS.get(m.kind, "")
    if extra:
        classes.append(extra)
    if m.pinned:
        classes.append("-pinned")
    return " ".join(classes)


class MessageView(Widget, can_focus=True):
    """A message of the session, as the transcript shows it."""

    DEFAULT_CSS = """
    MessageView {
        height: auto;
        padding: 0 1;
        margin: 0 0 1 0;
        border-left: outer $surface;
    }
    MessageView > .head { color: $text-muted; height: 1; }
    MessageView > .body { height: auto; }
    MessageView > Markdown { margin: 0; padding: 0; background: transparent; }
    MessageView > Markdown > MarkdownBlock:last-child { margin-bottom: 0; }
    MessageView.-user { border-left: outer $primary; background: $surface; }
    MessageView.-assistant { border-left: outer $secondary; }
    MessageView.-tool { border-left: outer $panel-lighten-2; color: $text-muted; }
    MessageView.-spill { border-left: outer $tail-pointer; color: $text-muted; }
    MessageView.-fold { border-left: outer $tail-summary; background: $panel; }
    MessageView.-delegate { border-left: outer $success; }
    MessageView.-memory { border-left: outer $tail-pointer; }
    MessageView.-ledger { background: $panel; }
    MessageView.-ledger > .body { color: $text; }
    MessageView.-pinned { border-left: thick $tail-pinned; }
    MessageView.-selected { background: $accent 15%; }
    MessageView.-error { border-left: thick $error; color: $error; }
    MessageView:focus { background: $primary 20%; }
    MessageView > .thinking { color: $text-muted; text-style: italic; height: auto; }
    """

    BINDINGS = [
        Binding("enter", "open", "Open", show=False, id="message.open", tooltip="Open a spill or inspect a fold"),
        Binding(
            "space",
            "toggle_span",
            "Mark for fold",
            show=False,
            id="message.mark",
            tooltip="Add or remove this message from the span that f folds",
        ),
        Binding("c", "copy", "Copy", id="message.copy", tooltip="Copy this message's text to the clipboard"),
    ]

    def __init__(self, message: Message | None, *, selected: bool = False) -> None:
        classes = kind_classes(message) if message is not None else "-assistant"
        super().__init__(classes=classes)
        self.message = message
        self.selected = selected
        # set by the transcript for fold summaries: which fold made this one
        self.fold_no: int | None = None
        self.set_class(selected, "-selected")

    @property
    def message_id(self) -> str | None:
        return self.message.id if self.message is not None else None

    @property
    def estimated_lines(self) -> int:
        return estimate_lines(self.message) if self.message is not None else 3

    def compose(self) -> ComposeResult:
        m = self.message
        assert m is not None
        yield Static(header_content(m, self.selected), classes="head")
        if m.role == "assistant" and m.kind == Kind.chat:
            yield Markdown(shown_body(m), classes="body")
        else:
            yield Static(shown_body(m), classes="body", markup=False)

    def update_message(self, m: Message) -> None:
        """The message changed (pinned, unpinned, spilled): redraw header, body and classes."""
        self.message = m
        for cls in list(self.classes):
            if cls.startswith("-") and cls != "-selected":
                self.remove_class(cls)
        self.add_class(*kind_classes(m).split())
        self._update_head()
        body = self.query_one(".body")
        if isinstance(body, (Markdown, Static)):
            body.update(shown_body(m))

    def set_selected(self, selected: bool) -> None:
        self.selected = selected
        self.set_class(selected, "-selected")
        self._update_head()

    def _update_head(self, focused: bool | None = None) -> None:
        if self.message is not None and self.is_mounted:
            show_id = self.has_focus if focused is None else focused
            # the selected message lists its statements: what a, x and e act on
            numbers = statement_numbers(getattr(self.screen, "session", None), self.message.id) if show_id else ""
            self.query_one(".head", Static).update(header_content(self.message, self.selected, show_id, numbers))

    def on_key(self, event: events.Key) -> None:
        """Navigation keeps only the keys bound here; `/` and any other printable key go back to the input.

        A key that arrives once the focus has left (the rest of a typed burst)
        goes back too, whatever it is, so `/export md` never pins with its `p`.
        """
        late = self.screen.focused is not self
        bound = event.character != "/" and event.key in self.screen.active_bindings
        if not late and (not event.is_printable or event.character is None or bound):
            return
        event.stop()
        event.prevent_default()
        self.screen.return_to_input(event.key, event.character)  # type: ignore[attr-defined]

    def on_focus(self) -> None:
        # the selected message shows its id: what /pin ID and /fold ID take
        self._update_head(focused=True)
        if self.message is not None:
            self.post_message(MessageFocused(self.message.id))

    def on_blur(self) -> None:
        self._update_head(focused=False)

    def action_copy(self) -> None:
        if self.message is not None:
            self.app.copy_to_clipboard(self.message.content)
            self.notify(f"copied message {self.message.id} ({len(self.message.content):,} characters)")

    def action_open(self) -> None:
        m = self.message
        if m is None:
            return
        if m.kind == Kind.spill_pointer and m.spill_id:
            self.post_message(SpillOpenRequested(m.spill_id))
        elif m.kind == Kind.fold_summary and self.fold_no is not None:
            self.post_message(FoldInspectRequested(self.fold_no))

    def action_toggle_span(self) -> None:
        if self.message is not None and not self.message.pinned:
            self.set_selected(not self.selected)
