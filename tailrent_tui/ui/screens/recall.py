"""The probe's answer: which expected words the context that would be sent now still holds, and where."""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static


def report_content(question: str, report: Any) -> Content:
    lines = [Content.from_markup("[b]$q[/b]", q=question or "(no question)")]
    if hasattr(report, "format"):
        lines.append(Content(report.format()))
        return Content("\n").join(lines)
    data = report.model_dump() if hasattr(report, "model_dump") else dict(report)
    for key, value in data.items():
        lines.append(Content(f"{key}: {value}"))
    return Content("\n").join(lines)


class RecallScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    RecallScreen { align: center middle; }
    RecallScreen > Vertical { width: 90; max-width: 96%; height: auto; max-height: 90%; background: $surface; border: thick $accent; padding: 0 1; }
    """

    BINDINGS = [Binding("escape,q", "dismiss", "Close", id="recall.close", tooltip="Back")]

    def __init__(self, question: str, report: Any) -> None:
        super().__init__()
        self.question = question
        self.report = report

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(report_content(self.question, self.report), id="report")

    def action_dismiss(self) -> None:
        self.dismiss(None)
