"""Titles and headers say things once, in words (issue 15's papercuts): a message's header,
the spill viewer's title, the kinds' labels."""

from __future__ import annotations

from tailrent_tui.core.messages import Kind, Message, Spilled
from tailrent_tui.ui.screens.spill_viewer import viewer_title
from tailrent_tui.ui.widgets.message import header_content


def test_titles_and_headers_say_things_once_in_words() -> None:
    s = Spilled(id="m1", spill_id="abc", tool="grep", location="", tokens_before=1200, pointer="p", pointer_tokens=5)
    assert viewer_title(s) == "spill abc · grep · 1,200 tokens"
    tool = Message(role="tool", content="ok", kind=Kind.tool_result, tool="run_shell", tokens=3)
    assert header_content(tool).plain == "tool · run_shell · 3 tok"
    assert Kind.spill_pointer.label == "spill pointer" and Kind.fold_summary.label == "fold summary"
