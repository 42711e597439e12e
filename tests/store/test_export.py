"""The export (issue 26, item 13): it shows tool calls, thinking and each model, and `inspect` marks
an undone fold (`store/export.py`)."""

from __future__ import annotations


async def test_export_shows_tool_calls_thinking_and_each_model_and_inspect_marks_an_undone_fold(make_agent, workspace):
    from tailrent_tui.core.messages import Folded
    from tailrent_tui.models.mock import MockModel
    from tailrent_tui.store.export import export_session

    (workspace / "notes.txt").write_text("the TTL is 15 minutes\n", encoding="utf-8")
    agent = make_agent(yolo=True, tokenizer="chars4", fold={"preview": "never", "summarizer": "lossy", "guard": "off"})
    agent.model = MockModel(
        [
            {"thinking": "read the notes first", "tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]},
            {"text": "The TTL is 15 minutes. " * 30},
        ],
        name="small-model",
    )
    chatter = " ".join(f"On day {i} the cache had {i * 7} misses and nobody minded." for i in range(60))
    assert (await agent.turn("What is the TTL? " + chatter)).error is None
    agent.model = MockModel([{"text": "Confirmed: 15 minutes. " * 30}], name="big-model")
    assert (await agent.turn("Are you sure? " + chatter)).error is None
    first, second = (m for m in agent.session.messages if m.role == "user")
    folded = await agent.ladder.fold([first.id, second.id])
    assert isinstance(folded, Folded), folded
    agent.ladder.unfold(folded.fold.fold_no)

    md = export_session(agent.session_dir, "md")
    head = md.split("### ", 1)[0]
    assert "`small-model`: 2 replies" in head and "`big-model`: 1 reply" in head, head
    assert "> model: `big-model` from here (it was `small-model`)" in md
    assert "→ tool call `read_file`" in md and '"path": "notes.txt"' in md
    assert "<summary>thinking</summary>" in md and "read the notes first" in md

    from click.testing import CliRunner

    from tailrent_tui.cli import cli

    out = CliRunner().invoke(cli, ["--data-dir", str(agent.settings.data_dir), "inspect", agent.session.id])
    assert out.exit_code == 0, out.output
    first = out.output.splitlines()[0]
    assert first.startswith(f"fold #{folded.fold.fold_no}") and "UNDONE" in first, first
