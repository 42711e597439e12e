"""The fold inspector: a fold's originals and its summary side by side.

Facts the summarizer dropped are highlighted in the originals: in the error
color when the fold lost them, in the warning color when the guard repaired
them (they were appended to the summary verbatim, highlighted there too).
Beside the summary, the statements the fold carried into the ledger (kept
verbatim, never summarized) and those it had no room for (lost).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Footer, Static

from tailrent_tui.core.ledger import Statement
from tailrent_tui.core.messages import FoldRecord, Message
from tailrent_tui.ui.screens.highlight import mark_facts

LOST_STYLE = "bold $text on $error 60%"
REPAIRED_STYLE = "bold $text on $warning 40%"
KEPT_STYLE = "bold $text on $success 30%"


def inspector_title(f: FoldRecord, retired: bool = False) -> str:
    title = (
        f"fold #{f.fold_no} · {len(f.span_ids)} messages · depth {f.depth} · "
        f"{f.tokens_before:,} → {f.tokens_after:,} tokens · trigger {f.trigger} · guard {f.guard}"
    )
    if f.dropped:
        title += " · dropped whole to the archive"
    if retired:
        title += " · retired: a pointer in the context"
    return title


def ledger_summary(f: FoldRecord) -> Content:
    """One line: what the fold carried into the ledger, what it could not."""
    parts = [Content(f"ledger: carried {len(f.carried)} statement{'s' if len(f.carried) != 1 else ''}")]
    if f.uncarried:
        parts.append(Content.from_markup("[b $error]not carried $n (no room: counted lost)[/]", n=len(f.uncarried)))
    return Content(" · ").join(parts)


def _statement_lines(ids: Sequence[str], statements: Mapping[str, Statement]) -> str:
    numbers = {sid: i for i, sid in enumerate(statements, 1)}
    out = []
    for sid in ids:
        st = statements.get(sid)
        if st is None:
            out.append(f"- {sid} (not in this session's ledger)")
            continue
        status = "" if st.status == "current" else f" ({st.status})"
        out.append(f"#{numbers[sid]} {st.kind}: {' '.join(st.text.split())}{status}")
    return "\n".join(out)


def writer_line(f: FoldRecord) -> Content:
    """Who wrote the summary, and why not the summarizer that was asked."""
    who = f"summary by {f.summarizer or 'unknown'}"
    if f.rejected:
        return Content.from_markup("$who · [$warning]$why[/]", who=who, why=f.rejected)
    return Content(who)


def facts_line(f: FoldRecord) -> Content:
    parts = [Content(f"facts {len(f.facts)}")]
    if f.facts_lost:
        parts.append(Content.from_markup("[b $error]lost $n: $list[/]", n=len(f.facts_lost), list=", ".join(f.facts_lost)))
    else:
        parts.append(Content("lost 0"))
    if f.facts_repaired:
        parts.append(
            Content.from_markup(
                "[$warning]repaired $n: $list[/] (+$tok tok)",
                n=len(f.facts_repaired),
                list=", ".join(f.facts_repaired),
                tok=f.repair_tokens,
            )
        )
    return Content(" · ").join(parts)


def fold_css(screen: str, border: str) -> str:
    """The layout the inspector and the preview share: a frame, its header lines, the two sides."""
    return f"""
    {screen} {{ align: center middle; }}
    {screen} > #frame {{ width: 96%; height: 92%; background: $surface; border: thick {border}; }}
    {screen} #title {{ background: $panel; color: $text; text-style: bold; padding: 0 1; height: 1; }}
    {screen} #facts, {screen} #writer, {screen} #cost, {screen} #ledger {{ padding: 0 1; height: auto; }}
    {screen} #sides {{ height: 1fr; }}
    {screen} #sides > VerticalScroll {{ width: 1fr; padding: 0 1; border-top: solid $primary 40%; }}
    {screen} .pane-title {{ color: $primary; text-style: bold; }}
    {screen} .original {{ margin: 0 0 1 0; height: auto; }}
    {screen} .who {{ color: $text-muted; }}
    {screen} .error {{ color: $error; }}
    """


def fold_sides(
    f: FoldRecord,
    originals: Sequence[Message],
    error: str | None = None,
    statements: Mapping[str, Statement] | None = None,
) -> ComposeResult:
    """The originals (facts the summary dropped marked) beside the summary (repaired facts marked)
    and the statements the fold carried into the ledger, or could not."""
    lost = set(f.facts_lost)
    marks = [(fact, LOST_STYLE if fact in lost else REPAIRED_STYLE) for fact in f.facts_dropped or f.facts_lost]
    with Horizontal(id="sides"):
        with VerticalScroll(id="originals"):
            yield Static(f"Originals ({len(f.span_ids)})", classes="pane-title")
            if error:
                yield Static(error, classes="error", markup=False)
            for m in originals:
                yield Static(f"{m.role} · {m.kind.label} · {m.tokens:,} tok", classes="who", markup=False)
                yield Static(mark_facts(m.content, marks), classes="original")
        with VerticalScroll(id="summary"):
            yield Static(f"Summary (depth {f.depth})", classes="pane-title")
            yield Static(mark_facts(f.summary.content, [(x, KEPT_STYLE) for x in f.facts_repaired]), id="summary-text")
            if f.carried or f.uncarried:
                known = statements or {}
                yield Static(f"Carried into the ledger, verbatim ({len(f.carried)})", classes="pane-title")
                yield Static(_statement_lines(f.carried, known) or "none", id="carried", markup=False)
                if f.uncarried:
                    yield Static(f"Not carried: no room under the pin budget ({len(f.uncarried)})", classes="pane-title")
                    yield Static(_statement_lines(f.uncarried, known), id="uncarried", classes="error", markup=False)


class FoldInspector(ModalScreen[str | None]):
    """Originals on the left, the summary on the right; `u` undoes the fold (dismissed with "unfold")."""

    DEFAULT_CSS = fold_css("FoldInspector", "$tail-summary")

    BINDINGS = [
        Binding("escape,q", "close", "Close", id="inspector.close", tooltip="Back to the transcript"),
        Binding(
            "u",
            "unfold",
            "Unfold",
            id="inspector.unfold",
            tooltip="Undo this fold: its originals back in place of the summary, if they fit under the fold trigger",
        ),
    ]

    def __init__(
        self,
        fold: FoldRecord,
        originals: Sequence[Message] | None,
        error: str | None = None,
        *,
        undo: str | None = None,
        statements: Mapping[str, Statement] | None = None,
        retired: bool = False,
    ) -> None:
        super().__init__()
        self.fold = fold
        self.originals = list(originals or [])
        self.error = error
        #: what `u` would cost the next request, said before it is pressed
        self.undo = undo
        self.statements = statements
        self.retired = retired

    def compose(self) -> ComposeResult:
        f = self.fold
        with Vertical(id="frame"):
            yield Static(inspector_title(f, self.retired), id="title", markup=False)
            yield Static(writer_line(f), id="writer")
            yield Static(facts_line(f), id="facts")
            if self.undo:
                yield Static(f"u undoes it: {self.undo}", id="undo", markup=False)
            yield Static(ledger_summary(f), id="ledger")
            yield from fold_sides(f, self.originals, self.error, self.statements)
            yield Footer()

    def action_close(self) -> None:
        self.dismiss(None)

    def action_unfold(self) -> None:
        self.dismiss("unfold")
