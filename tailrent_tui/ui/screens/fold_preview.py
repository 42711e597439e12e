"""The fold preview: a fold shown before it applies (`fold_preview`, issue 15).

The span's originals beside the proposed summary (facts the summarizer dropped
marked, those the guard repaired too), the tokens before and after, and what
the next request will re-read because of it. Enter applies; `e` edits the
summary in place (ctrl+s hands the edit back to be guarded and shown again);
escape cancels (nothing is folded).
"""

from __future__ import annotations

from collections.abc import Mapping

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Footer, Static, TextArea

from tailrent_tui.core.ledger import Statement
from tailrent_tui.core.summarize import Review, Verdict
from tailrent_tui.ui.screens.fold_inspector import facts_line, fold_css, fold_sides, ledger_summary, writer_line
from tailrent_tui.ui.widgets.tail_panel import duration


def preview_title(review: Review) -> str:
    f = review.record
    n = len(f.span_ids)
    messages = f"{n} message{'s' if n != 1 else ''}"
    return f"fold preview · {messages} · {f.tokens_before:,} → {f.tokens_after:,} tokens · trigger {f.trigger}"


def cost_line(review: Review, reread: int | None, seconds: float | None) -> Content:
    f = review.record
    if f.tokens_after >= f.tokens_before:
        return Content.from_markup(
            "[b $error]this summary is not smaller than its span: it cannot be applied[/] (e edits it, escape cancels)"
        )
    line = f"context {f.context_before:,} → {f.context_after:,} tokens"
    if reread is not None:
        line += f"; the next request re-reads the {reread:,} tokens from the summary on"
        if seconds is not None:
            line += f" (~{duration(seconds)} at the measured rate)"
    return Content(line)


class FoldPreview(ModalScreen[Verdict]):
    """Enter applies, e edits, escape cancels; the result is the Verdict the plan gets."""

    DEFAULT_CSS = (
        fold_css("FoldPreview", "$warning")
        + """
    FoldPreview #editor { height: 1fr; display: none; }
    FoldPreview.editing #editor { display: block; }
    FoldPreview.editing #summary-text { display: none; }
    """
    )

    BINDINGS = [
        Binding("enter", "apply", "Apply", id="preview.apply", priority=True, tooltip="Apply this fold as shown"),
        Binding("e", "edit", "Edit summary", id="preview.edit", tooltip="Edit the summary; the guard checks the edit"),
        Binding(
            "ctrl+s",
            "check_edit",
            "Check the edit",
            id="preview.check",
            tooltip="Hand the edited summary back: the guard checks it and the preview shows it again",
        ),
        Binding("escape", "cancel", "Cancel", id="preview.cancel", tooltip="Nothing is folded (while editing: drop the edit)"),
    ]

    def __init__(
        self,
        review: Review,
        *,
        reread: int | None = None,
        seconds: float | None = None,
        statements: Mapping[str, Statement] | None = None,
    ) -> None:
        super().__init__()
        self.review = review
        self.statements = statements
        self.reread = reread
        self.seconds = seconds
        self.editing = False

    @property
    def body(self) -> str:
        """The summary without its header line: what the user edits."""
        head, _, rest = self.review.record.summary.content.partition("\n")
        return rest if head.startswith("[") else self.review.record.summary.content

    def compose(self) -> ComposeResult:
        f = self.review.record
        with Vertical(id="frame"):
            yield Static(preview_title(self.review), id="title", markup=False)
            yield Static(writer_line(f), id="writer")
            yield Static(facts_line(f), id="facts")
            yield Static(cost_line(self.review, self.reread, self.seconds), id="cost")
            if self.review.note:
                yield Static(Content.from_markup("[b $error]$note[/]", note=self.review.note), id="note")
            yield Static(ledger_summary(f), id="ledger")
            yield from fold_sides(f, self.review.span, statements=self.statements)
            yield Footer()

    async def on_mount(self) -> None:
        editor = TextArea(self.body, id="editor", soft_wrap=True)
        await self.query_one("#summary").mount(editor)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "apply":
            return not self.editing and self.review.record.tokens_after < self.review.record.tokens_before
        if action == "edit":
            return not self.editing
        if action == "check_edit":
            return self.editing
        return True

    def action_apply(self) -> None:
        self.dismiss(Verdict(apply=True))

    def action_edit(self) -> None:
        self.editing = True
        self.add_class("editing")
        self.query_one("#editor", TextArea).focus()
        self.refresh_bindings()

    def action_check_edit(self) -> None:
        text = self.query_one("#editor", TextArea).text.strip()
        if not text:
            self.notify("an empty summary folds nothing: write one, or escape to drop the edit", severity="warning")
            return
        self.dismiss(Verdict(apply=True, text=text))

    def action_cancel(self) -> None:
        if self.editing:
            self.editing = False
            self.remove_class("editing")
            self.query_one("#editor", TextArea).text = self.body
            self.refresh_bindings()
            return
        self.dismiss(Verdict(apply=False))
