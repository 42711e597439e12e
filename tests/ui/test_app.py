"""Pilot tests of the app: turns, keys, slash commands, panels, approval, themes, pruning."""

from __future__ import annotations

import json

import pytest
from textual.widgets import Markdown

from tailrent_tui.agent.lifecycle import open_agent
from tailrent_tui.core.messages import Kind
from tailrent_tui.settings import Settings, load_settings
from tailrent_tui.ui.events import SpillOpenRequested
from tailrent_tui.ui.screens.approval import ApprovalScreen
from tailrent_tui.ui.screens.fold_inspector import FoldInspector
from tailrent_tui.ui.screens.help import HelpScreen
from tailrent_tui.ui.screens.recall import RecallScreen
from tailrent_tui.ui.screens.spill_viewer import SpillViewer
from tailrent_tui.ui.widgets.input import PromptInput
from tailrent_tui.ui.widgets.message import MessageView
from tailrent_tui.ui.widgets.notice import NoticeBar
from tests.support.ui_helpers import approve_preview, fill, make_agent, make_app, submit, wait_until


@pytest.fixture(autouse=True)
def config_dir(tmp_path, monkeypatch):
    d = tmp_path / "config"
    monkeypatch.setenv("TAILRENT_CONFIG_DIR", str(d))
    return d


def focused_view(app) -> MessageView:
    assert isinstance(app.focused, MessageView), app.focused
    return app.focused


async def focus_message(pilot, app, message_id: str) -> None:
    await wait_until(pilot, lambda: app.transcript.view_of(message_id) is not None, what=f"a widget for {message_id}")
    app.transcript.view_of(message_id).focus()
    await pilot.pause()


async def test_a_turn_streams_then_renders_whole_and_history_recalls_it(tmp_path):
    agent = make_agent(tmp_path, script=[{"text": "Use **Redis** with a `15 minute` TTL."}])
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press(*"which cache?", "enter")
        await wait_until(pilot, lambda: not app.running and len(agent.session) == 2, what="the reply")
        reply = agent.session.messages[-1]
        view = app.transcript.view_of(reply.id)
        assert view is not None and view.message.content == reply.content
        assert view.query_one(Markdown).source == reply.content
        box = app.query_one(PromptInput)
        assert box.value == ""
        await pilot.press("up")
        assert box.value == "which cache?"
        await pilot.press("down")
        assert box.value == ""


async def test_tab_then_up_down_and_jk_move_between_messages(tmp_path):
    agent = make_agent(tmp_path)
    fill(agent.session, 4)
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_until(pilot, lambda: len(app.transcript.mounted_ids) == 4, what="four widgets")
        await pilot.press("tab")
        assert focused_view(app).message_id == "m00003"
        await pilot.press("up")
        assert focused_view(app).message_id == "m00002"
        await pilot.press("k")
        assert focused_view(app).message_id == "m00001"
        await pilot.press("j", "down")
        assert focused_view(app).message_id == "m00003"


async def test_p_and_u_pin_and_unpin_and_the_pins_panel_follows(tmp_path):
    agent = make_agent(tmp_path)
    fill(agent.session, 4)
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        await focus_message(pilot, app, "m00001")
        await pilot.press("p")
        assert agent.session.get("m00001").pinned
        pins = app.sidebar.ledger
        await wait_until(pilot, lambda: "1 pin ·" in str(pins.query_one(".cost").render()), what="pins panel")
        await wait_until(pilot, lambda: "-pinned" in app.transcript.view_of("m00001").classes, what="pin mark")
        await pilot.press("u")
        assert not agent.session.get("m00001").pinned
        await wait_until(pilot, lambda: "0 pins" in str(pins.query_one(".cost").render()), what="pins panel empty")


async def test_s_spills_the_focused_message_and_enter_opens_the_viewer(tmp_path):
    agent = make_agent(tmp_path)
    fill(agent.session, 3, tool_every=3, big=400)
    app = make_app(agent)
    posted = []
    async with app.run_test(size=(140, 40), message_hook=posted.append) as pilot:
        await focus_message(pilot, app, "m00002")
        original = agent.session.get("m00002").content
        await pilot.press("s")
        m = agent.session.get("m00002")
        assert m.kind == Kind.spill_pointer
        await wait_until(pilot, lambda: app.sidebar.spills.get_option(m.spill_id) is not None, what="spills row")
        await wait_until(pilot, lambda: "-spill" in app.transcript.view_of("m00002").classes, what="pointer look")
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, SpillViewer), what="spill viewer")
        assert any(isinstance(p, SpillOpenRequested) and p.spill_id == m.spill_id for p in posted)
        assert app.screen.query_one("TextArea").text == original
        await pilot.press("escape")
        assert not isinstance(app.screen, SpillViewer)


async def test_f_folds_down_to_the_target_and_i_inspects_it(tmp_path):
    agent = make_agent(tmp_path, window=2048, settings=Settings(fold={"target": 0.05}, tokenizer="chars4"))
    fill(agent.session, 12, pad=4)
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        await focus_message(pilot, app, "m00011")
        await pilot.press("f")
        await approve_preview(pilot, app)
        await wait_until(pilot, lambda: len(agent.session.folds) == 1, what="a fold")
        fold = agent.session.folds[0]
        assert fold.span_ids and "m00011" not in fold.span_ids and "m00010" not in fold.span_ids
        await wait_until(pilot, lambda: app.sidebar.folds.get_option("1") is not None, what="folds row")
        await wait_until(pilot, lambda: app.transcript.view_of(fold.summary.id) is not None, what="summary widget")
        assert all(app.transcript.view_of(i) is None for i in fold.span_ids)
        await pilot.press("i")
        await wait_until(pilot, lambda: isinstance(app.screen, FoldInspector), what="fold inspector")
        assert app.screen.fold.fold_no == 1
        assert [m.id for m in app.screen.originals] == fold.span_ids
        await pilot.press("escape")


async def test_f_folds_the_span_marked_with_space(tmp_path):
    agent = make_agent(tmp_path)
    fill(agent.session, 6, pad=4)
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        await focus_message(pilot, app, "m00001")
        await pilot.press("space", "down", "space")
        assert app.transcript.selected_ids == ["m00001", "m00002"]
        await pilot.press("f")
        await approve_preview(pilot, app)
        await wait_until(pilot, lambda: len(agent.session.folds) == 1, what="a fold")
        assert agent.session.folds[0].span_ids == ["m00001", "m00002"]


async def test_fold_with_nothing_to_fold_says_why(tmp_path):
    agent = make_agent(tmp_path)
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press("tab")  # nothing to focus: the focus leaves the input
        app.session_screen.action_fold()
        await wait_until(pilot, lambda: any("nothing to fold" in n.message for n in app._notifications), what="notice")
        assert agent.session.folds == []


async def test_ctrl_b_toggles_the_sidebar_and_f1_opens_help(tmp_path):
    app = make_app(make_agent(tmp_path))
    async with app.run_test(size=(140, 40)) as pilot:
        assert app.sidebar.display and app.sidebar.region.width > 0
        await pilot.press("ctrl+b")
        await wait_until(pilot, lambda: app.sidebar.region.width == 0, what="sidebar hidden")
        await pilot.press("ctrl+b")
        await wait_until(pilot, lambda: app.sidebar.region.width > 0, what="sidebar shown")
        titles = [c.title for c in app.sidebar.query("Collapsible")]
        assert titles == ["Tail", "Spills", "Ledger", "Folds"]
        await pilot.press("f1")
        await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen), what="help")
        text = app.screen.query_one(Markdown).source
        assert "/recall" in text and "(`pin`)" in text
        await pilot.press("escape")


async def test_escape_cancels_a_streaming_reply_and_keeps_the_partial_text(tmp_path):
    agent = make_agent(tmp_path, script=[{"text": "word " * 400}], delay=0.01)
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press(*"go", "enter")
        await wait_until(
            pilot, lambda: app.transcript.reply is not None and len(app.transcript.reply.text) > 20, what="streaming"
        )
        await pilot.press("escape")
        await wait_until(pilot, lambda: not app.running, what="turn ended")
        reply = agent.session.messages[-1]
        assert reply.role == "assistant" and reply.meta.get("cancelled")
        assert 0 < len(reply.content) < len("word " * 400)
        await wait_until(pilot, lambda: app.transcript.view_of(reply.id) is not None, what="partial kept on screen")


async def test_a_model_error_keeps_the_message_and_ctrl_r_retries(tmp_path):
    agent = make_agent(tmp_path, script=[{"text": "half a rep", "fault": "stream_cut"}, {"text": "Whole reply."}])
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press(*"hello", "enter")
        await wait_until(pilot, lambda: app.session_screen.retry_pending, what="the error")
        assert agent.session.messages[0].content == "hello"
        errors = app.transcript.query(".turn-error")
        assert errors and "ctrl+r" in str(errors.first().render())
        await pilot.press("ctrl+r")
        await wait_until(
            pilot, lambda: not app.running and agent.session.messages[-1].content == "Whole reply.", what="the retried reply"
        )
        assert [m.content for m in agent.session.messages if m.role == "user"] == ["hello"]


async def test_keymap_rebinds_by_id(tmp_path):
    settings = Settings(keymap={"pin": "ctrl+t"}, tokenizer="chars4")
    agent = make_agent(tmp_path, settings=settings)
    fill(agent.session, 2)
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        await focus_message(pilot, app, "m00000")
        await pilot.press("p")
        assert not agent.session.get("m00000").pinned
        # p is no ladder key any more: it went back to the input and typed itself
        assert app.mode == "input" and app.prompt.text == "p"
        await focus_message(pilot, app, "m00000")
        await pilot.press("ctrl+t")
        assert agent.session.get("m00000").pinned


async def test_palette_runs_ladder_commands(tmp_path):
    app = make_app(make_agent(tmp_path))
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press("ctrl+p")
        await pilot.press(*"toggle the sidebar")
        await wait_until(pilot, lambda: app.screen.query("CommandList").first().option_count > 0, what="palette hits")
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.sidebar.has_class("-hidden"), what="sidebar hidden by the palette")


# -- slash commands --------------------------------------------------------------


async def test_slash_pin_unpin_spill_fold_inspect(tmp_path):
    agent = make_agent(tmp_path)
    fill(agent.session, 8, tool_every=4, big=400, pad=4)
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        await submit(pilot, app, "/pin m00000")
        assert agent.session.get("m00000").pinned
        await submit(pilot, app, "/unpin m00000")
        assert not agent.session.get("m00000").pinned
        await submit(pilot, app, "/spill m00003")
        assert agent.session.get("m00003").kind == Kind.spill_pointer
        await submit(pilot, app, "/fold m00001 m00002")
        await approve_preview(pilot, app)
        await wait_until(pilot, lambda: len(agent.session.folds) == 1, what="the fold")
        assert agent.session.folds[0].span_ids == ["m00001", "m00002"]
        await submit(pilot, app, "/inspect 1")
        await wait_until(pilot, lambda: isinstance(app.screen, FoldInspector), what="inspector")
        await pilot.press("escape")
        await submit(pilot, app, "/pin")  # no id, no focus: the last message
        assert agent.session.messages[-1].pinned


async def test_slash_watch_recall_and_help(tmp_path):
    agent = make_agent(tmp_path)
    fill(agent.session, 4)
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        await submit(pilot, app, "/watch Redis")
        assert agent.session.watch == ["Redis"]
        await submit(pilot, app, '/recall "what cache?" --expect Redis Memcached')
        await wait_until(pilot, lambda: isinstance(app.screen, RecallScreen), what="recall screen")
        report = app.screen.report
        assert {i.word: i.visible for i in report.items} == {"Redis": True, "Memcached": False}
        await pilot.press("escape")
        await submit(pilot, app, "/help")
        await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen), what="help")


async def test_unknown_or_malformed_slash_command_keeps_the_input(tmp_path):
    app = make_app(make_agent(tmp_path))
    async with app.run_test(size=(140, 40)) as pilot:
        for text in ("/frobnicate now", "/inspect x", "/watch", "/export pdf", "/pin nosuchid"):
            await submit(pilot, app, text)
            assert app.query_one(PromptInput).value == text
        messages = [n.message for n in app._notifications]
        assert any("unknown command /frobnicate" in m for m in messages)


async def test_bang_runs_a_shell_command_through_the_ladder(tmp_path):
    agent = make_agent(tmp_path)
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        await submit(pilot, app, "!echo tail-rent-$((40+2))")
        await wait_until(pilot, lambda: len(agent.session) == 2, rounds=2000, what="shell output")
        out = agent.session.messages[-1]
        assert out.role == "tool" and "tail-rent-42" in out.content
        await wait_until(pilot, lambda: app.transcript.view_of(out.id) is not None, what="output widget")


async def test_slash_model_and_export_report_back(tmp_path):
    agent = make_agent(tmp_path)
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        await submit(pilot, app, "/model")
        assert any("the model is mock" in n.message for n in app._notifications)
        assert app.query_one(PromptInput).value == ""


# -- approval ---------------------------------------------------------------------


SHELL_SCRIPT = [
    {"tool_calls": [{"name": "run_shell", "arguments": {"command": "echo approved-run"}}]},
    {"text": "done"},
]


async def test_approval_deny_returns_a_tool_error(tmp_path):
    agent = make_agent(tmp_path, script=SHELL_SCRIPT)
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press(*"run it", "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, ApprovalScreen), what="approval")
        assert app.screen.tool == "run_shell"
        await pilot.press("d")
        await wait_until(pilot, lambda: not app.running, what="turn end")
        tool = next(m for m in agent.session.messages if m.role == "tool")
        assert "denied" in tool.content and "approved-run" not in tool.content


async def test_approval_allow_once_runs_the_command(tmp_path):
    agent = make_agent(tmp_path, script=SHELL_SCRIPT)
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press(*"run it", "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, ApprovalScreen), what="approval")
        await pilot.press("a")
        await wait_until(pilot, lambda: not app.running, rounds=2000, what="turn end")
        tool = next(m for m in agent.session.messages if m.role == "tool")
        assert "approved-run" in tool.content


async def test_edit_file_approval_shows_the_diff(tmp_path):
    (tmp_path / "notes.txt").write_text("ttl = 5 minutes\n")
    script = [
        {"tool_calls": [{"name": "edit_file", "arguments": {"path": "notes.txt", "old": "5 minutes", "new": "15 minutes"}}]},
        {"text": "edited"},
    ]
    agent = make_agent(tmp_path, script=script)
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press(*"edit", "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, ApprovalScreen), what="approval")
        diff = app.screen.diff or ""
        assert "-ttl = 5 minutes" in diff and "+ttl = 15 minutes" in diff
        await pilot.press("p")
        await wait_until(pilot, lambda: not app.running, rounds=2000, what="turn end")
        assert (tmp_path / "notes.txt").read_text() == "ttl = 15 minutes\n"


async def test_yolo_skips_approval_and_the_header_says_so(tmp_path):
    settings = Settings(yolo=True, tokenizer="chars4")
    agent = make_agent(tmp_path, script=SHELL_SCRIPT, settings=settings)
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        assert "YOLO" in app.sub_title
        await pilot.press(*"run it", "enter")
        await wait_until(pilot, lambda: not app.running, rounds=2000, what="turn end")
        assert not isinstance(app.screen, ApprovalScreen)
        tool = next(m for m in agent.session.messages if m.role == "tool")
        assert "approved-run" in tool.content


# -- panels -------------------------------------------------------------------------


async def test_tail_panel_follows_the_context(tmp_path):
    agent = make_agent(tmp_path, window=4096)
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        tail = app.sidebar.tail
        await wait_until(pilot, lambda: tail.figures is not None, what="first figures")
        assert tail.figures.context == agent.session.context_tokens
        fill(agent.session, 6)
        await wait_until(pilot, lambda: tail.figures.context == agent.session.context_tokens, what="figures update")
        text = str(tail.query_one(".figures").render())
        assert f"{agent.session.context_tokens:,} / 4,096 tokens" in text
        assert "fold trigger at 3,686" in text
        assert len(tail.samples) >= 2


async def test_folds_panel_shows_lost_facts(tmp_path):
    settings = Settings(fold={"guard": "report"}, tokenizer="chars4")
    agent = make_agent(tmp_path, settings=settings)
    fill(agent.session, 6, pad=4)
    agent.session.add("user", "After a long review of the options we finally store refresh tokens in Redis for 15 minutes.")
    agent.session.add("user", "Thanks.")
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        span = " ".join(m.id for m in agent.session.messages[5:7])
        await submit(pilot, app, f"/fold {span}")
        await approve_preview(pilot, app)
        await wait_until(pilot, lambda: app.sidebar.folds.get_option("1") is not None, what="fold row")
        fold = agent.session.folds[0]
        row = app.sidebar.folds.get_option("1").prompt
        assert f"lost {len(fold.facts_lost)}" in str(row) if fold.facts_lost else "lost 0" in str(row)
        assert fold.facts_lost, "the mock summarizer drops this span's numbers"
        assert any("$error" in str(span.style) for span in row.spans)


# -- start-up, themes, pruning -----------------------------------------------------


async def test_start_with_no_server_shows_the_mock_notice(tmp_path, monkeypatch):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("OLLAMA_HOST", f"http://127.0.0.1:{port}")
    # without the embedded engine (tests/models/test_embedded.py has the case with it)
    monkeypatch.setattr("tailrent_tui.models.factory.engine_installed", lambda: False)
    settings = load_settings({"data_dir": tmp_path / "data", "workspace": tmp_path}).settings
    async with open_agent(settings, {}) as agent:
        assert agent.model.name.startswith("mock")
        app = make_app(agent)
        async with app.run_test(size=(140, 40)) as pilot:
            bar = app.query_one(NoticeBar)
            await wait_until(pilot, lambda: bar.has_class("-shown"), what="notice shown")
            shown = str(bar.render())
            assert "mock" in shown and str(port) in shown


async def test_theme_switch_is_remembered(tmp_path, config_dir):
    app = make_app(make_agent(tmp_path))
    async with app.run_test(size=(140, 40)) as pilot:
        assert app.theme == "tailrent-dark"
        assert {"tailrent-dark", "tailrent-light", "tailrent-contrast"} <= set(app.available_themes)
        app.theme = "tailrent-light"
        await wait_until(pilot, lambda: (config_dir / "state.json").exists(), what="state saved")
    assert json.loads((config_dir / "state.json").read_text())["theme"] == "tailrent-light"
    settings = load_settings({}).settings
    assert settings.theme == "tailrent-light"
    app2 = make_app(make_agent(tmp_path, settings=settings))
    async with app2.run_test(size=(140, 40)):
        assert app2.theme == "tailrent-light"


async def test_user_theme_file_is_loaded_and_a_bad_one_reported(tmp_path, config_dir):
    themes = config_dir / "themes"
    themes.mkdir(parents=True)
    (themes / "mine.toml").write_text('name = "mine"\nprimary = "#ff8800"\n[variables]\ntail-pinned = "#00ff00"\n')
    (themes / "broken.toml").write_text('name = "broken"\nprimary = "not a color"\n')
    app = make_app(make_agent(tmp_path))
    async with app.run_test(size=(140, 40)) as pilot:
        assert "mine" in app.available_themes
        assert any("broken.toml" in e for e in app.theme_errors)
        app.theme = "mine"
        await pilot.pause()
        assert app.theme_variables["tail-pinned"] == "#00ff00"


async def test_old_widgets_are_pruned_and_load_back_on_scroll(tmp_path):
    settings = Settings(tokenizer="chars4")
    agent = make_agent(tmp_path, settings=settings, window=10**6)
    fill(agent.session, 400)
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        t = app.transcript
        t.watermark = 120
        await wait_until(pilot, lambda: t.mounted_ids, what="widgets")
        shown = len(t.mounted_ids)
        assert shown < 60 and t.first_index == 400 - shown
        assert t.mounted_ids[-1] == "m00399"
        # new messages while following the bottom: the oldest widgets go (60 more than were shown
        # would pass 80 if none went)
        fill(agent.session, 60, prefix="n")
        await wait_until(pilot, lambda: t.mounted_ids[-1] == "n00459", what="new widgets")
        assert len(t.mounted_ids) < 80 and t.first_index > 400 - shown
        first = t.first_index
        # scrolling up past the first widget brings earlier ones back from the session
        t.scroll_home(animate=False)
        await pilot.pause()
        await pilot.press("tab")
        await pilot.press("home")
        await wait_until(pilot, lambda: t.first_index < first, what="loaded back")
        ids = t.mounted_ids
        expected = [m.id for m in agent.session.messages[t.first_index :]]
        assert ids == expected


async def test_slash_model_switches_and_a_bad_spec_is_reported(tmp_path):
    script = tmp_path / "script.jsonl"
    script.write_text(json.dumps({"text": "from the new script"}) + "\n")
    agent = make_agent(tmp_path)
    old = agent.model
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        await submit(pilot, app, f"/model mock:{script}")
        await wait_until(pilot, lambda: agent.model is not old, what="the switch")
        assert agent.model.remaining == 1
        assert any("model switched" in n.text for n in agent.session.notes)
        await submit(pilot, app, "/model nonsense:thing")
        await wait_until(
            pilot,
            lambda: any("could not switch to nonsense:thing" in n.message for n in app._notifications),
            what="the error",
        )
        assert agent.model.remaining == 1


async def test_slash_export_writes_the_transcript_or_says_why_not(tmp_path, monkeypatch):
    from tailrent_tui.agent.build import build_agent

    unsaved = make_agent(tmp_path)
    app = make_app(unsaved)
    async with app.run_test(size=(140, 40)) as pilot:
        await submit(pilot, app, "/export md")
        assert any("not saved" in n.message for n in app._notifications)

    ws = tmp_path / "ws"
    ws.mkdir()
    saved = build_agent(
        Settings(model="mock", data_dir=tmp_path / "data", workspace=ws, fsync=False, tokenizer="chars4"),
        async_writer=False,
        new=True,
    )
    try:
        saved.session.add("user", "DECISION: Redis with a 15 minute TTL — café ✓")
        app = make_app(saved)
        async with app.run_test(size=(140, 40)) as pilot:
            await submit(pilot, app, "/export json")
            await wait_until(pilot, lambda: any("exported to" in n.message for n in app._notifications), what="export")
            # into the session's directory, never the user's repository, and the notice says where in full
            out = saved.session_dir.path / "export.json"
            assert any(n.message == f"exported to {out.resolve()}" for n in app._notifications)
            assert not list(ws.iterdir())
            await submit(pilot, app, "/export notes/s.md")
            await wait_until(pilot, lambda: (ws / "notes" / "s.md").exists(), what="export to a path")
            await submit(pilot, app, "/export md " + str(tmp_path / "data" / "x.md"))
            await wait_until(pilot, lambda: any("inside the data dir" in n.message for n in app._notifications), what="refused")
        data = json.loads(out.read_text(encoding="utf-8"))
        assert "café ✓" in json.dumps(data, ensure_ascii=False)
    finally:
        await saved.aclose()
