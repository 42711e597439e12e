"""The probe's answer: which expected words the context that would be sent now still holds, and where."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static

from tailrent_tui.core.probe import ProbeReport


def report_content(report: ProbeReport) -> Content:
    lines = [
        Content.from_markup("[b]$q[/b]", q=report.question or "(no question)"),
        Content(f"{report.hits}/{report.total} expected words visible in the context"),
        Content(""),
    ]
    for item in report.items:
        if item.visible:
            where = ", ".join(sorted({s.label() for s in item.sightings}))
            lines.append(Content.from_markup("[$success]✓[/] [b]$w[/b]: $where", w=item.word, where=where))
        else:
            lines.append(Content.from_markup("[b $error]✗ $w[/]: not in the context", w=item.word))
            if item.archive_only:
                lines.append(Content(f"    only outside it: {', '.join(item.archive_only)}"))
    return Content("\n").join(lines)


class RecallScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    RecallScreen { align: center middle; }
    RecallScreen > VerticalScroll {
        width: 90; max-width: 96%; height: auto; max-height: 90%; background: $surface; border: thick $accent; padding: 0 1;
    }
    RecallScreen #report { height: auto; }
    """

    BINDINGS = [Binding("escape,q", "close", "Close", id="recall.close", tooltip="Back")]

    def __init__(self, report: ProbeReport) -> None:
        super().__init__()
        self.report = report

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(report_content(self.report), id="report")

    def action_close(self) -> None:
        self.dismiss(None)
