"""Approval of a tool call that changes things: allow once, allow this prefix for the session, deny.

The dialog says exactly what "allow for the session" covers and why (for
run_shell: a read-only program under its flag allowlist, or this exact command
line, agent/approval.py); any other command gets no such button, only "allow
once", and the dialog says why.

`edit_file` (and `write_file` when the agent can preview it) shows its diff,
added lines in the success color, removed ones in the error color.
"""

from __future__ import annotations

import difflib
import json
from typing import Any, Literal

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static

from tailrent_tui.agent.events import Denied
from tailrent_tui.text import json_visible, visible

Answer = Literal["once", "prefix", "deny"] | Denied


def new_file_text(diff: str | None) -> str | None:
    """The content of a file a write creates, from its diff against nothing (None: not a new file)."""
    if not diff or "\n@@ -0,0 " not in "\n" + diff:
        return None
    body = [line[1:] for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++")]
    return "\n".join(body)


def edit_diff(old: str, new: str) -> str:
    """A diff of an edit the agent could not preview (its old text was not found as given)."""
    return "\n".join(difflib.unified_diff(old.splitlines(), new.splitlines(), "old", "new", lineterm=""))


def diff_content(diff: str) -> Content:
    lines = []
    for line in diff.splitlines():
        if line.startswith("+") and not line.startswith("+++"):
            lines.append(Content.styled(line, "$success"))
        elif line.startswith("-") and not line.startswith("---"):
            lines.append(Content.styled(line, "$error"))
        elif line.startswith("@@"):
            lines.append(Content.styled(line, "$accent"))
        else:
            lines.append(Content(line))
    return Content("\n").join(lines)


class ApprovalScreen(ModalScreen[Answer]):
    """Asks before run_shell, write_file or edit_file runs."""

    DEFAULT_CSS = """
    ApprovalScreen { align: center middle; }
    ApprovalScreen > #frame {
        width: 90; max-width: 96%; height: auto; max-height: 90%; background: $surface; border: thick $warning; padding: 0 1;
    }
    ApprovalScreen #question { text-style: bold; height: auto; }
    ApprovalScreen #command { height: auto; max-height: 8; background: $panel; padding: 0 1; }
    ApprovalScreen #arguments { height: auto; max-height: 8; color: $text-muted; }
    ApprovalScreen #allows { height: auto; margin: 1 0 0 0; color: $text-warning; }
    ApprovalScreen #diff { height: auto; max-height: 24; border: round $panel-lighten-2; }
    ApprovalScreen #buttons { height: auto; align-horizontal: center; margin: 1 0 0 0; }
    ApprovalScreen Button { margin: 0 1; }
    """

    BINDINGS = [
        Binding("a", "answer('once')", "Allow once", id="approval.once", tooltip="Run this call, ask again next time"),
        Binding(
            "p",
            "answer('prefix')",
            "Allow prefix",
            id="approval.prefix",
            tooltip="Run it, and calls with the same command prefix, without asking for the rest of the session",
        ),
        Binding("d,escape", "answer('deny')", "Deny", id="approval.deny", tooltip="The model gets a tool error"),
        Binding(
            "r",
            "reason",
            "Deny with a reason",
            id="approval.reason",
            tooltip="Deny, and type why: the model receives it with the tool error",
        ),
    ]

    def __init__(
        self,
        tool: str,
        arguments: dict[str, Any],
        command_prefix: str | None,
        diff: str | None,
        allows: str | None = None,
    ) -> None:
        super().__init__()
        self.tool = tool
        self.arguments = arguments
        self.command_prefix = command_prefix
        self.diff = diff
        self.allows = allows

    def compose(self) -> ComposeResult:
        path = self.arguments.get("path")
        created = new_file_text(self.diff) if self.tool == "write_file" else None
        if self.tool == "write_file" and not self.diff and isinstance(self.arguments.get("content"), str):
            created = self.arguments["content"]
        if self.tool == "edit_file" and not self.diff:
            old, new = self.arguments.get("old"), self.arguments.get("new")
            if isinstance(old, str) and isinstance(new, str):
                self.diff = edit_diff(old, new)
        with Vertical(id="frame"):
            if created is not None and isinstance(path, str):
                lines = created.count("\n") + (1 if created and not created.endswith("\n") else 0)
                question = f"The model wants to create {path} ({lines:,} lines). Allow it?"
            elif self.tool in ("write_file", "edit_file") and isinstance(path, str):
                verb = "rewrite" if self.tool == "write_file" else "edit"
                question = f"The model wants to {verb} {path}. Allow it?"
            else:
                question = f"The model wants to run {self.tool}. Allow it?"
            yield Static(visible(question), id="question", markup=False)
            shown: dict[str, Any] = {}
            if created is not None:
                with VerticalScroll(id="diff"):
                    yield Static(visible(created[:20000]), id="content", markup=False)
            elif self.tool == "run_shell" and isinstance(self.arguments.get("command"), str):
                # the command as the shell reads it: a newline shows as a new line, not as \n in JSON
                yield Static(visible(self.arguments["command"][:2000]), id="command", markup=False)
                shown = {k: v for k, v in self.arguments.items() if k != "command"}
            else:
                shown = {k: v for k, v in self.arguments.items() if not (self.diff and k in ("old", "new", "content"))}
            if created is not None or (self.diff and self.tool in ("write_file", "edit_file")):
                shown = {k: v for k, v in shown.items() if k not in ("path", "content", "old", "new")}
            if shown:
                yield Static(json_visible(json.dumps(shown, indent=2, ensure_ascii=False)[:2000]), id="arguments", markup=False)
            if self.allows:
                yield Static(self.allows, id="allows", markup=False)
            if self.diff and created is None:
                with VerticalScroll(id="diff"):
                    yield Static(diff_content(visible(self.diff)))
            with Horizontal(id="buttons"):
                yield Button(Content("Allow once [a]"), id="once", variant="primary")  # Content: [a] is no markup
                if self.command_prefix is not None:
                    yield Button(Content(f"Allow {self.command_prefix} for the session [p]"), id="prefix")
                yield Button(Content("Deny [d]"), id="deny", variant="error")
                yield Button(Content("Deny with a reason [r]"), id="reason")
            yield Input(placeholder="why not? enter sends it to the model · escape goes back", id="why")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # no session approval is offered for this call
        return not (action == "answer" and parameters == ("prefix",) and self.command_prefix is None)

    def on_mount(self) -> None:
        self.query_one("#why", Input).display = False

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "reason":
            self.action_reason()
            return
        self.dismiss(event.button.id)  # type: ignore[arg-type]

    def action_reason(self) -> None:
        why = self.query_one("#why", Input)
        why.display = True
        why.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        reason = event.value.strip()
        self.dismiss(Denied(reason) if reason else "deny")

    def on_key(self, event: events.Key) -> None:
        why = self.query_one("#why", Input)
        if why.has_focus and event.key == "escape":
            # back to the buttons: escape in the reason does not deny without one
            event.stop()
            event.prevent_default()
            why.value = ""
            why.display = False
            self.query_one("#once", Button).focus()

    def action_answer(self, answer: Answer) -> None:
        self.dismiss(answer)
