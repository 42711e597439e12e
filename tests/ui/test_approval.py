"""The approval dialog (issue 26, item 8), through the real app: its keys on screen, a new file
shown as its content (not JSON), and a denial whose reason the model receives."""

from __future__ import annotations

import pytest

from tailrent_tui.ui.screens.approval import ApprovalScreen
from tests.support.ui_helpers import make_agent, make_app, wait_until


@pytest.fixture(autouse=True)
def config_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TAILRENT_CONFIG_DIR", str(tmp_path / "config"))


def screen_text(app) -> str:
    return "\n".join(str(w.render()) for w in app.screen.query("Static, Button"))


async def test_a_new_file_is_shown_as_its_content_and_the_keys_are_on_screen(tmp_path):
    script = [
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "todo.md", "content": "# todo\n- ship it\n"}}]},
        {"text": "written"},
    ]
    agent = make_agent(tmp_path, script=script)
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press(*"write it", "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, ApprovalScreen), what="approval")
        shown = screen_text(app)
        assert "The model wants to create todo.md (2 lines). Allow it?" in shown
        assert "# todo\n- ship it" in shown and '"content"' not in shown and "+# todo" not in shown
        for key in ("[a]", "[d]", "[r]"):
            assert key in shown
        await pilot.press("a")
        await wait_until(pilot, lambda: not app.running, rounds=2000, what="turn end")
    assert (tmp_path / "todo.md").read_text() == "# todo\n- ship it\n"


async def test_a_denial_carries_the_users_reason_to_the_model(tmp_path):
    script = [
        {"tool_calls": [{"name": "run_shell", "arguments": {"command": "rm -rf build"}}]},
        {"text": "ok"},
    ]
    (tmp_path / "build").mkdir()
    agent = make_agent(tmp_path, script=script)
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press(*"clean up", "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, ApprovalScreen), what="approval")
        await pilot.press("r")
        await pilot.press("escape")  # back to the buttons: no denial yet
        assert isinstance(app.screen, ApprovalScreen)
        await pilot.press("r", *"build holds the release artifacts", "enter")
        await wait_until(pilot, lambda: not app.running, rounds=2000, what="turn end")
    tool = next(m for m in agent.session.messages if m.role == "tool")
    assert "the user denied run_shell: build holds the release artifacts" in tool.content
    assert (tmp_path / "build").is_dir(), "nothing ran"
